"""The learned combination on top of the move model (analyzers/combination.py, docs/models.md s. 10)."""

import json
import math

import numpy as np
import pytest

from analyzers.calibration import load_calibration
from analyzers.combination import FEATURES, MIN_CLOCKED_SHARE, Combination, MoveFeatures, ScopeFeatures, load_combination, phi
from analyzers.errors import CalibrationError
from analyzers.eventpool import load_event_pool
from analyzers.profiles import get_profile
from analyzers.ratingmodel import RATING_GRID, load_move_model
from schemas import Candidate, MoveAssessment, PerceivedRating
from streamer.pipeline import PipelineConfig, PlayerState, ScopeStats, apply_player_event, move_clock_inputs

COMB = load_combination("fast")
MODEL = load_move_model("fast")


def test_running_features_are_the_means_of_the_moves():
    rng = np.random.default_rng(2)
    moves = []
    for _ in range(40):
        deltas = np.concatenate([[0.0], np.sort(rng.exponential(0.08, int(rng.integers(1, 6))))])
        moves.append((deltas, int(rng.integers(0, deltas.size)), (float(rng.normal()), float(rng.normal(-1, 1.5)))))
    f = ScopeFeatures()
    for d, i, clock in moves:
        f.add(MoveFeatures.of(d, i, clock, True))
    x = f.vector(1800.0, 300.0, "rapid")
    played = np.array([d[i] for d, i, _ in moves])
    second = np.array([d[1] if d.size > 1 else 1.0 for d, _, _ in moves])
    spent = np.array([c[1] for _, _, c in moves])
    only = second > 0.1
    expect = {"log moves": math.log(41), "mean delta": played.mean(), "mean sqrt delta": np.sqrt(played).mean(),
              "best": (played == 0).mean(), "delta>0.05": (played > 0.05).mean(), "second's loss": second.mean(),
              "playable": np.mean([(d < 0.05).sum() for d, _, _ in moves]), "model mean": 1800.0, "model sd": 300.0,
              "x_spent mean": spent.mean(), "x_spent sd": spent.std(), "last x_left": moves[-1][2][0],
              "fast moves": (spent < -2).mean(), "best when only one": (played[only] == 0).mean(),
              "class rapid": 1.0, "class blitz": 0.0}
    for name, value in expect.items():
        assert x[FEATURES.index(name)] == pytest.approx(value), name
    back = ScopeFeatures.from_dict(json.loads(json.dumps(f.to_dict())))
    assert np.array_equal(back.vector(1800.0, 300.0, "rapid"), x)
    older = {k: v for k, v in f.to_dict().items() if k != "timed"}  # a state stored before the time-spent count
    assert np.array_equal(ScopeFeatures.from_dict(older).vector(1800.0, 300.0, "rapid"), x)


def test_shipped_combination_matches_this_kibitz_and_its_interval_narrows_with_moves():
    assert COMB is not None and COMB.features == FEATURES and COMB.model_fitted_on == MODEL.fitted_on
    x = ScopeFeatures().vector(1800.0, 500.0, "rapid")
    assert COMB.predict(x) == pytest.approx(np.asarray(COMB.weights) @ phi(x) + COMB.intercept)
    few, many = (COMB.estimate(x, n, 0.95) for n in (1, 200))
    assert few.low < few.rating < few.high and many.half_width < few.half_width
    band = COMB.estimate(x, 1, 0.68)
    assert few.low < band.low < band.high < few.high
    with pytest.raises(ValueError):
        COMB.estimate(x, 1, 0.999)  # beyond the stored tails: an error, not a made-up width


def test_a_combination_for_other_features_is_refused():
    d = COMB.to_dict()
    with pytest.raises(CalibrationError):
        Combination.from_dict({**d, "features": list(FEATURES[:-1])})
    with pytest.raises(CalibrationError):
        Combination.from_dict({**d, "weights": d["weights"][:-1]})


def assessment(ply: int, played_rank: int, clock: float) -> MoveAssessment:
    return MoveAssessment(
        game_id="g", ply=ply, player_id="p", color="white" if ply % 2 == 0 else "black", uci="e2e4",
        eval_before=20, eval_after=20, gain=0, candidates=[Candidate(uci="e2e4", cp=20), Candidate(uci="d2d4", cp=-40),
                                                          Candidate(uci="g1f3", cp=-150)],
        played_rank=played_rank, counted=True, engine="stockfish", limits=get_profile("fast").limits.key, time_class="rapid", clock=clock,
        clock_spent=20.0, clock_base=900.0, reference_rating=2000.0,
    )


def test_the_player_step_publishes_the_combination_with_the_move_model_beside_it():
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, combination=COMB)
    state, out = None, []
    for k in range(12):
        state, o = apply_player_event(state, assessment(2 * k, k % 2, 880.0 - 20 * k), config)
        out += o
    msgs = [m for m in out if isinstance(m, PerceivedRating)]
    assert len(msgs) == 12 and all(m.method == "combination" and m.schema_version == 5 and m.game == "chess" for m in msgs)
    last = msgs[-1]
    assert last.low < last.band_low < last.rating < last.band_high < last.high
    assert last.model_rating is not None and last.performance is not None and last.moves == 12
    # the published rating is the combination's prediction from the scope's running state
    game = state.games["g"]
    flat = MODEL.posterior(game.rating.ll, MODEL.prior_for("rapid")._replace(sd=math.inf))
    mean = float(flat @ RATING_GRID)  # written out here, not through combination.moments
    x = game.feats.vector(mean, float(np.sqrt(flat @ (RATING_GRID - mean) ** 2)), "rapid")
    assert last.rating == pytest.approx(float(COMB.predict(x)), abs=0.06)
    # the state round-trips with its features
    again = PlayerState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert again.games["g"].feats.to_dict() == game.feats.to_dict()
    assert ScopeStats.from_dict({k: v for k, v in game.to_dict().items() if k != "feats"}).feats.n == 0  # older state


def test_without_a_combination_the_move_model_is_published():
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    _, out = apply_player_event(None, assessment(0, 0, 880.0), config)
    assert out[0].method == "model" and out[0].model_rating is None


def test_perceived_rating_v2_messages_still_parse():
    v2 = {"schema_version": 2, "type": "perceived", "player_id": "p", "scope": "game", "scope_id": "g", "game_id": "g",
          "ply": 10, "rating": 2000.0, "low": 1500.0, "high": 2500.0, "method": "model", "moves": 5, "gain_moves": 6,
          "profile": "fast", "provisional": True, "band_low": 1800.0, "band_high": 2200.0}
    msg = PerceivedRating.model_validate_json(json.dumps(v2))
    assert msg.schema_version == 2 and msg.model_rating is None


def test_a_clock_missing_here_and_there_keeps_the_combination_and_reads_the_clocks_that_came():
    """A relay that drops one [%clk] switched the scope to the move model for the rest of the game, its event and the
    player's history (the published rating moved by up to 190 at that move). Now the clock inputs are means over the
    moves whose clock came, the combination rates a scope while at least MIN_CLOCKED_SHARE of its moves had one, and
    where fewer did the move model is published (the combination learned clocked games)."""
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, combination=COMB)
    clocked = [assessment(2 * k, k % 2, 880.0 - 20 * k).model_copy(update={"clock_spent": 5.0 + 7 * k}) for k in range(12)]
    # the move after the gap has its clock but not its time spent (the game step's bookkeeping)
    gaps = {9: {"clock": None, "clock_spent": None}, 10: {"clock_spent": None}}
    state, gapped = None, []
    for k, a in enumerate(clocked):
        state, out = apply_player_event(state, a.model_copy(update=gaps.get(k, {})), config)
        gapped.append(out[0])
    assert all(m.method == "combination" for m in gapped) and gapped[-1].moves == 12
    feats = state.games["g"].feats
    assert (feats.n, feats.clocked, feats.timed) == (12, 11, 10)
    alone = ScopeFeatures()  # the clock inputs of the moves whose clock (and time spent) came, alone
    for k, a in enumerate(clocked):
        if k != 9:
            alone.add(MoveFeatures.of([0.0, 0.1, 0.3], a.played_rank or 0, move_clock_inputs(a), True, k != 10))
    for name in ("x_spent mean", "x_spent sd", "last x_left", "fast moves"):
        i = FEATURES.index(name)
        assert feats.vector(1800.0, 300.0, "rapid")[i] == pytest.approx(alone.vector(1800.0, 300.0, "rapid")[i]), name
    # the clocks stop after 8 moves: the combination while 8 is at least MIN_CLOCKED_SHARE of the moves, then the model
    state, methods = None, []
    for k, a in enumerate(clocked):
        state, o = apply_player_event(state, a if k < 8 else a.model_copy(update={"clock": None, "clock_spent": None}), config)
        methods.append(o[0].method)
    expect = ["combination" if min(k + 1, 8) >= MIN_CLOCKED_SHARE * (k + 1) else "model" for k in range(12)]
    assert methods == expect and "model" in expect
    assert o[0].moves == 12 and o[0].model_rating is None


def test_before_the_first_counted_move_the_prior_is_published_with_its_width():
    """A game's book plies count no move: the game scope published Ferreira's gain reading of one to eight book moves
    (2161 [325, 3196] after one in the demo), then jumped to the move model's estimate at the first counted move.
    Now it publishes what is known then: the event prior when the pool stage attached one, else the population prior
    of the moves' time-control class, with its own 95 % interval (under the event prior scaled by step 4's factor
    before the first counted move), and the declared rating as the performance estimate; the gain reading stays in
    gain_*."""
    from schemas import EventPrior

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, combination=COMB,
                            event_pool=load_event_pool("fast"))
    book = assessment(0, 0, 880.0).model_copy(update={"counted": False})
    state, out = apply_player_event(None, book, config)
    prior = MODEL.prior_for("rapid")
    (m,) = out
    assert (m.method, m.moves, m.gain_moves, m.time_class) == ("model", 0, 1, "rapid")
    assert m.prior == f"rapid {prior.mean:.0f} +/- {prior.sd:.0f}" and m.gain_rating is not None
    assert abs(m.rating - prior.mean) < 1 and abs((m.high - m.low) / 2 - 1.96 * prior.sd) < 15
    assert abs((m.band_high - m.band_low) / 2 - prior.sd) < 15 and abs(m.performance - 2000.0) < 1
    ev = EventPrior(mean=2210.0, sd=250.0, player_games=14)
    state, out = apply_player_event(state, book.model_copy(update={"ply": 2, "event_prior": ev}), config)
    (m,) = out
    assert m.prior == "event (14 player-games) 2210 +/- 250" and abs(m.rating - 2210.0) < 1
    assert abs((m.high - m.low) / 2 - 1.96 * 250.0 * config.event_pool.prior_scale) < 15 and m.moves == 0
    _, out = apply_player_event(state, assessment(4, 0, 860.0).model_copy(update={"event_prior": ev}), config)
    assert out[0].moves == 1 and out[0].method in ("model", "combination")


def test_a_move_whose_clock_is_missing_is_read_at_the_movers_last_known_time_left():
    """The move model reads a missing clock at the mover's time left as last known in the game, in the player step
    and in the pool step alike: read at x_left 0 (the reference clock) a dropped clock moved the likelihood. The
    same move with its clock at that time left and no time spent gives the same likelihood (k_spent is 0)."""
    from analyzers.eventpool import load_event_pool
    from streamer.pipeline import pool_event

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, combination=COMB,
                            event_pool=load_event_pool("fast"))
    first = assessment(0, 0, 120.0).model_copy(update={"event": "e"})  # 120 s left of 900: time trouble
    second = assessment(2, 1, 0.0).model_copy(update={"event": "e"})
    missing = second.model_copy(update={"clock": None, "clock_spent": None})
    at_last = second.model_copy(update={"clock": 120.0, "clock_spent": None})
    lls, pooled = [], []
    for later in (missing, at_last):
        state, _ = apply_player_event(None, first, config)
        state, _ = apply_player_event(state, later, config)
        lls.append(state.games["g"].rating.ll)
        ev, _ = pool_event(None, first, config)
        ev, _ = pool_event(ev, later, config)
        pooled.append(ev.open["g/p"].lik.ll)
    assert np.allclose(lls[0], lls[1]) and np.allclose(pooled[0], pooled[1])
    state, _ = apply_player_event(None, missing, config)  # no clock known before it: the reference (x_left 0)
    reference = second.model_copy(update={"clock": None, "clock_spent": None, "clock_base": None})
    plain, _ = apply_player_event(None, reference, config)
    assert np.allclose(state.games["g"].rating.ll, plain.games["g"].rating.ll)
    first_ll = apply_player_event(None, first, config)[0].games["g"].rating.ll
    assert not np.allclose(lls[0], first_ll + plain.games["g"].rating.ll)  # what reading it at the reference gave


def test_the_moves_of_another_engine_make_every_scope_they_enter_provisional_for_good():
    """A move searched by another engine than the calibrations' (PipelineConfig.other_engine) is rated, and every scope
    it entered is published as provisional from then on (its state keeps that); scopes it did not enter are not."""
    from schemas import GameResult, PlayerInfo

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, combination=COMB)
    ours = config.calibration.engine
    assert ours == "Stockfish 15.1"

    def move(game: str, ply: int, engine: str) -> MoveAssessment:
        return assessment(ply, ply % 2, 880.0 - 10 * ply).model_copy(update={"game_id": game, "engine": engine})

    state, marks = None, []
    for ply, engine in ((0, ours), (2, ours), (4, "Stockfish 16"), (6, ours)):
        state, out = apply_player_event(state, move("g", ply, engine), config)
        marks.append(out[0].provisional)
    assert marks == [False, False, True, True]
    result = GameResult(game_id="g", player_id="p", color="white", score=1.0, player=PlayerInfo(id="p"),
                        opponent=PlayerInfo(id="q"))
    state, out = apply_player_event(state, result, config)
    ended = [m for m in out if isinstance(m, PerceivedRating)]
    assert ended and all(m.provisional for m in ended)
    state = PlayerState.from_dict(json.loads(json.dumps(state.to_dict())))
    state, out = apply_player_event(state, move("h", 0, ours), config)
    assert out[0].scope == "game" and not out[0].provisional  # a new game of the calibrations' engine
    assert state.overall.other_engine and not state.games["h"].other_engine
