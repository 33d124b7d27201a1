// Reading and checking calibration inputs (calibration_data.h, kiln::read_calibration_data).
#include "compiler/quantize/calibration_data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "support/error.h"
#include "support/npy.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using frontend::OnnxGraphView;

std::string shape_text(const std::vector<int64_t>& s, const std::string& lead = "") {
    std::ostringstream os;
    os << "[" << lead;
    for (size_t i = 0; i < s.size(); ++i) {
        if (i || !lead.empty()) os << ",";
        if (s[i] < 0) os << "?";
        else os << s[i];
    }
    return os.str() + "]";
}

/// The declared shape of `input` with the symbolic dims bound in `dims` filled in (-1: free);
/// nullopt: the model declares none.
std::optional<std::vector<int64_t>> expected_shape(const OnnxGraphView& g, const std::string& input,
                                                   const std::map<std::string, int64_t>& dims) {
    auto it = g.input_shapes.find(input);
    if (it == g.input_shapes.end()) return std::nullopt;
    std::vector<int64_t> shape = it->second;
    auto names = g.input_dim_names.find(input);
    for (size_t i = 0; names != g.input_dim_names.end() && i < shape.size(); ++i)
        if (auto d = dims.find(names->second[i]); d != dims.end()) shape[i] = d->second;
    return shape;
}

bool fits(const std::vector<int64_t>& e, const int64_t* got, size_t rank) {
    if (e.size() != rank) return false;
    for (size_t i = 0; i < rank; ++i)
        if (e[i] >= 0 && e[i] != got[i]) return false;
    return true;
}

/// How many batches the array `t` of `input` holds and whether it is to be split along dim 0.
int64_t batch_count(const OnnxGraphView& g, const std::string& input, const Tensor& t,
                    const std::map<std::string, int64_t>& dims, bool& split, bool& keep_dim) {
    auto e = expected_shape(g, input, dims);
    const Shape& s = t.shape();
    split = keep_dim = false;
    if (!e || fits(*e, s.data(), s.size())) return 1;
    if (s.size() == e->size() + 1 && fits(*e, s.data() + 1, e->size())) return split = true, s[0];
    if (!e->empty() && (*e)[0] == 1 && s.size() == e->size() && fits({e->begin() + 1, e->end()}, s.data() + 1, s.size() - 1))
        return split = keep_dim = true, s[0];
    KILN_THROW(kInvalidArgument) << "calibration input '" << input << "': expected shape " << shape_text(*e)
                                 << " (one batch) or " << shape_text(*e, "K") << " (K batches), got "
                                 << shape_text(std::vector<int64_t>(s.begin(), s.end()));
}

/// Batch k of a stack (dim 0), keeping a leading 1 when `keep_dim`.
Tensor slice(const Tensor& t, int64_t k, bool keep_dim) {
    Shape inner(t.shape().begin() + 1, t.shape().end());
    Tensor out(t.dtype(), inner);
    std::memcpy(out.data(), static_cast<const char*>(t.data()) + k * out.nbytes(), out.nbytes());
    if (keep_dim) inner.insert(inner.begin(), 1);
    return out.reshaped(inner);
}

/// The batches in one file's arrays.
void append_batches(const std::map<std::string, Tensor>& arrays, const OnnxGraphView& g, const std::string& file,
                    const std::map<std::string, int64_t>& dims, std::vector<CalibrationBatch>& out) {
    for (const auto& [name, t] : arrays) {
        (void)t;
        KILN_CHECK(std::count(g.inputs.begin(), g.inputs.end(), name), kInvalidArgument)
            << "calibration data '" << file << "': array '" << name << "' is no input of the model";
    }
    int64_t count = -1;
    std::map<std::string, std::pair<bool, bool>> how;
    for (const auto& input : g.inputs) {
        auto it = arrays.find(input);
        KILN_CHECK(it != arrays.end(), kInvalidArgument)
            << "calibration data '" << file << "': no array for the model input '" << input << "'";
        bool split, keep;
        const int64_t k = batch_count(g, input, it->second, dims, split, keep);
        KILN_CHECK(count < 0 || k == count, kInvalidArgument)
            << "calibration data '" << file << "': input '" << input << "' holds " << k << " batches, another " << count;
        count = k;
        how[input] = {split, keep};
    }
    for (int64_t k = 0; k < count; ++k) {
        CalibrationBatch b;
        for (const auto& input : g.inputs) {
            const Tensor& t = arrays.at(input);
            b[input] = how[input].first ? slice(t, k, how[input].second) : t;
        }
        out.push_back(std::move(b));
    }
}

std::map<std::string, Tensor> read_arrays(const fs::path& file, const OnnxGraphView& g) {
    if (file.extension() == ".npz") return read_npz(file.string());
    KILN_CHECK(g.inputs.size() == 1, kInvalidArgument)
        << "calibration data '" << file.string() << "': a .npy file names no input and the model has "
        << g.inputs.size() << " inputs; use .npz files with arrays named by input";
    return {{g.inputs[0], read_npy(file.string())}};
}

}  // namespace

std::vector<CalibrationBatch> read_calibration_data(const std::string& path, const std::string& model,
                                                    const std::map<std::string, int64_t>& dims) {
    OnnxGraphView g = frontend::read_onnx_graph_view(model);
    std::vector<fs::path> files;
    KILN_CHECK(fs::exists(path), kIOError) << "calibration data '" << path << "': no such file or directory";
    if (fs::is_directory(path)) {
        for (const auto& e : fs::directory_iterator(path))
            if (e.path().extension() == ".npz" || e.path().extension() == ".npy") files.push_back(e.path());
        std::sort(files.begin(), files.end());
        KILN_CHECK(!files.empty(), kInvalidArgument) << "calibration data '" << path << "': no .npz or .npy files";
    } else {
        files.push_back(path);
    }
    std::vector<CalibrationBatch> out;
    for (const auto& f : files) append_batches(read_arrays(f, g), g, f.string(), dims, out);
    compiler::check_calibration_batches(out, g, dims);
    return out;
}

namespace compiler {

void check_calibration_batches(const std::vector<CalibrationBatch>& batches, const OnnxGraphView& g,
                               const std::map<std::string, int64_t>& dims) {
    KILN_CHECK(!batches.empty(), kInvalidArgument) << "no calibration data: at least one batch of inputs is needed";
    for (size_t k = 0; k < batches.size(); ++k) {
        const CalibrationBatch& b = batches[k];
        for (const auto& input : g.inputs) {
            auto it = b.find(input);
            KILN_CHECK(it != b.end(), kInvalidArgument) << "calibration batch " << k << ": no value for the input '" << input << "'";
            auto dt = g.input_dtypes.find(input);
            KILN_CHECK(dt == g.input_dtypes.end() || dt->second == it->second.dtype(), kInvalidArgument)
                << "calibration batch " << k << ", input '" << input << "': expected dtype " << dtype_name(dt->second)
                << ", got " << dtype_name(it->second.dtype());
            auto e = expected_shape(g, input, dims);
            const Shape& s = it->second.shape();
            KILN_CHECK(!e || fits(*e, s.data(), s.size()), kInvalidArgument)
                << "calibration batch " << k << ", input '" << input << "': expected shape " << shape_text(*e)
                << ", got " << shape_text(std::vector<int64_t>(s.begin(), s.end()));
        }
        for (const auto& [name, t] : b) {
            (void)t;
            KILN_CHECK(std::count(g.inputs.begin(), g.inputs.end(), name), kInvalidArgument)
                << "calibration batch " << k << ": '" << name << "' is no input of the model";
        }
    }
}

}  // namespace compiler

}  // namespace kiln
