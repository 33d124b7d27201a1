// ScheduleConfig: a schedule template's search space and the point of it a schedule applies.
//
// A template (an op's ScheduleFn, op::default_schedule) asks its schedule's config for each
// tunable choice it makes: `int64_t t = s.config().knob("conv.t", {4, 7, 8, 14}, 7)`. The call
// both declares the knob (its name, candidate values and default: the search space is data the
// tuner reads back after lowering) and returns the value to use: the configured one when it is
// one of the choices, else the default. An empty config therefore reproduces the untuned
// schedule exactly. Knob names are "<template>.<choice>"; a knob declared twice in one schedule
// (two stages of the same template) is one knob: the second declaration gets the first's value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln::te {

struct Knob {
    std::string name;
    std::vector<int64_t> choices;  // distinct candidate values, the default among them
    int64_t default_value = 0;
};

/// Knob values by name, e.g. {"conv.ob": 2, "conv.t": 7}.
using KnobValues = std::map<std::string, int64_t>;

/// A fingerprint of a search space: 16 hex digits over the knobs' names and choices (not their
/// defaults, which may follow the thread count). A tuning log records it beside each setting so
/// that a setting chosen in another space (a template changed since) is not applied half-way.
std::string space_fingerprint(const std::vector<Knob>& space);

/// A tuned setting and the fingerprint of the space it was chosen in ("" when not recorded).
struct TunedKnobs {
    KnobValues values;
    std::string space;
};

class ScheduleConfig {
public:
    ScheduleConfig() = default;
    explicit ScheduleConfig(KnobValues values) : values_(std::move(values)) {}

    /// Declares a knob and returns its value (see the file comment). `choices` may be given in any
    /// order and with repeats; the default is added when missing.
    int64_t knob(const std::string& name, std::vector<int64_t> choices, int64_t default_value);

    /// The knobs declared so far, in declaration order.
    const std::vector<Knob>& space() const { return space_; }
    /// The configured values (as given, including names no template declared).
    const KnobValues& values() const { return values_; }
    /// The value each declared knob took.
    KnobValues applied() const;

    /// The intra-op threads the kernel will run on: a hint a template may read to size its
    /// parallel loop (never a knob; 1 unless the compiler says). Templates keep their two-thread
    /// choices at threads <= 2.
    int threads() const { return threads_; }
    void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }
    /// The kernel's runs will be preempted (SessionOptions::preemptible): a preempted run stops
    /// only between its parallel loops' iterations, so a template bounds the work of one
    /// iteration (never a knob; false unless the compiler says).
    bool preemptible() const { return preemptible_; }
    void set_preemptible(bool p) { preemptible_ = p; }
    /// "conv.ob=2,conv.t=7" (sorted by name); "" for no values.
    static std::string format(const KnobValues& v);
    /// The inverse of format; kInvalidArgument names a malformed entry.
    static KnobValues parse(const std::string& s);

private:
    KnobValues values_;
    std::vector<Knob> space_;
    KnobValues taken_;
    int threads_ = 1;
    bool preemptible_ = false;
};

}  // namespace kiln::te
