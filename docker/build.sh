#!/usr/bin/env bash
# Builds one of LoopTool's container images and prints its tag and size.
#
#   docker/build.sh [--variant=bookworm|scratch|rl] [--base=IMAGE] [--tag=NAME:TAG]
#
#   bookworm (default)  docker/Dockerfile: the server worker on Debian 12; the runtime libraries
#                       come from apt (the packages that own what `ldd looptool-server` lists).
#                       Tag looptool-server:latest.
#   scratch             docker/Dockerfile.scratch: FROM scratch + the binaries + every library
#                       ldd lists + the dynamic loader, staged here with `cp -L`; needs no
#                       network and no base image. Tag looptool-server:scratch.
#   rl                  docker/Dockerfile.rl: Dask scheduler/workers for `looptool.rl` actors
#                       (python3, distributed, grpcio, protobuf, numpy; no torch) with the
#                       looptool package, its looptool._proto generated here with
#                       client/python/build_proto.py (Debian's protoc). Tag looptool-rl:latest.
#
# Base image (bookworm, rl): --base, default debian:bookworm-slim. When that is neither present
# nor pullable (no registry), the offline base `looptool-base` is used instead, built once with
# `debootstrap --variant=minbase bookworm` from the host's apt mirror and `docker import`ed (kept
# and reused while the image exists; `docker rmi looptool-base` rebuilds it). The image builds run
# with --network=host, so their `apt-get install` reaches the mirror the way the host does.
#
# Binaries: $LOOPTOOL_BIN_DIR/{looptool-server,looptool} when set,
# else the repository's bazel-bin/, built with `bazel build` when missing or when bazel-bin is the
# ASan tree (`bazel test --config=asan` leaves it pointing there). Everything is copied
# (cp -L) into a private build context first, so a rebuild under our feet cannot tear an image.
# The Docker daemon is the one the docker CLI reaches (DOCKER_HOST is honoured).
# LOOPTOOL_DEBIAN_MIRROR overrides the mirror debootstrap uses. Safe to rerun: cached layers.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
prog="docker/build.sh"
variant=bookworm
base=""
tag=""

die() { echo "$prog: error: $*" >&2; exit 1; }
say() { echo "$prog: $*" >&2; }

for arg in "$@"; do
  case "$arg" in
    --variant=*) variant=${arg#*=} ;;
    --base=*) base=${arg#*=} ;;
    --tag=*) tag=${arg#*=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (see --help)" ;;
  esac
done
case "$variant" in
  bookworm) dockerfile=Dockerfile; : "${tag:=looptool-server:latest}" ;;
  scratch) dockerfile=Dockerfile.scratch; : "${tag:=looptool-server:scratch}" ;;
  rl) dockerfile=Dockerfile.rl; : "${tag:=looptool-rl:latest}" ;;
  *) die "--variant must be bookworm, scratch or rl, got '$variant'" ;;
esac
[[ "$variant" == scratch && -n "$base" ]] && die "--base does not apply to --variant=scratch"
base_given=0
[[ -n "$base" ]] && base_given=1
: "${base:=debian:bookworm-slim}"
# The classic builder is in every Docker version we meet (the docker.io 20.10 daemon included);
# BuildKit needs the buildx plugin, which Debian 12 does not ship. DOCKER_BUILDKIT=1 overrides.
export DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0}

command -v docker >/dev/null || die "no docker CLI (apt-get install docker.io; docker/test.sh does)"
docker info >/dev/null 2>&1 ||
  die "no Docker daemon reachable (start dockerd or set DOCKER_HOST; docker/test.sh starts one)"

work=$(mktemp -d "${TMPDIR:-/tmp}/looptool-build.XXXXXX")
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'echo "$prog: error: unexpected failure at line $LINENO: $BASH_COMMAND" >&2' ERR

# --- the binaries ---------------------------------------------------------------------------
if [[ -n "${LOOPTOOL_BIN_DIR:-}" ]]; then
  server_bin=$LOOPTOOL_BIN_DIR/looptool-server
  cli_bin=$LOOPTOOL_BIN_DIR/looptool
  [[ -x "$server_bin" && -x "$cli_bin" ]] ||
    die "LOOPTOOL_BIN_DIR=$LOOPTOOL_BIN_DIR lacks looptool-server or looptool"
else
  server_bin=$repo/bazel-bin/service/looptool-server
  cli_bin=$repo/bazel-bin/client/cpp/looptool
  targets=(//service:looptool-server //client/cpp:looptool)
  if [[ ! -x "$server_bin" || ! -x "$cli_bin" ]]; then
    say "bazel-bin lacks the binaries: bazel build ${targets[*]}"
    (cd "$repo" && bazel build "${targets[@]}") >&2
  elif ldd "$server_bin" | grep -q libasan; then
    # After `bazel test --config=asan` (tools/test.sh's last run) bazel-bin is the ASan tree.
    say "bazel-bin holds the ASan build (--config=asan): bazel build ${targets[*]}"
    (cd "$repo" && bazel build "${targets[@]}") >&2
  fi
fi
ctx=$work/context
mkdir -p "$ctx"
cp "$here/$dockerfile" "$ctx/Dockerfile"

# Debian packages owning the libraries `ldd` lists for the binaries (empty when one has none).
# Merged /usr: dpkg knows a file under either /lib/... or /usr/lib/..., so both are asked (once).
runtime_packages() {
  local libs lib owners
  libs=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
  owners=$(for lib in $libs; do echo "$lib"; echo "/usr${lib#/usr}"; echo "${lib#/usr}"; done |
           sort -u | xargs dpkg -S 2>/dev/null || true)
  for lib in $libs; do
    awk -F': ' -v a="/usr${lib#/usr}" -v b="${lib#/usr}" '$2 == a || $2 == b {f = 1} END {exit !f}' \
      <<<"$owners" || { say "no package owns $lib"; return 0; }
  done
  awk -F': ' '{split($1, p, ", "); for (i in p) {sub(/:.*/, "", p[i]); print p[i]}}' <<<"$owners" |
    sort -u | tr '\n' ' '
}

build_args=()
case "$variant" in
  bookworm)
    cp -L "$server_bin" "$cli_bin" "$ctx/"
    pkgs=""
    command -v dpkg >/dev/null && pkgs=$(runtime_packages "$ctx/looptool-server" "$ctx/looptool")
    if [[ -n "$pkgs" ]]; then
      say "runtime packages (from ldd): $pkgs"
      build_args+=(--build-arg "RUNTIME_PACKAGES=$pkgs")
    else
      say "cannot map the libraries to packages here: the Dockerfile's default list is used"
    fi
    ;;
  scratch)
    root=$ctx/rootfs
    # workdir/ becomes /var/lib/looptool, owned by the server's user (COPY --chown).
    mkdir -p "$root/usr/local/bin" "$root/etc" "$root/tmp" "$ctx/workdir"
    cp -L "$server_bin" "$cli_bin" "$root/usr/local/bin/"
    # Every library either binary loads, and the loader, at the paths ldd names.
    for lib in $(ldd "$root/usr/local/bin/looptool-server" "$root/usr/local/bin/looptool" |
                 awk '$2 == "=>" && $3 ~ /^\// {print $3} NF == 2 && $1 ~ /^\// {print $1}' | sort -u); do
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    done
    printf 'root:x:0:0:root:/:/sbin/nologin\nlooptool:x:10001:10001:looptool:/var/lib/looptool:/sbin/nologin\n' \
      >"$root/etc/passwd"
    printf 'root:x:0:\nlooptool:x:10001:\n' >"$root/etc/group"
    chmod 1777 "$root/tmp"
    say "staged $(find "$root" -type f | wc -l) files, $(du -sh "$root" | cut -f1) (binaries, libraries, loader)"
    ;;
  rl)
    mkdir -p "$ctx/python"
    (cd "$repo/client/python" && tar --exclude=__pycache__ --exclude='*.pyc' -c looptool) |
      tar -C "$ctx/python" -x
    # looptool._proto: the messages, the stub and the service config (protoc from the host).
    python3 "$repo/client/python/build_proto.py" "$ctx/python" ||
      die "cannot generate looptool._proto (tools/setup.sh installs protoc and its gRPC plugin)"
    ;;
esac

# --- the base image -------------------------------------------------------------------------
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# The host's Debian mirror: LOOPTOOL_DEBIAN_MIRROR, else the first bookworm source in
# /etc/apt/sources.list or a deb822 /etc/apt/sources.list.d/*.sources, else deb.debian.org.
# $2 = "security" finds the security archive instead (empty when there is none).
debian_mirror() {
  local want=$1 uri
  if [[ "$want" == main && -n "${LOOPTOOL_DEBIAN_MIRROR:-}" ]]; then
    echo "$LOOPTOOL_DEBIAN_MIRROR"; return
  fi
  uri=$(
    {
      # one-line format: deb [options] URI SUITE COMPONENTS
      cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -E 's/\[[^]]*\]//' | awk '$1 == "deb" {print $2, $3}'
      # deb822 format: URIs and Suites fields of each stanza
      for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        awk 'BEGIN{RS=""; FS="\n"} {u=""; s=""; d=0
               for (i = 1; i <= NF; i++) {
                 if ($i ~ /^URIs:/) { split($i, a, " "); u=a[2] }
                 if ($i ~ /^Suites:/) { sub(/^Suites: */, "", $i); s=$i }
                 if ($i ~ /^Enabled: *no/) d=1
                 if ($i ~ /^Types:/ && $i !~ /[: ]deb( |$)/) d=1 }
               n = split(s, ss, " "); if (!d) for (j = 1; j <= n; j++) print u, ss[j] }' "$f"
      done
    } | awk -v want="$want" '
        want == "main" && $2 == "bookworm" {print $1; exit}
        want == "security" && $2 == "bookworm-security" {print $1; exit}')
  if [[ -z "$uri" && "$want" == main ]]; then uri=http://deb.debian.org/debian; fi
  echo "${uri%/}"
}

build_looptool_base() {
  [[ $(id -u) -eq 0 ]] || die "building looptool-base with debootstrap needs root"
  command -v debootstrap >/dev/null ||
    die "no debootstrap to build the offline base (apt-get install debootstrap)"
  local mirror security rootfs t0 log
  mirror=$(debian_mirror main)
  security=$(debian_mirror security)
  # The root filesystem goes on disk, not in a tmpfs /tmp: ~120 MB, device nodes, exec.
  rootfs=$(mktemp -d /var/tmp/looptool-base.XXXXXX)
  log=$work/debootstrap.log
  trap "rm -rf '$rootfs'; cleanup" EXIT
  t0=$SECONDS
  say "building looptool-base: debootstrap --variant=minbase bookworm from $mirror (about a minute)"
  if ! debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    die "debootstrap failed (log above); LOOPTOOL_DEBIAN_MIRROR=URL picks another mirror"
  fi
  {
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    [[ -n "$security" ]] && echo "deb $security bookworm-security main"
  } >"$rootfs/etc/apt/sources.list"
  # What an image needs no copy of: apt's caches and lists, logs, debootstrap's leftovers.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* \
    "$rootfs"/debootstrap "$rootfs"/tmp/* "$rootfs"/etc/hostname "$rootfs"/etc/resolv.conf
  tar --numeric-owner -C "$rootfs" -c . |
    docker import \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["/bin/bash"]' \
      --message "debootstrap --variant=minbase bookworm $mirror" - looptool-base >/dev/null
  rm -rf "$rootfs"
  trap cleanup EXIT
  say "looptool-base built in $((SECONDS - t0)) s ($(image_size looptool-base))"
}

image_size() {
  docker image inspect -f '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'
}

if [[ "$variant" != scratch ]]; then
  if have_image "$base"; then
    say "base image $base (present)"
  elif [[ "$base" != looptool-base ]] && timeout 60 docker pull -q "$base" >/dev/null 2>&1; then
    say "base image $base (pulled)"
  elif [[ $base_given -eq 0 || "$base" == looptool-base ]]; then
    [[ "$base" == looptool-base ]] || say "cannot pull $base (no registry?): using the offline base looptool-base"
    base=looptool-base
    if have_image looptool-base; then
      say "base image looptool-base (cached)"
    else
      build_looptool_base
    fi
  else
    die "base image $base is neither present nor pullable"
  fi
  build_args+=(--build-arg "BASE=$base")
fi

# --- the image ------------------------------------------------------------------------------
t0=$SECONDS
say "docker build -f docker/$dockerfile -t $tag"
if ! docker build --network=host "${build_args[@]}" -t "$tag" "$ctx" >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  die "docker build of $tag failed (log above)"
fi
say "built $tag in $((SECONDS - t0)) s: $(image_size "$tag")"
# Images of ours that a rebuild left untagged (their binaries changed) go; cached layers stay.
docker image prune -f --filter label=org.looptool.image >/dev/null || true
echo "$tag"
