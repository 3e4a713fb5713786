"""The PyTorch networks the learners train, and their conversion to/from a `Policy` file.

Each is an MLP trunk on the preprocessed observation (policy_file.preprocess) with two linear
heads: DuelingQNetwork gives Q = V + A - mean(A) (Ape-X DQN), ActorCritic gives action logits
and a state value (PPO), SketchValueNetwork one number, the value of the state it reads (its V
head is unused: the file format's). `to_policy()` writes exactly the weights `Policy` and the
C++ forward pass use, so the three agree (tests/python/rl_test.py, tests/client/policy_test.cc).
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from looptool.rl import policy_file

_Net = TypeVar("_Net", bound="_TwoHeaded")


def _mlp(input_size: int, hidden: Sequence[int]) -> Tuple[nn.ModuleList, int]:
    layers: List[nn.Module] = []
    width = input_size
    for h in hidden:
        layers.append(nn.Linear(width, h))
        width = h
    return nn.ModuleList(layers), width


class _TwoHeaded(nn.Module):
    KIND = ""

    def __init__(self, input_size: int, num_actions: int,
                 hidden: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        self.trunk, width = _mlp(input_size, hidden)
        self.head = nn.Linear(width, num_actions)
        self.value = nn.Linear(width, 1)
        self.hidden = tuple(hidden)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        h = torch.log2(1.0 + torch.clamp(obs, min=0.0))
        for layer in self.trunk:
            h = torch.relu(layer(h))
        return h

    def to_policy(self, action_space: str = "loop_tool",
                  observation_space: str = "loops_tensor",
                  meta: Optional[Dict[str, Any]] = None) -> policy_file.Policy:
        def pair(layer: nn.Linear) -> Tuple["npt.NDArray[np.float32]", "npt.NDArray[np.float32]"]:
            return (layer.weight.detach().cpu().numpy().copy(),
                    layer.bias.detach().cpu().numpy().copy())
        return policy_file.Policy(self.KIND, [pair(t) for t in self.trunk], pair(self.head),
                                  pair(self.value), action_space, observation_space, meta)

    @classmethod
    def from_policy(cls: Type[_Net], policy: policy_file.Policy) -> _Net:
        if policy.kind != cls.KIND:
            raise ValueError(f"A {policy.kind} policy is not a {cls.KIND} network")
        net = cls(policy.input_size, policy.num_actions,
                  hidden=[w.shape[0] for w, _ in policy.trunk])
        with torch.no_grad():
            for layer, (w, b) in zip(list(net.trunk) + [net.head, net.value],
                                     policy.trunk + [policy.head, policy.value]):
                layer.weight.copy_(torch.from_numpy(w))
                layer.bias.copy_(torch.from_numpy(b))
        return net


class DuelingQNetwork(_TwoHeaded):
    """Q(s, .) for every action: V(s) + A(s, .) - mean A(s, .)."""
    KIND = "dueling_q"

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        h = self.features(obs)
        a = self.head(h)
        q: torch.Tensor = self.value(h) + a - a.mean(dim=-1, keepdim=True)
        return q


class ActorCritic(_TwoHeaded):
    """(logits over actions, V(s))."""
    KIND = "actor_critic"

    def forward(self, obs: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        h = self.features(obs)
        return self.head(h), self.value(h).squeeze(-1)


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits with forbidden actions at -1e9 (their probability underflows to exactly 0)."""
    return torch.where(mask, logits, torch.full_like(logits, -1e9))


class SketchValueNetwork(_TwoHeaded):
    """The value of a state (one number per observation): what choosing the sketch that leads
    there is worth (sketch_value.py)."""
    KIND = "sketch_value"

    def __init__(self, input_size: int, num_actions: int = 1,
                 hidden: Sequence[int] = (128, 128)) -> None:
        if num_actions != 1:
            raise ValueError(f"A sketch_value network has one output, not {num_actions}")
        super().__init__(input_size, 1, hidden)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        value: torch.Tensor = self.head(self.features(obs)).squeeze(-1)
        return value
