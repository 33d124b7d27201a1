#include "pass/pass_manager.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "pass/verify_typed.h"
#include "support/error.h"

namespace kiln::pass {

bool PassManagerOptions::default_verify_each() {
    if (const char* v = std::getenv("KILN_VERIFY_PASSES")) return std::string(v) == "1";
#ifdef NDEBUG
    return false;
#else
    return true;
#endif
}

std::vector<PassRecord> run_passes(ir::Graph& g, const std::vector<Pass>& passes, const PassContext& ctx,
                                   const PassManagerOptions& opts) {
    std::vector<PassRecord> records;
    for (const Pass& p : passes) {
        PassRecord r;
        r.name = p.name;
        r.nodes_before = g.num_nodes();
        auto t0 = std::chrono::steady_clock::now();
        try {
            r.changed = p.run(g, ctx);
        } catch (Error& e) {
            e.add_context("in pass " + p.name);
            throw;
        }
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.nodes_after = g.num_nodes();
        if (opts.verify_each) {
            try {
                verify_typed_graph(g);
            } catch (Error& e) {
                e.add_context("verifying the graph after pass " + p.name);
                throw;
            }
        }
        if (opts.print && (opts.print_after_all || opts.print_after.count(p.name) || opts.print_after.count("*")))
            opts.print(p.name, g);
        records.push_back(std::move(r));
    }
    if (const char* t = std::getenv("KILN_TIME_PASSES"); t && std::string(t) == "1")
        std::fprintf(stderr, "%s", pass_records_str(records).c_str());
    return records;
}

std::string pass_records_str(const std::vector<PassRecord>& records) {
    std::ostringstream os;
    char line[160];
    std::snprintf(line, sizeof line, "%-32s %8s %8s %10s\n", "pass", "nodes in", "out", "ms");
    os << line;
    double total = 0;
    for (const PassRecord& r : records) {
        std::snprintf(line, sizeof line, "%-32s %8zu %8zu %10.3f\n", r.name.c_str(), r.nodes_before, r.nodes_after,
                      r.seconds * 1e3);
        os << line;
        total += r.seconds;
    }
    std::snprintf(line, sizeof line, "%-32s %8s %8s %10.3f\n", "total", "", "", total * 1e3);
    os << line;
    return os.str();
}

}  // namespace kiln::pass
