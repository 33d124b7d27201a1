// The device-placement options of `kiln run --device cuda` and `kiln inspect --place cuda`:
// pins by node name and by op type, and whether the cost model places the rest
// (pass/place_devices.h, compiler/cuda_compile.h).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "compiler/cuda_compile.h"

namespace kiln::cli {

struct DevicePlacementArgs {
    std::vector<std::string> pins;     // NODE=DEVICE,...
    std::vector<std::string> op_pins;  // OP=DEVICE,...
    bool by_cost = false;
};

void add_device_placement_options(CLI::App* sub, DevicePlacementArgs& args);

/// kInvalidArgument names a malformed pin.
void apply_device_placement(const DevicePlacementArgs& args, compiler::CudaCompileOptions& opts);

}  // namespace kiln::cli
