"""Ape-X DQN's learner (Horgan et al. 2018, as RLlib and LoopTune run it): double + dueling Q,
n-step returns, prioritized replay, a different exploration rate per actor, invalid actions
masked with `action_mask` (never chosen by actors, never bootstrapped from).

The learner lives in the driver; actors only play episodes with the latest weights it exports
(`policy()`), so it is a pure function of the episodes it is fed. train.py runs the loop.
"""

import copy
import dataclasses
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from looptool.rl import networks
from looptool.rl import policy_file
from looptool.rl import replay as replay_lib


@dataclasses.dataclass
class ApexConfig:
    hidden: Tuple[int, ...] = (128, 128)
    gamma: float = 0.95            # LoopTune's
    n_step: int = 3
    lr: float = 2.5e-4
    batch_size: int = 64
    buffer_size: int = 100_000
    alpha: float = 0.6             # prioritized replay
    beta: float = 0.4
    learning_starts: int = 500     # transitions before the first update
    replay_ratio: float = 0.5      # gradient updates per new transition, at most
    target_update: int = 250       # updates between target network copies
    sync_every: int = 25           # updates between weight broadcasts to actors
    eps_base: float = 0.4          # actor i of N explores with eps_base ** (1 + eps_alpha i/(N-1))
    eps_alpha: float = 7.0
    grad_clip: float = 10.0
    reward: str = "dgflops_peak"
    reward_scale: float = 10.0     # rewards are fractions of the peak: scale to ~unit Q-values


def epsilon(actor: int, actors: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's per-actor exploration rate."""
    if actors <= 1:
        return base
    return float(base ** (1.0 + alpha * actor / (actors - 1)))


class ApexLearner:
    mode = "epsilon"

    def __init__(self, input_size: int, num_actions: int, config: Optional[ApexConfig] = None,
                 seed: int = 0, action_space: str = "loop_tool") -> None:
        self.config = config or ApexConfig()
        c = self.config
        torch.manual_seed(seed)
        self.action_space = action_space
        self.net = networks.DuelingQNetwork(input_size, num_actions, c.hidden)
        self.target = copy.deepcopy(self.net)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=c.lr)
        self.replay = replay_lib.PrioritizedReplay(c.buffer_size, input_size, num_actions,
                                                   c.alpha, seed)
        self.updates = 0
        self._updates_at_start = 0  # updates a resumed run began with, if its replay was not kept
        self._policy: Optional[policy_file.Policy] = None

    # --- what the loop asks -----------------------------------------------------------------

    def epsilon(self, actor: int, actors: int) -> float:
        return epsilon(actor, actors, self.config.eps_base, self.config.eps_alpha)

    def wants_episodes(self, in_flight: int) -> bool:
        return True  # off-policy: actors never wait

    def add(self, episodes: Sequence[Any]) -> None:
        c = self.config
        for e in episodes:
            if len(e) == 0:
                continue
            t = replay_lib.n_step_transitions(e, c.reward, c.n_step, c.gamma)
            t = t[:3] + (t[3] * c.reward_scale,) + t[4:]
            self.replay.add(t)

    def can_update(self) -> bool:
        c = self.config
        return (len(self.replay) >= max(c.learning_starts, c.batch_size)
                and self.updates - self._updates_at_start < c.replay_ratio * self.replay.added)

    def update(self) -> float:
        """One gradient step on a prioritized batch; returns the loss."""
        c = self.config
        idx, b, w = self.replay.sample(c.batch_size, c.beta)
        obs = torch.from_numpy(b["obs"])
        next_obs = torch.from_numpy(b["next_obs"])
        next_mask = torch.from_numpy(b["next_mask"])
        action = torch.from_numpy(b["action"])
        q = self.net(obs).gather(1, action[:, None]).squeeze(1)
        with torch.no_grad():
            # Double DQN: the online net picks the next action among the allowed ones, the
            # target net values it. A next state with no allowed action is terminal.
            online_next = networks.masked_logits(self.net(next_obs), next_mask)
            best = online_next.argmax(dim=1, keepdim=True)
            value = self.target(next_obs).gather(1, best).squeeze(1)
            value = torch.where(next_mask.any(dim=1), value, torch.zeros_like(value))
            target = torch.from_numpy(b["ret"]) + torch.from_numpy(b["discount"]) * value
        td = q - target
        loss = (torch.from_numpy(w) * nn.functional.smooth_l1_loss(
            q, target, reduction="none")).mean()
        self.opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), c.grad_clip)
        self.opt.step()
        self.replay.update(idx, np.abs(td.detach().numpy()) + 1e-6)
        self.updates += 1
        if self.updates % c.target_update == 0:
            self.target.load_state_dict(self.net.state_dict())
        if self.updates % c.sync_every == 0:
            self._policy = None
        return float(loss)

    def policy(self, meta: Optional[Dict[str, Any]] = None) -> policy_file.Policy:
        """The weights actors act with (refreshed every `sync_every` updates)."""
        if self._policy is None or meta is not None:
            p = self.net.to_policy(self.action_space, meta=meta)
            if meta is not None:
                return p
            self._policy = p
        return self._policy

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        return {"net": self.net.state_dict(), "target": self.target.state_dict(),
                "opt": self.opt.state_dict(), "updates": self.updates,
                "updates_at_start": self._updates_at_start, "replay": self.replay.state_dict()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.target.load_state_dict(state["target"])
        self.opt.load_state_dict(state["opt"])
        self.updates = state["updates"]
        if "replay" in state:  # the replay goes on: the update cap counts every transition
            self.replay.load_state_dict(state["replay"])
            self._updates_at_start = state.get("updates_at_start", 0)
        else:  # a checkpoint without its replay: cap the updates by what this run adds
            self._updates_at_start = state["updates"]
        self._policy = None

    def kept_replay(self) -> int:
        """Transitions in the replay buffer (a resumed run's, restored from its checkpoint)."""
        return len(self.replay)
