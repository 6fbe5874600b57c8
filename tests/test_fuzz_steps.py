"""Property tests of the steps.

The pool and player steps: whatever a well-formed record of ``kibitz.assessments`` holds (our own topic, but a
producer of another version or with a bug can write odd values), the steps never raise, never dead-letter it as an
internal error (a record the schema refuses is ``malformed``), publish only finite numbers and intervals with
``low <= high``, and leave states that survive their round trip through JSON.

Hypothesis draws records of the schema's shape (extreme centipawns, played ranks past the candidates, empty candidate
lists, odd clocks and classes, Go moves, event priors, game results with and without records) and replays them, in
its order, through the live configuration: the fast profile's move model, combination, event pooling, the
review and the Go calibration. The suite runs 200 examples, the same ones each run (``derandomize``, so CI is
reproducible); to hunt further, raise ``max_examples`` and drop ``derandomize`` for random draws.

All three steps, end to end in the embedded runtime with the real Stockfish: a stream of input events in which one
game is played cleanly while another receives its legal moves mixed with illegal ones, repeated, swapped and far plies,
restarts, moves of an unknown game, garbage and an early end. Every record is either processed or dead-lettered with
its own reason (never an internal error), no ply is assessed twice, the noisy game's legal moves are each assessed
once, and the clean game loses nothing."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace

import chess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.calibration import load_calibration
from analyzers.combination import load_combination
from analyzers.engine import EnginePool
from analyzers.eventpool import EventEvidence, load_event_pool
from analyzers.fairplay import ReviewCalibration
from analyzers.gorate import load_go_calibration
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model
from schemas import (
    DeadLetter,
    FairPlayAlert,
    GameEnded,
    GameResult,
    GameStarted,
    MoveAssessment,
    MoveEvent,
    PerceivedRating,
    PlayerInfo,
    RatingUpdate,
    ReviewRequest,
)
from schemas.messages import MAX_PLIES
from streamer.embedded import EmbeddedRuntime
from streamer.pipeline import REORDER_PLIES, PipelineConfig, PlayerState
from streamer.steps import Steps

CONFIG = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=load_move_model("fast"),
                        combination=load_combination("fast"), event_pool=load_event_pool("fast"),
                        review=ReviewCalibration.load("fast"), go_calibration=load_go_calibration(), max_events=2,
                        max_open_games=3)
CHESS_MOVES = ("e2e4", "d2d4", "g1f3", "c2c4", "e7e5", "a7a8q", "e1g1")
GO_MOVES = ("D4", "Q16", "pass", "K10")
PLAYERS, GAMES, EVENTS = ("p", "q"), ("g1", "g2", "g3", "g4"), ("", "open", "swiss", "arena")

cp = st.one_of(st.integers(-400, 400), st.integers(-3900, 3900), st.integers(-10**9, 10**9))
clock = st.one_of(st.none(), st.floats(0, 1e7, allow_nan=False), st.sampled_from([0.0, 1e-9]))
rating = st.one_of(st.none(), st.floats(0, 4000, allow_nan=False), st.sampled_from([0.0, 4000.0]))
prior = st.one_of(st.none(), st.fixed_dictionaries({"mean": st.floats(0, 4000), "sd": st.floats(1e-6, 4000),
                                                     "player_games": st.integers(1, 10**6)}))


@st.composite
def assessment(draw: st.DrawFn) -> dict:
    game = draw(st.sampled_from(("chess", "chess", "chess", "go")))
    moves = CHESS_MOVES if game == "chess" else GO_MOVES
    n = draw(st.integers(0, 8))
    cands = [{"uci": draw(st.sampled_from(moves)), "cp": draw(cp), "mate": draw(st.one_of(st.none(), st.integers(-20, 20)))}
             for _ in range(n)]
    return {
        "type": "assessment", "game": game, "game_id": draw(st.sampled_from(GAMES)), "player_id": draw(st.sampled_from(PLAYERS)),
        "ply": draw(st.one_of(st.integers(0, 120), st.just(MAX_PLIES))), "color": draw(st.sampled_from(("white", "black"))),
        "uci": draw(st.sampled_from(moves)), "event": draw(st.sampled_from(EVENTS)),
        "reference_rating": draw(rating), "reference_rd": draw(st.one_of(st.none(), st.floats(1e-3, 1000))),
        "time_class": draw(st.sampled_from((None, "blitz", "rapid", "classical", "unknown", "bullet", ""))),
        "clock": draw(clock), "clock_spent": draw(clock),
        "clock_base": draw(st.one_of(st.none(), st.floats(1e-6, 1e7, allow_nan=False))),
        "eval_before": draw(cp), "eval_after": draw(cp), "gain": draw(cp),
        "loss": draw(st.one_of(st.none(), st.integers(0, 10**9))), "candidates": cands,
        "played_rank": draw(st.one_of(st.none(), st.integers(0, 10))), "played_value": draw(st.one_of(st.none(), cp)),
        "counted": draw(st.booleans()), "engine": "Stockfish", "limits": "d8-mpv5", "recapture": draw(st.booleans()),
        "repeat": draw(st.booleans()),
        "event_prior": draw(prior), "prior": draw(st.one_of(st.none(), st.floats(0, 1))) if game == "go" else None,
    }


@st.composite
def game_result(draw: st.DrawFn) -> dict:
    gid, me = draw(st.sampled_from(GAMES)), draw(st.sampled_from(PLAYERS))
    event = draw(st.sampled_from(EVENTS))
    info = {"id": me, "rating": draw(rating), "rd": draw(st.one_of(st.none(), st.floats(1e-3, 1000)))}
    other = {"id": "x" if me != "x" else "y", "rating": draw(rating)}
    moves = draw(st.lists(st.sampled_from(CHESS_MOVES), max_size=6))
    record = draw(st.one_of(st.none(), st.just({"game_id": gid, "white": info, "black": other, "event": event, "moves": moves,
                                                 "clocks": [None] * len(moves), "result": "1-0"})))
    return {"type": "game_result", "game": draw(st.sampled_from(("chess", "chess", "go"))), "game_id": gid, "player_id": me,
            "color": "white", "score": draw(st.sampled_from((0.0, 0.5, 1.0))), "event": event, "player": info,
            "opponent": other, "event_prior": draw(prior), "record": record}


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.one_of(assessment(), assessment(), assessment(), game_result()), min_size=1, max_size=40))
def test_no_well_formed_record_stops_the_pool_or_player_step(records: list[dict]) -> None:
    steps = Steps(CONFIG)
    events: dict = {}
    players: dict = {}
    for rec in records:
        raw = json.dumps(rec).encode()
        passed = steps.pool_record(events, rec["player_id"].encode(), raw, "fuzz")
        outs = list(passed)
        for o in passed:
            if not isinstance(o.message, DeadLetter):
                outs += steps.player_record(players, o.key_bytes, o.message.model_dump_json().encode(), "fuzz")
        for o in outs:
            m = o.message
            if isinstance(m, DeadLetter):
                assert m.reason != "error", m.error  # refused with its own reason (malformed, unsupported_game...)
                continue
            assert isinstance(m, PerceivedRating | RatingUpdate | FairPlayAlert | ReviewRequest | MoveAssessment | GameResult), m
            json.dumps(m.model_dump(), allow_nan=False)  # every number finite, nested ones too (raises ValueError)
            if isinstance(m, PerceivedRating):  # (a mean need not lie in its central interval: a posterior can be skewed)
                assert m.low <= m.high and 0 <= m.rating <= 4000, m
    for pid, state in players.items():
        again = PlayerState.from_dict(json.loads(json.dumps(state.to_dict(), allow_nan=False)))
        assert again.to_dict() == state.to_dict(), pid
    for name, ev in events.items():
        back = EventEvidence.from_dict(json.loads(json.dumps(ev.to_dict(), allow_nan=False)))
        assert back.to_dict() == ev.to_dict(), name


NOISE = ("legal", "legal", "legal", "illegal", "repeat", "future", "swap", "restart", "unknown", "garbage", "end")


def _stream(ops: list[str], seed: int) -> tuple[list[str], list[int], int]:
    """The input lines for ``ops`` on the noisy game "n" interleaved with the clean game "c"; the plies of "n" whose
    legal move was sent before its end, and the number of plies of "c"."""
    rng = random.Random(seed)
    white, black = PlayerInfo(id="w", rating=1900), PlayerInfo(id="b", rating=1850)
    lines = [GameStarted(game_id=g, white=white if g == "c" else black, black=black if g == "c" else white, event="fuzz cup")
             .model_dump_json() for g in ("c", "n")]
    clean, noisy = chess.Board(), chess.Board()
    legal: list[int] = []
    ended = False
    for op in ops:
        if not clean.is_game_over() and clean.ply() < 24:  # the clean game advances one ply per op
            move = rng.choice(list(clean.legal_moves))
            lines.append(MoveEvent(game_id="c", ply=clean.ply(), uci=move.uci()).model_dump_json())
            clean.push(move)
        ply = noisy.ply()
        if op == "legal" and not noisy.is_game_over():
            move = rng.choice(list(noisy.legal_moves))
            lines.append(MoveEvent(game_id="n", ply=ply, uci=move.uci()).model_dump_json())
            noisy.push(move)
            if not ended:
                legal.append(ply)
        elif op == "illegal":
            illegal = next(u for u in ("a1a8", "h3h6", "d4d7", "b2b5") if chess.Move.from_uci(u) not in noisy.legal_moves)
            lines.append(MoveEvent(game_id="n", ply=ply, uci=illegal).model_dump_json())
        elif op == "repeat" and noisy.move_stack:
            lines.append(MoveEvent(game_id="n", ply=ply - 1, uci=noisy.peek().uci()).model_dump_json())
        elif op == "swap" and not noisy.is_game_over():  # the next two legal moves, the later first: both count
            sent = []
            for _ in range(2):
                if noisy.is_game_over():
                    break
                move = rng.choice(list(noisy.legal_moves))
                sent.append(MoveEvent(game_id="n", ply=noisy.ply(), uci=move.uci()).model_dump_json())
                noisy.push(move)
                if not ended:
                    legal.append(noisy.ply() - 1)
            lines += reversed(sent)
        elif op == "future":  # further ahead than a move may wait for the plies before it
            lines.append(MoveEvent(game_id="n", ply=ply + REORDER_PLIES + rng.randint(1, 5), uci="e2e4").model_dump_json())
        elif op == "restart":
            lines.append(GameStarted(game_id="n", white=black, black=white).model_dump_json())
        elif op == "unknown":
            lines.append(MoveEvent(game_id="nobody", ply=0, uci="e2e4").model_dump_json())
        elif op == "garbage":
            lines.append(rng.choice(['{"type": "move"', "null", '{"type": "move", "game_id": "n", "ply": -3, "uci": "e2e4"}',
                                     '{"type": "game_ended", "game_id": "n", "result": "2-0"}']))
        elif op == "end" and not ended:
            lines.append(GameEnded(game_id="n", result="1-0", plies=noisy.ply()).model_dump_json())
            ended = True
    lines.append(GameEnded(game_id="c", result="1/2-1/2", plies=clean.ply()).model_dump_json())
    return lines, legal, clean.ply()


async def _replay(lines: list[str]) -> tuple[list, list]:
    config = replace(CONFIG, profile=replace(get_profile("fast"), name="fast*", depth=4, multipv=3), review=None)
    out: list = []
    dead: list = []
    async with EnginePool(size=1, timeout=10) as pool:
        async with EmbeddedRuntime(pool, config, out.append, dead.append) as rt:
            for raw in lines:
                rt.submit_raw(raw, source="fuzz")
            await rt.drain()
    return out, dead


@settings(max_examples=20, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(NOISE), min_size=1, max_size=30), st.integers(0, 2**16))
def test_no_input_stops_the_game_step_and_the_clean_game_loses_nothing(stockfish, ops: list[str], seed: int) -> None:
    lines, legal, clean_plies = _stream(ops, seed)
    out, dead = asyncio.run(_replay(lines))
    dead_letters = [m for m in out if isinstance(m, DeadLetter)] + [d for d in dead if isinstance(d, DeadLetter)]
    assert all(d.reason != "error" for d in dead_letters), [d.error for d in dead_letters if d.reason == "error"]
    assessed = [(m.game_id, m.ply) for m in out if isinstance(m, MoveAssessment)]
    assert len(assessed) == len(set(assessed)), "a ply assessed twice"
    assert sorted(p for g, p in assessed if g == "c") == list(range(clean_plies))
    assert sorted(p for g, p in assessed if g == "n") == legal
    assert {m.player_id for m in out if isinstance(m, RatingUpdate) and m.game_id == "c"} == {"w", "b"}
