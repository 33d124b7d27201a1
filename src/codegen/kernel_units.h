// Kernel units: several generated kernels in one C translation unit.
//
// A cold compile of a model runs the C compiler on tens of kernels. Each run pays the process
// start and the prelude (includes and scalar helpers: about 30 ms of a typical 75 ms kernel at
// -O3), so compile_c_library compiles the kernels missing from the cache as a few units, one per
// compiler process, each holding the prelude once (PP-OCRv4's detector: 35 kernels, 1.55 s of
// wall time on 2 cores as objects, 1.04 s as two units).
//
// A unit is the prelude (with the symbolic-dims part) once, then each kernel's own text (what the
// C emitter prints after its prelude) between #defines that give its file-scope names those of
// its kernel library symbol: `kiln_kernel` and its outlined `kiln_kernel_task<k>` functions with
// their `kiln_kernel_task<k>_ctx` structs, the only names a generated kernel declares at file
// scope (c_emitter.cc). The exported symbols are the ones the kernel's own object would export.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln::codegen {

/// What follows the prelude in a source the C emitter printed for `kiln_kernel`; nullopt when
/// `source` does not start with that header and prelude (it is then compiled on its own).
std::optional<std::string> kernel_body(const std::string& source);

/// One translation unit defining each kernel of `sources` (each accepted by kernel_body) under
/// the matching name of `symbols`.
std::string kernel_unit_source(const std::vector<std::string>& sources, const std::vector<std::string>& symbols);

/// A kernel's expected compile time in arbitrary units at -O3: its length, weighed by the loops
/// the C emitter marked unrolled (GCC's time grows faster than the text there: PP-OCRv4's
/// attention MatMul, 42 KB with 44 unrolled loops, took 0.94 s at -O3, a 22 KB MatMul+Add with 22
/// of them 0.2 s, a 48 KB Softmax without any 0.22 s).
size_t compile_cost(const std::string& source);

/// A kernel's expected compile time in microseconds at a tiered compile's quick tier
/// (Optimization::kQuick: -O1, the vectorizer, unrolled loops left rolled), from its text after
/// the prelude: 7 ms, 1.93 us per character and 0.67 us per character of unrolled_length.
/// Fitted to each kernel of PP-OCR's three models compiled alone (90 kernels, 2-48 KB; root mean
/// square error 5 ms against 15 ms for compile_cost scaled to fit): the quick units of a cold
/// compile then take equal times, so the compiler processes finish together.
size_t quick_compile_cost(const std::string& source);

/// The length of `text` with the body of each loop under KILN_UNROLL(n) counted n times (nested
/// ones multiply): the code GCC would see after unrolling them.
size_t unrolled_length(const std::string& text);

/// Splits kernels of the given costs into at most `units` groups of about equal total cost
/// (largest first, each to the lightest group); returns the groups' indices, each in ascending
/// order, groups ordered by their first index. Deterministic, so the same missing kernels make
/// the same units (and hit the same cached objects) next time.
std::vector<std::vector<size_t>> balance_units(const std::vector<size_t>& costs, size_t units);

}  // namespace kiln::codegen
