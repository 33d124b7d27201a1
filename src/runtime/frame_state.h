// The run-time state of the frames executor (frame_executor.h): frames keyed by (parent frame,
// frame id, parent iteration), each with its live iterations; per iteration, the value of each
// buffer (storage shared by reference, or dead) and each step's remaining input count.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace kiln::runtime {

/// A value in one iteration: storage (nullptr while absent) or dead (an untaken branch).
struct FrameValue {
    std::shared_ptr<void> data;
    bool dead = false;
};

struct Iteration {
    Iteration(int64_t id_, const std::vector<int>& reads, const std::vector<int>& pending_)
        : id(id_),
          values(reads.size()),
          reads_left(reads),
          pending(pending_),
          dead_inputs(pending_.size(), 0),
          merged(pending_.size(), 0) {}
    int64_t id;
    std::vector<FrameValue> values;  // per buffer (those of this frame)
    std::vector<int> reads_left;     // per buffer: steps still to read it (0: its storage is let go)
    std::vector<int> pending;        // per step: inputs still to arrive
    std::vector<int> dead_inputs;    // per step: inputs that arrived dead
    std::vector<char> merged;        // per Merge step: fired in this iteration
    int outstanding = 0;             // kernel steps made ready and not finished
    int child_frames = 0;            // frames entered from this iteration, not yet done
};

struct FrameState {
    int id = 0;  // FrameGraph::frames index
    FrameState* parent = nullptr;
    int64_t parent_iter = 0;
    int pending_enters = 0;  // Enter steps of the parent iteration not yet fired
    int64_t newest = 0;      // highest iteration id started
    int outstanding_iterations = 0;
    std::map<int64_t, std::unique_ptr<Iteration>> iterations;
    std::vector<std::pair<int, FrameValue>> invariants;     // (Enter step, value): every iteration gets them
    std::vector<std::pair<int, FrameValue>> deferred_next;  // (NextIteration step, value) waiting for a slot
    std::vector<char> exit_live;                            // per exit: produced a live value
};

/// Frames of one run by (parent, frame id, parent iteration).
using FrameKey = std::tuple<const FrameState*, int, int64_t>;
using FrameMap = std::map<FrameKey, std::unique_ptr<FrameState>>;

}  // namespace kiln::runtime
