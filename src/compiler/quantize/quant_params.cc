// Scale / zero point choice and weight quantization (quant_params.h).
#include "compiler/quantize/quant_params.h"

#include <algorithm>
#include <cmath>

#include "support/error.h"

namespace kiln::compiler {

QRange quant_range(DType t, bool symmetric) {
    if (t == DType::kUInt8) return {0, 255};
    KILN_CHECK(t == DType::kInt8, kUnsupported) << "quantized type " << dtype_name(t) << ": expected uint8 or int8";
    return symmetric ? QRange{-127, 127} : QRange{-128, 127};
}

ScaleZero scale_zero_point(float rmin, float rmax, QRange q, bool symmetric) {
    rmin = std::min(rmin, 0.0f);
    rmax = std::max(rmax, 0.0f);
    if (symmetric) {
        const float m = std::max(std::fabs(rmin), std::fabs(rmax));
        rmin = -m;
        rmax = m;
    }
    const float dr = rmax - rmin;
    if (dr == 0.0f) return {1.0f, 0};
    const float scale = dr / static_cast<float>(q.qmax - q.qmin);
    if (symmetric) return {scale, 0};  // (qmin + qmax) / 2 rounds to 0 for s8's symmetric range
    const float zp = std::nearbyint(static_cast<float>(q.qmin) - rmin / scale);
    return {scale, static_cast<int32_t>(std::clamp(zp, static_cast<float>(q.qmin), static_cast<float>(q.qmax)))};
}

QuantizedWeight quantize_weight(const Tensor& w, int axis, QRange q) {
    KILN_ICHECK(w.dtype() == DType::kFloat32);
    const Shape& s = w.shape();
    const int64_t channels = axis < 0 ? 1 : s[axis];
    int64_t inner = 1;  // elements between two steps of the channel index
    for (size_t d = axis < 0 ? 0 : axis + 1; d < s.size(); ++d) inner *= s[d];
    if (axis < 0) inner = w.numel();
    const float* x = w.data_as<float>();
    std::vector<float> absmax(channels, 0.0f);
    for (int64_t i = 0; i < w.numel(); ++i) {
        float& m = absmax[(i / inner) % channels];
        m = std::max(m, std::fabs(x[i]));
    }
    QuantizedWeight out{Tensor(DType::kInt8, s), Tensor(DType::kFloat32, axis < 0 ? Shape{} : Shape{channels})};
    for (int64_t c = 0; c < channels; ++c)
        out.scale.data_as<float>()[c] = scale_zero_point(-absmax[c], absmax[c], q, true).scale;
    int8_t* y = out.values.data_as<int8_t>();
    for (int64_t i = 0; i < w.numel(); ++i) {
        const float v = std::nearbyint(x[i] / out.scale.data_as<float>()[(i / inner) % channels]);
        y[i] = static_cast<int8_t>(std::clamp(v, static_cast<float>(q.qmin), static_cast<float>(q.qmax)));
    }
    return out;
}

QuantizedWeight quantize_bias(const Tensor& b, float x_scale, const Tensor& w_scale) {
    KILN_ICHECK(b.dtype() == DType::kFloat32 && w_scale.dtype() == DType::kFloat32);
    const int64_t n = b.numel(), ns = w_scale.numel();
    KILN_ICHECK(ns == 1 || ns == n);
    QuantizedWeight out{Tensor(DType::kInt32, b.shape()), Tensor(DType::kFloat32, w_scale.shape())};
    for (int64_t c = 0; c < ns; ++c) {
        const float s = x_scale * w_scale.data_as<float>()[c];
        out.scale.data_as<float>()[c] = s == 0.0f ? 1.0f : s;  // an all-zero weight channel
    }
    for (int64_t i = 0; i < n; ++i) {
        const double v = std::nearbyint(b.data_as<float>()[i] / out.scale.data_as<float>()[ns == 1 ? 0 : i]);
        out.values.data_as<int32_t>()[i] = static_cast<int32_t>(std::clamp(v, -2147483648.0, 2147483647.0));
    }
    return out;
}

}  // namespace kiln::compiler
