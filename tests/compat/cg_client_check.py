"""Drives a running LoopTool server through CompilerGym v0.2.5's own, unmodified client.

Run by tools/compilergym_compat.sh (a manual check: CompilerGym is not in Debian and CI cannot
fetch it) with CompilerGym's sources, their generated _pb2 modules and tests/compat/stubs on
PYTHONPATH:

    /usr/bin/python3 tests/compat/cg_client_check.py 127.0.0.1:PORT

Prints one line per check and `checks: N passed, M failed`; exits 1 if any failed.
"""
import sys
import traceback

import numpy as np

import compiler_gym
from compiler_gym.datasets import Benchmark
from compiler_gym.service.client_service_compiler_env import ClientServiceCompilerEnv
from compiler_gym.service.proto import Benchmark as BenchmarkProto

# CompilerGym's tests/loop_tool/actions_test.py: after toggle_mode, up, toggle_mode, up, up.
INDUCED_REMAINDER = """\
for a in 341 r 1 : L0 cpu_parallel [thread]
 for a' in 3 : L1
  for a'' in 1 : L2
   %0[a] <- read()
  for a'' in 1 : L4
   %1[a] <- read()
  for a'' in 1 : L6
   %2[a] <- add(%0, %1)
  for a'' in 1 : L8
   %3[a] <- write(%2)"""

RESULTS = []


def check(name):
    def run(fn):
        try:
            detail = fn()
            RESULTS.append(True)
            print(f"PASS {name}" + (f": {detail}" if detail else ""), flush=True)
        except Exception as e:  # noqa: BLE001  (report every failure, keep going)
            RESULTS.append(False)
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=4)
        return fn

    return run


def tree(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().split("\n"))


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def main(address: str) -> int:
    env = compiler_gym.make("loop_tool-v0", service=address)
    state = {}

    @check("make(loop_tool-v0, service=host:port): spaces from GetSpaces")
    def _():
        names = [s.name for s in env.action_spaces]
        expect("simple" in names and "split" in names, f"upstream spaces missing: {names}")
        obs = sorted(env.observation.spaces)
        for space in ("flops", "loop_tree", "action_state"):
            expect(space in obs, f"{space} missing from {obs}")
        return f"action spaces {names}"

    # Upstream lists simple first; v0.2.5's client uses GetSpaces' first action space wherever
    # it has no name: before the first reset, and for the env that fork() builds.
    @check("before reset(): env.action_space is simple (upstream's first action space)")
    def _():
        space = env.action_space
        expect(space.name == "simple", f"{space.name} with {space.n} actions")

    @check("reset(loop_tool-cpu-v0/1024): default space simple, action_state [0 1024 0]")
    def _():
        observation = env.reset(benchmark="benchmark://loop_tool-cpu-v0/1024")
        expect(env.action_space.name == "simple", f"action space {env.action_space.name}")
        expect(
            env.action_space.names == ["toggle_mode", "up", "down", "toggle_thread"],
            f"names {env.action_space.names}",
        )
        expect(list(observation) == [0, 1024, 0], f"action_state {observation}")
        expect(str(env.benchmark) == "benchmark://loop_tool-cpu-v0/1024", env.benchmark)
        return f"action_state {list(observation)}, names {env.action_space.names}"

    @check("steps by name reach upstream's induced-remainder loop tree")
    def _():
        rewards = []
        for name in ["toggle_mode", "up", "toggle_mode", "up", "up"]:
            observation, reward, done, info = env.step(env.action_space[name])
            expect(not done, f"done after {name}: {info}")
            expect(isinstance(reward, float), f"reward {reward!r}")
            rewards.append(reward)
        expect(list(observation) == [1, 3, 0], f"action_state {observation}")
        loop_tree = env.observation["loop_tree"]
        expect(tree(loop_tree) == INDUCED_REMAINDER, f"loop_tree:\n{loop_tree}")
        expect(list(env.observation["action_state"]) == [1, 3, 0], "action_state")
        flops = env.observation["flops"]
        expect(isinstance(flops, float) and flops > 0, f"flops {flops!r}")
        expect(env.reward["flops"] is not None, "env.reward['flops']")
        expect(env.actions == [0, 1, 0, 1, 1], f"actions {env.actions}")
        expect(env.commandline() == "0,1,0,1,1", env.commandline())
        state["tree"] = loop_tree
        return f"flops {flops:.3f} GFLOP/s, rewards {['%.3f' % r for r in rewards]}"

    @check("multistep + FLOPSReward (reward = change in flops)")
    def _():
        before = env.observation["flops"]
        _, reward, done, _ = env.multistep([env.action_space["toggle_thread"]] * 2)
        expect(not done, "done")
        expect(isinstance(reward, float), f"reward {reward!r}")
        expect(tree(env.observation["loop_tree"]) == tree(state["tree"]), "toggle twice")
        return f"flops before {before:.3f}, reward {reward:+.3f}"

    @check("fork(): an independent copy of the session")
    def _():
        child = env.fork()
        state["child"] = child
        expect(tree(child.observation["loop_tree"]) == tree(state["tree"]), "fork tree")
        child.step(3)  # toggle_thread in simple (by index: see the next check)
        expect(tree(child.observation["loop_tree"]) != tree(state["tree"]), "child unchanged")
        expect(tree(env.observation["loop_tree"]) == tree(state["tree"]), "parent changed")
        expect(child.actions == env.actions + [3], f"child actions {child.actions}")
        return "ForkSession"

    @check("fork(): the child's env.action_space is simple, as the parent's")
    def _():
        child = state.pop("child")
        try:
            space = child.action_space
            expect(space.name == "simple", f"{space.name} with {space.n} actions")
        finally:
            child.close()

    @check("bad action index -> ValueError, episode kept")
    def _():
        try:
            env.step(99)
        except ValueError as e:
            expect(env.in_episode, "episode lost")
            expect(tree(env.observation["loop_tree"]) == tree(state["tree"]), "state changed")
            return f"ValueError: {e}"
        raise AssertionError("no ValueError")

    @check("reset(action_space=split, loop_tool-cpu-v0/128): split is a no-op")
    def _():
        env.observation_space = "loop_tree"
        before = env.reset(benchmark="benchmark://loop_tool-cpu-v0/128", action_space="split")
        expect(env.action_space.name == "split", f"action space {env.action_space.name}")
        expect(env.action_space.names[-1] == "split", env.action_space.names)
        after, _, done, info = env.step(env.action_space["split"])
        expect(not done and tree(after) == tree(before), f"split changed the tree: {info}")
        expect(tree(before).startswith("for a in 128 : L0 cpu_parallel [thread]"), before)
        return "new_action_space honoured"

    @check("loop_tool-cuda-v0 is refused (no CUDA backend)")
    def _():
        try:
            env.reset(benchmark="benchmark://loop_tool-cuda-v0/128")
        except NotImplementedError as e:
            return f"NotImplementedError: {e}"
        raise AssertionError("cuda benchmark accepted")

    @check("close()")
    def _():
        env.close()
        expect(not env.in_episode, "still in episode")

    @check("ClientServiceCompilerEnv, LoopTool's own spaces: reset(action_space=loop_tune)")
    def _():
        # v0.2.5's constructor drops its action_space argument (its `self.action_space = None`
        # resets action_space_name), so the space is chosen at reset(), where the server's
        # StartSessionReply.new_action_space tells the client which space it got.
        uri = "benchmark://mm64_256_16_range-v0/mm64_64_64"
        with ClientServiceCompilerEnv(
            service=address,
            benchmark=Benchmark(BenchmarkProto(uri=uri)),
            observation_space="loops_tensor",
            reward_space="flops",
        ) as own:
            observation = own.reset(action_space="loop_tune")
            expect(own.action_space.name == "loop_tune", f"action space {own.action_space}")
            expect(len(own.action_space.names) == 7, own.action_space.names)
            expect(isinstance(observation, np.ndarray), f"obs {type(observation)}")
            observation, reward, done, _ = own.step(own.action_space["split_4"])
            expect(not done and isinstance(reward, float), f"done {done} reward {reward}")
            gflops = own.observation["flops"]
            expect(gflops > 0, f"flops {gflops}")
            graph = own.observation["ir_graph_networkx"]
            expect(graph.number_of_nodes() > 0, "empty graph")
            own.reset()  # the client keeps asking for the space it was last given
            expect(own.action_space.name == "loop_tune", f"{own.action_space.name}")
            return (
                f"loops_tensor {observation.shape}, reward {reward:+.4f}, "
                f"flops {gflops:.1f} GFLOP/s, {type(graph).__name__}"
            )

    passed, failed = RESULTS.count(True), RESULTS.count(False)
    print(f"checks: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} HOST:PORT")
    sys.exit(main(sys.argv[1]))
