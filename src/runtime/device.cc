// The device registry. The CPU device is a process-wide singleton with an unlimited
// CpuAllocator; the CUDA device opens GPU 0 on first use (nullptr and the reason without one).
#include "runtime/device.h"

#include <cstring>

#include "runtime/cuda/cuda_device.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

class CpuDevice : public Device {
public:
    DeviceType type() const override { return DeviceType::kCPU; }
    std::string name() const override { return "cpu"; }
    Allocator& allocator() override { return alloc_; }
    void copy(void* dst, const void* src, size_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }

private:
    CpuAllocator alloc_;
};

}  // namespace

Device* get_device(DeviceType type, std::string* why) {
    switch (type) {
        case DeviceType::kCPU: {
            static CpuDevice cpu;
            return &cpu;
        }
        case DeviceType::kCUDA: return cuda::CudaDevice::get(why);
    }
    return nullptr;
}

DeviceType parse_device_type(const std::string& s) {
    if (s == "cpu") return DeviceType::kCPU;
    if (s == "cuda") return DeviceType::kCUDA;
    KILN_CHECK(false, kInvalidArgument) << "device must be cpu or cuda, got '" << s << "'";
    return DeviceType::kCPU;
}

}  // namespace kiln::runtime
