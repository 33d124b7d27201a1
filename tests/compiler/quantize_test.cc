// Post-training quantization pieces (compiler/quantize/): ORT's scale / zero-point rule and
// weight quantization on hand-worked values, the percentile and entropy ranges on histograms
// whose answer is known, and calibration batches checked with errors naming the input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "compiler/quantize/calibration_data.h"
#include "compiler/quantize/quant_params.h"
#include "compiler/quantize/tensor_ranges.h"
#include "support/error.h"

namespace kiln::compiler {
namespace {

Tensor f32(Shape shape, std::vector<float> v) {
    Tensor t(DType::kFloat32, std::move(shape));
    std::copy(v.begin(), v.end(), t.data_as<float>());
    return t;
}

TEST(QuantParams, Uint8AsymmetricIsOrtsRule) {
    ScaleZero a = scale_zero_point(-1.0f, 3.0f, quant_range(DType::kUInt8, false), false);
    EXPECT_FLOAT_EQ(a.scale, 4.0f / 255.0f);
    EXPECT_EQ(a.zero_point, 64);  // round(0 + 1 / (4/255)) = round(63.75)
    ScaleZero b = scale_zero_point(0.5f, 2.0f, quant_range(DType::kUInt8, false), false);  // widened to 0
    EXPECT_FLOAT_EQ(b.scale, 2.0f / 255.0f);
    EXPECT_EQ(b.zero_point, 0);
    ScaleZero c = scale_zero_point(0.0f, 0.0f, quant_range(DType::kUInt8, false), false);
    EXPECT_EQ(c.scale, 1.0f);
    EXPECT_EQ(c.zero_point, 0);
    ScaleZero d = scale_zero_point(-3.0f, -1.0f, quant_range(DType::kInt8, false), false);  // widened up to 0
    EXPECT_FLOAT_EQ(d.scale, 3.0f / 255.0f);
    EXPECT_EQ(d.zero_point, 127);
}

TEST(QuantParams, Int8SymmetricHasZeroPointZero) {
    ScaleZero s = scale_zero_point(-2.0f, 1.0f, quant_range(DType::kInt8, true), true);
    EXPECT_FLOAT_EQ(s.scale, 4.0f / 254.0f);
    EXPECT_EQ(s.zero_point, 0);
    EXPECT_THROW(quant_range(DType::kInt32, false), Error);
}

TEST(QuantParams, WeightsPerChannelAndPerTensor) {
    Tensor w = f32({2, 2}, {-4.0f, 1.0f, 0.5f, 0.0f});
    QuantizedWeight pc = quantize_weight(w, 0, quant_range(DType::kInt8, true));
    ASSERT_EQ(pc.scale.shape(), Shape({2}));
    EXPECT_FLOAT_EQ(pc.scale.data_as<float>()[0], 8.0f / 254.0f);
    EXPECT_FLOAT_EQ(pc.scale.data_as<float>()[1], 1.0f / 254.0f);
    const int8_t* q = pc.values.data_as<int8_t>();
    EXPECT_EQ(q[0], -127);
    EXPECT_EQ(q[1], 32);  // 1 / (4/127) = 31.75
    EXPECT_EQ(q[2], 127);
    EXPECT_EQ(q[3], 0);
    QuantizedWeight pt = quantize_weight(w, -1, quant_range(DType::kInt8, true));
    EXPECT_EQ(pt.scale.shape(), Shape({}));
    EXPECT_EQ(pt.values.data_as<int8_t>()[2], 16);  // 0.5 / (4/127) = 15.875
    QuantizedWeight cols = quantize_weight(f32({2, 2}, {1.0f, -8.0f, -2.0f, 4.0f}), 1, quant_range(DType::kInt8, true));
    EXPECT_FLOAT_EQ(cols.scale.data_as<float>()[0], 4.0f / 254.0f);  // column 0: max |.| 2
    EXPECT_EQ(cols.values.data_as<int8_t>()[2], -127);
}

TEST(QuantParams, BiasAtInputTimesWeightScale) {
    Tensor ws = f32({2}, {0.5f, 0.25f});
    QuantizedWeight b = quantize_bias(f32({2}, {3.0f, -1.0f}), 0.1f, ws);
    EXPECT_FLOAT_EQ(b.scale.data_as<float>()[0], 0.05f);
    EXPECT_EQ(b.values.data_as<int32_t>()[0], 60);   // 3 / 0.05
    EXPECT_EQ(b.values.data_as<int32_t>()[1], -40);  // -1 / 0.025
}

TEST(TensorRanges, MinMaxOverBatchesAndPercentile) {
    TensorStats s;
    std::vector<float> a(5000), b(5000);
    for (int i = 0; i < 5000; ++i) a[i] = static_cast<float>(i), b[i] = static_cast<float>(5000 + i);
    Tensor ta = f32({5000}, a), tb = f32({5000}, b);
    s.add_range(ta);
    s.add_range(tb);
    EXPECT_EQ(s.min, 0.0f);
    EXPECT_EQ(s.max, 9999.0f);
    s.add_histogram(ta);
    s.add_histogram(tb);
    auto [lo, hi] = choose_range(s, CalibrationMethod::kPercentile, 99.0);  // 100 values per side outside
    const float bin = 9999.0f / TensorStats::kBins;
    EXPECT_NEAR(hi, 9900.0f, 1.01f * bin);
    EXPECT_NEAR(lo, 99.0f, 1.01f * bin);
    auto [mlo, mhi] = choose_range(s, CalibrationMethod::kMinMax, 99.0);
    EXPECT_EQ(mlo, 0.0f);
    EXPECT_EQ(mhi, 9999.0f);
}

TEST(TensorRanges, EntropyClipsARareOutlier) {
    std::vector<int64_t> h(2048, 0);  // |x| of a fast-decaying distribution, and one far outlier
    for (int i = 0; i < 2048; ++i) h[i] = static_cast<int64_t>(1e6 * std::exp(-i / 40.0));
    h[2047] = 1;
    const float t = entropy_threshold(h, 2048.0f);
    EXPECT_LT(t, 1024.0f);  // clipped well below the outlier
    EXPECT_GE(t, 128.0f);   // never below the first candidate

    std::vector<int64_t> flat(2048, 10);  // uniform: nothing to clip
    EXPECT_GT(entropy_threshold(flat, 2048.0f), 1900.0f);
}

TEST(CalibrationBatches, ErrorsNameTheInputExpectedAndGot) {
    frontend::OnnxGraphView g;
    g.inputs = {"image"};
    g.input_shapes["image"] = {-1, 1, 8, 8};
    g.input_dtypes["image"] = DType::kFloat32;
    EXPECT_NO_THROW(check_calibration_batches({{{"image", Tensor(DType::kFloat32, {5, 1, 8, 8})}}}, g, {}));
    try {
        check_calibration_batches({{{"image", Tensor(DType::kFloat32, {5, 1, 7, 8})}}}, g, {});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_NE(std::string(e.what()).find("input 'image': expected shape [?,1,8,8], got [5,1,7,8]"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(check_calibration_batches({{{"img", Tensor(DType::kFloat32, {5, 1, 8, 8})}}}, g, {}), Error);
    g.input_dim_names["image"] = {"N", "", "", ""};  // a bound symbolic dim is expected exactly
    EXPECT_NO_THROW(check_calibration_batches({{{"image", Tensor(DType::kFloat32, {5, 1, 8, 8})}}}, g, {{"N", 5}}));
    EXPECT_THROW(check_calibration_batches({{{"image", Tensor(DType::kFloat32, {4, 1, 8, 8})}}}, g, {{"N", 5}}), Error);
    EXPECT_THROW(check_calibration_batches({}, g, {}), Error);
}

}  // namespace
}  // namespace kiln::compiler
