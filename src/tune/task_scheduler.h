// How `kiln tune` spends its time budget over its tasks (one per workload): first one round of
// every task (its untuned kernel, its oneDNN alternative, a few candidates), then the rest of the
// budget in proportion to each task's weight (its share of the model's time, known after that
// round), the heaviest first. A task stops early when it is done (its best stopped improving) and
// its unused time goes on to the tasks after it; a task that had its turn within the budget ends
// with a confirmation round. The clock is injected, so the split is testable without measuring.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace kiln::tune {

/// What the scheduler drives (compiler/tune_model.cc's tuner; a fake in the tests).
class TuningTasks {
public:
    virtual ~TuningTasks() = default;
    virtual size_t size() const = 0;
    /// One measurement round of task i: its reference and up to n candidates.
    virtual void round(size_t i, int n) = 0;
    /// Nothing more to search (space exhausted, trial limit, no gain for a while, or failed).
    virtual bool done(size_t i) const = 0;
    /// Its share of the model's time (untuned seconds x occurrences), after its first round.
    virtual double weight(size_t i) const = 0;
    /// Its best few settings measured again, so that a lucky time does not pick the winner.
    virtual void confirm(size_t i) = 0;
};

struct BudgetOptions {
    double budget_seconds = 300;
    int batch = 8;        // candidates per round after the first
    int first_batch = 4;  // at most this many in the first round (fewer when batch is smaller)
    /// Seconds of the budget used so far (a clock started with the tuning, which may have spent
    /// some before the first round); unset: the steady clock from the call on.
    std::function<double()> elapsed;
};

/// Spends the budget as the file comment says; returns the task indices, heaviest first.
std::vector<size_t> spend_budget(TuningTasks& tasks, const BudgetOptions& opts);

}  // namespace kiln::tune
