// `kiln run MODEL` for a model holding collective graph ops (ai.kiln.distributed; docs/
// distributed.md, "Collectives as graph ops"): under `mpiexec -n N` every process runs the whole
// model as one rank and the collective nodes exchange data over MPI; outside mpirun the model
// runs as a job of one rank (each collective the identity).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/session.h"

namespace kiln::cli {

struct CollectiveRunArgs {
    std::string model;
    std::string inputs_npz;           // "{rank}" in a path becomes the process's rank
    std::vector<std::string> inputs;  // NAME=FILE.npy
    std::string output_dir;           // "{rank}": one directory per rank; else rank 0 writes
    SessionOptions session;           // dims, threads, -O, kernels, tuning log
    int repeat = 10;
    uint64_t seed = 0;
};

/// Whether the ONNX file names the ai.kiln.distributed domain (a byte search, no import).
bool mentions_collective_domain(const std::string& path);

/// Runs the model (collective_model.h) once to warm up and `repeat` times more; rank 0 prints
/// the outputs, the collectives and the MPI data calls per run.
int run_collective_model(const CollectiveRunArgs& args);

}  // namespace kiln::cli
