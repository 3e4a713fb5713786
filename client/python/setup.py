"""setuptools glue for pyproject.toml: `build_py` also generates looptool._proto (the protocol's
messages and stub, and the gRPC service config) into the build directory with build_proto.py,
from the repository's proto/ directory (../../proto). Nothing generated is written to the
source tree, so an editable install has no looptool._proto."""

import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_proto  # noqa: E402  (beside this file)


class BuildPyWithProto(build_py):
    """build_py, then build_proto.generate() into build_lib."""

    def run(self) -> None:
        super().run()
        if not self.dry_run:
            self._proto_outputs = build_proto.generate(self.build_lib)

    def get_outputs(self, include_bytecode: bool = True) -> list:
        return super().get_outputs(include_bytecode) + list(getattr(self, "_proto_outputs", []))


setup(cmdclass={"build_py": BuildPyWithProto})
