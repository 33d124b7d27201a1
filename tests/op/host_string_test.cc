// Host kernels of the string ops (StringConcat, StringSplit, RegexFullMatch, StringNormalizer),
// Equal on strings and ai.onnx.ml LabelEncoder, against the ONNX operator docs' examples and the
// Python semantics they are defined by (str + str, str.split, re.fullmatch, dict lookups), written
// out by hand below; plus the error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "host_test_util.h"
#include "op_test_util.h"

namespace kiln::op::testing {
namespace {

using Strs = std::vector<std::string>;

Strs strings_of(const Datum& d) {
    const Tensor& t = d.tensor();
    EXPECT_EQ(t.dtype(), DType::kString);
    return Strs(t.data_as<std::string>(), t.data_as<std::string>() + t.numel());
}

std::vector<bool> bools_of(const Datum& d) {
    const Tensor& t = d.tensor();
    EXPECT_EQ(t.dtype(), DType::kBool);
    return std::vector<bool>(t.data_as<bool>(), t.data_as<bool>() + t.numel());
}

// ---- StringConcat ----

TEST(HostStringConcat, DocExample) {
    auto out = run_host("StringConcat", {make_strings({2}, {"abc", "def"}), make_strings({2}, {".com", ".net"})});
    EXPECT_EQ(out[0].tensor().shape(), (Shape{2}));
    EXPECT_EQ(strings_of(out[0]), (Strs{"abc.com", "def.net"}));
}

TEST(HostStringConcat, BroadcastsLikeNumpy) {
    // x [2,1] + y [3] -> [2,3]: out[i][j] = x[i][0] + y[j]; UTF-8 bytes pass through.
    Strs xs = {"a", "\xe7\x9a\x84"}, ys = {"1", "", "z"};
    auto out = run_host("StringConcat", {make_strings({2, 1}, xs), make_strings({3}, ys)});
    EXPECT_EQ(out[0].tensor().shape(), (Shape{2, 3}));
    Strs want;
    for (const auto& x : xs)
        for (const auto& y : ys) want.push_back(x + y);
    EXPECT_EQ(strings_of(out[0]), want);
    // Scalars.
    auto s = run_host("StringConcat", {make_strings({}, {"cat"}), make_strings({}, {"s"})});
    EXPECT_EQ(s[0].tensor().shape(), Shape{});
    EXPECT_EQ(strings_of(s[0]), (Strs{"cats"}));
}

TEST(HostStringConcat, Errors) {
    expect_error([] { run_host("StringConcat", {make_strings({2}, {"a", "b"}), make_strings({3}, {"", "", ""})}); },
                 ErrorKind::kInvalidArgument, "not broadcastable");
    expect_error(
        [] { run_host("StringConcat", {make_strings({1}, {"a"}), make_tensor(DType::kInt64, {1}, {1})}); },
        ErrorKind::kInvalidArgument, "must be a string tensor");
}

// ---- StringSplit ----

TEST(HostStringSplit, Delimiter) {
    // "o-n-n--x-".split("-") == ["o","n","n","","x",""]; "o-n----nx".split("-") likewise 6 pieces.
    auto out = run_host("StringSplit", {make_strings({2}, {"o-n-n--x-", "o-n----nx"})},
                        {{"delimiter", std::string("-")}}, 2);
    EXPECT_EQ(out[0].tensor().shape(), (Shape{2, 6}));
    EXPECT_EQ(strings_of(out[0]), (Strs{"o", "n", "n", "", "x", "", "o", "n", "", "", "", "nx"}));
    EXPECT_EQ(out[1].tensor().dtype(), DType::kInt64);
    EXPECT_EQ(out[1].tensor().data_as<int64_t>()[0], 6);
    EXPECT_EQ(out[1].tensor().data_as<int64_t>()[1], 6);
    // Padding: "a.b".split(".") -> 2, "".split(".") -> [""] (1), "abc".split(".") -> 1. A
    // multi-character delimiter: "a::b".split("::") -> ["a","b"].
    auto pad = run_host("StringSplit", {make_strings({3}, {"a::b", "", "abc"})}, {{"delimiter", std::string("::")}}, 2);
    EXPECT_EQ(pad[0].tensor().shape(), (Shape{3, 2}));
    EXPECT_EQ(strings_of(pad[0]), (Strs{"a", "b", "", "", "abc", ""}));
    EXPECT_EQ(pad[1].tensor().data_as<int64_t>()[1], 1);
}

TEST(HostStringSplit, WhitespaceAndMaxsplit) {
    // No delimiter: " hello world   ! ".split() == ["hello","world","!"]; "".split() == [];
    // "\t a\nb ".split() == ["a","b"].
    for (ir::AttrMap attrs : {ir::AttrMap{}, ir::AttrMap{{"delimiter", std::string("")}}}) {
        auto out = run_host("StringSplit", {make_strings({3}, {" hello world   ! ", "", "\t a\nb "})}, attrs, 2);
        EXPECT_EQ(out[0].tensor().shape(), (Shape{3, 3}));
        EXPECT_EQ(strings_of(out[0]), (Strs{"hello", "world", "!", "", "", "", "a", "b", ""}));
        const int64_t* z = out[1].tensor().data_as<int64_t>();
        EXPECT_EQ(z[0], 3);
        EXPECT_EQ(z[1], 0);
        EXPECT_EQ(z[2], 2);
    }
    // maxsplit=2 (the ONNX node test): "o n n x".split(maxsplit=2) == ["o","n","n x"];
    // "  a  b  c  ".split(maxsplit=1) == ["a","b  c  "] (leading space of the rest dropped,
    // trailing kept); "a.b.c".split(".", 1) == ["a","b.c"].
    auto ms = run_host("StringSplit", {make_strings({2}, {"o n n x", "  a  b  c  "})}, {{"maxsplit", int64_t{2}}}, 2);
    EXPECT_EQ(strings_of(ms[0]), (Strs{"o", "n", "n x", "a", "b", "c  "}));
    auto ms1 = run_host("StringSplit", {make_strings({1}, {"  a  b  c  "})}, {{"maxsplit", int64_t{1}}}, 2);
    EXPECT_EQ(strings_of(ms1[0]), (Strs{"a", "b  c  "}));
    auto md = run_host("StringSplit", {make_strings({1}, {"a.b.c"})},
                       {{"delimiter", std::string(".")}, {"maxsplit", int64_t{1}}}, 2);
    EXPECT_EQ(strings_of(md[0]), (Strs{"a", "b.c"}));
}

TEST(HostStringSplit, EmptyAndHigherRank) {
    auto e = run_host("StringSplit", {make_strings({0}, {})}, {}, 2);
    EXPECT_EQ(e[0].tensor().shape(), (Shape{0, 0}));
    EXPECT_EQ(e[1].tensor().shape(), (Shape{0}));
    auto r2 = run_host("StringSplit", {make_strings({2, 1}, {"a b", "c"})}, {}, 2);
    EXPECT_EQ(r2[0].tensor().shape(), (Shape{2, 1, 2}));
    EXPECT_EQ(strings_of(r2[0]), (Strs{"a", "b", "c", ""}));
    EXPECT_EQ(r2[1].tensor().shape(), (Shape{2, 1}));
}

TEST(HostStringSplit, RejectsNonString) {
    expect_error([] { run_host("StringSplit", {make_tensor(DType::kFloat32, {1}, {1})}, {}, 2); },
                 ErrorKind::kInvalidArgument, "must be a string tensor");
}

// ---- RegexFullMatch ----

TEST(HostRegexFullMatch, NodeTestPatterns) {
    // re.fullmatch(r"www\.[\w.-]+\.\bcom\b", s): google/facebook .com match, bbc.co.uk does not.
    auto out = run_host("RegexFullMatch", {make_strings({3}, {"www.google.com", "www.facebook.com", "www.bbc.co.uk"})},
                        {{"pattern", std::string(R"(www\.[\w.-]+\.\bcom\b)")}});
    EXPECT_EQ(bools_of(out[0]), (std::vector<bool>{true, true, false}));
    // The e-mail pattern: only gmail/yahoo .com addresses fully match.
    const std::string email = R"((\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$))";
    auto em = run_host("RegexFullMatch",
                       {make_strings({2, 2}, {"account@gmail.com", "account@hotmail.com", "not email", "account2@yahoo.com"})},
                       {{"pattern", email}});
    EXPECT_EQ(em[0].tensor().shape(), (Shape{2, 2}));
    EXPECT_EQ(bools_of(em[0]), (std::vector<bool>{true, false, false, true}));
    auto empty = run_host("RegexFullMatch", {make_strings({2, 0}, {})}, {{"pattern", email}});
    EXPECT_EQ(empty[0].tensor().shape(), (Shape{2, 0}));
}

TEST(HostRegexFullMatch, FullMatchNotSearchAndCodePoints) {
    // re.fullmatch("ab", "xab") is None although re.search finds it; "." is one code point:
    // re.fullmatch("..", "的的") matches (6 UTF-8 bytes), re.fullmatch("...", "的的") does not.
    auto out = run_host("RegexFullMatch", {make_strings({3}, {"xab", "ab", "ab\n"})}, {{"pattern", std::string("ab")}});
    EXPECT_EQ(bools_of(out[0]), (std::vector<bool>{false, true, false}));
    const std::string two = "\xe7\x9a\x84\xe7\x9a\x84";
    EXPECT_EQ(bools_of(run_host("RegexFullMatch", {make_strings({1}, {two})}, {{"pattern", std::string("..")}})[0]),
              (std::vector<bool>{true}));
    EXPECT_EQ(bools_of(run_host("RegexFullMatch", {make_strings({1}, {two})}, {{"pattern", std::string("...")}})[0]),
              (std::vector<bool>{false}));
}

TEST(HostRegexFullMatch, Errors) {
    expect_error(
        [] { run_host("RegexFullMatch", {make_strings({1}, {"a"})}, {{"pattern", std::string("(unclosed")}}); },
        ErrorKind::kInvalidArgument, "invalid regular expression pattern '(unclosed'");
    expect_error([] { run_host("RegexFullMatch", {make_strings({1}, {"a"})}, {{"pattern", std::string("a[")}}); },
                 ErrorKind::kInvalidArgument, "n0");
    expect_error(
        [] { run_host("RegexFullMatch", {make_tensor(DType::kInt32, {1}, {0})}, {{"pattern", std::string("a")}}); },
        ErrorKind::kInvalidArgument, "must be a string tensor");
}

// ---- StringNormalizer ----

TEST(HostStringNormalizer, StopwordsAndCase) {
    const Strs days = {"monday", "tuesday", "wednesday", "thursday"};
    auto lower = run_host("StringNormalizer", {make_strings({4}, days)},
                          {{"case_change_action", std::string("LOWER")},
                           {"is_case_sensitive", int64_t{1}},
                           {"stopwords", Strs{"monday"}}});
    EXPECT_EQ(lower[0].tensor().shape(), (Shape{3}));
    EXPECT_EQ(strings_of(lower[0]), (Strs{"tuesday", "wednesday", "thursday"}));
    auto upper = run_host("StringNormalizer", {make_strings({4}, days)},
                          {{"case_change_action", std::string("UPPER")},
                           {"is_case_sensitive", int64_t{1}},
                           {"stopwords", Strs{"monday"}}});
    EXPECT_EQ(strings_of(upper[0]), (Strs{"TUESDAY", "WEDNESDAY", "THURSDAY"}));
    // Case-sensitive: "Monday" is not the stop word "monday" and stays.
    auto sens = run_host("StringNormalizer", {make_strings({2}, {"Monday", "monday"})},
                         {{"is_case_sensitive", int64_t{1}}, {"stopwords", Strs{"monday"}}});
    EXPECT_EQ(strings_of(sens[0]), (Strs{"Monday"}));
    // Insensitive, 2-D [1, C]: both "Monday"s go; non-ASCII bytes are kept as they are.
    auto two = run_host("StringNormalizer",
                        {make_strings({1, 5}, {"Monday", "tuesday", "MONDAY", "caf\xc3\xa9", "x"})},
                        {{"case_change_action", std::string("UPPER")}, {"stopwords", Strs{"monday"}}});
    EXPECT_EQ(two[0].tensor().shape(), (Shape{1, 3}));
    EXPECT_EQ(strings_of(two[0]), (Strs{"TUESDAY", "CAF\xc3\xa9", "X"}));
    // No stop words, no case change: the identity.
    auto none = run_host("StringNormalizer", {make_strings({2}, {"monday", "Tuesday"})});
    EXPECT_EQ(strings_of(none[0]), (Strs{"monday", "Tuesday"}));
}

TEST(HostStringNormalizer, AllRemovedGivesOneEmptyString) {
    ir::AttrMap attrs = {{"case_change_action", std::string("UPPER")},
                         {"is_case_sensitive", int64_t{1}},
                         {"stopwords", Strs{"monday"}}};
    auto one = run_host("StringNormalizer", {make_strings({2}, {"monday", "monday"})}, attrs);
    EXPECT_EQ(one[0].tensor().shape(), (Shape{1}));
    EXPECT_EQ(strings_of(one[0]), (Strs{""}));
    auto two = run_host("StringNormalizer", {make_strings({1, 1}, {"monday"})}, attrs);
    EXPECT_EQ(two[0].tensor().shape(), (Shape{1, 1}));
    EXPECT_EQ(strings_of(two[0]), (Strs{""}));
}

TEST(HostStringNormalizer, Errors) {
    expect_error([] { run_host("StringNormalizer", {make_strings({2, 2}, {"a", "b", "c", "d"})}); },
                 ErrorKind::kInvalidArgument, "[C] or [1, C]");
    expect_error([] {
        run_host("StringNormalizer", {make_strings({1}, {"a"})}, {{"case_change_action", std::string("TITLE")}});
    }, ErrorKind::kInvalidModel, "case_change_action");
    expect_error([] { run_host("StringNormalizer", {make_tensor(DType::kInt64, {1}, {1})}); },
                 ErrorKind::kInvalidArgument, "must be a string tensor");
}

// ---- Equal on strings ----

TEST(HostEqual, StringsBroadcast) {
    auto eq = run_host("Equal", {make_strings({2}, {"string1", "string2"}), make_strings({2}, {"string1", "string3"})});
    EXPECT_EQ(bools_of(eq[0]), (std::vector<bool>{true, false}));
    // [2,1] vs [3]: out[i][j] = x[i] == y[j].
    Strs xs = {"a", "b"}, ys = {"b", "a", "a"};
    auto bc = run_host("Equal", {make_strings({2, 1}, xs), make_strings({3}, ys)});
    EXPECT_EQ(bc[0].tensor().shape(), (Shape{2, 3}));
    std::vector<bool> want;
    for (const auto& x : xs)
        for (const auto& y : ys) want.push_back(x == y);
    EXPECT_EQ(bools_of(bc[0]), want);
}

TEST(HostEqual, InferAcceptsStringsAndHostChecksDtypes) {
    ir::Graph g;
    auto* a = g.add_input("a", {DType::kString, {2}});
    auto* b = g.add_input("b", {DType::kString, {1}});
    ir::Node* n = g.add_node("Equal", {a, b}, {}, {ir::TensorType{}});
    infer_node(*n);
    EXPECT_EQ(n->output(0)->type(), (ir::TensorType{DType::kBool, {2}}));
    expect_error([] { run_host("Equal", {make_strings({1}, {"1"}), make_tensor(DType::kInt64, {1}, {1})}); },
                 ErrorKind::kInvalidArgument, "same dtype");
    // Numbers through the host kernel too: NaN != NaN.
    const double nan = std::numeric_limits<double>::quiet_NaN();
    auto num = run_host("Equal", {make_tensor(DType::kFloat32, {3}, {1, nan, 2}), make_tensor(DType::kFloat32, {3}, {1, nan, 3})});
    EXPECT_EQ(bools_of(num[0]), (std::vector<bool>{true, false, false}));
}

// ---- LabelEncoder (ai.onnx.ml) ----

TEST(HostLabelEncoder, StringToInt) {
    // {"a":0,"b":1,"c":2}.get(x, default) over ["a","b","d","c","g"].
    ir::AttrMap attrs = {{"keys_strings", Strs{"a", "b", "c"}}, {"values_int64s", std::vector<int64_t>{0, 1, 2}}};
    auto no_default = run_host("LabelEncoder", {make_strings({5}, {"a", "b", "d", "c", "g"})}, attrs);
    const Tensor& y = no_default[0].tensor();
    ASSERT_EQ(y.dtype(), DType::kInt64);
    EXPECT_EQ(std::vector<int64_t>(y.data_as<int64_t>(), y.data_as<int64_t>() + 5),
              (std::vector<int64_t>{0, 1, -1, 2, -1}));
    attrs["default_int64"] = int64_t{42};
    auto dflt = run_host("LabelEncoder", {make_strings({5}, {"a", "b", "d", "c", "g"})}, attrs);
    EXPECT_EQ(dflt[0].tensor().data_as<int64_t>()[2], 42);
}

TEST(HostLabelEncoder, TensorAttributes) {
    // keys_tensor (strings) -> values_tensor (int16), default_tensor int16 {42}.
    ir::AttrMap attrs = {{"keys_tensor", make_strings({3}, {"a", "b", "c"})},
                         {"values_tensor", make_tensor(DType::kInt16, {3}, {0, 1, 2})},
                         {"default_tensor", make_tensor(DType::kInt16, {1}, {42})}};
    auto out = run_host("LabelEncoder", {make_strings({2, 2}, {"a", "z", "c", "b"})}, attrs);
    const Tensor& y = out[0].tensor();
    ASSERT_EQ(y.dtype(), DType::kInt16);
    EXPECT_EQ(y.shape(), (Shape{2, 2}));
    EXPECT_EQ(std::vector<int16_t>(y.data_as<int16_t>(), y.data_as<int16_t>() + 4),
              (std::vector<int16_t>{0, 42, 2, 1}));
    // Without default_tensor the default for string values is "_Unused".
    ir::AttrMap rev = {{"keys_int64s", std::vector<int64_t>{7, 8}}, {"values_tensor", make_strings({2}, {"x", "y"})}};
    auto r = run_host("LabelEncoder", {make_tensor(DType::kInt64, {3}, {8, 9, 7})}, rev);
    EXPECT_EQ(strings_of(r[0]), (Strs{"y", "_Unused", "x"}));
}

TEST(HostLabelEncoder, FloatKeysCompareAsFloatsAndNaNMatches) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // keys 0.1 (as f32), NaN, -0.0; x = f32(0.1) matches, 0.1000001 does not, NaN matches, 0.0 == -0.0.
    ir::AttrMap attrs = {{"keys_floats", std::vector<double>{0.1, nan, -0.0}},
                         {"values_strings", Strs{"tenth", "nan", "zero"}}};
    auto out = run_host("LabelEncoder", {make_tensor(DType::kFloat32, {4}, {0.1, 0.1000001, nan, 0.0})}, attrs);
    EXPECT_EQ(strings_of(out[0]), (Strs{"tenth", "_Unused", "nan", "zero"}));
    // Float values: default -0.0 (sign bit set).
    ir::AttrMap fv = {{"keys_int64s", std::vector<int64_t>{1}}, {"values_floats", std::vector<double>{2.5}}};
    auto f = run_host("LabelEncoder", {make_tensor(DType::kInt64, {2}, {1, 5})}, fv);
    ASSERT_EQ(f[0].tensor().dtype(), DType::kFloat32);
    EXPECT_EQ(f[0].tensor().data_as<float>()[0], 2.5f);
    EXPECT_TRUE(std::signbit(f[0].tensor().data_as<float>()[1]));
    EXPECT_EQ(f[0].tensor().data_as<float>()[1], 0.0f);
}

TEST(HostLabelEncoder, Version1ClassesStrings) {
    ir::AttrMap attrs = {{"classes_strings", Strs{"x", "y"}}};
    auto s2i = run_host("LabelEncoder", {make_strings({3}, {"y", "q", "x"})}, attrs);
    EXPECT_EQ(s2i[0].tensor().data_as<int64_t>()[0], 1);
    EXPECT_EQ(s2i[0].tensor().data_as<int64_t>()[1], -1);
    EXPECT_EQ(s2i[0].tensor().data_as<int64_t>()[2], 0);
    auto i2s = run_host("LabelEncoder", {make_tensor(DType::kInt64, {2}, {1, 5})}, attrs);
    EXPECT_EQ(strings_of(i2s[0]), (Strs{"y", "_Unused"}));
}

TEST(HostLabelEncoder, Errors) {
    ir::AttrMap attrs = {{"keys_strings", Strs{"a"}}, {"values_int64s", std::vector<int64_t>{0}}};
    expect_error([&] { run_host("LabelEncoder", {make_tensor(DType::kInt64, {1}, {0})}, attrs); },
                 ErrorKind::kInvalidArgument, "input X is i64 but the keys are str");
    ir::AttrMap mismatched = {{"keys_strings", Strs{"a", "b"}}, {"values_int64s", std::vector<int64_t>{0}}};
    expect_error([&] { run_host("LabelEncoder", {make_strings({1}, {"a"})}, mismatched); }, ErrorKind::kInvalidModel,
                 "as many values as keys");
    ir::AttrMap two_keys = {{"keys_strings", Strs{"a"}},
                            {"keys_int64s", std::vector<int64_t>{1}},
                            {"values_int64s", std::vector<int64_t>{0}}};
    expect_error([&] { run_host("LabelEncoder", {make_strings({1}, {"a"})}, two_keys); }, ErrorKind::kInvalidModel,
                 "expected one keys_*");
    ir::AttrMap bad_default = {{"keys_strings", Strs{"a"}},
                               {"values_tensor", make_tensor(DType::kInt16, {1}, {0})},
                               {"default_tensor", make_tensor(DType::kInt32, {1}, {0})}};
    expect_error([&] { run_host("LabelEncoder", {make_strings({1}, {"a"})}, bad_default); }, ErrorKind::kInvalidModel,
                 "default_tensor");
    EXPECT_EQ(OpRegistry::global().find("LabelEncoder")->domain, "ai.onnx.ml");
}

}  // namespace
}  // namespace kiln::op::testing
