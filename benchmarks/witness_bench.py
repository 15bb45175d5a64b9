"""What the progress witness (issue 62) costs: an append and a load at 5,000 attempts.

Run at each revision to compare, in a state folder of its own:
    HARNESS_STATE_DIR=$(mktemp -d) PYTHONPATH=<checkout> .venv/bin/python benchmarks/witness_bench.py

`append` is one `add_attempt` on a loaded sheet (wall time: it is fsyncs, now three, one more than before
the witness); `load` is `load_scoresheet`'s CPU time. Prints one table row.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from harness.models.defaults import DEFAULT_START_POSE, DEFAULT_SUCCESS
from harness.models.protocol import Protocol, Trial, protocol_to_yaml
from harness.models.scoresheet import build_locked, load_scoresheet, lock_scoresheet, sha256_of
from harness.models.sheet_records import attempt_from_label

ATTEMPTS = 5000
APPENDS = 40


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="witness-bench-"))
    protocol = Protocol(name="long", task="t", start_pose=DEFAULT_START_POSE, success_definition=DEFAULT_SUCCESS,
                        trials=[Trial(index=i, dx_cm=0.0, dy_cm=0.0) for i in range(1, ATTEMPTS + APPENDS + 1)])
    protocol_path = tmp / "long.yaml"
    protocol_path.write_text(protocol_to_yaml(protocol))
    sheet = lock_scoresheet(tmp / "sheet.yaml", build_locked(protocol, protocol_path, "expert", "sim"), {})
    for index in range(1, ATTEMPTS + 1):   # built in memory, written once: setup, not what is timed
        attempt = attempt_from_label("success", trial_index=index, attempt=1, started_at="t0", ended_at="t1",
                                     duration_s=1.0)
        previous = sheet.records[-1].chain_sha256 if sheet.records else sheet.lock["sha256"]
        body = attempt.model_dump(mode="json", exclude={"chain_sha256"})
        sheet.records.append(attempt.model_copy(update={"chain_sha256": sha256_of({"prev": previous, "record": body})}))
    sheet.save()
    loaded = load_scoresheet(sheet.path)
    appends = []
    for index in range(ATTEMPTS + 1, ATTEMPTS + APPENDS + 1):
        attempt = attempt_from_label("success", trial_index=index, attempt=1, started_at="t0", ended_at="t1",
                                     duration_s=1.0)
        started = time.perf_counter()
        loaded.add_attempt(attempt)
        appends.append(time.perf_counter() - started)
    loads = []
    for _ in range(5):
        started = time.process_time()
        load_scoresheet(sheet.path)
        loads.append(time.process_time() - started)
    appends.sort()
    print("| attempts | append median | append p90 | load CPU median |")
    print("|---|---|---|---|")
    p90 = appends[int(0.9 * len(appends))]
    print(f"| {ATTEMPTS:,} | {statistics.median(appends) * 1e3:.1f} ms | {p90 * 1e3:.1f} ms "
          f"| {statistics.median(loads) * 1e3:.0f} ms |")


if __name__ == "__main__":
    main()
