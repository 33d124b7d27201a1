// libFuzzer target for the artifact loader (built and run by fuzz_artifact_loader.sh with
// clang, AddressSanitizer and UndefinedBehaviorSanitizer). Two modes, by the input's first byte:
//   even: the rest is a whole file for load_artifact (checksums and all; the seed corpus holds
//         real artifacts, so mutations that keep the checksums reach the decoders only through
//         the header and the checksum checks themselves);
//   odd:  the rest feeds the section decoders directly (a u16 length, decode_info on that many
//         bytes, decode_executable on the others), past any checksum: the validation behind them.
// Any kiln::Error is a correct answer; a crash, a sanitizer report or another exception is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/artifact.h"
#include "runtime/artifact_format.h"
#include "support/error.h"

namespace {

int memfd() {
    static int fd = memfd_create("kiln-fuzz-artifact", MFD_CLOEXEC);
    return fd;
}

void load_whole_file(const uint8_t* data, size_t size) {
    const int fd = memfd();
    if (fd < 0 || ftruncate(fd, 0) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return;
    if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return;
    try {
        kiln::runtime::LoadedArtifact a = kiln::runtime::load_artifact("/proc/self/fd/" + std::to_string(fd));
    } catch (const kiln::Error&) {
    }
}

void decode_sections(const uint8_t* data, size_t size) {
    using namespace kiln::runtime::artifact_format;
    if (size < 2) return;
    const size_t split = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
    data += 2;
    size -= 2;
    try {
        (void)decode_info(data, split);
    } catch (const kiln::Error&) {
    }
    static std::vector<uint8_t> constants(1 << 16);
    ConstantView view = [](kiln::DType dtype, const kiln::Shape& shape, uint64_t offset) {
        return kiln::Tensor::borrow(dtype, shape, constants.data() + offset);
    };
    try {
        (void)decode_executable(data + split, size - split, constants.size(), view);
    } catch (const kiln::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    if (data[0] % 2 == 0)
        load_whole_file(data + 1, size - 1);
    else
        decode_sections(data + 1, size - 1);
    return 0;
}
