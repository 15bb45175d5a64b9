"""What latency a run was scored under and what its arm experienced, and success against latency.

The locked latency model says what was asked for; each attempt's loop stats say what the arm saw
(observation-to-action latency, queue underruns, chunk switches). When several runs or sweep cells
differ only in latency, success per latency is the curve that offline metrics cannot give.
"""

from __future__ import annotations

from harness.models.run_settings import InferenceEngine
from harness.models.scoresheet import Scoresheet
from harness.models.taxonomy import Label
from harness.reports.analysis import arm_experience, latency_groups, latency_of
from harness.reports.blocks import Block, Heading, Para, Table


def latency_text(sheet: Scoresheet) -> str:
    """The latency model and inference engine a run was scored under, and whether they were locked."""
    latency = latency_of(sheet)
    if latency.engine == InferenceEngine.ASYNC:
        return (f"latency each chunk's measured round trip to LeRobot's policy server at {latency.server}, "
                f"{'replayed in simulated time' if sheet.locked.robot.simulated else 'as the arm waited, in wall time'}"
                f"; inference engine async ({latency.actions_per_chunk} actions per "
                f"chunk, observation sent at {latency.chunk_size_threshold:g} of a chunk, aggregate "
                f"{latency.aggregate_fn}; locked)")
    model = {"lock-step": "lock-step (the simulator waits for every action)",
             "measured": "each action's measured policy time",
             "the arm's own": "the arm's own, in wall time"}.get(latency.model, latency.model)
    locked = "locked" if latency.locked else "from unlocked settings (sheet locked before it was)"
    if latency.engine == "rtc" and latency.execution_horizon is not None:
        where = "in simulated time" if sheet.locked.robot == "sim" else "on a thread beside the paced arm, in wall time"
        return (f"latency {model}, inference engine rtc (LeRobot's Real-Time Chunking {where}: execution horizon "
                f"{latency.execution_horizon}, guidance weight up to {latency.max_guidance_weight:g}, "
                f"{latency.attention_schedule} schedule, an inference at {latency.queue_threshold} queued actions or "
                f"fewer; {locked})")
    return f"latency {model}, inference engine {latency.engine} ({locked})"


def experience_text(sheet: Scoresheet) -> str | None:
    """What the arm saw over the run, in one sentence (None when no trial recorded it)."""
    seen = arm_experience(sheet)
    if seen is None:
        return None
    clock = {"simulated": "simulated time", "wall": "wall time"}.get(seen.clock or "", seen.clock or "unknown time")
    parts = [f"observation to action p50 {_ms(seen.obs_to_action_ms_p50)} ms, max {_ms(seen.obs_to_action_ms_max)} "
             f"ms ({clock})"]
    if seen.chunk_switches_per_trial is not None:
        parts.append(f"{seen.chunk_switches_per_trial:g} chunk switches per trial")
    if seen.underruns is not None:
        parts.append(f"{seen.underruns} underruns in {seen.steps} steps")
    if seen.rtc_delay_steps_max is not None:
        parts.append(f"RTC's inference delay p50 {seen.rtc_delay_steps_p50} steps, max {seen.rtc_delay_steps_max} "
                     "steps of its inpainting horizon")
    engine = latency_of(sheet).engine
    who = {"rtc": "RTC", "async": "Async"}.get(engine, "The arm")
    return f"{who} over {seen.trials} trial{'s' if seen.trials != 1 else ''}: " + "; ".join(parts) + "."


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def experienced_blocks(sheet: Scoresheet) -> list[Block]:
    """One row per scored trial: the observation-to-action latency its arm saw, underruns, chunk switches."""
    rows = []
    for index in sheet.trial_indices:
        final = sheet.final_attempt(index)
        if final is None or final.loop.obs_to_action_ms_p50 is None:
            continue
        loop = final.loop
        rows.append([str(index), final.label, _ms(loop.obs_to_action_ms_p50), _ms(loop.obs_to_action_ms_p95),
                     _ms(loop.obs_to_action_ms_max), loop.obs_to_action_clock or "-",
                     f"{loop.queue_underruns}/{loop.steps}",
                     "-" if loop.chunk_switches is None else str(loop.chunk_switches),
                     "-" if loop.rtc_delay_steps_max is None
                     else f"{loop.rtc_delay_steps_p50}/{loop.rtc_delay_steps_max}"])
    if not rows:   # recorded before these figures were: the locked latency is in the fingerprints
        return []
    rtc = any(row[-1] != "-" for row in rows)
    if not rtc:
        rows = [row[:-1] for row in rows]
    blocks: list[Block] = [Heading("Latency the arm saw", 3), Para(f"Scored with {latency_text(sheet)}.")]
    said = experience_text(sheet)
    if said:
        blocks.append(Para(said))
    blocks.append(Para("Observation to action: from the observation a step read to its action reaching the arm "
                       "(simulated time on the simulator, wall time on a real arm; with asynchronous inference, "
                       "each chunk's wall-clock round trip to the policy server; with RTC, each chunk's, from the "
                       "observation it was computed from to its landing in the queue). An underrun is a step whose "
                       "action landed more than one control period late (asynchronous or RTC: a step with an empty "
                       "action queue), the arm holding its last command; a chunk switch is a new action chunk the "
                       "policy started."))
    if rtc:
        blocks.append(Para("RTC delay: the control steps RTC was told would pass before a chunk landed (the worst "
                           "latency so far), p50/max over the trial's chunks: that much of each chunk's inpainting "
                           "horizon was spent on latency."))
    blocks.append(Table(["trial", "outcome", "p50 ms", "p95 ms", "max ms", "clock", "underruns/steps",
                         "chunk switches", *(["RTC delay p50/max steps"] if rtc else [])], rows))
    return blocks


def success_by_latency(sheets: list[Scoresheet], of: str = "") -> list[Block]:
    """Success per latency when the runs were scored under more than one; nothing otherwise. `of` names
    what the runs share (a sweep's checkpoint)."""
    groups = latency_groups(sheets)
    if not groups:
        return []
    rows = [[g.latency, str(g.runs), f"{g.k}/{g.n}",
             f"{100 * g.wilson95[0]:.1f}% to {100 * g.wilson95[1]:.1f}%" if g.wilson95 else "-",
             f"{g.seen_obs_to_action_ms_p50:.0f}" if g.seen_obs_to_action_ms_p50 is not None else "-"]
            for g in groups]
    return [Heading(f"Success against latency{f' ({of})' if of else ''}", 3),
            Para("Runs grouped by the latency model and inference engine they were locked with; the last column "
                 "is the median over trials of the observation-to-action latency the arm saw."),
            Table(["latency", "runs", Label.SUCCESS.value, "95% Wilson", "seen p50 ms"], rows)]
