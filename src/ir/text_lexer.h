// Tokenizer of the IR text form (grammar in printer.h): value names (%x, %"..."), identifiers,
// quoted strings with escapes, numbers (ints, floats, inf, nan), punctuation. `//` comments
// and whitespace (newlines included) separate tokens. Every token records line:column;
// malformed input throws kiln::Error(kParseError).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir::text {

enum class Tok { kEnd, kIdent, kValue, kString, kNumber, kPunct };

/// One token; `text` is the identifier, decoded string or value name, number text, or the
/// punctuation character.
struct Token {
    Tok kind = Tok::kEnd;
    std::string text;
    bool is_float = false;  // numbers: has '.', an exponent, or is inf/nan
    int line = 1, col = 1;
};

/// All tokens of `text`, ending with one kEnd token.
std::vector<Token> tokenize(std::string_view text);

/// "'foo'", "value %x", "number 1.5", "end of input" — for "found ..." in parse errors.
std::string describe(const Token& t);

}  // namespace kiln::ir::text
