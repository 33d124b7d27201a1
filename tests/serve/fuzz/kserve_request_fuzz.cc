// libFuzzer target for the KServe v2 HTTP request parsers (built and run by
// fuzz_kserve_request.sh with clang, AddressSanitizer and UndefinedBehaviorSanitizer).
// Input layout: byte 0 selects the mode; with bit 0 set, bytes 1-2 are a little-endian
// Inference-Header-Content-Length (the binary extension) and the body follows, else the body is
// bytes 1.. . A request that parses is written back as a response (its inputs as outputs, binary
// or JSON by bit 1), which must succeed. Bit 2 also feeds the body to the repository parsers.
// Any Failure is a correct answer; a crash, a sanitizer report or an exception is a bug.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "serve/kserve_infer_request.h"
#include "serve/kserve_infer_response.h"
#include "serve/kserve_json.h"

using namespace kiln::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 3) return 0;
    const uint8_t mode = data[0];
    std::optional<size_t> header_length;
    std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (mode & 1) {
        header_length = static_cast<size_t>(data[1] | (data[2] << 8));
        body.remove_prefix(2);
    }
    kserve::ParsedInferRequest parsed;
    Failure f = kserve::parse_infer_request(body, header_length, parsed);
    if (f.ok()) {
        InferResponse response{"m", "1", parsed.request.id, parsed.request.inputs};
        kserve::OutputEncoding enc;
        enc.binary_default = (mode & 2) != 0;
        kserve::EncodedResponse out;
        Failure w = kserve::write_infer_response(response, enc, out);
        if (!w.ok()) std::abort();  // every tensor a request can carry has a datatype
    } else if (f.message.empty()) {
        std::abort();  // a failure must say what was wrong
    }
    if (mode & 4) {
        bool ready = false;
        (void)kserve::parse_repository_index_request(body, ready);
        (void)kserve::parse_repository_load_request(body, "m", (mode & 8) != 0);
    }
    return 0;
}
