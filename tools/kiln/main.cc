// Entry point of the `kiln` command-line program: builds the CLI11 app, parses, runs the chosen
// subcommand. Exit codes: 0 success, 1 a kiln::Error or other failure while working ("error: ..."
// on stderr), 2 a command-line usage error (CLI11's message and the usage text).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>

#include "commands.h"
#include "support/error.h"

#ifndef KILN_VERSION
#define KILN_VERSION "unknown"
#endif

namespace {

int run_main(int argc, char** argv) {
    CLI::App app{"kiln: compile and run ONNX models", "kiln"};
    app.set_version_flag("--version",
                         std::string("kiln " KILN_VERSION) + (KILN_HAVE_DNNL ? " (oneDNN kernels)" : " (no oneDNN)"),
                         "Print the version and exit");
    app.require_subcommand(1);
    app.failure_message(CLI::FailureMessage::help);

    kiln::cli::CommandAction action;
    kiln::cli::add_run_command(app, action);
    kiln::cli::add_compile_command(app, action);
    kiln::cli::add_inspect_command(app, action);
    kiln::cli::add_ops_command(app, action);
    kiln::cli::add_test_onnx_command(app, action);
    kiln::cli::add_tune_command(app, action);
    kiln::cli::add_rpc_server_command(app, action);
    kiln::cli::add_serve_command(app, action);
    kiln::cli::add_train_command(app, action);
    kiln::cli::add_quantize_command(app, action);
    for (CLI::App* sub : app.get_subcommands({})) sub->failure_message(CLI::FailureMessage::help);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int rc = app.exit(e);
        return rc == 0 ? 0 : 2;
    }
    if (!action) return 0;
    return action();
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run_main(argc, argv);
    } catch (const kiln::Error& e) {
        std::fflush(stdout);
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        fmt::print(stderr, "error: {}\n", e.what());
        return 1;
    }
}
