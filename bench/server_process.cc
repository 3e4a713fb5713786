#include "bench/server_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace looptool::bench {
namespace {

using Clock = std::chrono::steady_clock;

// VmRSS (MB) and Threads from /proc/<pid>/status; false when the process is gone.
bool ReadStatus(pid_t pid, double* rss_mb, int* threads) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return false;
  std::string line;
  bool any = false;
  *rss_mb = 0;
  *threads = 0;
  while (std::getline(in, line)) {
    long value = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %ld kB", &value) == 1) *rss_mb = value / 1024.0;
    if (std::sscanf(line.c_str(), "Threads: %ld", &value) == 1) *threads = static_cast<int>(value);
    any = true;
  }
  return any;
}

// The processes descended from `root`, found by scanning /proc/*/stat for parent ids.
std::vector<pid_t> Descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
      std::string stat;
      if (!std::getline(in, stat)) continue;
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      char state = 0;
      long ppid = 0;
      if (std::sscanf(stat.c_str() + paren + 1, " %c %ld", &state, &ppid) != 2) continue;
      if (state == 'Z') continue;
      children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
    }
    closedir(d);
  }
  std::vector<pid_t> out, todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

bool Executable(const std::string& path) {
  return access(path.c_str(), X_OK) == 0 && !std::filesystem::is_directory(path);
}

}  // namespace

std::string FindBinary(const char* argv0, const std::string& workspace_path) {
  std::vector<std::string> candidates;
  if (const char* dir = getenv("RUNFILES_DIR")) {
    candidates.push_back(absl::StrCat(dir, "/looptool/", workspace_path));
  }
  candidates.push_back(absl::StrCat(argv0, ".runfiles/looptool/", workspace_path));
  candidates.push_back(workspace_path);  // bazel run's working directory
  candidates.push_back("bazel-bin/" + workspace_path);
  for (const std::string& c : candidates) {
    if (Executable(c)) return c;
  }
  return "";
}

std::vector<std::string> SplitArgs(const std::string& spaced) {
  return absl::StrSplit(spaced, ' ', absl::SkipWhitespace());
}

bool StartServer(const std::string& binary, const std::vector<std::string>& extra,
                 const std::string& tag, ServerProcess* s, std::string* error) {
  s->binary = binary;
  std::string templ = absl::StrCat("/tmp/looptool-", tag, "-XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    *error = "cannot make a temporary directory";
    return false;
  }
  s->dir = templ;
  std::vector<std::string> args = {binary, "--port=0", "--working_dir=" + s->dir};
  args.insert(args.end(), extra.begin(), extra.end());
  s->args.clear();
  for (size_t i = 1; i < args.size(); ++i) s->args += (i > 1 ? " " : "") + args[i];
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = s->dir + "/server.log";
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int rc = posix_spawn(&s->pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *error = absl::StrCat("cannot start ", binary);
    s->pid = -1;
    return false;
  }
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (Clock::now() < deadline) {
    std::ifstream in(s->dir + "/port.txt");
    if (in >> s->port && s->port > 0) return true;
    int status = 0;
    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
      *error = absl::StrFormat("the server exited at start (status %d); see %s", status, log);
      s->pid = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling a file it writes
  }
  *error = absl::StrCat("the server wrote no port.txt in 120 s; see ", log);
  kill(s->pid, SIGKILL);
  waitpid(s->pid, nullptr, 0);
  s->pid = -1;
  return false;
}

std::string StopServer(pid_t pid, bool* exit_ok) {
  *exit_ok = false;
  if (kill(pid, SIGTERM) != 0) return "could not be signalled";
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (Clock::now() < deadline) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) {
        *exit_ok = WEXITSTATUS(status) == 0;
        return absl::StrFormat("exited %d", WEXITSTATUS(status));
      }
      if (WIFSIGNALED(status)) return absl::StrFormat("killed by signal %d", WTERMSIG(status));
      return "ended";
    }
    if (r < 0) return "already reaped";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return "did not exit within 60 s of SIGTERM (killed)";
}

ProcessMemory SampleProcessMemory(pid_t pid) {
  ProcessMemory m;
  if (pid <= 0) return m;
  m.ok = ReadStatus(pid, &m.server_mb, &m.threads);
  if (!m.ok) return m;
  for (pid_t c : Descendants(pid)) {
    double mb = 0;
    int threads = 0;
    if (ReadStatus(c, &mb, &threads)) {
      ++m.workers;
      m.workers_mb += mb;
    }
  }
  return m;
}

}  // namespace looptool::bench
