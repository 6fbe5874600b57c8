"""An asyncio pool of engine processes: UCI for chess (python-chess's async engine API), GTP for Go.

Each process runs one search at a time (Threads=1); the pool runs at most ``size`` searches at once. A search
is deterministic: the engine gets ``ucinewgame`` (hash and history cleared) before every search and sees only the
position (see :func:`~.analysis.canonical_board`), so the same position and limits give the same answer on any
process, in any order, on every run. That is what lets results be cached, audited, and compared between runtimes.

Requests for a position already being searched join that search instead of starting another (look-ahead:
:meth:`EnginePool.prefetch` starts the search of the position to move while the player thinks). An engine that
crashes, hangs past ``timeout`` or answers garbage is killed and replaced; the request is retried once on the fresh
process and then fails with :class:`~analyzers.errors.EngineTimeout` or :class:`~analyzers.errors.EngineCrashed`.

The pool itself is game-agnostic: what it needs of a game (the engine class, the cache key of a position, what the
engine is shown) comes from a :class:`~.adapter.GameAdapter`: :data:`~.adapter.CHESS` (:class:`~.uci.UciEngine`) by
default, :data:`~.adapter.GO` (:class:`~.gtp.GtpEngine`) for Go.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chess
import chess.engine

from ..errors import EngineCrashed, EngineError, EngineTimeout, PoolClosed
from .adapter import CHESS, GameAdapter
from .analysis import Limits, PositionAnalysis
from .cache import AnalysisCache
from .uci import DEFAULT_OPTIONS, UciEngine, find_engine

__all__ = ["DEFAULT_OPTIONS", "DEFAULT_TIMEOUT", "EnginePool", "PoolStats", "UciEngine", "find_engine"]

log = logging.getLogger("kibitz.engine")

DEFAULT_TIMEOUT = 60.0

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
        game: GameAdapter = CHESS,
    ) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self.game = game
        # a list is an exact argv (tests use it for fake engines); a string is resolved like a shell would
        self.command: str | list[str] = command if isinstance(command, list) else find_engine(
            command, default=game.default_engine, env=game.engine_env)
        self.size = size
        self.options = {**game.default_options, **(options or {})}
        self.timeout = timeout
        self.cache = cache if cache is not None else AnalysisCache(path=cache_path, decode=game.decode)
        self.stats = PoolStats()
        self.identity = "?"
        self._idle: asyncio.Queue[Any] = asyncio.Queue()
        self._engines: list[Any] = []
        self._inflight: dict[str, asyncio.Future[Any]] = {}
        self._background: set[asyncio.Task] = set()
        self._open = False

    # -- lifecycle ------------------------------------------------------------------------------------
    async def __aenter__(self) -> EnginePool:
        engines = [self.game.make_engine(self.command, self.options) for _ in range(self.size)]
        # every start runs to its end (each has its own deadline) before a failure is raised: a start still running
        # when another failed would leave its process behind, owned by no pool
        started = await asyncio.gather(*(e.start() for e in engines), return_exceptions=True)
        failed = next((r for r in started if isinstance(r, BaseException)), None)
        if failed is not None:
            await asyncio.gather(*(x.kill() for x in engines), return_exceptions=True)
            if not isinstance(failed, Exception):
                raise failed  # a cancellation
            raise EngineError(f"cannot start engine {self.command!r}: {failed}") from failed
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
    def cache_key(self, board: Any, limits: Any) -> str:
        return f"{self.identity}|{limits.key}|{self.game.key(board)}"

    async def analyse(
        self, board: chess.Board, *, depth: int | None = None, nodes: int | None = None, multipv: int = 1
    ) -> PositionAnalysis:
        """Analyse ``board`` (its position only) to the given limits; served from cache or a running search."""
        return await self.analyse_limits(board, Limits(depth=depth, nodes=nodes, multipv=multipv))

    async def analyse_limits(self, board: Any, limits: Any) -> Any:
        """Analyse a position of the pool's game (a ``chess.Board``, a ``GoPosition``) to ``limits`` (``Limits``,
        ``GoLimits``)."""
        if not self._open:
            raise PoolClosed("the engine pool is not open (use `async with EnginePool(...)`)")
        # The cache first: a cached position was searched, so it has legal moves, and the terminal check (python-chess
        # generating legal moves) costs more than the lookup. Every position is asked for twice in a game.
        key = self.cache_key(board, limits)
        hit = self.cache.get(key)
        if hit is not None:
            self.stats.cache_hits += 1
            return hit
        done = self.game.terminal(board, self.engine_name, limits)
        if done is not None:
            return done
        running = self._inflight.get(key)
        if running is not None:
            self.stats.joined += 1
            return await asyncio.shield(running)
        # The search is the pool's task, not the caller's: a caller that gives up (a stage cutting a transaction short
        # to commit what is ready) leaves it running, and whoever asks for the position next joins it or hits the cache.
        task = asyncio.ensure_future(self._search_and_cache(key, self.game.canonical(board), limits))
        self._inflight[key] = task
        self._background.add(task)
        task.add_done_callback(self._search_done)
        return await asyncio.shield(task)

    async def _search_and_cache(self, key: str, board: Any, limits: Any) -> Any:
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

    def prefetch(self, board: Any, limits: Any) -> None:
        """Start analysing ``board`` now without waiting; a later :meth:`analyse` joins it or hits the cache."""
        if not self._open:
            return
        task = asyncio.ensure_future(self.analyse_limits(self.game.canonical(board), limits))
        self._background.add(task)
        task.add_done_callback(self._prefetch_done)

    def _prefetch_done(self, task: asyncio.Task) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("look-ahead search failed", extra={"error": repr(task.exception())})

    async def _search(self, board: Any, limits: Any) -> Any:
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
                last = EngineTimeout(f"{engine.name} did not answer within {self.timeout:g}s on {self.game.describe(board)}")
            except EngineCrashed as e:
                last = e
            except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError, ValueError) as e:
                last = EngineCrashed(f"{engine.name} failed on {self.game.describe(board)}: {e!r}")
            except asyncio.CancelledError:
                # the search may be half-way: the process's state is unknown, so replace it before anyone reuses it
                # (a pool that is closing has no one to reuse it: it is only killed)
                await engine.kill()
                await _settle(search)
                if self._open:
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

    async def _replace(self, engine: Any) -> None:
        """Kill ``engine``'s process and start a fresh one in the same slot (lazily again if that fails)."""
        await engine.kill()
        self.stats.restarts += 1
        try:
            await engine.start()
        except Exception as e:  # noqa: BLE001 - the slot stays; its next search retries the start
            log.error("could not restart engine", extra={"error": repr(e)})
            await engine.kill()
        self._idle.put_nowait(engine)
