// The fusion plan (src/distributed/fusion.h): a pure function, checked by hand.
#include "distributed/fusion.h"

#include <gtest/gtest.h>

namespace kiln::distributed {
namespace {

TEST(Fusion, PacksSameDtypeUpToTheLimitInCallOrder) {
    using D = DType;
    std::vector<DType> dtypes{D::kFloat32, D::kFloat32, D::kInt64, D::kFloat32, D::kFloat32, D::kInt64};
    std::vector<size_t> bytes{40, 40, 8, 30, 100, 8};
    std::vector<FusionBuffer> plan = plan_fusion(dtypes, bytes, 100);
    ASSERT_EQ(plan.size(), 4u);
    EXPECT_EQ(plan[0].members, (std::vector<size_t>{0, 1}));  // 80; +30 would pass 100
    EXPECT_EQ(plan[0].bytes, 80u);
    EXPECT_EQ(plan[1].members, (std::vector<size_t>{2, 5}));  // the int64 tensors share one buffer
    EXPECT_EQ(plan[1].dtype, D::kInt64);
    EXPECT_EQ(plan[2].members, (std::vector<size_t>{3}));     // 30 + 100 > 100: 4 goes alone
    EXPECT_EQ(plan[3].members, (std::vector<size_t>{4}));
}

TEST(Fusion, ATensorOverTheLimitTravelsAlone) {
    std::vector<FusionBuffer> plan = plan_fusion({DType::kFloat32, DType::kFloat32}, {500, 4}, 100);
    ASSERT_EQ(plan.size(), 2u);
    EXPECT_EQ(plan[0].members, (std::vector<size_t>{0}));
    EXPECT_EQ(plan[1].members, (std::vector<size_t>{1}));
    EXPECT_TRUE(plan_fusion({}, {}, 100).empty());
}

}  // namespace
}  // namespace kiln::distributed
