// Load time of an artifact with ResNet-50's weight volume (~100 MB in 160 constants), warm
// page cache: the figure issue 13 targets (< 50 ms). Prints the split (mapping + checksums vs
// the rest) and fails only far above the target (shared CI machines are noisy).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>

#include "artifact_test_util.h"
#include "support/hash64.h"

namespace kiln::runtime::testing {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

TEST(ArtifactLoadTime, HundredMegabytesOfConstants) {
    ScratchDir dir;
    auto exe = make_test_executable();
    size_t total = 0;
    for (int i = 0; i < 160; ++i) {
        // ResNet-50-like spread: many small tensors, a few of several MB.
        const int64_t n = (i % 16 == 15) ? 1'250'000 : 20'000 + 800 * i;
        BufferDesc c{"w" + std::to_string(i), DType::kFloat32, {n}, BufferRole::kConstant, Tensor(DType::kFloat32, {n})};
        float* p = c.constant.data_as<float>();
        for (int64_t k = 0; k < n; ++k) p[k] = static_cast<float>((k * 2654435761u + i) % 1000) * 1e-3f;
        total += c.nbytes();
        exe->buffers.push_back(std::move(c));
    }
    const std::string path = dir.file("big.kiln");
    save_artifact(path, *exe, test_library_path(), {});
    std::vector<double> load_ms;
    for (int r = 0; r < 7; ++r) {
        const auto t0 = Clock::now();
        LoadedArtifact a = load_artifact(path);
        load_ms.push_back(ms_since(t0));
        if (r == 0) {  // the constants are the file's, byte for byte
            for (size_t b = 0; b < exe->buffers.size(); ++b) {
                if (exe->buffers[b].role != BufferRole::kConstant) continue;
                ASSERT_EQ(std::memcmp(a.exe->buffers[b].constant.data(), exe->buffers[b].constant.data(),
                                      exe->buffers[b].nbytes()),
                          0);
            }
        }
    }
    std::sort(load_ms.begin(), load_ms.end());
    const std::string bytes = read_bytes(path);
    auto t0 = Clock::now();
    volatile uint64_t h = hash64(bytes.data(), bytes.size());
    (void)h;
    const double hash_ms = ms_since(t0);
    std::cout << "artifact of " << bytes.size() / 1e6 << " MB (" << total / 1e6 << " MB of constants): load_artifact "
              << "median " << load_ms[load_ms.size() / 2] << " ms, min " << load_ms.front() << " ms; XXH3 over the "
              << "file in memory " << hash_ms << " ms\n";
    EXPECT_LT(load_ms[load_ms.size() / 2], 500) << "far above the 50 ms target";
}

}  // namespace
}  // namespace kiln::runtime::testing
