"""The twin's fidelity statistics against a hand computation on a small table (issue 43).

Ten real attempts and their twins:

    real \\ twin   success  no_grasp  dropped  wrong_placement
    success          4         .        .          1
    no_grasp         1         2        .          .
    dropped          .         1        .          .
    wrong_place.     .         .        .          1

Labels agree on 7/10, outcomes (success or not) on 8/10. Marginals real S5 N3 D1 W1, twin S5 N3 D0 W2:
p_e = (25 + 9 + 0 + 2) / 100 = 0.36, kappa = (0.7 - 0.36) / 0.64 = 0.53125; outcomes p_e = 0.5, kappa 0.6.
Across four sheets, real (0.9, 0.6, 0.5, 0.2) against twin (0.8, 0.4, 0.7, 0.1): deviations (.35, .05, -.05,
-.35) and (.3, -.1, .2, -.4): r = 0.23 / sqrt(0.25 * 0.30) = 0.839839; the twin swaps sheets 2 and 3 (real gap
0.1), so the maximum rank violations are (0, .1, .1, 0) and MMRV = 0.05.
"""

from __future__ import annotations

import math

import pytest

from harness.models.fidelity import PairedAttempt, cohen_kappa, fidelity, mmrv, pearson_r, same_ranking
from harness.models.taxonomy import Label

S, N, D, W = Label.SUCCESS, Label.NO_GRASP, Label.GRASPED_THEN_DROPPED, Label.WRONG_PLACEMENT
TABLE = [(S, S)] * 4 + [(N, N)] * 2 + [(N, S), (D, N), (S, W), (W, W)]


def _pairs() -> list[PairedAttempt]:
    return [PairedAttempt(i + 1, real, twin) for i, (real, twin) in enumerate(TABLE)]


def test_agreement_kappa_and_confusion_match_the_hand_computation() -> None:
    result = fidelity(_pairs())
    assert (result.labels.agreed, result.labels.n) == (7, 10)
    assert (result.outcomes.agreed, result.outcomes.n) == (8, 10)
    assert result.kappa == pytest.approx(0.53125)
    assert result.outcome_kappa == pytest.approx(0.6)
    low, high = result.labels.interval
    assert low == pytest.approx(0.3968, abs=1e-3) and high == pytest.approx(0.8922, abs=1e-3)   # Wilson 7/10
    assert result.confusion[N][S] == 1 and result.confusion[S][S] == 4 and result.confusion[D][D] == 0
    assert [p.trial_index for p in result.disagreements] == [7, 8, 9]


def test_missed_and_invented_failure_modes_are_counted_per_mode() -> None:
    shifts = {shift.label: shift for shift in fidelity(_pairs()).modes}
    assert (shifts[N].real, shifts[N].twin, shifts[N].missed, shifts[N].invented) == (3, 3, 1, 1)
    assert (shifts[D].real, shifts[D].twin, shifts[D].missed, shifts[D].invented) == (1, 0, 1, 0)
    assert (shifts[W].real, shifts[W].twin, shifts[W].missed, shifts[W].invented) == (1, 2, 0, 1)


def test_pearson_mmrv_and_ranking_across_sheets_match_the_hand_computation() -> None:
    real, twin = [0.9, 0.6, 0.5, 0.2], [0.8, 0.4, 0.7, 0.1]
    assert pearson_r(real, twin) == pytest.approx(0.23 / math.sqrt(0.075))
    assert mmrv(real, twin) == pytest.approx(0.05)
    assert same_ranking(real, twin) is False
    assert mmrv(real, [0.95, 0.5, 0.45, 0.0]) == 0.0 and same_ranking(real, [0.95, 0.5, 0.45, 0.0])


def test_undefined_statistics_say_so_instead_of_a_number() -> None:
    assert pearson_r([0.5, 0.5], [0.2, 0.7]) is None        # no spread on the real side
    assert pearson_r([0.5], [0.5]) is None and mmrv([0.5], [0.5]) is None
    assert cohen_kappa([(S, S), (S, S)]) is None             # one category throughout: chance agreement is total
    assert cohen_kappa([]) is None
    with pytest.raises(ValueError):
        fidelity([PairedAttempt(1, Label.VOID, S)])
