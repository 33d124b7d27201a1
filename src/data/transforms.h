// Built-in map stages (Pipeline::map): each function returns a MapFn acting on one field of a
// record. Image stages expect f32 [C,H,W] (what the image sources produce); each checks its
// field's dtype and rank and throws a kiln::Error naming the field otherwise.
#pragma once

#include <string>
#include <vector>

#include "data/pipeline.h"

namespace kiln::data {

/// (x - mean[c]) / std[c] per channel c of a [C,...] field; one value applies to every channel.
MapFn normalize(std::vector<float> mean, std::vector<float> std, std::string field = "image");
/// Pads the [C,H,W] field by `padding` zeros on each side of H and W, then crops a random h x w
/// window (the CIFAR augmentation).
MapFn random_crop(int64_t h, int64_t w, int64_t padding = 0, std::string field = "image");
/// Mirrors the [..., W] field along its last axis with probability p.
MapFn random_flip_horizontal(double p = 0.5, std::string field = "image");
/// Converts the field to `dtype` (values converted as by a C cast; f64 -> f32, i32 -> i64 labels).
MapFn cast(DType dtype, std::string field);
/// Converts the field to f32 and multiplies by `factor` (uint8 pixels: scale(1/255.)).
MapFn scale(float factor, std::string field = "image");

}  // namespace kiln::data
