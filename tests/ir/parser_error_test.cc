// Parse errors: kParseError with line:column and expected-vs-found; and a mutation fuzz loop
// over a valid text that must only ever succeed or throw kiln::Error.
#include <gtest/gtest.h>

#include <random>

#include "ir/parser.h"
#include "ir/printer.h"
#include "support/error.h"

namespace kiln::ir {
namespace {

// Parses `text`, expecting a kParseError whose message contains `substr`.
void expect_parse_error(const std::string& text, const std::string& substr) {
    try {
        parse_graph(text);
        FAIL() << "expected a parse error for:\n" << text;
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kParseError) << e.what();
        EXPECT_NE(e.message().find(substr), std::string::npos) << "message: " << e.message();
    }
}

const char* kValid = R"(graph main(%x: f32[1,3,8,8], %w: f32[4,3,3,3]) {
  const %b: f32[4] = [0.1, 0.2, 0.3, 0.4]
  const %h: f16[2] = [1, -0.5]
  %y = Conv(%x, %w, %b) {pads=[1,1,1,1], strides=[1,1], mode="same", t=tensor<i64[2]>[1, 2]} : f32[1,4,8,8] # name="conv1"
  %a, %c = Split(%y, _) {axis=1, e=[]:floats} : f32[1,2,8,8], f32[1,2,8,8]
  %r = Relu(%a) : f32[1,2,8,?]
  return %r, %c, %x
}
)";

TEST(ParserError, ValidTextParses) {
    Graph g = parse_graph(kValid);
    EXPECT_EQ(g.num_nodes(), 3u);
    EXPECT_EQ(print_graph(parse_graph(print_graph(g))), print_graph(g));
}

TEST(ParserError, LineAndColumn) {
    expect_parse_error("graph main() {\n  %y = Relu(%x) : f32[1]\n  return %y\n}\n", "2:13:");
    expect_parse_error("graph main() {\n  %y = Relu(%x) : f32[1]\n  return %y\n}\n", "not defined");
    expect_parse_error("graph main(%x: f32[2]) {\n  %y = Relu(%x) : q32[2]\n}",
                       "2:19: expected an element type");
    expect_parse_error("graph main(%x: f32[2]) {\n  %y = Relu(%x) f32[2]\n}", "2:17: expected ':'");
}

TEST(ParserError, ExpectedVersusFound) {
    expect_parse_error("", "expected 'graph', found end of input");
    expect_parse_error("graf main() {}", "expected 'graph', found 'graf'");
    expect_parse_error("graph main(%x: f32[2]) {\n  return %x\n",
                       "expected '}', found end of input");
    expect_parse_error("graph main(%x: f32[2]) { return %x } extra", "expected end of input");
    expect_parse_error("graph main(%x: f32[2], %x: f32[2]) { return %x }", "already defined");
    expect_parse_error("graph m() { const %c: f32[3] = [1, 2] return %c }",
                       "as many data elements");
    expect_parse_error("graph m() { const %c: f32[N] = [1] return %c }", "static type");
    expect_parse_error("graph m() { const %c: i8[1] = [300] return %c }", "in range");
    expect_parse_error("graph m() { const %c: i32[1] = [1.5] return %c }", "i32 element");
    expect_parse_error("graph m() { const %c: bool[1] = [1] return %c }", "true or false");
    expect_parse_error("graph m() { const %c: f32[1] = [1e999] return %c }", "in range");
    expect_parse_error("graph m() { const %c: f32[100] = <elided 100 values> return %c }",
                       "elided");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) {k=[]} : f32[1] return %y }",
                       "empty list");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) {k=[1,\"a\"]} : f32[1] return %y }",
                       "one kind");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) {k=1, k=2} : f32[1] return %y }",
                       "distinct");
    expect_parse_error("graph m(%x: f32[1]) { %y, %z = A(%x) : f32[1] return %y }",
                       "2 output types");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) : f32[1] # nom=\"a\" return %y }",
                       "'name'");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) : f32[-1] return %y }", "non-negative");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) {s=\"abc} : f32[1] }", "closing '\"'");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) {s=\"\\q\"} : f32[1] }", "escape");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) $ }", "expected a token, found '$'");
    expect_parse_error("graph m(%x: f32[1]) { %y = A(%x) : f32[1]\n  %y = B(%x) : f32[1] }",
                       "2:3:");
    expect_parse_error("graph m(% x: f32[1]) {}", "value name after '%'");
}

TEST(ParserError, FuzzMutationsNeverCrash) {
    Graph g = parse_graph(kValid);
    const std::string base = print_graph(g);
    std::mt19937 rng(12345);
    const std::string alphabet = "%\"\\[](){}<>,=:#_-.0123456789eE abcfi\n\x93";
    int ok = 0, errors = 0;
    for (int iter = 0; iter < 2000; ++iter) {
        std::string s = base;
        int edits = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < edits && !s.empty(); ++k) {
            size_t pos = rng() % s.size();
            switch (rng() % 5) {
                case 0:
                    s[pos] = alphabet[rng() % alphabet.size()];
                    break;  // replace
                case 1:
                    s.erase(pos, 1 + rng() % 8);
                    break;  // delete a run
                case 2:
                    s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
                    break;  // insert
                case 3:
                    s.resize(pos);
                    break;  // truncate
                case 4:
                    s.insert(pos, s.substr(rng() % s.size(), rng() % 16));
                    break;  // duplicate
            }
        }
        try {
            Graph h = parse_graph(s);
            print_graph(h);
            ++ok;
        } catch (const Error&) {
            ++errors;
        }
    }
    EXPECT_EQ(ok + errors, 2000);
    EXPECT_GT(errors, 1000);  // most mutations break the text
}

}  // namespace
}  // namespace kiln::ir
