#include "control/daemon/host_interface.h"

#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <rte_dev.h>
#include <rte_errno.h>

#include "control/base/netlink.h"
#include "control/routing/announce.h"

namespace svcgate::ctl {

namespace {

// Writes `value` to a sysctl file; false when it is not there (IPv6 off) or refuses.
bool write_sysctl(const std::string& path, const char* value) {
    FILE* f = std::fopen(path.c_str(), "we");
    if (!f) return false;
    const bool ok = std::fputs(value, f) >= 0;
    return std::fclose(f) == 0 && ok;
}

}  // namespace

// A port's host interface (host_path): a TAP device (DPDK's net_tap) named as configured, with the
// port's MAC and MTU (its addresses: sync_host_addresses), so that the kernel of this namespace
// answers what the dataplane hands it (BGP, BFD, SSH, health checks) and resolves its own
// neighbors on the port's link. It takes no router advertisement (the dataplane does not hand it
// any): its addresses are the config's.
Status open_host_interface(Runtime& rt, const PortConfig& pc, const rte_ether_addr& mac, size_t p) {
    const std::string vdev = fmt::format("net_tap_sg{}", p);
    const uint8_t* b = mac.addr_bytes;
    const std::string args = fmt::format("iface={},mac={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", pc.host_interface,
                                         b[0], b[1], b[2], b[3], b[4], b[5]);
    const std::string what = fmt::format("port {}: host interface {}", pc.name, pc.host_interface);
    if (int rc = rte_dev_probe((vdev + "," + args).c_str()); rc != 0)
        return Status::fail(
            fmt::format("{}: cannot create the TAP device ({}; is /dev/net/tun there, is the name free?)", what,
                        rte_strerror(rc < 0 ? -rc : rc)));
    const std::string conf = "/proc/sys/net/ipv6/conf/" + pc.host_interface + "/";
    (void)write_sysctl(conf + "accept_ra", "0");
    (void)write_sysctl(conf + "autoconf", "0");
    rt.hosts.emplace_back();
    const PortConfig hc{.name = pc.name + " host interface " + pc.host_interface, .device = vdev, .mtu = pc.mtu};
    if (Status s = rt.hosts.back().open(hc, 1, rt.rx_pool(hc.mtu)); !s) return s;
    const int ifindex = static_cast<int>(if_nametoindex(pc.host_interface.c_str()));
    if (ifindex == 0) return Status::fail(fmt::format("{}: not found after creating it", what));
    rt.host_ifindex[p] = ifindex;
    return {};
}

// The host interfaces' addresses from what they carry to what `cfg` gives them
// (host_interface_addresses): those gone removed first, then those new added. Fails with every
// failure, one line each; what succeeded is remembered.
Status sync_host_addresses(Runtime& rt, const Config& cfg) {
    const auto want = host_interface_addresses(cfg);
    std::string errors;
    Netlink nl;
    for (size_t p = 0; p < rt.host_ifindex.size() && p < want.size(); ++p) {
        const int ifindex = rt.host_ifindex[p];
        if (ifindex == 0) continue;
        auto& have = rt.host_addresses[p];
        const std::string what = fmt::format("port {}: host interface {}", cfg.dataplane.ports[p].name,
                                             cfg.dataplane.ports[p].host_interface);
        for (auto it = have.begin(); it != have.end();) {
            if (std::find(want[p].begin(), want[p].end(), *it) != want[p].end()) {
                ++it;
                continue;
            }
            if (Status s = nl.del_address(ifindex, *it); !s) {
                errors += fmt::format("{}: {} {}\n", what, s.error(), format_cidr(*it));
                ++it;
            } else {
                it = have.erase(it);
            }
        }
        for (const IpCidr& a : want[p]) {
            if (std::find(have.begin(), have.end(), a) != have.end()) continue;
            if (Status s = nl.add_address(ifindex, a); !s)
                errors += fmt::format("{}: {} {}\n", what, s.error(), format_cidr(a));
            else
                have.push_back(a);
        }
    }
    if (!errors.empty()) errors.pop_back();  // the last line's newline
    return errors.empty() ? Status() : Status::fail(errors);
}

// What would keep a host interface from being created, found before starting (and by --check):
// no TUN/TAP driver, or the name taken by an interface that is not a TAP device (one svcgate
// left, or one of a running svcgate, is: net_tap takes it over).
std::vector<std::string> host_interface_problems(const Config& cfg) {
    std::vector<std::string> out;
    for (const PortConfig& p : cfg.dataplane.ports) {
        if (p.host_interface.empty()) continue;
        const std::string what = fmt::format("{}:{}:{}: dataplane.ports {}: host_interface {}", p.mark.file.str(),
                                             p.mark.line, p.mark.column, p.name, p.host_interface);
        if (access("/dev/net/tun", R_OK | W_OK) != 0)
            out.push_back(what + ": cannot be created: /dev/net/tun is missing or not writable (TUN/TAP driver)");
        const std::string sys = "/sys/class/net/" + p.host_interface;
        if (access(sys.c_str(), F_OK) == 0 && access((sys + "/tun_flags").c_str(), F_OK) != 0)
            out.push_back(what + ": cannot be created: an interface of that name exists and is not a TAP device");
    }
    return out;
}

}  // namespace svcgate::ctl
