#include "control/base/metrics_text.h"

#include <fmt/format.h>

namespace svcgate::ctl {

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void MetricsText::sample(std::string_view name, std::string_view labels, uint64_t value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value) : fmt::format("{}{{{}}} {}\n", name, labels, value);
}

void MetricsText::sample(std::string_view name, std::string_view labels, int64_t value) {
    out_ += labels.empty() ? fmt::format("{} {}\n", name, value) : fmt::format("{}{{{}}} {}\n", name, labels, value);
}

void MetricsText::gauge(std::string_view name, std::string_view help, uint64_t value) {
    family(name, "gauge", help);
    sample(name, "", value);
}

void MetricsText::gauge(std::string_view name, std::string_view help, double value, int decimals) {
    family(name, "gauge", help);
    sample(name, "", value, decimals);
}

void MetricsText::counter(std::string_view name, std::string_view help, uint64_t value) {
    family(name, "counter", help);
    sample(name, "", value);
}

void MetricsText::histogram(std::string_view name, std::string_view help, const Histogram& h) {
    family(name, "histogram", help);
    for (size_t i = 0; i < h.bounds().size(); ++i)
        out_ += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, h.bounds()[i], h.buckets()[i]);
    out_ += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, h.count(), name, h.sum(), name,
                        h.count());
}

void MetricsText::sample(std::string_view name, std::string_view labels, double value, int decimals) {
    out_ += labels.empty() ? fmt::format("{} {:.{}f}\n", name, value, decimals)
                           : fmt::format("{}{{{}}} {:.{}f}\n", name, labels, value, decimals);
}

}  // namespace svcgate::ctl
