"""The embedded runtime: the pipeline on asyncio queues, in one process, with no broker.

Events are routed to ``partitions`` worker tasks by a stable hash of the game_id, as Kafka would route them, so a
game's events stay in order while different games use the engines concurrently. Each worker runs the game step and
then, inline, the pool step (for games in an event, with event pooling configured) and the player step
(:class:`~streamer.steps.Steps`, the driver every runtime calls). Rejected input becomes a :class:`~schemas.DeadLetter`
handed to ``on_reject``; the stream goes on.

With ``config.review`` (``--review``) each review request of the player step (a finding of the service's statistic and
its scope's games) is reviewed in a task of its own, one player's after another, a deeper search on the same engines (:meth:`Steps.review`); a
review that reaches the action tier goes to the sink as an alert of stage "review". :meth:`EmbeddedRuntime.drain`
waits for the reviews too.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import zlib
from collections.abc import Callable

from pydantic import BaseModel

from analyzers.engine import EnginePool
from analyzers.errors import KibitzError
from schemas import DeadLetter, MoveAssessment, ReviewRequest

from .bounded import LruMap
from .pipeline import GameState, PipelineConfig
from .steps import GameEvent, Output, Route, Steps

log = logging.getLogger("kibitz.embedded")
Sink = Callable[[BaseModel], None]
Reject = Callable[[DeadLetter], None]


#: Events whose evidence the pool step keeps at most (least recently used go first).
MAX_EVENTS = 1_000
#: Default limits of the embedded runtime's memory: at most this many games and players (least recently used go
#: first, counted in ``kibitz_evicted_total``). Measured with tracemalloc (tests/test_embedded.py): 20,000 games that
#: never end hold about 20 KB per game with its player (three scopes of a player, each a 2.4 KB posterior over c and a
#: 1.2 KB rating likelihood, and a board), so the defaults keep this state near 200 MB.
MAX_GAMES = 10_000
MAX_PLAYERS = 10_000
#: The stated bound the test checks: bytes of state per game plus one player, with every scope holding counted moves.
STATE_BYTES_PER_GAME = 24_000
#: How often the open games are swept for idle ones and old end markers (Steps.sweep_games).
SWEEP_SECONDS = 60.0
#: Evictions are logged once per this many seconds, with how many there were.
EVICTION_LOG_SECONDS = 10.0


class EmbeddedRuntime:
    def __init__(self, pool: EnginePool | None, config: PipelineConfig, sink: Sink, on_reject: Reject, *, partitions: int = 8,
                 max_games: int = MAX_GAMES, max_players: int = MAX_PLAYERS, go_pool: EnginePool | None = None) -> None:
        """``pool`` searches chess positions, ``go_pool`` Go positions (with ``config.go_calibration``); a runtime
        without one refuses that game's events."""
        self.pool = pool
        self.config = config
        self.sink = sink
        self.on_reject = on_reject
        self.steps = Steps(config, pool, go_pool=go_pool)
        self.metrics = self.steps.metrics
        self.games = LruMap(max_games, self._evicted("game"))
        self.players = LruMap(max_players, self._evicted("player"))
        self.events = LruMap(MAX_EVENTS, self._evicted("event"))
        self._last_sweep = time.monotonic()
        self._queues: list[asyncio.Queue[tuple[GameEvent, bytes | str | None, str]]] = [
            asyncio.Queue() for _ in range(partitions)
        ]
        self._workers: list[asyncio.Task] = []
        self._reviews: set[asyncio.Task] = set()
        self.review_states = LruMap(max_players, self._evicted("review"))  # each player's crossings with a verdict
        self._review_locks: dict[str, asyncio.Lock] = {}  # one review at a time per player (one verdict per crossing)
        #: the first error of the sink or of on_reject (the steps dead-letter their own): the runtime stops there, and
        #: submit and drain raise it, rather than a partition's worker dying and drain waiting for it for ever
        self.failure: Exception | None = None

    async def __aenter__(self) -> EmbeddedRuntime:
        self._workers = [asyncio.create_task(self._work(q)) for q in self._queues]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drain()
        for w in self._workers:
            w.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    def _evicted(self, what: str) -> Callable[[str, object], None]:
        unlogged, last_log = 0, -math.inf

        def on_evict(key: str, state: object) -> None:
            nonlocal unlogged, last_log
            if what == "game" and isinstance(state, GameState) and state.ended:
                self.metrics.evicted.labels("end_marker").inc()  # nothing lost but the check for late events
                return
            if what == "game" and isinstance(state, GameState):  # what it waited with is dead-lettered, not dropped
                for out in self.steps.stranded(key, state, f"at the memory limit ({self.games.max_items} games)"):
                    self._route(out)
            self.metrics.evicted.labels(what).inc()
            unlogged += 1
            if time.monotonic() - last_log >= EVICTION_LOG_SECONDS:  # one line per interval, not one per eviction
                limit = {"game": self.games, "player": self.players, "event": self.events}[what].max_items
                log.warning("state evicted at the memory limit", extra={"what": what, "last_key": key, "evicted": unlogged,
                                                                        "limit": limit})
                unlogged, last_log = 0, time.monotonic()
        return on_evict

    # -- input ----------------------------------------------------------------------------------------
    def submit_raw(self, raw: bytes | str, source: str) -> None:
        """A JSON event as received; malformed ones are dead-lettered here."""
        self._raise_failure()
        ev = self.steps.parse_game(raw, source)
        if isinstance(ev, Output):
            self._route(ev)
        else:
            self.submit(ev, raw, source)

    def submit(self, ev: GameEvent, raw: bytes | str | None = None, source: str = "api") -> None:
        self._raise_failure()
        part = zlib.crc32(ev.game_id.encode()) % len(self._queues)
        self._queues[part].put_nowait((ev, raw, source))

    def reject(self, error: KibitzError, raw: bytes | str, source: str) -> None:
        """Report input rejected before it reached the runtime (e.g. an illegal move found while reading a PGN)."""
        self._route(self.steps.reject(error, raw, source, getattr(error, "game_id", None)))

    async def drain(self) -> None:
        """Wait until every submitted event is processed and every review it started has ended."""
        await asyncio.gather(*(q.join() for q in self._queues))
        while self._reviews:
            await asyncio.gather(*list(self._reviews))
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    async def _review(self, req: ReviewRequest) -> None:
        """One review (see the module docstring): its alert or its dead letter, routed like any output. A player's
        reviews run one after another, as the review stage runs them keyed by player."""
        lock = self._review_locks.setdefault(req.player_id, asyncio.Lock())
        try:
            async with lock:
                outputs = await self.steps.review(self.review_states, req, key=req.player_id)
            for o in outputs:
                self._route(o)
        finally:
            if not lock.locked() and self._review_locks.get(req.player_id) is lock:
                del self._review_locks[req.player_id]

    # -- processing -----------------------------------------------------------------------------------
    async def _work(self, queue: asyncio.Queue) -> None:
        while True:
            ev, raw, source = await queue.get()
            try:
                if self.failure is not None:
                    continue  # stopped: what is still queued is not processed (drain raises the failure)
                for out in await self.steps.game(self.games, ev, raw, source, ev.game_id):
                    self._route(out)
                if time.monotonic() - self._last_sweep > SWEEP_SECONDS:
                    self._last_sweep = time.monotonic()
                    for out in self.steps.sweep_games(self.games).dead_letters:
                        self._route(out)
                    self.steps.sweep_events(self.events)
            except Exception as e:  # noqa: BLE001 - the sink's or on_reject's (an output that is gone): kept, raised by drain
                self.failure = self.failure or e
            finally:
                queue.task_done()

    def _route(self, out: Output) -> None:
        msg = out.message
        if out.route is Route.DEADLETTER:
            assert isinstance(msg, DeadLetter)
            self.on_reject(msg)
            return
        if out.route is Route.POOL:
            for o in self.steps.pool_step(self.events, msg, key=out.key):  # type: ignore[arg-type]
                self._route(o)
            return
        if out.route is Route.ASSESSMENTS:
            if isinstance(msg, MoveAssessment):
                self.sink(msg)  # the live view shows evals; game results are internal traffic
            for o in self.steps.player(self.players, msg):  # type: ignore[arg-type]
                self._route(o)
            return
        if out.route is Route.REVIEWS:  # searched beside the live analysis; the ratings do not wait for it
            assert isinstance(msg, ReviewRequest)
            task = asyncio.create_task(self._review(msg))
            self._reviews.add(task)
            task.add_done_callback(self._reviews.discard)
            return
        self.sink(msg)
