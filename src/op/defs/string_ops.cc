// String ops as host kernels (op/host.h); strings are UTF-8 byte strings (DType::kString).
//   StringConcat (20): elementwise a + b with numpy broadcasting.
//   StringSplit (20): Python str.split per element. `delimiter` set and non-empty: split on every
//     occurrence (empty pieces kept); absent or empty: split on runs of whitespace, leading and
//     trailing whitespace dropped (whitespace = the ASCII set " \t\n\v\f\r\x1c-\x1f" Python's
//     str.isspace accepts; non-ASCII spaces are not recognized). `maxsplit` caps the splits from
//     the left (maxsplit+1 pieces at most; negative or absent: unlimited). Y has shape
//     input_shape + [largest piece count], padded with ""; Z (int64, input_shape) the counts.
//   RegexFullMatch (20): re.fullmatch per element -> bool. ONNX specifies RE2 syntax; Kiln uses
//     std::wregex (ECMAScript grammar) over code points decoded from UTF-8, so '.' and counted
//     repeats see characters, not bytes, as in RE2; \w \d \s and \b are ASCII like RE2's. RE2-only
//     syntax (inline flags like (?i), \A \z, \pL, [[:alpha:]] inside other classes, \Q..\E) is
//     not supported: a pattern std::regex cannot compile is a kInvalidArgument error.
//   StringNormalizer (10): removes stop words (whole elements equal to one, compared exactly
//     when is_case_sensitive=1, else after case folding), then applies case_change_action
//     LOWER/UPPER/NONE. Case mapping is ASCII only (A-Z <-> a-z; other bytes, hence all non-ASCII
//     characters, are kept): `locale` is accepted and ignored. Input [C] or [1, C]; output [C'] or
//     [1, C'], and [1] / [1, 1] holding "" when every element is removed (ONNX spec).
#include <algorithm>
#include <regex>
#include <set>

#include "op/broadcast.h"
#include "op/host_broadcast.h"
#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

const Tensor& string_input(const HostArgs& a, size_t i, const char* what) {
    const Tensor& t = a.tensor(i);
    KILN_CHECK(t.dtype() == DType::kString, kInvalidArgument)
        << a.node.describe() << ": input " << what << " must be a string tensor, got " << dtype_name(t.dtype());
    return t;
}

std::vector<std::string> attr_strings(const ir::Node& n, const std::string& k) {
    auto it = n.attrs().find(k);
    if (it == n.attrs().end()) return {};
    const auto* v = std::get_if<std::vector<std::string>>(&it->second);
    KILN_CHECK(v != nullptr, kInvalidModel) << n.describe() << ": attribute " << k << " must be strings";
    return *v;
}

ir::TensorType string_tensor_input(const ir::Node& n, size_t i, const char* what) {
    const ir::TensorType& t = input_type(n, i, what);
    check_dtype(n, what, t.dtype, {DType::kString});
    return t;
}

// ---- StringConcat ----

OpDef string_concat_op() {
    OpDef d;
    d.name = "StringConcat";
    d.onnx_versions = {20};
    d.min_inputs = d.max_inputs = 2;
    d.infer = [](const ir::Node& n) {
        const auto x = string_tensor_input(n, 0, "X");
        const auto y = string_tensor_input(n, 1, "Y");
        return std::vector<ir::TensorType>{{DType::kString, broadcast_shapes(n, {x.shape, y.shape})}};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = string_input(a, 0, "X");
        const Tensor& y = string_input(a, 1, "Y");
        const Shape out_shape = host_broadcast_shape(a.node, {x.shape(), y.shape()});
        const auto xi = host_broadcast_index(x.shape(), out_shape);
        const auto yi = host_broadcast_index(y.shape(), out_shape);
        Tensor out(DType::kString, out_shape);
        auto* o = out.data_as<std::string>();
        const auto* xs = x.data_as<std::string>();
        const auto* ys = y.data_as<std::string>();
        for (size_t k = 0; k < xi.size(); ++k) o[k] = xs[xi[k]] + ys[yi[k]];
        return std::vector<Datum>{std::move(out)};
    };
    return d;
}

// ---- StringSplit ----

bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// CPython's split_whitespace: maxsplit < 0 is unlimited.
std::vector<std::string> split_whitespace(const std::string& s, int64_t maxsplit) {
    std::vector<std::string> out;
    const size_t len = s.size();
    size_t i = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        while (i < len && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
        if (i == len) break;
        const size_t j = i;
        while (i < len && !is_py_space(static_cast<unsigned char>(s[i]))) ++i;
        out.push_back(s.substr(j, i - j));
    }
    while (i < len && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
    if (i < len) out.push_back(s.substr(i));
    return out;
}

std::vector<std::string> split_on(const std::string& s, const std::string& sep, int64_t maxsplit) {
    std::vector<std::string> out;
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        const size_t p = s.find(sep, start);
        if (p == std::string::npos) break;
        out.push_back(s.substr(start, p - start));
        start = p + sep.size();
    }
    out.push_back(s.substr(start));
    return out;
}

OpDef string_split_op() {
    OpDef d;
    d.name = "StringSplit";
    d.onnx_versions = {20};
    d.min_outputs = d.max_outputs = 2;
    d.attrs = {{"delimiter", AttrKind::kString, std::nullopt}, {"maxsplit", AttrKind::kInt, std::nullopt}};
    d.infer = [](const ir::Node& n) {
        const auto x = string_tensor_input(n, 0, "X");
        auto y_shape = x.shape;
        y_shape.push_back(ir::Dim::sym("?"));
        return std::vector<ir::TensorType>{{DType::kString, y_shape}, {DType::kInt64, x.shape}};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = string_input(a, 0, "X");
        const std::string sep = a.node.attr_string("delimiter", "");
        const int64_t maxsplit = a.node.attr_int("maxsplit", -1);
        const int64_t n = x.numel();
        std::vector<std::vector<std::string>> parts(static_cast<size_t>(n));
        Tensor z(DType::kInt64, x.shape());
        int64_t width = 0;
        for (int64_t i = 0; i < n; ++i) {
            const std::string& s = x.data_as<std::string>()[i];
            parts[i] = sep.empty() ? split_whitespace(s, maxsplit) : split_on(s, sep, maxsplit);
            const auto count = static_cast<int64_t>(parts[i].size());
            z.data_as<int64_t>()[i] = count;
            width = std::max(width, count);
        }
        Shape y_shape = x.shape();
        y_shape.push_back(width);
        Tensor y(DType::kString, y_shape);
        for (int64_t i = 0; i < n; ++i)
            for (size_t j = 0; j < parts[i].size(); ++j) y.data_as<std::string>()[i * width + j] = parts[i][j];
        return std::vector<Datum>{std::move(y), std::move(z)};
    };
    return d;
}

// ---- RegexFullMatch ----

// UTF-8 -> code points (wchar_t is 32-bit on the platforms Kiln builds for); a malformed byte
// becomes U+FFFD, as RE2 reads it.
std::wstring utf8_to_wide(const std::string& s) {
    std::wstring out;
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
        uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1f) : extra == 2 ? (c & 0x0f) : (c & 0x07);
        bool ok = extra >= 0 && i + static_cast<size_t>(extra) < s.size();
        for (int k = 1; ok && k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
            if ((cc >> 6) != 0x2) ok = false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (!ok) {
            out.push_back(static_cast<wchar_t>(0xfffd));
            ++i;
            continue;
        }
        out.push_back(static_cast<wchar_t>(cp));
        i += static_cast<size_t>(extra) + 1;
    }
    return out;
}

std::wregex compile_pattern(const ir::Node& n) {
    KILN_CHECK(n.has_attr("pattern"), kInvalidModel) << n.describe() << ": missing attribute pattern";
    const std::string pattern = n.attr_string("pattern", "");
    std::wregex re;
    try {
        re = std::wregex(utf8_to_wide(pattern), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
        KILN_THROW(kInvalidArgument) << n.describe() << ": invalid regular expression pattern '" << pattern
                                     << "': " << e.what();
    }
    return re;
}

OpDef regex_full_match_op() {
    OpDef d;
    d.name = "RegexFullMatch";
    d.onnx_versions = {20};
    d.attrs = {{"pattern", AttrKind::kString, std::nullopt}};
    d.infer = [](const ir::Node& n) {
        const auto x = string_tensor_input(n, 0, "X");
        return std::vector<ir::TensorType>{{DType::kBool, x.shape}};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = string_input(a, 0, "X");
        const std::wregex re = compile_pattern(a.node);
        Tensor y(DType::kBool, x.shape());
        for (int64_t i = 0; i < x.numel(); ++i) {
            try {
                y.data_as<bool>()[i] = std::regex_match(utf8_to_wide(x.data_as<std::string>()[i]), re);
            } catch (const std::regex_error& e) {  // error_complexity / error_stack
                KILN_THROW(kUnsupported) << a.node.describe() << ": pattern '" << a.node.attr_string("pattern", "")
                                         << "' is too complex for element " << i << ": " << e.what();
            }
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

// ---- StringNormalizer ----

std::string ascii_case(std::string s, bool upper) {
    for (char& c : s) {
        if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
        if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return s;
}

std::string check_case_action(const ir::Node& n) {
    const std::string act = n.attr_string("case_change_action", "NONE");
    KILN_CHECK(act == "NONE" || act == "LOWER" || act == "UPPER", kInvalidModel)
        << n.describe() << ": case_change_action must be NONE, LOWER or UPPER, got '" << act << "'";
    return act;
}

OpDef string_normalizer_op() {
    OpDef d;
    d.name = "StringNormalizer";
    d.onnx_versions = {10};
    d.attrs = {{"case_change_action", AttrKind::kString, ir::Attr(std::string("NONE"))},
               {"is_case_sensitive", AttrKind::kInt, ir::Attr(int64_t{0})},
               {"locale", AttrKind::kString, std::nullopt},
               {"stopwords", AttrKind::kStrings, std::nullopt}};
    d.infer = [](const ir::Node& n) {
        const auto x = string_tensor_input(n, 0, "X");
        check_case_action(n);
        KILN_CHECK(x.rank() == 1 || (x.rank() == 2 && !(x.shape[0].is_static() && x.shape[0].value != 1)),
                   kInvalidModel)
            << n.describe() << ": input X must have shape [C] or [1, C], got " << dims_str(x.shape);
        auto shape = x.shape;
        shape.back() = ir::Dim::sym("?");
        return std::vector<ir::TensorType>{{DType::kString, shape}};
    };
    d.host = [](const HostArgs& a) {
        const Tensor& x = string_input(a, 0, "X");
        const ir::Node& n = a.node;
        const Shape& xs = x.shape();
        KILN_CHECK(xs.size() == 1 || (xs.size() == 2 && xs[0] == 1), kInvalidArgument)
            << n.describe() << ": input X must have shape [C] or [1, C], got " << shape_str(xs);
        const std::string act = check_case_action(n);
        const bool sensitive = n.attr_int("is_case_sensitive", 0) != 0;
        std::set<std::string> stops;
        for (const std::string& w : attr_strings(n, "stopwords")) stops.insert(sensitive ? w : ascii_case(w, false));
        std::vector<std::string> kept;
        for (int64_t i = 0; i < x.numel(); ++i) {
            const std::string& s = x.data_as<std::string>()[i];
            if (stops.count(sensitive ? s : ascii_case(s, false)) != 0) continue;
            kept.push_back(act == "NONE" ? s : ascii_case(s, act == "UPPER"));
        }
        if (kept.empty()) kept.emplace_back();
        const auto c = static_cast<int64_t>(kept.size());
        Tensor y(DType::kString, xs.size() == 1 ? Shape{c} : Shape{1, c});
        std::move(kept.begin(), kept.end(), y.data_as<std::string>());
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

}  // namespace

void register_string_ops(OpRegistry& r) {
    r.add(string_concat_op());
    r.add(string_split_op());
    r.add(regex_full_match_op());
    r.add(string_normalizer_op());
}

}  // namespace kiln::op
