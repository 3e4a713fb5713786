#include "service/benchmark_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backend/ir/parser.h"
#include "backend/ir/printer.h"
#include "datasets/registry.h"

namespace looptool::service {
namespace {

// A URI is one token of printable ASCII: "benchmark://x/mm 64_64_64" is not a name of anything.
bool WellFormedUri(absl::string_view uri) {
  if (uri.empty() || uri.size() > 1024) return false;
  for (char c : uri) {
    if (c <= ' ' || c >= 127) return false;
  }
  return true;
}

}  // namespace

BenchmarkStore::BenchmarkStore(Limits limits, int64_t max_client_bytes, int64_t max_total_bytes,
                               int max_clients)
    : limits_(limits),
      max_client_bytes_(max_client_bytes),
      max_total_bytes_(max_total_bytes),
      max_clients_(static_cast<size_t>(std::max(1, max_clients))) {}

absl::Status BenchmarkStore::Add(absl::string_view client, absl::string_view owner,
                                 absl::string_view uri, absl::string_view program_text) {
  if (!WellFormedUri(uri)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Benchmark URI must be one token of printable characters (e.g. "
        "benchmark://<dataset>/<name> or file:///path), got '",
        uri, "'"));
  }
  absl::StatusOr<Program> program = ParseProgram(program_text, limits_);
  if (!program.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Malformed program for benchmark ", uri, ": ", program.status().message()));
  }
  if (std::optional<std::string> builtin = datasets::ResolveUri(uri)) {
    // Built-in benchmarks are immutable; sending one's own program back is harmless.
    absl::StatusOr<Program> original = ParseProgram(*builtin, Limits{});
    if (original.ok() && PrintProgram(*original) == PrintProgram(*program)) {
      return absl::OkStatus();
    }
    return absl::AlreadyExistsError(absl::StrCat(
        "Benchmark ", uri, " is built in and cannot be replaced; add your program under a URI "
        "of your own"));
  }
  const int64_t bytes = static_cast<int64_t>(uri.size() + program_text.size());
  absl::MutexLock lock(&mu_);
  auto c = clients_.find(client);
  if (c == clients_.end()) {
    std::optional<ClientIt> made = NewCache(client, owner);
    if (!made.has_value()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Too many clients hold benchmarks on this server (", max_clients_,
          ") and none holds more than yours; retry later"));
    }
    c = *made;
  }
  SetOwner(c, owner);
  if (auto old = c->second.by_uri.find(uri); old != c->second.by_uri.end()) {
    Erase(c, old);
  }
  Entry e{std::make_shared<const Program>(*std::move(program)), bytes, ++clock_};
  c->second.size += bytes;
  c->second.last_added = e.added;
  total_ += bytes;
  OwnerShare& share = owners_.find(c->second.owner)->second;
  share.bytes += bytes;
  share.by_age.emplace(e.added, std::make_pair(std::string(client), std::string(uri)));
  c->second.by_age.emplace(e.added, std::string(uri));
  c->second.by_uri.emplace(std::string(uri), std::move(e));
  EvictClientToFit(c);
  EvictTotalToFit();
  return absl::OkStatus();
}

std::optional<BenchmarkStore::ClientIt> BenchmarkStore::NewCache(absl::string_view client,
                                                                 absl::string_view owner) {
  if (clients_.size() >= max_clients_) {
    // The owner holding the most caches gives up its stalest, if it holds more than `owner`
    // would after; else `owner` gives up its own stalest, if it has one.
    auto largest = owners_.end();
    for (auto it = owners_.begin(); it != owners_.end(); ++it) {
      if (largest == owners_.end() || it->second.caches > largest->second.caches) largest = it;
    }
    auto mine = owners_.find(owner);
    const int holds = mine == owners_.end() ? 0 : mine->second.caches;
    std::string victim;
    if (largest != owners_.end() && largest->second.caches > holds + 1) {
      victim = largest->first;
    } else if (holds > 0) {
      victim = std::string(owner);
    } else {
      return std::nullopt;
    }
    auto stalest = clients_.end();
    for (auto it = clients_.begin(); it != clients_.end(); ++it) {
      if (it->second.owner != victim) continue;
      if (stalest == clients_.end() || it->second.last_added < stalest->second.last_added) {
        stalest = it;
      }
    }
    DropCache(stalest);
  }
  auto c = clients_.emplace(std::string(client), ClientCache{}).first;
  c->second.owner = std::string(owner);
  c->second.max_size = max_client_bytes_;
  ++owners_[c->second.owner].caches;
  return c;
}

void BenchmarkStore::SetOwner(ClientIt client, absl::string_view owner) {
  ClientCache& cache = client->second;
  if (cache.owner == owner) return;
  auto from = owners_.find(cache.owner);
  OwnerShare& to = owners_[std::string(owner)];
  for (const auto& [added, uri] : cache.by_age) {
    from->second.by_age.erase(added);
    to.by_age.emplace(added, std::make_pair(client->first, uri));
  }
  from->second.bytes -= cache.size;
  to.bytes += cache.size;
  ++to.caches;
  if (--from->second.caches == 0) owners_.erase(from);
  cache.owner = std::string(owner);
}

absl::StatusOr<std::shared_ptr<const Program>> BenchmarkStore::Load(absl::string_view client,
                                                                    absl::string_view uri) const {
  {
    absl::MutexLock lock(&mu_);
    if (auto c = clients_.find(client); c != clients_.end()) {
      if (auto it = c->second.by_uri.find(uri); it != c->second.by_uri.end()) {
        return it->second.program;
      }
    }
  }
  std::optional<std::string> text =
      WellFormedUri(uri) ? datasets::ResolveUri(uri) : std::nullopt;
  if (!text) return absl::NotFoundError(absl::StrCat("Benchmark not found: ", uri));
  absl::StatusOr<Program> program = ParseProgram(*text, limits_);
  if (!program.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Benchmark ", uri, " is over this server's caps: ", program.status().message()));
  }
  return std::make_shared<const Program>(*std::move(program));
}

int64_t BenchmarkStore::size_in_bytes(absl::string_view client) const {
  absl::MutexLock lock(&mu_);
  auto c = clients_.find(client);
  return c == clients_.end() ? 0 : c->second.size;
}

int64_t BenchmarkStore::max_size_in_bytes(absl::string_view client) const {
  absl::MutexLock lock(&mu_);
  auto c = clients_.find(client);
  return c == clients_.end() ? max_client_bytes_ : c->second.max_size;
}

int64_t BenchmarkStore::set_max_size_in_bytes(absl::string_view client, absl::string_view owner,
                                              int64_t bytes) {
  bytes = std::clamp<int64_t>(bytes, 0, max_client_bytes_);
  absl::MutexLock lock(&mu_);
  auto c = clients_.find(client);
  if (c == clients_.end()) {
    if (bytes == max_client_bytes_) return bytes;  // the default: nothing to keep
    if (clients_.size() >= max_clients_) return max_client_bytes_;  // kept only while it adds
    c = *NewCache(client, owner);
  }
  c->second.max_size = bytes;
  EvictClientToFit(c);
  return bytes;
}

int64_t BenchmarkStore::total_size_in_bytes() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

void BenchmarkStore::Erase(ClientIt client,
                           std::map<std::string, Entry, std::less<>>::iterator entry) {
  OwnerShare& share = owners_.find(client->second.owner)->second;
  client->second.size -= entry->second.bytes;
  share.bytes -= entry->second.bytes;
  total_ -= entry->second.bytes;
  share.by_age.erase(entry->second.added);
  client->second.by_age.erase(entry->second.added);
  client->second.by_uri.erase(entry);
}

void BenchmarkStore::DropCache(ClientIt client) {
  while (!client->second.by_uri.empty()) Erase(client, client->second.by_uri.begin());
  auto share = owners_.find(client->second.owner);
  if (--share->second.caches == 0) owners_.erase(share);
  clients_.erase(client);
}

void BenchmarkStore::EvictClientToFit(ClientIt client) {
  ClientCache& cache = client->second;
  while (cache.size > cache.max_size && !cache.by_age.empty()) {
    Erase(client, cache.by_uri.find(cache.by_age.begin()->second));
  }
}

void BenchmarkStore::EvictTotalToFit() {
  while (total_ > max_total_bytes_) {
    // The owner holding the most bytes loses its oldest benchmark.
    auto largest = owners_.end();
    for (auto it = owners_.begin(); it != owners_.end(); ++it) {
      if (largest == owners_.end() || it->second.bytes > largest->second.bytes) largest = it;
    }
    if (largest == owners_.end() || largest->second.by_age.empty()) return;
    const auto [client, uri] = largest->second.by_age.begin()->second;
    auto c = clients_.find(client);
    Erase(c, c->second.by_uri.find(uri));
  }
}

}  // namespace looptool::service
