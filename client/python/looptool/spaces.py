"""Action and observation spaces, built from the service's GetSpaces reply.

The service names its spaces; the protocol addresses them by index (StartSession and Step take
indices into GetSpaces' lists). These classes keep both:

* `NamedDiscrete`: a discrete action space whose actions have names (LoopTool's `loop_tool`
  space has 17: up, down, swap_up, swap_down, split_2 .. split_1024, merge, unroll, vectorize;
  `loop_tune` has LoopTune's 7).
* `ObservationSpaceSpec`: one observation space: its name and index, what kind of value it
  produces, the declared shape of tensors, whether it is deterministic / platform dependent, and
  the default observation (what an environment returns when a step fails).
* `Spaces`: everything GetSpaces returned, looked up by name.
"""

import random
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import numpy.typing as npt

from looptool import convert
from looptool._proto import compiler_gym_service_pb2 as pb

ActionLike = Union[int, str, np.integer[Any], Tuple[int, ...], List[int], "npt.NDArray[Any]"]
"""An action: an index, a name, or (loop_nest only) a (transformation, level, parameter) triple."""

Rng = Union[np.random.Generator, np.random.RandomState, random.Random, None]


def loop_nest_index(transformation: int, level: int, parameter: int) -> int:
    """loop_nest's flat index of (transformation 0 tile / 1 interchange / 2 unroll / 3 vectorize /
    4 merge / 5 stream / 6 fold, level 0..15, parameter 0..15: the tile size's index or the
    target level), as the server's LoopNestIndex (backend/actions/action_space.h)."""
    for what, value, high in (("transformation", transformation, 6), ("level", level, 15),
                              ("parameter", parameter, 15)):
        if not 0 <= value <= high:
            raise ValueError(f"loop_nest action ({transformation}, {level}, {parameter}): the "
                             f"{what} is out of range (0..{high})")
    if transformation <= 1:
        return 256 * transformation + 16 * level + parameter
    return 512 + 16 * (transformation - 2) + level


class NamedDiscrete:
    """A discrete action space of `n` actions, each with a name.

    `name` is the space's name ("loop_tool"); `names[i]` is action i's name. `index(name)` and
    `space[name]` map a name to its index, `action_name(i)` an index to its name.
    """

    def __init__(self, name: str, names: Iterable[str], index: int = 0) -> None:
        self.name = name
        self.names = tuple(names)
        self.space_index = index  # the index in GetSpaces' action_space_list
        self._index = {n: i for i, n in enumerate(self.names)}

    @property
    def n(self) -> int:
        return len(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """The index of the action called `name` (ValueError if there is none)."""
        try:
            return self._index[name]
        except KeyError:
            raise ValueError(f"Unknown action {name!r} in action space {self.name}") from None

    def __getitem__(self, name: str) -> int:
        return self.index(name)

    def action_name(self, i: Union[int, np.integer[Any]]) -> str:
        """The name of action `i` (IndexError if out of range)."""
        if not 0 <= int(i) < len(self.names):
            raise IndexError(f"Action index {i} out of range for {self.name} (0..{self.n - 1})")
        return self.names[int(i)]

    def to_index(self, action: ActionLike) -> int:
        """An action given as an index or a name, as an index (the index is not range-checked);
        in loop_nest also as MLIR-RL's (transformation, level, parameter) triple."""
        if isinstance(action, str):
            return self.index(action)
        if isinstance(action, (tuple, list, np.ndarray)):
            if self.name != "loop_nest":
                raise ValueError(f"A (transformation, level, parameter) action is for loop_nest, "
                                 f"not {self.name}")
            if len(action) != 3:
                raise ValueError("A multi-discrete action must hold three integers: "
                                 "(transformation, level, parameter)")
            return loop_nest_index(*(int(x) for x in action))
        return int(action)

    def contains(self, action: object) -> bool:
        """True for a valid index or a known name."""
        if isinstance(action, str):
            return action in self._index
        try:
            index: int = int(action)  # type: ignore[call-overload]  # TypeError: not a number
        except (TypeError, ValueError):
            return False
        return 0 <= index < len(self.names)

    __contains__ = contains

    def sample(self, rng: Rng = None) -> int:
        """A uniformly random action index. `rng`: a numpy Generator, a `random.Random`, or None."""
        if rng is None:
            return random.randrange(len(self.names))
        if isinstance(rng, np.random.Generator):
            return int(rng.integers(len(self.names)))
        if isinstance(rng, np.random.RandomState):
            return int(rng.randint(len(self.names)))
        return rng.randrange(len(self.names))

    @classmethod
    def from_proto(cls, action_space: pb.ActionSpace, index: int = 0) -> "NamedDiscrete":
        """From a `compiler_gym.ActionSpace` whose space is `named_discrete`."""
        kind = action_space.space.WhichOneof("value")
        if kind != "named_discrete":
            raise TypeError(f"Action space {action_space.name} is {kind}, not named_discrete")
        return cls(action_space.name, action_space.space.named_discrete.name, index)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, NamedDiscrete) and self.name == other.name
                and self.names == other.names)

    def __hash__(self) -> int:
        return hash((self.name, self.names))

    def __repr__(self) -> str:
        return f"NamedDiscrete({self.name!r}, n={self.n})"


# What an observation space produces, from the default observation's Event field.
_KIND_OF_EVENT = {
    "string_value": "string",
    "any_value": "graph",  # LoopTool's only Any payload: networkx node-link JSON
    "float_tensor": "float_tensor",
    "double_tensor": "double_tensor",
    "int64_tensor": "int64_tensor",
    "boolean_tensor": "bool_tensor",
    "byte_tensor": "byte_tensor",
    "double_value": "double",
    "float_value": "float",
    "int64_value": "int64",
    "boolean_value": "bool",
}


class ObservationSpaceSpec:
    """One observation space.

    Attributes:
      name: the space's name ("loops_tensor").
      index: its index in GetSpaces' observation_space_list (what requests carry).
      kind: what it produces: "string", "graph", "float_tensor", "bool_tensor", "double",
        "int64", ... (see `_KIND_OF_EVENT`).
      space_type: the `compiler_gym.Space` field that describes it ("float_box", "string_value",
        "boolean_sequence", "double_value", "int64_value", ...).
      shape: the declared shape of a box (a tuple), else None.
      low, high: a box's bounds or a range's min and max (None when unset).
      deterministic, platform_dependent: as declared by the service.
      default_value: the default observation, converted (a fresh object on every access).
      proto: the `compiler_gym.ObservationSpace` message.
    """

    def __init__(self, proto: pb.ObservationSpace, index: int) -> None:
        self.proto = proto
        self.index = index
        self.name = proto.name
        self.deterministic = proto.deterministic
        self.platform_dependent = proto.platform_dependent
        self.space_type = proto.space.WhichOneof("value")
        default_kind = proto.default_observation.WhichOneof("value")
        self.kind: Optional[str] = _KIND_OF_EVENT.get(default_kind, self.space_type)
        self.shape: Optional[Tuple[int, ...]] = None
        self.low: Any = None
        self.high: Any = None
        space = proto.space
        if self.space_type and self.space_type.endswith("_box"):
            box = getattr(space, self.space_type)
            self.shape = tuple(int(d) for d in box.low.shape)
            self.low = convert.event_to_python(_tensor_event(self.space_type, box.low))
            self.high = convert.event_to_python(_tensor_event(self.space_type, box.high))
        elif self.space_type in ("double_value", "float_value", "int64_value", "boolean_value"):
            r = getattr(space, self.space_type)
            self.low = r.min if r.WhichOneof("optional_min") else None
            self.high = r.max if r.WhichOneof("optional_max") else None

    @property
    def default_value(self) -> Any:
        return convert.event_to_python(self.proto.default_observation)

    def __repr__(self) -> str:
        shape = f", shape={self.shape}" if self.shape is not None else ""
        return f"ObservationSpaceSpec({self.name!r}, kind={self.kind!r}{shape})"


def _tensor_event(box_type: str, tensor: Any) -> pb.Event:
    """An Event holding a box bound, so convert.py turns it into a numpy array."""
    field = {"float_box": "float_tensor", "double_box": "double_tensor",
             "int64_box": "int64_tensor", "boolean_box": "boolean_tensor",
             "byte_box": "byte_tensor"}[box_type]
    event = pb.Event()
    getattr(event, field).CopyFrom(tensor)
    return event


class Spaces:
    """Everything GetSpaces returned: `action_spaces` and `observation_spaces`, dicts by name in
    the service's order."""

    def __init__(self, reply: pb.GetSpacesReply) -> None:
        self.reply = reply
        self.action_spaces: Dict[str, NamedDiscrete] = {}
        for i, a in enumerate(reply.action_space_list):
            self.action_spaces[a.name] = NamedDiscrete.from_proto(a, i)
        self.observation_spaces: Dict[str, ObservationSpaceSpec] = {}
        for i, o in enumerate(reply.observation_space_list):
            self.observation_spaces[o.name] = ObservationSpaceSpec(o, i)

    def action_space(self, name: str) -> NamedDiscrete:
        try:
            return self.action_spaces[name]
        except KeyError:
            raise ValueError(f"Unknown action space {name!r}; the service has "
                             f"{', '.join(self.action_spaces)}") from None

    def observation_space(self, name: str) -> ObservationSpaceSpec:
        try:
            return self.observation_spaces[name]
        except KeyError:
            raise KeyError(f"Unknown observation space {name!r}; the service has "
                           f"{', '.join(self.observation_spaces)}") from None
