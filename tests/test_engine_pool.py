"""The engine pool against the real Stockfish, and fault injection with a small fake engine."""

import asyncio
import gc
import os
import sys
from pathlib import Path

import chess
import chess.engine
import chess.pgn
import pytest

from analyzers.engine import EnginePool, Limits
from analyzers.engine.analysis import canonical_board
from analyzers.engine.uci import DEFAULT_OPTIONS, UciEngine
from analyzers.errors import EngineCrashed, EngineError, EngineTimeout, PoolClosed
from analyzers.gain import MATE_CP
from streamer.ingest import DEMO_PGN as ROUND1

FAKE = str(Path(__file__).parent / "fixtures" / "fake_engine.py")


def fake(mode, *extra):
    return [sys.executable, FAKE, mode, *extra]


def children() -> set[int]:
    """Child processes of this test process (zombies included), from /proc."""
    me = os.getpid()
    out = set()
    for task in Path(f"/proc/{me}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except FileNotFoundError:  # a thread (asyncio's child watcher) that ended since the listing has no children
            continue
        out.update(int(x) for x in text)
    return out


def middlegame_boards(n=6):
    game = chess.pgn.read_game(open(ROUND1))
    board = game.board()
    out = []
    for i, move in enumerate(game.mainline_moves()):
        board.push(move)
        if 20 <= i < 20 + n:
            out.append(board.copy())
    return out


async def test_lines_taken_as_written_give_the_analysis_of_checked_parsing(stockfish):
    """UciEngine parses the engine's lines on an EngineLineBoard (moves taken as written, the position never moves);
    python-chess's own parsing checks and plays every move. Both read the same answer off the same search: middlegames,
    castling, a promotion, an en-passant capture, a mate, at the service's limits."""
    boards = middlegame_boards(12) + [chess.Board(fen) for fen in (
        "r3k2r/pppq1ppp/2npbn2/2b1p3/2B1P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 1",
        "8/P7/8/8/8/8/6k1/4K3 w - - 0 1",
        "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",
        "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1",
    )]
    limits = Limits(depth=8, multipv=5)
    engine = UciEngine(stockfish, DEFAULT_OPTIONS)
    await engine.start()
    try:
        for board in map(canonical_board, boards):
            fast = await engine.analyse(board, limits)
            assert engine._protocol is not None
            infos = await engine._protocol.analyse(board, chess.engine.Limit(depth=8), multipv=5, game=object())
            checked = engine._parse(board, infos, limits)
            assert (fast.candidates, fast.depth, fast.nodes) == (checked.candidates, checked.depth, checked.nodes), board.fen()
    finally:
        await engine.quit()


async def test_analyse_returns_candidates_from_side_to_move(stockfish):
    async with EnginePool(stockfish, size=1) as pool:
        a = await pool.analyse(chess.Board(), depth=8, multipv=5)
        assert len(a.candidates) == 5 and a.depth >= 8 and a.engine.startswith("Stockfish")
        assert all(len(c.uci) >= 4 for c in a.candidates)
        vals = [c.value for c in a.candidates]
        assert vals == sorted(vals, reverse=True)
        # a position where Black is to move and lost: scores are from Black's side, negative
        b = chess.Board("6k1/5ppp/8/8/8/8/5PPP/3QR1K1 b - - 0 1")
        lost = await pool.analyse(b, depth=8)
        assert lost.best_cp < -500
        mate_in_one = chess.Board("6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1")
        m = await pool.analyse(mate_in_one, depth=5)
        assert m.candidates[0].mate == 1 and m.best_cp == MATE_CP
        mated = chess.Board("3R2k1/5ppp/8/8/8/8/5PPP/6K1 b - - 0 1")
        assert (await pool.analyse(mated, depth=5)).best_cp == -MATE_CP


async def test_more_lines_than_the_engine_gives_are_every_line_it_has(stockfish):
    """``--multipv 1000``: python-chess refused Stockfish's MultiPV option (at most 500) at every search, and each
    move was dead-lettered as an engine crash after a restart; now the search asks for the engine's most: every
    legal move of the position (20 at the start, never more than 218), the same answer."""
    async with EnginePool(stockfish, size=1) as pool:
        a = await pool.analyse(chess.Board(), depth=4, multipv=1000)
        assert len(a.candidates) == 20 and a.limits == "d4-mpv1000" and pool.stats.restarts == pool.stats.failures == 0


async def test_deterministic_across_runs_orders_and_pool_sizes(stockfish):
    boards = middlegame_boards(6)
    results = []
    for size, order in ((1, boards), (2, list(reversed(boards)))):
        async with EnginePool(stockfish, size=size) as pool:
            res = await asyncio.gather(*(pool.analyse(b, depth=9, multipv=3) for b in order))
            by_key = {r.key: (r.candidates, r.nodes) for r in res}
            results.append(by_key)
    assert results[0] == results[1]


async def test_concurrent_duplicates_join_one_search_and_cache_hits(stockfish):
    board = middlegame_boards(1)[0]
    async with EnginePool(stockfish, size=2) as pool:
        res = await asyncio.gather(*(pool.analyse(board, depth=9) for _ in range(5)))
        assert len({r.candidates for r in res}) == 1
        assert pool.stats.searches == 1 and pool.stats.joined == 4
        await pool.analyse(board, depth=9)
        assert pool.stats.cache_hits == 1
        # different limits are a different key
        await pool.analyse(board, depth=8)
        assert pool.stats.searches == 2


async def test_prefetch_runs_ahead_and_is_joined(stockfish):
    board = middlegame_boards(1)[0]
    async with EnginePool(stockfish, size=1) as pool:
        pool.prefetch(board, Limits(depth=9))
        await asyncio.sleep(0)
        await pool.analyse(board, depth=9)
        assert pool.stats.searches == 1 and pool.stats.joined + pool.stats.cache_hits == 1


async def test_persistent_cache_serves_a_second_run_without_engine_work(stockfish, tmp_path):
    boards = middlegame_boards(4)
    db = tmp_path / "cache.sqlite"
    async with EnginePool(stockfish, size=1, cache_path=db) as pool:
        first = [await pool.analyse(b, depth=8, multipv=2) for b in boards]
        assert pool.stats.searches == 4
    async with EnginePool(stockfish, size=1, cache_path=db) as pool:
        second = [await pool.analyse(b, depth=8, multipv=2) for b in boards]
        assert pool.stats.searches == 0 and pool.stats.cache_hits == 4
    assert first == second


async def test_a_damaged_cache_entry_is_searched_again_and_replaced(stockfish, tmp_path, caplog):
    """A cache row that does not decode (damaged, or written by another version) failed every request for its position
    (KeyError, JSONDecodeError), so each move there was dead-lettered; now it is a miss, searched again, and the
    search's answer replaces it (logged once). A file that cannot be written keeps the answers in memory."""
    import logging
    import sqlite3

    db = tmp_path / "cache.sqlite"
    async with EnginePool(stockfish, size=1, cache_path=db) as pool:
        want = await pool.analyse(chess.Board(), depth=4, multipv=2)
    for damage in ('{"not": "an analysis"}', "not json"):
        with sqlite3.connect(db) as con:
            con.execute("UPDATE analyses SET value = ?", (damage,))
        with caplog.at_level(logging.WARNING, logger="kibitz.cache"):
            async with EnginePool(stockfish, size=1, cache_path=db) as pool:
                got = await pool.analyse(chess.Board(), depth=4, multipv=2)
                again = await pool.analyse(chess.Board(), depth=4, multipv=2)
        assert got.candidates == want.candidates == again.candidates and pool.stats.searches == 1, damage
        async with EnginePool(stockfish, size=1, cache_path=db) as pool:  # replaced: a hit
            assert (await pool.analyse(chess.Board(), depth=4, multipv=2)).candidates == want.candidates
            assert pool.stats.searches == 0 and pool.stats.cache_hits == 1
    assert [r.getMessage() for r in caplog.records].count("an unreadable cache entry: searched again and replaced") == 2
    with sqlite3.connect(db) as con:
        con.execute("DROP TABLE analyses")  # every read and write of the file now fails
    async with EnginePool(stockfish, size=1, cache_path=db) as pool:
        for _ in range(2):
            assert (await pool.analyse(chess.Board(), depth=4, multipv=2)).candidates == want.candidates
        assert pool.stats.searches == 1 and pool.stats.cache_hits == 1  # kept in memory


async def test_crash_is_retried_on_a_fresh_engine(tmp_path):
    async with EnginePool(fake("crash-once", str(tmp_path / "crashed")), size=1, timeout=10) as pool:
        a = await pool.analyse(chess.Board(), depth=1)
        assert a.candidates and pool.stats.restarts == 1 and pool.stats.searches == 1


async def test_crash_twice_fails_with_typed_error():
    async with EnginePool(fake("crash"), size=1, timeout=10) as pool:
        with pytest.raises(EngineCrashed):
            await pool.analyse(chess.Board(), depth=1)
        assert pool.stats.restarts == 2 and pool.stats.failures == 1


async def test_hang_times_out_and_engine_is_replaced():
    async with EnginePool(fake("hang"), size=1, timeout=0.5) as pool:
        before = set(pool.pids)
        with pytest.raises(EngineTimeout):
            await pool.analyse(chess.Board(), depth=1)
        assert pool.stats.restarts == 2
        assert not (set(pool.pids) & before)  # the hung process is gone, a fresh one holds the slot


async def test_an_engine_killed_before_its_search_began_fails_the_search_at_once_and_reports_nothing_unretrieved():
    """An engine that hangs between the ``ucinewgame`` a search starts with and its ``readyok``: the timeout kills it
    there. python-chess alone would leave that search pending (the pool waited a grace second per attempt, then
    cancelled it) and its AnalysisResult's error unretrieved, which asyncio reports when it is collected."""
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        async with EnginePool(fake("hang-ready"), size=1, timeout=0.3) as pool:
            started = loop.time()
            with pytest.raises(EngineTimeout):
                await pool.analyse(chess.Board(), depth=1)
            elapsed = loop.time() - started
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert pool.stats.restarts == 2
    assert reported == []
    assert elapsed < 2 * 0.3 + 1.0, elapsed  # two attempts of 0.3 s and two restarts; a grace second each was 2.6 s+


SILENT = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.mark.parametrize(("engine", "game", "said"), [
    ("cat", "chess", "did not answer the UCI handshake .* is it a UCI engine"),
    (SILENT, "chess", "did not answer the UCI handshake"),
    (SILENT, "go", "did not answer GTP's name and version .* is it a GTP engine"),
    (SILENT, "katago", "did not answer KataGo's version and model queries"),
])
async def test_a_program_that_never_answers_at_start_is_refused_and_leaves_no_process(monkeypatch, engine, game, said):
    """``--engine /bin/cat`` (or any program that is no engine of the kind, or one waiting for input of its own) hung the
    pool's start for ever: python-chess waits for ``uciok``, and the GTP and KataGo clients for their first answers,
    without a deadline."""
    from analyzers.engine.adapter import CHESS, GO, GO_KATAGO
    from analyzers.engine.gtp import GtpEngine
    from analyzers.engine.katago import KataGoEngine

    for cls in (UciEngine, GtpEngine, KataGoEngine):
        monkeypatch.setattr(cls, "start_timeout", 0.5)
    before = children()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(EngineError, match=said):
        async with EnginePool(engine, size=2, game={"chess": CHESS, "go": GO, "katago": GO_KATAGO}[game]):
            pass
    assert loop.time() - started < 5
    await asyncio.sleep(0.2)
    assert children() - before == set()


async def test_a_start_that_fails_waits_for_the_other_starts_and_leaves_no_process(tmp_path):
    """Two engines start at once; the first fails at once, the second answers a second later. The pool used to raise
    at the first failure and kill what had started by then: the second's process came up afterwards, owned by no one."""
    script = ("import os, sys, time\n"
              "try:\n    os.close(os.open(sys.argv[1], os.O_CREAT | os.O_EXCL))\nexcept FileExistsError:\n"
              "    time.sleep(1.0)\n    os.execv(sys.executable, [sys.executable, sys.argv[2], 'ok'])\n"
              "sys.exit(1)\n")
    before = children()
    with pytest.raises(EngineError, match="cannot start engine"):
        async with EnginePool([sys.executable, "-c", script, str(tmp_path / "first"), FAKE], size=2):
            pass
    await asyncio.sleep(1.5)
    assert children() - before == set()


async def test_garbage_answer_is_an_error_not_a_result():
    async with EnginePool(fake("garbage"), size=1, timeout=2) as pool:
        with pytest.raises((EngineCrashed, EngineTimeout)):
            await pool.analyse(chess.Board(), depth=1)


async def test_no_zombies_after_close(stockfish):
    before = children()
    async with EnginePool(stockfish, size=2) as pool:
        assert len(children() - before) == 2
        await pool.analyse(chess.Board(), depth=5)
    async with EnginePool(fake("hang"), size=1, timeout=0.3) as pool:
        with pytest.raises(EngineTimeout):
            await pool.analyse(chess.Board(), depth=1)
    await asyncio.sleep(0.1)
    assert children() - before == set()


async def test_closing_with_a_search_in_flight_starts_no_engine_and_leaves_no_process(stockfish):
    """A look-ahead search still running when the pool closes is cancelled and its engine killed; the closing pool does
    not start a replacement (counted as a restart, a process started only to be quit)."""
    before = children()
    async with EnginePool(stockfish, size=1) as pool:
        pool.prefetch(chess.Board(), Limits(depth=40, multipv=3))
        await asyncio.sleep(0.3)  # the search is running
    assert pool.stats.restarts == 0 and pool.stats.searches == 0
    await asyncio.sleep(0.1)
    assert children() - before == set()


async def test_closed_pool_refuses(stockfish):
    pool = EnginePool(stockfish, size=1)
    with pytest.raises(PoolClosed):
        await pool.analyse(chess.Board(), depth=1)


def test_position_key_is_the_epd_even_when_memoised():
    import random

    import chess

    from analyzers.engine.analysis import position_key

    rng = random.Random(3)
    for _ in range(30):
        board = chess.Board()
        for _ in range(rng.randrange(1, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(rng.choice(moves))
            assert position_key(board) == board.epd()
            assert position_key(board.copy()) == board.epd()  # a memo hit
