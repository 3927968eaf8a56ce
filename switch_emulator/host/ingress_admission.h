// switch_emulator/host/ingress_admission.h: which ports of a switch may
// bring in a job's frames (docs/security.md). Per job: the ports its
// parameter packets may arrive on (those toward its PS) and the ports its
// gradients may arrive on (those toward its workers or the lower-level
// switches). A frame of that job on another port is refused before the
// pipeline sees it, so a forged parameter packet never clears an aggregator
// nor reaches the multicast table, and a forged gradient never touches one.
//
//   IngressAdmission admission;
//   ATP_RETURN_IF_ERROR(admission.Restrict(/*job=*/1, /*parameter_ports=*/{2},
//                                          /*gradient_ports=*/{0, 1}));
//   admission.AddPorts(3);                        // as many as the host has
//   switch (admission.Check(port, frame.bytes(), base_port)) { ... }
//
// "Parameter packet" is the `ack` bit: every frame a PS sends (parameter
// packets, overflow requests, control frames with ack) counts as one, and
// every frame a worker sends (gradients, resends, fp fragments, control
// frames without ack) as a gradient. Jobs never restricted, and frames that
// are not ATP frames for base_port..base_port+15, are admitted on any port
// (the pipeline then forwards or refuses them as before).
//
// A port may also be restricted for every job (RestrictPort, atp-switchd's
// port key `admits`): no parameter packet, or no gradient, of any job, known
// here or not, arrives on it. That is what a switch that only forwards (no
// job configured: the testbed's core) can check: parameter packets only on
// the ports toward the PSs, gradients only on those toward the workers.
//
// Cost: per frame, when at least one job or port is restricted, a few loads of
// bytes the pipeline reads next anyway and one bit test in the port's
// 32-byte table (no hashing, no branch on the job).
#ifndef ATP_SWITCH_EMULATOR_HOST_INGRESS_ADMISSION_H_
#define ATP_SWITCH_EMULATOR_HOST_INGRESS_ADMISSION_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "atp/wire.h"

namespace atp::switchd {

// IngressRefusal: why a frame was refused at its ingress port.
enum class IngressRefusal : uint8_t {
  kAdmitted = 0,
  kParameterPort,  // a parameter packet (ack) on a port not toward its job's PS
  kGradientPort,   // a gradient (no ack) on a port not toward its job's workers
};

class IngressAdmission {
 public:
  // JobSet: one bit per job id (256 bits, 32 bytes).
  using JobSet = std::array<uint64_t, 4>;

  // Restrict: frames of `job` are admitted only as listed: parameter packets
  // on `parameter_ports`, gradients on `gradient_ports` (port indices). A
  // list may be empty (no port may bring that kind in). Control path;
  // InvalidArgument for job 0 or a job restricted twice.
  absl::Status Restrict(uint8_t job, std::span<const uint32_t> parameter_ports,
                        std::span<const uint32_t> gradient_ports);

  // RestrictPort: port `port` admits parameter packets (of any job) only if
  // `parameters`, gradients only if `gradients`, on top of any job's
  // restriction. Control path.
  void RestrictPort(uint32_t port, bool parameters, bool gradients);

  // AddPorts: the host has `count` ports from now on (ports added later
  // admit nothing of a restricted job unless a Restrict listed them).
  void AddPorts(uint32_t count);

  // active: some job is restricted (otherwise Check admits everything).
  bool active() const { return active_; }
  // port_limit: one more than the largest port index a Restrict listed (0 if none).
  uint32_t port_limit() const { return port_limit_; }

  // Check: the verdict for `frame` arriving on `port`. The datapath.
  IngressRefusal Check(uint32_t port, std::span<const uint8_t> frame, uint16_t base_port) const {
    if (frame.size() != wire::kFrameBytes) return IngressRefusal::kAdmitted;
    const uint8_t* f = frame.data();
    // IPv4 without options carrying UDP to an ATP port (the frame layout of
    // ATP-SPEC 2); anything else is not an ATP frame and not ours to judge.
    if (f[12] != 0x08 || f[13] != 0x00 || f[wire::kIpv4Offset] != 0x45 ||
        f[wire::kIpv4Offset + 9] != wire::kIpProtocolUdp) {
      return IngressRefusal::kAdmitted;
    }
    const uint16_t udp_port = static_cast<uint16_t>((f[wire::kUdpOffset + 2] << 8) |
                                                    f[wire::kUdpOffset + 3]);
    if (static_cast<uint16_t>(udp_port - base_port) >= wire::kMaxQueues) {
      return IngressRefusal::kAdmitted;
    }
    const uint8_t job = f[wire::kAtpOffset];
    const bool ack = (f[wire::kAtpOffset + 13] & kAckFlag) != 0;
    // A port the table does not know (never added) admits only unrestricted jobs.
    const PortJobs& p = port < ports_.size() ? ports_[port] : unknown_port_;
    if (ack) {
      return Allowed(p.parameters, job) ? IngressRefusal::kAdmitted : IngressRefusal::kParameterPort;
    }
    return Allowed(p.gradients, job) ? IngressRefusal::kAdmitted : IngressRefusal::kGradientPort;
  }

 private:
  // The ack flag in the low byte of the ATP header's fan/flags word (byte 13).
  static constexpr uint8_t kAckFlag = 0x02;

  // PortJobs: the jobs whose parameter packets / gradients one port admits
  // (a bit set for every job never restricted).
  struct PortJobs {
    JobSet parameters;
    JobSet gradients;
  };

  static bool Allowed(const JobSet& set, uint8_t job) {
    return ((set[job >> 6] >> (job & 63)) & 1) != 0;
  }
  static void Set(JobSet& set, uint8_t job, bool on) {
    const uint64_t bit = uint64_t{1} << (job & 63);
    set[job >> 6] = on ? (set[job >> 6] | bit) : (set[job >> 6] & ~bit);
  }

  bool active_ = false;
  uint32_t port_limit_ = 0;
  static constexpr JobSet kAllJobs = {~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}};
  // unknown_port_: both sets = the jobs never restricted.
  PortJobs unknown_port_{kAllJobs, kAllJobs};
  std::vector<PortJobs> ports_;
  // restrictions_: what Restrict was told, so ports added later get their bits.
  struct Restriction {
    uint8_t job = 0;
    std::vector<uint32_t> parameter_ports;
    std::vector<uint32_t> gradient_ports;
  };
  std::vector<Restriction> restrictions_;
  // PortKinds: what RestrictPort was told about one port.
  struct PortKinds {
    uint32_t port = 0;
    bool parameters = true;
    bool gradients = true;
  };
  std::vector<PortKinds> port_kinds_;
  void Apply(const Restriction& r);
  void ApplyPortKinds();
};

// IngressRefusalName: "parameter_port" / "gradient_port" (stats and metrics).
const char* IngressRefusalName(IngressRefusal refusal);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_HOST_INGRESS_ADMISSION_H_
