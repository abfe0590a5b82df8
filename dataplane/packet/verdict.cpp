#include "dataplane/packet/verdict.h"

#include <array>

namespace svcgate::dp {

namespace {
constexpr std::array<std::string_view, kDropReasons> kNames = {
#define SVCGATE_X(name, desc) #name,
    SVCGATE_DROP_REASONS(SVCGATE_X)
#undef SVCGATE_X
};
constexpr std::array<std::string_view, kDropReasons> kDescs = {
#define SVCGATE_X(name, desc) desc,
    SVCGATE_DROP_REASONS(SVCGATE_X)
#undef SVCGATE_X
};
}  // namespace

std::string_view drop_reason_name(DropReason r) noexcept {
    auto i = static_cast<unsigned>(r);
    return i < kDropReasons ? kNames[i] : "?";
}

std::string_view drop_reason_description(DropReason r) noexcept {
    auto i = static_cast<unsigned>(r);
    return i < kDropReasons ? kDescs[i] : "?";
}

}  // namespace svcgate::dp
