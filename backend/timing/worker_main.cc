#include "backend/timing/worker_main.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "backend/codegen/isa.h"
#include "backend/schedule/ir_text.h"
#include "backend/timing/local_timer.h"
#include "backend/timing/worker_protocol.h"
#include "backend/ir/limits.h"

namespace looptool {
namespace {

constexpr char kWorkerFlag[] = "--looptool_worker";

absl::StatusOr<WorkerArgs> ParseArgs(int argc, char** argv) {
  WorkerArgs a;
  for (int i = 2; i < argc; ++i) {
    absl::string_view arg = argv[i];
    absl::string_view v = arg;
    if (absl::ConsumePrefix(&v, "--fd=") && absl::SimpleAtoi(v, &a.fd)) continue;
    v = arg;
    if (absl::ConsumePrefix(&v, "--core=") && absl::SimpleAtoi(v, &a.core)) continue;
    v = arg;
    if (absl::ConsumePrefix(&v, "--isa=")) { a.isa = std::string(v); continue; }
    v = arg;
    if (absl::ConsumePrefix(&v, "--budget_ms=") && absl::SimpleAtod(v, &a.budget_ms)) continue;
    v = arg;
    if (absl::ConsumePrefix(&v, "--max_loops=") && absl::SimpleAtoi(v, &a.max_loops)) continue;
    v = arg;
    if (absl::ConsumePrefix(&v, "--stream_output_min_bytes=") &&
        absl::SimpleAtoi(v, &a.stream_output_min_bytes)) {
      continue;
    }
    if (arg == "--timing=adaptive" || arg == "--timing=fixed") {
      a.adaptive = arg == "--timing=adaptive";
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("bad worker argument: ", arg));
  }
  return a;
}

WorkerReply Serve(const WorkerRequest& request, LocalTimer& evaluator, const Limits& limits,
                  const WorkerExtension& extension) {
  WorkerReply reply;
  switch (request.task) {
    case WorkerTask::kPeak: {
      absl::StatusOr<double> peak = evaluator.PeakGflops();
      if (peak.ok()) {
        reply.measurement.gflops = *peak;
      } else {
        reply.status = peak.status();
      }
      break;
    }
    case WorkerTask::kMemory: {
      absl::StatusOr<MemoryProfile> memory = evaluator.Memory();
      if (memory.ok()) {
        reply.memory = *std::move(memory);
      } else {
        reply.status = memory.status();
      }
      break;
    }
    case WorkerTask::kExtension:
      if (!extension) {
        reply.status = absl::UnimplementedError("this kernel worker has no extension");
        break;
      }
      reply = extension(request.payload);
      break;
    case WorkerTask::kPrepare: {
      absl::StatusOr<LoopTree> tree = ParseIr(request.payload, limits);
      if (!tree.ok()) {
        reply.status = tree.status();
        break;
      }
      reply.measurement.seconds = evaluator.Prepare(*tree);
      break;
    }
    case WorkerTask::kMeasure:
    case WorkerTask::kRemeasure: {
      absl::StatusOr<LoopTree> tree = ParseIr(request.payload, limits);
      if (!tree.ok()) {
        reply.status = tree.status();
        break;
      }
      absl::StatusOr<Measurement> m = request.task == WorkerTask::kMeasure
                                          ? evaluator.Measure(*tree)
                                          : evaluator.RemeasureFor(*tree, 0);
      if (m.ok()) {
        reply.measurement = *m;
      } else {
        reply.status = m.status();
      }
      break;
    }
  }
  return reply;
}

}  // namespace

std::vector<std::string> WorkerArgs::ToArgv() const {
  return {kWorkerFlag, absl::StrCat("--fd=", fd), absl::StrCat("--core=", core),
          absl::StrCat("--isa=", isa), absl::StrCat("--budget_ms=", budget_ms),
          absl::StrCat("--max_loops=", max_loops),
          absl::StrCat("--stream_output_min_bytes=", stream_output_min_bytes),
          adaptive ? "--timing=adaptive" : "--timing=fixed"};
}

std::optional<int> MaybeRunKernelWorker(int argc, char** argv,
                                        const WorkerExtension& extension) {
  if (argc < 2 || std::strcmp(argv[1], kWorkerFlag) != 0) return std::nullopt;
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the pool
  absl::StatusOr<WorkerArgs> args = ParseArgs(argc, argv);
  if (!args.ok()) return 2;
  if (args->core >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(args->core, &set);
    sched_setaffinity(0, sizeof(set), &set);
  }
  absl::StatusOr<Isa> isa = ParseIsa(args->isa);
  if (!isa.ok()) return 2;
  LocalTimer::Options options;
  options.isa = *isa;
  options.codegen.stream_output_min_bytes = args->stream_output_min_bytes;
  options.timing.budget_seconds = args->budget_ms / 1000.0;
  options.adaptive = args->adaptive;
  LocalTimer evaluator(options);
  // The server validated the program against all its limits; the IR it sends adds schedule
  // lines to the program text, so only the frame size bounds it here.
  Limits limits;
  limits.max_loops = args->max_loops;
  limits.max_program_bytes = kMaxFrameBytes;
  limits.max_extent = int64_t{1} << 23;  // upstream loop_tool-v0's vectors (backend/compat)
  while (true) {
    absl::StatusOr<std::string> frame = ReadFrame(args->fd, -1);
    if (!frame.ok()) return 0;  // the pool closed the socket
    absl::StatusOr<WorkerRequest> request = DecodeRequest(*frame);
    WorkerReply reply;
    if (request.ok()) {
      reply = Serve(*request, evaluator, limits, extension);
    } else {
      reply.status = request.status();
    }
    if (!WriteFrame(args->fd, EncodeReply(reply)).ok()) return 0;
  }
}

}  // namespace looptool
