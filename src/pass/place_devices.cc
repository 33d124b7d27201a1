// Placement works on clusters: a fusion group, or a node outside any. The estimate of a
// placement is sum(kernel of each cluster on its device) + sum over values of one copy per
// device other than the value's holder that reads it (a model output is read by the host).
// A cluster's move changes only its kernel and the copies of the values it reads or writes, so
// a sweep evaluates each move locally and exactly.
#include "pass/place_devices.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_set>

#include "ir/fusion_groups.h"
#include "op/node_cost.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::pass {

const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

Device parse_device(const std::string& s, const std::string& what) {
    if (s == "cpu") return Device::kCpu;
    if (s == "cuda") return Device::kCuda;
    KILN_THROW(kInvalidArgument) << what << ": unknown device '" << s << "' (expected cpu or cuda)";
}

const char* place_reason_name(PlaceReason r) {
    switch (r) {
        case PlaceReason::kPinned: return "pinned";
        case PlaceReason::kNoKernel: return "no kernel";
        case PlaceReason::kShapeComputation: return "shape computation";
        case PlaceReason::kCost: return "cost";
        case PlaceReason::kTarget: return "target";
    }
    return "?";
}

RooflineCostModel::RooflineCostModel(DeviceRates cpu, DeviceRates cuda, double link_bytes_per_second, double link_latency)
    : cpu_(cpu), cuda_(cuda), link_bytes_(link_bytes_per_second), link_latency_(link_latency) {}

RooflineCostModel RooflineCostModel::nominal() {
    return RooflineCostModel({.flops = 150e9, .bytes = 20e9, .launch = 0.5e-6},
                             {.flops = 30e12, .bytes = 2e12, .launch = 4e-6}, 25e9, 10e-6);
}

double RooflineCostModel::kernel_seconds(const std::vector<const ir::Node*>& nodes, Device d) const {
    const std::unordered_set<const ir::Node*> inside(nodes.begin(), nodes.end());
    double flops = 0, bytes = 0;
    for (const ir::Node* n : nodes) {
        flops += op::node_work(*n).flops;
        for (const ir::Value* v : n->inputs())
            if (v && !inside.count(v->producer())) bytes += static_cast<double>(op::type_bytes(v->type()));
        for (const ir::Value* v : n->outputs()) {
            bool read_outside = v->users().empty();  // unread here: a model output
            for (const ir::Node* u : v->users()) read_outside |= !inside.count(u);
            if (read_outside) bytes += static_cast<double>(op::type_bytes(v->type()));
        }
    }
    const DeviceRates& r = d == Device::kCpu ? cpu_ : cuda_;
    return std::max(flops / r.flops, bytes / r.bytes) + r.launch;
}

double RooflineCostModel::copy_seconds(int64_t bytes) const {
    return link_latency_ + static_cast<double>(bytes) / link_bytes_;
}

namespace {

std::string pin_name(const ir::Node& n) {
    if (!n.name().empty()) return n.name();
    return n.num_outputs() > 0 ? n.output(0)->name() : std::string();
}

bool is_integer(DType t) {
    return t == DType::kInt64 || t == DType::kInt32 || t == DType::kInt16 || t == DType::kInt8 || t == DType::kUInt8 ||
           t == DType::kBool;
}

/// Each sweep lowers the estimate or ends the search; 16 is far more than the test models need
/// (one or two), and bounds the time on a graph of thousands of nodes.
constexpr int kMaxSweeps = 16;

struct Cluster {
    std::vector<const ir::Node*> nodes;
    std::vector<const ir::Value*> reads, writes;  // values crossing its boundary (no constants)
    double seconds[2] = {0, 0};                    // kernel estimate on cpu, cuda
    bool fixed = false;
    NodePlace place;
};

class Placer {
public:
    Placer(const ir::Graph& g, const PlacementOptions& o) : g_(g), o_(o) {
        if (!o_.cost) {
            nominal_ = std::make_unique<RooflineCostModel>(RooflineCostModel::nominal());
            cost_ = nominal_.get();
        } else {
            cost_ = o_.cost;
        }
    }

    Placement run() {
        make_clusters();
        apply_pins();
        apply_rules();
        for (Cluster& c : clusters_)
            for (Device d : {Device::kCpu, Device::kCuda}) c.seconds[static_cast<int>(d)] = cost_->kernel_seconds(c.nodes, d);
        if (o_.by_cost) {
            greedy();
            for (int sweep = 0; sweep < kMaxSweeps; ++sweep)
                if (!improve()) break;
        } else {
            for (Cluster& c : clusters_)
                if (!c.fixed) c.place = {o_.target, PlaceReason::kTarget};
        }
        return result();
    }

private:
    bool has_kernel(const ir::Node& n, Device d) const {
        if (o_.has_kernel) return o_.has_kernel(n, d);
        if (d == Device::kCpu) return true;
        const op::OpDef* def = op::OpRegistry::global().find(n.op());
        return def && def->compute;
    }

    void make_clusters() {
        const ir::FusionGroups groups = ir::fusion_groups(g_);
        clusters_.resize(groups.sets.size());
        for (size_t c = 0; c < clusters_.size(); ++c) {
            clusters_[c].nodes.assign(groups.sets[c].begin(), groups.sets[c].end());
            for (const ir::Node* n : groups.sets[c]) cluster_of_[n] = static_cast<int>(c);
        }
        for (Cluster& c : clusters_) {
            std::set<const ir::Value*> reads, writes;
            for (const ir::Node* n : c.nodes) {
                for (const ir::Value* v : n->inputs())
                    if (v && !v->is_constant() && (!v->producer() || cluster_of_.at(v->producer()) != &c - clusters_.data()))
                        reads.insert(v);
                for (const ir::Value* v : n->outputs()) writes.insert(v);
            }
            c.reads.assign(reads.begin(), reads.end());
            c.writes.assign(writes.begin(), writes.end());
        }
        for (const ir::Value* v : g_.outputs()) graph_outputs_.insert(v);
    }

    void pin(int c, Device d, const ir::Node& by) {
        Cluster& cl = clusters_[c];
        if (cl.fixed && cl.place.device != d)
            KILN_THROW(kInvalidArgument) << by.describe() << " is pinned to " << device_name(d) << " but "
                                        << pinned_by_[c]->describe() << " of its fusion group to "
                                        << device_name(cl.place.device) << ": a fusion group runs on one device";
        KILN_CHECK(d == Device::kCpu || d == o_.target, kInvalidArgument)
            << by.describe() << " is pinned to " << device_name(d) << ", which this compile does not target";
        KILN_CHECK(has_kernel(by, d), kInvalidArgument)
            << by.describe() << " is pinned to " << device_name(d) << ", which has no kernel for op " << by.op();
        cl.fixed = true;
        cl.place = {d, PlaceReason::kPinned};
        pinned_by_[c] = &by;
    }

    void apply_pins() {
        std::set<std::string> names_used, ops_used;
        for (const ir::Node* n : g_.nodes()) {
            const int c = cluster_of_.at(n);
            if (auto it = o_.pins.find(pin_name(*n)); it != o_.pins.end()) {
                pin(c, it->second, *n);
                names_used.insert(it->first);
            } else if (auto op = o_.op_pins.find(n->op()); op != o_.op_pins.end()) {
                pin(c, op->second, *n);
                ops_used.insert(op->first);
            } else if (n->has_attr(kDeviceAttr)) {
                pin(c, parse_device(n->attr_string(kDeviceAttr, ""), n->describe() + " " + kDeviceAttr), *n);
            }
        }
        for (const auto& [name, d] : o_.pins)
            KILN_CHECK(names_used.count(name), kInvalidArgument) << "device pin '" << name << "=" << device_name(d)
                                                                 << "': the graph has no node of that name";
        for (const auto& [op_name, d] : o_.op_pins)
            KILN_CHECK(ops_used.count(op_name), kInvalidArgument)
                << "device pin of op '" << op_name << "=" << device_name(d) << "': the graph has no node of that op";
    }

    bool small_integer(const ir::Value* v) const {
        return o_.host_shape_elements >= 0 && is_integer(v->type().dtype) && op::type_elements(v->type()) <= o_.host_shape_elements;
    }

    /// Every node makes small integers from small integers or from shapes (Shape, Size).
    bool is_shape_computation(const Cluster& c) const {
        for (const ir::Node* n : c.nodes) {
            for (const ir::Value* v : n->outputs())
                if (!small_integer(v)) return false;
            if (n->op() == "Shape" || n->op() == "Size") continue;
            for (const ir::Value* v : n->inputs())
                if (v && !small_integer(v)) return false;
        }
        return true;
    }

    void apply_rules() {
        for (Cluster& c : clusters_) {
            if (c.fixed) continue;
            if (o_.target == Device::kCpu) {
                c.fixed = true;
                c.place = {Device::kCpu, PlaceReason::kNoKernel};
                continue;
            }
            bool all_have_kernel = true;
            for (const ir::Node* n : c.nodes) all_have_kernel &= has_kernel(*n, o_.target);
            if (!all_have_kernel) {
                c.fixed = true;
                c.place = {Device::kCpu, PlaceReason::kNoKernel};
            } else if (is_shape_computation(c)) {
                c.fixed = true;
                c.place = {Device::kCpu, PlaceReason::kShapeComputation};
            }
        }
    }

    /// Where `v` is held: the host for a model input, else its producer's device.
    Device holder(const ir::Value* v) const {
        return v->producer() ? clusters_[cluster_of_.at(v->producer())].place.device : Device::kCpu;
    }

    /// The copies of `v` this placement needs: one per device other than its holder reading it.
    double value_copy_seconds(const ir::Value* v, int* copies = nullptr, int64_t* bytes = nullptr) const {
        bool read_on[2] = {false, false};
        for (const ir::Node* u : v->users()) {
            const Cluster& c = clusters_[cluster_of_.at(u)];
            if (!v->producer() || &c != &clusters_[cluster_of_.at(v->producer())]) read_on[static_cast<int>(c.place.device)] = true;
        }
        if (graph_outputs_.count(v)) read_on[static_cast<int>(Device::kCpu)] = true;
        read_on[static_cast<int>(holder(v))] = false;
        const int n = read_on[0] + read_on[1];
        if (copies) *copies += n;
        if (bytes) *bytes += n * op::type_bytes(v->type());
        return n * cost_->copy_seconds(op::type_bytes(v->type()));
    }

    /// The cluster's kernel and the copies of every value it reads or writes.
    double local_seconds(const Cluster& c) const {
        double s = c.seconds[static_cast<int>(c.place.device)];
        for (const ir::Value* v : c.reads) s += value_copy_seconds(v);
        for (const ir::Value* v : c.writes) s += value_copy_seconds(v);
        return s;
    }

    /// In order: each free cluster where its kernel plus the copies of what it reads (to where
    /// it runs) is cheapest; a producer not yet placed counts as on the CPU.
    void greedy() {
        for (Cluster& c : clusters_) {
            if (c.fixed) continue;
            double cpu = c.seconds[static_cast<int>(Device::kCpu)], cuda = c.seconds[static_cast<int>(Device::kCuda)];
            for (const ir::Value* v : c.reads)
                (holder(v) == Device::kCuda ? cpu : cuda) += cost_->copy_seconds(op::type_bytes(v->type()));
            c.place = {cuda <= cpu ? Device::kCuda : Device::kCpu, PlaceReason::kCost};
        }
    }

    /// One sweep of single-cluster moves that lower the estimate; whether any was made.
    bool improve() {
        bool moved = false;
        for (Cluster& c : clusters_) {
            if (c.fixed) continue;
            const double before = local_seconds(c);
            const Device was = c.place.device;
            c.place.device = was == Device::kCpu ? Device::kCuda : Device::kCpu;
            if (local_seconds(c) < before - 1e-12) {
                moved = true;
            } else {
                c.place.device = was;
            }
        }
        return moved;
    }

    Placement result() const {
        Placement p;
        for (const Cluster& c : clusters_) {
            for (const ir::Node* n : c.nodes) p.of[n] = c.place;
            p.kernel_seconds += c.seconds[static_cast<int>(c.place.device)];
        }
        for (const ir::Value* v : g_.inputs()) p.copy_seconds += value_copy_seconds(v, &p.copies, &p.copy_bytes);
        for (const Cluster& c : clusters_)
            for (const ir::Value* v : c.writes) p.copy_seconds += value_copy_seconds(v, &p.copies, &p.copy_bytes);
        return p;
    }

    const ir::Graph& g_;
    const PlacementOptions& o_;
    std::unique_ptr<RooflineCostModel> nominal_;
    const DeviceCostModel* cost_ = nullptr;
    std::vector<Cluster> clusters_;
    std::unordered_map<const ir::Node*, int> cluster_of_;
    std::unordered_map<int, const ir::Node*> pinned_by_;
    std::unordered_set<const ir::Value*> graph_outputs_;
};

}  // namespace

Placement place_devices(const ir::Graph& g, const PlacementOptions& o) { return Placer(g, o).run(); }

std::map<std::string, Device> parse_device_pins(const std::vector<std::string>& pieces) {
    std::map<std::string, Device> pins;
    for (const std::string& piece : pieces) {
        std::stringstream ss(piece);
        std::string item;
        while (std::getline(ss, item, ',')) {
            const size_t eq = item.find('=');
            KILN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), kInvalidArgument)
                << "device pin '" << item << "': expected NAME=DEVICE (cpu or cuda)";
            pins[item.substr(0, eq)] = parse_device(item.substr(eq + 1), "device pin '" + item + "'");
        }
    }
    return pins;
}

namespace {

/// "  cuda  cost               12 nodes" and the like: the summary's columns.
std::string summary_line(const char* device, const char* reason, const std::string& what) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-5s %-18s ", device, reason);
    return buf + what + "\n";
}

}  // namespace

std::string placement_summary(const ir::Graph& g, const Placement& p) {
    std::map<std::pair<std::string, std::string>, int> counts;
    std::string out, not_by_cost;
    for (const ir::Node* n : g.nodes()) {
        const NodePlace& np = p.of.at(n);
        ++counts[{device_name(np.device), place_reason_name(np.reason)}];
        if (np.reason != PlaceReason::kCost && np.reason != PlaceReason::kTarget)
            not_by_cost += summary_line(device_name(np.device), place_reason_name(np.reason), n->describe());
    }
    out += "placement:\n";
    for (const auto& [key, n] : counts) out += summary_line(key.first.c_str(), key.second.c_str(), std::to_string(n) + " nodes");
    if (!not_by_cost.empty()) out += "placed by pin or rule:\n" + not_by_cost;
    char estimate[160];
    std::snprintf(estimate, sizeof estimate, "estimate: kernels %.1f us, copies %.1f us (%d copies, %lld bytes)\n",
                  p.kernel_seconds * 1e6, p.copy_seconds * 1e6, p.copies, static_cast<long long>(p.copy_bytes));
    return out + estimate;
}

}  // namespace kiln::pass
