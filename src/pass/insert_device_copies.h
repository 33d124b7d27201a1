// insert_device_copies: makes a placement (pass/place_devices.h) explicit in the graph. Every
// value read on a device other than the one holding it gets one KilnDeviceCopy to that device,
// shared by all its readers there (TensorFlow's one Recv per tensor and destination); a model
// output computed off the host is copied to the host under the output's name (the value it
// copies is renamed NAME/<device>). Every node's device, copies included, is written into its
// kiln.device attribute, so the printed IR shows the placement. Model inputs are on the host;
// constants are on every device and never copied.
#pragma once

#include "pass/place_devices.h"

namespace kiln::pass {

/// The number of copies inserted.
int insert_device_copies(ir::Graph& g, const Placement& p);

}  // namespace kiln::pass
