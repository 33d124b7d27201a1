// `kiln train MODEL.onnx --data DATA ...`: trains an ONNX model with kiln::TrainingSession
// (docs/training.md). The model's batch dimension is bound to --batch-size; batches come from
// the input pipeline (src/data); every step runs forward, loss, backward and the optimizer
// update as one compiled graph. Progress goes to stderr, the metrics to a CSV, checkpoints to
// DIR/checkpoint.kiln (every --checkpoint-every steps and at each epoch's end), the trained
// model to --export.
//
// Resuming: a checkpoint records the epoch, the batches done in it, the seed and the metrics so
// far besides the session's state, and the pipeline's shuffle order is a function of (seed,
// epoch), so `--resume` continues at the exact batch: the resumed run's weights and loss curve
// are those of an uninterrupted one. `--resume` without a checkpoint is an error (nothing is
// started silently from scratch).
//
// Data-parallel (`mpirun -np N kiln train ... --data-parallel`, docs/distributed.md): every
// rank compiles the same step, rank 0's weights are broadcast, rank r reads the r-th slice of
// each global batch of N x --batch-size records, gradients are averaged across ranks before
// each optimizer step (distributed/data_parallel.h); rank 0 alone prints, writes checkpoints,
// metrics and the export; `--resume` loads the checkpoint on every rank. An error on any rank
// aborts the whole job.
//
// Parameter servers (`mpirun -np N kiln train ... --parameter-servers S`,
// distributed/parameter_server.h): ranks 0..S-1 hold the sharded weights and run the optimizer,
// the other ranks are workers that read their slice of each global batch of (N-S) x
// --batch-size records, push gradients and pull weights. Rank 0, a server, prints each update's
// loss, writes the metrics and the export (it gathers the other servers' shards at the end).
// Pipeline-parallel (`mpirun -np N kiln train ... --pipeline-parallel --microbatches M`,
// distributed/pipeline_parallel.h): each rank holds one stage of the model and runs GPipe's
// schedule over M microbatches of each --batch-size batch; the loop is train_pipeline.cc's. With
// --data-parallel and --pipeline-stages S, the ranks are S stages x (N / S) replicas.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "distributed/communicator.h"
#include "distributed/data_parallel.h"
#include "distributed/parameter_server.h"
#include "kiln/kiln.h"
#include "kiln/training.h"
#include "name_value_args.h"
#include "progress_bar.h"
#include "train_data.h"
#include "train_eval.h"
#include "train_metrics.h"
#include "train_setup.h"
#include "train_args.h"
#include "train_pipeline.h"
#include "train_position.h"

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;


/// A parameter server's part of the run (ranks < --parameter-servers): serves every worker's
/// steps, rank 0 printing and logging each update (sync: a step of every worker, with their mean
/// loss; async: one worker's step, with its loss), then rank 0 gathers the weights for the export.
/// Returns the seconds it served.
double serve_parameters(distributed::ParameterServer& server, const TrainArgs& a, const TrainingOptions& opts,
                        int64_t steps_per_epoch, MetricsCsv* csv, ProgressBar& bar, Position& pos) {
    const bool async = a.ps_mode == "async";
    const int64_t workers = server.layout().workers;
    const int64_t per_epoch = async ? steps_per_epoch * workers : steps_per_epoch;
    const int64_t records = async ? a.data.batch_size : a.data.batch_size * workers;  // per update
    const int64_t total = per_epoch * a.epochs;
    const auto start = Clock::now();
    server.serve(steps_per_epoch * a.epochs, [&](int64_t update, double loss) {
        KILN_CHECK(std::isfinite(loss), kInvalidArgument)
            << "the training loss is " << loss << " at update " << update << ": lower --lr";
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const double samples_per_s = elapsed > 0 ? static_cast<double>(update * records) / elapsed : 0;
        const double lr = opts.schedule.at(update - 1, a.lr);
        pos.epoch = (update - 1) / per_epoch;
        pos.batch = (update - 1) % per_epoch + 1;
        pos.ema = kSmoothing * pos.ema + (1 - kSmoothing) * loss;
        ++pos.ema_steps;
        if (csv) csv->row(pos.epoch + 1, update, loss, std::nullopt, std::nullopt, lr, samples_per_s);
        bar.update({pos.epoch, a.epochs, pos.batch, per_epoch, update,
                    pos.ema / (1 - std::pow(kSmoothing, static_cast<double>(pos.ema_steps))), lr, samples_per_s,
                    elapsed / static_cast<double>(update) * static_cast<double>(total - update)});
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    server.gather_parameters();
    pos.epoch = a.epochs;  // done: the epoch loop is the workers'
    return seconds;
}

/// The options --parameter-servers does not take yet, refused by name.
void check_parameter_server_args(const TrainArgs& a) {
    if (a.parameter_servers == 0) return;
    distributed::check_parameter_server_count(distributed::Communicator::get().size(), a.parameter_servers);
    const char* what = !a.checkpoint_dir.empty() ? "--checkpoint-dir"
                       : a.resume                ? "--resume"
                       : !a.data.eval_data.empty() ? "--eval-data"
                       : a.data.eval_split > 0   ? "--eval-split"
                       : a.clip_norm > 0         ? "--clip-norm (the global norm spans the servers)"
                                                 : nullptr;
    KILN_CHECK(what == nullptr, kUnsupported) << "--parameter-servers does not support " << what << " yet";
}

int train_run(TrainArgs a, ProgressBar& bar) {
    check_parameter_server_args(a);
    KILN_CHECK(std::filesystem::is_regular_file(a.model), kIOError) << "cannot open model '" << a.model << "': no such file";
    KILN_CHECK(a.epochs > 0, kInvalidArgument) << "--epochs must be positive, got " << a.epochs;
    const std::string checkpoint = checkpoint_path(a);

    // The model's inputs and outputs (an import: Session::load compiles only once dims are known).
    std::unique_ptr<Session> model = Session::load(a.model);
    std::map<std::string, int64_t> dims = parse_dims(a.dims);
    bind_batch_dim(model->inputs(), a.data.batch_size, dims);
    size_t output_index = 0;
    if (!a.loss_output.empty()) {
        std::string names;
        for (; output_index < model->outputs().size(); ++output_index) {
            if (model->outputs()[output_index].name == a.loss_output) break;
            names += (names.empty() ? "" : ", ") + model->outputs()[output_index].name;
        }
        KILN_CHECK(output_index < model->outputs().size(), kInvalidArgument)
            << "--loss-output " << a.loss_output << ": the model has no such output (outputs: " << names << ")";
    }
    KILN_CHECK(!model->outputs().empty(), kInvalidArgument) << "model '" << a.model << "' has no outputs";
    const TensorInfo& loss_out = model->outputs()[output_index];
    bool classification = a.loss == "cross_entropy" || a.loss == "nll";

    TrainData data = open_train_sources(a.data);
    const int world = a.data.shard_count;
    const bool rank0 = a.rank == 0;
    const int64_t global_batch = a.data.batch_size * world;  // records per step, all (data-parallel or worker) ranks
    KILN_CHECK(data.train_source->size() >= global_batch, kInvalidArgument)
        << "--data '" << a.data.data << "' has " << data.train_source->size() << " training records, fewer than one global batch ("
        << world << " ranks x --batch-size " << a.data.batch_size << ")";
    int64_t steps_per_epoch = data.train_source->size() / global_batch;
    TrainingOptions opts = training_options(a, dims, steps_per_epoch * a.epochs);
    // Data-parallel: each rank draws its own dropout masks (the shuffle seed stays common).
    opts.seed += static_cast<uint64_t>(a.data.shard_index) * 0x9e3779b97f4a7c15ull;
    // Steps are gradients, then the allreduce or the parameter servers, then apply: compile those.
    opts.split_step = a.data_parallel || a.parameter_servers > 0;
    auto t_compile = Clock::now();
    std::unique_ptr<TrainingSession> session = TrainingSession::create(a.model, opts);
    double compile_s = std::chrono::duration<double>(Clock::now() - t_compile).count();

    Position pos;
    if (a.resume) pos = read_position(session->load_checkpoint(checkpoint), checkpoint, a);
    std::unique_ptr<distributed::DataParallel> dp;
    if (a.data_parallel) {
        distributed::DataParallelOptions dpo = distributed::DataParallelOptions::from_env();
        if (a.bucket_mb >= 0) dpo.bucket_bytes = static_cast<size_t>(a.bucket_mb * (1 << 20));
        if (a.no_overlap) dpo.overlap = false;
        dpo.sync_batch_norm = a.sync_batch_norm;
        dpo.compute_threads = opts.session.threads;
        dp = std::make_unique<distributed::DataParallel>(distributed::Communicator::get(), *session, dpo);
        if (!a.resume) dp->broadcast_parameters();  // a resumed run: every rank loaded the same checkpoint
    }
    std::unique_ptr<distributed::ParameterServer> ps_server;
    std::unique_ptr<distributed::ParameterWorker> ps_worker;
    if (a.parameter_servers > 0) {
        distributed::ParameterServerOptions pso{a.parameter_servers, a.ps_mode == "async", a.staleness};
        distributed::Communicator& comm = distributed::Communicator::get();
        if (comm.rank() < a.parameter_servers)
            ps_server = std::make_unique<distributed::ParameterServer>(comm, *session, pso);
        else
            ps_worker = std::make_unique<distributed::ParameterWorker>(comm, *session, pso);
    }
    StepInputs step{session->batch_inputs(), a.loss == "output" ? "" : opts.loss.labels,
                    classification && loss_out.shape.size() >= 2 ? loss_out.shape[1] : 0};
    build_pipelines(a.data, step, data);
    KILN_CHECK(data.train->batches_per_epoch() == steps_per_epoch, kInternal)
        << "bug in Kiln: pipeline has " << data.train->batches_per_epoch() << " batches per epoch, expected " << steps_per_epoch;
    std::unique_ptr<MetricsCsv> csv;
    if (!a.metrics_csv.empty() && rank0)
        csv = std::make_unique<MetricsCsv>(a.metrics_csv, a.resume ? std::optional<int64_t>(pos.csv_rows) : std::nullopt);
    if (!a.checkpoint_dir.empty() && rank0) std::filesystem::create_directories(a.checkpoint_dir);

    if (a.log_every <= 0) bar.set_log_every(std::max<int64_t>(1, steps_per_epoch / 5));
    bar.print_line(data.describe);
    bar.print_line(fmt::format("model: {} ({} parameters to train), batch {}, {} steps per epoch; step compiled in {:.2f} s",
                               a.model, session->parameter_names().size(), a.data.batch_size, steps_per_epoch, compile_s));
    if (dp)
        bar.print_line(fmt::format("data-parallel: {} ranks x batch {} = {} records per step; gradient buckets of {:.3g} MB, {}",
                                   world, a.data.batch_size, global_batch,
                                   static_cast<double>(dp->options().bucket_bytes) / (1 << 20),
                                   dp->options().overlap ? "overlapped with the backward pass" : "after the backward pass"));
    if (dp && dp->options().sync_batch_norm)
        bar.print_line("data-parallel: BatchNormalization statistics over the global batch (--sync-batch-norm; the "
                       "gradient buckets then start after the backward pass)");
    if (ps_server) {
        std::string bytes;
        for (size_t b : ps_server->layout().bytes) bytes += (bytes.empty() ? "" : " ") + fmt::format("{:.3g}", static_cast<double>(b) / (1 << 20));
        bar.print_line(fmt::format("parameter servers: {} servers (MB each: {}), {} workers x batch {} = {} records per step, {}",
                                   a.parameter_servers, bytes, world, a.data.batch_size, global_batch,
                                   a.ps_mode == "async" ? fmt::format("async, staleness at most {}", a.staleness)
                                                        : std::string("sync")));
    }
    if (a.resume)
        bar.print_line(fmt::format("resumed from {}: epoch {}, batch {}/{}, step {}", checkpoint, pos.epoch + 1, pos.batch,
                                   steps_per_epoch, session->step()));

    auto save = [&] {
        if (checkpoint.empty() || !rank0) return;
        if (csv) pos.csv_rows = csv->rows();
        session->save_checkpoint(checkpoint, position_extra(pos, a));
    };
    const int64_t total_steps = steps_per_epoch * a.epochs;
    std::vector<double> dp_backward, dp_wait;  // per data-parallel step: seconds
    int dp_overlapped = 0;
    int64_t run_steps = 0;
    double train_seconds = 0;
    if (ps_server) {
        train_seconds = serve_parameters(*ps_server, a, opts, steps_per_epoch, csv.get(), bar, pos);
        run_steps = total_steps;
    }
    for (; pos.epoch < a.epochs; ++pos.epoch, pos.batch = 0) {
        auto epoch_start = Clock::now();
        int64_t epoch_samples = 0;
        double samples_per_s = 0;
        // A checkpoint taken after the epoch's last step resumes straight at its evaluation.
        if (pos.batch < steps_per_epoch) data.train->start_epoch(pos.epoch, pos.batch);
        while (auto batch = pos.batch < steps_per_epoch ? data.train->next() : std::nullopt) {
            std::map<std::string, Tensor> inputs = step_batch(*batch, data, step);
            double lr = opts.schedule.at(session->step(), a.lr);
            const double loss = dp ? dp->step(inputs) : ps_worker ? ps_worker->step(inputs) : session->train_step(inputs).loss;
            if (dp) {
                dp_backward.push_back(dp->last_step_stats().backward_s);
                dp_wait.push_back(dp->last_step_stats().wait_s);
                dp_overlapped += dp->last_step_stats().started_during_backward;
            }
            KILN_CHECK(std::isfinite(loss), kInvalidArgument)
                << "the training loss is " << loss << " at step " << session->step()
                << " (epoch " << pos.epoch + 1 << ", batch " << pos.batch + 1 << "): lower --lr or use --clip-norm";
            ++pos.batch;
            ++run_steps;
            epoch_samples += global_batch;
            pos.ema = kSmoothing * pos.ema + (1 - kSmoothing) * loss;
            ++pos.ema_steps;
            double elapsed = std::chrono::duration<double>(Clock::now() - epoch_start).count();
            samples_per_s = elapsed > 0 ? static_cast<double>(epoch_samples) / elapsed : 0;
            double per_step = (train_seconds + elapsed) / static_cast<double>(run_steps);
            if (csv) csv->row(pos.epoch + 1, session->step(), loss, std::nullopt, std::nullopt, lr, samples_per_s);
            bar.update({pos.epoch, a.epochs, pos.batch, steps_per_epoch, session->step(),
                        pos.ema / (1 - std::pow(kSmoothing, static_cast<double>(pos.ema_steps))), lr, samples_per_s,
                        per_step * static_cast<double>(total_steps - session->step())});
            if (a.checkpoint_every > 0 && session->step() % a.checkpoint_every == 0) save();
        }
        train_seconds += std::chrono::duration<double>(Clock::now() - epoch_start).count();
        if (data.eval) {
            EvalResult e = evaluate(*session, data, step, a.loss, output_index);
            std::string acc = e.accuracy >= 0 ? fmt::format("  accuracy {:.2f}%", 100 * e.accuracy) : "";
            bar.print_line(fmt::format("epoch {}/{} eval: loss {:.4f}{} ({} records)", pos.epoch + 1, a.epochs, e.loss, acc,
                                       e.records));
            if (csv)
                csv->row(pos.epoch + 1, session->step(), std::nullopt, e.loss,
                         e.accuracy >= 0 ? std::optional<double>(e.accuracy) : std::nullopt,
                         opts.schedule.at(std::max<int64_t>(0, session->step() - 1), a.lr), samples_per_s);
        }
        // The epoch's end: the next run starts the next epoch at its first batch.
        Position next = pos;
        ++pos.epoch, pos.batch = 0;
        save();
        pos = next;
    }
    if (ps_worker) ps_worker->finish();  // the final weights
    bar.finish();
    if (rank0)
        fmt::print(stderr, "trained {} steps in {:.2f} s ({:.0f} samples/s)\n", run_steps, train_seconds,
                   train_seconds > 0 ? static_cast<double>(run_steps * global_batch) / train_seconds : 0.0);
    if (rank0 && !dp_wait.empty()) {
        auto median = [](std::vector<double> v) {
            std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
            return v[v.size() / 2];
        };
        fmt::print(stderr,
                   "data-parallel on rank 0, per step (median): gradients {:.1f} ms, then waiting for the allreduces "
                   "{:.1f} ms; {} buckets, {:.1f} per step started during the backward pass\n",
                   1e3 * median(dp_backward), 1e3 * median(dp_wait), dp->last_step_stats().buckets,
                   static_cast<double>(dp_overlapped) / static_cast<double>(dp_wait.size()));
    }
    if (ps_server && rank0) {
        const distributed::ParameterServerStats& s = ps_server->stats();
        fmt::print(stderr, "parameter server rank 0: {} updates; waiting for gradients {:.2f} s, optimizer {:.2f} s", s.updates,
                   s.wait_s, s.apply_s);
        if (a.ps_mode == "async")
            fmt::print(stderr, "; largest lead of a worker over the slowest {} (bound {}), {} pulls held back", s.max_lead,
                       a.staleness, s.held_back);
        fmt::print(stderr, "\n");
    }
    if (ps_worker && ps_worker->layout().worker_index(a.rank) == 0) {
        const distributed::ParameterWorkerStats& s = ps_worker->stats();
        fmt::print(stderr, "parameter-server worker rank {}: {} steps; per step, pulling weights {:.1f} ms, gradients {:.1f} ms; "
                   "largest staleness {}\n", a.rank, s.steps, 1e3 * s.pull_s / static_cast<double>(std::max<int64_t>(1, s.steps + 1)),
                   1e3 * s.gradients_s / static_cast<double>(std::max<int64_t>(1, s.steps)), s.max_staleness);
    }
    if (!a.export_path.empty() && rank0) {
        session->export_onnx(a.export_path);
        fmt::print(stderr, "wrote {}\n", a.export_path);
    }
    return 0;
}

/// The combinations --pipeline-parallel does not take, refused by name.
void check_pipeline_combinations(const TrainArgs& a) {
    if (!a.pipeline_parallel) {
        const char* option = a.microbatches != 1           ? "--microbatches"
                             : !a.stages.empty()              ? "--stage"
                             : a.rematerialize                ? "--rematerialize"
                             : a.pipeline_schedule != "gpipe" ? "--pipeline-schedule"
                             : a.pipeline_stages != 0         ? "--pipeline-stages"
                             : a.dispatch != "replicated"     ? "--dispatch"
                                                              : nullptr;
        KILN_CHECK(option == nullptr, kInvalidArgument) << option << " goes with --pipeline-parallel";
        return;
    }
    KILN_CHECK(a.parameter_servers == 0, kUnsupported)
        << "--pipeline-parallel cannot be combined with --parameter-servers: each rank holds one stage of the model, "
           "not a replica of it";
    if (!a.data_parallel) return;
    KILN_CHECK(a.pipeline_stages > 0, kInvalidArgument)
        << "--pipeline-parallel with --data-parallel needs --pipeline-stages S: the job's ranks are S stages x "
           "(ranks / S) data-parallel replicas";
    KILN_CHECK(!a.sync_batch_norm, kUnsupported)
        << "--sync-batch-norm does not go with --pipeline-parallel: the pipeline refuses BatchNormalization (its "
           "statistics would be a microbatch's)";
}

int train(TrainArgs a) {
    check_pipeline_combinations(a);
    distributed::Communicator* comm = nullptr;
    if (a.data_parallel || a.parameter_servers > 0 || a.pipeline_parallel) {
        comm = &distributed::Communicator::get();
        a.rank = comm->rank();
        // Pipeline-parallel: every rank reads the whole global batch (each feeds its stage); with
        // --data-parallel, its replica's slice (train_pipeline sets it once the ranks are grouped).
        a.data.shard_count = a.pipeline_parallel ? 1 : comm->size();
        a.data.shard_index = a.pipeline_parallel ? 0 : comm->rank();
    }
    if (a.parameter_servers > 0) {  // the workers share the data; a server reads none (train_run checks S < N)
        a.data.shard_count = comm->size() - a.parameter_servers;
        a.data.shard_index = std::max(0, comm->rank() - a.parameter_servers);
    }
    bool tty = ProgressBar::stderr_is_tty();
    ProgressBar bar(tty, a.log_every);
    bar.set_quiet(a.rank != 0);
    try {
        int rc = a.pipeline_parallel ? train_pipeline(a, bar) : train_run(a, bar);
        if (comm) comm->finalize();
        return rc;
    } catch (const std::exception& e) {
        bar.finish();  // the error message starts on a line of its own
        // A rank that fails alone would leave its peers waiting in the next collective.
        if (comm && comm->size() > 1) comm->abort(1, e.what());
        throw;
    }
}

}  // namespace

void add_train_command(CLI::App& app, CommandAction& action) {
    auto a = std::make_shared<TrainArgs>();
    CLI::App* sub = app.add_subcommand("train", "Train an ONNX model's float initializers on a data set (docs/training.md)");
    sub->add_option("model", a->model, "ONNX model file (its initializers are the starting weights)")->required();
    sub->add_option("--data", a->data.data, "Training records: .npz, .npy, .csv, or an image directory with labels.txt")
        ->required();
    sub->add_option("--eval-data", a->data.eval_data, "Held-out records, evaluated after each epoch");
    sub->add_option("--eval-split", a->data.eval_split, "Hold out the last FRACTION of --data's records (as stored) instead")
        ->type_name("FRACTION")
        ->excludes(sub->get_option("--eval-data"));
    sub->add_option("--input-name", a->data.input_name, "Data field feeding the model's first input (default: same name, or the one field left)");
    sub->add_option("--label-name", a->data.label_name, "Data field holding the labels (default: labels, label or y)");
    sub->add_option("--loss", a->loss, "Loss: cross_entropy (logits vs class labels), nll (log-probabilities), mse, or output (the model output is the loss)")
        ->capture_default_str()
        ->check(CLI::IsMember({"cross_entropy", "nll", "mse", "output"}));
    sub->add_option("--loss-output", a->loss_output, "Model output the loss reads (default: the first)");
    sub->add_option("--optimizer", a->optimizer, "sgd, momentum, nesterov, adam or adamw")
        ->capture_default_str()
        ->check(CLI::IsMember({"sgd", "momentum", "nesterov", "adam", "adamw"}));
    sub->add_option("--lr", a->lr, "Base learning rate")->capture_default_str();
    sub->add_option("--momentum", a->momentum, "Momentum of sgd/momentum/nesterov (default 0.9 for momentum and nesterov)");
    sub->add_option("--weight-decay", a->weight_decay, "L2 penalty (sgd, adam) or decoupled decay (adamw)")->capture_default_str();
    sub->add_option("--clip-norm", a->clip_norm, "Clip gradients to this global L2 norm (0: off)")->capture_default_str();
    sub->add_option("--schedule", a->schedule.kind, "Learning-rate schedule: constant, step, cosine")
        ->capture_default_str()
        ->check(CLI::IsMember({"constant", "step", "cosine"}));
    sub->add_option("--warmup", a->schedule.warmup_steps, "Linear warm-up steps")->capture_default_str();
    sub->add_option("--step-size", a->schedule.step_size, "step schedule: steps between decays")->capture_default_str()->check(CLI::PositiveNumber);
    sub->add_option("--gamma", a->schedule.gamma, "step schedule: decay factor")->capture_default_str();
    sub->add_option("--min-lr", a->schedule.min_lr, "cosine schedule: final learning rate")->capture_default_str();
    sub->add_option("--batch-size", a->data.batch_size, "Records per step (binds the model's batch dimension)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_option("--epochs", a->epochs, "Passes over --data")->capture_default_str()->check(CLI::PositiveNumber);
    sub->add_option("--dim", a->dims, "Value of another symbolic dimension (repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false)
        ->check(name_value_check(true));
    sub->add_option("--threads", a->threads, "Intra-op threads (0: all cores)")->capture_default_str();
    add_kernels_option(sub, a->kernels);
    sub->add_option("--recompute", a->recompute, "Activation recomputation: none, sqrt, auto (fit --memory-limit)")
        ->capture_default_str()
        ->check(CLI::IsMember({"none", "sqrt", "auto"}));
    sub->add_option("--memory-limit", a->memory_limit, "Memory budget of --recompute auto (bytes; K, M, G suffixes)")->type_name("BYTES");
    sub->add_option("--seed", a->data.seed, "Seed of the shuffle, the augmentations and dropout")->capture_default_str();
    sub->add_flag("--shuffle,!--no-shuffle", a->data.shuffle, "Shuffle the records each epoch (default: on)");
    sub->add_option("--checkpoint-dir", a->checkpoint_dir, "Write DIR/checkpoint.kiln at each epoch's end (and every --checkpoint-every steps)");
    sub->add_option("--checkpoint-every", a->checkpoint_every, "Also checkpoint every STEPS optimizer steps")->type_name("STEPS")->check(CLI::NonNegativeNumber);
    sub->add_flag("--resume", a->resume, "Continue from DIR/checkpoint.kiln at its exact batch (an error when there is none)");
    sub->add_option("--export", a->export_path, "Write the trained model as ONNX")->type_name("OUT.onnx");
    sub->add_option("--metrics-csv", a->metrics_csv, "Write per-step and per-epoch metrics (continued by --resume)")->type_name("FILE");
    sub->add_option("--log-every", a->log_every, "Print a progress line every N steps when stderr is not a terminal (default: 5 per epoch)")
        ->type_name("N");
    sub->add_flag("--data-parallel", a->data_parallel,
                  "Train data-parallel over the ranks of mpirun: each rank takes its slice of every global batch of "
                  "ranks x --batch-size records; gradients are averaged (docs/distributed.md)");
    sub->add_option("--bucket-mb", a->bucket_mb,
                    "--data-parallel: megabytes of gradients per allreduce (default 4, or KILN_DIST_BUCKET_MB); smaller "
                    "buckets start earlier in the backward pass")
        ->type_name("MB")
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--no-overlap", a->no_overlap,
                  "--data-parallel: start the gradient allreduces after the backward pass instead of during it (with "
                  "--pipeline-parallel: after each stage's last backward)");
    sub->add_flag("--sync-batch-norm", a->sync_batch_norm,
                  "--data-parallel: BatchNormalization normalizes with the global batch's statistics (every rank's, "
                  "as PyTorch's SyncBatchNorm) instead of each rank's own")
        ->needs("--data-parallel");
    auto* ps = sub->add_option("--parameter-servers", a->parameter_servers,
                               "Train with parameter servers over the ranks of mpirun: ranks 0..S-1 hold the weights "
                               "and the optimizer, the others compute gradients on their slice of each global batch "
                               "(docs/distributed.md)")
                   ->type_name("S")
                   ->check(CLI::PositiveNumber)
                   ->excludes("--data-parallel");
    sub->add_option("--ps-mode", a->ps_mode,
                    "--parameter-servers: sync (the workers' mean gradient, one update per step) or async (each "
                    "worker's gradient applied as it arrives)")
        ->capture_default_str()
        ->check(CLI::IsMember({"sync", "async"}))
        ->needs(ps);
    sub->add_option("--staleness", a->staleness,
                    "--ps-mode async: the most steps a worker may run ahead of the slowest worker's last applied step")
        ->type_name("K")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber)
        ->needs(ps);
    sub->add_flag("--pipeline-parallel", a->pipeline_parallel,
                  "Train pipeline-parallel over the ranks of mpirun: the model split into one stage per rank, each "
                  "--batch-size batch cut into --microbatches, GPipe's schedule (docs/distributed.md)");
    sub->add_option("--pipeline-stages", a->pipeline_stages,
                    "--pipeline-parallel: stages per pipeline (default: every rank); with --data-parallel the ranks "
                    "are S stages x (ranks / S) replicas, each on its slice of every global batch of replicas x "
                    "--batch-size records, each stage's gradients averaged over its replicas")
        ->type_name("S")
        ->check(CLI::PositiveNumber);
    sub->add_option("--microbatches", a->microbatches,
                    "--pipeline-parallel: microbatches per step (must divide --batch-size)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    sub->add_flag("--rematerialize", a->rematerialize,
                  "--pipeline-parallel: each stage's backward recomputes its forward (GPipe's re-materialisation) "
                  "instead of keeping every microbatch's forward values until its backward");
    sub->add_option("--pipeline-schedule", a->pipeline_schedule,
                    "--pipeline-parallel: gpipe (every forward, then every backward) or 1f1b (a forward and a "
                    "backward in turn: at most ranks, not --microbatches, microbatches' activations held)")
        ->capture_default_str()
        ->check(CLI::IsMember({"gpipe", "1f1b"}));
    sub->add_option("--dispatch", a->dispatch,
                    "--pipeline-parallel: replicated (every rank reads the model and the data and builds its stage) or "
                    "master (rank 0 builds every stage and ships it, feeds the stages and orders each step; the other "
                    "ranks read no file)")
        ->capture_default_str()
        ->check(CLI::IsMember({"replicated", "master"}));
    sub->add_option("--stage", a->stages,
                    "--pipeline-parallel: place nodes of the model on ranks (NODE=RANK,...; the nodes after one follow "
                    "it); else a cost-balanced split")
        ->type_name("NODE=RANK");
    sub->add_option("--normalize", a->data.normalize, "Map the input field x to (x - MEAN) / STD (per channel: M1,..,Mc,S1,..,Sc)")->type_name("MEAN,STD")->delimiter(',');
    sub->add_option("--random-crop", a->data.random_crop, "Pad the input's last two axes by PAD, cut a random HxW window")
        ->type_name("H,W,PAD")
        ->delimiter(',');
    sub->add_flag("--random-flip", a->data.random_flip, "Mirror the input's last axis with probability 1/2");
    sub->callback([a, &action] { action = [a] { return train(*a); }; });
}

}  // namespace kiln::cli
