"""The service as any gRPC client sees it: only the generated stubs (and, for the standard gRPC
health and reflection services, raw bytes on a bare channel). LocalServer just runs the
process. Checks the spaces, the Step/EndSession/SendSessionParameter conventions CompilerGym's
clients rely on, health checking, server reflection, and SIGTERM shutdown."""

import time
import unittest

import grpc
from google.protobuf import descriptor_pb2

from looptool import LocalServer
from looptool._proto import compiler_gym_service_pb2 as pb
from looptool._proto import compiler_gym_service_pb2_grpc as pb_grpc

SERVER = "service/looptool-server"  # relative to the runfiles root, the cwd under bazel test
MM = "benchmark://mm64_256_16_range-v0/mm112_208_256"
EMPTY_GRAPH = b'{"directed":true,"multigraph":true,"graph":{},"nodes":[],"links":[]}'

# name, Space field, default observation's Event field, deterministic, platform_dependent
OBSERVATION_SPACES = [
    ("ir", "string_value", "string_value", True, False),
    ("loop_tree", "string_value", "string_value", True, False),
    ("loops_tensor", "float_box", "float_tensor", True, False),
    ("stride_tensor", "float_box", "float_tensor", True, False),
    ("5_prev_actions_tensor", "float_box", "float_tensor", True, False),
    ("ir_graph_networkx", "string_value", "any_value", True, False),
    ("ir_tree_networkx", "string_value", "any_value", True, False),
    ("action_mask", "boolean_sequence", "boolean_tensor", True, False),
    ("flop_count", "int64_value", "int64_value", True, False),
    ("flops", "double_value", "double_value", False, True),
    ("runtime", "double_value", "double_value", False, True),
    ("timing", "string_value", "string_value", False, True),
    ("peak_gflops", "double_value", "double_value", False, True),
    ("predicted_gflops", "double_value", "double_value", False, True),
    ("sketches", "string_value", "string_value", True, True),
    ("kernel_plan", "string_value", "string_value", True, True),
    ("kernel_abi", "string_value", "string_value", True, True),
    ("machine_code", "byte_sequence", "byte_tensor", True, True),
    ("roofline", "string_value", "string_value", False, True),
    ("roofline_fraction", "double_value", "double_value", False, True),
    ("plan_features", "string_value", "string_value", True, True),
    ("loop_features", "float_box", "float_tensor", True, False),
    ("action_state", "int64_box", "int64_tensor", True, False),  # upstream loop_tool-v0's
]
OBS = {name: i for i, (name, *_) in enumerate(OBSERVATION_SPACES)}


def _varint(data, i):
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def decode_fields(data):
    """A protobuf message's fields as (number, value) pairs, without its schema: varints become
    ints, length-delimited fields bytes."""
    fields, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = _varint(data, i)
        elif wire_type == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire_type == 1:
            value, i = data[i:i + 8], i + 8
        elif wire_type == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire_type}")
        fields.append((number, value))
    return fields


class ServiceProtocolTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(SERVER)
        cls.channel = grpc.insecure_channel(cls.server.address)
        cls.stub = pb_grpc.CompilerGymServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()  # first: an open connection would hold the drain for 5 s
        status = cls.server.close()
        if status != 0:
            raise AssertionError(f"looptool-server exited with status {status}")

    def start(self, observations=(), action_space=0, uri=MM):
        reply = self.stub.StartSession(pb.StartSessionRequest(
            benchmark=pb.Benchmark(uri=uri), action_space=action_space,
            observation_space=[OBS[o] for o in observations]), timeout=30)
        self.addCleanup(self.stub.EndSession, pb.EndSessionRequest(session_id=reply.session_id))
        return reply

    def assert_rpc_error(self, code, details, rpc, request):
        with self.assertRaises(grpc.RpcError) as caught:
            rpc(request, timeout=30)
        self.assertEqual(caught.exception.code(), code)
        self.assertEqual(caught.exception.details(), details)

    def test_get_version(self):
        reply = self.stub.GetVersion(pb.GetVersionRequest(), timeout=30)
        self.assertEqual(reply.service_version, "0.2.5")
        self.assertTrue(reply.compiler_version.startswith("LoopTool"), reply.compiler_version)

    def test_get_spaces(self):
        reply = self.stub.GetSpaces(pb.GetSpacesRequest(), timeout=30)
        self.assertEqual([a.name for a in reply.action_space_list],
                         ["loop_tool", "loop_tune", "loop_nest", "simple", "split"])
        for a in reply.action_space_list:
            self.assertEqual(a.space.WhichOneof("value"), "named_discrete")
        self.assertEqual(len(reply.action_space_list[0].space.named_discrete.name), 17)
        self.assertEqual(list(reply.action_space_list[1].space.named_discrete.name),
                         ["up", "down", "swap_up", "swap_down", "split_4", "split_8", "split_16"])
        self.assertEqual(
            [(o.name, o.space.WhichOneof("value"), o.default_observation.WhichOneof("value"),
              o.deterministic, o.platform_dependent) for o in reply.observation_space_list],
            OBSERVATION_SPACES)
        for o in reply.observation_space_list:
            self.assertTrue(o.HasField("default_observation"), o.name)
        loops = reply.observation_space_list[OBS["loops_tensor"]]
        self.assertEqual(list(loops.space.float_box.low.shape), [1, 320])
        self.assertEqual(list(loops.default_observation.float_tensor.shape), [1, 320])
        self.assertEqual(list(loops.default_observation.float_tensor.value), [0.0] * 320)
        graph = reply.observation_space_list[OBS["ir_graph_networkx"]]
        opaque = pb.Opaque()
        self.assertTrue(graph.default_observation.any_value.Unpack(opaque))
        self.assertEqual((opaque.format, opaque.data),
                         ("json://networkx/MultiDiGraph", EMPTY_GRAPH))
        # GetSpaces is constant for the process lifetime.
        again = self.stub.GetSpaces(pb.GetSpacesRequest(), timeout=30)
        self.assertEqual(again.SerializeToString(deterministic=True),
                         reply.SerializeToString(deterministic=True))

    def test_start_session_observes_in_request_order(self):
        reply = self.start(["flop_count", "loop_tree", "flop_count", "action_mask"],
                           action_space=1)
        self.assertEqual([e.WhichOneof("value") for e in reply.observation],
                         ["int64_value", "string_value", "int64_value", "boolean_tensor"])
        self.assertEqual(reply.observation[0].int64_value, 2 * 112 * 208 * 256)
        self.assertTrue(reply.observation[1].string_value.startswith(
            "for m in 112 : L0  <<<<<< cursor (line 0 )\n"))
        self.assertEqual(list(reply.observation[3].boolean_tensor.shape), [7])

    def test_step_without_actions_only_observes(self):
        session = self.start().session_id
        reply = self.stub.Step(pb.StepRequest(
            session_id=session, observation_space=[OBS["loop_tree"], OBS["flop_count"]]),
            timeout=30)
        self.assertTrue(reply.action_had_no_effect)
        self.assertFalse(reply.end_of_session)
        self.assertFalse(reply.HasField("new_action_space"))
        self.assertEqual(len(reply.observation), 2)
        self.assertEqual(reply.observation[1].int64_value, 2 * 112 * 208 * 256)
        # Actions by index (CompilerGym's way) and by name; no_effect is the AND over actions.
        reply = self.stub.Step(pb.StepRequest(session_id=session, action=[
            pb.Event(int64_value=0), pb.Event(string_value="split_4")]), timeout=30)
        self.assertFalse(reply.action_had_no_effect)
        self.assertEqual(len(reply.observation), 0)
        reply = self.stub.Step(pb.StepRequest(session_id=session, action=[
            pb.Event(string_value="up")]), timeout=30)
        self.assertTrue(reply.action_had_no_effect)

    def test_status_codes(self):
        session = self.start().session_id
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, "Session not found: 987654",
                              self.stub.Step, pb.StepRequest(session_id=987654))
        self.assert_rpc_error(grpc.StatusCode.NOT_FOUND, "Session not found: 987654",
                              self.stub.ForkSession, pb.ForkSessionRequest(session_id=987654))
        self.assert_rpc_error(
            grpc.StatusCode.INVALID_ARGUMENT, "Unknown parameter: nope",
            self.stub.SendSessionParameter, pb.SendSessionParameterRequest(
                session_id=session, parameter=[pb.SessionParameter(key="nope", value="1")]))
        self.assert_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                              "Observation space index out of range: 99",
                              self.stub.Step, pb.StepRequest(session_id=session,
                                                             observation_space=[99]))
        self.assert_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                              "Unknown action 'split_3' for action space loop_tool",
                              self.stub.Step, pb.StepRequest(
                                  session_id=session, action=[pb.Event(string_value="split_3")]))
        self.assert_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                              "Action index 17 is out of range for action space loop_tool (0..16)",
                              self.stub.Step, pb.StepRequest(
                                  session_id=session, action=[pb.Event(int64_value=17)]))
        self.assert_rpc_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "An action must be an Event with int64_value (the index in the action space), "
            "string_value (the action's name) or, in loop_nest, int64_tensor (transformation, "
            "level, parameter)",
            self.stub.Step, pb.StepRequest(session_id=session,
                                           action=[pb.Event(double_value=1.0)]))
        self.assert_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                              "No benchmark URI set for StartSession()",
                              self.stub.StartSession, pb.StartSessionRequest())

    def test_end_session(self):
        a = self.start().session_id
        self.start()
        remaining = self.stub.EndSession(pb.EndSessionRequest(session_id=555555),
                                         timeout=30).remaining_sessions
        self.assertGreaterEqual(remaining, 2)  # unknown id: OK, and the live count
        self.assertEqual(self.stub.EndSession(pb.EndSessionRequest(session_id=a),
                                              timeout=30).remaining_sessions, remaining - 1)
        self.assertEqual(self.stub.EndSession(pb.EndSessionRequest(session_id=a),
                                              timeout=30).remaining_sessions, remaining - 1)

    def test_fork_session(self):
        parent = self.start().session_id
        child = self.stub.ForkSession(pb.ForkSessionRequest(session_id=parent),
                                      timeout=30).session_id
        self.addCleanup(self.stub.EndSession, pb.EndSessionRequest(session_id=child))
        self.assertNotEqual(child, parent)
        self.stub.Step(pb.StepRequest(session_id=child, action=[pb.Event(string_value="split_4")]),
                       timeout=30)
        trees = [self.stub.Step(pb.StepRequest(session_id=s, observation_space=[OBS["loop_tree"]]),
                                timeout=30).observation[0].string_value for s in (parent, child)]
        self.assertTrue(trees[0].startswith("for m in 112 : L0"))
        self.assertTrue(trees[1].startswith("for m in 28 : L0"))

    def test_health_check(self):
        check = self.channel.unary_unary("/grpc.health.v1.Health/Check",
                                         request_serializer=None, response_deserializer=None)
        self.assertEqual(check(b"", timeout=30), b"\x08\x01")  # status: SERVING
        name = b"compiler_gym.CompilerGymService"
        request = b"\x0a" + bytes([len(name)]) + name  # service (1) = the service's full name
        self.assertEqual(check(request, timeout=30), b"\x08\x01")

    def test_server_reflection(self):
        info = self.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            request_serializer=None, response_deserializer=None)
        list_services = b"\x3a\x00"  # list_services (7) = ""
        symbol = b"compiler_gym.CompilerGymService"
        file_containing_symbol = b"\x22" + bytes([len(symbol)]) + symbol  # field 4
        responses = list(info(iter([list_services, file_containing_symbol]), timeout=30))
        self.assertEqual(len(responses), 2)
        self.assertIn(b"compiler_gym.CompilerGymService", responses[0])

        # ServerReflectionResponse.list_services_response (6) -> service (1) -> name (1)
        listing = dict(decode_fields(responses[0]))[6]
        names = {dict(decode_fields(s))[1].decode() for _, s in decode_fields(listing)}
        self.assertEqual(names, {"compiler_gym.CompilerGymService", "grpc.health.v1.Health",
                                 "grpc.reflection.v1alpha.ServerReflection"})

        # file_descriptor_response (4) -> file_descriptor_proto (1): our .proto, all 8 RPCs.
        files = [v for n, v in decode_fields(dict(decode_fields(responses[1]))[4]) if n == 1]
        descriptors = [descriptor_pb2.FileDescriptorProto.FromString(f) for f in files]
        ours = [d for d in descriptors if d.name == "proto/compiler_gym_service.proto"]
        self.assertEqual(len(ours), 1)
        self.assertEqual(ours[0].package, "compiler_gym")
        self.assertEqual([m.name for m in ours[0].service[0].method],
                         ["GetVersion", "GetSpaces", "StartSession", "ForkSession", "EndSession",
                          "Step", "AddBenchmark", "SendSessionParameter"])


class ShutdownTest(unittest.TestCase):

    def test_sigterm_exits_zero(self):
        server = LocalServer(SERVER)
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.CompilerGymServiceStub(channel)
            session = stub.StartSession(pb.StartSessionRequest(benchmark=pb.Benchmark(uri=MM)),
                                        timeout=30).session_id
            self.assertGreaterEqual(session, 0)  # ids are random, non-negative
            # The channel stays open: an idle client connection must not hold up the drain.
            started = time.monotonic()
            self.assertEqual(server.close(), 0)  # with a session still open
            self.assertLess(time.monotonic() - started, 2.0)
        self.assertEqual(server.close(), 0)  # idempotent
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.CompilerGymServiceStub(channel)
            with self.assertRaises(grpc.RpcError) as caught:
                stub.GetSpaces(pb.GetSpacesRequest(), timeout=5)
            self.assertEqual(caught.exception.code(), grpc.StatusCode.UNAVAILABLE)

if __name__ == "__main__":
    unittest.main()
