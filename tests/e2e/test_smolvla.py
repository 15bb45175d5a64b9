"""SmolVLA end to end without the Hugging Face hub: `harness smolvla-backbone` makes a tiny SmolVLM2-architecture
backbone and a SmolVLA base on it, `lerobot-train` fine-tunes it on `harness collect` demonstrations with the
card's rename map and empty camera, and the result loads through LeRobot's factory with the network off and
runs on the simulated arm: synchronously, with LeRobot's Real-Time Chunking, and in LeRobot's policy server."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest

import harness.sim  # noqa: F401  (headless GL before mujoco)
from harness.cli import main
from harness.models.protocol import JOINT_NAMES
from harness.models.scoresheet import load_scoresheet
from tests.helpers import REPO, short_protocol_copy, small_protocol_copy
from tests.policy_server import PolicyServerProcess, free_port

# quick tests import LeRobot's policies; slow tests share a fixture built in 20 s+ (tests/conftest.py)
pytestmark = [pytest.mark.lerobot_policies, pytest.mark.shared_fixture]

TASK = "Pick up the cube and place it in the bowl."
SIZE = (128, 96)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, harness_cli) -> Path:
    """Backbone and base (the harness command), two collected episodes, two training steps (LeRobot's own)."""
    from harness.app.collect_command import CollectRequest, collect
    from harness.data.acceptance import AcceptMode
    from harness.data.dataset_card import rename_map_for_smolvla

    root = tmp_path_factory.mktemp("smolvla")
    assert main(["smolvla-backbone", str(root / "tiny"), "--protocol", str(REPO / "tests/data/small.yaml"),
                 "--camera-size", f"{SIZE[0]}x{SIZE[1]}"]) == 0
    demos = root / "demos"
    result = collect(CollectRequest(protocol=REPO / "tests/data/small.yaml", policy="expert", episodes=2, output=demos,
                                    accept=AcceptMode.STRICT, image_size=SIZE), progress=lambda line: None)
    assert result.accepted == 2
    splits = json.loads((demos / "meta/splits.json").read_text())
    out = root / "train"
    command = [   # the card's SmolVLA command's arguments, our base for lerobot/smolvla_base, toy-sized
        f"--policy.path={root / 'tiny/smolvla_base'}",
        "--dataset.repo_id=local/demos", f"--dataset.root={demos}", f"--dataset.episodes={json.dumps(splits['train'])}",
        "--policy.push_to_hub=false", "--wandb.enable=false",
        f"--rename_map={json.dumps(rename_map_for_smolvla(['observation.images.top', 'observation.images.wrist']))}",
        "--policy.empty_cameras=1", "--dataset.video_backend=pyav", "--policy.device=cpu", "--steps=2",
        "--batch_size=2", "--save_freq=2", "--num_workers=0", f"--output_dir={out}",
    ]
    done = harness_cli.run(command, module="lerobot.scripts.lerobot_train", capture_output=True, text=True,
                           timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})   # forked: it trains as a fresh one
    assert done.returncode == 0, done.stderr[-2000:]
    return out / "checkpoints" / "last" / "pretrained_model"


def _observation() -> dict:
    return {**{f"{n}.pos": 0.0 for n in JOINT_NAMES},
            **{cam: np.zeros((SIZE[1], SIZE[0], 3), dtype=np.uint8) for cam in ("top", "wrist")}}


def test_the_backbone_knows_the_task_words_and_smolvlms_image_tokens(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoProcessor

    from harness.policies.smolvla_backbone import build_backbone, unknown_words

    folder = build_backbone(tmp_path / "vlm", [TASK])
    processor = AutoProcessor.from_pretrained(folder)
    ids = processor.tokenizer(TASK)["input_ids"]
    assert processor.tokenizer.unk_token_id not in ids and len(ids) == 11
    assert processor.tokenizer.fake_image_token_id != processor.tokenizer.global_image_token_id
    assert AutoConfig.from_pretrained(folder).model_type == "smolvlm"
    assert unknown_words(folder, "Pick up the red cube") == ["red"]
    assert main(["smolvla-backbone", str(tmp_path)]) == 2   # not empty: a trained policy may point at it


@pytest.mark.slow
def test_the_trained_smolvla_loads_through_lerobots_factory_with_the_network_off(trained: Path, monkeypatch) -> None:
    from harness.policies.lerobot_policy import LeRobotPolicy

    def no_network(*args, **kwargs):
        raise OSError("network is off in this test")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    policy = LeRobotPolicy(trained, task=TASK, device="cpu")
    try:
        assert policy.name.startswith("smolvla:")
        assert policy.camera_keys == ("top", "wrist") and policy.image_size == SIZE   # camera3, empty camera blank
        assert policy.rename_map == {"observation.images.top": "observation.images.camera1",
                                     "observation.images.wrist": "observation.images.camera2"}
        actions = [policy.select_action(_observation()) for _ in range(12)]
        assert all(np.isfinite(list(a.values())).all() for a in actions) and policy.chunk_switches == 2
    finally:
        policy.close()


def _run(protocol: Path, folder: Path, *extra: str) -> int:
    return main(["run", str(protocol), "--headless", "--no-video", "--scoresheet", str(folder / "s.yaml"),
                 "--runs-dir", str(folder / "runs"), *extra])


def _short_protocol(folder: Path, seconds: float = 1.0) -> Path:
    return short_protocol_copy(folder, seconds)


@pytest.mark.slow
def test_one_trial_synchronously(trained: Path, tmp_path: Path) -> None:
    protocol = _short_protocol(tmp_path)
    assert _run(protocol, tmp_path, "--policy", str(trained), "--max-trials", "1") == 0
    sheet = load_scoresheet(tmp_path / "s.yaml")
    assert sheet.locked.task == TASK and sheet.locked.inference is not None
    assert sheet.locked.inference.engine == "sync"
    loop = sheet.attempts[0].loop
    assert loop.steps == 30 and loop.chunk_switches == 3 and loop.policy_latency_ms_max > 0
    assert loop.inference_ms_p50 is not None and loop.inference_ms_p50 > loop.policy_latency_ms_p50   # per chunk


@pytest.mark.slow
def test_one_trial_with_lerobots_rtc_records_what_the_arm_experienced(trained: Path, tmp_path: Path) -> None:
    """100 ms per inference at 30 Hz: every chunk lands 3 steps after its observation, its first 3 actions
    dropped (LeRobot's ActionQueue); the arm waits only for the first (3 underruns), later chunks start with 5
    of 10 actions queued, and RTC is told of the 3-step delay from the second chunk on."""
    protocol = _short_protocol(tmp_path)
    assert _run(protocol, tmp_path, "--policy", str(trained), "--inference", "rtc", "--latency-ms", "100",
                "--max-trials", "1") == 0
    sheet = load_scoresheet(tmp_path / "s.yaml")
    inference = sheet.locked.inference
    assert inference is not None and (inference.engine, inference.execution_horizon, inference.max_guidance_weight,
                                      inference.attention_schedule, inference.queue_threshold) == (
        "rtc", 10, 10.0, "LINEAR", 5)
    loop = sheet.attempts[0].loop
    assert loop.steps == 30 and loop.queue_underruns == 3 and loop.rtc_delay_steps_max == 3
    assert loop.rtc_delay_steps_p50 == 3   # told 0 for the first chunk only
    assert loop.obs_to_action_ms_p50 == loop.obs_to_action_ms_max == 100.0
    assert loop.obs_to_action_clock == "simulated"   # the arm waited in the simulator's time
    from harness.reports.latency import experience_text

    assert experience_text(sheet) == ("RTC over 1 trial: observation to action p50 100 ms, max 100 ms (simulated "
                                      "time); 6 chunk switches per trial; 3 underruns in 30 steps; RTC's inference "
                                      "delay p50 3 steps, max 3 steps of its inpainting horizon.")
    assert loop.chunk_switches == 6   # steps 3, 8, 13, 18, 23, 28: each chunk runs 5 actions before the next starts

    before = (tmp_path / "s.yaml").read_bytes()
    for extra in (["--rtc-execution-horizon", "5"], ["--rtc-queue-threshold", "2"], ["--inference", "sync"]):
        assert _run(protocol, tmp_path, "--resume", *extra) == 2
    assert (tmp_path / "s.yaml").read_bytes() == before


@pytest.mark.parametrize(("extra", "flag"), [
    (["--rtc-execution-horizon", "4"], "--rtc-execution-horizon"),           # without --inference rtc
    (["--inference", "rtc", "--rtc-execution-horizon", "11"], "--rtc-execution-horizon"),   # chunk of 10
    (["--inference", "rtc", "--rtc-queue-threshold", "10"], "--rtc-queue-threshold"),
])
def test_bad_rtc_settings_are_one_line_before_anything_is_written(tmp_path: Path, capsys, extra: list[str],
                                                                  flag: str) -> None:
    protocol = small_protocol_copy(tmp_path)
    folder = tmp_path / "policy"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"type": "smolvla", "chunk_size": 10}))
    assert _run(protocol, tmp_path, "--policy", str(folder), *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0]
    assert not (tmp_path / "s.yaml").exists() and not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_one_trial_in_lerobots_policy_server(trained: Path, tmp_path: Path) -> None:
    protocol = _short_protocol(tmp_path)
    server = PolicyServerProcess(free_port(), tmp_path / "server").start()
    try:
        code = _run(protocol, tmp_path, "--policy", str(trained), "--policy-server", server.address,
                    "--max-trials", "1")
        assert code == 0, "".join(server.lines[-30:])
    finally:
        server.stop()
    sheet = load_scoresheet(tmp_path / "s.yaml")
    assert sheet.locked.inference is not None and sheet.locked.inference.engine == "async"
    assert sheet.locked.inference.actions_per_chunk == 10
    loop = sheet.attempts[0].loop
    assert sheet.attempts[0].outcome != "void" and loop.obs_to_action_ms_p50 is not None
    assert loop.queue_underruns is not None and loop.queue_underruns >= 1


@pytest.mark.slow
@pytest.mark.desk
def test_one_rehearsed_real_arm_trial_with_lerobots_rtc_in_wall_time(trained: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`harness rehearse --inference rtc`: the emulated arm with simulated cameras, the paced loop popping RTC's
    queue while LeRobot's RTC runs on its inference thread; the trial records, in wall time, what its arm saw;
    a resume asking for another RTC setting is refused before anything connects."""
    from tests.realtime.test_rehearse import _protocol

    monkeypatch.chdir(tmp_path)
    protocol = _protocol(tmp_path)
    code = main(["rehearse", str(protocol), "--policy", str(trained), "--operator", "scripted", "--max-trials", "1",
                 "--inference", "rtc", "--rehearsal-dir", "desk"])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    assert "--inference=rtc" in out   # the run command the rehearsal printed
    (path,) = (tmp_path / "scoresheets").glob("*.yaml")
    sheet = load_scoresheet(path)
    assert sheet.locked.robot == "so101" and sheet.locked.inference is not None
    assert sheet.locked.inference.engine == "rtc" and sheet.locked.inference.queue_threshold == 5
    (attempt,) = sheet.attempts
    loop = attempt.loop
    period_ms = 1000 / 30
    assert attempt.outcome != "void" and loop.steps >= 40 and loop.realtime is not None   # ~1.5 s of 30 Hz
    assert loop.obs_to_action_clock == "wall"
    assert loop.obs_to_action_ms_p50 is not None and loop.obs_to_action_ms_max is not None
    assert 0 < loop.obs_to_action_ms_p50 <= loop.obs_to_action_ms_max < 5000
    assert loop.chunk_switches is not None and loop.chunk_switches >= 3   # a chunk of 10, refilled at 5
    assert loop.queue_underruns is not None and 1 <= loop.queue_underruns < loop.steps   # the arm waits for chunk 1
    assert loop.rtc_delay_steps_p50 is not None and loop.rtc_delay_steps_max is not None
    assert 0 <= loop.rtc_delay_steps_p50 <= loop.rtc_delay_steps_max
    assert loop.rtc_delay_steps_max <= loop.obs_to_action_ms_max / period_ms + 1   # told: the latency, in steps
    from harness.reports.latency import experience_text, latency_text

    assert "Real-Time Chunking on a thread beside the paced arm, in wall time: execution horizon 10" in latency_text(
        sheet)
    said = experience_text(sheet)
    assert said is not None and said.startswith("RTC over 1 trial: observation to action p50")
    assert "(wall time)" in said and f"{loop.queue_underruns} underruns in {loop.steps} steps" in said

    before = path.read_bytes()
    for extra in (["--rtc-execution-horizon", "5"], ["--rtc-queue-threshold", "2"], ["--inference", "sync"]):
        assert main(["run", str(protocol), "--headless", "--scoresheet", str(path), "--resume", *extra]) == 2
    assert path.read_bytes() == before


@pytest.mark.slow
def test_act_against_smolvla_under_each_latency_condition_in_one_sweep(trained: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's comparison at toy size, one command: a toy ACT and the tiny SmolVLA on one protocol, lock-step,
    at their own measured latency, with RTC (not applicable to ACT: reported so, not run) and served by LeRobot's
    policy server (started by the sweep); every other cell scored, and the report pairs the two under each
    condition and shows the latency each arm saw."""
    import yaml

    from tests.tiny_policy import save_tiny_act

    act = save_tiny_act(tmp_path / "act")
    protocol = short_protocol_copy(tmp_path, seconds=1.0, trials=1)   # the wiring, not a result: one trial a cell
    spec = tmp_path / "cmp.yaml"
    conditions = [{}, {"latency": "measured"}, {"inference": "rtc", "latency": "measured"}, {"policy_server": "local"}]
    spec.write_text(yaml.safe_dump({"name": "cmp", "checkpoints": [str(act), str(trained)],
                                    "protocols": [protocol.name], "workers": 1, "conditions": conditions}))
    sheets = tmp_path / "sheets"
    assert main(["sweep", str(spec), "--scoresheets-dir", str(sheets), "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert out.count("not applicable (no Real-Time Chunking in this policy") == 1, out
    cells = {p.stem: load_scoresheet(p) for p in (sheets / "cmp").glob("*.yaml")}
    assert len(cells) == 7 and all(s.complete and len(s.scored_attempts()) == 1 for s in cells.values())
    engines = sorted((s.locked.policy.ref == str(act), s.locked.inference.engine if s.locked.inference else "sync")
                     for s in cells.values())
    assert engines == [(False, "async"), (False, "rtc"), (False, "sync"), (False, "sync"),
                       (True, "async"), (True, "sync"), (True, "sync")]
    (rtc,) = [s for s in cells.values() if s.inference_engine == "rtc"]
    for attempt in rtc.attempts:
        loop = attempt.loop
        assert loop.obs_to_action_clock == "simulated" and loop.rtc_delay_steps_max is not None
        assert loop.obs_to_action_ms_p50 is not None and loop.obs_to_action_ms_p50 > 0   # its own measured time
        assert loop.inference_ms_p50 is not None and loop.inference_ms_p50 > 0
    report = (sheets / "cmp" / "report.md").read_text()
    assert "not applicable" in report and "obs-to-action p50 / max ms" in report and "RTC delay" in report
    paired = report.split("Against the baseline")[1].split("\n#")[0]
    assert paired.count("paired") >= 1 and all(c in paired for c in ("default", "latency=measured",
                                                                     "policy_server=local"))
