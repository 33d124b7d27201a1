#include "run_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "distributed/collective_model.h"
#include "distributed/communicator.h"
#include "frontend/onnx/importer.h"
#include "name_value_args.h"
#include "random_inputs.h"
#include "support/npy.h"
#include "tensor_format.h"

namespace kiln::cli {
namespace {

bool in_mpi_job() {
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
        if (std::getenv(v)) return true;
    return false;
}

std::string with_rank(std::string path, int rank) {
    const std::string tag = "{rank}";
    for (size_t at = path.find(tag); at != std::string::npos; at = path.find(tag, at))
        path.replace(at, tag.size(), std::to_string(rank));
    return path;
}

/// The given inputs (paths with {rank} replaced), the rest random from --seed (alike on every
/// rank).
std::map<std::string, Tensor> collective_feeds(const CollectiveRunArgs& a, const distributed::CollectiveModel& m,
                                               int rank) {
    std::map<std::string, Tensor> feeds;
    if (!a.inputs_npz.empty())
        for (auto& [name, t] : read_npz(with_rank(a.inputs_npz, rank))) feeds[name] = t;
    for (const std::string& arg : a.inputs) {
        auto [name, path] = split_name_value(arg, "--input");
        feeds[name] = read_npy(with_rank(path, rank));
    }
    for (const auto& [name, t] : feeds)
        KILN_CHECK(std::any_of(m.inputs().begin(), m.inputs().end(), [&](const TensorInfo& i) { return i.name == name; }),
                   kInvalidArgument)
            << "'" << name << "' is not an input of the model";
    RandomInputs random(a.seed);
    for (const TensorInfo& info : m.inputs())
        if (!feeds.count(info.name)) feeds[info.name] = random.make(info.dtype, resolve_input_shape(info, a.session.dims));
    return feeds;
}

void write_rank_outputs(const std::string& dir, const std::vector<TensorInfo>& infos, const std::vector<Tensor>& outs) {
    std::filesystem::create_directories(dir);
    for (size_t i = 0; i < outs.size(); ++i) {
        const std::string path = (std::filesystem::path(dir) / (sanitize_file_name(infos[i].name) + ".npy")).string();
        write_npy(path, outs[i]);
        fmt::print("wrote {}\n", path);
    }
}

int run_ranks(const CollectiveRunArgs& a, distributed::Communicator* comm) {
    const int rank = comm ? comm->rank() : 0, size = comm ? comm->size() : 1;
    distributed::CollectiveModel model(frontend::import_onnx_file(a.model), a.session, comm);
    const std::map<std::string, Tensor> feeds = collective_feeds(a, model, rank);
    std::vector<Tensor> outs = model.run(feeds);  // warm-up
    std::vector<double> ms;
    for (int r = 0; r < a.repeat; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        outs = model.run(feeds);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    const bool own_dir = a.output_dir.find("{rank}") != std::string::npos;
    if (!a.output_dir.empty() && (own_dir || rank == 0)) write_rank_outputs(with_rank(a.output_dir, rank), model.outputs(), outs);
    if (rank != 0) return 0;
    fmt::print("collectives: {} nodes in {} waves over {} rank(s){}; {} MPI data calls per run; {} kernels\n",
               model.collective_nodes(), model.waves(), size, comm ? "" : " (no mpirun: each is the identity)",
               model.last_run_data_calls(), model.kernels());
    for (size_t i = 0; i < outs.size(); ++i) {
        fmt::print("{}: {} {}\n", model.outputs()[i].name, dtype_name(outs[i].dtype()), shape_str(outs[i].shape()));
        fmt::print("  values: {}\n", format_leading_values(outs[i], 10));
    }
    if (!ms.empty()) {
        std::sort(ms.begin(), ms.end());
        fmt::print("median {:.2f} ms ({} runs)\n", ms[ms.size() / 2], ms.size());
    }
    return 0;
}

}  // namespace

bool mentions_collective_domain(const std::string& path) {
    // Read in blocks searched with memmem, each after the previous block's last bytes so a name
    // across a boundary is found (reading the file through an istreambuf_iterator cost BERT-base's
    // 340 MB 0.3 s per run).
    static constexpr char kName[] = "ai.kiln.distributed";
    constexpr size_t kLen = sizeof(kName) - 1, kBlock = size_t{1} << 22;
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    std::vector<char> buf(kBlock + kLen);
    size_t carry = 0;
    bool found = false;
    for (size_t n; !found && (n = std::fread(buf.data() + carry, 1, kBlock, f)) > 0;) {
        const size_t size = carry + n;
        found = ::memmem(buf.data(), size, kName, kLen) != nullptr;
        carry = std::min(kLen - 1, size);
        std::memmove(buf.data(), buf.data() + size - carry, carry);
    }
    std::fclose(f);
    return found;
}

int run_collective_model(const CollectiveRunArgs& a) {
    distributed::Communicator* comm = in_mpi_job() ? &distributed::Communicator::get() : nullptr;
    try {
        const int rc = run_ranks(a, comm);
        if (comm) comm->finalize();
        return rc;
    } catch (const std::exception& e) {
        // A rank that fails alone would leave its peers waiting in the next collective.
        if (comm && comm->size() > 1) comm->abort(1, fmt::format("rank {}: {}", comm->rank(), e.what()));
        throw;
    }
}

}  // namespace kiln::cli
