// Kiln public C++ API (umbrella header).
//
//   kiln::SessionOptions opts;
//   auto session = kiln::Session::load("model.onnx", opts);
//   std::vector<kiln::Tensor> outs = session->run({{"input", x}});
#pragma once

#include "kiln/ops.h"
#include "kiln/frames.h"
#include "kiln/session.h"
