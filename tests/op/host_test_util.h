// Calling one op's host kernel (op/host.h) directly in a test: a one-node graph whose input
// types come from the given Datums, attribute defaults filled by op::check_node, then
// OpDef::host. Sub-graph running is the caller's (a lambda), so control-flow semantics can be
// tested without the graph interpreter. Errors: op_test_util.h's expect_error.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/graph.h"
#include "op/host.h"
#include "op/registry.h"
#include "support/datum.h"
#include "op_test_util.h"
#include "support/error.h"

namespace kiln::op::testing {

inline ir::TensorType datum_type(const Datum& d) {
    if (d.is_tensor()) return ir::TensorType::of_static(d.tensor().dtype(), d.tensor().shape());
    ir::TensorType t;
    t.dtype = d.elem_dtype();
    t.kind = d.is_sequence() ? ir::TypeKind::kSequence : ir::TypeKind::kOptionalTensor;
    return t;
}

using RunGraphFn = std::function<std::vector<Datum>(const ir::Graph&, const std::vector<Datum>&)>;

/// Runs op `op` (domain from its OpDef) on `inputs` (Datum::none() for an omitted optional input
/// that is followed by a present one: the node gets a null input there).
inline std::vector<Datum> run_host(const std::string& op, const std::vector<Datum>& inputs, ir::AttrMap attrs = {},
                                   int num_outputs = 1, RunGraphFn run_graph = {},
                                   const std::vector<bool>& omitted = {}) {
    const OpDef* def = OpRegistry::global().find(op);
    if (def == nullptr || !def->host) throw std::runtime_error("op " + op + " has no host kernel");
    ir::Graph g;
    std::vector<ir::Value*> ins;
    for (size_t i = 0; i < inputs.size(); ++i) {
        bool skip = i < omitted.size() && omitted[i];
        ins.push_back(skip ? nullptr : g.add_input("in" + std::to_string(i), datum_type(inputs[i])));
    }
    std::vector<ir::TensorType> outs(static_cast<size_t>(num_outputs));
    ir::Node* n = g.add_node(op, ins, std::move(attrs), outs, {}, "n0");
    check_node(*n, *def);
    HostArgs args{*n, inputs, std::move(run_graph)};
    std::vector<Datum> got = def->host(args);
    EXPECT_EQ(got.size(), static_cast<size_t>(num_outputs)) << op << ": host returned a wrong output count";
    return got;
}

/// A tensor from a shape and values (converted with Tensor::set_f64).
inline Tensor make_tensor(DType t, Shape shape, const std::vector<double>& vals) {
    Tensor x(t, std::move(shape));
    for (size_t i = 0; i < vals.size() && static_cast<int64_t>(i) < x.numel(); ++i)
        x.set_f64(static_cast<int64_t>(i), vals[i]);
    return x;
}

/// A string tensor.
inline Tensor make_strings(Shape shape, const std::vector<std::string>& vals) {
    Tensor x(DType::kString, std::move(shape));
    for (size_t i = 0; i < vals.size() && static_cast<int64_t>(i) < x.numel(); ++i)
        x.data_as<std::string>()[i] = vals[i];
    return x;
}

/// A tensor Datum's elements as doubles / as int64 (the tensor must be i64 for ints_of).
inline std::vector<double> doubles_of(const Datum& d) {
    const Tensor& t = d.tensor();
    std::vector<double> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
    return v;
}
inline std::vector<int64_t> ints_of(const Datum& d) {
    const Tensor& t = d.tensor();
    EXPECT_EQ(t.dtype(), DType::kInt64);
    return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
}

/// `f` must throw a kiln::Error of kind `kind`.
template <typename F>
void expect_error_kind(F f, ErrorKind kind) {
    try {
        f();
        ADD_FAILURE() << "expected a kiln::Error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
    }
}

}  // namespace kiln::op::testing
