// What the client's SQLite files (schedule_store.h, tuning_records.h) share: opening one with
// its schema, and SqliteStatement, one prepared statement, finalized when it goes, with typed
// binds and column reads.
#ifndef LOOPTOOL_CLIENT_CPP_SQLITE_STATEMENT_H_
#define LOOPTOOL_CLIENT_CPP_SQLITE_STATEMENT_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace looptool::client {

// Opens (creating when missing) the SQLite file at `path`, to wait up to 10 s for other writers,
// and runs `schema` on it. INVALID_ARGUMENT, naming the file as `what` ("schedule store"), when
// it cannot be opened or is not an SQLite database; then nothing is left open.
inline absl::StatusOr<sqlite3*> OpenSqliteFile(const std::string& path, const char* schema,
                                               const std::string& what) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    const std::string message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::InvalidArgumentError(absl::StrCat("cannot open the ", what, " ", path, ": ",
                                                   message));
  }
  sqlite3_busy_timeout(db, 10000);
  char* error = nullptr;
  if (sqlite3_exec(db, schema, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    sqlite3_close(db);
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a LoopTool ", what, " (an SQLite database): ", message));
  }
  return db;
}

class SqliteStatement {
 public:
  SqliteStatement(sqlite3* db, const std::string& sql) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
  }
  ~SqliteStatement() { sqlite3_finalize(stmt_); }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  // Whether it was prepared (else sqlite3_errmsg of the database says why).
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  // Binds parameter `i` (1-based).
  void Text(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Real(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  void Int(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  // Column `i` (0-based) of the current row.
  std::string ColumnText(int i) {
    const unsigned char* t = sqlite3_column_text(stmt_, i);
    return t == nullptr ? "" : reinterpret_cast<const char*>(t);
  }
  double ColumnReal(int i) { return sqlite3_column_double(stmt_, i); }
  int64_t ColumnInt(int i) { return sqlite3_column_int64(stmt_, i); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

}  // namespace looptool::client

#endif  // LOOPTOOL_CLIENT_CPP_SQLITE_STATEMENT_H_
