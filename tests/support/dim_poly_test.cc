// support/dim_poly.h: dim expressions in canonical text, their arithmetic and evaluation.
#include <gtest/gtest.h>

#include "support/dim_poly.h"
#include "support/error.h"

namespace kiln {
namespace {

DimPoly P(const std::string& s) {
    auto p = DimPoly::parse(s);
    EXPECT_TRUE(p.has_value()) << s;
    return p.value_or(DimPoly());
}

TEST(DimPoly, CanonicalText) {
    const DimPoly b = DimPoly::symbol("batch"), s = DimPoly::symbol("seq");
    EXPECT_EQ((b * s).str(), "batch*seq");
    EXPECT_EQ((s * b).str(), "batch*seq");  // commutative: one text
    EXPECT_EQ((s + DimPoly::constant(1)).str(), "seq+1");
    EXPECT_EQ((DimPoly::constant(1) + s).str(), "seq+1");
    EXPECT_EQ((s - DimPoly::constant(1)).str(), "seq-1");
    EXPECT_EQ((DimPoly::constant(2) * s).str(), "2*seq");
    EXPECT_EQ((b * s * DimPoly::constant(12) + s).str(), "12*batch*seq+seq");
    EXPECT_EQ((s * s).str(), "seq*seq");
    EXPECT_EQ((DimPoly::constant(0) - s).str(), "-seq");
    EXPECT_EQ((s - s).str(), "0");
    EXPECT_TRUE((s - s).is_constant());
    for (const char* text : {"batch*seq", "seq+1", "seq-1", "2*seq", "12*batch*seq+seq", "-seq", "7", "0"})
        EXPECT_EQ(P(text).str(), text);
    EXPECT_EQ(P("seq*batch"), P("batch*seq"));
    EXPECT_EQ(P("1+seq").str(), "seq+1");
}

TEST(DimPoly, NamesThatAreNoExpressionsStayAtomic) {
    EXPECT_FALSE(DimPoly::parse("?").has_value());
    EXPECT_FALSE(DimPoly::parse("batch size").has_value());
    EXPECT_FALSE(DimPoly::parse("a**b").has_value());
    EXPECT_FALSE(DimPoly::parse("").has_value());
    EXPECT_TRUE(P("sequence_length").is_symbol());
    EXPECT_TRUE(P("N").is_symbol());
}

TEST(DimPoly, ExactDivision) {
    const DimPoly bs = P("batch*seq");
    EXPECT_EQ(bs.div_exact(P("batch"))->str(), "seq");
    EXPECT_EQ(P("12*batch*seq").div_exact(P("4*seq"))->str(), "3*batch");
    EXPECT_EQ(P("384*batch*seq").div_exact(DimPoly::constant(384))->str(), "batch*seq");
    EXPECT_FALSE(bs.div_exact(P("heads")).has_value());
    EXPECT_FALSE(P("seq+1").div_exact(P("seq")).has_value());      // 1 / seq
    EXPECT_FALSE(P("3*seq").div_exact(DimPoly::constant(2)).has_value());
    EXPECT_FALSE(bs.div_exact(P("batch+seq")).has_value());         // only a single term divides
}

TEST(DimPoly, Evaluates) {
    const std::map<std::string, int64_t> v = {{"batch", 3}, {"seq", 7}};
    EXPECT_EQ(P("batch*seq").eval(v), 21);
    EXPECT_EQ(P("seq+1").eval(v), 8);
    EXPECT_EQ(P("2*batch*seq-seq+5").eval(v), 40);
    EXPECT_FALSE(P("heads*seq").eval(v).has_value());  // unbound
    const std::map<std::string, int64_t> big = {{"a", int64_t{1} << 40}, {"b", int64_t{1} << 40}};
    EXPECT_FALSE(P("a*b").eval(big).has_value());      // overflows int64
    EXPECT_THROW(DimPoly::constant(int64_t{1} << 62) * DimPoly::constant(8), Error);
}

}  // namespace
}  // namespace kiln
