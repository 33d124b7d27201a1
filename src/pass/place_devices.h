// place_devices: which device computes each node of a graph (DESIGN.md's "place" step; the
// single-machine form of the distributed partition). In order of precedence:
//  1. pins: the user's (PlacementOptions::pins by node name, op_pins by op type), else the
//     node's kiln.device attribute ("cpu" / "cuda");
//  2. rules: a node with no kernel for the target device goes to the CPU (has_kernel); a small
//     shape computation (integer results of at most host_shape_elements elements, read from
//     such values or from shapes) stays on the host, where its readers use it as a value;
//  3. the cost model: every other node where its kernel's estimate plus the copies it causes
//     (inputs held by the other device, outputs read there) is smallest. A greedy walk in
//     topological order, then sweeps that move one node at a time while the total estimate
//     falls (the walk cannot see that a cheap node between two GPU nodes saves two copies).
// A fusion group (ir::Node::group) is placed whole, since its kernel unit runs on one device;
// pins that disagree inside a group are a kInvalidArgument naming both nodes. The model's
// inputs arrive on the host and its outputs leave from it; constants live on every device
// (uploaded once, never copied per run).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace kiln::pass {

enum class Device { kCpu, kCuda };
const char* device_name(Device d);  // "cpu", "cuda"
/// "cpu" | "cuda"; kInvalidArgument naming `what` otherwise.
Device parse_device(const std::string& s, const std::string& what = "device");

/// The node attribute that pins a node (IR text: `{kiln.device="cpu"}`); insert_device_copies
/// writes every node's placement into it.
inline constexpr const char* kDeviceAttr = "kiln.device";

/// Seconds a placement costs: kernels on each device and the copies between host and device.
class DeviceCostModel {
public:
    virtual ~DeviceCostModel() = default;
    /// One kernel computing `nodes` (a fusion group, or one node) on `d`.
    virtual double kernel_seconds(const std::vector<const ir::Node*>& nodes, Device d) const = 0;
    /// Copying `bytes` between the host and the device, either way.
    virtual double copy_seconds(int64_t bytes) const = 0;
};

struct DeviceRates {
    double flops = 0;   // FLOP/s a kernel reaches
    double bytes = 0;   // bytes/s of memory traffic
    double launch = 0;  // seconds per kernel besides its work
};

/// max(flops / rate, bytes / rate) + launch per kernel (op/node_cost.h's work; a fusion group's
/// bytes are those crossing its boundary), and latency + bytes / rate per copy.
class RooflineCostModel : public DeviceCostModel {
public:
    RooflineCostModel(DeviceRates cpu, DeviceRates cuda, double link_bytes_per_second, double link_latency);
    /// Orders of magnitude, not a measurement: two CPU cores against an H100-class GPU over
    /// PCIe 5 (docs/gpu.md, "Placement").
    static RooflineCostModel nominal();
    double kernel_seconds(const std::vector<const ir::Node*>& nodes, Device d) const override;
    double copy_seconds(int64_t bytes) const override;

private:
    DeviceRates cpu_, cuda_;
    double link_bytes_, link_latency_;
};

struct PlacementOptions {
    Device target = Device::kCuda;  // kCpu: every node on the CPU
    std::map<std::string, Device> pins;     // node name (or its first output's name) -> device
    std::map<std::string, Device> op_pins;  // op type -> device
    /// Whether `n` has a kernel on `d`; empty: every op with a tensor-expression compute runs on
    /// either device, the others only on the CPU.
    std::function<bool(const ir::Node& n, Device d)> has_kernel;
    int64_t host_shape_elements = 64;  // < 0: no shape-computation rule
    /// false: every node no pin or rule placed goes to the target (reason kTarget).
    bool by_cost = true;
    const DeviceCostModel* cost = nullptr;  // nullptr: RooflineCostModel::nominal()
};

enum class PlaceReason { kPinned, kNoKernel, kShapeComputation, kCost, kTarget };
/// "pinned", "no kernel", "shape computation", "cost", "target"
const char* place_reason_name(PlaceReason r);

struct NodePlace {
    Device device = Device::kCpu;
    PlaceReason reason = PlaceReason::kCost;
};

struct Placement {
    std::unordered_map<const ir::Node*, NodePlace> of;  // every node of the graph
    double kernel_seconds = 0, copy_seconds = 0;        // the cost model's estimate
    int copies = 0;                                     // (value, destination) pairs, outputs included
    int64_t copy_bytes = 0;
    Device device(const ir::Node* n) const { return of.at(n).device; }
};

/// Types must be static. kInvalidArgument: a pin naming no node or op of the graph, pins that
/// disagree inside a fusion group, a node pinned to a device it has no kernel for.
Placement place_devices(const ir::Graph& g, const PlacementOptions& o);

/// Parses "NAME=DEVICE" pieces (each may hold several, comma-separated); kInvalidArgument
/// names a malformed piece.
std::map<std::string, Device> parse_device_pins(const std::vector<std::string>& pieces);

/// What `kiln inspect --place` prints after the graph: nodes per device and reason, the nodes
/// not placed by the cost model, and the estimate.
std::string placement_summary(const ir::Graph& g, const Placement& p);

}  // namespace kiln::pass
