// String tensors (owned std::string elements) and Datum (tensor | sequence | none).
#include "support/datum.h"

#include <gtest/gtest.h>

#include "support/error.h"

namespace kiln {
namespace {

TEST(StringTensor, ElementsAreObjectsThatCloneDeeply) {
    Tensor s(DType::kString, {2, 2});
    EXPECT_EQ(dtype_name(DType::kString), std::string("str"));
    EXPECT_EQ(dtype_to_onnx(DType::kString), 8);  // TensorProto.STRING
    for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(s.data_as<std::string>()[i].empty());
    s.data_as<std::string>()[3] = std::string(1000, 'x');  // a heap-allocated string
    Tensor c = s.clone();
    c.data_as<std::string>()[3][0] = 'y';
    EXPECT_EQ(s.data_as<std::string>()[3][0], 'x');
    EXPECT_EQ(c.data_as<std::string>()[3].size(), 1000u);
    Tensor r = s.reshaped({4});  // shares the elements
    EXPECT_EQ(&r.data_as<std::string>()[3], &s.data_as<std::string>()[3]);
    EXPECT_THROW(s.get_f64(0), Error);
    EXPECT_THROW(s.set_f64(0, 1.0), Error);
}

TEST(Datum, KindsAndErrors) {
    Datum none;
    EXPECT_TRUE(none.is_none());
    EXPECT_EQ(none.str(), "none");
    Datum t(Tensor(DType::kInt64, {3}));
    EXPECT_TRUE(t.is_tensor());
    EXPECT_EQ(t.str(), "i64[3]");
    EXPECT_THROW(t.items("x"), Error);
    Datum seq = Datum::sequence(DType::kFloat32, {Tensor(DType::kFloat32, {1}), Tensor(DType::kFloat32, {2, 2})});
    EXPECT_EQ(seq.items().size(), 2u);
    EXPECT_EQ(seq.str(), "seq<f32>(2)");
    EXPECT_EQ(Datum::sequence(DType::kInt32, {}).elem_dtype(), DType::kInt32);
    try {
        (void)seq.tensor("input 'xs'");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("input 'xs': expected a tensor, got seq<f32>(2)"), std::string::npos);
    }
    EXPECT_THROW(Datum::sequence(DType::kFloat32, {Tensor(DType::kInt64, {1})}), Error);
}

}  // namespace
}  // namespace kiln
