// The concrete sources behind open_source (pipeline.h), one file each. Internal to src/data.
#pragma once

#include <memory>
#include <string>

#include "data/pipeline.h"

namespace kiln::data {

/// `.npz`: one field per member (renamed by opts.rename), one record per leading index.
std::shared_ptr<Source> open_npz_source(const std::string& path, const SourceOptions& opts);
/// `.npy`: one field "input" (renamed by opts.rename), one record per leading index.
std::shared_ptr<Source> open_npy_source(const std::string& path, const SourceOptions& opts);
/// `.csv`: header row, numeric fields; features f32[F] and a label (i64 when every value is integral).
std::shared_ptr<Source> open_csv_source(const std::string& path, const SourceOptions& opts);
/// A directory with labels.txt / labels.csv ("file,label" lines); images decoded on get().
std::shared_ptr<Source> open_image_dir_source(const std::string& dir, const SourceOptions& opts);

/// "f32[1,8,8]".
std::string tensor_type_str(const Tensor& t);

}  // namespace kiln::data
