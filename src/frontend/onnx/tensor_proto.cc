// TensorProto -> kiln::Tensor.
//
// ONNX stores tensor data in one of three places, tried in this order:
//  1. external data (data_location == EXTERNAL): a file named by the "location" key, relative to
//     the model's directory, read from "offset" for "length" bytes (both optional). The resolved
//     path must stay inside the model directory (no absolute paths, no ".." escapes, no symlink
//     escapes: both sides are canonicalized before the containment check).
//  2. raw_data: little-endian bytes, exactly numel * element size of them.
//  3. the typed repeated fields: float_data (f32), double_data (f64), int64_data (i64),
//     uint64_data (u32, u64) and int32_data for everything narrower (i32, i16, i8, u16, u8,
//     bool, and f16/bf16/float8 as bit patterns in the low bits). Exactly numel entries.
// The 4-bit types (i4, u4, f4e2m1) are packed two per byte in all three places (first element
// in the low nibble); they are unpacked to Kiln's one-element-per-byte layout.
// Every size is checked against the declared dims *before* storage is allocated, so a corrupt
// model can neither make us read out of bounds nor allocate more than its data holds.
#include "frontend/onnx/tensor_proto.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "support/error.h"

namespace kiln::frontend {
namespace fs = std::filesystem;

std::string onnx_type_name(int onnx_type) {
    if (onnx::TensorProto_DataType_IsValid(onnx_type))
        return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type));
    return "type " + std::to_string(onnx_type);
}

std::string read_file_bytes(const std::string& path) {
    std::error_code ec;
    KILN_CHECK(fs::is_regular_file(path, ec), kIOError) << "cannot open '" << path << "': no such file";
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in.good(), kIOError) << "cannot open '" << path << "' for reading";
    std::ostringstream ss;
    ss << in.rdbuf();
    KILN_CHECK(!in.bad(), kIOError) << "error while reading '" << path << "'";
    return ss.str();
}

namespace {

int64_t parse_size_field(const std::string& s, const std::string& key, const std::string& what) {
    int64_t v = -1;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    KILN_CHECK(ec == std::errc() && p == s.data() + s.size() && v >= 0, kInvalidModel)
        << what << ": external data '" << key << "' must be a non-negative integer, got '" << s << "'";
    return v;
}

struct ExternalSlice {
    fs::path file;
    int64_t offset = 0;
};

// Resolves the external data of `proto` and checks that the file holds `nbytes` bytes at the
// offset (and that "length", if given, says so).
ExternalSlice locate_external(const onnx::TensorProto& proto, const std::string& base_dir,
                              const std::string& what, size_t nbytes) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : proto.external_data()) {
        if (kv.key() == "location") location = kv.value();
        else if (kv.key() == "offset") offset = parse_size_field(kv.value(), "offset", what);
        else if (kv.key() == "length") length = parse_size_field(kv.value(), "length", what);
        // "checksum" and unknown keys are ignored.
    }
    KILN_CHECK(!location.empty(), kInvalidModel) << what << ": external data has no 'location'";
    fs::path rel(location);
    KILN_CHECK(!rel.is_absolute() && !rel.has_root_name(), kInvalidModel)
        << what << ": external data location '" << location << "' must be relative to the model directory";
    std::error_code ec;
    fs::path base = fs::weakly_canonical(fs::absolute(base_dir.empty() ? "." : base_dir, ec), ec);
    KILN_CHECK(!ec, kIOError) << what << ": cannot resolve model directory '" << base_dir << "'";
    fs::path target = fs::weakly_canonical(base / rel, ec);
    KILN_CHECK(!ec, kIOError) << what << ": cannot resolve external data '" << location << "'";
    fs::path inside = target.lexically_relative(base);
    KILN_CHECK(!inside.empty() && inside != "." && *inside.begin() != "..", kInvalidModel)
        << what << ": external data location '" << location << "' points outside the model directory";
    KILN_CHECK(fs::is_regular_file(target, ec), kIOError)
        << what << ": external data file '" << target.string() << "' not found";
    uintmax_t file_size = fs::file_size(target, ec);
    KILN_CHECK(!ec, kIOError) << what << ": cannot stat '" << target.string() << "'";
    if (length >= 0) {
        KILN_CHECK(static_cast<uint64_t>(length) == nbytes, kInvalidModel)
            << what << ": external data length is " << length << " bytes, expected " << nbytes;
    }
    KILN_CHECK(static_cast<uint64_t>(offset) <= file_size && nbytes <= file_size - offset, kInvalidModel)
        << what << ": external data '" << location << "' has " << file_size << " bytes, need " << nbytes
        << " at offset " << offset;
    return {target, offset};
}

// Reads `nbytes` bytes of a located external slice into dst.
void read_external(const ExternalSlice& slice, const std::string& what, size_t nbytes, void* dst) {
    const fs::path& target = slice.file;
    std::ifstream in(target, std::ios::binary);
    KILN_CHECK(in.good(), kIOError) << what << ": cannot open '" << target.string() << "'";
    in.seekg(slice.offset);
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(nbytes));
    KILN_CHECK(in.good() || (nbytes == 0), kIOError)
        << what << ": short read from '" << target.string() << "'";
}

template <typename Field>
void check_count(const Field& f, int64_t numel, const char* field, const std::string& what) {
    KILN_CHECK(static_cast<int64_t>(f.size()) == numel, kInvalidModel)
        << what << ": " << field << " has " << f.size() << " elements, expected " << numel;
}

// Copies a repeated field into dst, converting each entry to the storage type T.
template <typename T, typename Field>
void copy_typed(const Field& f, void* dst) {
    T* out = static_cast<T*>(dst);
    for (int i = 0; i < f.size(); ++i) out[i] = static_cast<T>(f.Get(i));
}

// i4 / u4 / f4e2m1: ONNX packs two elements per byte (first in the low nibble) in raw_data,
// external data and int32_data alike (one packed byte per int32_data entry); Kiln keeps one
// element per byte (i4 sign-extended), so unpack here.
bool dtype_is_4bit(DType t) { return dtype_is_int4(t) || t == DType::kFloat4E2M1; }

Tensor tensor_from_packed_4bit(const onnx::TensorProto& proto, const std::string& base_dir,
                               const std::string& what, DType dt, const Shape& shape) {
    const int64_t numel = shape_numel(shape);
    const size_t packed_bytes = static_cast<size_t>((numel + 1) / 2);
    std::string packed(packed_bytes, '\0');
    if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
        ExternalSlice slice = locate_external(proto, base_dir, what, packed_bytes);
        read_external(slice, what, packed_bytes, packed.data());
    } else if (proto.has_raw_data()) {
        KILN_CHECK(proto.raw_data().size() == packed_bytes, kInvalidModel)
            << what << ": raw_data has " << proto.raw_data().size() << " bytes, expected " << packed_bytes
            << " (" << shape_str(shape) << " x " << dtype_name(dt) << ", two per byte)";
        packed = proto.raw_data();
    } else {
        check_count(proto.int32_data(), static_cast<int64_t>(packed_bytes), "int32_data (packed 4-bit)", what);
        for (size_t i = 0; i < packed_bytes; ++i) packed[i] = static_cast<char>(proto.int32_data(static_cast<int>(i)));
    }
    Tensor out(dt, shape);
    uint8_t* o = out.data_as<uint8_t>();
    for (int64_t i = 0; i < numel; ++i) {
        const uint8_t byte = static_cast<uint8_t>(packed[static_cast<size_t>(i / 2)]);
        const uint8_t nib = (i % 2 == 0) ? (byte & 0xf) : (byte >> 4);
        o[i] = dt == DType::kInt4 ? static_cast<uint8_t>(wrap_int4(nib)) : nib;
    }
    return out;
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what) {
    const int ot = proto.data_type();
    KILN_CHECK(ot != onnx::TensorProto::UNDEFINED, kInvalidModel) << what << " has no data type";
    std::optional<DType> dt = dtype_from_onnx(ot);
    KILN_CHECK(dt.has_value(), kUnsupported)
        << what << " has element type " << onnx_type_name(ot) << ", which Kiln does not support";
    KILN_CHECK(!proto.has_segment(), kUnsupported) << what << ": segmented tensors are not supported";

    Shape shape;
    int64_t numel = 1;
    const int64_t esize = static_cast<int64_t>(dtype_size(*dt));
    const int64_t max_elems = (int64_t{1} << 48) / esize;  // far beyond any real tensor
    for (int64_t d : proto.dims()) {
        KILN_CHECK(d >= 0, kInvalidModel) << what << " has a negative dimension " << d;
        KILN_CHECK(d == 0 || numel <= max_elems / d, kInvalidModel) << what << " is too large";
        numel *= d;
        shape.push_back(d);
    }
    const size_t nbytes = static_cast<size_t>(numel * esize);

    if (dtype_is_4bit(*dt)) return tensor_from_packed_4bit(proto, base_dir, what, *dt, shape);
    if (*dt == DType::kString) {
        KILN_CHECK(proto.data_location() != onnx::TensorProto::EXTERNAL && !proto.has_raw_data(), kInvalidModel)
            << what << ": a string tensor keeps its elements in string_data (not raw or external data)";
        check_count(proto.string_data(), numel, "string_data", what);
        Tensor out(DType::kString, shape);
        for (int64_t i = 0; i < numel; ++i) out.data_as<std::string>()[i] = proto.string_data(static_cast<int>(i));
        return out;
    }

    if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
        ExternalSlice slice = locate_external(proto, base_dir, what, nbytes);  // validates sizes
        Tensor out(*dt, shape);
        read_external(slice, what, nbytes, out.data());
        return out;
    }

    if (proto.has_raw_data()) {
        const std::string& raw = proto.raw_data();
        KILN_CHECK(raw.size() == nbytes, kInvalidModel)
            << what << ": raw_data has " << raw.size() << " bytes, expected " << nbytes << " ("
            << shape_str(shape) << " x " << dtype_name(*dt) << ")";
        Tensor out(*dt, shape);
        if (nbytes) std::memcpy(out.data(), raw.data(), nbytes);  // ONNX raw data is little-endian
        return out;
    }

    switch (*dt) {
        case DType::kFloat32: check_count(proto.float_data(), numel, "float_data", what); break;
        case DType::kFloat64: check_count(proto.double_data(), numel, "double_data", what); break;
        case DType::kInt64: check_count(proto.int64_data(), numel, "int64_data", what); break;
        case DType::kUInt32:
        case DType::kUInt64: check_count(proto.uint64_data(), numel, "uint64_data", what); break;
        default: check_count(proto.int32_data(), numel, "int32_data", what); break;
    }
    Tensor out(*dt, shape);
    void* dst = out.data();
    switch (*dt) {
        case DType::kFloat32: copy_typed<float>(proto.float_data(), dst); break;
        case DType::kFloat64: copy_typed<double>(proto.double_data(), dst); break;
        case DType::kInt64: copy_typed<int64_t>(proto.int64_data(), dst); break;
        case DType::kUInt32: copy_typed<uint32_t>(proto.uint64_data(), dst); break;
        case DType::kUInt64: copy_typed<uint64_t>(proto.uint64_data(), dst); break;
        case DType::kInt32: copy_typed<int32_t>(proto.int32_data(), dst); break;
        case DType::kInt16: copy_typed<int16_t>(proto.int32_data(), dst); break;
        case DType::kInt8: copy_typed<int8_t>(proto.int32_data(), dst); break;
        case DType::kUInt16:
        case DType::kFloat16:
        case DType::kBFloat16: copy_typed<uint16_t>(proto.int32_data(), dst); break;
        case DType::kUInt8:
        case DType::kFloat8E4M3FN:
        case DType::kFloat8E4M3FNUZ:
        case DType::kFloat8E5M2:
        case DType::kFloat8E5M2FNUZ:
        case DType::kFloat8E8M0: copy_typed<uint8_t>(proto.int32_data(), dst); break;
        case DType::kInt4:
        case DType::kUInt4:
        case DType::kFloat4E2M1:
        case DType::kString: break;  // converted above
        case DType::kBool: {
            uint8_t* o = static_cast<uint8_t*>(dst);
            for (int i = 0; i < proto.int32_data_size(); ++i) o[i] = proto.int32_data(i) != 0;
            break;
        }
    }
    return out;
}

}  // namespace kiln::frontend
