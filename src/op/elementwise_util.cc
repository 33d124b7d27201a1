// map_op: the N-input broadcasting elementwise op builder (see elementwise_util.h).
#include "op/elementwise_util.h"

#include "op/broadcast.h"
#include "op/op_util.h"

namespace kiln::op {

namespace {
std::string input_name(int count, size_t i) {
    if (count == 1) return "X";
    if (count == 2) return i == 0 ? "A" : "B";
    return "data_" + std::to_string(i);
}
}  // namespace

OpDef map_op(const std::string& name, std::vector<int> versions, int min_inputs, int max_inputs,
             std::vector<DType> types, ScalarMapFn f, std::optional<DType> out_dtype) {
    OpDef d;
    d.name = name;
    d.onnx_versions = std::move(versions);
    d.min_inputs = min_inputs;
    d.max_inputs = max_inputs;
    d.pattern = max_inputs == 1 ? OpPattern::kElemWise : OpPattern::kBroadcast;
    d.infer = [types, out_dtype, max_inputs](const ir::Node& n) {
        const int count = max_inputs == 1 ? 1 : max_inputs == 2 ? 2 : -1;
        std::vector<std::vector<ir::Dim>> shapes;
        DType first = DType::kFloat32;
        std::string first_name;
        for (size_t i = 0; i < n.inputs().size(); ++i) {
            const std::string nm = input_name(count, i);
            const auto& t = input_type(n, i, nm.c_str());
            check_dtype(n, nm.c_str(), t.dtype, types);
            if (i == 0) {
                first = t.dtype;
                first_name = nm;
            } else {
                check_same_dtype(n, first_name.c_str(), first, nm.c_str(), t.dtype);
            }
            shapes.push_back(t.shape);
        }
        std::vector<ir::Dim> shape = shapes.size() == 1 ? shapes[0] : broadcast_shapes(n, shapes);
        return std::vector<ir::TensorType>{{out_dtype.value_or(first), shape}};
    };
    d.compute = [f, name](const ComputeArgs& a) {
        auto out = te::sym_compute(
            a.out_dims(),
            [&](const std::vector<te::Var>& i) {
                std::vector<te::Expr> xs;
                for (const auto& t : a.inputs) xs.push_back(broadcast_read(t, i));
                return f(xs, a.node);
            },
            name, a.out_dtype());
        return std::vector<te::Tensor>{out};
    };
    return d;
}

OpDef unary_map_op(const std::string& name, std::vector<int> versions, std::vector<DType> types,
                   std::function<te::Expr(te::Expr, const ir::Node&)> f, std::optional<DType> out_dtype) {
    return map_op(
        name, std::move(versions), 1, 1, std::move(types),
        [f](const std::vector<te::Expr>& x, const ir::Node& n) { return f(x[0], n); }, out_dtype);
}

OpDef binary_map_op(const std::string& name, std::vector<int> versions, std::vector<DType> types,
                    std::function<te::Expr(te::Expr, te::Expr, const ir::Node&)> f,
                    std::optional<DType> out_dtype) {
    return map_op(
        name, std::move(versions), 2, 2, std::move(types),
        [f](const std::vector<te::Expr>& x, const ir::Node& n) { return f(x[0], x[1], n); },
        out_dtype);
}

const std::vector<DType>& int_types() {
    static const std::vector<DType> t = {DType::kInt8,  DType::kInt16,  DType::kInt32,  DType::kInt64,
                                         DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};
    return t;
}
const std::vector<DType>& unsigned_types() {
    static const std::vector<DType> t = {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};
    return t;
}

}  // namespace kiln::op
