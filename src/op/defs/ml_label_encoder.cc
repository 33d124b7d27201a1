// ai.onnx.ml LabelEncoder (versions 1, 2, 4) as a host kernel: maps each element of X through a
// key -> value table; elements not among the keys get the default.
//   Keys: exactly one of keys_strings / keys_int64s / keys_floats / keys_tensor (string, int64,
//   int32, int16, float, double); X's dtype must be the keys' dtype. Values: exactly one of
//   values_strings / values_int64s / values_floats / values_tensor, as many as keys; Y has their
//   dtype and X's shape. Default: default_tensor (one element of the values' dtype) or, by the
//   values' kind, default_string ("_Unused"), default_int64 (-1), default_float (-0.0).
//   Version 1 (classes_strings): string X -> int64 position in classes_strings (default_int64),
//   int64 X -> classes_strings[X] (default_string).
// Float keys compare as floats of the keys' dtype (keys_floats are f32: an f64 attribute value is
// rounded to f32 first); a NaN key matches a NaN element; 0.0 and -0.0 are one key. A key listed
// twice maps to its last value (Python's dict(zip(keys, values)), as the ONNX reference does).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

const std::vector<DType>& table_types() {
    static const std::vector<DType> v = {DType::kString, DType::kInt64,   DType::kInt32,
                                         DType::kInt16,  DType::kFloat32, DType::kFloat64};
    return v;
}

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

const ir::Attr* find_attr(const ir::Node& n, const char* k) {
    auto it = n.attrs().find(k);
    return it == n.attrs().end() ? nullptr : &it->second;
}

Tensor strings_tensor(const std::vector<std::string>& v) {
    Tensor t(DType::kString, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data_as<std::string>()[i] = v[i];
    return t;
}

Tensor ints_tensor(const std::vector<int64_t>& v) {
    Tensor t(DType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data_as<int64_t>()[i] = v[i];
    return t;
}

Tensor floats_tensor(const std::vector<double>& v) {
    Tensor t(DType::kFloat32, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.data_as<float>()[i] = static_cast<float>(v[i]);
    return t;
}

// One of `<prefix>_strings / _int64s / _floats / _tensor` as a 1-D tensor; nullopt if none.
std::optional<Tensor> table_attr(const ir::Node& n, const std::string& prefix) {
    std::optional<Tensor> got;
    int found = 0;
    for (const char* suffix : {"_strings", "_int64s", "_floats", "_tensor"}) {
        const ir::Attr* a = find_attr(n, (prefix + suffix).c_str());
        if (a == nullptr) continue;
        ++found;
        if (const auto* s = std::get_if<std::vector<std::string>>(a)) got = strings_tensor(*s);
        else if (const auto* i = std::get_if<std::vector<int64_t>>(a)) got = ints_tensor(*i);
        else if (const auto* f = std::get_if<std::vector<double>>(a)) got = floats_tensor(*f);
        else if (const auto* t = std::get_if<Tensor>(a)) got = t->reshaped({t->numel()});
        else KILN_THROW(kInvalidModel) << n.describe() << ": attribute " << prefix << suffix << " has kind "
                                       << ir::attr_kind_name(*a);
    }
    KILN_CHECK(found <= 1, kInvalidModel) << n.describe() << ": expected one " << prefix << "_* attribute, got "
                                          << found;
    if (got) {
        KILN_CHECK(std::find(table_types().begin(), table_types().end(), got->dtype()) != table_types().end(),
                   kUnsupported)
            << n.describe() << ": LabelEncoder does not support " << prefix << " of dtype " << dtype_name(got->dtype());
    }
    return got;
}

struct Table {
    Tensor keys, values, dflt;  // 1-D keys and values of one length; dflt: one value
};

Tensor scalar_default(const ir::Node& n, DType t) {
    Tensor d(t, {1});
    if (t == DType::kString) d.data_as<std::string>()[0] = n.attr_string("default_string", "_Unused");
    else if (is_float(t)) d.set_f64(0, n.attr_float("default_float", -0.0));
    else d.set_i64(0, n.attr_int("default_int64", -1));
    return d;
}

// The table of a node; `x_dtype` (the input dtype) picks the direction of a version-1 node.
Table build_table(const ir::Node& n, DType x_dtype) {
    Table tb;
    if (const ir::Attr* cls = find_attr(n, "classes_strings")) {
        const auto* v = std::get_if<std::vector<std::string>>(cls);
        KILN_CHECK(v != nullptr, kInvalidModel) << n.describe() << ": attribute classes_strings must be strings";
        std::vector<int64_t> pos(v->size());
        for (size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<int64_t>(i);
        const bool from_string = x_dtype == DType::kString;
        tb.keys = from_string ? strings_tensor(*v) : ints_tensor(pos);
        tb.values = from_string ? ints_tensor(pos) : strings_tensor(*v);
        tb.dflt = scalar_default(n, tb.values.dtype());
        return tb;
    }
    auto keys = table_attr(n, "keys");
    auto values = table_attr(n, "values");
    KILN_CHECK(keys && values, kInvalidModel)
        << n.describe() << ": expected one keys_* and one values_* attribute (or classes_strings)";
    KILN_CHECK(keys->numel() == values->numel(), kInvalidModel)
        << n.describe() << ": expected as many values as keys, got " << keys->numel() << " keys and "
        << values->numel() << " values";
    tb.keys = std::move(*keys);
    tb.values = std::move(*values);
    if (const ir::Attr* dt = find_attr(n, "default_tensor")) {
        const auto* t = std::get_if<Tensor>(dt);
        KILN_CHECK(t != nullptr && t->numel() == 1 && t->dtype() == tb.values.dtype(), kInvalidModel)
            << n.describe() << ": default_tensor must be one " << dtype_name(tb.values.dtype())
            << " element (the values' dtype)";
        tb.dflt = t->reshaped({1});
    } else {
        tb.dflt = scalar_default(n, tb.values.dtype());
    }
    return tb;
}

DType key_dtype(const ir::Node& n, DType x_dtype) {
    if (find_attr(n, "classes_strings") != nullptr) return x_dtype == DType::kString ? x_dtype : DType::kInt64;
    auto keys = table_attr(n, "keys");
    KILN_CHECK(keys.has_value(), kInvalidModel) << n.describe() << ": missing keys_* attribute";
    return keys->dtype();
}

void copy_elem(Tensor& dst, int64_t i, const Tensor& src, int64_t j) {
    if (dst.dtype() == DType::kString) {
        dst.data_as<std::string>()[i] = src.data_as<std::string>()[j];
        return;
    }
    const size_t w = dtype_size(dst.dtype());
    std::memcpy(static_cast<char*>(dst.data()) + static_cast<size_t>(i) * w,
                static_cast<const char*>(src.data()) + static_cast<size_t>(j) * w, w);
}

// Row of each element of x in the keys (-1: not found).
std::vector<int64_t> lookup(const Tensor& keys, const Tensor& x) {
    std::vector<int64_t> row(static_cast<size_t>(x.numel()), -1);
    const int64_t nk = keys.numel();
    if (x.dtype() == DType::kString) {
        std::unordered_map<std::string, int64_t> m;
        for (int64_t k = 0; k < nk; ++k) m[keys.data_as<std::string>()[k]] = k;
        for (int64_t i = 0; i < x.numel(); ++i)
            if (auto it = m.find(x.data_as<std::string>()[i]); it != m.end()) row[i] = it->second;
    } else if (is_float(x.dtype())) {
        std::map<double, int64_t> m;  // f32 values are exact as doubles
        int64_t nan_row = -1;
        for (int64_t k = 0; k < nk; ++k) {
            const double v = keys.get_f64(k);
            if (std::isnan(v)) nan_row = k;
            else m[v] = k;
        }
        for (int64_t i = 0; i < x.numel(); ++i) {
            const double v = x.get_f64(i);
            if (std::isnan(v)) row[i] = nan_row;
            else if (auto it = m.find(v); it != m.end()) row[i] = it->second;
        }
    } else {
        std::unordered_map<int64_t, int64_t> m;
        for (int64_t k = 0; k < nk; ++k) m[keys.get_i64(k)] = k;
        for (int64_t i = 0; i < x.numel(); ++i)
            if (auto it = m.find(x.get_i64(i)); it != m.end()) row[i] = it->second;
    }
    return row;
}

OpDef label_encoder_op() {
    OpDef d;
    d.name = "LabelEncoder";
    d.domain = "ai.onnx.ml";
    d.onnx_versions = {1, 2, 4};
    for (const char* k : {"keys_strings", "values_strings", "classes_strings"})
        d.attrs.push_back({k, AttrKind::kStrings, std::nullopt});
    for (const char* k : {"keys_int64s", "values_int64s"}) d.attrs.push_back({k, AttrKind::kInts, std::nullopt});
    for (const char* k : {"keys_floats", "values_floats"}) d.attrs.push_back({k, AttrKind::kFloats, std::nullopt});
    for (const char* k : {"keys_tensor", "values_tensor", "default_tensor"})
        d.attrs.push_back({k, AttrKind::kTensor, std::nullopt});
    d.attrs.push_back({"default_string", AttrKind::kString, std::nullopt});
    d.attrs.push_back({"default_int64", AttrKind::kInt, std::nullopt});
    d.attrs.push_back({"default_float", AttrKind::kFloat, std::nullopt});
    d.infer = [](const ir::Node& n) {
        const ir::TensorType& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, table_types());
        const DType kt = key_dtype(n, x.dtype);
        KILN_CHECK(kt == x.dtype, kInvalidModel) << n.describe() << ": input X is " << dtype_name(x.dtype)
                                                 << " but the keys are " << dtype_name(kt);
        const Table tb = build_table(n, x.dtype);
        return std::vector<ir::TensorType>{{tb.values.dtype(), x.shape}};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = a.tensor(0);
        const Table tb = build_table(a.node, x.dtype());
        KILN_CHECK(tb.keys.dtype() == x.dtype(), kInvalidArgument)
            << a.node.describe() << ": input X is " << dtype_name(x.dtype()) << " but the keys are "
            << dtype_name(tb.keys.dtype());
        Tensor y(tb.values.dtype(), x.shape());
        const std::vector<int64_t> row = lookup(tb.keys, x);
        for (int64_t i = 0; i < x.numel(); ++i) {
            if (row[i] >= 0) copy_elem(y, i, tb.values, row[i]);
            else copy_elem(y, i, tb.dflt, 0);
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

}  // namespace

void register_ml_label_encoder_ops(OpRegistry& r) { r.add(label_encoder_op()); }

}  // namespace kiln::op
