// ONNX import: ModelProto -> ir::Graph (see importer.h).
//
// One pass over the graph in file order, keeping a name -> Value environment:
//  1. the default-domain opset from opset_import;
//  2. initializers become constants (a graph input with the same name is a constant too, not a
//     runtime input); the remaining graph inputs become typed runtime inputs;
//  3. each node: Constant nodes become constants; other nodes resolve their OpDef and version
//     (largest claimed since-version <= opset), resolve inputs by name (a name not yet defined
//     is an error: ONNX requires topological order and we rely on it), convert attributes,
//     run the opset adapter, then emit: add to the graph, op::check_node, and a best-effort
//     op::infer_node (types are provisional; the compiler re-infers every node);
//  4. graph outputs are looked up by name.
// Sub-graph attributes (If's branches, Loop's/Scan's body) are imported by a child Importer in
// the same way; a name the sub-graph reads but does not define is looked up in the enclosing
// scopes and becomes an outer input of the sub-graph (ir::Graph::add_outer_input), bound by
// name when the sub-graph runs. Ops of the ai.onnx.ml domain resolve against that domain's opset.
// ONNX Runtime's contrib ops (com.microsoft, and its LayerNormalization before opset 17) are
// decomposed into standard ops by contrib_ops.cc instead.
// Output types before inference come from graph.value_info / graph.output, else a f32 rank-0
// placeholder that type_known() reports as unknown.
#include "frontend/onnx/importer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include <onnx/onnx-data_pb.h>

#include "frontend/onnx/adapters.h"
#include "frontend/onnx/attributes.h"
#include "frontend/onnx/contrib_ops.h"
#include "frontend/onnx/opset.h"
#include "frontend/onnx/tensor_proto.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::frontend {
namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// "node 'conv1'" ("node #3" when unnamed).
std::string node_who(const onnx::NodeProto& node, int index) {
    return "node " + (node.name().empty() ? "#" + std::to_string(index) : "'" + node.name() + "'");
}
// "node 'conv1' (Conv)"
std::string node_label(const onnx::NodeProto& node, int index) {
    return node_who(node, index) + " (" + node.op_type() + ")";
}

// The symbol of an unknown, unnamed dim of a graph input (no dim_value or dim_param, dim_value
// -1, or dim_param "?"). Each gets its own name: two anonymous dims need not be equal (the session
// binds dims by name, and a cls model's [-1,3,?,?] runs at 48x192), and `--dim` can still set it.
std::string anonymous_dim_name(const std::string& input, int axis) {
    return "unk__" + input + "_" + std::to_string(axis);
}

// Tensor type of a ValueInfo. strict: errors name `name`; lenient: nullopt on anything odd.
std::optional<ir::TensorType> type_from_proto(const onnx::ValueInfoProto& vi, bool strict) {
    const std::string& name = vi.name();
    if (!vi.has_type()) {
        KILN_CHECK(!strict, kInvalidModel) << "graph input '" << name << "' has no type";
        return std::nullopt;
    }
    const onnx::TypeProto& tp = vi.type();
    if (!tp.has_tensor_type()) {
        std::optional<ir::TensorType> t = type_from_type_proto(tp, /*allow_unknown_shape=*/true);
        KILN_CHECK(t.has_value() || !strict, kUnsupported)
            << "graph input '" << name << "' has a type Kiln does not support (maps, sparse tensors, nested sequences)";
        return t;
    }
    const auto& tt = tp.tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (!dt) {
        KILN_CHECK(!strict, kUnsupported) << "graph input '" << name << "' has element type "
                                          << onnx_type_name(tt.elem_type()) << ", which Kiln does not support";
        return std::nullopt;
    }
    if (!tt.has_shape()) {
        KILN_CHECK(!strict, kUnsupported) << "graph input '" << name << "' has no shape (unknown rank is not supported)";
        return std::nullopt;
    }
    ir::TensorType t;
    t.dtype = *dt;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() >= 0) {
            t.shape.emplace_back(d.dim_value());
            continue;
        }
        // NOTE: -1 (the "dynamic" dim of paddle2onnx and older exporters) is not valid ONNX, but
        // ONNX Runtime reads it as unknown; so do we. -2 and below are still errors.
        KILN_CHECK(!d.has_dim_value() || d.dim_value() == -1 || !strict, kInvalidModel)
            << "graph input '" << name << "' has negative dimension " << d.dim_value() << " at axis " << i
            << " (only -1, read as an unknown dimension, is accepted)";
        if (d.has_dim_value() && d.dim_value() != -1) return std::nullopt;
        const bool named = d.has_dim_param() && !d.dim_param().empty() && d.dim_param() != "?";
        t.shape.push_back(ir::Dim::sym(named ? d.dim_param() : anonymous_dim_name(name, i)));
    }
    return t;
}

class Importer {
public:
    Importer(onnx::ModelProto& model, std::string base_dir) : model_(model), base_dir_(std::move(base_dir)) {}

    ir::Graph run() {
        KILN_CHECK(model_.has_graph(), kInvalidModel) << "the model has no graph";
        const onnx::GraphProto& gp = model_.graph();
        if (!gp.name().empty()) g_.name = gp.name();
        read_opset();
        collect_names(gp);
        import_initializers(gp);
        import_inputs(gp);
        import_body(gp);
        return std::move(g_);
    }

private:
    /// A child importer for a sub-graph of a node of `parent`.
    Importer(Importer& parent) : model_(parent.model_), base_dir_(parent.base_dir_), parent_(&parent) {
        opset_ = parent.opset_;
        domain_opsets_ = parent.domain_opsets_;
    }

    ir::GraphAttr import_subgraph(const onnx::GraphProto& gp, const std::string& attr_name) {
        Importer child(*this);
        child.g_.name = gp.name().empty() ? attr_name : gp.name();
        child.collect_names(gp);
        for (const onnx::TensorProto& t : gp.initializer()) {
            KILN_CHECK(!t.name().empty(), kInvalidModel) << "an initializer of sub-graph '" << child.g_.name << "' has no name";
            Tensor data = tensor_from_proto(t, base_dir_, "initializer '" + t.name() + "'");
            child.define(t.name(), child.g_.add_constant(t.name(), std::move(data)), true);
        }
        for (const auto& vi : gp.input()) {
            KILN_CHECK(!vi.name().empty(), kInvalidModel) << "an input of sub-graph '" << child.g_.name << "' has no name";
            if (child.env_.count(vi.name())) continue;  // an initializer
            // Sub-graph inputs often leave shapes (even types) open: they are bound at run time.
            std::optional<ir::TensorType> t =
                vi.has_type() ? type_from_type_proto(vi.type(), /*allow_unknown_shape=*/true) : std::nullopt;
            KILN_CHECK(!vi.has_type() || t.has_value(), kUnsupported)
                << "input '" << vi.name() << "' of sub-graph '" << child.g_.name << "' has a type Kiln does not support";
            child.define(vi.name(), child.g_.add_input(vi.name(), t.value_or(ir::TensorType())), t.has_value());
        }
        child.import_body(gp);
        return std::make_shared<const ir::Graph>(std::move(child.g_));
    }

    // Looks `name` up in the enclosing scopes; nullptr if no scope defines it.
    ir::Value* find_outer(const std::string& name) {
        for (Importer* s = parent_; s; s = s->parent_) {
            auto it = s->env_.find(name);
            if (it != s->env_.end()) return it->second;
        }
        return nullptr;
    }

    void import_body(const onnx::GraphProto& gp) {
        for (int i = 0; i < gp.node_size(); ++i) {
            const onnx::NodeProto& node = gp.node(i);
            try {
                import_node(node, i);
            } catch (Error& e) {
                e.add_context("while importing " + node_label(node, i));
                throw;
            }
        }
        import_outputs(gp);
    }

    void read_opset() {
        for (const auto& os : model_.opset_import()) {
            int v = static_cast<int>(std::clamp<int64_t>(os.version(), 0, 1 << 20));
            if (is_default_domain(os.domain()))
                opset_ = v;
            else
                domain_opsets_[os.domain()] = v;
        }
        KILN_CHECK(opset_ > 0 || !domain_opsets_.empty(), kInvalidModel)
            << "the model declares no (valid) opset for the default domain 'ai.onnx' in opset_import";
    }

    // Every name the model uses, so names Kiln makes up never collide with a later one.
    void collect_names(const onnx::GraphProto& gp) {
        for (const auto& v : gp.input()) reserved_.insert(v.name());
        for (const auto& t : gp.initializer()) reserved_.insert(t.name());
        for (const auto& n : gp.node())
            for (const auto& o : n.output()) reserved_.insert(o);
        for (const auto& v : gp.value_info()) declared_.emplace(v.name(), &v);
        for (const auto& v : gp.output()) declared_.emplace(v.name(), &v);
    }

    std::string fresh_name(const std::string& hint) {
        std::string base = hint.empty() ? "v" : hint;
        for (int i = 0;; ++i) {
            std::string n = i == 0 ? base : base + "_" + std::to_string(i);
            if (!reserved_.count(n) && !g_.find_value(n)) {
                reserved_.insert(n);
                return n;
            }
        }
    }

    void define(const std::string& name, ir::Value* v, bool typed) {
        KILN_CHECK(!env_.count(name), kInvalidModel) << "value '" << name << "' is defined twice";
        env_[name] = v;
        if (typed) typed_.insert(v);
    }

    void import_initializers(const onnx::GraphProto& gp) {
        KILN_CHECK(gp.sparse_initializer_size() == 0, kUnsupported) << "sparse initializers are not supported";
        KILN_ICHECK(&gp == &model_.graph()) << "initializers are imported from the model's own graph";
        for (onnx::TensorProto& t : *model_.mutable_graph()->mutable_initializer()) {
            KILN_CHECK(!t.name().empty(), kInvalidModel) << "an initializer has no name";
            KILN_CHECK(!env_.count(t.name()), kInvalidModel) << "initializer '" << t.name() << "' is defined twice";
            Tensor data = tensor_from_proto(t, base_dir_, "initializer '" + t.name() + "'");
            define(t.name(), g_.add_constant(t.name(), std::move(data)), true);
            // The weights now live in `data`: free the proto's copy so import peaks at ~1x the weights.
            if (t.has_raw_data()) std::string().swap(*t.mutable_raw_data());
        }
    }

    void import_inputs(const onnx::GraphProto& gp) {
        for (const auto& vi : gp.input()) {
            KILN_CHECK(!vi.name().empty(), kInvalidModel) << "a graph input has no name";
            if (env_.count(vi.name()) && env_[vi.name()]->is_constant()) continue;  // initializer
            std::optional<ir::TensorType> t = type_from_proto(vi, /*strict=*/true);
            KILN_CHECK(!env_.count(vi.name()), kInvalidModel) << "graph input '" << vi.name() << "' is listed twice";
            define(vi.name(), g_.add_input(vi.name(), *t), true);
        }
    }

    ir::Value* lookup_input(const onnx::NodeProto& node, int index, const std::string& name) {
        auto it = env_.find(name);
        if (it != env_.end()) return it->second;
        ir::Value* outer = find_outer(name);
        KILN_CHECK(outer != nullptr, kInvalidModel)
            << node_label(node, index) << " reads '" << name << "', which is not defined before it";
        ir::Value* v = g_.add_outer_input(name, outer->type());
        define(name, v, typed_in_scope(outer));
        return v;
    }

    bool typed_in_scope(const ir::Value* v) const {
        for (const Importer* s = this; s; s = s->parent_)
            if (s->typed_.count(v)) return true;
        return false;
    }

    void import_constant_node(const onnx::NodeProto& node, int index) {
        const std::string where = node_label(node, index);
        KILN_CHECK(node.output_size() == 1 && !node.output(0).empty(), kInvalidModel)
            << where << ": a Constant node must have exactly one output";
        KILN_CHECK(node.attribute_size() == 1, kInvalidModel)
            << where << ": a Constant node must have exactly one attribute, got " << node.attribute_size();
        const onnx::AttributeProto& a = node.attribute(0);
        const std::string& key = a.name();
        KILN_CHECK(key != "sparse_value", kUnsupported) << where << ": Constant '" << key << "' is not supported";
        ir::Attr v = attr_from_proto(a, base_dir_, where);
        Tensor t;
        auto expect = [&](bool ok) {
            KILN_CHECK(ok, kInvalidModel) << where << ": Constant attribute '" << key << "' has kind " << ir::attr_kind_name(v);
        };
        if (key == "value") {
            expect(std::holds_alternative<Tensor>(v));
            t = std::get<Tensor>(v);
        } else if (key == "value_float") {
            expect(std::holds_alternative<double>(v));
            t = Tensor(DType::kFloat32, {});
            t.set_f64(0, std::get<double>(v));
        } else if (key == "value_int") {
            expect(std::holds_alternative<int64_t>(v));
            t = Tensor(DType::kInt64, {});
            t.set_i64(0, std::get<int64_t>(v));
        } else if (key == "value_floats") {
            expect(std::holds_alternative<std::vector<double>>(v));
            const auto& fs = std::get<std::vector<double>>(v);
            t = Tensor(DType::kFloat32, {static_cast<int64_t>(fs.size())});
            for (size_t i = 0; i < fs.size(); ++i) t.set_f64(static_cast<int64_t>(i), fs[i]);
        } else if (key == "value_string") {
            expect(std::holds_alternative<std::string>(v));
            t = Tensor(DType::kString, {});
            t.data_as<std::string>()[0] = std::get<std::string>(v);
        } else if (key == "value_strings") {
            expect(std::holds_alternative<std::vector<std::string>>(v));
            const auto& ss = std::get<std::vector<std::string>>(v);
            t = Tensor(DType::kString, {static_cast<int64_t>(ss.size())});
            for (size_t i = 0; i < ss.size(); ++i) t.data_as<std::string>()[i] = ss[i];
        } else if (key == "value_ints") {
            expect(std::holds_alternative<std::vector<int64_t>>(v));
            const auto& is = std::get<std::vector<int64_t>>(v);
            t = Tensor(DType::kInt64, {static_cast<int64_t>(is.size())});
            for (size_t i = 0; i < is.size(); ++i) t.set_i64(static_cast<int64_t>(i), is[i]);
        } else {
            KILN_THROW(kInvalidModel) << where << ": unknown Constant attribute '" << key << "'";
        }
        const std::string& out = node.output(0);
        KILN_CHECK(!env_.count(out), kInvalidModel) << "value '" << out << "' is defined twice";
        define(out, g_.add_constant(out, std::move(t)), true);
    }

    const op::OpDef& resolve_op(const onnx::NodeProto& node, int index) {
        const std::string& op = node.op_type();
        const bool default_domain = is_default_domain(node.domain());
        int opset = opset_;
        if (!default_domain) {
            auto it = domain_opsets_.find(node.domain());
            KILN_CHECK(it != domain_opsets_.end(), kInvalidModel)
                << node_label(node, index) << " uses domain '" << node.domain() << "', which opset_import does not declare";
            opset = it->second;
        } else {
            KILN_CHECK(opset_ > 0, kInvalidModel) << node_label(node, index)
                                                  << " is an ai.onnx op, but opset_import declares no ai.onnx opset";
        }
        const op::OpDef* def = op::OpRegistry::global().find(op);
        const std::string domain_name = default_domain ? "ai.onnx" : node.domain();
        KILN_CHECK(def != nullptr && !def->internal && def->domain == (default_domain ? "" : node.domain()),
                   kUnsupported)
            << "unsupported op '" << op << "' (" << node_who(node, index) << ", "
            << (default_domain ? "" : "domain " + domain_name + " ") << "opset " << opset << ")"
            << (def && def->internal ? ": a Kiln-internal op, not an ONNX op" : "");
        select_since_version(*def, opset);
        return *def;
    }

    void import_node(const onnx::NodeProto& node, int index) {
        if (node.op_type() == "Constant" && is_default_domain(node.domain())) return import_constant_node(node, index);
        if (is_contrib_node(node.op_type(), node.domain(), opset_)) return import_contrib(node, index);
        const op::OpDef& def = resolve_op(node, index);
        const std::string where = node_label(node, index);

        PendingNode p;
        p.op = node.op_type();
        p.name = node.name();
        for (const std::string& in : node.input()) p.inputs.push_back(in.empty() ? nullptr : lookup_input(node, index, in));
        while (!p.inputs.empty() && p.inputs.back() == nullptr) p.inputs.pop_back();
        p.attrs = attrs_from_node(node, base_dir_, where, [this](const onnx::GraphProto& sub, const std::string& attr) {
            return import_subgraph(sub, attr);
        });
        coerce_attrs_to_schema(p.attrs, def);
        // Only trailing outputs can be omitted; an empty name in the middle is an unused value.
        size_t n_out = node.output_size();
        while (n_out > static_cast<size_t>(std::max(def.min_outputs, 1)) && node.output(n_out - 1).empty()) --n_out;
        for (size_t i = 0; i < n_out; ++i) p.output_names.push_back(node.output(static_cast<int>(i)));
        p.output_types.resize(n_out);

        AdapterContext ctx{g_, opset_, [this](PendingNode n) { return emit(std::move(n)); },
                           [this](const ir::Value* v) { return typed_.count(v) != 0; },
                           [this](const std::string& h) { return fresh_name(h); }};
        adapt_node(p, def, ctx);
        emit(std::move(p));
    }

    // An ONNX Runtime contrib op: decomposed into standard ops by contrib_ops.cc.
    void import_contrib(const onnx::NodeProto& node, int index) {
        KILN_CHECK(is_default_domain(node.domain()) || domain_opsets_.count(node.domain()), kInvalidModel)
            << node_label(node, index) << " uses domain '" << node.domain() << "', which opset_import does not declare";
        PendingNode p;
        p.op = node.op_type();
        p.name = node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
        for (const std::string& in : node.input()) p.inputs.push_back(in.empty() ? nullptr : lookup_input(node, index, in));
        while (!p.inputs.empty() && p.inputs.back() == nullptr) p.inputs.pop_back();
        p.attrs = attrs_from_node(node, base_dir_, node_label(node, index));
        for (const std::string& out : node.output()) p.output_names.push_back(out);
        while (!p.output_names.empty() && p.output_names.back().empty()) p.output_names.pop_back();
        AdapterContext ctx{g_, opset_, [this](PendingNode n) { return emit(std::move(n)); },
                           [this](const ir::Value* v) { return typed_.count(v) != 0; },
                           [this](const std::string& h) { return fresh_name(h); }};
        import_contrib_node(p, ctx);
    }

    // Validates `p` against its OpDef, appends it and infers its output types.
    ir::Node* emit(PendingNode p) {
        const op::OpDef* def = op::OpRegistry::global().find(p.op);
        KILN_CHECK(def != nullptr, kUnsupported) << "unsupported op '" << p.op << "' (needed to import node '" << p.name << "')";
        std::vector<bool> declared(p.output_names.size(), false);
        p.output_types.resize(p.output_names.size());
        for (size_t i = 0; i < p.output_names.size(); ++i) {
            std::string& name = p.output_names[i];
            if (name.empty()) {
                name = fresh_name((p.name.empty() ? p.op : p.name) + "_unused" + std::to_string(i));
                continue;
            }
            KILN_CHECK(!env_.count(name), kInvalidModel) << "value '" << name << "' is defined twice";
            auto it = declared_.find(name);
            if (it == declared_.end()) continue;
            if (auto t = type_from_proto(*it->second, /*strict=*/false)) {
                p.output_types[i] = *t;
                declared[i] = true;
            }
        }
        ir::Node* node = g_.add_node(p.op, p.inputs, std::move(p.attrs), p.output_types, p.output_names, p.name);
        op::check_node(*node, *def);
        // NOTE: inference over an input whose type is the rank-0 placeholder "succeeds" with a
        // wrong type (Add(unknown, bias[6625]) would be rank 1), which adapters would then trust;
        // so a node with an unknown input keeps provisional, unknown output types. (Constants an
        // adapter adds are typed by their data.)
        bool inputs_typed = true;
        for (const ir::Value* in : node->inputs()) inputs_typed &= in == nullptr || in->is_constant() || typed_.count(in) != 0;
        bool inferred = false;
        try {
            if (inputs_typed) {
                op::infer_node(*node);
                inferred = true;
            }
        } catch (const Error&) {
            // Provisional types stay; compile() re-infers and reports the error there.
        }
        for (size_t i = 0; i < node->num_outputs(); ++i) {
            ir::Value* v = node->output(i);
            // The model's declaration decides what kind of value this is (a Loop output may be a
            // sequence where inference could not tell).
            if (declared[i] && p.output_types[i].kind != v->type().kind) v->set_type(p.output_types[i]);
            define(v->name(), v, inferred || declared[i]);
        }
        return node;
    }

    void import_outputs(const onnx::GraphProto& gp) {
        KILN_CHECK(gp.output_size() > 0, kInvalidModel) << "graph '" << g_.name << "' has no outputs";
        for (const auto& vi : gp.output()) {
            auto it = env_.find(vi.name());
            ir::Value* v = it != env_.end() ? it->second : nullptr;
            if (ir::Value* outer = v ? nullptr : find_outer(vi.name())) {  // a sub-graph passing an outer value through
                v = g_.add_outer_input(vi.name(), outer->type());
                define(vi.name(), v, true);
            }
            KILN_CHECK(v != nullptr, kInvalidModel) << "graph output '" << vi.name() << "' is not defined by any node";
            g_.add_output(v);
        }
    }

    onnx::ModelProto& model_;  // initializer payloads are released as they are converted
    std::string base_dir_;
    Importer* parent_ = nullptr;  // the enclosing scope's importer, for a sub-graph
    ir::Graph g_;
    int opset_ = -1;
    std::unordered_map<std::string, int> domain_opsets_;  // ai.onnx.ml, ...
    std::unordered_map<std::string, ir::Value*> env_;
    std::unordered_set<const ir::Value*> typed_;
    std::unordered_set<std::string> reserved_;
    std::unordered_map<std::string, const onnx::ValueInfoProto*> declared_;
};

std::string parent_dir(const std::string& path) {
    std::string d = std::filesystem::path(path).parent_path().string();
    return d.empty() ? "." : d;
}

ir::Graph import_model_bytes(const std::string& bytes, const std::string& display_name, const std::string& base_dir) {
    onnx::ModelProto model;
    KILN_CHECK(model.ParseFromString(bytes), kInvalidModel) << "could not parse '" << display_name << "' as an ONNX model";
    return Importer(model, base_dir).run();
}

ModelFacts model_facts(const onnx::ModelProto& m) {
    ModelFacts f;
    auto put = [&](const std::string& key, const std::string& value) {
        if (!value.empty()) f[key] = value;
    };
    put("producer_name", m.producer_name());
    put("producer_version", m.producer_version());
    put("domain", m.domain());
    if (m.has_model_version()) put("model_version", std::to_string(m.model_version()));
    put("doc_string", m.doc_string());
    put("graph_name", m.graph().name());
    put("graph_doc_string", m.graph().doc_string());
    std::string opsets;
    for (const onnx::OperatorSetIdProto& o : m.opset_import())
        opsets += (opsets.empty() ? "" : ",") + (o.domain().empty() ? std::string("ai.onnx") : o.domain()) + ":" +
                  std::to_string(o.version());
    put("opset_import", opsets);
    for (const onnx::StringStringEntryProto& e : m.metadata_props()) put("metadata." + e.key(), e.value());
    return f;
}

/// Parses straight from the file (no second copy of the bytes in memory).
ir::Graph import_model_file(const std::string& path, ModelFacts* facts) {
    KILN_CHECK(std::filesystem::is_regular_file(path), kIOError) << "cannot open '" << path << "': no such file";
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in.good(), kIOError) << "cannot open '" << path << "' for reading";
    onnx::ModelProto model;
    KILN_CHECK(model.ParseFromIstream(&in), kInvalidModel) << "could not parse '" << path << "' as an ONNX model";
    if (facts) *facts = model_facts(model);
    return Importer(model, parent_dir(path)).run();
}


}  // namespace

ir::Graph import_onnx_file(const std::string& path) { return import_model_file(path, nullptr); }

ir::Graph import_onnx_file(const std::string& path, ModelFacts* facts) { return import_model_file(path, facts); }

ir::Graph import_onnx_bytes(const std::string& bytes, const std::string& base_dir) {
    return import_model_bytes(bytes, "<bytes>", base_dir);
}

Tensor read_tensor_proto_file(const std::string& path) {
    std::string bytes = read_file_bytes(path);
    onnx::TensorProto proto;
    KILN_CHECK(proto.ParseFromString(bytes), kInvalidModel) << "could not parse '" << path << "' as an ONNX TensorProto";
    return tensor_from_proto(proto, parent_dir(path), "tensor '" + (proto.name().empty() ? path : proto.name()) + "'");
}

namespace {

Datum sequence_from_proto(const onnx::SequenceProto& seq, DType elem, const std::string& base_dir,
                          const std::string& what) {
    KILN_CHECK(seq.elem_type() == onnx::SequenceProto::TENSOR || seq.tensor_values_size() > 0 ||
                   seq.elem_type() == onnx::SequenceProto::UNDEFINED,
               kUnsupported)
        << what << ": only sequences of tensors are supported (elem_type " << seq.elem_type() << ")";
    std::vector<Tensor> items;
    for (int i = 0; i < seq.tensor_values_size(); ++i)
        items.push_back(tensor_from_proto(seq.tensor_values(i), base_dir, what + " item " + std::to_string(i)));
    if (!items.empty()) elem = items.front().dtype();
    return Datum::sequence(elem, std::move(items));
}

}  // namespace

Datum read_value_proto_file(const std::string& path, const ir::TensorType& type) {
    if (type.is_tensor()) return read_tensor_proto_file(path);
    std::string bytes = read_file_bytes(path);
    const std::string what = "'" + path + "'";
    const std::string dir = parent_dir(path);
    if (type.kind == ir::TypeKind::kSequence) {
        onnx::SequenceProto seq;
        KILN_CHECK(seq.ParseFromString(bytes), kInvalidModel) << "could not parse " << what << " as an ONNX SequenceProto";
        return sequence_from_proto(seq, type.dtype, dir, what);
    }
    onnx::OptionalProto opt;
    KILN_CHECK(opt.ParseFromString(bytes), kInvalidModel) << "could not parse " << what << " as an ONNX OptionalProto";
    if (opt.has_tensor_value()) return tensor_from_proto(opt.tensor_value(), dir, what);
    if (opt.has_sequence_value()) return sequence_from_proto(opt.sequence_value(), type.dtype, dir, what);
    KILN_CHECK(!opt.has_map_value() && !opt.has_sparse_tensor_value() && !opt.has_optional_value(), kUnsupported)
        << what << ": only optionals of tensors and sequences are supported";
    return Datum::none();
}

}  // namespace kiln::frontend
