// The tuner's model-level check: what wins one kernel at a time can lose in the whole model
// (cache state, the neighbours' layouts, thread hand-offs). The model is run untuned and with the
// log's choices, interleaved run by run over several rounds; the tuned choices stay applied only
// when the tuned model's median is faster. Otherwise a "rejected" verdict is appended to the log
// for every workload the tuner changed (tune/tuning_log.h), so later compiles apply the defaults.
#pragma once

#include <string>
#include <vector>

#include "kiln/tune.h"

namespace kiln::compiler {

struct ModelConfirmation {
    bool ran = false;        // false: no workload changed, or the inputs' shapes are unknown
    double untuned_ms = 0;   // medians over every interleaved run
    double tuned_ms = 0;
    bool kept = true;        // the tuned choices stay applied
    std::string note;        // why it did not run, or what was rejected
};

/// Runs the check for the model at `onnx_path` tuned into `report.log_path`; appends rejected
/// verdicts to the log when the tuned model is not faster. `changed` lists the report's
/// workloads whose tuned knobs differ from their defaults.
ModelConfirmation confirm_at_model_level(const std::string& onnx_path, const TuneOptions& opts,
                                         const TuneReport& report, const std::vector<const TunedWorkload*>& changed);

}  // namespace kiln::compiler
