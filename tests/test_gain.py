"""Ferreira's gains and histograms against the paper's Game of the Century figures (docs/models.md s. 1)."""

import math

import numpy as np
import pytest

from analyzers.gain import (
    MATE_CP,
    GainHistogram,
    expected_from_difference,
    expected_score,
    gains_from_evals,
    rating_difference,
    score_cp,
)

BYRNE = ("-0.01 -0.05 -0.13 -0.02 -0.17 -0.09 0 -0.04 -0.03 0.06 -1.37 -0.03 0.01 -0.57 0.04 -0.09 -0.04 -5.56 -0.02 "
         "0 0 0 0 -0.03 -0.55 -2.60 -0.42 -1.35 0 0.43 -0.74 -0.47 0 -10.25 -11.18 0 0 0 0 0 0")
FISCHER = ("0 -0.16 -0.11 -0.04 -0.10 0.02 -0.04 -0.13 -0.03 -0.04 0 -0.01 0.01 -0.38 0.13 -0.26 -0.11 -0.09 0 0 0.18 "
           "0 -0.02 0.03 -0.17 0.21 0.17 -0.42 0 0.87 0.15 0 0.47 3.73 0 0 0 0 0 0 0")


def hist(pawns: str) -> GainHistogram:
    return GainHistogram(round(float(x) * 100) for x in pawns.split())


def test_game_of_the_century_figures():
    byrne, fischer = hist(BYRNE), hist(FISCHER)
    assert byrne.count == fischer.count == 41
    assert byrne.zeros == 13
    assert byrne.mean / 100 == pytest.approx(-0.86, abs=0.005)
    assert fischer.mean / 100 == pytest.approx(0.094, abs=0.0005)
    assert expected_score(byrne, fischer) == pytest.approx(0.345, abs=0.0005)
    assert expected_score(fischer, byrne) == pytest.approx(0.655, abs=0.0005)
    assert round(rating_difference(expected_score(fischer, byrne))) == 113


def test_expected_scores_sum_to_one_and_match_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(50):
        a = GainHistogram(rng.integers(-300, 50, rng.integers(1, 200)).tolist())
        b = GainHistogram(rng.integers(-300, 50, rng.integers(1, 200)).tolist())
        assert expected_score(a, b) + expected_score(b, a) == pytest.approx(1.0, abs=1e-12)
        # the cross-correlation definition, literally: sum over n of P(X - Y = n) weighted 1, 1/2, 0
        fa, fb = a.pmf(), b.pmf()
        p = sum(pa * pb * (1.0 if x > y else 0.5 if x == y else 0.0) for x, pa in fa.items() for y, pb in fb.items())
        assert expected_score(a, b) == pytest.approx(p, abs=1e-12)


def test_engine_spike_cases():
    spike = GainHistogram.engine()
    assert expected_score(spike, spike) == 0.5
    assert rating_difference(0.5) == 0.0
    worse = GainHistogram([-10, -20, 0, 0])
    assert expected_score(worse, spike) == pytest.approx(0.25)
    assert worse.score_vs_engine() == expected_score(worse, spike)
    better = GainHistogram([5, 0])
    assert better.score_vs_engine() == pytest.approx(0.75) == expected_score(better, spike)
    assert rating_difference(0.0) == -math.inf and rating_difference(1.0) == math.inf


def test_rating_difference_round_trip():
    for d in (-400.0, -113.0, 0.0, 57.5, 700.0):
        assert rating_difference(expected_from_difference(d)) == pytest.approx(d, abs=1e-6)
    with pytest.raises(ValueError):
        rating_difference(1.2)


def test_gains_from_evals_signs_and_mate_clamp():
    # White plays a move that drops 30 cp, Black a move that drops 50 cp (for Black), then White mates
    evals = [20, -10, 40, score_cp(None, 3)]
    assert gains_from_evals(evals) == [-30, -50, MATE_CP - 40]
    assert gains_from_evals([0, 5000]) == [MATE_CP]  # clamp beyond the mate value
    assert score_cp(None, 0) == -MATE_CP  # a checkmated side to move
    assert score_cp(None, -2) == -MATE_CP
    assert gains_from_evals([10, 30], white_first=False) == [-20]


def test_histogram_state_merge_and_stats():
    h = GainHistogram([-5, 0, 0, 12, -100])
    assert GainHistogram.from_dict(h.to_dict()) == h
    m = h.merge(GainHistogram([0, -1]))
    assert m.count == 7 and m.zeros == 3 and m.positives == 1 and h.count == 5
    assert h.variance == pytest.approx(np.var([-5, 0, 0, 12, -100]))


def test_expected_score_is_fast_on_2000_moves():
    import time
    rng = np.random.default_rng(0)
    a = GainHistogram(rng.integers(-500, 30, 2000).tolist())
    b = GainHistogram(rng.integers(-500, 30, 2000).tolist())
    t = time.perf_counter()
    for _ in range(20):
        expected_score(a, b)
    assert (time.perf_counter() - t) / 20 < 0.01
