// The op harness's case vocabulary (op_harness_test.cc runs the cases): a Case names an op, its
// inputs (random data in [lo, hi], omitted, or integer constants), attributes and a naive
// reference. Case lists of op families live in their own files (cases_*_test.cc,
// blocked_ops_test.cc, grad_ops_test.cc; shared references in op_harness_refs.h) and are called
// from all_cases().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "op_reference.h"

namespace kiln::op::testing {

struct In {
    DType dtype = DType::kFloat32;
    Shape shape;
    double lo = -2, hi = 2;
    bool present = true;
    std::vector<double> constant;  // non-empty: a constant input with this data
};
inline In in(DType t, Shape s, double lo = -2, double hi = 2) { return In{t, std::move(s), lo, hi}; }
inline In omitted() {
    In i;
    i.present = false;
    return i;
}
inline In constant(std::vector<double> v) {
    In i{DType::kInt64, {static_cast<int64_t>(v.size())}};
    i.constant = std::move(v);
    return i;
}

using RefFn = std::function<Refs(const std::vector<Arr>& in, const ir::Node& n, const std::vector<Shape>& out)>;

struct Case {
    std::string name;
    std::string op;
    std::vector<In> inputs;
    ir::AttrMap attrs;
    RefFn ref;
    int num_outputs = 1;
};

/// The case families of the cases_*_test.cc files.
void add_math_cases(std::vector<Case>& c);
void add_logic_cases(std::vector<Case>& c);
void add_shape_cases(std::vector<Case>& c);
void add_reduce_cases(std::vector<Case>& c);
void add_nn_cases(std::vector<Case>& c);
void add_nn2_cases(std::vector<Case>& c);
void add_transformer_cases(std::vector<Case>& c);
void add_loss_cases(std::vector<Case>& c);
void add_training_cases(std::vector<Case>& c);
void add_resize_cases(std::vector<Case>& c);
void add_quant_cases(std::vector<Case>& c);
void add_dtype_cases(std::vector<Case>& c);
void add_signal_cases(std::vector<Case>& c);
void add_signal2_cases(std::vector<Case>& c);
void add_recurrent_cases(std::vector<Case>& c);
void add_layout_cases(std::vector<Case>& c);
/// KilnDepthwiseConv2dNCHWc and the blocked pools (blocked_ops_test.cc).
void add_blocked_op_cases(std::vector<Case>& c);
/// KilnConvGradData, KilnConvGradWeight, KilnMaxPoolGrad, KilnBatchNormGrad (grad_ops_test.cc).
void add_grad_op_cases(std::vector<Case>& c);

}  // namespace kiln::op::testing
