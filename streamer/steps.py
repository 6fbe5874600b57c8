"""The two steps of the Kafka runtimes, on raw records: one input record in, the messages it causes out.

Both Kafka runtimes (the transactional one in :mod:`streamer.kafka_eos` and the faust app in
:mod:`streamer.kafka_app`) call these and differ only in how they store state and publish. A step never raises for
bad input: what it rejects comes back as a ``deadletter`` output with the original bytes and the reason.

Outputs are ``(name, key, message)`` where ``name`` is one of :data:`OUTPUTS`, the runtime's topic for it.
State lives in any mutable mapping from key to the live state object (:class:`~streamer.pipeline.GameState`,
:class:`~streamer.pipeline.PlayerState`); a step stores a key's state back after changing it, so a store that
serialises (a faust table through :class:`ObjectTable`, a changelog) sees every change.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, MutableMapping
from typing import Any

from pydantic import BaseModel

from analyzers.engine import EnginePool
from analyzers.errors import EngineError, InputError, KibitzError, MalformedEvent
from schemas import GameEnded, GameStarted, parse_event, parse_player_event

from .embedded import dead_letter
from .metrics import Metrics
from .pipeline import (
    GameState, PipelineConfig, apply_move, apply_player_event, assess_move, end_game, start_game,
)

log = logging.getLogger("kibitz.steps")
Output = tuple[str, "str | bytes | None", BaseModel]
#: Output names: ``assessments`` (the game step's, keyed by player) and the rating step's, by message type.
OUTPUTS = ("assessments", "perceived", "glicko2", "fairplay", "deadletter")


def reject(error: KibitzError, key: bytes | None, raw: bytes, source: str, metrics: Metrics | None) -> Output:
    reason = getattr(error, "reason", "error")
    if metrics is not None:
        metrics.rejected.labels(reason).inc()
    log.warning("rejected", extra={"reason": reason, "error": str(error), "source": source})
    return "deadletter", key, dead_letter(error, raw, source=source, key=key.decode("utf-8", "replace") if key else None)


async def game_step(games: MutableMapping[str, Any], pool: EnginePool, config: PipelineConfig, key: bytes | None,
                    raw: bytes, source: str, metrics: Metrics | None = None) -> list[Output]:
    """One record of ``kibitz.moves`` (a game start, move or end): update the game's state, return assessments and
    game results (to ``assessments``, keyed by player) or the dead letter. An ended game's state is deleted."""
    try:
        ev = parse_event(raw)
    except InputError as e:
        return [reject(e, key, raw, source, metrics)]
    if metrics is not None:
        metrics.events.labels(ev.type).inc()
    gid = ev.game_id
    state: GameState | None = games.get(gid)
    out: list[Output] = []
    try:
        if isinstance(ev, GameStarted):
            state = start_game(state, ev, pool.prefetch, config)
        elif isinstance(ev, GameEnded):
            out += [("assessments", r.player_id, r) for r in end_game(state, ev)]
        else:
            applied = apply_move(state, ev)
            state = applied.state
            try:
                a = await assess_move(applied, pool.analyse_limits, config)
                out.append(("assessments", a.player_id, a))
            except EngineError as e:
                out.append(reject(e, key, raw, source, metrics))  # the move is applied; only its assessment is lost
            out += [("assessments", r.player_id, r) for r in applied.results]
    except InputError as e:
        return [reject(e, key, raw, source, metrics)]
    if state is not None:
        if state.ended:
            games.pop(gid, None)
        else:
            games[gid] = state
    return out


def player_step(players: MutableMapping[str, Any], config: PipelineConfig, key: bytes | None, raw: bytes, source: str,
                metrics: Metrics | None = None) -> list[Output]:
    """One record of ``kibitz.assessments``: update the player's state, return perceived ratings, Glicko-2 updates
    and fair-play alerts (keyed by player), or the dead letter."""
    try:
        ev = parse_player_event(raw)
    except MalformedEvent as e:  # our own topic, but never let one record stop the stage
        return [reject(MalformedEvent(f"not an assessment or game result: {e}"), key, raw, source, metrics)]
    state, msgs = apply_player_event(players.get(ev.player_id), ev, config)
    players[ev.player_id] = state
    return [(m.type, m.player_id, m) for m in msgs]


class ObjectTable:
    """A mapping of live state objects over a store of their ``to_dict()`` form (a faust table)."""

    def __init__(self, store: MutableMapping[str, Any], cls: type) -> None:
        self.store, self.cls = store, cls

    def get(self, key: str) -> Any:
        d = self.store.get(key)
        return self.cls.from_dict(d) if d else None

    def __setitem__(self, key: str, value: Any) -> None:
        self.store[key] = value.to_dict()

    def pop(self, key: str, default: Any = None) -> Any:
        return self.store.pop(key, default)


async def guarded(step: Callable[..., Any], key: bytes | None, raw: bytes, source: str, metrics: Metrics | None) -> list[Output]:
    """Run a step; a bug in it dead-letters the record (reason ``error``) instead of stopping the partition."""
    try:
        out = step(key, raw, source)
        return await out if inspect.isawaitable(out) else out
    except Exception as e:  # noqa: BLE001
        log.exception("unexpected error", extra={"source": source})
        return [reject(KibitzError(f"internal error: {e!r}"), key, raw, source, metrics)]
