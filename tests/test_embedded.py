"""The embedded runtime end to end with the real Stockfish (shallow limits to keep the suite quick)."""

import json
import sys
from pathlib import Path

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
