"""CPU cost of kibitz's three streaming steps per record, without Kafka: what a worker spends besides the broker.

    python bench/steps_cost.py [--reps 3]

Replays the 36 London 2011 games (3,502 events, 3,430 moves) through :meth:`streamer.steps.Steps.game_record` (analyses from
the cache bench/throughput.py fills, depth 6 multipv 4: run that once first, or the engine is timed too), their 3,502
assessments and results (one event) through :meth:`streamer.steps.Steps.pool_record` (the event prior) and then
:meth:`streamer.steps.Steps.player_record`, each game under a new id per repetition.
Baseline in the same run: parsing the same input records and serialising the same outputs with pydantic, the
least any step must do. Prints microseconds per record (the best repetition after the first, which warms the
in-memory cache) and the serialised player state's size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import replace

from common import ROOT
from throughput import CACHE, events_of

from analyzers.calibration import load_calibration
from analyzers.combination import load_combination
from analyzers.engine import EnginePool
from analyzers.eventpool import load_event_pool
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model
from schemas import parse_event, parse_player_event
from streamer.ingest import read_pgn_games
from streamer.pipeline import PipelineConfig, model_estimates
from streamer.state_store import TrackedState
from streamer.steps import Steps


async def run(reps: int) -> None:
    games = list(read_pgn_games(ROOT / "tests/fixtures/london_chess_classic_2011.pgn"))
    # the live configuration: the fast profile's calibration and move model (the searches are shallower, from cache)
    config = PipelineConfig(replace(get_profile("fast"), name="fast*", depth=6, multipv=4), load_calibration("fast"),
                            model=load_move_model("fast"), combination=load_combination("fast"),
                            event_pool=load_event_pool("fast"))
    rows = []
    async with EnginePool(size=1, cache_path=CACHE) as pool:
        steps = Steps(config, pool)
        for rep in range(reps):
            events = [(e["game_id"].encode(), json.dumps(e).encode()) for e in events_of(games, f"#{rep}")]
            games_state, events_state, players_state = TrackedState(), TrackedState(), TrackedState()
            t0 = time.perf_counter()
            outs = []
            for key, raw in events:
                outs += await steps.game_record(games_state, key, raw, "bench")
            t1 = time.perf_counter()
            pooled = [(o.key_bytes, o.message.model_dump_json().encode()) for o in outs]
            tp0 = time.perf_counter()
            passed = []
            for key, raw in pooled:
                passed += steps.pool_record(events_state, key, raw, "bench")
            tp1 = time.perf_counter()
            records = [(o.key_bytes, o.message.model_dump_json().encode()) for o in passed]
            t2 = time.perf_counter()
            published = []
            for key, raw in records:
                published += steps.player_record(players_state, key, raw, "bench")
            t3 = time.perf_counter()
            for _, raw in events:  # baseline: parse what the steps parse, serialise what they publish
                parse_event(raw)
            for _, raw in records:
                parse_player_event(raw)
            for o in published:
                o.message.model_dump_json()
            t4 = time.perf_counter()
            size = sum(len(json.dumps(s.to_dict(), separators=(",", ":"))) for s in players_state.values()) / len(players_state)
            ev_size = sum(len(json.dumps(s.to_dict(), separators=(",", ":"))) for s in events_state.values())
            rows.append(((t1 - t0) / len(events), (t3 - t2) / len(records), (t4 - t3) / (len(events) + len(records)),
                         len(events), len(records), size, (tp1 - tp0) / len(pooled), ev_size))
    best = min(rows[1:] or rows, key=lambda r: r[0] + r[1] + r[6])
    g, p, base, n_ev, n_rec, size, pool_us, ev_size = best
    print(f"steps_cost: 36 London 2011 games, {n_ev} events -> {n_rec} assessments/results; analyses from {CACHE.name}; "
          f"best of {max(1, reps - 1)} warm repetitions")
    print(f"  game step (moves -> assessments):          {g * 1e6:6.0f} us/record")
    print(f"  pool step (the event prior):                {pool_us * 1e6:6.0f} us/record")
    print(f"  player step (assessments -> ratings):       {p * 1e6:6.0f} us/record")
    print(f"  baseline, pydantic parse + serialise only:  {base * 1e6:6.0f} us/record (steps / baseline "
          f"{(g + p) / 2 / base:.1f}x)")
    print(f"  player state, serialised: {size / 1000:.1f} KB per player; the event's evidence at the end: {ev_size / 1000:.1f} KB")
    publish_cost(config, players_state)


def publish_cost(config: PipelineConfig, players_state: TrackedState) -> None:
    """The combination's share of a publish: London 2011 has no clocks, so the step above publishes the move model's
    estimate. Here every open scope's estimate is computed with and without the combination (its clocked count set to
    its moves: the clock values change the number, not the cost), alternating, best of 5."""
    scopes = [sc for st in players_state.values() for sc in (st.overall, *st.events.values()) if sc.rating.n]
    for sc in scopes:
        sc.feats.clocked = sc.feats.timed = sc.feats.n
    times: dict[str, list[float]] = {"move model alone": [], "with the combination": []}
    model = config.model
    assert model is not None  # the live configuration has one
    for _ in range(5):
        for name, comb in (("move model alone", None), ("with the combination", config.combination)):
            t = time.perf_counter()
            for sc in scopes:
                model_estimates(sc, model, comb, declared=(2700.0, None))
            times[name].append((time.perf_counter() - t) / len(scopes))
    base = min(times["move model alone"])
    for name, ts in times.items():
        print(f"  one published estimate, {name + ':':<22} {min(ts) * 1e6:6.0f} us ({min(ts) / base:.2f}x), "
              f"{len(scopes)} scopes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    asyncio.run(run(ap.parse_args().reps))


if __name__ == "__main__":
    main()
