"""GymnasiumEnv, its spaces and looptool.make() against a real looptool-server: reset -> (obs,
info), step -> (obs, reward, terminated, truncated, info) with exact loop trees, truncation at
max_steps, termination when the session is lost, sample()/contains()/masks/seeding, the
registered ids; the plain spaces on their own; and the gymnasium path (subclassing
gymnasium.Env and gymnasium.spaces.*, gymnasium.register/make) under a stand-in gymnasium."""

import importlib
import sys
import types
import unittest

import grpc
import numpy as np

import looptool
from looptool import GymnasiumEnv, LocalServer, LoopToolEnv, NamedDiscreteSpace
from looptool import gymnasium_spaces
from looptool._proto import compiler_gym_service_pb2 as pb
from looptool._proto import compiler_gym_service_pb2_grpc as pb_grpc

SERVER = "service/looptool-server"  # relative to the runfiles root, the cwd under bazel test
MM = "benchmark://mm64_256_16_range-v0/mm112_208_256"
MM64 = "benchmark://mm64_256_16_range-v0/mm64_64_64"
LOOP_TOOL_ACTIONS = ["up", "down", "swap_up", "swap_down", "split_2", "split_4", "split_8",
                     "split_16", "split_32", "split_64", "split_128", "split_256", "split_512",
                     "split_1024", "merge", "unroll", "vectorize"]
LOOP_TUNE_ACTIONS = ["up", "down", "swap_up", "swap_down", "split_4", "split_8", "split_16"]

INITIAL_LOOP_TREE = ("for m in 112 : L0  <<<<<< cursor (line 0 )\n"
                     " for k in 256 : L1\n"
                     "  for n in 208 : L2\n"
                     "   %2[m, k, n] <- multiply(%0, %1)\n"
                     "   %3[m, n] <- add(%2)\n"
                     " for n in 208 : L5\n"
                     "  %4[m, n] <- write(%3)\n")
# After split_4 (m = 28 x 4: the write-back nest shares m, so it is split too).
SPLIT_4_LOOP_TREE = ("for m in 28 : L0  <<<<<< cursor (line 0 )\n"
                     " for m' in 4 : L1\n"
                     "  for k in 256 : L2\n"
                     "   for n in 208 : L3\n"
                     "    %2[m, k, n] <- multiply(%0, %1)\n"
                     "    %3[m, n] <- add(%2)\n"
                     "  for n in 208 : L6\n"
                     "   %4[m, n] <- write(%3)\n")
# ... then down: the cursor moves to m'.
SPLIT_4_DOWN_LOOP_TREE = SPLIT_4_LOOP_TREE.replace(
    "for m in 28 : L0  <<<<<< cursor (line 0 )\n for m' in 4 : L1\n",
    "for m in 28 : L0\n for m' in 4 : L1  <<<<<< cursor (line 1 )\n")
# ... then swap_down: m' goes below k (in both nests), the cursor with it.
SPLIT_4_DOWN_SWAP_LOOP_TREE = ("for m in 28 : L0\n"
                               " for k in 256 : L1\n"
                               "  for m' in 4 : L2  <<<<<< cursor (line 2 )\n"
                               "   for n in 208 : L3\n"
                               "    %2[m, k, n] <- multiply(%0, %1)\n"
                               "    %3[m, n] <- add(%2)\n"
                               " for m' in 4 : L6\n"
                               "  for n in 208 : L7\n"
                               "   %4[m, n] <- write(%3)\n")
# The action mask at the start state (loop_tool; see env_test.test_action_mask).
INITIAL_ALLOWED = ["down", "swap_down", "split_2", "split_4", "split_8", "split_16", "split_32",
                   "split_64", "unroll", "vectorize"]


def initial_loops_tensor():
    """loops_tensor of mm112_208_256 before any action (as in env_test)."""
    t = np.zeros((16, 20), dtype=np.float32)
    t[0, :4] = [1, 112, 0, 1]
    t[0, 4 + 8] = 1.0
    t[1, :4] = [0, 256, 0, 1]
    t[1, 4 + 0] = 0.5
    t[1, 4 + 8] = 0.5
    t[2, :4] = [0, 208, 0, 1]
    t[2, 4 + 0] = 1.0
    t[3, :4] = [0, 208, 0, 0]
    t[3, 4 + 0] = 1.0
    return t.reshape(1, 320)


def setUpModule():
    global server
    server = LocalServer(SERVER, flags=["--timing_budget_ms=1"])


def tearDownModule():
    status = server.close()
    if status != 0:  # SIGTERM drains and exits 0
        raise AssertionError(f"looptool-server exited with status {status}")


class ServerTestCase(unittest.TestCase):

    def make_env(self, **kwargs):
        kwargs.setdefault("benchmark", MM)
        env = GymnasiumEnv(server.address, **kwargs)
        self.addCleanup(env.close)
        return env


class GymnasiumEnvTest(ServerTestCase):

    def test_reset_returns_observation_and_info(self):
        env = self.make_env()
        observation, info = env.reset()
        self.assertEqual(observation.dtype, np.float32)
        np.testing.assert_array_equal(observation, initial_loops_tensor())
        self.assertEqual(info, {"benchmark": MM})
        self.assertIn(observation, env.observation_space)
        self.assertEqual(env.step_count, 0)
        self.assertIsNotNone(env.session_id)
        # The same as the CompilerGym-style env's reset.
        with LoopToolEnv(server.address, benchmark=MM, reward_space=None) as cg_env:
            np.testing.assert_array_equal(observation, cg_env.reset())
        # options={"benchmark": ...} switches benchmarks; a new session each time.
        session_id = env.session_id
        observation, info = env.reset(options={"benchmark": MM64})
        self.assertEqual(info, {"benchmark": MM64})
        self.assertNotEqual(env.session_id, session_id)
        np.testing.assert_array_equal(observation[0, :4], [1, 64, 0, 1])
        self.assertEqual(env.observation["flop_count"], 2 * 64 ** 3)
        with self.assertRaises(ValueError):
            env.reset(options={"benchmarks": MM})

    def test_step_returns_five_tuple_with_exact_states(self):
        env = self.make_env(render_mode="ansi")
        cg_env = LoopToolEnv(server.address, benchmark=MM, reward_space=None)
        self.addCleanup(cg_env.close)
        env.reset()
        cg_env.reset()
        self.assertEqual(env.render(), INITIAL_LOOP_TREE)
        expected = [("split_4", SPLIT_4_LOOP_TREE), (1, SPLIT_4_DOWN_LOOP_TREE),
                    (np.int64(3), SPLIT_4_DOWN_SWAP_LOOP_TREE)]
        for action, tree in expected:
            result = env.step(action)
            self.assertEqual(len(result), 5)
            observation, reward, terminated, truncated, info = result
            self.assertEqual(env.render(), tree)
            self.assertIs(type(reward), float)
            self.assertEqual((terminated, truncated), (False, False))
            self.assertIs(type(terminated), bool)
            self.assertEqual(info, {"action_had_no_effect": False})
            self.assertIn(observation, env.observation_space)
            cg_observation, _, _, _ = cg_env.step(action)
            np.testing.assert_array_equal(observation, cg_observation)
        self.assertEqual(env.step_count, 3)
        # An action that cannot apply: no effect, reward 0 (same schedule, cached measurement).
        env.reset()
        _, reward, terminated, truncated, info = env.step("up")
        self.assertEqual((reward, terminated, truncated), (0.0, False, False))
        self.assertEqual(info, {"action_had_no_effect": True})
        self.assertEqual(env.render(), INITIAL_LOOP_TREE)

    def test_reward(self):
        env = self.make_env()
        env.reset()
        peak, before = env.observation["peak_gflops"], env.observation["flops"]
        _, reward, _, _, _ = env.step("split_8")
        self.assertEqual(reward, (env.observation["flops"] - before) / peak)
        self.assertEqual(env.episode_reward, reward)
        no_reward = self.make_env(reward_space=None)
        no_reward.reset()
        self.assertEqual(no_reward.step("down")[1], 0.0)

    def test_truncated_at_max_steps(self):
        env = self.make_env(max_steps=3, reward_space=None)
        env.reset()
        results = [env.step("down")[2:4] for _ in range(4)]
        self.assertEqual(results, [(False, False), (False, False), (False, True), (False, True)])
        env.reset()
        self.assertEqual(env.step("down")[2:4], (False, False))

    def test_terminated_when_the_session_is_lost(self):
        env = self.make_env()
        env.reset()
        session_id = env.session_id
        channel = grpc.insecure_channel(server.address)
        self.addCleanup(channel.close)
        pb_grpc.CompilerGymServiceStub(channel).EndSession(
            pb.EndSessionRequest(session_id=session_id))
        observation, reward, terminated, truncated, info = env.step("split_4")
        self.assertEqual((reward, terminated, truncated), (0.0, True, False))
        np.testing.assert_array_equal(observation, np.zeros((1, 320), dtype=np.float32))
        self.assertIn(observation, env.observation_space)
        self.assertEqual(info, {"action_had_no_effect": True, "error_type": "SessionNotFound",
                                "error_code": "NOT_FOUND",
                                "error_details": f"Session not found: {session_id}"})
        with self.assertRaises(RuntimeError):
            env.step("down")  # reset() first
        np.testing.assert_array_equal(env.reset()[0], initial_loops_tensor())

    def test_action_space(self):
        env = self.make_env()
        space = env.action_space
        self.assertIsInstance(space, NamedDiscreteSpace)
        self.assertIsInstance(space, gymnasium_spaces.Discrete)
        self.assertEqual((space.n, space.shape, space.dtype), (17, (), np.int64))
        self.assertEqual(space.name, "loop_tool")
        self.assertEqual(list(space.names), LOOP_TOOL_ACTIONS)
        self.assertEqual(space.index("split_4"), 5)
        self.assertEqual(space.action_name(np.int64(16)), "vectorize")
        with self.assertRaises(ValueError):
            space.index("split_3")
        with self.assertRaises(IndexError):
            space.action_name(17)
        for _ in range(50):
            action = space.sample()
            self.assertTrue(space.contains(action))
            self.assertIn(action, space)
        for inside in (0, 16, np.int64(5), np.array(3)):
            self.assertTrue(space.contains(inside), inside)
        for outside in (17, -1, 2.0, "down", None, np.array([1])):
            self.assertFalse(space.contains(outside), outside)
        env.reset()
        for bad in (17, -1, 2.5, "split_3"):
            with self.assertRaises(ValueError):
                env.step(bad)
        self.assertEqual(env.step_count, 0)
        self.assertEqual(env.observation["loop_tree"], INITIAL_LOOP_TREE)
        tune = self.make_env(action_space="loop_tune")
        self.assertEqual((tune.action_space.n, list(tune.action_space.names)),
                         (7, LOOP_TUNE_ACTIONS))

    def test_masked_sample_returns_allowed_actions_only(self):
        env = self.make_env()
        env.reset(seed=0)
        mask = env.observation["action_mask"]
        self.assertEqual((mask.dtype, mask.shape), (np.bool_, (17,)))
        allowed = {LOOP_TOOL_ACTIONS.index(a) for a in INITIAL_ALLOWED}
        samples = {int(env.action_space.sample(mask=mask)) for _ in range(300)}
        self.assertEqual(samples, allowed)  # only allowed ones, and (300 draws) all of them
        int8 = {int(env.action_space.sample(mask=mask.astype(np.int8))) for _ in range(100)}
        self.assertLessEqual(int8, allowed)
        one = np.zeros(17, dtype=bool)
        one[LOOP_TOOL_ACTIONS.index("unroll")] = True
        self.assertEqual(env.action_space.sample(mask=one), 15)
        self.assertEqual(env.action_space.sample(mask=np.zeros(17, dtype=bool)), 0)  # start
        with self.assertRaises(ValueError):
            env.action_space.sample(mask=np.ones(7, dtype=bool))
        # Masked samples step without effect-free actions.
        for _ in range(5):
            action = env.action_space.sample(mask=env.observation["action_mask"])
            _, _, _, _, info = env.step(action)
            self.assertFalse(info["action_had_no_effect"], env.action_space.names[action])

    def test_seeding_gives_reproducible_samples(self):
        env, other = self.make_env(), self.make_env()

        def draws(e):
            return ([int(e.action_space.sample()) for _ in range(20)],
                    e.observation_space.sample(), e.np_random.integers(1 << 30))

        env.reset(seed=7)
        first = draws(env)
        env.reset(seed=7)
        again = draws(env)
        other.reset(seed=7)
        elsewhere = draws(other)
        for a, b in ((first, again), (first, elsewhere)):
            self.assertEqual(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])
            self.assertEqual(a[2], b[2])
        self.assertIn(first[1], env.observation_space)
        env.reset(seed=8)
        self.assertNotEqual(draws(env)[0], first[0])
        # space.seed() alone, as gymnasium's spaces do.
        env.action_space.seed(7)
        self.assertEqual([int(env.action_space.sample()) for _ in range(20)], first[0])
        # reset() without a seed keeps the generators going.
        env.reset(seed=7)
        env.action_space.sample()
        env.reset()
        self.assertEqual([int(env.action_space.sample()) for _ in range(19)], first[0][1:])

    def test_observation_spaces(self):
        box = self.make_env().observation_space
        self.assertIsInstance(box, gymnasium_spaces.Box)
        self.assertEqual((box.shape, box.dtype), ((1, 320), np.float32))
        np.testing.assert_array_equal(box.low, np.zeros((1, 320), np.float32))
        np.testing.assert_array_equal(box.high, np.full((1, 320), 8192, np.float32))
        self.assertTrue(box.contains(initial_loops_tensor()))
        self.assertFalse(box.contains(np.zeros((1, 16), np.float32)))
        self.assertFalse(box.contains(np.full((1, 320), -1, np.float32)))
        self.assertFalse(box.contains(np.zeros((1, 320), np.float64)))  # no downcast
        for name, shape, high in (("stride_tensor", (1, 16), np.finfo(np.float32).max),
                                  ("5_prev_actions_tensor", (1, 85), 1.0)):
            env = self.make_env(observation_space=name)
            self.assertEqual((env.observation_space.shape, env.observation_space.high.max()),
                             (shape, np.float32(high)))
            self.assertIn(env.reset()[0], env.observation_space)
            self.assertIn(env.observation_space.sample(), env.observation_space)
        text = self.make_env(observation_space="loop_tree", render_mode="ansi")
        self.assertIsInstance(text.observation_space, gymnasium_spaces.Text)
        observation, _ = text.reset()
        self.assertEqual(observation, INITIAL_LOOP_TREE)
        self.assertIn(observation, text.observation_space)
        self.assertNotIn("caf\u00e9", text.observation_space)
        self.assertIn(text.observation_space.sample(), text.observation_space)
        self.assertEqual(text.step("split_4")[0], SPLIT_4_LOOP_TREE)
        mask = self.make_env(observation_space="action_mask", action_space="loop_tune")
        self.assertIsInstance(mask.observation_space, gymnasium_spaces.MultiBinary)
        self.assertEqual(mask.observation_space.shape, (7,))
        observation, _ = mask.reset()
        np.testing.assert_array_equal(observation, [False, True, False, True, True, True, True])
        self.assertIn(observation, mask.observation_space)
        scalar = self.make_env(observation_space="flop_count", reward_space=None)
        self.assertEqual((scalar.observation_space.shape, scalar.observation_space.dtype),
                         ((), np.int64))
        observation, _ = scalar.reset()
        self.assertEqual((observation, observation.shape), (2 * 112 * 208 * 256, ()))
        self.assertIn(observation, scalar.observation_space)
        with self.assertRaises(ValueError):
            self.make_env(observation_space="ir_graph_networkx")
        with self.assertRaises(KeyError):
            self.make_env(observation_space="nope")

    def test_render_fork_and_close(self):
        self.assertIsNone(self.make_env().render())  # render_mode None
        with self.assertRaises(ValueError):
            self.make_env(render_mode="human")
        with GymnasiumEnv(server.address, benchmark=MM, render_mode="ansi") as env:
            env.reset()
            env.step("split_4")
            child = env.fork()
            self.addCleanup(child.close)
            self.assertIsInstance(child, GymnasiumEnv)
            child.step("down")
            self.assertEqual(child.render(), SPLIT_4_DOWN_LOOP_TREE)
            self.assertEqual(env.render(), SPLIT_4_LOOP_TREE)
            self.assertEqual((env.step_count, child.step_count), (1, 2))
            session_id = env.session_id
        self.assertIsNone(env.session_id)
        env.close()  # idempotent
        channel = grpc.insecure_channel(server.address)
        self.addCleanup(channel.close)
        with self.assertRaises(grpc.RpcError) as caught:
            pb_grpc.CompilerGymServiceStub(channel).Step(pb.StepRequest(session_id=session_id))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(child.render(), SPLIT_4_DOWN_LOOP_TREE)  # the fork lives on


class MakeTest(ServerTestCase):

    def make(self, id, **kwargs):
        env = looptool.make(id, **kwargs)
        self.addCleanup(env.close)
        return env

    def test_registered_ids(self):
        self.assertEqual(list(looptool.registry),
                         ["looptool/LoopTool-v0", "looptool/LoopTune-v0",
                          "looptool/LoopTool-cg-v0"])
        env = self.make("looptool/LoopTool-v0", service=server.address)
        self.assertIsInstance(env, GymnasiumEnv)
        self.assertEqual((env.benchmark, env.action_space.n), (MM, 17))
        observation, info = env.reset()
        np.testing.assert_array_equal(observation, initial_loops_tensor())
        _, reward, terminated, truncated, _ = env.step("split_4")
        self.assertIsInstance(reward, float)  # LoopTune's reward
        self.assertEqual((terminated, truncated), (False, False))

        tune = self.make("looptool/LoopTune-v0", service=server, max_steps=1)  # a LocalServer
        self.assertEqual(list(tune.action_space.names), LOOP_TUNE_ACTIONS)
        tune.reset()
        self.assertTrue(tune.step("split_16")[3])

        cg_env = self.make("looptool/LoopTool-cg-v0", service=server.address, max_steps=2)
        self.assertIs(type(cg_env), LoopToolEnv)
        np.testing.assert_array_equal(cg_env.reset(), initial_loops_tensor())
        result = cg_env.step("down")
        self.assertEqual(len(result), 4)
        self.assertEqual(cg_env.step("down")[2], True)

        # Keyword arguments override the registered ones.
        other = self.make("looptool/LoopTool-v0", service=server.address,
                          benchmark=MM64,
                          observation_space="loop_tree", reward_space=None)
        self.assertTrue(other.reset()[0].startswith("for m in 64 : L0"))

    def test_errors(self):
        with self.assertRaises(ValueError) as caught:
            looptool.make("looptool/LoopTol-v0", service=server.address)
        self.assertIn("Did you mean looptool/LoopTool-v0", str(caught.exception))
        with self.assertRaises(TypeError):
            looptool.make("looptool/LoopTool-v0")  # no service
        with self.assertRaises(ValueError):
            looptool.register("looptool/LoopTool-v0", GymnasiumEnv)

    def test_register(self):
        calls = []

        def entry_point(service, **kwargs):
            calls.append(kwargs)
            return GymnasiumEnv(service, **kwargs)

        looptool.register("test/Custom-v0", entry_point,
                          {"benchmark": MM, "observation_space": "ir", "reward_space": None})
        self.addCleanup(looptool.registry.pop, "test/Custom-v0")
        env = self.make("test/Custom-v0", service=server.address, max_steps=5)
        self.assertEqual(calls, [{"benchmark": MM, "observation_space": "ir",
                                  "reward_space": None, "max_steps": 5}])
        self.assertTrue(env.reset()[0].startswith("C[m, n] += A[m, k] * B[k, n]\n"))
        looptool.register("test/Custom-v0", "looptool.env:LoopToolEnv", {"benchmark": MM},
                          override=True)
        self.assertIs(type(self.make("test/Custom-v0", service=server.address)), LoopToolEnv)


@unittest.skipIf(looptool.HAVE_GYMNASIUM, "gymnasium is installed: the plain classes are unused")
class WithoutGymnasiumTest(unittest.TestCase):
    """Debian 12 has no gymnasium: the plain classes are the ones in use."""

    def test_plain_classes(self):
        self.assertIs(gymnasium_spaces.Discrete, gymnasium_spaces.PlainDiscrete)
        self.assertIs(gymnasium_spaces.Box, gymnasium_spaces.PlainBox)
        self.assertTrue(issubclass(GymnasiumEnv, looptool.gymnasium_env.PlainEnv))
        self.assertTrue(issubclass(NamedDiscreteSpace, gymnasium_spaces.PlainDiscrete))

    def test_box(self):
        box = gymnasium_spaces.Box(low=np.array([0, -np.inf, -1, -np.inf]),
                                   high=np.array([1, 0, np.inf, np.inf]), dtype=np.float32,
                                   seed=3)
        self.assertEqual((box.shape, box.dtype, box.is_bounded()), ((4,), np.float32, False))
        samples = [box.sample() for _ in range(100)]
        self.assertTrue(all(s in box for s in samples))
        self.assertEqual(box.sample().dtype, np.float32)
        box.seed(3)
        np.testing.assert_array_equal(box.sample(), samples[0])
        self.assertFalse(box.contains(np.array([2, 0, 0, 0], np.float32)))
        self.assertFalse(box.contains([0.5, -1]))
        ints = gymnasium_spaces.Box(low=0, high=3, shape=(50,), dtype=np.int64, seed=0)
        self.assertEqual(set(ints.sample().tolist()), {0, 1, 2, 3})
        self.assertTrue(ints.contains([3] * 50))
        discrete = gymnasium_spaces.Discrete(4, seed=0)
        self.assertEqual({int(discrete.sample()) for _ in range(100)}, {0, 1, 2, 3})
        with self.assertRaises(ValueError):
            discrete.sample(mask=np.ones(4, dtype=bool))  # the plain Discrete wants int8
        self.assertEqual(discrete.sample(mask=np.array([0, 0, 1, 0], np.int8)), 2)
        text = gymnasium_spaces.Text(5, min_length=2, charset="ab", seed=0)
        self.assertTrue(all(text.contains(text.sample()) for _ in range(20)))
        self.assertEqual(len(text.sample(mask=(4, None))), 4)
        self.assertFalse(text.contains("abc!"))
        binary = gymnasium_spaces.MultiBinary(3, seed=0)
        self.assertIn(binary.sample(), binary)
        np.testing.assert_array_equal(binary.sample(mask=np.array([0, 1, 0], np.int8)),
                                      [0, 1, 0])
        self.assertFalse(binary.contains(np.array([0, 2, 0])))


# --- the gymnasium path ------------------------------------------------------------------------
# Debian 12 ships no gymnasium (no python3-gymnasium package; PyPI is off limits here), so this
# fake `gymnasium` package is a stand-in: just what looptool uses (Env; spaces.Discrete, Box,
# MultiBinary, Text; register; make), written after gymnasium 1.0's behaviour where it matters
# (Discrete.sample takes int8 masks only; make() accepts only gymnasium.Env instances and merges
# the registered kwargs). looptool is imported afresh under it, then the real modules are put
# back.

def fake_gymnasium():
    gym = types.ModuleType("gymnasium")
    spaces = types.ModuleType("gymnasium.spaces")

    class Space:
        def __init__(self, shape=None, dtype=None, seed=None):
            self._shape = None if shape is None else tuple(shape)
            self.dtype = None if dtype is None else np.dtype(dtype)
            self._np_random = None
            if seed is not None:
                self.seed(seed)

        @property
        def shape(self):
            return self._shape

        @property
        def np_random(self):
            if self._np_random is None:
                self.seed()
            return self._np_random

        def seed(self, seed=None):
            self._np_random = np.random.default_rng(seed)
            return [seed]

        def __contains__(self, x):
            return self.contains(x)

    class Discrete(Space):
        def __init__(self, n, seed=None, start=0):
            self.n, self.start = np.int64(n), np.int64(start)
            super().__init__((), np.int64, seed)

        def sample(self, mask=None):
            if mask is not None:
                assert isinstance(mask, np.ndarray) and mask.dtype == np.int8, mask
                assert mask.shape == (self.n,), mask.shape
                valid = np.flatnonzero(mask == 1)
                return self.start + np.int64(self.np_random.choice(valid)) if len(valid) \
                    else self.start
            return self.start + self.np_random.integers(self.n)

        def contains(self, x):
            if isinstance(x, int):
                x = np.int64(x)
            elif not (isinstance(x, (np.generic, np.ndarray))
                      and np.issubdtype(x.dtype, np.integer) and x.shape == ()):
                return False
            return bool(self.start <= x < self.start + self.n)

        def __eq__(self, other):
            return isinstance(other, Discrete) and self.n == other.n

    class Box(Space):
        def __init__(self, low, high, shape=None, dtype=np.float32, seed=None):
            self.low = np.broadcast_to(np.asarray(low, dtype), shape).copy()
            self.high = np.broadcast_to(np.asarray(high, dtype), shape).copy()
            super().__init__(shape, dtype, seed)

        def sample(self, mask=None):
            low = np.maximum(self.low, -1e6).astype(np.float64)
            high = np.minimum(self.high, 1e6).astype(np.float64)
            return self.np_random.uniform(low, high).astype(self.dtype)

        def contains(self, x):
            x = np.asarray(x)
            return bool(np.can_cast(x.dtype, self.dtype) and x.shape == self.shape
                        and np.all(x >= self.low) and np.all(x <= self.high))

    class MultiBinary(Space):
        def __init__(self, n, seed=None):
            self.n = n
            super().__init__((n,), np.int8, seed)

        def sample(self, mask=None):
            return self.np_random.integers(0, 2, size=self.shape, dtype=np.int8)

        def contains(self, x):
            return bool(isinstance(x, np.ndarray) and x.shape == self.shape
                        and np.all((x == 0) | (x == 1)))

    class Text(Space):
        def __init__(self, max_length, *, min_length=1, charset="abc", seed=None):
            self.max_length, self.min_length = max_length, min_length
            self.character_set = frozenset(charset)
            super().__init__(None, str, seed)

        def sample(self, mask=None):
            length = self.np_random.integers(self.min_length, min(self.max_length, 64) + 1)
            return "".join(self.np_random.choice(sorted(self.character_set), size=length))

        def contains(self, x):
            return (isinstance(x, str) and self.min_length <= len(x) <= self.max_length
                    and set(x) <= self.character_set)

    class Env:
        metadata = {"render_modes": []}
        render_mode = None
        spec = None
        _np_random = None

        @property
        def np_random(self):
            if self._np_random is None:
                self._np_random = np.random.default_rng()
            return self._np_random

        def reset(self, *, seed=None, options=None):
            if seed is not None:
                self._np_random = np.random.default_rng(seed)

        @property
        def unwrapped(self):
            return self

        def close(self):
            pass

    registry = {}

    def register(id, entry_point=None, kwargs=None, **options):
        registry[id] = types.SimpleNamespace(id=id, entry_point=entry_point,
                                             kwargs=dict(kwargs or {}), options=options)

    def make(id, **kwargs):
        env_spec = registry[id]  # KeyError: not registered
        module, _, attribute = env_spec.entry_point.partition(":")
        creator = getattr(importlib.import_module(module), attribute)
        env = creator(**{**env_spec.kwargs, **kwargs})
        if not isinstance(env, Env):
            raise TypeError(f"The environment must inherit from gymnasium.Env, got {type(env)}")
        env.unwrapped.spec = env_spec
        return env

    for cls in (Space, Discrete, Box, MultiBinary, Text):
        setattr(spaces, cls.__name__, cls)
    gym.spaces, gym.Env, gym.registry = spaces, Env, registry
    gym.register, gym.make = register, make
    return gym


class WithGymnasiumTest(unittest.TestCase):
    """looptool imported afresh with the stand-in gymnasium above importable."""

    def setUp(self):
        def ours(name):
            return name.split(".")[0] in ("looptool", "gymnasium")

        saved = {name: module for name, module in sys.modules.items() if ours(name)}

        def restore():
            for name in [name for name in sys.modules if ours(name)]:
                del sys.modules[name]
            sys.modules.update(saved)

        self.addCleanup(restore)
        for name in saved:
            del sys.modules[name]
        self.gym = fake_gymnasium()
        sys.modules["gymnasium"] = self.gym
        sys.modules["gymnasium.spaces"] = self.gym.spaces
        self.lt = importlib.import_module("looptool")
        self.assertIsNot(self.lt, looptool)

    def test_classes_are_gymnasiums(self):
        lt, gym = self.lt, self.gym
        self.assertTrue(lt.HAVE_GYMNASIUM)
        self.assertTrue(issubclass(lt.GymnasiumEnv, gym.Env))
        self.assertTrue(issubclass(lt.NamedDiscreteSpace, gym.spaces.Discrete))
        spaces = lt.gymnasium_spaces
        self.assertIs(spaces.Box, gym.spaces.Box)
        self.assertIs(spaces.Text, gym.spaces.Text)
        self.assertIs(spaces.MultiBinary, gym.spaces.MultiBinary)
        self.assertIs(spaces.Discrete, gym.spaces.Discrete)

    def test_gymnasium_register_and_make(self):
        lt, gym = self.lt, self.gym
        # The Gymnasium-style ids are registered with gymnasium; the 4-tuple one is not.
        self.assertEqual(sorted(gym.registry), ["looptool/LoopTool-v0", "looptool/LoopTune-v0"])
        self.assertEqual(gym.registry["looptool/LoopTool-v0"].kwargs,
                         lt.registry["looptool/LoopTool-v0"].kwargs)
        with self.assertRaises(KeyError):
            gym.make("looptool/LoopTool-cg-v0", service=server.address)

        env = gym.make("looptool/LoopTool-v0", service=server.address, max_steps=2,
                       render_mode="ansi")
        self.addCleanup(env.close)
        self.assertIsInstance(env, gym.Env)
        self.assertIsInstance(env, lt.GymnasiumEnv)
        self.assertIsInstance(env.observation_space, gym.spaces.Box)
        self.assertIsInstance(env.action_space, gym.spaces.Discrete)
        self.assertEqual(env.spec.id, "looptool/LoopTool-v0")
        observation, info = env.reset(seed=5)
        np.testing.assert_array_equal(observation, initial_loops_tensor())
        self.assertIn(observation, env.observation_space)  # gymnasium's Box.contains
        first = int(env.np_random.integers(1000))
        env.reset(seed=5)
        self.assertEqual(int(env.np_random.integers(1000)), first)  # gymnasium.Env's seeding
        # A bool action mask through gymnasium's int8-only Discrete.sample.
        mask = env.observation["action_mask"]
        allowed = {LOOP_TOOL_ACTIONS.index(a) for a in INITIAL_ALLOWED}
        samples = [env.action_space.sample(mask=mask) for _ in range(50)]
        self.assertLessEqual({int(s) for s in samples}, allowed)
        self.assertTrue(all(env.action_space.contains(s) for s in samples))
        observation, reward, terminated, truncated, info = env.step("split_4")
        self.assertEqual(env.render(), SPLIT_4_LOOP_TREE)
        self.assertIn(observation, env.observation_space)
        self.assertEqual((terminated, truncated), (False, False))
        self.assertTrue(env.step(samples[0])[3])  # truncated at max_steps=2

        # looptool.make and its own ids work the same under gymnasium.
        cg_env = lt.make("looptool/LoopTool-cg-v0", service=server.address)
        self.addCleanup(cg_env.close)
        self.assertIsInstance(cg_env, lt.LoopToolEnv)
        text = lt.make("looptool/LoopTool-v0", service=server.address,
                       observation_space="loop_tree", reward_space=None)
        self.addCleanup(text.close)
        self.assertIsInstance(text.observation_space, gym.spaces.Text)
        self.assertIn(text.reset()[0], text.observation_space)


if __name__ == "__main__":
    unittest.main()
