"""The one driver every runtime calls: a game event in, a player event in, typed outputs out.

The embedded runtime, the transactional Kafka runtime, the faust app and the batch path (benchmarks, fitting) differ
only in how they store state and where they send outputs; what happens to an event is decided here, once:

- :meth:`Steps.game` (keyed by game): a :class:`~schemas.GameStarted`, :class:`~schemas.MoveEvent` or
  :class:`~schemas.GameEnded` updates the game's :class:`~streamer.pipeline.GameState` and returns assessments and
  game results (both routed to :attr:`Route.ASSESSMENTS`, keyed by player; with event pooling configured, those of a
  game in an event to :attr:`Route.POOL`, keyed by event);
- :meth:`Steps.pool` (keyed by event): an assessment or game result of a game in an event updates the event's
  :class:`~analyzers.eventpool.EventEvidence` and goes on to :attr:`Route.ASSESSMENTS`, keyed by player, with the
  player's event prior attached (docs/models.md s. 12);
- :meth:`Steps.player` (keyed by player): an assessment or game result updates the
  :class:`~streamer.pipeline.PlayerState` and returns perceived ratings, Glicko-2 updates and fair-play alerts (and,
  with the review on, a :class:`~schemas.ReviewRequest` at each game end of a player over a fair-play tier,
  :attr:`Route.REVIEWS`, keyed by player);
- :meth:`Steps.review` (keyed by player; with the review on): a review request's games are searched again deeper
  (:class:`~streamer.review.Reviewer`), and a review that reaches the action tier is an alert of stage "review".

:meth:`Steps.game_record` and :meth:`Steps.player_record` do the same for raw bytes off a topic. No step raises for
bad input or for a bug: what it rejects comes back as a :class:`~schemas.DeadLetter` output (the original bytes and
the reason), and the stream goes on. Every metric is recorded here (:class:`~streamer.metrics.Metrics`).

An :class:`Output` knows its :class:`Route` from its message's class (:data:`ROUTES`), so a runtime maps routes to
topics or sinks (:meth:`~streamer.kafka_config.Topics.for_route`) and never looks a name up by string.

State lives in any :class:`StateMap` (a dict, a changelog-tracked dict, a faust table through :class:`ObjectTable`);
a step writes a key's state back after changing it, so a store that serialises sees every change. The sweeps
(:meth:`Steps.sweep_games`, :meth:`Steps.sweep_events`) drop idle state and return, as :class:`Swept`, the dead
letters of inputs an evicted game still held, which each runtime writes as it writes a step's outputs.
"""

from __future__ import annotations

import base64
import enum
import logging
import time
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from analyzers.engine import EnginePool
from analyzers.errors import (
    CorruptState,
    EngineError,
    IllegalMove,
    InputError,
    KeyMismatch,
    KibitzError,
    MalformedEvent,
    OutOfOrderPly,
    UnsupportedGame,
    reasons,
)
from analyzers.eventpool import EventEvidence
from schemas import (
    DeadLetter,
    FairPlayAlert,
    GameEnded,
    GameResult,
    GameStarted,
    MoveAssessment,
    MoveEvent,
    PerceivedRating,
    RatingUpdate,
    ReviewRequest,
    parse_event,
    parse_player_event,
    parse_review_request,
)
from schemas.messages import MAX_DEAD_LETTER_BYTES

from .metrics import Metrics
from .pipeline import (
    GO_NOT_CONFIGURED,
    REVIEW_VERDICTS,
    GameState,
    PipelineConfig,
    PlayerState,
    ReviewState,
    apply_move,
    apply_player_event,
    assess_move,
    end_game,
    hold_move,
    next_held,
    orphaned_held,
    pool_event,
    refuse_ply,
    start_game,
    stranded,
)
from .state_store import from_stored

log = logging.getLogger("kibitz.steps")

GameEvent = GameStarted | MoveEvent | GameEnded
PlayerEvent = MoveAssessment | GameResult
Key = str | bytes | None


class Route(enum.Enum):
    """Where an output goes; each runtime maps a route to a topic (Kafka) or a callback (embedded)."""

    ASSESSMENTS = "assessments"  # internal: the game step's output, the player step's input
    POOL = "pool"  # internal: the game step's output for games in an event (with event pooling), the pool step's input
    PERCEIVED = "perceived"
    GLICKO2 = "glicko2"
    FAIRPLAY = "fairplay"
    REVIEWS = "reviews"  # internal: the player step's review requests, the review step's input
    DEADLETTER = "deadletter"


#: The route of every message class a step can return.
ROUTES: dict[type[BaseModel], Route] = {
    MoveAssessment: Route.ASSESSMENTS, GameResult: Route.ASSESSMENTS, PerceivedRating: Route.PERCEIVED,
    RatingUpdate: Route.GLICKO2, FairPlayAlert: Route.FAIRPLAY, ReviewRequest: Route.REVIEWS, DeadLetter: Route.DEADLETTER,
}


@dataclass
class Swept:
    """One sweep of a step's state: entries dropped, and the dead letters of inputs they still held (each runtime
    writes them as it writes a step's outputs)."""

    evicted: int
    expired: int = 0
    dead_letters: list[Output] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Output:
    """One message to publish, with its partitioning key (a player id, an event, or a dead letter's original key)."""

    key: Key
    message: BaseModel
    to: Route | None = None  # a route other than the message class's: the pool step's input

    @property
    def route(self) -> Route:
        return self.to or ROUTES[type(self.message)]

    @property
    def key_bytes(self) -> bytes | None:
        return self.key.encode() if isinstance(self.key, str) else self.key


#: What a step needs of a state store: a dict, the changelog-tracked dict of a transactional stage, or a faust table
#: seen through :class:`ObjectTable`.
StateMap = MutableMapping[str, Any]


#: The longest record key a dead letter carries (in the record and in its ``key`` field; a game id is at most 200
#: characters), and the longest error it states: a longer one, a producer's bug, keeps its start.
MAX_DEAD_LETTER_KEY, MAX_DEAD_LETTER_ERROR = 1024, 8192


def dead_letter_key(key: Key) -> Key:
    """The key a dead letter is written under: the original's, or its start when it is over :data:`MAX_DEAD_LETTER_KEY`
    bytes (a 900 KB key made a dead letter over the broker's limit, whose transaction aborted for ever)."""
    if isinstance(key, str) and len(key.encode("utf-8", "surrogatepass")) > MAX_DEAD_LETTER_KEY:
        return key.encode("utf-8", "surrogatepass")[:MAX_DEAD_LETTER_KEY]
    return key[:MAX_DEAD_LETTER_KEY] if isinstance(key, bytes) else key


def dead_letter(error: KibitzError, raw: bytes | str | None, *, source: str, key: str | None = None) -> DeadLetter:
    """A dead-letter record: the original bytes (base64 too when they are not UTF-8; empty for a record without a
    value), where they came from, why. Its JSON stays under :data:`~schemas.messages.MAX_DEAD_LETTER_BYTES`: an
    original too large (a 900 KB binary record is 4 MB as text and base64) keeps its start and says its size. Written
    whole, it was over the broker's limit: the transaction that held it aborted, and so did the poison rule's dead
    letter of it, for ever, and no later record of that partition was read."""
    data = raw.encode() if isinstance(raw, str) else raw or b""
    if key is not None and len(key) > MAX_DEAD_LETTER_KEY:
        key = f"{key[:MAX_DEAD_LETTER_KEY]}... ({len(key)} characters)"
    said = str(error)
    if len(said) > MAX_DEAD_LETTER_ERROR:  # it may quote the input; the input itself is in raw
        said = f"{said[:MAX_DEAD_LETTER_ERROR]}... ({len(said)} characters)"
    keep = len(data)
    while True:
        part = data[:keep]
        text = part.decode("utf-8", errors="replace")
        exact = text.encode("utf-8") == part
        d = DeadLetter(
            source=source, key=key, reason=getattr(error, "reason", "error"), error=said,
            game_id=getattr(error, "game_id", None), ply=getattr(error, "ply", None),
            raw=text, raw_base64=None if exact else base64.b64encode(part).decode(),
            raw_size=len(data) if keep < len(data) else None,
        )
        size = len(d.model_dump_json().encode())  # bytes on the wire, not characters
        if size <= MAX_DEAD_LETTER_BYTES or keep == 0:
            return d
        keep = int(keep * MAX_DEAD_LETTER_BYTES / size * 0.9)  # the JSON grows about in proportion to what is kept


def dead_letter_output(error: KibitzError, raw: bytes | str | None, *, source: str, key: Key) -> Output:
    """The record that dead-letters ``raw``, which came under ``key``: keyed by :func:`dead_letter_key`, the key as text
    in the letter (:func:`dead_letter`)."""
    text_key = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    return Output(dead_letter_key(key), dead_letter(error, raw, source=source, key=text_key))


class Steps:
    """The steps with what they need: the pipeline configuration, the engine pools (game step only: chess's and, to
    rate Go, a GTP pool) and metrics."""

    def __init__(self, config: PipelineConfig, pool: EnginePool | None = None, metrics: Metrics | None = None, *,
                 go_pool: EnginePool | None = None) -> None:
        self.config = config
        self.pool = pool
        self.go_pool = go_pool
        self.reviewer = None
        if config.review is not None and pool is not None:
            from .review import Reviewer  # the review assesses games through these steps (streamer.batch)

            self.reviewer = Reviewer(pool, config, config.review)
        self.metrics = metrics if metrics is not None else Metrics(lambda: self.pool)
        # labelled children, looked up once: prometheus-client's labels() costs microseconds per call, per record
        self._outputs: dict[str, Any] = {}
        self._events: dict[str, Any] = {}
        # every series exists from the start, at 0: a dashboard or an alert rule sees "none yet", not "no data"
        for cls in ROUTES:
            self._outputs[cls.model_fields["type"].default] = self.metrics.outputs.labels(cls.model_fields["type"].default)
        for cls in (GameStarted, MoveEvent, GameEnded):
            self._events[cls.model_fields["type"].default] = self.metrics.events.labels(cls.model_fields["type"].default)
        for reason in reasons():
            self.metrics.rejected.labels(reason)

    # -- rejections ---------------------------------------------------------------------------------------
    def reject(self, error: KibitzError, raw: bytes | str | None, source: str, key: Key = None) -> Output:
        """The dead letter for ``raw``, counted and logged."""
        reason = getattr(error, "reason", "error")
        self.metrics.rejected.labels(reason).inc()
        log.warning("rejected", extra={"reason": reason, "error": str(error), "source": source})
        return self._out(dead_letter_output(error, raw, source=source, key=key))

    def _internal(self, e: Exception, raw: bytes | str, source: str, key: Key) -> list[Output]:
        """A bug in a step: dead-letter the record (reason ``error``) instead of stopping the partition."""
        log.exception("unexpected error", extra={"source": source})
        return [self.reject(KibitzError(f"internal error: {e!r}"), raw, source, key)]

    def _guarded(self, step: Callable[[], list[Output]], ev: BaseModel, raw: bytes | str | None, source: str,
                 key: Key) -> list[Output]:
        """The pool and player steps' error boundary: ``step()``'s outputs; a refused input or a damaged state (e.g. a
        Go assessment where the rate stage has no Go calibration) is the record's dead letter with its own reason,
        any other error an internal one. Either way the stage goes on."""
        try:
            return step()
        except (InputError, CorruptState) as e:
            return [self.reject(e, _raw(raw, ev), source, key)]
        except Exception as e:  # noqa: BLE001
            return self._internal(e, _raw(raw, ev), source, key)

    def _out(self, o: Output) -> Output:
        kind = getattr(o.message, "type", o.route.value)
        counter = self._outputs.get(kind)
        if counter is None:
            counter = self._outputs[kind] = self.metrics.outputs.labels(kind)
        counter.inc()
        return o

    # -- game step ----------------------------------------------------------------------------------------
    def parse_game(self, raw: bytes | str | None, source: str, key: Key = None) -> GameEvent | Output:
        """The event in ``raw``, or its dead letter."""
        try:
            return parse_event(raw)
        except InputError as e:
            return self.reject(e, raw, source, key)

    async def game_record(self, games: StateMap, key: Key, raw: bytes | None, source: str) -> list[Output]:
        """One record of ``kibitz.moves``: :meth:`game` on its parsed event, or its dead letter (also when the
        record's key is not its game's id: :class:`~analyzers.errors.KeyMismatch`)."""
        ev = self.parse_game(raw, source, key)
        if isinstance(ev, Output):
            return [ev]
        want = ev.game_id.encode()
        if (key.encode() if isinstance(key, str) else key) != want:
            got = ("no key" if key is None else f"the key {key!r}" if len(key) <= 100
                   else f"a key of {len(key)} bytes starting {key[:100]!r}")
            return [self.reject(KeyMismatch(f"a record of this game has {got}; the events of a game must all be keyed by "
                                            f"its game_id (README, Topics)", game_id=ev.game_id,
                                            ply=getattr(ev, "ply", None)), raw, source, key)]
        return await self.game(games, ev, raw, source, key)

    async def game(self, games: StateMap, ev: GameEvent, raw: bytes | str | None = None, source: str = "api",
                   key: Key = None) -> list[Output]:
        """Apply one game event: assessments and game results keyed by player, or the dead letter of ``raw`` (the
        event's JSON when not given, made only then). An ended game's state shrinks to an end marker.

        The event counts in ``kibitz_events_total`` once its step has run through, whatever the outcome: a step
        cancelled while it waits for its search (the transactional runtime undoes a slow record and runs it again in
        the next transaction) counts when it runs again, not twice."""
        try:
            out = await self._game(games, ev, raw, source, key)
        except CorruptState as e:  # the game's stored state, read before the event's own checks
            out = [self.reject(e, _raw(raw, ev), source, key)]
        except Exception as e:  # noqa: BLE001
            out = self._internal(e, _raw(raw, ev), source, key)
        counter = self._events.get(ev.type)
        if counter is None:
            counter = self._events[ev.type] = self.metrics.events.labels(ev.type)
        counter.inc()
        return out

    async def _game(self, games: StateMap, ev: GameEvent, raw: bytes | str | None, source: str, key: Key) -> list[Output]:
        started = time.monotonic()
        gid = ev.game_id
        state: GameState | None = games.get(gid)
        out: list[Output] = []
        try:
            if isinstance(ev, GameStarted):
                pool = self._pool(ev.game, ev.game_id)
                state = start_game(state, ev, pool.prefetch, self.config)
            elif isinstance(ev, GameEnded):
                out += [self._to_player(r) for r in end_game(state, ev)]
                if state is not None and not state.ended:
                    state.end_source = source  # it waits for plies still to come
            elif not hold_move(state, ev, source):  # a move that came early waits in the state for the plies before it
                state = await self._move(state, ev, raw, source, key, out, started)
                while (held := next_held(state)) is not None:  # the moves that waited for this one, in ply order
                    try:
                        await self._move(state, held.event, None, held.source, key, out)
                    except InputError as e:
                        out += self._refused(e, state, held.event, None, held.source, key)
        except InputError as e:
            if not (isinstance(e, IllegalMove) and isinstance(ev, MoveEvent) and state is not None):
                return [self.reject(e, _raw(raw, ev), source, key)]
            out = self._refused(e, state, ev, raw, source, key)
        if state is not None:
            # its game ended first
            out += self._waited(gid, orphaned_held(state), f"ended at ply {len(state.moves)}", len(state.moves), key)
            # an ended game stays as a small end marker (GameState.to_dict) until swept: see sweep_games
            state.touched = time.time()
            games[gid] = state
        return out

    async def _move(self, state: GameState | None, ev: MoveEvent, raw: bytes | str | None, source: str, key: Key,
                    out: list[Output], started: float | None = None) -> GameState:
        """Apply one move and add its assessment (or its engine failure's dead letter) and any results it completed
        to ``out``; an input error is raised with the game untouched. ``started``: when the move's record arrived,
        for ``kibitz_move_seconds`` (a held move's wait for the plies before it is not the service's time)."""
        applied = apply_move(state, ev)
        pool = self._pool(applied.state.game, ev.game_id, ev.ply)
        try:
            out.append(self._to_player(await assess_move(applied, pool.analyse_limits, self.config, pool.prefetch)))
            if started is not None:
                self.metrics.step_seconds.observe(time.monotonic() - started)
        except EngineError as e:
            out.append(self.reject(e, _raw(raw, ev), source, key))  # the move is applied; only its assessment is lost
        # after the move's assessment, so the player step sees the last move before the result
        out += [self._to_player(r) for r in applied.results]
        return applied.state

    def _refused(self, e: InputError, state: GameState, ev: MoveEvent, raw: bytes | str | None, source: str,
                 key: Key) -> list[Output]:
        """The dead letter of a move ``state``'s game refused with ``e``; a move illegal at the game's next ply also
        finishes an end that waits for plies past it (:func:`~.pipeline.refuse_ply`): the game cannot go on."""
        out = [self.reject(e, _raw(raw, ev), source, key)]
        if isinstance(e, IllegalMove):
            out += [self._to_player(r) for r in refuse_ply(state, ev.ply)]
        return out

    def _waited(self, gid: str, waiting: list[tuple[MoveEvent | GameEnded, str]], why: str, ply: int,
                key: Key) -> list[Output]:
        """The dead letters (``out_of_order_ply``) of what game ``gid`` waited with when it ``why`` (ended, was
        evicted): moves held for ply ``ply``, which had not come, and an end waiting for it (:func:`~.pipeline.stranded`)."""
        out = []
        for ev, source in waiting:
            waited = "its end" if isinstance(ev, GameEnded) else "this move"
            out.append(self.reject(OutOfOrderPly(f"the game {why} while {waited} waited for ply {ply}", game_id=gid,
                                                 ply=getattr(ev, "ply", None)), _raw(None, ev), source, key))
        return out

    def _pool(self, game: str, game_id: str, ply: int | None = None) -> EnginePool:
        """The engine pool of ``game``'s searches; a game this runtime has no engines for is refused."""
        pool = self.go_pool if game == "go" else self.pool
        if pool is None:
            raise UnsupportedGame(GO_NOT_CONFIGURED if game == "go" else f"this runtime has no {game} engine pool",
                                  game_id=game_id, ply=ply)
        return pool

    def _to_player(self, m: MoveAssessment | GameResult) -> Output:
        """A game step output for its player: by way of the pool step (keyed by event) for a chess game in an event
        when event pooling is configured, else straight to the player step."""
        if m.event and m.game == "chess" and self.config.event_pool is not None and self.config.model is not None:
            return self._out(Output(m.event, m, Route.POOL))
        return self._out(Output(m.player_id, m))

    def sweep_games(self, games: StateMap, now: float | None = None) -> Swept:
        """Drop open games idle for ``config.idle_game_seconds`` (counted, logged) and end markers older than
        ``config.ended_game_seconds``. What an evicted game still waited with (moves held for the plies before them,
        an end waiting for its plies) is dead-lettered, ``out_of_order_ply``: the plies before them never came. O(games)."""
        now = time.time() if now is None else now
        idle, expired = [], []
        scan = getattr(games, "scan", None)  # a RocksDB store holds more than its live items
        for gid, state in (scan() if scan is not None else list(games.items())):
            if not state.touched:
                continue  # stored before games kept the time of their last event: its next event sets it
            age = now - state.touched
            if state.ended:
                if age > self.config.ended_game_seconds:
                    expired.append(gid)
            elif age > self.config.idle_game_seconds:
                idle.append((gid, state))
        swept = Swept(len(idle), len(expired))
        for gid, state in idle:
            swept.dead_letters += self.stranded(gid, state, f"after {self.config.idle_game_seconds:g} s without an event")
        for gid in [g for g, _ in idle] + expired:
            del games[gid]
        if idle:
            self.metrics.evicted.labels("idle_game").inc(len(idle))
            log.warning("idle games evicted", extra={"games": len(idle), "idle_seconds": self.config.idle_game_seconds,
                                                     "first": idle[0][0], "dead_letters": len(swept.dead_letters)})
        return swept

    # -- pool step ----------------------------------------------------------------------------------------
    def parse_player(self, raw: bytes | str | None, source: str, key: Key = None) -> PlayerEvent | Output:
        """The assessment or game result in ``raw`` (a record of our own internal topics), or its dead letter."""
        try:
            return parse_player_event(raw)
        except MalformedEvent as e:  # our own topic, but never let one record stop the stage
            return self.reject(MalformedEvent(f"not an assessment or game result: {e}"), raw, source, key)

    def pool_record(self, events: StateMap, key: Key, raw: bytes | None, source: str) -> list[Output]:
        """One record of ``kibitz.assessments.events``: :meth:`pool_step` on it, or its dead letter."""
        ev = self.parse_player(raw, source, key)
        return [ev] if isinstance(ev, Output) else self.pool_step(events, ev, raw, source, key)

    def pool_step(self, events: StateMap, ev: PlayerEvent, raw: bytes | str | None = None, source: str = "api",
                  key: Key = None) -> list[Output]:
        """Count one assessment in its event's evidence and pass it on to its player with the event prior."""
        def step() -> list[Output]:
            state, msg = pool_event(events.get(ev.event), ev, self.config)
            events[ev.event] = state
            return [self._out(Output(msg.player_id, msg))]

        return self._guarded(step, ev, raw, source, key)

    def stranded(self, gid: str, state: GameState, why: str) -> list[Output]:
        """The dead letters of what the open game ``gid``, evicted (``why``), still waited with (:meth:`_waited`)."""
        return self._waited(gid, stranded(state), f"was evicted {why}", len(state.moves), gid)

    def sweep_events(self, events: StateMap, now: float | None = None) -> Swept:
        """Drop events with no counted move for ``config.idle_event_seconds`` (an event's evidence holds no input to
        dead-letter). O(events)."""
        now = time.time() if now is None else now
        scan = getattr(events, "scan", None)
        old = [k for k, st in (scan() if scan is not None else list(events.items()))
               if st.touched and now - st.touched > self.config.idle_event_seconds]
        for k in old:
            del events[k]
        return Swept(len(old))

    # -- player step --------------------------------------------------------------------------------------
    def player_record(self, players: StateMap, key: Key, raw: bytes | None, source: str) -> list[Output]:
        """One record of ``kibitz.assessments``: :meth:`player` on it, or its dead letter."""
        ev = self.parse_player(raw, source, key)
        return [ev] if isinstance(ev, Output) else self.player(players, ev, raw, source, key)

    def player(self, players: StateMap, ev: PlayerEvent, raw: bytes | str | None = None, source: str = "api",
               key: Key = None) -> list[Output]:
        """Apply one assessment or game result to its player: perceived ratings, Glicko-2 updates, alerts."""
        def step() -> list[Output]:
            state, msgs = apply_player_event(players.get(ev.player_id), ev, self.config)
            players[ev.player_id] = state
            return [self._out(Output(m.player_id, m)) for m in msgs]

        return self._guarded(step, ev, raw, source, key)

    # -- review step ----------------------------------------------------------------------------------------
    async def review_record(self, states: StateMap, key: Key, raw: bytes | None, source: str) -> list[Output]:
        """One record of ``kibitz.reviews``: :meth:`review` on it, or its dead letter."""
        try:
            req = parse_review_request(raw)
        except MalformedEvent as e:
            return [self.reject(MalformedEvent(f"not a review request: {e}"), raw, source, key)]
        return await self.review(states, req, raw, source, key)

    async def review(self, states: StateMap, req: ReviewRequest, raw: bytes | str | None = None, source: str = "api",
                     key: Key = None) -> list[Output]:
        """Review the request's games: the alert of stage "review" when it reaches the action tier and its crossing
        has none yet, else nothing (a crossing with a verdict is not searched again). A review the engines fail is
        the request's dead letter (its games kept there), counted as failed."""
        if self.reviewer is None:
            return [self.reject(UnsupportedGame("this runtime does not review (--review, with an engine pool)"),
                                _raw(raw, req), source, key)]
        try:
            state = states.get(req.player_id) or ReviewState(req.player_id)
        except CorruptState as e:
            return [self.reject(e, _raw(raw, req), source, key)]
        if req.crossing in state.verdicts:
            return []
        try:
            _, verdict = await self.reviewer.review(req)
        except (EngineError, InputError) as e:  # the engines failed, or a kept game does not replay (MalformedRecord)
            self.metrics.reviews.labels("failed").inc()
            return [self.reject(e, _raw(raw, req), source, key)]
        except Exception as e:  # noqa: BLE001
            self.metrics.reviews.labels("failed").inc()
            return self._internal(e, _raw(raw, req), source, key)
        self.metrics.reviews.labels("action" if verdict else "cleared").inc()
        if verdict is None:
            return []
        state.verdicts = (state.verdicts + [req.crossing])[-REVIEW_VERDICTS:]
        states[req.player_id] = state
        return [self._out(Output(req.player_id, verdict))]


def _raw(raw: bytes | str | None, ev: BaseModel) -> bytes | str:
    """The bytes a dead letter keeps: as received, or the event's JSON when it came as an object."""
    return raw if raw is not None else ev.model_dump_json()


#: How much of a damaged state's JSON the "corrupt state dropped" log line keeps.
DAMAGED_LOG_CHARS = 4000


class ObjectTable(MutableMapping[str, Any]):
    """A :class:`StateMap` of live state objects over a store of their ``to_dict()`` form (a faust table).

    A stored value that cannot be read back (damage: kibitz wrote it) raises :class:`CorruptState` for the record that
    needed it, which the steps dead-letter, and is dropped from the store with an error line that keeps the value:
    the key starts afresh, as the transactional worker's stores do (:mod:`.state_store`), so one damaged value costs
    one record, not every later record of its key."""

    def __init__(self, store: Any, cls: type[GameState] | type[PlayerState] | type[EventEvidence]) -> None:
        self.store, self.cls = store, cls

    def __getitem__(self, key: str) -> Any:
        d = self.store.get(key)
        if not d:
            raise KeyError(key)
        try:
            return from_stored(d, self.cls, key)
        except CorruptState as e:
            self._drop(key, d, e)
            raise

    def _drop(self, key: str, d: Any, e: CorruptState) -> None:
        log.error("corrupt state dropped", extra={"key": key, "error": str(e), "state": repr(d)[:DAMAGED_LOG_CHARS]})
        del self.store[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.store[key] = value.to_dict()

    def __delitem__(self, key: str) -> None:
        del self.store[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.store)

    def __len__(self) -> int:
        return len(self.store)
