#include "client/cpp/search/sketch_paths.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "util/status_macros.h"

namespace looptool::client::internal {

absl::StatusOr<std::vector<std::vector<int>>> ParseSketches(absl::string_view text,
                                                            const StateSource& space) {
  std::vector<std::vector<int>> paths;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<int> path;
    for (absl::string_view name : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      const int index = space.ActionIndex(std::string(name));
      if (index < 0) {
        return absl::InvalidArgumentError(absl::StrCat("the server's sketch action '", name,
                                                       "' is not in action space ",
                                                       space.action_space()));
      }
      path.push_back(index);
    }
    if (!path.empty()) paths.push_back(std::move(path));
  }
  return paths;
}

absl::StatusOr<std::vector<std::vector<int>>> ObserveSketches(const StateSource& start,
                                                              absl::Time deadline) {
  ASSIGN_OR_RETURN(std::unique_ptr<StateSource> probe, start.Fork());
  probe->set_deadline(deadline);
  ASSIGN_OR_RETURN(const Value text, probe->Observe("sketches"));
  return ParseSketches(text.text, start);
}

}  // namespace looptool::client::internal
