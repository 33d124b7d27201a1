// A source over in-memory arrays: each field is one tensor whose leading axis indexes records
// (what an .npz, an .npy or a parsed CSV becomes).
#pragma once

#include <map>
#include <string>

#include "data/pipeline.h"

namespace kiln::data {

class ArraySource : public Source {
public:
    /// `fields` must be non-empty, each of rank >= 1, all with the same leading dimension;
    /// `name` is the file they came from (for describe() and errors).
    ArraySource(std::string name, std::map<std::string, Tensor> fields);

    int64_t size() const override { return size_; }
    Example get(int64_t i) const override;
    std::string describe() const override;

private:
    std::string name_;
    std::map<std::string, Tensor> fields_;
    int64_t size_ = 0;
};

}  // namespace kiln::data
