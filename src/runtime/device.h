// Devices: where buffers live and kernels run. A small registry keyed by DeviceType; CPU is
// always present; CUDA is there when the machine has a driver and a GPU (loaded at run time,
// runtime/cuda/cuda_device.h).
#pragma once

#include <memory>
#include <string>

#include "runtime/allocator.h"

namespace kiln::runtime {

enum class DeviceType { kCPU, kCUDA };

class Device {
public:
    virtual ~Device() = default;
    virtual DeviceType type() const = 0;
    virtual std::string name() const = 0;
    virtual Allocator& allocator() = 0;
    virtual void copy(void* dst, const void* src, size_t bytes) = 0;
};

/// The device of a type, or nullptr if not available on this machine (*why says why).
Device* get_device(DeviceType type, std::string* why = nullptr);
/// "cpu" | "cuda"; kInvalidArgument otherwise.
DeviceType parse_device_type(const std::string& s);

}  // namespace kiln::runtime
