"""What the report says: time blamed on what took it, lock-step runs said to be so, captions that
describe what is drawn, no plot without information, comparisons of unequal runs stated as such."""

from __future__ import annotations

import pytest
import yaml

from harness.models.protocol import load_protocol
from harness.models.scoresheet import build_locked, lock_scoresheet
from harness.models.sheet_records import LoopStats
from harness.reports.blocks import Figure, Para
from harness.reports.document import report_blocks, run_blocks
from tests.helpers import fake_attempt, small_protocol_copy


def _sheet(workdir, name: str, robot: str, labels: list[str], loop: LoopStats | None = None,
           trials: list[dict] | None = None, policy: str = "expert"):
    protocol = small_protocol_copy(workdir / "protocols")
    if trials is not None:
        data = yaml.safe_load(protocol.read_text())
        data["trials"] = trials
        protocol = workdir / "protocols" / f"{name}.yaml"
        protocol.write_text(yaml.safe_dump(data))
    sheet = lock_scoresheet(workdir / f"{name}.yaml", build_locked(load_protocol(protocol), protocol, policy, robot),
                            {})
    for i, label in enumerate(labels, start=1):
        sheet.add_attempt(fake_attempt(i, 1, label, loop=loop or LoopStats()))
    return sheet


def _text(blocks) -> str:
    return "\n".join(b.text for b in blocks if isinstance(b, Para))


# A lock-step sim run with a slow robot: two 640x480 renders per step on a busy CPU, a fast policy.
SLOW_SIM_ROBOT = LoopStats(steps=300, target_fps=30, achieved_fps=21.3, policy_latency_ms_p50=2.0,
                           policy_latency_ms_p95=3.1, policy_latency_ms_max=9.0, robot_io_ms_p50=45.0,
                           robot_io_ms_p95=61.0, missed_deadlines=296)


@pytest.mark.slow
def test_a_lock_step_sim_run_with_a_slow_robot_blames_rendering_not_the_policy(workdir) -> None:
    sheet = _sheet(workdir, "slow", "sim", ["success", "no_grasp", "success"], SLOW_SIM_ROBOT)
    text = _text(run_blocks(sheet))
    assert "Robot I/O alone (p50 45.0 ms) exceeds the budget" in text
    assert "rendering camera frames" in text and "not from the policy (p50 2.0 ms)" in text
    assert "lock-step simulation" in text and "not those of a real arm" in text
    assert "The policy alone" not in text


@pytest.mark.slow
def test_a_slow_policy_on_a_real_arm_is_blamed_and_not_called_a_simulation(workdir) -> None:
    slow_policy = LoopStats(steps=300, target_fps=30, achieved_fps=12.0, policy_latency_ms_p50=80.0,
                            policy_latency_ms_p95=95.0, robot_io_ms_p50=3.0, robot_io_ms_p95=5.0,
                            missed_deadlines=300)
    text = _text(run_blocks(_sheet(workdir, "real", "so101", ["success", "success", "no_grasp"], slow_policy)))
    assert "The policy alone (p50 80.0 ms) exceeds the budget" in text
    assert "lock-step" not in text and "simulator" not in text


@pytest.mark.slow
def test_the_distance_caption_promises_a_fit_only_when_one_is_drawn(workdir) -> None:
    all_success = _sheet(workdir, "flat", "sim", ["success"] * 3)
    [figure] = [b for b in run_blocks(all_success) if isinstance(b, Figure) and b.name.startswith("distance")]
    assert "logistic fit" not in figure.caption and "no curve" in figure.caption
    mixed = _sheet(workdir, "mixed", "sim", ["success", "success", "no_grasp"])
    [figure] = [b for b in run_blocks(mixed) if isinstance(b, Figure) and b.name.startswith("distance")]
    assert "with the logistic fit and its 95% band" in figure.caption


@pytest.mark.slow
def test_a_fixed_position_protocol_gets_no_distance_plot_and_says_why(workdir) -> None:
    fixed = [{"index": i, "dx_cm": 0.0, "dy_cm": 0.0} for i in (1, 2, 3)]
    blocks = run_blocks(_sheet(workdir, "fixed", "sim", ["success", "no_grasp", "success"], trials=fixed))
    names = [b.name for b in blocks if isinstance(b, Figure)]
    assert not any(n.startswith(("distance", "map")) for n in names)
    assert "Every trial puts the cube at the same spot" in _text(blocks)
    with_starts = run_blocks(_sheet(workdir, "fixed2", "sim", ["success"] * 3, trials=fixed),
                             training_starts=[(0.1, 0.0), (3.0, 1.0)])
    assert any(b.name.startswith("map") for b in with_starts if isinstance(b, Figure))


@pytest.mark.slow
def test_runs_of_unequal_size_are_not_called_n_trials_per_run(workdir) -> None:
    twenty = [{"index": i, "dx_cm": float(i % 3), "dy_cm": 0.0} for i in range(1, 21)]
    thirty = [{"index": i, "dx_cm": 0.0, "dy_cm": float(i % 4)} for i in range(1, 33)]
    a = _sheet(workdir, "twenty", "sim", ["success", "no_grasp"] * 10, trials=twenty)
    b = _sheet(workdir, "thirty", "sim", ["success", "no_grasp"] * 16, trials=thirty)
    text = _text(report_blocks([a, b]))
    assert "At 20 trials per run" not in text
    assert "With 20 and 32 trials in the two runs (about as sensitive as 25 per run)" in text


@pytest.mark.slow
def test_checkpoints_are_named_by_run_and_step_in_headings(workdir, tmp_path) -> None:
    from harness.reports.blocks import Heading
    from tests.tiny_policy import save_tiny_act

    checkpoint = save_tiny_act(workdir / "outputs" / "act_demos" / "checkpoints" / "000150" / "pretrained_model")
    sheet = _sheet(workdir, "ckpt", "sim", ["success"] * 3, policy=str(checkpoint))
    headings = [b.text for b in run_blocks(sheet) if isinstance(b, Heading)]
    assert headings[0] == "act_demos-step150 on sim"
