// MPI setup, waits with a deadline, and the two ways a job ends (communicator.h).
#include "distributed/communicator.h"

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "distributed/heartbeat.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

double env_double(const char* name, double fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    double x = std::strtod(v, &end);
    KILN_CHECK(end && *end == '\0' && x >= 0, kInvalidArgument)
        << name << ": expected a non-negative number, got '" << v << "'";
    return x;
}

std::string mpi_error_string(int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
    return std::string(text, static_cast<size_t>(len));
}

}  // namespace

CommOptions CommOptions::from_env() {
    CommOptions o;
    o.heartbeat_timeout_s = env_double("KILN_DIST_HEARTBEAT_TIMEOUT", o.heartbeat_timeout_s);
    o.heartbeat_interval_s = env_double("KILN_DIST_HEARTBEAT_INTERVAL", o.heartbeat_interval_s);
    o.collective_timeout_s = env_double("KILN_DIST_TIMEOUT", o.collective_timeout_s);
    o.fusion_bytes = static_cast<size_t>(env_double("KILN_DIST_FUSION_BYTES", static_cast<double>(o.fusion_bytes)));
    const char* check = std::getenv("KILN_DIST_CHECK");
    if (check && std::string(check) == "0") o.check_agreement = false;
    KILN_CHECK(o.heartbeat_interval_s > 0 && o.heartbeat_timeout_s > 2 * o.heartbeat_interval_s, kInvalidArgument)
        << "KILN_DIST_HEARTBEAT_TIMEOUT (" << o.heartbeat_timeout_s
        << " s) must exceed twice KILN_DIST_HEARTBEAT_INTERVAL (" << o.heartbeat_interval_s << " s)";
    return o;
}

static Communicator* g_comm = nullptr;

Communicator& Communicator::get(const CommOptions& opts) {
    // Function-local static: constructed once, thread-safely; MPI is initialised inside.
    static Communicator* comm = new Communicator(opts);  // never destroyed: finalize()/abort() end MPI
    return *comm;
}

bool Communicator::initialized() { return g_comm != nullptr; }

Communicator::Communicator(const CommOptions& opts) : opts_(opts) {
    int already = 0;
    MPI_Initialized(&already);
    if (!already) {
        int provided = 0;
        MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        KILN_CHECK(provided >= MPI_THREAD_MULTIPLE, kUnsupported)
            << "this MPI library does not support MPI_THREAD_MULTIPLE (got level " << provided
            << "): the heartbeat thread needs it";
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    who_ = "rank " + std::to_string(rank_);
    MPI_Comm node = MPI_COMM_NULL;
    MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm_free(&node);
    MPI_Comm hb = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &hb);
    MPI_Comm_set_errhandler(hb, MPI_ERRORS_RETURN);
    heartbeat_ = std::make_unique<Heartbeat>(hb, opts_.heartbeat_interval_s, opts_.heartbeat_timeout_s);
    g_comm = this;
}

Communicator::Communicator(const CommOptions& opts, MPI_Comm comm, std::string label)
    : opts_(opts), label_(std::move(label)), comm_(comm) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    local_size_ = get().local_size();  // the node's ranks of the whole job share its cores
    who_ = "rank " + std::to_string(rank_) + " of " + label_;
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const std::string& label) {
    KILN_CHECK(color >= 0, kInvalidArgument) << who() << ": split into '" << label << "' with color " << color;
    MPI_Comm sub = MPI_COMM_NULL;
    check(MPI_Comm_split(comm_, color, key, &sub), "splitting the communicator into '" + label + "'");
    return std::unique_ptr<Communicator>(new Communicator(opts_, sub, label));
}

Communicator::~Communicator() {
    // The world communicator is never destroyed (get()); a split one frees its MPI communicator.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!label_.empty() && comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void Communicator::watch(const std::string& what) {
    Communicator& world = label_.empty() ? *this : get();
    if (world.heartbeat_) world.heartbeat_->watch(&who_, &what, opts_.collective_timeout_s);
}

void Communicator::unwatch(const std::string& what) {
    Communicator& world = label_.empty() ? *this : get();
    if (world.heartbeat_) world.heartbeat_->unwatch(&what);
}

void Communicator::check(int rc, const std::string& what) const {
    KILN_CHECK(rc == MPI_SUCCESS, kIOError) << who() << ": " << what << " failed: " << mpi_error_string(rc);
}

void Communicator::wait_all(std::vector<MPI_Request>& requests, const std::string& what) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    double waited = 0;
    for (int polls = 0;; ++polls) {
        int done = 0;
        int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
        check(rc, what);
        if (done) return;
        if ((polls & 31) == 0) waited = std::chrono::duration<double>(Clock::now() - start).count();
        // Spin first, as MPI_Wait does (a transfer in progress completes in microseconds to
        // milliseconds; giving the core away costs a time slice on a loaded machine); then
        // yield, then sleep: a long wait (a peer still compiling) must leave the cores to the
        // ranks that compute.
        if (waited < 2e-3) continue;
        KILN_CHECK(opts_.collective_timeout_s <= 0 || waited <= opts_.collective_timeout_s, kIOError)
            << who() << ": " << what << " did not complete within " << opts_.collective_timeout_s
            << " s while every rank's heartbeat is alive: another rank is not taking part (a different "
            << "number of steps or collectives?); KILN_DIST_TIMEOUT sets the limit";
        if (waited < 20e-3)
            sched_yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
}

void Communicator::finalize() {
    KILN_CHECK(label_.empty(), kInternal) << "bug in Kiln: finalize() on the split communicator '" << label_ << "'";
    if (finalized_) return;
    MPI_Request barrier = MPI_REQUEST_NULL;
    check(MPI_Ibarrier(comm_, &barrier), "the final barrier");
    std::vector<MPI_Request> reqs{barrier};
    wait_all(reqs, "the final barrier");
    heartbeat_.reset();
    finalized_ = true;
    MPI_Finalize();
}

void Communicator::abort(int code, const std::string& why) {
    if (!label_.empty()) get().abort(code, why);  // named by its world rank
    std::fprintf(stderr, "kiln distributed: rank %d of %d aborting the job: %s\n", rank_, size_, why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; in case it does
}

}  // namespace kiln::distributed
