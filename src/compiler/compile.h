// compile(Graph, Options) -> CompiledModel: the pass pipeline with bound dims, per-kernel
// lowering (op compute -> schedule -> tir -> simplify -> C), compilation through the kernel
// cache, and the Executable's buffer and step tables.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "pass/pass_manager.h"
#include "pass/pipeline.h"
#include "compiler/lower_group.h"
#include "runtime/executable.h"
#include "te/schedule_config.h"
#include "topi/dnnl_match.h"

namespace kiln::compiler {

class KernelUpgrade;

/// Who computes convolutions and matrix products (docs/kernels.md): Kiln's generated kernels,
/// oneDNN wherever it can (topi/dnnl_match.h), or a rule per workload (auto).
enum class KernelSource { kAuto, kGenerated, kDnnl };
/// Parses "auto" | "generated" | "dnnl"; kInvalidArgument otherwise.
KernelSource parse_kernel_source(const std::string& s);

struct CompileOptions {
    /// Values for symbolic dimensions ("N" -> 1). Unbound symbolic dims are an error.
    std::map<std::string, int64_t> dims;
    /// Parallel compiler processes (0 = cores).
    int compile_jobs = 0;
    /// The executable will run under the DataflowExecutor: the memory plan must let no two
    /// steps that may run concurrently share memory (sets Executable::planned_for_concurrency).
    bool plan_for_concurrency = false;
    /// The pass pipeline's level, 0..3 (pass/pipeline.h).
    int opt_level = pass::kMaxOptLevel;
    /// Verification and IR printing between passes.
    pass::PassManagerOptions passes;
    /// Generated kernels or oneDNN for conv/matmul units. kDnnl without oneDNN built in is a
    /// kUnsupported error; kAuto then generates everything.
    KernelSource kernels = KernelSource::kAuto;
    /// Tuned knob values per workload (compiler/workload.h key), from a tuning log's best records
    /// (tune/tuning_log.h). The knob "source" picks who computes a conv/matmul unit (0: the
    /// generated kernel, 1: oneDNN) over the `kernels` rule; the others go to the schedules.
    /// A generated setting applies only where its unit lowers in the space it was tuned in.
    std::map<std::string, te::TunedKnobs> tuned;
    /// Build every generated kernel into one shared library (codegen::compile_c_library: what a
    /// compiled artifact embeds) instead of one cached library per kernel; each KernelDesc then
    /// names that library and its kernel's own symbol.
    bool one_library = false;
    /// Called with the finished executable before it loads its kernels (extern kernels keep
    /// pointers into its constants): a session shares equal constants across the executables
    /// of its specializations here (compiler/constant_pool.h).
    std::function<void(runtime::Executable&)> before_load;
    /// Compile once for every value of the symbolic dims not bound in `dims`
    /// (compiler/symbolic_compile.h): kernels take the dims as parameters, the runtime binds
    /// them per run. Generated kernels only. A graph outside the supported subset is a
    /// kUnsupported error saying why (compile it per shape instead).
    bool symbolic = false;
    /// The intra-op threads the executable will run on: kernels=auto reads it (extern_choice).
    int intra_op_threads = 1;
    /// SessionOptions::preemptible: schedules bound the work of one parallel iteration
    /// (te::ScheduleConfig::preemptible).
    bool preemptible = false;
    /// A tiered compile (compiler/kernel_upgrade.h) when more generated kernels miss the cache
    /// than compiler processes run at once: the model first runs on quickly compiled kernels,
    /// CompiledModel::upgrade builds them at -O3 in the background. Not with one_library.
    bool tiered = false;
    /// (graph output, graph input) positions whose input the caller gives up to the output: the
    /// output may be written over the input's memory (compiler/donation.h). The pairs that hold
    /// become Executable::donations; the others keep fresh outputs.
    std::vector<std::pair<int, int>> donate;
};

/// The knob that picks a unit's kernel source in tuned values (0 generated, 1 oneDNN).
inline constexpr const char* kSourceKnob = "source";

struct KernelInfo {
    std::string description;  // ops, e.g. "Conv"
    std::string node_name;
    std::string tir;          // loop IR text
    std::string c_source;
    bool from_cache = false;
    std::string extern_name;  // "dnnl_conv" / "dnnl_matmul" for an extern kernel, else empty
};

struct CompileStats {
    int kernels = 0;
    int compiled = 0;  // compiler invocations (cache misses)
    double seconds = 0;
    int quick = 0;     // generated kernels first built at the quick tier (CompileOptions::tiered)
    int stale_tuned = 0;  // tuned settings not applied: their knob space changed since (CompileOptions::tuned)
};

/// Figures of the static memory plan (bytes), see plan/plan_report.h.
struct MemoryFigures {
    size_t arena = 0;        // the one arena of planned intermediates
    size_t naive_sum = 0;    // one buffer per intermediate
    size_t lower_bound = 0;  // largest total live at one step
    int inplace_steps = 0;   // steps computing their output in place of an input
    int donated = 0;         // outputs written over a donated input (CompileOptions::donate)
    size_t donated_bytes = 0;
    std::string report;      // the text `kiln inspect --memory` prints
};

struct CompiledModel {
    std::shared_ptr<runtime::Executable> executable;
    /// With CompileOptions::one_library: the library holding every generated kernel.
    std::string kernel_library;
    std::vector<KernelInfo> kernels;
    CompileStats stats;
    MemoryFigures memory;
    std::vector<pass::PassRecord> pass_records;
    /// A tiered compile's background -O3 build (null when the kernels were built at -O3): keep it
    /// as long as the executable; its destructor waits for the build.
    std::shared_ptr<KernelUpgrade> upgrade;
};

/// Gives every graph input its static type (symbolic dims from `dims`); kInvalidArgument names
/// an unbound dim.
void bind_input_shapes(ir::Graph& g, const std::map<std::string, int64_t>& dims);

/// The context compile() runs the passes with: folding evaluates through fold_constant_node
/// (the op's compute run by the tir interpreter).
pass::PassContext pass_context();

CompiledModel compile(ir::Graph& g, const CompileOptions& opts = {});

/// compile()'s first step: checks what the graph needs, binds the input dims and runs the pass
/// pipeline in place. The kernel units are then partition_kernels(g).
std::vector<pass::PassRecord> optimize_graph(ir::Graph& g, const CompileOptions& opts);

/// A unit of one reinterpreting node (Reshape, Flatten, ...) that compile() turns into a view of
/// its input's buffer: no kernel runs for it.
bool is_view_unit(const KernelUnit& unit, const ir::Graph& g, int opt_level);

/// compile()'s step before partitioning under kernels=auto|dnnl: a Conv/ConvTranspose/MatMul/Gemm group that
/// oneDNN cannot take whole but whose anchor alone it takes (a training step's ReLU gradient
/// fuses its mask `x > 0` around the data gradient's conv) loses the anchor to a unit of its
/// own: the rest stays one generated elementwise kernel, the anchor runs on oneDNN.
void detach_dnnl_anchors(ir::Graph& g, KernelSource source, int threads = 1);

/// The extern kernel compile() gives `unit` under `source` and the unit's tuned knobs (a
/// "source" knob overrides the rule), or nullopt for a generated kernel. `threads`: the intra-op
/// threads the model will run on (auto keeps a conv generated where oneDNN's split would leave
/// most of them idle).
std::optional<topi::ExternChoice> extern_choice(const KernelUnit& unit, KernelSource source, const te::KnobValues& knobs,
                                                int threads = 1);

}  // namespace kiln::compiler
