// kiln::Status: ok is one null pointer; copies of a failure are deep, moves leave the source ok.
#include "support/status.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace kiln {
namespace {

TEST(Status, OkHasNoMessageAndTheDefaultKind) {
    Status s = Status::ok_status();
    EXPECT_TRUE(s.ok());
    EXPECT_EQ(s.message(), "");
    EXPECT_EQ(s.kind(), ErrorKind::kInternal);
    EXPECT_NO_THROW(s.throw_if_error());
    EXPECT_EQ(sizeof(Status), sizeof(void*));
}

TEST(Status, CopiesAreIndependentAndMovesLeaveOk) {
    Status failed(ErrorKind::kInvalidArgument, "input 'x': expected f32[2], got f32[3]");
    Status copy = failed;
    EXPECT_FALSE(copy.ok());
    EXPECT_EQ(copy.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(copy.message(), failed.message());
    EXPECT_NE(&copy.message(), &failed.message());  // a deep copy: each owns its text

    Status assigned;
    assigned = copy;
    assigned = assigned;  // self-assignment keeps it
    EXPECT_EQ(assigned.message(), "input 'x': expected f32[2], got f32[3]");
    assigned = Status::ok_status();
    EXPECT_TRUE(assigned.ok());
    EXPECT_FALSE(copy.ok());

    Status moved = std::move(copy);
    EXPECT_FALSE(moved.ok());
    EXPECT_TRUE(copy.ok());  // NOLINT(bugprone-use-after-move): a moved-from Status is ok
    try {
        moved.throw_if_error();
        FAIL() << "expected a throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_EQ(e.message(), "input 'x': expected f32[2], got f32[3]");
    }
}

TEST(Status, FromAnErrorKeepsTheKindApart) {
    Status s = Status::from(Error(ErrorKind::kOutOfMemory, "arena of 64 bytes"));
    EXPECT_EQ(s.kind(), ErrorKind::kOutOfMemory);
    EXPECT_EQ(s.message(), "arena of 64 bytes");
}

}  // namespace
}  // namespace kiln
