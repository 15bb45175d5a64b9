"""Time from `harness run --robot so101` starting on the emulated arm to its first cube prompt (issue 40).

The issue measured 29-37 s from the TUI's check screen to the first cube prompt on the emulated real arm.
This reads the same span in plain mode, where the run's first output line is the check ("N of N trials to
run", after the arm is connected, the cameras opened and the policy loaded: what the check screen shows)
and the first cube prompt is the scripted operator's first placement ("operator (placed by eye)"): a
`harness rehearse --max-trials 1` with the scripted operator, each output line stamped as it arrives (a
benchmark's reading of a log, not a decision the product makes). Also the whole run start (`$ harness run`
to that prompt), and whether the trial recorded a stale-frame void.

`--tui`: the issue's own reading, as a user sees it. `harness emulate-bus --sim` and `harness run --robot so101
... --bowl-calibration ... --trained-spot ...` (the desk files a `harness rehearse` made first, untimed) each in
a tmux session, the run's screen read every 0.1 s: process start -> the check screen ("Nothing moves until you
press Enter") -> its policy row complete (warm-up inference shown: before issue 40's start-up work the screen
appeared only then; now the policy loads in the background and the row follows it), Enter -> the empty-table
prompt, Enter -> the first cube prompt (the placement guide's target). Enter is pressed as soon as each screen
is complete: a person's reading time is not in the figures.

Run: .venv/bin/python benchmarks/first_prompt_bench.py [--repeats 3] [--code PATH] [--tui [--against PATH]]
(PATH: another checkout, for the before column; `--against` alternates its starts with --code's)
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from benchmarks.rehearse_bench import PROTOCOL  # noqa: E402

MARKS = (("run", "$ harness run"), ("check", "trials to run"), ("prompt", "operator (placed by eye)"))


def one(folder: Path, code: Path) -> dict[str, float]:
    for name in ("scoresheets", "runs", "rehearsals"):
        subprocess.run(["rm", "-rf", str(folder / name)], check=True)
    env = dict(os.environ, PYTHONPATH=str(code))
    t0 = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", "rehearse", "bench.yaml", "--policy", "act",
                                "--operator", "scripted", "--max-trials", "1"], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    assert process.stdout is not None
    at: dict[str, float] = {}
    lines = []
    for line in process.stdout:
        lines.append(line)
        for mark, text in MARKS:
            if text in line and mark not in at:
                at[mark] = time.perf_counter() - t0
    process.wait()
    if len(at) != len(MARKS):
        sys.exit("rehearsal did not reach its first cube prompt:\n" + "".join(lines[-30:]))
    return {"check_to_prompt": at["prompt"] - at["check"], "run_to_prompt": at["prompt"] - at["run"],
            "stale": float(any("too old" in line for line in lines))}


TUI_MARKS = (("check", "Nothing moves until you press Enter"), ("ready", r"warm-up inference|loaded in"),
             ("clear", "clear the table"), ("prompt", "starts within"))


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def _wait_for(session: str, pattern: str, timeout_s: float = 300.0) -> str:
    end = time.perf_counter() + timeout_s
    while time.perf_counter() < end:
        screen = _tmux("capture-pane", "-p", "-t", session)
        if re.search(pattern, screen):
            return screen
        time.sleep(0.1)
    screen = _tmux("capture-pane", "-p", "-t", session)
    sys.exit(f"{session}: {pattern!r} not seen in {timeout_s:.0f} s; screen:\n{screen}")


def tui_one(folder: Path, code: Path, desk: Path) -> dict[str, float]:
    """One start of the TUI on the emulated arm (see the module docstring); the sessions are killed after."""
    for name in ("scoresheets", "runs"):
        subprocess.run(["rm", "-rf", str(folder / name)], check=True)
    tag = f"fpb{os.getpid()}"
    socket = folder / "cams.sock"
    env = f"cd {folder} && PYTHONPATH={code} {sys.executable} -m harness.cli"
    _tmux("new-session", "-d", "-s", f"{tag}-emu", "-x", "150", "-y", "40",
          f"{env} emulate-bus --sim --camera-socket {socket}")
    try:
        port = re.search(r"bus on (\S+)", _wait_for(f"{tag}-emu", "Simulated cameras on", 120))
        assert port is not None
        run = (f"{env} run bench.yaml --robot so101 --port {port.group(1)} --robot-id emulated_follower --policy act "
               f"--camera top=sim:{socket}@640x480 --bowl-calibration {desk / 'bowl_top.yaml'} "
               f"--trained-spot {desk / 'trained_spot.png'}")
        t0 = time.perf_counter()
        _tmux("new-session", "-d", "-s", f"{tag}-run", "-x", "150", "-y", "45", run)
        at = {}
        for mark, pattern in TUI_MARKS:
            _wait_for(f"{tag}-run", pattern)
            at[mark] = time.perf_counter() - t0
            if mark in ("ready", "clear"):   # Enter once the check screen is complete; the table is clear
                _tmux("send-keys", "-t", f"{tag}-run", "Enter")
    finally:
        for name in ("run", "emu"):
            subprocess.run(["tmux", "kill-session", "-t", f"{tag}-{name}"], capture_output=True)
    return {"start_to_check": at["check"], "start_to_ready": at["ready"], "enter_to_clear": at["clear"] - at["ready"],
            "clear_to_prompt": at["prompt"] - at["clear"], "enter_to_prompt": at["prompt"] - at["ready"]}


def tui_main(folder: Path, codes: list[Path], repeats: int) -> None:
    """The TUI's starts, alternating between `codes` (same desk files, same load), `repeats` each."""
    rehearsal = subprocess.run([sys.executable, "-m", "harness.cli", "rehearse", "bench.yaml", "--policy", "act",
                                "--operator", "scripted", "--max-trials", "1"], cwd=folder,
                               env=dict(os.environ, PYTHONPATH=str(codes[0])), capture_output=True, text=True)
    desk = folder / "rehearsals" / "bench-act-rehearsal"
    if not (desk / "bowl_top.yaml").is_file():
        sys.exit("the rehearsal made no desk files:\n" + rehearsal.stdout[-3000:] + rehearsal.stderr[-3000:])
    runs: dict[Path, list[dict[str, float]]] = {code: [] for code in codes}
    loads = []
    for _ in range(repeats):
        for code in codes:
            loads.append(os.getloadavg()[0])
            runs[code].append(tui_one(folder, code, desk))
            print(f"  {code}: " + ", ".join(f"{k} {v:.1f} s" for k, v in runs[code][-1].items()), flush=True)
    print(f"TUI, load {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores, {repeats} starts each, "
          "alternating (median)")
    print("| code | process start -> check screen (s) | -> policy loaded and warm (s) | "
          "Enter -> empty-table prompt (s) | Enter -> first cube prompt (s) | check Enter -> first cube prompt (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for code, done in runs.items():
        med = {k: statistics.median(r[k] for r in done) for k in done[0]}
        print(f"| {code} | {med['start_to_check']:.1f} | {med['start_to_ready']:.1f} | {med['enter_to_clear']:.1f} | "
              f"{med['clear_to_prompt']:.1f} | {med['enter_to_prompt']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout to time (default: this one)")
    parser.add_argument("--tui", action="store_true", help="the TUI in tmux, as a user sees it (see above)")
    parser.add_argument("--against", type=Path, default=None,
                        help="with --tui: another checkout, its starts alternating with --code's")
    args = parser.parse_args()
    from tests.tiny_policy import save_tiny_act

    with tempfile.TemporaryDirectory(prefix="first-prompt-bench-") as tmp:
        folder = Path(tmp)
        (folder / "bench.yaml").write_text(PROTOCOL.format(episode_s=1.5))
        save_tiny_act(folder / "act", height=480, width=640)
        if args.tui:
            codes = [args.code.resolve(), *([args.against.resolve()] if args.against else [])]
            tui_main(folder, codes, args.repeats)
            return
        runs = [one(folder, args.code) for _ in range(args.repeats)]
        load = os.getloadavg()[0]
        print(f"code {args.code}, load {load:.1f} on {os.cpu_count()} cores, {args.repeats} runs (median)")
        print("| check -> first cube prompt (s) | `$ harness run` -> first cube prompt (s) | runs with a stale frame |")
        print("|---:|---:|---:|")
        print(f"| {statistics.median(r['check_to_prompt'] for r in runs):.1f} | "
              f"{statistics.median(r['run_to_prompt'] for r in runs):.1f} | "
              f"{sum(r['stale'] for r in runs):.0f} of {len(runs)} |")


if __name__ == "__main__":
    main()
