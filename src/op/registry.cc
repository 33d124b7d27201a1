// The operator registry and node validation against an op's schema.
//
// check_node validates arity (omitted optional inputs are nullptr slots; required slots must be
// present), attribute names and kinds (an int is accepted where a float is expected and is
// converted), required attributes, and fills defaults. infer_node runs the op's inference.
#include "op/registry.h"

#include <variant>

#include "op/op_util.h"
#include "support/error.h"

namespace kiln::op {

void OpRegistry::add(OpDef def) {
    KILN_ICHECK(!def.name.empty()) << "op without a name";
    KILN_ICHECK(ops_.count(def.name) == 0) << "duplicate op " << def.name;
    std::string name = def.name;
    ops_.emplace(std::move(name), std::move(def));
}

const OpDef* OpRegistry::find(const std::string& name) const {
    auto it = ops_.find(name);
    return it == ops_.end() ? nullptr : &it->second;
}

std::vector<const OpDef*> OpRegistry::all() const {
    std::vector<const OpDef*> out;
    for (const auto& [name, def] : ops_) out.push_back(&def);
    return out;
}

namespace {

const char* kind_name(AttrKind k) {
    switch (k) {
        case AttrKind::kInt: return "int";
        case AttrKind::kFloat: return "float";
        case AttrKind::kString: return "string";
        case AttrKind::kInts: return "ints";
        case AttrKind::kFloats: return "floats";
        case AttrKind::kStrings: return "strings";
        case AttrKind::kTensor: return "tensor";
        case AttrKind::kGraph: return "graph";
    }
    return "?";
}

// Returns true if `a` has (or was converted to) kind k.
bool coerce(ir::Attr& a, AttrKind k) {
    switch (k) {
        case AttrKind::kInt: return std::holds_alternative<int64_t>(a);
        case AttrKind::kFloat:
            if (auto* i = std::get_if<int64_t>(&a)) a = static_cast<double>(*i);
            return std::holds_alternative<double>(a);
        case AttrKind::kString: return std::holds_alternative<std::string>(a);
        case AttrKind::kInts: return std::holds_alternative<std::vector<int64_t>>(a);
        case AttrKind::kFloats:
            if (auto* v = std::get_if<std::vector<int64_t>>(&a)) a = std::vector<double>(v->begin(), v->end());
            return std::holds_alternative<std::vector<double>>(a);
        case AttrKind::kStrings: return std::holds_alternative<std::vector<std::string>>(a);
        case AttrKind::kTensor: return std::holds_alternative<Tensor>(a);
        case AttrKind::kGraph: return std::holds_alternative<ir::GraphAttr>(a);
    }
    return false;
}

std::string arity_str(int lo, int hi) {
    if (hi < 0) return "at least " + std::to_string(lo);
    if (lo == hi) return std::to_string(lo);
    return std::to_string(lo) + " to " + std::to_string(hi);
}

}  // namespace

void check_node(ir::Node& n, const OpDef& def) {
    const int nin = static_cast<int>(n.num_inputs());
    KILN_CHECK(nin >= def.min_inputs && (def.max_inputs < 0 || nin <= def.max_inputs), kInvalidModel)
        << node_label(n) << ": expected " << arity_str(def.min_inputs, def.max_inputs) << " inputs, got " << nin;
    for (int i = 0; i < def.min_inputs; ++i)
        KILN_CHECK(n.input(i) != nullptr, kInvalidModel) << node_label(n) << ": required input " << i << " is missing";
    const int nout = static_cast<int>(n.num_outputs());
    KILN_CHECK(nout >= def.min_outputs && (def.max_outputs < 0 || nout <= def.max_outputs), kInvalidModel)
        << node_label(n) << ": expected " << arity_str(def.min_outputs, def.max_outputs) << " outputs, got "
        << nout;

    for (auto& [name, value] : n.attrs()) {
        // The partition's placement annotation (distributed/rank_assignment.h): any op may carry
        // it, none reads it, and the partition removes it from the rank graphs.
        if (name == "kiln.rank") {
            KILN_CHECK(std::holds_alternative<int64_t>(value), kInvalidModel)
                << node_label(n) << ": attribute 'kiln.rank' must be an int, got " << ir::attr_kind_name(value);
            continue;
        }
        // The device placement's pin and record (pass/place_devices.h): any op, "cpu" or "cuda".
        if (name == "kiln.device") {
            KILN_CHECK(std::holds_alternative<std::string>(value), kInvalidModel)
                << node_label(n) << ": attribute 'kiln.device' must be a string, got " << ir::attr_kind_name(value);
            continue;
        }
        const AttrSpec* spec = nullptr;
        for (const auto& s : def.attrs)
            if (s.name == name) spec = &s;
        KILN_CHECK(spec != nullptr, kUnsupported)
            << node_label(n) << ": unknown attribute '" << name << "' for op " << n.op();
        KILN_CHECK(coerce(value, spec->kind), kInvalidModel)
            << node_label(n) << ": attribute '" << name << "' must be of kind " << kind_name(spec->kind) << ", got "
            << ir::attr_kind_name(value);
    }
    for (const auto& s : def.attrs) {
        if (n.has_attr(s.name)) continue;
        KILN_CHECK(!s.required, kInvalidModel) << node_label(n) << ": missing required attribute '" << s.name << "'";
        if (s.default_value) n.attrs()[s.name] = *s.default_value;
    }
}

void infer_node(ir::Node& n) {
    const OpDef* def = OpRegistry::global().find(n.op());
    KILN_CHECK(def != nullptr, kUnsupported) << node_label(n) << ": unknown op " << n.op();
    KILN_ICHECK(def->infer) << "op " << n.op() << " has no shape inference";
    std::vector<ir::TensorType> types = def->infer(n);
    KILN_ICHECK(types.size() >= n.num_outputs())
        << n.op() << " inferred " << types.size() << " outputs for " << n.num_outputs();
    for (size_t i = 0; i < n.num_outputs(); ++i) n.output(i)->set_type(types[i]);
}

}  // namespace kiln::op
