#!/usr/bin/env bash
# Runs every test: installs missing Debian packages, then `bazel test //...`, then docker/test.sh
# (the container images), clang's thread-safety analysis over every C++ target (`--config=tsa`,
# in its own output base), mypy over the Python package (tools/mypy.sh), then the backend and
# service tests again under ASan + UBSan (`--config=asan`). Prints one line per test target and a
# closing "tests: N passed, M failed" line (and the GoogleTest/unittest case counts) over all of
# it; exits non-zero if any failed. Extra arguments go to both `bazel test` runs.
# LOOPTOOL_SKIP_ASAN=1 skips the sanitizer run.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

tsa_base="${HOME}/.cache/looptool-tsa"
trap 'bazel shutdown >/dev/null 2>&1; bazel --output_base="$tsa_base" shutdown >/dev/null 2>&1' EXIT
passed=0
failed=0
cases_passed=0
cases_failed=0

# Runs `bazel test` with the given arguments and adds its targets and cases to the totals.
run_tests() {
  local log
  log=$(mktemp)
  bazel test "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  passed=$((passed + $(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")))
  failed=$((failed + $(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")))
  for xml in $(find -L bazel-testlogs/ -name test.xml -not -path '*/run_*_of_*' 2>/dev/null); do
    local n f ran
    # A sharded test's cases are in its shards' files; its own file is not counted again.
    if compgen -G "$(dirname "$xml")/shard_*_of_*" > /dev/null; then continue; fi
    n=$(grep -o '<testcase ' "$xml" | wc -l)
    f=$(grep -oE '<failure' "$xml" | wc -l)
    # Python's unittest writes no XML: Bazel records one case; count unittest's own.
    ran=$(grep -oE '^Ran [0-9]+ tests?' "$(dirname "$xml")/test.log" 2>/dev/null | grep -oE '[0-9]+')
    if [[ -n "$ran" && "$n" -le 1 ]]; then n=$ran; fi
    cases_passed=$((cases_passed + n - f))
    cases_failed=$((cases_failed + f))
  done
  rm -f "$log"
  return "$rc"
}

run_tests //... "$@"
rc=$?
# One check that is not a Bazel test target: run, counted and reported like one.
check() {
  local name=$1
  shift
  echo "== $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "$name PASSED"
  else
    failed=$((failed + 1))
    echo "$name FAILED"
    [[ $rc -eq 0 ]] && rc=1
  fi
}
# The container images: built and run (two pinned containers, a tune against each, a clean
# stop) while bazel-bin holds the plain build. Skipped, saying why, where no engine can run.
check "docker/test.sh (the server image, two containers)" docker/test.sh
# Every C++ target, listed by the plain build (in the thread-safety build's output base //...
# would walk the plain build's external repositories through bazel-<checkout's name>, whatever
# the checkout is called).
tsa_targets="$(mktemp)"
bazel query 'kind("cc_(library|binary|test) rule", //...)' > "$tsa_targets" 2>/dev/null
check "thread-safety analysis (clang-14 -Werror=thread-safety, --config=tsa)" \
  bazel --output_base="$tsa_base" build --config=tsa --target_pattern_file="$tsa_targets"
rm -f "$tsa_targets"
check "mypy (the Python package's type hints, tools/mypy.sh)" tools/mypy.sh
if [[ "${LOOPTOOL_SKIP_ASAN:-0}" != 1 ]]; then
  echo "== the backend and service tests under ASan + UBSan (--config=asan)"
  run_tests --config=asan //tests/backend/... //tests/service/... "$@"
  asan_rc=$?
  [[ $rc -eq 0 ]] && rc=$asan_rc
fi
echo "test cases: ${cases_passed} passed, ${cases_failed} failed"
echo "tests: ${passed} passed, ${failed} failed"
exit "$rc"
