// The kInfo and kExecutable sections of a `.kiln` file (artifact_format.h): encoding, and
// decoding with validation of every index, shape, size and offset read from the file.
#include <algorithm>
#include <cmath>
#include <set>

#include "runtime/artifact_format.h"
#include "runtime/async_kernel.h"
#include "support/byte_io.h"
#include "runtime/extern_shape_params.h"
#include "support/dim_poly.h"
#include "support/error.h"

namespace kiln::runtime::artifact_format {
namespace {

constexpr uint32_t kMaxRank = 64;
constexpr uint32_t kMaxStepArgs = 1u << 16;
/// No buffer or arena is larger than this (2^50 bytes: a petabyte); larger means corrupt.
constexpr uint64_t kMaxBytes = uint64_t{1} << 50;

uint8_t role_code(BufferRole r) {
    switch (r) {
        case BufferRole::kInput: return 0;
        case BufferRole::kOutput: return 1;
        case BufferRole::kConstant: return 2;
        case BufferRole::kIntermediate: return 3;
    }
    KILN_THROW(kInternal) << "bug in Kiln: unknown buffer role " << static_cast<int>(r);
}

const char* role_name(BufferRole r) {
    switch (r) {
        case BufferRole::kInput: return "input";
        case BufferRole::kOutput: return "output";
        case BufferRole::kConstant: return "constant";
        case BufferRole::kIntermediate: return "intermediate";
    }
    return "?";
}

/// Bytes of dtype x shape, or kMaxBytes + 1 when that overflows or exceeds kMaxBytes.
uint64_t checked_nbytes(DType dtype, const Shape& shape) {
    uint64_t n = dtype_size(dtype);
    for (int64_t d : shape) {
        if (d == 0) return 0;
        if (static_cast<uint64_t>(d) > kMaxBytes || n > kMaxBytes / static_cast<uint64_t>(d)) return kMaxBytes + 1;
        n *= static_cast<uint64_t>(d);
    }
    return n;
}

constexpr const char* kWhat = "artifact section 'executable'";

BufferDesc read_buffer(ByteReader& r, size_t id, uint64_t constants_size, const ConstantView& view) {
    BufferDesc b;
    b.name = r.str("buffer name");
    const std::string dtype = r.str("buffer dtype");
    const auto dt = dtype_from_name(dtype);
    KILN_CHECK(dt && *dt != DType::kString, kInvalidModel)
        << kWhat << ": buffer " << id << " ('" << b.name << "') has dtype '" << dtype
        << "', expected a numeric dtype name (f32, i64, ...)";
    b.dtype = *dt;
    const uint8_t role = r.u8("buffer role");
    KILN_CHECK(role <= 3, kInvalidModel) << kWhat << ": buffer " << id << " ('" << b.name << "') has role " << int(role)
                                         << ", expected 0..3";
    constexpr BufferRole kRoles[] = {BufferRole::kInput, BufferRole::kOutput, BufferRole::kConstant,
                                     BufferRole::kIntermediate};
    b.role = kRoles[role];
    const uint32_t rank = r.count("buffer rank", 8);
    KILN_CHECK(rank <= kMaxRank, kInvalidModel) << kWhat << ": buffer " << id << " ('" << b.name << "') has rank "
                                                << rank << ", expected at most " << kMaxRank;
    for (uint32_t d = 0; d < rank; ++d) {
        const int64_t v = r.i64("buffer dimension");
        KILN_CHECK(v >= 0, kInvalidModel) << kWhat << ": buffer " << id << " ('" << b.name << "') has dimension " << d
                                          << " = " << v << ", expected >= 0";
        b.shape.push_back(v);
    }
    const uint64_t nbytes = checked_nbytes(b.dtype, b.shape);
    KILN_CHECK(nbytes <= kMaxBytes, kInvalidModel) << kWhat << ": buffer " << id << " ('" << b.name << "') of shape "
                                                   << shape_str(b.shape) << " is larger than " << kMaxBytes << " bytes";
    b.arena_offset = r.i64("buffer arena offset");
    if (b.role == BufferRole::kConstant) {
        const uint64_t offset = r.u64("constant offset");
        const uint64_t size = r.u64("constant size");
        KILN_CHECK(size == nbytes, kInvalidModel)
            << kWhat << ": constant '" << b.name << "' (" << dtype << shape_str(b.shape) << ") has " << size
            << " bytes of data, expected " << nbytes;
        KILN_CHECK(offset % kConstantAlignment == 0 && offset <= constants_size && size <= constants_size - offset,
                   kInvalidModel)
            << kWhat << ": constant '" << b.name << "' at offset " << offset << " (" << size
            << " bytes) is not a 4096-aligned range inside the constants section of " << constants_size << " bytes";
        b.constant = view(b.dtype, b.shape, offset);
    }
    return b;
}

KernelDesc read_kernel(ByteReader& r, size_t id) {
    KernelDesc k;
    k.symbol = r.str("kernel symbol");
    k.description = r.str("kernel description");
    const uint8_t async = r.u8("kernel is_async");
    KILN_CHECK(async <= 1, kInvalidModel) << kWhat << ": kernel " << id << " has is_async = " << int(async)
                                          << ", expected 0 or 1";
    k.is_async = async == 1;
    k.extern_name = r.str("kernel extern name");
    k.extern_params = r.str("kernel extern params");
    if (k.is_async) {
        KILN_CHECK(!k.is_extern() && find_async_kernel(k.symbol), kInvalidModel)
            << kWhat << ": kernel " << id << " names async kernel '" << k.symbol
            << "', which this runtime does not have (expected '" << kAsyncCopySymbol << "')";
    } else if (!k.is_extern()) {
        KILN_CHECK(!k.symbol.empty(), kInvalidModel) << kWhat << ": kernel " << id << " (" << k.description
                                                     << ") has an empty symbol";
    }
    return k;
}

StepDesc read_step(ByteReader& r, size_t id, size_t num_kernels, size_t num_buffers) {
    StepDesc s;
    s.kernel = r.i32("step kernel");
    const uint32_t nargs = r.count("step argument count", 4);
    KILN_CHECK(nargs <= kMaxStepArgs, kInvalidModel) << kWhat << ": step " << id << " has " << nargs << " arguments";
    for (uint32_t a = 0; a < nargs; ++a) s.args.push_back(r.i32("step argument"));
    s.node_name = r.str("step node name");
    s.num_inputs = r.i32("step num_inputs");
    s.flops = r.f64("step flops");
    const std::string where = std::string(kWhat) + ": step " + std::to_string(id) + " (node '" + s.node_name + "')";
    KILN_CHECK(s.kernel >= 0 && static_cast<size_t>(s.kernel) < num_kernels, kInvalidModel)
        << where << " names kernel " << s.kernel << ", expected 0.." << static_cast<int64_t>(num_kernels) - 1;
    for (int b : s.args)
        KILN_CHECK(b >= 0 && static_cast<size_t>(b) < num_buffers, kInvalidModel)
            << where << " names buffer " << b << ", expected 0.." << static_cast<int64_t>(num_buffers) - 1;
    KILN_CHECK(s.num_inputs >= -1 && s.num_inputs <= static_cast<int>(nargs), kInvalidModel)
        << where << " has num_inputs " << s.num_inputs << ", expected -1.." << nargs;
    KILN_CHECK(std::isfinite(s.flops) && s.flops >= 0, kInvalidModel) << where << " has flops " << s.flops
                                                                      << ", expected a finite value >= 0";
    return s;
}

std::vector<int> read_ids(ByteReader& r, const char* what, size_t num_buffers) {
    std::vector<int> ids(r.count(what, 4));
    for (int& id : ids) {
        id = r.i32(what);
        KILN_CHECK(id >= 0 && static_cast<size_t>(id) < num_buffers, kInvalidModel)
            << kWhat << ": " << what << " names buffer " << id << ", expected 0.." << static_cast<int64_t>(num_buffers) - 1;
    }
    return ids;
}

/// The index checks (format version 6): step, arg, extent, extent dim, period, phase, flags,
/// ignore, node, what.
void write_index_checks(ByteWriter& w, const Executable& exe) {
    w.u32(static_cast<uint32_t>(exe.index_checks.size()));
    for (const IndexCheck& c : exe.index_checks) {
        w.i32(c.step);
        w.i32(c.arg);
        w.i64(c.extent);
        w.i32(c.extent_dim);
        w.i32(c.period);
        w.i32(c.phase);
        w.u8(static_cast<uint8_t>((c.negative_from_end ? 1 : 0) | (c.has_ignore ? 2 : 0)));
        w.i64(c.ignore);
        w.str(c.node);
        w.str(c.what);
    }
}

void read_index_checks(ByteReader& r, Executable& exe) {
    const uint32_t n = r.count("index check count", 38);
    for (uint32_t i = 0; i < n; ++i) {
        IndexCheck c;
        c.step = r.i32("index check step");
        c.arg = r.i32("index check argument");
        c.extent = r.i64("index check extent");
        c.extent_dim = r.i32("index check dim");
        c.period = r.i32("index check period");
        c.phase = r.i32("index check phase");
        const uint8_t flags = r.u8("index check flags");
        c.negative_from_end = flags & 1;
        c.has_ignore = flags & 2;
        c.ignore = r.i64("index check ignore");
        c.node = r.str("index check node");
        c.what = r.str("index check what");
        const bool step_ok = c.step >= 0 && static_cast<size_t>(c.step) < exe.steps.size();
        const bool arg_ok = step_ok && c.arg >= 0 && static_cast<size_t>(c.arg) < exe.steps[c.step].args.size();
        const bool dim_ok = c.extent_dim == -1 || (c.extent_dim >= 0 && static_cast<size_t>(c.extent_dim) < exe.dims.size());
        KILN_CHECK(arg_ok && dim_ok && c.extent >= 0 && flags < 4 && c.period >= 1 && c.phase >= 0 && c.phase < c.period,
                   kInvalidModel)
            << kWhat << ": index check " << i << " names step " << c.step << " argument " << c.arg << " dim "
            << c.extent_dim << ", expected a step 0.." << static_cast<int64_t>(exe.steps.size()) - 1
            << ", one of its arguments, a dim 0.." << static_cast<int64_t>(exe.dims.size()) - 1
            << " or -1 and 0 <= phase < period (" << c.phase << ", " << c.period << ")";
        if (arg_ok) {
            const DType t = exe.buffers[static_cast<size_t>(exe.steps[c.step].args[c.arg])].dtype;
            KILN_CHECK(t == DType::kInt32 || t == DType::kInt64, kInvalidModel)
                << kWhat << ": index check " << i << " reads a " << dtype_name(t) << " buffer, expected int32 or int64";
        }
        exe.index_checks.push_back(std::move(c));
    }
}

/// The symbolic-dims tables (format version 2): the dims, then each buffer's dim_of, each
/// kernel's takes_dims and each step's dims, in table order.
void write_symbolic(ByteWriter& w, const Executable& exe) {
    w.u32(static_cast<uint32_t>(exe.dims.size()));
    for (const std::string& d : exe.dims) w.str(d);
    for (const BufferDesc& b : exe.buffers) {
        w.u32(static_cast<uint32_t>(b.dim_of.size()));
        for (int i : b.dim_of) w.i32(i);
    }
    for (const KernelDesc& k : exe.kernels) w.u8(k.takes_dims ? 1 : 0);
    for (const StepDesc& s : exe.steps) {
        w.u32(static_cast<uint32_t>(s.dims.size()));
        for (int i : s.dims) w.i32(i);
        w.u32(static_cast<uint32_t>(s.inplace.size()));
        for (const auto& [o, i] : s.inplace) {
            w.i32(o);
            w.i32(i);
        }
    }
    w.u32(static_cast<uint32_t>(exe.dim_limits.size()));
    for (const DimLimit& l : exe.dim_limits) {
        w.i32(l.dim);
        w.i64(l.min);
        w.i64(l.max);
        w.str(l.node);
    }
    w.u32(static_cast<uint32_t>(exe.dim_equalities.size()));
    for (const DimEquality& e : exe.dim_equalities) {
        w.i32(e.a);
        w.i32(e.b);
        w.i64(e.value);
        w.str(e.node);
    }
    write_index_checks(w, exe);
}

/// dims[k]: a dim name or an expression of the names before it that the runtime can evaluate.
void read_dim_names(ByteReader& r, Executable& exe) {
    const uint32_t n = r.count("symbolic dim count", 4);
    for (uint32_t k = 0; k < n; ++k) {
        std::string d = r.str("symbolic dim");
        KILN_CHECK(!d.empty() && DimPoly::parse(d), kInvalidModel)
            << kWhat << ": symbolic dim " << k << " is '" << d << "', expected a name or an expression of names";
        exe.dims.push_back(std::move(d));
    }
}

/// A buffer's dim_of: empty, or one entry per axis naming a dim (the shape holds 0 there) or -1.
void read_dim_of(ByteReader& r, BufferDesc& b, size_t num_dims) {
    const uint32_t n = r.count("buffer dim_of count", 4);
    KILN_CHECK(n == 0 || n == b.shape.size(), kInvalidModel)
        << kWhat << ": buffer '" << b.name << "' has " << n << " dim_of entries, expected 0 or its rank "
        << b.shape.size();
    for (uint32_t a = 0; a < n; ++a) {
        const int32_t di = r.i32("buffer dim_of");
        KILN_CHECK(di >= -1 && di < static_cast<int64_t>(num_dims) && (di < 0 || b.shape[a] == 0), kInvalidModel)
            << kWhat << ": buffer '" << b.name << "' axis " << a << " names dim " << di << " (shape "
            << shape_str(b.shape) << "), expected -1, or 0.." << static_cast<int64_t>(num_dims) - 1
            << " at an axis of size 0";
        b.dim_of.push_back(di);
    }
    KILN_CHECK(!b.is_symbolic() || b.role != BufferRole::kConstant, kInvalidModel)
        << kWhat << ": constant '" << b.name << "' has symbolic dims";
}

void read_symbolic(ByteReader& r, Executable& exe) {
    read_dim_names(r, exe);
    for (BufferDesc& b : exe.buffers) read_dim_of(r, b, exe.dims.size());
    for (size_t k = 0; k < exe.kernels.size(); ++k) {
        KernelDesc& kd = exe.kernels[k];
        const uint8_t t = r.u8("kernel takes_dims");
        const bool can_take = !kd.is_async && (!kd.is_extern() || extern_takes_shapes(kd.extern_name));
        KILN_CHECK(t <= 1 && (t == 0 || (can_take && !exe.dims.empty())), kInvalidModel)
            << kWhat << ": kernel " << k << " (" << kd.description << ") has takes_dims = " << int(t)
            << ", expected 0, or 1 for a generated kernel or a shape-following extern kernel (dnnl_conv) of an "
               "executable with symbolic dims";
        kd.takes_dims = t == 1;
    }
    for (size_t i = 0; i < exe.steps.size(); ++i) {
        StepDesc& s = exe.steps[i];
        const uint32_t n = r.count("step dim count", 4);
        for (uint32_t j = 0; j < n; ++j) {
            const int32_t di = r.i32("step dim");
            KILN_CHECK(di >= 0 && static_cast<size_t>(di) < exe.dims.size(), kInvalidModel)
                << kWhat << ": step " << i << " (node '" << s.node_name << "') takes dim " << di << ", expected 0.."
                << static_cast<int64_t>(exe.dims.size()) - 1;
            s.dims.push_back(di);
        }
        const uint32_t np = r.count("step in-place pair count", 8);
        for (uint32_t j = 0; j < np; ++j) {
            const int32_t o = r.i32("step in-place output"), in = r.i32("step in-place input");
            const auto arg = [&](int32_t b) { return std::find(s.args.begin(), s.args.end(), b) != s.args.end(); };
            KILN_CHECK(arg(o) && arg(in), kInvalidModel)
                << kWhat << ": step " << i << " (node '" << s.node_name << "') computes buffer " << o << " in place of "
                << in << ", expected two of its arguments";
            s.inplace.emplace_back(o, in);
        }
        KILN_CHECK(s.dims.empty() || exe.kernels[static_cast<size_t>(s.kernel)].takes_dims, kInvalidModel)
            << kWhat << ": step " << i << " (node '" << s.node_name << "') passes dims to a kernel that takes none";
    }
    const uint32_t nl = r.count("dim limit count", 16);
    for (uint32_t i = 0; i < nl; ++i) {
        DimLimit l;
        l.dim = r.i32("dim limit dim");
        l.min = r.i64("dim limit minimum");
        l.max = r.i64("dim limit");
        l.node = r.str("dim limit node");
        KILN_CHECK(l.dim >= 0 && static_cast<size_t>(l.dim) < exe.dims.size() && l.min >= 0 && l.max >= l.min,
                   kInvalidModel)
            << kWhat << ": dim limit " << i << " bounds dim " << l.dim << " by " << l.min << ".." << l.max
            << ", expected a dim 0.." << static_cast<int64_t>(exe.dims.size()) - 1 << " and 0 <= min <= max";
        exe.dim_limits.push_back(std::move(l));
    }
    const uint32_t ne = r.count("dim equality count", 12);
    for (uint32_t i = 0; i < ne; ++i) {
        DimEquality e;
        e.a = r.i32("dim equality dim");
        e.b = r.i32("dim equality dim");
        e.value = r.i64("dim equality value");
        e.node = r.str("dim equality node");
        const auto valid = [&](int d) { return d >= 0 && static_cast<size_t>(d) < exe.dims.size(); };
        KILN_CHECK(valid(e.a) && (valid(e.b) || e.b == -1), kInvalidModel)
            << kWhat << ": dim equality " << i << " names dims " << e.a << " and " << e.b << ", expected 0.."
            << static_cast<int64_t>(exe.dims.size()) - 1;
        exe.dim_equalities.push_back(std::move(e));
    }
    read_index_checks(r, exe);
}

/// Cross-table facts the executors rely on: inputs are the kInput buffers, each once; planned
/// intermediates lie inside the arena; each extern kernel has exactly one step.
void check_consistency(const Executable& exe) {
    std::set<int> inputs;
    for (int id : exe.inputs) {
        const BufferDesc& b = exe.buffers[id];
        KILN_CHECK(b.role == BufferRole::kInput, kInvalidModel)
            << kWhat << ": model input " << inputs.size() << " is buffer '" << b.name << "', a "
            << role_name(b.role) << ", expected an input buffer";
        KILN_CHECK(inputs.insert(id).second, kInvalidModel) << kWhat << ": buffer '" << b.name << "' is listed twice as an input";
    }
    for (size_t i = 0; i < exe.buffers.size(); ++i) {
        const BufferDesc& b = exe.buffers[i];
        KILN_CHECK(b.role != BufferRole::kInput || inputs.count(static_cast<int>(i)), kInvalidModel)
            << kWhat << ": input buffer '" << b.name << "' is not among the model inputs";
        if (b.role != BufferRole::kIntermediate || b.arena_offset < 0) continue;
        KILN_CHECK(static_cast<uint64_t>(b.arena_offset) <= exe.arena_bytes &&
                       b.nbytes() <= exe.arena_bytes - static_cast<uint64_t>(b.arena_offset),
                   kInvalidModel)
            << kWhat << ": intermediate '" << b.name << "' at arena offset " << b.arena_offset << " (" << b.nbytes()
            << " bytes) is outside the arena of " << exe.arena_bytes << " bytes";
    }
    std::vector<int> uses(exe.kernels.size(), 0);
    for (const StepDesc& s : exe.steps) ++uses[s.kernel];
    for (size_t k = 0; k < exe.kernels.size(); ++k)
        KILN_CHECK(!exe.kernels[k].is_extern() || uses[k] == 1, kInvalidModel)
            << kWhat << ": extern kernel " << k << " (" << exe.kernels[k].extern_name << ") is used by " << uses[k]
            << " steps, expected 1";
}

}  // namespace

const char* section_name(uint32_t kind) {
    switch (static_cast<SectionKind>(kind)) {
        case SectionKind::kInfo: return "info";
        case SectionKind::kExecutable: return "executable";
        case SectionKind::kKernelLibrary: return "kernel library";
        case SectionKind::kConstants: return "constants";
        case SectionKind::kProgram: return "program";
    }
    return "unknown";
}

std::string encode_info(const ArtifactInfo& info) {
    ByteWriter w;
    w.u32(static_cast<uint32_t>(info.metadata.size()));
    for (const auto& [k, v] : info.metadata) {
        w.str(k);
        w.str(v);
    }
    w.u32(static_cast<uint32_t>(info.cpu_features.size()));
    for (const std::string& f : info.cpu_features) w.str(f);
    return w.data();
}

ArtifactInfo decode_info(const uint8_t* data, size_t size) {
    ByteReader r(data, size, "artifact section 'info'");
    ArtifactInfo info;
    const uint32_t n = r.count("metadata count", 8);
    for (uint32_t i = 0; i < n; ++i) {
        std::string key = r.str("metadata key");
        info.metadata[key] = r.str("metadata value");
    }
    const uint32_t nf = r.count("cpu feature count", 4);
    for (uint32_t i = 0; i < nf; ++i) info.cpu_features.push_back(r.str("cpu feature"));
    r.expect_end();
    return info;
}

std::string encode_executable(const Executable& exe, const std::vector<uint64_t>& constant_offsets) {
    ByteWriter w;
    w.u32(static_cast<uint32_t>(exe.buffers.size()));
    for (size_t i = 0; i < exe.buffers.size(); ++i) {
        const BufferDesc& b = exe.buffers[i];
        w.str(b.name);
        w.str(dtype_name(b.dtype));
        w.u8(role_code(b.role));
        w.u32(static_cast<uint32_t>(b.shape.size()));
        for (int64_t d : b.shape) w.i64(d);
        w.i64(b.arena_offset);
        if (b.role == BufferRole::kConstant) {
            w.u64(constant_offsets.at(i));
            w.u64(b.constant.nbytes());
        }
    }
    w.u32(static_cast<uint32_t>(exe.kernels.size()));
    for (const KernelDesc& k : exe.kernels) {
        w.str(k.symbol);
        w.str(k.description);
        w.u8(k.is_async ? 1 : 0);
        w.str(k.extern_name);
        w.str(k.extern_params);
    }
    w.u32(static_cast<uint32_t>(exe.steps.size()));
    for (const StepDesc& s : exe.steps) {
        w.i32(s.kernel);
        w.u32(static_cast<uint32_t>(s.args.size()));
        for (int a : s.args) w.i32(a);
        w.str(s.node_name);
        w.i32(s.num_inputs);
        w.f64(s.flops);
    }
    w.u32(static_cast<uint32_t>(exe.inputs.size()));
    for (int id : exe.inputs) w.i32(id);
    w.u32(static_cast<uint32_t>(exe.outputs.size()));
    for (int id : exe.outputs) w.i32(id);
    w.u8(exe.planned_for_concurrency ? 1 : 0);
    w.u64(exe.arena_bytes);
    write_symbolic(w, exe);
    return w.data();
}

std::shared_ptr<Executable> decode_executable(const uint8_t* data, size_t size, uint64_t constants_size,
                                              const ConstantView& view) {
    ByteReader r(data, size, kWhat);
    auto exe = std::make_shared<Executable>();
    const uint32_t nb = r.count("buffer count", 21);
    exe->buffers.reserve(nb);
    for (uint32_t i = 0; i < nb; ++i) exe->buffers.push_back(read_buffer(r, i, constants_size, view));
    const uint32_t nk = r.count("kernel count", 17);
    for (uint32_t i = 0; i < nk; ++i) exe->kernels.push_back(read_kernel(r, i));
    const uint32_t ns = r.count("step count", 24);
    exe->steps.reserve(ns);
    for (uint32_t i = 0; i < ns; ++i) exe->steps.push_back(read_step(r, i, nk, nb));
    exe->inputs = read_ids(r, "model input", nb);
    exe->outputs = read_ids(r, "model output", nb);
    const uint8_t planned = r.u8("planned_for_concurrency");
    KILN_CHECK(planned <= 1, kInvalidModel) << kWhat << ": planned_for_concurrency is " << int(planned)
                                            << ", expected 0 or 1";
    exe->planned_for_concurrency = planned == 1;
    exe->arena_bytes = r.u64("arena_bytes");
    KILN_CHECK(exe->arena_bytes <= kMaxBytes, kInvalidModel) << kWhat << ": arena of " << exe->arena_bytes
                                                             << " bytes is larger than " << kMaxBytes;
    read_symbolic(r, *exe);
    r.expect_end();
    check_consistency(*exe);
    return exe;
}

}  // namespace kiln::runtime::artifact_format
