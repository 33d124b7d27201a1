#include "data/transforms.h"

#include <cstring>

#include "data/sources.h"
#include "support/error.h"

namespace kiln::data {
namespace {

Tensor& field_of(Example& ex, const std::string& field, const char* stage) {
    auto it = ex.find(field);
    if (it == ex.end()) {
        std::string names;
        for (const auto& [k, v] : ex) names += (names.empty() ? "" : ", ") + k;
        KILN_THROW(kInvalidArgument) << stage << ": the record has no field '" << field << "' (fields: " << names
                                     << ")";
    }
    return it->second;
}

Tensor& image_of(Example& ex, const std::string& field, const char* stage) {
    Tensor& t = field_of(ex, field, stage);
    KILN_CHECK(t.dtype() == DType::kFloat32 && t.shape().size() == 3, kInvalidArgument)
        << stage << ": field '" << field << "' must be f32 [C,H,W], got " << tensor_type_str(t)
        << " (cast/scale it first)";
    return t;
}

}  // namespace

MapFn normalize(std::vector<float> mean, std::vector<float> stdev, std::string field) {
    KILN_CHECK(!mean.empty() && !stdev.empty(), kInvalidArgument) << "normalize: empty mean or std";
    for (float s : stdev) KILN_CHECK(s != 0.0f, kInvalidArgument) << "normalize: a std of 0";
    return [mean = std::move(mean), stdev = std::move(stdev), field = std::move(field)](Example& ex, Rng&) {
        Tensor& t = field_of(ex, field, "normalize");
        KILN_CHECK(t.dtype() == DType::kFloat32 && !t.shape().empty(), kInvalidArgument)
            << "normalize: field '" << field << "' must be f32 [C,...], got " << tensor_type_str(t);
        int64_t c = t.shape()[0], per = c ? t.numel() / c : 0;
        for (const auto* v : {&mean, &stdev})
            KILN_CHECK(v->size() == 1 || static_cast<int64_t>(v->size()) == c, kInvalidArgument)
                << "normalize: " << v->size() << " values for field '" << field << "' with " << c
                << " channels (" << tensor_type_str(t) << ")";
        float* x = t.data_as<float>();
        for (int64_t k = 0; k < c; ++k) {
            float m = mean[mean.size() == 1 ? 0 : k], inv = 1.0f / stdev[stdev.size() == 1 ? 0 : k];
            for (int64_t i = 0; i < per; ++i) x[k * per + i] = (x[k * per + i] - m) * inv;
        }
    };
}

MapFn random_crop(int64_t h, int64_t w, int64_t padding, std::string field) {
    KILN_CHECK(h >= 1 && w >= 1 && padding >= 0, kInvalidArgument)
        << "random_crop(" << h << ", " << w << ", padding " << padding << "): expected h, w >= 1 and padding >= 0";
    return [h, w, padding, field = std::move(field)](Example& ex, Rng& rng) {
        Tensor& t = image_of(ex, field, "random_crop");
        int64_t c = t.shape()[0], ih = t.shape()[1], iw = t.shape()[2];
        int64_t ph = ih + 2 * padding, pw = iw + 2 * padding;
        KILN_CHECK(h <= ph && w <= pw, kInvalidArgument)
            << "random_crop: a " << h << "x" << w << " crop of field '" << field << "' " << tensor_type_str(t)
            << " padded by " << padding << " (" << ph << "x" << pw << ")";
        // Top-left corner in padded coordinates, uniform over the valid positions.
        int64_t y0 = std::uniform_int_distribution<int64_t>(0, ph - h)(rng);
        int64_t x0 = std::uniform_int_distribution<int64_t>(0, pw - w)(rng);
        Tensor out(DType::kFloat32, {c, h, w});  // zero-filled: the padding
        const float* src = t.data_as<float>();
        float* dst = out.data_as<float>();
        for (int64_t k = 0; k < c; ++k)
            for (int64_t y = 0; y < h; ++y) {
                int64_t sy = y0 + y - padding;
                if (sy < 0 || sy >= ih) continue;
                for (int64_t x = 0; x < w; ++x) {
                    int64_t sx = x0 + x - padding;
                    if (sx >= 0 && sx < iw) dst[(k * h + y) * w + x] = src[(k * ih + sy) * iw + sx];
                }
            }
        t = std::move(out);
    };
}

MapFn random_flip_horizontal(double p, std::string field) {
    KILN_CHECK(p >= 0.0 && p <= 1.0, kInvalidArgument) << "random_flip_horizontal: p = " << p << " is outside [0, 1]";
    return [p, field = std::move(field)](Example& ex, Rng& rng) {
        Tensor& t = field_of(ex, field, "random_flip_horizontal");
        KILN_CHECK(!t.shape().empty() && t.dtype() != DType::kString, kInvalidArgument)
            << "random_flip_horizontal: field '" << field << "' " << tensor_type_str(t) << " has no last axis to flip";
        // Draw unconditionally, so the stream consumed does not depend on p.
        if (!(std::uniform_real_distribution<double>(0.0, 1.0)(rng) < p)) return;
        int64_t w = t.shape().back(), rows = w ? t.numel() / w : 0;
        size_t es = dtype_size(t.dtype());
        char* x = static_cast<char*>(t.data());
        std::vector<char> tmp(es);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t i = 0, j = w - 1; i < j; ++i, --j) {
                char* a = x + (r * w + i) * es;
                char* b = x + (r * w + j) * es;
                std::memcpy(tmp.data(), a, es);
                std::memcpy(a, b, es);
                std::memcpy(b, tmp.data(), es);
            }
    };
}

MapFn cast(DType dtype, std::string field) {
    return [dtype, field = std::move(field)](Example& ex, Rng&) {
        Tensor& t = field_of(ex, field, "cast");
        if (t.dtype() == dtype) return;
        KILN_CHECK(t.dtype() != DType::kString && dtype != DType::kString, kInvalidArgument)
            << "cast: field '" << field << "' " << tensor_type_str(t) << " to " << dtype_name(dtype)
            << ": strings do not convert";
        Tensor out(dtype, t.shape());
        bool to_int = !dtype_is_float(dtype) && dtype != DType::kBool;
        for (int64_t i = 0, n = t.numel(); i < n; ++i) {
            if (to_int && !dtype_is_float(t.dtype()))
                out.set_i64(i, t.get_i64(i));  // exact for 64-bit integers
            else
                out.set_f64(i, t.get_f64(i));
        }
        t = std::move(out);
    };
}

MapFn scale(float factor, std::string field) {
    return [factor, field = std::move(field)](Example& ex, Rng&) {
        Tensor& t = field_of(ex, field, "scale");
        KILN_CHECK(t.dtype() != DType::kString, kInvalidArgument)
            << "scale: field '" << field << "' " << tensor_type_str(t) << " is not numeric";
        Tensor out(DType::kFloat32, t.shape());
        float* o = out.data_as<float>();
        if (t.dtype() == DType::kUInt8) {
            const uint8_t* x = t.data_as<uint8_t>();
            for (int64_t i = 0, n = t.numel(); i < n; ++i) o[i] = x[i] * factor;
        } else {
            for (int64_t i = 0, n = t.numel(); i < n; ++i) o[i] = static_cast<float>(t.get_f64(i) * factor);
        }
        t = std::move(out);
    };
}

}  // namespace kiln::data
