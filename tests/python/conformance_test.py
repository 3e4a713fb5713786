"""The Python client decodes everything the server declares: for every observation space
GetSpaces lists (whichever engine serves it), its default observation and its value on a session
of each engine that serves it convert (convert.event_to_python) into the Python type its declared
space calls for, with the declared shape. A space a new engine or observation adds is checked
without changing this test. (tests/client/conformance_test.cc checks the C++ client the same
way.)"""

import unittest

import grpc
import numpy as np

from looptool import Connection, LocalServer, ServiceError, convert

SERVER = "service/looptool-server"  # relative to the runfiles root, the cwd under bazel test
SESSIONS = (("benchmark://mm64_256_16_range-v0/mm64_64_64", "loop_nest"),
            ("benchmark://loop_tool-cpu-v0/1024", "simple"))


def expect_conforms(test, value, spec, what):
    """Asserts that `value` is what `spec`'s declared space calls for."""
    space = spec.space_type
    if space == "string_value":  # text, or a graph (an opaque JSON value) declared as a string
        test.assertTrue(isinstance(value, str) or hasattr(value, "nodes"), what)
    elif space == "float_box":
        test.assertIsInstance(value, np.ndarray, what)
        test.assertEqual(value.dtype, np.float32, what)
        test.assertEqual(value.shape, spec.shape, what)
    elif space == "int64_box":
        test.assertIsInstance(value, np.ndarray, what)
        test.assertEqual(value.dtype, np.int64, what)
        test.assertEqual(value.shape, spec.shape, what)
    elif space == "boolean_sequence":
        test.assertIsInstance(value, np.ndarray, what)
        test.assertEqual(value.dtype, np.bool_, what)
    elif space == "byte_sequence":
        test.assertIsInstance(value, np.ndarray, what)
        test.assertEqual(value.dtype, np.uint8, what)
        test.assertEqual(value.ndim, 1, what)
    elif space == "double_value":
        test.assertIsInstance(value, float, what)
    elif space == "int64_value":
        test.assertIsInstance(value, int, what)
    else:
        test.fail(f"{what}: a space of a kind the client does not know: {space}")


class ConformanceTest(unittest.TestCase):
    def test_every_declared_observation_decodes_as_declared(self):
        with LocalServer(SERVER, flags=["--timing_budget_ms=1"]) as server, \
                Connection(server.address) as connection:
            spaces = connection.spaces()
            sessions = []
            for uri, space in SESSIONS:
                reply = connection.start_session(uri, spaces.action_space(space).space_index)
                sessions.append((uri, reply.session_id))
            observed = 0
            for name, spec in spaces.observation_spaces.items():
                expect_conforms(self, spec.default_value, spec, f"{name} (default)")
                served = 0
                for uri, session in sessions:
                    try:
                        reply = connection.step(session, [], [spec.index])
                    except ServiceError as e:
                        if e.code == grpc.StatusCode.INVALID_ARGUMENT:  # not this engine's
                            continue
                        raise
                    expect_conforms(self, convert.event_to_python(reply.observation[0]), spec,
                                    f"{name} on {uri}")
                    served += 1
                self.assertGreaterEqual(served, 1, f"{name} is served by no engine")
                observed += served
            # The names both engines serve (flops, loop_tree) were observed twice.
            self.assertGreater(observed, len(spaces.observation_spaces))
            # The int64 tensor (upstream's action_state) in particular.
            reply = connection.step(sessions[1][1], [],
                                    [spaces.observation_space("action_state").index])
            state = convert.event_to_python(reply.observation[0])
            self.assertEqual(state.tolist(), [0, 1024, 0])


if __name__ == "__main__":
    unittest.main()
