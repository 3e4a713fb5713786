"""Learned tuning: distributed RL over LoopTool servers, and trained policies.

Modules, one job each:
  benchmarks   the dataset's train/test splits and the off-grid matmuls, as the service lists them
  policy_file  a trained policy as one JSON file, and its numpy forward pass (actors, C++ twin)
  networks     the PyTorch networks (dueling Q, actor-critic) and their export to a policy file
  replay       episode rewards (looptool.reward's), n-step transitions, prioritized replay
  rollout      episodes on a LoopToolEnv acted by a policy (what a Dask actor task runs)
  learner      what train.py asks of a learner
  cluster      servers, the Dask cluster and the pool of actor calls in flight
  apex_dqn     Ape-X DQN's learner;  ppo  PPO's learner
  sketch_value the sketch choice: its episode (one decision among the server's sketches, by
               the value of the state each leads to) and its learner (the default policy)
  evaluate     greedy evaluation of a policy;  report  curves and tables (CSV, Markdown, PNG)
  train        the command line: `python3 -m looptool.rl.train --algo=apex-dqn ...`
  loop_set     a policy over the set of loops (`loop_features`, any number of loops) that builds
               the schedule in loop_nest from the untiled nest: numpy forward pass, PyTorch net
  imitate      loop_set learned from tuning records (canonical paths of the best schedules),
               then expert iteration: `python3 -m looptool.rl.imitate --records=records.db ...`

PyTorch is needed only by networks, the learners and train; a policy acts with numpy alone:

    from looptool.rl import Policy
    policy = Policy.load("datasets/policies/looptune_dqn.json")
    action = policy.act(observation["loops_tensor"], observation["action_mask"])

A sketch_value policy (datasets/policies/sketch_value.json) acts once per episode, choosing among
the `sketches` of a loop_nest session: `env.multistep(sketch_value.choose(env, policy))` on a
LoopToolEnv, or `rollout.run_one`, which dispatches on the policy's kind. A loop_set policy
(datasets/policies/loop_set.json, learned at AVX-512; loop_set_avx2.json for a server generating
AVX2 or SSE code) acts step by step on a loop_nest session:
`imitate.rollout(env, uri, program, loop_set.load(path))`.
"""

from looptool.rl.policy_file import Policy, masked_argmax

__all__ = ["Policy", "masked_argmax"]
