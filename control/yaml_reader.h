// The YAML walker shared by the config and the Kubernetes-object loaders: converts values and
// records every issue with its file:line:column, so a load reports all errors, not the first.
//
// Runs on: the control thread and the command-line tools. Internal to control/.
#pragma once

#include <charconv>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include "yaml_tree.h"

#include "config_model.h"
#include "yaml_config.h"

namespace svcgate::ctl {

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
    void error(const ytree::Node& n, const std::string& path, std::string msg) {
        errors_.push_back(ConfigIssue{mark(n), path, std::move(msg)});
    }
    void warn(const ytree::Node& n, const std::string& path, std::string msg) {
        warnings_.push_back(ConfigIssue{mark(n), path, std::move(msg)});
    }
    // Warn about keys outside `known`; error when `n` is not a map.
    bool map(const ytree::Node& n, const std::string& path, std::initializer_list<std::string_view> known) {
        return map(n, path, std::span<const std::string_view>(known.begin(), known.size()));
    }
    bool map(const ytree::Node& n, const std::string& path, std::span<const std::string_view> known) {
        if (!n.IsMap()) {
            error(n, path, "expected a mapping");
            return false;
        }
        for (const auto& kv : n) {
            const std::string& k = kv.first.Scalar();
            bool ok = false;
            for (auto w : known) ok = ok || k == w;
            if (!ok) warn(kv.first, path.empty() ? k : path + "." + k, "unknown field (ignored)");
        }
        return true;
    }
    // A mapping whose other keys are not ours to judge (Kubernetes objects carry many).
    bool open_map(const ytree::Node& n, const std::string& path) {
        if (!n.IsMap()) {
            error(n, path, "expected a mapping");
            return false;
        }
        return true;
    }
    bool seq(const ytree::Node& n, const std::string& path) {
        if (!n.IsSequence()) {
            error(n, path, "expected a list");
            return false;
        }
        return true;
    }
    // The string at n[key], "" when the key is absent or null.
    std::string str_or_empty(const ytree::Node& n, const char* key, const std::string& path) {
        const ytree::Node v = n[key];
        if (!v || v.IsNull()) return {};
        return str(v, path + "." + key).value_or("");
    }
    std::optional<std::string> str(const ytree::Node& n, const std::string& path) {
        if (!n.IsScalar()) {
            error(n, path, "expected a string");
            return std::nullopt;
        }
        return n.Scalar();
    }
    template <typename T>
    std::optional<T> uint(const ytree::Node& n, const std::string& path, uint64_t lo, uint64_t hi) {
        if (!n.IsScalar()) {
            error(n, path, "expected a number");
            return std::nullopt;
        }
        const std::string& s = n.Scalar();
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc{} || p != s.data() + s.size() || s.empty()) {
            error(n, path, fmt::format("\"{}\" is not a number", s));
            return std::nullopt;
        }
        if (v < lo || v > hi) {
            error(n, path, fmt::format("{} is out of range {}-{}", v, lo, hi));
            return std::nullopt;
        }
        return static_cast<T>(v);
    }
    std::optional<bool> boolean(const ytree::Node& n, const std::string& path) {
        if (n.IsScalar()) {
            const auto& s = n.Scalar();
            if (s == "true" || s == "True" || s == "yes") return true;
            if (s == "false" || s == "False" || s == "no") return false;
        }
        error(n, path, "expected true or false");
        return std::nullopt;
    }
    std::optional<Ip4> ip(const ytree::Node& n, const std::string& path) {
        auto s = str(n, path);
        if (!s) return std::nullopt;
        auto a = parse_ip4(*s);
        if (!a) error(n, path, fmt::format("\"{}\" is not an IPv4 address", *s));
        return a;
    }
    std::optional<Cidr4> cidr(const ytree::Node& n, const std::string& path, bool keep_host = false) {
        auto s = str(n, path);
        if (!s) return std::nullopt;
        // kube-proxy trims loadBalancerSourceRanges; so do we, everywhere.
        std::string t = *s;
        t.erase(0, t.find_first_not_of(" \t"));
        t.erase(t.find_last_not_of(" \t") + 1);
        auto c = parse_cidr4(t, keep_host);
        if (!c) error(n, path, fmt::format("\"{}\" is not an IPv4 CIDR (a.b.c.d/len)", *s));
        return c;
    }
    template <typename T, typename F>
    std::vector<T> list(const ytree::Node& n, const std::string& path, F&& item) {
        std::vector<T> out;
        if (!n || n.IsNull()) return out;
        if (!seq(n, path)) return out;
        for (size_t i = 0; i < n.size(); ++i)
            if (auto v = item(n[i], fmt::format("{}[{}]", path, i))) out.push_back(*v);
        return out;
    }
    std::vector<Ip4> ips(const ytree::Node& n, const std::string& path) {
        return list<Ip4>(n, path, [&](const ytree::Node& x, const std::string& p) { return ip(x, p); });
    }
    std::vector<Cidr4> cidrs(const ytree::Node& n, const std::string& path) {
        return list<Cidr4>(n, path, [&](const ytree::Node& x, const std::string& p) { return cidr(x, p); });
    }
    const std::string& file() const { return file_.str(); }

private:
    FileName file_;
    std::vector<ConfigIssue>& errors_;
    std::vector<ConfigIssue>& warnings_;
};

}  // namespace svcgate::ctl
