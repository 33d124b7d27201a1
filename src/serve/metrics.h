// A small Prometheus registry: counters, gauges and histograms with labels, written in the text
// exposition format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/).
// Families are declared once (name, help, type, histogram buckets); series are created on first
// use per label set. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kiln::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class MetricsRegistry {
public:
    void declare_counter(const std::string& name, const std::string& help);
    void declare_gauge(const std::string& name, const std::string& help);
    void declare_histogram(const std::string& name, const std::string& help, std::vector<double> buckets);

    void add(const std::string& name, const Labels& labels, double value = 1);      // counter
    void set(const std::string& name, const Labels& labels, double value);          // gauge
    void observe(const std::string& name, const Labels& labels, double value);      // histogram

    /// The value of a counter or gauge series (0 when absent); for tests.
    double value(const std::string& name, const Labels& labels) const;
    /// Observations of a histogram series; for tests.
    uint64_t count(const std::string& name, const Labels& labels) const;

    std::string text() const;

private:
    enum class Type { kCounter, kGauge, kHistogram };
    struct Series {
        double value = 0;               // counter, gauge; the sum for a histogram
        uint64_t count = 0;             // histogram
        std::vector<uint64_t> buckets;  // histogram: observations <= bound (not cumulative)
    };
    struct Family {
        Type type;
        std::string help;
        std::vector<double> bounds;
        std::map<std::string, Series> series;  // by the rendered label set
    };
    Family& family_locked(const std::string& name, Type type);
    void declare(const std::string& name, Type type, const std::string& help, std::vector<double> bounds);

    mutable std::mutex mu_;
    std::map<std::string, Family> families_;
};

/// Bucket bounds growing by `factor` from `start` (`count` of them), like Prometheus' client.
std::vector<double> exponential_buckets(double start, double factor, int count);

}  // namespace kiln::serve
