// Test helpers: build small ONNX ModelProtos through the protobuf API.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <onnx/onnx_pb.h>

#include "support/error.h"

namespace kiln::frontend::testing {

/// A dimension of a declared type: a size, or a symbol name ("" = neither set).
using TestDim = std::variant<int64_t, std::string>;

inline onnx::ModelProto make_model(int opset, const std::string& domain = "") {
    onnx::ModelProto m;
    m.set_ir_version(8);
    m.set_producer_name("kiln-test");
    auto* os = m.add_opset_import();
    os->set_domain(domain);
    os->set_version(opset);
    m.mutable_graph()->set_name("test_graph");
    return m;
}

inline void set_tensor_type(onnx::ValueInfoProto* vi, const std::string& name, int elem_type,
                            const std::vector<TestDim>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
        auto* dim = shape->add_dim();
        if (auto* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
        else if (!std::get<std::string>(d).empty()) dim->set_dim_param(std::get<std::string>(d));
    }
}

inline void add_input(onnx::GraphProto* g, const std::string& name, const std::vector<TestDim>& dims,
                      int elem_type = onnx::TensorProto::FLOAT) {
    set_tensor_type(g->add_input(), name, elem_type, dims);
}

inline void add_output(onnx::GraphProto* g, const std::string& name, const std::vector<TestDim>& dims = {},
                       int elem_type = onnx::TensorProto::FLOAT) {
    set_tensor_type(g->add_output(), name, elem_type, dims);
}

/// Float initializer; raw=true stores it in raw_data, else in float_data.
inline onnx::TensorProto* add_float_init(onnx::GraphProto* g, const std::string& name,
                                         const std::vector<int64_t>& dims, const std::vector<float>& data,
                                         bool raw = false) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    if (raw) {
        t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float)));
    } else {
        for (float f : data) t->add_float_data(f);
    }
    return t;
}

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
}

inline void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
}
inline void attr_float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
}
inline void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
}
inline void attr_floats(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
}
inline void attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
}

/// Imports `trials` copies of `good` with 1-4 random bytes overwritten; returns how many threw a
/// kiln::Error (the rest imported). Anything else (a crash, another exception) fails the test.
template <typename ImportFn>
int fuzz_byte_flips(const std::string& good, int trials, uint32_t seed, ImportFn import) {
    std::mt19937 rng(seed);
    int threw = 0;
    for (int trial = 0; trial < trials; ++trial) {
        std::string bad = good;
        int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng() & 0xff);
        try {
            import(bad);
        } catch (const kiln::Error&) {
            ++threw;
        }
    }
    return threw;
}

inline std::string serialize(const onnx::ModelProto& m) {
    std::string s;
    m.SerializeToString(&s);
    return s;
}

}  // namespace kiln::frontend::testing
