#include "control/config/yaml_config.h"

#include <arpa/inet.h>
#include <sodium.h>

#include <cstring>

#include "control/base/file.h"
#include "control/config/config_fields.h"
#include "control/config/health_check.h"
#include "control/config/kube_objects.h"
#include "control/config/lb_config.h"
#include "control/config/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <span>
#include <sstream>

#include <fmt/format.h>

#include "dataplane/lb/maglev.h"
#include "dataplane/flow/source_limit.h"

namespace svcgate::ctl {

namespace {
// Levenshtein distance, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            const size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}
}  // namespace

std::string unknown_key(std::string_view key, std::span<const std::string_view> known) {
    std::string_view best;
    size_t best_d = SIZE_MAX;
    for (const std::string_view k : known)
        if (const size_t d = edit_distance(key, k); d < best_d) best_d = d, best = k;
    std::string m = "unknown setting";
    // A slip: a third of the key's letters at most (and at least two), or one key inside the other.
    const bool near = best_d <= std::max<size_t>(2, key.size() / 3) ||
        (!best.empty() && (best.find(key) != std::string_view::npos || key.find(best) != std::string_view::npos));
    if (!best.empty() && near) m += fmt::format("; did you mean \"{}\"?", best);
    std::string list;
    for (const std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return m + " (known here: " + list + ")";
}

std::string ConfigIssue::str() const {
    std::string where = mark.file.str();
    if (mark.line > 0) where += fmt::format(":{}:{}", mark.line, mark.column);
    return path.empty() ? fmt::format("{}: {}", where, message) : fmt::format("{}: {}: {}", where, path, message);
}

namespace {
std::string join_issues(const std::vector<ConfigIssue>& v) {
    std::string s;
    for (const auto& i : v) s += (s.empty() ? "" : "\n") + i.str();
    return s;
}
}  // namespace

ConfigError::ConfigError(std::vector<ConfigIssue> v, std::vector<ConfigIssue> w)
    : std::runtime_error(join_issues(v)), issues(std::move(v)), warnings(std::move(w)) {}

namespace {
constexpr std::pair<Proto, std::string_view> kProtos[] = {
    {Proto::tcp, "TCP"}, {Proto::udp, "UDP"}, {Proto::sctp, "SCTP"}, {Proto::icmp, "ICMP"}, {Proto::icmp6, "ICMP6"}};
}  // namespace

std::optional<Proto> parse_proto(std::string_view s) {
    for (auto [p, name] : kProtos)
        if (s.size() == name.size() &&
            std::equal(s.begin(), s.end(), name.begin(), [](char a, char b) { return std::toupper(a) == b; }))
            return p;
    return std::nullopt;
}

std::string proto_name(Proto p, bool lowercase) {
    for (auto [q, name] : kProtos) {
        if (q != p) continue;
        std::string s(name);
        if (lowercase)
            for (char& c : s) c = static_cast<char>(std::tolower(c));
        return s;
    }
    return lowercase ? "ip" : "IP";
}

namespace {

// A number at `path` within the range of the field table's row section.key (config_fields.h);
// nullopt (with the error recorded) when it is not one.
template <typename T>
std::optional<T> field_number(Reader& r, const ytree::Node& v, std::string_view section, std::string_view key,
                              const Path& path) {
    const ConfigField& f = config_field(section, key);
    return r.uint<T>(v, path, f.lo, f.hi);
}

}  // namespace

bool read_fields(Reader& r, const ytree::Node& n, std::string_view section, std::string_view prefix, Config& c) {
    if (!r.map(n, prefix.empty() ? std::string(section) : fmt::format("{}.{}", section, prefix),
               keys_under(section, prefix)))
        return false;
    for (const ConfigField& f : kConfigFields) {
        const std::string_view key = key_under(f.key, prefix);
        if (f.section != section || f.value.kind == ConfigMember::Kind::own || key.empty() ||
            key.find_first_of(".[") != std::string_view::npos)
            continue;
        const ytree::Node v = n[key];
        if (!v) continue;
        const std::string path = fmt::format("{}.{}", section, f.key);
        switch (f.value.kind) {
            case ConfigMember::Kind::number:
                if (auto x = r.uint<uint64_t>(v, path, f.lo, f.hi)) f.value.set(c, *x);
                break;
            case ConfigMember::Kind::boolean:
                if (auto b = r.boolean(v, path)) f.value.set(c, *b);
                break;
            case ConfigMember::Kind::text:
                if (auto t = r.str(v, path)) *f.value.text(c) = *t;
                break;
            case ConfigMember::Kind::own:
                break;
        }
    }
    return true;
}

namespace {

// dataplane.ports[]: each port's name, device, MTU, MAC, host interface and addresses.
void read_ports(Reader& r, const ytree::Node& n, DataplaneConfig& d) {
    if (n["ports"] && r.seq(n["ports"], "dataplane.ports")) {
        for (size_t i = 0; i < n["ports"].size(); ++i) {
            const ytree::Node p = n["ports"][i];
            std::string path = fmt::format("dataplane.ports[{}]", i);
            if (!r.map(p, path, keys_under("dataplane", "ports[]"))) continue;
            PortConfig pc{.mark = r.mark(p)};
            if (!p["name"])
                r.error(p, path, "a port needs a name");
            else if (auto s = r.str(p["name"], {path, ".name"}))
                pc.name = *s;
            if (p["device"])
                if (auto s = r.str(p["device"], {path, ".device"})) pc.device = *s;
            for (const BondConfig& b : d.bonds)
                if (std::find(b.members.begin(), b.members.end(), pc.device) != b.members.end())
                    r.error(p["device"], {path, ".device"},
                            fmt::format("{} is a member of bond {}: name the bond as the device", pc.device, b.name));
            if (p["vlan"])
                if (auto v = field_number<uint16_t>(r, p["vlan"], "dataplane", "ports[].vlan", {path, ".vlan"}))
                    pc.vlan = *v;
            // IPv6 needs 1280 (RFC 8200 5); a frame must fit one mbuf (2048 bytes of data room).
            if (p["mtu"])
                if (auto m = field_number<uint16_t>(r, p["mtu"], "dataplane", "ports[].mtu", {path, ".mtu"}))
                    pc.mtu = *m;
            if (const ytree::Node m = p["mac"]) {
                const auto text = r.view(m, {path, ".mac"}).value_or("");
                pc.mac = parse_mac(text);
                if (!pc.mac || ((*pc.mac)[0] & 1) || *pc.mac == std::array<uint8_t, 6>{})
                    r.error(m, {path, ".mac"},
                            fmt::format("\"{}\" is not a unicast MAC address (xx:xx:xx:xx:xx:xx)", text)),
                        pc.mac.reset();
            }
            if (const ytree::Node h = p["host_interface"]) {
                // A Linux interface name (IFNAMSIZ less the NUL), of the characters that are safe in
                // net_tap's device arguments and a /proc path: letters, digits, '_', '.', '-'.
                const std::string v = r.str(h, {path, ".host_interface"}).value_or("");
                const bool ok = !v.empty() && v.size() <= 15 && v != "." && v != ".." &&
                    v.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
                        std::string::npos;
                if (!ok)
                    r.error(h, {path, ".host_interface"},
                            fmt::format("\"{}\" is not an interface name (1 to 15 of A-Z a-z 0-9 _ . -)", v));
                else
                    pc.host_interface = v;
                for (const PortConfig& o : d.ports)
                    if (ok && o.host_interface == v)
                        r.error(h, {path, ".host_interface"},
                                fmt::format("port {} has host interface {} already", o.name, v));
            }
            pc.addresses = r.list<IpCidr>(p["addresses"], path + ".addresses",
                                          [&](const ytree::Node& x, const Path& q) { return r.cidr(x, q, true); });
            // Ports on one device are its VLANs: one port each, one MAC for all.
            for (const PortConfig& o : d.ports) {
                if (pc.device.empty() || o.device != pc.device) continue;
                if (o.vlan == pc.vlan)
                    r.error(p["vlan"] ? p["vlan"] : p, {path, p["vlan"] ? ".vlan" : ""},
                            pc.vlan ? fmt::format("port {} is VLAN {} of device {} already", o.name, pc.vlan, pc.device)
                                    : fmt::format("port {} is the untagged port of device {} already; a second "
                                                  "port on one device needs its own vlan",
                                                  o.name, pc.device));
                if (pc.mac && o.mac && *pc.mac != *o.mac)
                    r.error(p["mac"], {path, ".mac"},
                            fmt::format("port {} on the same device has another MAC; a device has one", o.name));
            }
            d.ports.push_back(std::move(pc));
        }
    }
}

// dataplane.routes[]: {prefix, via} of one family.
void read_routes(Reader& r, const ytree::Node& n, DataplaneConfig& d) {
    if (n["routes"] && r.seq(n["routes"], "dataplane.routes")) {
        for (size_t i = 0; i < n["routes"].size(); ++i) {
            const ytree::Node p = n["routes"][i];
            std::string path = fmt::format("dataplane.routes[{}]", i);
            if (!r.map(p, path, {"prefix", "via"})) continue;
            if (!p["prefix"] || !p["via"]) {
                r.error(p, path, "a route needs prefix and via");
                continue;
            }
            auto pre = r.cidr(p["prefix"], {path, ".prefix"});
            auto via = r.ip(p["via"], {path, ".via"});
            if (pre && via && pre->family() != via->family())
                r.error(p["via"], {path, ".via"},
                        fmt::format("{} is not of the family of prefix {}", format_ip(*via), format_cidr(*pre)));
            else if (pre && via)
                d.routes.push_back(RouteConfig{*pre, *via, r.mark(p)});
        }
    }
}

// dataplane.bonds[]: link aggregates, named for ports[].device. Read before the ports.
void read_bonds(Reader& r, const ytree::Node& n, DataplaneConfig& d) {
    const ytree::Node bs = n["bonds"];
    if (!bs || !r.seq(bs, "dataplane.bonds")) return;
    const Path list("dataplane.bonds");
    for (size_t i = 0; i < bs.size(); ++i) {
        const Path path(list, i);
        const ytree::Node b = bs[i];
        if (!r.map(b, path, keys_under("dataplane", "bonds[]"))) continue;
        BondConfig bc{.mark = r.mark(b)};
        if (!b["name"] || !b["members"]) {
            r.error(b, path, "a bond needs a name and its members");
            continue;
        }
        bc.name = r.str(b["name"], {path, ".name"}).value_or("");
        if (bc.name.empty() || bc.name.find_first_of(", =") != std::string::npos)
            r.error(b["name"], {path, ".name"},
                    fmt::format("\"{}\" is not a bond name (letters, digits, - and _)", bc.name));
        for (const BondConfig& o : d.bonds)
            if (o.name == bc.name)
                r.error(b["name"], {path, ".name"}, fmt::format("bond {} is defined already", o.name));
        if (const ytree::Node m = b["mode"]) {
            const std::string v = r.str(m, {path, ".mode"}).value_or("");
            if (v == "802.3ad" || v == "lacp")
                bc.mode = BondConfig::Mode::lacp;
            else if (v == "active-backup")
                bc.mode = BondConfig::Mode::active_backup;
            else
                r.error(m, {path, ".mode"}, fmt::format("\"{}\" is not 802.3ad or active-backup", v));
        }
        if (const ytree::Node h = b["transmit_hash"]) {
            bc.transmit_hash = r.str(h, {path, ".transmit_hash"}).value_or("");
            if (bc.transmit_hash != "layer2" && bc.transmit_hash != "layer2+3" && bc.transmit_hash != "layer3+4")
                r.error(h, {path, ".transmit_hash"},
                        fmt::format("\"{}\" is not layer2, layer2+3 or layer3+4", bc.transmit_hash));
        }
        const Path members(path, ".members");
        bc.members = r.list<std::string>(b["members"], members,
                                         [&](const ytree::Node& x, const Path& p) { return r.str(x, p); });
        if (bc.members.empty()) r.error(b["members"], members, "a bond needs at least one member");
        for (size_t k = 0; k < bc.members.size(); ++k)
            for (const BondConfig& o : d.bonds)
                if (std::find(o.members.begin(), o.members.end(), bc.members[k]) != o.members.end())
                    r.error(b["members"][k], Path(members, k),
                            fmt::format("{} is a member of bond {} already", bc.members[k], o.name));
        d.bonds.push_back(std::move(bc));
    }
}

// dataplane.neighbors[]: configured ARP / ND entries.
void read_neighbors(Reader& r, const ytree::Node& n, DataplaneConfig& d) {
    if (const ytree::Node nb = n["neighbors"]; nb && r.seq(nb, "dataplane.neighbors")) {
        const Path list("dataplane.neighbors");
        for (size_t i = 0; i < nb.size(); ++i) {
            const Path path(list, i);
            const ytree::Node e = nb[i];
            if (!r.map(e, path, {"ip", "mac"})) continue;
            if (!e["ip"] || !e["mac"]) {
                r.error(e, path, "a neighbor needs ip and mac");
                continue;
            }
            auto ip = r.ip(e["ip"], {path, ".ip"});
            auto text = r.view(e["mac"], {path, ".mac"});
            if (!text) continue;
            auto mac = parse_mac(*text);
            if (!mac)
                r.error(e["mac"], {path, ".mac"},
                        fmt::format("\"{}\" is not a MAC address (02:00:00:00:00:01)", *text));
            if (ip && mac) d.neighbors.push_back(NeighborConfig{*ip, *mac, r.mark(e)});
        }
    }
}

// dataplane.flow_table: sizes, timeouts, the per-source cap, the state file.
void read_flow_table(Reader& r, const ytree::Node& ft, Config& c) {
    DataplaneConfig& d = c.dataplane;
    if (!read_fields(r, ft, "dataplane", "flow_table", c)) return;
    // IPv6 flows live in a table of their own (180 bytes a flow against 116): a quarter of the
    // IPv4 capacity unless set.
    if (!ft["capacity_v6"]) d.flow_capacity_v6 = std::max<uint32_t>(d.flow_capacity / 4, 1024);
    if (const ytree::Node f = ft["state_file"]) {
        const std::string v = r.str(f, "dataplane.flow_table.state_file").value_or("");
        if (v.empty() || v.back() == '/')
            r.error(f, "dataplane.flow_table.state_file", "a file name, not \"" + v + "\"");
        else
            d.state_file = v;
    }
    if (const ytree::Node t = ft["timeouts"]) read_fields(r, t, "dataplane", "flow_table.timeouts", c);
}

void read_dataplane(Reader& r, const ytree::Node& n, Config& c) {
    DataplaneConfig& d = c.dataplane;
    if (!read_fields(r, n, "dataplane", "", c)) return;
    if (const ytree::Node hp = n["host_path"]) read_fields(r, hp, "dataplane", "host_path", c);
    if (const ytree::Node fr = n["fragments"]) read_fields(r, fr, "dataplane", "fragments", c);
    if (const ytree::Node p = n["poll"]) {
        const auto v = r.str(p, "dataplane.poll");
        if (v == "busy" || v == "adaptive")
            d.busy_poll = v == "busy";
        else if (v)
            r.error(p, "dataplane.poll", "\"" + *v + "\" is not adaptive or busy");
    }
    if (n["eal"])
        d.eal = r.list<std::string>(n["eal"], "dataplane.eal",
                                    [&](const ytree::Node& x, const Path& p) { return r.str(x, p); });
    read_bonds(r, n, d);
    read_ports(r, n, d);
    read_routes(r, n, d);
    read_neighbors(r, n, d);
    if (const ytree::Node ft = n["flow_table"]) read_flow_table(r, ft, c);
}

void read_cluster(Reader& r, const ytree::Node& n, Config& cfg) {
    ClusterConfig& c = cfg.cluster;
    if (!read_fields(r, n, "cluster", "", cfg)) return;
    c.node_ips = r.ips(n["node_ips"], "cluster.node_ips");
    // kube-proxy's --nodeport-addresses, per family: a family with no CIDR in the list serves
    // NodePorts on all its node IPs; "primary" is each family's primary node IP.
    const ytree::Node npa = n["nodeport_addresses"];
    for (size_t i = 0; npa && !npa.IsNull() && r.seq(npa, "cluster.nodeport_addresses") && i < npa.size(); ++i) {
        const ytree::Node x = npa[i];
        const Path p("cluster.nodeport_addresses", i);
        if (x.IsScalar() && x.Scalar() == "primary") {
            if (c.node_ips.empty()) r.error(x, p, "\"primary\" needs node_ips");
            for (Family f : {Family::v4, Family::v6})
                for (const IpAddr& a : c.node_ips)
                    if (a.family() == f) {
                        c.nodeport_addresses.push_back(IpCidr{a, static_cast<uint8_t>(f == Family::v4 ? 32 : 128)});
                        break;
                    }
        } else if (auto cidr = r.cidr(x, p)) {
            c.nodeport_addresses.push_back(*cidr);
        }
    }
    c.cluster_cidrs = r.cidrs(n["cluster_cidrs"], "cluster.cluster_cidrs");
    c.service_cidrs = r.cidrs(n["service_cidrs"], "cluster.service_cidrs");
    c.client_ip = r.client_ip(n["client_ip"], "cluster.client_ip").value_or(ClientIp::masquerade);
    if (const ytree::Node labels = n["node_labels"];
        labels && !labels.IsNull() && r.open_map(labels, "cluster.node_labels"))
        for (const auto& kv : labels) {
            const std::string path = "cluster.node_labels." + kv.first.Scalar();
            if (kv.second.IsNull()) {
                c.node_labels[kv.first.Scalar()] = "";  // `zone:` with no value: an empty label
            } else if (auto v = r.str(kv.second, path)) {
                c.node_labels[kv.first.Scalar()] = *v;
            }
        }
    if (c.proxy_name_only && c.proxy_name.empty())
        r.error(n["proxy_name_only"], "cluster.proxy_name_only", "proxy_name_only needs a proxy_name");
    // "LOW-HIGH" within [min, 65535], at least `span` ports.
    auto range = [&](const char* key, unsigned min, unsigned span, uint16_t& lo_out, uint16_t& hi_out) {
        const ytree::Node nr = n[key];
        if (!nr) return;
        const std::string path = std::string("cluster.") + key;
        auto s = r.str(nr, path);
        unsigned lo = 0, hi = 0;
        char dash = 0;
        std::istringstream is(s.value_or(""));
        if (s && (is >> lo >> dash >> hi) && dash == '-' && is.eof() && lo >= min && lo <= hi && hi <= 65535 &&
            hi - lo + 1 >= span) {
            lo_out = static_cast<uint16_t>(lo);
            hi_out = static_cast<uint16_t>(hi);
        } else if (s) {
            r.error(nr, path,
                    fmt::format("\"{}\" is not a port range LOW-HIGH within {}-65535{}", *s, min,
                                span > 1 ? fmt::format(" of at least {} ports", span) : ""));
        }
    };
    range("nodeport_range", 1, 1, c.nodeport_min, c.nodeport_max);
    range("masquerade_ports", 1024, 256, c.masquerade_port_min, c.masquerade_port_max);
    // Read by the table within its range; 0 (by endpoint count) when absent or refused.
    if (const uint32_t size = c.maglev_table_size; size && dp::next_prime(size) != size) {
        r.error(n["maglev_table_size"], "cluster.maglev_table_size",
                fmt::format("{} is not a prime (next: {})", size, dp::next_prime(size)));
        c.maglev_table_size = 0;
    }
}

void read_control(Reader& r, const ytree::Node& n, Config& cfg) {
    ControlConfig& c = cfg.control;
    if (!read_fields(r, n, "control", "", cfg)) return;
    auto off = [](const std::string& s) { return s.empty() || s == "off" || s == "false" || s == "none"; };
    if (n["socket"]) {
        auto s = r.str(n["socket"], "control.socket").value_or("");
        c.socket = off(s) ? "" : s;
    }
    if (n["socket_mode"]) {
        auto s = r.str(n["socket_mode"], "control.socket_mode").value_or("");
        unsigned m = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), m, 8);
        if (ec != std::errc{} || p != s.data() + s.size() || s.empty() || m > 0777)
            r.error(n["socket_mode"], "control.socket_mode",
                    fmt::format("\"{}\" is not an octal mode such as 0600", s));
        else
            c.socket_mode = m;
    }
    if (n["metrics"]) {
        auto s = r.str(n["metrics"], "control.metrics").value_or("");
        if (off(s)) {
            c.metrics.reset();
        } else if (auto e = parse_host_port(s)) {
            c.metrics = *e;
        } else {
            r.error(n["metrics"], "control.metrics", fmt::format("\"{}\" is not IPv4:PORT, [IPv6]:PORT or off", s));
        }
    }
}

// routing: the kernel table the addresses to announce go to, and which addresses.
void read_routing(Reader& r, const ytree::Node& n, Config& cfg) {
    RoutingConfig& c = cfg.routing;
    c.mark = r.mark(n);
    if (!read_fields(r, n, "routing", "", cfg)) return;
    if (const ytree::Node t = n["table"]) {
        // 253, 254, 255: the kernel's default, main and local tables are not ours to fill.
        if (c.table >= 253 && c.table <= 255)
            r.error(
                t, "routing.table",
                fmt::format("table {} is the kernel's (default, main, local); use a table of svcgate's own", c.table));
    } else {
        r.error(n, "routing", "routing needs table (the kernel table the addresses to announce are written to)");
    }
    if (const ytree::Node a = n["announce"]; a && r.seq(a, "routing.announce")) {
        c.load_balancer_ips = c.external_ips = c.node_ips = c.cluster_ips = c.service_cidrs = false;
        for (size_t i = 0; i < a.size(); ++i) {
            const std::string v = r.str(a[i], fmt::format("routing.announce[{}]", i)).value_or("");
            if (v == "load_balancer_ips")
                c.load_balancer_ips = true;
            else if (v == "external_ips")
                c.external_ips = true;
            else if (v == "node_ips")
                c.node_ips = true;
            else if (v == "cluster_ips")
                c.cluster_ips = true;
            else if (v == "service_cidrs")
                c.service_cidrs = true;
            else
                r.error(
                    a[i], fmt::format("routing.announce[{}]", i),
                    fmt::format("\"{}\" is not load_balancer_ips, external_ips, node_ips, cluster_ips or service_cidrs",
                                v));
        }
    }
}

// ha: flow replication between gateways (sync.h). The key file is read here, so --check finds a
// missing or malformed one.
void read_ha(Reader& r, const ytree::Node& n, Config& cfg,
             const std::function<std::string(const std::string&)>& beside) {
    HaConfig& c = cfg.ha;
    const std::vector<PortConfig>& ports = cfg.dataplane.ports;
    if (!read_fields(r, n, "ha", "", cfg)) return;
    const ytree::Node listen = n["listen"], peers = n["peers"], key = n["key_file"];
    if (!listen || !peers || !key) {
        r.error(n, "ha", "ha needs listen (ADDRESS:PORT), peers and key_file");
        return;
    }
    if (auto s = r.str(listen, "ha.listen")) {
        if (auto e = parse_host_port(*s, 0)) {
            c.listen = *e;
        } else {
            r.error(listen, "ha.listen", fmt::format("\"{}\" is not ADDRESS:PORT or [IPv6]:PORT", *s));
            return;  // the peers take its port and family
        }
    }
    if (r.seq(peers, "ha.peers")) {
        if (peers.size() == 0 || peers.size() > 14)
            r.error(peers, "ha.peers", fmt::format("{} peers; 1 to 14 are served", peers.size()));
        for (size_t i = 0; i < peers.size(); ++i) {
            const std::string what = fmt::format("ha.peers[{}]", i);
            auto s = r.str(peers[i], what);
            if (!s) continue;
            auto e = parse_host_port(*s, c.listen.port);
            if (!e) {
                r.error(peers[i], what, fmt::format("\"{}\" is not an address, ADDRESS:PORT or [IPv6]:PORT", *s));
            } else if (*e == c.listen) {
                r.error(peers[i], what, "is this gateway's own ha.listen");
            } else if (std::find(c.peers.begin(), c.peers.end(), *e) != c.peers.end()) {
                r.error(peers[i], what, fmt::format("{} is listed twice", *s));
            } else if (e->addr.is_v4() != c.listen.addr.is_v4()) {
                r.error(peers[i], what, "is not of ha.listen's address family");
            } else {
                c.peers.push_back(*e);
            }
        }
    }
    if (auto s = r.str(key, "ha.key_file")) {
        c.key_file = beside(*s);
        const auto text = read_file(c.key_file);
        if (!text) {
            r.error(key, "ha.key_file", fmt::format("cannot read {}: {}", c.key_file, std::strerror(errno)));
        } else if (Status s = parse_ha_key(*text, c.key); !s) {
            r.error(key, "ha.key_file",
                    fmt::format("{}: {} (make one with: openssl rand -hex 32)", c.key_file, s.error()));
        }
    }
    if (const ytree::Node t = n["takeover_ports"]; t && r.seq(t, "ha.takeover_ports")) {
        for (size_t i = 0; i < t.size(); ++i) {
            const std::string what = fmt::format("ha.takeover_ports[{}]", i);
            auto name = r.str(t[i], what);
            if (!name) continue;
            const auto it =
                std::find_if(ports.begin(), ports.end(), [&](const PortConfig& p) { return p.name == *name; });
            if (it == ports.end())
                r.error(t[i], what, fmt::format("no port is named \"{}\"", *name));
            else if (std::count(c.takeover_ports.begin(), c.takeover_ports.end(), *name))
                r.error(t[i], what, "listed twice");
            else
                c.takeover_ports.push_back(*name);
        }
    }
    if (c.dead_after_ms < 3 * c.hello_ms)
        r.error(n, "ha.dead_after_ms",
                fmt::format("{} ms is less than three hellos ({} ms each): one lost hello "
                            "would declare a peer dead",
                            c.dead_after_ms, c.hello_ms));
}

// healthCheckNodePorts that are served (health.h): answered on the node IPs by the host path's
// kernel, so each must be free: one Service per port, no NodePort or metrics port on it.
void check_health_ports(const Config& cfg, std::vector<ConfigIssue>& errors) {
    std::map<uint16_t, const ServiceConfig*> used;
    const uint16_t metrics_port = cfg.control.metrics ? cfg.control.metrics->port : 0;
    for (const ServiceConfig& s : cfg.services) {
        const uint16_t h = s.health_check_node_port;
        // kube-proxy serves it for LoadBalancers under policy Local only, and ignores it elsewhere
        // (its own test objects carry one on other Services).
        if (!h || s.type != ServiceType::load_balancer || !s.external_local) continue;
        auto err = [&](std::string m) {
            errors.push_back(ConfigIssue{s.mark, s.full_name(), "healthCheckNodePort " + std::to_string(h) + ": " + m});
        };
        if (h == metrics_port) err("clashes with control.metrics (" + format_host_port(*cfg.control.metrics) + ")");
        if (auto [it, fresh] = used.emplace(h, &s); !fresh) err("Service " + it->second->full_name() + " uses it too");
        for (const ServiceConfig& o : cfg.services)
            for (const ServicePortConfig& p : o.ports)
                if (p.node_port == h && p.proto == Proto::tcp)
                    err("clashes with the TCP NodePort of Service " + o.full_name() + " port " +
                        std::to_string(p.port));
    }
}

// The compact `services:` form, part by part: its name and type, its addresses and policies,
// its ports, its endpoints.
void read_service_identity(Reader& r, const ytree::Node& n, const Path& path, ServiceConfig& s) {
    if (const ytree::Node name = n["name"]; !name) {
        r.error(n, path, "a service needs a name (namespace/name)");
    } else if (auto nm = r.view(name, {path, ".name"})) {
        auto slash = nm->find('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == nm->size())
            r.error(name, {path, ".name"}, fmt::format("\"{}\" is not namespace/name", *nm));
        else
            s.ns = nm->substr(0, slash), s.name = nm->substr(slash + 1);
    }
    if (const ytree::Node type = n["type"]) {
        auto t = r.view(type, {path, ".type"}).value_or("");
        if (t == "ClusterIP")
            s.type = ServiceType::cluster_ip;
        else if (t == "NodePort")
            s.type = ServiceType::node_port;
        else if (t == "LoadBalancer")
            s.type = ServiceType::load_balancer;
        else
            r.error(type, {path, ".type"}, fmt::format("\"{}\" is not ClusterIP, NodePort or LoadBalancer", t));
    }
}

void read_service_addresses(Reader& r, const ytree::Node& n, const Path& path, ServiceConfig& s) {
    // cluster_ip: one address; cluster_ips: one per family (dual-stack), as clusterIPs.
    if (const ytree::Node ip = n["cluster_ip"]) {
        if (auto a = r.ip(ip, {path, ".cluster_ip"})) s.cluster_ips.push_back(*a);
    }
    if (const ytree::Node ips = n["cluster_ips"]) {
        for (const IpAddr& a : r.ips(ips, {path, ".cluster_ips"})) {
            bool dup = false;
            for (const IpAddr& b : s.cluster_ips) dup = dup || b.family() == a.family();
            if (dup)
                r.error(ips, {path, ".cluster_ips"}, "at most one ClusterIP per family");
            else
                s.cluster_ips.push_back(a);
        }
    }
    if (!n["cluster_ip"] && !n["cluster_ips"]) r.error(n, path, "a service needs a cluster_ip (or cluster_ips)");
    s.external_ips = r.ips(n["external_ips"], {path, ".external_ips"});
    s.lb_ips = r.ips(n["load_balancer_ips"], {path, ".load_balancer_ips"});
    s.lb_source_ranges = r.cidrs(n["load_balancer_source_ranges"], {path, ".load_balancer_source_ranges"});
    s.scheduler = r.scheduler(n["scheduler"], {path, ".scheduler"}).value_or(dp::Scheduler::random);
    if (r.client_ip_affinity(n["session_affinity"], {path, ".session_affinity"})) {
        s.affinity_timeout = kDefaultAffinityTimeout;
        if (const ytree::Node t = n["session_affinity_timeout"])
            if (auto v = r.uint<uint32_t>(t, {path, ".session_affinity_timeout"}, 1, 86400)) s.affinity_timeout = *v;
    }
    s.external_local = r.local_policy(n["external_traffic_policy"], {path, ".external_traffic_policy"});
    s.internal_local = r.local_policy(n["internal_traffic_policy"], {path, ".internal_traffic_policy"});
    s.client_ip = r.client_ip(n["client_ip"], {path, ".client_ip"});
    if (const ytree::Node h = n["health_check_node_port"])
        s.health_check_node_port = r.uint<uint16_t>(h, {path, ".health_check_node_port"}, 1, 65535).value_or(0);
    if (const ytree::Node h = n["health_check"]) s.health_check = read_health_check(r, h, {path, ".health_check"});
}

// Its ports, and each port's target in the endpoint group `g`.
void read_service_ports(Reader& r, const ytree::Node& ports, const Path& ports_path, ServiceConfig& s,
                        EndpointGroup& g) {
    for (size_t i = 0; i < ports.size(); ++i) {
        const ytree::Node p = ports[i];
        const Path pp(ports_path, i);
        if (!r.map(p, pp, {"name", "protocol", "port", "target_port", "node_port"})) continue;
        ServicePortConfig sp{.mark = r.mark(p)};
        if (const ytree::Node v = p["name"]) sp.name = r.view(v, {pp, ".name"}).value_or("");
        sp.proto = r.l4_proto(p["protocol"], {pp, ".protocol"}).value_or(Proto::tcp);
        if (const ytree::Node v = p["port"])
            sp.port = r.uint<uint16_t>(v, {pp, ".port"}, 1, 65535).value_or(0);
        else
            r.error(p, pp, "a service port needs port");
        sp.target_port = sp.port;
        if (const ytree::Node v = p["target_port"])
            sp.target_port = r.uint<uint16_t>(v, {pp, ".target_port"}, 1, 65535);
        if (const ytree::Node v = p["node_port"])
            sp.node_port = r.uint<uint16_t>(v, {pp, ".node_port"}, 1, 65535).value_or(0);
        g.ports.push_back({sp.name, sp.proto, sp.target_port.value_or(0)});
        s.ports.push_back(std::move(sp));
    }
}

void read_service_endpoints(Reader& r, const ytree::Node& eps, const Path& eps_path, EndpointGroup& g) {
    g.endpoints.reserve(eps.size());
    for (size_t i = 0; i < eps.size(); ++i) {
        const ytree::Node e = eps[i];
        const Path ep(eps_path, i);
        EndpointConfig ec{.mark = r.mark(e)};
        if (e.IsScalar()) {  // a bare address
            if (auto a = r.ip(e, ep)) ec.ip = *a, g.endpoints.push_back(ec);
            continue;
        }
        if (!r.map(e, ep, {"ip", "node", "ready", "serving", "terminating"})) continue;
        const ytree::Node ip = e["ip"];
        if (!ip) {
            r.error(e, ep, "an endpoint needs ip");
            continue;
        }
        auto a = r.ip(ip, {ep, ".ip"});
        if (const ytree::Node v = e["node"]) ec.node = r.view(v, {ep, ".node"}).value_or("");
        if (const ytree::Node v = e["ready"]) ec.ready = r.boolean(v, {ep, ".ready"}).value_or(true);
        if (const ytree::Node v = e["serving"]) ec.serving = r.boolean(v, {ep, ".serving"}).value_or(true);
        if (const ytree::Node v = e["terminating"]) ec.terminating = r.boolean(v, {ep, ".terminating"}).value_or(false);
        if (a) ec.ip = *a, g.endpoints.push_back(ec);
    }
}

void read_service(Reader& r, const ytree::Node& n, const Path& path, Config& cfg) {
    if (!r.map(n, path,
               {"name", "type", "cluster_ip", "cluster_ips", "external_ips", "load_balancer_ips",
                "load_balancer_source_ranges", "ports", "scheduler", "session_affinity", "session_affinity_timeout",
                "external_traffic_policy", "internal_traffic_policy", "client_ip", "health_check_node_port",
                "health_check", "endpoints"}))
        return;
    ServiceConfig s{.mark = r.mark(n)};
    read_service_identity(r, n, path, s);
    read_service_addresses(r, n, path, s);
    EndpointGroup g;
    if (const ytree::Node ports = n["ports"]; ports && r.seq(ports, {path, ".ports"}))
        read_service_ports(r, ports, Path(path, ".ports"), s, g);
    if (const ytree::Node eps = n["endpoints"]; eps && r.seq(eps, {path, ".endpoints"}))
        read_service_endpoints(r, eps, Path(path, ".endpoints"), g);
    s.groups.push_back(std::move(g));
    cfg.services.push_back(std::move(s));
}

// export.ipfix: the collectors, the transport and the events (control/export/).
void read_export(Reader& r, const ytree::Node& n, Config& cfg) {
    if (!read_fields(r, n, "export", "", cfg)) return;
    const ytree::Node x = n["ipfix"];
    if (!x || !read_fields(r, x, "export", "ipfix", cfg)) return;
    IpfixConfig& c = cfg.ipfix;
    c.enabled = true;
    if (const ytree::Node cs = x["collectors"]; cs && r.seq(cs, "export.ipfix.collectors") && cs.size()) {
        for (size_t i = 0; i < cs.size(); ++i) {
            const std::string what = fmt::format("export.ipfix.collectors[{}]", i);
            if (auto s = r.str(cs[i], what)) {
                if (auto e = parse_host_port(*s, 4739))
                    c.collectors.push_back(*e);
                else
                    r.error(cs[i], what, fmt::format("\"{}\" is not ADDRESS, ADDRESS:PORT or [IPv6]:PORT", *s));
            }
        }
    } else {
        r.error(x, "export.ipfix", "export.ipfix needs collectors: [ADDRESS:PORT, ...] (IPFIX's port: 4739)");
    }
    if (const ytree::Node t = x["transport"]) {
        const std::string v = r.str(t, "export.ipfix.transport").value_or("");
        if (v == "tcp" || v == "udp")
            c.tcp = v == "tcp";
        else
            r.error(t, "export.ipfix.transport", fmt::format("\"{}\" is not udp or tcp", v));
    }
    if (const ytree::Node ev = x["events"]; ev && r.seq(ev, "export.ipfix.events")) {
        c.create = c.end = false;
        for (size_t i = 0; i < ev.size(); ++i) {
            const std::string v = r.str(ev[i], fmt::format("export.ipfix.events[{}]", i)).value_or("");
            if (v == "create")
                c.create = true;
            else if (v == "delete")
                c.end = true;
            else
                r.error(ev[i], fmt::format("export.ipfix.events[{}]", i),
                        fmt::format("\"{}\" is not create or delete", v));
        }
    }
}

// kubernetes.api: where the API server is and how to follow it (control/kube/).
template <typename Beside>
void read_kube_api(Reader& r, const ytree::Node& n, Config& cfg, Beside beside) {
    KubeApiConfig& c = cfg.kube_api;
    if (!read_fields(r, n, "kubernetes", "api", cfg)) return;
    c.enabled = true;
    if (n["kubeconfig"])
        if (auto p = r.str(n["kubeconfig"], "kubernetes.api.kubeconfig")) c.kubeconfig = beside(*p);
    if (c.in_cluster == !c.kubeconfig.empty())
        r.error(n, "kubernetes.api", "give either kubeconfig (a file) or in_cluster: true");
}

Config load(const ytree::Node& root, const std::string& file, std::vector<ConfigIssue>& errors, ObjectErrors objects) {
    Config cfg;
    cfg.file = file;
    Reader r(file, errors, cfg.warnings);
    if (!root || root.IsNull()) {
        errors.push_back(ConfigIssue{Mark{file, 0, 0}, "", "empty configuration"});
        return cfg;
    }
    if (!r.map(root, "", {"dataplane", "cluster", "control", "routing", "ha", "export", "services", "kubernetes"}))
        return cfg;
    if (root["export"]) read_export(r, root["export"], cfg);
    if (root["routing"]) read_routing(r, root["routing"], cfg);
    if (root["control"]) read_control(r, root["control"], cfg);
    if (root["dataplane"]) read_dataplane(r, root["dataplane"], cfg);
    if (root["cluster"]) read_cluster(r, root["cluster"], cfg);
    if (const ytree::Node svcs = root["services"]; svcs && r.seq(svcs, "services")) {
        const Path services_path("services");
        cfg.services.reserve(cfg.services.size() + svcs.size());
        for (size_t i = 0; i < svcs.size(); ++i) read_service(r, svcs[i], Path(services_path, i), cfg);
    }
    // Relative paths (manifests, the state file) are relative to the config file's directory.
    const std::string dir = file.find('/') == std::string::npos ? "" : file.substr(0, file.rfind('/') + 1);
    auto beside = [&dir](const std::string& p) { return p.empty() || p[0] == '/' ? p : dir + p; };
    if (const ytree::Node k = root["kubernetes"]; k && read_fields(r, k, "kubernetes", "", cfg)) {
        std::vector<ManifestRef> refs;
        const ytree::Node m = k["manifests"];
        if (m && r.seq(m, "kubernetes.manifests"))
            for (size_t i = 0; i < m.size(); ++i)
                if (auto p = r.str(m[i], fmt::format("kubernetes.manifests[{}]", i)))
                    refs.push_back({beside(*p), r.mark(m[i])});
        load_kube_manifests(refs, cfg, errors, objects == ObjectErrors::leave_out);
        if (k["api"]) read_kube_api(r, k["api"], cfg, beside);
        if (k["load_balancer"]) read_load_balancer(r, k["load_balancer"], cfg);
    }
    cfg.dataplane.state_file = beside(cfg.dataplane.state_file);
    if (root["ha"]) read_ha(r, root["ha"], cfg, beside);
    check_health_ports(cfg, errors);
    // One name, one Service: the compact form and the manifests share the namespace.
    std::map<std::string, const ServiceConfig*> seen;
    for (const ServiceConfig& s : cfg.services) {
        auto [it, fresh] = seen.emplace(s.full_name(), &s);
        if (!fresh)
            errors.push_back(
                ConfigIssue{s.mark, "",
                            fmt::format("Service {} is defined twice (first at {}:{}:{})", s.full_name(),
                                        it->second->mark.file.str(), it->second->mark.line, it->second->mark.column)});
    }
    return cfg;
}

Config load_guarded(const std::string& text, const std::string& file, ObjectErrors objects = ObjectErrors::refuse) {
    std::vector<ConfigIssue> errors;
    Config cfg;
    try {
        // The first document is the config (as yaml-cpp's Load would take it).
        const ytree::Stream stream = ytree::Stream::parse(text);
        const std::vector<ytree::Node> docs = stream.documents();
        cfg = load(docs.empty() ? ytree::Node() : docs[0], file, errors, objects);
    } catch (const ytree::ParseError& e) {
        errors.push_back(ConfigIssue{
            Mark{file, e.mark.is_null() ? 0 : e.mark.line + 1, e.mark.is_null() ? 0 : e.mark.column + 1}, "", e.msg});
    }
    if (!errors.empty()) throw ConfigError(std::move(errors), std::move(cfg.warnings));
    return cfg;
}

}  // namespace

Config load_config_string(const std::string& yaml, const std::string& name) { return load_guarded(yaml, name); }

Status parse_ha_key(const std::string& text, std::array<uint8_t, 32>& out) {
    size_t b = 0, e = text.size();
    while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
    if (e - b != 2 * out.size())
        return Status::fail(fmt::format("the key is {} characters; it must be 64 hex digits", e - b));
    if (sodium_init() < 0) return Status::fail("libsodium did not initialise");
    size_t used = 0;  // sodium_hex2bin: in constant time, as befits a key
    if (sodium_hex2bin(out.data(), out.size(), text.data() + b, e - b, nullptr, &used, nullptr) != 0 ||
        used != out.size())
        return Status::fail("the key is not 64 hex digits");
    return {};
}

Config load_config_file(const std::string& path, ObjectErrors objects) {
    const auto text = read_file(path);
    if (!text) throw ConfigError({ConfigIssue{Mark{path, 0, 0}, "", "cannot open file"}});
    return load_guarded(*text, path, objects);
}

}  // namespace svcgate::ctl
