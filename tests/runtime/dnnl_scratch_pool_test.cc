// ScratchPool (runtime/dnnl_scratch_pool.h): buffers lent at once are distinct, a returned
// buffer is lent again for a request it holds, a larger request gets a buffer of its size, and
// every byte of a lent buffer is writable.
#if KILN_HAVE_DNNL
#include "runtime/dnnl_scratch_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kiln::runtime {
namespace {

dnnl::memory::desc bytes(int64_t n) { return dnnl::memory::desc({n}, dnnl::memory::data_type::u8, dnnl::memory::format_tag::a); }

TEST(ScratchPool, LendsDistinctReusesAndGrows) {
    ScratchPool& pool = ScratchPool::instance();
    dnnl::memory a = pool.take(bytes(1 << 20)), b = pool.take(bytes(1 << 20));
    EXPECT_NE(a.get_data_handle(), b.get_data_handle()) << "two parts running at once";
    std::memset(a.get_data_handle(), 1, 1 << 20);
    std::memset(b.get_data_handle(), 2, 1 << 20);
    void* const a_data = a.get_data_handle();
    pool.give(a);
    dnnl::memory c = pool.take(bytes(1000));
    EXPECT_EQ(c.get_data_handle(), a_data) << "a returned buffer that holds the request is lent again";
    EXPECT_EQ(c.get_desc().get_size(), 1000u);
    pool.give(c);
    dnnl::memory d = pool.take(bytes(3 << 20));
    std::memset(d.get_data_handle(), 3, 3 << 20);  // the whole request is writable
    EXPECT_EQ(static_cast<unsigned char*>(b.get_data_handle())[(1 << 20) - 1], 2) << "a lent buffer is untouched";
    pool.give(b);
    pool.give(d);
}

}  // namespace
}  // namespace kiln::runtime
#endif
