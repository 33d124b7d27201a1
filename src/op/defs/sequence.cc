// Sequence ops (opset 11+) as host kernels (op/host.h): SequenceConstruct, SequenceEmpty,
// SequenceAt, SequenceInsert, SequenceErase, SequenceLength, SplitToSequence and
// ConcatFromSequence. A sequence is a Datum::sequence of tensors of one dtype; positions are
// int32/int64 scalars, negative ones count from the back (numpy list semantics): SequenceAt and
// SequenceErase accept [-n, n-1], SequenceInsert [-n, n] (n appends). SplitToSequence cuts
// along `axis` into chunks of `split` (a scalar: equal chunks, the last one shorter; a 1-D
// tensor: the chunk lengths; absent: length-1 chunks, squeezed when keepdims=0).
// ConcatFromSequence concatenates the items along `axis`, or stacks them along a new axis
// (new_axis=1, numpy.stack).
#include <string>

#include "op/defs/host_axis.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

std::vector<DType> seq_elem_types() {
    std::vector<DType> t = all_types();
    t.push_back(DType::kString);
    return t;
}

ir::TensorType seq_type(DType elem, std::vector<ir::Dim> shape = {}) {
    ir::TensorType t(elem, std::move(shape));
    t.kind = ir::TypeKind::kSequence;
    return t;
}

ir::TensorType elem_type_of(const ir::TensorType& seq) {
    ir::TensorType t(seq.dtype, seq.shape);
    t.kind = ir::TypeKind::kTensor;
    return t;
}

/// Position input `i` (int32/int64, one element) in [-n, n-1] ([-n, n] with allow_end), made
/// non-negative.
int64_t read_position(const HostArgs& a, size_t i, int64_t n, bool allow_end) {
    const Tensor& p = a.tensor(i);
    KILN_CHECK(p.dtype() == DType::kInt32 || p.dtype() == DType::kInt64, kInvalidArgument)
        << node_label(a.node) << ": position must be an int32 or int64 scalar, got " << dtype_name(p.dtype());
    KILN_CHECK(p.numel() == 1, kInvalidArgument)
        << node_label(a.node) << ": position must hold one element, got shape " << shape_str(p.shape());
    const int64_t pos = p.get_i64(0);
    const int64_t hi = allow_end ? n : n - 1;
    KILN_CHECK(pos >= -n && pos <= hi, kInvalidArgument)
        << node_label(a.node) << ": position " << pos << " out of range [" << -n << ", " << hi
        << "] for a sequence of " << n << " tensors";
    return pos < 0 ? pos + n : pos;
}

OpDef sequence_construct_op() {
    OpDef d;
    d.name = "SequenceConstruct";
    d.onnx_versions = {11};
    d.min_inputs = 1;
    d.max_inputs = -1;
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "inputs[0]");
        bool same = true;
        for (size_t i = 1; i < n.num_inputs(); ++i) {
            const auto& t = input_type(n, i, "inputs");
            check_same_dtype(n, "inputs[0]", x.dtype, "inputs[i]", t.dtype);
            same = same && t.shape == x.shape;
        }
        return std::vector<ir::TensorType>{seq_type(x.dtype, same ? x.shape : std::vector<ir::Dim>{})};
    };
    d.host = [](const HostArgs& a) {
        std::vector<Tensor> items;
        for (size_t i = 0; i < a.num_inputs(); ++i) items.push_back(a.tensor(i));
        const DType t = items[0].dtype();
        for (size_t i = 1; i < items.size(); ++i)
            KILN_CHECK(items[i].dtype() == t, kInvalidArgument)
                << node_label(a.node) << ": input " << i << " has dtype " << dtype_name(items[i].dtype())
                << ", expected " << dtype_name(t) << " like input 0";
        return std::vector<Datum>{Datum::sequence(t, std::move(items))};
    };
    return d;
}

DType sequence_empty_dtype(const ir::Node& n) {
    const int64_t code = n.attr_int("dtype", 1);
    auto t = dtype_from_onnx(static_cast<int>(code));
    KILN_CHECK(t.has_value(), kUnsupported) << node_label(n) << ": unsupported dtype " << code;
    return *t;
}

OpDef sequence_empty_op() {
    OpDef d;
    d.name = "SequenceEmpty";
    d.onnx_versions = {11};
    d.min_inputs = d.max_inputs = 0;
    d.attrs = {{"dtype", AttrKind::kInt, std::nullopt}};
    d.infer = [](const ir::Node& n) { return std::vector<ir::TensorType>{seq_type(sequence_empty_dtype(n))}; };
    d.host = [](const HostArgs& a) {
        return std::vector<Datum>{Datum::sequence(sequence_empty_dtype(a.node), {})};
    };
    return d;
}

OpDef sequence_at_op() {
    OpDef d;
    d.name = "SequenceAt";
    d.onnx_versions = {11};
    d.min_inputs = d.max_inputs = 2;
    d.infer = [](const ir::Node& n) {
        return std::vector<ir::TensorType>{elem_type_of(input_type(n, 0, "input_sequence"))};
    };
    d.host = [](const HostArgs& a) {
        const auto& items = a.sequence(0);
        const int64_t pos = read_position(a, 1, static_cast<int64_t>(items.size()), false);
        return std::vector<Datum>{items[static_cast<size_t>(pos)]};
    };
    return d;
}

OpDef sequence_insert_op() {
    OpDef d;
    d.name = "SequenceInsert";
    d.onnx_versions = {11};
    d.min_inputs = 2;
    d.max_inputs = 3;
    d.infer = [](const ir::Node& n) {
        const auto& s = input_type(n, 0, "input_sequence");
        const auto& t = input_type(n, 1, "tensor");
        check_same_dtype(n, "input_sequence", s.dtype, "tensor", t.dtype);
        return std::vector<ir::TensorType>{seq_type(s.dtype, s.shape == t.shape ? s.shape : std::vector<ir::Dim>{})};
    };
    d.host = [](const HostArgs& a) {
        const Datum& seq = a.inputs[0];
        std::vector<Tensor> items = a.sequence(0);
        const Tensor& t = a.tensor(1);
        KILN_CHECK(t.dtype() == seq.elem_dtype(), kInvalidArgument)
            << node_label(a.node) << ": cannot insert a " << dtype_name(t.dtype()) << " tensor into a sequence of "
            << dtype_name(seq.elem_dtype());
        const int64_t n = static_cast<int64_t>(items.size());
        const int64_t pos = a.has_input(2) ? read_position(a, 2, n, true) : n;
        items.insert(items.begin() + pos, t);
        return std::vector<Datum>{Datum::sequence(seq.elem_dtype(), std::move(items))};
    };
    return d;
}

OpDef sequence_erase_op() {
    OpDef d;
    d.name = "SequenceErase";
    d.onnx_versions = {11};
    d.min_inputs = 1;
    d.max_inputs = 2;
    d.infer = [](const ir::Node& n) {
        const auto& s = input_type(n, 0, "input_sequence");
        return std::vector<ir::TensorType>{seq_type(s.dtype, s.shape)};
    };
    d.host = [](const HostArgs& a) {
        std::vector<Tensor> items = a.sequence(0);
        const int64_t n = static_cast<int64_t>(items.size());
        KILN_CHECK(n > 0, kInvalidArgument) << node_label(a.node) << ": cannot erase from an empty sequence";
        const int64_t pos = a.has_input(1) ? read_position(a, 1, n, false) : n - 1;
        items.erase(items.begin() + pos);
        return std::vector<Datum>{Datum::sequence(a.inputs[0].elem_dtype(), std::move(items))};
    };
    return d;
}

OpDef sequence_length_op() {
    OpDef d;
    d.name = "SequenceLength";
    d.onnx_versions = {11};
    d.infer = [](const ir::Node& n) {
        input_type(n, 0, "input_sequence");
        return std::vector<ir::TensorType>{{DType::kInt64, {}}};
    };
    d.host = [](const HostArgs& a) {
        Tensor out(DType::kInt64, {});
        out.set_i64(0, static_cast<int64_t>(a.sequence(0).size()));
        return std::vector<Datum>{out};
    };
    return d;
}

OpDef split_to_sequence_op() {
    OpDef d;
    d.name = "SplitToSequence";
    d.onnx_versions = {11, 24};
    d.min_inputs = 1;
    d.max_inputs = 2;
    d.attrs = {{"axis", AttrKind::kInt, ir::Attr(int64_t{0})}, {"keepdims", AttrKind::kInt, ir::Attr(int64_t{1})}};
    d.infer = [](const ir::Node& n) {
        const auto& x = input_type(n, 0, "input");
        check_dtype(n, "input", x.dtype, seq_elem_types());
        const int axis = normalize_axis(n, n.attr_int("axis", 0), x.rank());
        std::vector<ir::Dim> shape = x.shape;
        if (!has_input(n, 1) && n.attr_int("keepdims", 1) == 0)
            shape.erase(shape.begin() + axis);
        else if (has_input(n, 1))
            shape[axis] = ir::Dim::sym("?");
        else
            shape[axis] = 1;
        return std::vector<ir::TensorType>{seq_type(x.dtype, shape)};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = a.tensor(0);
        const int rank = static_cast<int>(x.shape().size());
        KILN_CHECK(rank >= 1, kInvalidArgument) << node_label(a.node) << ": input must have rank >= 1, got a scalar";
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), rank);
        const int64_t dim = x.shape()[axis];
        std::vector<int64_t> lengths;
        bool squeeze = false;
        if (!a.has_input(1)) {
            lengths.assign(static_cast<size_t>(dim), 1);
            squeeze = a.node.attr_int("keepdims", 1) == 0;
        } else {
            const Tensor& s = a.tensor(1);
            KILN_CHECK(s.dtype() == DType::kInt32 || s.dtype() == DType::kInt64, kInvalidArgument)
                << node_label(a.node) << ": split must be int32 or int64, got " << dtype_name(s.dtype());
            KILN_CHECK(s.shape().size() <= 1, kInvalidArgument)
                << node_label(a.node) << ": split must be a scalar or 1-D, got shape " << shape_str(s.shape());
            if (s.shape().empty()) {
                const int64_t c = s.get_i64(0);
                KILN_CHECK(c > 0, kInvalidArgument) << node_label(a.node) << ": scalar split must be > 0, got " << c;
                for (int64_t off = 0; off < dim; off += c) lengths.push_back(std::min(c, dim - off));
            } else {
                int64_t sum = 0;
                for (int64_t i = 0; i < s.numel(); ++i) {
                    const int64_t v = s.get_i64(i);
                    KILN_CHECK(v >= 0, kInvalidArgument)
                        << node_label(a.node) << ": split[" << i << "] must be >= 0, got " << v;
                    lengths.push_back(v);
                    sum += v;
                }
                KILN_CHECK(sum == dim, kInvalidArgument) << node_label(a.node) << ": split lengths sum to " << sum
                                                         << ", expected the axis " << axis << " length " << dim;
            }
        }
        std::vector<Tensor> items;
        int64_t off = 0;
        for (int64_t len : lengths) {
            items.push_back(slice_axis(x, axis, off, len, !squeeze));
            off += len;
        }
        return std::vector<Datum>{Datum::sequence(x.dtype(), std::move(items))};
    };
    return d;
}

OpDef concat_from_sequence_op() {
    OpDef d;
    d.name = "ConcatFromSequence";
    d.onnx_versions = {11};
    d.attrs = {{"axis", AttrKind::kInt, std::nullopt, true}, {"new_axis", AttrKind::kInt, ir::Attr(int64_t{0})}};
    d.infer = [](const ir::Node& n) {
        const auto& s = input_type(n, 0, "input_sequence");
        const bool stack = n.attr_int("new_axis", 0) == 1;
        std::vector<ir::Dim> shape = s.shape;
        if (!shape.empty() || stack) {
            const int axis = normalize_axis(n, n.attr_int("axis", 0), s.rank() + (stack ? 1 : 0));
            if (stack)
                shape.insert(shape.begin() + axis, ir::Dim::sym("?"));
            else
                shape[axis] = ir::Dim::sym("?");
        }
        return std::vector<ir::TensorType>{{s.dtype, shape}};
    };
    d.host = [](const HostArgs& a) {
        const auto& items = a.sequence(0);
        KILN_CHECK(!items.empty(), kInvalidArgument)
            << node_label(a.node) << ": cannot concatenate an empty sequence (no element shape)";
        const bool stack = a.node.attr_int("new_axis", 0) == 1;
        const int rank = static_cast<int>(items[0].shape().size());
        KILN_CHECK(stack || rank >= 1, kInvalidArgument)
            << node_label(a.node) << ": cannot concatenate scalars without new_axis=1";
        const int axis = normalize_axis(a.node, a.node.attr_int("axis", 0), rank + (stack ? 1 : 0));
        const std::string who = node_label(a.node);
        return std::vector<Datum>{stack ? stack_axis(items, axis, who) : concat_axis(items, axis, who)};
    };
    return d;
}

}  // namespace

void register_sequence_ops(OpRegistry& r) {
    r.add(concat_from_sequence_op());
    r.add(sequence_at_op());
    r.add(sequence_construct_op());
    r.add(sequence_empty_op());
    r.add(sequence_erase_op());
    r.add(sequence_insert_op());
    r.add(sequence_length_op());
    r.add(split_to_sequence_op());
}

}  // namespace kiln::op
