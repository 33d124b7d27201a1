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

// A convolution's output rows: floor((H + pads - ext) / s) + 1 (ONNX), as dnnl_conv computes it.
int64_t conv_rows(int64_t h, int64_t k, int64_t s, int64_t pads) { return (h + pads - k) / s + 1; }

TEST(DimPoly, FloorAtomsAreCanonical) {
    const DimPoly h = DimPoly::symbol("H");
    auto conv = [](const DimPoly& in, int64_t k, int64_t s, int64_t pads) {
        return DimPoly::floor_div(in + DimPoly::constant(pads - k), s) + DimPoly::constant(1);
    };
    // A 3x3 stride-2 conv with pads 1+1: floor((H-1)/2)+1 is floor((H+1)/2).
    EXPECT_EQ(conv(h, 3, 2, 2).str(), "floor((H+1)/2)");
    // Then a 3x3 stride-2 pool, or a 1x1 stride-2 conv, or at once a 1x1 stride-4 conv with pads 3
    // (floor((H+2)/4)+... differs): nested floors merge into one atom.
    EXPECT_EQ(conv(conv(h, 3, 2, 2), 3, 2, 2).str(), "floor((H+3)/4)");
    EXPECT_EQ(conv(conv(h, 3, 2, 2), 1, 2, 0), conv(conv(h, 3, 2, 2), 3, 2, 2));
    EXPECT_EQ(DimPoly::floor_div(DimPoly::constant(2) * h + DimPoly::constant(2), 4).str(), "floor((H+1)/2)");
    EXPECT_EQ(DimPoly::floor_div(DimPoly::constant(4) * h + DimPoly::constant(3), 2).str(), "2*H+1");  // exact part
    EXPECT_EQ(DimPoly::floor_div(h + DimPoly::constant(5), 2).str(), "floor((H+1)/2)+2");
    EXPECT_EQ(DimPoly::floor_div(h, 1), h);
    EXPECT_EQ(DimPoly::floor_div(DimPoly::constant(-3), 2).str(), "-2");
    EXPECT_EQ(DimPoly::ceil_div(h, 32).str(), "floor((H+31)/32)");
    EXPECT_THROW(DimPoly::floor_div(h, 0), Error);
    // Round trip through the text, nested atoms and products included.
    for (const char* text : {"floor((H+1)/2)", "floor(H/2)", "2*floor((H+31)/32)", "floor((H+1)/2)*floor((W+1)/2)",
                             "floor((W+floor((H+1)/2))/3)+1", "batch*floor((seq+3)/4)-1"})
        EXPECT_EQ(P(text).str(), text);
    EXPECT_EQ(P("floor((H-1)/2)+1").str(), "floor((H+1)/2)");
    EXPECT_EQ(P("(H+1)*2").str(), "2*H+2");
    for (const char* bad : {"floor(H/0)", "floor(H/-2)", "floor(H/W)", "floor(H)", "floor((H+1)/2", "(H+1"})
        EXPECT_FALSE(DimPoly::parse(bad).has_value()) << bad;
    EXPECT_EQ(P("2*floor((H+31)/32)").symbols(), std::vector<std::string>{"H"});
}

TEST(DimPoly, FloorAtomsEvaluateAsTheWindowRule) {
    const DimPoly h = DimPoly::symbol("H");
    // Three strided stages, against the integer rule at every input size.
    const DimPoly d = DimPoly::floor_div(
        DimPoly::floor_div(DimPoly::floor_div(h + DimPoly::constant(2 - 3), 2) + DimPoly::constant(1) +
                               DimPoly::constant(0 - 1), 2) + DimPoly::constant(1) + DimPoly::constant(2 - 3), 2) +
        DimPoly::constant(1);
    for (int64_t v = 3; v < 200; ++v) {
        const int64_t want = conv_rows(conv_rows(conv_rows(v, 3, 2, 2), 1, 2, 0), 3, 2, 2);
        EXPECT_EQ(d.eval({{"H", v}}), want) << "H = " << v << ", " << d.str();
        EXPECT_EQ(P(d.str()).eval({{"H", v}}), want);
    }
    EXPECT_EQ(P("floor((H-7)/2)").eval({{"H", 4}}), -2);  // toward -infinity
    EXPECT_FALSE(P("floor((H+1)/2)").eval({{"W", 4}}).has_value());
}

}  // namespace
}  // namespace kiln
