"""LocalServer (process start, port.txt/pid.txt, startup failures, SIGTERM) and Connection
(RPC helpers, error mapping, the service config's retries through a fault-injecting proxy,
waiting for a restarted server, the datasets' replies, deadlines) against real looptool-server
processes."""

import os
import select
import tempfile
import threading
import unittest
from unittest import mock

import grpc

import grpc_proxy
from looptool import (Connection, LocalServer, LoopToolEnv, ServerStartError, ServiceError,
                      ServiceTransportError, SessionNotFound)
from looptool import connection as connection_lib
from looptool import server as server_lib
from looptool._proto import compiler_gym_service_pb2 as pb

SERVER = "service/looptool-server"
TEST_SERVER = "tests/faults/looptool-test-server"  # the server with fault injection linked in
MM = "benchmark://mm64_256_16_range-v0/mm112_208_256"
SERVICE_CONFIG = "proto/client_service_config.json"  # the repository's, what C++ reads too


class LocalServerTest(unittest.TestCase):

    def test_start_and_stop(self):
        server = LocalServer(SERVER)
        working_dir = server.working_dir
        with open(os.path.join(working_dir, "port.txt")) as f:
            self.assertEqual(f.read(), f"{server.port}\n")
        with open(os.path.join(working_dir, "pid.txt")) as f:
            self.assertEqual(f.read(), f"{server.pid}\n")
        self.assertEqual(server.pid, server.process.pid)
        self.assertGreater(server.port, 0)
        self.assertEqual(server.address, f"127.0.0.1:{server.port}")
        self.assertIn(f"looptool-server listening on 127.0.0.1:{server.port}", server.log())
        self.assertIsNone(server.returncode)
        self.assertEqual(server.close(), 0)
        self.assertEqual(server.returncode, 0)
        self.assertEqual(server.close(), 0)  # idempotent
        self.assertFalse(os.path.exists(working_dir))  # the temporary directory is removed

    def test_given_working_dir_is_kept_and_stale_port_file_ignored(self):
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "port.txt"), "w") as f:
                f.write("1\n")  # left over from an earlier server
            with LocalServer(SERVER, working_dir=tmp) as server:
                self.assertNotEqual(server.port, 1)
                with server.connect() as connection:
                    self.assertEqual(connection.get_version().service_version, "0.2.5")
            self.assertEqual(server.returncode, 0)
            self.assertTrue(os.path.exists(os.path.join(tmp, "server.log")))

    def test_startup_failures(self):
        with self.assertRaisesRegex(ServerStartError, "exited with status 1 before listening"):
            LocalServer(SERVER, flags=["--no_such_flag"])
        with self.assertRaisesRegex(ServerStartError, "not found or not executable"):
            LocalServer("no/such/looptool-server")

    def test_a_server_dies_with_its_parent_when_asked(self):
        # A parent process SIGKILLed: its die_with_parent server gets SIGTERM and exits.
        import signal
        import subprocess
        import sys
        with tempfile.TemporaryDirectory() as tmp:
            code = ("import sys, time\n"
                    "from looptool import LocalServer\n"
                    f"s = LocalServer({os.path.abspath(SERVER)!r}, working_dir={tmp!r}, "
                    "die_with_parent=True)\n"
                    "print(s.pid, flush=True)\n"
                    "time.sleep(60)\n")
            parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                      env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
            with parent.stdout:
                pid = int(parent.stdout.readline())
            server_fd = os.pidfd_open(pid)  # readable once the server has exited
            self.addCleanup(os.close, server_fd)
            self.assertEqual(select.select([server_fd], [], [], 0)[0], [])  # running
            parent.kill()
            parent.wait()
            if not select.select([server_fd], [], [], 30)[0]:
                os.kill(pid, signal.SIGKILL)
                self.fail("the server outlived its SIGKILLed parent")
            with open(os.path.join(tmp, "server.log")) as f:
                self.assertIn("signal 15", f.read())  # SIGTERM: it drained and exited

    def test_binary_from_environment(self):
        with mock.patch.dict(os.environ, {"LOOPTOOL_SERVER": os.path.abspath(SERVER)}):
            self.assertEqual(server_lib.default_binary(), os.path.abspath(SERVER))
            with LocalServer() as server:
                self.assertEqual(server.binary, os.path.abspath(SERVER))
        with mock.patch.dict(os.environ, {"LOOPTOOL_SERVER": ""}):
            self.assertEqual(server_lib.default_binary(), "service/looptool-server")


class ConnectionTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(SERVER)

    @classmethod
    def tearDownClass(cls):
        status = cls.server.close()
        if status != 0:
            raise AssertionError(f"looptool-server exited with status {status}")

    def connect(self, **kwargs):
        connection = Connection(self.server.address, **kwargs)
        self.addCleanup(connection.close)
        return connection

    def test_rpc_helpers(self):
        connection = self.connect()
        version = connection.get_version()
        self.assertEqual(version.service_version, "0.2.5")
        self.assertTrue(version.compiler_version.startswith("LoopTool"))
        spaces = connection.spaces()
        self.assertIs(connection.spaces(), spaces)  # fetched once
        self.assertEqual(list(spaces.action_spaces), ["loop_tool", "loop_tune", "loop_nest", "simple", "split"])
        flop_count = spaces.observation_space("flop_count").index
        reply = connection.start_session(MM, observation_spaces=[flop_count])
        self.assertEqual(reply.observation[0].int64_value, 2 * 112 * 208 * 256)
        session = reply.session_id
        self.assertFalse(connection.step(session, ["split_4", 0]).action_had_no_effect)
        fork = connection.fork_session(session)
        self.assertNotEqual(fork, session)
        self.assertGreaterEqual(fork, 0)
        self.assertEqual(connection.send_session_parameter(session, "looptool.benchmark", ""), MM)
        remaining = connection.end_session(fork)
        self.assertEqual(connection.end_session(session), remaining - 1)

    def test_add_benchmark(self):
        connection = self.connect()
        connection.add_benchmark("benchmark://user/rowsum", "O[r] += I[r,c]; r=64 c=48")
        with LoopToolEnv(connection, benchmark="benchmark://user/rowsum") as env:
            env.reset()
            self.assertEqual(env.observation["loop_tree"],
                             "for r in 64 : L0  <<<<<< cursor (line 0 )\n"
                             " for c in 48 : L1\n"
                             "  %1[r] <- add(%0)\n"
                             " %2[r] <- write(%1)\n")
        with self.assertRaises(ServiceError) as caught:
            connection.add_benchmark("benchmark://user/bad", "C[m,n] += A[m,k] * ; m=4 n=4 k=4")
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("Malformed program for benchmark benchmark://user/bad",
                      caught.exception.details)
        # A program sent with StartSession is added first.
        reply = connection.start_session("benchmark://user/gemv",
                                         program="y[m] += A[m,k] * x[k]; m=32 k=64")
        connection.end_session(reply.session_id)

    def test_benchmarks_are_per_client_and_survive_a_new_channel(self):
        mine, theirs = self.connect(), self.connect()
        mine.add_benchmark("benchmark://user/only-mine", "O[r] += I[r,c]; r=8 c=8")
        with self.assertRaises(ServiceError) as caught:
            theirs.start_session("benchmark://user/only-mine")
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        mine.reconnect()  # a new channel: the client id, not the connection, keys the cache
        reply = mine.start_session("benchmark://user/only-mine")
        mine.end_session(reply.session_id)

    def test_token(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as token:
            token.write("py-token\n")
            token.flush()
            with LocalServer(SERVER, flags=[f"--auth_token_file={token.name}"]) as server:
                with self.assertRaises(ServiceError) as caught:
                    Connection(server.address).get_version()
                self.assertEqual(caught.exception.code, grpc.StatusCode.UNAUTHENTICATED)
                with Connection(server.address, auth_token="py-token") as connection:
                    self.assertEqual(connection.get_version().service_version, "0.2.5")

    def test_errors(self):
        connection = self.connect()
        with self.assertRaises(SessionNotFound) as caught:
            connection.step(987654)
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(caught.exception.details, "Session not found: 987654")
        self.assertEqual(caught.exception.method, "Step")
        with self.assertRaises(ServiceError) as caught:
            connection.start_session("benchmark://mm64_256_16_range-v0/nonsense")
        self.assertNotIsInstance(caught.exception, SessionNotFound)
        self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
        session = connection.start_session(MM).session_id
        self.addCleanup(connection.end_session, session)
        with self.assertRaises(ServiceError) as caught:
            connection.send_session_parameter(session, "nope", "1")
        self.assertEqual(caught.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(caught.exception.details, "Unknown parameter: nope")

    def test_closed_connection_refuses_calls(self):
        connection = Connection(self.server.address)
        connection.acquire()
        connection.release()
        self.assertFalse(connection.closed)  # one user left
        connection.release()
        self.assertTrue(connection.closed)
        with self.assertRaises(RuntimeError):
            connection.get_version()
        with self.assertRaises(RuntimeError):
            connection.acquire()


class RetryPolicyTest(unittest.TestCase):
    """The channel's retries are the service config's: listed methods are sent again after
    UNAVAILABLE, Step never (not even one the server ran before the connection broke)."""

    @classmethod
    def setUpClass(cls):
        cls.server = LocalServer(SERVER)
        cls.proxy = grpc_proxy.Proxy(cls.server.address)
        cls.address = cls.proxy.address

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        cls.server.close()

    def setUp(self):
        self.proxy.reset()

    def test_the_service_config_is_the_repositorys(self):
        with open(SERVICE_CONFIG) as f:
            self.assertEqual(connection_lib.service_config(), f.read())
        options = dict(connection_lib.channel_options())
        self.assertEqual(options["grpc.service_config"], connection_lib.service_config())
        self.assertEqual(options["grpc.enable_retries"], 1)
        self.assertEqual(options["grpc.service_config_disable_resolution"], 1)
        self.assertEqual(connection_lib.retried_methods(),
                         set(grpc_proxy.METHODS) - {"Step"})

    def test_a_step_the_server_ran_is_not_sent_again(self):
        with LoopToolEnv(self.address, benchmark=MM, observation_space="loop_tree",
                         reward_space=None) as env, \
                LoopToolEnv(self.server.address, benchmark=MM, observation_space="loop_tree",
                            reward_space=None) as reference:
            env.reset()
            reference.reset()
            once, _, _, _ = reference.step("split_4")
            twice, _, _, _ = reference.step("split_4")
            self.proxy.fail_after["Step"] = 1
            _, _, done, info = env.step("split_4")
            self.assertTrue(done)  # the episode ends gracefully, as for any lost step
            self.assertEqual((info["error_type"], info["error_code"]),
                             ("ServiceTransportError", "UNAVAILABLE"))
            self.assertIsInstance(env.last_error, ServiceTransportError)
            self.assertEqual(self.proxy.calls["Step"], 1)
            # The session is still there, with split_4 applied exactly once.
            self.assertEqual(env.observation["loop_tree"], once)
            self.assertNotEqual(once, twice)
            # The raw call raises too, and the connection goes on working.
            self.proxy.fail_before["Step"] = 1
            with self.assertRaises(ServiceTransportError):
                env.connection.step(env.session_id, ["down"])
            self.assertEqual(self.proxy.calls["Step"], 3)
            self.assertEqual(env.observation["loop_tree"], once)

    def test_a_listed_method_is_sent_again(self):
        with Connection(self.address) as connection:
            self.proxy.fail_before["StartSession"] = 1
            first = connection.start_session(MM).session_id
            self.assertEqual(self.proxy.calls["StartSession"], 2)
            baseline = connection.end_session(first)
            # The server ran the call and the reply was lost: the retry carries the same request
            # id and gets the session the first attempt made; no orphan is left.
            self.proxy.fail_after["StartSession"] = 1
            session = connection.start_session(MM).session_id
            self.assertEqual(self.proxy.calls["StartSession"], 4)
            self.proxy.fail_after["ForkSession"] = 1
            fork = connection.fork_session(session)
            self.assertEqual(self.proxy.calls["ForkSession"], 2)
            self.assertNotEqual(fork, session)
            self.assertEqual(connection.end_session(fork), baseline + 1)
            self.assertEqual(connection.end_session(session), baseline)
            # maxAttempts 4: a method that fails every time is sent 4 times, then raises.
            self.proxy.fail_before["GetSpaces"] = 10
            with self.assertRaises(ServiceTransportError) as caught:
                connection.spaces()
            self.assertIn("injected before GetSpaces", caught.exception.details)
            self.assertEqual(self.proxy.calls["GetSpaces"], 4)

    def test_datasets_are_read_from_the_server(self):
        self.proxy.replies[("looptool.datasets", "")] = "mm-v0 3 1 Matmuls, three\nconv-v0 2\n"
        self.proxy.replies[("looptool.dataset_benchmarks", "mm-v0:test")] = (
            "benchmark://mm-v0/a\nbenchmark://mm-v0/b\n")
        with Connection(self.address) as connection:
            self.assertEqual(connection.datasets(), {"mm-v0": 3, "conv-v0": 2})
            self.assertEqual(list(connection.datasets()), ["mm-v0", "conv-v0"])  # its order
            self.assertEqual(connection.dataset_benchmarks("mm-v0", "test"),
                             ["benchmark://mm-v0/a", "benchmark://mm-v0/b"])
            connection.dataset_benchmarks("mm-v0", "test")
            connection.datasets()
            self.assertEqual(self.proxy.calls["SendSessionParameter"], 2)  # fetched once each
            for bad in ("", "mm v0", "mm:test", None):
                with self.assertRaisesRegex(ValueError, "dataset must be a dataset's name"):
                    connection.dataset_benchmarks(bad)
            with self.assertRaisesRegex(ValueError, "split must be one of all, train, test"):
                connection.dataset_benchmarks("mm-v0", "validation")
            self.assertEqual(self.proxy.calls["SendSessionParameter"], 2)  # none was sent
        for bad in ("mm-v0 three 1 Matmuls", "mm-v0"):
            self.proxy.replies[("looptool.datasets", "")] = f"{bad}\n"
            with Connection(self.address) as connection:
                with self.assertRaisesRegex(ServiceError, f"expected lines '<name> <size>', "
                                                          f"got '{bad}'"):
                    connection.datasets()


class ReconnectionTest(unittest.TestCase):

    def test_an_unreachable_server_is_unavailable(self):
        server = LocalServer(SERVER)
        address = server.address
        self.assertEqual(server.close(), 0)
        connection = Connection(address, connect_timeout=0.2)
        self.addCleanup(connection.close)
        with self.assertRaises(ServiceTransportError) as caught:
            connection.get_version()  # waits for a server, at most connect_timeout
        self.assertEqual(caught.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(caught.exception.details,
                         f"No server answered at {address} within 0.2 s")
        with self.assertRaises(ServiceTransportError) as caught:
            connection.step(1)  # waits the same way (it is never sent twice either way)
        self.assertEqual(caught.exception.details,
                         f"No server answered at {address} within 0.2 s")
        with self.assertRaises(ServiceTransportError) as caught:
            connection.call("Step", pb.StepRequest(session_id=1), wait_for_ready=False)
        self.assertIn("failed to connect", caught.exception.details)
        with self.assertRaisesRegex(ValueError, "connect_timeout must be positive"):
            Connection(address, connect_timeout=0)

    def test_a_call_waits_for_a_restarted_server(self):
        first = LocalServer(SERVER)
        port = first.port
        self.assertEqual(first.close(), 0)
        connection = Connection(first.address, connect_timeout=60)
        self.addCleanup(connection.close)
        with self.assertRaises(ServiceTransportError):
            connection.step(1)  # no server: the channel is failing
        # A call issued while no server runs waits for the one that comes up on the port.
        issued, result = threading.Event(), []

        def call():
            issued.set()
            result.append(connection.get_version().service_version)
        caller = threading.Thread(target=call)
        caller.start()
        issued.wait()
        second = LocalServer(SERVER, port=port)
        try:
            caller.join(timeout=60)
            self.assertEqual(result, ["0.2.5"])
        finally:
            connection.close()
            self.assertEqual(second.close(), 0)

    def test_same_connection_works_after_a_restart(self):
        first = LocalServer(SERVER)
        port = first.port
        connection = Connection(first.address)
        self.addCleanup(connection.close)
        session = connection.start_session(MM).session_id
        # Kill the first server outright (no drain to wait for), then restart it.
        first.process.kill()
        first.close()
        second = LocalServer(SERVER, port=port)
        self.addCleanup(second.close)
        # The same Connection object works again; the old session did not survive.
        self.assertEqual(connection.get_version().service_version, "0.2.5")
        with self.assertRaises(SessionNotFound):
            connection.step(session)
        connection.close()
        self.assertEqual(second.close(), 0)


class DeadlineTest(unittest.TestCase):

    def test_client_deadline(self):
        with LocalServer(TEST_SERVER, flags=["--eval_deadline=1",
                                        "--timing_budget_ms=1"]) as server:
            connection = server.connect(timeout=0.3)
            self.addCleanup(connection.close)
            # The setup's calls with room of their own (a loaded machine may take 0.3 s).
            session = connection.start_session(MM, timeout=30).session_id
            connection.send_session_parameter(session, "test.inject_fault", "hang", timeout=30)
            flops = connection.spaces(timeout=30).observation_space("flops").index
            with self.assertRaises(ServiceError) as caught:
                connection.step(session, observation_spaces=[flops])
            self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
            # The client's 0.3 s ran out (gRPC's message), not the server's 1 s ("the kernel
            # ran longer than 1 s; its worker was replaced").
            self.assertEqual(caught.exception.details, "Deadline Exceeded")
            # A per-call deadline overrides the connection's.
            reply = connection.step(session, observation_spaces=[flops], timeout=30)
            self.assertGreater(reply.observation[0].double_value, 0)
            connection.close()
        self.assertEqual(server.returncode, 0)


if __name__ == "__main__":
    unittest.main()
