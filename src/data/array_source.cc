// ArraySource: record i of each field is the slice [i] of its array, copied out so that map
// stages may change it in place without touching the source.
#include "data/array_source.h"

#include <cstring>
#include <sstream>

#include "data/sources.h"
#include "support/error.h"

namespace kiln::data {

std::string tensor_type_str(const Tensor& t) {
    return std::string(dtype_name(t.dtype())) + shape_str(t.shape());
}

ArraySource::ArraySource(std::string name, std::map<std::string, Tensor> fields)
    : name_(std::move(name)), fields_(std::move(fields)) {
    KILN_CHECK(!fields_.empty(), kInvalidArgument) << "'" << name_ << "' holds no arrays";
    const std::string* first = nullptr;
    for (const auto& [field, t] : fields_) {
        KILN_CHECK(!t.shape().empty(), kInvalidArgument)
            << "'" << name_ << "' array '" << field << "' is a scalar (" << tensor_type_str(t)
            << "); every array needs a leading record axis";
        if (!first) {
            first = &field;
            size_ = t.shape()[0];
        }
        KILN_CHECK(t.shape()[0] == size_, kInvalidArgument)
            << "'" << name_ << "': arrays disagree on the number of records: '" << *first << "' has "
            << size_ << ", '" << field << "' has " << t.shape()[0] << " (" << tensor_type_str(t) << ")";
    }
}

Example ArraySource::get(int64_t i) const {
    KILN_CHECK(i >= 0 && i < size_, kInvalidArgument)
        << "'" << name_ << "': record " << i << " is out of range [0, " << size_ << ")";
    Example ex;
    for (const auto& [field, t] : fields_) {
        Shape rest(t.shape().begin() + 1, t.shape().end());
        Tensor r(t.dtype(), rest);
        int64_t n = r.numel();
        if (t.dtype() == DType::kString) {
            for (int64_t k = 0; k < n; ++k)
                r.data_as<std::string>()[k] = t.data_as<std::string>()[i * n + k];
        } else if (r.nbytes()) {
            std::memcpy(r.data(), static_cast<const char*>(t.data()) + i * r.nbytes(), r.nbytes());
        }
        ex.emplace(field, std::move(r));
    }
    return ex;
}

std::string ArraySource::describe() const {
    std::ostringstream os;
    os << name_ << " (" << size_ << " records: ";
    bool first = true;
    for (const auto& [field, t] : fields_) {
        Shape rest(t.shape().begin() + 1, t.shape().end());
        os << (first ? "" : ", ") << field << " " << dtype_name(t.dtype()) << shape_str(rest);
        first = false;
    }
    os << ")";
    return os.str();
}

}  // namespace kiln::data
