"""Converting between protocol `Event` messages and Python values.

Observations arrive as `compiler_gym.Event`s; which `value` field is set decides the Python type
(CompilerGym's conventions, compilergym.md section 1.4):

=================  ==============================================================
Event field        Python value
=================  ==============================================================
string_value       str
int64_value        int
double_value       float
float_value        float
boolean_value      bool
float_tensor       numpy float32 array reshaped to `shape`
double_tensor      numpy float64 array reshaped to `shape`
int64_tensor       numpy int64 array reshaped to `shape`
boolean_tensor     numpy bool array reshaped to `shape`
byte_tensor        numpy uint8 array reshaped to `shape`
string_tensor      numpy object array of str reshaped to `shape`
any_value          Opaque "json://networkx/MultiDiGraph" -> networkx.MultiDiGraph,
                   Opaque "json://..." -> parsed JSON, another Opaque -> its bytes
event_list         list
event_dict         dict
=================  ==============================================================

Actions go the other way (`action_to_event`): an int is an index into the action space
(`int64_value`), a str an action name (`string_value`).
"""

import functools
import json
import numbers
from typing import Any, Dict, Union

import numpy as np
import numpy.typing as npt

from looptool._proto import compiler_gym_service_pb2 as pb

GRAPH_FORMAT = "json://networkx/MultiDiGraph"
JSON_FORMAT_PREFIX = "json://"


Action = Union[int, str, np.integer[Any], pb.Event]
"""An action as callers give it: an index, a name, or a ready Event."""

_Tensor = Union[pb.FloatTensor, pb.DoubleTensor, pb.Int64Tensor, pb.BooleanTensor,
                pb.StringTensor]


def _tensor(t: _Tensor, dtype: "npt.DTypeLike") -> "npt.NDArray[Any]":
    """A numpy array of the tensor's values in `dtype`, reshaped to its shape (if it has one)."""
    values = np.asarray(t.value, dtype=dtype)
    shape = tuple(int(d) for d in t.shape)
    return values.reshape(shape) if shape else values


@functools.lru_cache(maxsize=None)
def _node_link_graph_kwargs() -> Dict[str, Any]:
    """Keyword arguments for networkx.node_link_graph that read CompilerGym's node-link JSON."""
    import inspect

    import networkx as nx

    kwargs: Dict[str, Any] = {"directed": True, "multigraph": True}
    # networkx 3.4 renamed `link=` to `edges=` (and warns unless it is passed); 2.x has `link=`.
    params = inspect.signature(nx.node_link_graph).parameters
    if "edges" in params:
        kwargs["edges"] = "links"
    elif "link" in params:
        kwargs["link"] = "links"
    return kwargs


def graph_from_node_link_json(data: Union[str, bytes]) -> Any:
    """A networkx.MultiDiGraph from node-link JSON (str or bytes), as networkx itself writes it."""
    import networkx as nx  # imported on first use: it is slow to import and often not needed

    return nx.node_link_graph(json.loads(data), **_node_link_graph_kwargs())


def opaque_to_python(opaque: pb.Opaque) -> Any:
    """Decodes a `compiler_gym.Opaque` by its format string."""
    if opaque.format == GRAPH_FORMAT:
        return graph_from_node_link_json(opaque.data)
    if opaque.format.startswith(JSON_FORMAT_PREFIX):
        return json.loads(opaque.data)
    return bytes(opaque.data)


def event_to_python(event: pb.Event) -> Any:
    """Converts one `compiler_gym.Event` to a Python value (see the module docstring)."""
    kind = event.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return event.string_value
    if kind == "int64_value":
        return int(event.int64_value)
    if kind == "double_value":
        return float(event.double_value)
    if kind == "float_value":
        return float(event.float_value)
    if kind == "boolean_value":
        return bool(event.boolean_value)
    if kind == "float_tensor":
        return _tensor(event.float_tensor, np.float32)
    if kind == "double_tensor":
        return _tensor(event.double_tensor, np.float64)
    if kind == "int64_tensor":
        return _tensor(event.int64_tensor, np.int64)
    if kind == "boolean_tensor":
        return _tensor(event.boolean_tensor, np.bool_)
    if kind == "byte_tensor":
        values = np.frombuffer(event.byte_tensor.value, dtype=np.uint8).copy()
        shape = tuple(int(d) for d in event.byte_tensor.shape)
        return values.reshape(shape) if shape else values
    if kind == "string_tensor":
        return _tensor(event.string_tensor, object)
    if kind == "any_value":
        opaque = pb.Opaque()
        if not event.any_value.Unpack(opaque):
            raise TypeError(f"Unsupported Any payload: {event.any_value.type_url}")
        return opaque_to_python(opaque)
    if kind == "event_list":
        return [event_to_python(e) for e in event.event_list.event]
    if kind == "event_dict":
        return {k: event_to_python(v) for k, v in event.event_dict.event.items()}
    raise TypeError(f"Unsupported Event value: {kind}")


def action_to_event(action: Action) -> pb.Event:
    """An action as an `Event`: an integer index -> int64_value, a name -> string_value."""
    if isinstance(action, pb.Event):
        return action
    if isinstance(action, str):
        return pb.Event(string_value=action)
    if isinstance(action, (bool, np.bool_)):
        raise TypeError(f"An action is an index or a name, not {action!r}")
    if isinstance(action, numbers.Integral):
        return pb.Event(int64_value=int(action))
    raise TypeError(f"An action is an index (int) or a name (str), got {type(action).__name__}")
