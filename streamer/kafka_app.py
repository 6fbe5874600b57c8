"""The streaming runtime: the pipeline as faust-streaming agents on Kafka. The agents only move events.

- ``analyse`` consumes ``kibitz.moves`` (every game event, keyed by game_id: Kafka orders messages only within one
  partition of one topic, so a game's start, moves and end travel together). One actor per worker processes its
  partitions in order (faust's ``isolated_partitions`` loses partition 0 and crashes with several workers in
  faust-streaming 0.15), so a worker uses one engine at a time: scale out with one worker per core. It keeps
  :class:`~streamer.pipeline.GameState` in the ``games`` table and sends
  assessments and game results to ``kibitz.assessments``, keyed by player.
- ``pool`` consumes ``kibitz.assessments.events`` (a game in an event, with event pooling), keeps
  :class:`~analyzers.eventpool.EventEvidence` in the ``events`` table and sends each record on to
  ``kibitz.assessments`` with the player's event prior.
- ``rate`` consumes ``kibitz.assessments``, keeps :class:`~streamer.pipeline.PlayerState` in the ``players`` table and
  publishes perceived ratings, Glicko-2 updates and fair-play alerts.
- Anything rejected goes to ``kibitz.deadletter`` with the original bytes and the reason; the agent goes on.

``processing_guarantee=guarantee``: table changelogs, output records and input offsets commit in one Kafka
transaction. Tables live in memory (rebuilt from their changelogs on start) or in RocksDB (``--store rocksdb``,
with the ``rocksdict`` package).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import faust
import mode

from analyzers.engine import EnginePool
from analyzers.engine.pool import DEFAULT_TIMEOUT

from .kafka_config import KafkaSettings
from .metrics import BEAT_SECONDS, Metrics
from .pipeline import EventEvidence, GameState, PipelineConfig, PlayerState
from .steps import ObjectTable, Output, Route, Steps

RAW: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}


class PoolHolder:
    """The worker's one engine pool, shared by every partition's actor."""

    def __init__(self, engine: str | None, size: int, cache_path: Path | None, timeout: float | None = None) -> None:
        self.engine, self.size, self.cache_path, self.timeout = engine, size, cache_path, timeout
        self.pool: EnginePool | None = None
        self.ready = asyncio.Event()

    async def start(self) -> None:
        self.pool = EnginePool(self.engine, size=self.size, cache_path=self.cache_path, timeout=self.timeout or DEFAULT_TIMEOUT)
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
    data_dir: Path | None = None,
) -> tuple[faust.App, Metrics]:
    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)  # faust creates only the last level
    extra: dict[str, Any] = {"datadir": str(data_dir)} if data_dir else {}
    app = faust.App(
        settings.app_id, broker=[f"kafka://{b}" for b in settings.broker.split(",")],
        broker_credentials=settings.faust_credentials(), topic_replication_factor=settings.replication_factor,
        processing_guarantee=guarantee, store="rocksdb://" if store == "rocksdb" else "memory://",
        topic_partitions=settings.partitions, web_enabled=False, producer_acks=-1,
        consumer_auto_offset_reset="earliest", autodiscover=False, table_cleanup_interval=3600.0,
        **extra,
    )
    t = settings.topics
    moves_topic = app.topic(t.moves, **RAW)
    assessments_topic = app.topic(t.assessments, **RAW)
    pool_topic = app.topic(t.pool, **RAW)
    outputs = {name: app.topic(name, **RAW) for name in {t.for_route(r) for r in Route} - {t.assessments, t.pool}}
    outputs[t.assessments] = assessments_topic  # the game and pool steps' output is the rate agent's input
    outputs[t.pool] = pool_topic
    games = app.Table("games", default=None, partitions=settings.partitions, key_type=str)
    players = app.Table("players", default=None, partitions=settings.partitions, key_type=str)
    events = app.Table("events", default=None, partitions=settings.partitions, key_type=str)
    game_states, player_states = ObjectTable(games, GameState), ObjectTable(players, PlayerState)
    event_states = ObjectTable(events, EventEvidence)
    holder = PoolHolder(engine, engines, cache_path, config.timeout)
    steps = Steps(config, None)  # the pool is set once the Engines service has started it

    class Engines(mode.Service):
        async def on_start(self) -> None:
            await holder.start()

        async def on_stop(self) -> None:
            await holder.stop()

    app.service(Engines)

    def publish(outs: list[Output]) -> None:
        # buffered: faust flushes the producer before it commits input offsets, so at-least-once holds, and a move
        # does not wait for 3-4 broker round trips (topic.send waits for each ack)
        for o in outs:
            outputs[t.for_route(o.route)].send_soon(key=o.key_bytes, value=o.message.model_dump_json().encode())

    def where(event: Any) -> str:
        m = event.message
        return f"{m.topic}/{m.partition}@{m.offset}"

    @app.timer(BEAT_SECONDS)
    async def heartbeat() -> None:  # /healthz of the metrics server: the loop is live while this runs
        steps.metrics.health.beat()

    @app.agent(moves_topic)
    async def analyse(stream):  # noqa: ANN001
        steps.pool = await holder.get()
        async for event in stream.events():
            publish(await steps.game_record(game_states, event.key, event.value, where(event)))

    @app.agent(pool_topic)
    async def pool(stream):  # noqa: ANN001
        async for event in stream.events():
            publish(steps.pool_record(event_states, event.key, event.value, where(event)))

    @app.agent(assessments_topic)
    async def rate(stream):  # noqa: ANN001
        async for event in stream.events():
            publish(steps.player_record(player_states, event.key, event.value, where(event)))

    return app, steps.metrics
