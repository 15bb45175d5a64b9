"""`harness run --policy-server HOST:PORT`: LeRobot's asynchronous inference engine, its flags checked before
anything is locked, locked with the run, and held to on `--resume`.

The locked `inference` block then reads `{"engine": "async", "server", "actions_per_chunk",
"chunk_size_threshold", "aggregate_fn"}`; the run's settings carry the same values for the policy factory,
and on a resume the locked ones replace them, so a hand-edited settings block cannot move the server.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessInputError, StaleRunError
from harness.models.run_request import FLAG_OF_FIELD
from harness.models.run_settings import BuiltinPolicy, InferenceEngine, RobotKind
from harness.policies.hub import checkpoint_folder

if TYPE_CHECKING:
    from harness.models.run_request import RunRequest
    from harness.models.scoresheet import Scoresheet

# the queue settings: `InferenceRequest` field (and argparse destination) -> flag
QUEUE_FLAGS = {name: FLAG_OF_FIELD[f"inference.{name}"]
               for name in ("actions_per_chunk", "chunk_size_threshold", "aggregate_fn")}
ASYNC_FIELDS = ("server", *QUEUE_FLAGS)


def _queue_flags_given(request: RunRequest) -> list[str]:
    return [flag for name, flag in QUEUE_FLAGS.items() if getattr(request.inference, name) is not None]


def _server(text: str) -> str:
    from harness.policies.inference.async_client import ServerAddress

    try:
        return str(ServerAddress.parse(text))
    except ValueError as exc:
        raise HarnessInputError(None, "--policy-server", str(exc)) from None


def _refuse_combinations(request: RunRequest, policy_ref: str) -> None:
    if BuiltinPolicy.named(policy_ref) is not None:
        raise HarnessInputError(None, "--policy-server", f"the built-in '{policy_ref}' policy runs in the harness; "
                                                         "a policy server needs a LeRobot checkpoint folder")
    if request.inference.engine is not None:
        raise HarnessInputError(None, "--inference", "not with --policy-server, which is LeRobot's asynchronous "
                                                     "engine")
    if request.latency is not None:
        raise HarnessInputError(None, "--latency-ms", "not with --policy-server: the arm's latency is the server's "
                                                      "own measured round trip")
    _refuse_workers(request)


def _refuse_workers(request: RunRequest) -> None:
    if request.workers.count != 1 or request.workers.address:
        raise HarnessInputError(None, "--workers", "not with --policy-server: LeRobot's policy server serves one "
                                                   "client")


def async_record(request: RunRequest, policy_ref: str, robot: RobotKind) -> dict[str, Any] | None:
    """The locked `inference` block for a new sheet run with `--policy-server`, None without it; bad input is
    one line (exit 2), found before the server is asked anything."""
    asked = request.inference
    text = asked.policy_server
    if text is None:
        given = _queue_flags_given(request)
        if given:
            raise HarnessInputError(None, given[0], "only with --policy-server HOST:PORT")
        return None
    server = _server(text)
    _refuse_combinations(request, policy_ref)
    from lerobot.async_inference.configs import AGGREGATE_FUNCTIONS

    from harness.policies.inference.async_policy import DEFAULT_AGGREGATE, DEFAULT_THRESHOLD, default_actions_per_chunk

    actions = (asked.actions_per_chunk if asked.actions_per_chunk is not None
               else default_actions_per_chunk(checkpoint_folder(policy_ref)))
    if not 1 <= actions <= 10_000:
        raise HarnessInputError(None, "--actions-per-chunk", f"{actions}: must be within 1..10000")
    threshold = asked.chunk_size_threshold if asked.chunk_size_threshold is not None else DEFAULT_THRESHOLD
    if not (math.isfinite(threshold) and 0 <= threshold <= 1):
        raise HarnessInputError(None, "--chunk-size-threshold", f"{threshold}: must be within 0..1")
    aggregate = asked.aggregate_fn or DEFAULT_AGGREGATE
    if aggregate not in AGGREGATE_FUNCTIONS:
        raise HarnessInputError(None, "--aggregate-fn", f"'{aggregate}' is not one of LeRobot's: "
                                                        f"{', '.join(AGGREGATE_FUNCTIONS)}")
    return {"engine": InferenceEngine.ASYNC.value, "server": server, "actions_per_chunk": actions,
            "chunk_size_threshold": threshold, "aggregate_fn": aggregate}


def hold_to_locked_async(sheet: Scoresheet, request: RunRequest) -> None:
    """On a resume: asking for another server or queue setting is refused (not asking keeps the locked ones:
    the policy is built from the locked block, `Scoresheet.inference`)."""
    locked = sheet.locked.inference
    text = request.inference.policy_server
    given = _queue_flags_given(request)
    if locked is None or locked.engine is not InferenceEngine.ASYNC:
        if text is not None or given:
            raise StaleRunError(sheet.path, "locked.inference", f"this run's inference engine is "
                                                                f"{sheet.inference_engine}, not async "
                                                                "(--policy-server); start a new scoresheet")
        return
    asked = {"server": _server(text) if text is not None else None,
             **{name: getattr(request.inference, name) for name in QUEUE_FLAGS}}
    for name, value in asked.items():
        if value is not None and value != getattr(locked, name):
            flag = "--policy-server" if name == "server" else QUEUE_FLAGS[name]
            raise StaleRunError(sheet.path, "locked.inference", f"this run's {flag} is {getattr(locked, name)}, "
                                                                f"not {value}; start a new scoresheet to change it")
    _refuse_workers(request)
