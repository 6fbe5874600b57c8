"""The broadcast commands: ``kibitz follow`` (live PGN feeds into a runtime) and ``kibitz serve`` (the overlay and
API over the Kafka topics). Both only move events: :mod:`.follow` reads feeds, :mod:`.live` keeps what is shown,
:mod:`.web` serves it, and the ratings come from the same steps every runtime calls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from analyzers.engine import EnginePool
from analyzers.errors import ConfigurationError, InputError, MalformedEvent, StateStoreError
from schemas import DeadLetter, PerceivedRating, RatingUpdate, parse_event, parse_player_event

from .cli import print_rejection
from .follow import FeedEvent, Follower, PgnSource, PgnStream, open_source
from .live import LiveStore
from .web import Server, parse_hostport

log = logging.getLogger("kibitz.broadcast")


@contextlib.asynccontextmanager
async def serving(store: LiveStore, where: str | None) -> AsyncIterator[Server | None]:
    """The HTTP server on ``where`` (HOST:PORT) while the block runs; nothing when ``where`` is None."""
    if where is None:
        yield None
        return
    host, port = parse_hostport(where)
    async with Server(store, host, port) as server:
        print(f"kibitz: overlay and API on {server.url}/", file=sys.stderr, flush=True)
        yield server


async def follow(args: argparse.Namespace, config, out: Callable[[BaseModel], None], on_reject: Callable[[DeadLetter], None]) -> None:  # noqa: ANN001
    """Poll the sources and rate their games in the embedded runtime, or (``--produce``) feed the Kafka input topic."""
    from .embedded import EmbeddedRuntime

    if args.state is not None and not args.produce:
        raise ConfigurationError("--state keeps what a follow sent to Kafka: it needs --produce (the embedded runtime's "
                                 "ratings start afresh with the process, so its games are read again from their start)")
    if args.state is not None and not args.state.resolve().parent.is_dir():
        raise ConfigurationError(f"--state {args.state}: no folder {args.state.resolve().parent} to keep it in")
    sources = [open_source(s) for s in args.sources]
    store = LiveStore()
    if args.produce:
        await _follow_to_kafka(args, sources, store)
        return
    async with EnginePool(args.engine, size=args.engines, cache_path=args.cache, timeout=config.timeout) as pool:

        def sink(msg: BaseModel) -> None:
            store.apply(msg)
            out(msg)

        async with EmbeddedRuntime(pool, config, sink, on_reject) as rt, serving(store, args.serve):
            if args.metrics_port:
                rt.metrics.serve(args.metrics_port, args.metrics_host)

            def submit(ev: FeedEvent) -> None:
                store.apply(ev)  # the board and clock move at once; the ratings follow from the runtime
                rt.submit(ev, source=ev.game_id)

            def rejected(e: InputError) -> None:
                rt.reject(e, str(e), source=e.game_id or "feed")

            follower = Follower(sources, submit, interval=args.interval, on_error=rejected, on_gone=store.pause)
            await follower.run(until_ended=args.until_ended)
            await rt.drain()
            if args.serve and args.until_ended and args.linger:
                await asyncio.sleep(args.linger)


async def _follow_to_kafka(args: argparse.Namespace, sources: list[PgnSource | PgnStream], store: LiveStore) -> None:
    from .cli import kafka_settings
    from .input_producer import InputProducer
    from .kafka_config import input_records, rejection_record, wait_for_broker
    from .kafka_eos import ensure_topics

    settings = kafka_settings(args)
    await wait_for_broker(settings)
    # as kibitz configures them, not by a first send on a broker that creates topics
    await ensure_topics(settings, settings.topics.written_by_producers())
    async with InputProducer(settings) as producer:  # in order; a broker away is waited for; a refusal stops the follow

        def submit(ev: FeedEvent) -> None:
            for topic, key, value in input_records(settings.topics, ev):
                producer.submit(topic, key, value)

        def rejected(e: InputError) -> None:
            topic, key, d = rejection_record(settings.topics, e, source=e.game_id or "feed")
            print_rejection(d)
            producer.submit(topic, key, d.model_dump_json().encode())

        async def save() -> None:
            # every record submitted so far acknowledged (those submitted while waiting too), then the state, with no
            # await in between: what the file says was sent, the broker has
            await producer.acknowledged()
            write_follow_state(args.state, follower.state())

        follower = Follower(sources, submit, interval=args.interval, on_error=rejected, on_gone=store.pause)
        if args.state is not None and (saved := read_follow_state(args.state)) is not None:
            try:
                follower.restore(saved)
            except ValueError as e:
                raise StateStoreError(f"{args.state}: {e}: remove it to send every game of the feeds again") from None
            log.info("follow state taken up", extra={"file": str(args.state)})
        async with serving(store, args.serve) as server:
            reader = asyncio.create_task(read_outputs(settings, store)) if server else None
            try:
                await follower.run(until_ended=args.until_ended, after_poll=save if args.state is not None else None)
                await producer.acknowledged()
                if server and args.until_ended and args.linger:
                    await asyncio.sleep(args.linger)
            finally:
                if reader:
                    reader.cancel()
                    await asyncio.gather(reader, return_exceptions=True)


def read_follow_state(path: Path) -> dict[str, Any] | None:
    """A saved follow state (:meth:`~streamer.follow.Follower.state`), None if the file is not there yet."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StateStoreError(f"cannot read the follow state {path}: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise StateStoreError(f"{path} is not a follow state ({e}): remove it to send every game of the feeds again") from None
    return data if isinstance(data, dict) else {}


def write_follow_state(path: Path, state: dict[str, Any]) -> None:
    """Save a follow state whole or not at all (written beside, then renamed over the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, separators=(",", ":")))
    os.replace(tmp, path)


#: What ``kibitz serve`` reads, and how each topic's records parse.
def _parsers(topics) -> dict[str, Callable[[bytes], BaseModel]]:  # noqa: ANN001
    return {
        topics.games: parse_event,
        topics.assessments: parse_player_event,
        topics.perceived: PerceivedRating.model_validate_json,
        topics.glicko2: RatingUpdate.model_validate_json,
    }


async def read_outputs(settings, store: LiveStore) -> None:  # noqa: ANN001
    """Feed ``store`` from the game lifecycle, assessment and rating topics, from their oldest committed record."""
    from aiokafka import AIOKafkaConsumer

    from .kafka_config import ClientErrors, denied_as, wait_for_topics

    parsers = _parsers(settings.topics)
    await wait_for_topics(settings, list(parsers), who="serve")  # a mistyped --topic-prefix, or no worker run yet
    consumer = AIOKafkaConsumer(*parsers, group_id=None, isolation_level="read_committed", auto_offset_reset="earliest",
                                **settings.aiokafka_kwargs())

    async def read() -> None:
        # the lifecycle topic first: a game must be known before its ratings attach to it
        async for r in consumer:
            try:
                # the record's time (when the worker published it): a move's, from which the clock to move runs
                store.apply(parsers[r.topic](r.value), r.timestamp / 1000 if r.timestamp and r.timestamp > 0 else None)
            except (MalformedEvent, ValidationError, ValueError) as e:
                log.warning("unreadable record skipped", extra={"topic": r.topic, "offset": r.offset, "error": str(e)[:200]})

    await consumer.start()
    try:
        with ClientErrors() as errors, denied_as(settings, "reading the output topics (READ)"):
            # beside the reading, a refusal of the credentials while it runs (rotated, revoked): else the overlay stood still
            tasks = [asyncio.create_task(read()), asyncio.create_task(errors.watch(settings))]
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        # a consumer whose fetches the broker refuses: aiokafka's fetch task, cancelled by the stop, re-raises there
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await consumer.stop()


async def serve(args: argparse.Namespace) -> None:
    """``kibitz serve``: the overlay and API for whatever the workers publish."""
    from .cli import kafka_settings
    from .kafka_config import wait_for_broker

    settings = kafka_settings(args)
    await wait_for_broker(settings)
    store = LiveStore()
    async with serving(store, args.listen):
        await read_outputs(settings, store)
