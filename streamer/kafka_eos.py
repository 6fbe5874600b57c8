"""The transactional Kafka runtime (the default worker): each record's effects are published exactly once.

The stages run in one worker (or split over processes), each a consume-transform-produce loop on aiokafka:

- ``analyse``: ``kibitz.moves`` (every game event, keyed by game) -> ``kibitz.assessments`` (keyed by player; with
  event pooling, a game in an event goes to ``kibitz.assessments.events``, keyed by event), game state in the
  compacted changelog ``kibitz.state.games``;
- ``pool``: ``kibitz.assessments.events`` -> ``kibitz.assessments`` with each player's event prior attached, event
  evidence in ``kibitz.state.events``;
- ``rate``: ``kibitz.assessments`` -> perceived ratings, Glicko-2 updates, fair-play alerts, player state in
  ``kibitz.state.players`` (with ``--review``, also a review request at each game end of a player over a tier, to
  ``kibitz.reviews``);
- ``review`` (with ``--review``): ``kibitz.reviews`` -> alerts of stage "review" (each request holds the games it
  needs), each player's crossings with a verdict in ``kibitz.state.reviews``. One review is a few seconds to a
  minute of deeper searches, run while the stage's transaction is open; the broker starts a transaction's timeout at
  its first write, which comes after the review.

One loop turn: fetch a batch; run :mod:`streamer.steps` on it (a game's records in order, different games at once,
so every engine of the pool has work); then, for each input partition of the batch, in **one Kafka transaction**
publish its records' outputs and dead letters, the new state of every key they touched (once per key, to the changelog
partition equal to the input partition), and its input offset (the partitions' transactions commit side by side).
A crash before the commit leaves nothing visible to ``read_committed`` readers; the next owner of the partition
rebuilds its state from the changelog up to the last committed transaction and re-reads the batch from the committed
offset, so outputs have no gap and no duplicate, and state equals an uninterrupted run.

Why not faust's ``exactly_once``: in faust-streaming 0.15.3 it lost a whole game's outputs with input offsets
committed (measured, README). Its consumer picks the transactional producer from the partition of the *output*
record's key (``faust/transport/consumer.py``, ``send``), not from the input partition whose offsets the
transaction commits, so outputs and offsets of one record can land in different transactions.

Zombies: aiokafka commits offsets in a transaction by group id only (no KIP-447 group generation), so the group
cannot fence a worker that is alive but was cut off (frozen past its session timeout, a network partition). The
transactional id therefore names the stage's input *partition*, not the worker: each stage keeps one producer per
partition it owns, and the worker taking a partition over starts that producer before it restores the state, which
fences the earlier owner and aborts its open transaction (:meth:`Stage.acquire`). A zombie's commit then fails with
``ProducerFenced``; it drops the partition until the group assigns it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import InvalidTransactionTimeout, KafkaTimeoutError, ProducerFenced

from analyzers.engine import EnginePool
from analyzers.errors import (
    AppMismatch,
    ConfigurationError,
    DeploymentMismatch,
    NotAuthorized,
    PartitionsChanged,
    PoisonRecord,
    RuntimeMismatch,
    TopicsNotCreated,
)

from .kafka_config import (
    STAGES,
    ClientErrors,
    KafkaSettings,
    denied_as,
    not_authorized,
    running_stages,
    seek_committed,
    stage_topics,
    wait_for_broker,
)
from .metrics import PROGRESS_STALE_SECONDS
from .pipeline import EventEvidence, GameState, PipelineConfig, PlayerState, ReviewState
from .state_store import RocksState, TrackedState, encode
from .steps import Output, Steps, Swept, dead_letter_output

log = logging.getLogger("kibitz.eos")
#: How long the broker may hold a fetch for more data. aiokafka's default 500 ms shows as latency here: records of a
#: transaction become readable at its commit, and the fetch that is waiting does not see them sooner than this.
FETCH_WAIT_MS = 10
#: ... unless this much is readable sooner. Under load a fetch then brings a few transactions' records at once instead of
#: one small response each (fewer round trips, less protocol decoding in Python): p50 at 500 moves/s 41 -> 33 ms,
#: p99 70 -> 57-68 ms (bench/throughput.py). At a trickle it waits at most FETCH_WAIT_MS, as before.
FETCH_MIN_BYTES = 32 * 1024
#: How long a transaction waits, after its new records, for records it re-runs after a cut (see Stage._cut).
REPEAT_GRACE_SECONDS = 0.05
#: How long a partition waits before retrying a transaction that failed on a retriable Kafka error.
RETRIABLE_BACKOFF_SECONDS = 1.0
Step = Callable[[TrackedState, bytes | None, bytes, str], Awaitable[list[Output]]]
#: For a few ms after a commit the broker answers a new transaction's AddPartitionsToTxn with CONCURRENT_TRANSACTIONS
#: (its commit markers are still being written; KAFKA-5477), and aiokafka retries after a fixed 20 ms
#: (``aiokafka.producer.sender.BACKOFF_OVERRIDE``, no setting). So every transaction after the first waited 20+ ms
#: for nothing. Retrying every 2 ms costs a few tiny requests: a 10-record transaction on the dev broker took 35 ms
#: (p50) with the default and 16 ms with this.
TXN_RETRY_SECONDS = 0.002
#: The header of every changelog record: how many partitions the stage's input topic had when the state was written.
#: A worker that finds another count there now stops (PartitionsChanged): the keys hash to other partitions.
PARTITIONS_HEADER = "kibitz-partitions"
#: ... and which deployment (``--app-id``) wrote it. A worker of another app id finding them stops (AppMismatch): a new
#: app id on the same topics re-reads every input from its start against the other deployment's states.
APP_HEADER = "kibitz-app"
#: How many offsets before a changelog partition's end a worker reads for the count its last states were written under.
LAYOUT_TAIL = 64
#: How often a stage's consumer refreshes the topics' metadata (aiokafka's default is 5 minutes): partitions added to
#: its input topic are seen within this and the worker stops, where it left them unread for 5 minutes, then timed out
#: restoring states from changelog partitions that do not exist (a 40 s wait per partition, and a misleading error).
METADATA_MAX_AGE_MS = 30_000
#: What a runtime that keeps its states apart from the one that rated the topics would do (RuntimeMismatch messages).
RERATED = ("The {runtime} runtime keeps its states elsewhere and would read every input again from its start, "
           "publishing every assessment, rating and Glicko-2 update a second time. Go on with --runtime {other}{app}, or "
           "run the {runtime} runtime as a new deployment (another --topic-prefix) fed the inputs again. The worker stops.")
#: What to do about a partition count that changed (the end of each PartitionsChanged message).
REPARTITION_ADVICE = ("A state is kept in the changelog partition of its key's input partition, so with another count "
                      "games and players would be rated from partitions that do not hold their state. Kafka cannot "
                      "take partitions away: to run with more partitions, start a new deployment (another "
                      "--topic-prefix, --partitions N) and send its inputs again. The worker stops.")


def _retry_concurrent_transactions_sooner() -> None:
    from aiokafka.producer import sender

    if getattr(sender, "BACKOFF_OVERRIDE", None) is None:
        log.warning("aiokafka has no BACKOFF_OVERRIDE: transactions wait 20 ms more each", extra={})
        return
    sender.BACKOFF_OVERRIDE = TXN_RETRY_SECONDS


@dataclass
class StageConfig:
    name: str
    source: str
    changelog: str
    step: Step
    codec: Any                       # the state class: from_dict on restore, to_dict into the changelog (and copy()
                                     # of a state, to undo a record, when window > 1)
    window: int = 1                  # records run at once (different keys only); 1 = strictly in order
    max_records: int = 1000
    commit_seconds: float = 0.25     # a transaction closes after this long even if the batch is not done
    max_aborts: int = 3              # a record whose transaction aborts this often is dead-lettered unapplied
    #: run on each partition's state every sweep_seconds, in the partition's transaction: its deletions go to the
    #: changelog and its dead letters to their topic with the batch's outputs
    sweep: Callable[[TrackedState], Swept] | None = None
    sweep_seconds: float = 300.0
    #: window > 1: how long after ``commit_seconds`` the transaction waits for records still running (a slow or hung
    #: engine search) before it commits what is ready and leaves the rest for the next one (see Stage._run)
    straggler_seconds: float = 0.25
    state: dict[int, TrackedState] = field(default_factory=dict)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, stage: Stage) -> None:
        self.stage = stage

    async def on_partitions_revoked(self, revoked) -> None:  # noqa: ANN001
        async with self.stage.lock:  # the batch in flight commits first
            self.stage.generation += 1
            for tp in revoked:
                await self.stage.release(tp.partition)

    async def on_partitions_assigned(self, assigned) -> None:  # noqa: ANN001
        async with self.stage.lock:  # a batch may have acquired some already (see Stage._process)
            self.stage.generation += 1
            self.stage.fenced.difference_update(tp.partition for tp in assigned)
            try:
                await asyncio.gather(*(self.stage.acquire(tp.partition) for tp in assigned))
            except (DeploymentMismatch, ConfigurationError) as e:  # they stop the worker (an ACL missing among them)
                self.stage.failure = e


class Stage:
    """One consume-transform-produce loop; see the module docstring."""

    def __init__(self, settings: KafkaSettings, cfg: StageConfig, instance_id: str, *, partitions: int,
                 transaction_timeout_ms: int = 30000, store_dir: Path | None = None, metrics: Any = None) -> None:
        self.settings, self.cfg = settings, cfg
        #: the input topic's partition count when the worker started (check_layout): the one its states are kept under
        self.partitions = partitions
        #: what every changelog record says of how it was written (see _check_written)
        self.headers = [(PARTITIONS_HEADER, b"%d" % partitions), (APP_HEADER, settings.app_id.encode())]
        #: an error a rebalance callback met, raised by the stage's loop (aiokafka logs and drops a callback's errors)
        self.failure: BaseException | None = None
        self.metrics = metrics  # streamer.metrics.Metrics: poison records count as rejections with reason "poison"
        self.store_dir = store_dir  # None: state in memory; else one RocksDB per partition under it
        self.group = f"{settings.app_id}.{cfg.name}"
        kw = settings.aiokafka_kwargs()
        self.consumer = AIOKafkaConsumer(
            group_id=self.group, enable_auto_commit=False, isolation_level="read_committed",
            auto_offset_reset="earliest", max_poll_records=cfg.max_records, fetch_max_wait_ms=FETCH_WAIT_MS,
            fetch_min_bytes=FETCH_MIN_BYTES, consumer_timeout_ms=FETCH_WAIT_MS, metadata_max_age_ms=METADATA_MAX_AGE_MS,
            **kw)
        self.instance_id, self.transaction_timeout_ms = instance_id, transaction_timeout_ms
        # One transactional producer per input partition (see acquire): owning a partition means holding its producer.
        self.producers: dict[int, AIOKafkaProducer] = {}
        self.fenced: set[int] = set()  # partitions another worker took from this one; ignored until assigned again
        self.lock = asyncio.Lock()
        self.generation = 0  # bumped by every rebalance callback
        # Poison records. After a transaction aborts, the records it held are suspects: they are retried one per
        # transaction up to the last offset it held, so the one that aborts again is known; after max_aborts it is
        # dead-lettered unapplied and its partition moves on (instead of rewinding and retrying forever).
        self.suspects: dict[TopicPartition, int] = {}
        self.aborts: dict[tuple[TopicPartition, int], tuple[int, str]] = {}
        self.poisoned = 0
        self._lag_reported = 0.0
        self._lag_series: set[TopicPartition] = set()
        self.last_sweep = time.monotonic()
        self.stragglers = 0  # transactions' partitions cut short by a record still running (see _cut)
        self.repeats: set[tuple[int, int]] = set()  # (partition, offset) of records cut and not yet done
        # progress: per input partition, (when its records were first read without its offset advancing since, when
        # they were last read); see _judge_progress
        self.unprogressed: dict[TopicPartition, tuple[float, float]] = {}
        self.progress_stale = PROGRESS_STALE_SECONDS

    async def acquire(self, partition: int) -> None:
        """Own one input partition: start its transactional producer, then restore its state.

        The producer's transactional id names the stage's *partition*, not the worker (the pre-KIP-447 pattern; aiokafka
        commits offsets by group id only, without the group generation that would fence a stale member). Starting it
        (InitProducerId) bumps the id's epoch: a worker that owned the partition before and is still alive (a zombie:
        frozen past its session timeout, cut off by a network partition) can no longer write or commit anything for it,
        and the broker aborts that worker's open transaction at once, so the restore below reads every committed state
        and nothing the zombie had pending."""
        if partition in self.producers:
            return
        now = self.consumer.partitions_for_topic(self.cfg.source)
        if now and len(now) != self.partitions:
            raise PartitionsChanged(f"{self.cfg.source} went from {self.partitions} to {len(now)} partitions while this "
                                    f"worker ran. {REPARTITION_ADVICE}")
        transactional_id = f"{self.settings.app_id}.{self.cfg.name}.p{partition}"
        producer = AIOKafkaProducer(
            transactional_id=transactional_id, client_id=f"kibitz-{self.instance_id}",
            enable_idempotence=True, acks="all", linger_ms=2, transaction_timeout_ms=self.transaction_timeout_ms,
            **self.settings.aiokafka_kwargs())
        try:
            with denied_as(self.settings, f"the transactional id {transactional_id!r} (the {self.cfg.name} stage's for "
                                          f"partition {partition}: WRITE and DESCRIBE)"):
                await producer.start()
        except Exception as e:
            with contextlib.suppress(Exception):  # it never started: nothing to flush
                await producer.stop()
            if not isinstance(e, InvalidTransactionTimeout):
                raise
            raise ConfigurationError(
                f"--transaction-timeout {self.transaction_timeout_ms / 1000:g} s: the broker refuses it, as above its "
                f"transaction.max.timeout.ms (900 s unless its configuration says otherwise). Give a lower one (the "
                f"default is 30 s), or raise the broker's setting") from None
        self.producers[partition] = producer
        self._close_state(partition)
        try:
            self.cfg.state[partition] = await self.restore(partition)
        except BaseException:
            # not owned without its state: the next batch of the partition acquires it again (it raised KeyError)
            await self.release(partition)
            raise

    async def release(self, partition: int) -> None:
        """Give one input partition up: drop its state and stop its producer."""
        self._close_state(partition)
        self.unprogressed.pop(TopicPartition(self.cfg.source, partition), None)
        producer = self.producers.pop(partition, None)
        if producer is not None:
            with contextlib.suppress(Exception):  # a fenced producer's sender has died; there is nothing to flush
                await producer.stop()

    async def _fenced(self, partition: int) -> None:
        """Another worker has started this partition's producer: it owns the partition now. Drop it until the group
        assigns it to this worker again (the rebalance listener clears the mark)."""
        log.warning("fenced: another worker owns this partition now; dropping it until the group assigns it again",
                    extra={"stage": self.cfg.name, "partition": partition})
        self.fenced.add(partition)
        await self.release(partition)

    def _close_state(self, partition: int) -> None:
        state = self.cfg.state.pop(partition, None)
        if state is not None:
            state.close()

    def _open(self, partition: int, *, fresh: bool = False) -> TrackedState:
        if self.store_dir is None:
            return TrackedState()
        path = self.store_dir / f"{self.cfg.changelog}-{partition}"
        if fresh and path.exists():
            shutil.rmtree(path)
        return RocksState(path, self.cfg.codec)

    async def _report_lag(self) -> None:
        """Set ``kibitz_consumer_lag`` for each assigned input partition (at most every :data:`LAG_SECONDS`), and drop
        the series of partitions this worker no longer owns."""
        if self.metrics is None or time.monotonic() - self._lag_reported < LAG_SECONDS:
            return
        self._lag_reported = time.monotonic()
        owned = self.consumer.assignment()
        for tp in self._lag_series - owned:
            with contextlib.suppress(KeyError):
                self.metrics.lag.remove(self.cfg.name, str(tp.partition))
        self._lag_series = set()
        for tp in owned:
            end = self.consumer.last_stable_offset(tp)  # read_committed: what the stage can read; None before a fetch
            try:
                position = await self.consumer.position(tp)
            except Exception:  # noqa: BLE001 - revoked meanwhile, or no position yet: reported at the next round
                continue
            if end is not None:
                self.metrics.lag.labels(self.cfg.name, str(tp.partition)).set(max(0, end - position))
                self._lag_series.add(tp)

    def _beat(self) -> None:
        """The stage goes round (``/healthz`` of the metrics server: a stage that stops doing so is not live)."""
        if self.metrics is not None:
            self.metrics.health.beat(f"stage {self.cfg.name}")

    async def restore(self, partition: int) -> TrackedState:
        """The state of one input partition: its changelog partition (committed records only) read to the end, from
        the offset the local store is caught up to (the beginning for a memory store). An ACL missing on the changelog
        is NotAuthorized, wherever the restore runs (acquiring a partition, undoing an aborted transaction): raised as
        it is in the rebalance listener, aiokafka would log it, drop it and go on without the partition, the worker
        hanging; in an undo it ended the worker on aiokafka's traceback."""
        with denied_as(self.settings, f"the {self.cfg.name} stage's changelog {self.cfg.changelog} (READ and DESCRIBE)"):
            return await self._restore(partition)

    async def _restore(self, partition: int) -> TrackedState:
        tp = TopicPartition(self.cfg.changelog, partition)
        c = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, isolation_level="read_committed",
                             auto_offset_reset="earliest", **self.settings.aiokafka_kwargs())
        await c.start()
        try:
            c.assign([tp])
            end = (await c.end_offsets([tp]))[tp]
            await self._check_written(c, tp, end)
            state = self._open(partition)
            start = state.start_offset
            if start > end:  # the store is from another incarnation of the topic: start over
                log.warning("local store ahead of its changelog; rebuilding", extra={"stage": self.cfg.name,
                            "partition": partition, "store_offset": start, "changelog_end": end})
                state.close()
                state, start = self._open(partition, fresh=True), 0
            c.seek(tp, start)
            n = 0
            while await c.position(tp) < end:
                self._beat()  # a long restore (a lost local store) is progress, not a stuck stage
                recs = (await c.getmany(tp, timeout_ms=500)).get(tp, [])
                for rec in recs:
                    state.load(rec.key.decode(), rec.value, self.cfg.codec)
                    n += 1
                if recs:
                    state.loaded(recs[-1].offset + 1)  # a RocksDB store writes each fetched batch: bounded memory
            state.loaded(end)
        finally:
            await c.stop()
        log.info("restored", extra={"stage": self.cfg.name, "partition": partition, "records": n, "from_offset": start,
                                    "to_offset": end, "keys_in_memory": len(state)})
        return state

    async def _check_written(self, c: AIOKafkaConsumer, tp: TopicPartition, end: int) -> None:
        """Check how the last states in changelog partition ``tp`` (offsets before ``end``) were written. Raise
        PartitionsChanged if the input topic had another partition count then (partitions were added to both topics
        since: the counts agree, the keys moved), AppMismatch if another deployment (``--app-id``) wrote them. States
        written before these headers existed are not checked."""
        c.seek(tp, max(0, end - LAYOUT_TAIL))
        written: dict[str, bytes] = {}
        while await c.position(tp) < end:
            for rec in (await c.getmany(tp, timeout_ms=500)).get(tp, []):
                written = dict(rec.headers or ()) or written
        where = f"the states in {tp.topic} (partition {tp.partition})"
        ours = dict(self.headers)
        partitions, app = written.get(PARTITIONS_HEADER), written.get(APP_HEADER)
        if partitions is not None and partitions != ours[PARTITIONS_HEADER]:
            raise PartitionsChanged(f"{where} were written when {self.cfg.source} had "
                                    f"{partitions.decode(errors='replace')} partitions; it has {self.partitions} now. "
                                    f"{REPARTITION_ADVICE}")
        if app is not None and app != ours[APP_HEADER]:
            raise AppMismatch(f"{where} were written by app {app.decode(errors='replace')!r}; this worker is app "
                              f"{self.settings.app_id!r} (--app-id, KIBITZ_KAFKA_APP_ID) on the same topics (--topic-prefix "
                              f"{self.settings.topics.prefix!r}). A new app id reads every input again from its start "
                              f"against the other app's states: its ratings would skip every move those states have "
                              f"seen, its assessments would be published twice, and the two would write into one "
                              f"another's states. Run it with its app's id, or to rate the inputs again from scratch, "
                              f"as a new deployment (another --topic-prefix) fed the inputs again. The worker stops.")

    async def run(self) -> None:
        await self.consumer.start()
        self.consumer.subscribe([self.cfg.source], listener=_Listener(self))
        try:
            while True:
                self._beat()
                if self.failure is not None:
                    raise self.failure
                generation = self.generation
                try:
                    batch = await self.consumer.getmany(timeout_ms=100, max_records=self.cfg.max_records)
                except Exception as e:  # not denied_as: in the hot loop the denial's message is made only on an error
                    denied = not_authorized(self.settings, e, f"the {self.cfg.name} stage's consumer group "
                                            f"{self.group!r} or its input topic {self.cfg.source} (READ)")
                    if denied is None:
                        raise
                    raise denied from None
                if batch:
                    async with self.lock:
                        if generation != self.generation:
                            # A rebalance ran while this batch was fetched: it may hold records from before it,
                            # which the consumer will fetch again from the committed offsets (processing both
                            # would publish twice). Drop it and read again from what is committed.
                            await self._rewind([tp for tp in batch if tp in self.consumer.assignment()])
                            continue
                        await self._process(batch)
                await self._report_lag()
        finally:
            await self.consumer.stop()
            for partition in list(self.producers.keys() | self.cfg.state.keys()):
                await self.release(partition)

    async def _run(self, owned: dict[TopicPartition, list]) -> tuple[dict[TopicPartition, int], dict[int, list[Output]]]:
        """Run the step on a prefix of every partition's records: those started before ``commit_seconds`` ran out.

        Records start in offset order (partitions interleaved); a record waits for the one before it with the same
        key, and at most ``window`` run at once (1 = strictly in order). Because starts stop at the deadline and
        every started record finishes, what is processed is an unbroken prefix of each partition: its offsets can
        be committed with no gap and nothing replayed twice. Returns the next offset per partition and each
        partition's outputs in start order."""
        deadline = time.monotonic() + self.cfg.commit_seconds
        outputs: list[list[Output]] = []
        nxt: dict[TopicPartition, int] = {}
        last: dict[tuple[int, bytes | None], asyncio.Task] = {}
        running: set[asyncio.Task] = set()
        started: list[asyncio.Task] = []

        snapshots: dict[int, tuple[str, Any]] = {}  # slot -> (state key, a copy of its state before the record ran)

        async def one(rec, slot: int, before: asyncio.Task | None) -> None:  # noqa: ANN001
            if before is not None:
                await before
            state = self.cfg.state[rec.partition]
            # a game's records are keyed by its id, the key of its state
            key = rec.key.decode("utf-8", "replace") if rec.key is not None else None
            if key is not None:
                current = state.get(key)
                if current is not None and getattr(current, "input_offset", -1) >= rec.offset:
                    return  # applied, with its outputs, in a transaction that committed before a cut (see _cut)
                snapshots[slot] = (key, current.copy() if current is not None else None)
            outputs[slot] = await self.cfg.step(state, rec.key, rec.value, _source(rec))
            after = state.get(key) if key is not None else None
            if key is not None and after is not None and hasattr(after, "input_offset"):
                after.input_offset = rec.offset
                state[key] = after  # written even when the step rejected the record, so a re-read skips it too

        queues = [list(recs) for recs in owned.values()]
        order = [rec for row in zip_longest(*queues) for rec in row if rec is not None]
        records: list = []
        if self.cfg.window == 1:  # strictly in order: no task per record (a task and a wait cost more than a rating)
            for rec in order:
                if outputs and time.monotonic() > deadline:
                    break
                outputs.append(await self.cfg.step(self.cfg.state[rec.partition], rec.key, rec.value, _source(rec)))
                records.append(rec)
                nxt[TopicPartition(rec.topic, rec.partition)] = rec.offset + 1
            return nxt, _by_partition(records, outputs)
        try:
            for rec in order:
                if outputs and time.monotonic() > deadline:
                    break
                while len(running) >= self.cfg.window:
                    _, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                outputs.append([])
                task = asyncio.create_task(one(rec, len(outputs) - 1, last.get((rec.partition, rec.key))))
                last[(rec.partition, rec.key)] = task
                running.add(task)
                started.append(task)
                records.append(rec)
                nxt[TopicPartition(rec.topic, rec.partition)] = rec.offset + 1
            # wait for the records started here, but not again for one already cut for being slow: its search is still
            # running in the pool, and waiting for it would hold every other game up at each transaction until it ends
            fresh = [t for t, rec in zip(started, records) if (rec.partition, rec.offset) not in self.repeats]
            wait = max(0.0, deadline - time.monotonic()) + self.cfg.straggler_seconds
            if fresh or started:
                await asyncio.wait(fresh or started, timeout=wait)
            pending = [t for t in started if not t.done()]
            if pending:  # a repeat whose search has ended since needs only a moment
                await asyncio.wait(pending, timeout=REPEAT_GRACE_SECONDS)
            if any(not t.done() for t in started):
                await self._cut(records, started, outputs, snapshots, nxt)
            for t, rec in zip(started, records):
                if not t.cancelled():
                    self.repeats.discard((rec.partition, rec.offset))
            await asyncio.gather(*(t for t in started if not t.cancelled()))
        except BaseException:
            for t in started:
                t.cancel()
            raise
        return nxt, _by_partition(records, outputs)

    async def _cut(self, records: list, tasks: list[asyncio.Task], outputs: list[list[Output]],
                   snapshots: dict[int, tuple[str, Any]], nxt: dict[TopicPartition, int]) -> None:
        """Commit what is ready. Records still running are undone: cancelled, their state put back as it was before
        they ran (a game's later records wait for its earlier ones, so they are among them). Everything that finished
        commits, outputs and state, and each partition's offset stops at its first undone record; the finished records
        after it are read again by the next transaction and skipped, because their game's state holds the offset of the
        last record applied to it (GameState.input_offset). The engine search an undone record waited for goes on in
        the pool, so the record finds it running or cached when it runs again. One slow search holds up other games
        for at most ``straggler_seconds``."""
        cut: dict[TopicPartition, int] = {}
        for rec, task in zip(records, tasks):
            tp = TopicPartition(rec.topic, rec.partition)
            if tp not in cut and not task.done():
                cut[tp] = rec.offset
        undone = [i for i, task in enumerate(tasks) if not task.done()]
        for i in undone:
            tasks[i].cancel()
            self.repeats.add((records[i].partition, records[i].offset))
        await asyncio.gather(*(tasks[i] for i in undone), return_exceptions=True)
        restored: set[tuple[int, str]] = set()
        for i in undone:  # in start order: a key's first undone record has the state from before all of them
            outputs[i] = []
            snap = snapshots.get(i)
            if snap is None or (records[i].partition, snap[0]) in restored:
                continue
            restored.add((records[i].partition, snap[0]))
            state, (key, before) = self.cfg.state[records[i].partition], snap
            if before is None:
                state.pop(key, None)
            else:
                state[key] = before
        for tp, offset in cut.items():
            nxt[tp] = offset
        self.stragglers += len(cut)
        log.warning("slow records left for the next transaction", extra={
            "stage": self.cfg.name, "partitions": len(cut), "records_undone": len(undone),
            "waited_seconds": self.cfg.commit_seconds + self.cfg.straggler_seconds})

    async def _process(self, batch: dict[TopicPartition, list]) -> None:
        """Run one batch and commit it: one transaction per input partition, by that partition's producer, holding the
        outputs of its records, its state changes and its next offset. The transactions commit side by side; one that
        fails is undone alone (its partition's state restored, its records read again, they become suspects)."""
        assigned = self.consumer.assignment()
        # revoked meanwhile: the new owner reads them; fenced: another worker owns them until the group says otherwise
        owned = {tp: recs for tp, recs in batch.items() if tp in assigned and tp.partition not in self.fenced}
        for tp in owned:  # records can arrive before the assignment callback acquired their partition
            await self.acquire(tp.partition)
        if not owned:
            return
        fetched = owned
        single = self._suspect(owned)
        if single is not None:
            owned = single  # one suspect record alone in its transaction; the rest of the batch is read again
        for tp in owned:
            await self.producers[tp.partition].begin_transaction()
        try:
            poison = self._poison(owned) if single is not None else None
            if poison:
                ((tp, (rec,)),) = owned.items()
                nxt, outputs = {tp: rec.offset + 1}, {tp.partition: [poison]}
            else:
                nxt, outputs = await self._run(owned)
            if self.cfg.sweep is not None and time.monotonic() - self.last_sweep > self.cfg.sweep_seconds:
                self.last_sweep = time.monotonic()
                for tp in owned:  # deletions go to the changelog in the partition's transaction
                    swept = self.cfg.sweep(self.cfg.state[tp.partition])
                    outputs.setdefault(tp.partition, []).extend(swept.dead_letters)
        except Exception as e:  # noqa: BLE001 - a step that raised: nothing of the batch commits
            await asyncio.gather(*(self._undo(tp, recs, e, single is not None) for tp, recs in owned.items()))
            return
        except BaseException:  # shutting down: nothing of this batch is committed; the next owner redoes it
            for tp in owned:
                with contextlib.suppress(Exception):
                    await self.producers[tp.partition].abort_transaction()
            raise
        results = await asyncio.gather(*(self._commit(tp, nxt.get(tp), outputs.get(tp.partition, [])) for tp in owned),
                                       return_exceptions=True)
        denied = next((r for r in results if isinstance(r, NotAuthorized)), None)
        if denied is not None:
            # an ACL missing is the deployment's, not the records': retried, each record would be dead-lettered as
            # poison after 3 aborts (every rating of the partition lost). Stop with nothing committed: the worker
            # started again once the ACL is granted reads the records again.
            for tp in owned:
                with contextlib.suppress(Exception):
                    await self.producers[tp.partition].abort_transaction()
            raise denied
        dropped: set[TopicPartition] = set()  # undone (read again from the committed offset) or fenced
        for (tp, recs), result in zip(owned.items(), results):
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                dropped.add(tp)
                nxt.pop(tp, None)
            if isinstance(result, ProducerFenced):
                await self._fenced(tp.partition)
            elif isinstance(result, asyncio.CancelledError):
                raise result
            elif isinstance(result, BaseException):
                await self._undo(tp, recs, result, single is not None, sent=True)
        for tp, offset in nxt.items():
            if tp in self.suspects and offset > self.suspects[tp]:
                del self.suspects[tp]  # every suspect of this partition has committed (or been dead-lettered)
            for done in [k for k in self.aborts if k[0] == tp and k[1] < offset]:
                del self.aborts[done]
            if offset <= fetched[tp][-1].offset:  # records fetched but left for the next transaction
                self.consumer.seek(tp, offset)
        for tp in fetched.keys() - nxt.keys() - dropped:  # none of its records ran (a suspect ran alone, or time ran out)
            self.consumer.seek(tp, fetched[tp][0].offset)
        self._judge_progress({tp: recs[0].offset for tp, recs in fetched.items()}, nxt)

    def _judge_progress(self, first: dict[TopicPartition, int], nxt: dict[TopicPartition, int]) -> None:
        """``/healthz``: an input partition whose records have been read for :data:`PROGRESS_STALE_SECONDS` without its
        committed offset moving, and read within the last minute (a broker away returns none: waited for, not judged),
        makes the stage not live. The loop went round all the while, so only this tells such a stage from a busy one:
        a partition stuck this way held its games for as long as the worker ran (a producer whose writes all failed).
        ``first``: each fetched partition's first offset read; ``nxt``: the offsets this batch committed."""
        now = time.monotonic()
        for tp, offset in first.items():
            if nxt.get(tp, offset) > offset:
                self.unprogressed.pop(tp, None)
            else:
                since, _ = self.unprogressed.get(tp, (now, now))
                self.unprogressed[tp] = (since, now)
        if self.metrics is None:
            return
        stuck = {tp.partition: since for tp, (since, last) in self.unprogressed.items()
                 if last - since > self.progress_stale and now - last < PROGRESS_RECENT_SECONDS}
        why = (f"{self.cfg.source} partition(s) {', '.join(map(str, sorted(stuck)))} read again and again, nothing "
               f"committed for {now - min(stuck.values()):.0f} s") if stuck else None
        self.metrics.health.stall(f"stage {self.cfg.name}", why)

    async def _commit(self, tp: TopicPartition, offset: int | None, outputs: list[Output]) -> None:
        """One input partition's transaction: its records' outputs, its state changes (to the changelog partition of the
        same number), its next input offset; then commit, and tell a local store what is now committed."""
        producer, state, topics = self.producers[tp.partition], self.cfg.state[tp.partition], self.settings.topics
        futures: list[asyncio.Future] = []
        written: list[tuple[str, bytes | None]] = []
        changelog: list[asyncio.Future] = []
        failed: list[BaseException] = []
        try:
            for o in outputs:
                futures.append(await producer.send(topics.for_route(o.route), o.message.model_dump_json().encode(),
                                                   key=o.key_bytes))
            for key, value in state.changes():
                v = encode(value)
                written.append((key, v))
                changelog.append(await producer.send(self.cfg.changelog, v, key=key.encode(), partition=tp.partition,
                                                     headers=self.headers))
        except Exception as e:  # noqa: BLE001 - raised below, after every future sent so far is collected
            failed.append(e)
        results = await asyncio.gather(*futures, *changelog, return_exceptions=True)
        failed += [r for r in results if isinstance(r, Exception)]
        if failed:
            # once fenced, the producer's sender has stopped: the first record failed with ProducerFenced, later sends
            # with IllegalOperation. Name the fence, so that the caller drops the partition instead of retrying it.
            # Likewise a topic these credentials may not write: the later sends fail with OutOfOrderSequenceNumber.
            denied = next((d for e in failed if (d := not_authorized(
                self.settings, e, f"writing the {self.cfg.name} stage's outputs or changelog (WRITE)")) is not None), None)
            raise next((e for e in failed if isinstance(e, ProducerFenced)), denied or failed[0])
        if offset is not None:
            await producer.send_offsets_to_transaction({tp: offset}, self.group)
        await producer.commit_transaction()
        offsets = [f.result().offset for f in changelog]
        state.committed(written, max(offsets) + 1 if offsets else None)  # a local store follows only what is committed

    async def _undo(self, tp: TopicPartition, recs: list, error: BaseException, alone: bool, *, sent: bool = False) -> None:
        """A partition's transaction failed: abort it, make its records suspects, restore its state, read it again.
        ``sent``: it failed writing or committing (not in a step). A write the broker refused for good (a record over a
        topic's max.message.bytes, an invalid record) has taken its producer's sequence number for that output
        partition, which the broker never stored: every later write of the producer there would fail with
        OutOfOrderSequenceNumber, every record writing there dead-lettered as poison, for as long as the worker runs
        (aiokafka does not bump the producer's epoch after an abort, as Kafka's Java client does). So the partition's
        producer is replaced by a new one (a new epoch, its sequences from 0), which also restores its state."""
        log.error("transaction aborted", extra={"stage": self.cfg.name, "partition": tp.partition, "error": repr(error)})
        self.suspects[tp] = max(self.suspects.get(tp, -1), recs[-1].offset)
        # A retriable error (a broker down, a leader moving, a timeout) says nothing about the record: it does not count
        # towards max_aborts, or a broker outage would dead-letter good records; the retry waits a moment instead.
        retriable = bool(getattr(error, "retriable", False)) or isinstance(error, (KafkaTimeoutError, TimeoutError))
        if alone and not retriable:
            n, _ = self.aborts.get((tp, recs[0].offset), (0, ""))
            self.aborts[(tp, recs[0].offset)] = (n + 1, repr(error))
        if retriable:
            await asyncio.sleep(RETRIABLE_BACKOFF_SECONDS)
        renew = sent and not retriable
        try:
            await self.producers[tp.partition].abort_transaction()
        except ProducerFenced:
            await self._fenced(tp.partition)
            return
        except Exception:  # noqa: BLE001 - the producer may be unusable: start a new one, which also aborts
            log.exception("abort failed", extra={"stage": self.cfg.name, "partition": tp.partition})
            renew = True
        if renew:  # a new producer; acquiring the partition again restores its state too
            await self.release(tp.partition)
            await self.acquire(tp.partition)
        else:
            self._close_state(tp.partition)
            self.cfg.state[tp.partition] = await self.restore(tp.partition)
        await self._rewind([tp])

    def _suspect(self, owned: dict[TopicPartition, list]) -> dict[TopicPartition, list] | None:
        """The first suspect record of the batch alone ({tp: [record]}), or None when no partition has suspects."""
        for tp, recs in owned.items():
            if tp in self.suspects and recs[0].offset <= self.suspects[tp]:
                return {tp: recs[:1]}
        return None

    def _poison(self, owned: dict[TopicPartition, list]) -> Output | None:
        """The dead letter of a lone suspect that has aborted ``max_aborts`` times, else None (try it again)."""
        ((tp, (rec,)),) = owned.items()
        n, error = self.aborts.get((tp, rec.offset), (0, ""))
        if n < self.cfg.max_aborts:
            return None
        self.poisoned += 1
        if self.metrics is not None:
            self.metrics.rejected.labels(PoisonRecord.reason).inc()
        source = _source(rec)
        log.error("poison record dead-lettered unapplied", extra={"stage": self.cfg.name, "source": source, "aborts": n,
                                                                "error": error})
        err = PoisonRecord(f"its transaction aborted {n} times; last error: {error}")
        return dead_letter_output(err, rec.value if rec.value is not None else b"", source=source, key=rec.key)

    async def _rewind(self, tps: list[TopicPartition]) -> None:
        """Read these partitions again from their committed offsets."""
        await seek_committed(self.consumer, tps)




def _by_partition(records: list, outputs: list[list[Output]]) -> dict[int, list[Output]]:
    """The outputs of each record (``outputs[i]`` of ``records[i]``) gathered by input partition, in record order."""
    grouped: dict[int, list[Output]] = {}
    for rec, outs in zip(records, outputs):
        grouped.setdefault(rec.partition, []).extend(outs)
    return grouped


def _source(rec: Any) -> str:
    """Where a record came from, as dead letters and logs name it: ``topic/partition@offset``."""
    return f"{rec.topic}/{rec.partition}@{rec.offset}"


def _sync(step: Callable[[Any, bytes | None, bytes, str], list[Output]]) -> Step:
    """A synchronous step (the player step needs no engine) as the coroutine a stage awaits."""
    async def run(state: Any, key: bytes | None, raw: bytes, source: str) -> list[Output]:
        return step(state, key, raw, source)
    return run


async def run_worker(settings: KafkaSettings, config: PipelineConfig, *, instance_id: str, engines: int = 2,
                     engine: str | None = None, go_engines: int = 0, go_engine: str | None = None,
                     cache_path: Path | None = None, metrics_port: int | None = None,
                     metrics_host: str = "127.0.0.1",
                     transaction_timeout_ms: int = 30000, stages: Sequence[str] = STAGES,
                     store_dir: Path | None = None) -> None:
    """Run the stages (both by default; one per process puts each on its own core) until cancelled. With
    ``store_dir`` (this worker's own directory), state is in RocksDB under ``store_dir/<stage>/`` (streamer.state_store).
    With ``go_engines`` (and ``config.go_calibration``), the analyse stage also searches Go positions with a pool of that
    many GTP engines."""
    stages = running_stages(stages, config.review is not None)  # raises for a name that is no stage
    _retry_concurrent_transactions_sooner()
    await wait_for_broker(settings)
    await ensure_topics(settings)
    await check_runtime(settings, "transactional")
    layout = stage_topics(settings.topics)
    partitions = await check_layout(settings, [layout[name] for name in stages])  # before the engines start
    analyse, pool_, rate, review = STAGES
    async with contextlib.AsyncExitStack() as stack:
        searches = "analyse" in stages or "review" in stages  # the review searches too, on the same engines
        pool = await stack.enter_async_context(EnginePool(engine, size=engines, cache_path=cache_path,
                                                          timeout=config.timeout)) if searches else None
        go_pool = await stack.enter_async_context(EnginePool(go_engine, size=go_engines, cache_path=cache_path, game=config.go_game,
                                                             timeout=config.go_timeout)) if go_engines and "analyse" in stages else None
        steps = Steps(config, pool, go_pool=go_pool)
        metrics = steps.metrics
        if metrics_port:
            metrics.serve(metrics_port, metrics_host)
        configs = {
            analyse: StageConfig(analyse, *layout[analyse], steps.game_record, GameState, window=2 * engines,
                                 # a short idle limit (a test's, a demo's) is met within half of it
                                 sweep=steps.sweep_games, sweep_seconds=min(300.0, config.idle_game_seconds / 2)),
            pool_: StageConfig(pool_, *layout[pool_], _sync(steps.pool_record), EventEvidence, sweep=steps.sweep_events),
            rate: StageConfig(rate, *layout[rate], _sync(steps.player_record), PlayerState),
            # one review per transaction, in order: each is seconds of searches, and nothing else waits on this stage
            review: StageConfig(review, *layout[review], steps.review_record, ReviewState, max_records=1),
        }
        runners = [Stage(settings, configs[name], instance_id, partitions=partitions[configs[name].source],
                         transaction_timeout_ms=transaction_timeout_ms, store_dir=store_dir / name if store_dir else None,
                         metrics=metrics)
                   for name in STAGES if name in stages]
        tasks = [asyncio.create_task(s.run(), name=s.cfg.name) for s in runners]
        refusals = stack.enter_context(ClientErrors())
        tasks.append(asyncio.create_task(refusals.watch(settings), name="refusals"))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # a stage that stopped by itself stopped on an error: raise it
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


#: Seconds between two reports of a stage's consumer lag (``kibitz_consumer_lag``).
LAG_SECONDS = 1.0
#: A partition not progressing is judged only while its records are read (within this many seconds): a broker away
#: answers no fetch, and is waited for (Stage._judge_progress).
PROGRESS_RECENT_SECONDS = 60.0


#: The state changelogs are compacted, and set so that compaction can run: Kafka compacts only closed segments, and
#: with its defaults (1 GiB or 7 days per segment) a changelog holds every version of every state until then.
CHANGELOG_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": str(8 * 1024 * 1024),
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(60 * 60 * 1000),  # tombstones of ended games, kept an hour for readers catching up
}


#: The dead letters are kept 30 days, not the broker's default 7: they are what is left of a record a bug or a
#: deployment's fault rejected, for `kibitz redrive` once it is mended (README, "Dead letters and re-driving them").
DEADLETTER_RETENTION_DAYS = 30
DEADLETTER_CONFIG = {"retention.ms": str(DEADLETTER_RETENTION_DAYS * 24 * 60 * 60 * 1000)}


#: Seconds ensure_topics waits for topics it created to show in the broker's metadata with a leader per partition.
TOPICS_SHOWN_TIMEOUT = 30.0


async def _until_led(admin: Any, names: list[str]) -> dict[str, int]:
    """Wait until the broker's metadata shows each of ``names`` with a leader for every partition; their partition
    counts (those shown: after :data:`TOPICS_SHOWN_TIMEOUT` it goes on without the others). A KRaft broker
    answers CreateTopics before its metadata has the topics: a worker subscribing then (three split stage workers
    started together on a fresh cluster, or a worker right after a producer made the topics) was given no partition
    of a topic its metadata lacked, and took it up only at its next metadata refresh, 5 minutes later
    (``metadata_max_age_ms``); a client asking at once missed 13 of the 15 new topics in 19 runs of 20 here."""
    deadline = time.monotonic() + TOPICS_SHOWN_TIMEOUT
    while True:
        shown = await admin.describe_topics(names)
        waiting = [d["topic"] for d in shown
                   if d["error_code"] != 0 or not d["partitions"] or any(p["leader"] < 0 for p in d["partitions"])]
        counts = {d["topic"]: len(d["partitions"]) for d in shown if d["topic"] not in waiting}
        if not waiting:
            return counts
        if time.monotonic() > deadline:
            log.warning("topics not yet in the broker's metadata: going on", extra={"topics": waiting})
            return counts
        await asyncio.sleep(0.1)


async def check_runtime(settings: KafkaSettings, runtime: str) -> None:
    """Raise RuntimeMismatch if the other runtime has rated these topics under this app id: its consumer group has
    committed offsets on the input topics (faust's group is the app id; the transactional runtime's, one per stage,
    ``<app id>.<stage>``). The runtimes keep their states in different changelogs, so the one starting would read every
    input again from its start, with empty states, and publish everything a second time (measured: faust after the
    transactional runtime on one game published its assessments, ratings and Glicko-2 updates twice). A broker that
    does not let these credentials describe the other groups is not checked. The faust runtime also stops where the
    transactional runtime's state changelogs (named by the topic prefix alone) hold states, whatever app kept them."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    app = settings.app_id
    other = "faust" if runtime == "transactional" else "transactional"
    groups = {app: settings.topics.moves} if other == "faust" else {
        f"{app}.{stage}": source for stage, (source, _) in stage_topics(settings.topics).items()}
    admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs())
    await admin.start()
    try:
        for group, source in groups.items():
            try:
                read = any(tp.topic == source for tp in await admin.list_consumer_group_offsets(group))
            except KafkaError as e:  # no right to describe the group: nothing known either way
                log.info("another runtime's consumer group not checked", extra={"group": group, "error": repr(e)})
                continue
            if read:
                raise RuntimeMismatch(f"consumer group {group!r} has read {source}: the {other} runtime has rated these "
                                      f"topics as app {app!r}. " + RERATED.format(runtime=runtime, other=other, app=""))
        if runtime == "faust":
            changelogs = settings.topics.changelogs()
            counts = {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(changelogs)}
            for changelog in changelogs:
                if counts.get(changelog) and await _holds_records(settings, changelog, counts[changelog]):
                    raise RuntimeMismatch(f"{changelog} holds states of the transactional runtime: it has rated these "
                                          f"topics (under an app id of its own, or it would have been named). "
                                          + RERATED.format(runtime=runtime, other=other, app=" and that deployment's --app-id"))
    finally:
        await admin.close()


async def check_layout(settings: KafkaSettings, pairs: Sequence[tuple[str, str]]) -> dict[str, int]:
    """The partition count of each stage input topic of ``pairs`` (input topic, its state changelog). The worker keeps
    the state of input partition p in changelog partition p, so a changelog needs at least its input's partitions. One
    with fewer that holds no state yet (a fresh deployment whose input topic a producer made with another count,
    ``KIBITZ_KAFKA_PARTITIONS``) is given as many; one that holds states raises PartitionsChanged: partitions were added to the
    input topic, and keys hash to other partitions now. The counts are read once the broker's metadata shows every
    partition with a leader: on a cluster, a broker that had not yet taken in topics just created described them with
    no partitions, and the worker took the input's count for 0."""
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions
    from aiokafka.errors import InvalidPartitionsError

    names = [name for pair in pairs for name in pair]
    admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs())
    await admin.start()
    try:
        counts = await _until_led(admin, names)
        if missing := [name for name in names if name not in counts]:
            raise TopicsNotCreated(f"{', '.join(missing)}: not in the broker's metadata {TOPICS_SHOWN_TIMEOUT:g} s after "
                                   f"the worker made sure of them (created or found); is every broker of the cluster up?")
        short = {changelog: source for source, changelog in pairs if counts[changelog] < counts[source]}
        for changelog, source in short.items():
            if await _holds_records(settings, changelog, counts[changelog]):
                raise PartitionsChanged(f"{source} has {counts[source]} partitions and its state changelog {changelog} "
                                        f"{counts[changelog]}. {REPARTITION_ADVICE}")
            try:
                with denied_as(settings, f"growing the state changelog {changelog} to its input {source}'s "
                                         f"{counts[source]} partitions (ALTER on {changelog})"):
                    await admin.create_partitions({changelog: NewPartitions(total_count=counts[source])})
            except InvalidPartitionsError:
                # a worker starting beside this one grew it first: the count wanted, checked below (aiokafka raises the
                # broker's refusal, which ended this worker on a traceback)
                continue
            log.warning("state changelog given its input topic's partition count (it holds no state yet)", extra={
                "changelog": changelog, "from": counts[changelog], "to": counts[source], "input": source})
        deadline = time.monotonic() + TOPICS_SHOWN_TIMEOUT
        while still := [c for c, src in short.items() if counts.get(c, 0) < counts[src]]:
            if time.monotonic() > deadline:
                raise TopicsNotCreated(f"{', '.join(still)}: not given their input topics' partition counts (the broker "
                                       f"refused, or has not shown them after {TOPICS_SHOWN_TIMEOUT:g} s)")
            await asyncio.sleep(0.1)
            counts.update(await _until_led(admin, still))
    finally:
        await admin.close()
    return {source: counts[source] for source, _ in pairs}


async def _holds_records(settings: KafkaSettings, topic: str, partitions: int) -> bool:
    """Whether any of ``topic``'s partitions has ever held a record (its end offset is above 0)."""
    c = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, **settings.aiokafka_kwargs())
    await c.start()
    try:
        ends = await c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        await c.stop()
    return any(ends.values())


def _created(settings: KafkaSettings, response: Any) -> None:
    """Raise TopicsNotCreated, naming the first and how many, if a CreateTopics ``response`` refused topics (one that
    exists already, made by another worker meanwhile, is fine). aiokafka returns the refusals in the response rather than raising them: a
    replication factor above the brokers up, or a missing ACL, went unnoticed, and the first client to send or
    subscribe had the broker make the topic with its own defaults (one replica where three were asked for)."""
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    refused = {t[0]: (for_code(t[1]).__name__, t[2] if len(t) > 2 else None) for t in response.topic_errors
               if t[1] not in (0, TopicAlreadyExistsError.errno)}
    if refused:
        name, (error, message) = next(iter(sorted(refused.items())))
        raise TopicsNotCreated(f"the broker refused to create {len(refused)} topic(s), e.g. {name}: {error}"
                               + (f" ({message})" if message else "") + f"; asked for {settings.partitions} partitions "
                               f"and {settings.replication_factor} replicas (--partitions, --replication-factor or "
                               f"KIBITZ_KAFKA_PARTITIONS, KIBITZ_KAFKA_REPLICATION_FACTOR): a replication factor above "
                               f"the brokers that are up, or credentials without the right to create topics (then have "
                               f"them created beforehand, as README, Topics lists them)")


async def ensure_topics(settings: KafkaSettings, names: Sequence[str] | None = None) -> None:
    """Create kibitz's topics (``settings.partitions`` partitions, ``settings.replication_factor`` replicas) and its
    compacted state changelogs if missing; ``names``: only these (a producer's: the topics it writes, which are what
    its credentials may see on a cluster with ACLs). The workers and the producers (``produce``, ``follow --produce``)
    call it before their first record, and the readers (``serve``, ``tail``) wait for the topics: on a broker that
    creates topics on first use (Kafka's default), a first send or subscription would otherwise create one with the
    broker's defaults (one partition, one replica), which the worker would then find there and use as it is."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(**settings.aiokafka_kwargs())
    await admin.start()
    try:
        ours = list(names) if names is not None else settings.topics.all() + settings.topics.changelogs()
        existing = set(await admin.list_topics())
        compacted = set(settings.topics.changelogs())
        configs = {**{n: CHANGELOG_CONFIG for n in compacted}, settings.topics.deadletter: DEADLETTER_CONFIG}
        new = [NewTopic(n, settings.partitions, settings.replication_factor, topic_configs=configs.get(n, {}))
               for n in ours if n not in existing]
        if new:
            _created(settings, await admin.create_topics(new))
            await _until_led(admin, [t.name for t in new])
        there = [n for n in ours if n in existing]
        counts = {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics(there)} if there else {}
    finally:
        await admin.close()
    other = {n: k for n, k in counts.items() if k != settings.partitions}
    if other:
        # kept as they are: more partitions would move games and players to partitions whose state does not hold them
        log.warning("topics already there with another partition count than configured: used as they are", extra={
            "configured": settings.partitions, "topics": {n: other[n] for n in sorted(other)}})
