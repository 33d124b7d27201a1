// Lexical helpers shared by the IR printer, parser, TensorType::str and attr_str: which names
// print bare, string quoting, and round-trip float formatting.
#pragma once

#include <string>
#include <string_view>

namespace kiln::ir {

/// True if `s` is a non-empty [A-Za-z0-9_.]+ (a value name printable as `%s`).
bool is_bare_value_name(std::string_view s);
/// True if `s` matches [A-Za-z_?][A-Za-z0-9_.?]* and is no keyword of the text form (op names,
/// attribute names, graph names, symbolic dims print bare then, else quoted).
bool is_bare_identifier(std::string_view s);
/// `"..."` with \" \\ \n \t \r and \xHH escapes for other control bytes.
std::string quote_string(std::string_view s);
/// `%name` or `%"..."`.
std::string value_ref(std::string_view name);
/// `s` bare if is_bare_identifier(s), else quoted.
std::string identifier_or_quoted(std::string_view s);
/// Shortest text that parses back to exactly `v` ("inf", "-inf", "nan" for non-finite values).
std::string format_f32(float v);
std::string format_f64(double v);

}  // namespace kiln::ir
