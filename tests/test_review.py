"""The review stage (streamer/review.py): a player's moves against a deeper search's first choice, expected from the
move model and the review calibration. Pure terms here, then the real Stockfish and the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import chess
import chess.pgn
import pytest

from analyzers.calibration import load_calibration
from analyzers.engine import EnginePool
from analyzers.errors import CalibrationError
from analyzers.fairplay import DEFAULT_MIN_MOVES, DEFAULT_REVIEW_Z, REVIEW_P_FLOOR, FairPlayMove, ReviewCalibration, ReviewStats
from analyzers.profiles import get_profile
from analyzers.ratingmodel import UNKNOWN_CLASS, load_move_model, win_losses
from schemas import (
    Candidate,
    DeadLetter,
    FairPlayAlert,
    GameEnded,
    GameRecord,
    GameResult,
    GameStarted,
    MoveAssessment,
    MoveEvent,
    PlayerInfo,
    ReviewRequest,
)
from streamer.batch import assess_games
from streamer.embedded import EmbeddedRuntime
from streamer.ingest import read_pgn_games
from streamer.pipeline import PipelineConfig, move_clock_inputs
from streamer.review import REVIEW_PROFILE, clock_of, review_move, review_player, review_stats, review_terms

MODEL = load_move_model("fast")
CALIBRATION = ReviewCalibration.load("fast")


def assessment(played: str, cands: list[tuple[str, int]], **kw) -> MoveAssessment:  # noqa: ANN003
    ranks = [u for u, _ in cands]
    fields = dict(game_id="g", ply=30, player_id="p", color="white", uci=played, eval_before=0, eval_after=0, gain=0,
                  candidates=[Candidate(uci=u, cp=cp) for u, cp in cands], played_rank=ranks.index(played) if played in ranks else None,
                  played_value=None if played in ranks else -200, counted=True, engine="stockfish", limits="d8-mpv5",
                  reference_rating=1800, time_class=UNKNOWN_CLASS)
    return MoveAssessment(**{**fields, **kw})


CANDS = [("e2e4", 40), ("d2d4", 25), ("g1f3", 5), ("b1c3", -30)]


def model_terms(values_cp: list[int], played: int, target: int) -> FairPlayMove:
    s, c = MODEL.params(1800.0, UNKNOWN_CLASS)
    m = FairPlayMove.from_model(win_losses(values_cp).tolist(), played, float(s), float(c), target=target)
    assert m is not None
    return m


def test_a_match_is_playing_the_deeper_choice_expected_with_the_models_probability_of_that_move():
    a = assessment("d2d4", CANDS)
    hit = review_move(a, "d2d4", MODEL)
    miss = review_move(a, "e2e4", MODEL)
    assert hit is not None and miss is not None
    assert hit.matched == 1 and miss.matched == 0  # the service's own statistic would count playing e2e4
    values = [cp for _, cp in CANDS]
    assert hit.p_top == pytest.approx(model_terms(values, 1, 1).p_top)
    assert miss.p_top == pytest.approx(model_terms(values, 1, 0).p_top) and miss.p_top > hit.p_top
    # a deeper choice the search did not list (nor the player play) is priced as the worst listed move
    unlisted = review_move(a, "h2h3", MODEL)
    assert unlisted is not None and unlisted.matched == 0
    assert unlisted.p_top == pytest.approx(model_terms([*values, -30], 1, 4).p_top)
    # the calibration maps the probability, a match stays a match
    cal = review_move(a, "d2d4", MODEL, CALIBRATION)
    assert cal is not None and cal.matched == 1 and cal.p_top == pytest.approx(CALIBRATION.probability(hit.p_top, False, a.reference_rating))


def test_the_review_reads_a_declared_rating_outside_the_fitted_range_at_its_nearer_end():
    """As the service's statistic does (test_fairplay.py -k nearer_end): both the move model's p and the calibration's
    rating term are read at 1000 for a player declared at 300."""
    at = {r: review_move(assessment("d2d4", CANDS, reference_rating=r), "d2d4", MODEL, CALIBRATION) for r in (300, 1000, 1800)}
    assert at[300] is not None and at[1000] is not None and at[1800] is not None
    assert at[300].p_top == at[1000].p_top != at[1800].p_top


def test_the_review_counts_only_the_moves_the_service_counts():
    assert review_move(assessment("d2d4", CANDS, counted=False), "d2d4", MODEL) is None  # book, decided or forced
    assert review_move(assessment("d2d4", CANDS, reference_rating=None), "d2d4", MODEL) is None  # nothing to expect
    assert review_move(assessment("d2d4", CANDS, recapture=True), "d2d4", MODEL) is None
    obvious = [("e2e4", 300), ("d2d4", -300)]  # the second candidate far worse in win probability
    assert review_move(assessment("e2e4", obvious), "e2e4", MODEL) is None
    stats = review_stats([(assessment("d2d4", CANDS), "d2d4"), (assessment("d2d4", CANDS, counted=False), "d2d4")], MODEL)
    assert stats.n == 1 and stats.matches == 1


def test_the_shipped_calibration_raises_the_probability_of_a_deeper_choice_the_search_ranked_lower():
    assert CALIBRATION is not None and CALIBRATION.command.startswith("python bench/fit_review.py")
    identity = ReviewCalibration(0.0, 1.0, 0.0)
    assert identity.probability(0.3, True) == pytest.approx(0.3)
    qs = [CALIBRATION.probability(p, False) for p in (0.01, 0.1, 0.2, 0.3, 0.5, 0.9)]
    assert all(0.0 < a < b < 1.0 for a, b in zip(qs, qs[1:]))  # monotone in the model's probability
    for p in (0.2, 0.3, 0.5):  # the typical range: honest players find the deeper move more often than shallow values say
        assert CALIBRATION.probability(p, False) > p
    assert not math.isnan(CALIBRATION.probability(0.0, True)) and CALIBRATION.probability(1.0, True) < 1.0


def test_the_rating_term_moves_the_expected_match_with_the_reference_rating(tmp_path):
    cal = ReviewCalibration(0.5, 1.2, -0.3, 0.4)
    low, centre, high = (cal.probability(0.3, False, r) for r in (1400.0, 1800.0, 2800.0))
    assert low < centre < high
    # an unknown rating (None or 0) is read at the centre of the scale, as the move model reads z
    assert cal.probability(0.3, False, None) == cal.probability(0.3, False, 0.0) == pytest.approx(centre)
    assert centre == pytest.approx(ReviewCalibration(0.5, 1.2, -0.3).probability(0.3, False, 2800.0))
    # a calibration written before the term existed loads with b3 = 0
    path = tmp_path / "old.review.json"
    path.write_text(json.dumps({"b0": 0.5, "b1": 1.2, "b2": -0.3, "command": "x"}))
    old = ReviewCalibration.load("fast", path)
    assert old is not None and old.b3 == 0.0 and old.probability(0.3, False, 2800.0) == pytest.approx(centre)


def test_the_clock_term_reads_the_moves_clock_inputs_and_a_move_without_a_clock_gets_its_own_offset(tmp_path):
    cal = ReviewCalibration(0.5, 1.2, -0.3, 0.4, clock=(0.1, -0.3, 0.2))
    base = ReviewCalibration(0.5, 1.2, -0.3, 0.4).probability(0.3, False, 1800.0)
    x = 0.5 + 1.2 * math.log(0.3 / 0.7)  # the terms before the clock's at z = 0
    clocked = cal.probability(0.3, False, 1800.0, clock=(0.5, 1.0))
    assert clocked == pytest.approx(1 / (1 + math.exp(-(x + 0.1 * 0.5 - 0.3 * 1.0))))
    assert cal.probability(0.3, False, 1800.0) == pytest.approx(1 / (1 + math.exp(-(x + 0.2))))  # no clock
    assert clocked < base < cal.probability(0.3, False, 1800.0)
    # review_move hands it the clock inputs the move model reads, or None for a move without a clock
    spent, left = assessment("d2d4", CANDS, clock=50.0, clock_spent=40.0, clock_base=600.0), assessment("d2d4", CANDS)
    raw_spent, raw_left = review_move(spent, "d2d4", MODEL), review_move(left, "d2d4", MODEL)
    got_spent, got_left = review_move(spent, "d2d4", MODEL, cal), review_move(left, "d2d4", MODEL, cal)
    assert raw_spent and raw_left and got_spent and got_left
    assert clock_of(spent) == move_clock_inputs(spent) and clock_of(spent) != (0.0, 0.0) and clock_of(left) is None
    assert got_spent.p_top == pytest.approx(cal.probability(raw_spent.p_top, False, 1800.0, clock=clock_of(spent)))
    assert got_left.p_top == pytest.approx(cal.probability(raw_left.p_top, False, 1800.0))
    # the file keeps it; a term of the wrong length is refused; the files before it load without one
    path = tmp_path / "clock.review.json"
    path.write_text(json.dumps(cal.to_dict()))
    assert ReviewCalibration.load("fast", path) == cal
    path.write_text(json.dumps({**cal.to_dict(), "clock": [0.1, 0.2]}))
    with pytest.raises(CalibrationError):
        ReviewCalibration.load("fast", path)
    path.write_text(json.dumps({"b0": 0.5, "b1": 1.2, "b2": -0.3, "b3": 0.4}))
    old = ReviewCalibration.load("fast", path)
    assert old is not None and old.clock == () and "clock" not in old.to_dict()
    assert CALIBRATION is not None and len(CALIBRATION.clock) == 3  # the shipped fit has it (bench/fit_review.py)


DECIDED = [("e2e4", 900), ("d2d4", 850), ("g1f3", 700)]  # the mover far ahead: a decided position at depth 8


def test_a_move_in_a_decided_position_counts_in_the_review_with_its_own_term(tmp_path):
    fast = get_profile("fast")
    a = assessment("d2d4", DECIDED, counted=False)
    # without the service's profile, or with a calibration that has no term for them (the shipped one), they do not count
    assert review_move(a, "d2d4", MODEL) is None
    assert CALIBRATION is not None and not CALIBRATION.counts_decided and review_move(a, "d2d4", MODEL, CALIBRATION, fast) is None
    assert review_move(a, "d2d4", MODEL, ReviewCalibration(0.5, 1.2, -0.3, 0.4), fast) is None
    raw = review_move(a, "d2d4", MODEL, None, fast)  # the raw model probability, what bench/fit_review.py fits on
    assert raw is not None and raw.matched == 1
    cal = ReviewCalibration(0.5, 1.2, -0.3, 0.4, d=(0.1, 0.5, 0.2, 0.3, 0.6))
    ahead = review_move(a, "d2d4", MODEL, cal, fast)
    assert ahead is not None and ahead.p_top == pytest.approx(cal.probability(raw.p_top, False, 1800.0, True))
    assert ahead.p_top != pytest.approx(cal.probability(raw.p_top, False, 1800.0))  # not the counted moves' formula
    lost = assessment("d2d4", [(u, cp - 1700) for u, cp in DECIDED], counted=False)  # the mover far behind
    raw_behind, behind = review_move(lost, "d2d4", MODEL, None, fast), review_move(lost, "d2d4", MODEL, cal, fast)
    assert raw_behind is not None and behind is not None
    assert behind.p_top == pytest.approx(cal.probability(raw_behind.p_top, False, 1800.0, False))
    assert behind.p_top < cal.probability(raw_behind.p_top, False, 1800.0, True)  # d4 > 0: the side ahead matches more
    # the same rules as the service's counted moves: past the book, a choice, a reference rating, no recapture
    assert review_move(assessment("d2d4", DECIDED, counted=False, ply=fast.skip_plies - 1), "d2d4", MODEL, cal, fast) is None
    assert review_move(assessment("d2d4", CANDS, counted=False), "d2d4", MODEL, cal, fast) is None  # not decided: book or forced
    assert review_move(assessment("e2e4", DECIDED[:1], counted=False), "e2e4", MODEL, cal, fast) is None
    assert review_move(assessment("d2d4", DECIDED, counted=False, reference_rating=None), "d2d4", MODEL, cal, fast) is None
    assert review_move(assessment("d2d4", DECIDED, counted=False, recapture=True), "d2d4", MODEL, cal, fast) is None
    stats = review_stats([(a, "d2d4"), (assessment("d2d4", CANDS), "e2e4")], MODEL, cal, fast)
    assert stats.n == 2 and stats.matches == 1
    assert review_stats([(a, "d2d4"), (assessment("d2d4", CANDS), "e2e4")], MODEL, cal).n == 1
    # the file: the term has five coefficients, or it is absent
    assert ReviewCalibration.load("fast", write(tmp_path / "d.json", cal.to_dict())) == replace(cal, command="")
    with pytest.raises(CalibrationError):
        ReviewCalibration.load("fast", write(tmp_path / "bad.json", {**cal.to_dict(), "d": [0.1, 0.2, 0.3]}))
    with pytest.raises(ValueError):
        ReviewCalibration(0.5, 1.2, -0.3).probability(0.3, False, 1800.0, True)


def write(path, d):  # noqa: ANN001, ANN201
    path.write_text(json.dumps(d))
    return path


async def play(pool: EnginePool, white_picks_first: bool, plies: int = 90) -> chess.pgn.Game:
    """A game in which White plays the review profile's first choice and Black a shallow search's first choice; if
    not ``white_picks_first``, both play the shallow search's second choice (a balanced game with counted moves)."""
    deep, shallow = get_profile(REVIEW_PROFILE).limits, get_profile("fast").limits
    board = chess.Board()
    while len(board.move_stack) < plies and not board.is_game_over():
        if board.turn == chess.WHITE and white_picks_first:
            uci = (await pool.analyse_limits(board, deep)).candidates[0].uci
        else:
            cands = (await pool.analyse_limits(board, shallow)).candidates
            uci = cands[0].uci if white_picks_first or len(cands) < 2 else cands[1].uci
        board.push_uci(uci)
    game = chess.pgn.Game.from_board(board)
    game.headers.update({"Event": "Review test", "White": "Assisted, A", "Black": "Engine, B", "WhiteElo": "1600", "BlackElo": "1600"})
    return game


async def test_a_player_who_always_plays_the_deeper_choice_matches_it_at_every_counted_move(stockfish, tmp_path):
    cache = tmp_path / "analysis.sqlite"  # the review reads the same searches back: the same first choices
    config = PipelineConfig(get_profile("fast"), model=MODEL)
    async with EnginePool(stockfish, size=2, cache_path=cache) as pool:
        pgn = tmp_path / "games.pgn"
        pgn.write_text(f"{await play(pool, True)}\n\n{await play(pool, False)}\n")
        games = list(read_pgn_games(pgn))
        white = games[0].white.id
        review = await review_player(pool, config, MODEL, games, white, CALIBRATION)
        # a calibration with the decided-position term: the review counts White's moves in decided positions too
        with_decided = await review_player(pool, config, MODEL, games, white, replace(CALIBRATION, d=(0.5, 1.0, 0.0, 0.0, 0.4)))
        assessed = await assess_games(games, pool, config)
    s = review.stats
    mine = [a for g in games for a in assessed[g.game_id] if a.player_id == white]
    assert s.n == sum(1 for a in mine if review_terms(a) is not None)
    decided = sum(1 for a in mine if review_terms(a, config.profile) is not None) - s.n
    assert decided > 0 and with_decided.stats.n == s.n + decided  # the first game is won long before its 90th ply
    assert review.games == [g.game_id for g in games] and review.limits == get_profile(REVIEW_PROFILE).limits.key
    assert s.n >= 20 and s.n == sum(len(p) for p in review.plies.values())
    first_game = review.plies.get(games[0].game_id, [])
    assert len(first_game) >= 15
    # every counted move of the first game matches; the second game's second choices mostly do not
    assert s.matches >= len(first_game) and s.matches < s.n
    # the CLI prints the same evidence
    r = subprocess.run([sys.executable, "-m", "streamer.cli", "review", str(pgn), "--player", "Assisted, A", "--json",
                        "--cache", str(cache), "--engine", stockfish, "--engines", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f'"counted_moves": {s.n}' in r.stdout and f'"observed": {s.matches}' in r.stdout
    assert json.loads(r.stdout)["provisional"] is False  # the calibrations' engine at the profile's limits
    # another engine build (the same Stockfish introducing itself as another): the same evidence, marked provisional
    from conftest import FIXTURES

    other = tmp_path / "stockfish-16"
    other.write_text(f"#!/bin/sh\nexec {sys.executable} {FIXTURES / 'renamed_engine.py'} 'Stockfish 16' {stockfish}\n")
    other.chmod(0o755)
    again = subprocess.run([sys.executable, "-m", "streamer.cli", "review", str(pgn), "--player", "Assisted, A",
                            "--engine", str(other), "--engines", "1"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"played it {s.matches} times" in again.stdout
    assert "PROVISIONAL: the expectation's calibrations were fitted on Stockfish 15.1 at the profile's limits; " \
           "searched by Stockfish 16" in again.stdout
    unknown = subprocess.run([sys.executable, "-m", "streamer.cli", "review", str(pgn), "--player", "Nobody"],
                             capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "no player named 'Nobody'" in unknown.stderr
    # a part of a name, in any case, is answered with the names it is part of; an unknown event with the events there
    near = subprocess.run([sys.executable, "-m", "streamer.cli", "review", str(pgn), "--player", "assisted"],
                          capture_output=True, text=True, timeout=120)
    assert near.returncode == 2 and "did you mean 'Assisted, A'" in near.stderr, near.stderr
    event = subprocess.run([sys.executable, "-m", "streamer.cli", "review", str(pgn), "--player", "Assisted, A", "--event",
                            "Nope"], capture_output=True, text=True, timeout=120)
    assert event.returncode == 2 and "no game of event 'Nope'" in event.stderr and repr(games[0].event) in event.stderr


def test_with_the_review_on_the_player_step_keeps_its_last_games_and_sends_each_alert_with_its_scopes_games():
    """The games travel with the game results (GameRecord, clocks included); the player's state keeps the last
    REVIEW_GAMES of them and survives a round trip; an alert comes with a review request holding its scope's games."""
    from streamer.pipeline import REVIEW_GAMES, PlayerState, apply_player_event

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, review=CALIBRATION)
    me, other = PlayerInfo(id="p", rating=1800), PlayerInfo(id="q", rating=1700)
    state = PlayerState("p")

    def result(gid: str, event: str) -> GameResult:
        record = GameRecord(game_id=gid, white=me, black=other, event=event, moves=["e2e4", "e7e5"], clocks=[59.0, 58.5],
                            result="1-0")
        return GameResult(game_id=gid, player_id="p", color="white", score=1.0, event=event, player=me, opponent=other,
                          record=record)

    for i in range(REVIEW_GAMES + 2):
        state, out = apply_player_event(state, result(f"g{i}", "open" if i % 2 else "blitz"), config)
        assert not any(isinstance(m, ReviewRequest) for m in out)  # no moves counted: no finding, no request
    assert [g for g, *_ in state.records] == [f"g{i}" for i in range(2, REVIEW_GAMES + 2)]
    assert PlayerState.from_dict(state.to_dict()).records == state.records
    assert GameRecord.model_validate_json(state.records[-1][3]).clocks == [59.0, 58.5]

    def alert(scope: str, scope_id: str) -> FairPlayAlert:
        return FairPlayAlert(player_id="p", game_id="g5", scope=scope, scope_id=scope_id, statistic="match", z=2.0,
                             threshold=1.5, moves=40, observed=30, expected=20, reference_rating=1800, games=2)

    assert [r.game_id for r in state.review_games(alert("game", "g5"))] == ["g5"]
    assert {r.event for r in state.review_games(alert("event", "open"))} == {"open"}
    assert len(state.review_games(alert("event", "open"))) == REVIEW_GAMES // 2
    assert len(state.review_games(alert("player", "p"))) == REVIEW_GAMES
    # long games: the oldest go first once the kept plies pass REVIEW_PLIES
    from streamer.pipeline import REVIEW_PLIES

    long = PlayerState("p")
    for i in range(3):
        moves = ["e2e4"] * (REVIEW_PLIES * 3 // 8)
        rec = GameRecord(game_id=f"L{i}", white=me, black=other, moves=moves, clocks=[None] * len(moves), result="1-0")
        long, _ = apply_player_event(long, GameResult(game_id=f"L{i}", player_id="p", color="white", score=1.0, player=me,
                                                      opponent=other, record=rec), config)
    assert [g for g, *_ in long.records] == ["L1", "L2"]
    # without the review nothing is kept
    plain, _ = apply_player_event(None, result("g1", "open"), replace(config, review=None))
    assert plain.records == [] and "records" not in plain.to_dict()


class _Player:
    """A player of 1800 whose games end one after another with the review on: each game's moves are drawn from the
    move model at 1800 (honest) or are always its first choice (engine-like), straight into the fair-play scopes."""

    def __init__(self) -> None:
        import numpy as np

        from streamer.pipeline import PlayerState

        self.config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, review=CALIBRATION)
        self.me, self.other = PlayerInfo(id="p", rating=1800), PlayerInfo(id="q", rating=1800)
        self.state = PlayerState("p")
        self.state.overall.fair.window = self.config.player_fair_window
        self.rng = np.random.default_rng(3)

    def game(self, n: int, engine_like: bool, event: str) -> list:
        """Play and end one game of ``n`` counted moves; its alerts and review requests."""
        import numpy as np

        from analyzers.fairplay import FairPlayMove
        from streamer.pipeline import ScopeStats, apply_player_event, event_scope

        state, rng = self.state, self.rng
        s, c = MODEL.params(1800.0, "rapid")
        gid = f"g{len(state.finished)}"
        for _ in range(n):
            losses = [0.0, *np.sort(rng.uniform(0.03, 0.15, 3)).tolist()]
            w = np.exp(-((np.array(losses) / float(s)) ** float(c)))
            idx = 0 if engine_like else int(rng.choice(len(losses), p=w / w.sum()))
            m = FairPlayMove.from_model(losses, idx, float(s), float(c))
            for scope in (state.games.setdefault(gid, ScopeStats()), state.overall, event_scope(state, event, self.config)):
                scope.fair.add(m)
        record = GameRecord(game_id=gid, white=self.me, black=self.other, event=event, moves=["e2e4"], result="1-0")
        _, out = apply_player_event(state, GameResult(game_id=gid, player_id="p", color="white", score=1.0, event=event,
                                                      player=self.me, opponent=self.other, record=record), self.config)
        return [m for m in out if isinstance(m, FairPlayAlert | ReviewRequest)]


def test_a_crossing_is_sent_for_review_at_each_game_end_until_it_ends():
    """The first game end over a tier publishes the alert and sends it for review; each later game end of the same
    crossing sends the scope's evidence again (unpublished: no new alert), named by the same crossing, so the review
    sees the scope grow; once the player is under every tier again nothing is sent, and a new crossing has a new name."""
    p = _Player()
    first = p.game(45, True, "open")
    (alert, req) = first
    assert isinstance(alert, FairPlayAlert) and isinstance(req, ReviewRequest) and req.alert == alert
    assert req.crossing == "g0" and [g.game_id for g in req.games] == ["g0"]
    (again,) = p.game(30, True, "open")  # the same crossing, a larger scope: no alert, a request
    assert isinstance(again, ReviewRequest) and again.crossing == "g0" and again.alert.moves > alert.moves
    assert [g.game_id for g in again.games] == ["g0", "g1"]
    ended = False
    for _ in range(40):  # honest games dilute the evidence: the player falls under every tier and the crossing ends
        p.game(40, False, "later")
        ended |= p.state.crossing is None
    assert ended
    later = [m for m in p.game(45, True, "third") if isinstance(m, ReviewRequest)]
    assert later and later[-1].crossing != "g0"  # a new crossing, named by the game that opened it


def test_an_event_over_a_tier_is_reviewed_to_its_last_game():
    """Once an event's own scope has been over a tier, each later game end of that event sends the event's evidence
    for review under the crossing that screened it, even after every scope has fallen under the tiers (no alert is
    published for it); the games of another event do not, and the state keeps the screened event across a restart."""
    from streamer.pipeline import PlayerState

    p = _Player()
    alert, req = p.game(45, True, "open")
    assert isinstance(req, ReviewRequest) and req.crossing == "g0" and p.state.screened == {"open": "g0"}
    under = []
    while len(under) < 3:  # honest games in the same event until every scope is under the tiers
        assert len(p.state.finished) < 60
        out = p.game(40, False, "open")
        (r,) = [m for m in out if isinstance(m, ReviewRequest)]  # every game end of the event is reviewed
        alerts = [m for m in out if isinstance(m, FairPlayAlert)]
        if alerts:  # the player fell under every tier and rose again: a new crossing, its own alert and name
            assert r.alert == alerts[0] and r.crossing == p.state.crossing != "g0"
            continue
        assert r.alert.scope == "event" and r.alert.scope_id == "open"
        assert r.crossing == p.state.screened["open"]
        assert [g.game_id for g in r.games][-1] == r.alert.game_id
        if p.state.crossing is None:
            under.append(r)
    assert under and all(r.alert.z <= p.config.screen_z for r in under)  # reviewed though under every tier (z rounded)
    assert PlayerState.from_dict(p.state.to_dict()).screened == p.state.screened
    assert p.state.crossing is None
    assert p.game(40, False, "another") == []  # another event, under every tier: nothing to review


def test_events_played_at_once_are_each_reviewed_to_their_last_game():
    """A player in two events at once, both screened: each event's later game ends send that event's evidence under
    the crossing that screened it, whichever event was screened last; a state stored with one screened event (an
    [event, crossing] pair) still reads."""
    from streamer.pipeline import PlayerState

    p = _Player()
    p.game(45, True, "arena")
    p.game(45, True, "swiss")
    assert p.state.screened == {"arena": "g0", "swiss": "g0"}
    seen: dict[str, list[str]] = {"arena": [], "swiss": []}
    while p.state.crossing is not None or not all(seen.values()):  # honest games in both events, interleaved
        assert len(p.state.finished) < 80
        for event in ("arena", "swiss"):
            reqs = [m for m in p.game(40, False, event) if isinstance(m, ReviewRequest)]
            assert reqs, f"a game end of screened {event} sent nothing"
            if p.state.crossing is None:  # under every tier: the event's evidence alone, under its crossing
                (r,) = reqs
                assert r.alert.scope == "event" and r.alert.scope_id == event and r.crossing == p.state.screened[event]
                seen[event].append(r.crossing)
    assert seen["arena"] and seen["swiss"]
    old = p.state.to_dict() | {"screened": ["arena", "g0"]}
    assert PlayerState.from_dict(old).screened == {"arena": "g0"}
    assert PlayerState.from_dict(p.state.to_dict()).screened == p.state.screened


def test_an_evicted_event_is_no_longer_screened_and_starts_afresh_when_seen_again():
    """A screened event whose scope is evicted at ``max_events`` leaves the screened map with it (its evidence is
    gone); the same event seen again starts unscreened: under every tier, its game end sends nothing under the old
    crossing. A stored state that still names an evicted event reads without it."""
    from streamer.pipeline import PlayerState

    p = _Player()
    p.config = replace(p.config, max_events=2)
    p.game(45, True, "open")
    assert p.state.screened == {"open": "g0"}
    for event in ("b", "c"):  # honest games in two other events: the oldest event scope, "open", is evicted
        p.game(40, False, event)
    assert "open" not in p.state.events and p.state.evicted >= 1
    assert "open" not in p.state.screened
    while p.state.crossing is not None:  # honest games until the player is under every tier
        assert len(p.state.finished) < 60
        p.game(40, False, "c")
    assert p.game(40, False, "open") == []  # re-created: not screened, under every tier, nothing to review
    stale = p.state.to_dict() | {"screened": {"gone": "g0", "c": "g1"}}
    assert PlayerState.from_dict(stale).screened == {"c": "g1"}


async def test_the_embedded_runtime_reviews_each_alert_and_publishes_a_review_that_reaches_the_action_tier(stockfish, tmp_path):
    """``--review``: three games of one event in which White plays the review profile's first choice. The service's
    statistic alerts once the event has 40 counted moves; the runtime searches that scope again at the review's depth,
    and its verdict is published as an action alert of stage "review" with the review's evidence; the CLI does the same."""
    cache = tmp_path / "analysis.sqlite"
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, review=CALIBRATION)
    async with EnginePool(stockfish, size=2, cache_path=cache) as pool:
        game = await play(pool, True)
        game.headers["Result"] = "1-0"  # ended: the alerts come at a game's end
        pgn = tmp_path / "games.pgn"
        pgn.write_text("\n\n".join(str(game) for _ in range(3)) + "\n")
        games = list(read_pgn_games(pgn))
        out: list = []
        async with EmbeddedRuntime(pool, config, out.append, out.append) as rt:
            for g in games:  # one after another, as a player plays them (a review holds the games that have ended)
                for ev in g.events():
                    rt.submit(ev, source=g.game_id)
                await rt.drain()
            reviews = {o: rt.metrics.reviews.labels(o)._value.get() for o in ("action", "cleared", "failed")}
    alerts = [m for m in out if isinstance(m, FairPlayAlert)]
    service = [a for a in alerts if a.stage == "service"]
    verdicts = [a for a in alerts if a.stage == "review"]
    white = games[0].white.id  # (Black plays the service's own first choices: the service alerts on it too)
    assert all(a.limits == config.limits.key for a in service) and any(a.player_id == white for a in service)
    assert all(a.tier == "screening" for a in service)  # with the review on, the service's statistic only screens
    assert reviews["action"] == len(verdicts) and reviews["failed"] == 0
    assert len([a for a in verdicts if a.player_id == white]) == 1, alerts  # one verdict per crossing
    (v,) = [a for a in verdicts if a.player_id == white]
    assert v.tier == "action" and v.z >= DEFAULT_REVIEW_Z and v.statistic == "match" and v.threshold == DEFAULT_REVIEW_Z
    assert v.limits == get_profile(REVIEW_PROFILE).limits.key and v.moves >= DEFAULT_MIN_MOVES
    assert v.observed == v.moves  # every counted move is the deeper search's first choice
    assert (v.scope, v.scope_id) == ("event", "Review test")
    assert not v.provisional and not any(a.provisional for a in service)  # the calibrations' engine, at their limits
    # the CLI: the same replay with --review publishes the review's verdict too (every search now a cache hit)
    jsonl = tmp_path / "out.jsonl"
    r = subprocess.run([sys.executable, "-m", "streamer.cli", "replay", str(pgn), "--review", "--max-speed", "--no-ui",
                        "--no-event-pool", "--out", str(jsonl), "--cache", str(cache), "--engine", stockfish],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    published = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert any(m["type"] == "fairplay" and m["stage"] == "review" and m["tier"] == "action" for m in published)


async def test_a_review_that_fails_is_dead_lettered_and_counted_and_the_runtime_goes_on(stockfish, monkeypatch):
    """Fault injection: the review's searches fail (an engine that keeps crashing). The request becomes a dead letter
    (its games kept there, nothing lost), the failure is counted, and the runtime still rates the next game."""
    from analyzers.errors import EngineCrashed
    from streamer import review as review_module
    from streamer.steps import Output

    async def crash(*args, **kwargs):  # noqa: ANN002, ANN003
        raise EngineCrashed("stockfish exited (injected)")

    monkeypatch.setattr(review_module, "review_player", crash)
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, review=CALIBRATION)
    alert = FairPlayAlert(player_id="p", game_id="g1", scope="game", scope_id="g1", statistic="match", z=2.0,
                          threshold=1.5, moves=40, observed=30, expected=20, reference_rating=1800, games=1)
    me, them = PlayerInfo(id="p", rating=1800), PlayerInfo(id="q", rating=1800)
    game = GameRecord(game_id="g1", white=me, black=them, moves=["e2e4"], result="1-0")
    out: list = []
    async with EnginePool(stockfish, size=1) as pool, EmbeddedRuntime(pool, config, out.append, out.append) as rt:
        rt._route(Output("p", ReviewRequest(player_id="p", crossing="g1", alert=alert, games=[game])))
        await rt.drain()
        assert rt.metrics.reviews.labels("failed")._value.get() == 1
        rt.submit(GameStarted(game_id="g2", white=me, black=them))
        rt.submit(MoveEvent(game_id="g2", ply=0, uci="e2e4"))
        await rt.drain()
    dead = out[0]
    assert isinstance(dead, DeadLetter) and dead.reason == "engine_crashed" and '"game_id":"g1"' in dead.raw
    assert not any(isinstance(m, FairPlayAlert) for m in out)
    assert any(isinstance(m, MoveAssessment) and m.game_id == "g2" for m in out)


async def test_a_review_request_that_cannot_be_reviewed_is_dead_lettered_not_lost():
    """Garbage on the review topic, and a request reaching a runtime without the review (no engine pool): each is a
    dead letter holding the bytes it came as."""
    from streamer.steps import Steps

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, review=CALIBRATION)
    steps = Steps(config)  # no engine pool: this runtime cannot review
    (bad,) = await steps.review_record({}, b"p", b'{"type": "review_request", "player_id": 7', "reviews@0")
    assert isinstance(bad.message, DeadLetter) and bad.message.reason == "malformed" and bad.message.source == "reviews@0"
    alert = FairPlayAlert(player_id="p", game_id="g1", scope="game", scope_id="g1", statistic="match", z=2.0,
                          threshold=1.5, moves=40, observed=30, expected=20, reference_rating=1800, games=1)
    raw = ReviewRequest(player_id="p", crossing="g1", alert=alert, games=[]).model_dump_json().encode()
    (refused,) = await steps.review_record({}, b"p", raw, "reviews@1")
    assert isinstance(refused.message, DeadLetter) and refused.message.reason == "unsupported_game"
    assert refused.message.raw == raw.decode()


@pytest.mark.parametrize("record,reason", [
    ({"moves": ["e2e4", "zz"]}, "malformed"),                       # not UCI: refused by the schema
    ({"moves": ["e2e4", "e7e5"], "clocks": [60.0, -1.0]}, "malformed"),  # a negative clock
    ({"moves": ["e2e4", "e2e4"]}, "malformed_record"),              # UCI, but not legal in turn
    ({"moves": ["e2e4"], "initial_fen": "not a fen"}, "malformed_record"),
])
async def test_a_kept_game_that_does_not_replay_dead_letters_its_request_with_its_reason(record, reason):
    """The game step keeps only moves it applied, so a request whose game does not replay came from elsewhere or was
    damaged: its dead letter says why (not an internal error), the failure is counted, and nothing is searched."""
    from streamer.steps import Steps

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL, review=CALIBRATION)
    steps = Steps(config, EnginePool(size=1))  # never started: no game here reaches a search
    alert = FairPlayAlert(player_id="p", game_id="g1", scope="game", scope_id="g1", statistic="match", z=2.0,
                          threshold=1.5, moves=40, observed=30, expected=20, reference_rating=1800, games=1)
    game = {"game_id": "g1", "white": {"id": "p", "rating": 1800}, "black": {"id": "q"}, "result": "1-0"} | record
    raw = json.dumps({"type": "review_request", "player_id": "p", "crossing": "g1", "alert": alert.model_dump(),
                      "games": [game]}).encode()
    (dead,) = await steps.review_record({}, b"p", raw, "reviews@3")
    assert isinstance(dead.message, DeadLetter) and dead.message.reason == reason, dead.message.error
    assert dead.message.raw == raw.decode()
    if reason == "malformed_record":
        assert steps.metrics.reviews.labels("failed")._value.get() == 1 and "game g1" in dead.message.error


def test_the_reviews_weighted_count_weighs_each_match_by_one_over_its_honest_probability():
    """The statistic measured beside the review's match count (analyzers.fairplay.ReviewStats): z = sum w (m - p) /
    sqrt(sum w^2 p (1 - p)), w = 1 / max(p, floor), the score test against a share of assisted moves; a match on a move
    honest players rarely find weighs more than a match anybody finds, and the floor caps what one improbable match
    can add."""
    def stats(moves):
        s = ReviewStats()
        for matched, p in moves:
            s.add(FairPlayMove(matched, p, 0.0, 0.0, 0.0))
        return s

    moves = [(1, 0.8), (0, 0.6), (1, 0.3), (1, 0.05), (0, 0.5)]
    s = stats(moves)
    w = [1 / max(p, REVIEW_P_FLOOR) for _, p in moves]
    num = sum(wi * (m - p) for wi, (m, p) in zip(w, moves))
    assert s.z_weighted == pytest.approx(num / math.sqrt(sum(wi * wi * p * (1 - p) for wi, (_, p) in zip(w, moves))))
    assert s.matches == 3 and s.n == 5 and s.z_match == pytest.approx((3 - 2.25) / math.sqrt(sum(p * (1 - p) for _, p in moves)))
    base = [(0, 0.5)] * 40
    rare, common = stats(base + [(1, 0.2)]), stats(base + [(1, 0.9)])
    assert rare.z_weighted > common.z_weighted and rare.matches == common.matches
    assert stats(base + [(1, 0.001)]).weighted == stats(base + [(1, REVIEW_P_FLOOR)]).weighted  # the floor
    stats(base).add(None)  # a move that does not count adds nothing


def test_a_move_whose_clock_is_missing_is_reviewed_at_the_last_known_time_left():
    """A relay drops a clock now and then: the service reads such a move at the mover's last known time left; the
    review read it as a move of a game without clocks (the reference clock, then its calibration's "unclocked" term).
    Given the last known x_left it reads the move as a clocked one with that time left and a typical think."""
    from streamer.pipeline import move_clock_inputs
    from streamer.review import known_lefts

    # a clocked move whose think is the reference (base / 40), so its inputs are (x_left, 0)
    clocked = assessment("d2d4", CANDS, clock=300.0, clock_spent=22.5, clock_base=900.0, time_class="rapid")
    x_left, x_spent = move_clock_inputs(clocked)
    assert abs(x_spent) < 1e-12 and x_left < -0.3  # a third of the base left: under the reference
    dropped = assessment("d2d4", CANDS, time_class="rapid")  # the same move, its clock missing
    with_clock = review_move(clocked, "d2d4", MODEL, CALIBRATION)
    read_known = review_move(dropped, "d2d4", MODEL, CALIBRATION, known_left=x_left)
    read_unclocked = review_move(dropped, "d2d4", MODEL, CALIBRATION)
    assert read_known is not None and with_clock is not None and read_unclocked is not None
    assert read_known.p_top == pytest.approx(with_clock.p_top, abs=1e-12)
    assert abs(read_unclocked.p_top - with_clock.p_top) > 1e-3
    # the last known x_left before each move: the mover's counted moves whose clock came
    book = assessment("e2e4", CANDS, ply=10, counted=False, clock=890.0, clock_spent=10.0, clock_base=900.0)
    moves = [book, clocked.model_copy(update={"ply": 30}), dropped.model_copy(update={"ply": 32})]
    assert known_lefts(moves) == {10: None, 30: None, 32: pytest.approx(x_left)}


def test_a_kept_game_carries_its_declared_time_control_to_the_review():
    """A game without clocks whose start declares its time control ("90+30": classical) is read as classical by the
    service; its record carries that time control (also through a stored game state), so the review assesses the kept
    game in the same class, not in the one its event name says or in none."""
    from streamer.pipeline import GameState, apply_move, end_game, start_game
    from streamer.review import game_of

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    start = GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"), event="Club Blitz Night",
                        time_control="90+30")
    state = start_game(None, start, None, config)
    assert state.time_class == "classical"
    state = GameState.from_dict(state.to_dict())  # a worker restarted mid-game
    for ply, uci in enumerate(["e2e4", "e7e5"]):
        state = apply_move(state, MoveEvent(game_id="g", ply=ply, uci=uci)).state
    results = end_game(state, GameEnded(game_id="g", result="1-0", plies=2))
    record = results[0].record
    assert record is not None and record.time_control == "90+30"
    def class_read(rec: GameRecord) -> str:  # the class the game step reads replaying the kept game, as the review does
        events = game_of(rec).events()
        replayed = start_game(None, events[0], None, config)
        for ev in events[1:3]:
            replayed = apply_move(replayed, ev).state
        return replayed.time_class

    assert class_read(record) == "classical"
    old = GameRecord.model_validate({k: v for k, v in record.model_dump().items() if k != "time_control"})
    assert class_read(old) == "blitz"  # a record without it (GameResult v4) still reads: the event name's class
