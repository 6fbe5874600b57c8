"""The streaming runtime: the pipeline as faust-streaming agents on Kafka. The agents only move events.

- ``analyse`` consumes ``kibitz.moves`` (every game event, keyed by game_id: Kafka orders messages only within one
  partition of one topic, so a game's start, moves and end travel together). One actor per worker processes its
  partitions in order (faust's ``isolated_partitions`` loses partition 0 and crashes with several workers in
  faust-streaming 0.15), so a worker uses one engine at a time: scale out with one worker per core. It keeps :class:`~streamer.pipeline.GameState` in the ``games`` table and sends
  assessments and game results to ``kibitz.assessments``, keyed by player.
- ``rate`` consumes ``kibitz.assessments``, keeps :class:`~streamer.pipeline.PlayerState` in the ``players`` table and
  publishes perceived ratings, Glicko-2 updates and fair-play alerts.
- Anything rejected goes to ``kibitz.deadletter`` with the original bytes and the reason; the agent goes on.

``processing_guarantee=guarantee``: table changelogs, output records and input offsets commit in one Kafka
transaction. Tables live in memory (rebuilt from their changelogs on start) or in RocksDB (``--store rocksdb``,
with the ``rocksdict`` package).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import faust
import mode
from pydantic import BaseModel

from analyzers.engine import EnginePool
from analyzers.errors import EngineError, InputError, KibitzError, MalformedEvent
from schemas import GameEnded, GameResult, GameStarted, MoveAssessment, parse_event

from .embedded import dead_letter
from .kafka_config import KafkaSettings
from .metrics import Metrics
from .pipeline import (
    GameState, PipelineConfig, PlayerState, apply_move, apply_player_event, assess_move, end_game, start_game,
)

log = logging.getLogger("kibitz.kafka")
RAW = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


class PoolHolder:
    """The worker's one engine pool, shared by every partition's actor."""

    def __init__(self, engine: str | None, size: int, cache_path: Path | None) -> None:
        self.engine, self.size, self.cache_path = engine, size, cache_path
        self.pool: EnginePool | None = None
        self.ready = asyncio.Event()

    async def start(self) -> None:
        self.pool = EnginePool(self.engine, size=self.size, cache_path=self.cache_path)
        await self.pool.__aenter__()
        self.ready.set()

    async def get(self) -> EnginePool:
        await self.ready.wait()  # agents may see their first event before the service has started
        assert self.pool is not None
        return self.pool

    async def stop(self) -> None:
        if self.pool is not None:
            await self.pool.close()


def create_app(
    settings: KafkaSettings, config: PipelineConfig, *, engines: int = 2, engine: str | None = None,
    cache_path: Path | None = None, store: str = "memory", guarantee: str = "at_least_once",
) -> faust.App:
    app = faust.App(
        settings.app_id, broker=f"kafka://{settings.broker}", broker_credentials=settings.faust_credentials(),
        processing_guarantee=guarantee, store="rocksdb://" if store == "rocksdb" else "memory://",
        topic_partitions=settings.partitions, web_enabled=False, producer_acks=-1,
        consumer_auto_offset_reset="earliest", autodiscover=False, table_cleanup_interval=3600.0,
    )
    t = settings.topics
    moves_topic = app.topic(t.moves, **RAW)
    assessments_topic = app.topic(t.assessments, **RAW)
    perceived_topic = app.topic(t.perceived, **RAW)
    glicko_topic = app.topic(t.glicko2, **RAW)
    alerts_topic = app.topic(t.alerts, **RAW)
    dead_topic = app.topic(t.deadletter, **RAW)
    games = app.Table("games", default=None, partitions=settings.partitions, key_type=str)
    players = app.Table("players", default=None, partitions=settings.partitions, key_type=str)
    holder = PoolHolder(engine, engines, cache_path)
    metrics = Metrics(lambda: holder.pool)
    outputs = {"perceived": perceived_topic, "glicko2": glicko_topic, "fairplay": alerts_topic}

    class Engines(mode.Service):
        async def on_start(self) -> None:
            await holder.start()

        async def on_stop(self) -> None:
            await holder.stop()

    app.service(Engines)

    async def send(topic: faust.TopicT, key: str | bytes | None, msg: BaseModel) -> None:
        # buffered: faust flushes the producer before it commits input offsets, so at-least-once holds, and a move
        # does not wait for 3-4 broker round trips (topic.send waits for each ack: 365 -> see README)
        metrics.outputs.labels(getattr(msg, "type", "?")).inc()
        topic.send_soon(key=key.encode() if isinstance(key, str) else key, value=msg.model_dump_json().encode())

    async def reject(error: KibitzError, key: bytes | None, raw: bytes, source: str) -> None:
        metrics.rejected.labels(getattr(error, "reason", "error")).inc()
        log.warning("rejected", extra={"reason": getattr(error, "reason", "error"), "error": str(error), "source": source})
        await send(dead_topic, key, dead_letter(error, raw, source=source, key=key.decode("utf-8", "replace") if key else None))

    async def game_step(key: bytes | None, raw: bytes, source: str) -> None:
        try:
            ev = parse_event(raw)
        except InputError as e:
            await reject(e, key, raw, source)
            return
        pool = await holder.get()
        metrics.events.labels(ev.type).inc()
        gid = ev.game_id
        stored = games.get(gid)
        state = GameState.from_dict(stored) if stored else None
        emitted: list[tuple[str, BaseModel]] = []
        try:
            if isinstance(ev, GameStarted):
                state = start_game(state, ev, pool.prefetch, config)
            elif isinstance(ev, GameEnded):
                emitted += [(r.player_id, r) for r in end_game(state, ev)]
            else:
                applied = apply_move(state, ev)
                state = applied.state
                try:
                    a = await assess_move(applied, pool.analyse_limits, config)
                    emitted.append((a.player_id, a))
                except EngineError as e:
                    await reject(e, key, raw, source)  # the move is applied; only its assessment is lost
                emitted += [(r.player_id, r) for r in applied.results]
        except InputError as e:
            await reject(e, key, raw, source)
            return
        if state is not None:
            if state.ended:
                games.pop(gid, None)
            else:
                games[gid] = state.to_dict()
        for player_id, msg in emitted:
            await send(assessments_topic, player_id, msg)

    async def player_step(key: bytes | None, raw: bytes, source: str) -> None:
        try:
            data = json.loads(raw)
            ev = (MoveAssessment if data.get("type") == "assessment" else GameResult).model_validate(data)
        except Exception as e:  # noqa: BLE001 - our own topic, but never let one record stop the agent
            await reject(MalformedEvent(f"not an assessment or game result: {e}"), key, raw, source)
            return
        stored = players.get(ev.player_id)
        state, out = apply_player_event(PlayerState.from_dict(stored) if stored else None, ev, config)
        players[ev.player_id] = state.to_dict()
        for msg in out:
            await send(outputs[msg.type], msg.player_id, msg)

    def where(event: Any) -> str:
        m = event.message
        return f"{m.topic}/{m.partition}@{m.offset}"

    @app.agent(moves_topic)
    async def analyse(stream):  # noqa: ANN001
        async for event in stream.events():
            await guarded(game_step, event)

    @app.agent(assessments_topic)
    async def rate(stream):  # noqa: ANN001
        async for event in stream.events():
            await guarded(player_step, event)

    async def guarded(step, event) -> None:  # noqa: ANN001
        try:
            await step(event.key, event.value, where(event))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a bug must not stop the partition: dead-letter and go on
            log.exception("unexpected error", extra={"source": where(event)})
            await reject(KibitzError(f"internal error: {e!r}"), event.key, event.value, where(event))

    app.kibitz_holder = holder  # for tests
    app.kibitz_metrics = metrics
    return app


async def ensure_topics(settings: KafkaSettings) -> None:
    """Create kibitz's topics with ``settings.partitions`` partitions if they do not exist."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [NewTopic(n, settings.partitions, 1) for n in settings.topics.all() if n not in existing]
        if new:
            await admin.create_topics(new)
    finally:
        await admin.close()
