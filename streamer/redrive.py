"""Re-drive dead letters: send the record each chosen dead letter holds back to the topic it came from, once.

A dead letter (:class:`~schemas.DeadLetter`) keeps the record a step rejected: its bytes, its key and where a worker
read it (``source``, ``topic/partition@offset``). Some rejections are the record's own (a move that is illegal, JSON
that does not parse): sent again, the same bytes are rejected again. Others are the deployment's, and once it is
mended the record can be processed: an output the broker refused (``poison``: a record or topic size limit), a step's
bug (``error``) fixed by an upgrade, Go events at a worker started without ``--go`` (``unsupported_game``, and the
moves of those games, ``unknown_game``). Which reasons may be re-driven, and why the others may not, is
:data:`REDRIVABLE` and :data:`NOT_REDRIVABLE`.

:func:`plan` decides for one dead letter (pure: no I/O); :func:`redrive` is the Kafka shell. Each reason has its own
cursor over the dead-letter topic, a consumer group ``APP.redrive.REASON``: each run re-drives the dead letters of
that reason written since the last run's, and the records it sends and the cursor's move are one Kafka transaction
(transactional id ``APP.redrive.REASON``), so a run stopped anywhere and started again sends each record once. The
reasons run one after another in the order given, each in the order its dead letters were written (README, "Dead
letters and re-driving them").
"""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from analyzers.errors import DeliveryFailed
from schemas import DeadLetter

from .kafka_config import KafkaSettings, Topics, denied_as, seek_committed, stage_topics, wait_for_broker, wait_for_topics
from .pipeline import REORDER_PLIES
from .steps import MAX_DEAD_LETTER_KEY

log = logging.getLogger(__name__)

#: the reasons whose records can be processed once the deployment is mended, and what to mend first
REDRIVABLE: dict[str, str] = {
    "poison": "the broker refused the record's outputs (a record or topic size limit; its transaction aborted three "
              "times): the record was not applied. Raise the limit first",
    "error": "a step failed on it (a bug; the log has the traceback): re-drive after the upgrade that fixes it. What "
             "the step had changed in its state before it failed stays: a record the state already counts is skipped",
    "unsupported_game": "a Go event at a worker started without --go: re-drive once it runs with --go (with "
                        "unknown_game after it, for the moves of those games)",
    "unknown_game": "a move of a game the worker did not know (its start dead-lettered, e.g. unsupported_game): "
                    "re-drive after the start; a move of a game that never started is rejected again",
    "corrupt_state": "the stored state it read was damaged and has been dropped: the record applies to a fresh state",
    "engine_timeout": "a review's searches timed out (review requests only: a move's position was already played on)",
    "engine_crashed": "a review's engine crashed (review requests only, likewise)",
    "engine_error": "a review's engine failed (review requests only, likewise)",
    "pool_closed": "a review found its engines shut down (review requests only, likewise)",
}

#: the reasons whose records would be rejected again as they are, and why
NOT_REDRIVABLE: dict[str, str] = {
    "malformed": "the bytes are not a valid event: the same bytes fail again",
    "invalid_input": "the event is invalid: the same event fails again",
    "key_mismatch": "the record's key is not its game's id: sent again under the same key it fails again",
    "illegal_move": "the move is illegal in its game: it stays illegal",
    "duplicate_ply": "the ply was already applied",
    "out_of_order_ply": f"it came more than {REORDER_PLIES} plies ahead of its game (which went on without it, the moves "
                        "after it waiting for it at most that far), or its game ended or was evicted while it (or "
                        "the game's end) waited",
    "duplicate_game": "the game id was already used",
    "malformed_record": "a kept game in it does not replay: it fails again",
    "truncated": "a producer's: the games file ended in the middle of the game; sent again it is the same part game",
    "limits_mismatch": "its game went on without it (the later moves of a mismatched deployment are dead-lettered "
                       "alike, the result rated), and a player's moves count once, in order: sent again after them it "
                       "would not be counted. Start every stage with the same --profile; those moves stay unrated",
}

#: engine failures are re-drivable only for review requests: a move's game has been played on in the game's state
ENGINE_REASONS = frozenset({"engine_timeout", "engine_crashed", "engine_error", "pool_closed"})

#: seconds a pass waits for the records below the end it set out for (read_committed: an open transaction holds them)
STALL_SECONDS = 60.0

_SOURCE = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)/(?P<partition>\d+)@(?P<offset>\d+)$")


@dataclass(frozen=True)
class Resend:
    """A record to send again: where, under which key, which bytes."""

    topic: str
    key: bytes | None
    value: bytes


def reason_option(text: str) -> str:
    """``--reason``: a re-drivable reason, or a usage error saying why it is not (argparse's ``type=``)."""
    import argparse

    if text in REDRIVABLE:
        return text
    if text in NOT_REDRIVABLE:
        raise argparse.ArgumentTypeError(f"{text} dead letters are not re-driven: {NOT_REDRIVABLE[text]}")
    raise argparse.ArgumentTypeError(f"not a dead-letter reason: {text!r} (re-drivable: {', '.join(REDRIVABLE)})")


def plan(dl: DeadLetter, topics: Topics) -> Resend | str:
    """The record ``dl`` holds, to be sent back where a worker read it, or why it cannot be (a short phrase: the
    report counts dead letters by it). Only the stages' inputs of this deployment are written to."""
    m = _SOURCE.match(dl.source)
    if m is None:
        return "not read from a Kafka topic"  # a producer's rejection of a file or feed (README, Broadcast)
    topic = m["topic"]
    if topic not in {source for source, _ in stage_topics(topics).values()}:
        return "from a topic that is not a stage's input here"
    if dl.reason in ENGINE_REASONS and topic != topics.reviews:
        return "a move whose game has been played on (only its assessment was lost)"
    if dl.raw_size is not None:
        return "only the start of the record was kept"
    if dl.key is not None and len(dl.key) > MAX_DEAD_LETTER_KEY:  # dead_letter() keeps a long key's start, says its length
        return "only the start of the record's key was kept"
    value = base64.b64decode(dl.raw_base64) if dl.raw_base64 is not None else dl.raw.encode("utf-8")
    return Resend(topic, None if dl.key is None else dl.key.encode("utf-8"), value)


@dataclass
class PassReport:
    """One reason's run over the dead-letter topic."""

    reason: str
    read: int = 0  # dead letters of this reason
    sent: Counter[str] = field(default_factory=Counter)  # by topic
    skipped: Counter[str] = field(default_factory=Counter)  # by why

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "read": self.read, "sent": dict(self.sent), "skipped": dict(self.skipped)}


def group_id(settings: KafkaSettings, reason: str) -> str:
    """The consumer group (and transactional id) of ``reason``'s cursor over the dead-letter topic."""
    return f"{settings.app_id}.redrive.{reason}"


async def redrive(settings: KafkaSettings, reasons: Sequence[str], *, dry_run: bool = False,
                  wait: float = 10.0) -> list[PassReport]:
    """Re-drive the dead letters of each of ``reasons`` written since its last run (from the topic's start the first
    time), up to the end the topic had when its pass began. ``dry_run``: count, send nothing, move no cursor. Returns a
    report per reason. Waits for the broker as every client does; a dead-letter topic not there after ``wait`` seconds
    (no worker has run) gives empty reports."""
    await wait_for_broker(settings)
    if not await wait_for_topics(settings, [settings.topics.deadletter], who="redrive", timeout=wait):
        print(f"kibitz redrive: {settings.topics.deadletter} is not on the broker after {wait:g} s: no dead letter to "
              f"re-drive (is --topic-prefix {settings.topics.prefix!r} the deployment's?)", file=sys.stderr, flush=True)
        return [PassReport(r) for r in reasons]
    return [await _pass(settings, reason, dry_run) for reason in reasons]


async def _pass(settings: KafkaSettings, reason: str, dry_run: bool) -> PassReport:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic, group = settings.topics.deadletter, group_id(settings, reason)
    report = PassReport(reason)
    # "earliest" as the default too, not only in seek_committed: see its docstring (a partition started at its end)
    consumer = AIOKafkaConsumer(group_id=group, enable_auto_commit=False, isolation_level="read_committed",
                                auto_offset_reset="earliest", **settings.aiokafka_kwargs())
    producer = None if dry_run else AIOKafkaProducer(transactional_id=group, client_id=f"kibitz-{group}", acks="all",
                                                       **settings.aiokafka_kwargs())
    await consumer.start()
    try:
        if producer is not None:
            with denied_as(settings, f"the transactional id {group!r} (WRITE, DESCRIBE)"):
                await producer.start()
        parts = [TopicPartition(topic, p) for p in range(await _partition_count(settings, topic))]
        consumer.assign(parts)
        with denied_as(settings, f"the consumer group {group!r} (READ) or {topic} (READ, DESCRIBE)"):
            ends = await consumer.end_offsets(parts)
            await seek_committed(consumer, parts)
        start = {tp: await consumer.position(tp) for tp in parts}
        todo = {tp for tp in parts if start[tp] < ends[tp]}
        last_offset: dict[Any, int] = {}
        last_record = time.monotonic()
        while todo:
            with denied_as(settings, f"reading {topic} (READ)"):
                batch = await consumer.getmany(*todo, timeout_ms=500)
            for tp, records in batch.items():
                if records:
                    last_record = time.monotonic()
                    last_offset[tp] = records[-1].offset
                    await _send(settings, producer, group, tp, records, report)
            for tp in list(todo):
                # a transaction's commit marker takes an offset and is never a record: the position passes it
                if (position := await consumer.position(tp)) >= ends[tp]:
                    todo.discard(tp)
                    log.info("dead-letter partition passed", extra={
                        "reason": reason, "partition": tp.partition, "from_offset": start[tp], "end_offset": ends[tp],
                        "position": position, "last_record_offset": last_offset.get(tp)})
            if todo and time.monotonic() - last_record > STALL_SECONDS:
                raise TimeoutError(f"{topic}: nothing read for {STALL_SECONDS:g} s below the end it had at the start "
                                   f"({ {tp.partition: ends[tp] for tp in todo} }): an open transaction holds those "
                                   f"records back (a worker that stopped mid-transaction: the broker aborts it after "
                                   f"the worker's --transaction-timeout). Run again later")
    finally:
        await consumer.stop()
        if producer is not None:
            await producer.stop()
    return report


async def _partition_count(settings: KafkaSettings, topic: str) -> int:
    """``topic``'s partitions, as the broker describes them (a consumer that subscribes to nothing has no metadata)."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs())
    try:
        await admin.start()
        with denied_as(settings, f"describing {topic} (DESCRIBE)"):
            (described,) = await admin.describe_topics([topic])
    finally:
        await admin.close()
    return len(described["partitions"])


async def _send(settings: KafkaSettings, producer: Any, group: str, tp: Any, records: list[Any], report: PassReport) -> None:
    """One fetched run of ``tp``'s records: the chosen ones sent and the cursor moved past them, in one transaction."""
    resends: list[tuple[Resend, str]] = []
    for rec in records:
        try:
            dl = DeadLetter.model_validate_json(rec.value or b"")
        except ValidationError:
            continue  # not a dead letter: nothing of any reason
        if dl.reason != report.reason:
            continue
        report.read += 1
        choice = plan(dl, settings.topics)
        if isinstance(choice, str):
            report.skipped[choice] += 1
            log.info("dead letter not re-driven", extra={"reason": dl.reason, "source": dl.source, "why": choice,
                                                         "game_id": dl.game_id, "ply": dl.ply})
            continue
        resends.append((choice, dl.source))
    if producer is not None:  # not a dry run
        await _commit(settings, producer, group, tp, records[-1].offset + 1, [r for r, _ in resends], report.reason)
    for r, source in resends:
        report.sent[r.topic] += 1
        if producer is not None:
            log.info("dead letter re-driven", extra={"reason": report.reason, "source": source, "topic": r.topic})


async def _commit(settings: KafkaSettings, producer: Any, group: str, tp: Any, offset: int, resends: list[Resend],
                  reason: str) -> None:
    """Send ``resends`` and move the cursor of ``tp`` to ``offset``, in one transaction."""
    from aiokafka.errors import KafkaError, ProducerFenced

    written = ", ".join(sorted({r.topic for r in resends})) or "no topic"
    try:
        with denied_as(settings, f"the transactional id {group!r}, the consumer group {group!r} or WRITE on {written}"):
            async with producer.transaction():
                futures = [await producer.send(r.topic, r.value, key=r.key) for r in resends]
                # every record acknowledged before the cursor moves: one the broker refuses raises here, and the
                # transaction aborts (committed, it would move the cursor past a record that was never written)
                await asyncio.gather(*futures)
                await producer.send_offsets_to_transaction({tp: offset}, group)
    except ProducerFenced:
        raise DeliveryFailed(f"another `kibitz redrive --reason {reason}` of app {settings.app_id!r} started while "
                             f"this one ran (the transactional id {group!r}) and goes on from the cursor: this one "
                             f"stopped, its last transaction aborted, nothing of it sent") from None
    except KafkaError as e:  # a record the broker refuses (a topic's limit lowered since), or a broker gone too long
        raise DeliveryFailed(f"the Kafka broker did not take a re-driven record ({written}): {e!r}. Nothing of that "
                             f"transaction was sent and the cursor stays before it: run again once it is mended") from None
