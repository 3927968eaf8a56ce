#include "switch_emulator/host/ingress_admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace atp::switchd {

absl::Status IngressAdmission::Restrict(uint8_t job, std::span<const uint32_t> parameter_ports,
                                        std::span<const uint32_t> gradient_ports) {
  if (job == 0) return absl::InvalidArgumentError("IngressAdmission: job 0 is never on the wire");
  for (const Restriction& r : restrictions_) {
    if (r.job == job) {
      return absl::InvalidArgumentError(absl::StrCat("IngressAdmission: job ", job,
                                                     " is restricted twice"));
    }
  }
  Restriction r{job, {parameter_ports.begin(), parameter_ports.end()},
                {gradient_ports.begin(), gradient_ports.end()}};
  for (uint32_t port : r.parameter_ports) port_limit_ = std::max(port_limit_, port + 1);
  for (uint32_t port : r.gradient_ports) port_limit_ = std::max(port_limit_, port + 1);
  Set(unknown_port_.parameters, job, false);
  Set(unknown_port_.gradients, job, false);
  Apply(r);
  restrictions_.push_back(std::move(r));
  ApplyPortKinds();  // a job's ports never undo a port's own restriction
  active_ = true;
  return absl::OkStatus();
}

void IngressAdmission::RestrictPort(uint32_t port, bool parameters, bool gradients) {
  port_kinds_.push_back(PortKinds{port, parameters, gradients});
  port_limit_ = std::max(port_limit_, port + 1);
  ApplyPortKinds();
  active_ = true;
}

void IngressAdmission::ApplyPortKinds() {
  for (const PortKinds& k : port_kinds_) {
    if (k.port >= ports_.size()) continue;
    if (!k.parameters) ports_[k.port].parameters = JobSet{};
    if (!k.gradients) ports_[k.port].gradients = JobSet{};
  }
}

void IngressAdmission::Apply(const Restriction& r) {
  for (PortJobs& p : ports_) {
    Set(p.parameters, r.job, false);
    Set(p.gradients, r.job, false);
  }
  for (uint32_t port : r.parameter_ports) {
    if (port < ports_.size()) Set(ports_[port].parameters, r.job, true);
  }
  for (uint32_t port : r.gradient_ports) {
    if (port < ports_.size()) Set(ports_[port].gradients, r.job, true);
  }
}

void IngressAdmission::AddPorts(uint32_t count) {
  if (count <= ports_.size()) return;
  ports_.resize(count, unknown_port_);
  for (const Restriction& r : restrictions_) Apply(r);
  ApplyPortKinds();
}

const char* IngressRefusalName(IngressRefusal refusal) {
  switch (refusal) {
    case IngressRefusal::kAdmitted: return "admitted";
    case IngressRefusal::kParameterPort: return "parameter_port";
    case IngressRefusal::kGradientPort: return "gradient_port";
  }
  return "?";
}

}  // namespace atp::switchd
