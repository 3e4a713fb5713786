"""Generates the package `looptool._proto` from the repository's proto/ directory.

    python3 build_proto.py OUT_DIR [--proto=PATH] [--service-config=PATH]

writes OUT_DIR/looptool/_proto/:

  __init__.py                      (a docstring: the package is generated)
  compiler_gym_service_pb2.py      messages          (protoc --python_out)
  compiler_gym_service_pb2.pyi     their type stubs  (protoc --pyi_out)
  compiler_gym_service_pb2_grpc.py the service stub  (grpc_python_plugin), which imports
                                   `from looptool._proto import compiler_gym_service_pb2`
  client_service_config.json       the gRPC service config (retry policy) both clients use

The .proto is compiled as if it lived at looptool/_proto/compiler_gym_service.proto (protoc's
virtual path mapping), so the generated imports name the package. The compiler is `protoc` and
`grpc_python_plugin` from PATH (Debian's protobuf-compiler and protobuf-compiler-grpc), else
`grpc_tools.protoc` when that module is importable; neither: RuntimeError saying so.

Used by Bazel (client/python/BUILD's genrule), by setup.py (pip install) and by tools/mypy.sh.
The defaults of --proto and --service-config are the repository's files, found from this file.
"""

import argparse
import os
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PROTO = os.path.join(HERE, "..", "..", "proto", "compiler_gym_service.proto")
DEFAULT_SERVICE_CONFIG = os.path.join(HERE, "..", "..", "proto", "client_service_config.json")
PACKAGE_DIR = os.path.join("looptool", "_proto")
SERVICE_CONFIG_NAME = "client_service_config.json"
INIT_TEXT = ('"""Generated from proto/compiler_gym_service.proto by client/python/build_proto.py: '
             'the\nprotocol\'s messages and service stub, and the gRPC service config."""\n')


def _compiler() -> List[str]:
    """The protoc command line prefix that can also run the gRPC Python plugin."""
    protoc, plugin = shutil.which("protoc"), shutil.which("grpc_python_plugin")
    if protoc and plugin:
        return [protoc, f"--plugin=protoc-gen-grpc_python={plugin}"]
    try:
        import grpc_tools  # noqa: F401  (PyPI's grpcio-tools: protoc with the plugin built in)
    except ImportError:
        raise RuntimeError(
            "Generating looptool._proto needs protoc and grpc_python_plugin on PATH (Debian: "
            "apt-get install protobuf-compiler protobuf-compiler-grpc) or the grpc_tools "
            "module (grpcio-tools)") from None
    return [sys.executable, "-m", "grpc_tools.protoc"]


def generate(out_dir: str, proto: str = DEFAULT_PROTO,
             service_config: str = DEFAULT_SERVICE_CONFIG) -> List[str]:
    """Writes the files listed in the module docstring under out_dir/looptool/_proto and
    returns their paths. FileNotFoundError when an input is missing."""
    for what, path in (("proto", proto), ("service config", service_config)):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"The {what} file {path} does not exist (build from a "
                                    f"LoopTool checkout, or pass its path)")
    package = os.path.join(out_dir, PACKAGE_DIR)
    os.makedirs(package, exist_ok=True)
    proto_dir, proto_name = os.path.split(os.path.abspath(proto))
    command = _compiler() + [
        f"--proto_path={PACKAGE_DIR}={proto_dir}",  # virtual path looptool/_proto/<name>
        f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}",
        os.path.join(proto_dir, proto_name)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n"
                           f"{result.stderr}")
    with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8") as f:
        f.write(INIT_TEXT)
    shutil.copyfile(service_config, os.path.join(package, SERVICE_CONFIG_NAME))
    base = os.path.splitext(proto_name)[0]
    outputs = [os.path.join(package, n) for n in (
        "__init__.py", f"{base}_pb2.py", f"{base}_pb2.pyi", f"{base}_pb2_grpc.py",
        SERVICE_CONFIG_NAME)]
    missing = [p for p in outputs if not os.path.isfile(p)]
    if missing:
        raise RuntimeError(f"protoc did not write {', '.join(missing)}")
    return outputs


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir", help="the directory that gets looptool/_proto/")
    parser.add_argument("--proto", default=DEFAULT_PROTO)
    parser.add_argument("--service-config", default=DEFAULT_SERVICE_CONFIG)
    args = parser.parse_args(argv)
    try:
        generate(args.out_dir, args.proto, args.service_config)
    except (OSError, RuntimeError) as e:
        print(f"build_proto.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
