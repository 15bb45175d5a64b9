"""`harness run PROTOCOL --policy A --policy B [...]`: a blind, interleaved comparison in one scoresheet.

Everything that can be wrong is checked before anything is written: the policies (two or more,
none twice, each one that the robot can run, all reading their cameras at one size), the stopping rule (a
sequential one whose cap reaches its power; otherwise the cap that would is named), and, on
`--resume`, the same set of policies as the sealed mapping, in any order (matched by fingerprint). The
sheet locks the schedule's seed, the calibrated test and the sealed mapping, whose codes are drawn from
a secret seed (never the order the policies were named in); the engine runs the schedule's slots in order through
`ArmSwitch`, which hands each slot to its arm, and stops when every declared comparison has.
"""

from __future__ import annotations

import secrets
import signal
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from harness.app.build import FrontEnd, check_policy_fits_robot, prepare_run
from harness.app.parallel.runs import check_workers, run_parallel
from harness.app.parts import Parts
from harness.errors import HarnessInputError, StaleRunError
from harness.models.checkpoint import hub_ref
from harness.models.comparison import (
    ArmIdentity,
    CodeRule,
    PositionRule,
    SealBroken,
    arm_codes,
    assign_codes,
    build_schedule,
    default_comparisons,
    seal,
    unseal,
)
from harness.models.evidence_audit import check_evidence
from harness.models.graded import GradedOutcome
from harness.models.protocol import Protocol, Trial, file_sha256
from harness.models.run_request import RunRequest
from harness.models.run_settings import BuiltinPolicy, InferenceEngine, RobotKind, RunSettings, latency_record
from harness.models.scoresheet import (
    Scoresheet,
    build_locked,
    load_scoresheet,
    new_scoresheet,
)
from harness.models.taxonomy import Label
from harness.policies.arms import load_arms
from harness.policies.hub import policy_fingerprint as hub_fingerprint
from harness.stats import betting, sequential
from harness.storage.lock import WriterLock


def comparison_refs(request: RunRequest, protocol: Protocol) -> list[str] | None:
    """The policies of a comparison (the request's, else the protocol's `run.policies`), or None for a
    single-policy run (the request's one policy, or none: the protocol's `run.policy`)."""
    flags = list(request.policies)
    refs = flags if len(flags) > 1 else (list(protocol.run.policies or []) if not flags else None)
    if refs is not None and len(refs) > 1:
        return refs
    if protocol.stopping_rule.kind == "sequential":
        raise HarnessInputError(request.protocol, "stopping_rule.kind", "sequential is a comparison's rule: give "
                                "two or more --policy flags (or run.policies)")
    return None


def comparison_protocol(protocol: Protocol, sheet_or_slots: Scoresheet | list[Trial]) -> Protocol:
    """The protocol as the engine runs it: one trial per scheduled slot, at its start position."""
    trials = sheet_or_slots.locked.trials if isinstance(sheet_or_slots, Scoresheet) else sheet_or_slots
    return protocol.model_copy(update={"trials": list(trials)})


def _check_refs(refs: list[str], robot: RobotKind, emulated_truth: bool = False) -> list[ArmIdentity]:
    """Each policy as its arm will run it: a built-in's name always means the built-in (a folder so named is
    `./expert`), a folder by its files, a Hub id (as a single run takes one) by its cached commit."""
    if len(refs) > 10:
        raise HarnessInputError(None, "--policy", f"{len(refs)} policies: a comparison takes at most 10")
    identities = []
    for ref in refs:
        builtin = BuiltinPolicy.named(ref)
        if builtin is None and hub_ref(ref) is None and not Path(ref).is_dir():
            raise HarnessInputError(None, "--policy", f"'{ref}' is neither a built-in policy, a folder nor a Hub id")
        check_policy_fits_robot(ref, robot, emulated_truth)
        fingerprint = f"builtin:{builtin.value}" if builtin is not None else hub_fingerprint(ref)
        identities.append(ArmIdentity(ref=ref, fingerprint=fingerprint))
    seen: dict[str, str] = {}
    for arm in identities:
        twin = seen.get(arm.fingerprint)
        if twin is not None:
            same = "given twice" if twin == arm.ref else f"the same files as '{twin}'"
            raise HarnessInputError(None, "--policy", f"'{arm.ref}' is {same}: a comparison needs different policies")
        seen[arm.fingerprint] = arm.ref
    return identities


def _design(protocol: Protocol, protocol_path: Path, codes: tuple[str, ...]) -> tuple[sequential.SequentialDesign,
                                                                                      list[tuple[str, str]]]:
    rule = protocol.stopping_rule
    if rule.kind != "sequential" or rule.min_difference is None or rule.max_trials_per_arm is None:
        raise HarnessInputError(protocol_path, "stopping_rule.kind", "a comparison needs a sequential rule, e.g. "
                                "{kind: sequential, alpha: 0.05, power: 0.8, min_difference: 0.2, "
                                "max_trials_per_arm: 170}")
    comparisons = list(rule.comparisons or default_comparisons(codes))
    for pair in comparisons:
        for code in pair:
            if code not in codes:
                raise HarnessInputError(protocol_path, "stopping_rule.comparisons",
                                        f"arm {code} is not one of the {len(codes)} arms ({', '.join(codes)})")
    try:
        design = sequential.locked_design(rule.alpha, rule.power, rule.min_difference, len(comparisons),
                                          rule.max_trials_per_arm)
    except ValueError as exc:
        raise HarnessInputError(protocol_path, "stopping_rule.max_trials_per_arm", str(exc)) from None
    return design, comparisons


def default_sheet_path(request: RunRequest, protocol_path: Path) -> Path:
    """Named by the protocol only: a comparison's file name must not say which policies it holds."""
    return request.scoresheet or Path("scoresheets") / f"{protocol_path.stem}-comparison.yaml"


def lock_comparison(request: RunRequest, protocol: Protocol, protocol_path: Path, path: Path,
                    identities: list[ArmIdentity], robot: RobotKind) -> Scoresheet:
    """The locked comparison sheet, not yet on disk (`Scoresheet.create` writes it): the schedule's seed, the
    calibrated test, and the codes drawn from a secret seed, sealed with it."""
    codes = arm_codes(len(identities))
    design, comparisons = _design(protocol, protocol_path, codes)
    seed = secrets.randbits(63)
    positions = [t.index for t in protocol.trials]
    slots = build_schedule(seed, codes, positions, design.cap, PositionRule.DRAWN)
    trials = [protocol.trial(slot.position).model_copy(update={"index": slot.number}) for slot in slots]
    assignment_seed = secrets.randbits(63)   # secret: only the seal holds it
    sealed = seal(assign_codes(assignment_seed, identities), assignment_seed=assignment_seed)
    latency = request.latency
    if latency is not None and not robot.simulated:
        raise HarnessInputError(None, "--latency-ms", "the latency model is for the simulated arm")
    comparison = {
        "arms": list(codes), "seed": seed, "positions": positions, "blocks": design.cap,
        "comparisons": [list(pair) for pair in comparisons],
        "design": {"alpha": design.alpha, "power": design.power, "min_difference": design.min_difference,
                   "comparisons": design.comparisons, "cap": design.cap,
                   "log_efficacy_bound": design.log_efficacy_bound, "futility": design.futility.value,
                   "futility_bet": design.futility_bet, "efficacy": design.efficacy.value,
                   "futility_bets": None if design.futility_bets is None else list(design.futility_bets),
                   "prior_a": design.prior_a, "prior_b": design.prior_b,
                   "fixed_sample_pairs": design.fixed_sample_pairs()},
        "sealed": sealed.model_dump(), "blind": request.blind,
        "codes": CodeRule.DRAWN.value, "position_rule": PositionRule.DRAWN.value,
    }
    primary = protocol.stopping_rule.primary_outcome
    if primary.graded:   # the outcome's definition, source and scene locked with it (docs/comparisons.md)
        scene = protocol.scene
        outcome = GradedOutcome.declare(primary, robot.simulated, scene.bowl_xy_cm, scene.bowl_diameter_cm,
                                        scene.trained_cube_xy_cm, protocol.episode_time_limit_s)
        comparison["graded"] = {"outcome": outcome.model_dump(mode="json"), "bets": list(betting.DEFAULT_BETS)}
    # what the sheet is, as the command that built the request says (a rehearsal's gap): locked with it
    optional = {"latency_ms": latency_record(latency), "inference": {"engine": InferenceEngine.SYNC.value},
                "comparison": comparison, **(request.provenance or {})}
    locked = build_locked(comparison_protocol(protocol, trials), protocol_path, "comparison", robot, optional)
    locked["policy"] = {"ref": f"blind comparison of arms {', '.join(codes)}",
                        "fingerprint": f"sealed:{sealed.commitment}"}
    rename_map = request.rename_map if request.rename_map is not None else dict(protocol.run.rename_map)
    settings = RunSettings(port=request.robot.port or protocol.run.port, robot_id=request.robot.robot_id,
                           cameras=dict(request.robot.cameras) or dict(protocol.run.cameras),
                           rename_map=rename_map, latency_ms=latency)
    return new_scoresheet(path, locked, settings)


def resume_comparison(request: RunRequest, protocol_path: Path, path: Path,
                   identities: list[ArmIdentity]) -> Scoresheet:
    sheet = load_scoresheet(path)
    check_evidence(sheet, [request.runs_dir / path.stem])   # before this run moves an unrecorded folder aside
    if sheet.locked.comparison is None:
        raise StaleRunError(path, "locked.comparison", "this scoresheet is a single policy's run, not a comparison")
    if file_sha256(protocol_path) != sheet.locked.protocol_sha256:
        raise StaleRunError(protocol_path, "protocol_sha256", f"the protocol changed since {path} was locked")
    try:
        mapping = unseal(sheet.locked.comparison.sealed)
    except SealBroken:
        raise StaleRunError(path, "locked.comparison.sealed", "the sealed arm mapping was edited") from None
    # matched by fingerprint, in any order; a refusal never says which policy is which arm
    locked_prints = {arm.fingerprint for arm in mapping.values()}
    for arm in identities:
        if arm.fingerprint not in locked_prints:
            raise StaleRunError(path, "--policy", f"'{arm.ref}' is not one of the {len(locked_prints)} policies this "
                                                  "comparison was locked with (or its files changed since)")
    if len(identities) != len(locked_prints):
        raise StaleRunError(path, "--policy", f"this comparison was locked with {len(locked_prints)} policies, "
                                              f"not {len(identities)}; name the same set, in any order")
    asked_robot = request.robot.kind
    if asked_robot and asked_robot != sheet.locked.robot:
        raise HarnessInputError(path, "robot", f"locked to '{sheet.locked.robot}', not '{asked_robot}'")
    if not request.blind and sheet.locked.comparison.blind:
        raise StaleRunError(path, "--no-blind", "this comparison was locked blind; it stays blind until it ends")
    return sheet


def _refuse_unsupported(request: RunRequest) -> None:
    """LeRobot's policy server serves one checkpoint per client and RTC wraps one policy per engine: a comparison
    would need one of each per arm, each checked and locked per arm. Until then, refused in one line."""
    if request.inference.policy_server or request.inference.engine is InferenceEngine.RTC:
        raise HarnessInputError(None, "--policy", "a comparison runs LeRobot's synchronous engine; "
                                                  "--policy-server and --inference rtc are not supported with it yet")


def _workers(request: RunRequest, sheet: Scoresheet) -> RunRequest:
    """`--workers`: as a single run takes it (simulated arm, plain mode; `auto` resolved here, once)."""
    if request.workers.count == "auto":
        from harness.app.build import video_mode
        from harness.app.parallel.scaling import auto_workers

        pending = len(sheet.pending_trials())
        count = (auto_workers(pending, mode=video_mode(request, sheet.locked.robot))
                 if sheet.locked.robot.simulated else 1)
        request = request.updated(workers={"count": count})
        print(f"--workers auto: {count} for at most {pending} trials on {sheet.locked.robot} "
              f"({'serial' if count == 1 else 'Ray workers'})", file=sys.stderr, flush=True)
    check_workers(request, sheet.locked.robot)
    return request


def run_comparison(request: RunRequest, protocol: Protocol, refs: list[str], front_end: FrontEnd,
                   third_party_output: Callable[[RunRequest, Path], AbstractContextManager[object]],
                   parts: Parts | None = None) -> int:
    """`front_end` and `third_party_output` come from `run_command`, which owns both choices for every run."""
    from harness.run.terminal import StopKey

    _refuse_unsupported(request)
    parts = parts or Parts()
    protocol_path = request.protocol
    path = default_sheet_path(request, protocol_path)
    if path.exists() and not request.resume:
        raise HarnessInputError(path, None, "this comparison already has a scoresheet; add --resume to continue it")
    if request.resume and not path.exists():
        raise HarnessInputError(path, None, "no comparison to resume here")
    if request.resume:
        robot = load_scoresheet(path).locked.robot
    else:
        kind = request.robot.kind or protocol.run.robot
        if kind is None:
            raise HarnessInputError(protocol_path, "run.robot", f"no robot: pass --robot {'|'.join(RobotKind)}")
        robot = RobotKind(kind)
    identities = _check_refs(refs, robot, parts.emulated_truth is not None)
    sheet = (resume_comparison(request, protocol_path, path, identities) if request.resume
             else lock_comparison(request, protocol, protocol_path, path, identities, robot))
    created = not request.resume
    request = _workers(request, sheet)
    if sheet.complete:
        print(f"{sheet.path}: the comparison has ended: {sheet.stopped_by_rule() or 'every block run'}")
        return 0
    run_protocol = comparison_protocol(protocol, sheet)
    switch = load_arms(sheet.locked, run_protocol, sheet.settings, request.device, parts.policy)
    setup = None
    handed_over = False   # to the parallel run's own worker, which closes it
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with WriterLock(path, "harness run") as writer, \
                WriterLock(request.runs_dir / path.stem, "harness run", folder=True):
            sheet.hold_writer_lock(writer)
            with third_party_output(request, path):
                if request.workers.parallel:   # each slot to the next free worker, recorded in slot order
                    handed_over = True
                    run_parallel(request, run_protocol, sheet, created, None, parts, switch)
                    print(decision_lines(sheet))
                    return 0
                setup = prepare_run(request, run_protocol, sheet, front_end, parts, switch)
                if created:
                    sheet.create()
                if front_end is FrontEnd.TUI:
                    from harness.app.tui_run import make_app

                    make_app(setup).run()   # the check screen warms every arm
                else:
                    switch.warm_up(setup.robot.get_observation())
                    _print_start(sheet)
                    with StopKey(setup.robot, lambda: getattr(setup.observer, "asking", False)):
                        setup.engine.run()
    except KeyboardInterrupt:
        print("harness: interrupted; scored trials are saved. Continue with --resume.", file=sys.stderr)
        return 130
    except OSError as exc:   # as a single run says it: a full disk or a size limit, found while writing
        if created and not path.exists():
            (request.runs_dir / path.stem / "third_party.log").unlink(missing_ok=True)
        if isinstance(exc, BrokenPipeError) or exc.filename is not None:
            raise
        raise HarnessInputError(path, None, f"cannot write ({exc.strerror or exc}): the disk is full or a file-size "
                                            "limit was reached; attempts recorded before it are kept") from None
    finally:
        if setup is not None:
            setup.close()
        elif not handed_over:
            switch.close()
        signal.signal(signal.SIGTERM, previous)
    print(decision_lines(sheet))
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _print_start(sheet: Scoresheet) -> None:
    comparison = sheet.locked.require_comparison()
    design = comparison.design
    done = len({a.trial_index for a in sheet.scored_attempts()})
    arms = len(comparison.arms)
    state = ("blind" if sheet.still_blind else "NOT blind (--no-blind)" if not comparison.blind
             else "unblinded early (recorded in the chain), timing shown" if sheet.unblindings
             else "ended, arms revealed")
    print(f"{sheet.path}: blind comparison of arms {', '.join(comparison.arms)}, "
          f"{state}; at most {design.cap} trials per arm, "
          f"{design.cap * arms} in all (a fixed-sample design: {design.fixed_sample_pairs} per arm, "
          f"{design.fixed_sample_pairs * arms} in all, as the report counts them); {done} trials scored so far",
          flush=True)
    if not sheet.still_blind:
        mapping = unseal(comparison.sealed)
        print("arms: " + ", ".join(f"{code} = {mapping[code].ref}" for code in comparison.arms), flush=True)


def decision_lines(sheet: Scoresheet) -> str:
    """What the run says when it stops (arm codes only) and its per-arm tally: the graded outcome's mean per arm
    when the comparison decides on one, and successes."""
    from harness.command import harness_command
    from harness.reports.graded import graded_line

    decision = sheet.stopped_by_rule()
    tally = []
    schedule = {slot.number: slot.arm for slot in sheet.comparison.schedule()}
    for code in sheet.locked.require_comparison().arms:
        scored = [a for a in sheet.scored_attempts() if schedule.get(a.trial_index) == code]
        wins = sum(1 for a in scored if a.label is Label.SUCCESS)
        tally.append(f"{code} {wins}/{len(scored)}")
    head = f"decision: {decision}" if decision else "the comparison is still open (continue with --resume)"
    lines = [head]
    graded = graded_line(sheet)   # a graded primary outcome: what the decision is about, before success
    if graded is not None:
        lines.append(graded)
    lines.append(f"successes per arm: {', '.join(tally)}; reveal with: {harness_command()} report {sheet.path}")
    return "\n".join(lines)
