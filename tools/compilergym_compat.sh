#!/usr/bin/env bash
# Runs CompilerGym v0.2.5's own, unmodified Python client against a LoopTool server: CompilerGym's
# tests/loop_tool/actions_test.py (pytest), its examples/loop_tool_sweep.py, and
# tests/compat/cg_client_check.py (compiler_gym.make("loop_tool-v0", service=...) and
# ClientServiceCompilerEnv on LoopTool's own spaces, step by step).
#
# A MANUAL check: CI cannot fetch CompilerGym (and must not vendor it), so tools/test.sh does not
# run this. Usage:
#
#   tools/compilergym_compat.sh [SOURCE]
#
# SOURCE is a CompilerGym checkout (a directory holding compiler_gym/ and tests/loop_tool/, used
# as it is) or a git repository, bare or not, from which tag $CG_TAG (default v0.2.5) is
# extracted. Default: /work/.mirror/facebookresearch+CompilerGym/repo if present; otherwise the
# script says how to get one and exits 0 ("compilergym: skipped").
#
# Everything of CompilerGym's goes into a temporary directory (removed at the end; KEEP_TMP=1
# keeps it): the sources, the _pb2 modules generated from ITS proto with Debian's protoc and
# grpc_python_plugin, and the build-generated compiler_gym/config.py and util/version.py. gym and
# loop_tool_py are not in Debian; tests/compat/stubs stands in for them, and its sitecustomize.py
# points the registered loop_tool-v0 environment at our server (LOOPTOOL_CG_SERVICE), so that
# CompilerGym's files run unchanged. Missing Debian packages are installed first.
#
# Prints `compilergym: N passed, M failed` (CompilerGym's tests + the example + our checks) and
# exits 1 if anything failed. Environment: CG_TAG (v0.2.5), CG_DEFAULT_SOURCE (the default
# SOURCE), SWEEP_K ("1 4": loop_tool_sweep's vector sizes in Ki elements), KEEP_TMP.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
python=/usr/bin/python3 # Debian's: its grpcio and protobuf match Debian's protoc
tag=${CG_TAG:-v0.2.5}
default_source=${CG_DEFAULT_SOURCE:-/work/.mirror/facebookresearch+CompilerGym/repo}

source=${1:-}
if [[ -z "$source" ]]; then
  if [[ -d "$default_source" ]]; then
    source=$default_source
  else
    cat <<EOF
No CompilerGym source given and $default_source is absent. Get one with
  git clone --branch $tag https://github.com/facebookresearch/CompilerGym /tmp/CompilerGym
and run: $0 /tmp/CompilerGym
compilergym: skipped
EOF
    exit 0
  fi
fi

# --- Debian packages ---------------------------------------------------------------------------
# The server's build dependencies, and what CompilerGym's client, tests and example need.
packages=(
  git protobuf-compiler protobuf-compiler-grpc
  python3 python3-grpcio python3-protobuf python3-numpy python3-networkx
  # CompilerGym v0.2.5's client imports (its requirements.txt, as far as Debian 12 has them)
  python3-pydantic python3-deprecated python3-fasteners python3-requests python3-absl
  python3-humanize python3-tabulate python3-docker
  # its tests and example
  python3-pytest python3-flaky python3-pytest-timeout python3-typer
)
tools/setup.sh "${packages[@]}"

# --- CompilerGym's sources, into a temporary directory -----------------------------------------
tmp=$(mktemp -d /tmp/looptool-compilergym.XXXXXX)
server_pid=
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [[ -n "${KEEP_TMP:-}" ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
cg=$tmp/cg
mkdir -p "$cg"
wanted=(compiler_gym tests examples tox.ini VERSION)
if [[ -f "$source/compiler_gym/__init__.py" && -d "$source/tests/loop_tool" ]]; then
  echo "compilergym_compat: using the checkout $source" >&2
  cp -r "${wanted[@]/#/$source/}" "$cg/"
elif git -C "$source" rev-parse -q --verify "$tag^{commit}" >/dev/null 2>&1; then
  echo "compilergym_compat: extracting $tag from $source" >&2
  # A mirror may lack some large blobs (git archive would stop there): leave those out.
  excludes=()
  git -C "$source" ls-tree -r "$tag" -- "${wanted[@]}" >"$tmp/tree"
  cut -f1 "$tmp/tree" | cut -d' ' -f3 |
    git -C "$source" cat-file --batch-check='%(objectname) %(objecttype)' >"$tmp/kinds"
  while IFS=$'\t' read -r meta path; do
    excludes+=(":(exclude)$path")
  done < <(paste -d' ' "$tmp/kinds" "$tmp/tree" | awk '$2 == "missing"' | cut -d' ' -f3-)
  # (git still names an excluded missing blob on stderr; the archive is complete without it.)
  git -C "$source" archive "$tag" -- "${wanted[@]}" "${excludes[@]}" 2>"$tmp/archive.err" |
    tar -x -C "$cg" || { cat "$tmp/archive.err" >&2; exit 1; }
else
  echo "compilergym_compat: $source is neither a CompilerGym checkout nor a git repository" \
    "with $tag" >&2
  exit 2
fi
version=$(cat "$cg/VERSION")
[[ "$version" == 0.2.5 ]] || echo "compilergym_compat: WARNING: CompilerGym $version, not 0.2.5" >&2

# What CompilerGym's build generates: the protocol's Python modules, config.py, version.py.
(cd "$cg" &&
  protoc -I . --python_out=. --grpc_python_out=. \
    --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
    compiler_gym/service/proto/compiler_gym_service.proto &&
  "$python" compiler_gym/make_config.py --out-file-path compiler_gym/config.py &&
  echo "__version__ = \"$version\"" >compiler_gym/util/version.py)

# --- our server ---------------------------------------------------------------------------------
nice -n 10 bazel build //service:looptool-server >&2
cp bazel-bin/service/looptool-server "$tmp/" # a private copy: concurrent rebuilds can't touch it
mkdir -p "$tmp/server"
nice -n 10 "$tmp/looptool-server" --upstream_spaces_first --port=0 --working_dir="$tmp/server" >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 300); do
  [[ -s "$tmp/server/port.txt" ]] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; exit 1; }
  sleep 0.1
done
address=127.0.0.1:$(cat "$tmp/server/port.txt")
echo "compilergym_compat: $(head -1 "$tmp/server.log")" >&2

export PYTHONPATH=$cg:$repo/tests/compat/stubs
export COMPILER_GYM_SITE_DATA=$tmp/site_data COMPILER_GYM_CACHE=$tmp/cache
export COMPILER_GYM_TRANSIENT_CACHE=$tmp/transient COMPILER_GYM_LOGS=$tmp/logs
passed=0
failed=0

# --- 1. CompilerGym's tests/loop_tool/actions_test.py -------------------------------------------
# From the root of CompilerGym's tree, so that its tox.ini applies (warnings are errors, 300 s
# timeout). -p no:flaky: every test must pass at its first try (upstream retries @flaky ones).
echo "=== CompilerGym $version tests/loop_tool/actions_test.py ($address) ==="
(cd "$cg" && LOOPTOOL_CG_SERVICE=$address timeout 900 nice -n 10 "$python" -m pytest \
  tests/loop_tool/actions_test.py -vv -p no:cacheprovider -p no:flaky \
  --junitxml="$tmp/junit.xml") || true
read -r t f < <("$python" - "$tmp/junit.xml" <<'EOF' || echo "0 1"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root if root.tag == "testsuite" else root.find("testsuite")
tests, bad = int(suite.get("tests")), int(suite.get("failures")) + int(suite.get("errors"))
print(tests - bad - int(suite.get("skipped")), bad + (tests == 0))
EOF
)
passed=$((passed + t))
failed=$((failed + f))

# --- 2. CompilerGym's examples/loop_tool_sweep.py -----------------------------------------------
# Its Typer CLI cannot start with Debian 12's typer 0.7 / click 8.1 (`List[bool]` option:
# "'multiple' is not valid with 'is_flag'"), so the example's own sweep() is called with the
# arguments the CLI would pass: --device cpu (no CUDA here), small --k, both --vectorize and
# both --linear values.
ks=$(echo "${SWEEP_K:-1 4}" | tr ' ' ',')
echo "=== CompilerGym $version examples/loop_tool_sweep.py: sweep(device=[cpu], k=[$ks]) ==="
if (cd "$tmp" && PYTHONPATH=$PYTHONPATH:$cg/examples LOOPTOOL_CG_SERVICE=$address \
  timeout 600 nice -n 10 "$python" -c "
import loop_tool_sweep
loop_tool_sweep.sweep(device=['cpu'], k=[$ks], vectorize=[1, 2], linear=[False, True],
                      logdir=None)
") 2>&1 | tee "$tmp/sweep.out" && grep -q $'^CPU\t' "$tmp/sweep.out" &&
  ! grep -q 'Step failed' "$tmp/sweep.out"; then
  passed=$((passed + 1))
  echo "loop_tool_sweep: PASS"
else
  failed=$((failed + 1))
  echo "loop_tool_sweep: FAIL"
fi

# --- 3. our checks through compiler_gym.make("loop_tool-v0", service=...) -----------------------
echo "=== tests/compat/cg_client_check.py $address ==="
(cd "$tmp" && timeout 600 nice -n 10 "$python" "$repo/tests/compat/cg_client_check.py" \
  "$address") 2>&1 | tee "$tmp/checks.out" || true
if line=$(grep -E '^checks: [0-9]+ passed, [0-9]+ failed$' "$tmp/checks.out"); then
  read -r _ p _ f _ <<<"$line"
  passed=$((passed + p))
  failed=$((failed + f))
else
  failed=$((failed + 1))
fi

if ! kill -0 "$server_pid" 2>/dev/null; then
  echo "the server died:" >&2
  cat "$tmp/server.log" >&2
  failed=$((failed + 1))
fi
echo "compilergym: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
