// CpuAllocator budget accounting and the CPU device registry.
#include "runtime/allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "runtime/device.h"
#include "support/error.h"

namespace kiln::runtime {
namespace {

TEST(CpuAllocator, AlignedAndAccounted) {
    CpuAllocator a;
    void* p = a.allocate(100, "x");
    void* q = a.allocate(1, "y");
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
    std::memset(p, 1, 100);
    EXPECT_EQ(a.bytes_in_use(), 101u);
    a.deallocate(p, 100);
    EXPECT_EQ(a.bytes_in_use(), 1u);
    a.deallocate(q, 1);
    EXPECT_EQ(a.bytes_in_use(), 0u);
    EXPECT_EQ(a.peak_bytes(), 101u);
}

TEST(CpuAllocator, BudgetExceededIsOutOfMemoryNamingTheTensor) {
    CpuAllocator a(1000);
    void* p = a.allocate(600, "conv1_out");
    try {
        a.allocate(500, "relu2_out");
        FAIL() << "expected an OutOfMemory error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
        EXPECT_EQ(e.message(), "out of memory budget: allocating 500 bytes for 'relu2_out' with 600 bytes in use "
                               "exceeds the budget of 1000 bytes");
    }
    // Still usable: the refused request changed nothing.
    EXPECT_EQ(a.bytes_in_use(), 600u);
    void* q = a.allocate(400, "fits");
    EXPECT_EQ(a.bytes_in_use(), 1000u);
    EXPECT_THROW(a.allocate(1, "one more"), Error);
    a.deallocate(p, 600);
    a.deallocate(q, 400);
    EXPECT_EQ(a.bytes_in_use(), 0u);
    void* r = a.allocate(1000, "all");
    a.deallocate(r, 1000);
    EXPECT_EQ(a.peak_bytes(), 1000u);
}

TEST(CpuAllocator, HugeRequestAgainstBudgetDoesNotOverflow) {
    CpuAllocator a(1 << 20);
    void* p = a.allocate(10, "x");
    EXPECT_THROW(a.allocate(SIZE_MAX - 4, "huge"), Error);
    a.deallocate(p, 10);
}

TEST(Device, CpuRegistered) {
    Device* cpu = get_device(DeviceType::kCPU);
    ASSERT_NE(cpu, nullptr);
    EXPECT_EQ(cpu->type(), DeviceType::kCPU);
    EXPECT_EQ(cpu->name(), "cpu");
    EXPECT_EQ(cpu, get_device(DeviceType::kCPU));
    void* p = cpu->allocator().allocate(16, "t");
    const char src[16] = "fifteen chars..";
    cpu->copy(p, src, 16);
    EXPECT_EQ(std::memcmp(p, src, 16), 0);
    cpu->allocator().deallocate(p, 16);
    // CUDA: present on a GPU machine, else nullptr with the reason (tests/runtime/cuda_device_test.cc).
    std::string why;
    if (!get_device(DeviceType::kCUDA, &why)) EXPECT_FALSE(why.empty());
}

}  // namespace
}  // namespace kiln::runtime
