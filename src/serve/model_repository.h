// ModelRepository: Triton's model repository layout and the loaded model versions.
//
//   DIR/<model>/config.pbtxt          optional (model_config.h)
//   DIR/<model>/<version>/model.onnx  or default_model_filename, or model.kiln (an artifact)
//
// Versions are numeric folder names, chosen by the config's version_policy (latest 1 by
// default; all; specific). A load compiles every chosen version (blocking the caller; the server
// starts its initial loads on background threads); a reload keeps the old versions serving
// until the new ones are ready, then drains them. An unload answers queued requests
// kUnavailable and lets running batches finish.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "serve/model_version.h"

namespace kiln::serve {

/// What a model's folder holds.
struct ModelFolder {
    std::string name;
    std::optional<std::string> config_text;
    std::vector<std::pair<int64_t, std::string>> versions;  // chosen versions and their model files
};

/// Reads DIR/<name> (throws kiln::Error: kIOError when it cannot be read, kInvalidArgument for a
/// config.pbtxt that does not parse or no version to serve).
ModelFolder read_model_folder(const std::string& root, const std::string& name);
/// The model folders of a repository (throws kIOError when it cannot be read).
std::vector<std::string> list_model_folders(const std::string& root);

class ModelRepository {
public:
    ModelRepository(std::string root, ServingContext ctx);
    ~ModelRepository();

    /// Loads (or reloads) a model; returns when its versions are ready or failed.
    Failure load(const std::string& name);
    /// load() on a background thread.
    void load_async(const std::string& name);
    Failure unload(const std::string& name);
    /// Stops every version (drain: finish their queued requests first) and waits for loads.
    void stop_all(bool drain);

    /// A ready version ("" = the newest ready one); nullptr with the failure otherwise.
    std::shared_ptr<ModelVersion> find(const std::string& name, const std::string& version, Failure& why) const;
    std::vector<std::shared_ptr<ModelVersion>> versions() const;
    std::vector<RepositoryEntry> index(bool ready_only) const;
    /// No load is in progress.
    bool settled() const;

private:
    struct Model {
        std::vector<std::shared_ptr<ModelVersion>> serving;  // newest first
        std::vector<std::shared_ptr<ModelVersion>> loading;
        std::string reason;  // why nothing serves ("unloaded", a config error)
        std::mutex load_mu;  // one load or unload of this model at a time
    };
    Model& model_locked(const std::string& name);

    std::string root_;
    ServingContext ctx_;
    mutable std::mutex mu_;
    std::map<std::string, std::unique_ptr<Model>> models_;
    std::vector<std::thread> loaders_;
    bool stopped_ = false;
};

}  // namespace kiln::serve
