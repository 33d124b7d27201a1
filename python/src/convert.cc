#include "convert.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <vector>

#include "lowp_dtypes.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace kiln::python {
namespace {

using nb::dlpack::dtype_code;

struct DTypeMap {
    DType kiln;
    dtype_code code;
    uint8_t bits;
    const char* numpy_name;
};

// The dtypes numpy has. bf16, the float8/float4 and 4-bit integer types have none: ml_dtypes
// gives them user-defined numpy dtypes (lowp_dtypes.h).
constexpr DTypeMap kDTypes[] = {
    {DType::kFloat32, dtype_code::Float, 32, "float32"}, {DType::kFloat64, dtype_code::Float, 64, "float64"},
    {DType::kFloat16, dtype_code::Float, 16, "float16"}, {DType::kInt8, dtype_code::Int, 8, "int8"},
    {DType::kInt16, dtype_code::Int, 16, "int16"},       {DType::kInt32, dtype_code::Int, 32, "int32"},
    {DType::kInt64, dtype_code::Int, 64, "int64"},       {DType::kUInt8, dtype_code::UInt, 8, "uint8"},
    {DType::kUInt16, dtype_code::UInt, 16, "uint16"},    {DType::kUInt32, dtype_code::UInt, 32, "uint32"},
    {DType::kUInt64, dtype_code::UInt, 64, "uint64"},    {DType::kBool, dtype_code::Bool, 8, "bool"},
};

std::string dlpack_name(nb::dlpack::dtype t) {
    const char* kinds[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
    std::string k = t.code <= 6 ? kinds[t.code] : "code" + std::to_string(t.code);
    return k + std::to_string(t.bits);
}

DType kiln_dtype(nb::dlpack::dtype t, const std::string& what) {
    if (t.lanes == 1)
        for (const DTypeMap& m : kDTypes)
            if (static_cast<uint8_t>(m.code) == t.code && m.bits == t.bits) return m.kiln;
    KILN_THROW(kInvalidArgument) << what << ": numpy dtype " << dlpack_name(t) << " has no Kiln dtype";
}

const DTypeMap& numpy_dtype(DType t) {
    for (const DTypeMap& m : kDTypes)
        if (m.kiln == t) return m;
    KILN_THROW(kInternal) << "bug in Kiln: numpy has no dtype " << dtype_name(t);
}

nb::module_& numpy() {
    static nb::module_* np = new nb::module_(nb::module_::import_("numpy"));  // lives until exit
    return *np;
}

Shape shape_of(nb::handle array) {
    Shape shape;
    for (nb::handle d : nb::tuple(array.attr("shape"))) shape.push_back(nb::cast<int64_t>(d));
    return shape;
}

Tensor strings_from_numpy(nb::handle array, const std::string& what) {
    Tensor t(DType::kString, shape_of(array));
    nb::list items = nb::list(array.attr("ravel")().attr("tolist")());
    std::string* out = t.data_as<std::string>();
    for (size_t i = 0; i < items.size(); ++i) {
        nb::handle item = items[i];
        if (nb::isinstance<nb::str>(item)) {
            out[i] = nb::cast<std::string>(item);
        } else if (nb::isinstance<nb::bytes>(item)) {
            nb::bytes b = nb::borrow<nb::bytes>(item);
            out[i].assign(b.c_str(), b.size());
        } else {
            KILN_THROW(kInvalidArgument) << what << ": element " << i << " of an object array is a "
                                         << nb::cast<std::string>(nb::type_name(item.type()))
                                         << "; Kiln takes object arrays of str or bytes only";
        }
    }
    return t;
}

nb::object strings_to_numpy(const Tensor& t) {
    nb::list items;
    const std::string* s = t.data_as<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) items.append(nb::str(s[i].data(), s[i].size()));
    nb::tuple shape = nb::tuple(nb::cast(t.shape()));
    return numpy().attr("array")(items, "dtype"_a = "object").attr("reshape")(shape);
}

}  // namespace

Tensor tensor_from_numpy(nb::handle array, const std::string& what) {
    if (!nb::hasattr(array, "dtype") || !nb::hasattr(array, "shape"))
        KILN_THROW(kInvalidArgument) << what << ": expected a numpy array, got a "
                                     << nb::cast<std::string>(nb::type_name(array.type()));
    const std::string kind = nb::cast<std::string>(array.attr("dtype").attr("kind"));
    if (kind == "U" || kind == "S" || kind == "O") return strings_from_numpy(array, what);
    // ml_dtypes' dtypes: read as their raw bits (numpy exports no buffer or DLPack for them).
    const std::optional<DType> lowp = lowp_dtype_of(array.attr("dtype"));
    nb::object raw = lowp ? lowp_raw_view(array, *lowp) : nb::borrow(array);
    nb::ndarray<nb::ro, nb::device::cpu> a;
    if (!nb::try_cast(raw, a, /*convert=*/false)) {
        // nb::str of an attribute accessor would borrow the dtype as a str, not call str().
        const nb::object dtype = array.attr("dtype");
        KILN_THROW(kInvalidArgument) << what << ": numpy dtype " << nb::cast<std::string>(nb::str(dtype))
                                     << " has no Kiln dtype";
    }
    const DType dtype = lowp ? *lowp : kiln_dtype(a.dtype(), what);
    Shape shape(a.ndim());
    int64_t expected_stride = 1;
    bool contiguous = true;
    for (size_t d = a.ndim(); d-- > 0;) {
        shape[d] = static_cast<int64_t>(a.shape(d));
        if (shape[d] != 1 && a.stride(d) != expected_stride) contiguous = false;
        expected_stride *= shape[d];
    }
    // No elements: nothing to borrow, and numpy's strides for a zero-size dim mean nothing.
    if (shape_numel(shape) == 0) return Tensor(dtype, std::move(shape));
    KILN_CHECK(contiguous, kInvalidArgument) << what << ": the array is not C-contiguous (kiln.InferenceSession "
                                             << "makes a contiguous copy before calling the native session)";
    if (dtype == DType::kInt4) return int4_from_ml_dtypes(static_cast<const uint8_t*>(a.data()), std::move(shape));
    // Kiln never writes its inputs: the const_cast only fits Tensor's one pointer type.
    return Tensor::borrow(dtype, std::move(shape), const_cast<void*>(a.data()));
}

Tensor tensor_into_numpy(nb::handle array, const std::string& what) {
    // The common case at the cost of one cast: a writable, C-contiguous CPU array of a dtype
    // numpy has (nanobind refuses read-only arrays without nb::ro).
    nb::ndarray<nb::device::cpu, nb::c_contig> a;
    if (nb::try_cast(array, a, /*convert=*/false) && a.size() > 0) {
        for (const DTypeMap& m : kDTypes)
            if (a.dtype().lanes == 1 && static_cast<uint8_t>(m.code) == a.dtype().code && m.bits == a.dtype().bits) {
                Shape shape(a.ndim());
                for (size_t d = 0; d < a.ndim(); ++d) shape[d] = static_cast<int64_t>(a.shape(d));
                return Tensor::borrow(m.kiln, std::move(shape), a.data());
            }
    }
    // Anything else (ml_dtypes' types, no elements) or an error, said precisely.
    KILN_CHECK(nb::hasattr(array, "flags") && nb::cast<bool>(array.attr("flags").attr("writeable")), kInvalidArgument)
        << what << ": the bound array is not writable";
    KILN_CHECK(nb::cast<bool>(array.attr("flags").attr("c_contiguous")), kInvalidArgument)
        << what << ": the bound array is not C-contiguous";
    Tensor t = tensor_from_numpy(array, what);
    KILN_CHECK(t.dtype() != DType::kString && t.dtype() != DType::kInt4, kInvalidArgument)
        << what << ": " << dtype_name(t.dtype()) << " outputs cannot be bound (Kiln stores them differently)";
    return t;
}

Datum datum_from_python(nb::handle value, const TensorInfo& info) {
    const std::string what = "input '" + info.name + "'";
    if (value.is_none()) return Datum::none();
    if (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) {
        std::vector<Tensor> items;
        size_t i = 0;
        for (nb::handle item : value) items.push_back(tensor_from_numpy(item, what + " item " + std::to_string(i++)));
        return Datum::sequence(info.dtype, std::move(items));
    }
    return tensor_from_numpy(value, what);
}

nb::object ndarray_over(Tensor t, DType as) {
    const DTypeMap& np_dtype = numpy_dtype(as);
    KILN_ICHECK(dtype_size(as) == dtype_size(t.dtype())) << dtype_name(t.dtype()) << " as " << dtype_name(as);
    const nb::dlpack::dtype dtype{static_cast<uint8_t>(np_dtype.code), np_dtype.bits, 1};
    std::vector<size_t> shape(t.shape().begin(), t.shape().end());
    if (t.numel() == 0) return numpy().attr("empty")(nb::tuple(nb::cast(shape)), "dtype"_a = np_dtype.numpy_name);
    // Zero copy when this handle alone owns the storage (a fresh output block of the session's
    // allocator); a storage shared with anything else (a constant, another output) is copied, so
    // writing into the array never changes Kiln's state.
    if (!t.sole_owner()) t = t.clone();
    auto* owned = new Tensor(std::move(t));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
    return nb::ndarray<nb::numpy>(owned->data(), shape.size(), shape.data(), owner, nullptr, dtype).cast();
}

nb::object tensor_to_numpy(Tensor t, const std::string& what) {
    if (t.dtype() == DType::kString) return strings_to_numpy(t);
    for (const DTypeMap& m : kDTypes)
        if (m.kiln == t.dtype()) return ndarray_over(std::move(t), m.kiln);
    return lowp_tensor_to_numpy(std::move(t), what);
}

nb::object datum_to_python(Datum value, const std::string& what) {
    if (value.is_none()) return nb::none();
    // Take the tensors out and drop the Datum, so each tensor's storage has one owner again.
    if (value.is_sequence()) {
        std::vector<Tensor> tensors = value.items();
        value = Datum();
        nb::list items;
        for (Tensor& t : tensors) items.append(tensor_to_numpy(std::move(t), what));
        return items;
    }
    Tensor t = value.tensor();
    value = Datum();
    return tensor_to_numpy(std::move(t), what);
}

}  // namespace kiln::python
