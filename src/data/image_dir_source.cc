// Image-directory source: `labels.txt` or `labels.csv` lists "file,label" lines (file relative
// to the directory; an optional header line whose label is not a number is skipped; blank lines
// and '#' comments are ignored). Images are read and decoded in get(), which the pipeline calls
// on its worker threads, so decoding runs in parallel with training.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "data/image_decode.h"
#include "data/sources.h"
#include "support/error.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parse_int(const std::string& s, int64_t& v) {
    if (s.empty()) return false;
    size_t used = 0;
    try {
        v = std::stoll(s, &used);
    } catch (...) {
        return false;
    }
    return used == s.size();
}

class ImageDirSource : public Source {
public:
    ImageDirSource(std::string dir, const SourceOptions& opts) : dir_(std::move(dir)), opts_(opts) {
        fs::path list;
        for (const char* name : {"labels.txt", "labels.csv"})
            if (fs::exists(fs::path(dir_) / name)) list = fs::path(dir_) / name;
        KILN_CHECK(!list.empty(), kInvalidArgument)
            << "'" << dir_ << "' is a directory without labels.txt or labels.csv (\"file,label\" lines)";
        list_ = list.string();
        std::ifstream f(list);
        KILN_CHECK(f.good(), kIOError) << "cannot open '" << list_ << "' for reading";
        std::string line;
        int64_t lineno = 0;
        bool first = true;
        while (std::getline(f, line)) {
            ++lineno;
            std::string t = trim(line);
            if (t.empty() || t[0] == '#') continue;
            size_t sep = t.find(',');
            if (sep == std::string::npos) sep = t.find_first_of(" \t");
            KILN_CHECK(sep != std::string::npos, kInvalidArgument)
                << list_ << ":" << lineno << ": expected \"file,label\", got '" << t << "'";
            std::string file = trim(t.substr(0, sep)), label = trim(t.substr(sep + 1));
            int64_t v = 0;
            bool ok = parse_int(label, v);
            if (!ok && first) {  // a header line ("file,label")
                first = false;
                continue;
            }
            first = false;
            KILN_CHECK(ok, kInvalidArgument)
                << list_ << ":" << lineno << ": label '" << label << "' of '" << file << "' is not an integer";
            fs::path p = fs::path(dir_) / file;
            KILN_CHECK(fs::is_regular_file(p), kIOError)
                << list_ << ":" << lineno << ": image '" << p.string() << "' does not exist";
            files_.push_back(p.string());
            labels_.push_back(v);
        }
        KILN_CHECK(!files_.empty(), kInvalidArgument) << "'" << list_ << "' lists no images";
        first_image_ = decode(0);
    }

    int64_t size() const override { return static_cast<int64_t>(files_.size()); }

    Example get(int64_t i) const override {
        KILN_CHECK(i >= 0 && i < size(), kInvalidArgument)
            << "'" << dir_ << "': record " << i << " is out of range [0, " << size() << ")";
        Example ex;
        ex[opts_.image_field] = decode(i);
        Tensor y(DType::kInt64, {});
        y.data_as<int64_t>()[0] = labels_[i];
        ex[opts_.label_field] = std::move(y);
        return ex;
    }

    std::string describe() const override {
        std::ostringstream os;
        os << dir_ << " (" << size() << " records: " << opts_.image_field << " "
           << tensor_type_str(first_image_) << " (the first image), " << opts_.label_field << " i64[])";
        return os.str();
    }

private:
    Tensor decode(int64_t i) const {
        const std::string& path = files_[i];
        std::ifstream f(path, std::ios::binary);
        KILN_CHECK(f.good(), kIOError) << "cannot open image '" << path << "' (record " << i << ")";
        std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        KILN_CHECK(!f.bad(), kIOError) << "error reading image '" << path << "' (record " << i << ")";
        return decode_image(bytes, "image '" + path + "' (record " + std::to_string(i) + ")");
    }

    std::string dir_, list_;
    SourceOptions opts_;
    std::vector<std::string> files_;
    std::vector<int64_t> labels_;
    Tensor first_image_;
};

}  // namespace

std::shared_ptr<Source> open_image_dir_source(const std::string& dir, const SourceOptions& opts) {
    return std::make_shared<ImageDirSource>(dir, opts);
}

}  // namespace kiln::data
