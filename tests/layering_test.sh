#!/usr/bin/env bash
# The design card's layering, checked on the sources the build cannot see: nothing under
# backend/ includes gRPC, protobuf, the wire protocol or the service (the build's visibility
# refuses the dependencies themselves), and the production server carries no test code (fault
# injection lives in tests/faults, linked only by test binaries).
set -uo pipefail
failures=0
backend_files=()
for f in "$@"; do
  [[ "$f" == backend/* ]] && backend_files+=("$f")
done
if [[ ${#backend_files[@]} -lt 50 ]]; then
  echo "FAIL: expected the backend's sources as arguments, got ${#backend_files[@]} files"
  exit 1
fi
if hits=$(grep -nE '#include *[<"](grpc|grpcpp|google/protobuf|proto/|service/|client/)' \
    "${backend_files[@]}"); then
  echo "FAIL: backend/ includes the wire or the service:"
  echo "$hits"
  failures=$((failures + 1))
fi
server=service/looptool-server
for marker in test.inject_fault looptool-test-server; do
  if grep -q "$marker" "$server"; then
    echo "FAIL: the production server contains test code ($marker)"
    failures=$((failures + 1))
  fi
done
test_server=tests/faults/looptool-test-server
if ! grep -q "test.inject_fault" "$test_server"; then
  echo "FAIL: the check cannot see fault injection even in the test server"
  failures=$((failures + 1))
fi
echo "checked ${#backend_files[@]} backend files, $server and $test_server"
if [[ $failures -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $((failures > 0))
