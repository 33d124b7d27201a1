// compile_specialization (session_specialization.h): compile() with the session's options, and
// the inspection texts of the result.
#include "compiler/session_specialization.h"

#include <sstream>

#include "compiler/model_compile_options.h"
#include "ir/printer.h"

namespace kiln::compiler {
namespace {

std::string tensor_key(const Tensor& t) {
    std::string s = std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + ":";
    s.append(static_cast<const char*>(t.data()), t.nbytes());
    return s;
}

std::string kernel_list_text(const CompiledModel& m) {
    std::ostringstream list;
    for (size_t i = 0; i < m.kernels.size(); ++i) {
        list << "kernel " << i << ": " << m.kernels[i].description;
        if (!m.kernels[i].node_name.empty()) list << " (node '" << m.kernels[i].node_name << "')";
        if (!m.kernels[i].extern_name.empty()) list << " [" << m.kernels[i].extern_name << "]";
        list << "\n";
    }
    list << m.kernels.size() << " kernels\n";
    return list.str();
}

std::string inspect_text(const CompiledModel& m, const ir::Graph& g, const std::string& after, int opt_level) {
    ir::PrintOptions popts;
    popts.max_constant_elements = 16;
    std::ostringstream os;
    os << after;
    os << "// IR after the -O" << opt_level << " pipeline\n" << ir::print_graph(g, popts) << "\n";
    std::istringstream table(pass::pass_records_str(m.pass_records));
    os << "// passes (nodes before -> after, time)\n";
    for (std::string line; std::getline(table, line);) os << "//   " << line << "\n";
    os << "\n// " << m.kernels.size() << " kernel launches, " << m.stats.kernels << " distinct kernels\n";
    for (size_t i = 0; i < m.kernels.size(); ++i) {
        const KernelInfo& k = m.kernels[i];
        os << "\n// ---- kernel " << i << ": " << k.description;
        if (!k.node_name.empty()) os << " (node '" << k.node_name << "')";
        os << (k.from_cache ? " [cached]" : " [compiled]") << "\n// loop IR:\n";
        std::istringstream tir(k.tir);
        for (std::string line; std::getline(tir, line);) os << "//   " << line << "\n";
        os << k.c_source << "\n";
    }
    return os.str();
}

}  // namespace

std::string specialization_key(const std::map<std::string, int64_t>& dims, const std::map<std::string, Tensor>& frozen) {
    std::ostringstream os;
    for (const auto& [k, v] : dims) os << k << "=" << v << ";";
    for (const auto& [k, t] : frozen) os << k << ":" << tensor_key(t) << ";";
    return os.str();
}

std::shared_ptr<const Specialization> compile_specialization(ir::Graph g, const SessionOptions& opts,
                                                             const std::map<std::string, int64_t>& dims,
                                                             const std::map<std::string, Tensor>& frozen,
                                                             runtime::ModelRunner& runner, ConstantPool& pool,
                                                             bool symbolic) {
    for (const auto& [name, t] : frozen) g.freeze_input(g.find_value(name), t.clone());
    SessionOptions specialized = opts;
    if (!symbolic) specialized.dims = dims;
    CompileOptions copts = compile_options_for(specialized, runner.stats().intra_op_threads);
    copts.symbolic = symbolic;
    copts.plan_for_concurrency = runner.plans_for_concurrency();
    copts.before_load = [&pool](runtime::Executable& exe) { pool.share(exe); };
    std::ostringstream after;
    ir::PrintOptions popts;
    popts.max_constant_elements = 16;
    copts.passes.print = [&](const std::string& name, const ir::Graph& graph) {
        after << "// IR after pass " << name << "\n" << ir::print_graph(graph, popts) << "\n";
    };
    CompiledModel m = compile(g, copts);
    auto s = std::make_shared<Specialization>();
    s->key = symbolic ? kSymbolicKey : specialization_key(dims, frozen);
    s->prepared = runner.prepare(m.executable);
    s->compile = m.stats;
    s->runner = runner.stats(*s->prepared);
    s->memory_report = m.memory.report;
    s->upgrade = m.upgrade;
    s->kernel_list = kernel_list_text(m);
    s->inspect_text = inspect_text(m, g, after.str(), opts.opt_level);
    return s;
}

}  // namespace kiln::compiler
