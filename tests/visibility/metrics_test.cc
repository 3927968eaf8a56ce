// Prometheus metrics: a MetricsServer on 127.0.0.1 answers GET /metrics with
// the text exposition of its source, read at scrape time; the endpoint and
// switch builders name every counter by the conventions.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "atp/metrics.h"
#include "gtest/gtest.h"
#include "switch_emulator/daemon/visibility.h"

namespace atp {
namespace {

// Scrape: GET /metrics from 127.0.0.1:port; the body ("" on failure).
std::string Scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!::write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

TEST(MetricsServerTest, ServesTheSourceAtEachScrape) {
  if (!MetricsAvailable()) GTEST_SKIP() << "built without prometheus-cpp (prometheus-cpp-dev)";
  std::atomic<uint64_t> frames{3};
  MetricsServerOptions options;
  options.labels = {{"job", "7"}};
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start(options, [&] {
        ParameterServerStats s;
        s.frames_received = frames.load();
        s.completed = 10;
        s.fp_completed = 4;
        s.switch_completed = 5;
        s.mismatches = 2;
        s.unsynchronized_gradients = 9;
        s.unsynchronized_declarations = 8;
        s.pulls_ignored = 6;
        return ParameterServerMetrics(s);
      });
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  std::string text = Scrape((*server)->port());
  EXPECT_NE(text.find("# TYPE atp_ps_frames_received_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_ps_frames_received_total{job=\"7\"} 3"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_ps_completed_total{job=\"7\",path=\"switch\"} 5"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_ps_completed_total{job=\"7\",path=\"ps\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_ps_completed_total{job=\"7\",path=\"float\"} 4"), std::string::npos) << text;
  // The control plane's counters too (every counter of the stats).
  EXPECT_NE(text.find("atp_ps_mismatches_total{job=\"7\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_ps_unsynchronized_gradients_total{job=\"7\"} 9"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_ps_unsynchronized_declarations_total{job=\"7\"} 8"), std::string::npos)
      << text;
  EXPECT_NE(text.find("atp_ps_pulls_total{job=\"7\",outcome=\"ignored\"} 6"), std::string::npos) << text;
  frames = 5;
  text = Scrape((*server)->port());
  EXPECT_NE(text.find("atp_ps_frames_received_total{job=\"7\"} 5"), std::string::npos) << text;
}

TEST(MetricsServerTest, RefusesABadPortNamingIt) {
  MetricsServerOptions options;
  options.port = 70000;
  const absl::Status s = MetricsServer::Start(options, [] { return std::vector<Metric>{}; }).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(".port"), std::string::npos) << s;
}

TEST(MetricsTextTest, WorkerCountersAndQueueGauges) {
  if (!MetricsAvailable()) GTEST_SKIP() << "built without prometheus-cpp (prometheus-cpp-dev)";
  WorkerStats s;
  s.fragments_sent = 42;
  s.retransmissions = 2;
  WorkerQueueStatistics q;
  q.queue = 1;
  q.window = 64;
  s.queues.push_back(q);
  const std::string text = MetricsText(WorkerMetrics(s), {{"job", "3"}});
  EXPECT_NE(text.find("atp_worker_fragments_sent_total{job=\"3\"} 42"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_worker_retransmissions_total{job=\"3\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_worker_queue_window_fragments{job=\"3\",queue=\"1\"} 64"), std::string::npos) << text;
}

TEST(MetricsTextTest, SwitchCountersByPortDirectionAndReason) {
  if (!MetricsAvailable()) GTEST_SKIP() << "built without prometheus-cpp (prometheus-cpp-dev)";
  switchd::SwitchdStats s;
  s.name = "tor0";
  switchd::PortStats p;
  p.name = "w0";
  p.counters.rx_frames = 11;
  p.counters.tx_frames = 12;
  p.counters.tx_dropped_backpressure = 1;
  s.ports.push_back(p);
  s.pipeline.aggregated = 9;
  s.pipeline.malformed_by_reason[static_cast<size_t>(wire::DecodeError::kJobZero)] = 2;
  s.aggregators_in_use = 5;
  switchd::JobStats job{.job = 3};
  job.counters.completed = 40;
  job.counters.collisions = 2;
  job.counters.forwarded_fp = 1;
  s.jobs.push_back(job);
  const std::string text = MetricsText(switchd::SwitchdMetrics(s));
  EXPECT_NE(text.find("atp_switch_frames_total{port=\"w0\",direction=\"rx\"} 11"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_frames_total{port=\"w0\",direction=\"tx\"} 12"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_tx_dropped_total{port=\"w0\",reason=\"backpressure\"} 1"), std::string::npos);
  EXPECT_NE(text.find("atp_switch_aggregated_total 9"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_malformed_total{reason=\"job_zero\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE atp_switch_aggregators_in_use gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_aggregators_in_use 5"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_job_completed_total{job=\"3\"} 40"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_job_to_ps_total{job=\"3\",reason=\"collision\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_job_to_ps_total{job=\"3\",reason=\"float\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("atp_switch_job_to_ps_total{job=\"3\",reason=\"resend\"} 0"), std::string::npos) << text;
}

TEST(AggregationLineTest, SaysWhatBecameOfTheGradientsSinceTheLastLine) {
  switchd::SwitchdStats before, now;
  now.name = "tor0";
  now.aggregators = 4096;
  before.pipeline.packets = 100;
  before.pipeline.aggregated = 80;
  now.pipeline.packets = 300;   // 200 more: 20 acks, 180 gradients
  now.pipeline.acks = 20;
  now.pipeline.aggregated = 80 + 171;
  now.pipeline.collisions = 9;
  const std::string line = switchd::AggregationLine(now, &before);
  EXPECT_NE(line.find("180 gradient frames: 171 aggregated here (95.0%)"), std::string::npos) << line;
  EXPECT_NE(line.find("9 collisions"), std::string::npos) << line;
}

TEST(AggregationLineTest, OneLinePerJobWithItsCompletionsAndReasons) {
  switchd::SwitchdStats before, now;
  now.name = "tor0";
  before.jobs = {{.job = 1}, {.job = 2}};
  before.jobs[0].counters.completed = 10;
  now.jobs = before.jobs;
  now.jobs[0].counters.completed = 10 + 90;
  now.jobs[0].counters.collisions = 6;
  now.jobs[0].counters.resend_to_ps = 4;
  now.jobs[1].counters.forwarded_fp = 7;
  now.jobs[0].counters.forwarded_control = 3;  // joins and kOpBegins: not among the frames sent on
  const std::string lines = switchd::AggregationLine(now, &before);
  EXPECT_NE(lines.find("\ntor0: job 1 aggregating? 90 completed here (90.0% of the 100 frames sent "
                       "on); sent on incomplete: 6 collisions, 4 resends, 0 flushed partials, "
                       "0 float, 0 not aggregated here; 3 control frames; 0 orphaned"),
            std::string::npos)
      << lines;
  EXPECT_NE(lines.find("\ntor0: job 2 aggregating? 0 completed here (0.0% of the 7 frames sent on)"
                       "; sent on incomplete: 0 collisions, 0 resends, 0 flushed partials, 7 float"),
            std::string::npos)
      << lines;
}

}  // namespace
}  // namespace atp
