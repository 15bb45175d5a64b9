"""`RunRequest`: every `harness run` flag is a field of the one typed request, and reaches sweeps and rehearsals.

The flags are enumerated from `harness run`'s own parser, so a flag added there without a `RUN_FLAGS` entry (or
without a sample value here) fails the first test, and one that a sweep condition or a rehearsal cannot carry
fails the others.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli import build_parser
from harness.errors import HarnessInputError
from harness.models.run_request import RUN_FLAGS, RunRequest
from tests.helpers import small_protocol_copy
from tests.realtime.test_rehearse import _protocol as desk_protocol

pytestmark = pytest.mark.lerobot_policies   # quick tests import LeRobot's policies (tests/conftest.py)

# one value unlike the default for every flag, as a person types it
SAMPLES: dict[str, list[str]] = {
    "resume": ["--resume"],
    "robot": ["--robot", "so101"],
    "port": ["--port", "/dev/ttyACM7"],
    "robot_id": ["--robot-id", "left_arm"],
    "camera": ["--camera", "top=0@1280x720"],
    "policy": ["--policy", "replay"],
    "rename_map": ["--rename-map", '{"top": "camera1"}'],
    "no_blind": ["--no-blind"],
    "render_profile": ["--render-profile", "full-v1"],
    "scoresheet": ["--scoresheet", "elsewhere.yaml"],
    "runs_dir": ["--runs-dir", "other_runs"],
    "headless": ["--headless"],
    "realtime": ["--realtime"],
    "video_fps": ["--video-fps", "5"],
    "video_size": ["--video-size", "160x120"],
    "video": ["--video", "all"],
    "no_video": ["--no-video"],
    "record_dataset": ["--record-dataset", "rollouts"],
    "record_size": ["--record-size", "64x48"],
    "record_codec": ["--record-codec", "hevc"],
    "record_fps": ["--record-fps", "15"],
    "bowl_calibration": ["--bowl-calibration", "bowl.yaml"],
    "trained_spot": ["--trained-spot", "spot.png"],
    "placement_tolerance": ["--placement-tolerance", "1,5"],
    "device": ["--device", "cpu"],
    "max_trials": ["--max-trials", "3"],
    "inject_dropout": ["--inject-dropout", "2:5"],
    "latency_ms": ["--latency-ms", "50"],
    "latency": ["--latency", "measured"],
    "latency_chunk_ms": ["--latency-chunk-ms", "480"],
    "inference": ["--inference", "rtc"],
    "policy_server": ["--policy-server", "127.0.0.1:9"],
    "actions_per_chunk": ["--actions-per-chunk", "7"],
    "chunk_size_threshold": ["--chunk-size-threshold", "0.3"],
    "aggregate_fn": ["--aggregate-fn", "latest_only"],
    "execution_horizon": ["--rtc-execution-horizon", "4"],
    "max_guidance_weight": ["--rtc-max-guidance-weight", "3"],
    "attention_schedule": ["--rtc-attention-schedule", "EXP"],
    "queue_threshold": ["--rtc-queue-threshold", "5"],
    "workers": ["--workers", "3"],
    "no_driver_worker": ["--no-driver-worker"],
    "address": ["--address", "127.0.0.1:6379"],
    "ray_dashboard": ["--ray-dashboard"],
}


def _run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _run_flags() -> list[str]:
    return [action.dest for action in _run_parser()._actions
            if not isinstance(action, argparse._HelpAction) and action.dest != "protocol"]


def _field(request: RunRequest, path: str) -> Any:
    value: Any = request
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _fields(request: RunRequest, dest: str) -> tuple[Any, ...]:
    return tuple(_field(request, path) for path in RUN_FLAGS[dest].fields)


def _parsed(dest: str) -> tuple[argparse.Namespace, RunRequest]:
    args = build_parser().parse_args(["run", "p.yaml", *SAMPLES[dest]])
    return args, RunRequest.from_flags(vars(args))


def test_every_run_flag_is_a_request_field_with_a_sample() -> None:
    flags = _run_flags()
    assert sorted(set(flags) - set(RUN_FLAGS)) == [], "flags of `harness run` that RunRequest does not know"
    assert sorted(set(RUN_FLAGS) - set(flags) - {"protocol"}) == [], "RUN_FLAGS entries that are no flag"
    assert sorted(set(flags) - set(SAMPLES)) == [], "flags without a sample value in this test"
    for dest in flags:
        spell = RUN_FLAGS[dest].flag
        assert spell in SAMPLES[dest], f"{dest}: RUN_FLAGS spells it {spell}"


@pytest.mark.parametrize("dest", sorted(SAMPLES))
def test_each_flag_changes_its_fields_of_the_request(dest: str) -> None:
    default = RunRequest.from_flags(vars(build_parser().parse_args(["run", "p.yaml"])))
    _, request = _parsed(dest)
    assert _fields(request, dest) != _fields(default, dest), f"{dest} did not reach the request"


def test_the_parsers_defaults_are_the_requests_defaults() -> None:
    """Each flag's default is its field's (typed back as a person would type it): `harness run p.yaml` asks for
    exactly `RunRequest(protocol=p.yaml)`, and shows as that line alone."""
    request = RunRequest.from_flags(vars(build_parser().parse_args(["run", "p.yaml"])))
    assert request == RunRequest(protocol=Path("p.yaml"))
    assert request.command_line() == ["run", "p.yaml"]


def _spelled_default(spec: Any) -> str | None:
    """Where a flag's help writes its field's default out by hand (a second definition), the words; else None."""
    default = spec.default
    if default in (None, False, "", []) or not spec.help:
        return None
    spellings = {str(default), *((f"{default:g}",) if isinstance(default, float) else ())}
    return next((f"default {text}" for text in spellings if f"default {text}" in spec.help), None)


def test_a_flags_help_shows_the_default_of_its_field_not_a_copy() -> None:
    """`--help` says a flag's default from the field (argparse's `%(default)s`), so changing the field's default
    changes the help with it; a copy in the text would go on naming the old one."""
    copied = {dest: said for dest, spec in RUN_FLAGS.items() if (said := _spelled_default(spec))}
    assert not copied, f"flags whose help spells their default by hand (write %(default)s): {copied}"
    text = " ".join(_run_help().split())   # as `harness run --help` prints it, unwrapped
    assert "(default 10)" in text and "(default 320x240)" in text and "(default runs/)" in text
    assert "(default 0.5,10)" in text and "(default 128x96:" in text and "(default h264:" in text


def _run_help() -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"].format_help()


@pytest.mark.parametrize("dest", sorted(SAMPLES))
def test_each_flag_goes_from_the_parser_to_the_request_to_the_line_shown_and_back(dest: str) -> None:
    """The `harness run` line a rehearsal or a twin shows is generated from the request: parsed again it asks for
    the same run, with the flag spelt as `--help` spells it."""
    _, request = _parsed(dest)
    shown = request.command_line()
    assert shown[:2] == ["run", "p.yaml"]
    assert any(word == RUN_FLAGS[dest].flag or word.startswith(RUN_FLAGS[dest].flag + "=") for word in shown), shown
    again = RunRequest.from_flags(vars(build_parser().parse_args(shown)))
    assert again == request, shown
    assert again.command_line() == shown


def test_a_request_with_many_flags_at_once_shows_a_line_that_asks_for_it_again() -> None:
    """Flags over nested parts and repeated ones together (a desk's run: robot, cameras, files, a comparison)."""
    words = [word for dest in sorted(SAMPLES) if dest not in ("latency", "video", "policy_server")
             for word in SAMPLES[dest]] + ["--policy", "expert", "--camera", "wrist=/dev/video2"]
    request = RunRequest.from_flags(vars(build_parser().parse_args(["run", "p.yaml", *words])))
    assert request.policies == ("replay", "expert") and len(request.robot.cameras) == 2
    assert RunRequest.from_flags(vars(build_parser().parse_args(request.command_line()))) == request


def test_a_request_is_frozen_and_crosses_to_a_ray_worker_as_it_is() -> None:
    _, request = _parsed("camera")
    with pytest.raises(Exception, match="frozen"):
        request.max_trials = 2   # type: ignore[misc]
    assert pickle.loads(pickle.dumps(request)) == request
    worker = request.updated(runs_dir=Path("/tmp/w"), evidence={"lanes": 0})
    assert worker.evidence.lanes == 0 and worker.robot.cameras == {"top": "0@1280x720"}
    assert request.evidence.lanes is None   # the original is untouched


@pytest.mark.parametrize(("flags", "flag"), [
    ({"video_fps": float("nan")}, "--video-fps"), ({"video_size": "0x0"}, "--video-size"),
    ({"inject_dropout": "abc"}, "--inject-dropout"), ({"rename_map": "[1, 2]"}, "--rename-map"),
    ({"max_trials": 0}, "--max-trials"), ({"workers": "many"}, "--workers"), ({"latency_ms": -5}, "--latency-ms"),
    ({"latency_ms": 5, "latency": "measured"}, "--latency"), ({"no_video": True, "video": "all"}, "--no-video"),
    ({"latency_chunk_ms": float("inf")}, "--latency-chunk-ms"),
    ({"latency_chunk_ms": 480, "latency": "measured"}, "--latency-chunk-ms"),
    ({"placement_tolerance": "nan,10"}, "--placement-tolerance"), ({"camera": ["top"]}, "--camera"),
    ({"video": "some"}, "--video"),
])
def test_bad_values_are_one_input_error_naming_the_flag(flags: dict[str, Any], flag: str) -> None:
    with pytest.raises(HarnessInputError) as err:
        RunRequest.from_flags({"protocol": "p.yaml", **flags})
    assert err.value.field == flag and err.value.exit_code == 2
    assert len(err.value.cli_message().splitlines()) == 1


def test_every_run_flag_reaches_a_sweep_cell(tmp_path: Path) -> None:
    """A flag the sweep does not decide itself is a condition; a cell's request carries it as `harness run`
    would; a flag the sweep decides is refused as a condition and set by the sweep."""
    from harness.app.sweep_command import cell_request, sheet_of
    from harness.models.sweep_spec import CONDITION_KEYS, SWEEP_OWNS, load_sweep

    protocol = small_protocol_copy(tmp_path)
    assert sorted({*CONDITION_KEYS, *SWEEP_OWNS}) == sorted({*_run_flags(), "protocol"})
    conditions = [{dest: vars(_parsed(dest)[0])[dest]} for dest in CONDITION_KEYS]
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"name": "all-flags", "checkpoints": ["expert"], "protocols": [protocol.name],
                                    "conditions": conditions, "workers": 2}))
    sweep = load_sweep(spec, tmp_path / "sheets")
    for cell in sweep.cells:
        (dest,) = cell.condition
        request = cell_request(sweep, cell, tmp_path / "runs", None, server=None)
        assert _fields(request, dest) == _fields(_parsed(dest)[1], dest), dest
        assert request.policy == "expert" and request.robot.kind == "sim" and request.headless
        assert request.scoresheet == sheet_of(sweep, cell) and request.runs_dir == tmp_path / "runs" / "all-flags"
        assert request.protocol == protocol
        served = dest == "policy_server"
        assert request.workers.on_ray is not served and request.workers.count == (1 if served else 2)
    for owned in SWEEP_OWNS:
        spec.write_text(yaml.safe_dump({"name": "x", "checkpoints": ["expert"], "protocols": [protocol.name],
                                        "conditions": [{owned: "x"}]}))
        with pytest.raises(HarnessInputError, match="conditions"):
            load_sweep(spec, tmp_path / "sheets")


def test_every_run_flag_reaches_a_rehearsal(tmp_path: Path) -> None:
    """`harness rehearse` takes every run flag it does not decide itself and hands it to its run; those it
    decides (the emulated desk's robot, port, cameras, files, scoresheet) are set by the rehearsal."""
    from harness.app.rehearse_command import REHEARSAL_OWNS, desk_request, plan_rehearsal, policy_cameras
    from tests.tiny_policy import save_tiny_act

    protocol = desk_protocol(tmp_path)
    save_tiny_act(tmp_path / "act", height=480, width=640)
    base = ["rehearse", str(protocol), "--policy", str(tmp_path / "act"), "--operator", "scripted",
            "--rehearsal-dir", str(tmp_path / "desk")]
    for dest in _run_flags():
        if dest in REHEARSAL_OWNS:
            if dest != "policy":   # the rehearsal's own --policy is a folder, passed on as the run's
                with pytest.raises((SystemExit, HarnessInputError)):   # (`--camera` abbreviates --camera-size)
                    plan_rehearsal(build_parser().parse_args([*base, *SAMPLES[dest]]))
            continue
        plan = plan_rehearsal(build_parser().parse_args([*base, *SAMPLES[dest]]))
        request = desk_request(plan, "/dev/pts/99", "sim:/tmp/cams.sock@640x480")
        assert _fields(request, dest) == _fields(_parsed(dest)[1], dest), dest
        assert request.robot.kind == "so101" and request.robot.port == "/dev/pts/99" and request.headless
        assert request.placement.bowl_calibration == plan.files.calibration
        assert request.placement.trained_spot == plan.files.trained_spot
        assert request.robot.cameras == dict.fromkeys(policy_cameras(tmp_path / "act"), "sim:/tmp/cams.sock@640x480")
        assert request.policy == str(tmp_path / "act") and request.scoresheet == plan.scoresheet
        # the `harness run` line the rehearsal shows asks for exactly the desk's run
        assert RunRequest.from_flags(vars(build_parser().parse_args(request.command_line()))) == request


def _measure_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["measure"]


def test_every_measure_flag_is_a_measure_request_field_with_the_same_default() -> None:
    """`harness measure` hands its handler a `MeasureRequest` (as a rehearsal does, building one directly): a
    flag the model does not know would be dropped, and a default that differs would measure otherwise."""
    from harness.models.measure_request import MeasureRequest

    parsed = vars(build_parser().parse_args(["measure", "runs/x", "--bowl-cm", "11.5"]))
    request = MeasureRequest.from_flags(parsed)
    default = MeasureRequest(inputs=("runs/x",), bowl_cm=11.5)
    dests = [a.dest for a in _measure_parser()._actions if not isinstance(a, argparse._HelpAction)]
    fields = {"json": "as_json"}
    assert sorted({fields.get(d, d) for d in dests}) == sorted(MeasureRequest.model_fields)
    for dest in dests:
        name = fields.get(dest, dest)
        value = getattr(request, name)
        assert value == getattr(default, name), f"--{dest.replace('_', '-')}: the parser's default is not the model's"


def test_a_rehearsal_measures_with_the_command_line_it_shows(tmp_path: Path) -> None:
    """The `harness measure` lines a rehearsal prints are what it runs: parsed, they give its request."""
    from harness.app.rehearse_command import RehearsalFiles, desk_measure, measure_command_line
    from harness.models.measure_request import MeasureRequest
    from harness.models.protocol import load_protocol

    protocol, files = load_protocol(desk_protocol(tmp_path)), RehearsalFiles(tmp_path / "desk")
    for inputs, calibrate in ((files.trained_spot, True), (tmp_path / "runs" / "desk", False)):
        request = desk_measure(protocol, files, inputs, calibrate)
        shown = build_parser().parse_args(measure_command_line(request))
        assert MeasureRequest.from_flags(vars(shown)) == request
        assert request.auto is calibrate and request.bowl_cm == protocol.scene.bowl_diameter_cm


@pytest.mark.slow   # one simulated trial
def test_the_documented_python_example_scores_a_run_as_harness_run_would(tmp_path: Path) -> None:
    import re
    import types

    from harness.models.scoresheet import load_scoresheet
    from tests.helpers import REPO

    text = (REPO / "docs" / "programmatic.md").read_text()
    code = re.search(r"<!-- example: evaluate -->\n```python\n(.*?)```", text, re.S)
    assert code, "docs/programmatic.md lost its example"
    example = types.ModuleType("programmatic_example")
    exec(compile(code.group(1), "docs/programmatic.md", "exec"), example.__dict__)
    assert example.score(small_protocol_copy(tmp_path), "expert", tmp_path / "out", trials=1) == 0
    sheet = load_scoresheet(tmp_path / "out" / "scoresheet.yaml")
    assert sheet.latency_ms == 100.0 and sheet.locked.robot == "sim" and len(sheet.attempts) == 1
    assert (tmp_path / "out" / "runs" / "scoresheet").is_dir()


UNGUARDED_SCRIPT = """from pathlib import Path
from harness import RunRequest, evaluate
from harness.models.run_request import EvidenceRequest, RobotRequest

here = Path(__file__).parent
evaluate(RunRequest(protocol=here / "p.yaml", policies=("expert",), robot=RobotRequest(kind="sim"), headless=True,
                    scoresheet=here / "sheet.yaml", runs_dir=here / "runs", evidence=EvidenceRequest(lanes=2),
                    max_trials=1))
"""


@pytest.mark.slow   # a script in its own process, one simulated trial's start
def test_a_script_that_calls_evaluate_unguarded_is_told_what_to_change_at_once_and_loses_nothing(
        tmp_path: Path) -> None:
    """The run's evidence lanes import the caller's script, as Python's multiprocessing does: a top-level
    `evaluate` ran again in each lane, which waited on the scoresheet its parent holds; the script hung, then said
    only "evidence writer process 1 exited (code 1)"."""
    import subprocess
    import sys

    from harness.models.scoresheet import load_scoresheet
    from tests.helpers import REPO

    small_protocol_copy(tmp_path).rename(tmp_path / "p.yaml")
    (tmp_path / "score.py").write_text(UNGUARDED_SCRIPT)
    ran = subprocess.run([sys.executable, str(tmp_path / "score.py")], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 1
    said = ran.stderr.strip().splitlines()[-1]
    assert said.endswith('harness.evaluate again: put that call under `if __name__ == "__main__":` '
                         "(docs/programmatic.md)"), ran.stderr[-2000:]
    assert "evidence writer process" in said
    assert load_scoresheet(tmp_path / "sheet.yaml").attempts == []   # locked, nothing scored: a resume starts over
