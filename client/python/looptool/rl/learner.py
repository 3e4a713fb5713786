"""What train.py asks of a learner (ApexLearner, PPOLearner, SketchValueLearner).

A learner lives in the driver and is fed the episodes actors play: `add()` them, `update()` when
`can_update()` (one gradient step or batch; returns the loss), and export `policy()` for the
actors (with `meta`, a fresh Policy to save). `mode` and `epsilon(actor, actors)` say how actor
i of N acts; `wants_episodes(in_flight)` whether to hand out more work now. `state_dict()` /
`load_state_dict()` checkpoint it; `kept_replay()` counts what a checkpoint restored.
"""

from typing import Any, Dict, Optional, Protocol, Sequence

from looptool.rl.policy_file import Policy


class Learner(Protocol):
    mode: str          # rollout.MODES: how actors act
    updates: int       # gradient updates (batches for PPO) so far

    @property
    def config(self) -> Any: ...  # the learner's dataclass of hyperparameters

    def epsilon(self, actor: int, actors: int) -> float: ...

    def wants_episodes(self, in_flight: int) -> bool: ...

    def add(self, episodes: Sequence[Any]) -> None: ...

    def can_update(self) -> bool: ...

    def update(self) -> float: ...

    def policy(self, meta: Optional[Dict[str, Any]] = None) -> Policy: ...

    def state_dict(self) -> Dict[str, Any]: ...

    def load_state_dict(self, state: Dict[str, Any]) -> None: ...

    def kept_replay(self) -> int: ...
