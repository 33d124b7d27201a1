// kiln::Error and the KILN_THROW / KILN_CHECK / KILN_ICHECK macros.
#include "support/error.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace kiln {
namespace {

int checked_div(int a, int b) {
    KILN_CHECK(b != 0, kInvalidArgument) << "divisor: expected non-zero, got " << b;
    return a / b;
}

TEST(Error, ThrowCarriesKindAndMessage) {
    try {
        KILN_THROW(kUnsupported) << "op "
                                 << "Foo"
                                 << " opset " << 99;
        FAIL() << "expected a throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
        EXPECT_EQ(e.message(), "op Foo opset 99");
        EXPECT_STREQ(e.what(), "Unsupported: op Foo opset 99");
    }
}

TEST(Error, CheckPassesAndFails) {
    EXPECT_EQ(checked_div(6, 3), 2);
    try {
        checked_div(1, 0);
        FAIL() << "expected a throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_EQ(e.message(), "divisor: expected non-zero, got 0");
    }
}

TEST(Error, CheckWorksInIfElseWithoutBraces) {
    bool thrown = false;
    try {
        if (true)
            KILN_CHECK(1 + 1 == 3, kInternal) << "math";
        else
            FAIL() << "dangling else bound to the macro's if";
    } catch (const Error&) {
        thrown = true;
    }
    EXPECT_TRUE(thrown);
}

TEST(Error, InternalCheckSaysBug) {
    try {
        int invariant = 1;
        KILN_ICHECK(invariant == 2) << "context " << invariant;
        FAIL() << "expected a throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInternal);
        EXPECT_NE(e.message().find("bug in Kiln"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("invariant == 2"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("context 1"), std::string::npos) << e.message();
        EXPECT_NE(e.message().find("error_test.cc"), std::string::npos) << e.message();
    }
}

std::string formatting_that_throws() { throw std::out_of_range("formatting failed"); }

std::string formatting_that_checks(int v) {
    KILN_CHECK(v >= 0, kInvalidArgument) << "inner: expected v >= 0, got " << v;
    return std::to_string(v);
}

// An exception raised while a message is being streamed propagates as itself (a throwing
// destructor would have called std::terminate during that unwinding and aborted the process).
TEST(Error, ThrowWhileBuildingTheMessagePropagates) {
    EXPECT_THROW(KILN_THROW(kInvalidArgument) << "value " << formatting_that_throws(), std::out_of_range);
    try {
        KILN_CHECK(false, kUnsupported) << "outer " << formatting_that_checks(-1);
        FAIL() << "expected a throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
        EXPECT_EQ(e.message(), "inner: expected v >= 0, got -1");
    }
}

TEST(Error, ThrowWithoutMessage) {
    try {
        KILN_THROW(kCancelled);
        FAIL() << "expected a throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kCancelled);
        EXPECT_EQ(e.message(), "");
    }
}

TEST(Error, ContextChain) {
    Error e(ErrorKind::kInvalidModel, "bad rank");
    e.add_context("while importing node 'conv1' (Conv)").add_context("while loading model.onnx");
    ASSERT_EQ(e.context().size(), 2u);
    EXPECT_EQ(std::string(e.what()),
              "InvalidModel: bad rank\n  while importing node 'conv1' (Conv)\n  while loading "
              "model.onnx");
}

TEST(Error, KindNames) {
    EXPECT_STREQ(error_kind_name(ErrorKind::kParseError), "ParseError");
    EXPECT_STREQ(error_kind_name(ErrorKind::kIOError), "IOError");
    EXPECT_STREQ(error_kind_name(ErrorKind::kOutOfMemory), "OutOfMemory");
}

}  // namespace
}  // namespace kiln
