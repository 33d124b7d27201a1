// Op-harness cases: Shape, movement and indexing ops. op_harness_test.cc runs them (all_cases()).
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
    auto s2d_ref = elem_ref([](const std::vector<Arr>& x, const ir::Node& n, const std::vector<int64_t>& o) {
        const int64_t b = n.attr_int("blocksize", 1), C = x[0].shape[1];
        const int64_t blk = o[1] / C, c = o[1] % C;
        return x[0].at({o[0], c, o[2] * b + blk / b, o[3] * b + blk % b});
    });
    add("space_to_depth", "SpaceToDepth", {in(F32, {2, 3, 4, 6})}, {{"blocksize", int64_t{2}}}, s2d_ref);
    // Rows of a vector and more: movement.cc's space_to_depth_schedule (b phases unrolled inside
    // the vectorized columns), at blocksize 2 and 3 with a partial vector.
    add("space_to_depth_rows_b2", "SpaceToDepth", {in(F32, {1, 5, 6, 40})}, {{"blocksize", int64_t{2}}}, s2d_ref);
    add("space_to_depth_rows_b3", "SpaceToDepth", {in(F32, {2, 2, 9, 57})}, {{"blocksize", int64_t{3}}}, s2d_ref);
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

}  // namespace kiln::op::testing
