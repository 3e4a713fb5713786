#include "backend/timing/worker_pool.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/ir/printer.h"
#include "backend/schedule/ir_text.h"
#include "backend/timing/cost_estimate.h"
#include "backend/timing/worker_main.h"
#include "util/status_macros.h"

extern char** environ;

namespace looptool {
namespace {

constexpr int kWorkerFd = 3;

// Every answer is a fact about the schedule, a crash or a hang of its kernel included (JIT'd
// kernels are deterministic): a schedule that took a worker down is not run again. Only a
// worker that could not be reached at all (UNAVAILABLE) is not a verdict.
bool Cacheable(const absl::StatusOr<WorkerReply>& reply) {
  return reply.ok() || reply.status().code() != absl::StatusCode::kUnavailable;
}

// OK when a thread of this process may run on `cpu` (an online CPU of its cpuset), as a kernel
// worker pinned there will: a probe thread pins itself and ends. -1: not pinned.
absl::Status CheckPinnable(int cpu) {
  if (cpu < 0) return absl::OkStatus();
  if (cpu >= CPU_SETSIZE) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot run a kernel worker on cpu ", cpu, ": CPUs are numbered below ",
                     CPU_SETSIZE));
  }
  int error = 0;
  std::thread probe([cpu, &error] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    error = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  });
  probe.join();
  if (error != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot run a kernel worker on cpu ", cpu, ": ", std::strerror(error),
        " (not a CPU this process may use)"));
  }
  return absl::OkStatus();
}

}  // namespace

WorkerPool::WorkerPool(Options options)
    : options_(std::move(options)), cache_(options_.max_cached, options_.max_cached_bytes) {}

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Start(Options options) {
  if (options.cores.empty()) options.cores.push_back(-1);
  for (int core : options.cores) RETURN_IF_ERROR(CheckPinnable(core));
  std::unique_ptr<WorkerPool> pool(new WorkerPool(options));
  {
    absl::MutexLock lock(&pool->mu_);
    for (int core : options.cores) {
      Worker w;
      w.core = core;
      absl::Status s = pool->Spawn(w);
      pool->workers_.push_back(w);
      if (!s.ok()) return s;
    }
  }
  absl::StatusOr<WorkerReply> peak = pool->Call({WorkerTask::kPeak, ""}, 0);
  if (!peak.ok()) return peak.status();
  if (!peak->status.ok()) return peak->status;
  pool->peak_gflops_ = peak->measurement.gflops;
  pool->monitor_ = std::thread([raw = pool.get()] { raw->MonitorLoop(); });
  pool->preparer_ = std::thread([raw = pool.get()] { raw->PrepareLoop(); });
  return pool;
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (monitor_.joinable()) monitor_.join();
  {
    absl::MutexLock lock(&mu_);
    for (Worker& w : workers_) {
      if (!w.busy) {
        Kill(w);
      } else if (w.pid > 0) {
        kill(w.pid, SIGKILL);  // its call reads end of file and cleans up
      }
    }
  }
  // A hint being sent fails UNAVAILABLE now (its worker killed, or stopping_ seen).
  if (preparer_.joinable()) preparer_.join();
}

bool WorkerPool::TooCostly(const Program& program) const {
  if (options_.max_kernel_seconds <= 0) return false;
  // A kernel estimated to outlast the hang deadline would only be killed there.
  const double budget = std::min(options_.max_kernel_seconds, options_.deadline_seconds);
  return EstimateEvaluationSeconds(program) > budget;
}

bool WorkerPool::TooCostlyToPrepare(const Program& program) const {
  // As MeasureFor's refusal; with no --max_kernel_seconds bound, the hang deadline still bounds
  // what a hint may make a worker do.
  const double budget = options_.max_kernel_seconds > 0
                            ? std::min(options_.max_kernel_seconds, options_.deadline_seconds)
                            : options_.deadline_seconds;
  return EstimateEvaluationSeconds(program) > budget;
}

void WorkerPool::PrepareFor(const LoopTree& tree, uint64_t tenant) {
  std::string key = PrintProgram(tree.program());
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  const bool tenant_waits = std::any_of(prepares_.begin(), prepares_.end(),
                                        [&](const auto& p) { return p.second == tenant; });
  const auto queued = queues_.find(tenant);
  const bool tenant_queued = queued != queues_.end() && !queued->second.empty();
  if (std::find(hinted_.begin(), hinted_.end(), key) != hinted_.end() || tenant_waits ||
      tenant_queued || static_cast<int>(prepares_.size()) >= options_.max_pending_prepares ||
      TooCostlyToPrepare(tree.program())) {
    ++stats_.prepares_skipped;
    return;
  }
  hinted_.push_back(std::move(key));
  if (hinted_.size() > 64) hinted_.pop_front();
  prepares_.emplace_back(PrintIr(tree), tenant);
}

void WorkerPool::PrepareLoop() {
  if (!options_.send_prepares) return;
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
          return p->stopping_ || !p->prepares_.empty();
        },
        this));
    if (stopping_) break;
    auto [ir, tenant] = std::move(prepares_.front());
    prepares_.pop_front();
    preparing_ = true;
    mu_.Unlock();
    absl::StatusOr<WorkerReply> reply = Call({WorkerTask::kPrepare, std::move(ir)}, tenant);
    mu_.Lock();
    preparing_ = false;
    if (!reply.ok() || !reply->status.ok()) {
      ++stats_.prepares_failed;
    } else if (reply->measurement.seconds > 0) {
      ++stats_.prepared;
      stats_.prepare_seconds += reply->measurement.seconds;
    } else {
      ++stats_.prepares_cached;
    }
  }
  prepares_.clear();
}

void WorkerPool::WaitForPrepares() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](WorkerPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) {
        return p->stopping_ || (p->prepares_.empty() && !p->preparing_);
      },
      this));
}

void WorkerPool::MonitorLoop() {
  const absl::Duration period = absl::Seconds(options_.monitor_period_seconds);
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), period)) {
    for (Worker& w : workers_) {
      if (w.busy || w.pid <= 0) continue;
      int status = 0;
      if (waitpid(w.pid, &status, WNOHANG) != w.pid) continue;
      // Died while idle (killed from outside, out of memory): reap it, start another now.
      close(w.fd);
      w.fd = -1;
      w.pid = -1;
      ++stats_.idle_deaths;
      Spawn(w).IgnoreError();  // on failure the next request tries again
    }
  }
}

void WorkerPool::Dispatch() {
  while (!queues_.empty()) {
    Worker* free = nullptr;
    for (Worker& w : workers_) {
      if (!w.busy) {
        free = &w;
        break;
      }
    }
    if (free == nullptr) return;
    // The next tenant after the one served last, wrapping around.
    auto next = queues_.upper_bound(last_served_);
    if (next == queues_.end()) next = queues_.begin();
    Waiter* waiter = next->second.front();
    next->second.pop_front();
    last_served_ = next->first;
    if (next->second.empty()) queues_.erase(next);
    free->busy = true;
    waiter->worker = free;
  }
}

std::vector<pid_t> WorkerPool::worker_pids() const {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> pids;
  for (const Worker& w : workers_) pids.push_back(w.pid);
  return pids;
}

absl::Status WorkerPool::Spawn(Worker& worker) const {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("socketpair failed: errno ", errno));
  }
  WorkerArgs args;
  args.fd = kWorkerFd;
  args.core = worker.core;
  args.isa = Traits(options_.isa).name;
  args.budget_ms = options_.budget_ms;
  args.adaptive = options_.adaptive_timing;
  args.max_loops = options_.max_loops;
  args.stream_output_min_bytes = options_.stream_output_min_bytes;
  std::vector<std::string> argv_strings = args.ToArgv();
  argv_strings.insert(argv_strings.begin(), "looptool-kernel-worker");
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto fd 3 clears close-on-exec there; every other descriptor of ours stays closed.
  int child_end = fds[1];
  if (child_end == kWorkerFd) child_end = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
  posix_spawn_file_actions_adddup2(&actions, child_end, kWorkerFd);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, options_.executable.c_str(), &actions, nullptr, argv.data(),
                             environ);
  posix_spawn_file_actions_destroy(&actions);
  if (child_end != fds[1]) close(child_end);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(
        absl::StrCat("cannot start kernel worker ", options_.executable, ": errno ", rc));
  }
  worker.pid = pid;
  worker.fd = fds[0];
  return absl::OkStatus();
}

void WorkerPool::Kill(Worker& worker) {
  if (worker.fd >= 0) close(worker.fd);
  if (worker.pid > 0) {
    kill(worker.pid, SIGKILL);
    waitpid(worker.pid, nullptr, 0);
  }
  worker.fd = -1;
  worker.pid = -1;
}

absl::StatusOr<WorkerReply> WorkerPool::Call(const WorkerRequest& request, uint64_t tenant) {
  // Wait in the tenant's queue for a worker, then talk to it without holding the lock.
  Worker* worker = nullptr;
  {
    absl::MutexLock lock(&mu_);
    Waiter waiter;
    queues_[tenant].push_back(&waiter);
    Dispatch();
    mu_.Await(absl::Condition(
        +[](Waiter* w) { return w->worker != nullptr; }, &waiter));
    worker = waiter.worker;
    if (stopping_) {
      // Stop() may have SIGKILLed it as busy while it was being handed over: reap it here.
      Kill(*worker);
      worker->busy = false;
      Dispatch();
      return absl::UnavailableError("the kernel workers have stopped (the server is shutting down)");
    }
    int status = 0;
    if (worker->pid > 0 && waitpid(worker->pid, &status, WNOHANG) == worker->pid) {
      // Died while idle since the monitor last looked: not this request's kernel's doing.
      close(worker->fd);
      worker->fd = -1;
      worker->pid = -1;
      ++stats_.idle_deaths;
    }
    if (worker->pid < 0) {
      absl::Status s = Spawn(*worker);
      if (!s.ok()) {
        worker->busy = false;
        Dispatch();
        return absl::UnavailableError(s.message());
      }
    }
  }
  const int deadline_ms = static_cast<int>(options_.deadline_seconds * 1000);
  absl::StatusOr<std::string> frame = absl::UnavailableError("not sent");
  absl::Status sent = WriteFrame(worker->fd, EncodeRequest(request));
  if (sent.ok()) frame = ReadFrame(worker->fd, deadline_ms);

  absl::MutexLock lock(&mu_);
  worker->busy = false;
  Dispatch();
  if (frame.ok()) {
    if (request.task != WorkerTask::kPrepare) ++stats_.measured;
    return DecodeReply(*frame);
  }
  // The worker died or hung: replace it (a new one starts on the next request).
  const bool hung = frame.status().code() == absl::StatusCode::kDeadlineExceeded;
  Kill(*worker);
  if (stopping_) {  // Stop() killed it: no verdict on the kernel
    return absl::UnavailableError("the kernel workers have stopped (the server is shutting down)");
  }
  if (hung) {
    ++stats_.timeouts;
    return absl::DeadlineExceededError(absl::StrCat(
        "the kernel ran longer than ", options_.deadline_seconds, " s; its worker was replaced"));
  }
  ++stats_.crashes;
  return absl::InternalError("the kernel worker crashed while running this kernel; it was replaced");
}

absl::StatusOr<MemoryProfile> WorkerPool::Memory() {
  absl::MutexLock lock(&memory_mu_);
  if (!memory_.has_value()) {
    ASSIGN_OR_RETURN(const WorkerReply reply, Call({WorkerTask::kMemory, ""}, 0));
    if (!reply.status.ok()) return reply.status;
    if (reply.memory.levels.empty() || reply.memory.bandwidth.empty()) {
      return absl::InternalError("the kernel worker measured no memory");
    }
    memory_ = reply.memory;
  }
  return *memory_;
}

absl::StatusOr<Measurement> WorkerPool::MeasureFor(const LoopTree& tree, uint64_t tenant) {
  return Evaluate(WorkerTask::kMeasure, tree, tenant);
}

absl::StatusOr<Measurement> WorkerPool::RemeasureFor(const LoopTree& tree, uint64_t tenant) {
  return Evaluate(WorkerTask::kRemeasure, tree, tenant);
}

absl::StatusOr<Measurement> WorkerPool::Evaluate(WorkerTask task, const LoopTree& tree,
                                                 uint64_t tenant) {
  const bool again = task == WorkerTask::kRemeasure;
  const std::string key = absl::StrCat(PrintProgram(tree.program()), ScheduleKey(tree));
  {
    absl::MutexLock lock(&mu_);
    if (const auto* cached = cache_.Find(key); cached != nullptr && (!again || !cached->ok())) {
      ++stats_.cache_hits;
      return *cached;
    }
  }
  if (TooCostly(tree.program())) {
    const double budget = std::min(options_.max_kernel_seconds, options_.deadline_seconds);
    const double estimate = EstimateEvaluationSeconds(tree.program());
    absl::MutexLock lock(&mu_);
    ++stats_.refused;
    return absl::ResourceExhaustedError(absl::StrFormat(
        "Kernel too costly to evaluate on this server: %.3g GFLOP per run, an estimated %.1f s "
        "to verify and time, over the per-kernel budget of %.1f s (--max_kernel_seconds, at "
        "most --eval_deadline)",
        static_cast<double>(tree.program().Flops()) * 1e-9, estimate, budget));
  }
  absl::StatusOr<WorkerReply> reply = Call({task, PrintIr(tree)}, tenant);
  absl::StatusOr<Measurement> result = Measurement{};
  if (!reply.ok()) {
    result = reply.status();  // a crash (INTERNAL) or a hang (DEADLINE_EXCEEDED)
  } else if (reply->status.code() == absl::StatusCode::kResourceExhausted) {
    result = reply->status;  // code too large: the contract's own verdict
  } else if (!reply->status.ok()) {
    // Whatever else the worker could not do with a schedule the server accepted is an internal
    // failure of this step, never the client's INVALID_ARGUMENT.
    result = absl::InternalError(
        absl::StrCat("the kernel of this schedule could not be measured: ", reply->status.message()));
  } else {
    result = reply->measurement;
  }
  // A failure is kept either way; an abandoned run never (a re-timing verifies the kernel).
  const bool abandoned = result.ok() && result->timing == Measurement::Timing::kAbandoned;
  if (Cacheable(reply) && !abandoned && (!again || !result.ok())) {
    absl::MutexLock lock(&mu_);
    cache_.Insert(key, result);
  }
  return result;
}

absl::Status WorkerPool::RunExtension(std::string payload, uint64_t tenant) {
  absl::StatusOr<WorkerReply> reply = Call({WorkerTask::kExtension, std::move(payload)}, tenant);
  if (!reply.ok()) return reply.status();
  return reply->status;
}

WorkerPool::Stats WorkerPool::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  for (const auto& [tenant, waiting] : queues_) s.waiting += static_cast<int64_t>(waiting.size());
  return s;
}

}  // namespace looptool
