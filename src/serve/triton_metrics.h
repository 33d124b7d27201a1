// Triton's metric families (nv_inference_*), rendered at scrape time from each model version's
// statistics (serve/model_statistics.h) beside Kiln's own kiln_* families, so dashboards and
// alerts written for Triton read a Kiln server unchanged. Counters labelled model and version:
//   nv_inference_request_success / _failure   requests answered with a result / an error
//   nv_inference_count                          batch rows inferred (a request of 4 rows adds 4)
//   nv_inference_exec_count                     model executions (a dynamic batch is one)
//   nv_inference_request_duration_us            successful requests, arrival to answer
//   nv_inference_queue_duration_us              successful requests, time in the queue
//   nv_inference_compute_input_duration_us, _infer_, _output_  per request, as in statistics
// Durations are cumulative microseconds, as Triton's are.
#pragma once

#include <string>
#include <vector>

#include "serve/types.h"

namespace kiln::serve {

/// The nv_inference_* families of `versions` in the Prometheus text format (empty: no versions).
std::string triton_metrics_text(const std::vector<ModelStatistics>& versions);

}  // namespace kiln::serve
