// Shared by the loop-pass tests (partition_loops, unswitch_loops): counting a word in printed
// loop IR, and deterministic test data.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::tir::testing {

/// How often `what` occurs in `s` (printed loop IR: loops, selects, ifs).
inline int count(const std::string& s, const std::string& what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
}

/// Small integers in [-6, 6], no two neighbours equal: element i of a test input.
inline double fill(int64_t i) { return static_cast<double>((i * 7) % 13) - 6.0; }

}  // namespace kiln::tir::testing
