"""The shipped analysis shards (bench/analyses.py): append-only export, idempotent import, and rows that are what the
installed Stockfish answers."""

import json
import random
import sqlite3
import sys
from pathlib import Path

import chess
import pytest

from analyzers.engine import EnginePool, Limits
from analyzers.engine.analysis import PositionAnalysis
from streamer.ingest import DEMO_PGN, read_pgn_games

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import analyses  # noqa: E402  (bench/ is scripts, not a package)

LIMITS = Limits(depth=6, multipv=3)


def boards(n: int) -> list[chess.Board]:
    game = next(iter(read_pgn_games(DEMO_PGN)))
    board, out = chess.Board(), []
    for uci in game.moves[:n]:
        board.push_uci(uci)
        out.append(board.copy())
    return out


def rows(cache: Path) -> dict[str, str]:
    db = sqlite3.connect(str(cache))
    try:
        return dict(db.execute("SELECT key, value FROM analyses"))
    finally:
        db.close()


def test_limits_round_trip_through_their_key():
    for limits in (Limits(depth=8, multipv=5), Limits(nodes=20000), Limits(depth=12)):
        assert Limits.from_key(limits.key) == limits
    for bad in ("d8", "x8-mpv5", "d-mpv5", "d8-mpvX"):
        with pytest.raises(ValueError):
            Limits.from_key(bad)


async def test_export_writes_only_new_rows_and_import_adds_each_row_once(stockfish, tmp_path):
    cache, shards = tmp_path / "a.sqlite", tmp_path / "shards"
    positions = boards(14)
    async with EnginePool(stockfish, size=1, cache_path=cache) as pool:
        for b in positions[:10]:
            await pool.analyse_limits(b, LIMITS)
    first, n = analyses.export_new(cache, shards)
    assert first is not None and first.name == "000.tsv.xz" and n == len(rows(cache)) == 10
    assert analyses.export_new(cache, shards) == (None, 0), "nothing new, no shard"
    async with EnginePool(stockfish, size=1, cache_path=cache) as pool:
        for b in positions:
            await pool.analyse_limits(b, LIMITS)
    second, n = analyses.export_new(cache, shards)
    assert second is not None and second.name == "001.tsv.xz" and n == 4
    assert [p.name for p in analyses.shard_paths(shards)] == ["000.tsv.xz", "001.tsv.xz"]

    fresh = tmp_path / "fresh.sqlite"
    assert analyses.import_shards(fresh, shards) == (14, 14)
    assert rows(fresh) == rows(cache), "the rows exactly as the cache stored them"
    assert analyses.import_shards(fresh, shards) == (14, 0), "a second import adds nothing"
    # the imported cache serves the searches: a pool on it runs none
    async with EnginePool(stockfish, size=1, cache_path=fresh) as pool:
        for b in positions:
            await pool.analyse_limits(b, LIMITS)
        assert pool.stats.searches == 0 and pool.stats.cache_hits == len(positions)


async def test_shipped_rows_are_what_the_installed_stockfish_answers(stockfish):
    shipped = [row for path in analyses.shard_paths() for row in analyses.read_shard(path)]
    assert shipped, "bench/analyses/ holds the shipped analyses"
    async with EnginePool(stockfish, size=1) as pool:  # no cache: every search is real
        identity = pool.identity
        mine = [(k, v) for k, v in shipped if k.startswith(identity + "|")]
        assert mine, f"no shipped row was searched by {identity}: the shards are for another engine build"
        for key, value in random.Random(0).sample(mine, 12):
            stored = PositionAnalysis.from_dict(json.loads(value))
            board, limits = chess.Board(stored.key + " 0 1"), Limits.from_key(stored.limits)
            assert pool.cache_key(board, limits) == key
            again = await pool.analyse_limits(board, limits)
            assert (again.candidates, again.depth, again.nodes) == (stored.candidates, stored.depth, stored.nodes), key
