// The op harness (STYLE 7): for every registered op, a set of shape/attribute cases. Each case
// builds a one-node graph, validates and infers it, builds the op's TE compute and
//  (a) interprets the UNSCHEDULED lowering and compares it with a naive C++ reference written
//      here (op_reference.h, from the spec formulas);
//  (b) interprets the lowering under the op's schedule and compares it with (a);
//  (c) emits C for the scheduled lowering, compiles it, runs it through the kernel ABI (with a
//      parallel_for that really splits the range) and compares it with the interpreter.
// An op without a case fails the test.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "codegen/c_emitter.h"
#include "codegen/compile_driver.h"
#include "op_harness_cases.h"
#include "op_harness_refs.h"
#include "op_reference.h"
#include "op_test_util.h"
#include "runtime/kernel_abi.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::op::testing {
namespace {

std::vector<Case> all_cases() {
    std::vector<Case> c;
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    auto plus = [](double a, double b) { return a + b; };
    auto minus = [](double a, double b) { return a - b; };
    auto times = [](double a, double b) { return a * b; };
    auto fdiv = [](double a, double b) { return a / b; };
    auto idiv = [](double a, double b) { return std::trunc(a / b); };
    // Elementwise binary: broadcasting and every dtype family.
    add("add_f32_bcast", "Add", {in(F32, {2, 3, 4}), in(F32, {3, 1})}, {}, binary_ref(plus));
    add("add_f32_large", "Add", {in(F32, {64, 300}), in(F32, {300})}, {}, binary_ref(plus));
    add("add_f16", "Add", {in(F16, {2, 3}), in(F16, {2, 3})}, {}, binary_ref(plus));
    add("add_i32", "Add", {in(I32, {4, 5}, -50, 50), in(I32, {5}, -50, 50)}, {}, binary_ref(plus));
    add("add_u8_scalar", "Add", {in(U8, {3, 4}, 0, 100), in(U8, {}, 0, 100)}, {}, binary_ref(plus));
    add("add_i64_scalar", "Add", {in(I64, {}, -9, 9), in(I64, {3}, -9, 9)}, {}, binary_ref(plus));
    add("add_u64", "Add", {in(U64, {5}, 0, 1000), in(U64, {5}, 0, 1000)}, {}, binary_ref(plus));
    add("sub_f64", "Sub", {in(F64, {2, 1, 3}), in(F64, {4, 1})}, {}, binary_ref(minus));
    add("sub_i8", "Sub", {in(I8, {6}, -50, 50), in(I8, {6}, -50, 50)}, {}, binary_ref(minus));
    add("sub_i16", "Sub", {in(I16, {2, 3}, -500, 500), in(I16, {1, 3}, -500, 500)}, {}, binary_ref(minus));
    add("mul_bf16", "Mul", {in(BF16, {5}), in(BF16, {5})}, {}, binary_ref(times));
    add("mul_u16", "Mul", {in(U16, {2, 4}, 0, 200), in(U16, {4}, 0, 200)}, {}, binary_ref(times));
    add("div_f32", "Div", {in(F32, {3, 4}), in(F32, {4}, 0.5, 2)}, {}, binary_ref(fdiv));
    add("div_i32", "Div", {in(I32, {3, 4}, 0, 100), in(I32, {4}, 1, 9)}, {}, binary_ref(idiv));
    add("div_u32", "Div", {in(U32, {7}, 0, 1000), in(U32, {1}, 1, 9)}, {}, binary_ref(idiv));
    // Unary.
    add("relu_f32", "Relu", {in(F32, {1000})}, {}, unary_ref([](double x) { return std::max(x, 0.0); }));
    add("relu_i16", "Relu", {in(I16, {3, 5}, -100, 100)}, {}, unary_ref([](double x) { return std::max(x, 0.0); }));
    add("sigmoid_f32", "Sigmoid", {in(F32, {3, 7}, -6, 6)}, {}, unary_ref([](double x) { return 1 / (1 + std::exp(-x)); }));
    add("tanh_f64", "Tanh", {in(F64, {4, 4}, -3, 3)}, {}, unary_ref([](double x) { return std::tanh(x); }));
    add("exp_f16", "Exp", {in(F16, {10})}, {}, unary_ref([](double x) { return std::exp(x); }));
    add("exp_f32_large", "Exp", {in(F32, {20000})}, {}, unary_ref([](double x) { return std::exp(x); }));
    add("identity_f32", "Identity", {in(F32, {2, 3})}, {}, unary_ref([](double x) { return x; }));
    add("identity_bool", "Identity", {in(DType::kBool, {9}, 0, 1)}, {}, unary_ref([](double x) { return x; }));
    add("clip_f32", "Clip", {in(F32, {4, 5}), in(F32, {}, -1, -0.5), in(F32, {}, 0.5, 1)}, {}, clip_ref());
    add("clip_max_only", "Clip", {in(F32, {6}), omitted(), in(F32, {}, 0, 0.5)}, {}, clip_ref());
    add("clip_min_gt_max", "Clip", {in(F32, {6}), in(F32, {}, 1, 1.5), in(F32, {}, -1, -0.5)}, {}, clip_ref());
    add("clip_i32_min", "Clip", {in(I32, {8}, -20, 20), in(I32, {}, -5, 0)}, {}, clip_ref());
    add("clip_none", "Clip", {in(U8, {4}, 0, 200)}, {}, clip_ref());
    // Conv: bias, pads, strides, groups, dilations, auto_pad, 1-D / 2-D / 3-D.
    add("conv2d_pad_stride_bias", "Conv", {in(F32, {1, 3, 7, 7}), in(F32, {4, 3, 3, 3}), in(F32, {4})},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_ref());
    add("conv2d_group_dilation", "Conv", {in(F32, {2, 4, 9, 8}), in(F32, {6, 2, 3, 2})},
        {{"group", int64_t{2}}, {"dilations", Ints{2, 3}}, {"pads", Ints{0, 1, 2, 1}}}, conv_ref());
    add("conv2d_depthwise", "Conv", {in(F32, {1, 3, 6, 6}), in(F32, {3, 1, 3, 3}), in(F32, {3})},
        {{"group", int64_t{3}}, {"auto_pad", std::string("SAME_UPPER")}}, conv_ref());
    add("conv2d_same_lower_f64", "Conv", {in(F64, {1, 2, 7, 6}), in(F64, {3, 2, 4, 3})},
        {{"auto_pad", std::string("SAME_LOWER")}, {"strides", Ints{2, 2}}}, conv_ref());
    add("conv1d_same_upper", "Conv", {in(F32, {2, 3, 10}), in(F32, {5, 3, 4}), in(F32, {5})},
        {{"auto_pad", std::string("SAME_UPPER")}}, conv_ref());
    add("conv3d_valid", "Conv", {in(F32, {1, 2, 4, 5, 6}), in(F32, {3, 2, 2, 3, 2})},
        {{"auto_pad", std::string("VALID")}, {"strides", Ints{1, 2, 2}}}, conv_ref());
    add("conv2d_f16", "Conv", {in(F16, {1, 2, 5, 5}, -1, 1), in(F16, {2, 2, 3, 3}, -1, 1), in(F16, {2})},
        {{"pads", Ints{1, 1, 1, 1}}}, conv_ref());
    add("conv2d_large", "Conv", {in(F32, {1, 8, 20, 20}), in(F32, {16, 8, 3, 3}), in(F32, {16})},
        {{"pads", Ints{1, 1, 1, 1}}, {"kernel_shape", Ints{3, 3}}}, conv_ref());
    // MaxPool.
    add("maxpool2d_pad_stride", "MaxPool", {in(F32, {1, 2, 7, 7})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, pool_ref(true));
    add("maxpool2d_indices", "MaxPool", {in(F32, {2, 2, 6, 5})},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}, pool_ref(true), 2);
    add("maxpool2d_indices_col_major", "MaxPool", {in(F32, {1, 2, 5, 4})},
        {{"kernel_shape", Ints{3, 2}}, {"pads", Ints{1, 0, 1, 1}}, {"storage_order", int64_t{1}}}, pool_ref(true), 2);
    add("maxpool1d_dilation", "MaxPool", {in(F32, {1, 3, 11})},
        {{"kernel_shape", Ints{3}}, {"dilations", Ints{2}}, {"strides", Ints{2}}}, pool_ref(true));
    add("maxpool3d_same_upper", "MaxPool", {in(F64, {1, 1, 4, 5, 3})},
        {{"kernel_shape", Ints{2, 3, 2}}, {"auto_pad", std::string("SAME_UPPER")}}, pool_ref(true));
    add("maxpool2d_i8", "MaxPool", {in(I8, {1, 1, 5, 5}, -100, 100)},
        {{"kernel_shape", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, pool_ref(true));
    add("maxpool2d_u8_ceil", "MaxPool", {in(U8, {1, 2, 6, 6}, 0, 255)},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}, {"pads", Ints{1, 1, 0, 0}}},
        pool_ref(true));
    add("maxpool2d_f16", "MaxPool", {in(F16, {1, 1, 4, 4})}, {{"kernel_shape", Ints{2, 2}}}, pool_ref(true));
    // AveragePool.
    add("avgpool2d_pad_exclude", "AveragePool", {in(F32, {1, 2, 6, 6})},
        {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, pool_ref(false));
    add("avgpool2d_pad_include", "AveragePool", {in(F32, {1, 2, 6, 6})},
        {{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"count_include_pad", int64_t{1}}}, pool_ref(false));
    add("avgpool2d_ceil_include", "AveragePool", {in(F32, {1, 1, 7, 6})},
        {{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 0, 0, 1}}, {"ceil_mode", int64_t{1}},
         {"count_include_pad", int64_t{1}}},
        pool_ref(false));
    add("avgpool2d_ceil_exclude", "AveragePool", {in(F32, {1, 1, 5, 5})},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}, pool_ref(false));
    add("avgpool1d_dilation", "AveragePool", {in(F32, {2, 1, 12})},
        {{"kernel_shape", Ints{3}}, {"dilations", Ints{2}}, {"pads", Ints{2, 1}}}, pool_ref(false));
    add("avgpool3d_same_lower", "AveragePool", {in(F64, {1, 2, 3, 4, 5})},
        {{"kernel_shape", Ints{2, 2, 3}}, {"auto_pad", std::string("SAME_LOWER")}, {"strides", Ints{1, 2, 2}}},
        pool_ref(false));
    add("avgpool2d_f16", "AveragePool", {in(F16, {1, 1, 4, 4})}, {{"kernel_shape", Ints{2, 2}}}, pool_ref(false));
    add("gap2d", "GlobalAveragePool", {in(F32, {2, 3, 5, 5})}, {}, gap_ref());
    add("gap1d_f64", "GlobalAveragePool", {in(F64, {1, 2, 9})}, {}, gap_ref());
    // BatchNormalization.
    add("bn_4d", "BatchNormalization",
        {in(F32, {2, 3, 4, 4}), in(F32, {3}), in(F32, {3}), in(F32, {3}), in(F32, {3}, 0.1, 2)}, {{"epsilon", 1e-3}}, bn_ref());
    add("bn_2d_f16", "BatchNormalization",
        {in(F16, {4, 3}), in(F16, {3}), in(F16, {3}), in(F16, {3}), in(F16, {3}, 0.5, 2)}, {}, bn_ref());
    // Gemm / MatMul.
    add("gemm_basic", "Gemm", {in(F32, {3, 5}), in(F32, {5, 4})}, {}, gemm_ref());
    add("gemm_trans_alpha_beta", "Gemm", {in(F32, {5, 3}), in(F32, {4, 5}), in(F32, {4})},
        {{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}}, gemm_ref());
    add("gemm_c_column", "Gemm", {in(F64, {3, 6}), in(F64, {6, 2}), in(F64, {3, 1})}, {}, gemm_ref());
    add("gemm_c_scalar_large", "Gemm", {in(F32, {40, 64}), in(F32, {64, 48}), in(F32, {})}, {}, gemm_ref());
    add("gemm_i32", "Gemm", {in(I32, {2, 3}, -5, 5), in(I32, {3, 4}, -5, 5), in(I32, {2, 4}, -5, 5)}, {}, gemm_ref());
    add("matmul_2d", "MatMul", {in(F32, {3, 4}), in(F32, {4, 5})}, {}, matmul_ref());
    add("matmul_1d_2d", "MatMul", {in(F32, {4}), in(F32, {4, 6})}, {}, matmul_ref());
    add("matmul_2d_1d", "MatMul", {in(F32, {3, 4}), in(F32, {4})}, {}, matmul_ref());
    add("matmul_1d_1d", "MatMul", {in(F32, {7}), in(F32, {7})}, {}, matmul_ref());
    add("matmul_batch_bcast", "MatMul", {in(F32, {2, 1, 3, 4}), in(F32, {3, 4, 2})}, {}, matmul_ref());
    add("matmul_1d_batched", "MatMul", {in(F32, {4}), in(F32, {2, 4, 3})}, {}, matmul_ref());
    add("matmul_f16", "MatMul", {in(F16, {3, 8}, -1, 1), in(F16, {8, 2}, -1, 1)}, {}, matmul_ref());
    add("matmul_i64", "MatMul", {in(I64, {2, 3}, -9, 9), in(I64, {3, 2}, -9, 9)}, {}, matmul_ref());
    add("matmul_large", "MatMul", {in(F32, {64, 96}), in(F32, {96, 80})}, {}, matmul_ref());
    // Softmax / ArgMax.
    add("softmax_last", "Softmax", {in(F32, {3, 10}, -5, 5)}, {}, softmax_ref());
    add("softmax_axis1_f64", "Softmax", {in(F64, {2, 5, 3}, -5, 5)}, {{"axis", int64_t{1}}}, softmax_ref());
    add("softmax_f16", "Softmax", {in(F16, {2, 6})}, {{"axis", int64_t{0}}}, softmax_ref());
    // Rows of >= 2 vectors reduce in vector lanes (op/defs/row_reduce.h): a tail, parallel rows, f16, f64.
    add("softmax_lanes_tail", "Softmax", {in(F32, {5, 37}, -20, 20)}, {}, softmax_ref());
    add("softmax_lanes_parallel", "Softmax", {in(F32, {2, 48, 200}, -30, 30)}, {}, softmax_ref());
    add("softmax_lanes_f16", "Softmax", {in(F16, {3, 40}, -4, 4)}, {}, softmax_ref());
    add("softmax_lanes_f64", "Softmax", {in(F64, {3, 19}, -9, 9)}, {}, softmax_ref());
    add("argmax_keepdims", "ArgMax", {in(F32, {3, 5, 2})}, {{"axis", int64_t{1}}}, argmax_ref());
    add("argmax_nokeep_last_axis", "ArgMax", {in(F32, {4, 6})}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}},
        argmax_ref());
    add("argmax_ties_first", "ArgMax", {in(I32, {5, 6}, 0, 2)}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}, argmax_ref());
    add("argmax_ties_last", "ArgMax", {in(I32, {5, 6}, 0, 2)}, {{"axis", int64_t{0}}, {"select_last_index", int64_t{1}}},
        argmax_ref());
    // Shape ops.
    add("flatten_axis1", "Flatten", {in(F32, {2, 3, 4})}, {}, copy_ref());
    add("flatten_axis0_i8", "Flatten", {in(I8, {2, 3}, -9, 9)}, {{"axis", int64_t{0}}}, copy_ref());
    add("flatten_neg_axis", "Flatten", {in(F32, {2, 3, 4})}, {{"axis", int64_t{-1}}}, copy_ref());
    add("reshape_infer", "Reshape", {in(F32, {2, 3, 4}), constant({4, -1})}, {}, copy_ref());
    add("reshape_copy_dim", "Reshape", {in(I64, {2, 3, 4}, -9, 9), constant({0, 2, -1, 2})}, {}, copy_ref());
    // KilnReshape (symbolic compiles' Reshape to dims as text); static dims here.
    add("kiln_reshape", "KilnReshape", {in(F32, {2, 3, 4})}, {{"dims", std::vector<std::string>{"4", "1", "6"}}},
        copy_ref());
    // KilnDeviceCopy (a placement's copy between host and device): its value is its input's.
    add("device_copy_f32", "KilnDeviceCopy", {in(F32, {2, 3, 4})},
        {{"from", std::string("cpu")}, {"to", std::string("cuda")}}, copy_ref());
    add("device_copy_i64", "KilnDeviceCopy", {in(I64, {5}, -9, 9)}, {{"from", std::string("cuda")}, {"to", std::string("cpu")}},
        copy_ref());
    add("transpose_default", "Transpose", {in(F32, {2, 3, 4})}, {}, transpose_ref());
    add("transpose_perm_u8", "Transpose", {in(U8, {2, 3, 4, 5}, 0, 255)}, {{"perm", Ints{0, 2, 3, 1}}}, transpose_ref());
    add("concat_axis1", "Concat", {in(F32, {2, 3}), in(F32, {2, 1}), in(F32, {2, 4})}, {{"axis", int64_t{1}}}, concat_ref());
    add("concat_neg_axis_i64", "Concat", {in(I64, {2, 2, 3}, -9, 9), in(I64, {2, 2, 2}, -9, 9)}, {{"axis", int64_t{-1}}},
        concat_ref());
    add("concat_single_bool", "Concat", {in(DType::kBool, {3, 2}, 0, 1)}, {{"axis", int64_t{0}}}, concat_ref());
    // Erf Sqrt Log Neg Abs Pow Gelu.
    auto gelu = [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); };
    auto gelu_tanh = [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    };
    add("erf_f32", "Erf", {in(F32, {3, 40}, -3, 3)}, {}, unary_ref([](double x) { return std::erf(x); }));
    add("erf_f64", "Erf", {in(F64, {7}, -3, 3)}, {}, unary_ref([](double x) { return std::erf(x); }));
    add("sqrt_f32", "Sqrt", {in(F32, {2, 9}, 0, 9)}, {}, unary_ref([](double x) { return std::sqrt(x); }));
    add("sqrt_bf16", "Sqrt", {in(BF16, {6}, 0.1, 4)}, {}, unary_ref([](double x) { return std::sqrt(x); }));
    add("log_f64", "Log", {in(F64, {4, 5}, 0.01, 10)}, {}, unary_ref([](double x) { return std::log(x); }));
    add("log_f16", "Log", {in(F16, {8}, 0.5, 4)}, {}, unary_ref([](double x) { return std::log(x); }));
    add("neg_f32", "Neg", {in(F32, {33})}, {}, unary_ref([](double x) { return -x; }));
    add("neg_i8", "Neg", {in(I8, {9}, -100, 100)}, {}, unary_ref([](double x) { return -x; }));
    add("abs_f32", "Abs", {in(F32, {5, 5})}, {}, unary_ref([](double x) { return std::fabs(x); }));
    add("abs_i64", "Abs", {in(I64, {6}, -99, 99)}, {}, unary_ref([](double x) { return std::fabs(x); }));
    add("abs_u16", "Abs", {in(U16, {4}, 0, 60000)}, {}, unary_ref([](double x) { return x; }));
    auto fpow = [](double a, double b) { return std::pow(a, b); };
    auto ipow = [](double a, double b) { return std::trunc(std::pow(a, b)); };
    add("pow_f32_bcast", "Pow", {in(F32, {2, 3, 4}, 0.2, 3), in(F32, {4}, -2, 2)}, {}, binary_ref(fpow));
    add("pow_f32_i64_exp", "Pow", {in(F32, {3, 4}), in(I64, {1, 4}, -3, 3)}, {}, binary_ref(fpow));
    add("pow_i32_i32", "Pow", {in(I32, {2, 5}, -6, 6), in(I32, {5}, 0, 5)}, {}, binary_ref(ipow));
    add("pow_i64_f32_exp", "Pow", {in(I64, {6}, 1, 9), in(F32, {}, 0.3, 2.5)}, {}, binary_ref(ipow));
    add("pow_f64_scalar", "Pow", {in(F64, {}, 0.5, 2), in(F64, {3}, -1, 3)}, {}, binary_ref(fpow));
    add("gelu_f32", "Gelu", {in(F32, {4, 50}, -4, 4)}, {}, unary_ref(gelu));
    add("gelu_tanh_f32", "Gelu", {in(F32, {3, 17}, -4, 4)}, {{"approximate", std::string("tanh")}}, unary_ref(gelu_tanh));
    add("gelu_f16", "Gelu", {in(F16, {12}, -3, 3)}, {}, unary_ref(gelu));
    // LayerNormalization.
    add("layer_norm_last_axis_bias", "LayerNormalization", {in(F32, {2, 3, 16}, -3, 5), in(F32, {16}), in(F32, {16})}, {},
        layer_norm_ref());
    add("layer_norm_axis1_3_outputs", "LayerNormalization", {in(F32, {2, 3, 4, 5}), in(F32, {3, 4, 5})},
        {{"axis", int64_t{1}}, {"epsilon", 1e-3}}, layer_norm_ref(), 3);
    add("layer_norm_axis0_scale_bcast", "LayerNormalization", {in(F32, {3, 4}), in(F32, {4}), in(F32, {1})},
        {{"axis", int64_t{0}}}, layer_norm_ref(), 2);
    add("layer_norm_large", "LayerNormalization", {in(F32, {128, 256}), in(F32, {256}), in(F32, {256})}, {},
        layer_norm_ref(), 3);
    add("layer_norm_lanes_tail", "LayerNormalization", {in(F32, {6, 45}, -3, 5), in(F32, {45}), in(F32, {45})}, {},
        layer_norm_ref(), 3);
    add("layer_norm_lanes_parallel", "LayerNormalization", {in(F32, {2, 64, 300}, -3, 5), in(F32, {300})}, {},
        layer_norm_ref());
    add("layer_norm_lanes_f64", "LayerNormalization", {in(F64, {3, 17}), in(F64, {17}), in(F64, {17})}, {},
        layer_norm_ref(), 3);
    add("layer_norm_f16", "LayerNormalization", {in(F16, {4, 8}), in(F16, {8}), in(F16, {8})}, {}, layer_norm_ref(), 3);
    add("layer_norm_f64_neg_axis", "LayerNormalization", {in(F64, {2, 3, 4}), in(F64, {3, 4}), omitted()},
        {{"axis", int64_t{-2}}}, layer_norm_ref());
    // ReduceMean.
    add("reduce_mean_axis1_keep", "ReduceMean", {in(F32, {2, 5, 3}), constant({1})}, {}, reduce_mean_ref());
    add("reduce_mean_two_axes_nokeep", "ReduceMean", {in(F32, {3, 4, 6}), constant({0, -1})}, {{"keepdims", int64_t{0}}},
        reduce_mean_ref());
    add("reduce_mean_all_scalar", "ReduceMean", {in(F64, {4, 5})}, {{"keepdims", int64_t{0}}}, reduce_mean_ref());
    add("reduce_mean_all_keep_large", "ReduceMean", {in(F32, {64, 512})}, {}, reduce_mean_ref());
    add("reduce_mean_no_axes_noop", "ReduceMean", {in(F32, {2, 3})}, {{"noop_with_empty_axes", int64_t{1}}},
        reduce_mean_ref());
    add("reduce_mean_i32", "ReduceMean", {in(I32, {4, 6}, -50, 50), constant({1})}, {}, reduce_mean_ref(true));
    add("reduce_mean_f16_last", "ReduceMean", {in(F16, {3, 8}), constant({-1})}, {}, reduce_mean_ref());
    // Gather.
    add("gather_axis0_neg_i64", "Gather", {in(F32, {5, 4}), in(I64, {2, 3}, -5, 4)}, {}, gather_ref());
    add("gather_axis1_i32", "Gather", {in(F64, {2, 6, 3}), in(I32, {4}, -6, 5)}, {{"axis", int64_t{1}}}, gather_ref());
    add("gather_scalar_index_neg_axis", "Gather", {in(I16, {3, 7}, -99, 99), in(I64, {}, -7, 6)},
        {{"axis", int64_t{-1}}}, gather_ref());
    add("gather_bool", "Gather", {in(DType::kBool, {6, 2}, 0, 1), in(I64, {3}, 0, 5)}, {}, gather_ref());
    add("gather_embedding", "Gather", {in(F32, {300, 64}), in(I64, {1, 32}, 0, 299)}, {}, gather_ref());
    add_math_cases(c);
    add_logic_cases(c);
    add_shape_cases(c);
    add_reduce_cases(c);
    add_nn_cases(c);
    add_transformer_cases(c);
    add_loss_cases(c);
    add_resize_cases(c);
    add_quant_cases(c);
    add_dtype_cases(c);
    add_signal_cases(c);
    add_recurrent_cases(c);
    add_layout_cases(c);
    add_blocked_op_cases(c);
    add_grad_op_cases(c);
    add_nn2_cases(c);
    add_signal2_cases(c);
    add_training_cases(c);
    return c;
}

// ---- running one case ----

Tensor random_tensor(const In& spec, std::mt19937& rng) {
    Tensor t(spec.dtype, spec.shape);
    if (!spec.constant.empty()) {
        for (size_t i = 0; i < spec.constant.size(); ++i) t.set_i64(i, static_cast<int64_t>(spec.constant[i]));
        return t;
    }
    for (int64_t i = 0; i < t.numel(); ++i) {
        if (dtype_is_float(spec.dtype)) {
            t.set_f64(i, std::uniform_real_distribution<double>(spec.lo, spec.hi)(rng));
        } else {
            t.set_i64(i, std::uniform_int_distribution<int64_t>(static_cast<int64_t>(spec.lo),
                                                                static_cast<int64_t>(spec.hi))(rng));
        }
    }
    return t;
}

Arr to_arr(const Tensor& t) {
    Arr a(t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) a.v[i] = t.get_f64(i);
    return a;
}

void tolerance(DType t, double* rtol, double* atol) {
    switch (t) {
        case DType::kFloat32: *rtol = 1e-4, *atol = 1e-5; break;
        case DType::kFloat64: *rtol = 1e-10, *atol = 1e-12; break;
        case DType::kFloat16: *rtol = 2e-3, *atol = 2e-3; break;
        case DType::kBFloat16: *rtol = 1.6e-2, *atol = 1e-2; break;
        default: *rtol = 0, *atol = 0;
    }
}

// Compares `got` with `want` (a reference array in double) element-wise; ints exactly after
// wrapping the reference into the dtype.
void expect_close(const Tensor& got, const Arr& want, const std::string& what) {
    ASSERT_EQ(got.numel(), want.numel()) << what;
    double rtol, atol;
    tolerance(got.dtype(), &rtol, &atol);
    Tensor wrapped(got.dtype(), {want.numel()});
    int bad = 0;
    for (int64_t i = 0; i < got.numel() && bad < 5; ++i) {
        if (dtype_is_float(got.dtype())) {
            double g = got.get_f64(i), w = want.v[i];
            if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
                ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w;
                ++bad;
            }
        } else {
            wrapped.set_i64(i, static_cast<int64_t>(std::llround(want.v[i])));
            if (got.get_i64(i) != wrapped.get_i64(i)) {
                ADD_FAILURE() << what << ": element " << i << " got " << got.get_i64(i) << " want " << wrapped.get_i64(i);
                ++bad;
            }
        }
    }
}

// parallel_for that really splits: runs [0, n) as three chunks.
void split_parallel_for(void*, int64_t n, kiln_task_fn fn, void* ctx) {
    int64_t a = n / 3, b = 2 * n / 3;
    if (a > 0) fn(0, a, ctx);
    if (b > a) fn(a, b, ctx);
    if (n > b) fn(b, n, ctx);
}

struct Prepared {
    std::vector<Tensor> inputs;     // non-omitted inputs, kernel order
    std::vector<Tensor> reference;  // unscheduled interpreter outputs
    tir::PrimFunc scheduled;
    std::string source;
};

// Builds the node, checks (a) and (b); returns what (c) needs. Failures are reported via gtest.
std::optional<Prepared> prepare(const Case& cs, int index) {
    SCOPED_TRACE(cs.name);
    std::mt19937 rng(1234 + index);
    ir::Graph g;
    std::vector<ir::Value*> values;
    std::vector<Tensor> host;
    std::vector<Arr> ref_in;
    for (size_t i = 0; i < cs.inputs.size(); ++i) {
        const In& spec = cs.inputs[i];
        if (!spec.present) {
            values.push_back(nullptr);
            Arr a;
            a.present = false;
            ref_in.push_back(a);
            continue;
        }
        Tensor t = random_tensor(spec, rng);
        std::string name = "in" + std::to_string(i);
        values.push_back(spec.constant.empty() ? g.add_input(name, ir::TensorType::of_static(spec.dtype, spec.shape))
                                               : g.add_constant(name, t));
        host.push_back(t);
        ref_in.push_back(to_arr(t));
    }
    const OpDef* def = OpRegistry::global().find(cs.op);
    if (def == nullptr) {
        ADD_FAILURE() << "unknown op " << cs.op;
        return std::nullopt;
    }
    ir::Node* n = g.add_node(cs.op, values, cs.attrs, std::vector<ir::TensorType>(cs.num_outputs), {}, cs.name);
    check_node(*n, *def);
    infer_node(*n);

    std::vector<te::Tensor> placeholders;
    std::vector<te::Tensor> args;
    for (size_t i = 0; i < values.size(); ++i) {
        if (!values[i]) {
            placeholders.push_back(nullptr);
            continue;
        }
        const ir::TensorType& t = values[i]->type();
        placeholders.push_back(te::placeholder(t.static_shape(), t.dtype, "in" + std::to_string(i)));
        args.push_back(placeholders.back());
    }
    std::vector<ir::TensorType> out_types;
    std::vector<Shape> out_shapes;
    for (size_t i = 0; i < n->num_outputs(); ++i) {
        out_types.push_back(n->output(i)->type());
        out_shapes.push_back(out_types.back().static_shape());
    }
    ComputeArgs cargs{*n, placeholders, out_types};
    std::vector<te::Tensor> outs = def->compute(cargs);
    EXPECT_EQ(outs.size(), n->num_outputs());
    for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_EQ(outs[i]->shape, out_shapes[i]) << "output " << i;
        EXPECT_EQ(outs[i]->dtype, out_types[i].dtype) << "output " << i;
    }
    args.insert(args.end(), outs.begin(), outs.end());

    auto run_interp = [&](const tir::PrimFunc& f) {
        std::vector<Tensor> bufs = host;
        for (size_t i = 0; i < outs.size(); ++i) bufs.emplace_back(out_types[i].dtype, out_shapes[i]);
        tir::interpret(f, bufs);
        return std::vector<Tensor>(bufs.begin() + host.size(), bufs.end());
    };

    // (a) unscheduled lowering vs the naive reference.
    te::Schedule plain = te::create_schedule(outs);
    tir::PrimFunc f0 = tir::simplify(tir::lower(plain, args, "k_plain"));
    std::vector<Tensor> got0 = run_interp(f0);
    Refs want = cs.ref(ref_in, *n, out_shapes);
    for (size_t i = 0; i < outs.size(); ++i) expect_close(got0[i], want.at(i), "interpreter vs reference, output " + std::to_string(i));

    // (b) the op's schedule keeps the meaning.
    te::Schedule sch = te::create_schedule(outs);
    if (def->schedule)
        def->schedule(sch, outs);
    else
        default_schedule(sch, outs);
    Prepared p;
    p.scheduled = tir::simplify(tir::lower(sch, args, "kiln_op_case_" + std::to_string(index)));
    std::vector<Tensor> got1 = run_interp(p.scheduled);
    for (size_t i = 0; i < outs.size(); ++i)
        expect_close(got1[i], to_arr(got0[i]), "scheduled vs unscheduled interpreter, output " + std::to_string(i));
    p.inputs = host;
    p.reference = got0;
    p.source = codegen::emit_c(p.scheduled);
    return p;
}

class OpHarness : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        if (std::getenv("KILN_CACHE_DIR") == nullptr) {
            char tmpl[] = "/tmp/kiln_op_cache_XXXXXX";
            const char* dir = mkdtemp(tmpl);
            ASSERT_NE(dir, nullptr);
            setenv("KILN_CACHE_DIR", dir, 1);
        }
    }
};

TEST_F(OpHarness, EveryOpHasACase) {
    std::set<std::string> covered;
    for (const Case& c : all_cases()) covered.insert(c.op);
    for (const OpDef* d : OpRegistry::global().all()) {
        if (!d->compute) continue;  // host-only ops: tests/op/host_*_test.cc and the node tests
        EXPECT_TRUE(covered.count(d->name)) << "op " << d->name << " has no harness case";
    }
}

TEST_F(OpHarness, AllCases) {
    std::vector<Case> cases = all_cases();
    std::vector<std::optional<Prepared>> prepared;
    std::vector<std::string> sources;
    for (size_t i = 0; i < cases.size(); ++i) {
        try {
            prepared.push_back(prepare(cases[i], static_cast<int>(i)));
        } catch (const Error& e) {
            ADD_FAILURE() << cases[i].name << ": " << e.what();
            prepared.push_back(std::nullopt);
        }
        if (prepared.back()) sources.push_back(prepared.back()->source);
    }
    // (c) compile everything at once (the driver runs compilers in parallel), then run.
    std::vector<codegen::CompiledLibrary> libs;
    try {
        libs = codegen::compile_c_many(sources, 2);
    } catch (const Error& e) {
        FAIL() << "compile: " << e.what();
    }
    ASSERT_EQ(libs.size(), sources.size());
    size_t lib = 0;
    kiln_kernel_env env{nullptr, &split_parallel_for};
    for (size_t i = 0; i < cases.size(); ++i) {
        if (!prepared[i]) continue;
        SCOPED_TRACE(cases[i].name);
        Prepared& p = *prepared[i];
        void* h = dlopen(libs[lib++].path.c_str(), RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(h, nullptr) << dlerror();
        auto fn = reinterpret_cast<kiln_kernel_fn>(dlsym(h, p.scheduled.name.c_str()));
        ASSERT_NE(fn, nullptr) << "symbol " << p.scheduled.name;
        std::vector<Tensor> bufs = p.inputs;
        for (const Tensor& r : p.reference) bufs.emplace_back(r.dtype(), r.shape());
        std::vector<void*> ptrs;
        for (Tensor& t : bufs) ptrs.push_back(t.data());
        EXPECT_EQ(fn(ptrs.data(), &env), 0);
        for (size_t k = 0; k < p.reference.size(); ++k)
            expect_close(bufs[p.inputs.size() + k], to_arr(p.reference[k]), "compiled vs interpreter, output " + std::to_string(k));
    }
}

}  // namespace
}  // namespace kiln::op::testing
