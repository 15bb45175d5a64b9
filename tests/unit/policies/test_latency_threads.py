"""Inference threads: set from the cores this process may use, never all of them, and recorded."""

from __future__ import annotations

import pytest
import torch

from harness.policies.lerobot_policy import LeRobotPolicy, ThreadPolicy, available_cores
from tests.tiny_policy import save_tiny_act

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)


def test_inference_gets_the_cores_nobody_else_needs() -> None:
    assert ThreadPolicy.for_cores(2, reserved=1).torch_threads == 1
    assert ThreadPolicy.for_cores(16, reserved=2).torch_threads == 14
    assert ThreadPolicy.for_cores(1, reserved=1).torch_threads == 1  # never zero
    assert ThreadPolicy.for_cores(8, reserved=2).record() == {"cores": 8, "reserved_cores": 2, "torch_threads": 6}


@pytest.mark.slow
def test_a_lerobot_policy_sets_torch_threads_and_says_how_many(tmp_path) -> None:
    ckpt = save_tiny_act(tmp_path / "tiny_act")
    before = torch.get_num_threads()
    try:
        policy = LeRobotPolicy(ckpt, task="t", device="cpu")
        assert policy.threads.cores == available_cores()
        assert torch.get_num_threads() == policy.threads.torch_threads == max(1, available_cores() - 1)
        pinned = LeRobotPolicy(ckpt, task="t", device="cpu", threads=ThreadPolicy.for_cores(4, reserved=1))
        assert torch.get_num_threads() == 3 and pinned.threads.record()["torch_threads"] == 3
        policy.close()
        pinned.close()
    finally:
        torch.set_num_threads(before)


def test_the_run_records_its_inference_threads_and_latency(tmp_path) -> None:
    from harness.app.sheet import resolve_sheet
    from harness.models.protocol import load_protocol
    from harness.models.run_request import RobotRequest, RunRequest
    from tests.helpers import small_protocol_copy

    ckpt = save_tiny_act(tmp_path / "tiny_act")
    protocol_path = small_protocol_copy(tmp_path)
    request = RunRequest(protocol=protocol_path, policies=(str(ckpt),), scoresheet=tmp_path / "s.yaml",
                         robot=RobotRequest(kind="sim", robot_id=None), latency=100.0)
    sheet, created = resolve_sheet(request, load_protocol(protocol_path), protocol_path, create=False)
    assert created
    assert sheet.settings.latency_ms == 100.0 and sheet.inference.engine == "sync"
    assert sheet.settings.stored()["inference"] == {"cores": available_cores(), "reserved_cores": 1,
                                           "torch_threads": max(1, available_cores() - 1)}
