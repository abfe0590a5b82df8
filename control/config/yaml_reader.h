// The YAML walker shared by the config and the Kubernetes-object loaders: converts values and
// records every issue with its file:line:column, so a load reports all errors, not the first.
//
// Runs on: the control thread and the command-line tools. Internal to control/.
#pragma once

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "control/base/address.h"
#include "control/config/config_model.h"
#include "control/config/yaml_config.h"
#include "control/config/yaml_tree.h"

namespace svcgate::ctl {

// "unknown setting; did you mean \"masquerade_all\"? (known: a, b, ...)": the nearest known key
// by edit distance, when it is near enough to be a slip.
std::string unknown_key(std::string_view key, std::span<const std::string_view> known);

// Where a value is, as "services[3].ports[0]" + ".port": the two parts are joined only when an
// issue is reported (a config has tens of thousands of values and few errors).
// Points into strings and Paths that outlive the call it is passed to.
struct Path {
    static constexpr size_t kNoIndex = SIZE_MAX;
    Path(const std::string& b) : base(b) {}  // a full path converts implicitly
    Path(const char* b) : base(b) {}
    Path(const std::string& b, const char* f) : base(b), field(f) {}
    Path(const Path& p, const char* f) : parent(&p), field(f) {}
    Path(const Path& p, size_t i) : parent(&p), index(i) {}
    std::string str() const {
        std::string s = parent ? parent->str() : std::string(base);
        s += field;
        if (index != kNoIndex) s += "[" + std::to_string(index) + "]";
        return s;
    }
    const Path* parent = nullptr;
    std::string_view base;
    const char* field = "";
    size_t index = kNoIndex;
};

// Walks the document, converting values and recording issues with their positions.
class Reader {
public:
    Reader(const std::string& file, std::vector<ConfigIssue>& errors, std::vector<ConfigIssue>& warnings)
        : file_(file), errors_(errors), warnings_(warnings) {}

    Mark mark(const ytree::Node& n) const {
        const ytree::Pos m = n.Mark();
        if (m.is_null()) return Mark{file_, 0, 0};
        return Mark{file_, m.line + 1, m.column + 1};
    }
    void error(const ytree::Node& n, const Path& path, std::string msg) {
        errors_.push_back(ConfigIssue{mark(n), path.str(), std::move(msg)});
    }
    void error_at(const Mark& m, const Path& path, std::string msg) {
        errors_.push_back(ConfigIssue{m, path.str(), std::move(msg)});
    }
    void warn(const ytree::Node& n, const Path& path, std::string msg) {
        warnings_.push_back(ConfigIssue{mark(n), path.str(), std::move(msg)});
    }
    // A mapping of svcgate's own: a key outside `known` is an error, as kube-proxy's configuration
    // is decoded strictly (a misspelt key would leave the operator believing a setting holds),
    // with the known keys and the nearest one. Error too when `n` is not a map.
    bool map(const ytree::Node& n, const Path& path, std::initializer_list<std::string_view> known) {
        return map(n, path, std::span<const std::string_view>(known.begin(), known.size()));
    }
    bool map(const ytree::Node& n, const Path& path, std::span<const std::string_view> known) {
        if (!n.IsMap()) {
            error(n, path, "expected a mapping");
            return false;
        }
        for (const auto& kv : n) {
            const std::string& k = kv.first.Scalar();
            bool ok = false;
            for (auto w : known) ok = ok || k == w;
            if (!ok) error(kv.first, path.str().empty() ? k : path.str() + "." + k, unknown_key(k, known));
        }
        return true;
    }
    // A mapping whose other keys are not ours to judge (Kubernetes objects carry many).
    bool open_map(const ytree::Node& n, const Path& path) {
        if (!n.IsMap()) {
            error(n, path, "expected a mapping");
            return false;
        }
        return true;
    }
    bool seq(const ytree::Node& n, const Path& path) {
        if (!n.IsSequence()) {
            error(n, path, "expected a list");
            return false;
        }
        return true;
    }
    // The string at n[key], "" when the key is absent or null.
    std::string str_or_empty(const ytree::Node& n, const char* key, const Path& path) {
        const ytree::Node v = n[key];
        if (!v || v.IsNull()) return {};
        if (v.IsScalar()) return v.Scalar();
        error(v, path.str() + "." + key, "expected a string");
        return {};
    }
    std::optional<std::string> str(const ytree::Node& n, const Path& path) {
        auto v = view(n, path);
        return v ? std::optional<std::string>(*v) : std::nullopt;
    }
    // The scalar itself, valid while the tree lives: no copy.
    std::optional<std::string_view> view(const ytree::Node& n, const Path& path) {
        if (!n.IsScalar()) {
            error(n, path, "expected a string");
            return std::nullopt;
        }
        return std::string_view(n.Scalar());
    }
    template <typename T>
    std::optional<T> uint(const ytree::Node& n, const Path& path, uint64_t lo, uint64_t hi) {
        if (!n.IsScalar()) {
            error(n, path, "expected a number");
            return std::nullopt;
        }
        const std::string& s = n.Scalar();
        const auto v = parse_number(s);
        if (!v) {
            error(n, path, fmt::format("\"{}\" is not a number", s));
            return std::nullopt;
        }
        if (*v < lo || *v > hi) {
            error(n, path, fmt::format("{} is out of range {}-{}", *v, lo, hi));
            return std::nullopt;
        }
        return static_cast<T>(*v);
    }
    std::optional<bool> boolean(const ytree::Node& n, const Path& path) {
        if (n.IsScalar()) {
            const auto& s = n.Scalar();
            if (s == "true" || s == "True" || s == "yes") return true;
            if (s == "false" || s == "False" || s == "no") return false;
        }
        error(n, path, "expected true or false");
        return std::nullopt;
    }
    // An address of either family (the caller checks the family where one is required).
    std::optional<IpAddr> ip(const ytree::Node& n, const Path& path) {
        auto s = view(n, path);
        if (!s) return std::nullopt;
        auto a = parse_ip(*s);
        if (!a) error(n, path, fmt::format("\"{}\" is not an IPv4 or IPv6 address", *s));
        return a;
    }
    std::optional<IpCidr> cidr(const ytree::Node& n, const Path& path, bool keep_host = false) {
        auto s = str(n, path);
        if (!s) return std::nullopt;
        // kube-proxy trims loadBalancerSourceRanges; so do we, everywhere.
        std::string t = *s;
        t.erase(0, t.find_first_not_of(" \t"));
        t.erase(t.find_last_not_of(" \t") + 1);
        auto c = parse_cidr(t, keep_host);
        if (!c) error(n, path, fmt::format("\"{}\" is not a CIDR (a.b.c.d/len or ipv6/len)", *s));
        return c;
    }
    // Service fields both config forms share. `v` is the field's value; absent or null gives the
    // Kubernetes API default.
    std::optional<Proto> l4_proto(const ytree::Node& v, const Path& path) {
        if (!v || v.IsNull()) return Proto::tcp;
        auto t = view(v, path);
        if (!t) return std::nullopt;
        auto p = parse_proto(*t);
        if (!p || *p == Proto::icmp || *p == Proto::icmp6) {
            error(v, path, fmt::format("\"{}\" is not TCP, UDP or SCTP", *t));
            return std::nullopt;
        }
        return p;
    }
    std::optional<dp::Scheduler> scheduler(const ytree::Node& v, const Path& path) {
        if (!v || v.IsNull()) return dp::Scheduler::random;
        auto t = view(v, path);
        if (!t) return std::nullopt;
        auto s = dp::scheduler_from_name(*t);
        if (!s) error(v, path, fmt::format("unknown scheduler \"{}\" (random, maglev, rr, lc, sh, dh, sed, nq)", *t));
        return s;
    }
    // externalTrafficPolicy / internalTrafficPolicy: true for Local.
    bool local_policy(const ytree::Node& v, const Path& path) { return one_of(v, path, "Cluster", "Local"); }
    // cluster.client_ip, a Service's client_ip or svcgate.io/client-ip: none when absent.
    std::optional<ClientIp> client_ip(const ytree::Node& v, const Path& path) {
        if (!v || v.IsNull()) return std::nullopt;
        return named<ClientIp>(v, path, kClientIpNames);
    }
    // sessionAffinity: true for ClientIP.
    bool client_ip_affinity(const ytree::Node& v, const Path& path) { return one_of(v, path, "None", "ClientIP"); }

    template <typename T, typename F>
    std::vector<T> list(const ytree::Node& n, const Path& path, F&& item) {
        std::vector<T> out;
        if (!n || n.IsNull()) return out;
        if (!seq(n, path)) return out;
        for (size_t i = 0; i < n.size(); ++i)
            if (auto v = item(n[i], Path(path, i))) out.push_back(*v);
        return out;
    }
    std::vector<IpAddr> ips(const ytree::Node& n, const Path& path) {
        return list<IpAddr>(n, path, [&](const ytree::Node& x, const Path& p) { return ip(x, p); });
    }
    std::vector<IpCidr> cidrs(const ytree::Node& n, const Path& path) {
        return list<IpCidr>(n, path, [&](const ytree::Node& x, const Path& p) { return cidr(x, p); });
    }
    const std::string& file() const { return file_.str(); }

private:
    // A two-valued string field: false for `off` (and when absent or null), true for `on`.
    bool one_of(const ytree::Node& v, const Path& path, const char* off, const char* on) {
        if (!v || v.IsNull()) return false;
        auto t = view(v, path);
        if (t && *t == on) return true;
        if (t && *t != off) error(v, path, fmt::format("\"{}\" is not {} or {}", *t, off, on));
        return false;
    }
    // A word of an enum's one list (enum_names.h); the error names them all: "is not a, b or c".
    template <typename E, size_t N>
    std::optional<E> named(const ytree::Node& v, const Path& path, const std::array<const char*, N>& names) {
        auto t = view(v, path);
        if (!t) return std::nullopt;
        if (auto e = enum_from_name<E>(*t, names)) return e;
        std::string all = names[0];
        for (size_t i = 1; i < N; ++i) all += fmt::format("{}{}", i + 1 < N ? ", " : " or ", names[i]);
        error(v, path, fmt::format("\"{}\" is not {}", *t, all));
        return std::nullopt;
    }

    FileName file_;
    std::vector<ConfigIssue>& errors_;
    std::vector<ConfigIssue>& warnings_;
};

// The map `n` at section.prefix ("" for the section itself), by the field table
// (config_fields.h): its keys checked against the table's, then each number, switch and plain word
// directly under it read into its member of `c`. The rows the table does not read are left to the
// caller. False (the error recorded) when `n` is not a map.
bool read_fields(Reader& r, const ytree::Node& n, std::string_view section, std::string_view prefix, Config& c);

}  // namespace svcgate::ctl
