// tests/transport/mlx5/signal_cadence_test.cc: which send requests ask for a
// completion.
#include "transport/mlx5/signal_cadence.h"

#include <vector>

#include "gtest/gtest.h"

namespace atp::transport::mlx5 {
namespace {

std::vector<int> Signalled(SignalCadence& cadence, int requests, BatchEnd last) {
  std::vector<int> out;
  for (int i = 0; i < requests; ++i) {
    if (cadence.Next(i + 1 == requests ? last : BatchEnd::kNo)) out.push_back(i);
  }
  return out;
}

TEST(SignalCadence, SignalsEveryNthRequest) {
  SignalCadence cadence(4);
  EXPECT_EQ(Signalled(cadence, 12, BatchEnd::kNo), (std::vector<int>{3, 7, 11}));
  EXPECT_EQ(cadence.unsignalled(), 0u);
}

TEST(SignalCadence, TheLastRequestOfAFlushIsSignalled) {
  SignalCadence cadence(4);
  EXPECT_EQ(Signalled(cadence, 6, BatchEnd::kYes), (std::vector<int>{3, 5}));
  EXPECT_EQ(cadence.unsignalled(), 0u) << "nothing is left waiting for a later signal";
}

TEST(SignalCadence, TheCountCarriesAcrossBatches) {
  SignalCadence cadence(4);
  EXPECT_EQ(Signalled(cadence, 3, BatchEnd::kNo), std::vector<int>{});
  EXPECT_EQ(cadence.unsignalled(), 3u);
  EXPECT_EQ(Signalled(cadence, 3, BatchEnd::kNo), std::vector<int>{0});
  EXPECT_EQ(cadence.unsignalled(), 2u);
}

TEST(SignalCadence, EveryOneSignalsEachRequest) {
  SignalCadence cadence(1);
  EXPECT_EQ(Signalled(cadence, 3, BatchEnd::kNo), (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace atp::transport::mlx5
