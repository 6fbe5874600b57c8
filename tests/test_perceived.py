"""Ferreira's Algorithms 2-4 and the live rating's interval."""

import math

import numpy as np
import pytest

from analyzers.errors import RatingError
from analyzers.gain import GainHistogram
from analyzers.perceived import engine_strength, histogram_diffs, live_rating, tournament_ratings


def test_algorithm2_recovers_consistent_differences_and_keeps_the_mean():
    true = {"a": 2800.0, "b": 2700.0, "c": 2650.0, "d": 2500.0}
    elo = {"a": 2600.0, "b": 2750.0, "c": 2700.0, "d": 2650.0}
    diffs = {(i, j): true[i] - true[j] for i in true for j in true if i != j}
    r = tournament_ratings(diffs, elo)
    assert sum(r.values()) / 4 == pytest.approx(sum(elo.values()) / 4)
    for i in true:
        for j in true:
            assert r[i] - r[j] == pytest.approx(true[i] - true[j], abs=1e-6)


def test_algorithm2_least_squares_on_noisy_round_robin():
    rng = np.random.default_rng(3)
    names = list(range(8))
    elo = {i: 2500.0 + 10 * i for i in names}
    diffs = {}
    for i in names:
        for j in names:
            if i < j:
                d = rng.normal(0, 80)
                diffs[(i, j)], diffs[(j, i)] = d, -d
    r = tournament_ratings(diffs, elo)
    # normal equations of min sum (r_i - r_j - d_ij)^2: r_i - mean_j r_j... check the gradient vanishes
    for i in names:
        grad = sum(r[i] - r[j] - diffs[(i, j)] for j in names if j != i)
        assert abs(grad) < 1e-5


def test_algorithm2_two_player_match_converges():
    r = tournament_ratings({("x", "y"): 60.0, ("y", "x"): -60.0}, {"x": 2700, "y": 2700})
    assert r["x"] - r["y"] == pytest.approx(60.0) and r["x"] + r["y"] == pytest.approx(5400)


def test_algorithm2_rejects_infinite_difference():
    with pytest.raises(RatingError):
        tournament_ratings({("x", "y"): math.inf}, {"x": 1, "y": 2})


def test_histogram_diffs_feeds_algorithm2():
    hs = {"good": GainHistogram([0, 0, -5, 3]), "bad": GainHistogram([-50, -200, 0, -30])}
    d = histogram_diffs(hs)
    assert d[("good", "bad")] == pytest.approx(-d[("bad", "good")]) and d[("good", "bad")] > 0


def test_algorithm3_engine_strength():
    # players whose score against the spike implies exactly 3000 - d_i = engine: recover 3000
    hs, elo = {}, {}
    for i, (zeros, losses) in enumerate([(30, 70), (45, 55), (20, 80)]):
        h = GainHistogram([0] * zeros + [-10] * losses)
        p = h.score_vs_engine()
        from analyzers.gain import rating_difference
        hs[i], elo[i] = h, 3000 + rating_difference(p)
    est = engine_strength(hs, elo)
    assert est.rating == pytest.approx(3000)
    assert est.n == 3 and est.low <= est.rating <= est.high


def test_live_rating_paper_exact_and_interval_shrinks():
    h = GainHistogram([0] * 30 + [-20] * 60 + [5] * 10)
    raw = live_rating(h, 2900, prior=0)
    from analyzers.gain import rating_difference
    assert raw.rating == pytest.approx(2900 + rating_difference(0.25))
    small = live_rating(GainHistogram([0, -20, 5]), 2900)
    big = live_rating(GainHistogram([0] * 300 + [-20] * 600 + [5] * 100), 2900)
    assert small.low < small.rating < small.high
    assert (big.high - big.low) < (small.high - small.low) / 5
    # after one perfect move the paper's p is 1 (an infinite rating); the interval keeps it finite and wide
    one = live_rating(GainHistogram([3]), 2900)
    assert math.isfinite(one.rating) and one.high - one.low > 300


def test_live_rating_interval_covers_truth():
    # simulate players with a known score against the spike and check the 95 % interval's coverage
    rng = np.random.default_rng(11)
    covered = 0
    runs = 400
    for _ in range(runs):
        probs = rng.dirichlet([4, 3, 1])  # loss, zero, positive
        true_p = 0.5 * probs[1] + probs[2]
        moves = rng.choice([-30, 0, 10], size=60, p=probs)
        est = live_rating(GainHistogram(moves.tolist()), 2800)
        from analyzers.gain import rating_difference
        covered += est.low <= 2800 + rating_difference(true_p) <= est.high
    assert covered / runs >= 0.90
