"""Outcome proposals against the simulator's judge, per learned policy, on the committed traces (issue 59 item 5).

By default all 840 committed attempts, every one tuning data now: `tests/data/anatomy/*.npz` (140 scored
attempts of ACT 500/1000 steps on fixed, randomized, jittered and scattered protocols, SmolVLA 1500/3000/9000
steps and two toy ACTs) and `tests/data/proposal_act*/` (700 of the small ACTs `scripts/proposal_heldout`
trained, each set held out once). Each attempt has the joint positions and the gripper servo's load a real arm
reports every control step, and the judge's verdict. The proposer (`harness.run.proposal.propose`) reads them
as a real arm's would (`--no-load`: an arm that does not report the load); its final frame is stood in for by
what a top camera sees (the cube's true distance from the bowl centre, inside when within the rim's radius,
+/- 0.3 cm: the measurement's own accuracy is judged apart, `benchmarks/camera_sizes_bench.py`) or by no
measurement at all (`none`); the episode's end is the simulator's (a settled cube ends it early), or with
`--ends limit` a real arm's (it always runs to its limit, and says nothing).

Per policy: attempts; agree (a label proposed and the judge's); no proposal (the evidence disagreed: the
operator chooses unprompted, which is not a wrong label); wrong (a label proposed and not the judge's);
agreement = agree / attempts; proposed = (agree + wrong) / attempts, the share the operator gets a default for;
right when proposed = agree / (agree + wrong). Target: agreement >= 98 %, and a disagreement is a refusal.

`--folder DIR ...` judges other exports' attempts instead of the committed ones: the held-out learned-policy
runs `scripts/proposal_heldout` makes (judge them once, with the rules frozen).

Run: .venv/bin/python benchmarks/proposal_policies.py [--final seen|none] [--no-load] [--ends judge|limit]
     [--folder DIR ...]
     PYTHONPATH=/path/to/older/checkout ... (the proposer before)
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

_sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))   # the repository: tests.anatomy_traces

import argparse
from collections import Counter, defaultdict

from harness.models.protocol import Protocol
from harness.models.taxonomy import Label
from harness.run.proposal import EpisodeEnd, FinalView, GripperTrace, Proposal, propose, so101_grasp_point
from harness.sim.scene import SceneGeometry
from tests.anatomy_traces import FOLDER, Attempt, attempts

UNCERTAINTY_CM = 0.3
TIME_LIMIT_S = Protocol.model_fields["episode_time_limit_s"].default   # every exported protocol's (20 s)
TUNING = [FOLDER, *(FOLDER.parent / name for name in ("proposal_act128", "proposal_act128_s4000",
                                                       "proposal_act128_s5000", "proposal_act256_s7000",
                                                       "proposal_act64_s6000", "proposal_act96_s8000",
                                                       "proposal_act96_s9100", "proposal_act192_s9200",
                                                       "proposal_act128_s9300", "proposal_act192_s9400",
                                                       "proposal_act192_s9500"))]
SHORT = {Label.SUCCESS: "S", Label.NO_GRASP: "NG", Label.GRASPED_THEN_DROPPED: "D", Label.WRONG_PLACEMENT: "WP"}


def proposal(attempt: Attempt, final: str, grasp_point, scene: SceneGeometry, load: bool = True,
             ends: str = "judge") -> Proposal:
    """What the real-arm proposer says of one attempt."""
    trace = GripperTrace(grasp_point)
    loads = attempt.loads if attempt.loads is not None and load else [None] * len(attempt.joints)
    for joints, grip_load in zip(attempt.joints, loads, strict=True):
        trace.see(joints, grip_load)
    distance = float(attempt.judge["true_placement_error_cm"])
    view = FinalView(None) if final == "none" else \
        FinalView(distance < 100 * scene.bowl_rim_diameter / 2, distance, UNCERTAINTY_CM)
    episode = EpisodeEnd(TIME_LIMIT_S, ends_when_settled=ends == "judge")
    return propose(trace, view, scene.bowl_xy, scene.bowl_rim_diameter / 2, scene.cube_edge / 2, episode)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--final", choices=("seen", "none"), default="seen")
    parser.add_argument("--folder", type=_Path, nargs="+", default=TUNING,
                        help="exported attempts (default: the committed, all tuning now)")
    parser.add_argument("--ends", choices=("judge", "limit"), default="judge",
                        help="judge: the episodes end once the judge's verdict is final, as these simulated ones did; "
                             "limit: read them as a real arm's, whose episode always runs to its time limit")
    parser.add_argument("--no-load", action="store_true", help="ignore the gripper's load (an arm that lacks it)")
    args = parser.parse_args()
    scene, grasp_point = SceneGeometry(), so101_grasp_point()
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    judged: dict[str, Counter[str]] = defaultdict(Counter)   # the judge's labels: how hard each set is
    wrong: list[str] = []
    for attempt in (a for folder in args.folder for a in attempts(folder=folder)):
        got = proposal(attempt, args.final, grasp_point, scene, not args.no_load, args.ends)
        for key in (attempt.policy, "**all**"):
            judged[key][SHORT.get(Label(attempt.label), attempt.label)] += 1
            row = rows[key]
            row[0] += 1
            if got.label is None:
                row[2] += 1
            elif got.label.value == attempt.label:
                row[1] += 1
            else:
                row[3] += 1
        if got.label is None or got.label.value != attempt.label:
            said = got.label.value if got.label else "no proposal"
            wrong.append(f"{attempt.policy} trial {attempt.trial}: judge {attempt.label} ({attempt.judge['detail']}); "
                         f"{said} ({got.reasons_text()})")
    rows["**all**"] = rows.pop("**all**")
    print(f"final frame: {args.final}; gripper load: {'ignored' if args.no_load else 'read'}; episode end: "
          f"{args.ends}; attempts: "
          f"{', '.join(str(f) for f in args.folder)}\n")
    print("| policy | attempts | judge's labels | agree | no proposal | wrong | agreement | proposed | "
          "right when proposed |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for policy, (n, agree, refused, bad) in rows.items():
        right = f"{100 * agree / (agree + bad):.1f} %" if agree + bad else "-"
        mix = " ".join(f"{judged[policy][k]} {k}" for k in (*SHORT.values(),) if judged[policy][k])
        print(f"| {policy} | {n} | {mix} | {agree} | {refused} | {bad} | {100 * agree / n:.1f} % | "
              f"{100 * (agree + bad) / n:.1f} % | {right} |")
    print()
    for line in wrong:
        print(f"- {line}")


if __name__ == "__main__":
    main()
