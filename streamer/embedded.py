"""The embedded runtime: the pipeline on asyncio queues, in one process, with no broker.

Events are routed to ``partitions`` worker tasks by a stable hash of the game_id, as Kafka would route them, so a
game's events stay in order while different games use the engines concurrently. Each worker runs the game step and
then, inline, the player step (:class:`~streamer.steps.Steps`, the driver every runtime calls). Rejected input becomes a
:class:`~schemas.DeadLetter` handed to ``on_reject``; the stream goes on.
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable

from pydantic import BaseModel

from analyzers.engine import EnginePool
from analyzers.errors import KibitzError
from schemas import DeadLetter, MoveAssessment

from .pipeline import GameState, PipelineConfig, PlayerState
from .steps import GameEvent, Output, Route, Steps

log = logging.getLogger("kibitz.embedded")
Sink = Callable[[BaseModel], None]
Reject = Callable[[DeadLetter], None]


class EmbeddedRuntime:
    def __init__(self, pool: EnginePool, config: PipelineConfig, sink: Sink, on_reject: Reject, *, partitions: int = 8) -> None:
        self.pool = pool
        self.config = config
        self.sink = sink
        self.on_reject = on_reject
        self.steps = Steps(config, pool)
        self.metrics = self.steps.metrics
        self.games: dict[str, GameState] = {}
        self.players: dict[str, PlayerState] = {}
        self._queues: list[asyncio.Queue[tuple[GameEvent, bytes | str | None, str]]] = [
            asyncio.Queue() for _ in range(partitions)
        ]
        self._workers: list[asyncio.Task] = []

    async def __aenter__(self) -> EmbeddedRuntime:
        self._workers = [asyncio.create_task(self._work(q)) for q in self._queues]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drain()
        for w in self._workers:
            w.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    # -- input ----------------------------------------------------------------------------------------
    def submit_raw(self, raw: bytes | str, source: str) -> None:
        """A JSON event as received; malformed ones are dead-lettered here."""
        ev = self.steps.parse_game(raw, source)
        if isinstance(ev, Output):
            self._route(ev)
        else:
            self.submit(ev, raw, source)

    def submit(self, ev: GameEvent, raw: bytes | str | None = None, source: str = "api") -> None:
        part = zlib.crc32(ev.game_id.encode()) % len(self._queues)
        self._queues[part].put_nowait((ev, raw, source))

    def reject(self, error: KibitzError, raw: bytes | str, source: str) -> None:
        """Report input rejected before it reached the runtime (e.g. an illegal move found while reading a PGN)."""
        self._route(self.steps.reject(error, raw, source, getattr(error, "game_id", None)))

    async def drain(self) -> None:
        await asyncio.gather(*(q.join() for q in self._queues))

    # -- processing -----------------------------------------------------------------------------------
    async def _work(self, queue: asyncio.Queue) -> None:
        while True:
            ev, raw, source = await queue.get()
            try:
                for out in await self.steps.game(self.games, ev, raw, source, ev.game_id):
                    self._route(out)
            finally:
                queue.task_done()

    def _route(self, out: Output) -> None:
        msg = out.message
        if out.route is Route.DEADLETTER:
            assert isinstance(msg, DeadLetter)
            self.on_reject(msg)
            return
        if out.route is Route.ASSESSMENTS:
            if isinstance(msg, MoveAssessment):
                self.sink(msg)  # the live view shows evals; game results are internal traffic
            for o in self.steps.player(self.players, msg):  # type: ignore[arg-type]
                self._route(o)
            return
        self.sink(msg)
