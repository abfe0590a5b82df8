#include "control/config/health_check.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace svcgate::ctl {

namespace {

using Type = HealthCheckConfig::Type;

constexpr std::string_view kKeys[] = {"type",       "port", "path", "host",         "expect",     "interval_ms",
                                      "timeout_ms", "rise", "fall", "expect_reply", "on_failure", "all_down"};

std::optional<uint64_t> number(std::string_view v, uint64_t lo, uint64_t hi) {
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < lo || n > hi) return std::nullopt;
    return n;
}

// "200-399", "200,204", "200-299,404": HTTP statuses, each 100-599.
bool parse_expect(std::string_view v, std::vector<HealthCheckConfig::Range>& out) {
    out.clear();
    while (!v.empty()) {
        const size_t comma = v.find(',');
        std::string_view item = v.substr(0, comma);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        const size_t dash = item.find('-');
        const auto lo = number(item.substr(0, dash), 100, 599);
        const auto hi = dash == std::string_view::npos ? lo : number(item.substr(dash + 1), 100, 599);
        if (!lo || !hi || *hi < *lo) return false;
        out.push_back({static_cast<uint16_t>(*lo), static_cast<uint16_t>(*hi)});
        v = comma == std::string_view::npos ? std::string_view() : v.substr(comma + 1);
    }
    return !out.empty();
}

// One key's value into `hc`: "" or what is wrong with it.
std::string set(HealthCheckConfig& hc, std::string_view key, std::string_view v) {
    auto uint_field = [&](uint32_t& field, uint64_t lo, uint64_t hi) -> std::string {
        const auto n = number(v, lo, hi);
        if (!n) return fmt::format("\"{}\" is not a number from {} to {}", v, lo, hi);
        field = static_cast<uint32_t>(*n);
        return {};
    };
    auto word = [&](bool& field, const char* off, const char* on) -> std::string {
        if (v != off && v != on) return fmt::format("\"{}\" is not {} or {}", v, off, on);
        field = v == on;
        return {};
    };
    if (key == "type") {
        if (v == "tcp")
            hc.type = Type::tcp;
        else if (v == "http")
            hc.type = Type::http;
        else if (v == "udp")
            hc.type = Type::udp;
        else
            return fmt::format("\"{}\" is not tcp, http or udp", v);
        return {};
    }
    if (key == "port") {
        uint32_t p = 0;
        std::string e = uint_field(p, 1, 65535);
        hc.port = static_cast<uint16_t>(p);
        return e;
    }
    if (key == "path") {
        if (v.empty() || v.front() != '/' || v.find_first_of(" \r\n") != std::string_view::npos)
            return fmt::format("\"{}\" is not a path (it starts with /, without spaces)", v);
        hc.path = v;
        return {};
    }
    if (key == "host") {
        if (v.find_first_of(" \r\n") != std::string_view::npos) return fmt::format("\"{}\" is not a host name", v);
        hc.host = v;
        return {};
    }
    if (key == "expect")
        return parse_expect(v, hc.expect) ? std::string()
                                          : fmt::format("\"{}\" is not a list of HTTP statuses (200-399, 200,204)", v);
    if (key == "interval_ms") return uint_field(hc.interval_ms, 100, 3'600'000);
    if (key == "timeout_ms") return uint_field(hc.timeout_ms, 10, 600'000);
    if (key == "rise") return uint_field(hc.rise, 1, 100);
    if (key == "fall") return uint_field(hc.fall, 1, 100);
    if (key == "expect_reply") return word(hc.expect_reply, "false", "true");
    if (key == "on_failure") return word(hc.reset, "keep", "reset");
    if (key == "all_down") return word(hc.panic, "reject", "panic");
    return unknown_key(key, kKeys);
}

// What the whole check gets wrong once every key is read: "" if nothing. A timeout not given is
// the interval where that is shorter than the default.
std::string check(HealthCheckConfig& hc, bool has_timeout, bool has_path, bool has_host, bool has_expect,
                  bool has_reply) {
    if (!has_timeout) hc.timeout_ms = std::min(hc.timeout_ms, hc.interval_ms);
    if (hc.timeout_ms > hc.interval_ms)
        return fmt::format("timeout_ms ({}) is longer than interval_ms ({})", hc.timeout_ms, hc.interval_ms);
    if (hc.type != Type::http && (has_path || has_host || has_expect))
        return "path, host and expect are for http checks";
    if (hc.type != Type::udp && has_reply) return "expect_reply is for udp checks";
    return {};
}

}  // namespace

const char* health_check_type_name(HealthCheckConfig::Type t) {
    return t == Type::http ? "http" : t == Type::udp ? "udp" : "tcp";
}

std::string describe(const HealthCheckConfig& hc) {
    std::string what = health_check_type_name(hc.type);
    if (hc.type == Type::http) what += " GET " + hc.path;
    if (hc.port) what += fmt::format(" :{}", hc.port);
    return fmt::format("{} every {} ms, timeout {} ms, rise {}, fall {}", what, hc.interval_ms, hc.timeout_ms, hc.rise,
                       hc.fall);
}

std::optional<HealthCheckConfig> read_health_check(Reader& r, const ytree::Node& n, const Path& path) {
    if (!r.map(n, path, kKeys)) return std::nullopt;
    HealthCheckConfig hc{.mark = r.mark(n)};
    bool ok = true;
    for (const auto& kv : n) {
        const std::string& key = kv.first.Scalar();
        bool known = false;
        for (std::string_view k : kKeys) known = known || k == key;
        if (!known) continue;  // said by map()
        std::string value;
        if (kv.second.IsSequence()) {  // expect: [200, 204]
            for (size_t i = 0; i < kv.second.size(); ++i) value += (i ? "," : "") + kv.second[i].Scalar();
        } else if (kv.second.IsScalar()) {
            value = kv.second.Scalar();
        }
        if (std::string e = set(hc, key, value); !e.empty()) {
            r.error(kv.second, path.str() + "." + key, std::move(e));
            ok = false;
        }
    }
    if (!n["type"]) {
        r.error(n, path, "a health check needs type (tcp, http or udp)");
        ok = false;
    }
    if (std::string e = check(hc, bool(n["timeout_ms"]), bool(n["path"]), bool(n["host"]), bool(n["expect"]),
                              bool(n["expect_reply"]));
        ok && !e.empty()) {
        r.error(n, path, std::move(e));
        ok = false;
    }
    return ok ? std::optional(hc) : std::nullopt;
}

std::optional<HealthCheckConfig> parse_health_check(std::string_view text, std::string& error) {
    HealthCheckConfig hc;
    bool has_timeout = false, has_path = false, has_host = false, has_expect = false, has_reply = false;
    size_t i = 0;
    bool first = true;
    while (i < text.size()) {
        while (i < text.size() && text[i] == ' ') ++i;
        if (i == text.size()) break;
        size_t end = text.find(' ', i);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view word = text.substr(i, end - i);
        i = end;
        if (first) {  // TYPE[:PATH]
            first = false;
            const size_t colon = word.find(':');
            if (std::string e = set(hc, "type", word.substr(0, colon)); !e.empty())
                return error = "type: " + e, std::nullopt;
            if (colon != std::string_view::npos) {
                has_path = true;
                if (std::string e = set(hc, "path", word.substr(colon + 1)); !e.empty())
                    return error = "path: " + e, std::nullopt;
            }
            continue;
        }
        const size_t eq = word.find('=');
        if (eq == std::string_view::npos) return error = fmt::format("\"{}\" is not KEY=VALUE", word), std::nullopt;
        const std::string_view key = word.substr(0, eq);
        if (key == "type") return error = "the type comes first, as TYPE[:PATH]", std::nullopt;
        if (std::string e = set(hc, key, word.substr(eq + 1)); !e.empty())
            return error = fmt::format("{}: {}", key, e), std::nullopt;
        has_timeout = has_timeout || key == "timeout_ms";
        has_path = has_path || key == "path";
        has_host = has_host || key == "host";
        has_expect = has_expect || key == "expect";
        has_reply = has_reply || key == "expect_reply";
    }
    if (first) return error = "empty: give TYPE[:PATH] [KEY=VALUE ...], e.g. http:/healthz", std::nullopt;
    if (std::string e = check(hc, has_timeout, has_path, has_host, has_expect, has_reply); !e.empty())
        return error = std::move(e), std::nullopt;
    return hc;
}

}  // namespace svcgate::ctl
