// replan_records: every measurement of a tuning-records file (client/cpp/tuning_records.h) with
// its plan_features computed again by today's code generator (backend/costmodel/plan_features.h):
// its actions replayed from its program's start state (LoopTree::Initial, as a server starts a
// benchmark), the features of the state they end in read off Lower(tree, run's isa). Features
// added since a record was written get their values; those it had are checked against today's.
// A developer's tool: cost models train on one feature version (client/python/looptool/rl/
// plan_cost.py).
//
//   bazel run //tools:replan_records -- --records=/abs/path/records.db [--check]
//
// Prints, as one JSON object: kernels read, replayed (updated unless --check), failed (the
// program does not parse or an action name is unknown: left as they were),
// changed (a feature it had differs from today's by more than 1e-6; `first_changed` names one),
// added (today's names it lacked, at least one). Exit 2, the file as it was, when it cannot be
// opened, is no records file, or cannot be read or written to the end (locked by a writer
// for more than 10 s, say); 0 otherwise.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "backend/actions/action.h"
#include "backend/actions/apply.h"
#include "backend/codegen/isa.h"
#include "backend/costmodel/plan_features.h"
#include "backend/ir/limits.h"
#include "backend/ir/parser.h"
#include "backend/schedule/loop_tree.h"
#include "client/cpp/sqlite_statement.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, records, "", "the tuning-records file to update in place");
ABSL_FLAG(bool, check, false, "compare only: write nothing");

namespace looptool {
namespace {

struct Replayed {
  bool ok = false;
  std::string features;  // PlanFeaturesJson of the state
  std::string why;       // when not ok
};

Replayed Replay(const std::shared_ptr<const Program>& program, const std::string& actions_json,
                Isa isa, const Limits& limits) {
  const nlohmann::json actions = nlohmann::json::parse(actions_json, nullptr, false);
  if (!actions.is_array()) return {false, "", "actions are not a JSON array"};
  LoopTree tree = LoopTree::Initial(program);
  for (const nlohmann::json& a : actions) {
    if (!a.is_string()) return {false, "", "an action is not a string"};
    absl::StatusOr<Action> action = ActionFromName(a.get<std::string>());
    if (!action.ok()) return {false, "", std::string(action.status().message())};
    // (an action without effect is recorded as the search stepped it; the state stays)
    tree = Apply(tree, *action, limits).tree;
  }
  return {true, PlanFeaturesJson(tree, isa), ""};
}

// Rolls back what this run wrote, says why on stderr, closes `db`: exit status 2.
int Fail(sqlite3* db, const std::string& path, const std::string& what) {
  std::cerr << "replan_records: " << path << ": " << what << ": " << sqlite3_errmsg(db)
            << " (nothing changed)\n";
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close_v2(db);  // (freed once the caller's statements are)
  return 2;
}

int Main() {
  const std::string path = absl::GetFlag(FLAGS_records);
  const bool check = absl::GetFlag(FLAGS_check);
  std::error_code error;
  if (path.empty() || !std::filesystem::is_regular_file(path, error)) {
    std::cerr << "replan_records: --records must name a tuning records file, not '" << path
              << "'\n";
    return 2;
  }
  absl::StatusOr<sqlite3*> opened = client::OpenSqliteFile(path, "", "tuning records file");
  if (!opened.ok()) {
    std::cerr << "replan_records: " << opened.status().message() << "\n";
    return 2;
  }
  sqlite3* db = *opened;
  const Limits limits;
  int64_t read = 0, replayed = 0, failed = 0, changed = 0, added = 0;
  std::string first_changed, first_failed;
  {
    client::SqliteStatement select(
        db,
        "SELECT m.id, p.id, p.program, r.isa, m.actions, m.plan_features FROM measurements m "
        "JOIN runs r ON m.run_id = r.id JOIN programs p ON r.program_id = p.id ORDER BY p.id");
    client::SqliteStatement update(db, "UPDATE measurements SET plan_features = ? WHERE id = ?");
    if (!select.ok() || !update.ok()) {
      std::cerr << "replan_records: " << path << " is not a tuning records file: "
                << sqlite3_errmsg(db) << "\n";
      sqlite3_close_v2(db);  // (freed once the statements are)
      return 2;
    }
    // All or nothing: one transaction, rolled back on the first error.
    if (sqlite3_exec(db, check ? "BEGIN" : "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) !=
        SQLITE_OK) {
      return Fail(db, path, "cannot start writing");
    }
    int64_t program_id = -1;
    std::shared_ptr<const Program> program;
    std::string program_error;
    int rc;
    while ((rc = sqlite3_step(select.get())) == SQLITE_ROW) {
      ++read;
      const int64_t id = select.ColumnInt(0);
      if (select.ColumnInt(1) != program_id) {
        program_id = select.ColumnInt(1);
        absl::StatusOr<Program> p = ParseProgram(select.ColumnText(2), limits);
        program = p.ok() ? std::make_shared<const Program>(*std::move(p)) : nullptr;
        program_error = p.ok() ? "" : std::string(p.status().message());
      }
      absl::StatusOr<Isa> isa = ParseIsa(select.ColumnText(3));
      Replayed r = program == nullptr ? Replayed{false, "", program_error}
                   : !isa.ok()        ? Replayed{false, "", std::string(isa.status().message())}
                                      : Replay(program, select.ColumnText(4), *isa, limits);
      if (!r.ok) {
        if (failed++ == 0) first_failed = "measurement " + std::to_string(id) + ": " + r.why;
        continue;
      }
      ++replayed;
      const nlohmann::json old = nlohmann::json::parse(select.ColumnText(5), nullptr, false);
      const nlohmann::json now = nlohmann::json::parse(r.features);
      bool differs = false, more = false;
      for (auto it = now.begin(); it != now.end(); ++it) {
        if (!old.is_object() || !old.contains(it.key())) {
          more = true;
        } else if (!old[it.key()].is_number() ||
                   std::abs(old[it.key()].get<double>() - it.value().get<double>()) > 1e-6) {
          if (!differs && changed == 0) {
            first_changed = "measurement " + std::to_string(id) + ": " + it.key() + " " +
                            old[it.key()].dump() + " -> " + it.value().dump();
          }
          differs = true;
        }
      }
      changed += differs;
      added += more;
      if (!check) {
        update.Text(1, r.features);
        update.Int(2, id);
        const int written = sqlite3_step(update.get());
        sqlite3_reset(update.get());
        if (written != SQLITE_DONE) return Fail(db, path, "cannot write its features");
      }
    }
    if (rc != SQLITE_DONE) return Fail(db, path, "cannot read its measurements");
    if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return Fail(db, path, "cannot commit");
    }
  }
  sqlite3_close(db);
  nlohmann::ordered_json out = {{"records", path},      {"kernels", read},
                                {"replayed", replayed}, {"failed", failed},
                                {"changed", changed},   {"added", added},
                                {"updated", !check}};
  if (!first_changed.empty()) out["first_changed"] = first_changed;
  if (!first_failed.empty()) out["first_failed"] = first_failed;
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace looptool

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return looptool::Main();
}
