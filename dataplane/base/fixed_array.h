// A fixed-size array for the tables workers read: filled by the control plane (from a vector it
// built, or element by element into its final size) and never resized while published, so the
// fast path holds no growable container. Indexing compiles to what a raw array's does. A large
// one lives on huge pages (table_memory.h).
//
// Runs on: built on the control thread; read by workers.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "dataplane/base/table_memory.h"

namespace svcgate::dp {

template <typename T>
class FixedArray {
public:
    FixedArray() = default;
    explicit FixedArray(size_t n) : data_(make_table<T>(n)), size_(n) {}
    explicit FixedArray(std::vector<T>&& v) : FixedArray(v.size()) {
        for (size_t i = 0; i < size_; ++i) data_[i] = std::move(v[i]);
    }
    FixedArray(FixedArray&&) noexcept = default;
    FixedArray& operator=(FixedArray&&) noexcept = default;

    T& operator[](size_t i) noexcept { return data_[i]; }
    const T& operator[](size_t i) const noexcept { return data_[i]; }
    T* data() noexcept { return data_.get(); }
    const T* data() const noexcept { return data_.get(); }
    size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    T* begin() noexcept { return data_.get(); }
    T* end() noexcept { return data_.get() + size_; }
    const T* begin() const noexcept { return data_.get(); }
    const T* end() const noexcept { return data_.get() + size_; }

private:
    TablePtr<T> data_;
    size_t size_ = 0;
};

}  // namespace svcgate::dp
