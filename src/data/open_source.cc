// open_source: the source for a path, chosen by its extension (or a directory); subset: a
// contiguous range of another source's records.
#include <filesystem>
#include <sstream>

#include "data/sources.h"
#include "support/error.h"

namespace kiln::data {
namespace {

class SubsetSource : public Source {
public:
    SubsetSource(std::shared_ptr<Source> src, int64_t begin, int64_t end)
        : src_(std::move(src)), begin_(begin), end_(end) {}
    int64_t size() const override { return end_ - begin_; }
    Example get(int64_t i) const override {
        KILN_CHECK(i >= 0 && i < size(), kInvalidArgument)
            << "subset [" << begin_ << ", " << end_ << "): record " << i << " is out of range [0, " << size() << ")";
        return src_->get(begin_ + i);
    }
    std::string describe() const override {
        std::ostringstream os;
        os << "records [" << begin_ << ", " << end_ << ") of " << src_->describe();
        return os.str();
    }

private:
    std::shared_ptr<Source> src_;
    int64_t begin_, end_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
    if (s.size() < suffix.size()) return false;
    for (size_t i = 0; i < suffix.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(s[s.size() - suffix.size() + i])) != suffix[i]) return false;
    return true;
}

}  // namespace

std::shared_ptr<Source> open_source(const std::string& path, const SourceOptions& opts) {
    namespace fs = std::filesystem;
    std::error_code ec;
    KILN_CHECK(fs::exists(path, ec), kIOError) << "data source '" << path << "' does not exist";
    if (fs::is_directory(path, ec)) return open_image_dir_source(path, opts);
    if (ends_with(path, ".npz")) return open_npz_source(path, opts);
    if (ends_with(path, ".npy")) return open_npy_source(path, opts);
    if (ends_with(path, ".csv")) return open_csv_source(path, opts);
    KILN_THROW(kInvalidArgument) << "data source '" << path
                                 << "': unknown kind (expected .npz, .npy, .csv or an image directory)";
}

std::shared_ptr<Source> subset(std::shared_ptr<Source> src, int64_t begin, int64_t end) {
    KILN_CHECK(src != nullptr, kInvalidArgument) << "subset of a null source";
    KILN_CHECK(0 <= begin && begin <= end && end <= src->size(), kInvalidArgument)
        << "subset [" << begin << ", " << end << ") of " << src->describe() << ": expected 0 <= begin <= end <= "
        << src->size();
    return std::make_shared<SubsetSource>(std::move(src), begin, end);
}

}  // namespace kiln::data
