// Built-in asynchronous kernels. AsyncCopyKernel queues memcpy jobs to one background copy
// thread (FIFO, like a DMA engine's queue) and calls each job's `done` from that thread.
#include "runtime/async_kernel.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

namespace kiln::runtime {
namespace {

class AsyncCopyKernel final : public AsyncKernel {
public:
    AsyncCopyKernel() : thread_([this] { loop(); }) {}
    ~AsyncCopyKernel() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

    void start(std::vector<void*> args, std::vector<size_t> bytes, AsyncDoneFn done) override {
        if (args.size() != 2 || bytes.size() != 2 || bytes[0] != bytes[1]) {
            done(Status(ErrorKind::kInternal, "bug in Kiln: async copy needs (src, dst) of equal size, got " +
                                                  std::to_string(args.size()) + " args"));
            return;
        }
        {
            std::lock_guard<std::mutex> lock(mu_);
            queue_.push_back({args[0], args[1], bytes[0], std::move(done)});
        }
        cv_.notify_one();
    }

private:
    struct CopyJob {
        const void* src;
        void* dst;
        size_t bytes;
        AsyncDoneFn done;
    };

    void loop() {
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stop_ and drained
            CopyJob job = std::move(queue_.front());
            queue_.pop_front();
            lock.unlock();
            if (job.bytes) std::memcpy(job.dst, job.src, job.bytes);
            job.done(Status::ok_status());
            lock.lock();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<CopyJob> queue_;
    bool stop_ = false;
    std::thread thread_;  // last: starts after the members above exist
};

}  // namespace

AsyncKernel* find_async_kernel(const std::string& symbol) {
    if (symbol == kAsyncCopySymbol) {
        // Leaked on purpose: the copy thread must outlive every executor, even static ones.
        static auto* copy = new AsyncCopyKernel();
        return copy;
    }
    return nullptr;
}

Status run_async_kernel_and_wait(AsyncKernel& k, std::vector<void*> args, std::vector<size_t> bytes) {
    // Shared: the completing thread may still be inside set_value when get() returns.
    auto p = std::make_shared<std::promise<Status>>();
    std::future<Status> f = p->get_future();
    k.start(std::move(args), std::move(bytes), [p](Status st) { p->set_value(std::move(st)); });
    return f.get();
}

}  // namespace kiln::runtime
