"""Fair-play alerts as the service raises them: the move model's expectations, the exclusions, two tiers, one alert
per crossing. Synthetic players here; the calibration on real held-out games is bench/fairplay_calibration.py."""

from __future__ import annotations

import chess
import numpy as np
import pytest

from analyzers.calibration import load_calibration
from analyzers.engine import EnginePool
from analyzers.fairplay import (
    DEFAULT_MIN_MOVES,
    DEFAULT_PLAYER_WINDOW,
    DEFAULT_Z_THRESHOLD,
    OBVIOUS_GAP,
    FairPlayMove,
    FairPlayStats,
    exclusion,
)
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model
from schemas import GameResult, GameStarted, MoveAssessment, MoveEvent, PlayerInfo
from streamer.pipeline import PipelineConfig, PlayerState, ScopeStats, apply_player_event, count_move
from streamer.steps import Steps

MODEL = load_move_model("fast")


def position(rng: np.random.Generator, n: int = 5) -> list[float]:
    """Candidate losses in win probability of a position that is neither forced nor obvious."""
    while True:
        losses = [0.0, *np.sort(rng.exponential(0.08, n - 1)).tolist()]
        if exclusion(losses, False) is None:
            return losses


def honest_choice(rng: np.random.Generator, losses: list[float], s: float, c: float) -> int:
    w = np.exp(-((np.array(losses) / s) ** c))
    return int(rng.choice(len(losses), p=w / w.sum()))


def params(rating: float, tclass: str = "rapid") -> tuple[float, float]:
    s, c = MODEL.params(np.array([rating]), tclass)
    return float(s[0]), float(c[0])


def test_an_honest_synthetic_player_raises_no_alert_in_1000_seeded_games():
    """The null hypothesis: moves drawn from the move model at the player's own rating. The action tier promises
    about one false alarm in a million; 1,000 player-games of 40-120 counted moves must give none, and the
    z-scores must look standard normal."""
    zs, flagged = [], 0
    for seed in range(1000):
        rng = np.random.default_rng(seed)
        rating = float(rng.uniform(1000, 2700))
        s, c = params(rating)
        st = FairPlayStats()
        for _ in range(int(rng.integers(40, 121))):
            losses = position(rng)
            st.add(FairPlayMove.from_model(losses, honest_choice(rng, losses, s, c), s, c))
        flagged += st.flagged() is not None
        zs.append(st.z_match)
    assert flagged == 0
    assert np.mean(zs) == pytest.approx(0, abs=0.1) and np.std(zs) == pytest.approx(1, abs=0.1)


@pytest.mark.parametrize("rating", [1200, 1800, 2400])
def test_an_always_best_move_player_is_flagged_within_40_counted_moves(rating):
    rng = np.random.default_rng(rating)
    s, c = params(rating)
    st = FairPlayStats()
    for _ in range(DEFAULT_MIN_MOVES):
        losses = position(rng)
        st.add(FairPlayMove.from_model(losses, 0, s, c))
        if st.flagged() is not None:
            break
    assert st.n <= DEFAULT_MIN_MOVES and st.flagged() == "match" and st.z_match >= DEFAULT_Z_THRESHOLD


def test_exclusions_obvious_best_moves_and_recaptures_are_not_counted():
    assert exclusion([0.0, OBVIOUS_GAP, 0.5], False) == "obvious"
    assert exclusion([0.0, OBVIOUS_GAP - 0.01], False) is None
    assert exclusion([0.0, 0.01], True) == "recapture"


async def test_an_obvious_recapture_sequence_adds_no_counted_move(stockfish):
    """A queen trade: White takes on d8, Black must take back. The recapture is flagged by the game step (real
    Stockfish) and adds nothing to the fair-play statistics, whatever the player does."""
    config = PipelineConfig(get_profile("fast"), model=MODEL)
    fen = "3qk3/8/8/8/8/8/8/3QK3 w - - 0 1"  # 1. Qxd8+ Kxd8
    ev = GameStarted(game_id="g", white=PlayerInfo(id="w", rating=1800), black=PlayerInfo(id="b", rating=1800), initial_fen=fen)
    async with EnginePool(stockfish, size=1) as pool:
        steps = Steps(config, pool)
        games: dict = {}
        await steps.game(games, ev)
        out1 = await steps.game(games, MoveEvent(game_id="g", ply=20, uci="d1d8"))
        assert out1 and out1[0].message.type == "deadletter"  # plies count from 0: a game starts at ply 0
        await steps.game(games, MoveEvent(game_id="g", ply=0, uci="d1d8"))
        (take_back,) = [o.message for o in await steps.game(games, MoveEvent(game_id="g", ply=1, uci="e8d8"))]
    assert take_back.recapture and chess.Move.from_uci(take_back.candidates[0].uci).to_square == chess.D8
    state = PlayerState("b")
    counted = take_back.model_copy(update={"counted": True})  # as if past the book plies and not decided
    assert count_move([state.overall], counted, None, MODEL) is None and state.overall.fair.n == 0
    plain = counted.model_copy(update={"recapture": False})
    assert count_move([state.overall], plain.model_copy(update={"ply": 3}), None, MODEL) is None  # obvious anyway


def test_one_crossing_gives_one_alert_and_falling_back_rearms_it():
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    me, opp = PlayerInfo(id="p", rating=1800), PlayerInfo(id="q", rating=1800)
    state = PlayerState("p")
    state.overall.fair.window = config.player_fair_window  # as the player step sets it: the player scope forgets old games
    rng = np.random.default_rng(5)
    s, c = params(1800)

    def game(n: int, engine_like: bool, event: str = "open") -> list:
        gid = f"g{len(state.finished)}"
        for _ in range(n):
            losses = position(rng)
            m = FairPlayMove.from_model(losses, 0 if engine_like else honest_choice(rng, losses, s, c), s, c)
            for scope in (state.games.setdefault(gid, type(state.overall)()), state.overall,
                          state.events.setdefault(event, type(state.overall)())):
                scope.fair.add(m)
        _, out = apply_player_event(state, GameResult(game_id=gid, player_id="p", color="white", score=1.0, event=event,
                                                      player=me, opponent=opp), config)
        return [m for m in out if m.type == "fairplay"]

    assert game(30, True) == []  # under 40 counted moves: no alert
    (first,) = game(30, True)
    assert first.tier == "action" and first.scope in ("event", "player") and first.moves == 60 and first.games == 2
    assert first.observed == 60 and first.expected < 45 and first.reference_rating == 1800 and first.reference_source == "declared"
    assert game(20, True) == [] and game(20, True) == []  # still over the tier: the same finding, no new alert
    honest, rearmed = [], False
    for _ in range(100):  # honest games dilute the evidence: the tier falls under screening and re-arms
        honest += game(40, False, event="later")
        rearmed |= state.alert_tier is None
    assert rearmed and all(a.tier == "screening" for a in honest)  # the old excess may cross screening again, once
    again = [a for _ in range(8) for a in game(40, True, event="third")]
    assert [a.tier for a in again] in (["action"], ["screening", "action"])  # a new crossing: one alert per tier
    assert PlayerState.from_dict(state.to_dict()).alert_tier == state.alert_tier


def test_an_alert_whose_moves_another_engine_searched_is_marked_provisional():
    """The same engine-like play alerts alike; searched by another engine than the calibrations' (a scope marked so by
    the player step, PipelineConfig.other_engine) the alert says its expectations are provisional (v4)."""
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    me, opp = PlayerInfo(id="p", rating=1800), PlayerInfo(id="q", rating=1800)
    s, c = params(1800)
    alerts = {}
    for other in (False, True):
        state, rng, out = PlayerState("p"), np.random.default_rng(5), []
        for gid in ("g0", "g1"):
            scopes = (state.games.setdefault(gid, ScopeStats()), state.overall, state.events.setdefault("open", ScopeStats()))
            for _ in range(30):
                m = FairPlayMove.from_model(position(rng), 0, s, c)
                for scope in scopes:
                    scope.fair.add(m)
                    scope.other_engine |= other and gid == "g0"  # the first game's moves only
            _, msgs = apply_player_event(state, GameResult(game_id=gid, player_id="p", color="white", score=1.0,
                                                           event="open", player=me, opponent=opp), config)
            out += [m for m in msgs if m.type == "fairplay"]
        (alerts[other],) = out
    assert alerts[False].schema_version == 4 and not alerts[False].provisional and alerts[True].provisional
    assert alerts[True].model_copy(update={"provisional": False}) == alerts[False]


def test_the_player_scope_weighs_only_its_recent_moves():
    """An honest player the model fits badly (plays like 2200, declared 1800: about the model's person sd) over
    20,000 counted moves: summed over every move the match z grows as sqrt(moves) and crosses the action tier;
    over the player scope's window (300 to 600 recent moves) it never does, and the window's sums are exact."""
    rng = np.random.default_rng(11)
    s_true, c_true = params(2200)
    s_ref, c_ref = params(1800)
    forever, recent = FairPlayStats(), FairPlayStats(window=DEFAULT_PLAYER_WINDOW)
    peak_recent = 0.0
    moves: list[FairPlayMove] = []
    for i in range(20_000):
        losses = position(rng)
        m = FairPlayMove.from_model(losses, honest_choice(rng, losses, s_true, c_true), s_ref, c_ref)
        moves.append(m)
        forever.add(m)
        recent.add(m)
        if i >= DEFAULT_MIN_MOVES:
            peak_recent = max(peak_recent, recent.z_match, recent.z_loss)
        if i + 1 >= DEFAULT_PLAYER_WINDOW:
            assert DEFAULT_PLAYER_WINDOW <= recent.n < 2 * DEFAULT_PLAYER_WINDOW
    assert forever.z_match >= DEFAULT_Z_THRESHOLD  # the misfit alone, summed forever, would be an action alert
    assert peak_recent < DEFAULT_Z_THRESHOLD
    again = FairPlayStats()
    for m in moves[-recent.n:]:
        again.add(m)
    assert (again.n, again.matches) == (recent.n, recent.matches)
    assert again.expected_matches == pytest.approx(recent.expected_matches) and again.loss == pytest.approx(recent.loss)
    assert FairPlayStats.from_dict(recent.to_dict()) == recent  # the block in progress survives the state store


def test_the_pipeline_applies_the_configured_player_window():
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, player_fair_window=7)
    cands = [{"uci": "e2e4", "cp": 30, "mate": None}, {"uci": "d2d4", "cp": 20, "mate": None}, {"uci": "g1f3", "cp": -40, "mate": None}]
    state = None
    for i in range(20):
        a = MoveAssessment(game_id="g", ply=20 + 2 * i, player_id="p", color="white", uci="d2d4", reference_rating=1800,
                           eval_before=30, eval_after=20, gain=-10, loss=10, candidates=cands, played_rank=1, played_value=20,
                           counted=True, engine="test", limits="d8-mpv5", time_class="rapid")
        state, _ = apply_player_event(state, a, config)
    assert state is not None and state.games["g"].fair.n == 20  # the game scope counts every move
    assert state.overall.fair.window == 7 and state.overall.fair.n == 7 + 20 % 7  # the player scope: the last 7-13
    assert PlayerState.from_dict(state.to_dict()).overall.fair == state.overall.fair


def test_a_declared_rating_outside_the_fitted_range_is_read_at_its_nearer_end_and_the_alert_says_so():
    """The move model and the review calibration were fitted on declared ratings 1000-2882: fair play expects the moves
    of a player declared at 300 as those of one at 1000 (extrapolated, the model's expectation at 300 is a guess), and
    the alert names the rating its expectation came from and the one declared."""
    from analyzers.ratingmodel import FITTED_RATINGS, fair_play_reference

    assert FITTED_RATINGS == (1000.0, 2900.0)
    assert [fair_play_reference(r) for r in (1.0, 300.0, 1000.0, 1800.0, 2900.0, 3300.0)] == [
        1000.0, 1000.0, 1000.0, 1800.0, 2900.0, 2900.0]
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    cands = [{"uci": "e2e4", "cp": 30, "mate": None}, {"uci": "d2d4", "cp": 20, "mate": None}, {"uci": "g1f3", "cp": -40, "mate": None}]

    def evidence(rating: float) -> tuple[float, list]:
        state = None
        for i in range(45):  # the engine's first choice every time: over the action tier for any reference
            a = MoveAssessment(game_id="g", ply=20 + 2 * i, player_id="p", color="white", uci="e2e4", reference_rating=rating,
                               eval_before=30, eval_after=30, gain=0, loss=0, candidates=cands, played_rank=0,
                               played_value=30, counted=True, engine="test", limits="d8-mpv5", time_class="rapid")
            state, _ = apply_player_event(state, a, config)
        me = PlayerInfo(id="p", rating=rating)
        state, out = apply_player_event(state, GameResult(game_id="g", player_id="p", color="white", score=1.0,
                                                          player=me, opponent=PlayerInfo(id="q", rating=1800)), config)
        return state.overall.fair.expected_matches, [m for m in out if m.type == "fairplay"]

    (at_300, (alert, *_)), (at_1000, _), (at_1800, _) = evidence(300.0), evidence(1000.0), evidence(1800.0)
    assert at_300 == at_1000 < at_1800  # a stronger player is expected to find the first choice more often
    assert alert.reference_rating == 1000.0 and alert.reference_source.startswith("declared 300, read at the nearer end")
    (_, (high, *_)) = evidence(3300.0)
    assert high.reference_rating == 2900.0 and "3300" in high.reference_source
