// Image decoding for the image-directory source: PNG (libpng) and the Netpbm formats PGM/PPM,
// to f32 [C,H,W] with values in [0,1] (sample / maxval). C is the file's channel count: 1 gray,
// 2 gray+alpha, 3 RGB, 4 RGBA; palette images expand to RGB.
#pragma once

#include <string>

#include "support/tensor.h"

namespace kiln::data {

/// Decodes by content (PNG signature or a P2/P3/P5/P6 magic); `what` names the file in errors.
Tensor decode_image(const std::string& bytes, const std::string& what);
Tensor decode_png(const std::string& bytes, const std::string& what);
Tensor decode_pnm(const std::string& bytes, const std::string& what);

}  // namespace kiln::data
