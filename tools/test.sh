#!/usr/bin/env bash
# Runs every test: installs missing Debian packages, then `bazel test //...`. Prints one line per
# test target and a closing "tests: N passed, M failed" line (and the GoogleTest/pytest case
# counts); exits with Bazel's status. Extra arguments go to `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh || exit 1

trap 'bazel shutdown >/dev/null 2>&1' EXIT
log=$(mktemp)
bazel test //... "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD)' "$log")
cases_passed=0
cases_failed=0
for xml in $(find -L bazel-testlogs/ -name test.xml -not -path '*/run_*_of_*' 2>/dev/null); do
  n=$(grep -o '<testcase ' "$xml" | wc -l)
  f=$(grep -oE '<failure' "$xml" | wc -l)
  # Python's unittest writes no XML: Bazel records one case; count unittest's own.
  ran=$(grep -oE '^Ran [0-9]+ tests?' "$(dirname "$xml")/test.log" 2>/dev/null | grep -oE '[0-9]+')
  if [[ -n "$ran" && "$n" -le 1 ]]; then n=$ran; fi
  cases_passed=$((cases_passed + n - f))
  cases_failed=$((cases_failed + f))
done
echo "test cases: ${cases_passed} passed, ${cases_failed} failed"
echo "tests: ${passed} passed, ${failed} failed"
rm -f "$log"
exit "$rc"
