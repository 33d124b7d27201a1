// KServe v2 tensor data: JSON arrays and the binary tensor data extension (see the header).
#include "serve/kserve_tensor_data.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"
#include "serve/types.h"

namespace kiln::serve::kserve {
namespace {

// The binary extension is little-endian; the tensors' memory is copied as it is.
static_assert(std::endian::native == std::endian::little, "binary tensor data assumes a little-endian host");

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string datatype_name(DType dtype) {
    return kserve_datatype(dtype).value_or(dtype_name(dtype));
}

/// A short rendering of a JSON element for messages (long strings cut).
std::string describe(const json& v) {
    std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

/// Calls fn(element) for every non-array leaf of `data` in row-major order, without recursion
/// (a deeply nested hostile request cannot exhaust the stack). Stops once fn returns false.
template <typename Fn>
void for_each_leaf(const json& data, Fn&& fn) {
    std::vector<std::pair<const json*, size_t>> stack{{&data, 0}};
    while (!stack.empty()) {
        auto& [array, next] = stack.back();
        if (next == array->size()) {
            stack.pop_back();
            continue;
        }
        const json& v = (*array)[next++];
        if (v.is_array())
            stack.emplace_back(&v, 0);
        else if (!fn(v))
            return;
    }
}

int64_t count_leaves(const json& data) {
    int64_t n = 0;
    for_each_leaf(data, [&](const json&) {
        ++n;
        return true;
    });
    return n;
}

/// Converts one JSON element to T; false when it has the wrong type or is out of T's range.
template <typename T>
bool element_from_json(const json& v, T& out) {
    if constexpr (std::is_same_v<T, bool>) {
        if (!v.is_boolean()) return false;
        out = v.get<bool>();
        return true;
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (!v.is_string()) return false;
        out = v.get<std::string>();
        return true;
    } else if constexpr (std::is_integral_v<T>) {
        if (v.is_number_unsigned()) {
            const uint64_t u = v.get<uint64_t>();
            if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
            out = static_cast<T>(u);
            return true;
        }
        if (!v.is_number_integer()) return false;
        const int64_t i = v.get<int64_t>();  // negative here: nlohmann stores non-negatives unsigned
        if constexpr (std::is_unsigned_v<T>) {
            if (i < 0) return false;
        } else {
            if (i < static_cast<int64_t>(std::numeric_limits<T>::min())) return false;
        }
        if (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
        out = static_cast<T>(i);
        return true;
    } else {
        if (!v.is_number()) return false;
        out = static_cast<T>(v.get<double>());
        return true;
    }
}

/// What an element of `dtype` must be, for messages.
const char* expected_element(DType dtype) {
    if (dtype == DType::kBool) return "a boolean";
    if (dtype == DType::kString) return "a string";
    if (dtype_is_int(dtype)) return "an integer";
    return "a number";
}

/// Fills `count` elements of type T (the JSON form) through `store(i, value)`.
template <typename T, typename Store>
void fill_from_json(const std::string& what, DType dtype, const json& data, Store&& store) {
    int64_t i = 0;
    for_each_leaf(data, [&](const json& v) {
        T value{};
        if (!element_from_json(v, value)) {
            const bool range = v.is_number_integer() && dtype_is_int(dtype);
            KILN_THROW(kInvalidArgument) << fmt::format(
                "{}: data element {} is {}, {} {}", what, i, describe(v),
                range ? "out of the range of" : std::string("expected ") + expected_element(dtype) + " for",
                datatype_name(dtype));
        }
        store(i++, std::move(value));
        return true;
    });
}

template <typename T>
void fill_plain(const std::string& what, DType dtype, const json& data, Tensor& t) {
    T* p = t.data_as<T>();
    fill_from_json<T>(what, dtype, data, [p](int64_t i, T v) { p[i] = v; });
}

void check_supported(const std::string& what, DType dtype) {
    KILN_CHECK(kserve_datatype(dtype).has_value(), kInvalidArgument)
        << what << ": dtype " << dtype_name(dtype) << " has no KServe v2 datatype";
}

template <typename T>
ojson plain_to_json(const Tensor& t) {
    ojson::array_t out;
    out.reserve(static_cast<size_t>(t.numel()));
    const T* p = t.data_as<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_same_v<T, float>)
            out.emplace_back(static_cast<double>(p[i]));
        else if constexpr (std::is_same_v<T, uint8_t>)
            out.emplace_back(static_cast<uint64_t>(p[i]));
        else
            out.emplace_back(p[i]);
    }
    return out;
}

}  // namespace

int64_t checked_numel(const Shape& shape, const std::string& what) {
    for (int64_t d : shape)
        KILN_CHECK(d >= 0, kInvalidArgument) << what << ": shape " << shape_str(shape) << " has a negative dimension";
    for (int64_t d : shape)
        if (d == 0) return 0;
    int64_t n = 1;
    for (int64_t d : shape)
        KILN_CHECK(!__builtin_mul_overflow(n, d, &n), kInvalidArgument)
            << what << ": shape " << shape_str(shape) << " has too many elements";
    return n;
}

Tensor tensor_from_json(const std::string& what, DType dtype, const Shape& shape, const json& data) {
    check_supported(what, dtype);
    const int64_t numel = checked_numel(shape, what);
    KILN_CHECK(data.is_array(), kInvalidArgument) << what << ": \"data\" must be an array, got " << describe(data);
    const int64_t count = count_leaves(data);
    KILN_CHECK(count == numel, kInvalidArgument)
        << fmt::format("{}: shape {} has {} elements, but \"data\" has {}", what, shape_str(shape), numel, count);
    Tensor t(dtype, shape);
    switch (dtype) {
        case DType::kBool: {
            auto* p = t.data_as<uint8_t>();
            fill_from_json<bool>(what, dtype, data, [p](int64_t i, bool v) { p[i] = v ? 1 : 0; });
            break;
        }
        case DType::kUInt8: fill_plain<uint8_t>(what, dtype, data, t); break;
        case DType::kUInt16: fill_plain<uint16_t>(what, dtype, data, t); break;
        case DType::kUInt32: fill_plain<uint32_t>(what, dtype, data, t); break;
        case DType::kUInt64: fill_plain<uint64_t>(what, dtype, data, t); break;
        case DType::kInt8: fill_plain<int8_t>(what, dtype, data, t); break;
        case DType::kInt16: fill_plain<int16_t>(what, dtype, data, t); break;
        case DType::kInt32: fill_plain<int32_t>(what, dtype, data, t); break;
        case DType::kInt64: fill_plain<int64_t>(what, dtype, data, t); break;
        case DType::kFloat32: fill_plain<float>(what, dtype, data, t); break;
        case DType::kFloat64: fill_plain<double>(what, dtype, data, t); break;
        case DType::kFloat16: {
            auto* p = t.data_as<uint16_t>();
            fill_from_json<float>(what, dtype, data, [p](int64_t i, float v) { p[i] = float_to_half(v); });
            break;
        }
        case DType::kBFloat16: {
            auto* p = t.data_as<uint16_t>();
            fill_from_json<float>(what, dtype, data, [p](int64_t i, float v) { p[i] = float_to_bfloat16(v); });
            break;
        }
        case DType::kString: {
            auto* p = t.data_as<std::string>();
            fill_from_json<std::string>(what, dtype, data, [p](int64_t i, std::string v) { p[i] = std::move(v); });
            break;
        }
        default: KILN_THROW(kInternal) << "bug in Kiln: KServe datatype without a JSON decoder: " << dtype_name(dtype);
    }
    return t;
}

Tensor tensor_from_binary(const std::string& what, DType dtype, const Shape& shape, std::string_view bytes) {
    check_supported(what, dtype);
    const int64_t numel = checked_numel(shape, what);
    if (dtype != DType::kString) {
        const size_t elem = dtype_size(dtype);
        int64_t expected = 0;
        KILN_CHECK(!__builtin_mul_overflow(numel, static_cast<int64_t>(elem), &expected), kInvalidArgument)
            << what << ": shape " << shape_str(shape) << " has too many elements";
        KILN_CHECK(static_cast<uint64_t>(expected) == bytes.size(), kInvalidArgument)
            << fmt::format("{}: binary data has {} bytes, expected {} (shape {} of {})", what, bytes.size(), expected,
                           shape_str(shape), datatype_name(dtype));
        Tensor t(dtype, shape);
        if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
        if (dtype == DType::kBool) {  // any non-zero byte is true; Kiln's bools are exactly 0 or 1
            auto* p = t.data_as<uint8_t>();
            for (int64_t i = 0; i < numel; ++i) p[i] = p[i] != 0;
        }
        return t;
    }
    // BYTES: walk the elements first (each takes at least its 4-byte length), then allocate.
    std::vector<std::string_view> elements;
    size_t pos = 0;
    while (pos < bytes.size()) {
        KILN_CHECK(bytes.size() - pos >= 4, kInvalidArgument)
            << fmt::format("{}: BYTES binary data ends inside the length of element {} ({} bytes left at offset {})",
                           what, elements.size(), bytes.size() - pos, pos);
        uint32_t len = 0;
        std::memcpy(&len, bytes.data() + pos, 4);
        pos += 4;
        KILN_CHECK(bytes.size() - pos >= len, kInvalidArgument)
            << fmt::format("{}: BYTES element {} has length {} but only {} bytes follow", what, elements.size(), len,
                           bytes.size() - pos);
        elements.push_back(bytes.substr(pos, len));
        pos += len;
    }
    KILN_CHECK(static_cast<int64_t>(elements.size()) == numel, kInvalidArgument)
        << fmt::format("{}: shape {} has {} elements, but the BYTES binary data holds {}", what, shape_str(shape),
                       numel, elements.size());
    Tensor t(dtype, shape);
    auto* p = t.data_as<std::string>();
    for (size_t i = 0; i < elements.size(); ++i) p[i] = std::string(elements[i]);
    return t;
}

nlohmann::ordered_json tensor_to_json(const Tensor& t) {
    switch (t.dtype()) {
        case DType::kBool: {
            ojson::array_t out;
            for (int64_t i = 0; i < t.numel(); ++i) out.emplace_back(t.data_as<uint8_t>()[i] != 0);
            return out;
        }
        case DType::kUInt8: return plain_to_json<uint8_t>(t);
        case DType::kUInt16: return plain_to_json<uint16_t>(t);
        case DType::kUInt32: return plain_to_json<uint32_t>(t);
        case DType::kUInt64: return plain_to_json<uint64_t>(t);
        case DType::kInt8: return plain_to_json<int8_t>(t);
        case DType::kInt16: return plain_to_json<int16_t>(t);
        case DType::kInt32: return plain_to_json<int32_t>(t);
        case DType::kInt64: return plain_to_json<int64_t>(t);
        case DType::kFloat32: return plain_to_json<float>(t);
        case DType::kFloat64: return plain_to_json<double>(t);
        case DType::kFloat16:
        case DType::kBFloat16: {
            ojson::array_t out;
            const bool half = t.dtype() == DType::kFloat16;
            for (int64_t i = 0; i < t.numel(); ++i) {
                const uint16_t b = t.data_as<uint16_t>()[i];
                out.emplace_back(static_cast<double>(half ? half_to_float(b) : bfloat16_to_float(b)));
            }
            return out;
        }
        case DType::kString: {
            ojson::array_t out;
            for (int64_t i = 0; i < t.numel(); ++i) out.emplace_back(t.data_as<std::string>()[i]);
            return out;
        }
        default: KILN_THROW(kInternal) << "tensor of dtype " << dtype_name(t.dtype()) << " has no KServe v2 datatype";
    }
}

size_t append_tensor_binary(const Tensor& t, std::string& out) {
    const size_t before = out.size();
    if (t.dtype() == DType::kString) {
        for (int64_t i = 0; i < t.numel(); ++i) {
            const std::string& s = t.data_as<std::string>()[i];
            KILN_CHECK(s.size() <= std::numeric_limits<uint32_t>::max(), kInvalidArgument)
                << "BYTES element " << i << " is " << s.size() << " bytes; the binary encoding holds at most 4 GiB";
            const auto len = static_cast<uint32_t>(s.size());
            out.append(reinterpret_cast<const char*>(&len), 4);
            out.append(s);
        }
    } else {
        KILN_CHECK(kserve_datatype(t.dtype()).has_value(), kInternal)
            << "tensor of dtype " << dtype_name(t.dtype()) << " has no KServe v2 datatype";
        out.append(static_cast<const char*>(t.data()), t.nbytes());
        if (t.dtype() == DType::kBool)
            for (size_t i = before; i < out.size(); ++i) out[i] = out[i] != 0 ? 1 : 0;
    }
    return out.size() - before;
}

}  // namespace kiln::serve::kserve
