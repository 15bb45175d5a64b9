"""`harness sweep SPEC.yaml`: every cell (checkpoint x protocol x condition) an ordinary `harness run`
on Ray workers, each with its own locked scoresheet under `scoresheets/<sweep>/`; then the sweep report.

Every cell is a `RunRequest` (the sweep's own settings, its condition's over them), built and checked as
`harness run` checks its own before the first cell starts, so a bad condition is refused while nothing is
locked. Cells already scored are skipped; a cell stopped
half-way is resumed, so `harness sweep SPEC --resume` after any interruption finishes the sweep.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessInputError
from harness.models.run_request import RobotRequest, RunRequest, WorkersRequest
from harness.models.run_settings import BuiltinPolicy, RobotKind
from harness.models.scoresheet import load_scoresheet
from harness.models.sheet_records import Attempt
from harness.models.sweep_spec import Cell, NotApplicable, Sweep, condition_settings, load_sweep
from harness.models.taxonomy import Label
from harness.policies.hub import checkpoint_folder
from harness.run.sequencing import SequenceObserver

log = logging.getLogger(__name__)


def sheet_of(sweep: Sweep, cell: Cell) -> Path:
    return sweep.folder / f"{cell.key}.yaml"


def not_applicable(cell: Cell) -> NotApplicable | None:
    """Why the cell's condition does not apply to its checkpoint (RTC for a policy without it, a LeRobot engine
    or server for a built-in); None when it runs. Decided before anything runs, from the policy's class."""
    from harness.policies.lerobot_policy import policy_supports_rtc

    builtin = BuiltinPolicy.named(cell.checkpoint.ref) is not None
    wants_rtc = cell.condition.get("inference") == "rtc"
    if (wants_rtc or "policy_server" in cell.condition) and builtin:
        return NotApplicable.BUILT_IN
    if wants_rtc and not policy_supports_rtc(checkpoint_folder(cell.checkpoint.ref)):
        return NotApplicable.NO_RTC
    return None


def local_server_address(sweep: Sweep, cell: Cell) -> str | None:
    """For a `policy_server: local` cell, where the sweep serves it: the address its scoresheet locked when it
    has one (a resume must ask for the same), else a free loopback port."""
    if not cell.local_server:
        return None
    sheet = sheet_of(sweep, cell)
    if sheet.exists():
        inference = load_scoresheet(sheet).locked.inference
        if inference is not None and inference.server:
            return inference.server
    from harness.app.parallel.local_policy_server import free_loopback_port

    return f"127.0.0.1:{free_loopback_port()}"


def cell_request(sweep: Sweep, cell: Cell, runs_dir: Path, address: str | None,
                 server: str | None = None, driver_worker: bool = True) -> RunRequest:
    """The `harness run` a cell stands for: what the sweep decides (`SWEEP_OWNS`) with the condition's settings
    over it. A cell served by LeRobot's policy server runs in this process, with one worker (the server serves
    one client); every other cell on Ray, even with one worker: the same path, the same evidence shipping
    (`driver_worker=False`: every trial on Ray workers, none in this process)."""
    sheet = sheet_of(sweep, cell)
    served = "policy_server" in cell.condition
    base = RunRequest(protocol=cell.protocol, policies=(cell.checkpoint.ref,), robot=RobotRequest(kind=RobotKind.SIM),
                      scoresheet=sheet, runs_dir=runs_dir / sweep.spec.name, resume=sheet.exists(), headless=True,
                      workers=WorkersRequest(count=1 if served else sweep.spec.workers,
                                             address=None if served else address, on_ray=not served,
                                             driver_worker=served or driver_worker))
    return base.with_flags(condition_settings(cell.condition, server))


class CellProgress:
    """The parallel runner's observer during a sweep: a bar for the cell and one for the whole sweep."""

    def __init__(self, cell_bar: Any, overall: Any, label: str) -> None:
        self.cell_bar = cell_bar
        self.overall = overall
        self.label = label

    def trial_started(self, trial: Any, attempt: int, done: int, total: int) -> None:
        return None

    def trial_scored(self, attempt: Attempt) -> None:
        self.cell_bar.update(1)
        if attempt.label is not Label.VOID:
            self.overall.update(1)
        self.cell_bar.set_postfix_str(f"trial {attempt.trial_index}: {attempt.label}")

    def warn(self, message: str) -> None:
        self.cell_bar.write(f"warning: {self.label}: {message}")

    def wait_if_paused(self) -> bool:
        """A sweep's cell has no pause key: never paused, never aborted between trials."""
        return True


def run_sweep(path: Path, resume: bool, address: str | None, runs_dir: Path,
              scoresheets_dir: Path = Path("scoresheets"), keep_workers: bool = True,
              driver_worker: bool = True) -> int:
    """Run every cell not yet scored, then write the sweep report. Returns the process exit code.

    The sweep's process and its Ray workers each keep the policies and simulators they loaded, from cell to
    cell; `keep_workers=False` loads everything afresh for every cell (the same outcomes: tests/e2e/test_sweep.py
    compares a sweep whose trials all ran on one kept Ray worker, `driver_worker=False`, with the same sweep loaded
    afresh for every cell)."""
    from tqdm import tqdm

    from harness.app.parallel.runs import check_address
    from harness.app.parallel.workers import WorkerPool
    from harness.app.parts import Parts
    from harness.app.run_command import run_request
    from harness.app.worker_cache import WorkerCache

    sweep = load_sweep(path, scoresheets_dir)
    if sweep.folder.exists() and any(sweep.folder.glob("*.yaml")) and not resume:
        raise HarnessInputError(sweep.folder, None, "this sweep has scoresheets already; add --resume to continue it")
    skipped = {cell.key: why for cell in sweep.cells if (why := not_applicable(cell)) is not None}
    servers = {cell.key: local_server_address(sweep, cell) for cell in sweep.cells}
    requests: list[tuple[Cell, RunRequest]] = []
    for cell in sweep.cells:   # every cell's settings, protocol and policy checked before anything is locked
        if cell.key in skipped:
            continue
        try:
            request = cell_request(sweep, cell, runs_dir, address, servers[cell.key], driver_worker)
            _check_cell(request)
            requests.append((cell, request))
        except HarnessInputError as exc:
            if exc.file is not None:
                raise
            raise HarnessInputError(path, f"cell {cell.key}: {exc.field}", exc.problem) from None
    if address:
        check_address(address)
    sweep.folder.mkdir(parents=True, exist_ok=True)
    total = sum(_planned(cell) for cell, _ in requests)
    done = sum(_scored(sheet_of(sweep, cell)) for cell, _ in requests)
    print(f"sweep {sweep.spec.name}: {len(sweep.cells)} cells ({len(sweep.checkpoints)} checkpoints x "
          f"{len(sweep.spec.protocols)} protocols x {len(sweep.spec.conditions)} conditions"
          f"{f', {len(skipped)} not applicable' if skipped else ''}), {done} of {total} "
          f"trials scored; scoresheets in {sweep.folder}/", flush=True)
    for key, why in skipped.items():
        print(f"{key}: not applicable ({why})", flush=True)
    kept = WorkerCache()   # this process's policies and simulators, loaded once for every cell that runs here
    pool = WorkerPool()    # the Ray workers, each with its own, kept from cell to cell
    parts = kept.parts(Parts(ray_workers=pool)) if keep_workers else None
    cells_run = 0
    try:
        with tqdm(total=total, initial=done, desc="sweep", unit="trial", position=0, file=sys.stderr) as overall:
            for number, (cell, request) in enumerate(requests, start=1):
                sheet = sheet_of(sweep, cell)
                name = f"[{number}/{len(requests)}] {cell.key}"
                if sheet.exists() and load_scoresheet(sheet).complete:
                    overall.write(f"{name}: scored already, skipped")
                    continue
                pending = _planned(cell) - _scored(sheet)
                with tqdm(total=pending, desc=name, unit="trial", position=1, leave=False, file=sys.stderr) as bar, \
                        _served(sweep, cell, servers[cell.key]):
                    progress: SequenceObserver = CellProgress(bar, overall, cell.key)   # typed: what the sequence calls
                    run_request(request, parts, observer=progress)
                cells_run += 1
                overall.write(f"{name}: {_summary_line(sheet)}")
        if keep_workers and cells_run:
            print(_loads_line(cells_run, kept, pool.loads()), file=sys.stderr, flush=True)
    finally:
        try:
            pool.close()
        finally:
            kept.close()
    offline = offline_results(sweep)
    write_sweep_report(sweep, offline)
    return 0


def _loads_line(cells: int, kept: Any, ray_loads: list[tuple[int, int]]) -> str:
    """What the sweep loaded for its cells: each checkpoint once per worker that ran it, the scene once per
    worker, rather than once per cell and worker."""
    line = (f"{cells} cell{'s' if cells != 1 else ''} run: this process loaded {kept.policy_loads} "
            f"checkpoint{'s' if kept.policy_loads != 1 else ''} and built {kept.world_builds} "
            f"scene{'s' if kept.world_builds != 1 else ''}")
    for number, (policies, worlds) in enumerate(ray_loads, start=1):
        line += f"; Ray worker {number}: {policies} and {worlds}"
    return line


def _served(sweep: Sweep, cell: Cell, server: str | None) -> Any:
    """LeRobot's policy server for a `policy_server: local` cell, for as long as the cell runs."""
    from contextlib import nullcontext

    if server is None:
        return nullcontext()
    from harness.app.parallel.local_policy_server import LocalPolicyServer
    from harness.models.protocol import load_protocol

    return LocalPolicyServer(server, sweep.folder / f"{cell.key}.server.log", fps=load_protocol(cell.protocol).fps)


def _check_cell(request: RunRequest) -> None:
    from harness.app.build import check_run_request
    from harness.app.parallel.runs import check_workers
    from harness.models.protocol import load_protocol

    check_run_request(request)
    load_protocol(request.protocol)
    check_workers(request, RobotKind.SIM)


def _planned(cell: Cell) -> int:
    from harness.models.protocol import load_protocol

    return len(load_protocol(cell.protocol).trials)


def _scored(sheet: Path) -> int:
    return len(load_scoresheet(sheet).scored_attempts()) if sheet.exists() else 0


def _summary_line(sheet: Path) -> str:
    loaded = load_scoresheet(sheet)
    scored = loaded.scored_attempts()
    k = sum(1 for a in scored if a.label is Label.SUCCESS)
    return f"{k}/{len(scored)} successes"


@dataclass(frozen=True)
class OfflineResult:
    label: str
    val_loss: float | None
    action_mae: float | None
    problem: str | None = None


def offline_results(sweep: Sweep) -> dict[str, OfflineResult]:
    """Each LeRobot checkpoint's offline figures on the held-out episodes named in the sweep (cached
    beside the scoresheets: they do not change while the checkpoint does not)."""
    spec = sweep.spec.offline_eval
    if spec is None:
        return {}
    from harness.data.offline_eval import evaluate_checkpoint
    from harness.data.split import episode_indices, every_nth_split

    cache_path = sweep.folder / "offline_eval.json"
    cache: dict[str, Any] = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    root = (sweep.path.parent / spec.dataset) if not Path(spec.dataset).is_absolute() else Path(spec.dataset)
    if not (root / "meta" / "info.json").is_file():
        raise HarnessInputError(sweep.path, "offline_eval.dataset", f"{root}: not a LeRobot v3.0 dataset folder")
    results: dict[str, OfflineResult] = {}
    for checkpoint in sweep.checkpoints:
        if BuiltinPolicy.named(checkpoint.ref) is not None:
            continue
        if checkpoint.label in cache:
            results[checkpoint.label] = OfflineResult(**cache[checkpoint.label])
            continue
        episodes = spec.episodes if spec.episodes is not None else every_nth_split(episode_indices(root))["val"]
        try:
            result = evaluate_checkpoint(Path(checkpoint_folder(checkpoint.ref)), root, episodes, spec.frames)
            entry = OfflineResult(checkpoint.label, result.val_loss, result.action_mae)
        except ValueError as exc:   # inputs differ from the dataset's: said in the report, not guessed
            entry = OfflineResult(checkpoint.label, None, None, str(exc))
        results[checkpoint.label] = entry
        cache[checkpoint.label] = asdict(entry)
    from harness.storage.atomic import write_text_atomic

    write_text_atomic(cache_path, json.dumps(cache, indent=2))
    return results


def write_sweep_report(sweep: Sweep, offline: dict[str, OfflineResult]) -> Path:
    from harness.reports.blocks import to_html, write_markdown
    from harness.reports.sweep_report import SkippedCell, SweepCell, sweep_blocks, sweep_table_text

    cells, skipped = [], []
    for cell in sweep.cells:
        sheet = sheet_of(sweep, cell)
        why = not_applicable(cell)
        if why is not None:
            skipped.append(SkippedCell(cell.checkpoint.label, cell.protocol.stem, cell.condition_label, why))
        elif sheet.exists():
            cells.append(SweepCell(cell.checkpoint.label, cell.protocol.stem, cell.condition_label,
                                   load_scoresheet(sheet)))
    figures = {label: (result.val_loss, result.action_mae, result.problem) for label, result in offline.items()}
    blocks = sweep_blocks(cells, sweep.baseline.label, figures, skipped)
    title = f"Sweep {sweep.spec.name}"
    from harness.storage.atomic import write_text_atomic

    html_path = sweep.folder / "report.html"
    write_text_atomic(html_path, to_html(title, blocks))
    write_markdown(sweep.folder / "report.md", title, blocks)
    print(sweep_table_text(cells, sweep.baseline.label, figures))
    print(f"report: {html_path}")
    return html_path


def report_only(path: Path, scoresheets_dir: Path = Path("scoresheets")) -> int:
    sweep = load_sweep(path, scoresheets_dir)
    if not sweep.folder.is_dir():
        raise HarnessInputError(sweep.folder, None, "this sweep has not run yet")
    write_sweep_report(sweep, offline_results(sweep))
    return 0
