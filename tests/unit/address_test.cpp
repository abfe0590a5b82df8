// control/base/address.h: every text form of an address, prefix, MAC and ADDRESS:PORT endpoint
// parsed in one place, refused when it is not exactly one of them, and formatted back.
#include <gtest/gtest.h>

#include "control/base/address.h"

using namespace svcgate::ctl;

namespace {

HostPort hp(const char* ip, uint16_t port) { return HostPort{*parse_ip(ip), port}; }

}  // namespace

TEST(Address, HostPortBothFamilies) {
    EXPECT_EQ(parse_host_port("127.0.0.1:9477"), hp("127.0.0.1", 9477));
    EXPECT_EQ(parse_host_port("[::1]:9477"), hp("::1", 9477));
    EXPECT_EQ(parse_host_port("[fd00:67::8]:1"), hp("fd00:67::8", 1));
    EXPECT_EQ(parse_host_port("10.0.0.1:65535"), hp("10.0.0.1", 65535));
}

TEST(Address, HostPortDefaultPortOnlyWhenGiven) {
    EXPECT_EQ(parse_host_port("10.0.0.1", 7946), hp("10.0.0.1", 7946));
    EXPECT_EQ(parse_host_port("fd00::1", 7946), hp("fd00::1", 7946));
    EXPECT_EQ(parse_host_port("[fd00::1]", 7946), hp("fd00::1", 7946));
    EXPECT_EQ(parse_host_port("[fd00::1]:80", 7946), hp("fd00::1", 80));
    EXPECT_FALSE(parse_host_port("10.0.0.1"));
    EXPECT_FALSE(parse_host_port("[::1]"));
}

TEST(Address, HostPortRefusesWhatIsNotOneForm) {
    for (const char* bad :
         {"", ":80", "[]:80", "[::1]:", "[::1]80", "[::1:80", "::1:9477", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:65536",
          "10.0.0.1:80x", "localhost:80", "10.0.0.256:80", "[10.0.0.1:80", "[::ffff:10.0.0.1]:80", " 10.0.0.1:80"})
        EXPECT_FALSE(parse_host_port(bad)) << bad;
    // An IPv6 address alone has several colons: it is no ADDRESS:PORT ("::1:9477" is an address).
    EXPECT_FALSE(parse_host_port("fd00::1:80"));
    EXPECT_EQ(parse_host_port("fd00::1:80", 5), hp("fd00::1:80", 5));
}

TEST(Address, HostPortFormatsAsItParses) {
    for (const char* s : {"127.0.0.1:9477", "[::1]:9477", "[fd00:96::a]:53", "192.168.67.8:30001"}) {
        auto e = parse_host_port(s);
        ASSERT_TRUE(e) << s;
        EXPECT_EQ(format_host_port(*e), s);
    }
}

TEST(Address, IpAndCidr) {
    EXPECT_EQ(format_ip(*parse_ip("fd00:0:0::0a")), "fd00::a");  // RFC 5952
    EXPECT_FALSE(parse_ip("::ffff:10.0.0.1"));                   // IPv4 is written as IPv4
    EXPECT_TRUE(parse_ip("10.0.0.1")->is_v4());
    EXPECT_EQ(format_cidr(*parse_cidr("10.1.2.3/8")), "10.0.0.0/8");
    EXPECT_EQ(format_cidr(*parse_cidr("10.1.2.3/8", true)), "10.1.2.3/8");
    EXPECT_EQ(format_cidr(*parse_cidr("fd00:96::7/108")), "fd00:96::/108");
    for (const char* bad : {"10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0", "/8", "10.0.0.0/8/8"})
        EXPECT_FALSE(parse_cidr(bad)) << bad;
}

TEST(Address, Mac) {
    const auto m = parse_mac("02:00:5E:00:00:0a");
    ASSERT_TRUE(m);
    EXPECT_EQ(format_mac(*m), "02:00:5e:00:00:0a");
    EXPECT_EQ(parse_mac("02-00-5e-00-00-0a"), m);
    for (const char* bad : {"", "02:00:5e:00:00", "02:00:5e:00:00:0a:", "02:00:5e:00:00:0g", "0200:5e:00:00:0a"})
        EXPECT_FALSE(parse_mac(bad)) << bad;
}
