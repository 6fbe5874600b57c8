"""Go with KataGo: the analysis engine through the engine pool (the real KataGo that deploy/katago/setup.sh installs; a
fake one only to inject faults), a move judged from the evaluations before and after it, the network's evidence in a
player's scopes and the rank model that reads it, and `kibitz replay FILE.sgf` with the KataGo calibration."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from analyzers.engine.adapter import GO, GO_KATAGO, go_adapter
from analyzers.engine.gtp import GoAnalysis, GoLimits
from analyzers.engine.katago import (
    KATAGO_HOME,
    POLICY_FLOOR,
    KataGoLimits,
    katago_key,
    policy_index,
    policy_move,
    query,
)
from analyzers.engine.pool import EnginePool
from analyzers.errors import CalibrationError, EngineCrashed, EngineError, EngineTimeout
from analyzers.goboard import GoPosition
from analyzers.gorate import DEFAULT_GO_PROFILE, KATAGO_PROFILE, GoSkill, NetworkEvidence, RankModel, load_go_calibration
from analyzers.profiles import get_profile
from schemas import MoveEvent, PlayerInfo
from streamer.goassess import assess_go_game
from streamer.gopipeline import GoScope, count_go_move, go_assessment
from streamer.sgf import read_sgf_games

FIXTURES = Path(__file__).parent / "fixtures"
FOX = FIXTURES / "fox_5d_testing.sgf"
FAKE = str(FIXTURES / "fake_katago.py")


def katago() -> str:
    path = KATAGO_HOME / "katago"
    if not path.is_file():
        pytest.fail(f"KataGo is not installed at {path}: run `make setup` (bash deploy/katago/setup.sh)")
    return str(path)


# -- the engine -------------------------------------------------------------------------------------------
def test_katago_evaluations_are_reproducible_on_fresh_processes():
    todo = read_sgf_games(FOX)[0].positions(6)

    async def run() -> tuple[list[GoAnalysis], list[GoAnalysis], str]:
        async with EnginePool(katago(), size=1, game=GO_KATAGO, timeout=300) as pool:
            forward = [await pool.analyse_limits(p, KataGoLimits()) for p in todo]
        async with EnginePool(katago(), size=1, game=GO_KATAGO, timeout=300) as pool:
            backward = [await pool.analyse_limits(p, KataGoLimits()) for p in reversed(todo)]
            return forward, backward[::-1], pool.identity

    forward, backward, identity = asyncio.run(run())
    assert [(a.lead, a.policy) for a in forward] == [(b.lead, b.policy) for b in backward]
    assert identity.startswith("KataGo 1.18") and "b10c384" in identity  # the network's name is in every cache key
    for a in forward:
        assert a.lead is not None and abs(a.lead) < 30  # the opening of an even game
        priors = [p for _, p in a.policy]
        assert priors == sorted(priors, reverse=True) and min(priors) >= POLICY_FLOOR and 0.5 < sum(priors) <= 1.0001
        assert a.candidates == ((a.policy[0][0], a.lead),)
    assert forward[0].prior("A1") == POLICY_FLOOR  # a corner point on an empty board: below the floor


def test_the_cache_key_is_what_the_network_reads():
    a, b = GoPosition(), GoPosition()
    for m in ("Q16", "D4", "Q4", "D16"):
        a.play(m)
    for m in ("Q4", "D16", "Q16", "D4"):
        b.play(m)
    assert a.key() == b.key()  # the same stones, side to move, ko and komi ...
    assert katago_key(a) != katago_key(b)  # ... reached by other last moves, which the network reads
    for i in range(362):
        assert policy_index(policy_move(i, 19), 19) == i
    assert policy_move(0, 19) == "A19" and policy_move(361, 19) == "pass"
    q = query(a, KataGoLimits(), "q")
    assert q["analyzeTurns"] == [4] and q["moves"][-1] == ["W", "D16"] and "initialPlayer" not in q
    twice = a.copy()
    twice.to_move = "w"  # a record that lets White move twice (a pass left out): KataGo is shown Black's pass
    assert query(twice, KataGoLimits(), "q")["moves"][-2:] == [["W", "D16"], ["B", "pass"]]
    assert query(GoPosition(to_move="w"), KataGoLimits(), "q")["initialPlayer"] == "W"
    assert go_adapter(KataGoLimits()) is GO_KATAGO and go_adapter(GoLimits(1)) is GO
    with pytest.raises(ValueError):
        KataGoLimits(0)


def test_a_game_through_katago_judges_each_move_by_the_positions_before_and_after():
    game = read_sgf_games(FOX)[0]

    async def run():
        async with EnginePool(katago(), size=1, game=GO_KATAGO, timeout=300) as pool:
            return await assess_go_game(game, pool, KataGoLimits(), max_plies=8)

    moves, err = asyncio.run(run())
    assert err is None and len(moves) == 8
    for m, nxt in zip(moves, moves[1:]):
        # the played move's value is minus the opponent's lead after it, which is the next move's best value
        assert m.played == 1 and m.values[1] == -nxt.values[0]
    assert all(m.prior is not None and POLICY_FLOOR <= m.prior <= 1 for m in moves)
    skill = GoSkill()
    for m in moves:
        skill.add(m.values, m.played, m.prior, m.move == m.best_move)
    assert skill.network.n == 8 and skill.posterior.n == 8


@pytest.mark.parametrize("mode,error", [("crash", EngineCrashed), ("garbage", EngineCrashed), ("refuse", EngineCrashed),
                                        ("nopolicy", EngineCrashed), ("hang", EngineTimeout)])
def test_a_failing_katago_fails_the_search_and_is_replaced(mode, error):
    async def run() -> None:
        async with EnginePool([sys.executable, FAKE, mode], size=1, game=GO_KATAGO, timeout=1.0) as pool:
            assert pool.engine_name == "KataGo 0.0-fake fake"
            with pytest.raises(error):
                await pool.analyse_limits(GoPosition(), KataGoLimits())
            assert pool.stats.restarts == 2 and pool.stats.failures == 1
            assert len(pool.pids) == 1  # the slot holds a fresh process

    asyncio.run(run())


# -- the evidence and the rank model (no engine) ----------------------------------------------------------
def _analysis(lead: float, policy: tuple[tuple[str, float], ...]) -> GoAnalysis:
    return GoAnalysis(key="k", candidates=((policy[0][0], lead),), engine="KataGo test", limits="v1", lead=lead,
                      policy=policy)


def test_a_katago_assessment_carries_the_leads_and_the_prior_and_counts_in_every_scope():
    before = _analysis(2.0, (("Q16", 0.6), ("D4", 0.3)))
    after = _analysis(1.5, (("D16", 0.5),))  # the opponent leads by 1.5 after the move: it lost 3.5 points
    ev = MoveEvent(game="go", game_id="g", ply=4, uci="D4")
    a = go_assessment(ev, mover=PlayerInfo(id="p"), colour="black", side=0, event="", analysis=before, after=after)
    assert a.prior == 0.3 and a.loss == 350 and a.gain == -4 and a.played_rank == 1 and a.counted
    assert (a.eval_before, a.eval_after) == (200, -150) and [c.uci for c in a.candidates] == ["Q16", "D4"]
    game, overall = GoScope(), GoScope()
    count_go_move((game, overall), a)
    for s in (game, overall):
        assert s.skill.network.n == 1 and s.skill.network.means()[1] == pytest.approx(3.5)
        assert s.skill.network.means()[2] == 0.0  # not the policy's first choice
    back = GoScope.from_dict(json.loads(json.dumps(game.to_dict())))
    assert back.skill.network == game.skill.network
    with pytest.raises(ValueError, match="after"):
        go_assessment(ev, mover=PlayerInfo(id="p"), colour="black", side=0, event="", analysis=before)


def test_network_evidence_clips_a_swing_and_reads_a_move_below_the_floor_at_it():
    e = NetworkEvidence()
    e.add(0.0, 100.0, False)
    e.add(1.0, -3.0, True)
    log_prior, lost, first = e.means()
    assert lost == pytest.approx((20.0 - 3.0) / 2) and first == 0.5
    assert log_prior == pytest.approx(math.log(POLICY_FLOOR) / 2)
    assert NetworkEvidence.from_list(e.to_list()) == e


def test_the_katago_rank_model_reads_the_network_score():
    assert DEFAULT_GO_PROFILE == KATAGO_PROFILE  # Go is rated by KataGo unless a calibration says otherwise
    cal = load_go_calibration()
    model = RankModel.of(cal)
    assert model.weights is not None and "visits" in cal.extra
    none = GoSkill().estimate(model)
    assert abs(none.rating - model.prior_mean) < 1 and none.n == 0  # no move: the population prior
    strong, weak = GoSkill(), GoSkill()
    widths = []
    for i in range(200):
        strong.add((1.0, -1.0), 1, 0.5, True)      # the network's favourite, no point lost
        weak.add((1.0, -9.0), 1, 0.001, False)     # a move it hardly considered, 8 points lost
        if i + 1 in (5, 50, 200):
            widths.append(strong.estimate(model).high - strong.estimate(model).low)
    assert widths[0] > widths[1] >= widths[2] > 0
    assert strong.estimate(model).rating > model.prior_mean > weak.estimate(model).rating
    bad = cal.extra | {"rank_model": cal.extra["rank_model"] | {"weights": [1.0]}}
    with pytest.raises(CalibrationError, match="weights"):
        RankModel.of(type(cal)(**{**cal.__dict__, "extra": bad}))


# -- kibitz replay FILE.sgf with KataGo ------------------------------------------------------------------------
def test_replay_with_the_katago_calibration_rates_both_players_move_by_move(tmp_path):
    root, *nodes = FOX.read_text().strip().removeprefix("(;").removesuffix(")").split(";")
    short = tmp_path / "fox_opening.sgf"
    short.write_text("(;" + ";".join([root, *nodes[:16]]) + ")\n")  # the held-out game's first 16 moves
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "streamer.cli", "replay", str(short), "--out", str(out), "--quiet",
                           "--go-profile", KATAGO_PROFILE, "--go-engine", katago(), "--engines", "1"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "KataGo v1" in proc.stdout
    msgs = [json.loads(line) for line in out.read_text().splitlines()]
    game = [m for m in msgs if m["type"] == "perceived" and m["scope"] == "game"]
    by_player = {}
    for m in game:
        by_player.setdefault(m["player_id"], []).append(m)
    assert sorted(len(v) for v in by_player.values()) == [8, 8]
    for ratings in by_player.values():
        assert [m["moves"] for m in ratings] == list(range(1, 9))
        assert all(m["method"] == "network" and m["low"] < m["rating"] < m["high"] and m["rank"] for m in ratings)
        assert ratings[-1]["high"] - ratings[-1]["low"] < ratings[0]["high"] - ratings[0]["low"]
    assert [m["type"] for m in msgs].count("glicko2") == 2


def test_a_katago_calibration_sets_up_katago_for_every_runtime():
    import argparse

    from streamer.cli import go_setup
    from streamer.pipeline import PipelineConfig

    cal, limits = go_setup(argparse.Namespace(go_profile=KATAGO_PROFILE, go_level=None))
    assert limits == KataGoLimits(int(cal.extra["visits"]))
    config = PipelineConfig(get_profile("fast"), go_calibration=cal, go_limits=limits)
    assert config.go_game is GO_KATAGO  # the worker's and the replay's Go pool
    gnugo_cal, gnugo_limits = go_setup(argparse.Namespace(go_profile="go-fox-gnugo-l1", go_level=None))
    assert isinstance(gnugo_limits, GoLimits) and PipelineConfig(get_profile("fast"), go_limits=gnugo_limits).go_game is GO


def test_a_katago_without_its_network_says_what_is_missing(tmp_path):
    async def run() -> None:
        with pytest.raises(EngineError, match="KataGo did not start.*missing.bin.gz"):
            async with EnginePool(katago(), size=1, game=GO_KATAGO, options={"model": str(tmp_path / "missing.bin.gz")}):
                pass

    asyncio.run(run())
