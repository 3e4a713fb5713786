#!/usr/bin/env bash
# Type-checks the Python package (client/python/looptool, looptool.rl included) with Debian's
# mypy (python3-mypy) under client/python/pyproject.toml's [tool.mypy]. looptool._proto is
# generated first (client/python/build_proto.py: protoc's messages with their .pyi stubs, the
# gRPC stub, the service config) into a temporary directory on MYPYPATH, as a build makes it.
# Prints mypy's report; exits non-zero on any error (or when it cannot run). mypy's cache lives in
# $LOOPTOOL_MYPY_CACHE (default ~/.cache/looptool-mypy): a first run reads PyTorch's and numpy's
# types (about a minute here), later ones only what changed.
set -euo pipefail
cd "$(dirname "$0")/../client/python"
python=/usr/bin/python3
"$python" -m mypy --version >/dev/null 2>&1 ||
  { echo "mypy.sh: no mypy for $python (tools/setup.sh installs python3-mypy)" >&2; exit 2; }
generated=$(mktemp -d "${TMPDIR:-/tmp}/looptool-mypy.XXXXXX")
trap 'rm -rf "$generated"' EXIT
"$python" build_proto.py "$generated"
cache=${LOOPTOOL_MYPY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/looptool-mypy}
mkdir -p "$cache"
MYPYPATH=$generated "$python" -m mypy --config-file pyproject.toml --cache-dir "$cache" "$@"
