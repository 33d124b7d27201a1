#include "tune/task_scheduler.h"

#include <algorithm>
#include <chrono>

namespace kiln::tune {

std::vector<size_t> spend_budget(TuningTasks& tasks, const BudgetOptions& opts) {
    std::function<double()> elapsed = opts.elapsed;
    if (!elapsed) {
        const auto start = std::chrono::steady_clock::now();
        elapsed = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    }
    std::vector<double> spent(tasks.size(), 0);
    auto timed = [&](size_t i, auto&& work) {
        const double t0 = elapsed();
        work();
        spent[i] += elapsed() - t0;
    };
    // Every task's first round; past the budget, the remaining tasks keep their defaults.
    for (size_t i = 0; i < tasks.size() && elapsed() < opts.budget_seconds; ++i)
        timed(i, [&] { tasks.round(i, std::min(opts.batch, opts.first_batch)); });
    std::vector<size_t> order(tasks.size());
    std::vector<double> weight(tasks.size());
    double rest_weight = 0;
    for (size_t i = 0; i < order.size(); ++i) {
        order[i] = i;
        weight[i] = tasks.weight(i);
        rest_weight += weight[i];
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weight[a] > weight[b]; });
    // Then the rest, in proportion to each task's weight among the tasks still to come.
    for (size_t k = 0; k < order.size(); ++k) {
        const double left = opts.budget_seconds - elapsed();
        if (left <= 0) break;
        const size_t i = order[k];
        const double share = rest_weight > 0 ? left * weight[i] / rest_weight : left / static_cast<double>(order.size() - k);
        rest_weight -= weight[i];
        const double until = spent[i] + share;
        while (spent[i] < until && elapsed() < opts.budget_seconds && !tasks.done(i))
            timed(i, [&] { tasks.round(i, opts.batch); });
        if (elapsed() < opts.budget_seconds) timed(i, [&] { tasks.confirm(i); });
    }
    return order;
}

}  // namespace kiln::tune
