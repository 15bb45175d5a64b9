"""A robot client for LeRobot's policy server (`lerobot.async_inference.policy_server`), speaking its gRPC
protocol with LeRobot's own messages: `Ready`, `SendPolicyInstructions` (a pickled `RemotePolicyConfig`),
`SendObservations` (a pickled `TimedObservation` streamed by `send_bytes_in_chunks`) and `GetActions` (a
pickled `list[TimedAction]`, or `Empty` when the server had no observation to run).

LeRobot's own `RobotClient` builds and drives a robot from its config, and importing its module
reconfigures the root logger and writes a `logs/` folder into the working directory; the harness drives
its own arm, so it speaks the protocol here and leaves the queue to `async_policy`.
"""

from __future__ import annotations

import pickle  # nosec: LeRobot's protocol is pickled objects, exchanged with a server the user runs
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessInputError, RobotFault

CONNECT_TIMEOUT_S = 5.0          # Ready: a server that is listening answers at once
INSTRUCTIONS_TIMEOUT_S = 300.0   # SendPolicyInstructions: the server loads the checkpoint onto its device
ANSWER_TIMEOUT_S = 10.0          # SendObservations + GetActions: inference of one chunk, with room for a slow one


class PolicyServerLost(RobotFault):
    """The policy server stopped answering mid-trial (an RPC failed, or it sent no actions when it had an
    observation to run): the trial is voided as robot I/O and the run pauses, resumable."""


@dataclass(frozen=True)
class ServerAddress:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> ServerAddress:
        """`HOST:PORT` (`[::1]:8080` for an IPv6 address); ValueError says what is wrong."""
        host, sep, port_text = text.strip().rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port_text.isdigit():
            raise ValueError(f"'{text}' is not HOST:PORT (e.g. 127.0.0.1:8080)")
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise ValueError(f"'{text}': the port must be within 1..65535")
        return cls(host, port)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _rpc_problem(exc: Any) -> str:
    """A gRPC error in one line: its status code and the first line of its details."""
    code = exc.code().name if hasattr(exc, "code") and exc.code() is not None else type(exc).__name__
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{code}: {(str(details or '').strip().splitlines() or [''])[0][:160]}"


class PolicyServerClient:
    """One gRPC channel to a policy server; every call has a deadline, and a failure is typed."""

    def __init__(self, address: ServerAddress, fps: int, answer_timeout_s: float = ANSWER_TIMEOUT_S,
                 camera_names: dict[str, str] | None = None) -> None:
        """`camera_names`: robot camera -> the policy's name for it, applied to each observation sent (LeRobot
        0.6.1's server looks an image up under the policy's name before its rename step runs)."""
        import grpc
        from lerobot.transport import services_pb2, services_pb2_grpc
        from lerobot.transport.utils import grpc_channel_options

        self.address = address
        self.answer_timeout_s = answer_timeout_s
        self._grpc = grpc
        self._pb2 = services_pb2
        # LeRobot's channel options (message sizes, retries on UNAVAILABLE with backoff from one control period)
        self._channel = grpc.insecure_channel(str(address), grpc_channel_options(initial_backoff=f"{1 / fps:.4f}s"))
        self._stub = services_pb2_grpc.AsyncInferenceStub(self._channel)
        self._pending: Any | None = None   # the GetActions call in progress, which `cancel` abandons
        self._camera_names = camera_names or {}

    def connect(self, policy_config: Any) -> None:
        """Handshake and policy instructions (the server loads the policy), before anything is locked: a server
        that is not there, or cannot load the policy, is bad input (one line, exit 2)."""
        try:
            self._stub.Ready(self._pb2.Empty(), timeout=CONNECT_TIMEOUT_S)
        except self._grpc.RpcError as exc:
            raise HarnessInputError(None, "--policy-server", f"nothing answers at {self.address} "
                                                             f"({_rpc_problem(exc)})") from None
        setup = self._pb2.PolicySetup(data=pickle.dumps(policy_config))
        try:
            self._stub.SendPolicyInstructions(setup, timeout=INSTRUCTIONS_TIMEOUT_S)
        except self._grpc.RpcError as exc:
            raise HarnessInputError(None, "--policy-server", f"the policy server at {self.address} could not load "
                                                             f"the policy ({_rpc_problem(exc)})") from None

    def ready(self) -> None:
        """A new episode: the server forgets the timesteps it predicted and any queued observation."""
        self._call("Ready", lambda: self._stub.Ready(self._pb2.Empty(), timeout=self.answer_timeout_s))

    def send_observation(self, observation: Any) -> None:
        """One `TimedObservation`, pickled and streamed in LeRobot's chunks."""
        import dataclasses

        from lerobot.transport.utils import send_bytes_in_chunks

        if self._camera_names:
            raw = {self._camera_names.get(k, k): v for k, v in observation.get_observation().items()}
            observation = dataclasses.replace(observation, observation=raw)
        data = pickle.dumps(observation)
        self._call("SendObservations", lambda: self._stub.SendObservations(
            send_bytes_in_chunks(data, self._pb2.Observation, log_prefix="[harness] Observation", silent=True),
            timeout=self.answer_timeout_s))

    def get_actions(self) -> list[Any] | None:
        """The chunk for the observation the server holds (`list[TimedAction]`), or None for `Empty` (also when
        `cancel` abandoned the call)."""
        future = self._stub.GetActions.future(self._pb2.Empty(), timeout=self.answer_timeout_s)
        self._pending = future
        try:
            reply = self._call("GetActions", future.result)
        except PolicyServerLost:
            if future.cancelled():
                return None
            raise
        except self._grpc.FutureCancelledError:
            return None
        finally:
            self._pending = None
        if not reply.data:
            return None
        return pickle.loads(reply.data)  # nosec: the server the user started answers in LeRobot's pickles

    def cancel(self) -> None:
        """Abandon the `GetActions` call in progress, from another thread: a wall-time receiver stops at the end
        of an episode without waiting out the server's observation timeout."""
        pending = self._pending
        if pending is not None:
            pending.cancel()

    def _call(self, name: str, call: Any) -> Any:
        try:
            return call()
        except self._grpc.RpcError as exc:
            raise PolicyServerLost(f"policy server {self.address} stopped answering ({name} {_rpc_problem(exc)})") \
                from None

    def close(self) -> None:
        self._channel.close()
