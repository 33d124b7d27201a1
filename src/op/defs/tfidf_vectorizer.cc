// TfIdfVectorizer (opset 9) as a host kernel: counts the pool's n-grams in each row of an int32 /
// int64 / string input ([C] or [N, C]) and weights the counts.
//
// The pool (pool_int64s or pool_strings) lists n-grams by size: ngram_counts[i] is where the
// (i+1)-grams start; n-gram k (0-based, in pool order over all sizes) counts into output column
// ngram_indexes[k]. Only sizes in [min_gram_length, max_gram_length] are counted. In a row x, the
// n-gram of size n >= 2 starting at s with skip distance d (1 .. max_skip_count+1) is
// (x[s], x[s+d], ..., x[s+(n-1)d]); unigrams are counted once (they have no skip). A pool n-gram
// listed twice counts into the later one's column. This is ONNX Runtime's trie walk (and the ONNX
// reference's) written as direct look-ups: every (size, skip, start) window the trie walk visits
// is one look-up here.
// Weighting per output column j (w = weights): TF: count; IDF: count > 0 ? w[j] (1 without
// weights) : 0; TFIDF: count * w[j] (count without weights). Output f32 [max(ngram_indexes)+1],
// or [N, that] for 2-D input.
#include <algorithm>
#include <map>

#include "op/op_util.h"
#include "op/registry.h"
#include "support/error.h"

namespace kiln::op {

namespace {

struct TfIdfConfig {
    int64_t min_n = 1, max_n = 1, max_skip = 0;
    std::string mode;
    bool strings = false;  // pool_strings (else pool_int64s)
    std::vector<int64_t> pool_ints;
    std::vector<std::string> pool_strings;
    std::vector<int64_t> counts, indexes;
    std::vector<double> weights;
    int64_t out_size = 0;
};

TfIdfConfig parse_config(const ir::Node& n) {
    TfIdfConfig c;
    const std::string who = n.describe();
    c.min_n = n.attr_int("min_gram_length", 0);
    c.max_n = n.attr_int("max_gram_length", 0);
    c.max_skip = n.attr_int("max_skip_count", -1);
    KILN_CHECK(c.min_n >= 1 && c.max_n >= c.min_n, kInvalidModel)
        << who << ": expected 1 <= min_gram_length <= max_gram_length, got " << c.min_n << " and " << c.max_n;
    KILN_CHECK(c.max_skip >= 0, kInvalidModel) << who << ": max_skip_count must be >= 0, got " << c.max_skip;
    c.mode = n.attr_string("mode", "");
    KILN_CHECK(c.mode == "TF" || c.mode == "IDF" || c.mode == "TFIDF", kInvalidModel)
        << who << ": mode must be TF, IDF or TFIDF, got '" << c.mode << "'";
    c.pool_ints = n.attr_ints("pool_int64s");
    if (auto it = n.attrs().find("pool_strings"); it != n.attrs().end()) {
        const auto* v = std::get_if<std::vector<std::string>>(&it->second);
        KILN_CHECK(v != nullptr, kInvalidModel) << who << ": attribute pool_strings must be strings";
        c.pool_strings = *v;
    }
    KILN_CHECK(c.pool_ints.empty() != c.pool_strings.empty(), kInvalidModel)
        << who << ": exactly one of pool_int64s and pool_strings must be given (non-empty), got "
        << c.pool_ints.size() << " and " << c.pool_strings.size() << " items";
    c.strings = !c.pool_strings.empty();
    const auto pool_size = static_cast<int64_t>(c.strings ? c.pool_strings.size() : c.pool_ints.size());
    c.counts = n.attr_ints("ngram_counts");
    c.indexes = n.attr_ints("ngram_indexes");
    int64_t total = 0;
    for (size_t i = 0; i < c.counts.size(); ++i) {
        const int64_t begin = c.counts[i];
        const int64_t end = i + 1 < c.counts.size() ? c.counts[i + 1] : pool_size;
        KILN_CHECK(begin >= 0 && begin <= end && end <= pool_size, kInvalidModel)
            << who << ": ngram_counts must be non-decreasing offsets into the pool of " << pool_size
            << " items, got " << begin << " then " << end << " at size " << i + 1;
        const auto size = static_cast<int64_t>(i + 1);
        KILN_CHECK((end - begin) % size == 0, kInvalidModel)
            << who << ": the pool holds " << end - begin << " items of " << size << "-grams, not a multiple of "
            << size;
        total += (end - begin) / size;
    }
    KILN_CHECK(static_cast<int64_t>(c.indexes.size()) == total && total > 0, kInvalidModel)
        << who << ": expected one ngram_indexes entry per pool n-gram (" << total << "), got " << c.indexes.size();
    for (int64_t k : c.indexes)
        KILN_CHECK(k >= 0, kInvalidModel) << who << ": ngram_indexes must be >= 0, got " << k;
    c.out_size = *std::max_element(c.indexes.begin(), c.indexes.end()) + 1;
    c.weights = n.attr_floats("weights");
    KILN_CHECK(c.weights.empty() || (c.weights.size() == c.indexes.size() &&
                                     static_cast<int64_t>(c.weights.size()) >= c.out_size),
               kInvalidModel)
        << who << ": weights must have one entry per ngram_indexes entry (" << c.indexes.size()
        << ") covering every output column (" << c.out_size << "), got " << c.weights.size();
    return c;
}

// Counts pool n-grams (element type K) in `rows` rows of `cols` items of `x` into freq[rows][out].
template <typename K>
void count_ngrams(const TfIdfConfig& c, const std::vector<K>& pool, const std::vector<K>& x, int64_t rows,
                  int64_t cols, std::vector<int64_t>& freq) {
    std::map<std::vector<K>, int64_t> column;  // pool n-gram -> output column
    int64_t id = 0;
    for (size_t i = 0; i < c.counts.size(); ++i) {
        const auto size = static_cast<int64_t>(i + 1);
        const int64_t end = i + 1 < c.counts.size() ? c.counts[i + 1] : static_cast<int64_t>(pool.size());
        for (int64_t b = c.counts[i]; b + size <= end; b += size, ++id) {
            if (size < c.min_n || size > c.max_n) continue;
            column[std::vector<K>(pool.begin() + b, pool.begin() + b + size)] = c.indexes[static_cast<size_t>(id)];
        }
    }
    std::vector<K> gram;
    for (int64_t r = 0; r < rows; ++r) {
        const K* row = x.data() + r * cols;
        int64_t* f = freq.data() + r * c.out_size;
        for (int64_t size = c.min_n; size <= c.max_n && size <= cols; ++size) {
            const int64_t max_d = size == 1 ? 1 : c.max_skip + 1;
            for (int64_t d = 1; d <= max_d && (size - 1) * d < cols; ++d) {  // the window fits
                for (int64_t s = 0; s + (size - 1) * d < cols; ++s) {
                    gram.clear();
                    for (int64_t k = 0; k < size; ++k) gram.push_back(row[s + k * d]);
                    auto it = column.find(gram);
                    if (it != column.end()) ++f[it->second];
                }
            }
        }
    }
}

OpDef tfidf_vectorizer_op() {
    OpDef d;
    d.name = "TfIdfVectorizer";
    d.onnx_versions = {9};
    d.attrs = {{"max_gram_length", AttrKind::kInt, std::nullopt, true},
               {"min_gram_length", AttrKind::kInt, std::nullopt, true},
               {"max_skip_count", AttrKind::kInt, std::nullopt, true},
               {"mode", AttrKind::kString, std::nullopt, true},
               {"ngram_counts", AttrKind::kInts, std::nullopt, true},
               {"ngram_indexes", AttrKind::kInts, std::nullopt, true},
               {"pool_int64s", AttrKind::kInts, std::nullopt},
               {"pool_strings", AttrKind::kStrings, std::nullopt},
               {"weights", AttrKind::kFloats, std::nullopt}};
    d.infer = [](const ir::Node& n) {
        const TfIdfConfig c = parse_config(n);
        const ir::TensorType& x = input_type(n, 0, "X");
        check_dtype(n, "X", x.dtype, {DType::kInt32, DType::kInt64, DType::kString});
        KILN_CHECK(x.rank() <= 2, kInvalidModel)
            << n.describe() << ": input X must have shape [C] or [N, C], got " << dims_str(x.shape);
        std::vector<ir::Dim> shape;
        if (x.rank() == 2) shape.push_back(x.shape[0]);
        shape.emplace_back(c.out_size);
        return std::vector<ir::TensorType>{{DType::kFloat32, shape}};
    };
    d.host = [](const HostArgs& a) {
        const TfIdfConfig c = parse_config(a.node);
        const Tensor& x = a.tensor(0);
        const std::string who = a.node.describe();
        const bool str = x.dtype() == DType::kString;
        KILN_CHECK(str || x.dtype() == DType::kInt32 || x.dtype() == DType::kInt64, kInvalidArgument)
            << who << ": input X must be int32, int64 or string, got " << dtype_name(x.dtype());
        KILN_CHECK(str == c.strings, kInvalidArgument)
            << who << ": input X is " << dtype_name(x.dtype()) << " but the pool is "
            << (c.strings ? "pool_strings" : "pool_int64s");
        const Shape& xs = x.shape();
        KILN_CHECK(xs.size() <= 2, kInvalidArgument)
            << who << ": input X must have shape [C] or [N, C], got " << shape_str(xs);
        KILN_CHECK(xs.size() != 2 || xs[0] > 0, kInvalidArgument)
            << who << ": input X of shape [N, C] needs N > 0, got " << shape_str(xs);
        const int64_t rows = xs.size() == 2 ? xs[0] : 1;
        const int64_t cols = xs.empty() ? 1 : xs.back();
        std::vector<int64_t> freq(static_cast<size_t>(rows * c.out_size), 0);
        if (str) {
            std::vector<std::string> v(x.data_as<std::string>(), x.data_as<std::string>() + x.numel());
            count_ngrams(c, c.pool_strings, v, rows, cols, freq);
        } else {
            std::vector<int64_t> v(static_cast<size_t>(x.numel()));
            for (int64_t i = 0; i < x.numel(); ++i) v[static_cast<size_t>(i)] = x.get_i64(i);
            count_ngrams(c, c.pool_ints, v, rows, cols, freq);
        }
        Tensor y(DType::kFloat32, xs.size() == 2 ? Shape{rows, c.out_size} : Shape{c.out_size});
        float* out = y.data_as<float>();
        const bool w = !c.weights.empty();
        for (size_t i = 0; i < freq.size(); ++i) {
            const auto col = static_cast<size_t>(static_cast<int64_t>(i) % c.out_size);
            const auto f = static_cast<double>(freq[i]);
            double v = f;
            if (c.mode == "IDF") v = freq[i] > 0 ? (w ? c.weights[col] : 1.0) : 0.0;
            if (c.mode == "TFIDF") v = w ? f * c.weights[col] : f;
            out[i] = static_cast<float>(v);
        }
        return std::vector<Datum>{std::move(y)};
    };
    return d;
}

}  // namespace

void register_tfidf_vectorizer_ops(OpRegistry& r) { r.add(tfidf_vectorizer_op()); }

}  // namespace kiln::op
