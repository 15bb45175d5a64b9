"""The real-arm placement flags are read and checked before anything is locked: a bad one is one line naming
the flag, exit 2, and no scoresheet, lock or runs folder left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from tests.helpers import small_protocol_copy


@pytest.mark.parametrize(("flags", "named"), [
    (["--placement-tolerance", "half,a-degree"], "--placement-tolerance"),
    (["--placement-tolerance", "nan,10"], "--placement-tolerance"),
    (["--placement-tolerance", "0.5,inf"], "--placement-tolerance"),
    (["--bowl-calibration", "calibration/missing.yaml"], "--bowl-calibration"),
    (["--bowl-calibration", "garbage.yaml"], "--bowl-calibration"),
    (["--bowl-calibration", "notes.yaml"], "--bowl-calibration"),
    (["--trained-spot", "spot.png"], "--trained-spot"),
])
def test_a_bad_placement_flag_is_one_line_naming_it_and_nothing_is_written(workdir: Path, capsys, flags,
                                                                          named) -> None:
    protocol = small_protocol_copy(workdir / "protocols")
    (workdir / "garbage.yaml").write_bytes(b"\x00\xff{{[ not: yaml: at all")
    (workdir / "notes.yaml").write_text("rim: [1, 2, 3]\n")   # YAML, but no calibration
    before = sorted(p for p in workdir.rglob("*") if p.is_file())
    code = main(["run", str(protocol), "--headless", *flags])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
    assert sorted(p for p in workdir.rglob("*") if p.is_file()) == before
    assert not (workdir / "scoresheets").exists() and not (workdir / "runs").exists()
