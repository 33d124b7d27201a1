#include "distributed/transfer_key.h"

#include <charconv>

#include "support/error.h"

namespace kiln::distributed {
namespace {

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

template <typename T>
bool parse_int(std::string_view s, T& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

/// Splits `s` at the first `sep` into head and the rest; false when absent.
bool cut(std::string_view& s, std::string_view sep, std::string_view& head) {
    size_t at = s.find(sep);
    if (at == std::string_view::npos) return false;
    head = s.substr(0, at);
    s.remove_prefix(at + sep.size());
    return true;
}

}  // namespace

std::string TransferKey::to_string() const {
    std::string s = std::to_string(src_rank) + "/" + std::to_string(incarnation) + " -> " + std::to_string(dst_rank) +
                    " '" + tensor + "' frame " + std::to_string(frame) + ":" + std::to_string(iter);
    if (step >= 0) s += " step " + std::to_string(step);
    return s;
}

int TransferKey::tag(int tag_upper_bound) const {
    return 1 + static_cast<int>(fnv1a(to_string()) % static_cast<uint64_t>(tag_upper_bound));
}

TransferKey TransferKey::at_step(int64_t s) const {
    TransferKey k = *this;
    k.step = s;
    return k;
}

TransferKey parse_transfer_key(const std::string& text) {
    TransferKey k;
    std::string_view s = text, src, inc, dst, fr, it;
    // The tensor name may hold quotes and spaces: it ends at the last "' frame ".
    size_t name_end = s.rfind("' frame ");
    bool ok = name_end != std::string_view::npos && cut(s, "/", src) && cut(s, " -> ", inc) && cut(s, " '", dst) &&
              parse_int(src, k.src_rank) && parse_int(inc, k.incarnation) && parse_int(dst, k.dst_rank);
    if (ok) {
        size_t start = text.size() - s.size();
        ok = name_end >= start;
        if (ok) {
            k.tensor = text.substr(start, name_end - start);
            s = std::string_view(text).substr(name_end + 8);
            std::string_view step_text;
            bool has_step = cut(s, " step ", fr) ? (step_text = s, true) : (fr = s, false);
            std::string_view frame_text = fr;
            ok = cut(frame_text, ":", it) && parse_int(it, k.frame) && parse_int(frame_text, k.iter);
            k.step = -1;
            if (ok && has_step) ok = parse_int(step_text, k.step);
        }
    }
    KILN_CHECK(ok && !k.tensor.empty(), kInvalidArgument)
        << "transfer key '" << text << "': expected \"SRC/INCARNATION -> DST 'TENSOR' frame F:I[ step N]\"";
    return k;
}

}  // namespace kiln::distributed
