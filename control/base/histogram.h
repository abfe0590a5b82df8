// A Prometheus histogram's state: fixed upper bounds, a cumulative count per bound (as the text
// format exposes them), the count and the sum. MetricsText::histogram writes it.
//
// Runs on: whoever owns it (no lock inside).
#pragma once

#include <cstdint>
#include <vector>

namespace svcgate::ctl {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size(), 0) {}
    // first, first·factor, ... : n bounds.
    static std::vector<double> exponential(double first, double factor, unsigned n) {
        std::vector<double> b;
        for (double le = first; b.size() < n; le *= factor) b.push_back(le);
        return b;
    }

    void observe(double v) noexcept {
        for (size_t i = 0; i < bounds_.size(); ++i)
            if (v <= bounds_[i]) ++buckets_[i];
        ++count_;
        sum_ += v;
    }

    const std::vector<double>& bounds() const { return bounds_; }
    const std::vector<uint64_t>& buckets() const { return buckets_; }  // cumulative: ≤ bounds()[i]
    uint64_t count() const { return count_; }
    double sum() const { return sum_; }

private:
    std::vector<double> bounds_;
    std::vector<uint64_t> buckets_;
    uint64_t count_ = 0;
    double sum_ = 0;
};

}  // namespace svcgate::ctl
