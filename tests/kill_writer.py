"""Child process for the kill test: scores pending trials as fast as it can, announcing each commit."""

from __future__ import annotations

import sys

from harness.models.scoresheet import load_scoresheet
from harness.models.sheet_records import attempt_from_label

sheet = load_scoresheet(sys.argv[1])
for trial in sheet.pending_trials():
    number = sheet.next_attempt_number(trial)
    common = {"trial_index": trial, "attempt": number, "started_at": "t0", "ended_at": "t1", "duration_s": 1.0}
    if trial % 5 == 0 and number == 1:
        sheet.add_attempt(attempt_from_label("void", void_reason="camera dropout", **common))
        print(f"void {trial}", flush=True)
        number += 1
        common["attempt"] = number
    label = "success" if trial % 3 else "no_grasp"
    sheet.add_attempt(attempt_from_label(label, **common))
    print(f"scored {trial}", flush=True)
