"""LoopToolEnv against a real looptool-server: observations with exact values (also several by
name in a step's round trip), actions by name and index, LoopTune's reward, fork (with other
spaces), programs sent with reset, max_steps, graceful ends (session gone, crashing and hanging
kernels) with the error kept, and errors that are the caller's."""

import json
import unittest

import grpc
import networkx as nx
import numpy as np

from looptool import Connection, LocalServer, LoopToolEnv, ServiceError, SessionNotFound
from looptool._proto import compiler_gym_service_pb2 as pb
from looptool._proto import compiler_gym_service_pb2_grpc as pb_grpc

SERVER = "service/looptool-server"
TEST_SERVER = "tests/faults/looptool-test-server"  # the server with fault injection linked in
MM = "benchmark://mm64_256_16_range-v0/mm112_208_256"
LOOPTUNE_SEQUENCE = ["split_4", "down", "swap_down", "down", "split_16", "swap_up", "swap_up",
                     "swap_up", "split_8"]

INITIAL_LOOP_TREE = ("for m in 112 : L0  <<<<<< cursor (line 0 )\n"
                     " for k in 256 : L1\n"
                     "  for n in 208 : L2\n"
                     "   %2[m, k, n] <- multiply(%0, %1)\n"
                     "   %3[m, n] <- add(%2)\n"
                     " for n in 208 : L5\n"
                     "  %4[m, n] <- write(%3)\n")
# LoopTune's schedule for mm112_208_256 (looptune.md 1.2), in LoopTool's notation.
LOOPTUNE_LOOP_TREE = ("for n in 1 r 80 : L0  <<<<<< cursor (line 0 )\n"
                      " for n' in 8 : L1\n"
                      "  for m in 28 : L2\n"
                      "   for k in 256 : L3\n"
                      "    for m' in 4 : L4\n"
                      "     for n'' in 16 : L5\n"
                      "      %2[m, k, n] <- multiply(%0, %1)\n"
                      "      %3[m, n] <- add(%2)\n"
                      "for m in 28 : L8\n"
                      " for m' in 4 : L9\n"
                      "  for n in 208 : L10\n"
                      "   %4[m, n] <- write(%3)\n")

LOOP_TOOL_ACTIONS = ["up", "down", "swap_up", "swap_down", "split_2", "split_4", "split_8",
                     "split_16", "split_32", "split_64", "split_128", "split_256", "split_512",
                     "split_1024", "merge", "unroll", "vectorize"]


def initial_loops_tensor():
    """loops_tensor of mm112_208_256 before any action: one 20-float row per loop,
    [cursor, size, tail, in compute nest, stride histogram (16 buckets)], 16 rows."""
    t = np.zeros((16, 20), dtype=np.float32)
    t[0, :4] = [1, 112, 0, 1]   # m: the cursor is here; A[m,k] has stride 256 = 2^8 -> bucket 8
    t[0, 4 + 8] = 1.0
    t[1, :4] = [0, 256, 0, 1]   # k: A stride 1 (bucket 0), B stride 208 (bucket 8), half each
    t[1, 4 + 0] = 0.5
    t[1, 4 + 8] = 0.5
    t[2, :4] = [0, 208, 0, 1]   # n: B stride 1
    t[2, 4 + 0] = 1.0
    t[3, :4] = [0, 208, 0, 0]   # the write-back nest's n
    t[3, 4 + 0] = 1.0
    return t.reshape(1, 320)


class LoopToolEnvTest(unittest.TestCase):
    """One server for the class; the fault hook on, timing kept short."""

    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(TEST_SERVER, flags=["--timing_budget_ms=1"])

    @classmethod
    def tearDownClass(cls):
        status = cls.server.close()
        if status != 0:  # SIGTERM drains and exits 0
            raise AssertionError(f"looptool-server exited with status {status}")

    def make_env(self, **kwargs):
        kwargs.setdefault("benchmark", MM)
        env = LoopToolEnv(self.server.address, **kwargs)
        self.addCleanup(env.close)
        return env

    def raw_stub(self):
        channel = grpc.insecure_channel(self.server.address)
        self.addCleanup(channel.close)
        return pb_grpc.CompilerGymServiceStub(channel)

    def test_spaces(self):
        env = self.make_env()
        self.assertEqual(env.action_space.name, "loop_tool")
        self.assertEqual(list(env.action_space.names), LOOP_TOOL_ACTIONS)
        self.assertEqual(env.action_space.n, 17)
        self.assertEqual(list(env.observation_spaces),
                         ["ir", "loop_tree", "loops_tensor", "stride_tensor",
                          "5_prev_actions_tensor", "ir_graph_networkx", "ir_tree_networkx",
                          "action_mask", "flop_count", "flops", "runtime", "timing",
                          "peak_gflops", "predicted_gflops", "sketches", "kernel_plan",
                          "kernel_abi", "machine_code", "roofline", "roofline_fraction",
                          "plan_features", "loop_features", "action_state"])
        self.assertEqual(env.observation_spaces["loops_tensor"].shape, (1, 320))
        self.assertEqual(env.observation_spaces["stride_tensor"].shape, (1, 16))
        self.assertEqual(env.observation_spaces["5_prev_actions_tensor"].shape, (1, 85))
        self.assertEqual(env.observation_spaces["ir_tree_networkx"].kind, "graph")
        self.assertEqual(env.observation_spaces["flops"].kind, "double")
        self.assertFalse(env.observation_spaces["flops"].deterministic)
        tune = self.make_env(action_space="loop_tune")
        self.assertEqual(list(tune.action_space.names),
                         ["up", "down", "swap_up", "swap_down", "split_4", "split_8", "split_16"])
        with self.assertRaises(ValueError):
            self.make_env(action_space="nope")
        with self.assertRaises(KeyError):
            self.make_env(observation_space="nope")
        with self.assertRaises(ValueError):
            self.make_env(reward_space="runtime")

    def test_loop_nest_takes_triples_names_and_indices(self):
        nest = self.make_env(action_space="loop_nest", observation_space="loop_tree")
        by_name = self.make_env(action_space="loop_nest", observation_space="loop_tree")
        self.assertEqual(nest.action_space.n, 592)
        self.assertEqual(nest.action_space.names[4], "tile_L0_6")
        nest.reset()
        by_name.reset()
        tree, _, _, info = nest.step((0, 0, 4))  # tile m by 6 rows
        self.assertFalse(info["action_had_no_effect"])
        self.assertIn("for m' in 6 : L1", tree)
        self.assertEqual(tree, by_name.step("tile_L0_6")[0])
        tree, _, _, _ = nest.step(np.array([1, 2, 1]))  # k above m'
        self.assertEqual(tree, by_name.step(256 + 2 * 16 + 1)[0])
        with self.assertRaisesRegex(ValueError, r"the level is out of range \(0..15\)"):
            nest.step((0, 16, 0))
        with self.assertRaisesRegex(ValueError, "must hold three integers"):
            nest.step((0, 1))
        tool = self.make_env()
        tool.reset()
        with self.assertRaisesRegex(ValueError, "is for loop_nest, not loop_tool"):
            tool.step((0, 0, 4))

    def test_reset_returns_loops_tensor(self):
        env = self.make_env()
        self.assertIsNone(env.session_id)
        observation = env.reset()
        self.assertIsNotNone(env.session_id)
        self.assertIsInstance(observation, np.ndarray)
        self.assertEqual(observation.dtype, np.float32)
        self.assertEqual(observation.shape, (1, 320))
        np.testing.assert_array_equal(
            observation[0, :20], [1, 112, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0])
        np.testing.assert_array_equal(observation, initial_loops_tensor())
        self.assertEqual(env.observation["loop_tree"], INITIAL_LOOP_TREE)
        self.assertEqual(env.step_count, 0)
        self.assertEqual(env.episode_reward, 0.0)

    def test_looptune_sequence(self):
        env = self.make_env(reward_space=None)
        env.reset()
        for action in LOOPTUNE_SEQUENCE:
            _, reward, done, info = env.step(action)
            self.assertIsNone(reward)
            self.assertFalse(done)
        tree = env.observation["loop_tree"]
        self.assertIn("    for m' in 4 : L4\n     for n'' in 16 : L5\n", tree)
        self.assertEqual(tree, LOOPTUNE_LOOP_TREE)
        self.assertEqual(env.step_count, 9)
        self.assertEqual(env.observation["ir"],
                         "C[m, n] += A[m, k] * B[k, n]\n"
                         "m=112 n=208 k=256\n"
                         "compute 1: n(1 r 80) n(8) m(28) k(256) m(4) n(16)\n"
                         "write 1: m(28) m(4) n(208)\n"
                         "cursor 1 1\n")

    def test_actions_by_name_and_by_index_agree(self):
        by_name, by_index = self.make_env(reward_space=None), self.make_env(reward_space=None)
        by_name.reset()
        by_index.reset()
        for action in LOOPTUNE_SEQUENCE[:5]:
            a, _, _, info_a = by_name.step(action)
            b, _, _, info_b = by_index.step(LOOP_TOOL_ACTIONS.index(action))
            np.testing.assert_array_equal(a, b)
            self.assertEqual(info_a, info_b)
        self.assertEqual(by_name.observation["loop_tree"], by_index.observation["loop_tree"])
        self.assertNotEqual(by_name.observation["loop_tree"], INITIAL_LOOP_TREE)
        # multistep: the same actions in one round trip, the same state.
        batch = self.make_env(reward_space=None)
        batch.reset()
        batch.multistep(LOOPTUNE_SEQUENCE[:5])
        self.assertEqual(batch.step_count, 5)
        self.assertEqual(batch.observation["loop_tree"], by_name.observation["loop_tree"])

    def test_action_had_no_effect(self):
        env = self.make_env()
        env.reset()
        observation, reward, done, info = env.step("up")  # the cursor is on the outermost loop
        self.assertEqual(info, {"action_had_no_effect": True})
        self.assertEqual(reward, 0.0)  # same schedule, same (cached) measurement
        self.assertFalse(done)
        np.testing.assert_array_equal(observation, initial_loops_tensor())
        _, _, _, info = env.step("down")
        self.assertEqual(info, {"action_had_no_effect": False})

    def test_action_mask(self):
        env = self.make_env()
        env.reset()
        mask = env.observation["action_mask"]
        self.assertIsInstance(mask, np.ndarray)
        self.assertEqual(mask.dtype, np.bool_)
        self.assertEqual(mask.shape, (17,))
        # m=112: up and swap_up impossible at the top, splits up to 64 fit, merge has nothing
        # to merge, unroll and vectorize apply.
        allowed = {"down", "swap_down", "split_2", "split_4", "split_8", "split_16", "split_32",
                   "split_64", "unroll", "vectorize"}
        self.assertEqual([LOOP_TOOL_ACTIONS[i] for i in np.flatnonzero(mask)],
                         [a for a in LOOP_TOOL_ACTIONS if a in allowed])
        tune = self.make_env(action_space="loop_tune")
        tune.reset()
        np.testing.assert_array_equal(tune.observation["action_mask"],
                                      [False, True, False, True, True, True, True])

    def test_flop_count_and_timing_observations(self):
        env = self.make_env()
        env.reset()
        values = env.observe(["flop_count", "flops", "runtime", "peak_gflops", "timing"])
        self.assertEqual(values["flop_count"], 2 * 112 * 208 * 256)
        # The start state is the program's first kernel: the best so far, so confirmed with the
        # fixed budget (on top of its adaptive runs).
        self.assertEqual(json.loads(values["timing"])["timing"], "confirmed")
        self.assertGreater(json.loads(values["timing"])["timed_runs"], 1)
        # What compiling, verifying and timing it took the worker: more than its timed runs.
        self.assertGreater(json.loads(values["timing"])["work_seconds"],
                           json.loads(values["timing"])["timed_runs"] * values["runtime"])
        self.assertIs(type(values["flop_count"]), int)
        self.assertGreater(values["flops"], 0)
        self.assertGreater(values["peak_gflops"], 0)
        self.assertAlmostEqual(values["flops"], values["flop_count"] / values["runtime"] * 1e-9,
                               delta=1e-6 * values["flops"])
        self.assertEqual(env.peak_gflops, values["peak_gflops"])

    def test_remeasure_gives_the_gflops_and_the_peak_beside_it(self):
        env = self.make_env()
        env.reset()
        gflops, peak = env.remeasure()
        self.assertGreater(gflops, 0)
        self.assertGreater(peak, 1)
        self.assertLess(peak, 1000)
        # One reply is what send_param takes; the key answers with two.
        with self.assertRaisesRegex(ServiceError, "Expected one reply to looptool.remeasure, got 2"):
            env.send_param("looptool.remeasure", "")
        env.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            env.remeasure()

    def test_graph_observations(self):
        env = self.make_env()
        env.reset()
        tree = env.observation["ir_tree_networkx"]
        self.assertIsInstance(tree, nx.MultiDiGraph)
        # Loops m, k, n, the two compute leaves, the write-back n and its leaf.
        self.assertEqual(tree.number_of_nodes(), 7)
        self.assertEqual(sorted((u, v) for u, v, _ in tree.edges),
                         [(0, 1), (0, 5), (1, 2), (2, 3), (2, 4), (5, 6)])
        self.assertEqual(tree.nodes[0]["label"], "m in 112")
        self.assertIs(tree.nodes[0]["cursor"], True)
        self.assertEqual(tree.nodes[3]["op"], "multiply")
        graph = env.observation["ir_graph_networkx"]
        self.assertIsInstance(graph, nx.MultiDiGraph)
        self.assertGreater(graph.number_of_nodes(), 0)
        self.assertGreater(graph.number_of_edges(), 0)

    def test_observation_view(self):
        env = self.make_env()
        env.reset()
        self.assertIn("loop_tree", env.observation)
        self.assertNotIn("nope", env.observation)
        self.assertEqual(len(env.observation), 23)
        self.assertEqual(list(env.observation)[:2], ["ir", "loop_tree"])
        with self.assertRaises(KeyError):
            env.observation["nope"]
        self.assertGreaterEqual(env.observation["predicted_gflops"], 0)  # 0 until it has learned
        # loop_nest names, first the hand schedule "k/64 m/4 n/B k m n" (mm112_208_256), B the
        # block of n the server's vector unit holds in registers: 4 x 4 zmm on AVX-512, 4 x 3
        # ymm on AVX2 (12 accumulators)
        isa = env.observation["kernel_plan"].splitlines()[1].split(",")[0].strip()
        block = {"avx512": 64, "avx2": 24}[isa]
        self.assertEqual(env.observation["sketches"].splitlines()[0],
                         f"tile_L1_64 tile_L0_4 tile_L4_{block} interchange_L2_L0 "
                         "interchange_L4_L2 interchange_L4_L3")
        stride = env.observation["stride_tensor"]
        self.assertEqual((stride.dtype, stride.shape), (np.float32, (1, 16)))
        prev = env.observation["5_prev_actions_tensor"]
        self.assertEqual((prev.shape, prev.sum()), ((1, 85), 0.0))
        env.step("split_4")
        prev = env.observation["5_prev_actions_tensor"]
        self.assertEqual(prev.sum(), 1.0)  # one one-hot row

    def test_reward_is_gflops_gain_over_peak(self):
        env = self.make_env()
        env.reset()
        peak = env.observation["peak_gflops"]
        before = env.observation["flops"]
        total = 0.0
        for action in ["split_4", "down", "swap_down"]:
            _, reward, _, _ = env.step(action)
            after = env.observation["flops"]  # measurements are cached: the step's number
            self.assertIsInstance(reward, float)
            self.assertEqual(reward, (after - before) / peak)
            total += reward
            before = after
        self.assertEqual(env.episode_reward, total)
        # A new episode measures a new baseline.
        env.reset()
        self.assertEqual(env.episode_reward, 0.0)
        before = env.observation["flops"]
        _, reward, _, _ = env.step("split_8")
        self.assertEqual(reward, (env.observation["flops"] - before) / peak)

    def test_observations_by_name_in_the_step(self):
        env = self.make_env()
        flop_count, tree = env.reset(observation_spaces=["flop_count", "loop_tree"])
        self.assertEqual((flop_count, tree), (2 * 112 * 208 * 256, INITIAL_LOOP_TREE))
        before = env.observation["flops"]
        (tree, flops), reward, done, info = env.step("split_4",
                                                     observation_spaces=["loop_tree", "flops"])
        self.assertIn("for m' in 4 : L1", tree)
        self.assertEqual(reward, (flops - before) / env.peak_gflops)  # the reward goes on
        self.assertEqual((done, info), (False, {"action_had_no_effect": False}))
        observations, _, _, _ = env.multistep(["down", "swap_down"],
                                              observation_spaces=["loop_tree"])
        self.assertEqual(observations, [env.observation["loop_tree"]])
        self.assertEqual(env.step_count, 3)
        np.testing.assert_array_equal(env.step("up", observation_spaces=[])[0], [])
        with self.assertRaisesRegex(TypeError, "a list of names, not the string 'loop_tree'"):
            env.step("up", observation_spaces="loop_tree")
        with self.assertRaisesRegex(KeyError, "Unknown observation space 'nope'"):
            env.step("up", observation_spaces=["nope"])
        self.assertEqual(env.observe(["flop_count", "loop_tree"]),
                         {"flop_count": 2 * 112 * 208 * 256,
                          "loop_tree": env.observation["loop_tree"]})

    def test_reset_sends_a_program(self):
        env = self.make_env(benchmark="benchmark://user/rowsum-env", observation_space="loop_tree",
                            reward_space=None)
        self.assertEqual(env.reset(program="O[r] += I[r,c]; r=64 c=48"),
                         "for r in 64 : L0  <<<<<< cursor (line 0 )\n"
                         " for c in 48 : L1\n"
                         "  %1[r] <- add(%0)\n"
                         " %2[r] <- write(%1)\n")

    def test_fork_with_other_spaces(self):
        parent = self.make_env()
        parent.reset()
        parent.step("split_4")
        quiet = parent.fork(observation_space=None, reward_space=None)
        self.addCleanup(quiet.close)
        self.assertEqual((quiet.observation_space, quiet.reward_space), (None, None))
        self.assertEqual(quiet.step("down"), (None, None, False, {"action_had_no_effect": False}))
        self.assertIsNone(quiet.episode_reward)
        self.assertEqual(quiet.step_count, 2)  # counted from the parent's
        self.assertEqual(parent.reward_space, "flops")
        # A fork that gains a reward measures its baseline at the fork.
        before = quiet.observation["flops"]
        timed = quiet.fork(reward_space="flops")
        self.addCleanup(timed.close)
        self.assertIsNone(timed.observation_space)
        _, reward, _, _ = timed.step("swap_down")
        self.assertEqual(reward, (timed.observation["flops"] - before) / timed.peak_gflops)
        self.assertEqual(timed.episode_reward, reward)

    def test_upstream_loop_tool_v0_benchmark_switches_to_its_space(self):
        env = self.make_env(benchmark="benchmark://loop_tool-cpu-v0/1024",
                            observation_space="action_state", reward_space=None)
        self.assertEqual(list(env.reset()), [0, 1024, 0])
        self.assertEqual(env.action_space.name, "simple")  # from StartSessionReply
        for name in ["toggle_mode", "up", "toggle_mode", "up", "up"]:
            observation, _, _, _ = env.step(name)
        self.assertEqual(list(observation), [1, 3, 0])
        self.assertTrue(env.observation["loop_tree"].startswith(
            "for a in 341 r 1 : L0 cpu_parallel [thread]\n for a' in 3 : L1\n"))

    def test_no_observation_space(self):
        env = self.make_env(observation_space=None)
        self.assertIsNone(env.reset())
        observation, reward, done, info = env.step("down")
        self.assertIsNone(observation)
        self.assertIsInstance(reward, float)
        self.assertEqual(info, {"action_had_no_effect": False})

    def test_fork_is_independent(self):
        parent = self.make_env()
        parent.reset()
        parent.step("split_4")
        parent_tree = parent.observation["loop_tree"]
        child = parent.fork()
        self.addCleanup(child.close)
        self.assertNotEqual(child.session_id, parent.session_id)
        self.assertIs(child.connection, parent.connection)
        self.assertEqual(child.step_count, 1)
        self.assertEqual(child.episode_reward, parent.episode_reward)
        self.assertEqual(child.observation["loop_tree"], parent_tree)
        before = child.observation["flops"]
        _, reward, _, _ = child.step("down")
        self.assertEqual(reward, (child.observation["flops"] - before) / child.peak_gflops)
        child.multistep(["swap_down", "split_16"])
        self.assertEqual(child.step_count, 4)
        self.assertEqual(parent.step_count, 1)
        self.assertEqual(parent.observation["loop_tree"], parent_tree)
        self.assertNotEqual(child.observation["loop_tree"], parent_tree)
        # The connection is shared: closing the parent leaves the child working.
        parent.close()
        self.assertFalse(child.connection.closed)
        self.assertIn("for m' in 4", child.observation["loop_tree"])
        child.close()
        self.assertTrue(child.connection.closed)

    def test_max_steps(self):
        env = self.make_env(max_steps=3, reward_space=None)
        env.reset()
        self.assertEqual([env.step("down")[2] for _ in range(3)], [False, False, True])
        env.reset()
        self.assertFalse(env.multistep(["down", "up"])[2])
        self.assertTrue(env.step("split_2")[2])

    def test_step_after_the_session_is_gone_ends_the_episode(self):
        env = self.make_env()
        env.reset()
        session_id = env.session_id
        self.raw_stub().EndSession(pb.EndSessionRequest(session_id=session_id))
        observation, reward, done, info = env.step("split_4")
        self.assertTrue(done)
        self.assertEqual(reward, 0.0)
        np.testing.assert_array_equal(observation, np.zeros((1, 320), dtype=np.float32))
        self.assertEqual(observation.dtype, np.float32)
        self.assertEqual(info, {"action_had_no_effect": True, "error_type": "SessionNotFound",
                                "error_code": "NOT_FOUND",
                                "error_details": f"Session not found: {session_id}"})
        self.assertIsInstance(env.last_error, SessionNotFound)
        self.assertEqual(env.last_error.details, f"Session not found: {session_id}")
        self.assertIsNone(env.session_id)
        with self.assertRaises(RuntimeError):
            env.step("down")  # no episode until reset()
        np.testing.assert_array_equal(env.reset(), initial_loops_tensor())
        self.assertIsNone(env.last_error)
        self.assertNotEqual(env.session_id, session_id)
        # Asked for by name, a failed step's observations are the spaces' defaults.
        self.raw_stub().EndSession(pb.EndSessionRequest(session_id=env.session_id))
        (tree, flops), _, done, _ = env.step("down", observation_spaces=["loop_tree", "flops"])
        self.assertEqual((tree, flops, done), ("", 0.0, True))

    def test_bad_actions_raise_and_change_nothing(self):
        env = self.make_env()
        env.reset()
        for bad in (17, -1):
            with self.assertRaises(ServiceError) as caught:
                env.step(bad)
            self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn(f"Action index {bad} is out of range for action space loop_tool",
                          caught.exception.details)
        with self.assertRaises(ValueError):
            env.step("split_3")  # names are resolved on the client
        self.assertEqual(env.observation["loop_tree"], INITIAL_LOOP_TREE)
        self.assertEqual(env.step_count, 0)
        self.assertFalse(env.step("down")[2])  # the episode goes on

    def test_unknown_benchmark(self):
        env = self.make_env(benchmark="benchmark://mm64_256_16_range-v0/nonsense")
        with self.assertRaises(ServiceError) as caught:
            env.reset()
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.details,
                         "Benchmark not found: benchmark://mm64_256_16_range-v0/nonsense")
        with self.assertRaises(ValueError):
            self.make_env(benchmark=None).reset()
        # reset(benchmark=) switches benchmarks.
        env.reset("benchmark://mm64_256_16_range-v0/mm64_64_64")
        self.assertEqual(env.benchmark, "benchmark://mm64_256_16_range-v0/mm64_64_64")
        self.assertEqual(env.observation["flop_count"], 2 * 64 * 64 * 64)
        self.assertEqual(env.send_param("looptool.benchmark", ""),
                         "benchmark://mm64_256_16_range-v0/mm64_64_64")

    def test_close_ends_the_session(self):
        env = LoopToolEnv(self.server.address, benchmark=MM)
        env.reset()
        session_id = env.session_id
        env.close()
        env.close()  # idempotent
        self.assertTrue(env.connection.closed)
        with self.assertRaises(grpc.RpcError) as caught:
            self.raw_stub().Step(pb.StepRequest(session_id=session_id))
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(RuntimeError):
            env.reset()
        # A context manager closes too; a shared connection stays open.
        with Connection(self.server.address) as connection:
            with LoopToolEnv(connection, benchmark=MM) as env:
                env.reset()
                session_id = env.session_id
            self.assertFalse(connection.closed)
            with self.assertRaises(grpc.RpcError) as caught:
                self.raw_stub().Step(pb.StepRequest(session_id=session_id))
            self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_crashing_kernel_fails_one_step_only(self):
        victim = self.make_env(benchmark="benchmark://mm64_256_16_range-v0/mm64_80_96")
        bystander = self.make_env(benchmark="benchmark://mm64_256_16_range-v0/mm64_96_80")
        victim.reset()
        bystander.reset()
        self.assertEqual(victim.send_param("test.inject_fault", "crash"), "crash")
        observation, reward, done, info = victim.step("split_4")
        self.assertTrue(done)
        self.assertEqual(reward, 0.0)
        np.testing.assert_array_equal(observation, np.zeros((1, 320), dtype=np.float32))
        self.assertEqual(info["error_type"], "ServiceError")
        self.assertEqual(info["error_code"], "INTERNAL")
        self.assertIn("crashed", info["error_details"])
        _, reward, done, info = bystander.step("split_8")
        self.assertFalse(done)
        self.assertEqual(info, {"action_had_no_effect": False})
        self.assertGreater(bystander.observation["flops"], 0)
        # The victim's session lives on, as it was: a failed step changes nothing.
        self.assertIsNotNone(victim.session_id)
        self.assertGreater(victim.observation["flops"], 0)
        self.assertNotIn("for m'", victim.observation["loop_tree"])


class HangingKernelTest(unittest.TestCase):
    """A kernel that hangs past the server's --eval_deadline ends the episode gracefully."""

    def test_hang_is_deadline_exceeded(self):
        with LocalServer(TEST_SERVER, flags=["--eval_deadline=1",
                                        "--timing_budget_ms=1"]) as server:
            with LoopToolEnv(server.address, benchmark=MM) as env:
                env.reset()
                env.send_param("test.inject_fault", "hang")
                _, reward, done, info = env.step("down")
                self.assertTrue(done)
                self.assertEqual(reward, 0.0)
                self.assertEqual(info["error_code"], "DEADLINE_EXCEEDED")
                self.assertEqual(info["error_type"], "ServiceError")
                self.assertGreater(env.observation["flops"], 0)  # a fresh worker measures
            self.assertEqual(server.close(), 0)


if __name__ == "__main__":
    unittest.main()
