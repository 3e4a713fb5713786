// WriteKernelLibrary: tuned kernels as a library to take away (`looptool export`). Into one
// directory it writes
//   <name>.h       the C contract of every kernel (shapes, layouts, roles, ISA, reentrancy),
//   lib<name>.so   a shared library and lib<name>.a a static archive, the same objects in both,
//   <name>.json    the manifest: per kernel its program, tensors (`"streamed": true` on an output
//                  the code writes with non-temporal stores when it is 64-byte aligned: a
//                  server's --stream_stores_min_bytes), schedule, the GFLOPS the server
//                  measured for it, and where and when it was tuned.
// The machine code is the server's (the `machine_code` observation, position-independent),
// wrapped into an ELF object by the assembler (.incbin) and linked by the C compiler; the only
// code of our own is a C wrapper per kernel and the CPU check. Symbols, per kernel NAME:
//   int NAME(float* out..., const float* in...)   tensors in id order; returns 0, or -1
//                                                  without running when the CPU lacks the ISA
//   void NAME_tensors(float* const* tensors)       the raw entry, unchecked
//   const char* <name>_cpu_missing(void)           NULL, or a sentence naming missing features
#ifndef LOOPTOOL_CLIENT_CPP_KERNEL_LIBRARY_H_
#define LOOPTOOL_CLIENT_CPP_KERNEL_LIBRARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace looptool::client {

// One kernel: what the server said about it, and where its schedule came from.
struct ExportedKernel {
  std::string name;       // a C identifier, unique in the library (KernelName)
  std::string benchmark;  // URI
  std::string abi_json;   // the `kernel_abi` observation (backend/codegen/kernel_abi.h)
  std::string code;       // the `machine_code` observation
  // The schedule.
  std::string action_space;
  std::vector<std::string> actions;
  std::string loop_tree;
  // Measured by the exporting server, on this code.
  double gflops = 0;
  double peak_gflops = 0;
  std::string host_cpu;
  std::string server;
  // Where the schedule was tuned (empty / 0 when it was not from a store or a tune run).
  std::string tuned_host_cpu;
  std::string tuned_search;
  double tuned_gflops = 0;
  int64_t tuned_unix = 0;
};

struct LibraryOptions {
  std::string directory;                // created when missing
  std::string name = "looptool_kernels";  // a C identifier: the files' and the check's prefix
  std::string cc = "gcc";               // C compiler and assembler driver (PATH is searched)
  std::string ar = "ar";
};

struct LibraryFiles {
  std::string header, shared_library, static_library, manifest;
};

// A C identifier from a benchmark URI's last component ("benchmark://conv2d-v0/resnet18_conv2_3x3"
// -> "resnet18_conv2_3x3"): other characters become '_', a leading digit gets a '_' before it.
std::string KernelName(const std::string& benchmark);

// INVALID_ARGUMENT when options.name is not a C identifier (checked before anything is done).
absl::Status CheckLibraryName(const std::string& name);

// INVALID_ARGUMENT for no kernels, a name that is not a C identifier or repeats, an empty
// code or an abi_json that is not a kernel ABI; INTERNAL (with the tool's output) when the
// compiler, assembler or archiver fails or is missing.
absl::StatusOr<LibraryFiles> WriteKernelLibrary(const std::vector<ExportedKernel>& kernels,
                                                const LibraryOptions& options);

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_KERNEL_LIBRARY_H_
