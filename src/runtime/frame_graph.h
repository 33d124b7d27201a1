// FrameGraph: the static structure the frames executor (frame_executor.h) runs an Executable
// with: each step's kind (kernel or TF1 control primitive) and frame, who reads each buffer, how
// many dynamic inputs each step waits for, and each frame's parent, Enters, Exits and limits.
//
// A step's frame follows from its inputs: a step reads only values of its own frame (a value
// crosses into a child frame only through Enter and out of it only through Exit); a step with no
// dynamic input (only graph inputs and constants) is in the root frame (0). A loop's Merge has
// one IR input (its Enter); the NextIteration with the same frame and slot is its back edge.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/executable.h"
#include "support/status.h"

namespace kiln::runtime {

enum class StepKind { kKernel, kCopy, kEnter, kExit, kSwitch, kMerge, kNextIteration };

struct FrameInfo {
    std::string name;  // "" for the root
    int parent = -1;
    int parallel_iterations = 1;
    int64_t max_iterations = 0;  // 0: no bound
    int num_enters = 0;          // Enter steps into this frame (each fires once per parent iteration)
    std::vector<int> exits;      // Exit steps out of it
};

struct FrameGraph {
    std::vector<StepKind> kind;   // per step
    std::vector<int> frame;       // per step: the frame it runs in
    std::vector<int> pending;     // per step: dynamic input slots (Merge: arrivals per iteration)
    std::vector<int> child;       // per step: Enter -> the frame it enters, else -1
    std::vector<bool> constant;   // per step: an Enter of a loop invariant
    std::vector<int> merge;       // per step: NextIteration -> its Merge step, else -1
    std::vector<int> exit_index;  // per step: Exit -> its index in its frame's exits, else -1
    /// Per buffer: (step, input slot) of every read by a step.
    std::vector<std::vector<std::pair<int, int>>> readers;
    std::vector<int> producer;  // per buffer: the step writing it, -1 for inputs and constants
    std::vector<int> reads;     // per buffer: reads by steps other than Merge (which reads nothing stored)
    std::vector<FrameInfo> frames;
    std::vector<int> roots;  // steps of the root frame with no dynamic input
};

/// Builds the frame graph of `exe`, or a kInvalidArgument Status naming the node for a value
/// read in the wrong frame, an Exit out of the root, a NextIteration with no Merge, or a
/// control step with the wrong number of args.
Status build_frame_graph(const Executable& exe, FrameGraph& fg);

}  // namespace kiln::runtime
