// kiln-run-artifact: runs a compiled `.kiln` artifact with libkiln_runtime alone (no compiler,
// no ONNX): inputs from .npy files (or seeded random data), outputs written as .npy.
//
//   kiln-run-artifact MODEL.kiln [--input NAME=FILE.npy]... [--output-dir DIR] [--repeat N]
//                     [--threads N] [--seed S]
//
// Prints "load_ms=<x>" (Session::load), "run_ms=<x>" (median over the runs) and one line per
// output; writes DIR/<name>.npy per output (name made file-safe like `kiln run` does).
// Exit status: 0, 1 on an error (message on stderr), 2 on a usage error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "../kiln/name_value_args.h"
#include "../kiln/random_inputs.h"
#include "kiln/session.h"
#include "support/npy.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

struct Args {
    std::string model;
    std::vector<std::string> inputs;
    std::string output_dir;
    int repeat = 1;
    int threads = 0;
    uint64_t seed = 0;
};

int run(const Args& args) {
    kiln::SessionOptions opts;
    opts.threads = args.threads;
    auto t0 = Clock::now();
    std::unique_ptr<kiln::Session> session = kiln::Session::load(args.model, opts);
    std::cout << "load_ms=" << ms_since(t0) << "\n";

    std::map<std::string, kiln::Tensor> given;
    for (const std::string& arg : args.inputs) {
        auto [name, path] = kiln::cli::split_name_value(arg, "--input");
        given[name] = kiln::read_npy(path);
    }
    kiln::cli::RandomInputs random(args.seed);
    for (const kiln::TensorInfo& info : session->inputs())
        if (!given.count(info.name)) given[info.name] = random.make(info.dtype, kiln::cli::resolve_input_shape(info, {}));

    std::vector<kiln::Tensor> outputs;
    std::vector<double> times;
    for (int r = 0; r < args.repeat; ++r) {
        auto t = Clock::now();
        outputs = session->run(given);
        times.push_back(ms_since(t));
    }
    std::sort(times.begin(), times.end());
    std::cout << "run_ms=" << times[times.size() / 2] << "\n";

    const std::vector<kiln::TensorInfo>& infos = session->outputs();
    if (!args.output_dir.empty()) std::filesystem::create_directories(args.output_dir);
    std::set<std::string> used;
    for (size_t i = 0; i < outputs.size(); ++i) {
        std::cout << "output " << infos[i].name << ": " << kiln::dtype_name(outputs[i].dtype())
                  << kiln::shape_str(outputs[i].shape()) << "\n";
        if (args.output_dir.empty()) continue;
        std::string file = kiln::cli::sanitize_file_name(infos[i].name);
        if (!used.insert(file).second) file += "_" + std::to_string(i);
        const std::string path = (std::filesystem::path(args.output_dir) / (file + ".npy")).string();
        kiln::write_npy(path, outputs[i]);
        std::cout << "wrote " << path << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Runs a compiled Kiln artifact (.kiln) with libkiln_runtime"};
    Args args;
    app.add_option("model", args.model, "The .kiln artifact (kiln compile)")->required();
    app.add_option("--input", args.inputs, "Input from a .npy file (repeatable); others are random")
        ->type_name("NAME=FILE.npy")
        ->check(kiln::cli::name_value_check(false));
    app.add_option("--output-dir", args.output_dir, "Write each output to DIR/<name>.npy");
    app.add_option("--repeat", args.repeat, "Runs to time (run_ms is their median)")->check(CLI::PositiveNumber);
    app.add_option("--threads", args.threads, "Intra-op threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    app.add_option("--seed", args.seed, "Seed of the random inputs");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;  // --help: 0; a usage error: 2 (CLI11's own codes vary)
    }
    try {
        return run(args);
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 1;
    }
}
