// bench/peers/gloo_allreduce.cc: the gloo side of bench/e2e_allreduce.sh.
// One rank of a float32 sum allreduce with gloo's ring algorithm over its
// TCP transport, ranks meeting through a file store. Each rank fills its
// tensor so that the exact sum is known (small integers: float sums are
// exact), checks every result, and rank 0 prints one JSON line.
//
//   gloo-allreduce --rank=R --size=N --floats=F --iterations=I --store=DIR [--host=127.0.0.1]
//
// Exit status: 0 every result right, 1 a wrong result, 2 bad arguments.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gloo/allreduce_ring.h"
#include "gloo/barrier_all_to_all.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/transport/tcp/device.h"

namespace {

struct Args {
  int rank = -1;
  int size = 2;
  long floats = 1 << 20;
  int iterations = 5;
  std::string store;
  std::string host = "127.0.0.1";
};

bool Parse(int argc, char** argv, Args& args) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("rank")) {
      args.rank = std::atoi(v);
    } else if (const char* v = value("size")) {
      args.size = std::atoi(v);
    } else if (const char* v = value("floats")) {
      args.floats = std::atol(v);
    } else if (const char* v = value("iterations")) {
      args.iterations = std::atoi(v);
    } else if (const char* v = value("store")) {
      args.store = v;
    } else if (const char* v = value("host")) {
      args.host = v;
    } else {
      std::fprintf(stderr, "gloo-allreduce: unknown argument '%s'\n", argv[i]);
      return false;
    }
  }
  if (args.size < 1 || args.rank < 0 || args.rank >= args.size) {
    std::fprintf(stderr, "gloo-allreduce: --rank must be in 0..--size-1 (--size >= 1)\n");
    return false;
  }
  if (args.floats < 1 || args.floats > (1L << 30) || args.iterations < 1 || args.store.empty()) {
    std::fprintf(stderr, "gloo-allreduce: --floats in 1..2^30, --iterations >= 1, --store=DIR\n");
    return false;
  }
  return true;
}

// Value: rank r's value at index i; small integers, so every float sum is exact.
float Value(int rank, long i) { return static_cast<float>((i + rank) % 7 - 3); }

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, args)) return 2;
  gloo::transport::tcp::attr attr(args.host.c_str());
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(args.store);
  auto context = std::make_shared<gloo::rendezvous::Context>(args.rank, args.size);
  context->connectFullMesh(store, device);

  const auto n = static_cast<size_t>(args.floats);
  std::vector<float> data(n);
  std::vector<float> expected(n);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int r = 0; r < args.size; ++r) sum += Value(r, static_cast<long>(i));
    expected[i] = sum;
  }
  std::vector<float*> ptrs{data.data()};
  gloo::AllreduceRing<float> allreduce(context, ptrs, static_cast<int>(n));
  gloo::BarrierAllToAll barrier(context);
  double seconds = 0;
  bool exact = true;
  for (int it = 0; it <= args.iterations; ++it) {  // iteration 0 warms up, untimed
    for (size_t i = 0; i < n; ++i) data[i] = Value(args.rank, static_cast<long>(i));
    // Every rank ready before the clock starts, as the MPI peer and
    // atp-throughput's workers (--start_barrier) do.
    barrier.run();
    const auto start = std::chrono::steady_clock::now();
    allreduce.run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (it > 0) seconds += s;
    exact = exact && std::memcmp(data.data(), expected.data(), n * sizeof(float)) == 0;
  }
  // No rank closes its connections while another may still read them: a
  // rank that left first made a slower one's gloo thread throw "Connection
  // closed by peer" (an abort that failed the e2e runner once in 4 ranks).
  barrier.run();
  if (args.rank == 0) {
    const double per_op = seconds / args.iterations;
    std::printf("{\"system\": \"gloo\", \"ranks\": %d, \"floats\": %ld, \"iterations\": %d, "
                "\"seconds_per_op\": %.9f, \"bandwidth_MBps\": %.3f, \"exact\": %s}\n",
                args.size, args.floats, args.iterations, per_op,
                static_cast<double>(n) * 4 / per_op / 1e6, exact ? "true" : "false");
  }
  return exact ? 0 : 1;
}
