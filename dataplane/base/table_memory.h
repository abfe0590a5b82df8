// Memory for the tables workers index at random: the flow table, the snapshot's arrays and hash
// tables, the counters. A table of 2 MiB or more is 2 MiB aligned and advised as transparent huge
// pages before anything touches it (advised afterwards, its pages are 4 KiB ones already, and only
// khugepaged's slow scan would ever merge them). With 4 KiB pages a random read in a table of
// megabytes misses the TLB as well as the cache, and the page walk is a dependent miss of its own:
// at 100,000 Services a new connection reads some eight lines of as many tables (bench/HISTORY.md,
// round ten). Smaller tables are plain aligned allocations.
//
// Runs on: the control thread (and the daemon's start), never a worker.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string_view>

namespace svcgate::dp {

inline constexpr size_t kHugePage = size_t{2} << 20;

struct TableLayout {
    size_t bytes;
    size_t align;
};
// What a table of `bytes` (of elements aligned to `align`) is allocated as.
constexpr TableLayout table_layout(size_t bytes, size_t align) noexcept {
    if (bytes >= kHugePage) return {(bytes + kHugePage - 1) & ~(kHugePage - 1), kHugePage};
    return {bytes ? bytes : 1, std::max(align, size_t{__STDCPP_DEFAULT_NEW_ALIGNMENT__})};
}

namespace detail {
// A huge table's own mapping, 2 MiB aligned: fresh pages, never the heap's. Recycled heap memory
// was touched before, as 4 KiB pages, and advice does not change pages already there.
inline void* map_huge(size_t bytes) noexcept {
    void* m = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const auto at = reinterpret_cast<uintptr_t>(m);
    const uintptr_t aligned = (at + kHugePage - 1) & ~(kHugePage - 1);
    if (aligned > at) munmap(m, aligned - at);
    if (const uintptr_t tail = at + bytes + kHugePage - (aligned + bytes))
        munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
    return reinterpret_cast<void*>(aligned);
}
// Gives back what table_alloc or make_table took.
inline void release(void* p, const TableLayout& l, bool mapped) noexcept {
    if (mapped)
        munmap(p, l.bytes);
    else
        ::operator delete (p, std::align_val_t{l.align});
}
}  // namespace detail

// `bytes` of memory (zeroed when it is a mapping of its own, else uninitialised); null when there
// is none. Freed by table_free with the same arguments.
inline void* table_alloc(size_t bytes, size_t align) noexcept {
    const TableLayout l = table_layout(bytes, align);
    if (l.align == kHugePage) return detail::map_huge(l.bytes);
    return ::operator new (l.bytes, std::align_val_t{l.align}, std::nothrow);
}
inline void table_free(void* p, size_t bytes, size_t align) noexcept {
    const TableLayout l = table_layout(bytes, align);
    if (p) detail::release(p, l, l.align == kHugePage);
}

// The mode /sys/kernel/mm/transparent_hugepage/enabled selects, from that file's text
// ("always [madvise] never" → "madvise"); empty when the text names none. Under "never" the
// advice above does nothing, and every table stays on 4 KiB pages (the daemon says so at start).
inline std::string_view thp_selected(std::string_view text) noexcept {
    const size_t open = text.find('['), close = text.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) return {};
    return text.substr(open + 1, close - open - 1);
}

// An array of n Ts in table memory, each value-initialised (as std::make_unique<T[]>(n)).
template <typename T>
struct TableDeleter {
    size_t n = 0;
    bool mapped = false;  // a mapping of its own, else from operator new
    void operator()(T* p) const noexcept {
        std::destroy_n(p, n);
        detail::release(p, table_layout(n * sizeof(T), alignof(T)), mapped);
    }
};
template <typename T>
using TablePtr = std::unique_ptr<T[], TableDeleter<T>>;

// Throws std::bad_alloc when there is no memory (the control plane's reload reports it). A huge
// table whose mapping fails comes from operator new, on whatever pages it has.
template <typename T>
TablePtr<T> make_table(size_t n) {
    if (n == 0) return TablePtr<T>();
    const TableLayout l = table_layout(n * sizeof(T), alignof(T));
    void* m = table_alloc(n * sizeof(T), alignof(T));
    const bool mapped = m && l.align == kHugePage;
    if (!m) m = ::operator new (l.bytes, std::align_val_t{l.align});  // throws
    T* p = static_cast<T*>(m);
    std::uninitialized_value_construct_n(p, n);
    return TablePtr<T>(p, TableDeleter<T>{n, mapped});
}

}  // namespace svcgate::dp
