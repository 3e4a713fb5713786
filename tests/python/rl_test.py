"""looptool.rl: splits as the service has them, n-step returns and prioritized replay by hand,
the policy file (numpy == PyTorch == C++ on real observations, within 1e-5), short real training
runs of Ape-X DQN and PPO over a LocalCluster and a real server (weights change, the replay
fills, the greedy policy is well-formed over the action mask, checkpoints resume), and an actor
killed with SIGKILL plus a server restarted mid-run, after which training goes on."""

import csv
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

from looptool import Connection, LocalServer, LoopToolEnv
from looptool.rl import benchmarks as B
from looptool.rl import cluster, networks, replay, rollout, sketch_value, train
from looptool.rl.policy_file import Policy, masked_argmax

SERVER = "service/looptool-server"
POLICY_SCORES = "tests/client/policy_scores"
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


class SplitTest(unittest.TestCase):
    def test_the_split_is_the_services(self):
        train_set, test_set = B.split("train"), B.split("test")
        self.assertEqual(len(train_set) + len(test_set), 2197)
        self.assertEqual(len(test_set), 432)  # tests/datasets/matmul_range_test.cc's number
        self.assertIn(B.Benchmark("benchmark://mm64_256_16_range-v0/mm112_208_256", None),
                      test_set)
        self.assertFalse({b.uri for b in train_set} & {b.uri for b in test_set})
        self.assertEqual(len(B.test_benchmarks(25)), 25)
        self.assertEqual(B.test_benchmarks(25)[0], test_set[0])
        offgrid = B.offgrid_benchmarks()
        self.assertEqual(offgrid[0], B.Benchmark(
            "benchmark://tune_bench-offgrid/mm37_61_97", "C[m,n] += A[m,k] * B[k,n]\nm=37 n=61 k=97\n"))
        with self.assertRaises(ValueError):
            B.split("validation")


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
    conn = Connection(address)
    spaces = conn.spaces()
    space = spaces.action_space(action_space)
    idx = [spaces.observation_space(n).index for n in ("loops_tensor", "action_mask")]
    benches = B.split("train")[::400] + B.test_benchmarks(3) + B.offgrid_benchmarks(3)
    obs, masks = [], []
    for i in range(count):
        b = benches[i % len(benches)]
        reply = conn.start_session(b.uri, space.space_index, idx, program=b.program)
        sid = reply.session_id
        values = [rollout.convert.event_to_python(e) for e in reply.observation]
        for _ in range(int(rng.integers(0, 6))):
            a = int(rng.choice(np.flatnonzero(values[1])))
            values = [rollout.convert.event_to_python(e)
                      for e in conn.step(sid, [a], idx).observation]
        obs.append(np.asarray(values[0], np.float32).reshape(-1))
        masks.append(np.asarray(values[1], bool).reshape(-1))
        conn.end_session(sid)
    conn.close()
    return np.asarray(obs), np.asarray(masks)


class ServerTestCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(SERVER, flags=["--timing_budget_ms=2"])

    @classmethod
    def tearDownClass(cls):
        cls.server.close()


class CppAgreementTest(ServerTestCase):
    def cpp_scores(self, policy_arg, obs):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            for row in obs:
                f.write(" ".join(repr(float(v)) for v in row) + "\n")
        try:
            out = subprocess.run([POLICY_SCORES, policy_arg, f.name], check=True,
                                 capture_output=True, text=True).stdout
        finally:
            os.unlink(f.name)
        return np.array([[float(v) for v in line.split()] for line in out.splitlines()])

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
        most, and its kernel beats the untiled start."""
        conn = Connection(self.server.address)
        bench = B.test_benchmarks(1)[0]
        e = sketch_value.run_sketch_episode(conn, bench, policy, "greedy")
        spaces = conn.spaces()
        names = spaces.action_space("loop_nest").names
        idx = [spaces.observation_space(n).index for n in ("sketches", "loops_tensor")]
        sid = conn.start_session(bench.uri, spaces.action_space("loop_nest").space_index,
                                 idx[:1]).session_id
        lines = rollout.convert.event_to_python(
            conn.step(sid, [], idx[:1]).observation[0]).splitlines()
        values = []
        for line in lines:
            fork = conn.fork_session(sid)
            obs = rollout.convert.event_to_python(
                conn.step(fork, line.split(), idx[1:]).observation[0])
            values.append(float(policy.scores(np.asarray(obs, np.float32).reshape(-1))[0]))
            conn.end_session(fork)
        conn.end_session(sid)
        # The same choice on a LoopToolEnv, applied there.
        with LoopToolEnv(conn, benchmark=bench.uri, action_space="loop_nest",
                         reward_space=None) as env:
            env.reset()
            choice = sketch_value.choose(env, policy)
            self.assertEqual(" ".join(choice), lines[int(np.argmax(values))])
            env.multistep(choice)
            self.assertGreater(env.observation["flops"], e.gflops[0])
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
        self.assertGreater(e.final_gflops, e.gflops[0])
        with open(os.path.join(out, "eval.csv")) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["set"] for r in rows], ["test", "offgrid"])
        for r in rows:
            self.assertGreater(float(r["gflops"]), float(r["start_gflops"]))

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
            self.assertTrue(((targets > 0) & (targets <= 10.5)).all())  # 10 x fraction of peak
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
            self.assertIn("no token in", err.getvalue())


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
