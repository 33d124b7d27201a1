// Schedules: plain data describing how each compute stage's loops are transformed.
// A schedule never changes what is computed, only the loop structure (compute/schedule split,
// STYLE rule 4). Lowering (tir/lower.h) reads it.
//
//   Schedule s = create_schedule({C});
//   Stage& st = s[C];
//   auto [io, ii] = st.split(st.axis(0), 32);
//   st.reorder({io, st.reduce_axis(0), ii});
//   st.vectorize(ii);
//   st.parallel(io);
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "te/tensor.h"
#include "te/schedule_config.h"

namespace kiln::te {

/// kBlockIdxX/kThreadIdxX: a loop bound to a CUDA grid/block index (Stage::bind); the CUDA emitter
/// launches it, every CPU path (C emitter, tir interpreter) runs it as a serial loop.
enum class LoopKind { kSerial, kParallel, kVectorized, kUnrolled, kBlockIdxX, kThreadIdxX };
const char* loop_kind_name(LoopKind k);

/// How a leaf loop variable relates to the original axes.
struct SplitRelation {
    IterVar parent, outer, inner;
    int64_t factor;  // inner extent; the outer extent is ceil(parent/factor); a guard handles the tail
                     // (a symbolic parent: floordiv(E, f) full tiles plus a tail, tir/lower.cc)
};
struct FuseRelation {
    IterVar outer, inner, fused;
};

class Stage {
public:
    explicit Stage(Tensor t);

    const Tensor& tensor() const { return tensor_; }
    /// Original data-parallel axes and reduce axes of the compute.
    IterVar axis(size_t i) const;
    IterVar reduce_axis(size_t i) const;
    const std::vector<IterVar>& all_reduce_axes() const { return reduce_axes_; }

    /// Current loop order, outermost first.
    const std::vector<IterVar>& leaf_iter_vars() const { return leaves_; }

    /// Splits into an outer loop of ceil(extent/factor) and an inner loop of `factor` (a
    /// symbolic extent keeps the factor as given; a static one clamps it to the extent).
    std::pair<IterVar, IterVar> split(const IterVar& iv, int64_t factor);
    /// Splits so that the outer loop has `nparts` iterations (static extents only).
    std::pair<IterVar, IterVar> split_nparts(const IterVar& iv, int64_t nparts);
    /// Fuses two adjacent leaves (outer immediately before inner) into one loop.
    IterVar fuse(const IterVar& outer, const IterVar& inner);
    /// Reorders the given leaves among the positions they occupy (others stay in place).
    void reorder(const std::vector<IterVar>& order);
    /// Loop kinds. vectorize and parallel promise independent iterations, so they accept
    /// data-parallel leaves only (kInvalidArgument for a reduce leaf); unroll accepts any leaf.
    void vectorize(const IterVar& iv);
    void unroll(const IterVar& iv);
    void parallel(const IterVar& iv);
    /// Binds a data-parallel leaf to blockIdx.x or threadIdx.x (kind kBlockIdxX/kThreadIdxX) for the
    /// CUDA emitter (codegen/cuda_emitter.h); kInvalidArgument for a reduce leaf or another kind.
    void bind(const IterVar& iv, LoopKind thread);
    /// Splits both iv's with factors and orders (xo, yo, xi, yi).
    std::vector<IterVar> tile(const IterVar& x, const IterVar& y, int64_t fx, int64_t fy);
    /// Substitutes this stage's body into its consumers; it gets no loops of its own.
    void compute_inline();

    /// Stores this stage's values in `target`'s buffer (same shape and dtype) instead of a
    /// buffer of its own: a reduction whose elementwise epilogue is the kernel's output writes
    /// the output directly and the epilogue then updates it in place. The caller promises that
    /// target's stage reads this stage only at target's own index and that no other stage reads
    /// this one after target's stage starts (lowering checks shape and dtype only).
    void store_in(const Tensor& target);
    /// The tensor whose buffer this stage writes (nullptr: its own).
    const Tensor& storage() const { return storage_; }

    /// A local-tile reduction (cache_write_local) computes `epilogue`'s values as it writes
    /// each tile back: the epilogue's body at the tile element's index, its reads of this
    /// stage replaced by the accumulated value, stored in the epilogue's buffer (store_in);
    /// the epilogue stage gets no loops of its own. The output is written once, from
    /// registers, instead of written and then read back by a second pass. The caller promises
    /// what store_in asks, that the epilogue reads this stage only at its own index (through
    /// inlined stages), and that no stage runs between the two.
    void fuse_epilogue(Stage& epilogue);
    /// The epilogue this reduction applies at its write-back (nullptr: none).
    const Tensor& epilogue() const { return epilogue_; }
    /// True when a reduction's write-back computes this stage (fuse_epilogue).
    bool is_fused_epilogue() const { return fused_epilogue_; }

    /// Register-tile accumulation (TVM's cache_write to "local"): a reduction stage accumulates
    /// into a small local array indexed by the data-parallel leaves nested inside its outermost
    /// reduce leaf (the tile); the array is initialized just outside that reduce leaf and
    /// written to the stage's buffer once after the reduction, so the buffer is never
    /// read-modify-written per reduction step. Lowering rejects tiles over kMaxLocalElems.
    void cache_write_local();
    bool writes_local() const { return local_; }
    static constexpr int64_t kMaxLocalElems = 1024;

    /// A software prefetch (TVM's prefetch): at the top of leaf `at`'s loop body, the hint that
    /// t[index] will be read soon (tir::PrefetchNode; the C emitter fetches its cache line into
    /// L2). `index` (one Expr per dim of t) may use the vars of any IterVar of this stage: its
    /// leaves, or the parents and parts of its splits and fuses, recovered as for the body.
    struct Prefetch {
        Tensor tensor;
        IterVar at;
        std::vector<Expr> index;
    };
    void prefetch(const Tensor& t, const IterVar& at, std::vector<Expr> index);
    const std::vector<Prefetch>& prefetches() const { return prefetches_; }

    bool is_inlined() const { return inlined_; }
    LoopKind loop_kind(const IterVar& iv) const;
    const std::vector<SplitRelation>& splits() const { return splits_; }
    const std::vector<FuseRelation>& fuses() const { return fuses_; }

    /// True when the stage's tensor is one of the schedule's outputs (set by Schedule).
    bool is_output() const { return is_output_; }

private:
    friend class Schedule;
    size_t leaf_pos(const IterVar& iv) const;  // throws kInvalidArgument if not a leaf
    void set_kind(const IterVar& iv, LoopKind k);
    Tensor tensor_;
    std::vector<IterVar> reduce_axes_;
    std::vector<IterVar> leaves_;
    std::vector<SplitRelation> splits_;
    std::vector<FuseRelation> fuses_;
    std::map<const IterVarNode*, LoopKind> kinds_;
    bool inlined_ = false;
    bool is_output_ = false;
    bool local_ = false;
    std::vector<Prefetch> prefetches_;
    Tensor storage_;
    Tensor epilogue_;
    bool fused_epilogue_ = false;
};

class Schedule {
public:
    /// One stage per compute tensor reachable from outputs (placeholders get none), in
    /// producer-before-consumer order.
    explicit Schedule(std::vector<Tensor> outputs, ScheduleConfig config = {});

    Stage& operator[](const Tensor& t);
    const Stage& operator[](const Tensor& t) const;
    bool has_stage(const Tensor& t) const;
    std::vector<Stage>& stages() { return stages_; }
    const std::vector<Stage>& stages() const { return stages_; }
    const std::vector<Tensor>& outputs() const { return outputs_; }
    /// The tunable choices the templates scheduling these stages make (te/schedule_config.h).
    ScheduleConfig& config() { return config_; }
    const ScheduleConfig& config() const { return config_; }

private:
    std::vector<Tensor> outputs_;
    std::vector<Stage> stages_;
    ScheduleConfig config_;
};

inline Schedule create_schedule(std::vector<Tensor> outputs, ScheduleConfig config = {}) {
    return Schedule(std::move(outputs), std::move(config));
}

}  // namespace kiln::te
