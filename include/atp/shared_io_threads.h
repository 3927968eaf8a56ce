// atp/shared_io_threads.h: polling threads that the I/O loops of several
// Workers and ParameterServers of one process share, instead of a thread per
// loop (the default).
//
//   ATP_ASSIGN_OR_RETURN(std::shared_ptr<atp::SharedIoThreads> threads,
//                        atp::SharedIoThreads::Create(/*threads=*/2));
//   worker_options.shared_io_threads = threads;   // each of the process's workers
//   ps_options.shared_io_threads = threads;       // and its parameter servers
//
// Why: a loop's thread runs only briefly per wake-up; where a process's loops
// outnumber its cores (a whole job as threads of one process, as
// testbed::LocalCluster runs it), every frame that passes from one loop to
// another is a wake-up of another thread and a wait for a core. Loops on one
// thread hand frames over with no wake-up at all: the thread steps each loop
// in turn (bench/RESULTS.md "Shared I/O threads").
//
// Each loop goes to the thread that runs the fewest loops when its endpoint
// starts (ties: the lowest index), and stays there. The threads back off as
// `polling` says when none of their loops has work; the endpoints' own
// PollingOptions are then unused. Endpoints hold the group (a shared_ptr),
// so it lives as long as they do; destroy them from threads not in it.
#ifndef ATP_SHARED_IO_THREADS_H_
#define ATP_SHARED_IO_THREADS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "atp/options.h"

namespace atp {

class SharedIoThreads {
 public:
  // Create: `threads` threads (1..64), named "<name>-0", "<name>-1", ...
  // (what top and perf show; at most 15 characters are kept).
  static absl::StatusOr<std::shared_ptr<SharedIoThreads>> Create(
      uint32_t threads, const PollingOptions& polling = {}, std::string name = "atp-io");

  SharedIoThreads(const SharedIoThreads&) = delete;
  SharedIoThreads& operator=(const SharedIoThreads&) = delete;
  // Stops and joins the threads.
  ~SharedIoThreads();

  uint32_t size() const;

  // The runtime's view (lib/runtime/loop_threads.h): the threads themselves.
  struct Threads;
  Threads& threads() const { return *threads_; }

 private:
  explicit SharedIoThreads(std::unique_ptr<Threads> threads);

  std::unique_ptr<Threads> threads_;
};

}  // namespace atp

#endif  // ATP_SHARED_IO_THREADS_H_
