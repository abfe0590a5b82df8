// An enum and its names from one list (VPP's foreach_* lists), so they cannot drift apart:
//
//   #define SVCGATE_SCHEDULERS(X) X(random, "random") X(maglev, "maglev")
//   enum class Scheduler : uint8_t { SVCGATE_SCHEDULERS(SVCGATE_ENUM_ID) };
//   inline constexpr std::array kSchedulerNames{SVCGATE_SCHEDULERS(SVCGATE_ENUM_NAME)};
//   enum_name(Scheduler::maglev, kSchedulerNames) == "maglev"
//
// The enumerators count from 0 in the list's order. A comment on an entry is a /* */ comment: a
// // comment would swallow the macro's line continuation.
//
// Runs on: any thread. Owns: nothing.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#define SVCGATE_ENUM_ID(id, name) id,
#define SVCGATE_ENUM_NAME(id, name) static_cast<const char*>(name),

namespace svcgate {

// "?" for a value outside the list (a corrupt byte read back from a file or the wire).
template <typename E, size_t N>
constexpr const char* enum_name(E e, const std::array<const char*, N>& names) noexcept {
    const auto i = static_cast<size_t>(e);
    return i < N ? names[i] : "?";
}

template <typename E, size_t N>
constexpr std::optional<E> enum_from_name(std::string_view s, const std::array<const char*, N>& names) noexcept {
    for (size_t i = 0; i < N; ++i)
        if (s == names[i]) return static_cast<E>(i);
    return std::nullopt;
}

}  // namespace svcgate
