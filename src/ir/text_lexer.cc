// Tokenizer of the IR text form (see text_lexer.h).
#include "ir/text_lexer.h"

#include <cctype>

#include "support/error.h"

namespace kiln::ir::text {
namespace {

bool ident_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '?';
}
bool ident_char(char c) {
    return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '.';
}
bool value_char(char c) { return ident_char(c) && c != '?'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
public:
    explicit Lexer(std::string_view s) : s_(s) {}

    std::vector<Token> run() {
        std::vector<Token> out;
        for (;;) {
            skip_space();
            Token t;
            t.line = line_;
            t.col = col_;
            if (i_ >= s_.size()) {
                out.push_back(t);
                return out;
            }
            char c = s_[i_];
            if (c == '%') {
                get();
                t.kind = Tok::kValue;
                if (i_ < s_.size() && s_[i_] == '"') {
                    t.text = string_literal();
                } else {
                    while (i_ < s_.size() && value_char(s_[i_])) t.text += get();
                    if (t.text.empty()) fail(t, "a value name after '%'");
                }
            } else if (c == '"') {
                t.kind = Tok::kString;
                t.text = string_literal();
            } else if (is_digit(c) || (c == '-' && i_ + 1 < s_.size() &&
                                       (is_digit(s_[i_ + 1]) || ident_start(s_[i_ + 1])))) {
                number(t);
            } else if (ident_start(c)) {
                while (i_ < s_.size() && ident_char(s_[i_])) t.text += get();
                t.kind = Tok::kIdent;
                if (t.text == "inf" || t.text == "nan") {
                    t.kind = Tok::kNumber;
                    t.is_float = true;
                }
            } else if (std::string_view("(){}[]<>,=:#").find(c) != std::string_view::npos) {
                t.kind = Tok::kPunct;
                t.text = std::string(1, get());
            } else {
                fail(t, "a token", c);
            }
            out.push_back(std::move(t));
        }
    }

private:
    [[noreturn]] void fail(const Token& at, const char* expected, int found = -1) {
        std::string f = found < 0 ? "end of input"
                        : (found >= 0x20 && found < 0x7f)
                            ? "'" + std::string(1, static_cast<char>(found)) + "'"
                            : "byte " + std::to_string(found & 0xff);
        KILN_THROW(kParseError) << at.line << ":" << at.col << ": expected " << expected
                                << ", found " << f;
    }
    char get() {
        char c = s_[i_++];
        if (c == '\n') {
            ++line_;
            col_ = 1;
        } else {
            ++col_;
        }
        return c;
    }
    void skip_space() {
        while (i_ < s_.size()) {
            char c = s_[i_];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                get();
            } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
                while (i_ < s_.size() && s_[i_] != '\n') get();
            } else {
                return;
            }
        }
    }
    std::string string_literal() {
        Token at;
        at.line = line_;
        at.col = col_;
        get();  // opening quote
        std::string out;
        for (;;) {
            if (i_ >= s_.size() || s_[i_] == '\n')
                fail(at, "a closing '\"' of the string started here");
            char c = get();
            if (c == '"') return out;
            if (c != '\\') {
                out += c;
                continue;
            }
            if (i_ >= s_.size()) fail(at, "an escape sequence");
            char e = get();
            switch (e) {
                case '"':
                    out += '"';
                    break;
                case '\\':
                    out += '\\';
                    break;
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'x': {
                    int v = 0;
                    for (int k = 0; k < 2; ++k) {
                        char h = i_ < s_.size() ? s_[i_] : '\0';
                        int d = is_digit(h)              ? h - '0'
                                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                         : -1;
                        if (d < 0) fail(at, "two hex digits after \\x in the string started here");
                        get();
                        v = v * 16 + d;
                    }
                    out += static_cast<char>(v);
                    break;
                }
                default:
                    fail(at, "an escape (\\\" \\\\ \\n \\t \\r \\xHH) in the string started here",
                         e);
            }
        }
    }
    void number(Token& t) {
        t.kind = Tok::kNumber;
        if (s_[i_] == '-') t.text += get();
        if (i_ < s_.size() && ident_start(s_[i_])) {
            std::string word;
            while (i_ < s_.size() && ident_char(s_[i_])) word += get();
            if (word != "inf" && word != "nan") fail(t, "a number");
            t.text += word;
            t.is_float = true;
            return;
        }
        while (i_ < s_.size() && is_digit(s_[i_])) t.text += get();
        if (i_ < s_.size() && s_[i_] == '.') {
            t.is_float = true;
            t.text += get();
            while (i_ < s_.size() && is_digit(s_[i_])) t.text += get();
        }
        if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
            t.is_float = true;
            t.text += get();
            if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) t.text += get();
            if (i_ >= s_.size() || !is_digit(s_[i_])) fail(t, "digits of an exponent");
            while (i_ < s_.size() && is_digit(s_[i_])) t.text += get();
        }
    }

    std::string_view s_;
    size_t i_ = 0;
    int line_ = 1, col_ = 1;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text) { return Lexer(text).run(); }

std::string describe(const Token& t) {
    auto clip = [](const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; };
    switch (t.kind) {
        case Tok::kEnd:
            return "end of input";
        case Tok::kIdent:
            return "'" + clip(t.text) + "'";
        case Tok::kValue:
            return "value %" + clip(t.text);
        case Tok::kString:
            return "string \"" + clip(t.text) + "\"";
        case Tok::kNumber:
            return "number " + clip(t.text);
        case Tok::kPunct:
            return "'" + t.text + "'";
    }
    return "?";
}

}  // namespace kiln::ir::text
