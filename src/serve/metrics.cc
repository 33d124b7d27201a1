// The Prometheus registry (metrics.h).
#include "serve/metrics.h"

#include <cmath>
#include <sstream>

#include "kiln/error.h"

namespace kiln::serve {
namespace {

std::string escape(const std::string& s, bool quote) {
    std::string out;
    for (char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '"' && quote) out += "\\\"";
        else out += c;
    }
    return out;
}

/// `{a="x",b="y"}` (empty for no labels), the series key and its printed form.
std::string render(const Labels& labels) {
    if (labels.empty()) return "";
    std::string s = "{";
    for (size_t i = 0; i < labels.size(); ++i)
        s += (i ? "," : "") + labels[i].first + "=\"" + escape(labels[i].second, true) + "\"";
    return s + "}";
}

/// Adds one label to a rendered set (the histogram's `le`).
std::string with_label(const std::string& rendered, const std::string& label) {
    if (rendered.empty()) return "{" + label + "}";
    return rendered.substr(0, rendered.size() - 1) + "," + label + "}";
}

std::string number(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    std::ostringstream os;
    os.precision(17);
    os << v;
    return os.str();
}

}  // namespace

std::vector<double> exponential_buckets(double start, double factor, int count) {
    std::vector<double> b;
    for (int i = 0; i < count; ++i, start *= factor) b.push_back(start);
    return b;
}

void MetricsRegistry::declare(const std::string& name, Type type, const std::string& help, std::vector<double> bounds) {
    std::lock_guard<std::mutex> lock(mu_);
    Family& f = families_[name];
    f.type = type;
    f.help = help;
    f.bounds = std::move(bounds);
}

void MetricsRegistry::declare_counter(const std::string& name, const std::string& help) {
    declare(name, Type::kCounter, help, {});
}
void MetricsRegistry::declare_gauge(const std::string& name, const std::string& help) {
    declare(name, Type::kGauge, help, {});
}
void MetricsRegistry::declare_histogram(const std::string& name, const std::string& help, std::vector<double> buckets) {
    declare(name, Type::kHistogram, help, std::move(buckets));
}

MetricsRegistry::Family& MetricsRegistry::family_locked(const std::string& name, Type type) {
    auto it = families_.find(name);
    KILN_CHECK(it != families_.end() && it->second.type == type, kInternal)
        << "bug in Kiln: metric '" << name << "' used before it was declared (or with another type)";
    return it->second;
}

void MetricsRegistry::add(const std::string& name, const Labels& labels, double value) {
    std::lock_guard<std::mutex> lock(mu_);
    family_locked(name, Type::kCounter).series[render(labels)].value += value;
}

void MetricsRegistry::set(const std::string& name, const Labels& labels, double value) {
    std::lock_guard<std::mutex> lock(mu_);
    family_locked(name, Type::kGauge).series[render(labels)].value = value;
}

void MetricsRegistry::observe(const std::string& name, const Labels& labels, double value) {
    std::lock_guard<std::mutex> lock(mu_);
    Family& f = family_locked(name, Type::kHistogram);
    Series& s = f.series[render(labels)];
    if (s.buckets.empty()) s.buckets.assign(f.bounds.size(), 0);
    for (size_t i = 0; i < f.bounds.size(); ++i)
        if (value <= f.bounds[i]) {
            ++s.buckets[i];
            break;
        }
    s.value += value;
    ++s.count;
}

double MetricsRegistry::value(const std::string& name, const Labels& labels) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto f = families_.find(name);
    if (f == families_.end()) return 0;
    auto s = f->second.series.find(render(labels));
    return s == f->second.series.end() ? 0 : s->second.value;
}

uint64_t MetricsRegistry::count(const std::string& name, const Labels& labels) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto f = families_.find(name);
    if (f == families_.end()) return 0;
    auto s = f->second.series.find(render(labels));
    return s == f->second.series.end() ? 0 : s->second.count;
}

std::string MetricsRegistry::text() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::ostringstream os;
    for (const auto& [name, f] : families_) {
        static const char* types[] = {"counter", "gauge", "histogram"};
        os << "# HELP " << name << " " << escape(f.help, false) << "\n";
        os << "# TYPE " << name << " " << types[static_cast<int>(f.type)] << "\n";
        for (const auto& [labels, s] : f.series) {
            if (f.type != Type::kHistogram) {
                os << name << labels << " " << number(s.value) << "\n";
                continue;
            }
            uint64_t cumulative = 0;
            for (size_t i = 0; i < f.bounds.size(); ++i) {
                cumulative += s.buckets[i];
                os << name << "_bucket" << with_label(labels, "le=\"" + number(f.bounds[i]) + "\"") << " " << cumulative << "\n";
            }
            os << name << "_bucket" << with_label(labels, "le=\"+Inf\"") << " " << s.count << "\n";
            os << name << "_sum" << labels << " " << number(s.value) << "\n";
            os << name << "_count" << labels << " " << s.count << "\n";
        }
    }
    return os.str();
}

}  // namespace kiln::serve
