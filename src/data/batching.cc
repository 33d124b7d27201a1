#include "data/batching.h"

#include <cstring>

#include "data/sources.h"
#include "support/error.h"

namespace kiln::data {

Batch stack_examples(const std::vector<Example>& examples, const std::vector<int64_t>& records,
                     const std::string& what) {
    KILN_CHECK(!examples.empty() && examples.size() == records.size(), kInternal)
        << "bug in Kiln: stack_examples of " << examples.size() << " examples, " << records.size() << " ids";
    const Example& first = examples[0];
    int64_t n = static_cast<int64_t>(examples.size());
    for (int64_t r = 1; r < n; ++r) {
        const Example& ex = examples[r];
        for (const auto& [field, t] : first) {
            auto it = ex.find(field);
            KILN_CHECK(it != ex.end(), kInvalidArgument)
                << what << ": record " << records[r] << " has no field '" << field << "' but record "
                << records[0] << " has " << field << " " << tensor_type_str(t);
            KILN_CHECK(it->second.dtype() == t.dtype() && it->second.shape() == t.shape(), kInvalidArgument)
                << what << ": cannot stack field '" << field << "': record " << records[r] << " has "
                << tensor_type_str(it->second) << " but record " << records[0] << " has " << tensor_type_str(t)
                << " (records in a batch need the same shape; add a crop/resize map stage)";
        }
        if (ex.size() != first.size()) {
            for (const auto& [field, t] : ex) {
                KILN_CHECK(first.count(field), kInvalidArgument)
                    << what << ": record " << records[r] << " has a field '" << field << "' that record "
                    << records[0] << " lacks";
            }
        }
    }
    Batch batch;
    for (const auto& [field, t] : first) {
        Shape shape{n};
        shape.insert(shape.end(), t.shape().begin(), t.shape().end());
        Tensor out(t.dtype(), shape);
        int64_t per = t.numel();
        for (int64_t r = 0; r < n; ++r) {
            const Tensor& src = examples[r].at(field);
            if (t.dtype() == DType::kString) {
                for (int64_t k = 0; k < per; ++k)
                    out.data_as<std::string>()[r * per + k] = src.data_as<std::string>()[k];
            } else if (src.nbytes()) {
                std::memcpy(static_cast<char*>(out.data()) + r * src.nbytes(), src.data(), src.nbytes());
            }
        }
        batch.emplace(field, std::move(out));
    }
    return batch;
}

}  // namespace kiln::data
