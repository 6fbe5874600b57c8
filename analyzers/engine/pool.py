"""An asyncio pool of UCI engine processes (python-chess's async engine API).

Each process runs one search at a time (Threads=1); the pool runs at most ``size`` searches at once. A search
is deterministic: the engine gets ``ucinewgame`` (hash and history cleared) before every search and sees only the
position (see :func:`~.analysis.canonical_board`), so the same position and limits give the same answer on any
process, in any order, on every run. That is what lets results be cached, audited, and compared between runtimes.

Requests for a position already being searched join that search instead of starting another (look-ahead:
:meth:`EnginePool.prefetch` starts the search of the position to move while the player thinks). An engine that
crashes, hangs past ``timeout`` or answers garbage is killed and replaced; the request is retried once on the fresh
process and then fails with :class:`~analyzers.errors.EngineTimeout` or :class:`~analyzers.errors.EngineCrashed`.

The pool itself is game-agnostic: engine-specific work (starting a process, running one search) sits in
:class:`UciEngine`; another protocol (GTP for Go) would add a class with the same three coroutines.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chess
import chess.engine

from ..errors import EngineCrashed, EngineError, EngineTimeout, PoolClosed
from .analysis import Limits, PositionAnalysis, ScoredMove, canonical_board, position_key, terminal_analysis
from .cache import AnalysisCache

log = logging.getLogger("kibitz.engine")

#: Options every engine process gets; determinism needs Threads=1 and a fixed hash size.
DEFAULT_OPTIONS: dict[str, Any] = {"Threads": 1, "Hash": 16}
DEFAULT_TIMEOUT = 60.0


def find_engine(command: str | None = None) -> str:
    """Resolve the engine binary: the argument, ``$KIBITZ_ENGINE``, ``stockfish`` on PATH, or Debian's /usr/games."""
    cmd = command or os.environ.get("KIBITZ_ENGINE") or "stockfish"
    found = shutil.which(cmd) or (shutil.which(cmd, path="/usr/games") if os.sep not in cmd else None)
    if found:
        return found
    if Path(cmd).is_file():
        return cmd
    raise EngineError(f"engine {cmd!r} not found: install it (Debian: apt-get install stockfish) or set KIBITZ_ENGINE")


class UciEngine:
    """One UCI engine process."""

    def __init__(self, command: str | list[str], options: Mapping[str, Any]) -> None:
        self.command = command
        self.options = dict(options)
        self.name = "?"
        self._transport: asyncio.SubprocessTransport | None = None
        self._protocol: chess.engine.UciProtocol | None = None

    async def start(self) -> None:
        self._transport, self._protocol = await chess.engine.popen_uci(self.command)
        self.name = self._protocol.id.get("name", "unknown engine")
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
        infos = await self._protocol.analyse(board, limit, multipv=limits.multipv, game=object())
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


async def _settle(task: asyncio.Future, grace: float = 1.0) -> None:
    """Let a search whose engine was killed finish failing; cancel it if it does not within ``grace`` seconds
    (after a garbage answer python-chess may never resolve the command)."""
    done, _ = await asyncio.wait({task}, timeout=grace)
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=grace)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved, so asyncio does not warn about it


@dataclass
class PoolStats:
    searches: int = 0          # engine searches actually run
    cache_hits: int = 0
    joined: int = 0            # requests that joined a search already running
    restarts: int = 0          # engines killed and replaced
    failures: int = 0          # requests that failed after the retry
    search_seconds: float = 0.0

    @property
    def requests(self) -> int:
        return self.searches + self.cache_hits + self.joined + self.failures


class EnginePool:
    """An async context manager owning ``size`` engine processes; see the module docstring."""

    def __init__(
        self,
        command: str | list[str] | None = None,
        size: int = 1,
        options: Mapping[str, Any] | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        cache: AnalysisCache | None = None,
        cache_path: str | Path | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        # a list is an exact argv (tests use it for fake engines); a string is resolved like a shell would
        self.command: str | list[str] = command if isinstance(command, list) else find_engine(command)
        self.size = size
        self.options = {**DEFAULT_OPTIONS, **(options or {})}
        self.timeout = timeout
        self.cache = cache if cache is not None else AnalysisCache(path=cache_path)
        self.stats = PoolStats()
        self.identity = "?"
        self._idle: asyncio.Queue[UciEngine] = asyncio.Queue()
        self._engines: list[UciEngine] = []
        self._inflight: dict[str, asyncio.Future[PositionAnalysis]] = {}
        self._background: set[asyncio.Task] = set()
        self._open = False

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> EnginePool:
        engines = [UciEngine(self.command, self.options) for _ in range(self.size)]
        try:
            await asyncio.gather(*(e.start() for e in engines))
        except Exception as e:
            await asyncio.gather(*(x.kill() for x in engines), return_exceptions=True)
            raise EngineError(f"cannot start engine {self.command!r}: {e}") from e
        self._engines = engines
        for engine in engines:
            self._idle.put_nowait(engine)
        opts = ",".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        self.identity = f"{engines[0].name}|{opts}"
        self._open = True
        log.info("engine pool started", extra={"engine": engines[0].name, "size": self.size})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._open = False
        for t in list(self._background):
            t.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.gather(*(e.quit() for e in self._engines), return_exceptions=True)
        self._engines = []
        self.cache.close()

    @property
    def engine_name(self) -> str:
        return self.identity.split("|", 1)[0]

    @property
    def pids(self) -> list[int]:
        return [p for p in (e.pid for e in self._engines) if p is not None]

    # -- analysis -------------------------------------------------------------------------------------
    def cache_key(self, board: chess.Board, limits: Limits) -> str:
        return f"{self.identity}|{limits.key}|{position_key(board)}"

    async def analyse(
        self, board: chess.Board, *, depth: int | None = None, nodes: int | None = None, multipv: int = 1
    ) -> PositionAnalysis:
        """Analyse ``board`` (its position only) to the given limits; served from cache or a running search."""
        return await self.analyse_limits(board, Limits(depth=depth, nodes=nodes, multipv=multipv))

    async def analyse_limits(self, board: chess.Board, limits: Limits) -> PositionAnalysis:
        if not self._open:
            raise PoolClosed("the engine pool is not open (use `async with EnginePool(...)`)")
        # The cache first: a cached position was searched, so it has legal moves, and the terminal check (python-chess
        # generating legal moves) costs more than the lookup. Every position is asked for twice in a game.
        key = self.cache_key(board, limits)
        hit = self.cache.get(key)
        if hit is not None:
            self.stats.cache_hits += 1
            return hit
        done = terminal_analysis(board, self.engine_name, limits)
        if done is not None:
            return done
        running = self._inflight.get(key)
        if running is not None:
            self.stats.joined += 1
            return await asyncio.shield(running)
        # The search is the pool's task, not the caller's: a caller that gives up (a stage cutting a transaction short
        # to commit what is ready) leaves it running, and whoever asks for the position next joins it or hits the cache.
        task = asyncio.ensure_future(self._search_and_cache(key, canonical_board(board), limits))
        self._inflight[key] = task
        self._background.add(task)
        task.add_done_callback(self._search_done)
        return await asyncio.shield(task)

    async def _search_and_cache(self, key: str, board: chess.Board, limits: Limits) -> PositionAnalysis:
        try:
            result = await self._search(board, limits)
            self.cache.put(key, result)
            return result
        finally:
            self._inflight.pop(key, None)

    def _search_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled():
            task.exception()  # its callers got it (or none is left): mark it retrieved so asyncio does not warn

    def prefetch(self, board: chess.Board, limits: Limits) -> None:
        """Start analysing ``board`` now without waiting; a later :meth:`analyse` joins it or hits the cache."""
        if not self._open:
            return
        task = asyncio.ensure_future(self.analyse_limits(board.copy(stack=False), limits))
        self._background.add(task)
        task.add_done_callback(self._prefetch_done)

    def _prefetch_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("look-ahead search failed", extra={"error": repr(task.exception())})

    async def _search(self, board: chess.Board, limits: Limits) -> PositionAnalysis:
        last: Exception | None = None
        for attempt in (1, 2):
            engine = await self._idle.get()
            loop = asyncio.get_running_loop()
            started = loop.time()
            search = asyncio.ensure_future(engine.analyse(board, limits))
            try:
                done, _ = await asyncio.wait({search}, timeout=self.timeout)
                if not done:
                    # kill first, so python-chess fails its command cleanly (cancelling it mid-command confuses
                    # its bookkeeping when the process then dies), then collect that failure
                    await engine.kill()
                    await _settle(search)
                    raise TimeoutError
                result = search.result()
            except TimeoutError:
                last = EngineTimeout(f"{engine.name} did not answer within {self.timeout:g}s on {board.epd()}")
            except EngineCrashed as e:
                last = e
            except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError, ValueError) as e:
                last = EngineCrashed(f"{engine.name} failed on {board.epd()}: {e!r}")
            except asyncio.CancelledError:
                # the search may be half-way: the process's state is unknown, so replace it before anyone reuses it
                await engine.kill()
                await _settle(search)
                await self._replace(engine)
                raise
            else:
                self.stats.searches += 1
                self.stats.search_seconds += loop.time() - started
                self._idle.put_nowait(engine)
                return result
            log.warning("engine failed, replacing it", extra={"attempt": attempt, "error": str(last)})
            await self._replace(engine)
        self.stats.failures += 1
        assert last is not None
        raise last

    async def _replace(self, engine: UciEngine) -> None:
        """Kill ``engine``'s process and start a fresh one in the same slot (lazily again if that fails)."""
        await engine.kill()
        self.stats.restarts += 1
        try:
            await engine.start()
        except Exception as e:  # noqa: BLE001 - the slot stays; its next search retries the start
            log.error("could not restart engine", extra={"error": repr(e)})
            await engine.kill()
        self._idle.put_nowait(engine)
