// Batch-dim binding and byte counts for the training commands (train_setup.h).
#include "train_setup.h"

#include <cctype>

#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln::cli {

std::string bind_batch_dim(const std::vector<TensorInfo>& model_inputs, int64_t batch_size,
                           std::map<std::string, int64_t>& dims) {
    KILN_CHECK(batch_size > 0, kInvalidArgument) << "--batch-size must be positive, got " << batch_size;
    KILN_CHECK(!model_inputs.empty(), kInvalidArgument) << "the model has no inputs: nothing to feed a batch to";
    const TensorInfo& first = model_inputs.front();
    KILN_CHECK(!first.shape.empty(), kInvalidArgument)
        << "model input '" << first.name << "' is a scalar: it has no batch dimension to bind --batch-size to";
    std::string symbol = first.symbols.empty() ? "" : first.symbols[0];
    if (symbol.empty() && first.shape[0] >= 0) {
        KILN_CHECK(first.shape[0] == batch_size, kInvalidArgument)
            << "--batch-size " << batch_size << " does not match model input '" << first.name
            << "': its batch dimension is fixed at " << first.shape[0] << " (shape " << shape_str(first.shape)
            << "); use --batch-size " << first.shape[0] << " or give the model a symbolic batch dimension";
        return "";
    }
    KILN_CHECK(!symbol.empty(), kInvalidArgument)
        << "model input '" << first.name << "' has an unnamed dynamic batch dimension; name it (a dim_param) so "
        << "--batch-size can bind it";
    auto it = dims.find(symbol);
    KILN_CHECK(it == dims.end() || it->second == batch_size, kInvalidArgument)
        << "--dim " << symbol << "=" << it->second << " disagrees with --batch-size " << batch_size
        << " (the batch dimension of input '" << first.name << "')";
    dims[symbol] = batch_size;
    return symbol;
}

size_t parse_bytes(const std::string& text, const std::string& option) {
    size_t pos = 0;
    unsigned long long value = 0;
    bool ok = !text.empty() && std::isdigit(static_cast<unsigned char>(text[0]));
    if (ok) {
        try {
            value = std::stoull(text, &pos);
        } catch (const std::exception&) {
            ok = false;
        }
    }
    std::string suffix = ok ? text.substr(pos) : "";
    size_t scale = suffix.empty() || suffix == "B" ? 1
                   : suffix == "K" || suffix == "KiB" ? size_t{1} << 10
                   : suffix == "M" || suffix == "MiB" ? size_t{1} << 20
                   : suffix == "G" || suffix == "GiB" ? size_t{1} << 30
                                                      : 0;
    KILN_CHECK(ok && scale != 0, kInvalidArgument)
        << option << ": expected a byte count such as 1048576, 512K, 64M or 2G, got '" << text << "'";
    return static_cast<size_t>(value) * scale;
}

}  // namespace kiln::cli
