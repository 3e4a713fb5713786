"""looptool.rl: the benchmark lists as the service serves them, what an episode sends the
service (through a proxy: the same sessions and kernels timed as before, a lost step not sent
again), n-step returns and prioritized replay by hand,
the policy file (numpy == PyTorch == C++ on real observations, within 1e-5), short real training
runs of Ape-X DQN and PPO over a LocalCluster and a real server (weights change, the replay
fills, the greedy policy is well-formed over the action mask, checkpoints resume), and an actor
killed with SIGKILL plus a server restarted mid-run, after which training goes on."""

import csv
import dataclasses
import io
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import types
import unittest
import unittest.mock

import numpy as np
import torch

import grpc_proxy
from cpp_policy_scores import POLICY_SCORES, cpp_scores
from looptool import Connection, LocalServer, LoopToolEnv, ServiceError, ServiceTransportError
from looptool.rl import benchmarks as B
from looptool.rl import cluster, networks, replay, rollout, sketch_value, train
from looptool.rl.policy_file import Policy, masked_argmax

SERVER = "service/looptool-server"
DEFAULT_POLICY = "datasets/policies/sketch_value.json"
LOOPTUNE_POLICY = "datasets/policies/looptune_dqn.json"


class FakeEpisode:
    def __init__(self, gflops, peak=100.0):
        t = len(gflops) - 1
        self.gflops = np.asarray(gflops, np.float64)
        self.peak = peak
        self.obs = np.arange(len(gflops), dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
        self.masks = np.ones((len(gflops), 2), bool)
        self.actions = np.arange(t) % 2

    def __len__(self):
        return len(self.actions)


class BenchmarkTest(unittest.TestCase):
    def test_a_benchmark_is_a_value(self):
        b = B.Benchmark("benchmark://mm64_256_16_range-v0/mm112_208_256")
        self.assertEqual((b.name, b.program), ("mm112_208_256", None))
        self.assertEqual(B.name_of(b), "mm112_208_256")
        self.assertEqual(b, B.Benchmark("benchmark://mm64_256_16_range-v0/mm112_208_256", None))
        self.assertEqual(len({b, B.Benchmark(b.uri)}), 1)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            b.uri = "benchmark://x/y"

    def test_routing_is_by_name(self):
        servers = ["a:1", "b:2", "c:3"]
        routed = {cluster.route(B.Benchmark(f"benchmark://d/mm{i}_64_64"), servers)
                  for i in range(64, 257, 16)}
        self.assertEqual(routed, set(servers))  # spread over the servers
        self.assertEqual(cluster.route(B.Benchmark("benchmark://x/mm64_64_64"), servers),
                         cluster.route(B.Benchmark("benchmark://y/mm64_64_64"), servers))
        # datasets/split.h's hash (its offset basis is 1469598103934665603).
        self.assertEqual(cluster.fnv1a64(""), 1469598103934665603)
        self.assertEqual(cluster.fnv1a64("a"), ((1469598103934665603 ^ 97) * 1099511628211)
                         % 2 ** 64)


class ReplayTest(unittest.TestCase):
    def test_rewards(self):
        e = FakeEpisode([10, 20, 20, 40])
        np.testing.assert_allclose(replay.rewards(e, "dgflops_peak"), [0.1, 0.0, 0.2], rtol=1e-6)
        np.testing.assert_allclose(replay.rewards(e, "dlog_gflops"),
                                   [np.log(2), 0.0, np.log(2)], rtol=1e-6)

    def test_n_step_transitions_by_hand(self):
        e = FakeEpisode([10, 20, 20, 40])  # rewards 0.1, 0, 0.2
        obs, mask, action, ret, next_obs, next_mask, disc = replay.n_step_transitions(
            e, "dgflops_peak", 2, 0.5)
        np.testing.assert_allclose(ret, [0.1 + 0.5 * 0.0, 0.0 + 0.5 * 0.2, 0.2], rtol=1e-6)
        np.testing.assert_array_equal(next_obs[:, 0], [2, 3, 3])  # t + min(n, T - t)
        np.testing.assert_allclose(disc, [0.25, 0.0, 0.0])        # terminal within n: 0
        np.testing.assert_array_equal(action, [0, 1, 0])
        np.testing.assert_array_equal(obs[:, 0], [0, 1, 2])

    def test_sampling_is_proportional_to_priority(self):
        r = replay.PrioritizedReplay(4, 3, 2, alpha=1.0, seed=0)
        e = FakeEpisode([10, 20, 20, 40])
        r.add(replay.n_step_transitions(e, "dgflops_peak", 1, 0.9), priorities=[1.0, 0.0, 3.0])
        self.assertEqual(len(r), 3)
        counts = np.zeros(3)
        for _ in range(200):
            idx, batch, w = r.sample(40, beta=1.0)
            counts += np.bincount(idx, minlength=3)
            np.testing.assert_array_equal(batch["obs"][:, 0], idx)
        np.testing.assert_allclose(counts / counts.sum(), [0.25, 0.0, 0.75], atol=0.01)
        # importance weights (N p)^-beta / max: 1/(3*0.25) vs 1/(3*0.75) -> 1 and 1/3
        idx, _, w = r.sample(8, beta=1.0)
        np.testing.assert_allclose(w[idx == 2] * 3, np.ones((idx == 2).sum()), rtol=1e-5)
        r.update([2], [0.0])
        r.update([1], [2.0])
        idx, _, _ = r.sample(64)
        self.assertEqual(set(idx), {0, 1})
        # the ring: a fourth and fifth transition overwrite the oldest
        r.add(replay.n_step_transitions(FakeEpisode([1, 2, 3]), "dgflops_peak", 1, 0.9))
        self.assertEqual(len(r), 4)
        self.assertEqual(r.added, 5)

        # A checkpoint round trip: the same transitions, priorities and counters.
        state = r.state_dict()
        back = replay.PrioritizedReplay(4, 3, 2, alpha=1.0, seed=1)
        back.load_state_dict(state)
        self.assertEqual((len(back), back.added), (4, 5))
        np.testing.assert_array_equal(back._tree, r._tree)
        for k in replay.PrioritizedReplay.FIELDS:
            np.testing.assert_array_equal(back._data[k], r._data[k])
        more = replay.n_step_transitions(FakeEpisode([7, 8]), "dgflops_peak", 1, 0.9)
        r.add(more)
        back.add(more)  # both overwrite the same (oldest) slot
        np.testing.assert_array_equal(back._data["obs"], r._data["obs"])
        with self.assertRaisesRegex(ValueError, "capacity 4 does not fit one of 8"):
            replay.PrioritizedReplay(8, 3, 2).load_state_dict(state)
        with self.assertRaisesRegex(ValueError, "replay field obs has shape"):
            replay.PrioritizedReplay(4, 5, 2).load_state_dict(state)


class PolicyFileTest(unittest.TestCase):
    def test_numpy_and_torch_agree_and_the_file_round_trips(self):
        torch.manual_seed(3)
        for net in (networks.DuelingQNetwork(320, 17), networks.ActorCritic(320, 17, (64,))):
            policy = net.to_policy(meta={"seed": 3})
            x = np.random.default_rng(0).random((16, 320)).astype(np.float32) * 300
            with torch.no_grad():
                out = net(torch.from_numpy(x))
            expected = (out[0] if isinstance(out, tuple) else out).numpy()
            np.testing.assert_allclose(policy.scores(x), expected, atol=1e-5)
            again = Policy.from_json(policy.to_json())
            np.testing.assert_array_equal(again.scores(x), policy.scores(x))
            self.assertEqual(again.meta, {"seed": 3})
            back = type(net).from_policy(again)
            with torch.no_grad():
                out2 = back(torch.from_numpy(x))
            np.testing.assert_array_equal((out2[0] if isinstance(out2, tuple) else out2).numpy(),
                                          expected)

    def test_masked_argmax(self):
        self.assertEqual(masked_argmax(np.array([1.0, 3.0, 3.0]), [True, True, True]), 1)
        self.assertEqual(masked_argmax(np.array([1.0, 3.0, 3.0]), [True, False, True]), 2)
        self.assertIsNone(masked_argmax(np.array([1.0, 3.0]), [False, False]))

    def test_bad_files_are_refused(self):
        with self.assertRaisesRegex(ValueError, "Not a looptool-policy"):
            Policy.from_json('{"format": "x"}')
        p = networks.DuelingQNetwork(4, 2, (3,)).to_policy()
        d = json.loads(p.to_json())
        d["trunk"][0]["bias"] = d["head"]["bias"]  # 2 numbers where 3 belong
        with self.assertRaisesRegex(ValueError, "holds 2 numbers"):
            Policy.from_json(json.dumps(d))
        for text in ("not json", "[1, 2]", '{"format": "looptool-policy", "version": 1}'):
            with self.assertRaisesRegex(ValueError, "Not a looptool-policy file"):
                Policy.from_json(text)


class TrainArgumentsTest(unittest.TestCase):
    def refused(self, *argv):
        with self.assertRaises(SystemExit) as e, \
                unittest.mock.patch("sys.stderr", new_callable=io.StringIO) as err:
            train.parse_args(list(argv))
        self.assertEqual(e.exception.code, 2)
        return err.getvalue()

    def test_bad_arguments_are_refused_with_a_reason(self):
        self.assertIn("give --steps or --time-limit", self.refused())
        self.assertIn("--actors must be 1..256", self.refused("--steps=10", "--actors=0"))
        self.assertIn("--actors must be 1..256", self.refused("--steps=10", "--actors=100000"))
        self.assertIn("--hidden takes layer widths", self.refused("--steps=10", "--hidden=a,b"))
        self.assertIn("--hidden takes layer widths", self.refused("--steps=10", "--hidden=0"))
        self.assertIn("--timing-cores: timing cores must be 1..",
                      self.refused("--steps=10", "--timing-cores=4096"))
        self.assertIn("invalid choice", self.refused("--steps=10", "--action-space=nope"))
        self.assertIn("invalid choice", self.refused("--steps=10", "--algo=a3c"))
        self.assertIn("--actors=1 is fewer than the 2 --servers",
                      self.refused("--steps=10", "--actors=1", "--servers=127.0.0.1:1,127.0.0.1:2"))

    def test_an_unreachable_server_is_one_clear_line(self):
        with tempfile.TemporaryDirectory() as out, \
                unittest.mock.patch("sys.stderr", new_callable=io.StringIO) as err:
            code = train.main(["--steps=10", "--servers=127.0.0.1:1", f"--out={out}",
                               "--actors=1", "--no-progress"])
        self.assertEqual(code, 1)
        self.assertIn("looptool.rl.train: error:", err.getvalue())
        self.assertIn("UNAVAILABLE", err.getvalue())


def real_observations(address, count=12, seed=0, action_space="loop_tool"):
    """loops_tensor and action_mask of states reached by random actions from several benchmarks
    (train, test and off-grid)."""
    rng = np.random.default_rng(seed)
    names = ["loops_tensor", "action_mask"]
    obs, masks = [], []
    with Connection(address) as conn, LoopToolEnv(conn, action_space=action_space,
                                                  observation_space=None,
                                                  reward_space=None) as env:
        benches = (B.split(conn, "train")[::400] + B.test_benchmarks(conn, 3)
                   + B.offgrid_benchmarks(conn, 3))
        for i in range(count):
            b = benches[i % len(benches)]
            tensor, mask = env.reset(b.uri, program=b.program, observation_spaces=names)
            for _ in range(int(rng.integers(0, 6))):
                a = int(rng.choice(np.flatnonzero(mask)))
                (tensor, mask), _, _, _ = env.step(a, observation_spaces=names)
            obs.append(np.asarray(tensor, np.float32).reshape(-1))
            masks.append(np.asarray(mask, bool).reshape(-1))
    return np.asarray(obs), np.asarray(masks)


class LocalServersTest(unittest.TestCase):
    def test_this_process_keeps_off_the_timing_core_until_close(self):
        before = os.sched_getaffinity(0)
        if len(before) < 2:
            self.skipTest("one CPU: nothing to keep off")
        with cluster.Servers(timing_cores=1) as srv:
            self.assertEqual(srv.timing_cores, [max(before)])
            self.assertEqual(os.sched_getaffinity(0), before - {max(before)})
        # Closed: its CPUs back (tune_model times kernels side by side after its servers close).
        self.assertEqual(os.sched_getaffinity(0), before)


class ServerTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(SERVER, flags=["--timing_budget_ms=2"])

    @classmethod
    def tearDownClass(cls):
        cls.server.close()


OFFGRID_NAMES = ["mm37_61_97", "mm127_131_139", "mm100_100_100", "mm53_200_311", "mm250_70_190",
                 "mm512_32_64", "mm32_512_128", "mm96_384_48", "mm199_211_223", "mm300_300_45",
                 "mm64_450_333", "mm481_97_257"]


class ServerListsTest(ServerTestCase):
    def test_the_lists_are_the_servers(self):
        conn = Connection(self.server.address)
        self.addCleanup(conn.close)
        datasets = conn.datasets()
        self.assertEqual(datasets[B.DATASET], 2197)
        self.assertEqual(datasets[B.OFFGRID_DATASET], 12)
        every = conn.dataset_benchmarks(B.DATASET)
        self.assertEqual((len(every), len(set(every))), (2197, 2197))
        self.assertEqual(every[:2], ["benchmark://mm64_256_16_range-v0/mm64_64_64",
                                     "benchmark://mm64_256_16_range-v0/mm64_64_80"])
        train_set, test_set = B.split(conn, "train"), B.split(conn, "test")
        train = [b.uri for b in train_set]
        test = [b.uri for b in test_set]
        self.assertFalse(set(train) & set(test))
        self.assertEqual(sorted(train + test), sorted(every))
        self.assertEqual(train, [u for u in every if u in set(train)])  # the dataset's order
        self.assertEqual(test, [u for u in every if u in set(test)])
        self.assertEqual(len(test), 432)  # a fifth, tests/datasets/matmul_range_test.cc's number
        self.assertIn(B.Benchmark("benchmark://mm64_256_16_range-v0/mm112_208_256"), test_set)
        self.assertEqual(B.split(self.server.address, "test"), test_set)  # an address works too
        spread = B.test_benchmarks(conn, 25)
        self.assertEqual(spread[:2], [test_set[0], test_set[432 // 25]])
        self.assertEqual(len(spread), 25)
        offgrid = B.offgrid_benchmarks(conn)
        self.assertEqual([b.name for b in offgrid], OFFGRID_NAMES)
        self.assertEqual({(b.uri.rsplit("/", 1)[0], b.program) for b in offgrid},
                         {("benchmark://matmul_offgrid-v0", None)})
        self.assertEqual(B.offgrid_benchmarks(conn, 3), offgrid[:3])
        with self.assertRaisesRegex(ValueError, "split must be 'train' or 'test'"):
            B.split(conn, "validation")
        with self.assertRaises(ServiceError):
            B.split(conn, "test", dataset="no-such-dataset-v0")


class WhatEpisodesSendTest(ServerTestCase):
    """The RPCs an actor's episode sends, seen by a proxy: which sessions, which actions, which
    observations (a `flops` observation is a kernel timed, unless cached)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.proxy = grpc_proxy.Proxy(cls.server.address)
        cls.conn = Connection(cls.proxy.address)
        spaces = cls.conn.spaces()
        cls.index = {name: o.index for name, o in spaces.observation_spaces.items()}

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()
        cls.proxy.close()
        super().tearDownClass()

    def setUp(self):
        self.proxy.reset()

    def sent(self):
        """[(method, session id, actions, observation names)] in order."""
        names = {i: n for n, i in self.index.items()}
        out = []
        for method, r in self.proxy.requests:
            session = None if method == "StartSession" else r.session_id
            actions = [a.int64_value for a in getattr(r, "action", [])]
            observed = [names[i] for i in getattr(r, "observation_space", [])]
            out.append((method, session, actions, observed))
        return out

    def test_a_sketch_episode_times_the_start_and_the_chosen_sketch_only(self):
        policy = Policy.load(DEFAULT_POLICY)
        bench = B.Benchmark("benchmark://mm64_256_16_range-v0/mm112_208_256")
        e = sketch_value.run_sketch_episode(self.conn, bench, policy, "greedy")
        sent = self.sent()
        self.assertEqual(sent[0], ("StartSession", None, [], ["sketches", "flops", "peak_gflops"]))
        forks = [m for m in sent if m[0] == "ForkSession"]
        steps = [m for m in sent if m[0] == "Step"]
        n = len(forks)
        self.assertGreaterEqual(n, 4)
        self.assertEqual(len(steps), n + 1)
        self.assertTrue(all(m[3] == ["loops_tensor"] and m[2] for m in steps[:n]))
        self.assertEqual(steps[n][2:], ([], ["flops"]))  # the chosen sketch's state, timed
        self.assertEqual([m[3].count("flops") for m in sent].count(1), 2)  # start, chosen
        self.assertEqual(list(e.actions), steps[e.chosen][2])
        self.assertEqual(len(e), 1)
        ended = [m[1] for m in sent if m[0] == "EndSession"]
        self.assertEqual(len(ended), n + 1)  # every fork and the episode's session
        self.assertEqual(sent[-1][0], "EndSession")
        # Exploring with epsilon 1 times every sketch's state.
        self.proxy.reset()
        e = sketch_value.run_sketch_episode(self.conn, bench, policy, "epsilon", epsilon=1.0)
        self.assertEqual(len(e), n)
        self.assertEqual([m[3].count("flops") for m in self.sent()].count(1), n + 1)

    def test_an_episode_steps_one_action_at_a_time(self):
        torch.manual_seed(0)
        policy = networks.DuelingQNetwork(320, 7, (16,)).to_policy("loop_tune")
        bench = B.Benchmark("benchmark://mm64_256_16_range-v0/mm112_208_256")
        e = rollout.run_one(self.conn, bench, policy, "epsilon", 0.5, max_steps=4,
                            rng=np.random.default_rng(1))
        sent = self.sent()
        observed = ["loops_tensor", "action_mask", "flops"]
        self.assertEqual(sent[0], ("StartSession", None, [], observed + ["peak_gflops"]))
        self.assertEqual([m[0] for m in sent], ["StartSession"] + ["Step"] * 4 + ["EndSession"])
        self.assertEqual([m[2] for m in sent[1:5]], [[a] for a in e.actions])
        self.assertTrue(all(m[3] == observed for m in sent[1:5]))
        self.assertEqual((e.obs.shape, e.masks.shape, e.gflops.shape, e.logp.shape),
                         ((5, 320), (5, 7), (5,), (4,)))
        self.assertGreater(e.peak, 0)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            e.peak = 1.0
        # A step lost after the server ran it drops the episode; it is not sent again.
        self.proxy.reset()
        self.proxy.fail_after["Step"] = 1
        result = rollout.run_episodes(self.conn, [bench, bench], policy, "greedy", max_steps=2,
                                      seed=0)
        self.assertEqual(len(result.episodes), 1)
        self.assertEqual(len(result.errors), 1)
        self.assertIn("ServiceTransportError", result.errors[0][1])
        self.assertEqual(self.proxy.calls["Step"], 1 + 2)
        self.assertEqual(result.steps, 2)
        with self.assertRaises(ServiceTransportError):
            self.proxy.fail_after["StartSession"] = 4  # more than the retry policy's attempts
            rollout.run_one(self.conn, bench, policy)


class CppAgreementTest(ServerTestCase):
    def cpp_scores(self, policy_arg, obs):
        return cpp_scores(policy_arg, obs)

    def test_cpp_and_pytorch_agree_on_real_observations(self):
        committed = Policy.load(DEFAULT_POLICY)
        self.assertEqual((committed.kind, committed.action_space), ("sketch_value", "loop_nest"))
        looptune = Policy.load(LOOPTUNE_POLICY)
        torch.manual_seed(5)
        cases = [("default", committed), (DEFAULT_POLICY, committed),
                 ("looptune_dqn", looptune), (LOOPTUNE_POLICY, looptune)]
        with tempfile.TemporaryDirectory() as d:
            ac = networks.ActorCritic(320, 17, (64, 32)).to_policy()
            path = os.path.join(d, "ac.json")
            ac.save(path)
            cases.append((path, ac))
            for arg, policy in cases:
                obs, masks = real_observations(self.server.address,
                                               action_space=policy.action_space)
                self.assertEqual(obs.shape, (12, 320))
                self.assertGreater(len({row.tobytes() for row in obs}), 6)  # varied states
                net = {"dueling_q": networks.DuelingQNetwork,
                       "actor_critic": networks.ActorCritic,
                       "sketch_value": networks.SketchValueNetwork}[policy.kind].from_policy(policy)
                with torch.no_grad():
                    out = net(torch.from_numpy(obs))
                expected = (out[0] if isinstance(out, tuple) else out).numpy()
                got = self.cpp_scores(arg, obs)
                if policy.kind == "sketch_value":  # one value per state, no actions to mask
                    np.testing.assert_allclose(got, expected[:, None], atol=1e-5, rtol=0)
                    np.testing.assert_allclose(policy.scores(obs), expected[:, None], atol=1e-5)
                    self.assertGreater(np.ptp(expected), 0.01)  # states are told apart
                    continue
                self.assertEqual(masks.shape, (12, policy.num_actions))
                self.assertEqual(got.shape, expected.shape)
                np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0, err_msg=arg)
                # and the same greedy actions under the real masks
                for q_cpp, q_torch, m in zip(got, expected, masks):
                    a = masked_argmax(q_torch, m)
                    self.assertTrue(m[masked_argmax(q_cpp, m)])
                    self.assertAlmostEqual(q_cpp[masked_argmax(q_cpp, m)], q_torch[a], delta=1e-5)


def tiny_argv(out, address, algo="apex-dqn", steps=150, extra=()):
    return [f"--algo={algo}", f"--steps={steps}", "--actors=2", "--episodes-per-call=1",
            f"--servers={address}", f"--out={out}", "--learning-starts=32", "--eval-every=0",
            "--final-test-count=1", "--final-offgrid-count=1", "--checkpoint-every=0",
            "--log-every=1", "--no-progress", "--hidden=32,32", "--seed=4", *extra]


def tiny_args(out, address, algo="apex-dqn", steps=150, extra=()):
    return train.parse_args(tiny_argv(out, address, algo, steps, extra))


class TrainingTest(ServerTestCase):
    def check_run(self, out, algo, steps):
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
        self.assertGreaterEqual(summary["env_steps"], steps)
        self.assertGreater(summary["updates"], 0)
        for name in ("policy.json", "checkpoint.pt", "curve.csv", "curve.png", "eval.csv",
                     "eval.md", "eval.png", "train.log"):
            self.assertTrue(os.path.getsize(os.path.join(out, name)) > 0, name)
        policy = Policy.load(os.path.join(out, "policy.json"))
        self.assertEqual(policy.meta["algo"], algo)
        self.assertEqual(policy.meta["seed"], 4)
        self.assertIn(f"--algo={algo}", policy.meta["command"])
        # weights changed: the trained policy differs from the network the seed started with
        initial = train.make_learner(tiny_args(out, "x", algo), 320,
                                     policy.num_actions).policy()
        self.assertGreater(np.abs(policy.trunk[0][0] - initial.trunk[0][0]).max(), 1e-4)
        if algo == "sketch-value":
            self.check_sketch_choice(policy, out)
            return summary
        # the greedy policy is well-formed over the mask on real states
        obs, masks = real_observations(self.server.address, count=6, seed=1,
                                       action_space=policy.action_space)
        for x, m in zip(obs, masks):
            s = policy.scores(x)
            self.assertTrue(np.isfinite(s).all())
            self.assertTrue(m[policy.act(x, m)])
        with open(os.path.join(out, "eval.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["set"] for r in rows], ["test", "offgrid"])
        for r in rows:
            self.assertGreater(float(r["gflops"]), 0)
        return summary

    def check_sketch_choice(self, policy, out):
        """The greedy choice is the server's sketch whose resulting state the policy values
        most, and its kernel runs. (Whether it is faster than the start is a matter for
        benchmarks: a 120-step policy on a shared 2-core machine asserts nothing about speed.)"""
        conn = Connection(self.server.address)
        bench = B.test_benchmarks(conn, 1)[0]
        e = sketch_value.run_sketch_episode(conn, bench, policy, "greedy")
        with LoopToolEnv(conn, benchmark=bench.uri, action_space="loop_nest",
                         observation_space=None, reward_space=None) as env:
            env.reset()
            names = env.action_space.names
            lines = env.observation["sketches"].splitlines()
            values = []
            for line in lines:
                with env.fork() as fork:
                    (obs,), _, _, _ = fork.multistep(line.split(),
                                                     observation_spaces=["loops_tensor"])
                values.append(float(policy.scores(np.asarray(obs, np.float32).reshape(-1))[0]))
        # The same choice on a LoopToolEnv, applied there.
        with LoopToolEnv(conn, benchmark=bench.uri, action_space="loop_nest",
                         reward_space=None) as env:
            env.reset()
            choice = sketch_value.choose(env, policy)
            self.assertEqual(" ".join(choice), lines[int(np.argmax(values))])
            env.multistep(choice)
            self.assertGreater(env.observation["flops"], 0)
        with LoopToolEnv(conn, benchmark=bench.uri, action_space="loop_tool",
                         reward_space=None) as env:
            env.reset()
            with self.assertRaisesRegex(ValueError, "chooses among loop_nest sketches"):
                sketch_value.choose(env, policy)
        conn.close()
        self.assertGreaterEqual(len(lines), 4)
        self.assertEqual(e.chosen, int(np.argmax(values)))
        self.assertEqual(" ".join(names[a] for a in e.actions), lines[e.chosen])
        self.assertEqual(len(e), 1)  # greedy: only the chosen state is timed
        self.assertGreater(e.gflops[0], 0)
        self.assertGreater(e.final_gflops, 0)
        with open(os.path.join(out, "eval.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["set"] for r in rows], ["test", "offgrid"])
        for r in rows:
            self.assertGreater(float(r["gflops"]), 0)
            self.assertGreater(float(r["start_gflops"]), 0)

    def test_sketch_value_trains(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(
                train.main(tiny_argv(out, self.server.address, "sketch-value", 120)), 0)
            summary = self.check_run(out, "sketch-value", 120)
            # every timed sketch is one sample in the replay, and updates are capped by them
            state = torch.load(os.path.join(out, "checkpoint.pt"))
            self.assertEqual(state["learner"]["size"], summary["env_steps"])
            self.assertLessEqual(summary["updates"], summary["env_steps"])
            targets = state["learner"]["target"]
            # 10 x each kernel's fraction of the server's peak: positive and finite. No upper
            # bound: on a busy machine the peak's own measurement can come out below a kernel's.
            self.assertTrue((np.isfinite(targets) & (targets > 0)).all())
            # resume: the replay comes back with the weights, and training goes on from there
            self.assertEqual(train.main(tiny_argv(out, self.server.address, "sketch-value", 200,
                                                  ["--resume"])), 0)
            with open(os.path.join(out, "summary.json")) as f:
                second = json.load(f)
            self.assertGreaterEqual(second["env_steps"], 200)
            self.assertGreater(second["updates"], summary["updates"])
            resumed = torch.load(os.path.join(out, "checkpoint.pt"))["learner"]
            self.assertEqual(resumed["size"], second["env_steps"])
            np.testing.assert_array_equal(resumed["target"][:len(targets)], targets)
            with open(os.path.join(out, "train.log")) as f:
                self.assertIn(f"{len(targets)} transitions in the replay buffer", f.read())

    def test_apex_dqn_trains_and_resumes(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(train.main([
                "--algo=apex-dqn", "--steps=150", "--actors=2", "--episodes-per-call=1",
                f"--servers={self.server.address}", f"--out={out}", "--learning-starts=32",
                "--eval-every=0", "--final-test-count=1", "--final-offgrid-count=1",
                "--checkpoint-every=0", "--log-every=1", "--no-progress", "--hidden=32,32",
                "--seed=4"]), 0)
            first = self.check_run(out, "apex-dqn", 150)
            # the replay filled: updates are capped at replay_ratio x transitions added
            self.assertLessEqual(first["updates"], 0.5 * first["env_steps"])
            state = torch.load(os.path.join(out, "checkpoint.pt"))
            self.assertEqual(state["env_steps"], first["env_steps"])
            kept = state["learner"]["replay"]["size"]
            self.assertGreater(kept, 0)  # the replay is in the checkpoint
            # resume: counters continue from the checkpoint
            train.main(["--algo=apex-dqn", "--steps=250", "--actors=2",
                        "--episodes-per-call=1", f"--servers={self.server.address}",
                        f"--out={out}", "--learning-starts=32", "--eval-every=0",
                        "--final-test-count=1", "--final-offgrid-count=1", "--no-progress",
                        "--hidden=32,32", "--seed=4", "--resume"])
            with open(os.path.join(out, "summary.json")) as f:
                second = json.load(f)
            self.assertGreaterEqual(second["env_steps"], 250)
            self.assertGreater(second["updates"], first["updates"])
            with open(os.path.join(out, "train.log")) as f:
                self.assertIn(f"{kept} transitions in the replay buffer", f.read())

    def test_ppo_trains(self):
        with tempfile.TemporaryDirectory() as out:
            train.main(["--algo=ppo", "--steps=100", "--actors=2", "--episodes-per-call=1",
                        f"--servers={self.server.address}", f"--out={out}", "--eval-every=0",
                        "--final-test-count=1", "--final-offgrid-count=1", "--no-progress",
                        "--hidden=32,32", "--seed=4", "--ppo-batch-episodes=4",
                        "--reward=dlog_gflops"])
            summary = self.check_run(out, "ppo", 100)
            self.assertGreaterEqual(summary["updates"], 2)


class SketchValueLearnerTest(unittest.TestCase):
    def test_replay_holds_fractions_of_the_peak_and_skips_episodes_without_one(self):
        config = sketch_value.SketchValueConfig(buffer_size=4, hidden=(8,))
        learner = sketch_value.SketchValueLearner(3, 1, config, seed=0)
        ns = types.SimpleNamespace
        rows = np.arange(6, dtype=np.float32).reshape(2, 3)
        learner.add([ns(candidates=rows, candidate_gflops=[50.0, 100.0], peak=200.0),
                     ns(candidates=rows, candidate_gflops=[1.0, 2.0], peak=0.0)])
        self.assertEqual(len(learner), 2)  # the episode with no peak is left out
        np.testing.assert_allclose(learner.target[:2], [2.5, 5.0])  # 10 x fraction of peak
        np.testing.assert_array_equal(learner.obs[:2], rows)

    def test_one_output_in_loop_nest_only(self):
        with self.assertRaisesRegex(ValueError, "one output in loop_nest, not 3 in loop_nest"):
            sketch_value.SketchValueLearner(3, 3)
        with self.assertRaisesRegex(ValueError, "not 1 in loop_tune"):
            sketch_value.SketchValueLearner(3, 1, action_space="loop_tune")


class TokenTest(unittest.TestCase):
    def test_training_against_a_token_protected_server(self):
        # The learner and every actor send --auth-token-file's token; without it, one line.
        with tempfile.TemporaryDirectory() as d:
            token = os.path.join(d, "token")
            with open(token, "w") as f:
                f.write("s3cret-token\n")
            server = LocalServer(SERVER, flags=[f"--auth_token_file={token}",
                                                "--timing_budget_ms=2"])
            try:
                out = os.path.join(d, "run")
                self.assertEqual(train.main([
                    "--algo=apex-dqn", "--steps=40", "--actors=1", "--episodes-per-call=1",
                    f"--servers={server.address}", f"--auth-token-file={token}",
                    f"--out={out}", "--learning-starts=16", "--eval-every=0",
                    "--final-test-count=1", "--final-offgrid-count=1", "--checkpoint-every=0",
                    "--no-progress", "--hidden=16"]), 0)
                with open(os.path.join(out, "summary.json")) as f:
                    self.assertGreaterEqual(json.load(f)["env_steps"], 40)
                with unittest.mock.patch("sys.stderr", new_callable=io.StringIO) as err:
                    code = train.main(["--steps=10", f"--servers={server.address}",
                                       f"--out={out}-2", "--actors=1", "--no-progress"])
                self.assertEqual(code, 1)
                self.assertIn("UNAUTHENTICATED", err.getvalue())
            finally:
                server.close()
        with tempfile.TemporaryDirectory() as d:
            empty = os.path.join(d, "empty")
            open(empty, "w").close()
            with self.assertRaises(SystemExit), \
                    unittest.mock.patch("sys.stderr", new_callable=io.StringIO) as err:
                train.parse_args(["--steps=10", f"--auth-token-file={empty}"])
            self.assertIn(f"the token file {empty} is unusable: its first line holds no token",
                          err.getvalue())


class FaultTest(unittest.TestCase):
    def test_actor_killed_and_server_restarted_mid_run(self):
        server = LocalServer(SERVER, flags=["--timing_budget_ms=2"])
        port = server.port
        client, local = cluster.start_dask(2)
        events = {}
        try:
            with tempfile.TemporaryDirectory() as out:
                args = tiny_args(out, server.address, steps=500)
                trainer = train.Trainer(args, [server.address], client, log=lambda m: None)
                pids = sorted(client.run(os.getpid).values())

                def faults():
                    while trainer.env_steps < 80:
                        time.sleep(0.01)
                    os.kill(pids[0], signal.SIGKILL)  # an actor's worker, mid-call
                    events["killed_at"] = trainer.env_steps
                    while trainer.env_steps < 200:
                        time.sleep(0.01)
                    server.close()  # the server goes away and comes back on its address
                    events["restart_at"] = trainer.env_steps
                    events["server"] = LocalServer(SERVER, flags=["--timing_budget_ms=2"],
                                                   port=port)
                thread = threading.Thread(target=faults)
                thread.start()
                trainer.run()
                thread.join(timeout=60)
                self.assertGreaterEqual(trainer.env_steps, 500)
                self.assertIn("server", events)
                self.assertGreater(trainer.env_steps, events["restart_at"] + 100)
                # The nanny restarts the killed worker on its own schedule (after the run, on a
                # loaded machine): wait until it has joined, then compare the workers.
                client.wait_for_workers(2, timeout=60)
                new_pids = sorted(client.run(os.getpid).values())
                self.assertEqual(len(new_pids), 2)          # the nanny restarted the worker
                self.assertNotIn(pids[0], new_pids)
                # what the faults cost: at most the calls and episodes in flight
                self.assertLessEqual(trainer.pool.lost, 2)
                self.assertLessEqual(trainer.pool.errors, 8)
        finally:
            client.close()
            local.close()
            events.get("server", server).close()
            server.close()


if __name__ == "__main__":
    unittest.main()
