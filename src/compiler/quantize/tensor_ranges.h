// What calibration records of one tensor over all calibration batches, and the range each
// CalibrationMethod chooses from it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/quantize.h"
#include "support/tensor.h"

namespace kiln::compiler {

/// The statistics of one tensor: its dtype, min and max (pass 1), and the histograms of its
/// values over [min, max] and of |value| over [0, max |value|] (pass 2, for percentile and
/// entropy).
struct TensorStats {
    static constexpr int kBins = 2048;
    DType dtype = DType::kFloat32;
    bool seen = false;
    float min = 0, max = 0;
    std::vector<int64_t> hist, abs_hist;
    int64_t count = 0;

    /// Pass 1: widens [min, max] by t's values (f32 only; another dtype is only recorded).
    void add_range(const Tensor& t);
    /// Pass 2: counts t's values into the histograms (bins fixed by pass 1's range).
    void add_histogram(const Tensor& t);
};

/// The [lo, hi] chosen for a tensor: kMinMax the range, kPercentile the values at `percentile`
/// and 100 - `percentile` per cent (the bin edge on the outer side), kEntropy the KL-optimal
/// threshold t of |value| ([0, t] when the tensor is never negative, else [-t, t]).
std::pair<float, float> choose_range(const TensorStats& s, CalibrationMethod m, double percentile);

/// Whether the method needs pass 2.
inline bool needs_histograms(CalibrationMethod m) { return m != CalibrationMethod::kMinMax; }

/// The KL-optimal threshold of |x| (TensorRT's entropy calibration, as ORT's
/// HistogramCalibrater(method="entropy") computes it): the i >= 128 minimising KL(P || Q), P the
/// first i bins with the outliers folded into the last, Q P merged into 128 bins and expanded.
float entropy_threshold(const std::vector<int64_t>& abs_hist, float abs_max, int quantized_bins = 128);

}  // namespace kiln::compiler
