"""LeRobot's Real-Time Chunking on a paced real arm (`harness run --robot so101 --inference rtc`): RTC's queue and
inference thread in wall time (`policies.inference.rtc_wall`), exact with a manual clock and the inference driven
step by step, then on its own thread: started with the episode, joined when it ends, its failure the loop's."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch

from harness.policies.inference.rtc_policy import RtcSettings
from harness.policies.inference.rtc_wall import WallClockRtc
from harness.run.clock import ManualClock
from tests.helpers import wait_until

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

PERIOD = 1 / 30
SETTINGS = RtcSettings(execution_horizon=5, max_guidance_weight=10.0, attention_schedule="LINEAR", queue_threshold=5)


class ScriptedCall:
    """A policy whose k-th chunk is 100k, 100k+1, ..., 100k+9 in every joint, each inference taking `took_s` of
    the manual clock; it records the delay RTC told it and the left-over it was given."""

    def __init__(self, clock: ManualClock, took_s: float) -> None:
        self.clock = clock
        self.took_s = took_s
        self.calls: list[tuple[int, Any]] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def infer(self, observation: dict[str, Any], inference_delay: int, prev: Any) -> tuple[Any, Any]:
        self.calls.append((inference_delay, None if prev is None else prev.clone()))
        self.clock.advance(self.took_s)
        chunk = (100.0 * len(self.calls) + torch.arange(10.0)).unsqueeze(1).repeat(1, 6)
        return chunk.clone(), chunk


def _first_joint(action: list[float] | None) -> float | None:
    return None if action is None else action[0]


def test_each_chunk_lands_minus_the_steps_its_latency_spanned_and_rtc_is_told_the_worst_delay() -> None:
    """100 ms an inference at 30 Hz: the arm holds until chunk 1 lands (one underrun), which loses its first 3
    actions; at 5 queued the next inference starts from the newest observation, told the 3-step delay and given
    the queue's left-over to inpaint against; each chunk's latency counts from the loop's reading of its
    observation, in wall time."""
    clock = ManualClock()
    call = ScriptedCall(clock, took_s=0.1)
    rtc = WallClockRtc(call, SETTINGS, fps=30, now=clock.now, threaded=False)
    executed = []
    for step in range(5):
        executed.append(_first_joint(rtc.next_action({"step": step})))
        if step in (0, 2, 4):
            assert rtc.infer_once()
        else:
            assert not rtc.infer_once()   # queue above the threshold, or its observation already used
        clock.advance(PERIOD)
    assert executed == [None, 103.0, 104.0, 203.0, 204.0]
    assert [told for told, _ in call.calls] == [0, 3, 3]
    first_prev = call.calls[1][1]
    assert first_prev is not None and first_prev[:, 0].tolist() == [105.0, 106.0, 107.0, 108.0, 109.0]
    assert rtc.round_trips_ms == pytest.approx([100.0, 100.0, 100.0])
    assert (rtc.queue_underruns, rtc.chunk_switches, rtc.inference_delays) == (1, 3, [0, 3, 3])
    assert _first_joint(rtc.next_action({})) == 303.0
    assert rtc.clock == "wall"


def test_an_inference_waits_for_an_observation_it_has_not_used() -> None:
    """A chunk that lands with the queue still below the threshold (latency longer than the queue lasts) does not
    start another inference from the same observation; the next step's does."""
    clock = ManualClock()
    rtc = WallClockRtc(ScriptedCall(clock, took_s=0.3), SETTINGS, fps=30, now=clock.now, threaded=False)
    assert rtc.next_action({}) is None
    assert rtc.infer_once()                       # 9 steps of latency: 1 action left of 10
    assert not rtc.infer_once()
    assert rtc.next_action({}) is not None
    assert rtc.infer_once()


def test_a_new_episode_forgets_the_queue_the_records_and_the_policys_state() -> None:
    clock = ManualClock()
    call = ScriptedCall(clock, took_s=0.0)
    rtc = WallClockRtc(call, SETTINGS, fps=30, now=clock.now, threaded=False)
    rtc.next_action({})
    rtc.infer_once()
    assert rtc.next_action({}) is not None
    rtc.reset()
    assert (rtc.round_trips_ms, rtc.queue_underruns, rtc.chunk_switches, rtc.inference_delays) == ([], 0, 0, [])
    assert rtc.next_action({}) is None and call.resets == 2


class GatedCall(ScriptedCall):
    """Each inference waits until the test opens its gate; `raises` makes an inference fail."""

    def __init__(self, clock: ManualClock, raises: bool = False) -> None:
        super().__init__(clock, took_s=0.0)
        self.gate = threading.Event()
        self.started = threading.Event()
        self.raises = raises

    def infer(self, observation: dict[str, Any], inference_delay: int, prev: Any) -> tuple[Any, Any]:
        self.started.set()
        assert self.gate.wait(10), "the test never opened the gate"
        if self.raises:
            raise RuntimeError("CUDA out of memory")
        return super().infer(observation, inference_delay, prev)


def _inference_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "rtc-inference"]


def test_the_inference_thread_merges_chunks_beside_the_loop_and_is_joined_when_the_episode_ends() -> None:
    call = GatedCall(ManualClock())
    rtc = WallClockRtc(call, SETTINGS, fps=30, now=ManualClock().now)
    assert _inference_threads() == []
    assert rtc.next_action({}) is None                # the first step starts the thread; the arm holds
    assert len(_inference_threads()) == 1
    call.gate.set()
    wait_until(lambda: rtc.chunk_switches == 1, 10, "the first chunk merged on the inference thread")
    assert _first_joint(rtc.next_action({})) == 100.0
    rtc.end_episode()
    assert _inference_threads() == []


def test_a_chunk_still_computing_when_the_episode_ends_never_reaches_the_queue() -> None:
    call = GatedCall(ManualClock())
    rtc = WallClockRtc(call, SETTINGS, fps=30, now=ManualClock().now)
    rtc.next_action({})
    assert call.started.wait(10)
    episode = rtc._episode
    ending = threading.Thread(target=rtc.end_episode)
    ending.start()
    wait_until(lambda: rtc._episode > episode, 10, "end_episode began")
    call.gate.set()                                   # the inference in flight finishes after the episode ended
    ending.join(10)
    assert not ending.is_alive() and _inference_threads() == []
    assert rtc.chunk_switches == 0 and rtc.next_action({}) is None
    rtc.end_episode()


def test_an_inference_that_fails_on_its_thread_stops_the_next_control_step() -> None:
    call = GatedCall(ManualClock(), raises=True)
    rtc = WallClockRtc(call, SETTINGS, fps=30, now=ManualClock().now)
    rtc.next_action({})
    call.gate.set()
    wait_until(lambda: not _inference_threads(), 10, "the failed inference thread ended")
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        rtc.next_action({})
    rtc.end_episode()
