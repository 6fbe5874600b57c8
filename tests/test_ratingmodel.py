"""The rating-conditioned move model: time-control classes, the posterior over the rating, its state, and the
messages that carry it (docs/models.md s. 9)."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from analyzers.calibration import load_calibration
from analyzers.gorate import GNUGO_PROFILE, load_go_calibration
from analyzers.profiles import get_profile
from analyzers.ratingmodel import (
    RATING_GRID,
    RATING_STEP,
    UNKNOWN_CLASS,
    MoveModel,
    Prior,
    RatingLikelihood,
    class_from_clock,
    class_from_event_name,
    clock_inputs,
    parse_time_control,
    summarise,
)
from schemas import GameStarted, MoveEvent, PerceivedRating, PlayerInfo
from streamer.pipeline import GameState, PipelineConfig, apply_move, start_game

MODEL = MoveModel("test", a=(-2.95, -0.3, 0.0), b=(-0.85, 0.12), class_offsets={"blitz": 0.25, "rapid": 0.0},
                  priors={UNKNOWN_CLASS: Prior(1700, 380), "blitz": Prior(1600, 380)})


@pytest.mark.parametrize("tc,cls", [("180+2", "blitz"), ("3+2", "blitz"), ("600+5", "rapid"), ("900+10", "rapid"),
                                    ("5400+30", "classical"), ("40/7200:3600", "classical"), ("", UNKNOWN_CLASS),
                                    ("-", UNKNOWN_CLASS), ("junk", UNKNOWN_CLASS),
                                    # the players' minutes + seconds: read as seconds, each of these was blitz
                                    ("15+10", "rapid"), ("10+5", "rapid"), ("10+0", "rapid"), ("30+20", "rapid"),
                                    ("45+15", "rapid"), ("90+30", "classical"), ("120+30", "classical"),
                                    ("40/90+30", "classical"),
                                    # PGN seconds at a minute and over stay seconds
                                    ("60+0", "blitz"), ("120+1", "blitz"), ("120+12", "rapid"), ("300+3", "blitz"),
                                    ("1800+20", "rapid"), ("40/5400+30:1800+30", "classical")])
def test_time_control_classes(tc, cls):
    assert parse_time_control(tc) == cls


def test_class_from_the_first_clock():
    # the data's events: 3+2 (first clock 182 s), 10+3 (603), 15+10 (910), 25+10 (1510)
    assert [class_from_clock(c) for c in (182.0, 603.0, 910.0, 1510.0, None)] == ["blitz", "rapid", "rapid", "rapid", UNKNOWN_CLASS]


@pytest.mark.parametrize("name,cls", [("World Blitz 2019", "blitz"), ("Amber Rapidplay", "rapid"),
                                      ("chess.com Speed 2020", "blitz"), ("Tata Steel", UNKNOWN_CLASS), ("", UNKNOWN_CLASS),
                                      (None, UNKNOWN_CLASS), ("World Rapid and Blitz Championships", UNKNOWN_CLASS)])
def test_class_from_the_event_name(name, cls):
    assert class_from_event_name(name) == cls


@pytest.mark.parametrize("tc,clock,cls", [("", None, "blitz"), ("", 603.0, "rapid"), ("900+10", None, "rapid")])
def test_the_event_name_is_the_last_resort_for_the_class(tc, clock, cls):
    # a declared time control first, then the first clock; only a game with neither is classed by its event's name
    state = start_game(None, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"),
                                         event="World Blitz", time_control=tc), None, None)
    apply_move(state, MoveEvent(game_id="g", ply=0, uci="e2e4", clock=clock))
    assert state.time_class == cls


def simulate(model: MoveModel, rating: float, n: int, rng: np.random.Generator, tclass: str = UNKNOWN_CLASS):
    """n moves of a player of ``rating`` drawn from the model itself: random candidate losses, a choice by P(i | R)."""
    s, c = model.params(np.array([rating]), tclass)
    out = []
    for _ in range(n):
        k = int(rng.integers(2, 7))
        deltas = np.concatenate([[0.0], np.sort(rng.exponential(0.08, k - 1))])
        w = np.exp(-np.power(deltas / s[0], c[0]))
        out.append((deltas, int(rng.choice(k, p=w / w.sum()))))
    return out


def likelihood(model: MoveModel, moves, tclass: str = UNKNOWN_CLASS) -> RatingLikelihood:
    lik = RatingLikelihood()
    for deltas, played in moves:
        lik.add(model.move_loglik(deltas, played, tclass), tclass)
    return lik


def test_posterior_concentrates_on_the_true_rating_and_its_interval_covers_about_95_percent():
    rng = np.random.default_rng(3)
    covered, errors = 0, []
    for _ in range(200):
        truth = float(rng.normal(1700, 380))
        lik = likelihood(MODEL, simulate(MODEL, truth, 200, rng))
        est = MODEL.estimate(lik.ll, lik.n, Prior(1700, 380))
        covered += est.low <= truth <= est.high
        errors.append(est.rating - truth)
    # data drawn from the model and a prior that is the truth's distribution: the interval is exact up to noise
    assert 180 <= covered <= 198, covered
    assert abs(np.mean(errors)) < 40


def test_no_moves_is_the_prior_and_few_moves_stay_near_it_never_at_a_bound():
    prior = Prior(1700, 380)
    est = MODEL.estimate(np.zeros_like(RATING_GRID), 0, prior)
    assert est.rating == pytest.approx(1700, abs=2) and est.high - est.low == pytest.approx(2 * 1.96 * 380, rel=0.02)
    # three engine-best moves say little: the estimate moves up a little, far from the grid's ends
    lik = likelihood(MODEL, [(np.array([0.0, 0.2, 0.3]), 0)] * 3)
    est = MODEL.estimate(lik.ll, lik.n, prior)
    assert 1700 < est.rating < 2100 and est.low > RATING_GRID[0] and est.high < RATING_GRID[-1]


def test_person_effect_keeps_long_histories_from_claiming_false_precision():
    rng = np.random.default_rng(5)
    sharp = MoveModel("test", a=(-2.95, -1.5, 0.0), b=(0.0, 0.0), class_offsets={}, priors=MODEL.priors)  # moves say a lot
    lik = likelihood(sharp, simulate(sharp, 2000, 2000, rng))
    narrow = sharp.estimate(lik.ll, lik.n, Prior(1700, 380))
    wide = MoveModel(**{**sharp.__dict__, "person_sd": 150.0, "_cache": {}}).estimate(lik.ll, lik.n, Prior(1700, 380))
    assert narrow.half_width < 100 < wide.half_width
    assert wide.half_width == pytest.approx(1.96 * (150 ** -2 + 380 ** -2) ** -0.5, rel=0.15)


def test_performance_prior_is_the_declared_rating():
    rng = np.random.default_rng(7)
    lik = likelihood(MODEL, simulate(MODEL, 2400, 30, rng))
    moves_only = MODEL.estimate(lik.ll, lik.n, Prior(1700, 380))
    performance = MODEL.estimate(lik.ll, lik.n, Prior(2450, 100))
    assert abs(performance.rating - 2450) < abs(moves_only.rating - 2450)
    assert performance.half_width < moves_only.half_width


def test_the_interval_of_a_normal_posterior_is_its_normal_interval_not_half_a_step_low():
    """Quantiles interpolated between the grid cells' edges: a normal density on the grid gives mean +/- 1.96 sd to
    within an Elo (read at the grid points, both ends were 10 Elo low)."""
    for mean, sd in ((1800.0, 200.0), (1733.0, 61.0), (2410.0, 240.0)):
        post = np.exp(Prior(mean, sd).log_density())
        est = summarise(post / post.sum(), 0)
        assert est.rating == pytest.approx(mean, abs=0.5)
        assert est.low == pytest.approx(mean - 1.96 * sd, abs=1.0) and est.high == pytest.approx(mean + 1.96 * sd, abs=1.0)


def test_a_prior_narrower_than_the_grid_keeps_its_mean_between_grid_points():
    """A declared RD or an event prior of 1 Elo between two grid points is read at the grid's step: with no moves the
    estimate is the prior's mean (without the floor its mass falls on the nearer point: 1811 -> 1820), and the interval
    is as wide as the grid can tell."""
    for mean in (1811.0, 1805.0, 2791.0):
        est = MODEL.estimate(np.zeros_like(RATING_GRID), 0, Prior(mean, 1.0))
        assert est.rating == pytest.approx(mean, abs=1.0), (mean, est)
        assert est.half_width == pytest.approx(1.96 * RATING_STEP, abs=2.0)
    lik = likelihood(MODEL, simulate(MODEL, 1800, 20, np.random.default_rng(11)))
    est = MODEL.estimate(lik.ll, lik.n, Prior(1811.0, 1.0))  # the moves pull it little: the prior says nearly everything
    assert abs(est.rating - 1811.0) < RATING_STEP / 2 and est.low < est.rating < est.high


def test_likelihood_state_and_model_file_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    lik = likelihood(MODEL, simulate(MODEL, 1900, 12, rng), "blitz")
    back = RatingLikelihood.from_dict(json.loads(json.dumps(lik.to_dict())))
    assert back.n == 12 and back.tclass == "blitz" and np.array_equal(back.ll, lik.ll)
    MODEL.save(tmp_path / "m.json")
    again = MoveModel.from_dict(json.loads((tmp_path / "m.json").read_text()))
    assert again.to_dict() == MODEL.to_dict()
    assert summarise(again.posterior(lik.ll, again.prior_for("blitz")), 12) == summarise(MODEL.posterior(lik.ll, Prior(1600, 380)), 12)


def test_perceived_rating_v1_messages_still_parse():
    v1 = {"schema_version": 1, "type": "perceived", "player_id": "p", "scope": "game", "scope_id": "g", "game_id": "g",
          "ply": 10, "rating": 2000.0, "low": 1500.0, "high": 2500.0, "method": "posterior", "moves": 5, "gain_moves": 6,
          "profile": "fast", "provisional": True}
    msg = PerceivedRating.model_validate_json(json.dumps(v1))
    assert msg.schema_version == 1 and msg.performance is None
    assert PerceivedRating(**{**v1, "schema_version": 2, "method": "model", "performance": 2100.0}).schema_version == 2


def test_clock_inputs_read_a_glitch_as_the_most_a_real_clock_shows():
    """A clock far above the base (a relay's 9:59:59 for a moment, a corrected clock) is read as 4 bases left and a
    whole base spent at most, not as a time the inputs were never fitted on (the rating jumped to the grid's end)."""
    base = 180.0
    assert clock_inputs(35_999.0, None, base) == clock_inputs(4 * base, None, base)
    assert clock_inputs(0.0, 35_999.0, base) == clock_inputs(0.0, base, base)
    assert max(map(abs, clock_inputs(35_999.0, 71_998.0, base))) < 4.0
    assert clock_inputs(1.5 * base, 1.6 * base, base) == pytest.approx(  # what real clocks show is read as before
        (math.log((1.5 + 0.05) / 0.55), math.log((0.1 + 0.005) / (1 / 40 + 0.005))))


def test_clock_inputs_are_zero_at_the_references_and_unknown_clocks():
    base = 600.0
    assert clock_inputs(base / 2, base / 2 + base / 40, base) == pytest.approx((0.0, 0.0), abs=1e-12)
    assert clock_inputs(None, 300.0, base) == (0.0, 0.0) and clock_inputs(300.0, 310.0, None) == (0.0, 0.0)
    left, spent = clock_inputs(5.0, 5.0, base)  # time trouble, an instant move
    assert left < -2 and spent < -1.5
    assert clock_inputs(300.0, None, base)[1] == 0.0


def test_the_clock_shifts_the_sensitivity_as_a_class_offset_would():
    clocked = MoveModel(**{**MODEL.__dict__, "clock": (-0.5, 1.0), "_cache": {}})
    deltas = np.array([0.0, 0.05, 0.3])
    inputs = clock_inputs(10.0, 70.0, 600.0)
    shift = clocked.clock_shift(inputs)
    assert shift == pytest.approx(-0.5 * inputs[0] + 1.0 * inputs[1])
    offset = MoveModel(**{**MODEL.__dict__, "class_offsets": {"rapid": shift}, "_cache": {}})
    assert np.allclose(clocked.move_loglik(deltas, 2, "unknown", shift), offset.move_loglik(deltas, 2, "rapid"))
    again = MoveModel.from_dict(json.loads(json.dumps(clocked.to_dict())))
    assert again.clock == (-0.5, 1.0)


def test_a_game_gives_each_move_its_clocks():
    state = start_game(None, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), None, None)
    spent, bases = [], []
    for ply, (uci, clk) in enumerate([("e2e4", 182.0), ("e7e5", 181.0), ("g1f3", 170.0), ("b8c6", 150.0), ("f1c4", None)]):
        applied = apply_move(state, MoveEvent(game_id="g", ply=ply, uci=uci, clock=clk))
        spent.append(applied.clock_spent)
        bases.append(state.clock_base)
    assert spent == [None, None, 12.0, 31.0, None]
    assert bases == [182.0] * 5
    assert GameState.from_dict(json.loads(json.dumps(state.to_dict()))).last_clock == [None, 150.0]


def test_a_move_without_its_clock_leaves_the_next_moves_time_spent_unknown():
    """White's clock is missing on their second move (a relay that dropped one [%clk]): the time between White's
    first and third clocks is two moves' time, not the third move's."""
    state = start_game(None, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), None, None)
    moves = [("e2e4", 182.0), ("e7e5", 181.0), ("g1f3", None), ("b8c6", 150.0), ("f1c4", 100.0), ("g8f6", 140.0),
             ("d2d3", 95.0)]
    spent = [apply_move(state, MoveEvent(game_id="g", ply=p, uci=u, clock=c)).clock_spent for p, (u, c) in enumerate(moves)]
    assert spent == [None, None, None, 31.0, None, 10.0, 5.0]


def test_a_go_move_with_a_clock_is_the_movers():
    """Go's first player is Black: a clock on the move must not make it White's (side 0 is the first player in the
    clock bookkeeping as everywhere else)."""
    config = replace(PipelineConfig(get_profile("fast"), load_calibration("fast")),
                     go_calibration=load_go_calibration(GNUGO_PROFILE))
    state = start_game(None, GameStarted(game="go", game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")),
                       None, config)
    movers = []
    for ply, (point, clk) in enumerate([("Q16", 600.0), ("D4", 598.0), ("Q4", 590.0), ("D16", None)]):
        applied = apply_move(state, MoveEvent(game="go", game_id="g", ply=ply, uci=point, clock=clk))
        movers.append((state.player(applied.side).id, applied.white_moved, applied.clock_spent))
    assert movers == [("b", False, None), ("w", True, None), ("b", False, 10.0), ("w", True, None)]


def test_posteriors_equal_the_log_space_computation_with_and_without_the_person_effect():
    """posteriors() multiplies prior densities by the convolved likelihood directly (fewer numpy calls on the player
    step); the numbers are those of the log-space computation, also for a sharp likelihood far from a sharp prior."""
    from analyzers.ratingmodel import FLAT_PRIOR, RATING_GRID

    def in_logs(model, ll, priors):
        ll = model.temperature * ll
        if model.person_sd > 0:
            ll = np.log(np.maximum(np.exp(ll - ll.max()) @ model._kernel(), 1e-300))
        lp = np.array([p.log_density() for p in priors]) + ll
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    rng = np.random.default_rng(3)
    models = [replace(MODEL, person_sd=sd, _cache={}) for sd in (0.0, 40.0, 300.0)]
    for _ in range(400):
        centre, sharpness = rng.uniform(500, 3300), rng.uniform(0.01, 200.0)
        ll = -sharpness * ((RATING_GRID - centre) / 400) ** 2
        priors = (Prior(1750, 400), FLAT_PRIOR, Prior(float(rng.uniform(400, 3400)), float(rng.uniform(20, 400))))
        for model in models:
            assert np.abs(model.posteriors(ll, priors) - in_logs(model, ll, priors)).max() < 1e-12
