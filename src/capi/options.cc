// kiln_session_options and kiln_run_options: setters over kiln::SessionOptions / RunOptions,
// each checking its value so a bad one fails here, named, rather than at load.
#include <string>
#include <vector>

#include "capi/handles.h"
#include "capi/status.h"

using kiln::capi::guard;
using kiln::capi::require;

extern "C" {

kiln_status kiln_session_options_create(kiln_session_options** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(out, "out");
        *out = new kiln_session_options();
    });
}

void kiln_session_options_free(kiln_session_options* options) { delete options; }

kiln_status kiln_session_options_set_threads(kiln_session_options* options, int32_t threads) {
    return guard([&] {
        require(options, "options");
        KILN_CHECK(threads >= 0, kInvalidArgument) << "threads: expected >= 0 (0 = all cores), got " << threads;
        options->options.threads = threads;
    });
}

kiln_status kiln_session_options_set_inter_op_threads(kiln_session_options* options, int32_t threads) {
    return guard([&] {
        require(options, "options");
        KILN_CHECK(threads >= 0, kInvalidArgument) << "inter_op_threads: expected >= 0, got " << threads;
        options->options.inter_op_threads = threads;
    });
}

kiln_status kiln_session_options_set_executor(kiln_session_options* options, kiln_executor executor) {
    return guard([&] {
        require(options, "options");
        switch (executor) {
            case KILN_EXECUTOR_AUTO: options->options.executor = kiln::ExecutorKind::kAuto; return;
            case KILN_EXECUTOR_SEQUENTIAL: options->options.executor = kiln::ExecutorKind::kSequential; return;
            case KILN_EXECUTOR_DATAFLOW: options->options.executor = kiln::ExecutorKind::kDataflow; return;
        }
        KILN_THROW(kInvalidArgument) << "executor: expected KILN_EXECUTOR_AUTO, _SEQUENTIAL or _DATAFLOW, got "
                                     << static_cast<int>(executor);
    });
}

kiln_status kiln_session_options_set_opt_level(kiln_session_options* options, int32_t level) {
    return guard([&] {
        require(options, "options");
        KILN_CHECK(level >= 0 && level <= 3, kInvalidArgument) << "opt_level: expected 0..3, got " << level;
        options->options.opt_level = level;
    });
}

kiln_status kiln_session_options_set_memory_limit(kiln_session_options* options, uint64_t bytes) {
    return guard([&] {
        require(options, "options");
        options->options.memory_limit = static_cast<size_t>(bytes);
    });
}

kiln_status kiln_session_options_set_dim(kiln_session_options* options, const char* name, int64_t value) {
    return guard([&] {
        require(options, "options");
        require(name, "name");
        KILN_CHECK(*name != '\0', kInvalidArgument) << "dim: the name is empty";
        KILN_CHECK(value >= 0, kInvalidArgument) << "dim '" << name << "': expected >= 0, got " << value;
        options->options.dims[name] = value;
    });
}

kiln_status kiln_session_options_set_profile_path(kiln_session_options* options, const char* path) {
    return guard([&] {
        require(options, "options");
        require(path, "path");
        options->options.profile_path = path;
    });
}

kiln_status kiln_session_options_set_kernels(kiln_session_options* options, const char* kernels) {
    return guard([&] {
        require(options, "options");
        require(kernels, "kernels");
        const std::string k = kernels;
        KILN_CHECK(k == "auto" || k == "generated" || k == "dnnl", kInvalidArgument)
            << "kernels: expected \"auto\", \"generated\" or \"dnnl\", got \"" << k << "\"";
        options->options.kernels = k;
    });
}

kiln_status kiln_session_options_set_specialize(kiln_session_options* options, const char* name,
                                               const int64_t* sizes, size_t count) {
    return guard([&] {
        require(options, "options");
        require(name, "name");
        require(sizes, "sizes");
        KILN_CHECK(*name != '\0', kInvalidArgument) << "specialize: the name is empty";
        KILN_CHECK(count >= 1, kInvalidArgument) << "specialize '" << name << "': expected at least one size";
        std::vector<int64_t> values(sizes, sizes + count);
        for (int64_t v : values)
            KILN_CHECK(v >= 0, kInvalidArgument) << "specialize '" << name << "': sizes must be >= 0, got " << v;
        options->options.specialize[name] = std::move(values);
    });
}

kiln_status kiln_session_options_set_dim_range(kiln_session_options* options, const char* name, int64_t min,
                                               int64_t max) {
    return guard([&] {
        require(options, "options");
        require(name, "name");
        KILN_CHECK(*name != '\0', kInvalidArgument) << "dim range: the name is empty";
        KILN_CHECK(min >= 0 && min <= max, kInvalidArgument)
            << "dim range of '" << name << "': expected 0 <= min <= max, got " << min << ".." << max;
        options->options.dim_ranges[name] = {min, max};
    });
}

kiln_status kiln_session_options_set_max_specializations(kiln_session_options* options, int32_t count) {
    return guard([&] {
        require(options, "options");
        KILN_CHECK(count >= 1, kInvalidArgument) << "max_specializations: expected >= 1, got " << count;
        options->options.max_specializations = count;
    });
}

kiln_status kiln_session_options_set_preemptible(kiln_session_options* options, int preemptible) {
    return guard([&] {
        require(options, "options");
        options->options.preemptible = preemptible != 0;
    });
}

kiln_status kiln_session_options_set_tiered_compile(kiln_session_options* options, int tiered) {
    return guard([&] {
        require(options, "options");
        options->options.tiered_compile = tiered != 0;
    });
}

kiln_status kiln_run_options_create(kiln_run_options** out) {
    if (out) *out = nullptr;
    return guard([&] {
        require(out, "out");
        *out = new kiln_run_options();
    });
}

void kiln_run_options_free(kiln_run_options* options) { delete options; }

kiln_status kiln_run_options_set_terminate(kiln_run_options* options, int terminate) {
    return guard([&] {
        require(options, "options");
        options->terminate.store(terminate != 0);
    });
}

}  // extern "C"
