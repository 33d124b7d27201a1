// `kiln quantize MODEL.onnx -o MODEL.int8.onnx --calibration DATA [--method minmax|percentile|entropy]
// [--per-tensor] [--activation-type uint8|int8] [--symmetric-activations] [--exclude NODE,...]
// [--report FILE.json] [--quiet]` (or `--dynamic`: int8 MatMul weights, no calibration): post-training static quantization (docs/quantization.md):
// calibrates the fp32 model on DATA in Kiln, writes a QDQ model that Kiln's int8 kernels and
// ONNX Runtime run, and prints each quantized layer's range, scale and error against fp32.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "kiln/quantize.h"
#include "name_value_args.h"
#include "runtime/cpu_features.h"
#include "runtime/extern_kernel.h"
#include "support/error.h"

namespace kiln::cli {
namespace {

struct QuantizeArgs {
    std::string model, output, calibration, method = "minmax", activation_type = "uint8", report_path;
    double percentile = 99.999;
    bool per_tensor = false, symmetric = false, quiet = false, no_report = false, dynamic = false;
    std::vector<std::string> exclude, op_types, dims;
    int threads = 0;
};

CalibrationMethod parse_method(const std::string& m) {
    if (m == "percentile") return CalibrationMethod::kPercentile;
    if (m == "entropy") return CalibrationMethod::kEntropy;
    return CalibrationMethod::kMinMax;
}

int quantize(const QuantizeArgs& a) {
    QuantizeOptions o;
    o.method = parse_method(a.method);
    o.percentile = a.percentile;
    o.per_channel = !a.per_tensor;
    o.activation_type = a.activation_type == "int8" ? DType::kInt8 : DType::kUInt8;
    o.activation_symmetric = a.symmetric;
    o.exclude = a.exclude;
    if (!a.op_types.empty()) o.op_types = a.op_types;
    o.report = !a.no_report;
    o.threads = a.threads;
    o.dims = parse_dims(a.dims);
    if (a.dynamic) {
        const int n = quantize_dynamic_model(a.model, a.output, o);
        fmt::print("{} MatMuls with int8 weights, activations quantized at run time\nwrote {}\n", n, a.output);
        // With oneDNN each MatMulInteger and its rescale run as one int8 matmul (dnnl_dqmatmul);
        // without, as a generated integer loop (docs/quantization.md: 3.7x slower than fp32 on an FFN).
        if (n > 0 && !runtime::have_dnnl())
            fmt::print("note: this build has no oneDNN: Kiln runs MatMulInteger as a generated integer loop, slower "
                       "than its fp32 MatMul; the file is for runtimes with fast dynamic int8, or for its size\n");
        return 0;
    }
    KILN_CHECK(!a.calibration.empty(), kInvalidArgument) << "--calibration DATA is required (or --dynamic)";
    std::vector<CalibrationBatch> batches = read_calibration_data(a.calibration, a.model, o.dims);
    QuantizeReport r = quantize_model(a.model, a.output, batches, o);
    if (!a.quiet) fmt::print("{}", r.table());
    fmt::print("wrote {}\n", a.output);
    if (!runtime::host_has_int8_dot_product())
        fmt::print("note: this CPU has no int8 dot product (VNNI): int8 convolutions and products run on 16-bit "
                   "multiply-adds here and are often no faster than fp32; time both models (kiln run) before "
                   "choosing int8 for this machine\n");
    if (!a.report_path.empty()) {
        std::ofstream f(a.report_path);
        f << r.json();
        KILN_CHECK(f.good(), kIOError) << "cannot write the report '" << a.report_path << "'";
    }
    return 0;
}

}  // namespace

void add_quantize_command(CLI::App& app, CommandAction& action) {
    auto a = std::make_shared<QuantizeArgs>();
    CLI::App* sub = app.add_subcommand(
        "quantize", "Calibrate a model and write it quantized to int8 (QDQ ONNX, as ONNX Runtime's quantize_static)");
    sub->add_option("model", a->model, "fp32 ONNX model")->required()->check(CLI::ExistingFile);
    sub->add_option("-o,--output", a->output, "The QDQ model to write")->type_name("OUT.onnx")->required();
    sub->add_option("--calibration", a->calibration,
                    "Calibration inputs: an .npz (arrays named by input; a leading dim stacks batches) or a "
                    "directory of .npz / .npy files, one batch each (required unless --dynamic)")
        ->type_name("DATA");
    sub->add_flag("--dynamic", a->dynamic,
                  "Dynamic quantization: int8 MatMul weights, activations quantized at run time; no calibration");
    sub->add_option("--method", a->method, "How activation ranges are chosen")
        ->capture_default_str()
        ->check(CLI::IsMember({"minmax", "percentile", "entropy"}));
    sub->add_option("--percentile", a->percentile, "Percentile kept by --method percentile")->capture_default_str();
    sub->add_flag("--per-tensor", a->per_tensor, "One weight scale per tensor (default: per output channel)");
    sub->add_option("--activation-type", a->activation_type, "Quantized activation type")
        ->capture_default_str()
        ->check(CLI::IsMember({"uint8", "int8"}));
    sub->add_flag("--symmetric-activations", a->symmetric, "Zero point 0 for activations (int8 only)");
    sub->add_option("--exclude", a->exclude, "Node names or op types to leave in float")
        ->delimiter(',')
        ->type_name("NODE,...");
    sub->add_option("--op-types", a->op_types, "Op types to quantize (default Conv,MatMul,Gemm,Add,MaxPool)")
        ->delimiter(',')
        ->type_name("OP,...");
    sub->add_option("--report", a->report_path, "Write the per-layer report as JSON")->type_name("FILE.json");
    sub->add_flag("--no-error-report", a->no_report, "Skip measuring each layer's error (one run per batch less)");
    sub->add_flag("-q,--quiet", a->quiet, "Do not print the per-layer table");
    sub->add_option("--threads", a->threads, "Intra-op threads of the calibration runs (0 = all cores)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--dim", a->dims, "Value of a symbolic dimension (repeatable)")
        ->type_name("NAME=VALUE")
        ->allow_extra_args(false)
        ->check(name_value_check(true));
    sub->callback([a, &action] { action = [a] { return quantize(*a); }; });
}

}  // namespace kiln::cli
