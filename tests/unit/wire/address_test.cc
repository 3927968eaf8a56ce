// MacAddress and Ipv4Address: text forms, and every way Parse refuses text.
#include <string>

#include "atp/wire.h"
#include "gtest/gtest.h"

namespace atp::wire {
namespace {

TEST(WireMacAddress, ParsesHexPairsInWireOrder) {
  auto mac = MacAddress::Parse("02:00:5E:0a:ff:10");
  ASSERT_TRUE(mac.ok()) << mac.status();
  const std::array<uint8_t, 6> want = {0x02, 0x00, 0x5E, 0x0A, 0xFF, 0x10};
  EXPECT_EQ(mac->bytes, want);
  EXPECT_EQ(mac->ToString(), "02:00:5e:0a:ff:10") << "prints lower case";
  EXPECT_FALSE(mac->IsMulticast());
  auto multicast = MacAddress::Parse("01:00:5e:00:02:ff");
  ASSERT_TRUE(multicast.ok());
  EXPECT_TRUE(multicast->IsMulticast());
}

TEST(WireMacAddress, ToStringRoundTrips) {
  MacAddress mac;
  mac.bytes = {0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x01};
  auto back = MacAddress::Parse(mac.ToString());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, mac);
}

TEST(WireMacAddress, RejectsMalformedText) {
  for (const char* text : {"", "02:00:00:00:00", "02:00:00:00:00:10:", "02-00-00-00-00-10",
                           "02:00:00:00:00:1g", "2:00:00:00:00:100", " 02:00:00:00:00:1",
                           "0200:00:00:00:10:", "02:00:00:00:00:10 "}) {
    auto mac = MacAddress::Parse(text);
    EXPECT_FALSE(mac.ok()) << '"' << text << '"';
    if (!mac.ok()) {
      EXPECT_EQ(mac.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

TEST(WireIpv4Address, ParsesDottedQuadToHostOrder) {
  auto ip = Ipv4Address::Parse("192.0.2.1");
  ASSERT_TRUE(ip.ok()) << ip.status();
  EXPECT_EQ(ip->value, 0xC0000201u);
  EXPECT_EQ(ip->ToString(), "192.0.2.1");
  auto zero = Ipv4Address::Parse("0.0.0.0");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->value, 0u);
  auto all = Ipv4Address::Parse("255.255.255.255");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->value, 0xFFFFFFFFu);
  EXPECT_EQ(all->ToString(), "255.255.255.255");
}

TEST(WireIpv4Address, RejectsMalformedText) {
  for (const char* text : {"", "1.2.3", "1.2.3.4.5", "256.0.0.1", "1.2.3.256", "01.2.3.4",
                           "1.2.3.00", "1..2.3", "1.2.3.", ".1.2.3", "a.b.c.d", "1234.1.1.1",
                           "1.2.3.4 ", " 1.2.3.4", "1.2.3.-4", "1,2,3,4"}) {
    auto ip = Ipv4Address::Parse(text);
    EXPECT_FALSE(ip.ok()) << '"' << text << '"';
    if (!ip.ok()) {
      EXPECT_EQ(ip.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace atp::wire
