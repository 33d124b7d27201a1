// bind_run_dims and plan_at_dims (dims_plan.h).
#include "runtime/dims_plan.h"

#include <algorithm>
#include <limits>
#include <map>

#include "support/dim_poly.h"

namespace kiln::runtime {
namespace {

constexpr size_t kAlign = 64;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string expected_str(const Executable& exe, const BufferDesc& d) {
    std::string s = std::string(dtype_name(d.dtype)) + "[";
    for (size_t k = 0; k < d.shape.size(); ++k) {
        if (k) s += ",";
        const int di = k < d.dim_of.size() ? d.dim_of[k] : -1;
        s += di >= 0 ? exe.dims.at(static_cast<size_t>(di)) : std::to_string(d.shape[k]);
    }
    return s + "]";
}

/// Bytes of `d` at `dims`, false on int64 overflow.
bool bytes_at(const BufferDesc& d, const std::vector<int64_t>& dims, size_t* out) {
    int64_t n = static_cast<int64_t>(dtype_size(d.dtype));
    for (int64_t e : d.shape_at(dims)) {
        if (e != 0 && n > std::numeric_limits<int64_t>::max() / e) return false;
        n *= e;
    }
    *out = static_cast<size_t>(n);
    return true;
}

}  // namespace

Status bind_run_dims(const Executable& exe, const std::vector<Tensor>& inputs, std::vector<int64_t>& dims) {
    if (inputs.size() != exe.inputs.size())
        return Status(ErrorKind::kInvalidArgument,
                      "expected " + std::to_string(exe.inputs.size()) + " inputs, got " + std::to_string(inputs.size()));
    dims.assign(exe.dims.size(), -1);
    std::vector<size_t> from(exe.dims.size(), 0);       // the input that bound each dim
    std::vector<int64_t> from_axis(exe.dims.size(), -1);  // and its axis (-1: an expression of others)
    for (size_t i = 0; i < inputs.size(); ++i) {
        const BufferDesc& d = exe.buffers.at(static_cast<size_t>(exe.inputs[i]));
        const Tensor& t = inputs[i];
        const auto bad = [&] {
            return Status(ErrorKind::kInvalidArgument, "input '" + d.name + "': expected " + expected_str(exe, d) +
                                                           ", got " + dtype_name(t.dtype()) + shape_str(t.shape()));
        };
        if (t.dtype() != d.dtype || t.shape().size() != d.shape.size()) return bad();
        for (size_t k = 0; k < d.shape.size(); ++k) {
            const int di = k < d.dim_of.size() ? d.dim_of[k] : -1;
            const int64_t got = t.shape()[k];
            if (di < 0) {
                if (got != d.shape[k]) return bad();
                continue;
            }
            int64_t& v = dims[static_cast<size_t>(di)];
            if (v < 0) {
                v = got;
                from[static_cast<size_t>(di)] = i;
                from_axis[static_cast<size_t>(di)] = static_cast<int64_t>(k);
            } else if (v != got) {
                const BufferDesc& first = exe.buffers.at(static_cast<size_t>(exe.inputs[from[static_cast<size_t>(di)]]));
                return Status(ErrorKind::kInvalidArgument,
                              "input '" + d.name + "': dimension '" + exe.dims[static_cast<size_t>(di)] + "' (axis " +
                                  std::to_string(k) + ") is " + std::to_string(got) + ", but input '" + first.name +
                                  "' gives it " + std::to_string(v) + " (shape " + shape_str(t.shape()) + ")");
            }
        }
        if (t.data() == nullptr && t.numel() > 0)
            return Status(ErrorKind::kInvalidArgument, "input '" + d.name + "': tensor has no data");
    }
    // Dim expressions (batch*seq: a Reshape's -1) are evaluated from the bound dims.
    std::map<std::string, int64_t> bound;
    for (size_t k = 0; k < dims.size(); ++k)
        if (dims[k] >= 0) bound[exe.dims[k]] = dims[k];
    for (size_t k = 0; k < dims.size(); ++k) {
        if (dims[k] >= 0) continue;
        auto poly = DimPoly::parse(exe.dims[k]);
        auto v = poly ? poly->eval(bound) : std::nullopt;
        if (!v)
            return Status(ErrorKind::kInternal, "bug in Kiln: dimension '" + exe.dims[k] + "' is bound by no input");
        if (*v < 0)
            return Status(ErrorKind::kInvalidArgument, "dimension '" + exe.dims[k] + "' is " + std::to_string(*v) +
                                                           " at these inputs (it must be >= 0)");
        dims[k] = *v;
    }
    for (const DimLimit& l : exe.dim_limits) {
        const int64_t v = dims.at(static_cast<size_t>(l.dim));
        if (v >= l.min && v <= l.max) continue;
        const std::string& name = exe.dims[static_cast<size_t>(l.dim)];
        if (l.node.empty()) {  // declared (SessionOptions::dim_ranges): name the input that gave it
            std::string where;
            if (from_axis[static_cast<size_t>(l.dim)] >= 0)
                where = "input '" + exe.buffers.at(static_cast<size_t>(exe.inputs[from[static_cast<size_t>(l.dim)]])).name +
                        "' (axis " + std::to_string(from_axis[static_cast<size_t>(l.dim)]) + "): ";
            return Status(ErrorKind::kInvalidArgument, where + "dimension '" + name + "' is " + std::to_string(v) +
                                                           ", outside its declared range " + std::to_string(l.min) +
                                                           ".." + std::to_string(l.max));
        }
        return Status(ErrorKind::kInvalidArgument, "dimension '" + name + "' is " + std::to_string(v) +
                                                       " at these inputs, but " + l.node +
                                                       " takes that many rows of an axis of " + std::to_string(l.max) +
                                                       ": at most " + std::to_string(l.max));
    }
    for (const DimEquality& e : exe.dim_equalities) {
        const int64_t va = dims.at(static_cast<size_t>(e.a));
        const int64_t vb = e.b < 0 ? e.value : dims.at(static_cast<size_t>(e.b));
        if (va == vb) continue;
        const std::string& da = exe.dims[static_cast<size_t>(e.a)];
        if (e.b < 0)
            return Status(ErrorKind::kInvalidArgument, e.node + " needs dimension '" + da + "' to be " +
                                                           std::to_string(e.value) + ", but these inputs make it " +
                                                           std::to_string(va));
        return Status(ErrorKind::kInvalidArgument,
                      e.node + " needs dimensions '" + da + "' and '" + exe.dims[static_cast<size_t>(e.b)] +
                          "' equal, but these inputs make them " + std::to_string(va) + " and " + std::to_string(vb));
    }
    return Status::ok_status();
}

Status plan_at_dims(const Executable& exe, const std::vector<int64_t>& dims, DimsPlan& out) {
    const size_t nb = exe.buffers.size();
    out.dims = dims;
    out.bytes.assign(nb, 0);
    out.offset.assign(nb, -1);
    out.arena_bytes = 0;
    for (size_t i = 0; i < nb; ++i)
        if (!bytes_at(exe.buffers[i], dims, &out.bytes[i]))
            return Status(ErrorKind::kInvalidArgument,
                          "buffer '" + exe.buffers[i].name + "' would exceed int64 bytes at these dimensions");
    // Lifetimes: first and last step touching each intermediate.
    std::vector<int> first(nb, -1), last(nb, -1);
    for (size_t s = 0; s < exe.steps.size(); ++s)
        for (int id : exe.steps[s].args) {
            auto b = static_cast<size_t>(id);
            if (first[b] < 0) first[b] = static_cast<int>(s);
            last[b] = static_cast<int>(s);
        }
    for (size_t i = 0; i < nb; ++i)  // a value inside a fused kernel: no step reads or writes it
        if (exe.buffers[i].role == BufferRole::kIntermediate && first[i] < 0) out.bytes[i] = 0;
    // In place: an output placed on an input of its step that dies there (same size or less)
    // shares the input's bytes; the pair is one buffer living from the input's first step to
    // the output's last.
    std::vector<size_t> on(nb);  // the buffer whose bytes each buffer uses (itself, or an input)
    for (size_t i = 0; i < nb; ++i) on[i] = i;
    auto intermediate = [&](size_t b) {
        return b < nb && exe.buffers[b].role == BufferRole::kIntermediate && first[b] >= 0 && out.bytes[b] > 0;
    };
    for (size_t s = 0; s < exe.steps.size(); ++s)
        for (const auto& [o_id, i_id] : exe.steps[s].inplace) {
            const auto o = static_cast<size_t>(o_id), i = static_cast<size_t>(i_id);
            if (!intermediate(o) || !intermediate(i) || o == i || on[o] != o || first[o] != static_cast<int>(s)) continue;
            const size_t root = on[i];
            if (last[i] != static_cast<int>(s) || last[root] != static_cast<int>(s) || out.bytes[o] > out.bytes[root])
                continue;
            on[o] = root;
            last[root] = last[o];
        }
    std::vector<size_t> order;
    for (size_t i = 0; i < nb; ++i)
        if (intermediate(i) && on[i] == i) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.bytes[a] > out.bytes[b]; });
    struct Placed {
        size_t begin, end;
        int first, last;
    };
    std::vector<Placed> placed;
    for (size_t i : order) {
        std::vector<std::pair<size_t, size_t>> busy;  // ranges taken by buffers alive at the same time
        for (const Placed& p : placed)
            if (p.first <= last[i] && first[i] <= p.last) busy.emplace_back(p.begin, p.end);
        std::sort(busy.begin(), busy.end());
        const size_t size = align_up(out.bytes[i]);
        size_t at = 0;
        for (const auto& [b, e] : busy) {
            if (at + size <= b) break;
            at = std::max(at, e);
        }
        placed.push_back({at, at + size, first[i], last[i]});
        out.offset[i] = static_cast<int64_t>(at);
        out.arena_bytes = std::max(out.arena_bytes, at + size);
    }
    for (size_t i = 0; i < nb; ++i)
        if (on[i] != i) out.offset[i] = out.offset[on[i]];
    return Status::ok_status();
}

}  // namespace kiln::runtime
