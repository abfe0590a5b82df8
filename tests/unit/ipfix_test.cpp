// The IPFIX encoder (control/export/ipfix.h): its templates and records as RFC 7011 lays them out
// (decoded here independently: set by set, field by field from the template), the translation
// each NAT event carries, both families, the messages' size bound and sequence numbers.
#include <arpa/inet.h>

#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "control/base/address.h"
#include "control/export/ipfix.h"

using namespace svcgate;
using namespace svcgate::ctl;

namespace {

uint16_t u16(const std::string& s, size_t at) {
    return static_cast<uint16_t>(static_cast<uint8_t>(s[at]) << 8 | static_cast<uint8_t>(s[at + 1]));
}
uint32_t u32(const std::string& s, size_t at) { return uint32_t{u16(s, at)} << 16 | u16(s, at + 2); }
uint64_t u64(const std::string& s, size_t at) { return uint64_t{u32(s, at)} << 32 | u32(s, at + 4); }

using Template = std::vector<std::pair<uint16_t, uint16_t>>;  // (IE, length)

// Every template of a message, by id; checks the header and the sets' lengths on the way.
std::map<uint16_t, Template> templates_of(const std::string& m) {
    std::map<uint16_t, Template> out;
    EXPECT_EQ(u16(m, 0), 10);
    EXPECT_EQ(u16(m, 2), m.size());
    for (size_t at = 16; at < m.size();) {
        const uint16_t id = u16(m, at), len = u16(m, at + 2);
        EXPECT_EQ(id, 2);
        for (size_t r = at + 4; r < at + len;) {
            const uint16_t tid = u16(m, r), n = u16(m, r + 2);
            r += 4;
            for (uint16_t i = 0; i < n; ++i, r += 4) {
                const uint16_t ie = u16(m, r), len = u16(m, r + 2);
                out[tid].emplace_back(ie, len);
                if (ie & 0x8000) {  // an enterprise's: only RFC 5103's reverse elements, kept as 0x8000 | IE
                    EXPECT_EQ(u32(m, r + 4), 29305u);
                    r += 4;
                }
            }
        }
        at += len;
    }
    return out;
}

// Every data record of a message as IE → its bytes, with its template id under IE 0.
std::vector<std::map<uint16_t, std::string>> records_of(const std::string& m, const std::map<uint16_t, Template>& t) {
    std::vector<std::map<uint16_t, std::string>> out;
    EXPECT_EQ(u16(m, 2), m.size());
    for (size_t at = 16; at < m.size();) {
        const uint16_t sid = u16(m, at), len = u16(m, at + 2);
        EXPECT_TRUE(t.count(sid)) << sid;
        for (size_t r = at + 4; r < at + len;) {
            std::map<uint16_t, std::string> rec;
            rec[0] = std::to_string(sid);
            for (auto [ie, l] : t.at(sid)) {
                size_t n = l;
                if (l == 65535) n = static_cast<uint8_t>(m[r++]);
                rec[ie] = m.substr(r, n);
                r += n;
            }
            out.push_back(rec);
        }
        at += len;
    }
    return out;
}

std::string ip4(const std::string& b) {
    return format_ip(dp::IpAddr::of(dp::Ip4{*reinterpret_cast<const uint32_t*>(b.data())}));
}
std::string ip6(const std::string& b) {
    dp::Ip6 a;
    std::memcpy(a.b, b.data(), 16);
    return format_ip(dp::IpAddr::of(a));
}
uint16_t port(const std::string& b) { return u16(b, 0); }

dp::NatEvent event4(dp::NatEventType t, uint16_t client_port) {
    dp::NatEvent e;
    e.type = t;
    e.reason = t == dp::NatEventType::end ? dp::FlowEnd::end_detected : dp::FlowEnd::none;
    e.k4[0] =
        dp::FlowKey{*parse_ip4("192.168.67.100"), *parse_ip4("192.168.67.8"), htons(client_port), htons(30001), 6};
    e.k4[1] = dp::FlowKey{*parse_ip4("10.244.2.4"), *parse_ip4("10.192.0.2"), htons(80), htons(1024), 6};
    return e;
}

TEST(Ipfix, TemplatesNameTheNatElementsOfEachFamilyAndEvent) {
    IpfixEncoder enc(7);
    const std::string m = enc.templates(1000);
    EXPECT_EQ(u32(m, 4), 1000u);
    EXPECT_EQ(u32(m, 12), 7u);
    const auto t = templates_of(m);
    ASSERT_EQ(t.size(), 4u);
    const Template create4{{8, 4},   {12, 4},  {7, 2},   {11, 2},  {4, 1},   {225, 4},   {226, 4},
                           {227, 2}, {228, 2}, {230, 1}, {323, 8}, {152, 8}, {96, 65535}};
    EXPECT_EQ(t.at(256), create4);
    EXPECT_EQ(t.at(257)[11], (std::pair<uint16_t, uint16_t>{153, 8}));
    EXPECT_EQ(t.at(257)[12], (std::pair<uint16_t, uint16_t>{136, 1}));
    // packetDeltaCount, octetDeltaCount, and their RFC 5103 reverses (the endpoint's answer).
    const Template counts{{2, 8}, {1, 8}, {0x8002, 8}, {0x8001, 8}};
    EXPECT_EQ(Template(t.at(257).begin() + 13, t.at(257).begin() + 17), counts);
    EXPECT_EQ(Template(t.at(259).begin() + 13, t.at(259).begin() + 17), counts);
    EXPECT_EQ(t.at(256).size() + 5, t.at(257).size());  // flowEnd for flowStart; reason and counts
    EXPECT_EQ(t.at(258)[0], (std::pair<uint16_t, uint16_t>{27, 16}));
    EXPECT_EQ(t.at(258)[5], (std::pair<uint16_t, uint16_t>{281, 16}));
    EXPECT_EQ(t.at(259)[6], (std::pair<uint16_t, uint16_t>{282, 16}));
}

TEST(Ipfix, ARecordCarriesBothTuplesTheEventTheTimeAndTheService) {
    IpfixEncoder enc(1);
    const auto t = templates_of(enc.templates(0));
    enc.add(event4(dp::NatEventType::create, 40000), 1'700'000'000'123, "default/test-svc:http", 1'700'000'000);
    dp::NatEvent end = event4(dp::NatEventType::end, 40000);
    end.packets[0] = 7, end.packets[1] = 5, end.octets[0] = 612, end.octets[1] = 4'321'000'000;
    enc.add(end, 1'700'000'001'456, "default/test-svc:http", 1'700'000'001);
    const auto msgs = enc.take(true);
    ASSERT_EQ(msgs.size(), 1u);
    EXPECT_EQ(msgs[0].records, 2u);
    const auto recs = records_of(msgs[0].bytes, t);
    ASSERT_EQ(recs.size(), 2u);
    const auto& c = recs[0];
    EXPECT_EQ(c.at(0), "256");
    EXPECT_EQ(ip4(c.at(8)), "192.168.67.100");
    EXPECT_EQ(port(c.at(7)), 40000);
    EXPECT_EQ(ip4(c.at(12)), "192.168.67.8");
    EXPECT_EQ(port(c.at(11)), 30001);
    EXPECT_EQ(static_cast<uint8_t>(c.at(4)[0]), 6);
    EXPECT_EQ(ip4(c.at(225)), "10.192.0.2");  // the masquerade address and port
    EXPECT_EQ(port(c.at(227)), 1024);
    EXPECT_EQ(ip4(c.at(226)), "10.244.2.4");  // the endpoint
    EXPECT_EQ(port(c.at(228)), 80);
    EXPECT_EQ(static_cast<uint8_t>(c.at(230)[0]), 4);  // NAT44 session create
    EXPECT_EQ(u64(c.at(152), 0), 1'700'000'000'123u);
    EXPECT_EQ(u64(c.at(323), 0), 1'700'000'000'123u);
    EXPECT_EQ(c.at(96), "default/test-svc:http");
    const auto& d = recs[1];
    EXPECT_EQ(d.at(0), "257");
    EXPECT_EQ(static_cast<uint8_t>(d.at(230)[0]), 5);  // NAT44 session delete
    EXPECT_EQ(u64(d.at(153), 0), 1'700'000'001'456u);
    EXPECT_EQ(static_cast<uint8_t>(d.at(136)[0]), 3);  // end of flow detected
    EXPECT_EQ(u64(d.at(2), 0), 7u);                    // client → endpoint
    EXPECT_EQ(u64(d.at(1), 0), 612u);
    EXPECT_EQ(u64(d.at(0x8002), 0), 5u);               // and back
    EXPECT_EQ(u64(d.at(0x8001), 0), 4'321'000'000u);   // past 32 bits
    EXPECT_EQ(d.at(96), "default/test-svc:http");      // the string after the counts
    EXPECT_FALSE(c.count(2));                          // a creation carries none
    EXPECT_EQ(u32(msgs[0].bytes, 4), 1'700'000'001u);  // export time
    EXPECT_EQ(u32(msgs[0].bytes, 8), 0u);              // sequence: no record before
}

TEST(Ipfix, IPv6RecordsUseTheIPv6Elements) {
    IpfixEncoder enc(1);
    const auto t = templates_of(enc.templates(0));
    dp::NatEvent e;
    e.v6 = 1;
    e.type = dp::NatEventType::create;
    e.k6[0] = dp::FlowKey6{*parse_ip6("fd00:67::100"), *parse_ip6("fd00:67::8"), htons(40001), htons(30001), 17};
    e.k6[1] = dp::FlowKey6{*parse_ip6("fd00:244:2::4"), *parse_ip6("fd00:67::100"), htons(53), htons(40001), 17};
    enc.add(e, 1, "kube-system/kube-dns:dns", 0);
    const auto recs = records_of(enc.take(true)[0].bytes, t);
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].at(0), "258");
    EXPECT_EQ(ip6(recs[0].at(27)), "fd00:67::100");
    EXPECT_EQ(ip6(recs[0].at(28)), "fd00:67::8");
    EXPECT_EQ(ip6(recs[0].at(281)), "fd00:67::100");  // the client's address kept (client_ip preserve)
    EXPECT_EQ(ip6(recs[0].at(282)), "fd00:244:2::4");
    EXPECT_EQ(port(recs[0].at(227)), 40001);
    EXPECT_EQ(static_cast<uint8_t>(recs[0].at(230)[0]), 1);
}

TEST(Ipfix, MessagesStayUnderTheBoundAndNumberTheRecordsBeforeThem) {
    IpfixEncoder enc(1);
    const auto t = templates_of(enc.templates(0));
    for (int i = 0; i < 500; ++i)
        enc.add(event4(i % 3 ? dp::NatEventType::create : dp::NatEventType::end, static_cast<uint16_t>(40000 + i)), i,
                "default/test-svc:http", 0);
    const auto msgs = enc.take(true);
    ASSERT_GT(msgs.size(), 5u);
    uint32_t seq = 0;
    size_t total = 0;
    for (const auto& m : msgs) {
        EXPECT_LE(m.bytes.size(), IpfixEncoder::kMaxMessage);
        EXPECT_EQ(u32(m.bytes, 8), seq);
        const auto recs = records_of(m.bytes, t);
        EXPECT_EQ(recs.size(), m.records);
        seq += static_cast<uint32_t>(m.records);
        total += recs.size();
    }
    EXPECT_EQ(total, 500u);
    EXPECT_TRUE(enc.take(true).empty());
}

}  // namespace
