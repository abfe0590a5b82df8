#include "dataplane/base/toeplitz.h"

namespace svcgate::dp {

uint32_t toeplitz_hash(std::span<const uint8_t> key, std::span<const uint8_t> data) noexcept {
    uint32_t h = 0;
    if (key.size() < data.size() + 4) return 0;
    for (size_t i = 0; i < data.size(); ++i)
        for (unsigned bit = 0; bit < 8; ++bit)
            if (data[i] & (0x80u >> bit)) h ^= ToeplitzTable<1>::key_word(key, i * 8 + bit);
    return h;
}

}  // namespace svcgate::dp
