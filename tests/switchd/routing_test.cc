// atp-switchd's forwarding tables: longest prefix wins, the default route
// catches the rest, multicast groups map to their ports.
#include "switch_emulator/host/routing.h"

#include <vector>

#include "gtest/gtest.h"

namespace atp::switchd {
namespace {

uint32_t Ip(const char* text) { return wire::Ipv4Address::Parse(text)->value; }
wire::Ipv4Address Addr(const char* text) { return *wire::Ipv4Address::Parse(text); }

TEST(RouteTableTest, EmptyTableRoutesNothing) {
  RouteTable routes;
  EXPECT_EQ(routes.Lookup(Ip("10.1.0.1")), std::nullopt);
  EXPECT_EQ(routes.port_limit(), 0u);
}

TEST(RouteTableTest, LongestPrefixWins) {
  RouteTable routes;
  ASSERT_TRUE(routes.Add(Addr("0.0.0.0"), 0, 9).ok());
  ASSERT_TRUE(routes.Add(Addr("10.0.0.0"), 8, 1).ok());
  ASSERT_TRUE(routes.Add(Addr("10.1.0.0"), 24, 2).ok());
  ASSERT_TRUE(routes.Add(Addr("10.1.0.7"), 32, 3).ok());
  ASSERT_TRUE(routes.Add(Addr("10.1.0.128"), 25, 4).ok());
  EXPECT_EQ(routes.Lookup(Ip("10.1.0.7")), 3u);
  EXPECT_EQ(routes.Lookup(Ip("10.1.0.8")), 2u);
  EXPECT_EQ(routes.Lookup(Ip("10.1.0.200")), 4u);
  EXPECT_EQ(routes.Lookup(Ip("10.1.1.1")), 1u);
  EXPECT_EQ(routes.Lookup(Ip("10.255.255.255")), 1u);
  EXPECT_EQ(routes.Lookup(Ip("11.0.0.0")), 9u);
  EXPECT_EQ(routes.Lookup(Ip("239.1.0.1")), 9u);
  EXPECT_EQ(routes.size(), 5u);
  EXPECT_EQ(routes.port_limit(), 10u);
}

TEST(RouteTableTest, OrderOfInsertionDoesNotMatter) {
  RouteTable a, b;
  const std::vector<std::tuple<const char*, uint32_t, uint32_t>> entries = {
      {"10.1.0.0", 24, 2}, {"0.0.0.0", 0, 9}, {"10.1.0.0", 16, 5}};
  for (auto [p, l, port] : entries) ASSERT_TRUE(a.Add(Addr(p), l, port).ok());
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    ASSERT_TRUE(b.Add(Addr(std::get<0>(*it)), std::get<1>(*it), std::get<2>(*it)).ok());
  }
  for (const char* ip : {"10.1.0.3", "10.1.9.3", "10.2.0.0", "1.2.3.4"}) {
    EXPECT_EQ(a.Lookup(Ip(ip)), b.Lookup(Ip(ip))) << ip;
  }
  EXPECT_EQ(a.Lookup(Ip("10.1.9.3")), 5u);
}

TEST(RouteTableTest, RefusesBadRoutes) {
  RouteTable routes;
  EXPECT_EQ(routes.Add(Addr("10.1.0.0"), 33, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(routes.Add(Addr("10.1.0.1"), 24, 0).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(routes.Add(Addr("10.1.0.0"), 24, 0).ok());
  EXPECT_EQ(routes.Add(Addr("10.1.0.0"), 24, 1).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(routes.Lookup(Ip("10.1.0.1")), 0u) << "the refused route changed nothing";
  // kNoPort is LookupPort's "no route", never a port.
  EXPECT_EQ(routes.Add(Addr("10.2.0.0"), 16, RouteTable::kNoPort).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(routes.Set(Addr("10.1.0.0"), 24, RouteTable::kNoPort).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(routes.LookupPort(Ip("10.1.0.1")), 0u);
  EXPECT_EQ(routes.LookupPort(Ip("10.2.0.1")), RouteTable::kNoPort);
  EXPECT_EQ(routes.port_limit(), 1u);
}

TEST(MulticastTableTest, GroupsMapToTheirPorts) {
  MulticastTable groups;
  ASSERT_TRUE(groups.Add(Addr("239.1.0.1"), {0, 2, 3}).ok());
  ASSERT_TRUE(groups.Add(Addr("239.1.0.2"), {1}).ok());
  EXPECT_EQ(std::vector<uint32_t>(groups.Ports(Ip("239.1.0.1")).begin(),
                                  groups.Ports(Ip("239.1.0.1")).end()),
            (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(groups.Ports(Ip("239.1.0.2")).size(), 1u);
  EXPECT_TRUE(groups.Ports(Ip("239.1.0.3")).empty());
  EXPECT_EQ(groups.port_limit(), 4u);
}

TEST(RouteTableTest, SetReplacesARouteOrAddsIt) {
  RouteTable routes;
  ASSERT_TRUE(routes.Set(Addr("10.1.0.7"), 32, 3).ok());
  ASSERT_TRUE(routes.Set(Addr("10.1.0.7"), 32, 5).ok());
  ASSERT_TRUE(routes.Set(Addr("0.0.0.0"), 0, 1).ok());
  EXPECT_EQ(routes.Lookup(Ip("10.1.0.7")), 5u);
  EXPECT_EQ(routes.Lookup(Ip("10.9.9.9")), 1u);
  EXPECT_EQ(routes.size(), 2u);
  EXPECT_EQ(routes.port_limit(), 6u);
  EXPECT_FALSE(routes.Set(Addr("10.1.0.7"), 24, 1).ok());  // bits beyond the length
}

TEST(RouteCacheTest, AnswersAsTheTableDoesAndFollowsItsChanges) {
  RouteTable routes;
  RouteCache cache;
  EXPECT_EQ(cache.LookupPort(routes, Ip("10.1.0.7")), RouteTable::kNoPort);
  const uint64_t empty = routes.version();
  ASSERT_TRUE(routes.Add(Addr("0.0.0.0"), 0, 9).ok());
  EXPECT_NE(routes.version(), empty);
  EXPECT_EQ(cache.LookupPort(routes, Ip("10.1.0.7")), 9u) << "a cached miss is dropped";
  ASSERT_TRUE(routes.Set(Addr("10.1.0.7"), 32, 3).ok());
  EXPECT_EQ(cache.LookupPort(routes, Ip("10.1.0.7")), 3u) << "a new, longer route";
  ASSERT_TRUE(routes.Set(Addr("10.1.0.7"), 32, 5).ok());
  EXPECT_EQ(cache.LookupPort(routes, Ip("10.1.0.7")), 5u) << "a changed route";
  const uint64_t settled = routes.version();
  EXPECT_FALSE(routes.Add(Addr("10.1.0.7"), 32, 6).ok());
  EXPECT_EQ(routes.version(), settled) << "a refused route changes nothing";
  // Many addresses, some sharing a cache entry: every answer is the table's.
  for (uint32_t host = 0; host < 1000; ++host) {
    const uint32_t ip = Ip("10.1.0.0") + host * 7919;
    EXPECT_EQ(cache.LookupPort(routes, ip), routes.LookupPort(ip)) << host;
    EXPECT_EQ(cache.LookupPort(routes, ip), routes.LookupPort(ip)) << host << ", cached";
  }
}

TEST(MulticastTableTest, AddMemberBuildsAGroupPortByPortInOrder) {
  MulticastTable groups;
  ASSERT_TRUE(groups.AddMember(Addr("239.0.0.1"), 4).ok());
  ASSERT_TRUE(groups.AddMember(Addr("239.0.0.1"), 2).ok());
  ASSERT_TRUE(groups.AddMember(Addr("239.0.0.1"), 4).ok());  // listed already
  EXPECT_EQ(std::vector<uint32_t>(groups.Ports(Ip("239.0.0.1")).begin(),
                                  groups.Ports(Ip("239.0.0.1")).end()),
            (std::vector<uint32_t>{4, 2}));
  EXPECT_EQ(groups.port_limit(), 5u);
  EXPECT_FALSE(groups.AddMember(Addr("10.0.0.1"), 1).ok());
}

TEST(MulticastTableTest, RefusesBadGroups) {
  MulticastTable groups;
  EXPECT_EQ(groups.Add(Addr("10.1.0.1"), {0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(groups.Add(Addr("239.1.0.1"), {}).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(groups.Add(Addr("239.1.0.1"), {0}).ok());
  EXPECT_EQ(groups.Add(Addr("239.1.0.1"), {1}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(IsMulticastAddress(Ip("224.0.0.1")));
  EXPECT_TRUE(IsMulticastAddress(Ip("239.255.255.255")));
  EXPECT_FALSE(IsMulticastAddress(Ip("240.0.0.1")));
  EXPECT_FALSE(IsMulticastAddress(Ip("223.255.255.255")));
}

}  // namespace
}  // namespace atp::switchd
