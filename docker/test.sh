#!/usr/bin/env bash
# End-to-end test of the server image: builds it (docker/build.sh), runs two containers, each
# pinned to its own CPU (--cpuset-cpus and the server's --eval_cores; on a 1-CPU machine both on
# CPU 0), read-only, unprivileged, with a shared token, each published on a free port of
# 127.0.0.1 only; waits until both answer, tunes mm112_208_256 for 2 s against each with
# `looptool tune --json` (gflops > 0, the kernel worker of that container did the work, pinned
# to its CPU), `docker stop`s them and checks both exited 0. Exit 0 only if all of that worked.
#
#   docker/test.sh [--variant=bookworm|scratch]        (default bookworm, or $LOOPTOOL_DOCKER_VARIANT)
#
# The engine: the Docker daemon the docker CLI reaches, else (as root; not root: through
# passwordless sudo) Debian's docker.io (and debootstrap) are installed if missing and a private
# dockerd is started with its own data root (/var/lib/looptool-docker, kept: built images stay
# cached for the next run), exec root and socket (/run/looptool-docker), and stopped at the end.
# Everything started here (containers, that daemon, temporary files) is removed on every exit.
# Binaries: $LOOPTOOL_BIN_DIR, else bazel-bin/ (built with `bazel build` if missing or ASan).
# Prints `docker/test.sh: SKIPPED: <reason>` and exits 0 only where no container engine can run.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
prog="docker/test.sh"
variant=${LOOPTOOL_DOCKER_VARIANT:-bookworm}
for arg in "$@"; do
  case "$arg" in
    --variant=bookworm|--variant=scratch) variant=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "$prog: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

say() { echo "$prog: $*"; }
fail() { echo "$prog: FAILED: $*" >&2; exit 1; }
skip() { echo "$prog: SKIPPED: $*"; exit 0; }
now() { date +%s.%N; }
t_begin=$(now)
t_phase=$t_begin
phase() {  # prints the time the phase that just ended took
  local t
  t=$(now)
  printf '%s: [%5.1f s] %s\n' "$prog" "$(awk -v a="$t_phase" -v b="$t" 'BEGIN {print b - a}')" "$1"
  t_phase=$t
}

data_root=${LOOPTOOL_DOCKER_ROOT:-/var/lib/looptool-docker}
exec_root=/run/looptool-docker
own_socket=$exec_root/docker.sock
tmp=$(mktemp -d "${TMPDIR:-/tmp}/looptool-docker-test.XXXXXX")
chmod 700 "$tmp"
containers=()
daemon_pid=""

stop_daemon() {
  [[ -n "$daemon_pid" ]] || return 0
  kill -TERM "$daemon_pid" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$daemon_pid" 2>/dev/null; then
    echo "$prog: dockerd $daemon_pid ignored SIGTERM for 30 s: SIGKILL" >&2
    kill -KILL "$daemon_pid" 2>/dev/null || true
  fi
  wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=""
  # dockerd leaves its network namespace mounted under the exec root: unmount and remove it.
  awk -v root="$exec_root/" 'index($2, root) == 1 {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || true; done
  rm -rf "$exec_root" 2>/dev/null || true
}
cleanup() {
  local rc=$?
  set +e
  for c in "${containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1; done
  if [[ -n "$daemon_pid" ]]; then
    stop_daemon
    echo "$prog: stopped the dockerd this test started"
  fi
  rm -rf "$tmp" ${LOOPTOOL_TEST_STAGED:+"$LOOPTOOL_TEST_STAGED"}
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "$prog: FAILED: unexpected error at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# --- the binaries (resolved before anything needs root: a bazel build runs as the caller) ----
stage_binaries() {
  local server cli
  mkdir -p "$1"
  if [[ -n "${LOOPTOOL_BIN_DIR:-}" ]]; then
    server=$LOOPTOOL_BIN_DIR/looptool-server
    cli=$LOOPTOOL_BIN_DIR/looptool
  else
    server=$repo/bazel-bin/service/looptool-server
    cli=$repo/bazel-bin/client/cpp/looptool
    if [[ ! -x "$server" || ! -x "$cli" ]] || ldd "$server" | grep -q libasan; then
      say "bazel-bin lacks the plain (non-ASan) binaries: bazel build //service:looptool-server //client/cpp:looptool"
      (cd "$repo" && bazel build //service:looptool-server //client/cpp:looptool)
    fi
  fi
  [[ -x "$server" && -x "$cli" ]] || fail "no looptool-server and looptool in ${LOOPTOOL_BIN_DIR:-bazel-bin}"
  cp -L "$server" "$cli" "$1/"
}
stage_binaries "$tmp/bin"
export LOOPTOOL_BIN_DIR=$tmp/bin
cli=$tmp/bin/looptool
phase "binaries staged (${LOOPTOOL_BIN_DIR})"

# --- the engine -----------------------------------------------------------------------------
engine_ok() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }
if engine_ok; then
  say "using the running Docker daemon ($(docker info -f '{{.ServerVersion}}, {{.Driver}}, {{.DockerRootDir}}'))"
elif [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    say "not root: running as root through sudo (binaries staged in $tmp)"
    trap - EXIT
    exec sudo -n env LOOPTOOL_BIN_DIR="$LOOPTOOL_BIN_DIR" LOOPTOOL_TEST_STAGED="$tmp" \
      LOOPTOOL_DOCKER_ROOT="$data_root" LOOPTOOL_DOCKER_VARIANT="$variant" \
      ${LOOPTOOL_DEBIAN_MIRROR:+LOOPTOOL_DEBIAN_MIRROR="$LOOPTOOL_DEBIAN_MIRROR"} \
      bash "$0" "--variant=$variant"
  fi
  skip "not root, no passwordless sudo and no access to a running Docker daemon"
else
  missing=()
  command -v dockerd >/dev/null && command -v docker >/dev/null || missing+=(docker.io)
  # debootstrap makes the offline base of the bookworm image (when no registry is reachable).
  [[ "$variant" == scratch ]] || command -v debootstrap >/dev/null || missing+=(debootstrap)
  if [[ ${#missing[@]} -gt 0 ]]; then
    say "installing ${missing[*]} (apt-get --no-install-recommends)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq -o DPkg::Lock::Timeout=600 ||
      fail "apt-get update failed: cannot install ${missing[*]}"
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" \
      >"$tmp/apt.log" 2>&1 || { tail -n 20 "$tmp/apt.log" >&2; fail "apt-get install ${missing[*]} failed"; }
    phase "installed ${missing[*]}"
  fi
  if engine_ok; then  # where systemd runs, installing docker.io started its daemon
    say "using the Docker daemon the docker.io package started ($(docker info -f '{{.ServerVersion}}, {{.Driver}}'))"
  else
    export DOCKER_HOST=unix://$own_socket
    if engine_ok; then
      say "using the private dockerd already running on $own_socket (not ours to stop)"
    else
      # $@: extra dockerd flags. Returns 0 once the daemon answers; 1 if it died or hung (stopped).
      start_daemon() {
        mkdir -p "$data_root" "$exec_root"
        : >"$tmp/dockerd.log"
        setsid dockerd --data-root="$data_root" --exec-root="$exec_root" \
          --pidfile="$exec_root/dockerd.pid" --host="$DOCKER_HOST" "$@" \
          >>"$tmp/dockerd.log" 2>&1 </dev/null &
        daemon_pid=$!
        for _ in $(seq 1 120); do
          docker info >/dev/null 2>&1 && return 0
          kill -0 "$daemon_pid" 2>/dev/null || break
          sleep 0.5
        done
        stop_daemon
        return 1
      }
      if ! start_daemon && grep -qiE 'iptables|nf_tables|nat chain' "$tmp/dockerd.log"; then
        say "dockerd cannot use iptables here; again with --iptables=false (ports through docker-proxy)"
        start_daemon --iptables=false --ip-masq=false || true
      fi
      if [[ -z "$daemon_pid" ]]; then
        reason=$(grep -iE 'level=(fatal|error)|failed to start daemon' "$tmp/dockerd.log" |
                 tail -n 1 | sed -E 's/.*msg="?//; s/"$//' || true)
        # The kernel or the sandbox refuses what an engine needs: no engine can run here.
        if grep -qiE 'overlay|graphdriver|iptables|cgroup|operation not permitted|permission denied|not supported|no such device|failed to mount|apparmor|seccomp|kernel' \
             "$tmp/dockerd.log"; then
          skip "dockerd cannot run on this machine: ${reason:-see its log}"
        fi
        tail -n 20 "$tmp/dockerd.log" >&2
        fail "dockerd did not start (log above)"
      fi
      say "started dockerd $daemon_pid ($(docker info -f '{{.ServerVersion}}, {{.Driver}}')), data root $data_root"
    fi
  fi
fi
phase "container engine ready"

# --- the image ------------------------------------------------------------------------------
tag=$("$here/build.sh" --variant="$variant" | tail -n 1) || fail "docker/build.sh --variant=$variant failed"
size=$(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')
phase "image $tag built ($size)"

# --- two containers, each on its own CPU ----------------------------------------------------
online_cpus() {  # the online CPU numbers, one a line
  local range a b
  for range in $(tr ',' ' ' </sys/devices/system/cpu/online 2>/dev/null || echo 0); do
    a=${range%-*}; b=${range#*-}
    seq "$a" "$b"
  done
}
mapfile -t cpus < <(online_cpus)
cpu_of=("${cpus[0]}" "${cpus[1]:-${cpus[0]}}")
[[ ${#cpus[@]} -ge 2 ]] || say "one CPU: both containers share CPU ${cpus[0]}"

token=$tmp/token
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$token"
chmod 644 "$token"   # readable by the containers' user; $tmp itself is 0700
addr=()
for i in 0 1; do
  c=$(docker run -d --name "looptool-test-$$-$i" --label looptool-test="$$" \
        --cpuset-cpus="${cpu_of[$i]}" --read-only --tmpfs /var/lib/looptool:uid=10001,gid=10001,size=16m \
        --cap-drop=ALL --security-opt=no-new-privileges \
        -v "$token:/run/secrets/looptool_token:ro" -p 127.0.0.1::50051 \
        "$tag" --eval_cores="${cpu_of[$i]}") || fail "docker run of container $i failed"
  containers+=("$c")
  a=$(docker port "$c" 50051/tcp 2>/dev/null | grep -m1 '^127\.0\.0\.1:') || {
    docker logs "$c" >&2 || true
    fail "container $i publishes no 127.0.0.1 port ($(docker inspect -f '{{.State.Status}}, exit code {{.State.ExitCode}}' "$c"))"
  }
  addr+=("$a")
done
# Readiness: one timed kernel through each (a refused connection or an UNAVAILABLE retries).
for i in 0 1; do
  ok=0
  for _ in $(seq 1 60); do
    if [[ $(docker inspect -f '{{.State.Running}}' "${containers[$i]}") != true ]]; then
      docker logs "${containers[$i]}" >&2 || true
      fail "container $i exited (log above)"
    fi
    if timeout 10 "$cli" eval --server="${addr[$i]}" --auth_token_file="$token" \
         --benchmark=mm64_64_64 --json >"$tmp/ready.$i" 2>&1; then ok=1; break; fi
    sleep 0.5
  done
  [[ $ok -eq 1 ]] || { cat "$tmp/ready.$i" >&2; docker logs "${containers[$i]}" >&2; fail "container $i does not answer on ${addr[$i]}"; }
  docker logs "${containers[$i]}" 2>&1 | grep -q "kernel workers on cpu ${cpu_of[$i]})" ||
    { docker logs "${containers[$i]}" >&2; fail "container $i's kernel worker is not on cpu ${cpu_of[$i]}"; }
  say "container $i (${containers[$i]:0:12}): cpu ${cpu_of[$i]}, ${addr[$i]}, answers"
done
phase "two containers started and answering"

# CPU seconds (user + system) of the processes in a container, from the host's /proc.
container_cpu() {
  local pid total=0 t
  for pid in $(docker top "$1" -o pid | tail -n +2); do
    t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
    total=$((total + t))
  done
  awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'
}
# The kernel worker's allowed CPUs (it runs as looptool-kernel-worker).
worker_cpus() {
  local pid
  pid=$(docker top "$1" -o pid,args | awk '/looptool-kernel-worker/ {print $1; exit}')
  [[ -z "$pid" ]] || awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status" || true
}

gflops=()
for i in 0 1; do
  j=$((1 - i))
  before_i=$(container_cpu "${containers[$i]}"); before_j=$(container_cpu "${containers[$j]}")
  "$cli" tune --server="${addr[$i]}" --auth_token_file="$token" --json --time_limit=2 \
    --benchmark=benchmark://mm64_256_16_range-v0/mm112_208_256 >"$tmp/tune.$i" 2>"$tmp/tune.$i.err" ||
    { cat "$tmp/tune.$i.err" >&2; fail "looptool tune against container $i failed"; }
  after_i=$(container_cpu "${containers[$i]}"); after_j=$(container_cpu "${containers[$j]}")
  g=$(grep -o '"gflops":[0-9.eE+-]*' "$tmp/tune.$i" | head -n 1 | cut -d: -f2 || true)
  awk -v g="${g:-0}" 'BEGIN {exit !(g > 0)}' ||
    { cat "$tmp/tune.$i" >&2; fail "container $i: the tune's JSON has no gflops > 0"; }
  grep -q '"benchmark":"benchmark://mm64_256_16_range-v0/mm112_208_256"' "$tmp/tune.$i" ||
    fail "container $i: the tune's JSON names another benchmark"
  used_i=$(awk -v a="$before_i" -v b="$after_i" 'BEGIN {printf "%.2f", b - a}')
  used_j=$(awk -v a="$before_j" -v b="$after_j" 'BEGIN {printf "%.2f", b - a}')
  # The search times kernels for 2 s on the container's worker: that container did the work.
  awk -v u="$used_i" -v o="$used_j" 'BEGIN {exit !(u >= 0.5 && o < u / 2)}' ||
    fail "container $i used $used_i CPU s during its tune, container $j $used_j: not its answer"
  w=$(worker_cpus "${containers[$i]}")
  [[ "$w" == "${cpu_of[$i]}" ]] || fail "container $i's kernel worker may run on CPUs '$w', not ${cpu_of[$i]}"
  gflops+=("$g")
  say "container $i: tune ok, $(printf '%.1f' "$g") GFLOPS ($(grep -o '"percent_of_peak":[0-9.]*' "$tmp/tune.$i" | cut -d: -f2 | xargs printf '%.1f')% of peak); its CPU time +$used_i s, the other's +$used_j s; worker pinned to cpu $w"
done
phase "tuned against both containers"

for i in 0 1; do
  docker stop -t 20 "${containers[$i]}" >/dev/null || fail "docker stop of container $i failed"
done
for i in 0 1; do
  code=$(docker inspect -f '{{.State.ExitCode}}' "${containers[$i]}")
  [[ "$code" == 0 ]] || { docker logs "${containers[$i]}" >&2; fail "container $i exited with $code after SIGTERM"; }
  docker logs "${containers[$i]}" 2>&1 | grep -q 'signal 15, shutting down' ||
    fail "container $i did not log its SIGTERM shutdown"
  docker rm "${containers[$i]}" >/dev/null
done
containers=()
phase "both containers stopped (SIGTERM, exit 0) and removed"

total=$(awk -v a="$t_begin" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}')
say "PASSED in $total s: $tag ($size); containers on cpu ${cpu_of[0]} and ${cpu_of[1]} tuned mm112_208_256 to $(printf '%.1f' "${gflops[0]}") and $(printf '%.1f' "${gflops[1]}") GFLOPS"
