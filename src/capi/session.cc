// kiln_session: kiln::Session behind a C handle; run() maps named borrowed inputs to outputs
// the caller owns.
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "capi/handles.h"
#include "capi/status.h"

using kiln::capi::guard;
using kiln::capi::require;

namespace {

std::vector<kiln_session::Info> infos_of(const std::vector<kiln::TensorInfo>& values) {
    std::vector<kiln_session::Info> out(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
        const kiln::TensorInfo& v = values[i];
        kiln_session::Info& info = out[i];
        for (const std::string& s : v.symbols) info.symbols.push_back(s.c_str());
        info.c.name = v.name.c_str();
        info.c.kind = static_cast<kiln_value_kind>(v.kind);  // same order as kiln::ValueKind
        info.c.dtype = kiln::capi::dtype_to_c(v.dtype);
        info.c.rank = v.shape.size();
        info.c.dims = v.shape.empty() ? nullptr : v.shape.data();
        info.c.symbols = info.symbols.empty() ? nullptr : info.symbols.data();
    }
    return out;
}

kiln_status value_info(const kiln_session* session, size_t index, kiln_value_info* out, bool input) {
    return guard([&] {
        require(session, "session");
        require(out, "out");
        const auto& infos = input ? session->inputs : session->outputs;
        KILN_CHECK(index < infos.size(), kInvalidArgument)
            << (input ? "input" : "output") << " index " << index << ": the model has " << infos.size() << " "
            << (input ? "inputs" : "outputs");
        *out = infos[index].c;
    });
}

/// True when [p, p + n) overlaps [q, q + m).
bool overlaps(const void* p, size_t n, const void* q, size_t m) {
    auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
    return n && m && a < b + m && b < a + n;
}

}  // namespace

extern "C" {

kiln_status kiln_session_create(const char* path, const kiln_session_options* options, kiln_session** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(path, "path");
        require(out, "out");
        auto s = std::make_unique<kiln_session>();
        s->session = kiln::Session::load(path, options ? options->options : kiln::SessionOptions{});
        s->inputs = infos_of(s->session->inputs());
        s->outputs = infos_of(s->session->outputs());
        *out = s.release();
    });
}

void kiln_session_free(kiln_session* session) { delete session; }

kiln_status kiln_session_wait_for_optimized_kernels(kiln_session* session) {
    return guard([&] {
        require(session, "session");
        session->session->wait_for_optimized_kernels();
    });
}

kiln_status kiln_session_input_count(const kiln_session* session, size_t* out) {
    return guard([&] {
        require(session, "session");
        require(out, "out");
        *out = session->inputs.size();
    });
}

kiln_status kiln_session_output_count(const kiln_session* session, size_t* out) {
    return guard([&] {
        require(session, "session");
        require(out, "out");
        *out = session->outputs.size();
    });
}

kiln_status kiln_session_input_info(const kiln_session* session, size_t index, kiln_value_info* out) {
    return value_info(session, index, out, true);
}

kiln_status kiln_session_output_info(const kiln_session* session, size_t index, kiln_value_info* out) {
    return value_info(session, index, out, false);
}

kiln_status kiln_session_run(kiln_session* session, const kiln_run_options* run_options,
                             const char* const* input_names, const kiln_tensor* const* inputs, size_t input_count,
                             kiln_tensor** outputs, size_t output_count) {
    if (outputs)
        for (size_t i = 0; i < output_count; ++i) outputs[i] = nullptr;
    return guard([&] {
        require(session, "session");
        if (input_count > 0) {
            require(input_names, "input_names (input_count > 0)");
            require(inputs, "inputs (input_count > 0)");
        }
        if (output_count > 0) require(outputs, "outputs (output_count > 0)");
        KILN_CHECK(output_count == session->outputs.size(), kInvalidArgument)
            << "output_count: the model has " << session->outputs.size() << " outputs, got " << output_count;
        std::map<std::string, kiln::Tensor> feed;
        for (size_t i = 0; i < input_count; ++i) {
            KILN_CHECK(input_names[i], kInvalidArgument) << "input_names[" << i << "] is NULL";
            KILN_CHECK(inputs[i], kInvalidArgument) << "inputs[" << i << "] (input '" << input_names[i] << "') is NULL";
            KILN_CHECK(feed.emplace(input_names[i], inputs[i]->tensor).second, kInvalidArgument)
                << "input '" << input_names[i] << "' is given twice";
        }
        kiln::RunOptions ropts;
        if (run_options) ropts.terminate = &run_options->terminate;
        std::vector<kiln::Tensor> results = session->session->run(feed, ropts);
        KILN_ICHECK(results.size() == output_count) << "run returned " << results.size() << " outputs";
        std::vector<std::unique_ptr<kiln_tensor>> owned;
        for (kiln::Tensor& r : results) {
            // An output may share the memory of a borrowed input (an Identity graph): copy it, so
            // every output the caller gets is the library's and outlives the inputs.
            bool aliases = false;
            if (r.dtype() != kiln::DType::kString)
                for (const auto& [name, t] : feed) aliases |= overlaps(r.data(), r.nbytes(), t.data(), t.nbytes());
            auto t = std::make_unique<kiln_tensor>();
            t->tensor = aliases ? r.clone() : std::move(r);
            owned.push_back(std::move(t));
        }
        for (size_t i = 0; i < output_count; ++i) outputs[i] = owned[i].release();
    });
}

}  // extern "C"
