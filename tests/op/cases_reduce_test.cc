// Op-harness cases: Reductions. op_harness_test.cc runs them (all_cases()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "op_harness_refs.h"

namespace kiln::op::testing {

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

}  // namespace kiln::op::testing
