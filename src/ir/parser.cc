// Recursive-descent parser for the IR text form (grammar in printer.h). The text is lexed up
// front into tokens carrying line:column; every error is kiln::Error(kParseError) saying what
// was expected and what was found. Nothing recurses on input nesting, lengths and counts are
// checked before allocating, so arbitrary bytes cannot crash it.
#include "ir/parser.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "ir/text_lexer.h"
#include "support/error.h"

namespace kiln::ir {
namespace {

using text::describe;
using text::Tok;
using text::Token;

class Parser {
public:
    explicit Parser(std::string_view text) : toks_(text::tokenize(text)) {}

    Graph run() {
        expect_word("graph");
        g_.name = name_token("a graph name");
        expect('(');
        if (!is_punct(')')) {
            do {
                const Token& v = expect_value("a graph input name");
                define_check(v);
                expect(':');
                g_.add_input(v.text, type());
            } while (accept(','));
        }
        expect(')');
        expect('{');
        for (;;) {
            const Token& t = peek();
            if (is_punct('}')) break;
            if (t.kind == Tok::kIdent && t.text == "const") {
                constant();
            } else if (t.kind == Tok::kIdent && t.text == "return") {
                next();
                std::vector<Value*> outs;
                if (peek().kind == Tok::kValue) {
                    do outs.push_back(use(expect_value("a graph output name")));
                    while (accept(','));
                }
                g_.set_outputs(std::move(outs));
                break;
            } else {
                node();
            }
        }
        expect('}');
        if (peek().kind != Tok::kEnd) fail("end of input after the graph's '}'");
        return std::move(g_);
    }

private:
    const Token& peek() const { return toks_[pos_]; }
    const Token& next() {
        const Token& t = toks_[pos_];
        if (pos_ + 1 < toks_.size()) ++pos_;
        return t;
    }
    [[noreturn]] void fail(const std::string& expected) const { fail_at(peek(), expected); }
    [[noreturn]] static void fail_at(const Token& t, const std::string& expected) {
        KILN_THROW(kParseError) << t.line << ":" << t.col << ": expected " << expected << ", found "
                                << describe(t);
    }
    bool is_punct(char c) const { return peek().kind == Tok::kPunct && peek().text[0] == c; }
    bool accept(char c) {
        if (!is_punct(c)) return false;
        next();
        return true;
    }
    void expect(char c) {
        if (!accept(c)) fail(std::string("'") + c + "'");
    }
    void expect_word(const char* w) {
        if (peek().kind != Tok::kIdent || peek().text != w) fail(std::string("'") + w + "'");
        next();
    }
    const Token& expect_value(const char* what) {
        if (peek().kind != Tok::kValue) fail(what);
        return next();
    }
    std::string name_token(const char* what) {
        if (peek().kind != Tok::kIdent && peek().kind != Tok::kString) fail(what);
        return next().text;
    }
    void define_check(const Token& v) {
        if (g_.find_value(v.text))
            fail_at(v, "a new value name (value %" + v.text + " is already defined)");
    }
    Value* use(const Token& v) {
        Value* val = g_.find_value(v.text);
        if (!val) fail_at(v, "a defined value (%" + v.text + " is not defined before this use)");
        return val;
    }

    template <typename T>
    T integer(const Token& t, const char* what) {
        T v{};
        auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (t.kind != Tok::kNumber || t.is_float || ec != std::errc() ||
            p != t.text.data() + t.text.size())
            fail_at(t, what);
        return v;
    }
    template <typename T>
    T floating(const Token& t, const char* what) {
        T v{};
        if (t.kind != Tok::kNumber) fail_at(t, what);
        auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (ec != std::errc() || p != t.text.data() + t.text.size())
            fail_at(t, std::string(what) + " in range");
        return v;
    }

    TensorType type() {
        const Token& d = next();
        auto dt = d.kind == Tok::kIdent ? dtype_from_name(d.text) : std::nullopt;
        if (!dt) fail_at(d, "an element type (f32, f16, i64, bool, ...)");
        TensorType t;
        t.dtype = *dt;
        expect('[');
        if (!is_punct(']')) {
            do {
                const Token& x = next();
                if (x.kind == Tok::kNumber)
                    t.shape.emplace_back(
                        integer<int64_t>(x, "a dimension (a non-negative integer)"));
                else if (x.kind == Tok::kIdent || x.kind == Tok::kString)
                    t.shape.push_back(Dim::sym(x.text));
                else
                    fail_at(x, "a dimension (integer or symbol)");
                if (t.shape.back().symbol.empty() && t.shape.back().value < 0)
                    fail_at(x, "a non-negative dimension");
            } while (accept(','));
        }
        expect(']');
        return t;
    }

    // `[e0, e1, ...]` for a tensor of static type t.
    Tensor data(const TensorType& t, const Token& type_tok) {
        if (!t.is_static()) fail_at(type_tok, "a static type for constant data, got " + t.str());
        if (is_punct('<'))
            fail(
                "constant data (this text has elided constants: print with "
                "max_constant_elements=-1)");
        expect('[');
        std::vector<const Token*> elems;
        if (!is_punct(']')) {
            do elems.push_back(&next());
            while (accept(','));
        }
        expect(']');
        // Element count of the type, computed without overflow and capped by what was read.
        int64_t numel = 1;
        for (const Dim& d : t.shape) {
            if (d.value == 0) {
                numel = 0;
                break;
            }
        }
        if (numel != 0)
            for (const Dim& d : t.shape) {
                if (d.value > static_cast<int64_t>(elems.size()) ||
                    numel * d.value > static_cast<int64_t>(elems.size())) {
                    numel = -1;
                    break;
                }
                numel *= d.value;
            }
        if (numel != static_cast<int64_t>(elems.size()))
            fail_at(type_tok, "as many data elements as type " + t.str() + " holds; got " +
                                  std::to_string(elems.size()));
        Tensor out(t.dtype, t.static_shape());
        for (int64_t i = 0; i < numel; ++i) element(out, i, *elems[i]);
        return out;
    }

    void element(Tensor& out, int64_t i, const Token& e) {
        const std::string what = std::string("a ") + dtype_name(out.dtype()) + " element";
        auto int_in = [&](int64_t lo, int64_t hi) {
            int64_t v = integer<int64_t>(e, what.c_str());
            if (v < lo || v > hi)
                fail_at(
                    e, what + " in range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
            out.set_i64(i, v);
        };
        switch (out.dtype()) {
            case DType::kString:
                if (e.kind != Tok::kString) fail_at(e, "a quoted string element");
                out.data_as<std::string>()[i] = e.text;
                break;
            case DType::kFloat32:
                out.data_as<float>()[i] = floating<float>(e, what.c_str());
                break;
            case DType::kFloat64:
                out.data_as<double>()[i] = floating<double>(e, what.c_str());
                break;
            case DType::kFloat16:
                out.data_as<uint16_t>()[i] = float_to_half(floating<float>(e, what.c_str()));
                break;
            case DType::kBFloat16:
                out.data_as<uint16_t>()[i] = float_to_bfloat16(floating<float>(e, what.c_str()));
                break;
            case DType::kBool:
                if (e.kind != Tok::kIdent || (e.text != "true" && e.text != "false"))
                    fail_at(e, "true or false");
                out.set_i64(i, e.text == "true");
                break;
            case DType::kInt8:
                int_in(-128, 127);
                break;
            case DType::kInt16:
                int_in(-32768, 32767);
                break;
            case DType::kInt32:
                int_in(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
                break;
            case DType::kInt64:
                int_in(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
                break;
            case DType::kUInt8:
                int_in(0, 255);
                break;
            case DType::kUInt16:
                int_in(0, 65535);
                break;
            case DType::kUInt32:
                int_in(0, std::numeric_limits<uint32_t>::max());
                break;
            case DType::kUInt64:
                out.data_as<uint64_t>()[i] = integer<uint64_t>(e, what.c_str());
                break;
            case DType::kInt4:
                int_in(-8, 7);
                break;
            case DType::kUInt4:
                int_in(0, 15);
                break;
            case DType::kFloat8E4M3FN:
            case DType::kFloat8E4M3FNUZ:
            case DType::kFloat8E5M2:
            case DType::kFloat8E5M2FNUZ:
            case DType::kFloat8E8M0:
            case DType::kFloat4E2M1:  // the storage conversion (exact for the printed values)
                out.set_f64(i, floating<float>(e, what.c_str()));
                break;
        }
    }

    void constant() {
        next();  // const
        const Token& v = expect_value("a constant name");
        define_check(v);
        expect(':');
        const Token& type_tok = peek();
        TensorType t = type();
        expect('=');
        g_.add_constant(v.text, data(t, type_tok));
    }

    Attr attr_value() {
        const Token& t = peek();
        if (t.kind == Tok::kNumber) {
            next();
            if (t.is_float) return floating<double>(t, "a float");
            return integer<int64_t>(t, "an integer in int64 range");
        }
        if (t.kind == Tok::kString) return next().text;
        if (t.kind == Tok::kIdent && t.text == "tensor") {
            next();
            expect('<');
            const Token& type_tok = peek();
            TensorType ty = type();
            expect('>');
            return data(ty, type_tok);
        }
        if (!is_punct('[')) fail("an attribute value (number, string, list or tensor<...>)");
        next();
        if (accept(']')) {
            if (!accept(':')) fail("the kind of an empty list: []:ints, []:floats or []:strings");
            const Token& k = next();
            if (k.kind == Tok::kIdent && k.text == "ints") return std::vector<int64_t>{};
            if (k.kind == Tok::kIdent && k.text == "floats") return std::vector<double>{};
            if (k.kind == Tok::kIdent && k.text == "strings") return std::vector<std::string>{};
            fail_at(k, "the kind of an empty list: ints, floats or strings");
        }
        std::vector<const Token*> elems;
        do elems.push_back(&next());
        while (accept(','));
        expect(']');
        if (elems[0]->kind == Tok::kString) {
            std::vector<std::string> out;
            for (const Token* e : elems) {
                if (e->kind != Tok::kString) fail_at(*e, "a string (list elements share one kind)");
                out.push_back(e->text);
            }
            return out;
        }
        bool any_float = false;
        for (const Token* e : elems) {
            if (e->kind != Tok::kNumber) fail_at(*e, "a number (list elements share one kind)");
            any_float |= e->is_float;
        }
        if (any_float) {
            std::vector<double> out;
            for (const Token* e : elems) out.push_back(floating<double>(*e, "a float"));
            return out;
        }
        std::vector<int64_t> out;
        for (const Token* e : elems)
            out.push_back(integer<int64_t>(*e, "an integer in int64 range"));
        return out;
    }

    void node() {
        std::vector<const Token*> outs;
        if (peek().kind == Tok::kValue) {
            std::set<std::string> seen;
            do {
                const Token& v = expect_value("an output name");
                define_check(v);
                if (!seen.insert(v.text).second) fail_at(v, "distinct output names");
                outs.push_back(&v);
            } while (accept(','));
            expect('=');
        }
        std::string op = name_token("an op name");
        expect('(');
        std::vector<Value*> ins;
        if (!is_punct(')')) {
            do {
                if (peek().kind == Tok::kIdent && peek().text == "_") {
                    next();
                    ins.push_back(nullptr);
                } else {
                    ins.push_back(use(expect_value("an input (%name or _)")));
                }
            } while (accept(','));
        }
        expect(')');
        AttrMap attrs;
        if (accept('{')) {
            if (!is_punct('}')) {
                do {
                    const Token& k = peek();
                    std::string key = name_token("an attribute name");
                    expect('=');
                    if (!attrs.emplace(key, attr_value()).second)
                        fail_at(k, "distinct attribute names");
                } while (accept(','));
            }
            expect('}');
        }
        std::vector<TensorType> types;
        if (!outs.empty()) {
            expect(':');
            do types.push_back(type());
            while (accept(','));
            if (types.size() != outs.size())
                fail(std::to_string(outs.size()) + " output types, got " +
                     std::to_string(types.size()));
        }
        std::string node_name;
        int64_t group = -1;
        if (accept('#')) {  // trailer: [group=INT] [name="..."]
            if (peek().kind == Tok::kIdent && peek().text == "group") {
                next();
                expect('=');
                group = integer<int>(next(), "a fusion group number >= 0");
                if (group < 0) fail("a fusion group number >= 0");
            }
            if (group < 0 || (peek().kind == Tok::kIdent && peek().text == "name")) {
                if (peek().kind != Tok::kIdent || peek().text != "name") fail("'group' or 'name'");
                next();
                expect('=');
                if (peek().kind != Tok::kString) fail("a quoted node name");
                node_name = next().text;
            }
        }
        std::vector<std::string> names;
        for (const Token* t : outs) names.push_back(t->text);
        Node* n = g_.add_node(op, ins, std::move(attrs), types, names, node_name);
        n->set_group(static_cast<int>(group));
    }

    std::vector<Token> toks_;
    size_t pos_ = 0;
    Graph g_;
};

}  // namespace

Graph parse_graph(std::string_view text) { return Parser(text).run(); }

}  // namespace kiln::ir
