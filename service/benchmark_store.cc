#include "service/benchmark_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backend/ir/parser.h"
#include "datasets/registry.h"

namespace looptool::service {

BenchmarkStore::BenchmarkStore(Limits limits, int64_t max_size_in_bytes)
    : limits_(limits), max_size_(max_size_in_bytes) {}

absl::Status BenchmarkStore::Add(absl::string_view uri, absl::string_view program_text) {
  if (!absl::StartsWith(uri, "benchmark://") || uri.size() <= 12) {
    return absl::InvalidArgumentError(
        absl::StrCat("Benchmark URI must look like benchmark://<dataset>/<name>, got '", uri,
                     "'"));
  }
  absl::StatusOr<Program> program = ParseProgram(program_text, limits_);
  if (!program.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Malformed program for benchmark ", uri, ": ", program.status().message()));
  }
  absl::MutexLock lock(&mu_);
  auto it = added_.find(uri);
  if (it != added_.end()) {
    size_ -= it->second.bytes;
    by_age_.erase(it->second.added);
    added_.erase(it);
  }
  Entry e{std::make_shared<const Program>(*std::move(program)),
          static_cast<int64_t>(uri.size() + program_text.size()), ++clock_};
  size_ += e.bytes;
  by_age_.emplace(e.added, std::string(uri));
  added_.emplace(std::string(uri), std::move(e));
  EvictToFit();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Program>> BenchmarkStore::Load(absl::string_view uri) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = added_.find(uri);
    if (it != added_.end()) return it->second.program;
  }
  std::optional<std::string> text = datasets::ResolveUri(uri);
  if (!text) return absl::NotFoundError(absl::StrCat("Benchmark not found: ", uri));
  absl::StatusOr<Program> program = ParseProgram(*text, limits_);
  if (!program.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Benchmark ", uri, " is over this server's caps: ", program.status().message()));
  }
  return std::make_shared<const Program>(*std::move(program));
}

int64_t BenchmarkStore::size_in_bytes() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

int64_t BenchmarkStore::max_size_in_bytes() const {
  absl::MutexLock lock(&mu_);
  return max_size_;
}

void BenchmarkStore::set_max_size_in_bytes(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  max_size_ = bytes;
  EvictToFit();
}

void BenchmarkStore::EvictToFit() {
  while (size_ > max_size_ && !by_age_.empty()) {
    auto oldest = added_.find(by_age_.begin()->second);
    size_ -= oldest->second.bytes;
    added_.erase(oldest);
    by_age_.erase(by_age_.begin());
  }
}

}  // namespace looptool::service
