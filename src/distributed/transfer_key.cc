#include "distributed/transfer_key.h"

#include <charconv>
#include <vector>

#include "support/error.h"

namespace kiln::distributed {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> parts(1);
    for (char c : s) {
        if (c == sep) parts.emplace_back();
        else parts.back() += c;
    }
    return parts;
}

template <typename T>
bool parse_int(const std::string& s, T& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

std::string TransferKey::to_string() const {
    std::string s = std::to_string(src_rank) + ";" + std::to_string(src_incarnation) + ";" + std::to_string(dst_rank) +
                    ";" + tensor + ";" + std::to_string(frame) + ":" + std::to_string(iteration);
    if (step >= 0) s += ";step=" + std::to_string(step);
    return s;
}

TransferKey TransferKey::at_step(int64_t s) const {
    TransferKey k = *this;
    k.step = s;
    return k;
}

TransferKey parse_transfer_key(const std::string& text) {
    // The tensor name may hold ';' itself: fields are counted from both ends.
    std::vector<std::string> p = split(text, ';');
    bool has_step = p.size() >= 6 && p.back().rfind("step=", 0) == 0;
    size_t tail = has_step ? 2 : 1;  // fields after the tensor name
    TransferKey k;
    bool ok = p.size() >= 4 + tail - 1 && parse_int(p[0], k.src_rank) && parse_int(p[1], k.src_incarnation) &&
              parse_int(p[2], k.dst_rank);
    if (ok) {
        for (size_t i = 3; i + tail < p.size(); ++i) k.tensor += (i > 3 ? ";" : "") + p[i];
        std::vector<std::string> fi = split(p[p.size() - tail], ':');
        ok = !k.tensor.empty() && fi.size() == 2 && parse_int(fi[0], k.frame) && parse_int(fi[1], k.iteration);
        if (ok && has_step) ok = parse_int(p.back().substr(5), k.step);
    }
    KILN_CHECK(ok, kInvalidArgument) << "transfer key '" << text
                                     << "': expected 'src;incarnation;dst;tensor;frame:iteration[;step=N]'";
    return k;
}

}  // namespace kiln::distributed
