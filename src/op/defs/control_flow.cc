// Control-flow ops as host kernels (op/host.h); their sub-graphs run through HostArgs::run_graph.
//  - If: runs then_branch or else_branch (no formal inputs) on a one-element condition.
//  - Loop (M?, cond?, v_initial...): body(iter_num i64[], cond bool[], v...) -> (cond, v...,
//    scan...). Runs while i < M (when given) and cond (when given; without the cond input the
//    body's cond output is ignored, as in the spec's for-loop form). Loop-carried values are any
//    Datum; scan outputs are tensors stacked along a new axis 0 (zero iterations: [0, ...] with
//    the body output's static dims).
//  - Scan (9+): inputs (state..., scan...), body(state..., slice...) -> (state..., out...); scan
//    input j is sliced along scan_input_axes[j] (reversed when scan_input_directions[j] = 1),
//    scan output k is stacked along scan_output_axes[k] (in reverse order when
//    scan_output_directions[k] = 1). Scan-8 (told apart by its extra first input, which the body
//    does not take) has sequence_lens first and a batch axis 0 on every state and scan value:
//    each batch entry scans its first sequence_lens[b] steps of axis 1 (directions per input);
//    the scan outputs of shorter entries are zero-padded to axis 1's length.
//  - SequenceMap (17): runs the body once per position of the sequence inputs (tensor inputs
//    are passed whole) and gathers each body output into a sequence.
// Gradients of If, Loop and Scan are not OpDef::gradient entries: each is the differentiation of
// its regions, which only autodiff can do (autodiff/control_flow_gradient.h).
#include <algorithm>
#include <limits>
#include <string>

#include "op/defs/host_axis.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"
#include "support/scalar_tensor.h"

namespace kiln::op {

namespace {

const ir::Graph* graph_attr_or_null(const ir::Node& n, const std::string& name) {
    auto it = n.attrs().find(name);
    if (it == n.attrs().end() || !std::holds_alternative<ir::GraphAttr>(it->second)) return nullptr;
    return std::get<ir::GraphAttr>(it->second).get();
}

/// Type of the sub-graph's output i (best effort: an f32 tensor of unknown shape when absent).
ir::TensorType graph_output_type(const ir::Graph* g, size_t i) {
    if (g == nullptr || i >= g->outputs().size()) return ir::TensorType(DType::kFloat32, {});
    return g->outputs()[i]->type();
}

/// a where b agrees, "?" dims where the two differ (a's rank when the ranks differ).
ir::TensorType merge_types(ir::TensorType a, const ir::TensorType& b) {
    if (a.rank() != b.rank()) return a;
    for (size_t d = 0; d < a.shape.size(); ++d)
        if (!(a.shape[d] == b.shape[d])) a.shape[d] = ir::Dim::sym("?");
    return a;
}

/// Runs sub-graph `g` and checks it returned `want` outputs.
std::vector<Datum> run_body(const HostArgs& a, const ir::Graph& g, const std::vector<Datum>& ins, size_t want,
                            const char* what) {
    KILN_ICHECK(static_cast<bool>(a.run_graph)) << "host kernel of " << a.node.op() << " called without run_graph";
    std::vector<Datum> outs = a.run_graph(g, ins);
    KILN_CHECK(outs.size() == want, kInvalidModel) << node_label(a.node) << ": " << what << " returned "
                                                   << outs.size() << " outputs, expected " << want;
    return outs;
}

/// A one-element condition tensor as a bool.
bool read_cond(const ir::Node& n, const Datum& d, const char* what) {
    const Tensor& t = d.tensor(node_label(n) + " " + what);
    KILN_CHECK(t.dtype() != DType::kString && t.numel() == 1, kInvalidArgument)
        << node_label(n) << ": " << what << " must be a one-element bool tensor, got " << d.str();
    return t.get_f64(0) != 0.0;
}

/// An empty stack of body output `i` of `g`: a 0 dim at `axis`, the rest the body output's
/// static dims (0 for unknown ones).
Tensor empty_stack(const ir::Graph& g, size_t i, int64_t axis) {
    const ir::TensorType t = graph_output_type(&g, i);
    Shape s;
    for (const ir::Dim& d : t.shape) s.push_back(d.is_static() ? d.value : 0);
    axis = std::clamp<int64_t>(axis < 0 ? axis + static_cast<int64_t>(s.size()) + 1 : axis, 0,
                               static_cast<int64_t>(s.size()));
    s.insert(s.begin() + axis, 0);
    return Tensor(t.dtype, s);
}

// ---------------------------------------------------------------------------------------- If

OpDef if_op() {
    OpDef d;
    d.name = "If";
    d.onnx_versions = {1, 11, 13, 16, 19, 21, 23, 24};
    d.min_outputs = 1;
    d.max_outputs = -1;
    d.attrs = {{"then_branch", AttrKind::kGraph, std::nullopt, true},
               {"else_branch", AttrKind::kGraph, std::nullopt, true}};
    d.infer = [](const ir::Node& n) {
        const ir::Graph* tb = graph_attr_or_null(n, "then_branch");
        const ir::Graph* eb = graph_attr_or_null(n, "else_branch");
        std::vector<ir::TensorType> out;
        for (size_t i = 0; i < n.num_outputs(); ++i)
            out.push_back(merge_types(graph_output_type(tb, i), graph_output_type(eb, i)));
        return out;
    };
    d.host = [](const HostArgs& a) {
        const bool cond = read_cond(a.node, a.inputs.at(0), "cond");
        const char* branch = cond ? "then_branch" : "else_branch";
        return run_body(a, a.graph_attr(branch), {}, a.node.num_outputs(), branch);
    };
    return d;
}

// -------------------------------------------------------------------------------------- Loop

OpDef loop_op() {
    OpDef d;
    d.name = "Loop";
    d.onnx_versions = {1, 11, 13, 16, 19, 21, 23, 24};
    d.min_inputs = 0;
    d.max_inputs = -1;
    d.min_outputs = 1;
    d.max_outputs = -1;
    d.attrs = {{"body", AttrKind::kGraph, std::nullopt, true}};
    d.infer = [](const ir::Node& n) {
        const ir::Graph* body = graph_attr_or_null(n, "body");
        const size_t num_carried = n.num_inputs() > 2 ? n.num_inputs() - 2 : 0;
        std::vector<ir::TensorType> out;
        for (size_t i = 0; i < n.num_outputs(); ++i) {
            ir::TensorType t = graph_output_type(body, 1 + i);
            if (i < num_carried && n.input(2 + i) != nullptr) {
                t = merge_types(n.input(2 + i)->type(), t);
            } else if (i >= num_carried) {
                t.shape.insert(t.shape.begin(), ir::Dim::sym("?"));
                t.kind = ir::TypeKind::kTensor;
            }
            out.push_back(t);
        }
        return out;
    };
    d.host = [](const HostArgs& a) {
        const ir::Graph& body = a.graph_attr("body");
        const size_t num_carried = a.num_inputs() > 2 ? a.num_inputs() - 2 : 0;
        const size_t num_out = a.node.num_outputs();
        KILN_CHECK(num_out >= num_carried, kInvalidModel)
            << node_label(a.node) << ": " << num_carried << " loop-carried inputs but only " << num_out << " outputs";
        const size_t num_scan = num_out - num_carried;
        const bool has_m = a.has_input(0), has_cond = a.has_input(1);
        KILN_CHECK(has_m || has_cond, kUnsupported)
            << node_label(a.node) << ": neither a trip count M nor a condition: the loop would never end";
        int64_t max_trips = std::numeric_limits<int64_t>::max();
        if (has_m) {
            const Tensor& m = a.tensor(0);
            KILN_CHECK(dtype_is_int(m.dtype()) && m.numel() == 1, kInvalidArgument)
                << node_label(a.node) << ": M must be a one-element integer tensor, got " << a.inputs[0].str();
            max_trips = m.get_i64(0);
        }
        bool cond = has_cond ? read_cond(a.node, a.inputs[1], "cond") : true;
        std::vector<Datum> carried;
        if (num_carried > 0) carried.assign(a.inputs.begin() + 2, a.inputs.end());
        std::vector<std::vector<Tensor>> scans(num_scan);
        for (int64_t i = 0; i < max_trips && cond; ++i) {
            std::vector<Datum> ins{scalar_i64(i), scalar_bool(cond)};
            ins.insert(ins.end(), carried.begin(), carried.end());
            std::vector<Datum> outs = run_body(a, body, ins, 1 + num_out, "body");
            if (has_cond) cond = read_cond(a.node, outs[0], "body output cond");
            for (size_t k = 0; k < num_carried; ++k) carried[k] = std::move(outs[1 + k]);
            for (size_t k = 0; k < num_scan; ++k)
                scans[k].push_back(outs[1 + num_carried + k].tensor(node_label(a.node) + " scan output " +
                                                                    std::to_string(k)));
        }
        std::vector<Datum> result = carried;
        for (size_t k = 0; k < num_scan; ++k) {
            const std::string who = node_label(a.node) + " scan output " + std::to_string(k);
            result.push_back(scans[k].empty() ? empty_stack(body, 1 + num_carried + k, 0)
                                              : stack_axis(scans[k], 0, who));
        }
        return result;
    };
    return d;
}

// -------------------------------------------------------------------------------------- Scan

/// Attribute `name` (ints) of `count` entries, zeros when absent.
std::vector<int64_t> per_value_attr(const ir::Node& n, const char* name, size_t count) {
    std::vector<int64_t> v = n.attr_ints(name, std::vector<int64_t>(count, 0));
    KILN_CHECK(v.size() == count, kInvalidModel)
        << node_label(n) << ": attribute " << name << " has " << v.size() << " entries, expected " << count;
    return v;
}

struct ScanLayout {
    bool v8 = false;  // Scan-8: sequence_lens first, batch axis 0
    size_t first = 0;  // index of the first state input
    size_t num_state = 0, num_scan_in = 0, num_scan_out = 0;
};

ScanLayout scan_layout(const ir::Node& n, const ir::Graph& body) {
    ScanLayout l;
    const int64_t m = n.attr_int("num_scan_inputs", 0);
    KILN_CHECK(m >= 1, kInvalidModel) << node_label(n) << ": num_scan_inputs must be >= 1, got " << m;
    l.num_scan_in = static_cast<size_t>(m);
    l.v8 = n.has_attr("directions") || n.num_inputs() == body.inputs().size() + 1;
    l.first = l.v8 ? 1 : 0;
    KILN_CHECK(n.num_inputs() >= l.first + l.num_scan_in, kInvalidModel)
        << node_label(n) << ": " << n.num_inputs() << " inputs, expected at least " << l.first + l.num_scan_in;
    l.num_state = n.num_inputs() - l.first - l.num_scan_in;
    KILN_CHECK(body.inputs().size() == l.num_state + l.num_scan_in, kInvalidModel)
        << node_label(n) << ": body takes " << body.inputs().size() << " inputs, expected "
        << l.num_state + l.num_scan_in;
    KILN_CHECK(n.num_outputs() >= l.num_state, kInvalidModel)
        << node_label(n) << ": " << l.num_state << " states but only " << n.num_outputs() << " outputs";
    l.num_scan_out = n.num_outputs() - l.num_state;
    return l;
}

/// One scan over `states` and `inputs` (already without a batch axis): slices along in_axes
/// (reversed per in_dirs) for `steps` steps; returns the final states and the per-step outputs.
void scan_once(const HostArgs& a, const ir::Graph& body, const ScanLayout& l, std::vector<Datum>& states,
               const std::vector<Tensor>& inputs, const std::vector<int>& in_axes,
               const std::vector<int64_t>& in_dirs, int64_t steps, std::vector<std::vector<Tensor>>& outs) {
    outs.assign(l.num_scan_out, {});
    for (int64_t t = 0; t < steps; ++t) {
        std::vector<Datum> ins = states;
        for (size_t j = 0; j < inputs.size(); ++j) {
            const int64_t idx = in_dirs[j] ? steps - 1 - t : t;
            ins.push_back(slice_axis(inputs[j], in_axes[j], idx, 1, false));
        }
        std::vector<Datum> res = run_body(a, body, ins, l.num_state + l.num_scan_out, "body");
        for (size_t k = 0; k < l.num_state; ++k) states[k] = std::move(res[k]);
        for (size_t k = 0; k < l.num_scan_out; ++k)
            outs[k].push_back(res[l.num_state + k].tensor(node_label(a.node) + " scan output " + std::to_string(k)));
    }
}

/// Scan-9+.
std::vector<Datum> scan9_host(const HostArgs& a, const ir::Graph& body, const ScanLayout& l) {
    const ir::Node& n = a.node;
    const std::vector<int64_t> in_axes_attr = per_value_attr(n, "scan_input_axes", l.num_scan_in);
    const std::vector<int64_t> in_dirs = per_value_attr(n, "scan_input_directions", l.num_scan_in);
    const std::vector<int64_t> out_axes = per_value_attr(n, "scan_output_axes", l.num_scan_out);
    const std::vector<int64_t> out_dirs = per_value_attr(n, "scan_output_directions", l.num_scan_out);
    std::vector<Datum> states(a.inputs.begin(), a.inputs.begin() + static_cast<long>(l.num_state));
    std::vector<Tensor> inputs;
    std::vector<int> in_axes;
    int64_t steps = -1;
    for (size_t j = 0; j < l.num_scan_in; ++j) {
        const Tensor& x = a.tensor(l.num_state + j);
        const int rank = static_cast<int>(x.shape().size());
        KILN_CHECK(rank >= 1, kInvalidArgument) << node_label(n) << ": scan input " << j << " is a scalar";
        const int axis = normalize_axis(n, in_axes_attr[j], rank, "scan_input_axes");
        KILN_CHECK(steps < 0 || x.shape()[axis] == steps, kInvalidArgument)
            << node_label(n) << ": scan input " << j << " has " << x.shape()[axis] << " steps along axis " << axis
            << ", expected " << steps << " like scan input 0";
        steps = x.shape()[axis];
        inputs.push_back(x);
        in_axes.push_back(axis);
    }
    std::vector<std::vector<Tensor>> outs;
    scan_once(a, body, l, states, inputs, in_axes, in_dirs, steps, outs);
    std::vector<Datum> result = states;
    for (size_t k = 0; k < l.num_scan_out; ++k) {
        if (outs[k].empty()) {
            result.push_back(empty_stack(body, l.num_state + k, out_axes[k]));
            continue;
        }
        if (out_dirs[k]) std::reverse(outs[k].begin(), outs[k].end());
        const int axis = normalize_axis(n, out_axes[k], static_cast<int>(outs[k][0].shape().size()) + 1,
                                        "scan_output_axes");
        result.push_back(stack_axis(outs[k], axis, node_label(n) + " scan output " + std::to_string(k)));
    }
    return result;
}

/// Scan-8: batch axis 0 on states and scan values, scan axis 1, optional sequence_lens.
std::vector<Datum> scan8_host(const HostArgs& a, const ir::Graph& body, const ScanLayout& l) {
    const ir::Node& n = a.node;
    const std::vector<int64_t> dirs = per_value_attr(n, "directions", l.num_scan_in);
    std::vector<Tensor> states, inputs;
    int64_t batch = -1, max_len = -1;
    auto check_batch = [&](const Tensor& t, const std::string& what) {
        KILN_CHECK(!t.shape().empty() && (batch < 0 || t.shape()[0] == batch), kInvalidArgument)
            << node_label(n) << ": " << what << " has shape " << shape_str(t.shape()) << ", expected batch axis 0 of "
            << batch;
        batch = t.shape()[0];
    };
    for (size_t k = 0; k < l.num_state; ++k) {
        states.push_back(a.tensor(1 + k));
        check_batch(states.back(), "state " + std::to_string(k));
    }
    for (size_t j = 0; j < l.num_scan_in; ++j) {
        const Tensor& x = a.tensor(1 + l.num_state + j);
        check_batch(x, "scan input " + std::to_string(j));
        KILN_CHECK(x.shape().size() >= 2 && (max_len < 0 || x.shape()[1] == max_len), kInvalidArgument)
            << node_label(n) << ": scan input " << j << " has shape " << shape_str(x.shape())
            << ", expected [batch, " << max_len << ", ...]";
        max_len = x.shape()[1];
        inputs.push_back(x);
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
    if (a.has_input(0)) {
        const Tensor& sl = a.tensor(0);
        KILN_CHECK(dtype_is_int(sl.dtype()) && sl.numel() == batch, kInvalidArgument)
            << node_label(n) << ": sequence_lens must be an integer tensor of " << batch << " elements, got "
            << a.inputs[0].str();
        for (int64_t b = 0; b < batch; ++b) {
            lens[b] = sl.get_i64(b);
            KILN_CHECK(lens[b] >= 0 && lens[b] <= max_len, kInvalidArgument)
                << node_label(n) << ": sequence_lens[" << b << "] = " << lens[b] << " out of range [0, " << max_len
                << "]";
        }
    }
    std::vector<std::vector<Tensor>> final_states(l.num_state), scan_outs(l.num_scan_out);
    const std::vector<int> in_axes(l.num_scan_in, 0);
    for (int64_t b = 0; b < batch; ++b) {
        std::vector<Datum> st;
        for (const Tensor& s : states) st.push_back(slice_axis(s, 0, b, 1, false));
        std::vector<Tensor> ins;
        for (const Tensor& x : inputs) ins.push_back(slice_axis(slice_axis(x, 0, b, 1, false), 0, 0, lens[b]));
        std::vector<std::vector<Tensor>> outs;
        scan_once(a, body, l, st, ins, in_axes, dirs, lens[b], outs);
        for (size_t k = 0; k < l.num_state; ++k)
            final_states[k].push_back(st[k].tensor(node_label(n) + " state " + std::to_string(k)));
        for (size_t k = 0; k < l.num_scan_out; ++k) {
            if (outs[k].empty()) {
                scan_outs[k].emplace_back();  // all padding: shaped below like the other entries
                continue;
            }
            const std::string who = node_label(n) + " scan output " + std::to_string(k);
            Tensor y = stack_axis(outs[k], 0, who);
            if (lens[b] < max_len) {
                Shape pad = y.shape();
                pad[0] = max_len - lens[b];
                y = concat_axis({y, Tensor(y.dtype(), pad)}, 0, who);
            }
            scan_outs[k].push_back(y);
        }
    }
    std::vector<Datum> result;
    for (size_t k = 0; k < l.num_state; ++k)
        result.push_back(stack_axis(final_states[k], 0, node_label(n) + " state " + std::to_string(k)));
    for (size_t k = 0; k < l.num_scan_out; ++k) {
        // Entries with sequence length 0 are zeros shaped like a non-empty entry (or, when every
        // entry is empty, like the body output's static type).
        Tensor like = empty_stack(body, l.num_state + k, 0);
        for (const Tensor& y : scan_outs[k])
            if (!y.shape().empty()) like = y;
        Shape pad = like.shape();
        pad[0] = max_len;
        for (Tensor& y : scan_outs[k])
            if (y.shape().empty()) y = Tensor(like.dtype(), pad);
        result.push_back(stack_axis(scan_outs[k], 0, node_label(n) + " scan output " + std::to_string(k)));
    }
    return result;
}

OpDef scan_op() {
    OpDef d;
    d.name = "Scan";
    d.onnx_versions = {8, 9, 11, 16, 19, 21, 23, 24};
    d.min_inputs = 0;
    d.max_inputs = -1;
    d.min_outputs = 1;
    d.max_outputs = -1;
    d.attrs = {{"body", AttrKind::kGraph, std::nullopt, true},
               {"num_scan_inputs", AttrKind::kInt, std::nullopt, true},
               {"directions", AttrKind::kInts, std::nullopt},
               {"scan_input_axes", AttrKind::kInts, std::nullopt},
               {"scan_input_directions", AttrKind::kInts, std::nullopt},
               {"scan_output_axes", AttrKind::kInts, std::nullopt},
               {"scan_output_directions", AttrKind::kInts, std::nullopt}};
    d.infer = [](const ir::Node& n) {
        const ir::Graph* body = graph_attr_or_null(n, "body");
        KILN_CHECK(body != nullptr, kInvalidModel) << node_label(n) << ": missing graph attribute 'body'";
        const ScanLayout l = scan_layout(n, *body);
        const std::vector<int64_t> out_axes =
            l.v8 ? std::vector<int64_t>(l.num_scan_out, 0) : per_value_attr(n, "scan_output_axes", l.num_scan_out);
        std::vector<ir::TensorType> out;
        for (size_t k = 0; k < l.num_state; ++k) {
            ir::TensorType t = graph_output_type(body, k);
            if (n.input(l.first + k) != nullptr) t = n.input(l.first + k)->type();
            out.push_back(t);
        }
        for (size_t k = 0; k < l.num_scan_out; ++k) {
            ir::TensorType t = graph_output_type(body, l.num_state + k);
            const int64_t r = t.rank();
            const int64_t axis = std::clamp<int64_t>(out_axes[k] < 0 ? out_axes[k] + r + 1 : out_axes[k], 0, r);
            t.shape.insert(t.shape.begin() + axis, ir::Dim::sym("?"));
            if (l.v8) t.shape.insert(t.shape.begin(), ir::Dim::sym("?"));
            t.kind = ir::TypeKind::kTensor;
            out.push_back(t);
        }
        return out;
    };
    d.host = [](const HostArgs& a) {
        const ir::Graph& body = a.graph_attr("body");
        const ScanLayout l = scan_layout(a.node, body);
        return l.v8 ? scan8_host(a, body, l) : scan9_host(a, body, l);
    };
    return d;
}

// ------------------------------------------------------------------------------- SequenceMap

OpDef sequence_map_op() {
    OpDef d;
    d.name = "SequenceMap";
    d.onnx_versions = {17};
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.min_outputs = 1;
    d.max_outputs = -1;
    d.attrs = {{"body", AttrKind::kGraph, std::nullopt, true}};
    d.infer = [](const ir::Node& n) {
        const ir::Graph* body = graph_attr_or_null(n, "body");
        std::vector<ir::TensorType> out;
        for (size_t i = 0; i < n.num_outputs(); ++i) {
            ir::TensorType t = graph_output_type(body, i);
            t.kind = ir::TypeKind::kSequence;
            out.push_back(t);
        }
        return out;
    };
    d.host = [](const HostArgs& a) {
        const ir::Graph& body = a.graph_attr("body");
        const size_t num_out = a.node.num_outputs();
        KILN_CHECK(body.inputs().size() == a.num_inputs(), kInvalidModel)
            << node_label(a.node) << ": body takes " << body.inputs().size() << " inputs, expected "
            << a.num_inputs();
        const size_t len = a.sequence(0).size();
        for (size_t i = 1; i < a.num_inputs(); ++i)
            KILN_CHECK(!a.inputs[i].is_sequence() || a.inputs[i].items().size() == len, kInvalidArgument)
                << node_label(a.node) << ": sequence input " << i << " has " << a.inputs[i].items().size()
                << " tensors, expected " << len << " like input 0";
        std::vector<std::vector<Tensor>> outs(num_out);
        for (size_t t = 0; t < len; ++t) {
            std::vector<Datum> ins;
            for (const Datum& in : a.inputs) ins.push_back(in.is_sequence() ? Datum(in.items()[t]) : in);
            std::vector<Datum> res = run_body(a, body, ins, num_out, "body");
            for (size_t k = 0; k < num_out; ++k)
                outs[k].push_back(res[k].tensor(node_label(a.node) + " body output " + std::to_string(k)));
        }
        std::vector<Datum> result;
        for (size_t k = 0; k < num_out; ++k) {
            const DType t = outs[k].empty() ? graph_output_type(&body, k).dtype : outs[k][0].dtype();
            for (const Tensor& x : outs[k])
                KILN_CHECK(x.dtype() == t, kInvalidArgument)
                    << node_label(a.node) << ": body output " << k << " changed dtype across iterations ("
                    << dtype_name(t) << " then " << dtype_name(x.dtype()) << ")";
            result.push_back(Datum::sequence(t, std::move(outs[k])));
        }
        return result;
    };
    return d;
}

}  // namespace

void register_control_flow_ops(OpRegistry& r) {
    r.add(if_op());
    r.add(loop_op());
    r.add(scan_op());
    r.add(sequence_map_op());
}

}  // namespace kiln::op
