#include "runtime/index_check.h"

#include <string>

namespace kiln::runtime {
namespace {

template <typename T>
Status check_values(const IndexCheck& c, const T* v, int64_t n, int64_t extent) {
    const int64_t lo = c.negative_from_end ? -extent : 0;
    for (int64_t i = c.phase; i < n; i += c.period) {
        const int64_t k = static_cast<int64_t>(v[i]);
        if ((k >= lo && k < extent) || (c.has_ignore && k == c.ignore)) continue;
        return Status(ErrorKind::kInvalidArgument,
                      c.node + ": " + c.what + " element " + std::to_string(i) + " is " + std::to_string(k) +
                          ", outside [" + std::to_string(lo) + ", " + std::to_string(extent) + ") (the axis it addresses has " +
                          std::to_string(extent) + " entries" +
                          (c.has_ignore ? "; ignore_index " + std::to_string(c.ignore) : std::string()) + ")");
    }
    return Status::ok_status();
}

}  // namespace

Status check_step_indices(const Executable& exe, size_t step, void* const* args, const std::vector<int64_t>& dims) {
    for (const IndexCheck& c : exe.index_checks) {
        if (static_cast<size_t>(c.step) != step) continue;
        const BufferDesc& b = exe.buffers.at(static_cast<size_t>(exe.steps.at(step).args.at(static_cast<size_t>(c.arg))));
        const int64_t n = shape_numel(b.is_symbolic() ? b.shape_at(dims) : b.shape);
        const int64_t extent = c.extent_dim >= 0 ? dims.at(static_cast<size_t>(c.extent_dim)) : c.extent;
        const void* data = args[c.arg];
        Status st = b.dtype == DType::kInt32 ? check_values(c, static_cast<const int32_t*>(data), n, extent)
                    : b.dtype == DType::kInt64
                        ? check_values(c, static_cast<const int64_t*>(data), n, extent)
                        : Status(ErrorKind::kInternal, "bug in Kiln: " + c.node + ": an index check of a " +
                                                           dtype_name(b.dtype) + " buffer");
        if (!st.ok()) return st;
    }
    return Status::ok_status();
}

}  // namespace kiln::runtime
