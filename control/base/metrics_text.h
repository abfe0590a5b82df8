// The Prometheus text exposition format, written a metric family at a time: its HELP and TYPE,
// then its samples. Each feature's collector writes into one (control/api/metrics_collectors.h
// lists them); /metrics is their concatenation.
//
// Runs on: any thread (a plain value).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "control/base/histogram.h"

namespace svcgate::ctl {

// The text exposition format: a family's HELP and TYPE, then its samples.
class MetricsText {
public:
    void family(std::string_view name, std::string_view type, std::string_view help);
    void sample(std::string_view name, std::string_view labels, uint64_t value);
    void sample(std::string_view name, std::string_view labels, int64_t value);
    void sample(std::string_view name, std::string_view labels, double value, int decimals);
    // A family of one unlabeled sample.
    void gauge(std::string_view name, std::string_view help, uint64_t value);
    void gauge(std::string_view name, std::string_view help, double value, int decimals);
    void counter(std::string_view name, std::string_view help, uint64_t value);
    // A whole histogram family: HELP, TYPE, the buckets, +Inf, sum and count.
    void histogram(std::string_view name, std::string_view help, const Histogram& h);
    std::string& str() { return out_; }

private:
    std::string out_;
};

}  // namespace svcgate::ctl
