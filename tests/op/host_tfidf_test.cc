// TfIdfVectorizer's host kernel against the ONNX operator docs' examples (the pool
// [2,3,5,4 | 5,6, 7,8, 6,7] over X = [1,1,3,3,3,7,8,6,7,5,6,8]) with the counts worked out by hand
// in the comments, the weighting modes, a string pool, and the error cases.
#include <gtest/gtest.h>

#include "host_test_util.h"
#include "op_test_util.h"

namespace kiln::op::testing {
namespace {

using Floats = std::vector<float>;

// The docs' attributes: unigrams 2,3,5,4 (n-grams 0-3), bigrams (5,6) (7,8) (6,7) (n-grams 4-6).
ir::AttrMap doc_attrs(int64_t min_n, int64_t max_n, int64_t skip, const std::string& mode = "TF") {
    return {{"min_gram_length", min_n},
            {"max_gram_length", max_n},
            {"max_skip_count", skip},
            {"mode", mode},
            {"ngram_counts", std::vector<int64_t>{0, 4}},
            {"ngram_indexes", std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}},
            {"pool_int64s", std::vector<int64_t>{2, 3, 5, 4, 5, 6, 7, 8, 6, 7}}};
}

const std::vector<double> kX = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};

Floats floats_of(const Datum& d) {
    const Tensor& t = d.tensor();
    EXPECT_EQ(t.dtype(), DType::kFloat32);
    return Floats(t.data_as<float>(), t.data_as<float>() + t.numel());
}

TEST(HostTfIdf, DocExamples1D) {
    const Tensor x = make_tensor(DType::kInt32, {12}, kX);
    // Bigrams, skip 0: adjacent pairs only: (5,6) at 9-10, (7,8) at 5-6, (6,7) at 7-8.
    auto s0 = run_host("TfIdfVectorizer", {x}, doc_attrs(2, 2, 0));
    EXPECT_EQ(s0[0].tensor().shape(), (Shape{7}));
    EXPECT_EQ(floats_of(s0[0]), (Floats{0, 0, 0, 0, 1, 1, 1}));
    // Bigrams, skip up to 5 (distance 1..6): (7,8) also at 5-11 (d=6) and 8-11 (d=3) -> 3.
    auto s5 = run_host("TfIdfVectorizer", {x}, doc_attrs(2, 2, 5));
    EXPECT_EQ(floats_of(s5[0]), (Floats{0, 0, 0, 0, 1, 3, 1}));
    // Uni- and bigrams, skip 5: unigram 3 occurs 3 times, 5 once, 2 and 4 never; unigrams are
    // counted once, not once per skip distance.
    auto u5 = run_host("TfIdfVectorizer", {x}, doc_attrs(1, 2, 5));
    EXPECT_EQ(floats_of(u5[0]), (Floats{0, 3, 1, 0, 1, 3, 1}));
    // int64 input gives the same counts.
    auto i64 = run_host("TfIdfVectorizer", {make_tensor(DType::kInt64, {12}, kX)}, doc_attrs(1, 2, 5));
    EXPECT_EQ(floats_of(i64[0]), (Floats{0, 3, 1, 0, 1, 3, 1}));
    // Huge skip / gram lengths: no pair in 12 items is more than 11 apart and the pool has no
    // 3-grams, so the counts are those of skip 5; the kernel must not loop over 2^40 skips.
    auto huge = run_host("TfIdfVectorizer", {x}, doc_attrs(1, int64_t{1} << 40, int64_t{1} << 40));
    EXPECT_EQ(floats_of(huge[0]), (Floats{0, 3, 1, 0, 1, 3, 1}));
}

TEST(HostTfIdf, DocExamplesBatch) {
    // Rows [1,1,3,3,3,7] and [8,6,7,5,6,8]; n-grams never span rows.
    const Tensor x = make_tensor(DType::kInt32, {2, 6}, kX);
    auto s0 = run_host("TfIdfVectorizer", {x}, doc_attrs(2, 2, 0));
    EXPECT_EQ(s0[0].tensor().shape(), (Shape{2, 7}));
    EXPECT_EQ(floats_of(s0[0]), (Floats{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}));
    // Row 1 with skips: (7,8) at 2-5 (d=3).
    auto s5 = run_host("TfIdfVectorizer", {x}, doc_attrs(2, 2, 5));
    EXPECT_EQ(floats_of(s5[0]), (Floats{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}));
    auto u5 = run_host("TfIdfVectorizer", {x}, doc_attrs(1, 2, 5));
    EXPECT_EQ(floats_of(u5[0]), (Floats{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
}

TEST(HostTfIdf, LevelEmptyAndEmptyInput) {
    // No unigrams in the pool (ngram_counts [0, 0]): bigrams (5,6) (7,8) (6,7) once each.
    ir::AttrMap attrs = doc_attrs(2, 2, 0);
    attrs["ngram_counts"] = std::vector<int64_t>{0, 0};
    attrs["ngram_indexes"] = std::vector<int64_t>{0, 1, 2};
    attrs["pool_int64s"] = std::vector<int64_t>{5, 6, 7, 8, 6, 7};
    auto out = run_host("TfIdfVectorizer", {make_tensor(DType::kInt32, {12}, kX)}, attrs);
    EXPECT_EQ(floats_of(out[0]), (Floats{1, 1, 1}));
    // An empty row gives zeros of the output size.
    auto empty = run_host("TfIdfVectorizer", {make_tensor(DType::kInt64, {0}, {})}, doc_attrs(1, 2, 5));
    EXPECT_EQ(floats_of(empty[0]), (Floats(7, 0.0f)));
}

TEST(HostTfIdf, Weighting) {
    const Tensor x = make_tensor(DType::kInt32, {12}, kX);
    // Counts are {0,3,1,0,1,3,1} (DocExamples1D); w = {0.5,1,2,3,4,5,6}.
    ir::AttrMap attrs = doc_attrs(1, 2, 5, "IDF");
    EXPECT_EQ(floats_of(run_host("TfIdfVectorizer", {x}, attrs)[0]), (Floats{0, 1, 1, 0, 1, 1, 1}));
    attrs["mode"] = std::string("TFIDF");
    EXPECT_EQ(floats_of(run_host("TfIdfVectorizer", {x}, attrs)[0]), (Floats{0, 3, 1, 0, 1, 3, 1}));
    attrs["weights"] = std::vector<double>{0.5, 1, 2, 3, 4, 5, 6};
    EXPECT_EQ(floats_of(run_host("TfIdfVectorizer", {x}, attrs)[0]), (Floats{0, 3, 2, 0, 4, 15, 6}));
    attrs["mode"] = std::string("IDF");
    EXPECT_EQ(floats_of(run_host("TfIdfVectorizer", {x}, attrs)[0]), (Floats{0, 1, 2, 0, 4, 5, 6}));
}

TEST(HostTfIdf, StringPoolAndPermutedIndexes) {
    // Pool: unigrams x, y; bigram (x, y). X = [x, y, x, z, x]: x 3 times, y once; (x, y) at 0-1
    // (d=1) only ((0,2) (2,4) are (x, x), (1,3) is (y, z)). Columns: x->2, y->0, (x,y)->1.
    ir::AttrMap attrs = {{"min_gram_length", int64_t{1}},
                         {"max_gram_length", int64_t{2}},
                         {"max_skip_count", int64_t{1}},
                         {"mode", std::string("TF")},
                         {"ngram_counts", std::vector<int64_t>{0, 2}},
                         {"ngram_indexes", std::vector<int64_t>{2, 0, 1}},
                         {"pool_strings", std::vector<std::string>{"x", "y", "x", "y"}}};
    auto out = run_host("TfIdfVectorizer", {make_strings({5}, {"x", "y", "x", "z", "x"})}, attrs);
    EXPECT_EQ(floats_of(out[0]), (Floats{1, 1, 3}));
    // Only unigrams counted when max_gram_length is 1.
    attrs["max_gram_length"] = int64_t{1};
    out = run_host("TfIdfVectorizer", {make_strings({5}, {"x", "y", "x", "z", "x"})}, attrs);
    EXPECT_EQ(floats_of(out[0]), (Floats{1, 0, 3}));
}

TEST(HostTfIdf, Errors) {
    const Tensor x = make_tensor(DType::kInt32, {12}, kX);
    ir::AttrMap bad_mode = doc_attrs(1, 2, 0, "BM25");
    expect_error([&] { run_host("TfIdfVectorizer", {x}, bad_mode); }, ErrorKind::kInvalidModel, "mode");
    ir::AttrMap both = doc_attrs(1, 2, 0);
    both["pool_strings"] = std::vector<std::string>{"a"};
    expect_error([&] { run_host("TfIdfVectorizer", {x}, both); }, ErrorKind::kInvalidModel, "exactly one of");
    ir::AttrMap short_idx = doc_attrs(1, 2, 0);
    short_idx["ngram_indexes"] = std::vector<int64_t>{0, 1};
    expect_error([&] { run_host("TfIdfVectorizer", {x}, short_idx); }, ErrorKind::kInvalidModel, "ngram_indexes");
    ir::AttrMap lengths = doc_attrs(3, 2, 0);
    expect_error([&] { run_host("TfIdfVectorizer", {x}, lengths); }, ErrorKind::kInvalidModel, "min_gram_length");
    expect_error([&] { run_host("TfIdfVectorizer", {make_strings({1}, {"a"})}, doc_attrs(1, 2, 0)); },
                 ErrorKind::kInvalidArgument, "pool_int64s");
    expect_error([&] { run_host("TfIdfVectorizer", {make_tensor(DType::kFloat32, {2}, {1, 2})}, doc_attrs(1, 2, 0)); },
                 ErrorKind::kInvalidArgument, "int32, int64 or string");
    expect_error([&] { run_host("TfIdfVectorizer", {make_tensor(DType::kInt32, {1, 2, 2}, {})}, doc_attrs(1, 2, 0)); },
                 ErrorKind::kInvalidArgument, "[C] or [N, C]");
    expect_error([&] { run_host("TfIdfVectorizer", {make_tensor(DType::kInt32, {0, 2}, {})}, doc_attrs(1, 2, 0)); },
                 ErrorKind::kInvalidArgument, "N > 0");
    ir::AttrMap bad_weights = doc_attrs(1, 2, 0, "TFIDF");
    bad_weights["weights"] = std::vector<double>{1, 2};
    expect_error([&] { run_host("TfIdfVectorizer", {x}, bad_weights); }, ErrorKind::kInvalidModel, "weights");
}

}  // namespace
}  // namespace kiln::op::testing
