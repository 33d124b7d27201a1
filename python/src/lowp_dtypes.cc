#include "lowp_dtypes.h"

#include <nanobind/stl/string.h>

#include "convert.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

struct LowpType {
    DType kiln;
    const char* ml_name;  // the ml_dtypes attribute, also its numpy dtype's name
};

constexpr LowpType kLowp[] = {
    {DType::kBFloat16, "bfloat16"},
    {DType::kFloat8E4M3FN, "float8_e4m3fn"},
    {DType::kFloat8E4M3FNUZ, "float8_e4m3fnuz"},
    {DType::kFloat8E5M2, "float8_e5m2"},
    {DType::kFloat8E5M2FNUZ, "float8_e5m2fnuz"},
    {DType::kFloat8E8M0, "float8_e8m0fnu"},
    {DType::kInt4, "int4"},
    {DType::kUInt4, "uint4"},
    {DType::kFloat4E2M1, "float4_e2m1fn"},
};

// numpy's NPY_USERDEF: dtypes numbered from here on are registered by other packages.
constexpr int kFirstUserDType = 256;

// The ml_dtypes module, imported at its first use. A plain pointer guarded by the GIL, not a
// function-local static: the import may release the GIL, and another thread blocked on a static's
// initialization guard while holding the GIL would deadlock. Never released (lives until exit).
nb::handle ml_dtypes_module() {
    static PyObject* module = nullptr;
    if (!module) module = nb::module_::import_("ml_dtypes").release().ptr();
    return module;
}

// The numpy dtype of ml_dtypes.<name>; a kiln::Error naming `what` when ml_dtypes is missing.
nb::object ml_dtype(const LowpType& t, const std::string& what) {
    try {
        return nb::module_::import_("numpy").attr("dtype")(ml_dtypes_module().attr(t.ml_name));
    } catch (const nb::python_error& e) {
        KILN_THROW(kUnsupported) << what << " is " << dtype_name(t.kiln) << ", which numpy has no dtype for: "
                                 << "the ml_dtypes package gives it one (pip install ml_dtypes), and it "
                                 << "could not be used: " << e.what();
    }
}

}  // namespace

std::optional<DType> lowp_dtype_of(nb::handle dtype) {
    int num = 0;
    if (!nb::try_cast(nb::getattr(dtype, "num", nb::none()), num) || num < kFirstUserDType) return std::nullopt;
    const std::string name = nb::cast<std::string>(dtype.attr("name"));
    for (const LowpType& t : kLowp) {
        if (name != t.ml_name) continue;
        try {
            if (dtype.equal(ml_dtype(t, name))) return t.kiln;
        } catch (const Error&) {
            // ml_dtypes cannot be imported: this same-named dtype is someone else's.
        }
    }
    return std::nullopt;
}

nb::object lowp_raw_view(nb::handle array, DType dtype) {
    return array.attr("view")(dtype_size(dtype) == 2 ? "uint16" : "uint8");
}

Tensor int4_from_ml_dtypes(const uint8_t* bits, Shape shape) {
    Tensor t(DType::kInt4, std::move(shape));
    int8_t* out = t.data_as<int8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) out[i] = wrap_int4(bits[i]);
    return t;
}

nb::object lowp_tensor_to_numpy(Tensor t, const std::string& what) {
    const LowpType* type = nullptr;
    for (const LowpType& l : kLowp)
        if (l.kiln == t.dtype()) type = &l;
    KILN_ICHECK(type != nullptr) << "not a low-precision dtype: " << dtype_name(t.dtype());
    nb::object dtype = ml_dtype(*type, what);
    if (t.dtype() == DType::kInt4) {
        Tensor bits(DType::kUInt8, t.shape());
        const int8_t* in = t.data_as<int8_t>();
        uint8_t* out = bits.data_as<uint8_t>();
        for (int64_t i = 0; i < t.numel(); ++i) out[i] = static_cast<uint8_t>(in[i]) & 0xf;
        t = std::move(bits);
    }
    const DType raw = dtype_size(t.dtype()) == 2 ? DType::kUInt16 : DType::kUInt8;
    return ndarray_over(std::move(t), raw).attr("view")(dtype);
}

}  // namespace kiln::python
