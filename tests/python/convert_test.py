"""Unit tests of the client's pure parts, no server: Event conversion (convert.py), action
spaces and observation space specs (spaces.py), and gRPC error mapping (errors.py)."""

import json
import random
import unittest

import grpc
import networkx as nx
import numpy as np

from looptool import convert
from looptool import errors
from looptool.spaces import NamedDiscrete, ObservationSpaceSpec, Spaces
from looptool._proto import compiler_gym_service_pb2 as pb

GRAPH_JSON = json.dumps({
    "directed": True, "multigraph": True, "graph": {},
    "nodes": [{"id": 0, "label": "m in 4", "cursor": True}, {"id": 1, "label": "k in 8"},
              {"id": 2, "label": "%2 <- multiply(%0, %1)"}],
    "links": [{"source": 0, "target": 1, "key": 0, "type": "nest"},
              {"source": 1, "target": 2, "key": 0, "type": "nest"},
              {"source": 1, "target": 2, "key": 1, "type": "data"}],
})


def opaque_event(fmt, data):
    event = pb.Event()
    event.any_value.Pack(pb.Opaque(format=fmt, data=data))
    return event


class EventToPythonTest(unittest.TestCase):

    def test_scalars(self):
        self.assertEqual(convert.event_to_python(pb.Event(string_value="for m in 4")), "for m in 4")
        value = convert.event_to_python(pb.Event(int64_value=-(2**40)))  # sint64 on the wire
        self.assertIs(type(value), int)
        self.assertEqual(value, -(2**40))
        value = convert.event_to_python(pb.Event(double_value=52.5))
        self.assertIs(type(value), float)
        self.assertEqual(value, 52.5)
        self.assertEqual(convert.event_to_python(pb.Event(float_value=0.25)), 0.25)
        self.assertIs(convert.event_to_python(pb.Event(boolean_value=True)), True)
        self.assertIsNone(convert.event_to_python(pb.Event()))

    def test_float_tensor_is_float32_in_its_shape(self):
        event = pb.Event(float_tensor=pb.FloatTensor(shape=[2, 3], value=[0, 1, 2, 3, 4, 5.5]))
        value = convert.event_to_python(event)
        self.assertIsInstance(value, np.ndarray)
        self.assertEqual(value.dtype, np.float32)
        self.assertEqual(value.shape, (2, 3))
        np.testing.assert_array_equal(value, [[0, 1, 2], [3, 4, 5.5]])

    def test_other_tensors(self):
        value = convert.event_to_python(
            pb.Event(boolean_tensor=pb.BooleanTensor(shape=[3], value=[True, False, True])))
        self.assertEqual(value.dtype, np.bool_)
        np.testing.assert_array_equal(value, [True, False, True])
        empty = convert.event_to_python(pb.Event(boolean_tensor=pb.BooleanTensor(shape=[0])))
        self.assertEqual((empty.dtype, empty.shape), (np.bool_, (0,)))
        value = convert.event_to_python(
            pb.Event(int64_tensor=pb.Int64Tensor(shape=[1, 2], value=[-7, 2**50])))
        self.assertEqual(value.dtype, np.int64)
        np.testing.assert_array_equal(value, [[-7, 2**50]])
        value = convert.event_to_python(
            pb.Event(double_tensor=pb.DoubleTensor(shape=[2], value=[0.5, 1e300])))
        self.assertEqual(value.dtype, np.float64)
        np.testing.assert_array_equal(value, [0.5, 1e300])
        value = convert.event_to_python(
            pb.Event(byte_tensor=pb.ByteTensor(shape=[2, 2], value=b"\x00\x01\xfe\xff")))
        self.assertEqual(value.dtype, np.uint8)
        np.testing.assert_array_equal(value, [[0, 1], [254, 255]])

    def test_graph_opaque_is_a_multidigraph(self):
        graph = convert.event_to_python(opaque_event(convert.GRAPH_FORMAT, GRAPH_JSON.encode()))
        self.assertIsInstance(graph, nx.MultiDiGraph)
        self.assertEqual(sorted(graph.nodes), [0, 1, 2])
        self.assertEqual(graph.nodes[0], {"label": "m in 4", "cursor": True})
        self.assertEqual(graph.number_of_edges(), 3)
        self.assertEqual(graph.number_of_edges(1, 2), 2)  # parallel edges kept, by key
        self.assertEqual(graph.edges[1, 2, 1], {"type": "data"})

    def test_empty_graph(self):
        data = b'{"directed":true,"multigraph":true,"graph":{},"nodes":[],"links":[]}'
        graph = convert.event_to_python(opaque_event(convert.GRAPH_FORMAT, data))
        self.assertIsInstance(graph, nx.MultiDiGraph)
        self.assertEqual((graph.number_of_nodes(), graph.number_of_edges()), (0, 0))

    def test_other_opaque_payloads(self):
        self.assertEqual(convert.event_to_python(opaque_event("json://", b'{"a": [1, 2]}')),
                         {"a": [1, 2]})
        self.assertEqual(convert.event_to_python(opaque_event("bin://thing", b"\x01\x02")),
                         b"\x01\x02")

    def test_lists_and_dicts(self):
        event = pb.Event(event_list=pb.ListEvent(event=[pb.Event(int64_value=1),
                                                        pb.Event(string_value="x")]))
        self.assertEqual(convert.event_to_python(event), [1, "x"])
        event = pb.Event()
        event.event_dict.event["flops"].double_value = 3.5
        event.event_dict.event["tree"].string_value = "t"
        self.assertEqual(convert.event_to_python(event), {"flops": 3.5, "tree": "t"})


class ActionToEventTest(unittest.TestCase):

    def test_indices_and_names(self):
        self.assertEqual(convert.action_to_event(5), pb.Event(int64_value=5))
        self.assertEqual(convert.action_to_event(np.int64(16)), pb.Event(int64_value=16))
        self.assertEqual(convert.action_to_event("split_4"), pb.Event(string_value="split_4"))
        event = pb.Event(int64_value=3)
        self.assertIs(convert.action_to_event(event), event)

    def test_other_types_are_refused(self):
        for bad in (True, 1.0, None, [1]):
            with self.assertRaises(TypeError, msg=repr(bad)):
                convert.action_to_event(bad)


class NamedDiscreteTest(unittest.TestCase):

    def setUp(self):
        self.space = NamedDiscrete("loop_tune", ["up", "down", "swap_up", "swap_down",
                                                 "split_4", "split_8", "split_16"], index=1)

    def test_names_and_indices(self):
        self.assertEqual(self.space.name, "loop_tune")
        self.assertEqual(self.space.space_index, 1)
        self.assertEqual(self.space.n, 7)
        self.assertEqual(len(self.space), 7)
        self.assertEqual(self.space.index("split_4"), 4)
        self.assertEqual(self.space["split_16"], 6)
        self.assertEqual(self.space.action_name(3), "swap_down")
        self.assertEqual(self.space.names[0], "up")
        self.assertEqual(self.space.to_index("down"), 1)
        self.assertEqual(self.space.to_index(np.int32(2)), 2)
        with self.assertRaisesRegex(ValueError, "Unknown action 'merge' in action space loop_tune"):
            self.space.index("merge")
        with self.assertRaises(IndexError):
            self.space.action_name(7)
        self.assertIn("split_8", self.space)
        self.assertIn(6, self.space)
        self.assertNotIn(7, self.space)
        self.assertNotIn(-1, self.space)
        self.assertNotIn("vectorize", self.space)

    def test_sample(self):
        for rng in (np.random.default_rng(3), random.Random(3), np.random.RandomState(3), None):
            samples = [self.space.sample(rng) for _ in range(200)]
            self.assertTrue(all(isinstance(s, int) and 0 <= s < 7 for s in samples))
            self.assertEqual(set(samples), set(range(7)))  # 200 draws reach every action
        a = [self.space.sample(np.random.default_rng(42)) for _ in range(5)]
        b = [self.space.sample(np.random.default_rng(42)) for _ in range(5)]
        self.assertEqual(a, b)

    def test_from_proto(self):
        proto = pb.ActionSpace(name="a", space=pb.Space(
            named_discrete=pb.NamedDiscreteSpace(name=["x", "y"])))
        self.assertEqual(NamedDiscrete.from_proto(proto), NamedDiscrete("a", ["x", "y"]))
        with self.assertRaises(TypeError):
            NamedDiscrete.from_proto(pb.ActionSpace(name="d", space=pb.Space(
                discrete=pb.DiscreteSpace(n=3))))


class ObservationSpaceSpecTest(unittest.TestCase):

    def test_specs_from_a_get_spaces_reply(self):
        reply = pb.GetSpacesReply()
        reply.action_space_list.add(name="loop_tool").space.named_discrete.name.extend(["up"])
        box = reply.observation_space_list.add(name="loops_tensor", deterministic=True)
        box.space.float_box.low.shape.extend([1, 2])
        box.space.float_box.low.value.extend([0, 0])
        box.space.float_box.high.shape.extend([1, 2])
        box.space.float_box.high.value.extend([8192, 8192])
        box.default_observation.float_tensor.shape.extend([1, 2])
        box.default_observation.float_tensor.value.extend([0, 0])
        flops = reply.observation_space_list.add(name="flops", platform_dependent=True)
        flops.space.double_value.min = 0
        flops.default_observation.double_value = 0
        graph = reply.observation_space_list.add(name="ir_graph_networkx")
        graph.space.string_value.length_range.min = 0
        graph.default_observation.any_value.Pack(pb.Opaque(
            format=convert.GRAPH_FORMAT, data=b'{"directed":true,"multigraph":true,'
                                              b'"graph":{},"nodes":[],"links":[]}'))

        spaces = Spaces(reply)
        self.assertEqual(list(spaces.action_spaces), ["loop_tool"])
        self.assertEqual(list(spaces.observation_spaces),
                         ["loops_tensor", "flops", "ir_graph_networkx"])
        loops = spaces.observation_space("loops_tensor")
        self.assertIsInstance(loops, ObservationSpaceSpec)
        self.assertEqual((loops.index, loops.kind, loops.space_type, loops.shape),
                         (0, "float_tensor", "float_box", (1, 2)))
        self.assertTrue(loops.deterministic)
        self.assertFalse(loops.platform_dependent)
        np.testing.assert_array_equal(loops.high, [[8192, 8192]])
        default = loops.default_value
        self.assertEqual((default.dtype, default.shape), (np.float32, (1, 2)))
        default[0, 0] = 5  # each access is a fresh copy
        self.assertEqual(loops.default_value[0, 0], 0)
        f = spaces.observation_space("flops")
        self.assertEqual((f.index, f.kind, f.low, f.high, f.shape), (1, "double", 0.0, None, None))
        self.assertTrue(f.platform_dependent)
        g = spaces.observation_space("ir_graph_networkx")
        self.assertEqual((g.kind, g.space_type), ("graph", "string_value"))
        self.assertIsInstance(g.default_value, nx.MultiDiGraph)
        with self.assertRaises(KeyError):
            spaces.observation_space("nope")
        with self.assertRaises(ValueError):
            spaces.action_space("nope")


class FakeRpcError(grpc.RpcError):

    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class ErrorMappingTest(unittest.TestCase):

    def test_session_not_found_is_keyed_on_the_message_prefix(self):
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND,
                                               "Session not found: 6"), "Step")
        self.assertIsInstance(e, errors.SessionNotFound)
        self.assertIsInstance(e, errors.ServiceError)
        self.assertEqual((e.code, e.details, e.method),
                         (grpc.StatusCode.NOT_FOUND, "Session not found: 6", "Step"))
        self.assertEqual(str(e), "Step: NOT_FOUND: Session not found: 6")
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND,
                                               "Benchmark not found: benchmark://x/y"))
        self.assertIs(type(e), errors.ServiceError)

    def test_other_codes(self):
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down"))
        self.assertIsInstance(e, errors.ServiceTransportError)
        e = errors.from_rpc_error(FakeRpcError(grpc.StatusCode.INTERNAL, None))
        self.assertIs(type(e), errors.ServiceError)
        self.assertEqual((e.code, e.details), (grpc.StatusCode.INTERNAL, ""))


if __name__ == "__main__":
    unittest.main()
