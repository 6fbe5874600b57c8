"""Event pooling (docs/models.md s. 12): the event's level from the other players' moves, and the pool step."""

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from analyzers.combination import load_combination
from analyzers.errors import CalibrationError
from analyzers.eventpool import (
    EventEvidence,
    EventPoolModel,
    OpenGame,
    combine,
    game_evidence,
    likelihood_moments,
    load_event_pool,
)
from analyzers.profiles import get_profile
from analyzers.ratingmodel import RATING_GRID, Prior, load_move_model
from schemas import Candidate, EventPrior, GameResult, MoveAssessment, PlayerInfo
from streamer.pipeline import PipelineConfig, apply_player_event, pool_event

MODEL = load_move_model("fast")
POOL = EventPoolModel(within_sd=240.0, mean0=1760.0, tau=330.0, event_sd=250.0)


def move_ll(rating: float, sd: float = 150.0) -> np.ndarray:
    """A move's log-likelihood that favours ``rating``: a stand-in for a strong player's or a weak player's move."""
    return -0.5 * ((RATING_GRID - rating) / sd) ** 2


def test_no_prior_before_another_player_has_moved_and_never_from_ones_own_moves():
    ev = EventEvidence()
    for ply in range(0, 20, 2):
        ev.add_move("g1", "alice", ply, move_ll(2600), "rapid", POOL, MODEL)
    assert ev.prior_for("alice", POOL) == (None, 0)  # only her own moves so far
    bob, n = ev.prior_for("bob", POOL)
    assert n == 1 and bob is not None and bob.mean > POOL.mean0 + 100  # her moves say the field is strong
    for ply in range(1, 21, 2):
        ev.add_move("g1", "bob", ply, move_ll(1200), "rapid", POOL, MODEL)
    alice, _ = ev.prior_for("alice", POOL)
    assert alice is not None and alice.mean < POOL.mean0 - 100  # from bob's moves only
    assert ev.prior_for("bob", POOL)[0] == bob  # bob's own moves left his prior as it was


def test_the_prior_narrows_with_more_player_games_but_never_below_the_within_event_spread():
    ev = EventEvidence()
    sds = []
    for g in range(30):
        for ply in range(10):
            ev.add_move(f"g{g}", f"p{g}", ply, move_ll(2000, 400.0), "rapid", POOL, MODEL)
        sds.append(ev.prior_for("newcomer", POOL)[0].sd)
    assert all(a > b for a, b in zip(sds, sds[1:], strict=False))
    assert sds[-1] > math.hypot(POOL.within_sd, POOL.event_sd)


def test_a_duplicate_ply_changes_nothing_and_the_state_round_trips():
    ev = EventEvidence()
    ev.add_move("g1", "a", 0, move_ll(2400), "blitz", POOL, MODEL)
    before = ev.prior_for("b", POOL)
    assert not ev.add_move("g1", "a", 0, move_ll(800), "blitz", POOL, MODEL)
    assert ev.prior_for("b", POOL) == before
    back = EventEvidence.from_dict(ev.to_dict())
    assert back.prior_for("b", POOL)[0].mean == pytest.approx(before[0].mean, abs=1e-6)
    back.add_move("g1", "a", 2, move_ll(2400), "blitz", POOL, MODEL)  # the open game's likelihood survived
    ev.add_move("g1", "a", 2, move_ll(2400), "blitz", POOL, MODEL)
    assert back.prior_for("b", POOL)[0].mean == pytest.approx(ev.prior_for("b", POOL)[0].mean, abs=1e-6)


def test_a_closed_game_keeps_its_contribution_and_open_games_are_bounded():
    ev = EventEvidence()
    ev.add_move("g1", "a", 0, move_ll(2400), "rapid", POOL, MODEL)
    before = ev.prior_for("b", POOL)
    ev.close("g1/a")
    assert ev.open == {} and ev.prior_for("b", POOL) == before
    for i in range(400):
        ev.add_move(f"h{i}", f"p{i}", 0, move_ll(1800), "rapid", POOL, MODEL, now=float(i))
    assert 100 < len(ev.open) < 400 and "h399/p399" in ev.open
    assert all(f"h{i}/p{i}" not in ev.open for i in range(400 - len(ev.open)))  # the ones idle longest were closed
    assert ev.prior_for("x", POOL)[1] == 401  # every player-game still counts


def test_combine_with_the_population_as_event_prior_gives_the_estimate_back():
    pop = Prior(1800.0, 380.0)
    mean, sd = combine(2100.0, 300.0, pop, pop)
    assert mean == pytest.approx(2100.0) and sd == pytest.approx(300.0)
    moved, _ = combine(2100.0, 300.0, pop, Prior(1400.0, 300.0))
    assert moved < 2100.0
    assert combine(1810.0, 379.0, pop, Prior(1400.0, 300.0)) is None  # next to no evidence beyond the population


def assessment(player: str, ply: int, event: str = "Open", game: str = "g1") -> MoveAssessment:
    cands = [Candidate(uci="e2e4", cp=30), Candidate(uci="d2d4", cp=20), Candidate(uci="a2a3", cp=-60)]
    return MoveAssessment(game_id=game, ply=ply, player_id=player, color="white" if ply % 2 == 0 else "black",
                          uci="e2e4", event=event, eval_before=30, eval_after=30, gain=0, candidates=cands,
                          played_rank=0, played_value=30, counted=True, engine="stockfish", limits=get_profile("fast").limits.key,
                          time_class="rapid")


def test_pool_step_attaches_the_prior_and_the_player_step_starts_from_it():
    config = PipelineConfig(get_profile("fast"), model=MODEL, event_pool=POOL)
    state = None
    state, first = pool_event(state, assessment("a", 0), config)
    assert first.event_prior is None  # nobody else has moved yet
    state, second = pool_event(state, assessment("b", 1), config)
    assert isinstance(second.event_prior, EventPrior) and second.event_prior.player_games == 1
    from analyzers.calibration import load_calibration

    pconfig = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    _, out = apply_player_event(None, second, pconfig)
    assert out[0].prior.startswith("event (1 player-games)")
    _, plain = apply_player_event(None, assessment("b", 1), pconfig)
    assert plain[0].prior.startswith("rapid") and plain[0].rating != out[0].rating
    result = GameResult(game_id="g1", player_id="a", color="white", score=1.0, event="Open",
                        player=PlayerInfo(id="a"), opponent=PlayerInfo(id="b"))
    state, closed = pool_event(state, result, config)
    assert state.open.keys() == {"g1/b"} and closed.event_prior is not None


def test_shipped_event_pooling_matches_the_move_model():
    pool = load_event_pool("fast")
    assert pool is not None and pool.profile == "fast" and "event_pooling.py" in pool.command
    assert 100 < pool.within_sd < 400 and pool.tau > 0
    assert pool.evidence == "combination" and pool.evidence_scale >= 1.0  # needs the shipped combination beside it
    PipelineConfig(get_profile("fast"), model=MODEL, combination=load_combination("fast"), event_pool=pool)


def test_pool_record_dead_letters_garbage_and_the_event_goes_on():
    from schemas import DeadLetter
    from streamer.steps import Route, Steps

    steps = Steps(PipelineConfig(get_profile("fast"), model=MODEL, event_pool=POOL))
    events: dict = {}
    (bad,) = steps.pool_record(events, b"Open", b'{"type": "assessment", "ply": -1}', "test")
    assert isinstance(bad.message, DeadLetter) and bad.message.reason == "malformed"
    (ok,) = steps.pool_record(events, b"Open", assessment("a", 0).model_dump_json().encode(), "test")
    assert ok.route is Route.ASSESSMENTS and ok.key == "a" and "Open" in events


COMB_POOL = replace(POOL, evidence="combination")


def clocked(player: str, ply: int, cp_played: int, clock: float | None) -> MoveAssessment:
    """A counted move of ``player`` that loses ``30 - cp_played`` centipawns, with its clock (seconds left) or none."""
    a = assessment(player, ply)
    rank = 0 if cp_played == 30 else None
    return a.model_copy(update={
        "played_rank": rank, "played_value": cp_played, "uci": "e2e4" if rank == 0 else "h2h3",
        **({"clock": clock, "clock_spent": 20.0, "clock_base": 900.0} if clock is not None else {})})


def replay(config: PipelineConfig, moves: list[MoveAssessment]) -> EventEvidence:
    state = None
    for m in moves:
        state, _ = pool_event(state, m, config)
    assert state is not None
    return state


def test_combination_evidence_reads_the_combinations_estimate_where_every_move_had_a_clock():
    comb = load_combination("fast")
    moves = [clocked("a", 2 * i, 30 if i % 3 else -120, 900.0 - 20 * i) for i in range(20)]
    by_model = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb, event_pool=POOL), moves)
    by_comb = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb, event_pool=COMB_POOL), moves)
    g = by_comb.open["g1/a"]
    assert g.feats.n == g.lik.n == 20 and comb.applies(g.feats)
    m, s = game_evidence(MODEL, g.lik, g.feats, comb)
    assert (m, s) != likelihood_moments(MODEL, g.lik)  # the combination's estimate, not the model's moments
    assert by_comb.open["g1/a"].a == pytest.approx(POOL.contribution(m, s)[0])
    assert by_comb.prior_for("b", COMB_POOL)[0] != by_model.prior_for("b", POOL)[0]
    back = EventEvidence.from_dict(by_comb.to_dict())  # the features survive a restore
    assert back.open["g1/a"].feats.to_dict() == g.feats.to_dict()


def test_combination_evidence_falls_back_to_the_model_without_clocks_or_without_features():
    comb = load_combination("fast")
    moves = [clocked("a", 2 * i, 30 if i % 3 else -120, None) for i in range(20)]
    by_model = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb, event_pool=POOL), moves)
    by_comb = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb, event_pool=COMB_POOL), moves)
    assert by_comb.prior_for("b", COMB_POOL)[0] == by_model.prior_for("b", POOL)[0]  # no clock: the model's evidence
    g = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb, event_pool=COMB_POOL),
               [clocked("a", 2 * i, 30, 900.0 - 20 * i) for i in range(20)]).open["g1/a"]
    old = g.to_dict()
    del old["feats"]  # a state written before the features were kept
    restored = OpenGame.from_dict(old)
    assert game_evidence(MODEL, restored.lik, restored.feats, comb) == likelihood_moments(MODEL, restored.lik)


def test_combination_evidence_needs_the_combination_and_evidence_is_checked():
    with pytest.raises(CalibrationError, match="combination"):
        PipelineConfig(get_profile("fast"), model=MODEL, event_pool=COMB_POOL)
    with pytest.raises(CalibrationError, match="evidence"):
        EventPoolModel(240.0, 1760.0, 330.0, 250.0, evidence="opinion")


def test_the_evidence_scale_weakens_a_games_evidence_about_the_level():
    comb = load_combination("fast")
    moves = [clocked("a", 2 * i, 30 if i % 3 else -120, 900.0 - 20 * i) for i in range(20)]
    g = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb, event_pool=COMB_POOL), moves).open["g1/a"]
    m1, s1 = game_evidence(MODEL, g.lik, g.feats, comb)
    m2, s2 = game_evidence(MODEL, g.lik, g.feats, comb, scale=2.0)
    assert m2 == m1 and s2 == pytest.approx(2.0 * s1)  # the same estimate, half as sure
    scaled = replay(PipelineConfig(get_profile("fast"), model=MODEL, combination=comb,
                                   event_pool=replace(COMB_POOL, evidence_scale=2.0)), moves)
    a = scaled.open["g1/a"].a
    assert a == pytest.approx(POOL.contribution(m2, s2)[0]) and a < g.a  # it weighs less in the event's level
    with pytest.raises(CalibrationError, match="scale"):
        EventPoolModel(240.0, 1760.0, 330.0, 250.0, evidence="combination", evidence_scale=0.5)


RESULTS_POOL = replace(POOL, results_scale=0.5)


def field_of(ev: EventEvidence, players: dict[str, float], pool: EventPoolModel = RESULTS_POOL) -> None:
    """One game of moves per player, each favouring the given rating."""
    for i, (pid, rating) in enumerate(players.items()):
        for ply in range(0, 30, 2):
            ev.add_move(f"m{i}", pid, ply, move_ll(rating, 400.0), "rapid", pool, MODEL)
        ev.close(f"m{i}/{pid}")


def test_results_move_the_prior_toward_the_winner_and_narrow_it():
    ev = EventEvidence()
    field_of(ev, {"a": 1800, "b": 1800, "c": 1800, "d": 1800})
    before, n = ev.prior_for("a", RESULTS_POOL)
    for g, opp in enumerate("bcd"):
        assert ev.add_result(f"r{g}", "a", opp, 1.0)
        ev.add_result(f"r{g}", opp, "a", 0.0)
    after, n_after = ev.prior_for("a", RESULTS_POOL)
    assert n_after == n and after.mean > before.mean + 50 and after.sd < before.sd
    loser, _ = ev.prior_for("b", RESULTS_POOL)
    assert loser.mean < before.mean - 10
    for ply in range(0, 30, 2):  # her own moves still never enter her prior, not even through her opponents'
        ev.add_move("late", "a", ply, move_ll(3000, 200.0), "rapid", RESULTS_POOL, MODEL)
    assert ev.prior_for("a", RESULTS_POOL)[0].mean == pytest.approx(after.mean, abs=1e-9)
    # without a results scale the results are kept but read by nothing
    assert ev.prior_for("a", POOL)[0] == EventEvidence.from_dict(ev.to_dict()).prior_for("a", POOL)[0]
    assert ev.prior_for("a", POOL)[0].mean == pytest.approx(before.mean)


def test_a_win_over_a_strong_player_says_more_than_a_win_over_a_weak_one():
    ev = EventEvidence()
    field_of(ev, {"a": 1800, "strong": 2400, "weak": 1200, "x": 1800})
    base, _ = ev.prior_for("a", RESULTS_POOL)
    one = EventEvidence.from_dict(ev.to_dict())
    one.add_result("r1", "a", "strong", 1.0)
    other = EventEvidence.from_dict(ev.to_dict())
    other.add_result("r1", "a", "weak", 1.0)
    assert one.prior_for("a", RESULTS_POOL)[0].mean > other.prior_for("a", RESULTS_POOL)[0].mean > base.mean
    draw = EventEvidence.from_dict(ev.to_dict())
    draw.add_result("r1", "a", "strong", 0.5)  # a draw with a much stronger opponent is a good result
    assert draw.prior_for("a", RESULTS_POOL)[0].mean > base.mean


def test_a_duplicate_result_changes_nothing_and_results_round_trip_and_are_bounded():
    from analyzers.eventpool import MAX_RESULTS

    ev = EventEvidence()
    field_of(ev, {"a": 1800, "b": 2000})
    ev.add_result("r1", "a", "b", 1.0)
    before = ev.prior_for("a", RESULTS_POOL)
    assert not ev.add_result("r1", "a", "b", 0.0)
    assert ev.prior_for("a", RESULTS_POOL) == before
    back = EventEvidence.from_dict(ev.to_dict())
    assert back.prior_for("a", RESULTS_POOL)[0].mean == pytest.approx(before[0].mean, abs=1e-9)
    for i in range(MAX_RESULTS + 10):
        ev.add_result(f"x{i}", "a", "b", 0.5)
    assert len(ev.results["a"]) == MAX_RESULTS and "r1" not in ev.results["a"]


def test_a_state_from_before_results_reads_with_zero_own_sums():
    ev = EventEvidence()
    field_of(ev, {"a": 2200, "b": 1600})
    d = ev.to_dict()
    d.pop("results")
    d["players"] = {k: v[:3] for k, v in d["players"].items()}
    back = EventEvidence.from_dict(d)
    assert back.results == {} and all(len(v) == 5 and v[3] == 0 for v in back.players.values())
    assert back.prior_for("a", POOL)[0].mean == pytest.approx(ev.prior_for("a", POOL)[0].mean)


def test_the_pool_step_records_each_result_once_and_the_next_prior_reads_it():
    config = PipelineConfig(get_profile("fast"), model=MODEL, event_pool=RESULTS_POOL)
    state = None
    for pid, ply in (("a", 0), ("b", 1)):
        state, _ = pool_event(state, assessment(pid, ply), config)
    before, _ = state.prior_for("a", RESULTS_POOL)
    result = GameResult(game_id="g1", player_id="a", color="white", score=1.0, event="Open",
                        player=PlayerInfo(id="a"), opponent=PlayerInfo(id="b"))
    state, out = pool_event(state, result, config)
    assert state.results == {"a": {"g1": ["b", 1.0]}}
    assert out.event_prior is not None and out.event_prior.mean > before.mean  # the event scope's end reads the win
    state, _ = pool_event(state, result, config)
    assert state.results == {"a": {"g1": ["b", 1.0]}}


def test_results_scale_is_checked():
    with pytest.raises(CalibrationError):
        replace(POOL, results_scale=-0.1)


def crowded_event(players: int, rounds: int, name, open_games: int) -> EventEvidence:
    """An online event: ``open_games`` player-games open at once (one move each), then ``rounds`` rounds of results
    between ``players`` players, ids made by ``name``."""
    ev = EventEvidence()
    for i in range(open_games):
        ev.add_move(name("game", i), name("player", i % players), 20, move_ll(1500 + i % 1000), "rapid", POOL, MODEL,
                    now=float(i))
    for r in range(rounds):
        for board in range(players // 2):
            w, b = name("player", 2 * board), name("player", (2 * board + 2 * r + 1) % players)
            ev.add_result(name("game", 10**6 + r * players + board), w, b, 1.0)
            ev.add_result(name("game", 10**6 + r * players + board), b, w, 0.0)
    return ev


def short_ids(kind: str, i: int) -> str:
    return f"fide:{10_000_000 + i}" if kind == "player" else f"online-open-2026:round-{i // 1000}:board-{i % 1000}"


def longest_ids(kind: str, i: int) -> str:
    """200 characters (the longest id a message may carry), each escaped in JSON to 12 bytes."""
    return f"{kind[0]}{i:07d}" + "\N{TROPHY}" * 192


@pytest.mark.parametrize("name", [short_ids, longest_ids])
def test_an_event_state_stays_under_its_bound_however_large_the_event(name):
    from analyzers.eventpool import EVENT_STATE_BOUND, OPEN_BUDGET, PLAYERS_BUDGET, RESULTS_BUDGET
    from streamer.state_store import encode

    ev = crowded_event(players=1500, rounds=8, name=name, open_games=1500)
    raw = encode(ev)
    assert len(raw) < EVENT_STATE_BOUND, len(raw)
    d = EventEvidence.from_dict(json.loads(raw)).to_dict()
    # the budgets' running estimates bound what each part takes
    parts = {"open": (OPEN_BUDGET, ev._open_bytes), "players": (PLAYERS_BUDGET, ev._players_bytes),
             "results": (RESULTS_BUDGET, ev._results_bytes)}
    for part, (budget, estimate) in parts.items():
        size = len(json.dumps(d[part], separators=(",", ":")))
        assert size <= estimate <= budget, part
        assert size > budget / 2, part  # each part was filled to its budget: the bound is tested at its worst
    assert ev.retired[2] > 0 and ev.prior_for(name("player", 1499), POOL)[1] == 1499  # retired players' games count


def test_retiring_players_keeps_the_level_and_the_state_round_trips(monkeypatch):
    import analyzers.eventpool as eventpool

    def field(budget: int) -> EventEvidence:
        monkeypatch.setattr(eventpool, "PLAYERS_BUDGET", budget)
        ev = EventEvidence()
        for i in range(40):
            ev.add_move(f"g{i}", f"p{i}", 20, move_ll(1400 + 25 * i), "rapid", POOL, MODEL, now=float(i))
            ev.add_move(f"g{i}", f"p{i}", 22, move_ll(1400 + 25 * i), "rapid", POOL, MODEL, now=float(i))
            ev.close(f"g{i}/p{i}")
        ev.add_result("r1", "p39", "p38", 1.0)
        return ev

    kept, crowded = field(10**9), field(10 * (len('"p10"') + 130))
    assert len(kept.players) == 40 and len(crowded.players) == 10 and "p0" not in crowded.players
    assert crowded.retired[2] == 30 and sum(crowded.retired) != 0
    for pool in (POOL, RESULTS_POOL):  # the level from 39 other players, 29 of them retired, is the same level
        a, b = kept.prior_for("p39", pool), crowded.prior_for("p39", pool)
        assert b[1] == a[1] == 39 and b[0].mean == pytest.approx(a[0].mean, abs=1e-9) and b[0].sd == pytest.approx(a[0].sd)
    back = EventEvidence.from_dict(json.loads(json.dumps(crowded.to_dict())))
    assert back.to_dict() == crowded.to_dict() and back.prior_for("p39", RESULTS_POOL) == crowded.prior_for("p39", RESULTS_POOL)
    assert (back._open_bytes, back._players_bytes, back._results_bytes) == (
        crowded._open_bytes, crowded._players_bytes, crowded._results_bytes)
    assert "retired" not in kept.to_dict()  # an event that never retired anyone keeps its stored form
    with pytest.raises(ValueError):
        EventEvidence.from_dict({**crowded.to_dict(), "retired": [1.0]})


def test_interval_scale_is_linear_in_log_moves_between_its_knots_and_flat_beyond():
    pool = replace(POOL, interval_scale=((4.0, 0.9), (16.0, 1.1)))
    assert POOL.scale_at(7) == 1.0  # no knots: the interval as the posterior gives it
    assert pool.scale_at(1) == pool.scale_at(4) == 0.9 and pool.scale_at(16) == pool.scale_at(500) == 1.1
    assert pool.scale_at(8) == pytest.approx(1.0)  # halfway between 4 and 16 in log moves
    back = EventPoolModel.from_dict(json.loads(json.dumps(pool.to_dict())))
    assert back == pool and back.scale_at(8) == pool.scale_at(8)
    for bad in (((4.0, 0.9), (4.0, 1.0)), ((16.0, 1.0), (4.0, 0.9)), ((0.0, 1.0),), ((4.0, 0.0),)):
        with pytest.raises(CalibrationError):
            replace(POOL, interval_scale=bad)
    # before the first counted move the prior's own factor; a file without it (older) reads 1
    with_prior = replace(pool, prior_scale=1.25)
    assert with_prior.scale_at(0) == 1.25 and with_prior.scale_at(1) == 0.9 and pool.scale_at(0) == 1.0
    assert EventPoolModel.from_dict(json.loads(json.dumps(with_prior.to_dict()))) == with_prior
    assert EventPoolModel.from_dict({k: v for k, v in with_prior.to_dict().items() if k != "prior_scale"}) == pool
    with pytest.raises(CalibrationError):
        replace(POOL, prior_scale=0.0)


def test_the_interval_scale_widens_or_narrows_only_the_estimate_under_an_event_prior():
    from analyzers.calibration import load_calibration
    from streamer.pipeline import model_estimates

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=MODEL)
    state = None
    for ply in range(0, 24, 2):
        state, _ = apply_player_event(state, assessment("a", ply), config)
    assert state is not None
    game = state.games["g1"]
    eprior, declared = Prior(1900.0, 300.0), (2000.0, 80.0)
    plain = model_estimates(game, MODEL, None, declared=declared, event_prior=eprior, pool=POOL)
    half = model_estimates(game, MODEL, None, declared=declared, event_prior=eprior,
                           pool=replace(POOL, interval_scale=((1.0, 0.5),)))
    assert plain is not None and half is not None
    for a, b in ((plain.moves_only, half.moves_only), (plain.band, half.band)):
        assert b.rating == a.rating and b.high - b.rating == pytest.approx((a.high - a.rating) / 2)
        assert b.rating - b.low == pytest.approx((a.rating - a.low) / 2)
    assert half.performance == plain.performance  # the declared prior's estimate is not the event pooling's
    no_event = model_estimates(game, MODEL, None, declared=declared, pool=replace(POOL, interval_scale=((1.0, 0.5),)))
    assert no_event == model_estimates(game, MODEL, None, declared=declared)
    # the player step publishes it with its configuration's event pooling
    from streamer.pipeline import PlayerState

    move = assessment("a", 24).model_copy(update={"event_prior": EventPrior(mean=1900.0, sd=300.0, player_games=3)})
    published = {}
    for name, cfg in (("plain", config), ("half", replace(config, event_pool=replace(POOL, interval_scale=((1.0, 0.5),))))):
        _, (published[name],) = apply_player_event(PlayerState.from_dict(state.to_dict()), move, cfg)
    p, h = published["plain"], published["half"]
    assert h.rating == p.rating and h.high - h.rating == pytest.approx((p.high - p.rating) / 2, abs=0.1)


def test_the_shipped_interval_scale_was_fitted_on_rated_dev():
    pool = load_event_pool("fast")
    assert pool is not None and "--split dev" in pool.interval_command and "--fit-interval-scale" in pool.interval_command
    assert len(pool.interval_scale) >= 3 and all(0.5 < f < 1.5 for _, f in pool.interval_scale)
    assert 1.0 < pool.prior_scale < 1.5


def test_the_pool_step_refuses_an_assessment_searched_at_other_limits_and_keeps_the_event_as_it_was():
    """An analyse stage run with another profile (depth 10, 10 lines) than the pool stage's model was fitted on: the
    assessment is the record's dead letter (``limits_mismatch``), the event's evidence unchanged."""
    from schemas import DeadLetter
    from streamer.steps import Steps

    steps = Steps(PipelineConfig(get_profile("fast"), model=MODEL, event_pool=POOL))
    events: dict = {}
    steps.pool_step(events, assessment("a", 0))
    before = events["Open"].to_dict()
    other = assessment("b", 1).model_copy(update={"limits": get_profile("standard").limits.key})
    (out,) = steps.pool_step(events, other)
    assert isinstance(out.message, DeadLetter) and out.message.reason == "limits_mismatch"
    assert "game g1, ply 1: searched at d10-mpv10, but this stage rates moves searched at d8-mpv5" in out.message.error
    assert events["Open"].to_dict() == before


def test_a_platforms_name_for_every_game_of_a_kind_is_told_from_an_event_and_logged_once(caplog):
    """Lichess's and chess.com's exports give every game of a kind one Event name: event pooling would read them as one
    tournament (intervals covering 88 %, docs/accuracy.md). The game step says so once per name; real events pass."""
    from analyzers.eventpool import platform_event_name
    from schemas import GameStarted, PlayerInfo
    from streamer.pipeline import start_game

    assert all(map(platform_event_name, ["Rated Blitz game", "Casual Correspondence game", "rated ultrabullet game",
                                         "Live Chess", "Let's Play!"]))
    assert not any(map(platform_event_name, ["Tata Steel Masters 2024", "Rated Blitz Arena", "Queen's festival",
                                             "Live Chess Olympiad", "World Rapid and Blitz Championships - Open"]))
    config = PipelineConfig(get_profile("fast"), model=MODEL, event_pool=POOL)

    def start(gid: str, event: str, cfg: PipelineConfig = config) -> None:
        start_game(None, GameStarted(game_id=gid, white=PlayerInfo(id="w"), black=PlayerInfo(id="b"), event=event), None, cfg)

    with caplog.at_level("WARNING", logger="kibitz.pipeline"):
        start("x1", "Rated Classical game")
        start("x2", "Rated Classical game")
        start("x3", "Tata Steel Masters 2024")
        start("x4", "Casual Classical game", PipelineConfig(get_profile("fast"), model=MODEL))  # no pooling: nothing to say
    said = [r for r in caplog.records if "every game of a kind" in r.getMessage()]
    assert [r.event for r in said] == ["Rated Classical game"]
