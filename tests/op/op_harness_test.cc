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
#include "op_reference.h"
#include "op_test_util.h"
#include "runtime/kernel_abi.h"
#include "tir/interpreter.h"
#include "tir/lower.h"
#include "tir/simplify.h"

namespace kiln::op::testing {
namespace {

using ir::AttrMap;
using Ints = std::vector<int64_t>;

constexpr DType F32 = DType::kFloat32, F64 = DType::kFloat64, F16 = DType::kFloat16, BF16 = DType::kBFloat16;
constexpr DType I8 = DType::kInt8, I16 = DType::kInt16, I32 = DType::kInt32, I64 = DType::kInt64;
constexpr DType U8 = DType::kUInt8, U16 = DType::kUInt16, U32 = DType::kUInt32, U64 = DType::kUInt64;

RefFn binary_ref(std::function<double(double, double)> f) {
    return [f](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        return Refs{map_binary(x[0], x[1], out[0], f)};
    };
}
RefFn unary_ref(std::function<double(double)> f) {
    return [f](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>&) { return Refs{map_unary(x[0], f)}; };
}
RefFn copy_ref() {  // Flatten / Reshape: same row-major data
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr r = x[0];
        r.shape = out[0];
        return Refs{r};
    };
}
RefFn clip_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>&) {
        Arr r = x[0];
        for (double& v : r.v) {
            if (x.size() > 1 && x[1].present) v = std::max(v, x[1].v[0]);
            if (x.size() > 2 && x[2].present) v = std::min(v, x[2].v[0]);
        }
        return Refs{r};
    };
}
RefFn conv_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        return Refs{ref_conv(x[0], x[1], x.size() > 2 ? &x[2] : nullptr, n, out[0])};
    };
}
RefFn pool_ref(bool is_max) {
    return [is_max](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Refs r = ref_pool(x[0], n, out[0], is_max);
        r.resize(out.size());
        return r;
    };
}
RefFn gap_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        int64_t per = x[0].numel() / y.numel();
        for (int64_t i = 0; i < y.numel(); ++i) {
            double s = 0;
            for (int64_t k = 0; k < per; ++k) s += x[0].v[i * per + k];
            y.v[i] = s / per;
        }
        return Refs{y};
    };
}
RefFn bn_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        double eps = n.attr_float("epsilon", 1e-5);
        Arr y(x[0].shape);
        for (int64_t f = 0; f < y.numel(); ++f) {
            int64_t c = x[0].unravel(f)[1];
            y.v[f] = (x[0].v[f] - x[3].v[c]) / std::sqrt(x[4].v[c] + eps) * x[1].v[c] + x[2].v[c];
        }
        return Refs{y};
    };
}
RefFn gemm_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        bool ta = n.attr_int("transA", 0), tb = n.attr_int("transB", 0);
        double alpha = n.attr_float("alpha", 1), beta = n.attr_float("beta", 1);
        Arr y(out[0]);
        int64_t K = ta ? x[0].shape[0] : x[0].shape[1];
        for (int64_t i = 0; i < out[0][0]; ++i)
            for (int64_t j = 0; j < out[0][1]; ++j) {
                double acc = 0;
                for (int64_t k = 0; k < K; ++k)
                    acc += (ta ? x[0].at({k, i}) : x[0].at({i, k})) * (tb ? x[1].at({j, k}) : x[1].at({k, j}));
                double c = x.size() > 2 && x[2].present ? x[2].bread({i, j}) : 0.0;
                y.v[y.ravel({i, j})] = alpha * acc + beta * c;
            }
        return Refs{y};
    };
}
RefFn matmul_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        return Refs{ref_matmul(x[0], x[1], out[0])};
    };
}
// Along `axis`: visits every line (all indices but axis) with the flat positions of its elements.
void for_each_line(const Shape& s, int axis, const std::function<void(const std::vector<int64_t>&)>& f) {
    Arr a(s);
    for (int64_t i = 0; i < a.numel(); ++i) {
        auto idx = a.unravel(i);
        if (idx[axis] != 0) continue;
        std::vector<int64_t> line;
        for (int64_t r = 0; r < s[axis]; ++r) {
            idx[axis] = r;
            line.push_back(a.ravel(idx));
        }
        f(line);
    }
}
int norm_axis(int64_t axis, int rank) { return static_cast<int>(axis < 0 ? axis + rank : axis); }
RefFn softmax_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", -1), x[0].rank()), [&](const std::vector<int64_t>& line) {
            double m = -INFINITY, s = 0;
            for (int64_t p : line) m = std::max(m, x[0].v[p]);
            for (int64_t p : line) s += std::exp(x[0].v[p] - m);
            for (int64_t p : line) y.v[p] = std::exp(x[0].v[p] - m) / s;
        });
        return Refs{y};
    };
}
RefFn argmax_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Arr y(out[0]);
        bool last = n.attr_int("select_last_index", 0);
        int64_t k = 0;
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", 0), x[0].rank()), [&](const std::vector<int64_t>& line) {
            int64_t best = 0;
            for (size_t r = 1; r < line.size(); ++r) {
                double v = x[0].v[line[r]], b = x[0].v[line[best]];
                if (v > b || (last && v == b)) best = static_cast<int64_t>(r);
            }
            y.v[k++] = static_cast<double>(best);  // lines are visited in output row-major order
        });
        return Refs{y};
    };
}
RefFn transpose_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Ints perm = n.attr_ints("perm");
        if (perm.empty())
            for (int i = x[0].rank() - 1; i >= 0; --i) perm.push_back(i);
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            std::vector<int64_t> idx(perm.size());
            for (size_t k = 0; k < perm.size(); ++k) idx[perm[k]] = o[k];
            y.v[f] = x[0].at(idx);
        }
        return Refs{y};
    };
}
RefFn concat_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Arr y(out[0]);
        int axis = norm_axis(n.attr_int("axis", 0), y.rank());
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            size_t k = 0;
            while (o[axis] >= x[k].shape[axis]) o[axis] -= x[k++].shape[axis];
            y.v[f] = x[k].at(o);
        }
        return Refs{y};
    };
}

// LayerNormalization from the spec: per row of x.shape[:axis], two-pass mean / variance.
RefFn layer_norm_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const int axis = norm_axis(n.attr_int("axis", -1), x[0].rank());
        const double eps = n.attr_float("epsilon", 1e-5);
        int64_t cols = 1;
        for (int k = axis; k < x[0].rank(); ++k) cols *= x[0].shape[k];
        const int64_t rows = x[0].numel() / cols;
        Arr y(x[0].shape);
        Refs r{y};
        for (size_t i = 1; i < out.size(); ++i) r.emplace_back(out[i]);
        for (int64_t row = 0; row < rows; ++row) {
            double mean = 0, var = 0;
            for (int64_t c = 0; c < cols; ++c) mean += x[0].v[row * cols + c];
            mean /= cols;
            for (int64_t c = 0; c < cols; ++c) var += (x[0].v[row * cols + c] - mean) * (x[0].v[row * cols + c] - mean);
            var /= cols;
            const double inv = 1.0 / std::sqrt(var + eps);
            for (int64_t c = 0; c < cols; ++c) {
                const int64_t f = row * cols + c;
                const auto idx = r[0].unravel(f);
                double v = (x[0].v[f] - mean) * inv * x[1].bread(idx);
                if (x.size() > 2 && x[2].present) v += x[2].bread(idx);
                r[0].v[f] = v;
            }
            if (r.size() > 1) r[1].v[row] = mean;
            if (r.size() > 2) r[2].v[row] = inv;
        }
        return r;
    };
}
// Every Reduce* op: each input element folds pre(x) into the output cell it maps to (reduced
// dims dropped or kept as size 1), starting from init, then post(acc). Straight from the spec.
Refs reduce_into(const std::vector<Arr>& x, const ir::Node& n, const Shape& out, double init,
                 const std::function<double(double, double)>& comb, const std::function<double(double)>& pre,
                 const std::function<double(double)>& post) {
    const int rank = x[0].rank();
    std::vector<bool> mask(rank, false);
    bool any = false;
    if (x.size() > 1 && x[1].present)
        for (double a : x[1].v) mask[norm_axis(static_cast<int64_t>(a), rank)] = any = true;
    if (!any && n.attr_int("noop_with_empty_axes", 0)) return Refs{x[0]};
    if (!any) mask.assign(rank, true);
    const bool keep = n.attr_int("keepdims", 1) != 0;
    Arr y(out);
    std::fill(y.v.begin(), y.v.end(), init);
    for (int64_t f = 0; f < x[0].numel(); ++f) {
        const auto idx = x[0].unravel(f);
        std::vector<int64_t> o;
        for (int k = 0; k < rank; ++k) {
            if (!mask[k])
                o.push_back(idx[k]);
            else if (keep)
                o.push_back(0);
        }
        const int64_t of = y.ravel(o);
        y.v[of] = comb(y.v[of], pre(x[0].v[f]));
    }
    for (double& v : y.v) v = post(v);
    return Refs{y};
}
// ReduceMean: the sum of each output cell over the (equal) number of elements mapped to it;
// integer means truncate.
RefFn reduce_mean_ref(bool is_int = false) {
    return [is_int](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const double count = static_cast<double>(x[0].numel()) / static_cast<double>(shape_numel(out[0]));
        return reduce_into(
            x, n, out[0], 0.0, [](double a, double b) { return a + b; }, [](double v) { return v; },
            [=](double v) { return is_int ? std::trunc(v / count) : v / count; });
    };
}
RefFn gather_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const int axis = norm_axis(n.attr_int("axis", 0), x[0].rank());
        const int q = x[1].rank();
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            const auto o = y.unravel(f);
            std::vector<int64_t> ii(o.begin() + axis, o.begin() + axis + q);
            int64_t k = static_cast<int64_t>(x[1].at(ii));
            if (k < 0) k += x[0].shape[axis];
            std::vector<int64_t> idx(o.begin(), o.begin() + axis);
            idx.push_back(k);
            idx.insert(idx.end(), o.begin() + axis + q, o.end());
            y.v[f] = x[0].at(idx);
        }
        return Refs{y};
    };
}

// Harness cases of the math op family (kept in their own block so families grow independently).
void add_math_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // Unary math (ONNX spec formulas, written out here in double).
    const AttrMap none;
    auto u = [&](const char* name, const char* op, In x, std::function<double(double)> f, AttrMap a = {}) {
        add(name, op, {std::move(x)}, std::move(a), unary_ref(std::move(f)));
    };
    auto splus = [](double x) { return std::log(1 + std::exp(x)); };
    u("reciprocal_f32", "Reciprocal", in(F32, {3, 4}, 0.5, 3), [](double x) { return 1 / x; });
    u("reciprocal_f64", "Reciprocal", in(F64, {5}, -3, -0.5), [](double x) { return 1 / x; });
    u("floor_f32", "Floor", in(F32, {2, 7}, -5, 5), [](double x) { return std::floor(x); });
    u("ceil_f64", "Ceil", in(F64, {9}, -5, 5), [](double x) { return std::ceil(x); });
    u("round_f32", "Round", in(F32, {4, 6}, -6, 6), [](double x) { return std::nearbyint(x); });
    u("round_f16", "Round", in(F16, {11}, -6, 6), [](double x) { return std::nearbyint(x); });
    auto sgn = [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; };
    u("sign_f32", "Sign", in(F32, {13}, -3, 3), sgn);
    u("sign_i32", "Sign", in(I32, {3, 5}, -3, 3), sgn);
    u("sign_u8", "Sign", in(U8, {7}, 0, 3), sgn);
    u("sin_f64", "Sin", in(F64, {6}, -4, 4), [](double x) { return std::sin(x); });
    u("cos_f32", "Cos", in(F32, {2, 6}, -4, 4), [](double x) { return std::cos(x); });
    u("tan_f32", "Tan", in(F32, {10}, -1.2, 1.2), [](double x) { return std::tan(x); });
    u("asin_f32", "Asin", in(F32, {10}, -0.95, 0.95), [](double x) { return std::asin(x); });
    u("acos_f64", "Acos", in(F64, {10}, -0.95, 0.95), [](double x) { return std::acos(x); });
    u("atan_f16", "Atan", in(F16, {10}, -4, 4), [](double x) { return std::atan(x); });
    u("sinh_f32", "Sinh", in(F32, {8}, -3, 3), [](double x) { return std::sinh(x); });
    u("cosh_bf16", "Cosh", in(BF16, {8}, -3, 3), [](double x) { return std::cosh(x); });
    u("asinh_f32", "Asinh", in(F32, {8}, -5, 5), [](double x) { return std::asinh(x); });
    u("acosh_f32", "Acosh", in(F32, {8}, 1.01, 6), [](double x) { return std::acosh(x); });
    u("atanh_f64", "Atanh", in(F64, {8}, -0.95, 0.95), [](double x) { return std::atanh(x); });
    u("softplus_f32", "Softplus", in(F32, {3, 9}, -15, 15), splus);
    u("softsign_f32", "Softsign", in(F32, {12}, -5, 5), [](double x) { return x / (1 + std::fabs(x)); });
    u("elu_alpha", "Elu", in(F32, {3, 5}, -3, 3), [](double x) { return x < 0 ? 2.0 * (std::exp(x) - 1) : x; },
      {{"alpha", 2.0}});
    u("elu_default_f64", "Elu", in(F64, {9}, -3, 3), [](double x) { return x < 0 ? std::exp(x) - 1 : x; });
    const double sa = 1.67326319217681884765625, sg = 1.05070102214813232421875;
    u("selu_default", "Selu", in(F32, {10}, -3, 3),
      [=](double x) { return x > 0 ? sg * x : sg * (sa * std::exp(x) - sa); });
    u("selu_attrs", "Selu", in(F32, {10}, -3, 3), [](double x) { return x > 0 ? 3 * x : 3 * (2 * std::exp(x) - 2); },
      {{"alpha", 2.0}, {"gamma", 3.0}});
    u("celu_alpha", "Celu", in(F32, {12}, -4, 4),
      [](double x) { return std::max(0.0, x) + std::min(0.0, 2.0 * (std::exp(x / 2.0) - 1)); }, {{"alpha", 2.0}});
    u("leakyrelu_default", "LeakyRelu", in(F32, {12}), [](double x) { return x < 0 ? 0.01 * x : x; });
    u("leakyrelu_f16", "LeakyRelu", in(F16, {12}), [](double x) { return x < 0 ? 0.5 * x : x; }, {{"alpha", 0.5}});
    u("thresholdedrelu", "ThresholdedRelu", in(F32, {12}), [](double x) { return x > 0.5 ? x : 0; },
      {{"alpha", 0.5}});
    u("hardsigmoid_attrs", "HardSigmoid", in(F32, {12}, -6, 6),
      [](double x) { return std::max(0.0, std::min(1.0, 0.25 * x + 0.4)); }, {{"alpha", 0.25}, {"beta", 0.4}});
    u("hardswish", "HardSwish", in(F32, {14}, -5, 5),
      [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); });
    u("mish_f32", "Mish", in(F32, {3, 8}, -8, 8), [=](double x) { return x * std::tanh(splus(x)); });
    auto prelu = [](double x, double s) { return x < 0 ? s * x : x; };
    add("prelu_bcast", "PRelu", {in(F32, {2, 3, 4}), in(F32, {3, 1})}, none, binary_ref(prelu));
    add("prelu_i64_scalar_slope", "PRelu", {in(I64, {6}, -9, 9), in(I64, {1}, 1, 3)}, none, binary_ref(prelu));
    u("isnan_f32", "IsNaN", in(F32, {7}), [](double x) { return std::isnan(x) ? 1.0 : 0.0; });
    u("isinf_f64", "IsInf", in(F64, {7}), [](double x) { return std::isinf(x) ? 1.0 : 0.0; });
    u("isinf_neg_only", "IsInf", in(F32, {7}), [](double x) { return x == -INFINITY ? 1.0 : 0.0; },
      {{"detect_positive", int64_t{0}}});
    u("not_bool", "Not", in(DType::kBool, {3, 4}, 0, 1), [](double x) { return x == 0 ? 1.0 : 0.0; });
    // Cast / CastLike (float -> int truncates; -> bool is != 0).
    auto code = [](DType t) -> int64_t {  // TensorProto.DataType
        switch (t) {
            case DType::kFloat32: return 1;
            case DType::kUInt8: return 2;
            case DType::kInt8: return 3;
            case DType::kUInt16: return 4;
            case DType::kInt16: return 5;
            case DType::kInt32: return 6;
            case DType::kInt64: return 7;
            case DType::kBool: return 9;
            case DType::kFloat16: return 10;
            case DType::kFloat64: return 11;
            case DType::kUInt32: return 12;
            case DType::kUInt64: return 13;
            case DType::kBFloat16: return 16;
        }
        return 0;
    };
    auto cast_case = [&](const char* name, In x, DType to, std::function<double(double)> f) {
        add(name, "Cast", {std::move(x)}, {{"to", code(to)}}, unary_ref(std::move(f)));
    };
    auto same = [](double x) { return x; };
    cast_case("cast_f32_to_i32", in(F32, {3, 5}, -100, 100), I32, [](double x) { return std::trunc(x); });
    cast_case("cast_f64_to_f16", in(F64, {9}), F16, same);
    cast_case("cast_f32_to_bf16", in(F32, {9}), BF16, same);
    cast_case("cast_f16_to_f64", in(F16, {9}), F64, same);
    cast_case("cast_i64_to_f32", in(I64, {9}, -1000, 1000), F32, same);
    cast_case("cast_i32_to_u8", in(I32, {9}, -300, 300), U8, same);  // wraps (checked after wrapping)
    cast_case("cast_f32_to_bool", in(F32, {9}, -1, 1), DType::kBool, [](double x) { return x != 0 ? 1.0 : 0.0; });
    cast_case("cast_bool_to_f32", in(DType::kBool, {9}, 0, 1), F32, same);
    cast_case("cast_u16_to_i8", in(U16, {9}, 0, 60000), I8, same);
    add("castlike_f32_to_i64", "CastLike", {in(F32, {2, 4}, -50, 50), in(I64, {1}, 0, 1)}, none,
        unary_ref([](double x) { return std::trunc(x); }));
    add("castlike_i8_to_f16", "CastLike", {in(I8, {5}, -100, 100), in(F16, {}, 0, 1)}, none, unary_ref(same));
    // Variadic Max / Min / Sum / Mean with multidirectional broadcasting.
    auto nary = [](std::function<double(const std::vector<double>&)> f) -> RefFn {
        return [f](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr r(out[0]);
            for (int64_t i = 0; i < r.numel(); ++i) {
                auto idx = r.unravel(i);
                std::vector<double> vals;
                for (const Arr& a : x) vals.push_back(a.bread(idx));
                r.v[i] = f(vals);
            }
            return Refs{r};
        };
    };
    auto vmax = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    auto vmin = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    auto vsum = [](const std::vector<double>& v) { double s = 0; for (double x : v) s += x; return s; };
    auto vmean = [=](const std::vector<double>& v) { return vsum(v) / v.size(); };
    add("max_three_bcast", "Max", {in(F32, {2, 1, 4}), in(F32, {3, 1}), in(F32, {4})}, none, nary(vmax));
    add("max_one_input_i8", "Max", {in(I8, {5}, -100, 100)}, none, nary(vmax));
    add("max_u64", "Max", {in(U64, {6}, 0, 1000), in(U64, {6}, 0, 1000)}, none, nary(vmax));
    add("min_two_i32", "Min", {in(I32, {3, 4}, -50, 50), in(I32, {4}, -50, 50)}, none, nary(vmin));
    add("min_f16", "Min", {in(F16, {6}), in(F16, {6}), in(F16, {1})}, none, nary(vmin));
    add("sum_four_bcast", "Sum", {in(F32, {2, 3}), in(F32, {3}), in(F32, {2, 1}), in(F32, {})}, none, nary(vsum));
    add("sum_one_f64", "Sum", {in(F64, {4})}, none, nary(vsum));
    add("mean_three_f32", "Mean", {in(F32, {3, 4}), in(F32, {4}), in(F32, {3, 1})}, none, nary(vmean));
    add("mean_bf16", "Mean", {in(BF16, {6}), in(BF16, {6})}, none, nary(vmean));
    (void)add;
    // END add_math_cases
}

// Harness cases of the logic op family (kept in their own block so families grow independently).
void add_logic_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // Comparisons (bool results), logic, bitwise, BitShift, Mod, Where.
    const AttrMap none;
    const DType B = DType::kBool;
    auto cmp = [](std::function<bool(double, double)> f) {
        return binary_ref([f](double a, double b) { return f(a, b) ? 1.0 : 0.0; });
    };
    add("equal_i32_bcast", "Equal", {in(I32, {3, 4}, -2, 2), in(I32, {4}, -2, 2)}, none,
        cmp([](double a, double b) { return a == b; }));
    add("equal_bool", "Equal", {in(B, {6}, 0, 1), in(B, {6}, 0, 1)}, none, cmp([](double a, double b) { return a == b; }));
    add("equal_u16", "Equal", {in(U16, {8}, 0, 3), in(U16, {}, 0, 3)}, none, cmp([](double a, double b) { return a == b; }));
    add("less_f32_bcast", "Less", {in(F32, {2, 3, 4}), in(F32, {3, 1})}, none, cmp([](double a, double b) { return a < b; }));
    add("less_u8", "Less", {in(U8, {9}, 0, 255), in(U8, {9}, 0, 255)}, none, cmp([](double a, double b) { return a < b; }));
    add("greater_f16", "Greater", {in(F16, {7}), in(F16, {7})}, none, cmp([](double a, double b) { return a > b; }));
    add("greater_u64", "Greater", {in(U64, {7}, 0, 9), in(U64, {7}, 0, 9)}, none,
        cmp([](double a, double b) { return a > b; }));
    add("less_or_equal_i64", "LessOrEqual", {in(I64, {3, 3}, -2, 2), in(I64, {3, 1}, -2, 2)}, none,
        cmp([](double a, double b) { return a <= b; }));
    add("greater_or_equal_i8", "GreaterOrEqual", {in(I8, {9}, -2, 2), in(I8, {9}, -2, 2)}, none,
        cmp([](double a, double b) { return a >= b; }));
    add("greater_or_equal_f64", "GreaterOrEqual", {in(F64, {2, 5}), in(F64, {5})}, none,
        cmp([](double a, double b) { return a >= b; }));
    add("and_bcast", "And", {in(B, {2, 3, 4}, 0, 1), in(B, {4}, 0, 1)}, none,
        cmp([](double a, double b) { return a != 0 && b != 0; }));
    add("or_bcast", "Or", {in(B, {3, 4}, 0, 1), in(B, {3, 1}, 0, 1)}, none,
        cmp([](double a, double b) { return a != 0 || b != 0; }));
    add("xor_2d", "Xor", {in(B, {3, 4}, 0, 1), in(B, {3, 4}, 0, 1)}, none,
        cmp([](double a, double b) { return (a != 0) != (b != 0); }));
    // Bitwise: on the two's-complement bit patterns (naive, via uint64).
    auto bits = [](std::function<uint64_t(uint64_t, uint64_t)> f) {
        return binary_ref([f](double a, double b) {
            return static_cast<double>(static_cast<int64_t>(
                f(static_cast<uint64_t>(static_cast<int64_t>(a)), static_cast<uint64_t>(static_cast<int64_t>(b)))));
        });
    };
    add("bitwise_and_i16", "BitwiseAnd", {in(I16, {3, 4}, -3000, 3000), in(I16, {4}, -3000, 3000)}, none,
        bits([](uint64_t a, uint64_t b) { return a & b; }));
    add("bitwise_or_u64", "BitwiseOr", {in(U64, {6}, 0, 1 << 30), in(U64, {1}, 0, 1 << 30)}, none,
        bits([](uint64_t a, uint64_t b) { return a | b; }));
    add("bitwise_xor_i32", "BitwiseXor", {in(I32, {2, 5}, -1000000, 1000000), in(I32, {2, 5}, -1000000, 1000000)}, none,
        bits([](uint64_t a, uint64_t b) { return a ^ b; }));
    add("bitwise_not_i32", "BitwiseNot", {in(I32, {3, 3}, -1000, 1000)}, none, unary_ref([](double x) { return -x - 1; }));
    add("bitwise_not_u8", "BitwiseNot", {in(U8, {8}, 0, 255)}, none, unary_ref([](double x) { return 255 - x; }));
    add("bitshift_left_u8", "BitShift", {in(U8, {8}, 0, 255), in(U8, {8}, 0, 7)}, {{"direction", std::string("LEFT")}},
        binary_ref([](double a, double b) { return std::fmod(a * std::ldexp(1.0, static_cast<int>(b)), 256.0); }));
    add("bitshift_right_u32_bcast", "BitShift", {in(U32, {2, 4}, 0, 4000000000.0), in(U32, {4}, 0, 31)},
        {{"direction", std::string("RIGHT")}},
        binary_ref([](double a, double b) { return std::floor(a / std::ldexp(1.0, static_cast<int>(b))); }));
    add("bitshift_left_u64", "BitShift", {in(U64, {5}, 0, 1000), in(U64, {5}, 0, 40)}, {{"direction", std::string("LEFT")}},
        binary_ref([](double a, double b) { return a * std::ldexp(1.0, static_cast<int>(b)); }));
    // Mod: fmod=0 takes the divisor's sign (Python), fmod=1 the dividend's (C fmod).
    auto pymod = [](double a, double b) { return a - std::floor(a / b) * b; };
    add("mod_i32_pos_divisor", "Mod", {in(I32, {3, 5}, -20, 20), in(I32, {5}, 1, 7)}, none, binary_ref(pymod));
    add("mod_i64_neg_divisor", "Mod", {in(I64, {9}, -20, 20), in(I64, {9}, -7, -1)}, none, binary_ref(pymod));
    add("mod_i8_fmod", "Mod", {in(I8, {9}, -100, 100), in(I8, {9}, -9, -1)}, {{"fmod", int64_t{1}}},
        binary_ref([](double a, double b) { return std::fmod(a, b); }));
    add("mod_u16", "Mod", {in(U16, {9}, 0, 60000), in(U16, {}, 1, 300)}, none, binary_ref(pymod));
    add("mod_f32_fmod", "Mod", {in(F32, {2, 6}, -10, 10), in(F32, {6}, 0.5, 3)}, {{"fmod", int64_t{1}}},
        binary_ref([](double a, double b) { return std::fmod(a, b); }));
    add("mod_f16_fmod", "Mod", {in(F16, {8}, -10, 10), in(F16, {8}, -3, -0.5)}, {{"fmod", int64_t{1}}},
        binary_ref([](double a, double b) { return std::fmod(a, b); }));
    auto where = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr r(out[0]);
        for (int64_t i = 0; i < r.numel(); ++i) {
            auto idx = r.unravel(i);
            r.v[i] = x[0].bread(idx) != 0 ? x[1].bread(idx) : x[2].bread(idx);
        }
        return Refs{r};
    };
    add("where_3way_bcast", "Where", {in(B, {2, 1, 4}, 0, 1), in(F32, {3, 1}), in(F32, {4})}, none, where);
    add("where_i64", "Where", {in(B, {5}, 0, 1), in(I64, {5}, -9, 9), in(I64, {}, -9, 9)}, none, where);
    add("where_bool_values", "Where", {in(B, {2, 3}, 0, 1), in(B, {2, 3}, 0, 1), in(B, {3}, 0, 1)}, none, where);
    (void)add;
    // END add_logic_cases
}

// Harness cases of the shape op family (kept in their own block so families grow independently).
void add_shape_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // ---- shape / data movement family (shape.cc, movement.cc, slice_pad.cc, index_ops.cc,
    // generators.cc). References are written from the ONNX spec text: per-element loops.
    using ElemFn = std::function<double(const std::vector<Arr>&, const ir::Node&, const std::vector<int64_t>&)>;
    auto elem_ref = [](ElemFn f) -> RefFn {
        return [f](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t i = 0; i < y.numel(); ++i) y.v[i] = f(x, n, y.unravel(i));
            return Refs{y};
        };
    };
    auto values_ref = [](std::vector<double> v) -> RefFn {  // a fixed expected output
        return [v](const std::vector<Arr>&, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            EXPECT_EQ(y.numel(), static_cast<int64_t>(v.size()));
            y.v = v;
            return Refs{y};
        };
    };
    auto cst = [](DType t, Shape s, std::vector<double> v) {
        In i{t, std::move(s)};
        i.constant = std::move(v);
        return i;
    };
    const DType BOOL = DType::kBool;
    // Squeeze / Unsqueeze / Shape / Size.
    add("squeeze_axes", "Squeeze", {in(F32, {1, 3, 1, 2}), constant({0, -2})}, {}, copy_ref());
    add("squeeze_all_bool", "Squeeze", {in(BOOL, {1, 3, 1}, 0, 1)}, {}, copy_ref());
    add("unsqueeze_unsorted_i8", "Unsqueeze", {in(I8, {3, 2}, -9, 9), constant({3, 0, -1})}, {}, copy_ref());
    add("shape_full", "Shape", {in(F32, {2, 3, 4})}, {}, values_ref({2, 3, 4}));
    add("shape_start_end", "Shape", {in(U8, {2, 3, 4, 5}, 0, 9)}, {{"start", int64_t{-3}}, {"end", int64_t{-1}}},
        values_ref({3, 4}));
    add("shape_clip_start", "Shape", {in(F16, {2, 3})}, {{"start", int64_t{-10}}, {"end", int64_t{10}}}, values_ref({2, 3}));
    add("size_i64", "Size", {in(I64, {2, 5, 3}, -9, 9)}, {}, values_ref({30}));
    // Expand / Tile.
    add("expand_bidirectional", "Expand", {in(F32, {3, 1}), constant({2, 1, 4})}, {},
        elem_ref([](const std::vector<Arr>& x, const ir::Node&, const std::vector<int64_t>& o) { return x[0].bread(o); }));
    add("expand_bool", "Expand", {in(BOOL, {1, 2}, 0, 1), constant({3, 2})}, {},
        elem_ref([](const std::vector<Arr>& x, const ir::Node&, const std::vector<int64_t>& o) { return x[0].bread(o); }));
    // KilnExpand (symbolic compiles' Expand to dims as text); static dims here.
    add("kiln_expand", "KilnExpand", {in(F32, {3, 1})}, {{"dims", std::vector<std::string>{"2", "1", "4"}}},
        elem_ref([](const std::vector<Arr>& x, const ir::Node&, const std::vector<int64_t>& o) { return x[0].bread(o); }));
    auto tile_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node&, const std::vector<int64_t>& o) {
        std::vector<int64_t> idx(o.size());
        for (size_t k = 0; k < o.size(); ++k) idx[k] = o[k] % x[0].shape[k];
        return x[0].at(idx);
    });
    add("tile_2d_i32", "Tile", {in(I32, {2, 3}, -50, 50), constant({2, 3})}, {}, tile_ref);
    add("tile_3d_f64", "Tile", {in(F64, {1, 2, 3}), constant({3, 1, 2})}, {}, tile_ref);
    // DepthToSpace / SpaceToDepth via the spec's reshape + transpose.
    auto d2s_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int64_t b = n.attr_int("blocksize", 1), cc = x[0].shape[1] / (b * b);
        const int64_t H = o[2] / b, b1 = o[2] % b, W = o[3] / b, b2 = o[3] % b;
        const int64_t ch = n.attr_string("mode", "DCR") == "DCR" ? (b1 * b + b2) * cc + o[1] : o[1] * b * b + b1 * b + b2;
        return x[0].at({o[0], ch, H, W});
    });
    add("depth_to_space_dcr", "DepthToSpace", {in(F32, {2, 8, 2, 3})}, {{"blocksize", int64_t{2}}}, d2s_ref);
    add("depth_to_space_crd_u16", "DepthToSpace", {in(U16, {1, 18, 2, 2}, 0, 999)},
        {{"blocksize", int64_t{3}}, {"mode", std::string("CRD")}}, d2s_ref);
    add("space_to_depth", "SpaceToDepth", {in(F32, {2, 3, 4, 6})}, {{"blocksize", int64_t{2}}},
        elem_ref([](const std::vector<Arr>& x, const ir::Node&, const std::vector<int64_t>& o) {
            const int64_t b = 2, C = x[0].shape[1];
            const int64_t blk = o[1] / C, c = o[1] % C;
            return x[0].at({o[0], c, o[2] * b + blk / b, o[3] * b + blk % b});
        }));
    // Trilu (k read at run time).
    auto trilu_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int64_t k = x.size() > 1 ? static_cast<int64_t>(x[1].v[0]) : 0;
        const int64_t i = o[o.size() - 2], j = o.back();
        const bool keep = n.attr_int("upper", 1) ? j - i >= k : j - i <= k;
        return keep ? x[0].at(o) : 0.0;
    });
    add("triu_k", "Trilu", {in(F32, {2, 4, 5}), in(I64, {}, -2, 2)}, {}, trilu_ref);
    add("tril_default_k_i64", "Trilu", {in(I64, {5, 3}, -9, 9)}, {{"upper", int64_t{0}}}, trilu_ref);
    add("tril_k_neg", "Trilu", {in(F64, {4, 4}), in(I64, {1}, -2, -1)}, {{"upper", int64_t{0}}}, trilu_ref);
    // ReverseSequence.
    auto revseq_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int b = static_cast<int>(n.attr_int("batch_axis", 1)), t = static_cast<int>(n.attr_int("time_axis", 0));
        const int64_t len = static_cast<int64_t>(x[1].v[o[b]]);
        std::vector<int64_t> idx = o;
        if (o[t] < len) idx[t] = len - 1 - o[t];
        return x[0].at(idx);
    });
    add("reverse_sequence_time0", "ReverseSequence", {in(F32, {4, 3, 2}), in(I64, {3}, 0, 4)}, {}, revseq_ref);
    add("reverse_sequence_batch0_i16", "ReverseSequence", {in(I16, {3, 5}, -99, 99), in(I64, {3}, 1, 5)},
        {{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}}, revseq_ref);
    // Dropout (inference).
    add("dropout_mask", "Dropout", {in(F32, {3, 4})}, {},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr m(out[1]);
            for (double& v : m.v) v = 1;
            return Refs{x[0], m};
        },
        2);
    add("dropout_ratio_f16", "Dropout", {in(F16, {5}), cst(F32, {}, {0})}, {}, unary_ref([](double v) { return v; }));
    // Slice: per axis, the list of selected input positions by walking the numpy rules.
    auto slice_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        const int rank = x[0].rank();
        std::vector<std::vector<int64_t>> pos(rank);
        for (int a = 0; a < rank; ++a)
            for (int64_t i = 0; i < x[0].shape[a]; ++i) pos[a].push_back(i);
        for (size_t k = 0; k < x[1].v.size(); ++k) {
            const int a = x.size() > 3 && x[3].present ? norm_axis(static_cast<int64_t>(x[3].v[k]), rank) : static_cast<int>(k);
            const int64_t dim = x[0].shape[a], st = x.size() > 4 ? static_cast<int64_t>(x[4].v[k]) : 1;
            int64_t s = static_cast<int64_t>(x[1].v[k]), e = static_cast<int64_t>(x[2].v[k]);
            if (s < 0) s += dim;
            if (e < 0) e += dim;
            pos[a].clear();
            if (st > 0) {
                for (int64_t i = std::max<int64_t>(s, 0); i < std::min(e, dim); i += st) pos[a].push_back(i);
            } else {
                for (int64_t i = std::min(s, dim - 1); i > std::max<int64_t>(e, -1); i += st) pos[a].push_back(i);
            }
        }
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            for (int a = 0; a < rank; ++a) o[a] = pos[a].at(o[a]);
            y.v[f] = x[0].at(o);
        }
        return Refs{y};
    };
    add("slice_basic", "Slice", {in(F32, {5, 6}), constant({1, 0}), constant({4, 5})}, {}, slice_ref);
    add("slice_neg_steps_axes", "Slice",
        {in(I32, {4, 5, 6}, -99, 99), constant({-1, 5}), constant({-1000, 0}), constant({2, -2}), constant({-2, -2})}, {},
        slice_ref);
    add("slice_out_of_range", "Slice", {in(U8, {3, 7}, 0, 200), constant({-100, 2}), constant({100, 1000}), constant({0, 1}),
                                        constant({1, 3})},
        {}, slice_ref);
    add("slice_empty_bool", "Slice", {in(BOOL, {4, 3}, 0, 1), constant({3}), constant({1}), constant({0})}, {}, slice_ref);
    // Split.
    auto split_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const int axis = norm_axis(n.attr_int("axis", 0), x[0].rank());
        Refs r;
        int64_t off = 0;
        for (const Shape& s : out) {
            Arr y(s);
            for (int64_t f = 0; f < y.numel(); ++f) {
                auto o = y.unravel(f);
                o[axis] += off;
                y.v[f] = x[0].at(o);
            }
            off += s[axis];
            r.push_back(y);
        }
        return r;
    };
    add("split_sizes_axis1", "Split", {in(F32, {2, 6}), constant({1, 3, 2})}, {{"axis", int64_t{1}}}, split_ref, 3);
    add("split_num_outputs_uneven", "Split", {in(I64, {7, 2}, -9, 9)}, {{"num_outputs", int64_t{3}}}, split_ref, 3);
    add("split_equal_neg_axis_f16", "Split", {in(F16, {2, 3, 4})}, {{"axis", int64_t{-1}}}, split_ref, 2);
    add("split_zero_part", "Split", {in(F32, {5}), constant({2, 0, 3})}, {}, split_ref, 3);
    // Pad: constant / edge / reflect / wrap, negative pads, axes.
    auto pad_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const int rank = x[0].rank();
        std::vector<int64_t> begin(rank, 0);
        std::vector<int64_t> axes;
        const size_t na = x[1].v.size() / 2;
        for (size_t k = 0; k < na; ++k)
            axes.push_back(x.size() > 3 && x[3].present ? norm_axis(static_cast<int64_t>(x[3].v[k]), rank) : static_cast<int64_t>(k));
        for (size_t k = 0; k < na; ++k) begin[axes[k]] = static_cast<int64_t>(x[1].v[k]);
        const std::string mode = n.attr_string("mode", "constant");
        const double cv = x.size() > 2 && x[2].present ? x[2].v[0] : 0.0;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto o = y.unravel(f);
            bool outside = false;
            for (int a = 0; a < rank; ++a) {
                const int64_t dim = x[0].shape[a];
                int64_t j = o[a] - begin[a];
                if (j >= 0 && j < dim) {
                    o[a] = j;
                    continue;
                }
                if (mode == "constant") {
                    outside = true;
                } else if (mode == "edge") {
                    j = j < 0 ? 0 : dim - 1;
                } else if (mode == "wrap") {
                    j = ((j % dim) + dim) % dim;
                } else {  // reflect: bounce off the ends until inside
                    while (j < 0 || j >= dim) j = j < 0 ? -j : 2 * (dim - 1) - j;
                }
                o[a] = j;
            }
            y.v[f] = outside ? cv : x[0].at(o);
        }
        return Refs{y};
    };
    add("pad_constant_value", "Pad", {in(F32, {3, 4}), constant({1, 2, 2, 0}), in(F32, {}, 5, 6)}, {}, pad_ref);
    add("pad_constant_default_i32", "Pad", {in(I32, {2, 3}, -9, 9), constant({0, 1, 1, 1})}, {}, pad_ref);
    add("pad_edge", "Pad", {in(F64, {2, 3, 2}), constant({1, 2, 0, 0, 3, 1})}, {{"mode", std::string("edge")}}, pad_ref);
    add("pad_reflect", "Pad", {in(F32, {3, 4}), constant({2, 3, 2, 3})}, {{"mode", std::string("reflect")}}, pad_ref);
    add("pad_wrap_neg", "Pad", {in(I8, {3, 4}, -99, 99), constant({4, -1, 2, 5})}, {{"mode", std::string("wrap")}}, pad_ref);
    add("pad_axes_crop", "Pad", {in(F32, {2, 5, 3}), constant({-1, 2, 1, -2}), in(F32, {}, -1, 1), constant({-2, 2})}, {},
        pad_ref);
    // Compress.
    auto compress_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        std::vector<int64_t> pos;
        for (size_t k = 0; k < x[1].v.size(); ++k)
            if (x[1].v[k] != 0) pos.push_back(static_cast<int64_t>(k));
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            if (!n.has_attr("axis")) {
                y.v[f] = x[0].v[pos[f]];
                continue;
            }
            auto o = y.unravel(f);
            const int a = norm_axis(n.attr_int("axis", 0), x[0].rank());
            o[a] = pos[o[a]];
            y.v[f] = x[0].at(o);
        }
        return Refs{y};
    };
    add("compress_axis1", "Compress", {in(F32, {3, 4}), cst(BOOL, {3}, {1, 0, 1})}, {{"axis", int64_t{1}}}, compress_ref);
    add("compress_flat_i64", "Compress", {in(I64, {2, 3}, -9, 9), cst(BOOL, {5}, {0, 1, 1, 0, 1})}, {}, compress_ref);
    // GatherElements / GatherND.
    auto gather_elements_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int a = norm_axis(n.attr_int("axis", 0), x[0].rank());
        std::vector<int64_t> idx = o;
        int64_t k = static_cast<int64_t>(x[1].at(o));
        idx[a] = k < 0 ? k + x[0].shape[a] : k;
        return x[0].at(idx);
    });
    add("gather_elements_axis1", "GatherElements", {in(F32, {3, 4}), in(I64, {3, 6}, -4, 3)}, {{"axis", int64_t{1}}},
        gather_elements_ref);
    add("gather_elements_axis0_i32", "GatherElements", {in(I16, {4, 2, 3}, -99, 99), in(I32, {2, 2, 2}, -4, 3)}, {},
        gather_elements_ref);
    auto gather_nd_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int b = static_cast<int>(n.attr_int("batch_dims", 0)), q = x[1].rank();
        const int64_t k = x[1].shape[q - 1];
        std::vector<int64_t> idx(o.begin(), o.begin() + b), ii(o.begin(), o.begin() + q - 1);
        ii.push_back(0);
        for (int64_t j = 0; j < k; ++j) {
            ii.back() = j;
            int64_t v = static_cast<int64_t>(x[1].at(ii));
            idx.push_back(v < 0 ? v + x[0].shape[b + j] : v);
        }
        idx.insert(idx.end(), o.begin() + q - 1, o.end());
        return x[0].at(idx);
    });
    add("gather_nd_k2", "GatherND", {in(F32, {3, 3, 4}), in(I64, {2, 2}, -3, 2)}, {}, gather_nd_ref);
    add("gather_nd_batch1_i32data", "GatherND", {in(I32, {2, 3, 4}, -99, 99), in(I64, {2, 2, 1}, -3, 2)},
        {{"batch_dims", int64_t{1}}}, gather_nd_ref);
    add("gather_nd_full_index", "GatherND", {in(F64, {2, 3}), in(I64, {4, 2}, -2, 1)}, {}, gather_nd_ref);
    // ScatterElements / Scatter / ScatterND: apply the updates in order to a copy of the data.
    auto combine = [](const std::string& red, double d, double u) {
        if (red == "add") return d + u;
        if (red == "mul") return d * u;
        if (red == "max") return std::max(d, u);
        if (red == "min") return std::min(d, u);
        return u;
    };
    auto scatter_elements_ref = [combine](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const int a = norm_axis(n.attr_int("axis", 0), x[0].rank());
        const std::string red = n.attr_string("reduction", "none");
        Arr y = x[0];
        for (int64_t f = 0; f < x[1].numel(); ++f) {
            auto idx = x[1].unravel(f);
            int64_t k = static_cast<int64_t>(x[1].v[f]);
            idx[a] = k < 0 ? k + x[0].shape[a] : k;
            double& t = y.v[y.ravel(idx)];
            t = combine(red, t, x[2].v[f]);
        }
        return Refs{y};
    };
    add("scatter_elements_none_dups", "ScatterElements", {in(F32, {4, 5}), in(I64, {2, 5}, -4, 3), in(F32, {2, 5})}, {},
        scatter_elements_ref);
    add("scatter_elements_add_axis1", "ScatterElements", {in(F32, {3, 4}), in(I32, {3, 6}, -4, 3), in(F32, {3, 6})},
        {{"axis", int64_t{1}}, {"reduction", std::string("add")}}, scatter_elements_ref);
    add("scatter_elements_mul_f64", "ScatterElements", {in(F64, {3, 3}), in(I64, {2, 3}, 0, 2), in(F64, {2, 3})},
        {{"reduction", std::string("mul")}}, scatter_elements_ref);
    add("scatter_elements_max_i32", "ScatterElements", {in(I32, {5, 2}, -50, 50), in(I64, {4, 2}, -5, 4), in(I32, {4, 2}, -50, 50)},
        {{"reduction", std::string("max")}}, scatter_elements_ref);
    add("scatter_elements_min_axis_neg", "ScatterElements", {in(F32, {2, 3, 4}), in(I64, {2, 2, 3}, -4, 3), in(F32, {2, 2, 3})},
        {{"axis", int64_t{-1}}, {"reduction", std::string("min")}}, scatter_elements_ref);
    add("scatter_legacy", "Scatter", {in(F32, {3, 3}), in(I64, {1, 3}, 0, 2), in(F32, {1, 3})}, {{"axis", int64_t{1}}},
        scatter_elements_ref);
    auto scatter_nd_ref = [combine](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const std::string red = n.attr_string("reduction", "none");
        const int q = x[1].rank();
        const int64_t k = x[1].shape[q - 1], rows = x[1].numel() / k;
        int64_t slice = 1;
        for (int d = static_cast<int>(k); d < x[0].rank(); ++d) slice *= x[0].shape[d];
        Arr y = x[0];
        for (int64_t r = 0; r < rows; ++r) {
            int64_t base = 0;
            for (int64_t j = 0; j < k; ++j) {
                int64_t v = static_cast<int64_t>(x[1].v[r * k + j]);
                base = base * x[0].shape[j] + (v < 0 ? v + x[0].shape[j] : v);
            }
            for (int64_t s = 0; s < slice; ++s) {
                double& t = y.v[base * slice + s];
                t = combine(red, t, x[2].v[r * slice + s]);
            }
        }
        return Refs{y};
    };
    add("scatter_nd_rows", "ScatterND", {in(F32, {4, 3}), in(I64, {2, 1}, -4, 3), in(F32, {2, 3})}, {}, scatter_nd_ref);
    add("scatter_nd_add_dups", "ScatterND", {in(F32, {3, 3, 2}), in(I64, {2, 3, 2}, -3, 2), in(F32, {2, 3, 2})},
        {{"reduction", std::string("add")}}, scatter_nd_ref);
    add("scatter_nd_mul_single", "ScatterND", {in(F64, {2, 3}), in(I64, {2}, 0, 1), in(F64, {})},
        {{"reduction", std::string("mul")}}, scatter_nd_ref);
    add("scatter_nd_max_i64", "ScatterND", {in(I64, {4, 2}, -50, 50), in(I64, {5, 1}, 0, 3), in(I64, {5, 2}, -50, 50)},
        {{"reduction", std::string("max")}}, scatter_nd_ref);
    add("scatter_nd_min", "ScatterND", {in(F32, {3, 4}), in(I64, {6, 2}, -3, 2), in(F32, {6})},
        {{"reduction", std::string("min")}}, scatter_nd_ref);
    // OneHot.
    auto onehot_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int a = norm_axis(n.attr_int("axis", -1), x[0].rank() + 1);
        const int64_t depth = static_cast<int64_t>(x[1].v[0]);
        std::vector<int64_t> ii = o;
        ii.erase(ii.begin() + a);
        int64_t v = static_cast<int64_t>(x[0].at(ii));
        if (v < 0) v += depth;
        return v == o[a] ? x[2].v[1] : x[2].v[0];
    });
    add("onehot_last_axis", "OneHot", {in(I64, {2, 3}, -5, 6), cst(I64, {}, {5}), in(F32, {2})}, {}, onehot_ref);
    add("onehot_axis0_f32_indices", "OneHot", {in(F32, {4}, -3, 3), cst(F32, {1}, {4}), in(I32, {2}, -9, 9)},
        {{"axis", int64_t{0}}}, onehot_ref);
    // Range / ConstantOfShape / EyeLike.
    add("range_f32", "Range", {cst(F32, {}, {1}), cst(F32, {}, {10}), cst(F32, {}, {3})}, {}, values_ref({1, 4, 7}));
    add("range_i32_negative_delta", "Range", {cst(I32, {}, {10}), cst(I32, {}, {-3}), cst(I32, {}, {-4})}, {},
        values_ref({10, 6, 2, -2}));
    add("range_i64_empty", "Range", {cst(I64, {}, {5}), cst(I64, {}, {5}), cst(I64, {}, {1})}, {}, values_ref({}));
    // KilnDimRange (symbolic compiles' position ids): 0, 1, ... along a dim of x; x's data unread.
    add("dim_range_axis1", "KilnDimRange", {in(F32, {2, 5, 3})}, {{"axis", int64_t{1}}}, values_ref({0, 1, 2, 3, 4}));
    add("dim_range_axis0", "KilnDimRange", {in(F32, {3, 2})}, {{"axis", int64_t{0}}}, values_ref({0, 1, 2}));
    Tensor seven(DType::kInt32, {1});
    seven.set_i64(0, 7);
    add("constant_of_shape_i32", "ConstantOfShape", {constant({2, 3})}, {{"value", seven}},
        values_ref({7, 7, 7, 7, 7, 7}));
    add("constant_of_shape_default", "ConstantOfShape", {constant({2})}, {}, values_ref({0, 0}));
    auto eye_ref = elem_ref([](const std::vector<Arr>&, const ir::Node& n, const std::vector<int64_t>& o) {
        return o[1] - o[0] == n.attr_int("k", 0) ? 1.0 : 0.0;
    });
    add("eyelike_k1_to_i32", "EyeLike", {in(F32, {3, 4})}, {{"k", int64_t{1}}, {"dtype", int64_t{6}}}, eye_ref);
    add("eyelike_neg_k_f64", "EyeLike", {in(F64, {4, 3})}, {{"k", int64_t{-2}}}, eye_ref);
    // CenterCropPad: numpy-style centre crop (start (dim - t) / 2) then zero pad (start (t - dim) / 2).
    auto center_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int rank = x[0].rank();
        std::vector<int64_t> axes = n.attr_ints("axes");
        if (axes.empty())
            for (int i = 0; i < rank; ++i) axes.push_back(i);
        std::vector<int64_t> idx = o;
        for (size_t k = 0; k < axes.size(); ++k) {
            const int a = norm_axis(axes[k], rank);
            const int64_t dim = x[0].shape[a], t = static_cast<int64_t>(x[1].v[k]);
            idx[a] = t < dim ? o[a] + (dim - t) / 2 : o[a] - (t - dim) / 2;
            if (idx[a] < 0 || idx[a] >= dim) return 0.0;
        }
        return x[0].at(idx);
    });
    add("center_crop_pad_mixed", "CenterCropPad", {in(F32, {5, 4, 3}), constant({2, 7, 4})}, {}, center_ref);
    add("center_crop_pad_axes_i32", "CenterCropPad", {in(I32, {3, 6, 5}, -9, 9), constant({3, 8})},
        {{"axes", Ints{-1, 1}}}, center_ref);
    // END add_shape_cases
}

// Harness cases of the reduce op family (kept in their own block so families grow independently).
void add_reduce_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    auto reduce_ref = [](double init, std::function<double(double, double)> comb, std::function<double(double)> pre,
                         std::function<double(double)> post) -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            return reduce_into(x, n, out[0], init, comb, pre, post);
        };
    };
    auto id = [](double v) { return v; };
    auto sq = [](double v) { return v * v; };
    auto add2 = [](double a, double b) { return a + b; };
    auto mul2 = [](double a, double b) { return a * b; };
    auto max2 = [](double a, double b) { return std::max(a, b); };
    auto min2 = [](double a, double b) { return std::min(a, b); };
    auto fabs1 = [](double v) { return std::fabs(v); };
    auto sqrt1 = [](double v) { return std::sqrt(v); };
    auto log1 = [](double v) { return std::log(v); };
    auto exp1 = [](double v) { return std::exp(v); };
    const AttrMap nokeep = {{"keepdims", int64_t{0}}};
    add("reduce_sum_axis1_keep", "ReduceSum", {in(F32, {2, 5, 3}), constant({1})}, {}, reduce_ref(0, add2, id, id));
    add("reduce_sum_i64_two_axes_nokeep", "ReduceSum", {in(I64, {3, 4, 5}, -50, 50), constant({0, -1})}, nokeep,
        reduce_ref(0, add2, id, id));
    add("reduce_sum_all_f16", "ReduceSum", {in(F16, {4, 6}, -1, 1)}, {}, reduce_ref(0, add2, id, id));
    add("reduce_sum_noop", "ReduceSum", {in(F32, {2, 3})}, {{"noop_with_empty_axes", int64_t{1}}},
        reduce_ref(0, add2, id, id));
    add("reduce_sum_large", "ReduceSum", {in(F32, {64, 300}), constant({1})}, {}, reduce_ref(0, add2, id, id));
    add("reduce_max_neg_axis_nokeep", "ReduceMax", {in(F32, {3, 4, 5}), constant({-2})}, nokeep,
        reduce_ref(-INFINITY, max2, id, id));
    add("reduce_max_i8_all", "ReduceMax", {in(I8, {5, 7}, -100, 100)}, nokeep, reduce_ref(-INFINITY, max2, id, id));
    add("reduce_max_bool", "ReduceMax", {in(DType::kBool, {4, 3}, 0, 1), constant({1})}, {},
        reduce_ref(0, max2, id, id));
    add("reduce_min_u8", "ReduceMin", {in(U8, {3, 6}, 0, 255), constant({0})}, {}, reduce_ref(INFINITY, min2, id, id));
    add("reduce_min_f64_two_axes", "ReduceMin", {in(F64, {2, 3, 4}), constant({2, 0})}, {},
        reduce_ref(INFINITY, min2, id, id));
    add("reduce_prod_f32", "ReduceProd", {in(F32, {3, 4, 2}, 0.5, 1.5), constant({1})}, {}, reduce_ref(1, mul2, id, id));
    add("reduce_prod_i32_all", "ReduceProd", {in(I32, {2, 5}, -3, 3)}, nokeep, reduce_ref(1, mul2, id, id));
    add("reduce_l1_f32", "ReduceL1", {in(F32, {3, 5}), constant({-1})}, {}, reduce_ref(0, add2, fabs1, id));
    add("reduce_l1_i32_nokeep", "ReduceL1", {in(I32, {4, 3}, -20, 20), constant({0})}, nokeep,
        reduce_ref(0, add2, fabs1, id));
    add("reduce_l2_f64", "ReduceL2", {in(F64, {2, 3, 4}), constant({1, 2})}, {}, reduce_ref(0, add2, sq, sqrt1));
    add("reduce_l2_f16_all", "ReduceL2", {in(F16, {3, 4}, -1, 1)}, nokeep, reduce_ref(0, add2, sq, sqrt1));
    add("reduce_log_sum_f32", "ReduceLogSum", {in(F32, {3, 4, 5}, 0.1, 2), constant({0, 2})}, {},
        reduce_ref(0, add2, id, log1));
    add("reduce_log_sum_exp_f32", "ReduceLogSumExp", {in(F32, {4, 6}, -5, 5), constant({1})}, nokeep,
        reduce_ref(0, add2, exp1, log1));
    add("reduce_log_sum_exp_f64_all", "ReduceLogSumExp", {in(F64, {2, 3, 4}, -5, 5)}, {},
        reduce_ref(0, add2, exp1, log1));
    add("reduce_sum_square_f32", "ReduceSumSquare", {in(F32, {3, 4, 5}), constant({1})}, {}, reduce_ref(0, add2, sq, id));
    add("reduce_sum_square_i64", "ReduceSumSquare", {in(I64, {3, 4}, -9, 9), constant({-1})}, nokeep,
        reduce_ref(0, add2, sq, id));
    // Empty sets: the reduced dim has size 0 -> the combiner's identity through post.
    add("reduce_sum_empty_set", "ReduceSum", {in(F32, {2, 0, 4}), constant({1})}, {}, reduce_ref(0, add2, id, id));
    add("reduce_prod_empty_set", "ReduceProd", {in(F32, {2, 0, 4}), constant({1})}, {}, reduce_ref(1, mul2, id, id));
    // ArgMin: the first (or last) position of the minimum along the axis.
    auto argmin_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const bool last = n.attr_int("select_last_index", 0);
        int64_t k = 0;
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", 0), x[0].rank()), [&](const std::vector<int64_t>& line) {
            int64_t best = 0;
            for (size_t r = 1; r < line.size(); ++r) {
                const double v = x[0].v[line[r]], b = x[0].v[line[best]];
                if (v < b || (last && v == b)) best = static_cast<int64_t>(r);
            }
            y.v[k++] = static_cast<double>(best);
        });
        return Refs{y};
    };
    add("argmin_keepdims", "ArgMin", {in(F32, {3, 5, 2})}, {{"axis", int64_t{1}}}, argmin_ref);
    add("argmin_nokeep_last_axis_f64", "ArgMin", {in(F64, {4, 6})}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}},
        argmin_ref);
    add("argmin_ties_first", "ArgMin", {in(I32, {5, 6}, 0, 2)}, {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}},
        argmin_ref);
    add("argmin_ties_last_u8", "ArgMin", {in(U8, {5, 6}, 0, 2)}, {{"axis", int64_t{0}}, {"select_last_index", int64_t{1}}},
        argmin_ref);
    // CumSum along each line, from either end, with or without the element itself.
    auto cumsum_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        const bool excl = n.attr_int("exclusive", 0), rev = n.attr_int("reverse", 0);
        for_each_line(x[0].shape, norm_axis(static_cast<int64_t>(x[1].v[0]), x[0].rank()),
                      [&](std::vector<int64_t> line) {
                          if (rev) std::reverse(line.begin(), line.end());
                          double acc = 0;
                          for (int64_t p : line) {
                              if (excl) y.v[p] = acc;
                              acc += x[0].v[p];
                              if (!excl) y.v[p] = acc;
                          }
                      });
        return Refs{y};
    };
    add("cumsum_axis1", "CumSum", {in(F32, {3, 5}), constant({1})}, {}, cumsum_ref);
    add("cumsum_exclusive_neg_axis", "CumSum", {in(F64, {2, 3, 4}), constant({-1})}, {{"exclusive", int64_t{1}}},
        cumsum_ref);
    add("cumsum_reverse_axis0_i32", "CumSum", {in(I32, {4, 3}, -20, 20), constant({0})}, {{"reverse", int64_t{1}}},
        cumsum_ref);
    add("cumsum_reverse_exclusive_i64", "CumSum", {in(I64, {7}, -20, 20), constant({0})},
        {{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}, cumsum_ref);
    // TopK: a stable sort of each line (ties: lower index first), the first k entries.
    auto topk_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        Arr vals(out[0]), idxs(out[1]);
        const int axis = norm_axis(n.attr_int("axis", -1), x[0].rank());
        const bool largest = n.attr_int("largest", 1);
        const int64_t k = static_cast<int64_t>(x[1].v[0]);
        for_each_line(x[0].shape, axis, [&](const std::vector<int64_t>& line) {
            std::vector<int64_t> order(line.size());
            for (size_t r = 0; r < line.size(); ++r) order[r] = static_cast<int64_t>(r);
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
                const double va = x[0].v[line[a]], vb = x[0].v[line[b]];
                return largest ? va > vb : va < vb;
            });
            auto pos = x[0].unravel(line[0]);
            for (int64_t p = 0; p < k; ++p) {
                pos[axis] = p;
                vals.v[vals.ravel(pos)] = x[0].v[line[order[p]]];
                idxs.v[idxs.ravel(pos)] = static_cast<double>(order[p]);
            }
        });
        return Refs{vals, idxs};
    };
    add("topk_largest_last_axis", "TopK", {in(F32, {3, 7}), constant({3})}, {}, topk_ref, 2);
    add("topk_smallest_axis0_f64", "TopK", {in(F64, {6, 4}), constant({2})}, {{"axis", int64_t{0}}, {"largest", int64_t{0}}},
        topk_ref, 2);
    add("topk_ties_i32", "TopK", {in(I32, {4, 9}, 0, 3), constant({5})}, {}, topk_ref, 2);
    add("topk_ties_smallest_u64", "TopK", {in(U64, {2, 3, 8}, 0, 4), constant({4})},
        {{"axis", int64_t{-1}}, {"largest", int64_t{0}}}, topk_ref, 2);
    // LogSoftmax / Hardmax along the axis.
    auto logsoftmax_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", -1), x[0].rank()), [&](const std::vector<int64_t>& line) {
            double s = 0;
            for (int64_t p : line) s += std::exp(x[0].v[p]);
            for (int64_t p : line) y.v[p] = x[0].v[p] - std::log(s);
        });
        return Refs{y};
    };
    auto hardmax_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", -1), x[0].rank()), [&](const std::vector<int64_t>& line) {
            int64_t best = line[0];
            for (int64_t p : line)
                if (x[0].v[p] > x[0].v[best]) best = p;
            y.v[best] = 1;
        });
        return Refs{y};
    };
    add("logsoftmax_last", "LogSoftmax", {in(F32, {3, 10}, -5, 5)}, {}, logsoftmax_ref);
    add("logsoftmax_axis1_f64", "LogSoftmax", {in(F64, {2, 5, 3}, -5, 5)}, {{"axis", int64_t{1}}}, logsoftmax_ref);
    add("logsoftmax_f16_axis0", "LogSoftmax", {in(F16, {4, 3})}, {{"axis", int64_t{0}}}, logsoftmax_ref);
    add("hardmax_last", "Hardmax", {in(F32, {4, 6})}, {}, hardmax_ref);
    add("hardmax_axis0_f64", "Hardmax", {in(F64, {5, 2, 3})}, {{"axis", int64_t{0}}}, hardmax_ref);
    // END add_reduce_cases
}

// Harness cases of the nn op family (kept in their own block so families grow independently).
void add_nn_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // LpPool: (sum over the in-bounds window of |x|^p)^(1/p), pads from the spec (ref_window).
    auto lp_pool_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const double p = static_cast<double>(n.attr_int("p", 2));
        const Ints kernel = n.attr_ints("kernel_shape");
        RefWindow g = ref_window(n, x[0].shape, kernel, out[0]);
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            const auto o = y.unravel(f);
            double s = 0;
            for (const auto& k : kernel_offsets(kernel)) {
                std::vector<int64_t> idx = {o[0], o[1]};
                bool inside = true;
                for (size_t d = 0; d < k.size(); ++d) {
                    const int64_t pos = o[2 + d] * g.s[d] + k[d] * g.d[d] - g.pb[d];
                    inside = inside && pos >= 0 && pos < g.in[d];
                    idx.push_back(pos);
                }
                if (inside) s += std::pow(std::fabs(x[0].at(idx)), p);
            }
            y.v[f] = std::pow(s, 1.0 / p);
        }
        return Refs{y};
    };
    add("lppool2d_p2_pad_stride", "LpPool", {in(F32, {1, 2, 7, 7})},
        {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, lp_pool_ref);
    add("lppool1d_p3_dilation", "LpPool", {in(F64, {2, 1, 11})},
        {{"kernel_shape", Ints{3}}, {"dilations", Ints{2}}, {"p", int64_t{3}}}, lp_pool_ref);
    add("lppool2d_p1_same_upper", "LpPool", {in(F32, {1, 1, 5, 6})},
        {{"kernel_shape", Ints{2, 3}}, {"auto_pad", std::string("SAME_UPPER")}, {"p", int64_t{1}}}, lp_pool_ref);
    // Global pools: one reduction over all spatial positions of each (n, c).
    auto global_ref = [](bool is_max) -> RefFn {
        return [is_max](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            const double p = static_cast<double>(n.attr_int("p", 2));
            Arr y(out[0]);
            const int64_t per = x[0].numel() / y.numel();
            for (int64_t i = 0; i < y.numel(); ++i) {
                double acc = is_max ? -INFINITY : 0;
                for (int64_t k = 0; k < per; ++k) {
                    const double v = x[0].v[i * per + k];
                    acc = is_max ? std::max(acc, v) : acc + std::pow(std::fabs(v), p);
                }
                y.v[i] = is_max ? acc : std::pow(acc, 1.0 / p);
            }
            return Refs{y};
        };
    };
    add("global_max_pool_2d", "GlobalMaxPool", {in(F32, {2, 3, 5, 5})}, {}, global_ref(true));
    add("global_max_pool_3d_f64", "GlobalMaxPool", {in(F64, {1, 2, 3, 2, 4})}, {}, global_ref(true));
    add("global_lp_pool_p2", "GlobalLpPool", {in(F32, {2, 3, 4, 4})}, {}, global_ref(false));
    add("global_lp_pool_p3_1d", "GlobalLpPool", {in(F64, {1, 2, 9})}, {{"p", int64_t{3}}}, global_ref(false));
    // Instance / Group / MeanVariance normalization: elements grouped by key(flat index);
    // y = (x - mean) / sqrt(var + eps) (MVN: / (sqrt(var) + 1e-9)), then * scale + bias per channel
    // (GroupNormalization with G-entry scale: per group).
    auto grouped_norm_ref = [](std::function<int64_t(const Arr&, const std::vector<int64_t>&, const ir::Node&)> key,
                               bool mvn) -> RefFn {
        return [key, mvn](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
            const double eps = mvn ? 1e-9 : n.attr_float("epsilon", 1e-5);
            std::map<int64_t, std::vector<int64_t>> groups;
            for (int64_t f = 0; f < x[0].numel(); ++f) groups[key(x[0], x[0].unravel(f), n)].push_back(f);
            Arr y(x[0].shape);
            for (const auto& [k, members] : groups) {
                double mean = 0, var = 0;
                for (int64_t f : members) mean += x[0].v[f];
                mean /= static_cast<double>(members.size());
                for (int64_t f : members) var += (x[0].v[f] - mean) * (x[0].v[f] - mean);
                var /= static_cast<double>(members.size());
                for (int64_t f : members)
                    y.v[f] = (x[0].v[f] - mean) / (mvn ? std::sqrt(var) + eps : std::sqrt(var + eps));
            }
            if (x.size() > 1) {
                const int64_t channels = x[0].shape[1];
                for (int64_t f = 0; f < y.numel(); ++f) {
                    int64_t c = x[0].unravel(f)[1];
                    if (x[1].numel() != channels) c /= channels / x[1].numel();
                    y.v[f] = y.v[f] * x[1].v[c] + x[2].v[c];
                }
            }
            return Refs{y};
        };
    };
    auto by_nc = [](const Arr& a, const std::vector<int64_t>& i, const ir::Node&) { return i[0] * a.shape[1] + i[1]; };
    auto by_group = [](const Arr& a, const std::vector<int64_t>& i, const ir::Node& n) {
        const int64_t g = n.attr_int("num_groups", 1);
        return i[0] * g + i[1] / (a.shape[1] / g);
    };
    auto by_unmasked = [](const Arr& a, const std::vector<int64_t>& i, const ir::Node& n) {
        std::vector<int64_t> k = i;
        for (int64_t ax : n.attr_ints("axes", {0, 2, 3})) k[norm_axis(ax, a.rank())] = 0;
        return a.ravel(k);
    };
    add("instance_norm_4d", "InstanceNormalization", {in(F32, {2, 3, 4, 5}), in(F32, {3}), in(F32, {3})},
        {{"epsilon", 1e-3}}, grouped_norm_ref(by_nc, false));
    add("instance_norm_3d_f16", "InstanceNormalization", {in(F16, {1, 2, 8}), in(F16, {2}), in(F16, {2})}, {},
        grouped_norm_ref(by_nc, false));
    add("group_norm_per_channel", "GroupNormalization", {in(F32, {2, 6, 3, 2}), in(F32, {6}), in(F32, {6})},
        {{"num_groups", int64_t{3}}}, grouped_norm_ref(by_group, false));
    add("group_norm_per_group_f64", "GroupNormalization", {in(F64, {3, 4, 5}), in(F64, {2}), in(F64, {2})},
        {{"num_groups", int64_t{2}}, {"epsilon", 1e-2}}, grouped_norm_ref(by_group, false));
    add("mvn_default_axes", "MeanVarianceNormalization", {in(F32, {3, 2, 4, 3})}, {}, grouped_norm_ref(by_unmasked, true));
    add("mvn_axis1_f64", "MeanVarianceNormalization", {in(F64, {2, 5, 3})}, {{"axes", Ints{1}}},
        grouped_norm_ref(by_unmasked, true));
    // LpNormalization along the axis.
    auto lp_norm_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y(x[0].shape);
        const bool l1 = n.attr_int("p", 2) == 1;
        for_each_line(x[0].shape, norm_axis(n.attr_int("axis", -1), x[0].rank()), [&](const std::vector<int64_t>& line) {
            double s = 0;
            for (int64_t p : line) s += l1 ? std::fabs(x[0].v[p]) : x[0].v[p] * x[0].v[p];
            if (!l1) s = std::sqrt(s);
            for (int64_t p : line) y.v[p] = x[0].v[p] / s;
        });
        return Refs{y};
    };
    add("lp_norm_p2_last", "LpNormalization", {in(F32, {3, 4, 5})}, {}, lp_norm_ref);
    add("lp_norm_p1_axis0_f64", "LpNormalization", {in(F64, {4, 3})}, {{"axis", int64_t{0}}, {"p", int64_t{1}}},
        lp_norm_ref);
    // LRN across channels.
    auto lrn_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const int64_t size = n.attr_int("size", 1), C = x[0].shape[1];
        const double alpha = n.attr_float("alpha", 1e-4), beta = n.attr_float("beta", 0.75), bias = n.attr_float("bias", 1);
        Arr y(x[0].shape);
        for (int64_t f = 0; f < y.numel(); ++f) {
            auto idx = x[0].unravel(f);
            const int64_t c = idx[1];
            double s = 0;
            for (int64_t cc = std::max<int64_t>(0, c - (size - 1) / 2); cc <= std::min(C - 1, c + size / 2); ++cc) {
                idx[1] = cc;
                s += x[0].at(idx) * x[0].at(idx);
            }
            y.v[f] = x[0].v[f] / std::pow(bias + alpha / static_cast<double>(size) * s, beta);
        }
        return Refs{y};
    };
    add("lrn_size3", "LRN", {in(F32, {2, 5, 3, 3})}, {{"size", int64_t{3}}, {"alpha", 2e-2}, {"beta", 0.5}, {"bias", 2.0}},
        lrn_ref);
    add("lrn_size4_f64", "LRN", {in(F64, {1, 6, 4})}, {{"size", int64_t{4}}}, lrn_ref);
    // ConvTranspose as a scatter: every input element adds x * w into out[i*s + k*d - pad_begin].
    auto conv_transpose_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr &X = x[0], &W = x[1];
        const size_t sp = X.shape.size() - 2;
        const int64_t group = n.attr_int("group", 1), cg = X.shape[1] / group, mg = W.shape[1];
        const Ints strides = n.attr_ints("strides", Ints(sp, 1)), dil = n.attr_ints("dilations", Ints(sp, 1));
        const Ints pads = n.attr_ints("pads"), opad = n.attr_ints("output_padding", Ints(sp, 0));
        const Ints oshape = n.attr_ints("output_shape");
        const std::string ap = n.attr_string("auto_pad", "NOTSET");
        std::vector<int64_t> pb(sp, 0);
        for (size_t d = 0; d < sp; ++d) {
            const int64_t full = strides[d] * (X.shape[2 + d] - 1) + opad[d] + (W.shape[2 + d] - 1) * dil[d] + 1;
            if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
                const int64_t total = full - X.shape[2 + d] * strides[d];
                const int64_t half = static_cast<int64_t>(std::floor(total / 2.0));
                pb[d] = ap == "SAME_UPPER" ? half : total - half;
            } else if (!oshape.empty() && pads.empty()) {
                const int64_t total = std::max<int64_t>(0, full - oshape[d]);
                pb[d] = total - total / 2;
            } else if (!pads.empty()) {
                pb[d] = pads[d];
            }
        }
        Arr y(out[0]);
        std::vector<int64_t> kernel(W.shape.begin() + 2, W.shape.end());
        for (int64_t f = 0; f < X.numel(); ++f) {
            const auto xi = X.unravel(f);
            const int64_t g = xi[1] / cg;
            for (int64_t m = 0; m < mg; ++m)
                for (const auto& k : kernel_offsets(kernel)) {
                    std::vector<int64_t> o = {xi[0], g * mg + m}, wi = {xi[1], m};
                    bool inside = true;
                    for (size_t d = 0; d < sp; ++d) {
                        const int64_t pos = xi[2 + d] * strides[d] + k[d] * dil[d] - pb[d];
                        inside = inside && pos >= 0 && pos < out[0][2 + d];
                        o.push_back(pos);
                        wi.push_back(k[d]);
                    }
                    if (inside) y.v[y.ravel(o)] += X.v[f] * W.at(wi);
                }
        }
        if (x.size() > 2 && x[2].present)
            for (int64_t f = 0; f < y.numel(); ++f) y.v[f] += x[2].v[y.unravel(f)[1]];
        return Refs{y};
    };
    add("conv_transpose2d_stride_pads", "ConvTranspose", {in(F32, {1, 2, 4, 3}), in(F32, {2, 3, 3, 3})},
        {{"strides", Ints{3, 2}}, {"pads", Ints{1, 2, 1, 0}}}, conv_transpose_ref);
    add("conv_transpose2d_group_dilation_bias", "ConvTranspose",
        {in(F32, {2, 4, 3, 3}), in(F32, {4, 3, 2, 3}), in(F32, {6})},
        {{"group", int64_t{2}}, {"dilations", Ints{2, 1}}, {"strides", Ints{1, 2}}}, conv_transpose_ref);
    add("conv_transpose2d_output_padding", "ConvTranspose", {in(F64, {1, 1, 3, 3}), in(F64, {1, 2, 3, 3})},
        {{"strides", Ints{3, 2}}, {"output_padding", Ints{1, 1}}}, conv_transpose_ref);
    add("conv_transpose2d_output_shape", "ConvTranspose", {in(F32, {1, 1, 3, 3}), in(F32, {1, 2, 3, 3})},
        {{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}}, conv_transpose_ref);
    add("conv_transpose2d_same_upper", "ConvTranspose", {in(F32, {1, 1, 3, 3}), in(F32, {1, 2, 3, 3})},
        {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}, conv_transpose_ref);
    add("conv_transpose2d_same_lower_k1", "ConvTranspose", {in(F32, {1, 2, 3, 2}), in(F32, {2, 1, 1, 2})},
        {{"strides", Ints{2, 3}}, {"auto_pad", std::string("SAME_LOWER")}}, conv_transpose_ref);
    add("conv_transpose1d_bias_f16", "ConvTranspose", {in(F16, {1, 2, 5}, -1, 1), in(F16, {2, 3, 3}, -1, 1), in(F16, {3})},
        {{"strides", Ints{2}}}, conv_transpose_ref);
    add("conv_transpose3d", "ConvTranspose", {in(F32, {1, 2, 2, 3, 2}), in(F32, {2, 2, 2, 2, 3})},
        {{"strides", Ints{2, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 0}}}, conv_transpose_ref);
    // END add_nn_cases
}

// Harness cases of the transformer op family (kept in their own block so families grow independently).
void add_transformer_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // RMSNormalization from the spec: y = x / sqrt(mean(x^2 over [axis, rank)) + eps) * scale.
    auto rms_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const int rank = x[0].rank();
        int axis = static_cast<int>(n.attr_int("axis", -1));
        if (axis < 0) axis += rank;
        const double eps = n.attr_float("epsilon", 1e-5);
        int64_t cols = 1;
        for (int k = axis; k < rank; ++k) cols *= x[0].shape[k];
        Arr y(x[0].shape);
        for (int64_t row = 0; row < x[0].numel() / cols; ++row) {
            double ms = 0;
            for (int64_t j = 0; j < cols; ++j) ms += x[0].v[row * cols + j] * x[0].v[row * cols + j];
            const double inv = 1.0 / std::sqrt(ms / cols + eps);
            for (int64_t j = 0; j < cols; ++j) {
                const int64_t f = row * cols + j;
                y.v[f] = x[0].v[f] * inv * x[1].bread(y.unravel(f));
            }
        }
        return Refs{y};
    };
    add("rms_norm_last_axis", "RMSNormalization", {in(F32, {3, 5, 16}), in(F32, {16})}, {}, rms_ref);
    add("rms_norm_axis1_eps", "RMSNormalization", {in(F32, {2, 3, 4, 5}), in(F32, {4, 1})},
        {{"axis", int64_t{1}}, {"epsilon", 1e-2}}, rms_ref);
    add("rms_norm_f16", "RMSNormalization", {in(F16, {4, 8}), in(F16, {8})}, {}, rms_ref);
    add("rms_norm_f64_neg_axis", "RMSNormalization", {in(F64, {2, 3, 4}), in(F64, {3, 4})},
        {{"axis", int64_t{-2}}}, rms_ref);
    // RotaryEmbedding from the spec: per head, feature pairs (i, i + rd/2) (interleaved: (2i, 2i+1))
    // rotate by the angle whose cos / sin the caches hold at the token's position.
    auto rope_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const Arr& xa = x[0];
        const bool is3d = xa.rank() == 3;
        const int64_t nh = is3d ? n.attr_int("num_heads", 0) : xa.shape[1];
        const int64_t b_n = xa.shape[0], s_n = is3d ? xa.shape[1] : xa.shape[2];
        const int64_t hd = is3d ? xa.shape[2] / nh : xa.shape[3];
        const int64_t rd = n.attr_int("rotary_embedding_dim", 0) ? n.attr_int("rotary_embedding_dim", 0) : hd;
        const bool inter = n.attr_int("interleaved", 0) != 0;
        const bool has_pos = x.size() > 3 && x[3].present;
        Arr y = xa;
        auto at = [&](int64_t b, int64_t h, int64_t s, int64_t d) {
            return is3d ? xa.ravel({b, s, h * hd + d}) : xa.ravel({b, h, s, d});
        };
        for (int64_t b = 0; b < b_n; ++b)
            for (int64_t h = 0; h < nh; ++h)
                for (int64_t s = 0; s < s_n; ++s)
                    for (int64_t i = 0; i < rd / 2; ++i) {
                        double c, sn;
                        if (has_pos) {
                            const auto p = static_cast<int64_t>(x[3].at({b, s}));
                            c = x[1].at({p, i}), sn = x[2].at({p, i});
                        } else {
                            c = x[1].at({b, s, i}), sn = x[2].at({b, s, i});
                        }
                        const int64_t d1 = inter ? 2 * i : i, d2 = inter ? 2 * i + 1 : i + rd / 2;
                        const double x1 = xa.v[at(b, h, s, d1)], x2 = xa.v[at(b, h, s, d2)];
                        y.v[at(b, h, s, d1)] = c * x1 - sn * x2;
                        y.v[at(b, h, s, d2)] = sn * x1 + c * x2;
                    }
        return Refs{y};
    };
    add("rope_4d_pos_ids", "RotaryEmbedding", {in(F32, {2, 3, 5, 8}), in(F32, {20, 4}), in(F32, {20, 4}),
        in(I64, {2, 5}, 0, 19)}, {}, rope_ref);
    add("rope_3d_interleaved_partial", "RotaryEmbedding", {in(F32, {2, 4, 24}), in(F32, {2, 4, 2}),
        in(F32, {2, 4, 2})}, {{"num_heads", int64_t{3}}, {"interleaved", int64_t{1}}, {"rotary_embedding_dim", int64_t{4}}},
        rope_ref);
    add("rope_4d_partial_f16", "RotaryEmbedding", {in(F16, {1, 2, 3, 8}), in(F16, {16, 2}), in(F16, {16, 2}),
        in(I64, {1, 3}, 0, 15)}, {{"rotary_embedding_dim", int64_t{4}}}, rope_ref);
    // Attention, naive per (b, h, s): scores over the concatenated past + current keys, mask /
    // causal / softcap, softmax, weighted sum of values. GQA: q head h reads kv head h / (qH/kvH).
    auto attn_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const bool is3d = x[0].rank() == 3;
        const int64_t b_n = x[0].shape[0];
        const int64_t qh = is3d ? n.attr_int("q_num_heads", 0) : x[0].shape[1];
        const int64_t kvh = is3d ? n.attr_int("kv_num_heads", 0) : x[1].shape[1];
        const int64_t qs = is3d ? x[0].shape[1] : x[0].shape[2];
        const int64_t kvs = is3d ? x[1].shape[1] : x[1].shape[2];
        const int64_t hd = is3d ? x[0].shape[2] / qh : x[0].shape[3];
        const int64_t vd = is3d ? x[2].shape[2] / kvh : x[2].shape[3];
        const bool has_past = x.size() > 4 && x[4].present;
        const int64_t past = has_past ? x[4].shape[2] : 0, total = past + kvs;
        const bool has_mask = x.size() > 3 && x[3].present;
        const bool causal = n.attr_int("is_causal", 0) != 0;
        const double scale = n.has_attr("scale") ? n.attr_float("scale", 1) : 1.0 / std::sqrt(double(hd));
        const double cap = n.attr_float("softcap", 0);
        const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
        auto q4 = [&](const Arr& a, int64_t b, int64_t h, int64_t s, int64_t d, int64_t hs) {
            return is3d ? a.at({b, s, h * hs + d}) : a.at({b, h, s, d});
        };
        Refs r{Arr(out[0])};
        for (size_t i = 1; i < out.size(); ++i) r.emplace_back(out[i]);
        auto kv = [&](int idx_cur, int idx_past, int64_t b, int64_t h, int64_t t, int64_t d, int64_t hs) {
            return t < past ? x[idx_past].at({b, h, t, d}) : q4(x[idx_cur], b, h, t - past, d, hs);
        };
        for (int64_t b = 0; b < b_n; ++b)
            for (int64_t h = 0; h < qh; ++h)
                for (int64_t s = 0; s < qs; ++s) {
                    const int64_t g = h / (qh / kvh);
                    std::vector<double> raw(total), biased(total), lg(total);
                    double mx = -INFINITY;
                    for (int64_t t = 0; t < total; ++t) {
                        double dot = 0;
                        for (int64_t d = 0; d < hd; ++d) dot += q4(x[0], b, h, s, d, hd) * kv(1, 4, b, g, t, d, hd);
                        raw[t] = dot * scale;
                        double v = raw[t];
                        if (causal && t > s + past) v = -INFINITY;
                        if (has_mask) {
                            const Arr& m = x[3];
                            const int64_t ml = m.shape.back();
                            std::vector<int64_t> oi{b, h, s, std::min(t, ml - 1)};
                            const double mv = m.bread(oi);
                            if (t >= ml) v = -INFINITY;
                            else if (m.present && n.input(3)->type().dtype == DType::kBool) v = mv != 0 ? v : -INFINITY;
                            else v += mv;
                        }
                        biased[t] = v;
                        lg[t] = cap > 0 ? cap * std::tanh(v / cap) : v;
                        mx = std::max(mx, lg[t]);
                    }
                    double sum = 0;
                    std::vector<double> p(total);
                    for (int64_t t = 0; t < total; ++t) sum += p[t] = std::exp(lg[t] - mx);
                    for (int64_t t = 0; t < total; ++t) p[t] /= sum;
                    for (int64_t d = 0; d < vd; ++d) {
                        double acc = 0;
                        for (int64_t t = 0; t < total; ++t) acc += p[t] * kv(2, 5, b, g, t, d, vd);
                        if (is3d) r[0].v[r[0].ravel({b, s, h * vd + d})] = acc;
                        else r[0].v[r[0].ravel({b, h, s, d})] = acc;
                    }
                    if (r.size() > 3)
                        for (int64_t t = 0; t < total; ++t)
                            r[3].v[r[3].ravel({b, h, s, t})] = mode == 0 ? raw[t] : mode == 1 ? biased[t] : mode == 2 ? lg[t] : p[t];
                }
        for (size_t o = 1; o < 3 && o < r.size(); ++o) {
            const int64_t hs = o == 1 ? hd : vd;
            for (int64_t f = 0; f < r[o].numel(); ++f) {
                auto i = r[o].unravel(f);
                r[o].v[f] = kv(static_cast<int>(o), static_cast<int>(o) + 3, i[0], i[1], i[2], i[3], hs);
            }
        }
        return r;
    };
    const DType BOOL = DType::kBool;
    add("attention_4d_basic", "Attention", {in(F32, {2, 3, 4, 8}), in(F32, {2, 3, 6, 8}), in(F32, {2, 3, 6, 8})}, {},
        attn_ref);
    add("attention_3d_gqa_causal_scaled", "Attention", {in(F32, {2, 5, 32}), in(F32, {2, 5, 16}), in(F32, {2, 5, 24})},
        {{"q_num_heads", int64_t{4}}, {"kv_num_heads", int64_t{2}}, {"is_causal", int64_t{1}}, {"scale", 0.3}}, attn_ref);
    add("attention_4d_past_bool_mask_softcap", "Attention",
        {in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 6}), in(BOOL, {3, 5}, 0, 1),
         in(F32, {1, 2, 2, 4}), in(F32, {1, 2, 2, 6})},
        {{"softcap", 1.5}}, attn_ref, 3);
    add("attention_4d_float_mask_qk_out", "Attention",
        {in(F32, {2, 4, 3, 8}), in(F32, {2, 2, 5, 8}), in(F32, {2, 2, 5, 8}), in(F32, {2, 1, 3, 5})},
        {{"qk_matmul_output_mode", int64_t{1}}}, attn_ref, 4);
    add("attention_4d_causal_past_probs_out", "Attention",
        {in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 4}), in(F32, {1, 2, 3, 4}), omitted(), in(F32, {1, 2, 4, 4}),
         in(F32, {1, 2, 4, 4})},
        {{"is_causal", int64_t{1}}, {"qk_matmul_output_mode", int64_t{3}}}, attn_ref, 4);
    add("attention_4d_f16", "Attention", {in(F16, {1, 2, 4, 8}), in(F16, {1, 2, 4, 8}), in(F16, {1, 2, 4, 8})}, {},
        attn_ref);
    // END add_transformer_cases
}

// Harness cases of the loss op family (kept in their own block so families grow independently).
void add_loss_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // NLL / softmax cross-entropy from the ONNX reference: per target position p = (n, d..),
    // lp = x (NLL) or log_softmax(x) over axis 1 (SCE); w_p = (t == ignore_index) ? 0 : weight[t]
    // (1 without weight); loss_p = -lp[n, t, d..] * w_p; none / sum / mean = sum(loss) / sum(w).
    auto loss_ref = [](bool softmax) -> RefFn {
        return [softmax](const std::vector<Arr>& x, const ir::Node& n,
                         const std::vector<Shape>& out) {
            const Arr& X = x[0];
            const Arr& T = x[1];
            const bool has_w = x.size() > 2 && x[2].present;
            const bool has_ii = n.has_attr("ignore_index");
            const int64_t ii = n.attr_int("ignore_index", 0);
            const std::string red = n.attr_string("reduction", "mean");
            const int64_t C = X.shape[1];
            Arr lp = X;
            if (softmax) {
                for_each_line(X.shape, 1, [&](const std::vector<int64_t>& line) {
                    double m = -INFINITY, s = 0;
                    for (int64_t p : line) m = std::max(m, X.v[p]);
                    for (int64_t p : line) s += std::exp(X.v[p] - m);
                    for (int64_t p : line) lp.v[p] = X.v[p] - m - std::log(s);
                });
            }
            Arr loss(T.shape);
            double total = 0, wsum = 0;
            for (int64_t f = 0; f < T.numel(); ++f) {
                const auto p = T.unravel(f);
                const int64_t t = static_cast<int64_t>(T.v[f]);
                if (has_ii && t == ii) continue;
                const double w = has_w ? x[2].v[t] : 1.0;
                std::vector<int64_t> idx{p[0], t};
                idx.insert(idx.end(), p.begin() + 1, p.end());
                EXPECT_TRUE(t >= 0 && t < C) << "reference target out of range";
                loss.v[f] = -lp.at(idx) * w;
                total += loss.v[f];
                wsum += w;
            }
            Refs r;
            if (red == "none") {
                r.push_back(loss);
            } else {
                Arr y(Shape{});
                y.v[0] = red == "sum" ? total : total / wsum;
                r.push_back(y);
            }
            if (out.size() > 1) r.push_back(lp);
            return r;
        };
    };
    using Attrs = AttrMap;
    const std::string kNone = "none", kSum = "sum", kMean = "mean";
    add("nll_nc_none", "NegativeLogLikelihoodLoss", {in(F32, {4, 5}), in(I64, {4}, 0, 4)},
        Attrs{{"reduction", kNone}}, loss_ref(false));
    add("nll_ncd1_mean_weight", "NegativeLogLikelihoodLoss",
        {in(F32, {3, 5, 4}), in(I64, {3, 4}, 0, 4), in(F32, {5}, 0.1, 2)}, Attrs{},
        loss_ref(false));
    add("nll_ncd1d2_sum_ii_i32_f64", "NegativeLogLikelihoodLoss",
        {in(F64, {2, 4, 3, 5}), in(I32, {2, 3, 5}, 0, 3), in(F64, {4}, 0.1, 2)},
        Attrs{{"reduction", kSum}, {"ignore_index", int64_t{1}}}, loss_ref(false));
    // ignore_index outside [0, C): the ignored targets must not read out of bounds.
    add("nll_ncd1_mean_negative_ii", "NegativeLogLikelihoodLoss",
        {in(F32, {3, 5, 6}), in(I64, {3, 6}, -1, 4)},
        Attrs{{"ignore_index", int64_t{-1}}}, loss_ref(false));
    add("nll_nc_mean_high_ii_f16", "NegativeLogLikelihoodLoss",
        {in(F16, {6, 3}, -1, 1), in(I64, {6}, 0, 3), in(F16, {3}, 0.5, 1)},
        Attrs{{"ignore_index", int64_t{3}}}, loss_ref(false));
    add("sce_nc_mean", "SoftmaxCrossEntropyLoss", {in(F32, {4, 5}), in(I64, {4}, 0, 4)}, Attrs{},
        loss_ref(true));
    add("sce_ncd1_none_weight_log_prob", "SoftmaxCrossEntropyLoss",
        {in(F32, {3, 5, 2}), in(I64, {3, 2}, 0, 4), in(F32, {5}, 0.1, 2)},
        Attrs{{"reduction", kNone}}, loss_ref(true), 2);
    add("sce_ncd1d2_mean_weight_ii_f64", "SoftmaxCrossEntropyLoss",
        {in(F64, {2, 4, 3, 3}, -5, 5), in(I32, {2, 3, 3}, 0, 4), in(F64, {4}, 0.1, 2)},
        Attrs{{"reduction", kMean}, {"ignore_index", int64_t{4}}}, loss_ref(true), 2);
    add("sce_ncd1_sum_f16", "SoftmaxCrossEntropyLoss",
        {in(F16, {3, 4, 2}, -1, 1), in(I64, {3, 2}, 0, 3)},
        Attrs{{"reduction", kSum}}, loss_ref(true));
    // END add_loss_cases
}

// Harness cases of the resize op family (kept in their own block so families grow independently).
void add_resize_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // Resize / GridSample references: direct textbook formulas per output element.
    auto fconst = [](std::vector<double> v) {
        In i{F32, {static_cast<int64_t>(v.size())}};
        i.constant = std::move(v);
        return i;
    };
    // Nearest, asymmetric + floor: src = floor(o / scale).
    auto nearest_floor_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr r(out[0]);
        for (int64_t f = 0; f < r.numel(); ++f) {
            auto o = r.unravel(f);
            for (int d = 0; d < r.rank(); ++d) {
                const double s = static_cast<double>(out[0][d]) / static_cast<double>(x[0].shape[d]);
                o[d] = std::min<int64_t>(static_cast<int64_t>(std::floor(o[d] / s)), x[0].shape[d] - 1);
            }
            r.v[f] = x[0].at(o);
        }
        return Refs{r};
    };
    add("resize_nearest_asymmetric_floor", "Resize", {in(F32, {1, 2, 3, 4}), omitted(), fconst({1, 1, 2, 3})},
        {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
         {"nearest_mode", std::string("floor")}},
        nearest_floor_ref);
    add("resize_nearest_i8_sizes_axes", "Resize", {in(I8, {2, 3, 4}, -100, 100), omitted(), omitted(), constant({8, 6})},
        {{"mode", std::string("nearest")}, {"coordinate_transformation_mode", std::string("asymmetric")},
         {"nearest_mode", std::string("floor")}, {"axes", Ints{2, 1}}},
        nearest_floor_ref);
    // Bilinear (PyTorch align_corners=False): src = (o + 0.5) * in / out - 0.5, edge-clamped taps.
    add("resize_linear_half_pixel_sizes", "Resize", {in(F32, {1, 2, 5, 4}), omitted(), omitted(), constant({1, 2, 3, 7})},
        {{"mode", std::string("linear")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr r(out[0]);
            const Shape& is = x[0].shape;
            for (int64_t f = 0; f < r.numel(); ++f) {
                auto o = r.unravel(f);
                double acc = 0;
                const double sy = (o[2] + 0.5) * is[2] / out[0][2] - 0.5, sx = (o[3] + 0.5) * is[3] / out[0][3] - 0.5;
                const double fy = std::floor(sy), fx = std::floor(sx);
                for (int dy = 0; dy < 2; ++dy)
                    for (int dx = 0; dx < 2; ++dx) {
                        const double wy = dy ? sy - fy : 1 - (sy - fy), wx = dx ? sx - fx : 1 - (sx - fx);
                        const int64_t y = std::clamp<int64_t>(static_cast<int64_t>(fy) + dy, 0, is[2] - 1);
                        const int64_t xx = std::clamp<int64_t>(static_cast<int64_t>(fx) + dx, 0, is[3] - 1);
                        acc += wy * wx * x[0].at({o[0], o[1], y, xx});
                    }
                r.v[f] = acc;
            }
            return Refs{r};
        });
    // Bicubic (Keys a = -0.5), align_corners: src = o * (in-1) / (out-1), edge-clamped taps.
    add("resize_cubic_align_corners_f64", "Resize", {in(F64, {1, 1, 4, 3}), omitted(), fconst({1, 1, 2, 2})},
        {{"mode", std::string("cubic")}, {"coordinate_transformation_mode", std::string("align_corners")},
         {"cubic_coeff_a", -0.5}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            auto keys = [](double t) {
                const double a = -0.5;
                t = std::abs(t);
                if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
                if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
                return 0.0;
            };
            Arr r(out[0]);
            const Shape& is = x[0].shape;
            for (int64_t f = 0; f < r.numel(); ++f) {
                auto o = r.unravel(f);
                const double sy = o[2] * (is[2] - 1.0) / (out[0][2] - 1.0), sx = o[3] * (is[3] - 1.0) / (out[0][3] - 1.0);
                const int64_t fy = static_cast<int64_t>(std::floor(sy)), fx = static_cast<int64_t>(std::floor(sx));
                double acc = 0;
                for (int64_t y = fy - 1; y <= fy + 2; ++y)
                    for (int64_t xx = fx - 1; xx <= fx + 2; ++xx)
                        acc += keys(sy - y) * keys(sx - xx) *
                               x[0].at({0, 0, std::clamp<int64_t>(y, 0, is[2] - 1), std::clamp<int64_t>(xx, 0, is[3] - 1)});
                r.v[f] = acc;
            }
            return Refs{r};
        });
    // GridSample bilinear, 4-D, PyTorch formulation: unnormalize, then zeros / border / reflection.
    auto grid_ref = [](bool align, std::string pad) {
        return [align, pad](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr r(out[0]);
            const int64_t H = x[0].shape[2], W = x[0].shape[3];
            auto coord = [&](double g, int64_t n) {
                double v = align ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
                if (pad == "border") v = std::clamp(v, 0.0, n - 1.0);
                if (pad == "reflection") {
                    const double lo = align ? 0.0 : -0.5, span = align ? n - 1.0 : double(n);
                    double a = std::abs(v - lo);
                    const double extra = std::fmod(a, span);
                    const int64_t flips = static_cast<int64_t>(std::floor(a / span));
                    v = flips % 2 == 0 ? extra + lo : span - extra + lo;
                    v = std::clamp(v, 0.0, n - 1.0);
                }
                return v;
            };
            for (int64_t f = 0; f < r.numel(); ++f) {
                auto o = r.unravel(f);
                const double sx = coord(x[1].at({o[0], o[2], o[3], 0}), W), sy = coord(x[1].at({o[0], o[2], o[3], 1}), H);
                const double fy = std::floor(sy), fx = std::floor(sx);
                double acc = 0;
                for (int dy = 0; dy < 2; ++dy)
                    for (int dx = 0; dx < 2; ++dx) {
                        const int64_t y = static_cast<int64_t>(fy) + dy, xx = static_cast<int64_t>(fx) + dx;
                        if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                        const double w = (dy ? sy - fy : 1 - (sy - fy)) * (dx ? sx - fx : 1 - (sx - fx));
                        acc += w * x[0].at({o[0], o[1], y, xx});
                    }
                r.v[f] = acc;
            }
            return Refs{r};
        };
    };
    add("gridsample_bilinear_zeros", "GridSample", {in(F32, {2, 3, 4, 5}), in(F32, {2, 3, 6, 2}, -1.3, 1.3)},
        {{"mode", std::string("linear")}, {"padding_mode", std::string("zeros")}}, grid_ref(false, "zeros"));
    add("gridsample_bilinear_border_aligned", "GridSample", {in(F32, {1, 2, 3, 4}), in(F32, {1, 5, 4, 2}, -1.5, 1.5)},
        {{"mode", std::string("bilinear")}, {"padding_mode", std::string("border")}, {"align_corners", int64_t{1}}},
        grid_ref(true, "border"));
    add("gridsample_bilinear_reflection_f64", "GridSample", {in(F64, {1, 2, 4, 3}), in(F64, {1, 4, 4, 2}, -2.5, 2.5)},
        {{"mode", std::string("linear")}, {"padding_mode", std::string("reflection")}}, grid_ref(false, "reflection"));
    // END add_resize_cases
}

// Harness cases of the quant op family (kept in their own block so families grow independently).
void add_quant_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // Scale / zero point at an element of x: one element (per tensor), x's index along axis
    // (per axis), or that index / block (blocked).
    auto param_at = [](const Arr& p, std::vector<int64_t> idx, int axis, int64_t block) {
        if (p.numel() == 1) return p.v[0];
        if (block == 0) return p.v[idx[axis]];
        idx[axis] /= block;
        return p.at(idx);
    };
    // QuantizeLinear from the spec: saturate(rint(x / scale) + zp) to [lo, hi], rint half to even
    // (std::nearbyint in the default rounding mode); the division in f32 (f64 for int32 x).
    auto quantize_ref = [param_at](double lo, double hi, bool f64_div) -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
            const int axis = norm_axis(n.attr_int("axis", 1), x[0].rank());
            const int64_t block = n.attr_int("block_size", 0);
            Arr y(x[0].shape);
            for (int64_t f = 0; f < y.numel(); ++f) {
                const auto idx = y.unravel(f);
                const double s = param_at(x[1], idx, axis, block);
                const double q = f64_div ? x[0].v[f] / s : static_cast<double>(static_cast<float>(x[0].v[f]) / static_cast<float>(s));
                const double zp = x.size() > 2 && x[2].present ? param_at(x[2], idx, axis, block) : 0.0;
                y.v[f] = std::clamp(std::nearbyint(q) + zp, lo, hi);
            }
            return Refs{y};
        };
    };
    add("quantize_per_tensor_u8", "QuantizeLinear", {in(F32, {3, 7}, -40, 40), in(F32, {}, 0.1, 0.3), in(U8, {}, 60, 200)},
        {}, quantize_ref(0, 255, false));
    add("quantize_per_axis_i8_output_dtype", "QuantizeLinear", {in(F32, {2, 3, 4}, -50, 50), in(F32, {3}, 0.2, 0.5)},
        {{"axis", int64_t{1}}, {"output_dtype", int64_t{3}}}, quantize_ref(-128, 127, false));
    add("quantize_blocked_i16", "QuantizeLinear",
        {in(F32, {3, 5}, -9000, 9000), in(F32, {3, 3}, 0.05, 0.2), in(I16, {3, 3}, -2000, 2000)},
        {{"axis", int64_t{-1}}, {"block_size", int64_t{2}}}, quantize_ref(-32768, 32767, false));
    add("quantize_int32_input_u16", "QuantizeLinear",
        {in(I32, {10}, -100000, 100000), in(F32, {1}, 0.5, 3), in(U16, {1}, 0, 65535)}, {},
        quantize_ref(0, 65535, true));
    // DequantizeLinear from the spec: (x - zp) * scale.
    auto dequantize_ref = [param_at]() -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
            const int axis = norm_axis(n.attr_int("axis", 1), x[0].rank());
            const int64_t block = n.attr_int("block_size", 0);
            Arr y(x[0].shape);
            for (int64_t f = 0; f < y.numel(); ++f) {
                const auto idx = y.unravel(f);
                const double zp = x.size() > 2 && x[2].present ? param_at(x[2], idx, axis, block) : 0.0;
                y.v[f] = (x[0].v[f] - zp) * param_at(x[1], idx, axis, block);
            }
            return Refs{y};
        };
    };
    add("dequantize_per_tensor_u8", "DequantizeLinear", {in(U8, {4, 5}, 0, 255), in(F32, {}, 0.01, 0.1), in(U8, {}, 0, 255)},
        {}, dequantize_ref());
    add("dequantize_per_axis_i8_f16", "DequantizeLinear", {in(I8, {2, 4, 3}, -128, 127), in(F16, {4}, 0.01, 0.05)},
        {{"axis", int64_t{-2}}}, dequantize_ref());
    add("dequantize_blocked_i16_output_dtype", "DequantizeLinear",
        {in(I16, {4, 7}, -32768, 32767), in(F32, {2, 7}, 0.001, 0.01), in(I16, {2, 7}, -500, 500)},
        {{"axis", int64_t{0}}, {"block_size", int64_t{3}}, {"output_dtype", int64_t{11}}}, dequantize_ref());
    add("dequantize_int32", "DequantizeLinear", {in(I32, {6}, -2000000000, 2000000000), in(F64, {}, 1e-6, 1e-5)}, {},
        dequantize_ref());
    // DynamicQuantizeLinear from the spec (f32 arithmetic): the range extended to 0,
    // scale = (max - min) / 255, zp = rint(clamp(-min / scale, 0, 255)),
    // y = clamp(rint(x / scale) + zp, 0, 255).
    auto dynamic_quantize_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        float hi = 0, lo = 0;
        for (double v : x[0].v) hi = std::max(hi, static_cast<float>(v)), lo = std::min(lo, static_cast<float>(v));
        const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
        const float zp = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
        Arr y(out[0]), s(out[1]), z(out[2]);
        for (int64_t f = 0; f < y.numel(); ++f)
            y.v[f] = std::clamp(std::nearbyint(static_cast<float>(x[0].v[f]) / scale) + zp, 0.0f, 255.0f);
        s.v[0] = scale;
        z.v[0] = zp;
        return Refs{y, s, z};
    };
    add("dynamic_quantize_mixed_sign", "DynamicQuantizeLinear", {in(F32, {3, 4}, -3, 5)}, {}, dynamic_quantize_ref, 3);
    add("dynamic_quantize_positive", "DynamicQuantizeLinear", {in(F32, {2, 3, 5}, 0.5, 4)}, {}, dynamic_quantize_ref, 3);
    // (x - zp) for a zero point per tensor or per index `pos` of x (MatMul rows / columns, Conv
    // output channels).
    auto shifted = [](const Arr& x, const Arr* zp, int pos) {
        Arr r = x;
        if (!zp || !zp->present) return r;
        for (int64_t f = 0; f < r.numel(); ++f) {
            const auto idx = r.unravel(f);
            const int p = pos < 0 ? r.rank() + pos : pos;
            r.v[f] -= zp->numel() == 1 ? zp->v[0] : zp->v[idx[p]];
        }
        return r;
    };
    auto matmul_integer_ref = [shifted](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        return Refs{ref_matmul(shifted(x[0], x.size() > 2 ? &x[2] : nullptr, -2),
                               shifted(x[1], x.size() > 3 ? &x[3] : nullptr, -1), out[0])};
    };
    add("matmul_integer_per_row_col", "MatMulInteger", {in(U8, {3, 4}, 0, 255), in(I8, {4, 5}, -128, 127),
        in(U8, {3}, 0, 255), in(I8, {5}, -128, 127)}, {}, matmul_integer_ref);
    add("matmul_integer_batched_no_zp", "MatMulInteger", {in(I8, {2, 3, 6}, -128, 127), in(U8, {6, 2}, 0, 255)}, {},
        matmul_integer_ref);
    add("matmul_integer_b_zp_only", "MatMulInteger", {in(U8, {4, 3}, 0, 255), in(U8, {2, 3, 5}, 0, 255), omitted(),
        in(U8, {}, 0, 255)}, {}, matmul_integer_ref);
    auto conv_integer_ref = [shifted](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        return Refs{ref_conv(shifted(x[0], x.size() > 2 ? &x[2] : nullptr, 0),
                             shifted(x[1], x.size() > 3 ? &x[3] : nullptr, 0), nullptr, n, out[0])};
    };
    add("conv_integer_pads_strides_per_channel", "ConvInteger", {in(U8, {1, 2, 6, 5}, 0, 255),
        in(I8, {3, 2, 3, 3}, -128, 127), in(U8, {}, 0, 255), in(I8, {3}, -10, 10)},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 1}}}, conv_integer_ref);
    add("conv_integer_group_same_upper", "ConvInteger", {in(I8, {2, 4, 5, 5}, -128, 127),
        in(I8, {4, 2, 2, 2}, -128, 127), in(I8, {}, -128, 127)},
        {{"group", int64_t{2}}, {"auto_pad", std::string("SAME_UPPER")}}, conv_integer_ref);
    // QLinear*: y = saturate(rint(acc * m + y_zp)) with m = a_scale * b_scale / y_scale rounded
    // to the scale type after each operation (f16 via support's half conversions), acc * m in
    // double (numpy's promotion of int32 * float).
    auto round_scale = [](double v, bool half) {
        return half ? static_cast<double>(half_to_float(float_to_half(static_cast<float>(v))))
                    : static_cast<double>(static_cast<float>(v));
    };
    auto requant = [round_scale](double acc, double s1, double s2, double s3, double yzp, bool half, double lo,
                                 double hi) {
        const double m = round_scale(round_scale(s1 * s2, half) / s3, half);
        return std::clamp(std::nearbyint(acc * m + yzp), lo, hi);
    };
    auto qlinear_matmul_ref = [shifted, requant](bool half, double lo, double hi) -> RefFn {
        return [=](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr acc = ref_matmul(shifted(x[0], &x[2], -2), shifted(x[3], &x[5], -1), out[0]);
            for (int64_t f = 0; f < acc.numel(); ++f) {
                const auto idx = acc.unravel(f);
                const int64_t r = idx[idx.size() - 2], c = idx.back();
                const double sa = x[1].numel() == 1 ? x[1].v[0] : x[1].v[r];
                const double sb = x[4].numel() == 1 ? x[4].v[0] : x[4].v[c];
                acc.v[f] = requant(acc.v[f], sa, sb, x[6].v[0], x[7].v[0], half, lo, hi);
            }
            return Refs{acc};
        };
    };
    add("qlinear_matmul_i8_per_column", "QLinearMatMul", {in(I8, {2, 3, 4}, -128, 127), in(F32, {}, 0.01, 0.03),
        in(I8, {}, -20, 20), in(U8, {4, 5}, 0, 255), in(F32, {5}, 0.01, 0.03), in(U8, {5}, 100, 150),
        in(F32, {}, 0.02, 0.05), in(I8, {}, -10, 10)}, {}, qlinear_matmul_ref(false, -128, 127));
    add("qlinear_matmul_u8_f16_scales_per_row", "QLinearMatMul", {in(U8, {3, 6}, 0, 255), in(F16, {3}, 0.01, 0.03),
        in(U8, {3}, 100, 150), in(I8, {6, 2}, -128, 127), in(F16, {1}, 0.01, 0.03), in(I8, {1}, -5, 5),
        in(F16, {1}, 0.05, 0.1), in(U8, {1}, 100, 150)}, {}, qlinear_matmul_ref(true, 0, 255));
    auto qlinear_conv_ref = [shifted, requant](const std::vector<Arr>& x, const ir::Node& n,
                                               const std::vector<Shape>& out) {
        const Arr* bias = x.size() > 8 && x[8].present ? &x[8] : nullptr;
        Arr acc = ref_conv(shifted(x[0], &x[2], 0), shifted(x[3], &x[5], 0), bias, n, out[0]);
        for (int64_t f = 0; f < acc.numel(); ++f) {
            const int64_t m = acc.unravel(f)[1];
            const double sw = x[4].numel() == 1 ? x[4].v[0] : x[4].v[m];
            acc.v[f] = requant(acc.v[f], x[1].v[0], sw, x[6].v[0], x[7].v[0], false, 0, 255);
        }
        return Refs{acc};
    };
    add("qlinear_conv_per_channel_bias", "QLinearConv", {in(U8, {1, 2, 5, 6}, 0, 255), in(F32, {}, 0.01, 0.02),
        in(U8, {}, 100, 150), in(I8, {3, 2, 3, 3}, -20, 20), in(F32, {3}, 0.01, 0.02), in(I8, {3}, -3, 3),
        in(F32, {}, 0.01, 0.02), in(U8, {}, 100, 150), in(I32, {3}, -2000, 2000)},
        {{"pads", Ints{1, 0, 1, 2}}, {"strides", Ints{1, 2}}}, qlinear_conv_ref);
    add("qlinear_conv_no_bias_dilation", "QLinearConv", {in(U8, {2, 1, 7, 7}, 0, 255), in(F32, {1}, 0.01, 0.02),
        in(U8, {1}, 100, 150), in(U8, {2, 1, 2, 2}, 0, 255), in(F32, {}, 0.01, 0.02), in(U8, {}, 100, 150),
        in(F32, {}, 0.05, 0.1), in(U8, {}, 100, 150)}, {{"dilations", Ints{2, 2}}}, qlinear_conv_ref);
    // END add_quant_cases
}

// Harness cases of the dtype op family (kept in their own block so families grow independently).
void add_dtype_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // Cast to the low-precision types. Reference: round |x| to nearest even on the format's grid
    // (quantum 2^(max(floor(log2|x|), 1 - bias) - mantissa bits), std::nearbyint), then the
    // saturate=1 clamp to +-max; i4/u4 truncate and wrap (checked after wrapping).
    auto grid = [](int m_bits, int bias, double max) {
        return [=](double x) {
            if (x == 0) return x;
            const int e = std::max(static_cast<int>(std::floor(std::log2(std::fabs(x)))), 1 - bias);
            const double q = std::ldexp(1.0, e - m_bits);
            return std::clamp(std::nearbyint(x / q) * q, -max, max);
        };
    };
    auto lowp_cast = [&](const char* name, In x, int onnx_to, std::function<double(double)> f) {
        add(name, "Cast", {std::move(x)}, {{"to", int64_t{onnx_to}}}, unary_ref(std::move(f)));
    };
    lowp_cast("cast_f32_to_f8e4m3fn_saturate", in(F32, {4, 8}, -600, 600), 17, grid(3, 7, 448));
    lowp_cast("cast_f32_to_f8e4m3fnuz_small", in(F32, {37}, -0.05, 0.05), 18, grid(3, 8, 240));
    lowp_cast("cast_f16_to_f8e5m2_saturate", in(F16, {4, 8}, -65000, 65000), 19, grid(2, 15, 57344));
    lowp_cast("cast_f32_to_f8e5m2fnuz", in(F32, {33}, -3, 3), 20, grid(2, 16, 57344));
    lowp_cast("cast_f32_to_f4e2m1_saturate", in(F32, {25}, -9, 9), 23, grid(1, 1, 6));
    lowp_cast("cast_f32_to_i4_wraps", in(F32, {25}, -20, 20), 22, [](double x) { return std::trunc(x); });
    lowp_cast("cast_i32_to_u4_wraps", in(I32, {25}, -40, 40), 21, [](double x) { return x; });
    lowp_cast("cast_f8e4m3fn_to_f32_exact", in(DType::kFloat8E4M3FN, {16}, -400, 400), 1, [](double x) { return x; });
    lowp_cast("cast_i4_to_f16_exact", in(DType::kInt4, {16}, -8, 7), 10, [](double x) { return x; });
    // END add_dtype_cases
}

// Harness cases of the signal op family (kept in their own block so families grow independently).
void add_signal_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // Scalar constant inputs (window sizes, mel parameters).
    auto scalar = [](DType t, double v) {
        In i{t, {}};
        i.constant = {v};
        return i;
    };
    // Windows from their textbook definitions: M = periodic ? N : N - 1.
    auto window_ref = [](std::function<double(double, double)> w) -> RefFn {
        return [w](const std::vector<Arr>&, const ir::Node& n, const std::vector<Shape>& out) {
            Arr y(out[0]);
            const double m = static_cast<double>(n.attr_int("periodic", 1) ? out[0][0] : out[0][0] - 1);
            for (int64_t k = 0; k < y.numel(); ++k) y.v[k] = w(static_cast<double>(k), m);
            return Refs{y};
        };
    };
    const double pi = 3.14159265358979323846;
    add("hann_window_periodic", "HannWindow", {scalar(I32, 10)}, {},
        window_ref([=](double k, double m) { return std::pow(std::sin(pi * k / m), 2); }));
    add("hamming_window_symmetric_f64", "HammingWindow", {scalar(I64, 7)},
        {{"periodic", int64_t{0}}, {"output_datatype", int64_t{11}}},
        window_ref([=](double k, double m) { return 0.54347826086956522 - 0.45652173913043478 * std::cos(2 * pi * k / m); }));
    add("blackman_window_periodic", "BlackmanWindow", {scalar(I32, 12)}, {},
        window_ref([=](double k, double m) {
            return 0.42 - 0.5 * std::cos(2 * pi * k / m) + 0.08 * std::cos(4 * pi * k / m);
        }));
    // MelWeightMatrix: the spec's loops (triangle rising from bin[i] to bin[i+1], falling to bin[i+2]).
    add("mel_weight_matrix", "MelWeightMatrix",
        {scalar(I64, 6), scalar(I64, 64), scalar(I64, 16000), scalar(F32, 100), scalar(F32, 7000)}, {},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            const int64_t mels = static_cast<int64_t>(x[0].v[0]), dft = static_cast<int64_t>(x[1].v[0]);
            const double rate = x[2].v[0];
            auto mel = [](double hz) { return 2595.0f * std::log10(1.0f + static_cast<float>(hz) / 700.0f); };
            const float lo = mel(x[3].v[0]), hi = mel(x[4].v[0]);
            const float step = (hi - lo) / static_cast<float>(mels + 2);
            std::vector<int64_t> bin;
            for (int64_t k = 0; k < mels + 2; ++k) {
                const double hz = 700.0 * (std::pow(10.0, (k * static_cast<double>(step) + lo) / 2595.0) - 1.0);
                bin.push_back(static_cast<int64_t>(std::floor((dft + 1) * hz / rate)));
            }
            Arr y(out[0]);
            for (int64_t i = 0; i < mels; ++i) {
                const int64_t l = bin[i], c = bin[i + 1], h = bin[i + 2];
                if (c == l) y.v[y.ravel({c, i})] = 1;
                else
                    for (int64_t j = l; j <= c; ++j) y.v[y.ravel({j, i})] = double(j - l) / double(c - l);
                for (int64_t j = c; j < h; ++j) y.v[y.ravel({j, i})] = double(h - j) / double(h - c);
            }
            return Refs{y};
        });
    // Shrink / Swish: scalar formulas.
    auto shrink = [](double lambd, double bias) {
        return unary_ref([=](double v) { return v < -lambd ? v + bias : v > lambd ? v - bias : 0.0; });
    };
    add("shrink_soft_f32", "Shrink", {in(F32, {3, 7}, -3, 3)}, {{"lambd", 1.5}, {"bias", 1.5}}, shrink(1.5, 1.5));
    add("shrink_hard_f64", "Shrink", {in(F64, {11})}, {{"lambd", 0.7}}, shrink(0.7, 0.0));
    add("shrink_i32", "Shrink", {in(I32, {4, 5}, -6, 6)}, {{"lambd", 2.0}, {"bias", 1.0}}, shrink(2.0, 1.0));
    add("swish_alpha", "Swish", {in(F32, {2, 9}, -6, 6)}, {{"alpha", 0.5}},
        unary_ref([](double v) { return v / (1 + std::exp(-0.5 * v)); }));
    add("swish_f16", "Swish", {in(F16, {8})}, {}, unary_ref([](double v) { return v / (1 + std::exp(-v)); }));
    // AffineGrid: base point per the spec's linspace, times theta.
    auto affine_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const bool align = n.attr_int("align_corners", 0) != 0;
        const int sd = static_cast<int>(out[0].size()) - 2;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); ++f) {
            const auto o = y.unravel(f);
            std::vector<double> pt;  // x (last spatial dim) first, then 1
            for (int d = sd; d >= 1; --d) {
                const double s = static_cast<double>(out[0][d]);
                pt.push_back(align ? (s == 1 ? -1.0 : -1.0 + 2.0 * o[d] / (s - 1)) : -1.0 + 1.0 / s + 2.0 * o[d] / s);
            }
            pt.push_back(1.0);
            double acc = 0;
            for (int j = 0; j <= sd; ++j) acc += x[0].at({o[0], o[sd + 1], j}) * pt[j];
            y.v[f] = acc;
        }
        return Refs{y};
    };
    add("affine_grid_2d", "AffineGrid", {in(F32, {2, 2, 3}), constant({2, 3, 4, 5})}, {}, affine_ref);
    add("affine_grid_3d_align_f64", "AffineGrid", {in(F64, {1, 3, 4}), constant({1, 1, 3, 1, 4})},
        {{"align_corners", int64_t{1}}}, affine_ref);
    // Col2Im: scatter-add of every column entry to its image position (the im2col definition).
    auto col2im_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Ints image(x[1].v.begin(), x[1].v.end()), block(x[2].v.begin(), x[2].v.end());
        const size_t sd = image.size();
        const Ints st = n.attr_ints("strides", Ints(sd, 1)), dil = n.attr_ints("dilations", Ints(sd, 1));
        const Ints pads = n.attr_ints("pads", Ints(2 * sd, 0));
        Ints nb;
        for (size_t d = 0; d < sd; ++d) nb.push_back((image[d] + pads[d] + pads[d + sd] - dil[d] * (block[d] - 1) - 1) / st[d] + 1);
        Arr y(out[0]);
        Arr kb(Shape(block.begin(), block.end())), qb(Shape(nb.begin(), nb.end()));
        const int64_t bs = kb.numel();
        for (int64_t f = 0; f < x[0].numel(); ++f) {
            const auto idx = x[0].unravel(f);
            const auto k = kb.unravel(idx[1] % bs), q = qb.unravel(idx[2]);
            std::vector<int64_t> o = {idx[0], idx[1] / bs};
            bool inside = true;
            for (size_t d = 0; d < sd; ++d) {
                const int64_t p = q[d] * st[d] - pads[d] + k[d] * dil[d];
                inside = inside && p >= 0 && p < image[d];
                o.push_back(p);
            }
            if (inside) y.v[y.ravel(o)] += x[0].v[f];
        }
        return Refs{y};
    };
    add("col2im_2d_pads_strides_dilations", "Col2Im", {in(F32, {2, 12, 9}), constant({5, 6}), constant({2, 3})},
        {{"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}, {"pads", Ints{1, 0, 0, 1}}}, col2im_ref);
    add("col2im_3d_f64", "Col2Im", {in(F64, {1, 8, 24}), constant({3, 4, 5}), constant({2, 2, 2})}, {}, col2im_ref);
    // Einsum: explicit loops over every label assignment (equation-specific reference lambdas).
    add("einsum_batch_matmul", "Einsum", {in(F32, {3, 2, 4}), in(F32, {3, 4, 5})}, {{"equation", std::string("bij, bjk -> bik")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t b = 0; b < 3; ++b)
                for (int64_t i = 0; i < 2; ++i)
                    for (int64_t k = 0; k < 5; ++k)
                        for (int64_t j = 0; j < 4; ++j) y.v[y.ravel({b, i, k})] += x[0].at({b, i, j}) * x[1].at({b, j, k});
            return Refs{y};
        });
    add("einsum_implicit_matmul_transposed", "Einsum", {in(F64, {4, 3}), in(F64, {2, 4})}, {{"equation", std::string("ji,kj")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {  // implicit output "ik"
            Arr y(out[0]);
            for (int64_t i = 0; i < 3; ++i)
                for (int64_t k = 0; k < 2; ++k)
                    for (int64_t j = 0; j < 4; ++j) y.v[y.ravel({i, k})] += x[0].at({j, i}) * x[1].at({k, j});
            return Refs{y};
        });
    add("einsum_ellipsis_diagonal", "Einsum", {in(F32, {2, 3, 4, 4})}, {{"equation", std::string("...ii->...i")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t f = 0; f < y.numel(); ++f) {
                const auto o = y.unravel(f);
                y.v[f] = x[0].at({o[0], o[1], o[2], o[2]});
            }
            return Refs{y};
        });
    add("einsum_ellipsis_broadcast_sum", "Einsum", {in(I32, {2, 1, 3}, -5, 5), in(I32, {4, 3}, -5, 5)},
        {{"equation", std::string("...j,...j->...")}},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);  // [2, 4]
            for (int64_t a = 0; a < 2; ++a)
                for (int64_t b = 0; b < 4; ++b)
                    for (int64_t j = 0; j < 3; ++j) y.v[y.ravel({a, b})] += x[0].at({a, 0, j}) * x[1].at({b, j});
            return Refs{y};
        });
    // Det: Gaussian elimination with partial pivoting in double.
    auto det_ref = [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const int64_t m = x[0].shape.back();
        for (int64_t b = 0; b < y.numel(); ++b) {
            std::vector<double> a(x[0].v.begin() + b * m * m, x[0].v.begin() + (b + 1) * m * m);
            double det = 1;
            for (int64_t c = 0; c < m; ++c) {
                int64_t p = c;
                for (int64_t r = c + 1; r < m; ++r)
                    if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
                if (p != c) {
                    for (int64_t k = 0; k < m; ++k) std::swap(a[p * m + k], a[c * m + k]);
                    det = -det;
                }
                det *= a[c * m + c];
                if (a[c * m + c] == 0) break;
                for (int64_t r = c + 1; r < m; ++r) {
                    const double fct = a[r * m + c] / a[c * m + c];
                    for (int64_t k = c; k < m; ++k) a[r * m + k] -= fct * a[c * m + k];
                }
            }
            y.v[b] = det;
        }
        return Refs{y};
    };
    add("det_2x2", "Det", {in(F32, {2, 2})}, {}, det_ref);
    add("det_batch_3x3", "Det", {in(F32, {2, 3, 3, 3})}, {}, det_ref);
    add("det_4x4_f64", "Det", {in(F64, {3, 4, 4})}, {}, det_ref);
    // TensorScatter: the spec's loop, copying update rows into a copy of the cache.
    auto tensor_scatter_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        Arr y = x[0];
        const int axis = norm_axis(n.attr_int("axis", -2), x[0].rank());
        const bool circular = n.attr_string("mode", "linear") == "circular";
        const int64_t smax = x[0].shape[axis];
        for (int64_t f = 0; f < x[1].numel(); ++f) {
            auto idx = x[1].unravel(f);
            const int64_t w = x.size() > 2 && x[2].present ? static_cast<int64_t>(x[2].v[idx[0]]) : 0;
            idx[axis] += w;
            if (circular) idx[axis] = ((idx[axis] % smax) + smax) % smax;
            y.v[y.ravel(idx)] = x[1].v[f];
        }
        return Refs{y};
    };
    add("tensor_scatter_linear_default_axis", "TensorScatter", {in(F32, {2, 3, 6, 4}), in(F32, {2, 3, 2, 4}), constant({1, 4})},
        {}, tensor_scatter_ref);
    add("tensor_scatter_circular_axis1_i32", "TensorScatter", {in(I32, {3, 5, 2}, -9, 9), in(I32, {3, 3, 2}, -9, 9), constant({3, 0, 4})},
        {{"mode", std::string("circular")}, {"axis", int64_t{1}}}, tensor_scatter_ref);
    add("tensor_scatter_no_indices", "TensorScatter", {in(F64, {2, 4, 3}), in(F64, {2, 2, 3})}, {{"axis", int64_t{1}}},
        tensor_scatter_ref);
    // Upsample (nearest): out[o] = X[floor(o / scale)] per axis.
    add("upsample_nearest", "Upsample", {in(F32, {1, 2, 2, 3}), [] {
             In s{F32, {4}};
             s.constant = {1, 1, 2, 3};
             return s;
         }()},
        {},
        [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
            Arr y(out[0]);
            for (int64_t f = 0; f < y.numel(); ++f) {
                auto o = y.unravel(f);
                for (int d = 0; d < y.rank(); ++d) o[d] = static_cast<int64_t>(std::floor(o[d] / x[1].v[d]));
                y.v[f] = x[0].at(o);
            }
            return Refs{y};
        });
    // END add_signal_cases
}

// Harness cases of the recurrent op family (kept in their own block so families grow independently).
void add_recurrent_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    (void)add;
    // RNN / GRU / LSTM reference: the spec's per-time-step equations, run per direction and batch
    // entry over its own length L (sequence_lens, else T); reverse consumes times L-1 .. 0;
    // Y stays 0 at times >= L; Y_h / Y_c are the state after the last processed step.
    auto recurrent_ref = [](int kind) -> RefFn {  // 0 RNN, 1 GRU, 2 LSTM
        return [kind](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
            const Arr& X = x[0];
            const Arr& W = x[1];
            const Arr& R = x[2];
            auto opt = [&](size_t i) -> const Arr* { return i < x.size() && x[i].present ? &x[i] : nullptr; };
            const Arr* B = opt(3);
            const Arr* lens = opt(4);
            const Arr* h0 = opt(5);
            const Arr* c0 = kind == 2 ? opt(6) : nullptr;
            const Arr* P = kind == 2 ? opt(7) : nullptr;
            const bool l1 = n.attr_int("layout", 0) == 1;
            const std::string dir = n.attr_string("direction", "forward");
            const int64_t D = dir == "bidirectional" ? 2 : 1;
            const int64_t T = X.shape[l1 ? 1 : 0], N = X.shape[l1 ? 0 : 1], I = X.shape[2], H = R.shape[2];
            const int64_t G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
            const int per = kind == 0 ? 1 : kind == 1 ? 2 : 3;
            std::vector<std::string> acts;
            if (auto it = n.attrs().find("activations"); it != n.attrs().end())
                acts = std::get<std::vector<std::string>>(it->second);
            if (acts.empty())
                acts = kind == 0 ? std::vector<std::string>{"Tanh"}
                       : kind == 1 ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                   : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
            if (static_cast<int>(acts.size()) == per && D == 2) {
                const std::vector<std::string> once = acts;  // (self-insert would be undefined)
                acts.insert(acts.end(), once.begin(), once.end());
            }
            // Alphas / betas are taken in order by the functions that use them.
            std::vector<double> al = n.attr_floats("activation_alpha"), be = n.attr_floats("activation_beta");
            std::vector<double> fa(acts.size()), fb(acts.size());
            size_t ia = 0, ib = 0;
            for (size_t i = 0; i < acts.size(); ++i) {
                const std::string& f = acts[i];
                const bool ua = f == "Affine" || f == "LeakyRelu" || f == "ThresholdedRelu" || f == "ScaledTanh" ||
                                f == "HardSigmoid" || f == "Elu";
                const bool ub = f == "Affine" || f == "ScaledTanh" || f == "HardSigmoid";
                fa[i] = f == "LeakyRelu" ? 0.01 : f == "HardSigmoid" ? 0.2 : 1.0;
                fb[i] = f == "HardSigmoid" ? 0.5 : f == "ScaledTanh" ? 1.0 : 0.0;
                if (ua && ia < al.size()) fa[i] = al[ia++];
                if (ub && ib < be.size()) fb[i] = be[ib++];
            }
            const bool has_clip = n.has_attr("clip");
            const double clip = n.attr_float("clip", 0);
            // clip bounds the gates' activation inputs; LSTM's h(c) reads c unclipped (raw_act):
            // ONNX Runtime and OpenVINO both compute it so (the spec's wording leaves it open).
            auto raw_act = [&](int64_t d, int which, double v) {
                const size_t k = static_cast<size_t>(d * per + which);
                const std::string& f = acts[k];
                const double a = fa[k], b = fb[k];
                if (f == "Relu") return std::max(v, 0.0);
                if (f == "Tanh") return std::tanh(v);
                if (f == "Sigmoid") return 1 / (1 + std::exp(-v));
                if (f == "Affine") return a * v + b;
                if (f == "LeakyRelu") return v >= 0 ? v : a * v;
                if (f == "ThresholdedRelu") return v >= a ? v : 0.0;
                if (f == "ScaledTanh") return a * std::tanh(b * v);
                if (f == "HardSigmoid") return std::min(std::max(a * v + b, 0.0), 1.0);
                if (f == "Elu") return v >= 0 ? v : a * (std::exp(v) - 1);
                if (f == "Softsign") return v / (1 + std::fabs(v));
                if (f == "Softplus") return std::log(1 + std::exp(v));
                ADD_FAILURE() << "reference: unknown activation " << f;
                return 0.0;
            };
            auto act = [&](int64_t d, int which, double v) {
                return raw_act(d, which, has_clip ? std::min(std::max(v, -clip), clip) : v);
            };
            const bool lbr = n.attr_int("linear_before_reset", 0) != 0;
            const bool couple = n.attr_int("input_forget", 0) != 0;
            Arr Y(out[0]);
            const Shape state = l1 ? Shape{N, D, H} : Shape{D, N, H};
            Arr Yh(state), Yc(state);
            auto st = [&](int64_t d, int64_t b, int64_t j) {
                return l1 ? std::vector<int64_t>{b, d, j} : std::vector<int64_t>{d, b, j};
            };
            for (int64_t d = 0; d < D; ++d) {
                const bool rev = dir == "reverse" || d == 1;
                for (int64_t b = 0; b < N; ++b) {
                    const int64_t L = lens ? static_cast<int64_t>(lens->v[b]) : T;
                    std::vector<double> h(H, 0.0), c(H, 0.0);
                    for (int64_t j = 0; j < H; ++j) {
                        if (h0) h[j] = h0->at(st(d, b, j));
                        if (c0) c[j] = c0->at(st(d, b, j));
                    }
                    for (int64_t s = 0; s < L; ++s) {
                        const int64_t t = rev ? L - 1 - s : s;
                        // xg[g] = x W^T + Wb;  hg[g] = h R^T + Rb  (g over all G*H gate rows)
                        std::vector<double> xg(G * H), hg(G * H);
                        for (int64_t g = 0; g < G * H; ++g) {
                            double sx = B ? B->at({d, g}) : 0.0, sh = B ? B->at({d, G * H + g}) : 0.0;
                            for (int64_t k = 0; k < I; ++k) sx += X.at(l1 ? Ints{b, t, k} : Ints{t, b, k}) * W.at({d, g, k});
                            for (int64_t k = 0; k < H; ++k) sh += h[k] * R.at({d, g, k});
                            xg[g] = sx;
                            hg[g] = sh;
                        }
                        std::vector<double> hn(H);
                        if (kind == 0) {
                            for (int64_t j = 0; j < H; ++j) hn[j] = act(d, 0, xg[j] + hg[j]);
                        } else if (kind == 1) {
                            std::vector<double> z(H), r(H);
                            for (int64_t j = 0; j < H; ++j) {
                                z[j] = act(d, 0, xg[j] + hg[j]);
                                r[j] = act(d, 0, xg[H + j] + hg[H + j]);
                            }
                            for (int64_t j = 0; j < H; ++j) {
                                const double rbh = B ? B->at({d, 5 * H + j}) : 0.0;
                                double rec;
                                if (lbr) {
                                    rec = r[j] * hg[2 * H + j];  // r * (h Rh^T + Rbh)
                                } else {
                                    rec = rbh;
                                    for (int64_t k = 0; k < H; ++k) rec += r[k] * h[k] * R.at({d, 2 * H + j, k});
                                }
                                const double ht = act(d, 1, xg[2 * H + j] + rec);
                                hn[j] = (1 - z[j]) * ht + z[j] * h[j];
                            }
                        } else {
                            for (int64_t j = 0; j < H; ++j) {
                                auto p = [&](int q) { return P ? P->at({d, q * H + j}) : 0.0; };  // i o f
                                const double ig = act(d, 0, xg[j] + hg[j] + p(0) * c[j]);
                                const double fg = couple ? 1 - ig : act(d, 0, xg[2 * H + j] + hg[2 * H + j] + p(2) * c[j]);
                                const double cc = act(d, 1, xg[3 * H + j] + hg[3 * H + j]);
                                c[j] = fg * c[j] + ig * cc;
                                const double og = act(d, 0, xg[H + j] + hg[H + j] + p(1) * c[j]);
                                hn[j] = og * raw_act(d, 2, c[j]);
                            }
                        }
                        h = hn;
                        for (int64_t j = 0; j < H; ++j)
                            Y.v[Y.ravel(l1 ? Ints{b, t, d, j} : Ints{t, d, b, j})] = h[j];
                    }
                    for (int64_t j = 0; j < H && L > 0; ++j) {  // L = 0: zeros (as ONNX Runtime)
                        Yh.v[Yh.ravel(st(d, b, j))] = h[j];
                        Yc.v[Yc.ravel(st(d, b, j))] = c[j];
                    }
                }
            }
            Refs r{Y, Yh, Yc};
            r.resize(out.size());
            return r;
        };
    };
    using Strs = std::vector<std::string>;
    using Flts = std::vector<double>;
    const std::string kBidir = "bidirectional", kRev = "reverse";
    add("rnn_forward_defaults", "RNN", {in(F32, {4, 3, 5}), in(F32, {1, 6, 5}), in(F32, {1, 6, 6})},
        {{"hidden_size", int64_t{6}}}, recurrent_ref(0), 2);
    add("rnn_bidir_layout1_seq_init_acts", "RNN",
        {in(F32, {3, 5, 4}), in(F32, {2, 4, 4}), in(F32, {2, 4, 4}), in(F32, {2, 8}), in(I32, {3}, 1, 5),
         in(F32, {3, 2, 4})},
        {{"direction", kBidir}, {"layout", int64_t{1}}, {"activations", Strs{"Relu", "Affine"}},
         {"activation_alpha", Flts{0.7}}, {"activation_beta", Flts{0.1}}, {"clip", 1.5}},
        recurrent_ref(0), 2);
    add("rnn_reverse_y_only_f64", "RNN", {in(F64, {3, 2, 3}), in(F64, {1, 2, 3}), in(F64, {1, 2, 2}), in(F64, {1, 4})},
        {{"direction", kRev}, {"activations", Strs{"ThresholdedRelu"}}, {"activation_alpha", Flts{0.2}}},
        recurrent_ref(0), 1);
    add("gru_forward_bias_f64", "GRU",
        {in(F64, {3, 2, 4}), in(F64, {1, 15, 4}), in(F64, {1, 15, 5}), in(F64, {1, 30})}, {},
        recurrent_ref(1), 2);
    add("gru_reverse_lbr_seq_init_clip", "GRU",
        {in(F32, {4, 3, 3}), in(F32, {1, 9, 3}), in(F32, {1, 9, 3}), in(F32, {1, 18}), in(I32, {3}, 1, 4),
         in(F32, {1, 3, 3})},
        {{"direction", kRev}, {"linear_before_reset", int64_t{1}}, {"clip", 0.8}}, recurrent_ref(1), 2);
    add("gru_bidir_layout1_acts_init", "GRU",
        {in(F32, {2, 3, 3}), in(F32, {2, 12, 3}), in(F32, {2, 12, 4}), omitted(), omitted(), in(F32, {2, 2, 4})},
        {{"direction", kBidir}, {"layout", int64_t{1}},
         {"activations", Strs{"HardSigmoid", "Softsign", "Sigmoid", "Elu"}},
         {"activation_alpha", Flts{0.3, 0.5}}, {"activation_beta", Flts{0.4}}},
        recurrent_ref(1), 2);
    add("lstm_forward_peephole_init", "LSTM",
        {in(F32, {4, 2, 3}), in(F32, {1, 16, 3}), in(F32, {1, 16, 4}), in(F32, {1, 32}), omitted(),
         in(F32, {1, 2, 4}), in(F32, {1, 2, 4}), in(F32, {1, 12})},
        {{"hidden_size", int64_t{4}}}, recurrent_ref(2), 3);
    add("lstm_bidir_layout1_seq_forget_clip", "LSTM",
        {in(F32, {3, 4, 2}), in(F32, {2, 12, 2}), in(F32, {2, 12, 3}), in(F32, {2, 24}), in(I32, {3}, 0, 4),
         in(F32, {3, 2, 3}), in(F32, {3, 2, 3}), in(F32, {2, 9})},
        {{"direction", kBidir}, {"layout", int64_t{1}}, {"input_forget", int64_t{1}}, {"clip", 1.2}},
        recurrent_ref(2), 3);
    add("lstm_reverse_acts_f16", "LSTM",
        {in(F16, {3, 2, 3}, -1, 1), in(F16, {1, 8, 3}, -1, 1), in(F16, {1, 8, 2}, -1, 1)},
        {{"direction", kRev}, {"activations", Strs{"LeakyRelu", "Softplus", "ScaledTanh"}},
         {"activation_alpha", Flts{0.1, 0.9}}, {"activation_beta", Flts{1.2}}},
        recurrent_ref(2), 3);
    add("lstm_large_batch", "LSTM",
        {in(F32, {3, 64, 16}, -0.5, 0.5), in(F32, {1, 128, 16}, -0.5, 0.5), in(F32, {1, 128, 32}, -0.5, 0.5)}, {},
        recurrent_ref(2), 3);
    // END add_recurrent_cases
}

// Blocked-layout ops (transform_layout): naive loops over the blocked index formulas.
RefFn to_blocked_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const Shape& s = out[0];  // [N, C/c, H, W, c]
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t cb = 0; cb < s[1]; ++cb)
                for (int64_t h = 0; h < s[2]; ++h)
                    for (int64_t w = 0; w < s[3]; ++w)
                        for (int64_t ci = 0; ci < s[4]; ++ci) {
                            const int64_t c = cb * s[4] + ci;  // past X's channels: padding zeros
                            y.v[y.ravel({n, cb, h, w, ci})] = c < x[0].shape[1] ? x[0].v[x[0].ravel({n, c, h, w})] : 0.0;
                        }
        return Refs{y};
    };
}
RefFn from_blocked_ref() {
    return [](const std::vector<Arr>& x, const ir::Node&, const std::vector<Shape>& out) {
        Arr y(out[0]);
        const Shape& s = x[0].shape;
        for (int64_t n = 0; n < s[0]; ++n)
            for (int64_t c = 0; c < out[0][1]; ++c)  // the first `channels` channels
                for (int64_t h = 0; h < s[2]; ++h)
                    for (int64_t w = 0; w < s[3]; ++w)
                        y.v[y.ravel({n, c, h, w})] = x[0].v[x[0].ravel({n, c / s[4], h, w, c % s[4]})];
        return Refs{y};
    };
}
/// Direct convolution in the blocked layouts (zero padding; pads/strides/dilations attributes).
RefFn conv_nchwc_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& node, const std::vector<Shape>& out) {
        const Arr& X = x[0];
        const Arr& W = x[1];
        Arr y(out[0]);
        const Ints st = node.attr_ints("strides", {1, 1}), dl = node.attr_ints("dilations", {1, 1}),
                   pd = node.attr_ints("pads", {0, 0, 0, 0});
        const Shape& o = out[0];
        const int64_t groups = node.attr_int("group", 1);  // output block ob reads its group's input blocks
        for (int64_t n = 0; n < o[0]; ++n)
            for (int64_t ob = 0; ob < o[1]; ++ob)
                for (int64_t oh = 0; oh < o[2]; ++oh)
                    for (int64_t ow = 0; ow < o[3]; ++ow)
                        for (int64_t oi = 0; oi < o[4]; ++oi) {
                            double s = x.size() > 2 && x[2].present ? x[2].v[x[2].ravel({ob, oi})] : 0.0;
                            const int64_t ib0 = ob / (o[1] / groups) * W.shape[1];
                            for (int64_t ib = 0; ib < W.shape[1]; ++ib)
                                for (int64_t kh = 0; kh < W.shape[2]; ++kh)
                                    for (int64_t kw = 0; kw < W.shape[3]; ++kw)
                                        for (int64_t ii = 0; ii < W.shape[4]; ++ii) {
                                            int64_t h = oh * st[0] + kh * dl[0] - pd[0];
                                            int64_t w = ow * st[1] + kw * dl[1] - pd[1];
                                            if (h < 0 || h >= X.shape[2] || w < 0 || w >= X.shape[3]) continue;
                                            s += X.v[X.ravel({n, ib0 + ib, h, w, ii})] * W.v[W.ravel({ob, ib, kh, kw, ii, oi})];
                                        }
                            y.v[y.ravel({n, ob, oh, ow, oi})] = s;
                        }
        return Refs{y};
    };
}

// KilnMatMulPackedB: Y[..., i, j] = alpha * sum_k A[..., i, k] * Bp[j / nb, k, j % nb] + beta * C
// (C broadcast from the right), naively in double.
RefFn matmul_packed_ref() {
    return [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& A = x[0];
        const Arr& Bp = x[1];
        const double alpha = n.attr_float("alpha", 1), beta = n.attr_float("beta", 1);
        const int64_t K = Bp.shape[1], nb = Bp.shape[2], N = out[0].back();
        Arr y(out[0]);
        const int64_t rows = y.numel() / N;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < N; ++j) {
                double s = 0;
                for (int64_t k = 0; k < K; ++k) s += A.v[r * K + k] * Bp.v[((j / nb) * K + k) * nb + j % nb];
                double v = alpha * s;
                if (x.size() > 2) {  // C: [N] or [rows', N] with rows' 1 or the output's rows
                    const Arr& C = x[2];
                    const int64_t cn = C.shape.back(), cr = C.numel() / cn;
                    v += beta * C.v[(cr == 1 ? 0 : r) * cn + (cn == 1 ? 0 : j)];
                }
                y.v[r * N + j] = v;
            }
        return Refs{y};
    };
}

void add_layout_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), 1});
    };
    add("to_blocked_8", "KilnLayoutToBlocked", {in(F32, {2, 16, 3, 5})}, {{"block", int64_t{8}}}, to_blocked_ref());
    add("from_blocked_16", "KilnLayoutFromBlocked", {in(F32, {1, 2, 3, 4, 16})}, {}, from_blocked_ref());
    // A padded depthwise conv's conversions (transform_layout): 58 channels padded to 4 blocks
    // of 16 (zeros past 58), and the first 58 channels of 4 blocks back.
    add("to_blocked_16_padded", "KilnLayoutToBlocked", {in(F32, {1, 58, 3, 18})},
        {{"block", int64_t{16}}, {"padded_channels", int64_t{64}}}, to_blocked_ref());
    add("from_blocked_16_cropped", "KilnLayoutFromBlocked", {in(F32, {1, 4, 3, 18, 16})}, {{"channels", int64_t{58}}},
        from_blocked_ref());
    add("conv_nchwc_3x3_pad_bias", "KilnConv2dNCHWc",
        {in(F32, {1, 2, 9, 10, 8}), in(F32, {2, 2, 3, 3, 8, 16}), in(F32, {2, 16})},
        {{"pads", Ints{1, 1, 1, 1}}}, conv_nchwc_ref());
    // An image in blocks of one channel (transform_layout's stem): the padding copy row by row.
    add("conv_nchwc_3x3_image_blocks_of_1", "KilnConv2dNCHWc",
        {in(F32, {1, 3, 11, 13, 1}), in(F32, {1, 3, 3, 3, 1, 16}), in(F32, {1, 16})},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_nchwc_ref());
    add("conv_nchwc_1x1_stride2", "KilnConv2dNCHWc", {in(F32, {2, 1, 7, 7, 16}), in(F32, {1, 1, 1, 1, 16, 8})},
        {{"strides", Ints{2, 2}}}, conv_nchwc_ref());
    add("conv_nchwc_dilated_asym_pad", "KilnConv2dNCHWc",
        {in(F32, {1, 1, 12, 14, 8}), in(F32, {1, 1, 3, 2, 8, 8}), in(F32, {1, 8})},
        {{"pads", Ints{2, 0, 1, 1}}, {"dilations", Ints{2, 3}}, {"strides", Ints{1, 2}}}, conv_nchwc_ref());
    // Batched A; n = 40 of 3 blocks of 16 (the last block partly unused): tails in M and N.
    add("matmul_packed_b_batched_tail", "KilnMatMulPackedB", {in(F32, {2, 5, 12}), in(F32, {3, 12, 16})},
        {{"n", int64_t{40}}}, matmul_packed_ref());
    // Gemm's epilogue: alpha, beta and a C over rows and columns.
    add("matmul_packed_b_alpha_beta_c", "KilnMatMulPackedB",
        {in(F32, {7, 9}), in(F32, {2, 9, 8}), in(F32, {7, 16})},
        {{"n", int64_t{16}}, {"alpha", 0.5}, {"beta", 2.0}}, matmul_packed_ref());
    // Grouped: 3 groups of 2 input and 2 output blocks (ResNeXt's), strided with a bias.
    add("conv_nchwc_grouped3_stride2", "KilnConv2dNCHWc",
        {in(F32, {1, 6, 9, 9, 8}), in(F32, {6, 2, 3, 3, 8, 8}), in(F32, {6, 8})},
        {{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_nchwc_ref());
    // A stem conv: 3 input channels are one block (transform_layout writes ci = C when C < 8).
    add("conv_nchwc_stem_ci3", "KilnConv2dNCHWc", {in(F32, {1, 1, 11, 11, 3}), in(F32, {1, 1, 3, 3, 3, 16})},
        {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}, conv_nchwc_ref());
}

// Naive references for the nn2 family: BatchNormalization training mode, MaxUnpool, DeformConv.
void add_nn2_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout = 1) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    // BatchNormalization, training_mode=1: batch statistics over N and spatial axes.
    RefFn bn_train_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const double eps = n.attr_float("epsilon", 1e-5), mom = n.attr_float("momentum", 0.9);
        const Arr& X = x[0];
        const int64_t C = X.shape[1];
        std::vector<double> sum(C, 0.0), sq(C, 0.0), cnt(C, 0.0);
        for (int64_t f = 0; f < X.numel(); ++f) {
            int64_t ch = X.unravel(f)[1];
            sum[ch] += X.v[f];
            cnt[ch] += 1;
        }
        for (int64_t f = 0; f < X.numel(); ++f) {
            int64_t ch = X.unravel(f)[1];
            double d = X.v[f] - sum[ch] / cnt[ch];
            sq[ch] += d * d;
        }
        Arr y(X.shape), rm(Shape{C}), rv(Shape{C});
        for (int64_t f = 0; f < X.numel(); ++f) {
            int64_t ch = X.unravel(f)[1];
            y.v[f] = (X.v[f] - sum[ch] / cnt[ch]) / std::sqrt(sq[ch] / cnt[ch] + eps) * x[1].v[ch] + x[2].v[ch];
        }
        for (int64_t ch = 0; ch < C; ++ch) {
            rm.v[ch] = x[3].v[ch] * mom + sum[ch] / cnt[ch] * (1 - mom);
            rv.v[ch] = x[4].v[ch] * mom + sq[ch] / cnt[ch] * (1 - mom);
        }
        return Refs{y, rm, rv};
    };
    add("bn_training_4d", "BatchNormalization",
        {in(F32, {2, 3, 4, 5}), in(F32, {3}), in(F32, {3}), in(F32, {3}), in(F32, {3}, 0.5, 2)},
        {{"training_mode", int64_t{1}}, {"momentum", 0.8}, {"epsilon", 1e-3}}, bn_train_ref, 3);
    add("bn_training_3d_f64", "BatchNormalization",
        {in(F64, {3, 2, 7}), in(F64, {2}), in(F64, {2}), in(F64, {2}), in(F64, {2}, 0.5, 2)},
        {{"training_mode", int64_t{1}}}, bn_train_ref, 3);
    // MaxUnpool: scatter with the last write winning, into the inferred (or given) shape.
    RefFn unpool_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& X = x[0];
        const Ints ks = n.attr_ints("kernel_shape"), st = n.attr_ints("strides", Ints(ks.size(), 1));
        const Ints pd = n.attr_ints("pads", Ints(2 * ks.size(), 0));
        Shape inf = {X.shape[0], X.shape[1]};
        for (size_t i = 0; i < ks.size(); ++i) inf.push_back((X.shape[2 + i] - 1) * st[i] - pd[i] - pd[ks.size() + i] + ks[i]);
        Arr flat(inf);
        for (int64_t f = 0; f < X.numel(); ++f) flat.v[static_cast<int64_t>(x[1].v[f])] = X.v[f];
        Arr y(out[0]);
        for (int64_t f = 0; f < flat.numel(); ++f) y.v[y.ravel(flat.unravel(f))] = flat.v[f];
        return Refs{y};
    };
    // Indices drawn from the (single) output plane, duplicates included.
    add("maxunpool_2d_dup", "MaxUnpool", {in(F32, {1, 1, 2, 3}), in(I64, {1, 1, 2, 3}, 0, 23)},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, unpool_ref);
    add("maxunpool_1d_pads", "MaxUnpool", {in(F64, {1, 1, 4}), in(I64, {1, 1, 4}, 0, 6)},
        {{"kernel_shape", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}}, unpool_ref);
    add("maxunpool_output_shape", "MaxUnpool",
        {in(F32, {1, 1, 2, 2}), in(I64, {1, 1, 2, 2}, 0, 15), constant({1, 1, 5, 6})},
        {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}, unpool_ref);
    // DeformConv: per-tap bilinear sampling with zero padding, written straight from the spec.
    RefFn deform_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& X = x[0];
        const Arr& W = x[1];
        const Arr& O = x[2];
        const bool has_b = x.size() > 3 && x[3].present, has_m = x.size() > 4 && x[4].present;
        const Ints st = n.attr_ints("strides", {1, 1}), dl = n.attr_ints("dilations", {1, 1}),
                   pd = n.attr_ints("pads", {0, 0, 0, 0});
        const int64_t grp = n.attr_int("group", 1), og = n.attr_int("offset_group", 1);
        const int64_t C = X.shape[1], H = X.shape[2], Wd = X.shape[3], M = W.shape[0], Cg = W.shape[1];
        const int64_t KH = W.shape[2], KW = W.shape[3];
        auto px = [&](int64_t b, int64_t ch, int64_t h, int64_t w) {
            return h < 0 || h >= H || w < 0 || w >= Wd ? 0.0 : X.at({b, ch, h, w});
        };
        Arr y(out[0]);
        const Shape& o = out[0];
        for (int64_t b = 0; b < o[0]; ++b)
            for (int64_t m = 0; m < M; ++m)
                for (int64_t oh = 0; oh < o[2]; ++oh)
                    for (int64_t ow = 0; ow < o[3]; ++ow) {
                        double s = has_b ? x[3].v[m] : 0.0;
                        for (int64_t cc = 0; cc < Cg; ++cc) {
                            int64_t ch = (m / (M / grp)) * Cg + cc, g = ch / (C / og);
                            for (int64_t i = 0; i < KH; ++i)
                                for (int64_t j = 0; j < KW; ++j) {
                                    int64_t k = (g * KH + i) * KW + j;
                                    double h = oh * st[0] - pd[0] + i * dl[0] + O.at({b, 2 * k, oh, ow});
                                    double w = ow * st[1] - pd[1] + j * dl[1] + O.at({b, 2 * k + 1, oh, ow});
                                    int64_t h0 = static_cast<int64_t>(std::floor(h)), w0 = static_cast<int64_t>(std::floor(w));
                                    double lh = h - h0, lw = w - w0;
                                    double v = (1 - lh) * (1 - lw) * px(b, ch, h0, w0) + (1 - lh) * lw * px(b, ch, h0, w0 + 1) +
                                               lh * (1 - lw) * px(b, ch, h0 + 1, w0) + lh * lw * px(b, ch, h0 + 1, w0 + 1);
                                    double mk = has_m ? x[4].at({b, k, oh, ow}) : 1.0;
                                    s += W.at({m, cc, i, j}) * mk * v;
                                }
                        }
                        y.v[y.ravel({b, m, oh, ow})] = s;
                    }
        return Refs{y};
    };
    add("deform_conv_basic_pad", "DeformConv",
        {in(F32, {1, 2, 5, 4}), in(F32, {3, 2, 2, 2}), in(F32, {1, 8, 6, 5}, -1.5, 1.5)},
        {{"pads", Ints{1, 1, 1, 1}}}, deform_ref);
    add("deform_conv_groups_mask_bias", "DeformConv",
        {in(F32, {2, 4, 6, 5}), in(F32, {4, 2, 3, 2}), in(F32, {2, 24, 2, 3}, -2, 2), in(F32, {4}),
         in(F32, {2, 12, 2, 3}, 0, 1)},
        {{"group", int64_t{2}}, {"offset_group", int64_t{2}}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}},
        deform_ref);
    add("deform_conv_f64_offset_groups4", "DeformConv",
        {in(F64, {1, 4, 4, 4}), in(F64, {2, 4, 2, 2}), in(F64, {1, 32, 3, 3}, -3, 3)},
        {{"offset_group", int64_t{4}}}, deform_ref);
    // END add_nn2_cases
}

// DFT / STFT / RoiAlign (signal2): naive std::complex<double> transforms and the RoiAlign spec
// loops (per-ROI sampling grid, bilinear weights, avg / weighted-corner max).
void add_signal2_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), 1});
    };
    auto scalar = [](double v) {
        In i{I64, {}};
        i.constant = {v};
        return i;
    };
    const double pi = 3.14159265358979323846;
    // DFT along `axis` of length L (dft_length or the axis' size; zero padding / truncation).
    auto dft_ref = [pi](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& s = x[0];
        const int rank = s.rank();
        int64_t axis = x.size() > 2 && x[2].present ? static_cast<int64_t>(x[2].v[0]) : -2;  // DFT-20 default
        if (axis < 0) axis += rank;
        const int64_t len = x.size() > 1 && x[1].present ? static_cast<int64_t>(x[1].v[0]) : s.shape[axis];
        const bool inverse = n.attr_int("inverse", 0) != 0, cplx = s.shape.back() == 2;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); f += 2) {
            auto o = y.unravel(f);
            std::complex<double> acc = 0;
            for (int64_t t = 0; t < std::min(len, s.shape[axis]); ++t) {
                auto i = o;
                i[axis] = t;
                i.back() = 0;
                std::complex<double> v(s.at(i), 0.0);
                if (cplx) {
                    i.back() = 1;
                    v.imag(s.at(i));
                }
                const double ang = (inverse ? 2.0 : -2.0) * pi * static_cast<double>(o[axis] * t) / len;
                acc += v * std::exp(std::complex<double>(0.0, ang));
            }
            if (inverse) acc /= static_cast<double>(len);
            y.v[f] = acc.real();
            y.v[f + 1] = acc.imag();
        }
        return Refs{y};
    };
    add("dft_real_axis1", "DFT", {in(F32, {2, 8, 3, 1}), omitted(), scalar(1)}, {}, dft_ref);
    add("dft_default_axis_rank4", "DFT", {in(F32, {2, 3, 5, 1})}, {}, dft_ref);
    add("dft_complex_inverse_axis_input_f64", "DFT", {in(F64, {2, 5, 2}), omitted(), scalar(-2)},
        {{"inverse", int64_t{1}}}, dft_ref);
    add("dft_onesided_zero_pad", "DFT", {in(F32, {3, 6, 1}), scalar(10), scalar(1)}, {{"onesided", int64_t{1}}},
        dft_ref);
    add("dft_truncate_axis0_f64", "DFT", {in(F64, {7, 3, 2}), scalar(5), scalar(0)}, {}, dft_ref);
    add("dft_f16_rank2", "DFT", {in(F16, {6, 1}), omitted(), scalar(0)}, {}, dft_ref);
    add("dft_large_values", "DFT", {in(F32, {1, 64, 1}, 0, 100), omitted(), scalar(1)}, {}, dft_ref);
    // STFT: frame f = samples [f * step, f * step + L), times the window, forward DFT of length L.
    auto stft_ref = [pi](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr& s = x[0];
        const int64_t step = static_cast<int64_t>(x[1].v[0]);
        const bool has_window = x.size() > 2 && x[2].present;
        const int64_t len = x.size() > 3 && x[3].present ? static_cast<int64_t>(x[3].v[0])
                            : has_window                ? x[2].shape[0]
                                                        : s.shape[1];
        (void)n;
        Arr y(out[0]);
        for (int64_t f = 0; f < y.numel(); f += 2) {
            auto o = y.unravel(f);
            std::complex<double> acc = 0;
            for (int64_t t = 0; t < len; ++t) {
                const int64_t p = o[1] * step + t;
                std::complex<double> v(s.at({o[0], p, 0}), s.shape[2] == 2 ? s.at({o[0], p, 1}) : 0.0);
                if (has_window) v *= x[2].v[t];
                acc += v * std::exp(std::complex<double>(0.0, -2.0 * pi * static_cast<double>(o[2] * t) / len));
            }
            y.v[f] = acc.real();
            y.v[f + 1] = acc.imag();
        }
        return Refs{y};
    };
    add("stft_window_onesided", "STFT", {in(F32, {2, 32, 1}), scalar(4), in(F32, {8}, 0, 1)}, {}, stft_ref);
    add("stft_complex_twosided_f64", "STFT", {in(F64, {1, 20, 2}), scalar(3), omitted(), scalar(6)},
        {{"onesided", int64_t{0}}}, stft_ref);
    // RoiAlign from the spec loops.
    auto roi_ref = [](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>& out) {
        const Arr &xs = x[0], &rois = x[1], &bi = x[2];
        const int64_t H = xs.shape[2], W = xs.shape[3], C = xs.shape[1];
        const int64_t oh = out[0][2], ow = out[0][3];
        const bool half = n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
        const bool is_max = n.attr_string("mode", "avg") == "max";
        const int64_t sr = n.attr_int("sampling_ratio", 0);
        const double scale = n.attr_float("spatial_scale", 1.0), off = half ? 0.5 : 0.0;
        Arr y(out[0]);
        for (int64_t r = 0; r < out[0][0]; ++r) {
            const double x1 = rois.at({r, 0}) * scale - off, y1 = rois.at({r, 1}) * scale - off;
            const double x2 = rois.at({r, 2}) * scale - off, y2 = rois.at({r, 3}) * scale - off;
            double rw = x2 - x1, rh = y2 - y1;
            if (!half) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
            const double bh = rh / oh, bw = rw / ow;
            const int64_t gh = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rh / oh));
            const int64_t gw = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rw / ow));
            const int64_t b = static_cast<int64_t>(bi.v[r]);
            for (int64_t ch = 0; ch < C; ++ch)
                for (int64_t ph = 0; ph < oh; ++ph)
                    for (int64_t pw = 0; pw < ow; ++pw) {
                        double acc = 0;
                        bool first = true;
                        for (int64_t iy = 0; iy < gh; ++iy)
                            for (int64_t ix = 0; ix < gw; ++ix) {
                                double yy = y1 + ph * bh + (iy + 0.5) * bh / gh;
                                double xx = x1 + pw * bw + (ix + 0.5) * bw / gw;
                                double val = 0;
                                if (!(yy < -1.0 || yy > H || xx < -1.0 || xx > W)) {
                                    yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                                    int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
                                    if (yl >= H - 1) yh = yl = H - 1, yy = static_cast<double>(yl);
                                    else yh = yl + 1;
                                    if (xl >= W - 1) xh = xl = W - 1, xx = static_cast<double>(xl);
                                    else xh = xl + 1;
                                    const double ly = yy - yl, lx = xx - xl, hy = 1 - ly, hx = 1 - lx;
                                    const double w[4] = {hy * hx, hy * lx, ly * hx, ly * lx};
                                    const double v[4] = {xs.at({b, ch, yl, xl}), xs.at({b, ch, yl, xh}),
                                                         xs.at({b, ch, yh, xl}), xs.at({b, ch, yh, xh})};
                                    if (is_max) {
                                        val = w[0] * v[0];
                                        for (int k = 1; k < 4; ++k) val = std::max(val, w[k] * v[k]);
                                    } else {
                                        for (int k = 0; k < 4; ++k) val += w[k] * v[k];
                                    }
                                }
                                acc = is_max ? (first ? val : std::max(acc, val)) : acc + val;
                                first = false;
                            }
                        if (!is_max) acc /= static_cast<double>(std::max<int64_t>(gh * gw, 1));
                        y.v[y.ravel({r, ch, ph, pw})] = acc;
                    }
        }
        return Refs{y};
    };
    auto roi_attrs = [](const char* ctm, const char* mode, int64_t oh, int64_t ow, int64_t sr, double scale) {
        return AttrMap{{"coordinate_transformation_mode", std::string(ctm)}, {"mode", std::string(mode)},
                       {"output_height", oh}, {"output_width", ow}, {"sampling_ratio", sr}, {"spatial_scale", scale}};
    };
    add("roi_align_avg_sr2_half_pixel", "RoiAlign", {in(F32, {2, 3, 8, 8}), in(F32, {4, 4}, 0, 7), in(I64, {4}, 0, 1)},
        roi_attrs("half_pixel", "avg", 3, 3, 2, 1.0), roi_ref);
    add("roi_align_max_sr2_output_half_pixel", "RoiAlign",
        {in(F32, {1, 2, 8, 8}), in(F32, {3, 4}, 0, 15), in(I64, {3}, 0, 0)},
        roi_attrs("output_half_pixel", "max", 2, 3, 2, 0.5), roi_ref);
    // Adaptive grids with runtime ROIs far larger than the image: the windowed static grid.
    add("roi_align_avg_adaptive_runtime_rois", "RoiAlign",
        {in(F64, {1, 2, 6, 6}), in(F64, {6, 4}, -30, 30), in(I64, {6}, 0, 0)},
        roi_attrs("half_pixel", "avg", 1, 2, 0, 1.0), roi_ref);
    add("roi_align_max_adaptive_runtime_rois_negative", "RoiAlign",
        {in(F64, {2, 1, 5, 7}, -2, -0.5), in(F64, {8, 4}, -25, 25), in(I64, {8}, 0, 1)},
        roi_attrs("output_half_pixel", "max", 1, 1, 0, 1.0), roi_ref);
    add("roi_align_max_adaptive_runtime_rois", "RoiAlign",
        {in(F32, {1, 3, 6, 6}), in(F32, {5, 4}, -3, 9), in(I64, {5}, 0, 0)},
        roi_attrs("half_pixel", "max", 2, 2, 0, 1.0), roi_ref);
    In const_rois{F32, {3, 4}};
    const_rois.constant = {0, 0, 5, 5, 1, 2, 4, 7, 6, 1, 2, 3};
    add("roi_align_avg_adaptive_constant_rois", "RoiAlign", {in(F32, {1, 2, 8, 8}), const_rois, in(I64, {3}, 0, 0)},
        roi_attrs("half_pixel", "avg", 2, 2, 0, 1.0), roi_ref);
    // END add_signal2_cases
}

// ai.onnx.preview.training optimizers: the spec's pseudo code per element, in double. Inputs are
// R, T, then k groups of n tensors; outputs k' groups of n.
RefFn optimizer_ref(int k, int k_out,
                    std::function<std::vector<double>(double r, int64_t t, const std::vector<double>& e, const ir::Node& n)> f) {
    return [=](const std::vector<Arr>& x, const ir::Node& n, const std::vector<Shape>&) {
        const size_t groups = (x.size() - 2) / k;
        const double r = x[0].v[0];
        const auto t = static_cast<int64_t>(x[1].v[0]);
        Refs out(k_out * groups);
        for (size_t i = 0; i < groups; ++i) {
            for (int j = 0; j < k_out; ++j) out[j * groups + i] = Arr(x[2 + i].shape);
            for (int64_t p = 0; p < x[2 + i].numel(); ++p) {
                std::vector<double> e;
                for (int m = 0; m < k; ++m) e.push_back(x[2 + m * groups + i].v[p]);
                const std::vector<double> y = f(r, t, e, n);
                for (int j = 0; j < k_out; ++j) out[j * groups + i].v[p] = y[j];
            }
        }
        return out;
    };
}

void add_training_cases(std::vector<Case>& c) {
    auto add = [&](std::string name, std::string op, std::vector<In> ins, AttrMap attrs, RefFn ref, int nout) {
        c.push_back({std::move(name), std::move(op), std::move(ins), std::move(attrs), std::move(ref), nout});
    };
    RefFn adagrad = optimizer_ref(3, 2, [](double r, int64_t t, const std::vector<double>& e, const ir::Node& n) {
        const double x = e[0], g = e[1], h = e[2];
        const double rate = r / (1 + t * n.attr_float("decay_factor", 0.0));
        const double gr = n.attr_float("norm_coefficient", 0.0) * x + g;
        const double h_new = h + gr * gr;
        return std::vector<double>{x - rate * gr / (std::sqrt(h_new) + n.attr_float("epsilon", 1e-6)), h_new};
    });
    RefFn adam = optimizer_ref(4, 3, [](double r, int64_t t, const std::vector<double>& e, const ir::Node& n) {
        const double x = e[0], g = e[1], v = e[2], h = e[3];
        const double alpha = n.attr_float("alpha", 0.9), beta = n.attr_float("beta", 0.999);
        const double gr = n.attr_float("norm_coefficient", 0.0) * x + g;
        const double v_new = alpha * v + (1 - alpha) * gr;
        const double h_new = beta * h + (1 - beta) * gr * gr;
        const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
        const double x_new = x - ra * v_new / (std::sqrt(h_new) + n.attr_float("epsilon", 1e-6));
        return std::vector<double>{(1 - n.attr_float("norm_coefficient_post", 0.0)) * x_new, v_new, h_new};
    });
    RefFn momentum = optimizer_ref(3, 2, [](double r, int64_t t, const std::vector<double>& e, const ir::Node& n) {
        const double x = e[0], g = e[1], v = e[2];
        const double alpha = n.attr_float("alpha", 0), beta = t > 0 ? n.attr_float("beta", 0) : 1.0;
        const double gr = n.attr_float("norm_coefficient", 0) * x + g;
        const double v_new = alpha * v + beta * gr;
        const bool nesterov = n.attr_string("mode", "") == "nesterov";
        return std::vector<double>{nesterov ? x - r * (gr + alpha * v_new) : x - r * v_new, v_new};
    });
    add("adagrad_t0_defaults", "Adagrad", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 0), in(F32, {3, 4}), in(F32, {3, 4}),
        in(F32, {3, 4}, 0, 2)}, {}, adagrad, 2);
    add("adagrad_two_tensors_decay", "Adagrad",
        {in(F32, {}, 0.05, 0.5), in(I64, {}, 1, 9), in(F32, {5}), in(F32, {2, 3}), in(F32, {5}), in(F32, {2, 3}),
         in(F32, {5}, 0, 2), in(F32, {2, 3}, 0, 2)},
        {{"decay_factor", 0.1}, {"epsilon", 1e-3}, {"norm_coefficient", 0.01}}, adagrad, 4);
    add("adagrad_f64_r_f32", "Adagrad", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 5), in(F64, {33}), in(F64, {33}),
        in(F64, {33}, 0, 3)}, {{"decay_factor", 0.5}}, adagrad, 2);
    add("adam_t0", "Adam", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 0), in(F32, {2, 5}), in(F32, {2, 5}),
        in(F32, {2, 5}), in(F32, {2, 5}, 0, 2)},
        {{"alpha", 0.95}, {"beta", 0.1}, {"epsilon", 1e-7}, {"norm_coefficient", 0.001}}, adam, 3);
    add("adam_t_pos_two_tensors_post", "Adam",
        {in(F32, {}, 0.05, 0.5), in(I64, {}, 1, 6), in(F32, {4}), in(F32, {1, 17}), in(F32, {4}), in(F32, {1, 17}),
         in(F32, {4}), in(F32, {1, 17}), in(F32, {4}, 0, 2), in(F32, {1, 17}, 0, 2)},
        {{"alpha", 0.8}, {"beta", 0.85}, {"epsilon", 1e-2}, {"norm_coefficient", 0.02}, {"norm_coefficient_post", 0.1}},
        adam, 6);
    add("adam_f64_defaults", "Adam", {in(F64, {}, 0.05, 0.5), in(I64, {}, 1, 4), in(F64, {3, 3}), in(F64, {3, 3}),
        in(F64, {3, 3}), in(F64, {3, 3}, 0, 2)}, {}, adam, 3);
    add("momentum_standard_t0", "Momentum", {in(F32, {}, 0.05, 0.5), in(I64, {}, 0, 0), in(F32, {6}), in(F32, {6}),
        in(F32, {6})},
        {{"alpha", 0.95}, {"beta", 0.1}, {"mode", std::string("standard")}, {"norm_coefficient", 0.001}}, momentum, 2);
    add("momentum_standard_two_tensors", "Momentum",
        {in(F32, {}, 0.05, 0.5), in(I64, {}, 1, 9), in(F32, {3}), in(F32, {2, 2}), in(F32, {3}), in(F32, {2, 2}),
         in(F32, {3}), in(F32, {2, 2})},
        {{"alpha", 0.9}, {"beta", 0.3}, {"mode", std::string("standard")}, {"norm_coefficient", 0.01}}, momentum, 4);
    add("momentum_nesterov_f64", "Momentum", {in(F64, {}, 0.05, 0.5), in(I64, {}, 1, 9), in(F64, {4, 5}),
        in(F64, {4, 5}), in(F64, {4, 5})},
        {{"alpha", 0.7}, {"beta", 0.4}, {"mode", std::string("nesterov")}, {"norm_coefficient", 0.05}}, momentum, 2);
    // END add_training_cases
}

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
