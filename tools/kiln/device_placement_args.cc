#include "device_placement_args.h"

namespace kiln::cli {

void add_device_placement_options(CLI::App* sub, DevicePlacementArgs& args) {
    sub->add_option("--pin", args.pins, "With --device cuda / --place cuda: compute these nodes on a device (cpu or cuda)")
        ->type_name("NODE=DEVICE,...")
        ->allow_extra_args(false);
    sub->add_option("--pin-op", args.op_pins, "With --device cuda / --place cuda: compute every node of these ops on a device")
        ->type_name("OP=DEVICE,...")
        ->allow_extra_args(false);
    sub->add_flag("--place-by-cost", args.by_cost,
                  "With --device cuda / --place cuda: place the nodes no pin or rule places by the cost model (kernel "
                  "estimate + copies) instead of on the GPU");
}

void apply_device_placement(const DevicePlacementArgs& args, compiler::CudaCompileOptions& opts) {
    opts.pins = pass::parse_device_pins(args.pins);
    opts.op_pins = pass::parse_device_pins(args.op_pins);
    opts.place_by_cost = args.by_cost;
}

}  // namespace kiln::cli
