// The kProgram section of a `.kiln` file (artifact_format.h): a VM program (runtime/vm/program.h)
// with its executables, encoded, and decoded with every register, function and callee index
// checked, so a corrupt file is a kInvalidModel error, never an out-of-range register in the VM.
#include <cstring>
#include <limits>

#include "runtime/artifact_format.h"
#include "support/byte_io.h"
#include "support/error.h"

namespace kiln::runtime::artifact_format {
namespace {

constexpr const char* kWhat = "artifact section 'program'";
constexpr uint32_t kMaxRank = 64;

void write_ints(ByteWriter& w, const std::vector<int>& v) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (int x : v) w.i32(x);
}

void write_type(ByteWriter& w, DType dtype, const Shape& shape) {
    w.str(dtype_name(dtype));
    w.u32(static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) w.i64(d);
}

void write_instr(ByteWriter& w, const vm::Instr& in) {
    w.u8(static_cast<uint8_t>(in.op));
    w.i32(in.imm);
    w.i32(in.imm2);
    write_ints(w, in.ins);
    write_ints(w, in.outs);
    w.u32(static_cast<uint32_t>(in.ints.size()));
    for (int64_t x : in.ints) w.i64(x);
    w.str(in.node);
}

void write_function(ByteWriter& w, const vm::Function& f) {
    w.str(f.name);
    w.i32(f.num_regs);
    write_ints(w, f.params);
    write_ints(w, f.results);
    w.u32(static_cast<uint32_t>(f.code.size()));
    for (const vm::Instr& in : f.code) write_instr(w, in);
    w.u32(static_cast<uint32_t>(f.constants.size()));
    for (const auto& [reg, t] : f.constants) {
        KILN_CHECK(t.dtype() != DType::kString, kUnsupported)
            << "function '" << f.name << "': register " << reg << " holds a string constant, which an artifact cannot hold";
        w.i32(reg);
        write_type(w, t.dtype(), t.shape());
        w.str(std::string_view(static_cast<const char*>(t.data()), t.nbytes()));
    }
    w.u32(static_cast<uint32_t>(f.types.size()));
    for (const vm::RegType& t : f.types) write_type(w, t.dtype, t.shape);
}

void write_infos(ByteWriter& w, const std::vector<TensorInfo>& infos) {
    w.u32(static_cast<uint32_t>(infos.size()));
    for (const TensorInfo& t : infos) {
        w.str(t.name);
        write_type(w, t.dtype, t.shape);
    }
}

// ---- decoding ----

DType read_dtype(ByteReader& r, const std::string& where) {
    const std::string name = r.str("dtype");
    const auto dt = dtype_from_name(name);
    KILN_CHECK(dt && *dt != DType::kString, kInvalidModel)
        << kWhat << ": " << where << " has dtype '" << name << "', expected a numeric dtype name (f32, i64, ...)";
    return *dt;
}

/// A shape; `unknown_ok`: -1 marks an axis unknown at lowering time (register types).
Shape read_shape(ByteReader& r, const std::string& where, bool unknown_ok) {
    const uint32_t rank = r.count("rank", 8);
    KILN_CHECK(rank <= kMaxRank, kInvalidModel) << kWhat << ": " << where << " has rank " << rank;
    Shape s;
    for (uint32_t k = 0; k < rank; ++k) {
        const int64_t d = r.i64("dimension");
        KILN_CHECK(d >= 0 || (unknown_ok && d == -1), kInvalidModel)
            << kWhat << ": " << where << " has dimension " << k << " = " << d;
        s.push_back(d);
    }
    return s;
}

/// Register indices, each in [0, num_regs); the first `absent_ok` may be -1 (a Loop's absent
/// trip count or condition).
std::vector<int> read_regs(ByteReader& r, int num_regs, const std::string& where, size_t absent_ok = 0) {
    const uint32_t n = r.count("register count", 4);
    std::vector<int> v(n);
    for (uint32_t k = 0; k < n; ++k) {
        v[k] = r.i32("register");
        KILN_CHECK((v[k] >= 0 && v[k] < num_regs) || (k < absent_ok && v[k] == -1), kInvalidModel)
            << kWhat << ": " << where << " names register " << v[k] << ", expected 0.." << num_regs - 1;
    }
    return v;
}

struct Bounds {
    int functions = 0, callees = 0;
};

/// kScan's ints: [num_state, num_scan_in, in_axes, in_dirs (num_scan_in each), out_axes, out_dirs
/// (one per scan output)], with the counts within its operands and the axes non-negative.
bool scan_ints_ok(const vm::Instr& in) {
    if (in.ints.size() < 2) return false;
    const int64_t ns = in.ints[0], nin = in.ints[1];
    if (ns < 0 || nin < 0 || ns + nin > static_cast<int64_t>(in.ins.size()) ||
        ns > static_cast<int64_t>(in.outs.size()))
        return false;
    const int64_t nout = static_cast<int64_t>(in.outs.size()) - ns;
    if (static_cast<int64_t>(in.ints.size()) != 2 + 2 * nin + 2 * nout) return false;
    for (size_t k = 2; k < in.ints.size(); ++k)
        if (in.ints[k] < 0) return false;
    return true;
}

/// An instruction whose operands are in range (the VM relies on it).
vm::Instr read_instr(ByteReader& r, const vm::Function& f, const Bounds& b) {
    vm::Instr in;
    const uint8_t op = r.u8("op");
    KILN_CHECK(op <= static_cast<uint8_t>(vm::Op::kRet), kInvalidModel)
        << kWhat << ": function '" << f.name << "' has an instruction of op " << int(op) << ", expected 0..5";
    in.op = static_cast<vm::Op>(op);
    in.imm = r.i32("imm");
    in.imm2 = r.i32("imm2");
    const std::string where = "function '" + f.name + "' instruction " + std::to_string(f.code.size());
    in.ins = read_regs(r, f.num_regs, where, in.op == vm::Op::kLoop ? 2 : 0);
    in.outs = read_regs(r, f.num_regs, where);
    const uint32_t n = r.count("ints", 8);
    for (uint32_t k = 0; k < n; ++k) in.ints.push_back(r.i64("int"));
    in.node = r.str("node");
    auto in_range = [&](int v, int n) { return v >= 0 && v < n; };
    const bool ok = in.op == vm::Op::kCall   ? in_range(in.imm, b.callees)
                    : in.op == vm::Op::kIf   ? in_range(in.imm, b.functions) && in_range(in.imm2, b.functions) &&
                                                   !in.ins.empty()
                    : in.op == vm::Op::kLoop ? in_range(in.imm, b.functions) && in.ins.size() >= 2
                    : in.op == vm::Op::kScan ? in_range(in.imm, b.functions) && scan_ints_ok(in)
                    : in.op == vm::Op::kMove ? in.ins.size() == 1 && in.outs.size() == 1
                                             : true;
    KILN_CHECK(ok, kInvalidModel) << kWhat << ": " << where << " (" << vm::op_name(in.op) << ", " << in.node
                                  << ") has operands out of range (imm " << in.imm << ", imm2 " << in.imm2 << ", "
                                  << b.functions << " functions, " << b.callees << " callees)";
    return in;
}

vm::Function read_function(ByteReader& r, const Bounds& b) {
    vm::Function f;
    f.name = r.str("function name");
    f.num_regs = r.i32("register count");
    KILN_CHECK(f.num_regs >= 0 && f.num_regs <= (1 << 24), kInvalidModel)
        << kWhat << ": function '" << f.name << "' has " << f.num_regs << " registers";
    f.params = read_regs(r, f.num_regs, "function '" + f.name + "' params");
    f.results = read_regs(r, f.num_regs, "function '" + f.name + "' results");
    const uint32_t n_code = r.count("instruction count", 21);
    for (uint32_t k = 0; k < n_code; ++k) f.code.push_back(read_instr(r, f, b));
    const uint32_t n_const = r.count("constant count", 12);
    for (uint32_t k = 0; k < n_const; ++k) {
        const int reg = r.i32("constant register");
        const std::string where = "function '" + f.name + "' constant register " + std::to_string(reg);
        KILN_CHECK(reg >= 0 && reg < f.num_regs, kInvalidModel) << kWhat << ": " << where << " is out of range";
        const DType dt = read_dtype(r, where);
        Tensor t(dt, read_shape(r, where, false));
        const std::string bytes = r.str("constant bytes");
        KILN_CHECK(bytes.size() == t.nbytes(), kInvalidModel)
            << kWhat << ": " << where << " has " << bytes.size() << " bytes, expected " << t.nbytes();
        if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
        f.constants.emplace_back(reg, std::move(t));
    }
    const uint32_t n_types = r.count("type count", 8);
    KILN_CHECK(n_types == static_cast<uint32_t>(f.num_regs), kInvalidModel)
        << kWhat << ": function '" << f.name << "' has " << n_types << " register types, expected " << f.num_regs;
    for (uint32_t k = 0; k < n_types; ++k) {
        vm::RegType t;
        t.dtype = read_dtype(r, "function '" + f.name + "' register " + std::to_string(k));
        t.shape = read_shape(r, "function '" + f.name + "' register " + std::to_string(k), true);
        f.types.push_back(std::move(t));
    }
    return f;
}

/// The model's inputs (static shapes) or outputs (`unknown_ok`: -1 where the lowering did not know).
std::vector<TensorInfo> read_infos(ByteReader& r, const char* what, bool unknown_ok) {
    std::vector<TensorInfo> infos(r.count(what, 12));
    for (TensorInfo& t : infos) {
        t.name = r.str("name");
        t.dtype = read_dtype(r, std::string(what) + " '" + t.name + "'");
        t.shape = read_shape(r, std::string(what) + " '" + t.name + "'", unknown_ok);
        t.symbols.assign(t.shape.size(), "");
    }
    return infos;
}

/// Each instruction's operand counts agree with the function or executable it runs (the VM
/// indexes one by the other): a forged file whose counts disagree is refused here.
void check_arity(const ProgramImage& image) {
    const vm::Program& p = image.program;
    for (const vm::Function& f : p.functions) {
        for (const vm::Instr& in : f.code) {
            const size_t ni = in.ins.size(), no = in.outs.size();
            bool ok = true;
            if (in.op == vm::Op::kCall) {
                const Executable& exe = *image.executables[static_cast<size_t>(in.imm)];
                ok = ni == exe.inputs.size() && no == exe.outputs.size();
            } else if (in.op == vm::Op::kIf) {
                for (int fn : {in.imm, in.imm2}) {
                    const vm::Function& b = p.functions[static_cast<size_t>(fn)];
                    ok &= b.params.size() == ni - 1 && b.results.size() == no;
                }
            } else if (in.op == vm::Op::kLoop) {
                const vm::Function& b = p.functions[static_cast<size_t>(in.imm)];
                ok = b.params.size() == ni && b.results.size() == no + 1 && in.imm2 >= 0 &&
                     static_cast<size_t>(in.imm2) <= no && static_cast<size_t>(in.imm2) + 2 <= ni;
            } else if (in.op == vm::Op::kScan) {
                const vm::Function& b = p.functions[static_cast<size_t>(in.imm)];
                ok = b.params.size() == ni && b.results.size() == no;
            }
            KILN_CHECK(ok, kInvalidModel) << kWhat << ": function '" << f.name << "': " << vm::op_name(in.op) << " ("
                                          << in.node << ") has " << ni << " inputs and " << no
                                          << " outputs, which the function or executable it runs does not take";
        }
    }
}

}  // namespace

std::string encode_program(const ProgramImage& image, const std::vector<std::vector<uint64_t>>& constant_offsets,
                           const std::vector<std::string>& libraries) {
    ByteWriter w;
    write_infos(w, image.inputs);
    write_infos(w, image.outputs);
    w.i32(image.program.entry);
    w.i64(image.program.max_trips);
    w.u32(static_cast<uint32_t>(image.program.functions.size()));
    for (const vm::Function& f : image.program.functions) write_function(w, f);
    w.u32(static_cast<uint32_t>(image.executables.size()));
    for (size_t k = 0; k < image.executables.size(); ++k) {
        w.str(image.callee_names[k]);
        w.str(encode_executable(*image.executables[k], constant_offsets[k]));
        w.str(libraries[k]);
    }
    return w.data();
}

std::shared_ptr<ProgramImage> decode_program(const uint8_t* data, size_t size, uint64_t constants_size,
                                             const ConstantView& view, const std::string& path) {
    ByteReader r(data, size, kWhat);
    auto image = std::make_shared<ProgramImage>();
    image->inputs = read_infos(r, "input", false);
    image->outputs = read_infos(r, "output", true);
    vm::Program& p = image->program;
    p.entry = r.i32("entry");
    p.max_trips = r.i64("max_trips");
    const uint32_t n_fn = r.count("function count", 4 * 6);
    // Callee indices are checked against the count, which follows the functions: read ahead.
    Bounds b{static_cast<int>(n_fn), std::numeric_limits<int>::max()};
    for (uint32_t k = 0; k < n_fn; ++k) p.functions.push_back(read_function(r, b));
    KILN_CHECK(p.entry >= 0 && p.entry < static_cast<int>(n_fn), kInvalidModel)
        << kWhat << ": entry function " << p.entry << " of " << n_fn;
    const vm::Function& entry = p.functions[static_cast<size_t>(p.entry)];
    KILN_CHECK(entry.params.size() == image->inputs.size() && entry.results.size() == image->outputs.size(),
               kInvalidModel)
        << kWhat << ": the entry function takes " << entry.params.size() << " params and gives "
        << entry.results.size() << " results, expected the model's " << image->inputs.size() << " inputs and "
        << image->outputs.size() << " outputs";
    const uint32_t n_callees = r.count("callee count", 12);
    for (uint32_t k = 0; k < n_callees; ++k) {
        image->callee_names.push_back(r.str("callee name"));
        const std::string tables = r.str("callee executable");
        auto exe = decode_executable(reinterpret_cast<const uint8_t*>(tables.data()), tables.size(), constants_size,
                                     view);
        const std::string lib = r.str("callee kernel library");
        attach_kernels(*exe, reinterpret_cast<const uint8_t*>(lib.data()), lib.size(),
                       path + "#callee" + std::to_string(k), path);
        exe->load();
        image->executables.push_back(std::move(exe));
    }
    r.expect_end();
    for (const vm::Function& f : p.functions)
        for (const vm::Instr& in : f.code)
            KILN_CHECK(in.op != vm::Op::kCall || in.imm < static_cast<int>(n_callees), kInvalidModel)
                << kWhat << ": function '" << f.name << "' calls callee " << in.imm << " of " << n_callees;
    check_arity(*image);
    return image;
}

}  // namespace kiln::runtime::artifact_format
