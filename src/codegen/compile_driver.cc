// The compile driver: system compiler + content-addressed cache.
//
// key = 128-bit FNV-1a (two 64-bit lanes with different offsets) of the source, the compiler
// command, the compiler's identity (first line of `<cc> --version`, computed once per command)
// and the flags. A library is built into a uniquely named temporary file in its cache folder
// and rename()d into place, so concurrent processes (or threads) compiling the same key never
// see a partial file; the last rename wins with identical content. The compiler runs through
// posix_spawnp with an argv (no shell), its stdout and stderr captured to a log file.
#include "codegen/compile_driver.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/kernel_units.h"
#include "codegen/vector_width_flags.h"
#include "runtime/cpu_features.h"
#include "support/error.h"

extern char** environ;

namespace kiln::codegen {
namespace fs = std::filesystem;
namespace {

// -fwrapv: signed overflow wraps as in the interpreter. -ffp-contract=fast: a*b+c may become
// one FMA (one rounding instead of two), which doubles the arithmetic rate of every reduction;
// compiled float results therefore match the tir interpreter (the exact reference, which rounds
// each operation) within a tolerance, not bit for bit. No -ffast-math: no reassociation, so a
// reduction still adds in the schedule's order. -fno-trapping-math: no kernel reads the
// floating-point exception flags, and GCC 12 if-converts (so vectorizes) selects between float
// values only without it (Mish's log1p(exp(-|x|)) stayed scalar: 2.6x ONNX Runtime); results
// are the same, only exceptions may be raised speculatively.
const char* const kFlags[] = {"-O3",        "-march=native", "-fPIC",           "-shared",           "-std=gnu11",
                              "-fwrapv",    "-fno-math-errno", "-ffp-contract=fast", "-fno-trapping-math"};
// The code-generation flags of kFlags for one object of a kernel library (compile_c_library):
// compiled alone (-c), linked into one -shared library afterwards. The instruction set is
// library_isa_flags(), not -march=native.
const char* const kObjectFlags[] = {"-O3",           "-fPIC", "-std=gnu11", "-fwrapv", "-fno-math-errno", "-ffp-contract=fast",
                                    "-fno-trapping-math", "-c"};
constexpr int kDiagnosticLines = 40;

std::atomic<uint64_t> g_compiled{0}, g_cached{0}, g_failed{0}, g_tmp_counter{0};

struct Fnv128 {
    uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
    void add(const std::string& s) {
        for (unsigned char c : s) {
            a = (a ^ c) * 0x100000001b3ull;
            b = (b ^ c) * 0x100000001b3ull;
            b ^= b >> 29;
        }
        // A separator so ("ab","c") and ("a","bc") differ.
        a = (a ^ 0xff) * 0x100000001b3ull;
        b = (b ^ 0xff) * 0x100000001b3ull;
    }
    std::string hex() const {
        char buf[33];
        std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                      static_cast<unsigned long long>(b));
        return buf;
    }
};

/// The compiler command split into words ($KILN_CC or "cc").
std::vector<std::string> compiler_command() {
    const char* env = std::getenv("KILN_CC");
    std::string cmd = env && *env ? env : "cc";
    std::vector<std::string> words;
    std::istringstream is(cmd);
    for (std::string w; is >> w;) words.push_back(w);
    if (words.empty()) words.push_back("cc");
    return words;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& w : v) s += (s.empty() ? "" : " ") + w;
    return s;
}

/// A path unique to this process and call, beside `base`.
std::string temp_path(const std::string& base, const char* suffix) {
    return base + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_tmp_counter++) + suffix;
}

/// Runs argv with stdout+stderr appended to log_path; returns the exit status (-1: could not
/// start, errno in *spawn_errno; 128+sig if killed by a signal).
int run_process(const std::vector<std::string>& argv, const std::string& log_path, int* spawn_errno) {
    std::vector<char*> cargv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        *spawn_errno = rc;
        return -1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            *spawn_errno = errno;
            return -1;
        }
    }
    if (WIFEXITED(status)) {
        // posix_spawnp reports exec failure of the child as exit 127 on some libcs.
        return WEXITSTATUS(status);
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string first_lines(const std::string& text, int n) {
    std::string out;
    std::istringstream is(text);
    int count = 0;
    for (std::string line; std::getline(is, line);) {
        if (count++ == n) {
            out += "... (diagnostics truncated)\n";
            break;
        }
        out += line + "\n";
    }
    return out;
}

void remove_quietly(const std::string& path) {
    std::error_code ec;
    fs::remove(path, ec);
}

/// First line of `<cc> --version` (or the command itself if that fails), once per command.
std::string compiler_identity(const std::vector<std::string>& cc, const std::string& scratch_dir) {
    static std::mutex mu;
    static std::map<std::string, std::string> known;
    std::string cmd = join(cc);
    std::lock_guard<std::mutex> lock(mu);
    auto it = known.find(cmd);
    if (it != known.end()) return it->second;
    std::string log = temp_path(scratch_dir + "/cc-version", ".txt");
    std::vector<std::string> argv = cc;
    argv.push_back("--version");
    int err = 0;
    std::string id = cmd;
    if (run_process(argv, log, &err) == 0) {
        std::string text = read_file(log);
        std::string line = text.substr(0, text.find('\n'));
        if (!line.empty()) id = line;
    }
    remove_quietly(log);
    known.emplace(cmd, id);
    return id;
}

/// Writes `text` to `path` atomically (temp + rename) unless it already exists.
void write_file_atomic(const std::string& path, const std::string& text) {
    if (fs::exists(path)) return;
    std::string tmp = temp_path(path, "");
    {
        std::ofstream out(tmp, std::ios::binary);
        out << text;
        KILN_CHECK(out.good(), kIOError) << "cannot write '" << tmp << "'";
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        int e = errno;
        remove_quietly(tmp);
        KILN_THROW(kIOError) << "cannot rename '" << tmp << "' to '" << path << "': " << std::strerror(e);
    }
}

/// Runs `n` jobs (fn(i) for i in [0, n)) on up to `jobs` threads (0 = cores).
template <typename Fn>
void run_parallel(size_t n, int jobs, Fn fn) {
    jobs = static_cast<int>(std::min<size_t>(compile_processes(jobs), n));
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t k; (k = next++) < n;) fn(k);
    };
    if (jobs <= 1) {
        worker();
        return;
    }
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
}

/// The cache root (created), the compiler command and its identity: what every key hashes.
struct Toolchain {
    std::string root;
    std::vector<std::string> cc;
    std::string identity;
};

Toolchain toolchain() {
    Toolchain t;
    t.root = cache_dir();
    std::error_code ec;
    fs::create_directories(t.root, ec);
    KILN_CHECK(fs::is_directory(t.root), kIOError)
        << "cannot create the kernel cache directory '" << t.root << "'" << (ec ? ": " + ec.message() : "");
    t.cc = compiler_command();
    t.identity = compiler_identity(t.cc, t.root);
    return t;
}

/// <root>/<first two hex digits>/<key><ext>; creates the folder.
std::string cache_path(const Toolchain& t, const std::string& key, const std::string& ext) {
    std::string dir = t.root + "/" + key.substr(0, 2);
    std::error_code ec;
    fs::create_directories(dir, ec);
    KILN_CHECK(fs::is_directory(dir), kIOError) << "cannot create '" << dir << "'" << (ec ? ": " + ec.message() : "");
    return dir + "/" + key + ext;
}

/// Runs `<cc> flags -o OUT inputs libs` into a temporary file and renames it to `out`; on failure
/// throws kCompileError: "<cc> failed (exit status N) <what>:" and the diagnostics.
void build_into(const Toolchain& t, const std::vector<std::string>& flags, const std::vector<std::string>& inputs,
                const std::vector<std::string>& libs, const std::string& out, const std::string& what) {
    std::string tmp = temp_path(out, fs::path(out).extension().string().c_str());
    std::string log = temp_path(out, ".log");
    std::vector<std::string> argv = t.cc;
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("-o");
    argv.push_back(tmp);
    argv.insert(argv.end(), inputs.begin(), inputs.end());
    argv.insert(argv.end(), libs.begin(), libs.end());
    int err = 0;
    int rc = run_process(argv, log, &err);
    if (rc != 0) {
        ++g_failed;
        std::string diag = rc == -1 ? std::string("cannot start the compiler: ") + std::strerror(err) : read_file(log);
        remove_quietly(log);
        remove_quietly(tmp);
        if (rc == 127 && diag.empty()) diag = "the compiler could not be executed (exit status 127)";
        KILN_THROW(kCompileError) << "C compiler '" << join(t.cc) << "' failed (exit status " << rc << ") " << what
                                  << ":\n"
                                  << first_lines(diag, kDiagnosticLines);
    }
    remove_quietly(log);
    if (std::rename(tmp.c_str(), out.c_str()) != 0) {
        int e = errno;
        remove_quietly(tmp);
        KILN_THROW(kIOError) << "cannot move the compiler's output to '" << out << "': " << std::strerror(e);
    }
}

/// Where `source` compiled with `flags` lies in the cache as <key><ext>: the key hashes the
/// source, the compiler and the flags.
std::string cached_output(const Toolchain& t, const std::string& source, const std::vector<std::string>& flags,
                          const std::string& ext) {
    Fnv128 h;
    h.add(source);
    h.add(join(t.cc));
    h.add(t.identity);
    for (const std::string& f : flags) h.add(f);
    return cache_path(t, h.hex(), ext);
}

/// Marks an output being compiled in this process for as long as it lives; constructing one for
/// an output already in flight waits until that compile ends (first() is then false: look in the
/// cache again; a failed compile left nothing there, so the caller compiles it itself).
class InFlight {
public:
    explicit InFlight(std::string out) : out_(std::move(out)) {
        std::unique_lock<std::mutex> lock(mu());
        while (outputs().count(out_)) {
            first_ = false;
            done().wait(lock);
        }
        outputs().insert(out_);
    }
    ~InFlight() {
        {
            std::lock_guard<std::mutex> lock(mu());
            outputs().erase(out_);
        }
        done().notify_all();
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    bool first() const { return first_; }

private:
    static std::mutex& mu() {
        static std::mutex m;
        return m;
    }
    static std::condition_variable& done() {
        static std::condition_variable cv;
        return cv;
    }
    static std::set<std::string>& outputs() {
        static std::set<std::string> o;
        return o;
    }
    std::string out_;
    bool first_ = true;
};

/// Compiles `source` with `flags` (and `libs` after it) into the cache (cached_output); a hit
/// compiles nothing.
CompiledLibrary compile_cached(const std::string& source, const std::vector<std::string>& flags,
                               const std::string& ext, const std::vector<std::string>& libs) {
    Toolchain t = toolchain();
    std::string out = cached_output(t, source, flags, ext);
    if (fs::exists(out)) {
        ++g_cached;
        return {out, true};
    }
    // One compiler per output in this process: a second request (another session, or the
    // background build of a tiered compile) waits for the first and takes its result.
    InFlight flight(out);
    if (!flight.first() && fs::exists(out)) {
        ++g_cached;
        return {out, true};
    }
    const std::string key = fs::path(out).stem().string();
    std::string src = cache_path(t, key, ".c");
    write_file_atomic(src, source);
    build_into(t, flags, {src}, libs, out, "on the generated kernel source kept at " + src);
    ++g_compiled;
    return {out, false};
}
}  // namespace

int compile_processes(int jobs) {
    return jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string cache_dir() {
    if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
    return "/tmp/kiln-cache-" + std::to_string(::getuid());
}

namespace {

bool compiler_accepts(const Toolchain& t, const std::vector<std::string>& flags);

/// codegen/vector_width_flags.h for this host and compiler under the ISA flags `isa`: the
/// compiler's target report (`cc ISA -Q --help=target`) read once per ISA list.
std::vector<std::string> host_vector_flags(const std::vector<std::string>& isa) {
#if defined(__x86_64__)
    static std::mutex mu;
    static std::map<std::vector<std::string>, std::vector<std::string>> known;
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(isa); it != known.end()) return it->second;
    const std::vector<std::string> features = runtime::host_cpu_features();
    const bool avx512 = std::find(features.begin(), features.end(), "avx512f") != features.end();
    std::vector<std::string> flags;
    if (avx512) {
        const Toolchain t = toolchain();
        std::vector<std::string> argv = t.cc;
        argv.insert(argv.end(), isa.begin(), isa.end());
        for (const char* a : {"-Q", "--help=target"}) argv.push_back(a);
        const std::string log = temp_path(t.root + "/isa-probe", ".txt");
        int err = 0;
        const std::string report = run_process(argv, log, &err) == 0 ? read_file(log) : "";
        remove_quietly(log);
        flags = wide_vector_flags(report, avx512);
        std::vector<std::string> with = isa;
        with.insert(with.end(), flags.begin(), flags.end());
        if (!flags.empty() && !compiler_accepts(t, with)) flags.clear();
    }
    return known[isa] = flags;
#else
    (void)isa;
    return {};
#endif
}

/// How a kernel is built: the flags, the output's extension and libraries, whether a kernel
/// compiled alone is renamed to its library symbol (-Dkiln_kernel=...) or keeps `kiln_kernel`,
/// and the expected compile time that balances its units (kernel_units.h).
struct KernelTarget {
    std::vector<std::string> flags;
    std::string ext;
    std::vector<std::string> libs;
    bool rename_alone = false;
    size_t (*cost)(const std::string&) = compile_cost;
};

/// A kernel-library object (compile_c_library): kObjectFlags and the library's instruction set.
KernelTarget library_object_target() {
    KernelTarget t{{std::begin(kObjectFlags), std::end(kObjectFlags)}, ".o", {}, true};
    for (const std::string& f : library_isa_flags()) t.flags.push_back(f);
    return t;
}

/// A loadable library per kernel or unit (compile_c, compile_c_kernels): kFlags and the host's
/// vector-width flags, at -O1 for code that runs once (Optimization::kRunsOnce), at -O1 with
/// the vectorizer (its cheapest cost model: it vectorizes what needs no versioning or peeling)
/// and FMA contraction (-fexpensive-optimizations gates GCC's a*b+c -> fma) for the first tier
/// of a tiered compile (Optimization::kQuick), whose kernels also leave the schedule's unrolled
/// loops rolled (KILN_QUICK_TIER: the prelude's KILN_UNROLL is then empty).
KernelTarget shared_library_target(Optimization opt) {
    KernelTarget t{{std::begin(kFlags), std::end(kFlags)}, ".so", {"-lm"}, false};
    if (opt == Optimization::kRunsOnce) t.flags[0] = "-O1";
    if (opt == Optimization::kQuick) {
        t.cost = quick_compile_cost;
        t.flags[0] = "-O1";
        t.flags.insert(t.flags.begin() + 1, {"-ftree-vectorize", "-fvect-cost-model=very-cheap",
                                             "-fexpensive-optimizations", "-DKILN_QUICK_TIER"});
    }
    for (const std::string& v : host_vector_flags({"-march=native"})) t.flags.push_back(v);
    return t;
}

/// The distinct strings of `sources` in first-seen order, and each source's index among them.
std::vector<std::string> distinct(const std::vector<std::string>& sources, std::vector<size_t>& index) {
    std::vector<std::string> unique;
    std::map<std::string, size_t> index_of;
    index.clear();
    for (const std::string& s : sources) {
        auto [it, inserted] = index_of.emplace(s, unique.size());
        if (inserted) unique.push_back(s);
        index.push_back(it->second);
    }
    return unique;
}

}  // namespace

CompiledLibrary compile_c(const std::string& source) {
    const KernelTarget t = shared_library_target(Optimization::kHot);
    return compile_cached(source, t.flags, t.ext, t.libs);
}

std::future<void> start_compiler_probes() {
    static std::once_flag started;
    std::future<void> done;
    std::call_once(started, [&] {
        done = std::async(std::launch::async, [] {
            try {
                (void)shared_library_target(Optimization::kHot);  // toolchain() and host_vector_flags
            } catch (...) {  // the build that needs them reports it
            }
        });
    });
    return done;
}

std::vector<CompileOutcome> compile_c_each(const std::vector<std::string>& sources, int jobs) {
    std::vector<size_t> index;
    const std::vector<std::string> unique = distinct(sources, index);
    std::vector<CompileOutcome> done(unique.size());
    run_parallel(unique.size(), jobs, [&](size_t k) {
        try {
            done[k].library = compile_c(unique[k]);
        } catch (const std::exception& e) {
            done[k].error = e.what();
            done[k].exception = std::current_exception();
        }
    });
    std::vector<CompileOutcome> out;
    for (size_t k : index) out.push_back(done[k]);
    return out;
}

std::vector<CompiledLibrary> compile_c_many(const std::vector<std::string>& sources, int jobs) {
    std::vector<CompileOutcome> each = compile_c_each(sources, jobs);
    for (const CompileOutcome& o : each)
        if (o.exception) std::rethrow_exception(o.exception);
    std::vector<CompiledLibrary> out;
    for (CompileOutcome& o : each) out.push_back(std::move(o.library));
    return out;
}

std::string kernel_library_symbol(const std::string& source) {
    Fnv128 h;
    h.add(source);
    return "kiln_kernel_" + h.hex().substr(0, 16);
}

namespace {

/// Whether the compiler accepts `flags` (preprocessing an empty file).
bool compiler_accepts(const Toolchain& t, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = t.cc;
    argv.insert(argv.end(), flags.begin(), flags.end());
    for (const char* a : {"-E", "-x", "c", "/dev/null", "-o", "/dev/null"}) argv.push_back(a);
    const std::string log = temp_path(t.root + "/isa-probe", ".txt");
    int err = 0;
    const bool ok = run_process(argv, log, &err) == 0;
    remove_quietly(log);
    return ok;
}

}  // namespace

std::vector<std::string> library_isa_flags() {
#if defined(__x86_64__)
    static const std::vector<std::string> flags = [] {
        const Toolchain t = toolchain();
        std::vector<std::string> f = {"-march=x86-64", "-mtune=native"};
        std::vector<std::string> features = runtime::host_cpu_features();
        for (size_t i = 1; i < features.size(); ++i) f.push_back("-m" + features[i]);  // [0]: the arch
        if (compiler_accepts(t, f)) {
            for (const std::string& v : host_vector_flags(f)) f.push_back(v);  // full-width vectors
            return f;
        }
        // An older compiler: keep the features it knows (the artifact still records them all,
        // so it asks for more than its kernels use: safe).
        std::vector<std::string> kept(f.begin(), f.begin() + 2);
        for (size_t i = 2; i < f.size(); ++i)
            if (compiler_accepts(t, {f[0], f[i]})) kept.push_back(f[i]);
        for (const std::string& v : host_vector_flags(kept)) kept.push_back(v);
        return kept;
    }();
    return flags;
#else
    return {"-march=native"};
#endif
}

namespace {

/// The flags of `source` compiled alone for `target`.
std::vector<std::string> alone_flags(const KernelTarget& target, const std::string& source) {
    std::vector<std::string> flags = target.flags;
    if (target.rename_alone) flags.push_back("-Dkiln_kernel=" + kernel_library_symbol(source));
    return flags;
}

/// Compiles one kernel source alone.
KernelBuild compile_alone(const KernelTarget& target, const std::string& source) {
    KernelBuild b;
    b.symbol = target.rename_alone ? kernel_library_symbol(source) : "kiln_kernel";
    try {
        b.library = compile_cached(source, alone_flags(target, source), target.ext, target.libs);
    } catch (const std::exception&) {
        b.exception = std::current_exception();
    }
    return b;
}

/// Compiles the kernels `group` of `unique` as one unit (kernel_units.h) into `builds`; when the
/// unit fails, each kernel alone, so a failure names its own source and diagnostics.
void compile_unit(const KernelTarget& target, const std::vector<std::string>& unique, const std::vector<size_t>& group,
                  std::vector<KernelBuild>& builds) {
    std::vector<std::string> sources, symbols;
    for (size_t k : group) {
        sources.push_back(unique[k]);
        symbols.push_back(kernel_library_symbol(unique[k]));
    }
    try {
        CompiledLibrary unit = compile_cached(kernel_unit_source(sources, symbols), target.flags, target.ext, target.libs);
        for (size_t i = 0; i < group.size(); ++i) builds[group[i]] = {unit, symbols[i], nullptr};
    } catch (const std::exception&) {
        for (size_t k : group) builds[k] = compile_alone(target, unique[k]);
    }
}

/// How build_kernels builds the distinct kernel sources `unique`: those found in the cache as
/// compiled alone, those compiled alone now, and the units of the rest (kernel_units.h: when
/// more kernels are missing than `jobs` processes). Deterministic, so the same missing kernels
/// make the same units, whose libraries the cache then holds.
struct KernelBuildPlan {
    std::vector<KernelBuild> found;              // per source: its cached build, if found alone
    std::vector<size_t> alone;                   // sources compiled alone
    std::vector<std::vector<size_t>> units;      // sources compiled together
    int jobs = 1;
};

KernelBuildPlan plan_kernels(const KernelTarget& target, const std::vector<std::string>& unique, int jobs) {
    KernelBuildPlan plan;
    plan.jobs = compile_processes(jobs);
    plan.found.resize(unique.size());
    std::vector<size_t> missing;
    const Toolchain t = toolchain();
    for (size_t k = 0; k < unique.size(); ++k) {
        std::string path = cached_output(t, unique[k], alone_flags(target, unique[k]), target.ext);
        if (fs::exists(path))
            plan.found[k] = {{path, true}, target.rename_alone ? kernel_library_symbol(unique[k]) : "kiln_kernel", nullptr};
        else if (kernel_body(unique[k]))
            missing.push_back(k);
        else
            plan.alone.push_back(k);
    }
    if (missing.size() <= static_cast<size_t>(plan.jobs)) {
        plan.alone.insert(plan.alone.end(), missing.begin(), missing.end());
        return plan;
    }
    // At most kUnitKernels kernels per unit, so a large model still spreads over every process.
    constexpr size_t kUnitKernels = 24;
    std::vector<size_t> costs;
    for (size_t k : missing) costs.push_back(target.cost(unique[k]));
    const size_t units =
        std::max<size_t>(static_cast<size_t>(plan.jobs), (missing.size() + kUnitKernels - 1) / kUnitKernels);
    plan.units = balance_units(costs, units);
    for (auto& g : plan.units)
        for (size_t& i : g) i = missing[i];
    return plan;
}

/// The path a unit of `plan` is cached under.
std::string unit_output(const KernelTarget& target, const std::vector<std::string>& unique,
                        const std::vector<size_t>& group) {
    std::vector<std::string> sources, symbols;
    for (size_t k : group) {
        sources.push_back(unique[k]);
        symbols.push_back(kernel_library_symbol(unique[k]));
    }
    return cached_output(toolchain(), kernel_unit_source(sources, symbols), target.flags, target.ext);
}

/// The builds of the distinct kernel sources `unique` (plan_kernels): from the cache where a
/// kernel was compiled alone before, the rest compiled by up to `jobs` processes.
std::vector<KernelBuild> build_kernels(const KernelTarget& target, const std::vector<std::string>& unique, int jobs) {
    const KernelBuildPlan plan = plan_kernels(target, unique, jobs);
    std::vector<KernelBuild> builds = plan.found;
    for (const KernelBuild& b : builds)
        if (!b.library.path.empty()) ++g_cached;
    // Alone and units as one list of tasks, so that both spread over the processes.
    const size_t tasks = plan.alone.size() + plan.units.size();
    run_parallel(tasks, plan.jobs, [&](size_t i) {
        if (i < plan.alone.size())
            builds[plan.alone[i]] = compile_alone(target, unique[plan.alone[i]]);
        else
            compile_unit(target, unique, plan.units[i - plan.alone.size()], builds);
    });
    return builds;
}

}  // namespace

std::vector<KernelBuild> compile_c_kernels(const std::vector<std::string>& sources, int jobs, Optimization opt) {
    std::vector<size_t> index;
    std::vector<std::string> unique = distinct(sources, index);
    std::vector<KernelBuild> builds = build_kernels(shared_library_target(opt), unique, jobs);
    for (const KernelBuild& b : builds)
        if (b.exception) std::rethrow_exception(b.exception);
    std::vector<KernelBuild> out;
    for (size_t i : index) out.push_back(builds[i]);
    return out;
}

size_t kernels_to_compile(const std::vector<std::string>& sources, int jobs, Optimization opt) {
    std::vector<size_t> index;
    const std::vector<std::string> unique = distinct(sources, index);
    const KernelTarget target = shared_library_target(opt);
    const KernelBuildPlan plan = plan_kernels(target, unique, jobs);
    size_t n = plan.alone.size();
    for (const std::vector<size_t>& g : plan.units)
        if (!fs::exists(unit_output(target, unique, g))) n += g.size();
    return n;
}

KernelLibrary compile_c_library(const std::vector<std::string>& sources, int jobs) {
    // Each distinct source a kernel renamed to its library symbol (the emitted code defines no
    // other external symbol: the prelude and task functions are static).
    std::vector<size_t> index;
    std::vector<std::string> unique = distinct(sources, index);
    if (unique.empty()) unique.push_back("/* a kernel library without kernels */\n");
    std::vector<KernelBuild> objects = build_kernels(library_object_target(), unique, jobs);
    KernelLibrary lib;
    std::vector<std::string> paths;
    for (const KernelBuild& o : objects) {
        if (o.exception) std::rethrow_exception(o.exception);
        if (std::find(paths.begin(), paths.end(), o.library.path) != paths.end()) continue;  // a unit's
        if (!o.library.from_cache) ++lib.objects_compiled;
        paths.push_back(o.library.path);
    }
    for (size_t i = 0; i < sources.size(); ++i) {
        lib.symbols.push_back(objects[index[i]].symbol);
        lib.cached.push_back(objects[index[i]].library.from_cache);
    }

    // The linked library is cached by its objects (their paths are their keys) and the link line.
    Toolchain t = toolchain();
    const std::vector<std::string> link_flags = {"-shared"};
    Fnv128 h;
    h.add("kernel library");
    for (const std::string& p : paths) h.add(fs::path(p).filename().string());
    h.add(join(t.cc));
    h.add(t.identity);
    for (const std::string& f : link_flags) h.add(f);
    lib.path = cache_path(t, h.hex(), ".so");
    if (fs::exists(lib.path)) {
        lib.from_cache = true;
        return lib;
    }
    build_into(t, link_flags, paths, {"-lm"}, lib.path,
               "linking " + std::to_string(paths.size()) + " kernel objects into one library");
    return lib;
}

CompileStats compile_stats() {
    CompileStats s;
    s.compiled = g_compiled.load();
    s.cached = g_cached.load();
    s.failed = g_failed.load();
    return s;
}

}  // namespace kiln::codegen
