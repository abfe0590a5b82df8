// What every report's `members` list is written with (views.h, report_json.h): named values in
// order, the tag for a member left out when empty, and the concept that lets one list serve a
// report and a const one. Here, under every feature, so that a feature declares its own report
// beside its code (control/lb/lb_report.h) and views.h gathers them.
//
// Runs on: any thread (plain data).
#pragma once

#include <concepts>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace svcgate::ctl::report {

// Named values in the order they were added, written as a JSON object ({"ext": {...}, ...}).
template <typename T>
struct Keyed {
    std::vector<std::pair<std::string, T>> items;
    void add(std::string name, T v) { items.emplace_back(std::move(name), std::move(v)); }
};

// The `members` list's tag for a member left out of the JSON when empty.
struct Omit {};
inline constexpr Omit omit{};

// `members(report, f)` takes a report or a const one.
template <typename P, typename T>
concept Of = std::same_as<std::remove_const_t<P>, T>;

}  // namespace svcgate::ctl::report
