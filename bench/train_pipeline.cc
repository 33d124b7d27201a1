// The input pipeline's overlap with training (issue 14's target): with a map stage that costs
// as much as a step, the pipelined step time is at most 1.15x the compute-only step time.
//
//   build/bin/kiln-bench-train-pipeline [--steps 40] [--rounds 3] [--smoke]
//
// The model: the digits CNN (models/digits/digits_cnn.onnx) trained with SGD at batch 64 on
// one intra-op thread; the map stage runs on one pipeline worker (the machine has 2 cores: one
// computes, one prepares). Compute-only: train_step on one fixed batch, repeated. Pipelined:
// the same steps fed by data::Pipeline, whose map stage spins for (compute-only step time /
// batch) of its thread's CPU time per record, so preparing a batch costs as much as a step.
// Rounds alternate the two; medians and the ratio are printed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "data/pipeline.h"
#include "kiln/training.h"

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kBatch = 64;
volatile double g_sink;

double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/// Busy work for `seconds` of this thread's CPU time (a decode/augment stand-in).
void spin(double seconds) {
    const double t0 = thread_cpu_seconds();
    double x = 0;
    while (thread_cpu_seconds() - t0 < seconds)
        for (int i = 0; i < 200; ++i) x += i * 1e-9;
    g_sink = x;
}

/// Random 8x8 images with labels.
class DigitsLike : public data::Source {
public:
    int64_t size() const override { return 1 << 16; }
    data::Example get(int64_t i) const override {
        Tensor img(DType::kFloat32, {1, 8, 8});
        for (int k = 0; k < 64; ++k) img.data_as<float>()[k] = static_cast<float>((i * 31 + k * 7) % 17) / 17.0f;
        Tensor label(DType::kInt64, {});
        label.data_as<int64_t>()[0] = i % 10;
        return {{"image", img}, {"labels", label}};
    }
    std::string describe() const override { return "synthetic 8x8 digits"; }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int steps = 40, rounds = 3;
    bool smoke = false;
    std::string model = std::string(KILN_SOURCE_DIR) + "/models/digits/digits_cnn.onnx";
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--smoke")) smoke = true;
        else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else { std::fprintf(stderr, "usage: %s [--steps N] [--rounds R] [--model M] [--smoke]\n", argv[0]); return 2; }
    }
    if (smoke) steps = 3, rounds = 1;
    try {
        TrainingOptions o;
        o.session.threads = 1;
        o.session.dims = {{"N", kBatch}};
        o.optimizer.kind = "sgd";
        o.optimizer.lr = 0.01;
        auto session = TrainingSession::create(model, o);
        auto source = std::make_shared<DigitsLike>();
        data::Batch fixed;
        {
            data::Pipeline p(source, {.batch_size = kBatch, .map_threads = 1});
            p.start_epoch(0);
            fixed = *p.next();
        }
        for (int w = 0; w < 3; ++w) session->train_step(fixed);  // warm: compile, caches
        std::vector<double> compute, piped;
        for (int r = 0; r < rounds; ++r) {
            auto t0 = Clock::now();
            for (int s = 0; s < steps; ++s) session->train_step(fixed);
            const double step = std::chrono::duration<double>(Clock::now() - t0).count() / steps;
            compute.push_back(step);

            data::Pipeline p(source, {.batch_size = kBatch, .shuffle = true, .seed = 1, .prefetch = 2, .map_threads = 1});
            const double per_record = step / kBatch;
            p.map([per_record](data::Example&, data::Rng&) { spin(per_record); });
            p.start_epoch(r);
            session->train_step(*p.next());  // the first batch has nothing to overlap with
            t0 = Clock::now();
            for (int s = 0; s < steps; ++s) session->train_step(*p.next());
            piped.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / steps);
        }
        const double c = median(compute), q = median(piped);
        std::printf("digits CNN, batch %lld, 1 compute thread + 1 pipeline worker, %d steps x %d rounds (medians)\n",
                    static_cast<long long>(kBatch), steps, rounds);
        std::printf("compute-only step %.2f ms; pipelined step (map stage = one step of work) %.2f ms; ratio %.3f%s\n",
                    c * 1e3, q * 1e3, q / c, smoke ? " (smoke: too few steps to time; not compared)" : " (target <= 1.15)");
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
