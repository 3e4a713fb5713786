"""looptool.rl.loop_set and looptool.rl.imitate: the loop_set policy's forward pass (numpy ==
PyTorch == C++ on real loop_features, within 1e-5, and the same greedy choice under real masks),
its file (round trip, bad files refused by both readers), canonical paths by hand, and a short
real imitation run on the committed records sample: the examples are the recorded schedules'
paths (every action legal where it is taken), the loss falls, the trained policy rebuilds a
recorded best schedule from the untiled nest, greedily, in Python and through `looptool tune
--search=policy` alike, and a round of expert iteration keeps every demonstration and adopts only
the policy's own faster episodes."""

import base64
import contextlib
import copy
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
import unittest
import unittest.mock
from typing import Any, Optional

import numpy as np
import torch

from cpp_policy_scores import POLICY_SCORES, cpp_scores
from looptool import Connection, LocalServer, LoopToolEnv
from looptool import records
from looptool.rl import episodes, imitate, loop_set, members, plan_cost, policy_file

SERVER = "service/looptool-server"
CLI = "client/cpp/looptool"
SAMPLE = "datasets/records/sample.db"
COMMITTED = "datasets/policies/loop_set.json"
COMMITTED_AVX2 = "datasets/policies/loop_set_avx2.json"  # learned from AVX2 records
OBSERVE = ["loop_features", "action_mask"]


def compute_lines(ir):
    return "\n".join(line for line in ir.splitlines() if line.startswith("compute "))


class LoopSetTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(SERVER, flags=["--timing_budget_ms=2"])
        cls.conn = Connection(cls.server.address)
        cls.demos = imitate.best_demos(SAMPLE, None, 1)

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()
        cls.server.close()

    def cli_policy(self, program, path, *flags):
        """`looptool tune --search=policy` of the program file with the policy file: its JSON."""
        out = subprocess.run([CLI, "tune", f"--benchmark={program}", "--search=policy",
                              f"--policy={path}", *flags, f"--server={self.server.address}",
                              "--json"], check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    def real_observations(self, count=16, seed=0):
        """loop_features and action_mask of the sample's programs after random legal actions."""
        rng = np.random.default_rng(seed)
        obs, masks = [], []
        with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                         reward_space=None) as env:
            for i in range(count):
                d = self.demos[i % len(self.demos)]
                f, m = env.reset(f"benchmark://user-v0/t{d.program_id}", program=d.program,
                                 observation_spaces=OBSERVE)
                for _ in range(int(rng.integers(0, 5))):
                    a = int(rng.choice(np.flatnonzero(m)))
                    (f, m), _, _, _ = env.step(a, observation_spaces=OBSERVE)
                obs.append(np.asarray(f, np.float32).reshape(-1))
                masks.append(np.asarray(m, bool).reshape(-1))
        return np.asarray(obs), np.asarray(masks)

    def test_the_observation_is_a_row_per_loop(self):
        obs, masks = self.real_observations(4)
        self.assertEqual(obs.shape, (4, 16 * loop_set.FEATURES))
        # loop_nest's 592: the policy's 560, then stream_L<p> and fold_L<p> (appended since;
        # never the policy's)
        self.assertEqual(masks.shape, (4, loop_set.NUM_ACTIONS + 32))
        rows = obs.reshape(4, 16, loop_set.FEATURES)
        for r, m in zip(rows, masks):
            loops = int(r[:, 0].sum())
            self.assertTrue((r[:loops, 0] == 1).all() and (r[loops:] == 0).all())
            # no action names a level past the loops
            self.assertFalse(m[[16 * p + j for p in range(loops, 16) for j in range(16)]].any())

    def test_numpy_torch_and_cpp_agree_on_real_observations(self):
        obs, masks = self.real_observations()
        self.assertGreater(len({row.tobytes() for row in obs}), 10)  # varied states
        torch.manual_seed(3)
        net = loop_set.network(hidden=(32, 24), key=8)
        policy = net.to_policy()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            policy.save(path)
            cases = [(path, policy), ("loop_set", loop_set.load(COMMITTED)),
                     (COMMITTED_AVX2, loop_set.load(COMMITTED_AVX2))]
            for arg, p in cases:
                net = loop_set.network(hidden=[w.shape[0] for w, _ in p.trunk],
                                       key=p.query[0].shape[0])
                net.load_policy(p)
                with torch.no_grad():  # in float64: features reach the tens, float32 sums drift
                    expected = net.double()(torch.from_numpy(obs).double()).numpy()
                self.assertEqual(expected.shape, (len(obs), loop_set.NUM_ACTIONS + 1))
                # 1e-5 plus 1e-7 of the score (the AVX2 policy's reach ~230, where float32's own
                # spacing is 1.5e-5)
                np.testing.assert_allclose(p.scores(obs), expected, atol=1e-5, rtol=1e-7)
                got = cpp_scores(arg, obs)
                np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-7, err_msg=arg)
                for o, s_cpp, s_torch, m in zip(obs, got, expected, masks):
                    allowed = np.flatnonzero(m[:loop_set.NUM_ACTIONS])
                    self.assertGreater(np.ptp(s_torch[allowed]), 1e-4)  # actions are told apart
                    best = allowed[np.argmax(s_torch[allowed])]
                    self.assertEqual(allowed[np.argmax(s_cpp[allowed])], best)
                    stop = s_torch[loop_set.STOP] > s_torch[best]
                    self.assertEqual(p.act(o, m), None if stop else best)

    def test_which_programs_may_fold(self):
        # As the server prints them: a CHW pool's last index steps by 2; a channels-last pool's
        # is its channel; a convolution multiplies; 12* is no stride of 2; an assignment does
        # not reduce.
        self.assertTrue(episodes._may_fold("O[c, h, w] max= I[c, 2*h + r, 2*w + s]\nc=4\n"))
        self.assertTrue(episodes._may_fold("O[r, c] += I[2*r + kr, 2*c + kc]\nr=2\n"))
        for ir in ("O[h, w, c] max= I[2*h + r, 2*w + s, c]\n",
                   "O[k, h, w] += I[c, 2*h + r, 2*w + s] * W[k, c, r, s]\n",
                   "O[r, c] max= I[r + kr, 12*c + kc]\n",
                   "B[r, c] = A[2*r, 2*c]\n",
                   "C[m, n] += A[m, k] * B[k, n]\n"):
            self.assertFalse(episodes._may_fold(ir), ir)

    def test_a_rollout_times_its_fastest_marked_where_the_program_may_be(self):
        # The policy never takes stream_L<p> or fold_L<p> (loop_nest's actions 560..591);
        # ranked_rollout times its fastest once more with those that stream its outputs and fold
        # its windows appended, as the CLI's searches do.
        policy = loop_set.load(COMMITTED)
        transpose = "B[n,m] = A[m,n]\nm=96 n=64\n"
        matmul = "C[m,n] += A[m,k] * B[k,n]\nm=16 n=32 k=8\n"
        with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                         reward_space=None) as env:
            env.reset("benchmark://user-v0/streamed_t", program=transpose, observation_spaces=[])
            names, gflops = episodes._time_marked(env)
            self.assertEqual(names, ["stream_L0"])
            self.assertGreater(gflops, 0)
            # A first wave's shorter candidates: the start, the start streamed (a candidate of
            # its own, though loop_features do not show the mark), the states the greedy episode
            # passed through, the shorter first.
            stream = episodes.EpisodeStream(env, "benchmark://user-v0/streamed_t", transpose,
                                            policy)
            wave = stream.next(4)
            shorter = stream.short_candidates(wave)
            try:
                got = [e.actions for e in shorter]
                self.assertIn(["stream_L0"], got)
                # (the start itself left out where an episode of the wave ends there)
                head = [[], ["stream_L0"]] if got[0] == [] else [["stream_L0"]]
                self.assertEqual(got[:len(head)], head)
                greedy = [e.actions for e in wave if e.loss == 0]  # the policy's and member's
                self.assertEqual(len(greedy), 2)
                prefixes = [a for a in got if a != ["stream_L0"]]
                self.assertGreater(len(prefixes), 2)
                for a in prefixes:
                    self.assertTrue(any(a == g[:len(a)] and len(a) < len(g) for g in greedy), a)
                self.assertEqual([len(a) for a in prefixes], sorted(len(a) for a in prefixes))
                self.assertEqual(len({e.features for e in wave} |
                                     {e.features for e in shorter if e.actions != ["stream_L0"]}),
                                 len(wave) + len(prefixes))
                streamed = shorter[got.index(["stream_L0"])]
                self.assertIn("stream 1", str(streamed.env.observe(["ir"])["ir"]).split("\n"))
                self.assertEqual(streamed.loss, max(e.loss for e in wave))
                self.assertTrue(streamed.start)
                self.assertFalse(any(e.start for e in wave))
                # Ranked as the wave's `rank`-th likeliest (policy_guided's first wave holds
                # hundreds): asked again, the marked start alone (the others end where these did).
                # (The wave's two greedy episodes, the policy's and its member's, lose 0.)
                again = stream.short_candidates(wave, rank=3)
                shorter += again
                self.assertEqual([e.actions for e in again], [["stream_L0"]])
                self.assertEqual(again[0].loss, sorted(e.loss for e in wave)[2])
                self.assertGreater(again[0].loss, 0)
            finally:
                for e in wave + shorter:
                    e.env.close()
            # Two statements assign (a concatenation): both streamed; stream_L1, the first's
            # second loop, would toggle its mark off.
            concat = "C[m,a] = A[m,a]\nC[m,b+16] = B[m,b]\nm=8 a=16 b=16\n"
            env.reset("benchmark://user-v0/streamed_c", program=concat, observation_spaces=[])
            names, gflops = episodes._time_marked(env)
            self.assertEqual(names, ["stream_L0", "stream_L2"])
            self.assertGreater(gflops, 0)
            env.multistep(names, observation_spaces=[])
            ir = str(env.observe(["ir"])["ir"])
            self.assertEqual([l for l in ir.split("\n") if l.startswith("stream")],
                             ["stream 1", "stream 2"])
            # A CHW max pool: its window's rows folded (fold_L0; fold_L1, the same statement's
            # second loop, would toggle the mark off).
            pool = "O[r,c] max= I[2*r+kr, 2*c+kc]\nr=4 c=32 kr=3 kc=3\n"
            env.reset("benchmark://user-v0/folded_p", program=pool, observation_spaces=[])
            names, gflops = episodes._time_marked(env)
            self.assertEqual(names, ["fold_L0"])
            self.assertGreater(gflops, 0)
            env.reset("benchmark://user-v0/streamed_m", program=matmul, observation_spaces=[])
            self.assertIsNone(episodes._time_marked(env))
            seen: list = []

            def fast(e: LoopToolEnv, *args: object) -> tuple:
                seen.append(str(e.observe(["ir"])["ir"]))
                return ["stream_L0"], 1e9
            # (One candidate: a first wave of more holds the start streamed, which may be the
            # fastest, and then takes no more marks.)
            with unittest.mock.patch.object(episodes, "_time_marked", fast):
                r = episodes.ranked_rollout(env, "benchmark://user-v0/streamed_t", transpose,
                                            policy, count=1, timed=1, seconds=60)
                self.assertEqual(len(seen), 1)
                self.assertEqual(r.actions[-1], "stream_L0")
                self.assertNotIn("stream_L0", r.actions[:-1])
                self.assertEqual(r.gflops, 1e9)
                m = episodes.ranked_rollout(env, "benchmark://user-v0/streamed_m", matmul,
                                            policy, count=1, timed=1, seconds=60)
                self.assertEqual(len(seen), 1)  # a matmul takes no mark: not tried
                self.assertFalse(any(a.startswith("stream_L") for a in m.actions))
                episodes.ranked_rollout(env, "benchmark://user-v0/folded_p", pool, policy,
                                        count=1, timed=1, seconds=60)
                self.assertEqual(len(seen), 2)  # a CHW pool may fold: tried
                self.assertTrue(seen[-1].startswith("O[r, c] max= "))

    def test_a_ranked_rollout_passes_over_candidates_predicted_far_slower(self):
        # A stub cost model scores the first wave's candidates 10, 9, then 0, and every later
        # wave's 0: with the default margin (2) the two first are timed and every other passed
        # over; with none, the eight of the wave, as the CLI's --search=policy.
        policy = loop_set.load(COMMITTED)
        real = policy.cost
        matmul = "C[m,n] += A[m,k] * B[k,n]\nm=16 n=32 k=8\n"

        class Stub:
            loss_weight = 0.0
            calls = 0

            def predict(self, features: list) -> np.ndarray:
                Stub.calls += 1
                head = [10.0, 9.0] if Stub.calls == 1 else []
                return np.array((head + [0.0] * len(features))[:len(features)])
        self.assertEqual(episodes.PASS_PREDICTED_SLOWER, 2.0)
        timed = []
        observe = LoopToolEnv.observe

        def counting(env: LoopToolEnv, spaces: list, *args: object, **kw: object) -> object:
            if list(spaces)[:1] == ["flops"]:  # a timing (and how it went)
                timed.append(1)
            return observe(env, spaces, *args, **kw)
        with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                         reward_space=None) as env, \
                unittest.mock.patch.object(LoopToolEnv, "observe", counting):
            for margin, expected in ((episodes.PASS_PREDICTED_SLOWER, 2), (float("inf"), 8)):
                Stub.calls = 0
                timed.clear()
                policy.cost = Stub()  # type: ignore[assignment]
                try:
                    r = episodes.ranked_rollout(env, "benchmark://user-v0/passing", matmul,
                                                policy, count=8, timed=8, seconds=1.0,
                                                pass_predicted_slower=margin)
                finally:
                    policy.cost = real
                self.assertEqual(len(timed), expected, margin)
                self.assertGreater(r.gflops, 0)

    def test_a_timing_call_reads_as_what_the_server_says_the_kernel_took_its_worker(self):
        # A program's first timing waits for its reference run (0.2 s here): the re-timing
        # estimates read the server's work_seconds and the calls' overhead instead (C++'s
        # EpisodeTimer::KernelCall); a server that does not say leaves the call as it was.
        class Stub:
            def __init__(self, spaces: dict, timing: str) -> None:
                self.observation_spaces = spaces
                self.timing = timing

            def observe(self, names: list) -> dict:
                got = {"flops": 7.5, "timing": self.timing}
                return {n: got[n] for n in names}
        says = '{"timed_runs":3,"timing":"settled","work_seconds":0.012}'
        for spaces, timing, work in (({"flops": 0, "timing": 0}, says, 0.012),
                                     ({"flops": 0, "timing": 0}, '{"timing":"full"}', 0.0),
                                     ({"flops": 0, "timing": 0}, "not json", 0.0),
                                     ({"flops": 0}, says, 0.0)):
            with unittest.mock.patch.object(episodes.time, "perf_counter",
                                            side_effect=[10.0, 10.2]):
                gflops, call = episodes._timed(Stub(spaces, timing))  # type: ignore[arg-type]
            self.assertEqual(gflops, 7.5)
            self.assertAlmostEqual(call[0], 0.2)
            self.assertEqual(call[1], work, (spaces, timing))
        # Alone, the first call reads as its work and STEP_OVERHEAD (5 ms): 17 ms.
        self.assertAlmostEqual(episodes._retiming_time((0.2, 0.012), [(0.2, 0.012)]), 0.017)
        # Not said: the call as seen.
        self.assertAlmostEqual(episodes._retiming_time((0.2, 0.0), [(0.2, 0.0)]), 0.2)
        # Later calls that wait 60-65 ms beyond their work (a worker busy with other sessions'
        # kernels): the first reads as its work and their median excess, 62.5 ms.
        calls = [(0.2, 0.012), (0.07, 0.01), (0.075, 0.01)]
        self.assertAlmostEqual(episodes._retiming_time(calls[0], calls), 0.012 + 0.0625)
        self.assertAlmostEqual(episodes._typical(calls), 0.0725)
        # A cached kernel's call, shorter than its work: as seen (LEAST_RETIMING at least).
        self.assertAlmostEqual(episodes._retiming_time((0.001, 0.012), [(0.001, 0.012)]),
                               episodes.LEAST_RETIMING)

    def test_a_ranked_rollout_times_an_episode_before_a_start_ranked_first(self):
        # A stub cost model scores the start 10 and every other candidate 0: the best-ranked
        # episode is timed first (the first timing has no fastest to cut it short, and an untiled
        # nest may be slow), the start right after it (C++'s TimeEpisodeWaves).
        policy = loop_set.load(COMMITTED)
        real = policy.cost
        matmul = "C[m,n] += A[m,k] * B[k,n]\nm=16 n=32 k=8\n"
        observe = LoopToolEnv.observe
        timed: list = []

        def counting(env: LoopToolEnv, spaces: list, *args: object, **kw: object) -> object:
            if list(spaces)[:1] == ["flops"]:  # a timing (and how it went)
                timed.append(str(observe(env, ["ir"])["ir"]))
            return observe(env, spaces, *args, **kw)
        with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                         reward_space=None) as env:
            env.reset("benchmark://user-v0/start_first", program=matmul, observation_spaces=[])
            got = env.observe(["ir", "plan_features"])
            start_ir, start_features = str(got["ir"]), json.loads(str(got["plan_features"]))

            class Stub:
                loss_weight = 0.0

                def predict(self, features: list) -> np.ndarray:
                    return np.array([10.0 if f == start_features else 0.0 for f in features])
            policy.cost = Stub()  # type: ignore[assignment]
            try:
                with unittest.mock.patch.object(LoopToolEnv, "observe", counting):
                    episodes.ranked_rollout(env, "benchmark://user-v0/start_first", matmul,
                                            policy, count=4, timed=3, seconds=5.0)
            finally:
                policy.cost = real
        self.assertEqual(len(timed), 3)
        self.assertNotEqual(timed[0], start_ir)
        self.assertEqual(timed[1], start_ir)

    def test_the_built_in_file_of_a_servers_isa_is_the_one_the_cli_plays(self):
        # Each ISA's file was learned from records of that ISA (sse plays avx2's), and an unknown
        # ISA is refused.
        for isa, learned_at in (("avx512", "avx512"), ("avx2", "avx2"), ("sse", "avx2")):
            path = loop_set.built_in_path(isa)
            self.assertEqual(loop_set.load(path).meta["records_isa"], learned_at, isa)
        self.assertEqual(loop_set.built_in_path("avx2", "/x"), "/x/loop_set_avx2.json")
        with self.assertRaisesRegex(ValueError, "unknown ISA 'neon'"):
            loop_set.built_in_path("neon")
        # On an AVX2 server, the file of the ISA its kernel_abi says plays the greedy episode that
        # `looptool tune --policy=loop_set` plays there (C++'s Policy::LoopSetFor), and the
        # AVX-512 file's differs on this matmul.
        program = "C[m,n] += A[m,k] * B[k,n]\nm=64 n=160 k=96\n"
        with LocalServer(SERVER, flags=["--isa=avx2", "--timing_budget_ms=2"]) as server, \
                Connection(server.address) as conn, \
                LoopToolEnv(conn, action_space="loop_nest", observation_space=None,
                            reward_space=None) as env, \
                tempfile.TemporaryDirectory() as d:
            env.reset("benchmark://user-v0/mm", program=program, observation_spaces=[])
            isa = json.loads(env.observation["kernel_abi"])["isa"]
            self.assertEqual(isa, "avx2")
            greedy = {}
            for name in (isa, "avx512"):
                ep = episodes.likely_episodes(env, "benchmark://user-v0/mm", program,
                                              loop_set.load(loop_set.built_in_path(name)),
                                              count=1)
                greedy[name] = ep[0].actions
                ep[0].env.close()
            self.assertNotEqual(greedy[isa], greedy["avx512"])
            path = os.path.join(d, "mm.txt")
            with open(path, "w") as f:
                f.write(program)
            out = subprocess.run([CLI, "tune", f"--benchmark={path}", "--search=policy",
                                  "--policy=loop_set", "--policy_candidates=1",
                                  "--policy_timed=1", "--time_limit=20",
                                  f"--server={server.address}", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            self.assertEqual(json.loads(out.strip().splitlines()[-1])["actions"],
                             greedy[isa])

    def test_bad_files_are_refused(self):
        good = json.loads(loop_set.network(hidden=(8,), key=4).to_policy().to_json())
        bad = [dict(good, preprocess="log2p1"), dict(good, mix=good["head"]),
               dict(good, num_actions=17), {k: v for k, v in good.items() if k != "query"}]
        with tempfile.TemporaryDirectory() as d:
            for i, b in enumerate(bad):
                path = os.path.join(d, f"bad{i}.json")
                with open(path, "w") as f:
                    json.dump(b, f)
                run = subprocess.run([POLICY_SCORES, path, path], capture_output=True, text=True)
                self.assertEqual(run.returncode, 1, b.keys())
                self.assertIn("not a LoopTool policy file", run.stderr)
                if i != 2:  # (the numpy reader takes num_actions from the layout)
                    with self.assertRaises(ValueError):
                        loop_set.load(path)

    def test_a_policys_members_play_their_episodes_in_python_and_cpp_alike(self):
        # The committed policy (with its cost model) and an untrained second network as its
        # member: the file keeps it; eight episodes are the policy's own four likeliest, then
        # the member's (greedy first); Python's ranked rollout and C++'s --search=policy pick
        # the same of them.
        main = loop_set.load(COMMITTED)
        main.members = []  # its own network alone
        torch.manual_seed(5)
        member = loop_set.network(hidden=(32, 24), key=8).to_policy({"seed": 5})
        obs, _ = self.real_observations()
        d = self.demos[0]
        with tempfile.TemporaryDirectory() as tmp:
            path, program = os.path.join(tmp, "both.json"), os.path.join(tmp, "p.lt")
            member.save(os.path.join(tmp, "member.json"))
            main.save(os.path.join(tmp, "main.json"))
            self.assertEqual(members.main([f"--policy={os.path.join(tmp, 'main.json')}",
                                           f"--out={path}",
                                           f"--add={os.path.join(tmp, 'member.json')}"]), 0)
            self.assertEqual(members.main([f"--policy={COMMITTED}", f"--out={path}.x",
                                           f"--add={os.path.join(tmp, 'none.json')}"]), 2)
            both = loop_set.load(path)
            self.assertEqual(both.meta["members"][-1]["meta"], {"seed": 5})
            self.assertEqual(len(both.members), 1)
            np.testing.assert_array_equal(both.members[0].scores(obs), member.scores(obs))
            np.testing.assert_array_equal(both.scores(obs), main.scores(obs))
            self.assertIsNone(both.members[0].cost)
            with open(path) as f:
                text = json.load(f)
            with_cost = dict(text, members=[dict(text["members"][0], cost=text["cost"])])
            bad = os.path.join(tmp, "bad.json")
            self._both_readers_refuse(bad, with_cost, bad, "members is not a list of networks",
                                      "members[0] is not a network (layers only)")
            with open(program, "w") as f:
                f.write(d.program)
            with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                             reward_space=None) as env:
                own = episodes.likely_episodes(env, "benchmark://user-v0/own", d.program, main,
                                               count=4)
                eps = episodes.likely_episodes(env, "benchmark://user-v0/both", d.program, both,
                                               count=8)
                try:
                    self.assertEqual(len(own), 4)
                    self.assertEqual([e.actions for e in eps[:4]], [e.actions for e in own])
                    self.assertGreater(len(eps), 4)
                    self.assertEqual(eps[4].loss, 0.0)  # the member's greedy episode
                    self.assertEqual(len({e.features for e in eps}), len(eps))
                finally:
                    for e in own + eps:
                        e.env.close()
                ranked = episodes.ranked_rollout(env, "benchmark://user-v0/ranked", d.program,
                                                 both, count=8, timed=1, seconds=60)
            # One of the episodes, or a state one of them passed through (the first wave's
            # shorter candidates: the committed cost model of 2026-12-05 ranks such a prefix
            # first here).
            self.assertTrue(any(e.actions[:len(ranked.actions)] == ranked.actions for e in eps),
                            ranked.actions)
            result = self.cli_policy(program, path, "--policy_candidates=8", "--policy_timed=1",
                                     "--policy_seconds=60")
            self.assertEqual(result["actions"], ranked.actions)
            self.assertEqual(result["states_evaluated"], 1)

    def test_episode_share_draws_pairs_from_episode_runs(self):
        # 3 runs: two of a search (100 and 50 kernels), one over policy episodes (10 kernels),
        # their kernels interleaved as a records file may hold them
        run = np.random.default_rng(1).permutation(
            np.array([1] * 100 + [2] * 50 + [3] * 10, np.int64))
        episodes_mask = run == 3
        data = plan_cost.Dataset(["a"], np.zeros((160, 1)), np.zeros(160), run, run,
                                 episodes_mask)
        self.assertIsNone(plan_cost.pair_weights(data, 0.0))
        w = plan_cost.pair_weights(data, 0.4)
        assert w is not None
        self.assertAlmostEqual(float(w.sum()), 1.0)
        self.assertAlmostEqual(float(w[episodes_mask].sum()), 0.4)
        self.assertAlmostEqual(float(w[np.flatnonzero(run == 1)[0]]), 0.6 / 150)
        rng = np.random.default_rng(0)
        i, j = plan_cost._pairs(run, 20_000, rng, w)
        np.testing.assert_array_equal(run[i], run[j])  # both of one run
        share = float(episodes_mask[i].mean())
        self.assertGreater(share, 0.37)   # 0.4 drawn; uniformly it would be 10 / 160
        self.assertLess(share, 0.43)
        i, j = plan_cost._pairs(run, 20_000, np.random.default_rng(0))
        np.testing.assert_array_equal(run[i], run[j])
        self.assertLess(float(episodes_mask[i].mean()), 0.08)
        # no episode runs, or nothing else: uniform
        only = plan_cost.subset(data, ~episodes_mask)
        self.assertIsNone(plan_cost.pair_weights(only, 0.4))
        self.assertEqual(len(only.y), 150)
        self.assertIsNone(plan_cost.pair_weights(plan_cost.subset(data, episodes_mask), 0.4))

    def test_ensemble_is_the_mean_of_its_members_at_every_depth(self):
        rng = np.random.default_rng(7)
        x = rng.normal(size=(50, 5)) * 3
        for hidden in ((), (6,), (6, 4), (5, 3, 2)):
            members = []
            for k in range(3):
                sizes = [5, *[h + k for h in hidden], 1]  # other widths per member
                layers = [(rng.normal(size=(b, a)).astype(np.float32),
                           rng.normal(size=b).astype(np.float32))
                          for a, b in zip(sizes, sizes[1:])]
                mean, scale = (np.zeros(5), np.ones(5)) if k < 2 else \
                    (rng.normal(size=5), rng.uniform(0.5, 2, size=5))  # one normalized otherwise
                members.append(plan_cost.PlanCost(list("abcde"), mean, scale, layers))
            want = np.mean([m.predict_matrix(x) for m in members], axis=0)
            got = plan_cost.ensemble(members).predict_matrix(x)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(hidden))
            self.assertGreater(np.ptp(want - members[0].predict_matrix(x)), 1e-2)

    def test_block_diagonal_layers_are_stored_as_their_blocks_exactly(self):
        rng = np.random.default_rng(3)
        for _ in range(300):
            sizes = [tuple(int(v) for v in rng.integers(1, 4, size=2))
                     for _ in range(rng.integers(1, 4))]
            w = np.zeros((sum(o for o, _ in sizes), sum(i for _, i in sizes)), np.float32)
            r = c = 0
            for o, i in sizes:  # some entries 0, whole rows and columns of zeros among them
                w[r:r + o, c:c + i] = rng.normal(size=(o, i)) * (rng.random((o, i)) < 0.7)
                r, c = r + o, c + i
            spec = policy_file.encode_layer(w, np.ones(len(w), np.float32))
            got, _ = policy_file.decode_layer(json.loads(json.dumps(spec)))
            np.testing.assert_array_equal(got, w)
            blocks = policy_file.diagonal_blocks(w)
            self.assertEqual("blocks" in spec, blocks is not None)
            if blocks is not None:  # as fine as the blocks drawn, or finer
                self.assertGreaterEqual(len(blocks), 2)
                self.assertLess(len(base64.b64decode(spec["weight"])), w.size * 4)
        w = np.kron(np.eye(3), np.ones((2, 5))).astype(np.float32)
        self.assertEqual(policy_file.diagonal_blocks(w), [(2, 5)] * 3)
        self.assertIsNone(policy_file.diagonal_blocks(np.ones((4, 4))))
        self.assertIsNone(policy_file.diagonal_blocks(np.zeros((4, 4))))
        w[0, 7] = 1  # a number off the diagonal blocks joins the first two
        self.assertEqual(policy_file.diagonal_blocks(w), [(4, 10), (2, 5)])
        w = np.zeros((3, 3), np.float32)
        w[0, 0], w[1, 1], w[2, 2], w[0, 2] = 1.0, 2.0, 3.0, -0.0  # -0.0 is a number too
        got, _ = policy_file.decode_layer(policy_file.encode_layer(w, np.zeros(3)))
        self.assertTrue(np.signbit(got[0, 2]))
        huge = {"in": 65536, "out": 65536, "blocks": [[1, 1]] * 65536, "weight": "",
                "bias": ""}  # a small file for a 16 GiB matrix
        with self.assertRaisesRegex(ValueError, "more than 16777216 weights"):
            policy_file.decode_layer(huge)
        for bad, says in (([[2, 5], [2, 5]], "add up"), ([[2, 0], [4, 15]], "positive"),
                          ("2x5", "positive")):
            spec = policy_file.encode_layer(np.kron(np.eye(3), np.ones((2, 5))),
                                            np.zeros(6))
            spec["blocks"] = bad
            with self.assertRaisesRegex(ValueError, says):
                policy_file.decode_layer(spec)

    def _both_readers_refuse(self, path: str, text: Any, lines: str, python_says: str,
                             cpp_says: Optional[str] = None) -> None:
        """`text` written to `path`: loop_set.load raises ValueError saying `python_says`, and
        the C++ reader (POLICY_SCORES over `lines`) exits 1 saying `cpp_says` (the same when
        None)."""
        with open(path, "w") as f:
            json.dump(text, f)
        with self.assertRaisesRegex(ValueError, python_says):
            loop_set.load(path)
        run = subprocess.run([POLICY_SCORES, path, lines], capture_output=True, text=True)
        self.assertEqual(run.returncode, 1)
        self.assertIn(cpp_says or python_says, run.stderr)

    def test_the_cost_model_learns_an_order_and_numpy_and_cpp_agree(self):
        rows = records.load(SAMPLE)
        data = plan_cost.dataset(rows)
        self.assertEqual(len(data.y), len(rows))
        self.assertEqual(data.names, list(rows[0].plan_features))
        untrained = plan_cost.train(data, epochs=0, hidden=(16,), seed=1)
        model = plan_cost.train(data, epochs=30, hidden=(16,), pairs_per_epoch=20_000, seed=1)
        # it orders the sample's runs (it trained on them) better than no training does, and
        # the kernel it ranks first in a run is near the run's best
        before = float(np.mean(plan_cost.spearman_per_run(untrained, data)))
        after = float(np.mean(plan_cost.spearman_per_run(model, data)))
        self.assertGreater(after, 0.5)
        self.assertGreater(after, before + 0.1)
        self.assertGreater(min(plan_cost.top1_regret(model, data)), 0.5)
        # the file keeps it; numpy (float64) and C++ agree on real plan_features from a server
        policy = loop_set.network(hidden=(8,), key=4).to_policy()
        policy.cost = model
        features = []
        with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                         reward_space=None) as env:
            for d in self.demos:
                env.reset(f"benchmark://user-v0/c{d.program_id}", program=d.program,
                          observation_spaces=[])
                env.multistep(d.actions, observation_spaces=[])
                features.append(json.loads(env.observe(["plan_features"])["plan_features"]))
        with tempfile.TemporaryDirectory() as d:
            path, lines = os.path.join(d, "p.json"), os.path.join(d, "f.txt")
            policy.save(path)
            again = loop_set.load(path)
            self.assertEqual(again.cost.names, model.names)
            np.testing.assert_allclose(again.cost.predict(features), model.predict(features),
                                       rtol=0, atol=1e-12)
            with open(lines, "w") as f:
                f.writelines(json.dumps(x) + "\n" for x in features)
            out = subprocess.run([POLICY_SCORES, path, lines], check=True, capture_output=True,
                                 text=True).stdout
            got = np.array([float(v) for v in out.split()])
            np.testing.assert_allclose(got, again.cost.predict(features), rtol=0, atol=1e-9)
            self.assertGreater(np.ptp(got), 1e-3)  # the kernels are told apart
            with open(path) as f:
                bad = json.load(f)
            bad["cost"]["names"] = bad["cost"]["names"][:-1]
            with open(path, "w") as f:
                json.dump(bad, f)
            with self.assertRaises(ValueError):
                loop_set.load(path)
            run = subprocess.run([POLICY_SCORES, path, lines], capture_output=True, text=True)
            self.assertEqual(run.returncode, 1)
            self.assertIn("cost.mean holds", run.stderr)
            # A loss_weight that is not a number >= 0: both readers refuse it, saying so.
            for weight, says in (("0.5", "loss_weight is not a number"),
                                 (-1, "loss_weight must be a number >= 0")):
                bad["cost"]["names"] = model.names
                bad["cost"]["loss_weight"] = weight
                self._both_readers_refuse(path, bad, lines, says)
            # An ensemble (plan_cost --seed=0,1 --with=...) is one MLP: its prediction is the
            # mean of its members' in numpy and in C++, from the same file.
            members = [plan_cost.train(data, epochs=2, hidden=(8, 4), pairs_per_epoch=4_000,
                                       seed=s) for s in (1, 2, 3)]
            # one normalized otherwise, as a model trained on other records is: folded in
            members[2] = dataclasses.replace(members[2], mean=members[2].mean + 0.5,
                                             scale=members[2].scale * 2)
            mean = np.mean([m.predict(features) for m in members], axis=0)
            ens = plan_cost.ensemble(members)
            self.assertEqual([w.shape for w, _ in ens.layers], [(24, len(model.names)),
                                                                (12, 24), (1, 12)])
            np.testing.assert_allclose(ens.predict(features), mean, rtol=0, atol=1e-5)
            self.assertGreater(np.ptp(mean - members[0].predict(features)), 1e-4)
            policy.cost = ens
            policy.save(path)
            with open(path) as f:  # the hidden layer stored as its blocks, one per member
                self.assertEqual(json.load(f)["cost"]["layers"][1]["blocks"], [[4, 8]] * 3)
            for (w, b), (w2, b2) in zip(loop_set.load(path).cost.layers, ens.layers):
                np.testing.assert_array_equal(w, w2)
                np.testing.assert_array_equal(b, b2)
            out = subprocess.run([POLICY_SCORES, path, lines], check=True, capture_output=True,
                                 text=True).stdout
            np.testing.assert_allclose([float(v) for v in out.split()], mean, rtol=0, atol=1e-5)
            with self.assertRaisesRegex(ValueError, "differ"):
                plan_cost.ensemble([members[0], model])
            # XGBoost's ranking trees blended in (plan_cost --trees): the file's trees sum to
            # XGBoost's own margin less its base score, and numpy and C++ agree on the blend.
            import xgboost
            trees = plan_cost.train_trees(data, rounds=20, depth=3, seed=1)
            self.assertEqual(len(trees.roots), 20)
            booster = xgboost.train({"objective": "rank:pairwise", "eta": 0.1, "max_depth": 3,
                                     "subsample": 0.8, "colsample_bytree": 0.8,
                                     "tree_method": "hist", "nthread": 2, "seed": 1},
                                    xgboost.DMatrix(data.x[np.argsort(data.run, kind="stable")],
                                                    label=data.y[np.argsort(data.run,
                                                                            kind="stable")]),
                                    20)
            margin = booster.predict(xgboost.DMatrix(data.x), output_margin=True)
            base = json.loads(bytes(booster.save_raw("json")))["learner"][
                "learner_model_param"]["base_score"]
            np.testing.assert_allclose(plan_cost.trees_from_xgboost(booster).predict_matrix(
                data.x) + float(base), margin, rtol=0, atol=1e-5)
            blended = plan_cost.blend(model, trees, data, 0.3)
            self.assertEqual(blended.mlp_weight, 0.7)
            tree_part = blended.predict_matrix(data.x) - 0.7 * model.predict_matrix(data.x)
            self.assertGreater(np.ptp(tree_part), 1e-3)
            # scaled to spread within runs as 0.3 of the MLP's does
            self.assertAlmostEqual(plan_cost._within_run_std(tree_part, data.run),
                                   0.3 * plan_cost._within_run_std(model.predict_matrix(data.x),
                                                                   data.run), places=4)
            policy.cost = blended
            policy.save(path)
            again = loop_set.load(path)
            assert again.cost is not None and again.cost.trees is not None
            np.testing.assert_array_equal(again.cost.trees.threshold, blended.trees.threshold)
            out = subprocess.run([POLICY_SCORES, path, lines], check=True, capture_output=True,
                                 text=True).stdout
            np.testing.assert_allclose([float(v) for v in out.split()],
                                       blended.predict(features), rtol=0, atol=1e-9)
            self.assertGreater(np.ptp(blended.predict(features) - 0.7 * model.predict(features)),
                               0)  # the trees tell these kernels apart too
            with self.assertRaisesRegex(ValueError, "trees"):
                plan_cost.ensemble([blended, model])
            with open(path) as f:
                bad = json.load(f)
            bad["cost"]["trees"]["left"] = bad["cost"]["trees"]["right"] = \
                policy_file._encode(np.zeros(len(trees.feature), np.float32))
            self._both_readers_refuse(path, bad, lines, "children come after their parent")

    def test_plan_cost_blends_trees_onto_a_policys_model_and_refuses_bad_flags(self):
        data = plan_cost.dataset(records.load(SAMPLE, split="train"))
        model = plan_cost.train(data, epochs=2, hidden=(8,), pairs_per_epoch=2_000, seed=1)
        with tempfile.TemporaryDirectory() as d:
            src, out = os.path.join(d, "mlp.json"), os.path.join(d, "trees.json")
            policy = loop_set.network(hidden=(8,), key=4).to_policy()
            policy.cost = dataclasses.replace(model, loss_weight=0.25)
            policy.meta["cost"] = {"command": "the MLP's"}
            policy.save(src)
            common = [f"--records={SAMPLE}", f"--policy={src}", f"--out={out}"]
            with contextlib.redirect_stdout(io.StringIO()) as printed, \
                    contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(plan_cost.main(common + ["--trees=5", "--tree-depth=3",
                                                          "--trees-onto-policy"]), 0)
            stats = json.loads(printed.getvalue())
            self.assertEqual((stats["trees"], stats["tree_depth"], stats["tree_share"]),
                             (5, 3, 0.3))
            self.assertNotIn("epochs", stats)  # no MLP was trained
            saved = loop_set.load(out)
            got = saved.cost
            assert got is not None and got.trees is not None
            self.assertEqual(len(got.trees.roots), 5)
            self.assertEqual((got.mlp_weight, got.loss_weight), (0.7, 0.25))
            for (w, b), (w2, b2) in zip(got.layers, model.layers):  # the MLP as it was
                np.testing.assert_array_equal(w, w2)
                np.testing.assert_array_equal(b, b2)
            self.assertEqual(saved.meta["cost"]["command"], "the MLP's")
            self.assertIn("--trees=5", saved.meta["cost"]["trees"]["command"])
            self.assertGreater(np.ptp(got.predict_matrix(data.x) -
                                      0.7 * model.predict_matrix(data.x)), 0)
            # Flags that cannot work: refused before any training, saying why.
            for flags, says in (
                    (["--trees-onto-policy"], "--trees-onto-policy takes --trees"),
                    (["--trees=5", "--tree-share=1"], "--tree-share must be strictly between"),
                    (["--trees=-1"], "--trees must be in 0..100000"),
                    (["--trees=5", "--tree-depth=0"], "--tree-depth in 1..16"),
                    ([f"--policy={out}", "--trees=5", "--trees-onto-policy"],
                     "one with trees")):
                with contextlib.redirect_stderr(io.StringIO()) as err, \
                        self.assertRaises(SystemExit):
                    plan_cost.main(common + flags)
                self.assertIn(says, err.getvalue())

    def test_a_stopped_imitation_resumed_ends_with_the_weights_of_one_never_stopped(self):
        obs, mask, target, weight = imitate.replay(self.conn, self.demos).arrays()
        data = (obs, mask, target, weight)
        torch.manual_seed(5)
        whole = loop_set.network(hidden=(32,), key=8)
        init = copy.deepcopy(whole.state_dict())
        saved = {}

        def keep(epoch, loss, state):
            if epoch == 3:  # the state after the fourth epoch, as a checkpoint file holds it
                buf = io.BytesIO()
                torch.save(state(), buf)
                saved["state"] = buf.getvalue()

        losses = imitate.train(whole, data, epochs=8, lr=3e-3, batch=16, seed=1, on_epoch=keep)
        self.assertEqual(len(losses), 8)
        stopped = loop_set.network(hidden=(32,), key=8)
        stopped.load_state_dict(init)
        resume = torch.load(io.BytesIO(saved["state"]))
        self.assertEqual(resume["epoch"], 4)
        # (different weights at the start: the checkpoint's must win)
        torch.nn.init.zeros_(next(stopped.parameters()))
        epochs_run = []
        resumed = imitate.train(stopped, data, epochs=8, lr=3e-3, batch=16, seed=1,
                                resume=resume, on_epoch=lambda e, l, s: epochs_run.append(e))
        self.assertEqual(epochs_run, [4, 5, 6, 7])
        self.assertEqual(resumed, losses)
        for (name, a), (_, b) in zip(whole.state_dict().items(), stopped.state_dict().items()):
            self.assertTrue(torch.equal(a, b), name)

    def test_the_command_writes_its_curve_and_checkpoints_and_resumes(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "p.json")
            flags = [f"--records={SAMPLE}", f"--out={out}", f"--servers={self.server.address}",
                     "--top=1", "--epochs=4", "--hidden=16", "--cost-epochs=0",
                     "--curve-every=2", "--checkpoint-every=2", "--no-progress"]
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(imitate.main(flags), 0)
            with open(os.path.join(tmp, "p_curve.csv"), newline="") as f:
                rows = list(csv.DictReader(f))
            self.assertTrue(os.path.exists(os.path.join(tmp, "p_curve.png")))
            with open(out) as f:
                examples = json.load(f)["meta"]["examples"]
            self.assertEqual([int(r["epoch"]) for r in rows], [0, 2, 4])
            self.assertEqual([int(r["examples_seen"]) for r in rows],
                             [0, 2 * examples, 4 * examples])
            self.assertEqual({int(r["env_steps"]) for r in rows}, {examples})
            self.assertEqual({int(r["records_kernels"]) for r in rows},
                             {len(records.load(SAMPLE))})
            self.assertEqual({r["validation_below_0.8"] for r in rows} - {"0", "1"}, set())
            validation_programs = len(imitate.best_demos(SAMPLE, "validation", 1))
            self.assertGreater(validation_programs, 0)
            for r in rows:
                # A record timed here under half its recorded speed (this host busy, or slower
                # than the sample's) is no yardstick and is left out; with none left the
                # geomean is 0, and only then.
                not_reproduced = int(r["validation_records_not_reproduced"])
                self.assertGreaterEqual(not_reproduced, 0)
                if not_reproduced < validation_programs:
                    self.assertGreater(float(r["validation_greedy_geomean"]), 0)
                else:
                    self.assertEqual(float(r["validation_greedy_geomean"]), 0)
            seconds = [float(r["train_seconds"]) for r in rows]
            self.assertEqual(seconds, sorted(seconds))
            ckpt = torch.load(out + ".checkpoint.pt")
            self.assertEqual((ckpt["epoch"], ckpt["epochs"], ckpt["examples"]), (4, 4, examples))
            with open(out) as f:
                first = json.load(f)
            # Resumed at its end: nothing left to train, the same weights written again.
            os.remove(out)
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                self.assertEqual(imitate.main(flags + ["--resume"]), 0)
            with open(out) as f:
                again = json.load(f)
            self.assertEqual({k: v for k, v in again.items() if k != "meta"},
                             {k: v for k, v in first.items() if k != "meta"})
            self.assertGreater(len(json.dumps(first)), 1000)
            with open(os.path.join(tmp, "p_curve.csv"), newline="") as f:
                self.assertEqual([int(r["epoch"]) for r in csv.DictReader(f)], [0, 2, 4])
            # A checkpoint of another run's length is refused, saying so.
            with contextlib.redirect_stderr(io.StringIO()), \
                    contextlib.redirect_stdout(io.StringIO()), \
                    self.assertRaisesRegex(SystemExit, "run of 4 epochs"):
                imitate.main([f if f != "--epochs=4" else "--epochs=6" for f in flags]
                             + ["--resume"])
            # A checkpoint that is not one, or is missing: refused, saying so.
            with open(out + ".checkpoint.pt", "wb") as f:
                f.write(b"not a checkpoint")
            with contextlib.redirect_stderr(io.StringIO()), \
                    contextlib.redirect_stdout(io.StringIO()), \
                    self.assertRaisesRegex(SystemExit, "is not an imitation checkpoint"):
                imitate.main(flags + ["--resume"])
            os.remove(out + ".checkpoint.pt")
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
                imitate.main(flags + ["--resume"])
            self.assertIn("--resume: no checkpoint at", err.getvalue())

    def test_expert_iteration_on_dask_actors_survives_an_actor_killed_mid_round(self):
        """The proposals of a round run a task per program on two Dask actors; one actor's
        worker is killed (SIGKILL) while it runs one: the nanny restarts it, Dask reruns the
        task, and every program still has its demonstrations, first one first."""
        from looptool.rl import cluster
        policy = loop_set.network(hidden=[32]).to_policy()
        client, local = cluster.start_dask(2)
        try:
            pids = sorted(client.run(os.getpid).values())
            killed = threading.Event()

            def kill_once_busy():
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    if any(client.processing().values()):
                        os.kill(pids[0], signal.SIGKILL)
                        killed.set()
                        return
                    time.sleep(0.005)
            thread = threading.Thread(target=kill_once_busy)
            thread.start()
            actors = imitate.Actors(client, self.server.address)
            demos, stats = imitate.expert_round(self.conn, self.demos, policy, samples=1,
                                                temperature=1.0, seed=0, actors=actors)
            thread.join()
            self.assertTrue(killed.is_set())
            self.assertLessEqual(stats["lost"], 1)  # retried elsewhere, at worst lost once
            self.assertEqual(stats["lost"], actors.lost)
            firsts = sorted(x.program_id for x in demos if x.rank == 0)
            self.assertEqual(firsts, sorted(x.program_id for x in self.demos))
            for d in self.demos:  # every recorded demonstration is kept
                self.assertTrue(any(x.actions == d.actions and x.program_id == d.program_id
                                    for x in demos))
            if stats["lost"] == 0:  # each proposal made: two episodes a program, a step each
                self.assertGreaterEqual(stats["steps"], 8 * 2)
            client.wait_for_workers(2, timeout=60)  # the nanny's restart, if still under way
            new_pids = sorted(client.run(os.getpid).values())
            self.assertEqual(len(new_pids), 2)
            self.assertNotIn(pids[0], new_pids)
        finally:
            client.close()
            local.close()

    def test_canonical_paths(self):
        start = "C[m, n] += A[m, k] * B[k, n]\nm=1003 n=821 k=127\ncompute 1: m(1003) k(127) n(821)\n"
        # tiles per variable innermost first, then interchanges placing loops outermost first
        self.assertEqual(
            imitate.canonical_path(start, "compute 1: m(167 r 1) n(17 r 5) k(127) m(6) n(48)"),
            ["tile_L0_6", "tile_L3_48", "interchange_L3_L1", "interchange_L3_L2"])
        self.assertEqual(
            imitate.canonical_path(start, "compute 1: m(41 r 19) k(127) m(4) n(821) m(6 unroll)"),
            ["tile_L0_6", "tile_L0_4", "interchange_L3_L1", "interchange_L4_L3", "unroll_L4"])
        self.assertIsNone(imitate.canonical_path(start, "compute 1: m(9 r 3) m(5 r 2) k(127) "
                                                        "n(821) m(4)"))  # a tail inside
        self.assertIsNone(imitate.canonical_path(start, "compute 1: m(91 r 2) m(11) k(127) "
                                                        "n(821)"))  # 11 is no tile size

    def test_imitation_learns_the_recorded_best_and_the_cli_rebuilds_it(self):
        self.assertEqual(len(self.demos), 8)
        ex = imitate.replay(self.conn, self.demos)
        obs, mask, target, weight = ex.arrays()
        # every recorded action but the no-ops a path may keep, then stop
        self.assertLessEqual(len(target), sum(len(d.actions) for d in self.demos) + 8)
        self.assertGreater(len(target), 8 + 2 * 8)
        self.assertTrue(mask[np.arange(len(target)), target].all())  # every target is legal
        self.assertEqual(int((target == loop_set.STOP).sum()), 8)  # one stop per demonstration
        net = loop_set.network(hidden=(64, 64), key=16)
        losses = imitate.train(net, (obs, mask, target, weight), epochs=300, lr=3e-3, batch=32)
        self.assertLess(losses[-1], 0.25 * losses[0])
        policy = net.to_policy()
        self.assertGreaterEqual(imitate.accuracy(policy, (obs, mask, target, weight)), 0.95)
        # The matmul (a training program): the greedy policy builds its recorded best schedule.
        d = next(d for d in self.demos if "1003" in d.program)
        with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                         reward_space=None) as env:
            r = imitate.rollout(env, "benchmark://user-v0/mm", d.program, policy)
            built = compute_lines(env.observe(["ir"])["ir"])
            self.assertGreater(r.gflops, 0)
            env.reset("benchmark://user-v0/mm", program=d.program, observation_spaces=[])
            env.multistep(d.actions, observation_spaces=[])
            self.assertEqual(built, compute_lines(env.observe(["ir"])["ir"]))
            self.assertIn("compute 1: m(167 r 1)", built)
        # A round of expert iteration: every demonstration kept; per program one first one,
        # the policy's own episode where it beat the record by 2% (timed in this run).
        demos, stats = imitate.expert_round(self.conn, self.demos, policy, samples=2,
                                            temperature=1.0, seed=0)
        self.assertEqual(set(stats), {"greedy_geomean", "improved", "steps", "lost"})
        self.assertEqual(stats["lost"], 0)
        self.assertGreaterEqual(stats["steps"], 8 * 3)  # three episodes a program, one step each
        self.assertGreater(stats["greedy_geomean"], 0)
        firsts = [x for x in demos if x.rank == 0]
        self.assertEqual(sorted(x.program_id for x in firsts),
                         sorted(x.program_id for x in self.demos))
        adopted = [x for x in firsts if x not in self.demos]
        self.assertAlmostEqual(stats["improved"], len(adopted) / 8)
        self.assertEqual(len(demos), 8 + len(adopted))
        for x in adopted:
            self.assertGreater(x.gflops, 0)
            self.assertIn(x.program_id, {d.program_id for d in self.demos})
        # The C++ search reads the same file and takes the same actions.
        with tempfile.TemporaryDirectory() as tmp:
            path, program = os.path.join(tmp, "p.json"), os.path.join(tmp, "mm.lt")
            policy.save(path)
            with open(program, "w") as f:
                f.write(d.program)
            out = subprocess.run([CLI, "tune", f"--benchmark={program}", "--search=policy",
                                  f"--policy={path}", f"--server={self.server.address}",
                                  "--action_space=loop_nest", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            self.assertEqual(result["actions"], r.actions)
            # policy_guided: waves of the likeliest episodes (--guided_candidates each; the first
            # with the shorter candidates beside it), timed in the order the server's cost model
            # (this policy has none) ranks them while time lasts, nine timed in all.
            out = subprocess.run([CLI, "tune", f"--benchmark={program}",
                                  "--search=policy_guided", f"--policy={path}", "--time_limit=30",
                                  "--guided_candidates=5", "--guided_timed=9",
                                  f"--server={self.server.address}", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            guided = json.loads(out.strip().splitlines()[-1])
            self.assertEqual(guided["states_evaluated"], 9)
            self.assertGreater(guided["gflops"], 0)
            self.assertTrue(guided["actions"])
            # With a cost model: Python's ranked rollout and C++'s --search=policy choose the
            # same episode of the same eight, each timing that one only (--policy_timed=1).
            policy.cost = plan_cost.train(plan_cost.dataset(records.load(SAMPLE)), epochs=5,
                                          hidden=(16,), pairs_per_epoch=5_000, seed=2)
            policy.save(path)
            with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                             reward_space=None) as env:
                eps = episodes.likely_episodes(env, "benchmark://user-v0/ranked", d.program,
                                               policy, count=8)
                try:
                    self.assertEqual(eps[0].actions, r.actions)  # the greedy one first
                    self.assertEqual(eps[0].loss, 0.0)
                    self.assertEqual(len({e.features for e in eps}), len(eps))
                    self.assertGreater(len(eps), 2)
                    self.assertEqual([e.loss for e in eps], sorted(e.loss for e in eps))
                finally:
                    for e in eps:
                        e.env.close()
                # A first wave of four: the four likeliest and the shorter candidates beside them
                # (the states the greedy episode passed through, the start among them, none
                # ending where an episode ends).
                stream = episodes.EpisodeStream(env, "benchmark://user-v0/ranked", d.program,
                                                policy)
                four = stream.next(4)
                shorter = stream.short_candidates(four)
                try:
                    self.assertEqual([e.actions for e in four], [e.actions for e in eps[:4]])
                    greedy_prefixes = [eps[0].actions[:n] for n in range(len(eps[0].actions))]
                    self.assertIn([], [e.actions for e in shorter])  # the untiled start
                    for e in shorter:
                        self.assertIn(e.actions, greedy_prefixes)
                        self.assertEqual(e.loss, max(x.loss for x in four))
                    ends = {e.features for e in four + shorter}
                    self.assertEqual(len(ends), len(four) + len(shorter))
                    first_wave = sorted(float(e.env.observe(["flops"])["flops"])
                                        for e in four + shorter)
                finally:
                    for e in four + shorter:
                        e.env.close()
                ranked = episodes.ranked_rollout(env, "benchmark://user-v0/ranked", d.program,
                                                 policy, count=8, timed=1, seconds=60)
                # Re-timing: the two fastest of those timed, the faster first, each kernel's
                # GFLOPS the faster of its timing and its re-timing (a runner-up re-timed far
                # faster wins). The server's re-timings are replaced by a scripted one here.
                retimed: list = []
                answers = iter([(0.5, 0.0), (1e9, 0.0), (0.5, 0.0), (0.5, 0.0), (0.5, 0.0)])

                observe = LoopToolEnv.observe  # unpatched

                def scripted(e: LoopToolEnv) -> tuple:
                    retimed.append(float(observe(e, ["flops"])["flops"]))
                    return next(answers)
                with unittest.mock.patch.object(LoopToolEnv, "remeasure", scripted):
                    three = episodes.ranked_rollout(env, "benchmark://user-v0/ranked", d.program,
                                                    policy, count=8, timed=3, seconds=60)
                    self.assertEqual(len(retimed), 2)
                    self.assertGreaterEqual(retimed[0], retimed[1])
                    self.assertEqual(three.gflops, 1e9)
                    one = episodes.ranked_rollout(env, "benchmark://user-v0/ranked", d.program,
                                                  policy, count=8, timed=1, seconds=60)
                    self.assertEqual(len(retimed), 3)  # the one timed, re-timed
                    self.assertEqual(one.actions, ranked.actions)
                    self.assertEqual(one.gflops, retimed[2])  # its timing (0.5 is slower)
                    # Waves: the first wave's (above) timed, then two of the next (the server's
                    # timings of a kernel are cached: the same GFLOPS).
                    timings: list = []

                    def counted(e: LoopToolEnv, names: list, *a: object, **k: object) -> dict:
                        got = observe(e, names, *a, **k)
                        if list(names)[:1] == ["flops"]:  # a timing (and how it went)
                            timings.append(float(got["flops"]))
                        return got
                    with unittest.mock.patch.object(LoopToolEnv, "observe", counted):
                        waves = episodes.ranked_rollout(env, "benchmark://user-v0/ranked",
                                                        d.program, policy, count=4,
                                                        timed=len(first_wave) + 2, seconds=60)
                    self.assertEqual(len(timings), len(first_wave) + 2)
                    self.assertEqual(sorted(timings[:len(first_wave)]), first_wave)
                    self.assertEqual(len(retimed), 5)  # the two fastest of all waves
                    self.assertEqual(waves.gflops, max(timings))  # their timings (0.5 slower)
            self.assertIn(ranked.actions, [e.actions for e in eps])
            with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                             reward_space=None) as env:
                for bad in ({"timed": 0}, {"seconds": 0.0}, {"count": 0}):
                    with self.assertRaisesRegex(ValueError, "1 episode or more"):
                        episodes.ranked_rollout(env, "benchmark://user-v0/bad", d.program,
                                                policy, **{"count": 8, **bad})  # type: ignore
            result = self.cli_policy(program, path, "--policy_candidates=8", "--policy_timed=1",
                                     "--policy_seconds=60")
            self.assertEqual(result["actions"], ranked.actions)
            self.assertEqual(result["states_evaluated"], 1)
            # Three timed, the fastest kept: one of the eight.
            out = subprocess.run([CLI, "tune", f"--benchmark={program}", "--search=policy",
                                  f"--policy={path}", "--policy_candidates=8", "--policy_timed=3",
                                  "--policy_seconds=60", f"--server={self.server.address}",
                                  "--json"],
                                 check=True, capture_output=True, text=True).stdout
            top3 = json.loads(out.strip().splitlines()[-1])
            self.assertEqual(top3["states_evaluated"], 3)
            self.assertIn(top3["actions"], [e.actions for e in eps])
            self.assertGreaterEqual(top3["gflops"], 0.5 * result["gflops"])
            # loss_weight counts on both sides: on some sample program the model alone (weight
            # 0) picks another episode than the greedy one; so heavy a weight that no model
            # score outweighs the likelihood brings Python and the CLI back to the greedy episode
            # (the only one of loss 0).
            self.assertEqual(policy.cost.loss_weight, 0.0)
            differs = None
            with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                             reward_space=None) as env:
                for k, x in enumerate(self.demos):
                    uri = f"benchmark://user-v0/weight{k}"
                    greedy = episodes.ranked_rollout(env, uri, x.program, policy, count=1,
                                                     timed=1)
                    alone = episodes.ranked_rollout(env, uri, x.program, policy, count=8,
                                                    timed=1)
                    if alone.actions != greedy.actions:
                        differs = (x, greedy)
                        break
            self.assertIsNotNone(differs, "the model alone picks the greedy episode everywhere")
            x, greedy = differs
            with open(program, "w") as f:
                f.write(x.program)
            policy.cost.loss_weight = 1e6
            policy.save(path)
            with LoopToolEnv(self.conn, action_space="loop_nest", observation_space=None,
                             reward_space=None) as env:
                heavy = episodes.ranked_rollout(env, "benchmark://user-v0/heavy", x.program,
                                                policy, count=8, timed=1, seconds=60)
            self.assertEqual(heavy.actions, greedy.actions)
            out = subprocess.run([CLI, "tune", f"--benchmark={program}", "--search=policy",
                                  f"--policy={path}", "--policy_candidates=8", "--policy_timed=1",
                                  "--policy_seconds=60", f"--server={self.server.address}",
                                  "--json"],
                                 check=True, capture_output=True, text=True).stdout
            self.assertEqual(json.loads(out.strip().splitlines()[-1])["actions"], greedy.actions)


if __name__ == "__main__":
    unittest.main()
