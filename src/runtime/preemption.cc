// kiln::Preemption's methods: the flag and the suspended run's state (runtime/preemption.h).
#include "runtime/preemption.h"

#include <chrono>

#include "runtime/model_runner.h"

namespace kiln {

Preemption::State::State() = default;
Preemption::State::~State() = default;

Preemption::Preemption() : state_(std::make_unique<State>()) {}
Preemption::~Preemption() = default;

void Preemption::request() {
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    state_->requested_at_ns.store(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(),
                                  std::memory_order_relaxed);
    state_->requested.store(1, std::memory_order_release);
}
void Preemption::clear_request() { state_->requested.store(0, std::memory_order_release); }
bool Preemption::requested() const { return state_->requested.load(std::memory_order_acquire) != 0; }
bool Preemption::suspended() const { return state_->suspended; }
void Preemption::reset() {
    state_->run.reset();
    state_->suspended = false;
    state_->resume_step = 0;
    state_->cut_inside_kernel = false;
}

}  // namespace kiln
