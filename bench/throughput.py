"""Streaming throughput and latency through the real broker and a real `kibitz worker`, engine cost removed.

    python bench/throughput.py [--rates 100,500] [--runtime transactional|faust] [--split] [--store memory|rocksdb]
                               [--calibrated | --review] [--no-event-pool] [--passes N] [--repeat N]

1. Fills an analysis cache for the 36 London 2011 games (the embedded runtime, depth 6 multipv 4), so the worker's
   engine searches are all cache hits and what is measured is kibitz + the runtime + Kafka.
2. Baseline, same run: the bare broker, producing and consuming the same number of records with aiokafka.
3. Throughput: all events of the 36 games produced at once; moves per second from the first send to the last
   game-scope PerceivedRating read back (read_committed). The first pass finds the worker's in-memory analysis cache
   cold (every position is read from the SQLite cache): it is reported as "cold". Then ``--passes`` more passes under
   new game ids (same positions, so the worker's in-memory LRU serves them, as it would the popular positions of a
   live platform) give the steady-state number: their median, and each. A pass is short (3,430 moves in a few
   seconds), so the time the stages take to fill and drain (each commits its transactions every 0.25 s) weighs in it;
   ``--repeat N`` sends the games N times per pass under distinct ids, so that it weighs N times less.
4. Latency at fixed offered loads: the same games under new ids, moves sent at each of --rates per second; for each move the
   time from its send to its PerceivedRating read back; p50 and p99.
Targets: >= 2,000 moves/s per worker; p99 < 100 ms at 500 moves/s.

``--calibrated`` runs the profile's own limits (fast: depth 8, multipv 5) instead of the shallower ones, and
``--review`` the same with the worker's ``--review``: London 2011 raises no fair-play finding, so what it measures is
the cost of keeping each player's last games in the rate stage's state; compare it with ``--calibrated``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time

import numpy as np
from common import ROOT

from streamer.devkafka import Broker, fresh_prefix, start_workers
from streamer.ingest import read_pgn_games
from streamer.kafka_config import Topics

LIMITS = ["--depth", "6", "--multipv", "4"]
CACHE = ROOT / ".cache" / "bench-throughput.sqlite"


def pass_events(games, suffix: str, repeat: int) -> list[dict]:
    """The games' events ``repeat`` times under distinct ids, interleaved game by game as a live platform sends them."""
    copies = [events_of(games, f"{suffix}.{r}" if repeat > 1 else suffix) for r in range(repeat)]
    return [e for group in zip(*copies, strict=True) for e in group]


def events_of(games, suffix=""):
    out = []
    for g in games:
        for ev in g.events():
            d = json.loads(ev.model_dump_json())
            d["game_id"] += suffix
            out.append(d)
    return out


async def bare_broker(broker: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = fresh_prefix() + "bare"
    p = AIOKafkaProducer(bootstrap_servers=broker, enable_idempotence=True, acks="all", linger_ms=5)
    c = AIOKafkaConsumer(topic, bootstrap_servers=broker, group_id=None, auto_offset_reset="earliest", isolation_level="read_committed")
    await p.start()
    await p.send_and_wait(topic, b"warm")
    await c.start()
    payload = b"x" * 200
    t = time.perf_counter()
    for i in range(n):
        await p.send(topic, payload, key=str(i % 36).encode())
    await p.flush()
    got = 0
    while got < n + 1:
        for recs in (await c.getmany(timeout_ms=200)).values():
            got += len(recs)
    elapsed = time.perf_counter() - t
    await p.stop()
    await c.stop()
    return elapsed


async def run_phase(broker: str, topics: Topics, events: list[dict], rate: float | None, timeout: float = 600):
    """Send events (all at once, or moves paced at ``rate``/s); returns (elapsed, per-move latencies)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    ids = {e["game_id"] for e in events}
    moves = sum(1 for e in events if e["type"] == "move")
    c = AIOKafkaConsumer(topics.perceived, bootstrap_servers=broker, group_id=None, auto_offset_reset="latest", fetch_max_wait_ms=10, consumer_timeout_ms=10,
                         isolation_level="read_committed")
    await c.start()
    await c.getmany(timeout_ms=1000)  # positions the consumer at the end before anything is sent
    p = AIOKafkaProducer(bootstrap_servers=broker, enable_idempotence=True, acks="all", linger_ms=2)
    await p.start()
    sent: dict[tuple[str, int], float] = {}
    latencies: list[float] = []

    async def consume():
        while len(latencies) < moves:
            for recs in (await c.getmany(timeout_ms=200)).values():
                now = time.perf_counter()
                for r in recs:
                    m = json.loads(r.value)
                    key = (m["game_id"], m["ply"])
                    if m["scope"] == "game" and m["game_id"] in ids and key in sent:
                        latencies.append(now - sent[key])

    reader = asyncio.create_task(consume())
    t0 = time.perf_counter()
    i = 0
    for e in events:
        if rate and e["type"] == "move":
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            i += 1
        if e["type"] == "move":
            sent[(e["game_id"], e["ply"])] = time.perf_counter()
        await p.send(topics.moves, json.dumps(e).encode(), key=e["game_id"].encode())  # linger_ms=2 bounds batching
    await p.flush()
    send_seconds = time.perf_counter() - t0
    await asyncio.wait_for(reader, timeout)
    elapsed = time.perf_counter() - t0
    await p.stop()
    await c.stop()
    return elapsed, latencies, moves / send_seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="100,500", help="offered loads for the latency phases, moves/s (default %(default)s)")
    ap.add_argument("--runtime", choices=["transactional", "faust"], default="transactional")
    ap.add_argument("--split", action="store_true", help="transactional: each stage in a process of its own (--stages)")
    ap.add_argument("--store", choices=["memory", "rocksdb"], default="memory", help="the worker's state store")
    ap.add_argument("--passes", type=int, default=3, help="timed throughput passes after the cold one (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=1, help="each timed pass sends the 36 games this many times, under "
                    "distinct ids, so that the stages' fill and drain weigh less in a pass (default %(default)s)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--calibrated", action="store_true", help="the profile's own limits (depth 8, multipv 5)")
    mode.add_argument("--review", action="store_true", help="the profile's own limits and the worker's --review")
    ap.add_argument("--no-event-pool", action="store_true", help="the worker's --no-event-pool: no pool stage (each player "
                    "rated from their own moves), to measure what the event prior's stage costs")
    args = ap.parse_args()
    limits = [] if args.calibrated or args.review else LIMITS
    pgn = ROOT / "tests/fixtures/london_chess_classic_2011.pgn"
    games = list(read_pgn_games(pgn))
    CACHE.parent.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-m", "streamer.cli", "replay", str(pgn), "--max-speed", "--no-ui", "--cache", str(CACHE),
                    *limits, "--engines", "2"], cwd=ROOT, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    broker = Broker()
    address = broker.start()
    prefix = fresh_prefix()
    topics = Topics(prefix=prefix)
    common = [*limits, "--engines", "1", "--cache", str(CACHE), "--runtime", args.runtime, "--store", args.store,
              "--data-dir", str(ROOT / ".cache" / "bench-state"), *(["--review"] if args.review else []),
              *(["--no-event-pool"] if args.no_event_pool else [])]
    workers = start_workers(address, prefix, *common, split=args.split)
    try:
        # warm-up: one game under its own id, so startup and the first rebalance are not timed
        asyncio.run(run_phase(address, topics, events_of(games[:1], "#warm"), None, timeout=180))
        all_events = events_of(games, "#tp")
        moves = sum(1 for e in all_events if e["type"] == "move")
        base = asyncio.run(bare_broker(address, len(all_events)))
        cold, _, _ = asyncio.run(run_phase(address, topics, all_events, None))
        passes = [asyncio.run(run_phase(address, topics, pass_events(games, f"#tp{i}", args.repeat), None))[0]
                  for i in range(args.passes)]
        elapsed = float(np.median(passes))
        latency = []
        for rate in [float(r) for r in args.rates.split(",")]:
            _, lat, offered = asyncio.run(run_phase(address, topics, events_of(games, f"#lat{rate:g}"), rate))
            latency.append((rate, offered, np.array(lat) * 1000))
    finally:
        for w in workers:
            w.stop()
        broker.stop()
    print(f"throughput: {len(games)} London 2011 games, {moves} moves, {len(all_events)} events; analyses from cache; 1 worker "
          f"({args.runtime} runtime{', one process per stage' if args.split else ''}, {args.store} store), 1 engine, "
          f"{'profile limits' + (' and --review' if args.review else '') if limits == [] else 'limits ' + ' '.join(LIMITS)}"
          f"{', no event pooling' if args.no_event_pool else ''}")
    print(f"  bare broker, produce + consume {len(all_events)} records: {len(all_events) / base:8.0f} records/s")
    print(f"  kibitz worker, cold pass (analyses read from SQLite): {moves / cold:8.0f} moves/s")
    moves_pass = moves * args.repeat
    print(f"  kibitz worker, moves in -> perceived ratings out:    {moves_pass / elapsed:8.0f} moves/s, median of {len(passes)} "
          f"passes of {moves_pass} moves ({', '.join(f'{moves_pass / e:.0f}' for e in passes)}); ratio to bare broker "
          f"{moves_pass / elapsed / (len(all_events) / base):.3f}; target >= 2000 moves/s")
    for rate, offered, lat_ms in latency:
        print(f"  latency at {offered:4.0f} moves/s offered ({rate:g} asked), send -> rating read back: p50 {np.percentile(lat_ms, 50):7.1f} ms, "
              f"p99 {np.percentile(lat_ms, 99):7.1f} ms, max {lat_ms.max():7.1f} ms over {len(lat_ms)} moves")
    print("  (target: p99 < 100 ms at 500 moves/s)")


if __name__ == "__main__":
    main()
