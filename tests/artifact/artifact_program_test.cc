// Program artifacts (a VM program with control flow, artifact_format.h's kProgram section): a
// hand-built program, `y = cond ? f(x) : x` with f the test executable called from the then
// branch, saved and loaded back as a session, run both ways against the plain-loop reference;
// a wrong input shape names the input and axis; forged program bytes (checksums recomputed)
// in the tables are refused by the decoder's own checks, never a crash or an internal error.
#include <cstring>
#include <iostream>
#include <random>

#include "artifact_test_util.h"
#include "support/hash64.h"

namespace kiln::runtime::testing {
namespace {

vm::Instr instr(vm::Op op, int imm, int imm2, std::vector<int> ins, std::vector<int> outs) {
    vm::Instr in;
    in.op = op;
    in.imm = imm;
    in.imm2 = imm2;
    in.ins = std::move(ins);
    in.outs = std::move(outs);
    in.node = "node 'n' (test)";
    return in;
}

vm::Function function(std::string name, int regs, std::vector<int> params, std::vector<int> results,
                      std::vector<vm::Instr> code) {
    vm::Function f;
    f.name = std::move(name);
    f.num_regs = regs;
    f.params = std::move(params);
    f.results = std::move(results);
    f.code = std::move(code);
    f.code.push_back(instr(vm::Op::kRet, -1, -1, {}, {}));
    f.types.assign(static_cast<size_t>(regs), vm::RegType{DType::kFloat32, {2, 3, 4}});
    return f;
}

TensorInfo info(const std::string& name, DType dtype, Shape shape) {
    TensorInfo t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.symbols.assign(t.shape.size(), "");
    return t;
}

/// fn 0 (x, cond) -> y = if cond then fn 1 (call #0 x) else fn 2 (x); a constant in r3.
ProgramImage if_program() {
    ProgramImage image;
    vm::Function main = function("main", 4, {0, 1}, {2}, {instr(vm::Op::kIf, 1, 2, {1, 0}, {2})});
    main.types[1] = vm::RegType{DType::kBool, {}};
    Tensor c(DType::kFloat32, {2});
    c.set_f64(0, 1.5);
    c.set_f64(1, -2);
    main.constants.emplace_back(3, c);
    main.types[3] = vm::RegType{DType::kFloat32, {2}};
    image.program.functions = {main, function("then", 2, {0}, {1}, {instr(vm::Op::kCall, 0, -1, {0}, {1})}),
                               function("else", 1, {0}, {0}, {})};
    image.executables = {make_test_executable()};
    image.callee_names = {"then/segment0"};
    image.inputs = {info("x", DType::kFloat32, {2, 3, 4}), info("cond", DType::kBool, {})};
    image.outputs = {info("y", DType::kFloat32, {2, 3, 4})};
    return image;
}

Tensor scalar_bool(bool v) {
    Tensor t(DType::kBool, {});
    *t.data_as<bool>() = v;
    return t;
}

bool same(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(ArtifactProgram, IfProgramRoundTripsAndRunsBothBranches) {
    ScratchDir dir;
    const std::string path = dir.file("if.kiln");
    save_program_artifact(path, if_program(), {});
    LoadedArtifact a = load_artifact(path);
    ASSERT_TRUE(a.program);
    EXPECT_FALSE(a.exe);
    ASSERT_EQ(a.program->program.functions.size(), 3u);
    EXPECT_EQ(a.program->program.functions[0].constants.at(0).second.get_f64(1), -2.0);
    std::unique_ptr<Session> s = load_artifact_session(path, {});
    EXPECT_EQ(s->stats().executor, "vm");
    for (int seed : {0, 7}) {
        const Tensor x = test_input(seed);
        std::vector<Tensor> y = s->run({{"x", x}, {"cond", scalar_bool(true)}});
        ASSERT_EQ(y.size(), 1u);
        EXPECT_TRUE(same(y[0], reference_output(x))) << "then branch, seed " << seed;
        y = s->run({{"x", x}, {"cond", scalar_bool(false)}});
        EXPECT_TRUE(same(y[0], x)) << "else branch, seed " << seed;
    }
    Error e = error_of([&] { s->run({{"x", Tensor(DType::kFloat32, {2, 3, 5})}, {"cond", scalar_bool(true)}}); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("input 'x': expected f32[2,3,4], got f32[2,3,5] (axis 2 is 5"), std::string::npos)
        << e.what();
}

/// Recomputes the 5 section checksums and the header checksum (layout of artifact_format.h).
void fix_checksums(std::string& b) {
    auto get = [&](size_t at) {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
        return v;
    };
    auto put = [&](size_t at, uint64_t v) {
        for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
    };
    for (size_t i = 0; i < 5; ++i) {
        const size_t e = 64 + i * 32;
        const uint64_t off = get(e + 8), size = get(e + 16);
        if (off <= b.size() && size <= b.size() - off) put(e + 24, hash64(b.data() + off, size));
    }
    put(24, 0);
    put(24, hash64(b.data(), 64 + 5 * 32));
}

TEST(ArtifactProgram, ForgedProgramBytesAreRefusedByValidation) {
    ScratchDir dir;
    const std::string good_path = dir.file("if.kiln");
    save_program_artifact(good_path, if_program(), {});
    const std::string good = read_bytes(good_path);
    // The program section is the fifth entry of the section table.
    uint64_t off = 0, size = 0;
    for (int i = 0; i < 8; ++i) {
        off |= static_cast<uint64_t>(static_cast<uint8_t>(good[64 + 4 * 32 + 8 + i])) << (8 * i);
        size |= static_cast<uint64_t>(static_cast<uint8_t>(good[64 + 4 * 32 + 16 + i])) << (8 * i);
    }
    // The tables only: the kernel library's bytes (the section's tail, after their u32 length)
    // are machine code that only the checksum guards, as in a one-executable artifact.
    const uint64_t lib = std::filesystem::file_size(test_library_path()) + 4;
    ASSERT_GT(size, lib);
    size -= lib;
    std::mt19937_64 rng(23);
    int refused = 0, loaded = 0;
    const std::string path = dir.file("forged.kiln");
    for (int trial = 0; trial < 60; ++trial) {
        std::string b = good;
        const size_t at = off + rng() % size;
        b[at] = static_cast<char>(b[at] ^ static_cast<char>(1 + rng() % 255));
        fix_checksums(b);
        write_bytes(path, b);
        try {
            (void)load_artifact(path);
            ++loaded;  // e.g. a renamed function or node: still a consistent program
        } catch (const Error& e) {
            EXPECT_NE(e.kind(), ErrorKind::kInternal) << "flip at " << at - off << ": " << e.what();
            ++refused;
        }
    }
    EXPECT_GT(refused, 30) << loaded << " loaded";
    std::cout << "forged program tables: " << refused << " refused, " << loaded << " loaded\n";
}

}  // namespace
}  // namespace kiln::runtime::testing
