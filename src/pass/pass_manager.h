// Runs a pass list over a graph: per-pass timing and node counts, the verifier after every
// pass (when asked: tests and debug builds do), and IR printing after chosen passes.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "pass/pass.h"

namespace kiln::pass {

/// One pass's run.
struct PassRecord {
    std::string name;
    double seconds = 0;
    size_t nodes_before = 0, nodes_after = 0;
    bool changed = false;
};

struct PassManagerOptions {
    /// Run ir::verify_graph after every pass; a failure names the pass. Default: on in debug
    /// builds (NDEBUG unset) or when KILN_VERIFY_PASSES=1.
    bool verify_each = default_verify_each();
    /// Names of passes after which `print` is called ("*" or print_after_all: every pass).
    std::set<std::string> print_after;
    bool print_after_all = false;
    /// Receives (pass name, graph) after each pass selected above.
    std::function<void(const std::string& pass, const ir::Graph& g)> print;

    static bool default_verify_each();
};

/// Runs `passes` in order. Throws kiln::Error with the pass named in its context when a pass
/// fails or leaves a graph the verifier rejects. KILN_TIME_PASSES=1 prints the records to
/// stderr.
std::vector<PassRecord> run_passes(ir::Graph& g, const std::vector<Pass>& passes, const PassContext& ctx,
                                   const PassManagerOptions& opts = {});

/// A table of the records: pass, nodes before -> after, milliseconds.
std::string pass_records_str(const std::vector<PassRecord>& records);

}  // namespace kiln::pass
