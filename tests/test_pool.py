"""Ordo-style pool ratings: expectancy table, draw model, recovery by simulation, unratable pools."""

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from analyzers.errors import ConvergenceError, UnratablePool
from analyzers.pool import draw_probability, expectancy_to_points, fit_pool, points_to_expectancy, wdl


@pytest.mark.parametrize("p,points", [(0.60, 71.1), (0.64, 100.8), (0.70, 148.5), (0.80, 242.9), (0.90, 385.1), (0.99, 805.3)])
def test_expectancy_table(p, points):
    assert round(expectancy_to_points(p), 1) == points
    assert points_to_expectancy(expectancy_to_points(p)) == pytest.approx(p)


def test_draw_model_figures():
    w, d, loss = wdl(0.76, 0.5)
    assert (round(d, 4), round(w, 4), round(loss, 4)) == (0.3648, 0.5776, 0.0576)
    assert round(float(draw_probability(0.64, 0.6)), 4) == 0.5426
    assert round(float(draw_probability(0.76, 0.2)), 4) == 0.1637


def simulate_games(true, n_games, rng, white_adv=0.0, deq=0.5):
    names = list(true)
    beta = np.log(0.76 / 0.24) / 202
    games = []
    for _ in range(n_games):
        a, b = rng.choice(len(names), 2, replace=False)
        p = 1 / (1 + np.exp(-beta * (true[names[a]] - true[names[b]] + white_adv)))
        w, d, _ = wdl(p, deq)
        u = rng.random()
        games.append((names[a], names[b], 1.0 if u < w else 0.5 if u < w + d else 0.0))
    return games


def test_fit_recovers_simulated_ratings_within_reported_errors():
    inside = total = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        true = {f"p{i}": float(v) for i, v in enumerate(rng.normal(2300, 150, 10))}
        try:
            res = fit_pool(simulate_games(true, 500, rng), simulations=200, seed=seed)
        except UnratablePool:
            continue
        mean_true = np.mean(list(true.values()))
        for p, v in true.items():
            total += 1
            inside += abs(res.ratings[p] - (v - mean_true + 2300)) <= res.errors[p]
    assert total >= 250
    assert inside / total >= 0.90, inside / total


def test_white_advantage_auto_recovers_simulated_advantage():
    rng = np.random.default_rng(42)
    true = {f"p{i}": float(v) for i, v in enumerate(rng.normal(2300, 100, 10))}
    res = fit_pool(simulate_games(true, 3000, rng, white_adv=40.0), white_advantage="auto", draw_rate="auto")
    assert res.white_advantage == pytest.approx(40.0, abs=15.0)
    assert res.draw_rate == pytest.approx(0.5, abs=0.08)
    assert np.mean(list(res.ratings.values())) == pytest.approx(2300)


def test_perfect_scores_and_disconnected_pools_are_reported():
    with pytest.raises(UnratablePool) as e:
        fit_pool([("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 0.5)])
    assert e.value.perfect == ["a"]
    with pytest.raises(UnratablePool) as e:
        fit_pool([("a", "b", 0.5), ("c", "d", 0.5)])
    assert len(e.value.components) == 2
    # a pool of many events that never met: the largest groups named, the count of the rest (all 60 were listed)
    games = [(f"e{k}a", f"e{k}b", 0.5) for k in range(59)] + [("x", "y", 0.5), ("y", "z", 0.5), ("z", "x", 0.5)]
    with pytest.raises(UnratablePool) as e:
        fit_pool(games)
    assert len(e.value.components) == 60 and str(e.value).count("players:") == 5
    assert "splits into 60 groups" in str(e.value) and "3 players: " in str(e.value) and str(e.value).endswith("55 more groups")
    # a group that took no points off another cannot be placed either
    with pytest.raises(UnratablePool):
        fit_pool([("a", "b", 0.5), ("c", "d", 0.5), ("a", "c", 1.0), ("b", "d", 1.0), ("a", "d", 1.0), ("b", "c", 1.0)])


def test_perfect_scores_are_set_aside_repeatedly_and_the_rest_is_rated():
    """As Ordo purges them: a won all, d lost all; once d's game is gone, e's only game left is a loss to b, so e goes
    too (reported with the whole pool's score, 1/2). An anchored player stays."""
    from analyzers.pool import purge_perfect

    games = [("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 0.5), ("c", "b", 1.0), ("e", "d", 1.0), ("e", "b", 0.0)]
    rated, purged = purge_perfect(games)
    assert purged == {"a": (2.0, 2), "d": (0.0, 1), "e": (1.0, 2)} and list(purged) == ["a", "d", "e"]
    assert rated == [("b", "c", 0.5), ("c", "b", 1.0)]
    assert set(fit_pool(rated).ratings) == {"b", "c"}
    rated, purged = purge_perfect(games, anchored=["a"])
    assert list(purged) == ["d", "e"] and ("a", "b", 1.0) in rated


def test_anchor_pins_a_rating():
    games = [("a", "b", 1.0), ("b", "a", 0.5), ("a", "c", 0.5), ("c", "b", 0.0), ("b", "c", 0.5), ("c", "a", 1.0)]
    res = fit_pool(games, anchors={"a": 2700.0})
    assert res.ratings["a"] == 2700.0


def test_a_pool_whose_every_player_is_anchored_keeps_the_anchors_and_can_still_fit_whites_advantage():
    """Nothing left to fit (every player anchored, White's advantage given): the anchors are the ratings, with
    simulated errors of 0; this was a numpy ValueError from an empty Newton step (`kibitz pool` printed a traceback
    when a pool's perfect scores left only anchored players)."""
    games = [("a", "b", 1.0), ("b", "a", 1.0), ("a", "b", 0.5), ("b", "a", 1.0)]
    res = fit_pool(games, anchors={"a": 2500.0, "b": 2400.0}, simulations=20)
    assert res.ratings == {"a": 2500.0, "b": 2400.0} and res.white_advantage == 0.0
    assert all(e == 0.0 for e in res.errors.values())
    auto = fit_pool(games, anchors={"a": 2500.0, "b": 2400.0}, white_advantage="auto")
    assert auto.ratings == {"a": 2500.0, "b": 2400.0} and auto.white_advantage > 100  # White won 3.5 of 4


def test_whites_advantage_that_the_games_cannot_tell_apart_is_a_reason_not_a_linalg_error():
    """One pair, White always the same player: its rating edge and White's advantage are one number. Fitting both
    was a numpy LinAlgError traceback (and in a simulated replay); it is an UnratablePool saying what to do."""
    games = [("a", "b", 0.5), ("a", "b", 1.0), ("a", "b", 0.0)]
    with pytest.raises(UnratablePool, match="cannot tell White's advantage from the players' ratings"):
        fit_pool(games, white_advantage="auto")
    assert fit_pool(games, white_advantage=30.0).ratings["a"] < fit_pool(games).ratings["a"]  # given, it is used
    # White's results that run the fit off to infinity: the reason says what to do, and numpy warns of nothing
    runaway = [("b", "d", 0.5), ("b", "c", 0.0), ("c", "d", 1.0), ("b", "d", 0.0), ("d", "c", 0.0), ("c", "d", 0.0), ("b", "d", 1.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConvergenceError, match="give it a value instead"):
            fit_pool(runaway, white_advantage="auto")
        assert fit_pool(runaway, white_advantage=0.0).ratings["c"] > fit_pool(runaway, white_advantage=0.0).ratings["b"]
    both = games + [("b", "a", 0.5)]  # once the colours alternate, both are fitted
    assert fit_pool(both, white_advantage="auto", simulations=30).simulations > 0


def test_kibitz_pool_leaves_a_game_against_oneself_out_and_says_so(tmp_path):
    """A game with one player on both sides moved only White's advantage (and with it fitted and simulated, was a
    LinAlgError traceback): left out, as the service refuses it, with a line naming it."""
    pgn = tmp_path / "pool.pgn"
    pgn.write_text("".join(f'[White "{w}"]\n[Black "{b}"]\n[Result "{r}"]\n\n1. e4 e5 {r}\n\n' for w, b, r in
                           [("A", "A", "1-0"), ("A", "B", "1/2-1/2"), ("B", "A", "1/2-1/2"), ("A", "B", "1-0"), ("B", "A", "1-0")]))
    p = subprocess.run([sys.executable, "-m", "streamer.cli", "pool", str(pgn), "--white-advantage", "auto",
                        "--draw-rate", "auto", "--simulations", "20", "--json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "1 game of A against A left out: a game against oneself is not rated" in p.stderr
    out = json.loads(p.stdout)
    assert {r["player"]: r["games"] for r in out["players"]} == {"A": 4, "B": 4}
    assert out["white_advantage"] > 0  # White won the two decisive games of the four, and drew the others


def test_london_2011_order_matches_standings(london):
    from streamer.ingest import read_pgn_games
    games = [(g.white.name, g.black.name, g.white_score) for g in read_pgn_games(london)]
    res = fit_pool(games)
    order = res.ranking()
    assert order[0] == "Kramnik,V" and order[-1] == "Adams,Mi"
    pts = [res.points[p] for p in order]
    assert pts == sorted(pts, reverse=True)
