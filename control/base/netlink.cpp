#include "control/base/netlink.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace svcgate::ctl {

namespace {

// A request: header, family message, attributes, in one buffer.
struct Msg {
    alignas(NLMSG_ALIGNTO) char buf[512]{};
    nlmsghdr* h() { return reinterpret_cast<nlmsghdr*>(buf); }
    template <typename T>
    T* body() {
        return reinterpret_cast<T*>(NLMSG_DATA(h()));
    }
    void attr(uint16_t type, const void* data, size_t len) {
        auto* a = reinterpret_cast<rtattr*>(buf + NLMSG_ALIGN(h()->nlmsg_len));
        a->rta_type = type;
        a->rta_len = static_cast<uint16_t>(RTA_LENGTH(len));
        std::memcpy(RTA_DATA(a), data, len);
        h()->nlmsg_len = NLMSG_ALIGN(h()->nlmsg_len) + RTA_ALIGN(a->rta_len);
    }
    void u32(uint16_t type, uint32_t v) { attr(type, &v, sizeof v); }
};

const void* addr_bytes(const dp::IpAddr& a, size_t& len) {
    if (a.is_v4()) {
        len = 4;
        static thread_local uint32_t v;
        v = a.v4().be;
        return &v;
    }
    len = 16;
    return a.v6().b;
}

uint8_t family_of(const dp::IpAddr& a) { return a.is_v4() ? AF_INET : AF_INET6; }

}  // namespace

Netlink::Netlink() {
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd_ >= 0) {
        timeval tv{.tv_sec = 2, .tv_usec = 0};  // the kernel answers at once; never hang the control loop
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
}

Netlink::~Netlink() {
    if (fd_ >= 0) close(fd_);
}

int Netlink::request(void* m, std::string& err) {
    if (fd_ < 0) {
        err = fmt::format("no netlink socket: {}", std::strerror(errno));
        return EBADF;
    }
    auto* h = static_cast<nlmsghdr*>(m);
    h->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
    h->nlmsg_seq = ++seq_;
    sockaddr_nl kernel{.nl_family = AF_NETLINK};
    if (sendto(fd_, h, h->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
        const int e = errno;
        err = std::strerror(e);
        return e;
    }
    alignas(nlmsghdr) char buf[8192];
    for (;;) {
        ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n < 0) {
            const int e = errno;
            err = fmt::format("no answer from the kernel: {}", std::strerror(e));
            return e;
        }
        for (auto* r = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(r, static_cast<unsigned>(n)); r = NLMSG_NEXT(r, n)) {
            if (r->nlmsg_seq != seq_ || r->nlmsg_type != NLMSG_ERROR) continue;
            if (r->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) {
                err = "a truncated answer from the kernel";
                return EPROTO;
            }
            const int e = -static_cast<nlmsgerr*>(NLMSG_DATA(r))->error;
            if (e != 0) err = std::strerror(e);
            return e;
        }
    }
}

Status Netlink::request(void* m, const char* what) {
    std::string err;
    return request(m, err) == 0 ? Status() : Status::fail(fmt::format("{}: {}", what, err));
}

namespace {
void address_msg(Msg& m, uint16_t type, int ifindex, const dp::IpCidr& a) {
    m.h()->nlmsg_len = NLMSG_LENGTH(sizeof(ifaddrmsg));
    m.h()->nlmsg_type = type;
    auto* ifa = m.body<ifaddrmsg>();
    ifa->ifa_family = family_of(a.addr);
    ifa->ifa_prefixlen = a.len;
    ifa->ifa_index = static_cast<uint32_t>(ifindex);
    size_t len;
    const void* b = addr_bytes(a.addr, len);
    m.attr(IFA_LOCAL, b, len);
    m.attr(IFA_ADDRESS, b, len);
}
}  // namespace

Status Netlink::add_address(int ifindex, const dp::IpCidr& a) {
    Msg m;
    address_msg(m, RTM_NEWADDR, ifindex, a);
    m.h()->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
    // The dataplane owns the address on the wire: no duplicate address detection against itself.
    if (!a.addr.is_v4()) {
        m.body<ifaddrmsg>()->ifa_flags = IFA_F_NODAD;
        m.u32(IFA_FLAGS, IFA_F_NODAD);
    }
    return request(m.h(), "adding an address");
}

Status Netlink::del_address(int ifindex, const dp::IpCidr& a) {
    Msg m;
    address_msg(m, RTM_DELADDR, ifindex, a);
    std::string err;
    const int e = request(m.h(), err);
    return e == 0 || e == EADDRNOTAVAIL || e == ENODEV ? Status() : Status::fail("removing an address: " + err);
}

namespace {
void route_msg(Msg& m, uint16_t type, uint32_t table, const dp::IpCidr& prefix) {
    m.h()->nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
    m.h()->nlmsg_type = type;
    auto* rt = m.body<rtmsg>();
    rt->rtm_family = family_of(prefix.addr);
    rt->rtm_dst_len = prefix.len;
    rt->rtm_table = table < 256 ? static_cast<uint8_t>(table) : static_cast<uint8_t>(RT_TABLE_UNSPEC);
    rt->rtm_protocol = RTPROT_STATIC;
    rt->rtm_scope = RT_SCOPE_LINK;
    rt->rtm_type = RTN_UNICAST;
    m.u32(RTA_TABLE, table);
    size_t len;
    const void* b = addr_bytes(prefix.addr, len);
    m.attr(RTA_DST, b, len);
}
}  // namespace

Status Netlink::add_route(uint32_t table, const dp::IpCidr& prefix, int ifindex) {
    Msg m;
    route_msg(m, RTM_NEWROUTE, table, prefix);
    m.h()->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
    m.u32(RTA_OIF, static_cast<uint32_t>(ifindex));
    return request(m.h(), "adding a route");
}

Status Netlink::add_route_via(uint32_t table, const dp::IpCidr& prefix, const dp::IpAddr& via, int ifindex,
                              uint32_t metric) {
    Msg m;
    route_msg(m, RTM_NEWROUTE, table, prefix);
    m.h()->nlmsg_flags = NLM_F_CREATE | NLM_F_REPLACE;
    m.body<rtmsg>()->rtm_scope = RT_SCOPE_UNIVERSE;
    size_t len;
    const void* b = addr_bytes(via, len);
    m.attr(RTA_GATEWAY, b, len);
    m.u32(RTA_OIF, static_cast<uint32_t>(ifindex));
    m.u32(RTA_PRIORITY, metric);
    return request(m.h(), "adding a route");
}

Status Netlink::del_route_via(uint32_t table, const dp::IpCidr& prefix, uint32_t metric) {
    Msg m;
    route_msg(m, RTM_DELROUTE, table, prefix);
    m.body<rtmsg>()->rtm_scope = RT_SCOPE_NOWHERE;
    m.u32(RTA_PRIORITY, metric);
    std::string err;
    const int e = request(m.h(), err);
    return e == 0 || e == ESRCH ? Status() : Status::fail("removing a route: " + err);
}

Status Netlink::del_route(uint32_t table, const dp::IpCidr& prefix) {
    Msg m;
    route_msg(m, RTM_DELROUTE, table, prefix);
    // Any scope, protocol and type: whoever wrote a route into our table, it goes.
    m.body<rtmsg>()->rtm_scope = RT_SCOPE_NOWHERE;
    m.body<rtmsg>()->rtm_protocol = RTPROT_UNSPEC;
    m.body<rtmsg>()->rtm_type = RTN_UNSPEC;
    std::string err;
    const int e = request(m.h(), err);
    return e == 0 || e == ESRCH ? Status() : Status::fail("removing a route: " + err);  // ESRCH: already gone
}

Status Netlink::routes(uint32_t table, std::vector<dp::IpCidr>& out) {
    out.clear();
    if (fd_ < 0) {
        return Status::fail("listing routes: no netlink socket");
    }
    Msg m;
    m.h()->nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
    m.h()->nlmsg_type = RTM_GETROUTE;
    m.h()->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    m.h()->nlmsg_seq = ++seq_;
    m.body<rtmsg>()->rtm_family = AF_UNSPEC;
    sockaddr_nl kernel{.nl_family = AF_NETLINK};
    if (sendto(fd_, m.h(), m.h()->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
        return Status::fail(fmt::format("listing routes: {}", std::strerror(errno)));
    }
    alignas(nlmsghdr) char buf[32768];
    for (;;) {
        ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n < 0) {
            return Status::fail(fmt::format("listing routes: {}", std::strerror(errno)));
        }
        for (auto* r = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(r, static_cast<unsigned>(n)); r = NLMSG_NEXT(r, n)) {
            if (r->nlmsg_seq != seq_) continue;
            if (r->nlmsg_type == NLMSG_DONE) return {};
            if (r->nlmsg_type == NLMSG_ERROR) {
                return Status::fail("listing routes: refused");
            }
            if (r->nlmsg_type != RTM_NEWROUTE || r->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg))) continue;
            auto* rt = static_cast<rtmsg*>(NLMSG_DATA(r));
            if (rt->rtm_family != AF_INET && rt->rtm_family != AF_INET6) continue;  // MPLS, multicast, ...
            const size_t alen = rt->rtm_family == AF_INET ? 4 : 16;
            uint32_t t = rt->rtm_table;
            dp::IpCidr c{};
            bool have_dst = false;
            int len = static_cast<int>(RTM_PAYLOAD(r));
            for (auto* a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == RTA_TABLE && RTA_PAYLOAD(a) == 4) std::memcpy(&t, RTA_DATA(a), 4);
                if (a->rta_type == RTA_DST && RTA_PAYLOAD(a) == alen) {
                    if (alen == 4) {
                        dp::Ip4 v;
                        std::memcpy(&v.be, RTA_DATA(a), 4);
                        c.addr = dp::IpAddr::of(v);
                    } else {
                        dp::Ip6 v;
                        std::memcpy(v.b, RTA_DATA(a), 16);
                        c.addr = dp::IpAddr::of(v);
                    }
                    have_dst = true;
                }
            }
            if (t != table || !have_dst) continue;
            c.len = rt->rtm_dst_len;
            out.push_back(c);
        }
    }
}

}  // namespace svcgate::ctl
