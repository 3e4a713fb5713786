"""Learned tuning: distributed RL over LoopTool servers, and trained policies.

Modules, one job each:
  benchmarks   the dataset's train/test splits and off-grid shapes, as the service names them
  policy_file  a trained policy as one JSON file, and its numpy forward pass (actors, C++ twin)
  networks     the PyTorch networks (dueling Q, actor-critic) and their export to a policy file
  replay       rewards, n-step transitions, prioritized replay
  rollout      episodes on a server acted by a policy (what a Dask actor task runs)
  cluster      servers, the Dask cluster and the pool of actor calls in flight
  apex_dqn     Ape-X DQN's learner;  ppo  PPO's learner
  evaluate     greedy evaluation of a policy;  report  curves and tables (CSV, Markdown, PNG)
  train        the command line: `python3 -m looptool.rl.train --algo=apex-dqn ...`

PyTorch is needed only by networks, the learners and train; a policy acts with numpy alone:

    from looptool.rl import Policy
    policy = Policy.load("datasets/policies/looptune_dqn.json")
    action = policy.act(observation["loops_tensor"], observation["action_mask"])
"""

from looptool.rl.policy_file import Policy, masked_argmax

__all__ = ["Policy", "masked_argmax"]
