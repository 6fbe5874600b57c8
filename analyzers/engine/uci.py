"""One UCI engine process (python-chess's async engine API): start, one deterministic search, stop.

A fresh ``game`` object per search makes python-chess send ``ucinewgame``: hash and history are cleared before every
search, so an answer depends on the position and the limits only (see :mod:`.pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import chess
import chess.engine

from ..errors import EngineCrashed, EngineError
from .analysis import Limits, PositionAnalysis, ScoredMove, position_key

#: Options every engine process gets; determinism needs Threads=1 and a fixed hash size.
DEFAULT_OPTIONS: dict[str, Any] = {"Threads": 1, "Hash": 16}


def find_engine(command: str | None = None, *, default: str = "stockfish", env: str = "KIBITZ_ENGINE") -> str:
    """Resolve an engine binary: the argument, ``$<env>``, ``default`` on PATH, or Debian's /usr/games (where both
    stockfish and gnugo install)."""
    cmd = command or os.environ.get(env) or default
    found = shutil.which(cmd) or (shutil.which(cmd, path="/usr/games") if os.sep not in cmd else None)
    if found:
        return found
    if Path(cmd).is_file():
        return cmd
    # a Debian package is named by its binary (stockfish, gnugo); a default that is a path is what `make setup` puts
    # there (KataGo, which Debian does not package)
    how = f"install it (Debian: apt-get install {default})" if os.sep not in default else "`make setup` installs it"
    raise EngineError(f"engine {cmd!r} not found: {how}, or set {env}")


#: What python-chess parses of each info line: depth, nodes, time, multipv rank, score and bounds, principal variation.
#: The rest (wdl, currline, refutation, string) is never read.
INFO = chess.engine.INFO_BASIC | chess.engine.INFO_SCORE | chess.engine.INFO_PV


class EngineLineBoard(chess.Board):
    """The root position python-chess parses an engine's answer on, taking the engine's moves as written.

    python-chess replays every principal variation of every info line on this board with a full legality check per
    move: a depth-8 multipv-5 search sends about 40 such lines of 8-12 moves, and replaying them took 40 % of an
    analysing process's Python time (py-spy, bench/warm_cache.py). kibitz reads only the first move of each final
    line and checks that one against the legal moves of the real position itself (:meth:`UciEngine._parse`), so here a
    move is parsed from its UCI text alone and the position never moves: ``push_uci`` records the move and ``pop``
    forgets it (python-chess pushes and pops the best move to parse the ponder move after it). A move that is not
    even well-formed UCI still raises, as python-chess expects. Every score is seen from the root's side to move,
    which is the only side python-chess reads off this board.
    """

    def parse_uci(self, uci: str) -> chess.Move:
        return chess.Move.from_uci(uci)

    def push_uci(self, uci: str) -> chess.Move:
        move = self.parse_uci(uci)
        self.move_stack.append(move)
        return move

    def pop(self) -> chess.Move:
        return self.move_stack.pop()


class UciProtocol(chess.engine.UciProtocol):
    """python-chess's UCI protocol, failing a search whose engine dies before the search began.

    python-chess (1.11) starts an analysis with ``ucinewgame`` and ``isready`` and resolves the command's result, which
    ``analyse`` awaits, only at the engine's ``readyok``. A process killed in between (a timeout, a cancelled search, a
    pool closing) fails the command's AnalysisResult but leaves that result pending: the search would wait for ever
    (the pool gives up on it after a grace second) and the AnalysisResult's error is reported as never retrieved when
    it is collected. Here the lost connection fails the pending result too, as python-chess's own play command does.
    """

    def connection_lost(self, exc: Exception | None) -> None:
        command = self.command
        super().connection_lost(exc)
        if command is None or command.result.done():
            return
        code = self.returncode.result()
        command.result.set_exception(chess.engine.EngineTerminatedError(
            f"engine process died before its search began (exit code: {code})"))
        analysis = getattr(command, "analysis", None)
        if isinstance(analysis, chess.engine.AnalysisResult):
            # its error is this one: read it (no one else will), so asyncio does not report it at collection
            asyncio.ensure_future(analysis.wait()).add_done_callback(lambda t: t.exception())


#: The most legal moves any chess position has: asking an engine for more lines than this gives no more.
MAX_LEGAL_MOVES = 218


class UciEngine:
    """One UCI engine process."""

    #: Seconds for a new process to answer the UCI handshake (``uci`` ... ``uciok``): Stockfish answers in a few
    #: milliseconds, a program that is no UCI engine (or waits for input of its own) never would.
    start_timeout = 30.0

    def __init__(self, command: str | list[str], options: Mapping[str, Any]) -> None:
        self.command = command
        self.options = dict(options)
        self.name = "?"
        self._transport: asyncio.SubprocessTransport | None = None
        self._protocol: UciProtocol | None = None
        self._max_multipv = MAX_LEGAL_MOVES  # the engine's most principal variations, read at start

    async def start(self) -> None:
        transport, protocol = await UciProtocol.popen(self.command)
        try:
            await asyncio.wait_for(protocol.initialize(), self.start_timeout)
        except TimeoutError:
            transport.close()
            raise EngineCrashed(f"{self.command!r} did not answer the UCI handshake (uci -> uciok) within "
                                f"{self.start_timeout:g} s: is it a UCI engine?") from None
        except BaseException:
            transport.close()
            raise
        self._transport, self._protocol = transport, protocol
        self.name = self._protocol.id.get("name", "unknown engine")
        option = self._protocol.options.get("MultiPV")
        self._max_multipv = option.max if option is not None and option.max is not None else MAX_LEGAL_MOVES
        known = {k: v for k, v in self.options.items() if k in self._protocol.options}
        await self._protocol.configure(known)

    @property
    def pid(self) -> int | None:
        return self._transport.get_pid() if self._transport else None

    async def analyse(self, board: chess.Board, limits: Limits) -> PositionAnalysis:
        if self._protocol is None:  # a slot whose restart failed earlier: try again now
            try:
                await self.start()
            except Exception as e:
                await self.kill()
                raise EngineCrashed(f"cannot restart engine {self.command!r}: {e!r}") from e
        assert self._protocol is not None
        limit = chess.engine.Limit(depth=limits.depth, nodes=limits.nodes)
        # a fresh `game` object makes python-chess send ucinewgame: hash and history cleared before each search
        root = EngineLineBoard(board.fen(en_passant="fen"), chess960=board.chess960)  # the position only, as the pool shows it
        # more lines than the engine gives (Stockfish: 500) is every line it has: no position has more than 218 moves,
        # so capping changes no answer, where python-chess would refuse the option at every search
        multipv = min(limits.multipv, self._max_multipv)
        infos = await self._protocol.analyse(root, limit, multipv=multipv, game=object(), info=INFO)
        return self._parse(board, infos, limits)

    def _parse(self, board: chess.Board, infos: list[chess.engine.InfoDict], limits: Limits) -> PositionAnalysis:
        cands: list[ScoredMove] = []
        seen: set[str] = set()
        for info in infos:
            pv, score = info.get("pv"), info.get("score")
            if not pv or score is None:
                continue
            move = pv[0]
            if move not in board.legal_moves:
                raise EngineCrashed(f"{self.name} proposed illegal move {move.uci()} in {board.epd()}")
            if move.uci() in seen:
                continue
            seen.add(move.uci())
            pov = score.pov(board.turn)
            cands.append(ScoredMove(move.uci(), pov.score(), pov.mate()))
        if not cands:
            raise EngineCrashed(f"{self.name} returned no scored move for {board.epd()}")
        top = infos[0]
        return PositionAnalysis(
            key=position_key(board), candidates=tuple(cands), engine=self.name, limits=limits.key,
            depth=int(top.get("depth", 0)), nodes=int(top.get("nodes", 0)), time=float(top.get("time", 0.0)),
        )

    async def quit(self, timeout: float = 5.0) -> None:
        if self._protocol is None:
            return
        try:
            await asyncio.wait_for(self._protocol.quit(), timeout)
        except Exception:  # noqa: BLE001 - whatever went wrong, make sure the process is gone
            await self.kill()
        finally:
            self._protocol = None
            if self._transport is not None:
                self._transport.close()
                self._transport = None

    async def kill(self, reap_timeout: float = 5.0) -> None:
        """Kill the process and wait until it is reaped, so no zombie stays behind."""
        transport = self._transport
        self._transport = None
        self._protocol = None
        if transport is None:
            return
        with contextlib.suppress(ProcessLookupError):
            transport.kill()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + reap_timeout
        while transport.get_returncode() is None and loop.time() < deadline:
            await asyncio.sleep(0.01)
        transport.close()
