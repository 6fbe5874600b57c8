"""The embedded runtime: the pipeline on asyncio queues, in one process, with no broker.

Events are routed to ``partitions`` worker tasks by a stable hash of the game_id, as Kafka would route them, so a
game's events stay in order while different games use the engines concurrently. Each worker runs the game step and
then, inline, the player step (both are the same functions the Kafka runtime calls). Rejected input becomes a
:class:`~schemas.DeadLetter` handed to ``on_reject``; the stream goes on.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import zlib
from collections.abc import Callable

from pydantic import BaseModel

from analyzers.engine import EnginePool
from analyzers.errors import InputError, KibitzError
from schemas import DeadLetter, GameEnded, GameResult, GameStarted, MoveAssessment, MoveEvent, parse_event

from .metrics import Metrics
from .pipeline import (
    GameState, PipelineConfig, PlayerState, apply_move, apply_player_event, assess_move, end_game, start_game,
)

log = logging.getLogger("kibitz.embedded")
Sink = Callable[[BaseModel], None]
Reject = Callable[[DeadLetter], None]


def dead_letter(error: KibitzError, raw: bytes | str, *, source: str, key: str | None = None) -> DeadLetter:
    """A dead-letter record: the original bytes, where they came from, and why they were rejected."""
    data = raw.encode() if isinstance(raw, str) else raw
    text = data.decode("utf-8", errors="replace")
    exact = text.encode("utf-8") == data
    return DeadLetter(
        source=source, key=key, reason=getattr(error, "reason", "error"), error=str(error),
        game_id=getattr(error, "game_id", None), ply=getattr(error, "ply", None),
        raw=text, raw_base64=None if exact else base64.b64encode(data).decode(),
    )


class EmbeddedRuntime:
    def __init__(self, pool: EnginePool, config: PipelineConfig, sink: Sink, on_reject: Reject, *, partitions: int = 8) -> None:
        self.pool = pool
        self.config = config
        self.sink = sink
        self.on_reject = on_reject
        self.games: dict[str, GameState] = {}
        self.players: dict[str, PlayerState] = {}
        self._queues: list[asyncio.Queue[tuple[GameStarted | MoveEvent | GameEnded, bytes | str, str]]] = [
            asyncio.Queue() for _ in range(partitions)
        ]
        self._workers: list[asyncio.Task] = []
        self.metrics = Metrics(lambda: self.pool)

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
        try:
            ev = parse_event(raw)
        except InputError as e:
            self._reject(e, raw, source)
            return
        self.submit(ev, raw, source)

    def submit(self, ev: GameStarted | MoveEvent | GameEnded, raw: bytes | str | None = None, source: str = "api") -> None:
        self.metrics.events.labels(ev.type).inc()
        part = zlib.crc32(ev.game_id.encode()) % len(self._queues)
        self._queues[part].put_nowait((ev, raw if raw is not None else ev.model_dump_json(), source))

    def reject(self, error: KibitzError, raw: bytes | str, source: str) -> None:
        """Report input rejected before it reached the runtime (e.g. an illegal move found while reading a PGN)."""
        self._reject(error, raw, source)

    async def drain(self) -> None:
        await asyncio.gather(*(q.join() for q in self._queues))

    # -- processing -----------------------------------------------------------------------------------
    async def _work(self, queue: asyncio.Queue) -> None:
        while True:
            ev, raw, source = await queue.get()
            try:
                await self._handle(ev)
            except KibitzError as e:
                self._reject(e, raw, source)
            except Exception as e:  # noqa: BLE001 - a bug must not kill the worker and stall its partition
                log.exception("unexpected error", extra={"game_id": ev.game_id})
                err = KibitzError(f"internal error: {e!r}")
                self._reject(err, raw, source)
            finally:
                queue.task_done()

    async def _handle(self, ev: GameStarted | MoveEvent | GameEnded) -> None:
        gid = ev.game_id
        if isinstance(ev, GameStarted):
            self.games[gid] = start_game(self.games.get(gid), ev, self.pool.prefetch, self.config)
            return
        if isinstance(ev, GameEnded):
            self._finish(gid, end_game(self.games.get(gid), ev))
            return
        started = asyncio.get_running_loop().time()
        applied = apply_move(self.games.get(gid), ev)
        try:
            assessment = await assess_move(applied, self.pool.analyse_limits, self.config)
        except BaseException:
            # the engine failed (the caller dead-letters the move): the game still goes on, and still ends
            self._finish(gid, applied.results)
            raise
        self._emit(assessment)
        self._player(assessment)
        self.metrics.step_seconds.observe(asyncio.get_running_loop().time() - started)
        self._finish(gid, applied.results)  # after the last move's assessment, so the player sees it first

    def _finish(self, gid: str, results: list[GameResult]) -> None:
        for r in results:
            self._player(r)
        if results:
            self.games.pop(gid, None)

    def _player(self, ev: MoveAssessment | GameResult) -> None:
        state, outputs = apply_player_event(self.players.get(ev.player_id), ev, self.config)
        self.players[ev.player_id] = state
        for o in outputs:
            self._emit(o)

    def _emit(self, msg: BaseModel) -> None:
        self.metrics.outputs.labels(getattr(msg, "type", "?")).inc()
        self.sink(msg)

    def _reject(self, error: KibitzError, raw: bytes | str, source: str) -> None:
        self.metrics.rejected.labels(getattr(error, "reason", "error")).inc()
        self.on_reject(dead_letter(error, raw, source=source, key=getattr(error, "game_id", None)))
