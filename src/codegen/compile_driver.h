// The compile driver: C source -> shared library through the system compiler, with a
// content-addressed on-disk cache. The key hashes the source, the compiler's identity and the
// flags; a hit compiles nothing.
//
// Cache directory: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
// Layout: <cache>/<first two hex digits of key>/<key>.so with <key>.c kept beside it.
// Compiler: $KILN_CC (may hold extra words, e.g. "ccache gcc"), else cc.
// Flags: -O3 -march=native -fPIC -shared -std=gnu11 -fwrapv -fno-math-errno -ffp-contract=fast
// -fno-trapping-math
// (FMA contraction, no -ffast-math: compiled float kernels match the tir interpreter within a
// rounding tolerance; integer kernels match exactly).
//
// A kernel library (compile_c_library, the one library of a compiled artifact) holds many
// kernels: each source becomes an object (<key>.o, the same flags with -c instead of -shared)
// whose `kiln_kernel` is renamed by -Dkiln_kernel=<symbol>, and the objects are linked with
// -shared into <key>.so (keyed by its objects). Both steps are cached, so a second build of
// the same model's library runs no compiler at all. Kernels missing from the cache compile as a
// few units of several kernels each when there are more than compiler processes
// (kernel_units.h), for both kinds of build. Within a process one compiler runs per output: a
// second request for an output being compiled waits for it.
#pragma once

#include <cstdint>
#include <exception>
#include <future>
#include <string>
#include <vector>

namespace kiln::codegen {

struct CompiledLibrary {
    std::string path;     // the .so in the cache
    bool from_cache = false;
};

std::string cache_dir();

/// The compiler processes a build runs at once: `jobs`, or the number of cores when it is 0.
int compile_processes(int jobs);

/// Compiles (or finds in the cache) one translation unit. Throws kCompileError with the
/// compiler's diagnostics (and the path of the kept source) on failure.
CompiledLibrary compile_c(const std::string& source);

/// Compiles several sources, up to `jobs` compiler processes at once (0 = number of cores).
/// Identical sources are compiled once. Throws the first failure (in source order).
std::vector<CompiledLibrary> compile_c_many(const std::vector<std::string>& sources, int jobs = 0);

/// One source's outcome in compile_c_each: its library, or the compile error's message.
struct CompileOutcome {
    CompiledLibrary library;
    std::string error;  // empty on success
    std::exception_ptr exception;  // the failure itself (compile_c_many rethrows it)
};
/// compile_c_many that records each source's failure instead of throwing (the tuner's candidates).
std::vector<CompileOutcome> compile_c_each(const std::vector<std::string>& sources, int jobs = 0);

/// Where one kernel was built: the loadable library and the symbol its kernel has there.
struct KernelBuild {
    CompiledLibrary library;
    std::string symbol;
    std::exception_ptr exception;  // the build's failure (never set in what compile_c_kernels returns)
};

/// How hard the compiler optimizes a build: kHot at -O3 (compile_c's flags: the model's kernels),
/// kRunsOnce at -O1 for code that runs once per load (constant folds: a weight transpose compiles
/// 2-4x faster and still runs in a fraction of a millisecond), kQuick at -O1 with the vectorizer
/// and FMA contraction, the schedule's unrolled loops left rolled (-DKILN_QUICK_TIER): the first
/// tier of a tiered compile (compiler/kernel_upgrade.h; PP-OCRv4's recogniser: its units about
/// 0.5x kHot's compile time, its warm calls about 1.15x kHot's time).
enum class Optimization { kHot, kRunsOnce, kQuick };

/// A loadable library per kernel source, as compile_c_many builds them (symbol `kiln_kernel`),
/// except for kernels missing from the cache when more are missing than `jobs` (0 = cores):
/// those are compiled a few to a library (kernel_units.h: one compiler process and one prelude
/// per unit), each under its kernel_library_symbol. Identical sources are built once. Throws
/// the first failure (in source order), naming the failing kernel's own source.
std::vector<KernelBuild> compile_c_kernels(const std::vector<std::string>& sources, int jobs = 0,
                                           Optimization opt = Optimization::kHot);

/// How many of the distinct kernels of `sources` compile_c_kernels(sources, jobs, opt) would
/// compile: those neither in the cache alone nor in a cached unit of the same kernels.
size_t kernels_to_compile(const std::vector<std::string>& sources, int jobs = 0, Optimization opt = Optimization::kHot);

/// Starts, on a thread of its own, what the first build of a process asks the compiler before it
/// compiles anything: its identity (`cc --version`, part of every cache key) and the host's
/// vector-width flags (`cc -Q --help=target`), about 30 ms in all, so they overlap the caller's own
/// work (compiler::compile starts it before the graph passes). A build that needs them meanwhile
/// waits for them. The first call in the process returns the thread's future, whose destructor
/// waits for it (std::async); later calls return an empty future. Failures are left to the build.
std::future<void> start_compiler_probes();

/// The instruction-set flags of a kernel library (compile_c_library: what a compiled artifact
/// embeds). On x86-64: the baseline plus exactly the features runtime::host_cpu_features() names
/// on this host (-mtune=native keeps the scheduling), so the feature list an artifact records
/// covers every instruction its kernels may use. -march=native would also enable features the
/// runtime does not check (ADX, SHA, VBMI2, ...): an artifact would load on a CPU lacking one and
/// die of SIGILL. Other architectures: -march=native.
std::vector<std::string> library_isa_flags();

/// One shared library exporting many kernels.
struct KernelLibrary {
    std::string path;                  // the linked .so in the cache
    std::vector<std::string> symbols;  // per source given: the name its kernel is exported under
    std::vector<bool> cached;          // per source given: its object came from the cache
    int objects_compiled = 0;          // objects built by this call (the rest came from the cache)
    bool from_cache = false;           // the linked library itself was in the cache
};

/// The symbol compile_c_library exports `source`'s kernel under: "kiln_kernel_" and 16 hex digits
/// of the source's hash (identical sources share one symbol; a kernel keeps its name, and its
/// cached object, when other kernels of the model change).
std::string kernel_library_symbol(const std::string& source);

/// Builds one shared library from kernel sources (each defines `kiln_kernel` and nothing else
/// external, as the C emitter writes them), up to `jobs` compiler processes at once (0 = cores).
/// Identical sources are compiled once. Throws kCompileError naming the failing source (kept in
/// the cache) or the link step, with the compiler's diagnostics. No sources: a library without
/// kernels.
KernelLibrary compile_c_library(const std::vector<std::string>& sources, int jobs = 0);

/// Process-wide counters of compile_c / compile_c_many results since start.
struct CompileStats {
    uint64_t compiled = 0;  // compiler invocations that produced a library
    uint64_t cached = 0;    // requests answered from the cache
    uint64_t failed = 0;    // compiler invocations that failed
};
CompileStats compile_stats();

}  // namespace kiln::codegen
