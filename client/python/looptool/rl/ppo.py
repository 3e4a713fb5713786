"""PPO with masked actions (Schulman et al. 2017; as MLIR-RL uses it): actors sample from the
softmax of the allowed logits, the learner takes `epochs` passes of clipped-objective minibatch
updates over each batch of episodes (GAE advantages, value loss, entropy bonus), then actors get
the new weights. On-policy: actors get no new work while a batch is being learned from.
"""

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from looptool.rl import networks
from looptool.rl import policy_file
from looptool.rl import replay as replay_lib


@dataclasses.dataclass
class PPOConfig:
    hidden: Tuple[int, ...] = (128, 128)
    gamma: float = 0.95
    lam: float = 0.95
    lr: float = 3e-4
    clip: float = 0.2
    epochs: int = 4
    minibatch: int = 128
    batch_episodes: int = 64       # episodes per update
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    grad_clip: float = 0.5
    reward: str = "dgflops_peak"
    reward_scale: float = 10.0


class PPOLearner:
    mode = "sample"

    def __init__(self, input_size: int, num_actions: int, config: Optional[PPOConfig] = None,
                 seed: int = 0, action_space: str = "loop_tool") -> None:
        self.config = config or PPOConfig()
        torch.manual_seed(seed)
        self.action_space = action_space
        self.net = networks.ActorCritic(input_size, num_actions, self.config.hidden)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.config.lr)
        self.batch: List[Any] = []
        self.updates = 0
        self._policy: Optional[policy_file.Policy] = None

    def epsilon(self, actor: int, actors: int) -> float:
        return 0.0

    def wants_episodes(self, in_flight: int) -> bool:
        return len(self.batch) + in_flight < self.config.batch_episodes

    def add(self, episodes: Sequence[Any]) -> None:
        self.batch.extend(e for e in episodes if len(e) > 0)

    def can_update(self) -> bool:
        return len(self.batch) >= self.config.batch_episodes

    def kept_replay(self) -> int:
        return 0  # on-policy: no replay to keep

    def _flatten(self) -> Tuple["npt.NDArray[Any]", ...]:
        """Per-step arrays over the batch with GAE advantages and returns."""
        c = self.config
        obs, masks, actions, logp, adv, ret = [], [], [], [], [], []
        for e in self.batch:
            r = replay_lib.rewards(e, c.reward) * c.reward_scale
            with torch.no_grad():
                _, v = self.net(torch.from_numpy(e.obs))
            v = v.numpy().astype(np.float64)
            v[-1] = 0.0  # the last state is terminal
            gae, a = 0.0, np.zeros(len(r))
            for t in reversed(range(len(r))):
                delta = r[t] + c.gamma * v[t + 1] - v[t]
                gae = delta + c.gamma * c.lam * gae
                a[t] = gae
            obs.append(e.obs[:-1])
            masks.append(e.masks[:-1])
            actions.append(e.actions)
            logp.append(e.logp)
            adv.append(a)
            ret.append(a + v[:-1])
        cat = np.concatenate
        return (cat(obs), cat(masks), cat(actions), cat(logp).astype(np.float32),
                cat(adv).astype(np.float32), cat(ret).astype(np.float32))

    def update(self) -> float:
        """`epochs` passes over the batch; returns the mean loss."""
        c = self.config
        obs, masks, actions, old_logp, adv, ret = (torch.from_numpy(a) for a in self._flatten())
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        n, losses = len(actions), []
        for _ in range(c.epochs):
            perm = torch.randperm(n)
            for start in range(0, n, c.minibatch):
                i = perm[start:start + c.minibatch]
                logits, value = self.net(obs[i])
                dist = torch.distributions.Categorical(
                    logits=networks.masked_logits(logits, masks[i]))
                logp = dist.log_prob(actions[i])
                ratio = torch.exp(logp - old_logp[i])
                surrogate = torch.min(ratio * adv[i],
                                      torch.clamp(ratio, 1 - c.clip, 1 + c.clip) * adv[i])
                loss = (-surrogate.mean() + c.value_coef * ((value - ret[i]) ** 2).mean()
                        - c.entropy_coef * dist.entropy().mean())
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.net.parameters(), c.grad_clip)
                self.opt.step()
                losses.append(float(loss))
        self.batch = []
        self.updates += 1
        self._policy = None
        return float(np.mean(losses))

    def policy(self, meta: Optional[Dict[str, Any]] = None) -> policy_file.Policy:
        if meta is not None:
            return self.net.to_policy(self.action_space, meta=meta)
        if self._policy is None:
            self._policy = self.net.to_policy(self.action_space)
        return self._policy

    def state_dict(self) -> Dict[str, Any]:
        return {"net": self.net.state_dict(), "opt": self.opt.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        self.updates = state["updates"]
        self._policy = None
