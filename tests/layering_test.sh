#!/usr/bin/env bash
# The design card's layering, checked on the sources the build cannot see: nothing under
# backend/ includes gRPC, protobuf, the wire protocol or the service, nothing under util/ includes
# any layer (the build's visibility refuses the dependencies themselves), and the production
# server carries no test code (fault injection lives in tests/faults, linked only by test
# binaries).
set -uo pipefail
failures=0
backend_files=()
util_files=()
for f in "$@"; do
  [[ "$f" == backend/* ]] && backend_files+=("$f")
  [[ "$f" == util/* ]] && util_files+=("$f")
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
# util/ is layer-neutral: it includes no layer of ours and neither gRPC nor the code generator.
if [[ ${#util_files[@]} -lt 4 ]]; then
  echo "FAIL: expected util/'s sources as arguments, got ${#util_files[@]} files"
  failures=$((failures + 1))
elif hits=$(grep -nE '#include *[<"](grpc|grpcpp|google/protobuf|xbyak|proto/|service/|client/|backend/|datasets/)' \
    "${util_files[@]}"); then
  echo "FAIL: util/ includes a layer:"
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
echo "checked ${#backend_files[@]} backend files, ${#util_files[@]} util files, $server and $test_server"
if [[ $failures -eq 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; fi
exit $((failures > 0))
