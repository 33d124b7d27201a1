// Index-driven ops (indices read at run time; negative indices add the axis size; reads are
// clamped into the axis so out-of-range indices, undefined in ONNX, never read out of bounds):
//  - GatherElements (11/13): out[i] = data[i with i[axis] := indices[i]];
//  - GatherND (11/12/13, batch_dims b): out[o] = data[o[:b], indices[o[:q-1]][0..k), o[q-1:]...]
//    with k = indices.shape[-1];
//  - ScatterElements (11/13/16/18) and the deprecated Scatter (9/11), ScatterND (11/13/16/18),
//    reduction none/add/mul/max/min. Expressed as a compute over the OUTPUT: every output
//    element searches the update positions that can target it (ScatterElements: the updates'
//    `axis` dimension; ScatterND: all update rows) for index matches, so the cost is
//    O(out elements x candidates): fine for modest sizes, quadratic for big ScatterND. A first
//    stage reduces over the candidates (sum / prod / max / min of the matching updates with the
//    combiner's identity elsewhere; for `none`, the max matching position, i.e. the last
//    update wins on duplicates), a second stage combines it with the data.
//  - OneHot (9/11): out[o] = indices[o without axis] (+depth if negative) == o[axis] ? on : off,
//    depth a constant (value input), values = [off, on] read at run time.
#include <string>

#include "op/defs/movement_util.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

using te::Expr;
using te::Var;

const std::vector<DType> kIndexTypes = {DType::kInt32, DType::kInt64};

// Index value `raw` (any int dtype) normalized for an axis of size `extent`.
Expr norm_index(const Expr& raw, int64_t extent) {
    Expr k = te::cast(DType::kInt64, raw);
    return te::select(k < te::int_imm(0), k + extent, k);
}

OpDef gather_elements_op() {
    OpDef d;
    d.name = "GatherElements";
    d.onnx_versions = {11, 13};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const auto& ind = input_type(n, 1, "indices");
        check_dtype(n, "indices", ind.dtype, kIndexTypes);
        check_rank(n, "indices", ind.rank(), x.rank());
        normalize_axis(n, n.attr_int("axis", 0), x.rank());
        return std::vector<ir::TensorType>{{x.dtype, ind.shape}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), ind = a.in(1);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), x->ndim());
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& i) {
                std::vector<Expr> idx(i.begin(), i.end());
                idx[axis] = clamp_index(norm_index(te::read(ind, i), x->shape[axis]), x->shape[axis]);
                return te::read(x, idx);
            },
            "GatherElements", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef gather_nd_op() {
    OpDef d;
    d.name = "GatherND";
    d.onnx_versions = {11, 12, 13};
    d.min_inputs = d.max_inputs = 2;
    d.attrs = {{"batch_dims", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const auto& ind = input_type(n, 1, "indices");
        check_dtype(n, "indices", ind.dtype, {DType::kInt64});
        const int64_t b = n.attr_int("batch_dims", 0);
        const int q = ind.rank(), r = x.rank();
        KILN_CHECK(q >= 1 && b >= 0 && b < q && b < r, kInvalidModel)
            << node_label(n) << ": batch_dims=" << b << " must be below the ranks of data (" << r << ") and indices (" << q << ")";
        const int64_t k = static_dim(n, ind.shape[q - 1], "indices");
        KILN_CHECK(k >= 1 && b + k <= r, kInvalidModel)
            << node_label(n) << ": indices.shape[-1]=" << k << " does not fit data of rank " << r << " with batch_dims " << b;
        std::vector<ir::Dim> out(ind.shape.begin(), ind.shape.end() - 1);
        out.insert(out.end(), x.shape.begin() + b + k, x.shape.end());
        return std::vector<ir::TensorType>{{x.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor x = a.in(0), ind = a.in(1);
        const int b = static_cast<int>(a.node.attr_int("batch_dims", 0));
        const int q = ind->ndim();
        const int64_t k = ind->shape[q - 1];
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                std::vector<Expr> idx(o.begin(), o.begin() + b);
                std::vector<Expr> ii(o.begin(), o.begin() + (q - 1));
                ii.push_back(nullptr);
                for (int64_t j = 0; j < k; ++j) {
                    ii.back() = te::int_imm(j);
                    const int64_t extent = x->shape[b + j];
                    idx.push_back(clamp_index(norm_index(te::read(ind, ii), extent), extent));
                }
                idx.insert(idx.end(), o.begin() + (q - 1), o.end());
                return te::read(x, idx);
            },
            "GatherND", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

// Scatter reduction kinds.
enum class Red { kNone, kAdd, kMul, kMax, kMin };

Red scatter_reduction(const ir::Node& n) {
    const std::string r = n.attr_string("reduction", "none");
    if (r == "none") return Red::kNone;
    if (r == "add") return Red::kAdd;
    if (r == "mul") return Red::kMul;
    if (r == "max") return Red::kMax;
    if (r == "min") return Red::kMin;
    KILN_THROW(kInvalidModel) << node_label(n) << ": unknown reduction '" << r << "'";
}

// The two-stage scatter: `match` / `update` give, for output position p and candidate reduce
// vars, whether the candidate targets p and its update value; `position` is a flat candidate id
// and `update_at` rereads the update at a found id (reduction none).
struct ScatterParts {
    std::vector<te::IterVar> axes;
    std::function<Expr(const std::vector<Var>& p)> match, update, position;
    std::function<Expr(const std::vector<Var>& p, const Expr& found)> update_at;
};

te::Tensor scatter_stages(const ComputeArgs& a, const ScatterParts& sp, const std::string& name) {
    te::Tensor data = a.in(0);
    const Red red = scatter_reduction(a.node);
    const DType cd = te::compute_dtype(data->dtype);
    const Shape shape = a.out_shape();
    if (red == Red::kNone) {
        te::Tensor found = te::compute(
            shape, [&](const std::vector<Var>& p) {
                return te::max_reduce(te::select(sp.match(p), sp.position(p), te::int_imm(-1)), sp.axes);
            },
            name + "Found", DType::kInt64);
        return te::compute(
            shape, [&](const std::vector<Var>& p) {
                Expr f = te::read(found, p);
                return te::select(f >= te::int_imm(0), sp.update_at(p, f), te::read(data, p));
            },
            name, a.out_dtype());
    }
    te::ReduceOp op = red == Red::kAdd ? te::ReduceOp::kSum
                      : red == Red::kMul ? te::ReduceOp::kProd
                      : red == Red::kMax ? te::ReduceOp::kMax
                                         : te::ReduceOp::kMin;
    te::Tensor acc = te::compute(
        shape, [&](const std::vector<Var>& p) {
            Expr v = te::select(sp.match(p), te::cast(cd, sp.update(p)), te::reduce_identity(op, cd));
            switch (red) {
                case Red::kAdd: return te::sum(v, sp.axes);
                case Red::kMul: return te::prod_reduce(v, sp.axes);
                case Red::kMax: return te::max_reduce(v, sp.axes);
                default: return te::min_reduce(v, sp.axes);
            }
        },
        name + "Acc", cd);
    return te::compute(
        shape, [&](const std::vector<Var>& p) {
            Expr d = te::read(data, p), u = te::read(acc, p);
            switch (red) {
                case Red::kAdd: return d + u;
                case Red::kMul: return d * u;
                case Red::kMax: return te::max(d, u);
                default: return te::min(d, u);
            }
        },
        name, a.out_dtype());
}

OpDef scatter_elements_op(const std::string& name) {
    OpDef d;
    d.name = name;
    d.onnx_versions = name == "Scatter" ? std::vector<int>{9, 11} : std::vector<int>{11, 13, 16, 18};
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})}};
    if (name != "Scatter") d.attrs.push_back({"reduction", AttrKind::kString, ir::Attr(std::string("none"))});
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const auto& ind = input_type(n, 1, "indices");
        const auto& upd = input_type(n, 2, "updates");
        check_dtype(n, "indices", ind.dtype, kIndexTypes);
        check_same_dtype(n, "data", x.dtype, "updates", upd.dtype);
        check_rank(n, "indices", ind.rank(), x.rank());
        KILN_CHECK(ind.shape == upd.shape, kInvalidModel) << node_label(n) << ": indices shape " << dims_str(ind.shape)
                                                          << " differs from updates shape " << dims_str(upd.shape);
        normalize_axis(n, n.attr_int("axis", 0), x.rank());
        scatter_reduction(n);
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [name](const ComputeArgs& a) {
        te::Tensor data = a.in(0), ind = a.in(1), upd = a.in(2);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), data->ndim());
        const int rank = data->ndim();
        ScatterParts sp;
        sp.axes = {te::reduce_axis(upd->shape[axis], "r")};
        const Var r = sp.axes[0]->var;
        // Update coordinates for output p at candidate `along` (clamped: guarded by match).
        auto coords = [&](const std::vector<Var>& p, const Expr& along) {
            std::vector<Expr> u(p.begin(), p.end());
            for (int k = 0; k < rank; ++k) u[k] = k == axis ? along : clamp_index(p[k], upd->shape[k]);
            return u;
        };
        sp.match = [&, r](const std::vector<Var>& p) {
            Expr m = te::eq(norm_index(te::read(ind, coords(p, r)), data->shape[axis]), p[axis]);
            for (int k = 0; k < rank; ++k)
                if (k != axis && upd->shape[k] < data->shape[k]) m = te::logical_and(m, Expr(p[k]) < te::int_imm(upd->shape[k]));
            return m;
        };
        sp.update = [&, r](const std::vector<Var>& p) { return te::read(upd, coords(p, r)); };
        sp.position = [r](const std::vector<Var>&) { return Expr(r); };
        sp.update_at = [&](const std::vector<Var>& p, const Expr& f) {
            return te::read(upd, coords(p, clamp_index(f, upd->shape[axis])));
        };
        if (upd->numel() == 0) {
            auto out = te::compute(a.out_shape(), [&](const std::vector<Var>& p) { return te::read(data, p); }, name,
                                   a.out_dtype());
            return std::vector<te::Tensor>{out};
        }
        return std::vector<te::Tensor>{scatter_stages(a, sp, name)};
    };
    return d;
}

OpDef scatter_nd_op() {
    OpDef d;
    d.name = "ScatterND";
    d.onnx_versions = {11, 13, 16, 18};
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"reduction", AttrKind::kString, ir::Attr(std::string("none"))}};
    d.pattern = OpPattern::kOpaque;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "data");
        const auto& ind = input_type(n, 1, "indices");
        const auto& upd = input_type(n, 2, "updates");
        check_dtype(n, "indices", ind.dtype, {DType::kInt64});
        check_same_dtype(n, "data", x.dtype, "updates", upd.dtype);
        const int q = ind.rank(), r = x.rank();
        KILN_CHECK(q >= 1, kInvalidModel) << node_label(n) << ": indices must have rank >= 1";
        const int64_t k = static_dim(n, ind.shape[q - 1], "indices");
        KILN_CHECK(k >= 1 && k <= r, kInvalidModel)
            << node_label(n) << ": indices.shape[-1]=" << k << " must be in [1, " << r << "]";
        std::vector<ir::Dim> want(ind.shape.begin(), ind.shape.end() - 1);
        want.insert(want.end(), x.shape.begin() + k, x.shape.end());
        KILN_CHECK(upd.shape == want, kInvalidModel)
            << node_label(n) << ": updates shape " << dims_str(upd.shape) << ", expected " << dims_str(want);
        scatter_reduction(n);
        return std::vector<ir::TensorType>{x};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor data = a.in(0), ind = a.in(1), upd = a.in(2);
        const int q = ind->ndim();
        const int64_t k = ind->shape[q - 1];
        ScatterParts sp;
        std::vector<Expr> uvars;  // update row coordinates (reduce vars)
        for (int j = 0; j < q - 1; ++j) {
            sp.axes.push_back(te::reduce_axis(ind->shape[j], "r" + std::to_string(j)));
            uvars.push_back(sp.axes.back()->var);
        }
        if (sp.axes.empty()) sp.axes.push_back(te::reduce_axis(1, "r"));  // one update row
        auto upd_at = [&](const std::vector<Var>& p, std::vector<Expr> row) {
            row.insert(row.end(), p.begin() + k, p.end());
            return te::read(upd, row);
        };
        sp.match = [&, uvars](const std::vector<Var>& p) {
            Expr m;
            for (int64_t j = 0; j < k; ++j) {
                std::vector<Expr> ii = uvars;
                ii.push_back(te::int_imm(j));
                Expr e = te::eq(norm_index(te::read(ind, ii), data->shape[j]), p[j]);
                m = m ? te::logical_and(m, e) : e;
            }
            return m;
        };
        sp.update = [&, uvars](const std::vector<Var>& p) { return upd_at(p, uvars); };
        sp.position = [&, uvars](const std::vector<Var>&) {
            Expr flat = te::int_imm(0);
            for (int j = 0; j < q - 1; ++j) flat = flat * ind->shape[j] + uvars[j];
            return flat;
        };
        sp.update_at = [&](const std::vector<Var>& p, const Expr& found) {
            std::vector<Expr> row(q - 1);
            Expr f = found;
            for (int j = q - 1; j-- > 0;) {
                row[j] = te::floormod(f, te::int_imm(ind->shape[j]));
                f = te::floordiv(f, te::int_imm(ind->shape[j]));
            }
            return upd_at(p, row);
        };
        if (ind->numel() == 0)
            return std::vector<te::Tensor>{te::compute(
                a.out_shape(), [&](const std::vector<Var>& p) { return te::read(data, p); }, "ScatterND", a.out_dtype())};
        return std::vector<te::Tensor>{scatter_stages(a, sp, "ScatterND")};
    };
    return d;
}

int64_t onehot_depth(const ir::Node& n) {
    const Tensor& t = constant_scalar(n, 1, "depth");
    const int64_t depth = static_cast<int64_t>(t.get_f64(0));
    KILN_CHECK(depth >= 1, kInvalidModel) << node_label(n) << ": depth must be >= 1, got " << depth;
    return depth;
}

OpDef onehot_op() {
    OpDef d;
    d.name = "OneHot";
    d.onnx_versions = {9, 11};
    d.min_inputs = d.max_inputs = 3;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{-1})}};
    d.value_inputs = {1};
    d.pattern = OpPattern::kInjective;
    d.infer = [](const ir::Node& n) {
        const auto& ind = input_type(n, 0, "indices");
        const auto& vals = input_type(n, 2, "values");
        check_dtype(n, "indices", ind.dtype, numeric_types());
        KILN_CHECK(vals.rank() == 1 && vals.shape[0] == ir::Dim(int64_t{2}), kInvalidModel)
            << node_label(n) << ": values must have shape [2], got " << dims_str(vals.shape);
        const int axis = normalize_axis(n, n.attr_int("axis", -1), ind.rank() + 1);
        std::vector<ir::Dim> out = ind.shape;
        out.insert(out.begin() + axis, onehot_depth(n));
        return std::vector<ir::TensorType>{{vals.dtype, out}};
    };
    d.compute = [](const ComputeArgs& a) {
        te::Tensor ind = a.in(0), vals = a.in(2);
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", -1), ind->ndim() + 1);
        const int64_t depth = onehot_depth(a.node);
        auto out = te::compute(
            a.out_shape(), [&](const std::vector<Var>& o) {
                std::vector<Var> ii(o.begin(), o.end());
                ii.erase(ii.begin() + axis);
                Expr hit = te::eq(norm_index(te::read(ind, ii), depth), o[axis]);
                return te::select(hit, te::read(vals, {te::int_imm(1)}), te::read(vals, {te::int_imm(0)}));
            },
            "OneHot", a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

}  // namespace

void register_index_ops(OpRegistry& r) {
    r.add(gather_elements_op());
    r.add(gather_nd_op());
    r.add(scatter_elements_op("ScatterElements"));
    r.add(scatter_elements_op("Scatter"));
    r.add(scatter_nd_op());
    r.add(onehot_op());
}

}  // namespace kiln::op
