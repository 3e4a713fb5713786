"""The C++ forward pass's scores, through tests/client/policy_scores, for tests that compare them
with PyTorch's."""

import os
import subprocess
import tempfile

import numpy as np

POLICY_SCORES = "tests/client/policy_scores"


def cpp_scores(policy_arg, obs):
    """Scores (one row per observation) of the policy file or built-in name `policy_arg`."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for row in obs:
            f.write(" ".join(repr(float(v)) for v in row) + "\n")
    try:
        out = subprocess.run([POLICY_SCORES, policy_arg, f.name], check=True,
                             capture_output=True, text=True).stdout
    finally:
        os.unlink(f.name)
    return np.array([[float(v) for v in line.split()] for line in out.splitlines()])
