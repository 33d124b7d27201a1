// train_pipeline (train_pipeline.h).
#include "train_pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "distributed/communicator.h"
#include "distributed/pipeline_checkpoint.h"
#include "distributed/pipeline_groups.h"
#include "distributed/pipeline_parallel.h"
#include "kiln/kiln.h"
#include "name_value_args.h"
#include "train_data.h"
#include "train_eval.h"
#include "train_metrics.h"
#include "train_position.h"
#include "train_setup.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

void check_pipeline_args(const TrainArgs& a) {
    KILN_CHECK(a.recompute == "none", kUnsupported)
        << "--pipeline-parallel does not support --recompute (--rematerialize is the pipeline's recomputation)";
    KILN_CHECK(std::filesystem::is_regular_file(a.model), kIOError)
        << "cannot open model '" << a.model << "': no such file";
    KILN_CHECK(a.epochs > 0, kInvalidArgument) << "--epochs must be positive, got " << a.epochs;
}

/// The class count of a classification loss's output (label checks), 0 otherwise.
int64_t class_count(const Session& model, const TrainArgs& a) {
    if (a.loss != "cross_entropy" && a.loss != "nll") return 0;
    for (const TensorInfo& o : model.outputs())
        if (a.loss_output.empty() || o.name == a.loss_output) return o.shape.size() >= 2 ? o.shape[1] : 0;
    KILN_THROW(kInvalidArgument) << "--loss-output " << a.loss_output << ": the model has no such output";
    return 0;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
}

/// Rank 0's closing lines: the run's throughput and the median step's parts.
void print_summary(const std::vector<distributed::PipelineStepStats>& steps, double seconds, int64_t batch) {
    std::vector<double> step, fwd, bwd, apply;
    int stashed = 0;
    for (const distributed::PipelineStepStats& s : steps) {
        stashed = std::max(stashed, s.peak_stashed);
        step.push_back(s.step_s);
        fwd.push_back(s.forward_s);
        bwd.push_back(s.backward_s);
        apply.push_back(s.apply_s);
    }
    fmt::print(stderr, "trained {} steps in {:.2f} s ({:.0f} samples/s)\n", steps.size(), seconds,
               seconds > 0 ? static_cast<double>(steps.size()) * static_cast<double>(batch) / seconds : 0.0);
    fmt::print(stderr,
               "pipeline-parallel on rank 0, per step (median): {:.1f} ms, of which forward {:.1f} ms, backward {:.1f} "
               "ms, optimizer {:.1f} ms; the rest waits for other stages. At most {} microbatches' forward values "
               "held at once\n",
               1e3 * median(step), 1e3 * median(fwd), 1e3 * median(bwd), 1e3 * median(apply), stashed);
    if (!steps.empty() && steps.back().replica_buckets > 0) {
        std::vector<double> early;
        for (const distributed::PipelineStepStats& s : steps) early.push_back(s.replica_buckets_started_early);
        fmt::print(stderr,
                   "data-parallel on rank 0: {} gradient buckets per step, {:.1f} (median) started during the "
                   "stage's last backward\n",
                   steps.back().replica_buckets, median(early));
    }
}

/// The held-out set through the pipeline (PipelineParallel::eval_step), its figures summed on
/// the loss stage as evaluate() sums them (train_eval.h) and shared with every rank.
EvalResult evaluate_pipeline(distributed::PipelineParallel& pp, TrainData& data, const StepInputs& step,
                             const std::string& loss_kind) {
    EvalAccumulator acc(step, loss_kind, 0);  // the loss stage returns the loss's output alone
    data.eval->start_epoch(0);
    while (auto batch = data.eval->next()) {
        int64_t valid = 0;
        std::map<std::string, Tensor> inputs = step_batch(*batch, data, step, &valid);
        if (std::optional<StepResult> r = pp.eval_step(inputs)) acc.add(*r, inputs, valid);
    }
    const EvalResult e = acc.result();
    const std::vector<double> v = pp.from_loss_stage({e.loss, e.accuracy, static_cast<double>(e.records)});
    return {v.at(0), v.at(1), static_cast<int64_t>(v.at(2))};
}

/// Loads --resume's checkpoint on every rank: the position (its seed and shuffle replace `a`'s),
/// with a note from rank 0 when its stage split differs from this run's.
Position resume(distributed::PipelineParallel& pp, const std::string& checkpoint, TrainArgs& a, ProgressBar& bar) {
    const std::map<std::string, std::string> extra = pp.load_checkpoint(checkpoint);
    Position pos = read_position(extra, checkpoint, a);
    const std::string diff = distributed::split_difference(extra, pp.stage_split(), a.microbatches);
    if (!diff.empty())
        bar.print_line(fmt::format("note: --resume: {}; each stage takes its own parameters and optimizer state from "
                                   "it, so the run continues, but its gradient sums may not group as the "
                                   "interrupted run's did",
                                   diff));
    return pos;
}

/// The training loop of one rank, epoch by epoch.
struct PipelineLoop {
    const TrainArgs& a;
    const TrainingOptions& opts;
    distributed::PipelineParallel& pp;
    TrainData& data;
    const StepInputs& step;
    ProgressBar& bar;
    MetricsCsv* csv;
    std::string checkpoint;
    int64_t steps_per_epoch;
    Position pos;
    std::vector<distributed::PipelineStepStats> stats;
    double seconds = 0;

    /// Records per step over every replica.
    int64_t records_per_step() const { return a.data.batch_size * a.data.shard_count; }

    /// Every rank takes part (each sends its stage's tensors); rank 0 writes.
    void save() {
        if (checkpoint.empty()) return;
        if (csv) pos.csv_rows = csv->rows();
        pp.save_checkpoint(checkpoint, position_extra(pos, a));
    }

    /// Enqueues the epoch's next batch, if it has one left; false otherwise.
    bool enqueue_next() {
        if (pos.batch + static_cast<int64_t>(pp.enqueued()) >= steps_per_epoch) return false;
        std::optional<data::Batch> batch = data.train->next();
        if (!batch) return false;
        std::map<std::string, Tensor> inputs = step_batch(*batch, data, step);
        for (auto& [name, t] : inputs) t = t.clone();  // held past the pipeline's next batch
        pp.enqueue(inputs);
        return true;
    }

    /// The rest of epoch pos.epoch from batch pos.batch; returns its samples/s.
    double train_epoch() {
        const auto epoch_start = Clock::now();
        int64_t epoch_batches = 0;
        double samples_per_s = 0;
        // A checkpoint taken after the epoch's last step resumes straight at the epoch's end.
        if (pos.batch < steps_per_epoch) data.train->start_epoch(pos.epoch, pos.batch);
        // A master orders step i+1 before step i runs, unless a checkpoint comes between them.
        const bool ahead = pp.is_master();
        while (pp.enqueued() > 0 || enqueue_next()) {
            const bool checkpoint_next = a.checkpoint_every > 0 && (pp.steps() + 1) % a.checkpoint_every == 0;
            if (ahead && !checkpoint_next) enqueue_next();
            const double lr = opts.schedule.at(pp.steps(), a.lr);
            const double loss = pp.step();
            KILN_CHECK(std::isfinite(loss), kInvalidArgument)
                << "the training loss is " << loss << " at step " << pp.steps() << ": lower --lr or use --clip-norm";
            stats.push_back(pp.last_step_stats());
            ++pos.batch;
            ++epoch_batches;
            pos.ema = kSmoothing * pos.ema + (1 - kSmoothing) * loss;
            ++pos.ema_steps;
            const double elapsed = std::chrono::duration<double>(Clock::now() - epoch_start).count();
            samples_per_s = elapsed > 0 ? static_cast<double>(epoch_batches * records_per_step()) / elapsed : 0;
            if (csv) csv->row(pos.epoch + 1, pp.steps(), loss, std::nullopt, std::nullopt, lr, samples_per_s);
            const double per_step = (seconds + elapsed) / static_cast<double>(stats.size());
            bar.update({pos.epoch, a.epochs, pos.batch, steps_per_epoch, pp.steps(),
                        pos.ema / (1 - std::pow(kSmoothing, static_cast<double>(pos.ema_steps))), lr, samples_per_s,
                        per_step * static_cast<double>(steps_per_epoch * a.epochs - pp.steps())});
            if (a.checkpoint_every > 0 && pp.steps() % a.checkpoint_every == 0) save();
        }
        seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
        return samples_per_s;
    }

    /// The held-out set's figures, printed by rank 0 and logged.
    void evaluate_epoch(double samples_per_s) {
        const EvalResult e = evaluate_pipeline(pp, data, step, a.loss);
        const std::string acc = e.accuracy >= 0 ? fmt::format("  accuracy {:.2f}%", 100 * e.accuracy) : "";
        bar.print_line(fmt::format("epoch {}/{} eval: loss {:.4f}{} ({} records)", pos.epoch + 1, a.epochs, e.loss,
                                   acc, e.records));
        if (csv)
            csv->row(pos.epoch + 1, pp.steps(), std::nullopt, e.loss,
                     e.accuracy >= 0 ? std::optional<double>(e.accuracy) : std::nullopt,
                     opts.schedule.at(std::max<int64_t>(0, pp.steps() - 1), a.lr), samples_per_s);
    }

    /// The epoch's checkpoint: the next run starts the next epoch at its first batch.
    void end_epoch() {
        const Position now = pos;
        ++pos.epoch, pos.batch = 0;
        save();
        pos = now;
    }
};

/// Rank 0's opening lines: the data, the model, the stages.
void print_header(const TrainArgs& a, const distributed::PipelineParallel& pp, const TrainData& data,
                  int64_t steps_per_epoch, double compile_s, ProgressBar& bar) {
    bar.print_line(data.describe);
    const int replicas = a.data.shard_count;
    bar.print_line(fmt::format("model: {} ({} parameters to train), batch {}{} in {} microbatches, {} steps per epoch; "
                               "rank 0's stage compiled in {:.2f} s",
                               a.model, pp.parameter_names().size(), a.data.batch_size,
                               replicas > 1 ? " per replica" : "", a.microbatches, steps_per_epoch, compile_s));
    if (replicas > 1)
        bar.print_line(fmt::format("data-parallel: {} replicas of the pipeline x batch {} = {} records per step; each "
                                   "stage's gradients averaged over its replicas in buckets of {:.3g} MB, {}",
                                   replicas, a.data.batch_size, replicas * a.data.batch_size,
                                   static_cast<double>(pp.options().replica_buckets.bucket_bytes) / (1 << 20),
                                   pp.options().replica_buckets.overlap ? "started during its last backward"
                                                              : "after its last backward"));
    std::string stages = pp.describe();
    if (!stages.empty() && stages.back() == '\n') stages.pop_back();
    bar.print_line(fmt::format("pipeline-parallel over {} ranks{} ({}; {} schedule; the backward {}):\n{}",
                               distributed::Communicator::get().size() / replicas,
                               replicas > 1 ? fmt::format(" per replica, {} replicas", replicas) : "",
                               a.stages.empty() ? "cost-balanced stages or kiln.rank" : "--stage",
                               a.pipeline_schedule == "1f1b" ? "1F1B" : "GPipe",
                               a.rematerialize ? "recomputes the forward" : "reads the forward's stash", stages));
}

/// The options of the pipeline from the command line.
distributed::PipelineParallelOptions pipeline_options(const TrainArgs& a, const distributed::PipelineGroups& groups) {
    distributed::PipelineParallelOptions po{a.microbatches, distributed::parse_stage_map(a.stages), a.rematerialize};
    if (a.pipeline_schedule == "1f1b") po.schedule = distributed::PipelineSchedule::kOneForwardOneBackward;
    po.replicas = groups.replicas_of_stage.get();
    if (a.bucket_mb >= 0) po.replica_buckets.bucket_bytes = static_cast<size_t>(a.bucket_mb * (1 << 20));
    if (a.no_overlap) po.replica_buckets.overlap = false;
    po.replica_buckets.compute_threads = a.threads;
    if (a.dispatch == "master") po.dispatch = distributed::PipelineDispatch::kMaster;
    return po;
}

/// A worker under --dispatch master: its stage comes from the master, and so do its orders.
int serve_as_worker(const TrainArgs& a, distributed::Communicator& pipeline, const distributed::PipelineGroups& groups) {
    const TrainingOptions opts = training_options(a, {}, 0);  // the session and optimizer options
    distributed::PipelineParallel pp(pipeline, a.model, opts, pipeline_options(a, groups));
    pp.serve();
    return 0;
}

}  // namespace

int train_pipeline(TrainArgs a, ProgressBar& bar) {
    distributed::Communicator& world = distributed::Communicator::get();
    const distributed::PipelineGroups groups = distributed::group_pipeline_ranks(world, a.pipeline_stages, a.data_parallel);
    distributed::Communicator& pipeline = groups.pipeline ? *groups.pipeline : world;
    if (a.dispatch == "master" && pipeline.rank() != 0) return serve_as_worker(a, pipeline, groups);
    check_pipeline_args(a);
    a.data.shard_count = groups.replicas;  // each replica reads its slice of every global batch
    a.data.shard_index = groups.replica;
    const std::string checkpoint = checkpoint_path(a);
    std::unique_ptr<Session> model = Session::load(a.model);
    std::map<std::string, int64_t> dims = parse_dims(a.dims);
    bind_batch_dim(model->inputs(), a.data.batch_size, dims);
    TrainData data = open_train_sources(a.data);
    const int64_t global_batch = a.data.batch_size * groups.replicas;
    KILN_CHECK(data.train_source->size() >= global_batch, kInvalidArgument)
        << "--data '" << a.data.data << "' has " << data.train_source->size()
        << " training records, fewer than one batch (" << groups.replicas << " replicas x --batch-size "
        << a.data.batch_size << ")";
    const int64_t steps_per_epoch = data.train_source->size() / global_batch;
    TrainingOptions opts = training_options(a, dims, steps_per_epoch * a.epochs);
    opts.seed = distributed::replica_seed(opts.seed, groups.replica);  // the shuffle seed stays common
    const auto t_compile = Clock::now();
    distributed::PipelineParallel pp(pipeline, a.model, opts, pipeline_options(a, groups));
    const double compile_s = std::chrono::duration<double>(Clock::now() - t_compile).count();
    Position pos;
    if (a.resume) pos = resume(pp, checkpoint, a, bar);  // before the pipelines: it sets the data order
    StepInputs step{pp.batch_inputs(), a.loss == "output" ? "" : opts.loss.labels, class_count(*model, a)};
    build_pipelines(a.data, step, data);
    std::unique_ptr<MetricsCsv> csv;
    if (!a.metrics_csv.empty() && a.rank == 0)
        csv = std::make_unique<MetricsCsv>(a.metrics_csv,
                                           a.resume ? std::optional<int64_t>(pos.csv_rows) : std::nullopt);
    if (!checkpoint.empty() && a.rank == 0) std::filesystem::create_directories(a.checkpoint_dir);
    if (a.log_every <= 0) bar.set_log_every(std::max<int64_t>(1, steps_per_epoch / 5));
    print_header(a, pp, data, steps_per_epoch, compile_s, bar);
    if (a.resume)
        bar.print_line(fmt::format("resumed from {}: epoch {}, batch {}/{}, step {}", checkpoint, pos.epoch + 1,
                                   pos.batch, steps_per_epoch, pp.steps()));
    PipelineLoop loop{a, opts, pp, data, step, bar, csv.get(), checkpoint, steps_per_epoch, pos, {}, 0};
    for (; loop.pos.epoch < a.epochs; ++loop.pos.epoch, loop.pos.batch = 0) {
        const double samples_per_s = loop.train_epoch();
        if (data.eval) loop.evaluate_epoch(samples_per_s);
        loop.end_epoch();
    }
    bar.finish();
    if (a.rank == 0) print_summary(loop.stats, loop.seconds, global_batch);
    if (!a.export_path.empty()) {
        pp.export_onnx(a.export_path);
        if (a.rank == 0) fmt::print(stderr, "wrote {}\n", a.export_path);
    }
    pp.stop();  // a master's workers
    return 0;
}

}  // namespace kiln::cli
