// The `.kiln` file layout, format version 6. Every integer is little-endian.
//
//   header (64 bytes)
//      0  u8[8]  magic "\x89KILN\r\n\x1a" (PNG-style: a text-mode transfer breaks it visibly)
//      8  u32    format version (kFormatVersion); another version is kUnsupported
//     12  u32    section count (5)
//     16  u64    file size in bytes (a shorter file is truncated)
//     24  u64    header checksum: hash64 (XXH3) of the header and section table, this field zero
//     32  u8[32] reserved, zero
//   section table: per section 32 bytes: u32 kind, u32 reserved (0), u64 offset, u64 size,
//                  u64 checksum (hash64 of the section's bytes)
//   sections, in this order, each exactly once, inside the file, not overlapping:
//     kInfo           metadata: u32 n, n x (str key, str value); cpu features: u32 n, n x str
//     kExecutable     the Executable's tables (below)
//     kKernelLibrary  the bytes of the kernels' shared library (ELF; empty when none is generated)
//     kConstants      at a 4096-aligned offset; each constant at a 4096-aligned offset inside it,
//                     zero padding between (so every constant is page-aligned in the mapping)
//     kProgram        (version 3) empty for one executable; else a VM program (control flow,
//                     docs/control_flow.md): kExecutable and kKernelLibrary are then empty and
//                     each of the program's executables is in here with its own kernel library
//                     (its constants in kConstants): see "kProgram" below
//   (str = u32 byte count + bytes; padding between sections is zero and not checksummed)
//
// kExecutable:
//   u32 n buffers; each: str name, str dtype (dtype_name), u8 role (0 input, 1 output,
//       2 constant, 3 intermediate), u32 rank, rank x i64 dim, i64 arena_offset,
//       and for a constant: u64 offset in kConstants, u64 byte count
//   u32 n kernels; each: str symbol, str description, u8 is_async, str extern_name, str extern_params
//   u32 n steps; each: i32 kernel, u32 n args, n x i32 buffer id, str node_name, i32 num_inputs,
//       f64 flops
//   u32 n inputs, n x i32 buffer id; u32 n outputs, n x i32 buffer id
//   u8 planned_for_concurrency, u64 arena_bytes
//   symbolic dims (version 2; docs/dynamic_shapes.md), empty for a static executable:
//   u32 n dims, n x str (a dim's name, or an expression of them such as "batch*seq":
//       support/dim_poly.h); then per buffer u32 n, n x i32 dim_of (n = 0, or the buffer's rank:
//       -1 for a static axis, else the dim's index, and the shape holds 0 there); per kernel
//       u8 takes_dims; per step u32 n, n x i32 dim index (the values its kernel takes) and
//       (version 4) u32 n, n x (i32 output, i32 input) buffer ids it may compute in place; then
//       u32 n dim limits, each i32 dim index, (version 5) i64 minimum, i64 bound, str node ("" for
//       a declared range: SessionOptions::dim_ranges) (Executable::dim_limits);
//       (version 4) u32 n dim equalities, each i32 dim, i32 dim (-1: the next value), i64 value,
//       str node
//       (Executable::dim_equalities). takes_dims is 1 also for a dnnl_conv extern kernel made
//       per run-time shape (version 4: symbolic convolutions).
//       (version 6) u32 n index checks, each i32 step, i32 argument, i64 extent, i32 extent dim
//       (-1: the extent), i32 period, i32 phase, u8 flags (1 negative indices count from the end, 2 ignore holds an
//       ignored value), i64 ignore, str node, str what (Executable::index_checks)
//
// kProgram (artifact_program.cc; runtime/vm/program.h):
//   u32 n inputs, then n outputs of the model; each: str name, str dtype, u32 rank, rank x i64
//   i32 entry function, i64 max_trips
//   u32 n functions; each: str name, i32 num_regs, params (u32 n, n x i32), results (same),
//       u32 n instrs (u8 op, i32 imm, i32 imm2, ins, outs, u32 n + n x i64 ints, str node),
//       u32 n constants (i32 register, str dtype, u32 rank, rank x i64, str bytes),
//       u32 n register types (num_regs of them: str dtype, u32 rank, rank x i64, -1 = unknown)
//   u32 n callees; each: str name, str kExecutable-encoded tables, str kernel library bytes
//
// The checksums detect corruption, not tampering: a file whose kernel library is malicious
// runs that code. Every table value is still validated (indices, shapes, sizes, offsets), so
// a corrupt file is a kInvalidModel error naming the section, never undefined behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/artifact.h"

namespace kiln::runtime::artifact_format {

inline constexpr char kMagic[8] = {'\x89', 'K', 'I', 'L', 'N', '\r', '\n', '\x1a'};
/// Version 1 had no symbolic dims, version 2 no VM programs, version 3 no dim equalities,
/// version 4 no dim minimums (declared ranges); a file of another version is refused (recompile it).
inline constexpr uint32_t kFormatVersion = 6;
inline constexpr size_t kHeaderBytes = 64;
inline constexpr size_t kHeaderChecksumOffset = 24;
inline constexpr size_t kSectionEntryBytes = 32;
inline constexpr size_t kConstantAlignment = 4096;

enum class SectionKind : uint32_t { kInfo = 1, kExecutable = 2, kKernelLibrary = 3, kConstants = 4, kProgram = 5 };
inline constexpr uint32_t kNumSections = 5;
/// "info", "executable", "kernel library", "constants", "program" ("unknown" otherwise).
const char* section_name(uint32_t kind);

/// The kInfo section.
std::string encode_info(const ArtifactInfo& info);
ArtifactInfo decode_info(const uint8_t* data, size_t size);

/// The kExecutable section; constant i's bytes are at constant_offsets[i] in kConstants
/// (buffers that are not constants have no entry used).
std::string encode_executable(const Executable& exe, const std::vector<uint64_t>& constant_offsets);

/// The view of `nbytes` at `offset` in kConstants as a tensor (decode has checked the range).
using ConstantView = std::function<Tensor(DType dtype, const Shape& shape, uint64_t offset)>;
/// Decodes and validates the kExecutable section (kInvalidModel naming the buffer, kernel or
/// step at fault); constants become `view`s of kConstants (`constants_size` bytes).
std::shared_ptr<Executable> decode_executable(const uint8_t* data, size_t size, uint64_t constants_size,
                                              const ConstantView& view);

/// Loads the kernel library `lib_bytes` (from memory, named `name`) into `exe`: every
/// generated kernel must resolve in it (kInvalidModel naming `path` otherwise).
void attach_kernels(Executable& exe, const uint8_t* lib_bytes, size_t lib_size, const std::string& name,
                    const std::string& path);

/// The kProgram section of `image`; executable k's constant of buffer i is at
/// constant_offsets[k][i] in kConstants, its kernel library is `libraries[k]` (bytes).
std::string encode_program(const ProgramImage& image, const std::vector<std::vector<uint64_t>>& constant_offsets,
                           const std::vector<std::string>& libraries);

/// Decodes and validates the kProgram section (kInvalidModel naming what is at fault); each
/// executable's constants are `view`s of kConstants and its kernels are loaded from the bytes
/// in the section (named `path`#callee-k). The executables are loaded (Executable::load).
std::shared_ptr<ProgramImage> decode_program(const uint8_t* data, size_t size, uint64_t constants_size,
                                             const ConstantView& view, const std::string& path);

}  // namespace kiln::runtime::artifact_format
