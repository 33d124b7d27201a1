// Devices: where buffers live and kernels run. A small registry keyed by DeviceType; CPU is
// always present, CUDA registers itself when built with it (a later issue).
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

/// The device of a type, or nullptr if not available in this build / machine.
Device* get_device(DeviceType type);

}  // namespace kiln::runtime
