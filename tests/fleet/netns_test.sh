#!/usr/bin/env bash
# Servers on separate network hosts: three network namespaces joined to this one by veth pairs
# (10.P.N.1 on this side, 10.P.N.2 in host N: addresses this test picks unused, makes and
# removes), a looptool-server in each bound to its own address with a shared token, a dataset's
# benchmarks tuned across them with `looptool tune --servers`, and host 2 killed mid-run (its server
# SIGKILLed, its link deleted). Every benchmark must arrive exactly once, with a result, and the
# schedule store must hold them all. Needs root (ip netns); says SKIPPED where it cannot have it.
set -euo pipefail
export PATH="/usr/sbin:/sbin:$PATH"
SERVER="$PWD/service/looptool-server"
LOOPTOOL="$PWD/client/cpp/looptool"
BENCHMARKS=12
TMP=$(mktemp -d "${TEST_TMPDIR:-/tmp}/netns.XXXXXX")
ID=$$
NS=() PIDS=() LINKS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for link in "${LINKS[@]}"; do ip link del "$link" 2>/dev/null || true; done
  for ns in "${NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

skip() { echo "netns_test: SKIPPED: $*"; exit 0; }
fail() { echo "netns_test: FAILED: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip command (Debian's iproute2)"
ip netns add "lt$ID-probe" 2>"$TMP/probe.err" || skip "ip netns add refused: $(cat "$TMP/probe.err")"
ip netns del "lt$ID-probe"

# A 10.P.0.0/16 that nothing on this machine routes.
prefix=""
for p in $(seq 200 254); do
  if ! ip -4 route show | grep -q "^10\.$p\."; then prefix="10.$p"; break; fi
done
[[ -n "$prefix" ]] || fail "no free 10.P.0.0/16 among 10.200..10.254"

echo "netns-test-token-$ID-$RANDOM" > "$TMP/token"
cpus=$(nproc)
addresses=()
for n in 1 2 3; do
  ns="lt$ID-h$n"
  ip netns add "$ns"
  NS+=("$ns")
  here="lt${ID}h$n" there="lt${ID}n$n"
  ip link add "$here" type veth peer name "$there" netns "$ns"
  LINKS+=("$here")
  ip addr add "$prefix.$n.1/24" dev "$here"
  ip link set "$here" up
  ip -n "$ns" addr add "$prefix.$n.2/24" dev "$there"
  ip -n "$ns" link set "$there" up
  ip -n "$ns" link set lo up
  mkdir -p "$TMP/h$n"
  ip netns exec "$ns" "$SERVER" --bind="$prefix.$n.2" --port=50051 \
    --auth_token_file="$TMP/token" --working_dir="$TMP/h$n" --timing_budget_ms=1 \
    --eval_cores=$(( (n - 1) % cpus )) >"$TMP/h$n/server.log" 2>&1 &
  PIDS+=($!)
  addresses+=("$prefix.$n.2:50051")
done
for n in 1 2 3; do
  for _ in $(seq 100); do [[ -s "$TMP/h$n/port.txt" ]] && break; sleep 0.1; done
  [[ -s "$TMP/h$n/port.txt" ]] || fail "server $n did not start: $(cat "$TMP/h$n/server.log")"
done
echo "netns_test: 3 hosts up: ${addresses[*]}"

servers=$(IFS=,; echo "${addresses[*]}")
"$LOOPTOOL" tune --dataset=mm64_256_16_range-v0 --split=test --max-benchmarks=$BENCHMARKS \
  --servers="$servers" --auth_token_file="$TMP/token" --time_limit=0.5 --json \
  --store="$TMP/schedules.db" >"$TMP/results.jsonl" 2>"$TMP/tune.err" &
client=$!
PIDS+=("$client")

# Kill host 2 once three results are in: it is then tuning its next benchmark.
for _ in $(seq 600); do
  [[ $(wc -l <"$TMP/results.jsonl") -ge 3 ]] && break
  sleep 0.05
done
kill -9 "${PIDS[1]}"
ip link del "lt${ID}h2"
echo "netns_test: host 2 killed after $(wc -l <"$TMP/results.jsonl") results"

wait "$client" || fail "looptool tune exited $?: $(cat "$TMP/tune.err")"
cat "$TMP/tune.err"

/usr/bin/python3 - "$TMP/results.jsonl" "$BENCHMARKS" "${addresses[1]}" <<'PY'
import collections, json, sys
path, expected, victim = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [json.loads(l) for l in open(path)]
count = collections.Counter(r["benchmark"] for r in rows)
twice = [b for b, n in count.items() if n != 1]
assert not twice, f"reported more than once: {twice}"
assert len(rows) == expected, f"{len(rows)} results, expected {expected}"
errors = [r for r in rows if "error" in r]
assert not errors, f"benchmarks without a result: {errors}"
assert all(r["gflops"] > 0 for r in rows)
servers = collections.Counter(r["server"] for r in rows)
redone = [r["benchmark"] for r in rows if r["attempts"] > 1]
assert len(redone) <= 1, f"more than the one in flight redone: {redone}"
survivors = [s for s in servers if s != victim]
assert len(survivors) == 2, f"the two live hosts did not both tune: {dict(servers)}"
print(f"netns_test: {len(rows)} benchmarks, each once; by host {dict(servers)}; "
      f"redone after the kill: {redone or 'none'}")
PY

stored=$("$LOOPTOOL" schedules --store="$TMP/schedules.db" --json | wc -l)
[[ "$stored" -eq $BENCHMARKS ]] || fail "the store holds $stored schedules, expected $BENCHMARKS"
echo "netns_test: PASSED ($stored schedules stored)"
