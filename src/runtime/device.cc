// The device registry. The CPU device is a process-wide singleton with an unlimited
// CpuAllocator; CUDA is not part of this build, so asking for it yields nullptr.
#include "runtime/device.h"

#include <cstring>

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

Device* get_device(DeviceType type) {
    switch (type) {
        case DeviceType::kCPU: {
            static CpuDevice cpu;
            return &cpu;
        }
        case DeviceType::kCUDA: return nullptr;
    }
    return nullptr;
}

}  // namespace kiln::runtime
