// What a TrainingSession made by TrainingSession::create offers a caller that runs one of its
// training graphs itself: data-parallel training with synchronized BatchNormalization
// (distributed/sync_batch_norm_gradients.h) builds the gradients graph with global statistics,
// whose collectives the session's single executable cannot run, and runs it cut at them.
#pragma once

#include <map>
#include <string>

#include "autodiff/training_graph.h"
#include "kiln/training.h"

namespace kiln::compiler {

class TrainingGraphSource {
public:
    virtual ~TrainingGraphSource() = default;
    /// Graph `kind` of the session's model (dims bound, types inferred), as the session builds
    /// its own, with BatchNormalization statistics taken from `bn_stats`.
    virtual autodiff::TrainingGraph build_graph(autodiff::TrainingGraphKind kind,
                                                autodiff::BatchNormStatistics bn_stats) const = 0;
    virtual const TrainingOptions& training_options() const = 0;
    /// The BatchNormalization running statistics by name; a caller that ran a training graph
    /// stores the updated ones here.
    virtual std::map<std::string, Tensor>& running_statistics() = 0;
};

/// The source behind `s`, or nullptr when `s` is not a session of TrainingSession::create (a
/// test double).
TrainingGraphSource* training_graph_source(TrainingSession& s);

}  // namespace kiln::compiler
