// Range statistics and the calibration methods (tensor_ranges.h).
#include "compiler/quantize/tensor_ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "support/error.h"

namespace kiln::compiler {

void TensorStats::add_range(const Tensor& t) {
    dtype = t.dtype();
    if (t.dtype() != DType::kFloat32 || t.numel() == 0) return;
    const float* x = t.data_as<float>();
    auto [lo, hi] = std::minmax_element(x, x + t.numel());
    min = seen ? std::min(min, *lo) : *lo;
    max = seen ? std::max(max, *hi) : *hi;
    seen = true;
}

void TensorStats::add_histogram(const Tensor& t) {
    if (t.dtype() != DType::kFloat32 || !seen) return;
    if (hist.empty()) hist.assign(kBins, 0), abs_hist.assign(kBins, 0);
    const float* x = t.data_as<float>();
    const double width = (static_cast<double>(max) - min) / kBins;
    const double abs_width = std::max(std::fabs(min), std::fabs(max)) / static_cast<double>(kBins);
    for (int64_t i = 0; i < t.numel(); ++i) {
        const int b = width > 0 ? static_cast<int>((x[i] - static_cast<double>(min)) / width) : 0;
        const int a = abs_width > 0 ? static_cast<int>(std::fabs(x[i]) / abs_width) : 0;
        ++hist[std::clamp(b, 0, kBins - 1)];
        ++abs_hist[std::clamp(a, 0, kBins - 1)];
    }
    count += t.numel();
}

namespace {

std::pair<float, float> percentile_range(const TensorStats& s, double percentile) {
    const double width = (static_cast<double>(s.max) - s.min) / TensorStats::kBins;
    const double tail = s.count * (100.0 - percentile) / 100.0;  // values allowed outside, per side
    int lo = 0, hi = TensorStats::kBins - 1;
    for (double below = 0; lo < hi && below + s.hist[lo] <= tail; ++lo) below += s.hist[lo];
    for (double above = 0; hi > lo && above + s.hist[hi] <= tail; --hi) above += s.hist[hi];
    return {static_cast<float>(s.min + lo * width), static_cast<float>(s.min + (hi + 1) * width)};
}

}  // namespace

float entropy_threshold(const std::vector<int64_t>& h, float abs_max, int nq) {
    const int n = static_cast<int>(h.size());
    const double width = static_cast<double>(abs_max) / n;
    double best_kl = std::numeric_limits<double>::infinity();
    int best = n;
    std::vector<double> p, q;
    for (int i = nq; i <= n; ++i) {
        p.assign(h.begin(), h.begin() + i);
        for (int j = i; j < n; ++j) p[i - 1] += h[j];  // outliers clipped into the last bin
        q.assign(i, 0.0);
        const int merged = i / nq;
        for (int j = 0; j < nq; ++j) {  // Q: the first i bins (no outliers) merged into nq, spread
            const int start = j * merged, stop = j == nq - 1 ? i : start + merged;  // over P's nonzero bins
            double sum = 0;
            int nonzero = 0;
            for (int k = start; k < stop; ++k) sum += h[k], nonzero += p[k] != 0;
            for (int k = start; k < stop; ++k) q[k] = (p[k] != 0 && nonzero) ? sum / nonzero : 0.0;
        }
        double ps = 0, qs = 0;
        for (int k = 0; k < i; ++k) ps += p[k], qs += q[k];
        if (ps == 0 || qs == 0) continue;
        double kl = 0;
        for (int k = 0; k < i; ++k) {
            if (p[k] == 0) continue;
            const double pk = p[k] / ps, qk = std::max(q[k] / qs, 1e-12);  // smoothing where Q is 0
            kl += pk * std::log(pk / qk);
        }
        if (kl < best_kl) best_kl = kl, best = i;
    }
    return static_cast<float>(best * width);
}

std::pair<float, float> choose_range(const TensorStats& s, CalibrationMethod m, double percentile) {
    KILN_ICHECK(s.seen);
    if (m == CalibrationMethod::kMinMax || s.count == 0) return {s.min, s.max};
    if (m == CalibrationMethod::kPercentile) return percentile_range(s, percentile);
    const float t = entropy_threshold(s.abs_hist, std::max(std::fabs(s.min), std::fabs(s.max)));
    return s.min >= 0 ? std::pair{0.0f, t} : std::pair{-t, t};
}

}  // namespace kiln::compiler
