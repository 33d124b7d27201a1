// The validated configuration of an ONNX RNN / GRU / LSTM node (recurrent.cc documents the
// semantics). Shared by the op's TE compute and by topi/rnn_match.cc, which hands the same
// configuration to the runtime's fused recurrent kernel (runtime/rnn_kernel.h).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::op {

enum class RnnCell { kRnn, kGru, kLstm };

/// One activation function: its canonical name (Tanh, Sigmoid, ...) and alpha / beta (the
/// function's defaults where the node gives none).
struct RnnActivation {
    std::string name;
    double alpha = 0, beta = 0;
};

struct RnnConfig {
    RnnCell cell = RnnCell::kRnn;
    int gates = 1;  // RNN 1, GRU 3 (z r h), LSTM 4 (i o f c)
    int64_t dirs = 1, hidden = 0, input = 0;
    ir::Dim seq, batch;
    bool layout1 = false;
    std::vector<bool> reverse;                     // per direction
    std::vector<std::vector<RnnActivation>> acts;  // per direction: f (g (h))
    bool has_clip = false;
    double clip = 0;
    bool input_forget = false, linear_before_reset = false;
};

/// Validates RNN / GRU / LSTM node `n` (inputs, shapes, attributes) and derives its
/// configuration; a bad input is a kiln::Error naming the node.
RnnConfig rnn_config(const ir::Node& n);

}  // namespace kiln::op
