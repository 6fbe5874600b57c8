"""The transactional runtime's batch logic, without a broker: what a transaction may commit (the broker tests are in
test_kafka.py)."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

from aiokafka import TopicPartition

from streamer.kafka_eos import Stage, StageConfig, TrackedState
from streamer.pipeline import GameState


def stage(step, *, window: int, commit_seconds: float) -> Stage:
    s = Stage.__new__(Stage)  # no Kafka clients: only the batch logic is under test
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
        assert sum(len(o) for o in outputs) == len(done)


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
    assert [o[0][2] for o in outputs] == seen


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

    class Producer:
        async def start(self) -> None: ...
        async def stop(self) -> None: ...

    s.consumer, s.producer, s.lock, s.generation = Consumer(), Producer(), asyncio.Lock(), 0
    try:
        await s.run()
    except asyncio.CancelledError:
        pass
    assert calls == [] and s.consumer.seeks == [(tp, 100)]
