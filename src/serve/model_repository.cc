// The model repository (model_repository.h).
#include "serve/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::serve {
namespace fs = std::filesystem;

namespace {

bool is_number(const std::string& s) {
    return !s.empty() && s.size() < 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string read_text(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    KILN_CHECK(f, kIOError) << "cannot read " << p.string();
    std::ostringstream os;
    os << f.rdbuf();
    return os.str();
}

/// Whether `name` names a model folder of the repository at `root`: not empty, no path
/// separator, not hidden (".", ".." and dot-folders are never models), and a directory.
bool model_folder_exists(const std::string& root, const std::string& name) {
    std::error_code ec;
    return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
           name.find('\\') == std::string::npos && fs::is_directory(fs::path(root) / name, ec);
}

}  // namespace

std::vector<std::string> list_model_folders(const std::string& root) {
    std::error_code ec;
    KILN_CHECK(fs::is_directory(root, ec), kIOError) << "model repository '" << root << "' is not a readable directory";
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(root, ec))
        if (e.is_directory() && e.path().filename().string()[0] != '.') names.push_back(e.path().filename().string());
    KILN_CHECK(!ec, kIOError) << "cannot list model repository '" << root << "': " << ec.message();
    std::sort(names.begin(), names.end());
    return names;
}

ModelFolder read_model_folder(const std::string& root, const std::string& name) {
    ModelFolder folder;
    folder.name = name;
    fs::path dir = fs::path(root) / name;
    std::error_code ec;
    KILN_CHECK(model_folder_exists(root, name), kIOError)
        << "no model '" << name << "' in the repository " << root;
    inference::ModelConfig config;
    if (fs::exists(dir / "config.pbtxt", ec)) {
        folder.config_text = read_text(dir / "config.pbtxt");
        std::vector<std::string> ignored;
        config = parse_model_config(*folder.config_text, "config.pbtxt", ignored);
    }
    std::vector<std::pair<int64_t, std::string>> found;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        std::string v = e.path().filename().string();
        if (!e.is_directory() || !is_number(v)) continue;
        std::vector<std::string> candidates;
        if (!config.default_model_filename().empty()) candidates.push_back(config.default_model_filename());
        candidates.insert(candidates.end(), {"model.onnx", "model.kiln"});
        for (const std::string& file : candidates)
            if (fs::is_regular_file(e.path() / file, ec)) {
                found.emplace_back(std::stoll(v), (e.path() / file).string());
                break;
            }
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const auto& policy = config.version_policy();
    if (policy.has_all()) {
        folder.versions = found;
    } else if (policy.has_specific()) {
        for (int64_t want : policy.specific().versions()) {
            auto it = std::find_if(found.begin(), found.end(), [&](const auto& f) { return f.first == want; });
            KILN_CHECK(it != found.end(), kInvalidArgument)
                << "model '" << name << "': version_policy names version " << want << ", which has no model file";
            folder.versions.push_back(*it);
        }
    } else {
        size_t n = policy.has_latest() ? std::max<uint32_t>(1, policy.latest().num_versions()) : 1;
        folder.versions.assign(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(std::min(n, found.size())));
    }
    KILN_CHECK(!folder.versions.empty(), kInvalidArgument)
        << "model '" << name << "' has no version to serve (expected " << (dir / "<version>" / "model.onnx").string() << ")";
    return folder;
}

ModelRepository::ModelRepository(std::string root, ServingContext ctx) : root_(std::move(root)), ctx_(std::move(ctx)) {}

ModelRepository::~ModelRepository() { stop_all(false); }

ModelRepository::Model& ModelRepository::model_locked(const std::string& name) {
    auto& m = models_[name];
    if (!m) m = std::make_unique<Model>();
    return *m;
}

Failure ModelRepository::load(const std::string& name) {
    Model* m;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopped_) return {Code::kUnavailable, "the server is shutting down"};
        // A name with no folder gets no index entry (a client could grow the index without bound).
        if (!models_.count(name) && !model_folder_exists(root_, name))
            return {Code::kNotFound, "no model '" + name + "' in the repository " + root_};
        m = &model_locked(name);
    }
    std::lock_guard<std::mutex> serial(m->load_mu);
    ModelFolder folder;
    try {
        folder = read_model_folder(root_, name);
    } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mu_);
        m->reason = e.what();
        return {e.kind() == ErrorKind::kIOError ? Code::kNotFound : Code::kInvalidArgument, e.what()};
    }
    std::vector<std::shared_ptr<ModelVersion>> fresh;
    for (const auto& [v, path] : folder.versions)
        fresh.push_back(std::make_shared<ModelVersion>(name, v, path, folder.config_text, ctx_));
    {
        std::lock_guard<std::mutex> lock(mu_);
        m->loading = fresh;
    }
    for (auto& v : fresh) v->load();
    std::vector<std::shared_ptr<ModelVersion>> old, ready;
    std::string failures;
    for (auto& v : fresh) {
        if (v->state() == ModelVersion::State::kReady) ready.push_back(v);
        else failures += (failures.empty() ? "" : "; ") + ("version " + v->version() + ": " + v->reason());
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        m->loading.clear();
        if (!ready.empty()) {
            old.swap(m->serving);
            m->serving = ready;
            m->reason = failures;
        } else {
            m->reason = failures;
        }
        if (stopped_) old.insert(old.end(), ready.begin(), ready.end());
    }
    for (auto& v : old) v->stop(/*drain=*/true);
    // A model or config that does not load is the request's (the repository's) fault: 400, as Triton.
    if (ready.empty()) return {Code::kInvalidArgument, "model '" + name + "' failed to load: " + failures};
    return Failure::none();
}

void ModelRepository::load_async(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    model_locked(name);  // shows in the index at once
    loaders_.emplace_back([this, name] { (void)load(name); });
}

Failure ModelRepository::unload(const std::string& name) {
    Model* m;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = models_.find(name);
        if (it == models_.end()) return {Code::kNotFound, "unknown model '" + name + "'"};
        m = it->second.get();
    }
    std::lock_guard<std::mutex> serial(m->load_mu);
    std::vector<std::shared_ptr<ModelVersion>> gone;
    {
        std::lock_guard<std::mutex> lock(mu_);
        gone.swap(m->serving);
        m->reason = "unloaded";
    }
    for (auto& v : gone) v->stop(/*drain=*/false);
    return Failure::none();
}

void ModelRepository::stop_all(bool drain) {
    std::vector<std::thread> loaders;
    std::vector<std::shared_ptr<ModelVersion>> all;
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopped_ = true;
        loaders.swap(loaders_);
    }
    for (std::thread& t : loaders) t.join();
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [name, m] : models_) all.insert(all.end(), m->serving.begin(), m->serving.end());
    }
    for (auto& v : all) v->stop(drain);
}

std::shared_ptr<ModelVersion> ModelRepository::find(const std::string& name, const std::string& version,
                                                    Failure& why) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
        const bool on_disk = model_folder_exists(root_, name);
        why = on_disk ? Failure{Code::kUnavailable, "model '" + name + "' is not loaded"}
                      : Failure{Code::kNotFound, "unknown model '" + name + "'"};
        return nullptr;
    }
    const Model& m = *it->second;
    for (const auto& v : m.serving)
        if ((version.empty() || v->version() == version) && v->state() == ModelVersion::State::kReady) return v;
    if (!version.empty()) {
        bool known = false;
        for (const auto& v : m.serving) known = known || v->version() == version;
        for (const auto& v : m.loading) known = known || v->version() == version;
        if (!known) {
            why = {Code::kNotFound, "model '" + name + "' has no version '" + version + "'"};
            return nullptr;
        }
    }
    std::string state = !m.loading.empty() ? "loading" : m.reason.empty() ? "not loaded" : m.reason;
    why = {Code::kUnavailable, "model '" + name + "'" + (version.empty() ? "" : " version " + version) +
                                   " is not ready: " + state};
    return nullptr;
}

std::vector<std::shared_ptr<ModelVersion>> ModelRepository::versions() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::shared_ptr<ModelVersion>> all;
    for (const auto& [name, m] : models_) all.insert(all.end(), m->serving.begin(), m->serving.end());
    return all;
}

std::vector<RepositoryEntry> ModelRepository::index(bool ready_only) const {
    std::vector<std::string> names;
    try {
        names = list_model_folders(root_);
    } catch (const Error&) {
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, m] : models_)
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    std::sort(names.begin(), names.end());
    std::vector<RepositoryEntry> rows;
    for (const std::string& name : names) {
        auto it = models_.find(name);
        if (it == models_.end()) {
            if (!ready_only) rows.push_back({name, "", "", ""});
            continue;
        }
        const Model& m = *it->second;
        for (const auto& v : m.loading)
            if (!ready_only) rows.push_back({name, v->version(), "LOADING", ""});
        for (const auto& v : m.serving) {
            auto s = v->state();
            if (ready_only && s != ModelVersion::State::kReady) continue;
            std::string reason = v->reason();
            for (const std::string& w : v->warnings()) reason += (reason.empty() ? "" : "; ") + w;
            rows.push_back({name, v->version(), ModelVersion::state_name(s), reason});
        }
        if (m.serving.empty() && m.loading.empty() && !ready_only)
            rows.push_back({name, "", m.reason.empty() ? "LOADING" : "UNAVAILABLE", m.reason});
    }
    return rows;
}

bool ModelRepository::settled() const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, m] : models_)
        if (!m->loading.empty() || (m->serving.empty() && m->reason.empty())) return false;
    return true;
}

}  // namespace kiln::serve
