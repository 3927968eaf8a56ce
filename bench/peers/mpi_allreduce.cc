// bench/peers/mpi_allreduce.cc: the Open MPI side of bench/e2e_allreduce.sh.
// MPI_Allreduce (float32 sum) of a tensor every rank fills so that the exact
// sum is known (small integers: float sums are exact), timed over ITERATIONS
// after one warm-up; every rank checks every result and rank 0 prints one
// JSON line. Uses only MPI's C API.
//
//   mpirun -n N mpi-allreduce FLOATS ITERATIONS
//
// Exit status: 0 every result right, 1 a wrong result, 2 bad arguments.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// Value: rank r's value at index i; small integers, so every float sum is exact.
float Value(int rank, long i) { return static_cast<float>((i + rank) % 7 - 3); }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long floats = argc > 1 ? std::atol(argv[1]) : 0;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 0;
  if (floats < 1 || floats > (1L << 30) || iterations < 1) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi-allreduce FLOATS(1..2^30) ITERATIONS(>=1)\n");
    MPI_Finalize();
    return 2;
  }
  const auto n = static_cast<size_t>(floats);
  std::vector<float> in(n), out(n), expected(n);
  for (size_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += Value(r, static_cast<long>(i));
    expected[i] = sum;
    in[i] = Value(rank, static_cast<long>(i));
  }
  double seconds = 0;
  int exact = 1;
  for (int it = 0; it <= iterations; ++it) {  // iteration 0 warms up, untimed
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double s = MPI_Wtime() - start;
    if (it > 0) seconds += s;
    exact = exact && std::memcmp(out.data(), expected.data(), n * sizeof(float)) == 0;
  }
  int all_exact = 0;
  MPI_Allreduce(&exact, &all_exact, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (rank == 0) {
    const double per_op = seconds / iterations;
    std::printf("{\"system\": \"openmpi\", \"ranks\": %d, \"floats\": %ld, \"iterations\": %d, "
                "\"seconds_per_op\": %.9f, \"bandwidth_MBps\": %.3f, \"exact\": %s}\n",
                size, floats, iterations, per_op, static_cast<double>(n) * 4 / per_op / 1e6,
                all_exact ? "true" : "false");
  }
  MPI_Finalize();
  return all_exact ? 0 : 1;
}
