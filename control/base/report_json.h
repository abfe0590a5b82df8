// Every report as JSON, through its `members` list (report_members.h): to_json writes the
// members in their order, from_json reads back what is there. A member that is std::optional is
// written as null when empty; one marked `omit` is left out. A reader takes what is there: a key
// that is missing or null leaves the member as it was. Here, under every feature, so that a
// feature's own output (trace --json) is written the way status is.
//
// Runs on: any thread (plain data).
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "control/base/report_members.h"

namespace svcgate::ctl::report {

namespace detail {
// Any member list's visitor, for the Report concept.
struct AnyMember {
    void operator()(const char*, auto&) const {}
    void operator()(const char*, auto&, Omit) const {}
};
}  // namespace detail

template <typename T>
concept Report = requires(T& r) {
    members(r, detail::AnyMember{});
};

template <typename J>
struct JsonWriter {
    J& j;
    template <typename T>
    void operator()(const char* key, const T& v) const {
        j[key] = v;
    }
    template <typename T>
    void operator()(const char* key, const std::optional<T>& v) const {
        j[key] = v ? J(*v) : J(nullptr);
    }
    template <typename T>
    void operator()(const char* key, const std::optional<T>& v, Omit) const {
        if (v) j[key] = *v;
    }
};

template <typename J>
struct JsonReader {
    const J& j;
    template <typename T>
    void operator()(const char* key, T& v) const {
        const auto it = j.find(key);
        if (it != j.end() && !it->is_null()) it->get_to(v);
    }
    template <typename T>
    void operator()(const char* key, std::optional<T>& v) const {
        const auto it = j.find(key);
        if (it != j.end() && !it->is_null()) it->get_to(v.emplace());
    }
    template <typename T>
    void operator()(const char* key, std::optional<T>& v, Omit) const {
        (*this)(key, v);
    }
};

template <typename J, Report T>
void to_json(J& j, const T& r) {
    j = J::object();
    members(r, JsonWriter<J>{j});
}

// Throws nlohmann::json::type_error when a member's value is of another type.
template <typename J, Report T>
void from_json(const J& j, T& r) {
    if (j.is_object()) members(r, JsonReader<J>{j});
}

template <typename J, typename T>
void to_json(J& j, const Keyed<T>& k) {
    j = J::object();
    for (const auto& [name, v] : k.items) j[name] = v;
}

template <typename J, typename T>
void from_json(const J& j, Keyed<T>& k) {
    if (!j.is_object()) return;
    for (const auto& [name, v] : j.items()) k.add(name, v.template get<T>());
}

}  // namespace svcgate::ctl::report
