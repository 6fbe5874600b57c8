"""The embedded runtime end to end with the real Stockfish (shallow limits to keep the suite quick)."""

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from analyzers.calibration import Calibration
from analyzers.engine import EnginePool
from analyzers.profiles import EngineProfile
from schemas import MoveAssessment, PerceivedRating, RatingUpdate
from streamer.embedded import EmbeddedRuntime
from streamer.ingest import DEMO_PGN, read_pgn_games
from streamer.pipeline import PipelineConfig

PROFILE = EngineProfile("test", depth=6, multipv=4, skip_plies=8)
CAL = Calibration("test", "Stockfish", 2900.0, [(0.5, 1200.0), (2.0, 2600.0)], 350.0)
CONFIG = PipelineConfig(PROFILE, CAL, min_alert_moves=20)
FAKE = str(Path(__file__).parent / "fixtures" / "fake_engine.py")


async def run(events_raw, engine=None, engines=2):
    out, dead = [], []
    async with EnginePool(engine, size=engines, timeout=5) as pool:
        async with EmbeddedRuntime(pool, CONFIG, out.append, dead.append) as rt:
            for raw in events_raw:
                rt.submit_raw(raw, source="test")
            await rt.drain()
        return out, dead, rt


def demo_lines(n_games=2):
    lines = []
    for g in list(read_pgn_games(DEMO_PGN))[:n_games]:
        lines += [e.model_dump_json() for e in g.events()]
    return lines


def summary(out):
    ratings = {(m.game_id, m.ply): m.rating for m in out if isinstance(m, PerceivedRating) and m.scope == "game"}
    glicko = {(m.game_id, m.player_id): m.after.rating for m in out if isinstance(m, RatingUpdate)}
    return ratings, glicko


async def test_every_ply_one_assessment_one_rating_and_glicko_at_the_end(stockfish):
    lines = demo_lines(2)
    out, dead, _ = await run(lines)
    assert dead == []
    moves = [json.loads(x) for x in lines if '"type":"move"' in x]
    assessments = [m for m in out if isinstance(m, MoveAssessment)]
    game_ratings = [m for m in out if isinstance(m, PerceivedRating) and m.scope == "game"]
    assert sorted((a.game_id, a.ply) for a in assessments) == sorted((m["game_id"], m["ply"]) for m in moves)
    assert sorted((r.game_id, r.ply) for r in game_ratings) == sorted((m["game_id"], m["ply"]) for m in moves)
    updates = [m for m in out if isinstance(m, RatingUpdate)]
    assert len(updates) == 4
    for r in game_ratings:
        assert r.low <= r.rating <= r.high and r.provisional
    players = [m for m in out if isinstance(m, PerceivedRating) and m.scope == "player"]
    assert len(players) == 4 and all(p.moves > 5 for p in players)


async def test_bad_input_is_dead_lettered_and_the_rest_is_unchanged(stockfish):
    clean = demo_lines(2)
    out_clean, _, _ = await run(clean)
    g = json.loads(clean[0])["game_id"]
    bad = [
        "this is not json",
        f'{{"type": "move", "game_id": "{g}", "ply": 1, "uci": "e2e4", "bogus": true}}',
        '{"type": "move", "game_id": "no-such-game", "ply": 0, "uci": "e2e4"}',
        '{"type": "game_ended", "game_id": "no-such-game", "result": "1-0"}',
        b"\xff\xfe not utf-8",
    ]
    mixed = clean[:5] + [clean[3]] + bad[:2] + clean[5:7] + [
        # an illegal move and an out-of-order ply for game g, while it is in progress
        f'{{"type": "move", "game_id": "{g}", "ply": 6, "uci": "a1a8"}}',
        f'{{"type": "move", "game_id": "{g}", "ply": 40, "uci": "e2e4"}}',
    ] + bad[2:] + clean[7:]
    out, dead, rt = await run(mixed)
    reasons = sorted(d.reason for d in dead)
    assert reasons == sorted(["duplicate_ply", "malformed", "malformed", "illegal_move", "out_of_order_ply",
                              "unknown_game", "unknown_game", "malformed"])
    for d in dead:
        assert d.raw  # the original bytes are kept
    assert any(d.raw_base64 for d in dead)  # non-UTF-8 input is kept exactly, as base64
    assert summary(out) == summary(out_clean)  # nothing valid was lost or counted twice


async def test_moves_that_come_early_wait_for_the_plies_before_them_and_change_nothing(stockfish):
    """A producer's retry (or two producers of one game) can swap a game's records. A move up to REORDER_PLIES ahead
    of its game waits in the game's state for the plies before it; before, it was rejected and every later move of its
    game was then out of order: one swap of two plies lost the rest of the game (86 dead letters, no result)."""
    clean = demo_lines(1)
    out_clean, _, _ = await run(clean)
    moves = clean[1:-1]  # game_started, the moves by ply, game_ended
    # ply 11 before 10; plies 30 and 25 (10 and 5 ahead) before 20; plies 40-56 before 39: 56 is 17 ahead, past the
    # window, and is rejected (the stream stops there: the game would wait for it in vain)
    shuffled = [*moves[:10], moves[11], moves[10], *moves[12:20], moves[30], moves[25],
                *(moves[p] for p in range(20, 39) if p not in (25, 30)), *moves[40:57], moves[39]]
    assert sorted(json.loads(m)["ply"] for m in shuffled) == list(range(57))
    out, dead, _ = await run([clean[0], *shuffled])
    assert [d.reason for d in dead] == ["out_of_order_ply"] and json.loads(dead[0].raw)["ply"] == 56
    assert "up to 16 plies ahead waits" in dead[0].error
    rated = {(m.game_id, m.ply): m.rating for m in out if isinstance(m, PerceivedRating) and m.scope == "game"}
    ratings, _ = summary(out_clean)
    assert rated == {k: v for k, v in ratings.items() if k[1] < 56}  # the same ratings, in the same order of plies

    in_order = [clean[0], *moves[:10], moves[11], moves[10], *moves[12:], clean[-1]]  # one swap, then to the end
    out, dead, _ = await run(in_order)
    assert dead == [] and summary(out) == summary(out_clean)


async def test_a_held_move_sent_again_is_a_duplicate_and_one_its_game_ends_without_is_dead_lettered(stockfish, caplog):
    import logging

    from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
    from streamer.pipeline import GameState
    from streamer.steps import Steps

    async with EnginePool(stockfish, size=1) as pool:
        steps, games = Steps(CONFIG, pool), {}
        start = GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"))
        await steps.game(games, start)
        for ply, uci in enumerate(("e2e4", "e7e5")):
            assert [o.message.ply for o in await steps.game(games, MoveEvent(game_id="g", ply=ply, uci=uci))] == [ply]
        with caplog.at_level(logging.INFO, logger="kibitz.pipeline"):
            assert await steps.game(games, MoveEvent(game_id="g", ply=3, uci="b8c6"), source="moves/0@7") == []
        assert [(r.ply, r.expected_ply, r.source) for r in caplog.records if r.message == "move held for the plies before it"] \
            == [(3, 2, "moves/0@7")]
        again = await steps.game(games, MoveEvent(game_id="g", ply=3, uci="g8f6"))
        assert again[0].message.reason == "duplicate_ply" and "held, waiting for the plies before it, with a different move (b8c6)" in again[0].message.error
        # the game's state keeps it across a restart (the transactional runtime's changelog)
        games["g"] = GameState.from_dict(json.loads(json.dumps(games["g"].to_dict())))
        assert list(games["g"].held) == [3] and games["g"].held[3].source == "moves/0@7"
        ended = await steps.game(games, GameEnded(game_id="g", result="1-0"))
        dead = [o.message for o in ended if o.message.type == "deadletter"]
        assert [(d.reason, d.source, json.loads(d.raw)["uci"]) for d in dead] == [("out_of_order_ply", "moves/0@7", "b8c6")]
        assert "game ended at ply 2 while this move waited" in dead[0].error
        assert [o.message.score for o in ended if o.message.type == "game_result"] == [1.0, 0.0]


async def test_engine_crash_dead_letters_moves_but_the_game_goes_on(tmp_path):
    lines = demo_lines(1)[:12] + [
        '{{"type": "game_ended", "game_id": "{}", "result": "1-0"}}'.format(json.loads(demo_lines(1)[0])["game_id"])
    ]
    out, dead, _ = await run(lines, engine=[sys.executable, FAKE, "crash"], engines=1)
    assert dead and all(d.reason == "engine_crashed" for d in dead)
    assert len([m for m in out if isinstance(m, RatingUpdate)]) == 2  # the result still rates both players


async def test_game_end_waits_for_late_moves(stockfish):
    lines = demo_lines(1)
    end = lines[-1]
    reordered = lines[:10] + [end] + lines[10:-1]  # the end overtakes the last moves (another topic)
    out, dead, _ = await run(reordered)
    assert dead == []
    assert summary(out) == summary((await run(lines))[0])


async def test_second_replay_with_persistent_cache_makes_no_engine_calls_and_metrics_say_so(stockfish, tmp_path):
    from prometheus_client import generate_latest

    lines = demo_lines(1)
    db = tmp_path / "analyses.sqlite"
    results = []
    for _ in range(2):
        out, dead = [], []
        async with EnginePool(None, size=2, cache_path=db) as pool:
            async with EmbeddedRuntime(pool, CONFIG, out.append, dead.append) as rt:
                for raw in lines:
                    rt.submit_raw(raw, source="test")
                await rt.drain()
            text = generate_latest(rt.metrics.registry).decode()
            results.append((pool.stats.searches, pool.stats.cache_hits, summary(out), text))
    (s1, _, first, _), (s2, hits2, second, text2) = results
    assert s1 > 50 and s2 == 0 and hits2 > 50
    assert first == second
    assert "kibitz_engine_searches_total 0.0" in text2 and "kibitz_engine_cache_hit_ratio 1.0" in text2
    assert 'kibitz_outputs_total{type="perceived"}' in text2 and "kibitz_move_seconds_count" in text2


async def test_games_that_never_end_stay_under_the_memory_bound_and_later_games_are_rated(stockfish):
    """5,000 games that start, move and never end, through a runtime limited to 1,000 games and players: state
    memory stays under the stated bound, the evictions are counted, and a game after them is rated."""
    import tracemalloc

    from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
    from streamer.embedded import STATE_BYTES_PER_GAME

    limit, n = 1_000, 5_000
    profile = EngineProfile("test", depth=2, multipv=4, skip_plies=0)
    config = PipelineConfig(profile, CAL)
    out, dead = [], []
    async with EnginePool(None, size=1) as pool:
        keep = lambda m: out.append(m) if isinstance(m, RatingUpdate) else None  # noqa: E731 - outputs are not state
        async with EmbeddedRuntime(pool, config, keep, dead.append, max_games=limit, max_players=limit) as rt:
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            peak = 0
            for i in range(n):
                rt.submit(GameStarted(game_id=f"open{i}", white=PlayerInfo(id=f"w{i}"), black=PlayerInfo(id=f"b{i}")))
                rt.submit(MoveEvent(game_id=f"open{i}", ply=0, uci="e2e4", clock=180.0))
                if i % 500 == 499:
                    await rt.drain()
                    peak = max(peak, tracemalloc.get_traced_memory()[0] - base)
            tracemalloc.stop()
            later = [GameStarted(game_id="later", white=PlayerInfo(id="x"), black=PlayerInfo(id="y")),
                     MoveEvent(game_id="later", ply=0, uci="d2d4"), MoveEvent(game_id="later", ply=1, uci="d7d5"),
                     GameEnded(game_id="later", result="1-0", plies=2)]
            for ev in later:
                rt.submit(ev)
            await rt.drain()
            evicted = {s.labels["what"]: s.value for s in rt.metrics.evicted.collect()[0].samples if s.name.endswith("_total")}
    assert not dead
    assert len(rt.games) <= limit and len(rt.players) <= limit
    assert evicted["game"] >= n - limit and evicted["player"] >= n - limit
    assert peak < limit * STATE_BYTES_PER_GAME, f"{peak / 1e6:.1f} MB for {limit} games"
    assert {m.player_id for m in out if isinstance(m, RatingUpdate)} == {"x", "y"}


async def test_a_game_evicted_at_the_memory_limit_dead_letters_the_move_it_held(stockfish):
    """A game holding a move for its missing ply 0, pushed out by two newer games under ``max_games=2``: the held move
    is dead-lettered with its source, not dropped with the game; the newer games go on."""
    from schemas import GameStarted, MoveEvent, PlayerInfo

    dead = []
    async with EnginePool(None, size=1) as pool:
        async with EmbeddedRuntime(pool, CONFIG, lambda m: None, dead.append, max_games=2, partitions=1) as rt:
            rt.submit(GameStarted(game_id="a", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), source="in/0@0")
            rt.submit(MoveEvent(game_id="a", ply=1, uci="e7e5"), source="in/0@1")
            for g in ("b", "c"):
                rt.submit(GameStarted(game_id=g, white=PlayerInfo(id=f"w{g}"), black=PlayerInfo(id=f"b{g}")))
            await rt.drain()
    assert [(d.reason, d.game_id, d.ply, d.source) for d in dead] == [("out_of_order_ply", "a", 1, "in/0@1")]
    assert "evicted at the memory limit (2 games) while this move waited for ply 0" in dead[0].error
    assert sorted(rt.games) == ["b", "c"]


@pytest.mark.parametrize("end_first", [False, True])
async def test_an_illegal_move_does_not_keep_a_game_whose_end_announced_its_plies_from_ending(stockfish, end_first):
    """Ply 30 of the demo game replaced by an illegal move: the game cannot go on past it, so its end (which announces
    every ply) finishes it on the 30 plies applied, whether the end comes last or overtook the illegal move. The
    result is rated; the moves after ply 30 are dead-lettered (held ones at the end, later ones as moves of an ended
    game or too far ahead). Before, the end waited for ever for plies that could not come, and the result was lost
    with the idle game."""
    lines = demo_lines(1)
    start, moves, end = lines[0], lines[1:-1], lines[-1]
    assert json.loads(end)["plies"] == len(moves) > 40
    bad = json.dumps({**json.loads(moves[30]), "uci": "a1a8"})  # no piece of the mover's can go there at ply 30
    stream = [start, *moves[:30], end, bad, *moves[31:]] if end_first else [start, *moves[:30], bad, *moves[31:], end]
    out, dead, rt = await run(stream)
    reasons = [(d.reason, d.ply) for d in dead]
    assert reasons[0] == ("illegal_move", 30)
    assert {r for r, _ in reasons[1:]} <= {"out_of_order_ply", "unknown_game"} and len(reasons) == len(moves) - 30
    assert len([m for m in out if isinstance(m, RatingUpdate)]) == 2  # the result rated
    g = json.loads(start)["game_id"]
    assert rt.games[g].ended
    assert len({m.ply for m in out if isinstance(m, PerceivedRating) and m.scope == "game"}) <= 30


async def test_a_start_after_the_end_and_a_reused_id_are_rejected(stockfish):
    lines = demo_lines(1)
    g = json.loads(lines[0])["game_id"]
    again = [lines[0], lines[1],  # the same id started again (a late start, or a re-used id), then a move for it
             json.dumps({"type": "game_ended", "game_id": g, "result": "1-0"})]
    out, dead, rt = await run(lines + again)
    assert [d.reason for d in dead] == ["duplicate_game", "unknown_game", "unknown_game"]
    assert "used once" in dead[0].error and "has ended" in dead[1].error
    assert len([m for m in out if isinstance(m, RatingUpdate)]) == 2  # the game was rated once
    assert rt.games[g].ended and "moves" not in rt.games[g].to_dict()  # what stays is a small end marker


def test_sweep_drops_idle_games_and_old_end_markers_and_counts_them():
    from schemas import PlayerInfo
    from streamer.pipeline import GameState
    from streamer.steps import Steps

    steps = Steps(PipelineConfig(PROFILE, CAL, idle_game_seconds=100, ended_game_seconds=1000))
    w, b = PlayerInfo(id="w"), PlayerInfo(id="b")
    games = {"fresh": GameState("fresh", w, b, touched=950), "idle": GameState("idle", w, b, touched=800),
             "ended": GameState("ended", w, b, ended=True, touched=500),
             "old-end": GameState("old-end", w, b, ended=True, touched=-100)}
    swept = steps.sweep_games(games, now=1000)
    assert (swept.evicted, swept.expired, swept.dead_letters) == (1, 1, [])  # the idle game waited for nothing
    assert sorted(games) == ["ended", "fresh"]
    assert steps.metrics.evicted.labels("idle_game")._value.get() == 1


async def test_an_idle_game_evicted_dead_letters_the_moves_and_the_end_that_waited_for_plies_that_never_came():
    """Plies 1 and 2 came before ply 0, and the end announced 3 plies: all wait in the game's state. Ply 0 never
    comes; when the sweep evicts the idle game, each is dead-lettered with the source it was read from (the end's kept
    in the stored state too), not dropped with the game."""
    from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
    from streamer.pipeline import GameState, start_game
    from streamer.steps import Steps

    config = PipelineConfig(PROFILE, CAL, idle_game_seconds=100)
    steps = Steps(config)  # no engine: nothing here is searched
    games = {"g": start_game(None, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")),
                             None, config)}
    assert await steps.game(games, MoveEvent(game_id="g", ply=2, uci="g1f3"), source="moves/0@7") == []
    assert await steps.game(games, MoveEvent(game_id="g", ply=1, uci="e7e5"), source="moves/0@6") == []
    assert await steps.game(games, GameEnded(game_id="g", result="1-0", plies=3), source="games/0@9") == []
    games["g"] = GameState.from_dict(json.loads(json.dumps(games["g"].to_dict())))  # as a restarted worker reads it
    assert steps.sweep_games(games, now=games["g"].touched + 99).evicted == 0
    swept = steps.sweep_games(games, now=games["g"].touched + 101)
    assert games == {} and (swept.evicted, swept.expired) == (1, 0)
    dead = [o.message for o in swept.dead_letters]
    assert [(d.reason, d.ply, d.source, json.loads(d.raw)["type"]) for d in dead] == [
        ("out_of_order_ply", 1, "moves/0@6", "move"), ("out_of_order_ply", 2, "moves/0@7", "move"),
        ("out_of_order_ply", None, "games/0@9", "game_ended")]
    assert "evicted after 100 s without an event while this move waited for ply 0" in dead[0].error
    assert "while its end waited for ply 0" in dead[2].error
    assert all(o.key == "g" for o in swept.dead_letters)


async def test_an_input_record_keyed_otherwise_than_by_its_game_is_a_dead_letter_before_it_touches_state(stockfish):
    """``game_record``, what both Kafka runtimes call for each record of kibitz.moves: the state and exactly-once
    bookkeeping are kept under the record's key, so a game's records keyed otherwise (or not at all) would sit on
    another partition, outside them."""
    from schemas import DeadLetter, GameStarted, PlayerInfo
    from streamer.steps import Steps

    start = GameStarted(game_id="g1", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")).model_dump_json().encode()
    async with EnginePool(size=1) as pool:
        steps = Steps(CONFIG, pool)
        games: dict = {}
        for key in (None, b"round1", "g2"):
            (out,) = await steps.game_record(games, key, start, "kibitz.moves/0@7")
            assert isinstance(out.message, DeadLetter) and out.message.reason == "key_mismatch" and out.key == key
            assert "keyed by its game_id" in out.message.error and out.message.game_id == "g1"
        assert games == {}
        assert await steps.game_record(games, b"g1", start, "kibitz.moves/0@8") == [] and "g1" in games


async def test_a_record_without_a_value_is_a_dead_letter_in_every_step(stockfish):
    """A Kafka record whose value is null (a tombstone written by hand or by a tool) raised a TypeError in the schemas'
    parser from every step; the transactional worker aborted its transaction over it until the poison rule
    dead-lettered it, the faust agent stopped. Now each step dead-letters it as malformed, its raw text empty."""
    from schemas import DeadLetter
    from streamer.steps import Steps

    async with EnginePool(size=1) as pool:
        steps = Steps(CONFIG, pool)
        for name, step in (("game", steps.game_record), ("pool", steps.pool_record), ("player", steps.player_record),
                           ("review", steps.review_record)):
            state: dict = {}
            outs = step(state, b"g1", None, "kibitz.x/0@3")
            (out,) = await outs if name in ("game", "review") else outs
            assert isinstance(out.message, DeadLetter) and out.message.reason == "malformed", name
            assert "without a value" in out.message.error and out.message.raw == "" and out.key == b"g1"
            assert state == {}


async def test_a_sink_that_fails_stops_the_runtime_instead_of_hanging_it(stockfish):
    """The sink's error (an output that is gone: a closed pipe) ended the worker task of its partition, whose queue
    then never emptied: drain waited for ever. Now the runtime stops: drain and every later submit raise it."""
    import asyncio

    seen: list = []

    def sink(msg) -> None:
        seen.append(msg)
        raise BrokenPipeError(32, "Broken pipe")

    async with EnginePool(size=1) as pool:
        rt = EmbeddedRuntime(pool, CONFIG, sink, lambda d: None)
        await rt.__aenter__()
        for raw in demo_lines(2):
            rt.submit_raw(raw, source="test")
        with pytest.raises(BrokenPipeError):
            await asyncio.wait_for(rt.drain(), 60)
        with pytest.raises(BrokenPipeError):
            rt.submit_raw(demo_lines(1)[0], source="test")
        assert len(seen) <= 2  # one failing write per partition at most: the rest is not processed
        with pytest.raises(BrokenPipeError):
            await rt.__aexit__(None, None, None)


def test_an_end_announcing_fewer_plies_than_were_applied_is_scored_with_a_warning(caplog):
    import logging

    from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
    from streamer.pipeline import apply_move, end_game, start_game

    state = start_game(None, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), None, CONFIG)
    for ply, uci in enumerate(("e2e4", "e7e5", "g1f3")):
        state = apply_move(state, MoveEvent(game_id="g", ply=ply, uci=uci)).state
    with caplog.at_level(logging.WARNING, logger="kibitz.pipeline"):
        results = end_game(state, GameEnded(game_id="g", result="1-0", plies=2))
    assert [r.score for r in results] == [1.0, 0.0]
    assert any(r.message == "game ended with more plies than its end announced" and r.applied == 3 for r in caplog.records)


async def test_a_step_cancelled_while_it_waits_for_its_search_is_counted_once_when_it_runs_again(stockfish):
    """The transactional runtime undoes a record whose search is slow (cancels its step, puts its state back) and
    runs it again in the next transaction: kibitz_events_total counts the move once, as the dashboard shows it."""
    import asyncio

    from schemas import GameStarted, MoveEvent, PlayerInfo
    from streamer.steps import Steps

    # depth 14 with 4 lines: a search of a few hundred ms, so the step is surely still waiting 10 ms after it began
    # (at the suite's depth 6 the search after 1. e4 sometimes finished first on a loaded machine)
    deep = replace(CONFIG, profile=replace(PROFILE, depth=14))
    async with EnginePool(stockfish, size=1) as pool:
        steps = Steps(deep, pool)
        games: dict = {}
        await steps.game(games, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")))
        move, before = MoveEvent(game_id="g", ply=0, uci="e2e4"), games["g"].copy()  # the runtime's snapshot
        slow = asyncio.create_task(steps.game(games, move))
        await asyncio.sleep(0.01)  # the step is waiting for its search now
        assert not slow.done()
        slow.cancel()
        await asyncio.gather(slow, return_exceptions=True)
        games["g"] = before  # undone: the state put back as it was
        (assessment,) = [o.message for o in await steps.game(games, move)]
    assert assessment.type == "assessment" and assessment.ply == 0
    assert steps.metrics.registry.get_sample_value("kibitz_events_total", {"type": "move"}) == 1
    assert steps.metrics.registry.get_sample_value("kibitz_events_total", {"type": "game_started"}) == 1


async def test_a_clock_no_rated_game_has_is_read_as_missing(stockfish, caplog):
    """A clock of 180,000 s on one move (a producer sending milliseconds, a clock's glitch) set the move model's time
    inputs far beyond anything it was fitted on: the player's published rating jumped by 600 for the rest of the game
    (to 3400, the grid's end, for 1e300). Over MAX_CLOCK (a day) a clock is read as missing, logged once per game:
    the published ratings are exactly those of the same game with that clock left out."""
    from dataclasses import replace

    from conftest import BROADCAST

    from analyzers.calibration import load_calibration
    from analyzers.combination import load_combination
    from analyzers.profiles import get_profile
    from analyzers.ratingmodel import load_move_model
    from streamer.follow import FeedTracker

    config = PipelineConfig(replace(get_profile("fast"), depth=6, multipv=4), load_calibration("fast"),
                            model=load_move_model("fast"), combination=load_combination("fast"))
    events = [json.loads(e.model_dump_json()) for e in FeedTracker("r").update(BROADCAST.read_text())]

    async def ratings(clock_20, clock_40):
        lines = [json.dumps({**e, "clock": {20: clock_20, 40: clock_40}[e["ply"]]} if e.get("ply") in (20, 40) else e)
                 for e in events]
        out = []
        async with EnginePool(size=2, timeout=5) as pool, EmbeddedRuntime(pool, config, out.append, print) as rt:
            for raw in lines:
                rt.submit_raw(raw, source="test")
            await rt.drain()
        return {(m.ply, m.scope, m.player_id): (m.rating, m.low, m.high) for m in out if isinstance(m, PerceivedRating)}

    with caplog.at_level("WARNING", logger="kibitz.pipeline"):
        glitch = await ratings(180_000.0, 1e300)
    assert len([r for r in caplog.records if r.getMessage() == "implausible clock taken as missing"]) == 1
    missing = await ratings(None, None)
    assert glitch == missing and len(glitch) > 49  # every ply in the game scope, the others at the end
    assert max(r for r, _, _ in glitch.values()) < 3000


async def test_a_game_set_up_from_a_fen_is_past_the_book_by_its_move_number(stockfish):
    """The book (the profile's first ``skip_plies`` plies, 8 here) is counted by the position's move number: a game
    set up from a FEN at move 6 (a thematic opening, a game joined late) counts its moves from the first, where it
    counted none of its first 8. A FEN that says move 1 is still in the book."""
    ruy = "r1bqk2r/1pppbppp/p1n2n2/4p3/B3P3/5N2/PPPP1PPP/RNBQ1RK1 w kq - 2 6"
    moves = ["f1e1", "b7b5", "a4b3", "d7d6"]

    def events(gid, fen):
        start = {"type": "game_started", "game_id": gid, "white": {"id": f"w{gid}"}, "black": {"id": f"b{gid}"},
                 "initial_fen": fen}
        return [json.dumps(start)] + [json.dumps({"type": "move", "game_id": gid, "ply": i, "uci": u})
                                      for i, u in enumerate(moves)]

    out, dead, _ = await run(events("move6", ruy) + events("move1", ruy.replace(" 2 6", " 0 1")))
    assert dead == []
    counted = {(a.game_id, a.ply): a.counted for a in out if isinstance(a, MoveAssessment)}
    assert [counted["move6", p] for p in range(4)] == [True] * 4
    assert [counted["move1", p] for p in range(4)] == [False] * 4
    moves_seen = [m.moves for m in out if isinstance(m, PerceivedRating) and m.scope == "game" and m.game_id == "move6"]
    assert moves_seen == [1, 1, 2, 2]


def test_a_declared_result_the_board_contradicts_is_scored_as_declared_with_a_warning(caplog):
    """A game ending in checkmate whose end declares the mated side the winner (a forfeit after a fair-play ruling, an
    arbiter's decision, a relay's slip: 29 of rated-dev's 5,889 checkmates declare another result) is scored as declared, the result that
    counts for a rating, and logged so an operator sees the two differ. A result the board agrees with logs nothing."""
    import logging

    from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
    from streamer.pipeline import apply_move, end_game, start_game

    def fools_mate(gid):
        state = start_game(None, GameStarted(game_id=gid, white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), None, CONFIG)
        for ply, uci in enumerate(("f2f3", "e7e5", "g2g4", "d8h4")):
            state = apply_move(state, MoveEvent(game_id=gid, ply=ply, uci=uci)).state
        return state

    with caplog.at_level(logging.WARNING, logger="kibitz.pipeline"):
        declared = end_game(fools_mate("g1"), GameEnded(game_id="g1", result="1-0", plies=4))
        agreed = end_game(fools_mate("g2"), GameEnded(game_id="g2", result="0-1", plies=4))
    assert [r.score for r in declared] == [1.0, 0.0] and [r.score for r in agreed] == [0.0, 1.0]
    warned = [r for r in caplog.records if r.message == "declared result differs from the board's"]
    assert [(r.game_id, r.declared, r.on_board) for r in warned] == [("g1", "1-0", "0-1")]


def test_a_game_set_up_past_the_opening_takes_neither_class_nor_base_from_its_first_clocks():
    """The first clocks of a game are base + increment, the time control's measure, only at its start: a game set up
    from a FEN at move 30 (joined late, resumed) with 4:10 left was classed blitz and its time left read against a
    base of 4:10. Now its class is the event name's (else unknown) and its base unknown; from move 1 as before."""
    from schemas import GameStarted, MoveEvent, PlayerInfo
    from streamer.pipeline import apply_move, start_game

    def first_two(gid, fen):
        state = start_game(None, GameStarted(game_id=gid, white=PlayerInfo(id=f"w{gid}"), black=PlayerInfo(id=f"b{gid}"),
                                             initial_fen=fen), None, CONFIG)
        for ply, (uci, clock) in enumerate((("f1e1", 250.0), ("b7b5", 245.0))):
            state = apply_move(state, MoveEvent(game_id=gid, ply=ply, uci=uci, clock=clock)).state
        return state.time_class, state.clock_base

    ruy = "r1bqk2r/1pppbppp/p1n2n2/4p3/B3P3/5N2/PPPP1PPP/RNBQ1RK1 w kq - 2 {}"
    assert first_two("late", ruy.format(30)) == ("unknown", None)
    assert first_two("start", ruy.format(1)) == ("blitz", 250.0)


class FeedThroughSteps:
    """A live feed's texts, each through a FeedTracker and the game and player steps as a worker runs them: the
    assessments published (``assessed``) and the player states (``players``)."""

    def __init__(self, pool: EnginePool) -> None:
        from streamer.follow import FeedTracker
        from streamer.steps import Steps

        self.tracker = FeedTracker("round1")
        self.steps = Steps(CONFIG, pool)
        self.games: dict = {}
        self.players: dict = {}
        self.assessed: list[MoveAssessment] = []

    async def __call__(self, text: str) -> None:
        for ev in self.tracker.update(text):
            for o in await self.steps.game_record(self.games, ev.game_id.encode(), ev.model_dump_json().encode(), "feed"):
                if isinstance(o.message, MoveAssessment):
                    self.assessed.append(o.message)
                    self.steps.player_record(self.players, o.key_bytes, o.message.model_dump_json().encode(), "assessments")


async def test_a_corrected_games_plies_before_the_correction_count_once_in_the_players_wider_scopes(stockfish):
    """A feed's operator corrects a move at ply 20: the tracker restarts the game under ``<id>~2`` from ply 0. Its
    plies before 20 are the same moves in the same positions as under the old id: they are rated again in the new
    game's own scope (its rating starts afresh), but the players' event and overall scopes count them once, where
    they counted them twice (the same evidence twice in the fair-play statistics above all); the plies from the
    correction on count everywhere."""
    import io

    import chess.pgn
    from conftest import pgn_upto


    full = pgn_upto(30)
    game = chess.pgn.read_game(io.StringIO(full))
    assert game is not None
    board = game.board()
    moves = list(game.mainline_moves())
    for m in moves[:20]:
        board.push(m)
    other = next(m for m in board.legal_moves if m != moves[20])
    corrected = chess.pgn.Game()
    for k, v in game.headers.items():
        corrected.headers[k] = v
    node = corrected
    for m in moves[:20] + [other]:
        node = node.add_variation(m)
    async with EnginePool(size=1) as pool:
        feed = FeedThroughSteps(pool)
        assessed, players = feed.assessed, feed.players
        await feed(full)
        white = assessed[0].player_id
        before = players[white].overall.post.n, players[white].events[assessed[0].event].post.n
        await feed(str(corrected) + "\n\n")
    old, new = assessed[0].game_id, assessed[-1].game_id
    assert new == f"{old}~2" and [a.ply for a in assessed if a.game_id == new] == list(range(21))
    assert all(a.repeat == (a.ply < 20) for a in assessed if a.game_id == new)
    assert not any(a.repeat for a in assessed if a.game_id == old)
    me = players[white]
    counted_new = sum(a.counted for a in assessed if a.game_id == new and a.player_id == white and a.ply >= 20)
    assert before[0] > 0 and (me.overall.post.n, me.events[assessed[0].event].post.n) == (before[0] + counted_new, before[1] + counted_new)
    assert me.games[new].post.n == sum(a.counted for a in assessed if a.game_id == new and a.player_id == white)


async def test_a_renamed_games_plies_count_once_for_the_player_kept_and_in_full_for_the_renamed_one(stockfish):
    """The feed's operator corrects White's name after 30 plies: the game under its new tags corrects the old one
    (GameStarted.corrects_from 30, renamed ["white"]). Black is the same player: their plies before 30 count in the
    new game's scope only, not again in Black's event and overall scopes. White is another player now ("Bai, Jinshi",
    not "Bai, Jin"): every counted ply of theirs counts in all of their scopes."""
    from conftest import pgn_upto


    async with EnginePool(size=1) as pool:
        feed = FeedThroughSteps(pool)
        assessed, players = feed.assessed, feed.players
        await feed(pgn_upto(30, white="Bai, Jin"))
        black, event = assessed[1].player_id, assessed[0].event
        before = players[black].overall.post.n, players[black].events[event].post.n
        await feed(pgn_upto(34))
    old, new = assessed[0].game_id, assessed[-1].game_id
    assert new != old and [a.ply for a in assessed if a.game_id == new] == list(range(34))
    assert all(a.repeat == (a.ply < 30 and a.color == "black") for a in assessed if a.game_id == new)
    me = players[black]
    counted_new = sum(a.counted for a in assessed if a.game_id == new and a.player_id == black and a.ply >= 30)
    assert before[0] > 0 and (me.overall.post.n, me.events[event].post.n) == (before[0] + counted_new, before[1] + counted_new)
    white = players["Bai, Jinshi"]
    counted_white = sum(a.counted for a in assessed if a.game_id == new and a.player_id == "Bai, Jinshi")
    assert counted_white > 10 and white.overall.post.n == white.events[event].post.n == counted_white


def test_a_dead_letter_of_an_input_too_large_to_write_whole_keeps_its_start_and_its_size():
    """A 900 KB binary record (a producer's bug) refused as malformed: written whole, its dead letter (the bytes as
    text and base64) is about 4 MB, over the broker's 1 MiB limit. It keeps the original's start within
    MAX_DEAD_LETTER_BYTES and says the original's size; a small one is whole, as before."""
    import base64
    import random

    from analyzers.errors import MalformedEvent
    from schemas.messages import MAX_DEAD_LETTER_BYTES
    from streamer.steps import dead_letter

    big = random.Random(1).randbytes(900 * 1024)
    d = dead_letter(MalformedEvent("message: too large"), big, source="kibitz.moves/0@1", key="g1")
    assert len(d.model_dump_json().encode()) <= MAX_DEAD_LETTER_BYTES and d.raw_size == len(big)
    kept = base64.b64decode(d.raw_base64 or "")
    assert 100_000 < len(kept) < len(big) and big.startswith(kept)
    text = "ü" * 500_000  # 1 MB of UTF-8 text: no base64, the text cut
    t = dead_letter(MalformedEvent("message: too large"), text, source="s")
    assert len(t.model_dump_json().encode()) <= MAX_DEAD_LETTER_BYTES and t.raw_size == 1_000_000 and text.startswith(t.raw.rstrip("\ufffd"))
    small = dead_letter(MalformedEvent("x"), b"\x00\xffnot json", source="s")
    assert small.raw_size is None and base64.b64decode(small.raw_base64 or "") == b"\x00\xffnot json"
    # a 900 KB record key (and an error quoting it): each keeps its start, and the record is keyed by the key's start
    from streamer.steps import MAX_DEAD_LETTER_KEY, dead_letter_key

    huge = "k" * 900_000
    k = dead_letter(MalformedEvent("key " + huge), b"{}", source="s", key=huge)
    assert len(k.model_dump_json().encode()) < 20_000 and k.raw == "{}" and k.key is not None and k.key.endswith("(900000 characters)")
    assert k.error.endswith("(900004 characters)") and dead_letter_key(huge.encode()) == b"k" * MAX_DEAD_LETTER_KEY
