// .npz and .npy sources: the arrays are read whole (they are datasets that fit in memory, like
// the digits set) and served record by record by ArraySource.
#include <map>

#include "data/array_source.h"
#include "data/sources.h"
#include "data/zip_reader.h"
#include "support/error.h"
#include "support/npy.h"

namespace kiln::data {
namespace {

std::string renamed(const std::string& name, const SourceOptions& opts) {
    auto it = opts.rename.find(name);
    return it == opts.rename.end() ? name : it->second;
}

}  // namespace

std::shared_ptr<Source> open_npz_source(const std::string& path, const SourceOptions& opts) {
    std::map<std::string, Tensor> fields;
    for (ZipMember& m : read_zip(path)) {
        std::string key = m.name;
        if (key.size() > 4 && key.compare(key.size() - 4, 4, ".npy") == 0) key.resize(key.size() - 4);
        std::string field = renamed(key, opts);
        KILN_CHECK(!fields.count(field), kInvalidArgument)
            << "'" << path << "': two members map to the field '" << field << "' (check the rename map)";
        fields[field] = parse_npy(m.bytes, "'" + path + "' member '" + m.name + "'");
    }
    return std::make_shared<ArraySource>(path, std::move(fields));
}

std::shared_ptr<Source> open_npy_source(const std::string& path, const SourceOptions& opts) {
    std::map<std::string, Tensor> fields;
    fields[renamed("input", opts)] = read_npy(path);
    return std::make_shared<ArraySource>(path, std::move(fields));
}

}  // namespace kiln::data
