// HostCpuModel: the name of the CPU kernels are timed on ("AMD EPYC 9R14"), as /proc/cpuinfo
// gives it. Schedules are fast on one CPU model and not another, so tuned results are kept per
// model (the schedule store) and reported with it.
#ifndef LOOPTOOL_BACKEND_TIMING_HOST_CPU_H_
#define LOOPTOOL_BACKEND_TIMING_HOST_CPU_H_

#include <string>

namespace looptool {

// The first "model name" of `cpuinfo_path`, whitespace collapsed; "unknown CPU" when there is none.
std::string HostCpuModel(const std::string& cpuinfo_path = "/proc/cpuinfo");

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_TIMING_HOST_CPU_H_
