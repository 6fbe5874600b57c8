"""The producers of the input topics (``kibitz produce``, ``kibitz follow --produce``): every record reaches the
broker, in the order it was sent, however long the broker is away.

aiokafka's producer gives up on a broker that is away longer than its request timeout (40 s): a ``send`` waiting for
room in a full batch raises ``KafkaTimeoutError``, and a batch waiting that long for a partition leader is failed.
A broker restarted for a minute (an upgrade, a reboot) so ended ``kibitz produce`` with a traceback, the records after
it unsent, and a follow's state could record as sent what the broker never had. :class:`InputProducer` keeps the
records in its own queue and hands them to aiokafka one at a time, in order, from one task: a send that times out is
tried again (the record was not taken, so the order holds), with one log line when the broker stops taking records and
one when it takes them again; its batches are kept until the broker has them (the idempotent producer's retries add
no duplicate). :meth:`InputProducer.acknowledged` waits until the broker has every record sent so far: what a saved
follow state says was sent, the broker has. A record the broker refuses (an authorization error) stops the producer
with :class:`~analyzers.errors.DeliveryFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import deque
from typing import Any

from analyzers.errors import DeliveryFailed

from .kafka_config import ClientErrors, KafkaSettings, denied_as, not_authorized

log = logging.getLogger("kibitz.produce")

#: Records queued ahead of the broker before :meth:`InputProducer.send` waits (a backfill's memory stays bounded).
QUEUE_LIMIT = 10_000
#: Seconds a producer leaving on an error (Ctrl-C, a refused record) waits for the broker to take what it holds.
STOP_TIMEOUT = 10.0
#: Seconds between two looks, while records wait for the broker, at whether it has refused this client meanwhile.
REFUSAL_CHECK_SECONDS = 1.0


class InputProducer:
    """An idempotent producer of input records that waits for the broker rather than dropping records (see the
    module docstring). Use as ``async with InputProducer(settings) as out``: :meth:`submit` (from synchronous code) or
    :meth:`send` (waits while the queue is full), then :meth:`acknowledged`; leaving the block waits for the broker to
    have every record."""

    def __init__(self, settings: KafkaSettings, *, queue_limit: int = QUEUE_LIMIT) -> None:
        from aiokafka import AIOKafkaProducer

        self.settings = settings
        self.queue_limit = queue_limit
        self._producer = AIOKafkaProducer(enable_idempotence=True, acks="all", linger_ms=5, **settings.aiokafka_kwargs())
        self._queue: deque[tuple[str, bytes | None, bytes]] = deque()
        self._delivering: deque[asyncio.Future[Any]] = deque()  # handed to aiokafka, not yet acknowledged
        self._changed = asyncio.Event()  # a record queued, handed over or acknowledged
        self._failure: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._errors = ClientErrors()  # a refusal of the credentials while it runs (rotated, revoked)

    async def __aenter__(self) -> InputProducer:
        self._errors.__enter__()
        try:
            # an idempotent producer's id needs WRITE on some topic (Kafka 3.0+): a user granted none is told so
            with denied_as(self.settings, "a producer id (WRITE on the input topics)"):
                await self._producer.start()
        except Exception:
            with contextlib.suppress(Exception):  # it never started: nothing to flush
                await self._producer.stop()
            self._errors.__exit__()
            raise
        self._keep_batches()
        self._task = asyncio.create_task(self._hand_over())
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        delivered = False
        try:
            if kind is None:
                await self.acknowledged()
                delivered = True
        finally:
            if self._task is not None:
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            try:
                # aiokafka's stop waits until its batches are delivered, which a broker that is away never lets happen
                # now: leaving before the broker has everything (Ctrl-C, a refusal) waits a while, not for ever
                await asyncio.wait_for(self._producer.stop(), None if delivered else STOP_TIMEOUT)
            except TimeoutError:
                log.warning("stopped with records the broker has not acknowledged", extra={
                    "broker": self.settings.broker, "records": len(self._queue) + len(self._delivering)})
            finally:
                self._errors.__exit__()

    def _keep_batches(self) -> None:
        # aiokafka fails a batch that waited its request timeout for a partition leader (MessageAccumulator's batch
        # time to live, no setting of its own); an idempotent producer may keep it until the broker is back
        acc = getattr(self._producer, "_message_accumulator", None)
        if acc is not None and hasattr(acc, "_batch_ttl"):
            acc._batch_ttl = math.inf
        else:
            log.warning("this aiokafka keeps batches its own way: records waiting over 40 s for a broker may fail")

    def submit(self, topic: str, key: bytes | None, value: bytes) -> None:
        """Queue a record (from synchronous code); raises DeliveryFailed once the broker has refused one."""
        self._raise_failure()
        self._queue.append((topic, key, value))
        self._changed.set()

    async def send(self, topic: str, key: bytes | None, value: bytes) -> None:
        """Queue a record, first waiting while :data:`QUEUE_LIMIT` records wait for the broker."""
        while len(self._queue) >= self.queue_limit:
            await self._wait_change()
        self.submit(topic, key, value)

    async def acknowledged(self) -> None:
        """Return once the broker has every record queued so far (records queued meanwhile too); raises
        DeliveryFailed if it refused one."""
        while self._queue or self._delivering:
            await self._wait_change()
        self._raise_failure()

    async def _wait_change(self) -> None:
        self._raise_failure()
        self._changed.clear()
        # back to the caller's loop at a change or after a second at most, to see whether the broker has refused this
        # client (not a loop on the event here: the hand-over task clears it too)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), REFUSAL_CHECK_SECONDS)
        self._raise_failure()

    def _raise_failure(self) -> None:
        self._errors.check(self.settings)  # credentials rotated or revoked: else records waited for ever
        if self._failure is not None:
            denied = not_authorized(self.settings, self._failure, "writing the inputs (WRITE)")
            if denied is not None:  # an ACL missing: a usage error naming what to grant, as the worker's
                raise denied from None
            raise DeliveryFailed(f"the Kafka broker refused a record: {self._failure!r}") from self._failure

    async def _hand_over(self) -> None:
        """The one task that hands the queued records to aiokafka, in order."""
        from aiokafka.errors import KafkaTimeoutError

        waiting_since: float | None = None
        while True:
            if not self._queue:
                self._changed.clear()
                await self._changed.wait()
                continue
            topic, key, value = self._queue[0]
            try:
                delivery = await self._producer.send(topic, value, key=key)
            except KafkaTimeoutError:  # no room for the request timeout: the broker takes nothing; the record stays first
                if waiting_since is None:
                    waiting_since = time.monotonic()
                    log.warning("the Kafka broker takes no records: waiting for it, the records kept in order",
                                extra={"broker": self.settings.broker, "queued": len(self._queue)})
                continue
            except Exception as e:  # noqa: BLE001 - a record aiokafka refuses outright: the producer stops with it
                self._fail(e)
                return
            if waiting_since is not None:
                log.warning("the Kafka broker takes records again", extra={
                    "broker": self.settings.broker, "waited_s": round(time.monotonic() - waiting_since, 1)})
                waiting_since = None
            self._queue.popleft()
            self._delivering.append(delivery)
            delivery.add_done_callback(self._delivered)
            self._changed.set()

    def _delivered(self, delivery: asyncio.Future[Any]) -> None:
        while self._delivering and self._delivering[0].done():
            done = self._delivering.popleft()
            if done.cancelled() or done.exception() is not None:
                self._fail(done.exception() or asyncio.CancelledError())
        self._changed.set()

    def _fail(self, e: BaseException) -> None:
        if self._failure is None:
            self._failure = e
            log.error("the Kafka broker refused a record: the producer stops", extra={"error": repr(e)})
        self._changed.set()
