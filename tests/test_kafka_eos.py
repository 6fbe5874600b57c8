"""The transactional runtime's batch logic, without a broker: what a transaction may commit (the broker tests are in
test_kafka.py)."""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace

from aiokafka import TopicPartition

from streamer.kafka_eos import Stage, StageConfig, TrackedState
from streamer.pipeline import GameState


def stage(step, *, window: int, commit_seconds: float) -> Stage:
    s = Stage.__new__(Stage)  # no Kafka clients: only the batch logic is under test
    s.repeats, s.metrics, s.failure, s.unprogressed = set(), None, None, {}
    s.cfg = StageConfig("t", "in", "log", step, GameState, window=window, commit_seconds=commit_seconds,
                        state={0: TrackedState(), 1: TrackedState()})
    return s


def batch(seed: int, n: int = 60):
    rng = random.Random(seed)
    out: dict[TopicPartition, list] = {}
    for p in (0, 1):
        out[TopicPartition("in", p)] = [SimpleNamespace(topic="in", partition=p, offset=100 + i, key=f"g{rng.randrange(5)}".encode(),
                                                        value=b"") for i in range(n)]
    return out


async def test_a_transaction_commits_an_unbroken_prefix_of_each_partition_and_keeps_key_order():
    for seed in range(5):
        done: list[tuple[int, int]] = []
        running: dict[tuple[int, bytes], int] = {}

        async def step(state, key, raw, source, seed=seed, running=running, done=done):  # noqa: ANN001
            p, off = source.split("/")[1].split("@")
            k = (int(p), key)
            assert running.get(k, 0) == 0, "two records of one key ran at once"
            running[k] = 1
            await asyncio.sleep(random.Random(f"{seed}{source}").uniform(0, 0.01))
            running[k] = 0
            done.append((int(p), int(off)))
            return [("out", key, source)]

        b = batch(seed)
        nxt, outputs = await stage(step, window=4, commit_seconds=0.05)._run(b)
        for tp, recs in b.items():
            processed = sorted(o for p, o in done if p == tp.partition)
            assert processed == list(range(100, nxt[tp])), "processed records are exactly the committed prefix"
            assert nxt[tp] < 160, "the deadline cut the batch (else this test proves nothing)"
            for key in {r.key for r in recs}:
                order = [o for p, o in done if p == tp.partition and any(r.offset == o and r.key == key for r in recs)]
                assert order == sorted(order), "one key's records run in offset order"
        assert sum(len(o) for o in outputs.values()) == len(done)


async def test_window_one_is_strictly_sequential():
    seen: list[str] = []

    async def step(state, key, raw, source):  # noqa: ANN001
        seen.append(source)
        await asyncio.sleep(0)
        return []

    b = batch(1, n=10)
    nxt, _ = await stage(step, window=1, commit_seconds=10)._run(b)
    assert nxt == {tp: 110 for tp in b}
    expected = [f"in/{p}@{100 + i}" for i in range(10) for p in (0, 1)]  # partitions interleaved, offsets in order
    assert seen == expected


async def test_window_one_stops_at_the_deadline_on_a_prefix():
    seen: list[str] = []

    async def step(state, key, raw, source):  # noqa: ANN001
        seen.append(source)
        await asyncio.sleep(0.01)
        return [("out", key, source)]

    b = batch(2, n=30)
    nxt, outputs = await stage(step, window=1, commit_seconds=0.05)._run(b)
    assert 100 < min(nxt.values()) and max(nxt.values()) < 130, "the deadline cut the batch"
    assert seen == [f"in/{p}@{o}" for o in range(100, 130) for p in (0, 1) if o < nxt[TopicPartition("in", p)]]
    for p in (0, 1):  # each partition's outputs in its records' order
        assert [src for *_, src in outputs[p]] == [x for x in seen if x.startswith(f"in/{p}@")]


def test_tracked_state_reports_each_changed_key_once():
    s = TrackedState()
    s["a"] = 1
    s["a"] = 2
    s["b"] = 3
    s.pop("b")
    assert s.changes() == [("a", 2), ("b", None)]
    assert s.changes() == []


async def test_a_batch_fetched_across_a_rebalance_is_dropped_and_reread_from_the_committed_offsets():
    """The two-worker test once published 9 assessments twice: a batch fetched before a rebalance was processed after
    it, and the consumer, reset to the committed offsets, fetched the same records again."""
    calls: list[str] = []

    async def step(state, key, raw, source):  # noqa: ANN001
        calls.append(source)
        return []

    s = stage(step, window=1, commit_seconds=10)
    tp = TopicPartition("in", 0)
    b = {tp: batch(0, n=3)[tp]}

    class Consumer:
        def __init__(self) -> None:
            self.fetches = 0
            self.seeks: list[tuple[TopicPartition, int]] = []

        async def getmany(self, **kw):  # noqa: ANN003
            self.fetches += 1
            if self.fetches == 1:
                s.generation += 1  # a rebalance callback ran while this fetch was out
                return b
            raise asyncio.CancelledError  # stop the loop

        def assignment(self):  # noqa: ANN201
            return {tp}

        async def committed(self, tp):  # noqa: ANN001, ANN201
            return 100

        def seek(self, tp, offset) -> None:  # noqa: ANN001
            self.seeks.append((tp, offset))

        async def start(self) -> None: ...
        async def stop(self) -> None: ...
        def subscribe(self, *a, **kw) -> None: ...  # noqa: ANN002, ANN003

    s.consumer, s.producers, s.fenced, s.lock, s.generation = Consumer(), {}, set(), asyncio.Lock(), 0
    try:
        await s.run()
    except asyncio.CancelledError:
        pass
    assert calls == [] and s.consumer.seeks == [(tp, 100)]


class Counter:
    """A minimal state: how many records of its key were applied, and the offset of the last one."""

    def __init__(self, n: int, input_offset: int = -1) -> None:
        self.n, self.input_offset = n, input_offset

    def to_dict(self) -> dict:
        return {"n": self.n, "input_offset": self.input_offset}

    def copy(self) -> Counter:
        return Counter(self.n, self.input_offset)

    @classmethod
    def from_dict(cls, d: dict) -> Counter:
        return cls(d["n"], d["input_offset"])


async def test_a_hung_record_is_left_for_the_next_transaction_and_the_rest_commits():
    """One record never finishes: after commit_seconds + straggler_seconds the transaction commits everything that
    finished; the hung record and its game's later records are undone (state put back) and its partition's offset
    stops there. Re-reading from that offset applies exactly the undone records: the others are skipped."""
    hang = asyncio.Event()
    applied: list[str] = []

    async def step(state, key, raw, source):  # noqa: ANN001
        k = key.decode()
        old = state.get(k)
        state[k] = Counter((old.n if old else 0) + 1, old.input_offset if old else -1)
        if source == "in/0@105":
            await hang.wait()  # a search that never answers
        await asyncio.sleep(0.001)
        applied.append(source)
        return [("out", key, source)]

    s = stage(step, window=4, commit_seconds=0.05)
    s.cfg.codec, s.cfg.straggler_seconds, s.stragglers, s.repeats = Counter, 0.2, 0, set()
    b = batch(3, n=12)
    p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    hung_key = b[p0][5].key
    held = [r for r in b[p0] if r.key == hung_key and r.offset >= 105]
    started = time.monotonic()
    nxt, outputs = await s._run(b)
    assert time.monotonic() - started < 1.0
    assert nxt[p0] == 105 and nxt[p1] == 112 and s.stragglers == 1
    done = {src for outs in outputs.values() for _, _, src in outs}
    assert done == {f"in/{r.partition}@{r.offset}" for recs in b.values() for r in recs if r not in held}
    # the next transaction re-reads partition 0 from 105: only the undone records run again
    hang.set()
    applied.clear()
    again, outputs = await s._run({p0: b[p0][5:]})
    assert again[p0] == 112 and sorted(applied) == sorted(f"in/0@{r.offset}" for r in held)
    for key in {r.key for r in b[p0]}:
        mine = [r for r in b[p0] if r.key == key]
        assert s.cfg.state[0][key.decode()].n == len(mine), "each record applied exactly once"
        assert s.cfg.state[0][key.decode()].input_offset == mine[-1].offset
