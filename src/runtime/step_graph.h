// StepGraph: the dependencies between an Executable's steps, from the buffers they read and
// write, and the graph's parallel width (how many steps could run at once).
#pragma once

#include <vector>

#include "runtime/executable.h"

namespace kiln::runtime {

struct StepGraph {
    /// consumers[s]: the steps that must wait for s (each listed once).
    std::vector<std::vector<int>> consumers;
    /// num_deps[s]: how many steps s waits for.
    std::vector<int> num_deps;
    /// Steps with no dependencies, in static order.
    std::vector<int> roots;
    /// level[s]: length of the longest dependency chain ending at s (roots: 0).
    std::vector<int> level;
};

/// Builds the dependencies that keep every run equivalent to the static order: a step waits for
/// the last writer of each buffer it reads or writes (read-after-write, write-after-write) and
/// for the readers of each buffer it writes since that buffer's last write (write-after-read).
/// Args past StepDesc::num_inputs are writes; with num_inputs == -1 every arg is both. The
/// writer of a donated output (Executable::donations) also waits for its input's readers.
StepGraph build_step_graph(const Executable& exe);

/// The most steps at one dependency level whose StepDesc::flops is at least min_flops: an
/// estimate of the largest set of substantial steps that may run concurrently.
int parallel_width(const Executable& exe, const StepGraph& g, double min_flops);

}  // namespace kiln::runtime
