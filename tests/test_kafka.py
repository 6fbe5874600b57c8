"""The streaming runtime against the real Apache Kafka broker (started by the session fixture) and real workers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import chess
import pytest
from conftest import made_once

from analyzers.fairplay import DEFAULT_REVIEW_Z
from streamer.devbrowser import free_port
from streamer.devkafka import ROOT, Broker, Cluster, WorkerProcess, consume_until, fresh_prefix, poll, produce, read_topic, start_workers, waiting_line
from streamer.ingest import DEMO_PGN, read_pgn_games
from streamer.kafka_config import STAGES, Topics, running_stages

#: What a worker runs without --review (the review stage only runs with it)
RUNNING = running_stages(STAGES, review=False)

pytestmark = pytest.mark.kafka
#: Shallow limits; event pooling off, because with it a rating depends on how the analyse stage interleaves the
#: event's other games, which differs between runtimes and runs (test_event_pooling_... runs it on)
POOLED = ["--depth", "6", "--multipv", "4"]
LIMITS = [*POOLED, "--no-event-pool"]


@pytest.fixture(scope="session")
def broker():
    """One broker per test process (its own port in each parallel one), started before its first Kafka test."""
    b = Broker()
    address = b.start()
    yield address
    b.stop()


def cli(*args, timeout=600, env: dict[str, str] | None = None):
    return subprocess.run([sys.executable, "-m", "streamer.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)


@pytest.fixture(scope="session")
def london_searches(london, tmp_path_factory) -> Path:
    """An analysis cache holding Stockfish's searches of every London 2011 position at :data:`LIMITS`, made once by
    the embedded runtime. The embedded runtime that a streaming test compares the worker with reads its searches from
    here, so that it does not take the CPU from the worker under test; the workers of the tests whose subject is the
    runtime (end to end, event pooling, the fault tests) read them too, and the fault tests pace their producer so
    that the fault still falls mid-stream. A search is deterministic (docs/models.md), so a cached one equals a fresh
    one (tests/test_embedded.py replays with and without a cache and compares). Made once per run when the tests run
    in parallel too."""
    def make(cache: Path) -> None:
        r = cli("replay", str(london), "--max-speed", "--no-ui", *LIMITS, "--engines", "2", "--cache", str(cache))
        assert r.returncode == 0, r.stderr

    return made_once(tmp_path_factory, "london_searches.sqlite", make)


def cache_args(cache: Path | None) -> list[str]:
    """The command-line option that reads searches from ``cache`` (none without one)."""
    return ["--cache", str(cache)] if cache else []


def embedded_outputs(pgn: Path, tmp_path: Path, cache: Path | None = None):
    """Start the embedded runtime on the same input and limits (a subprocess, so it can run beside the worker),
    with its searches from ``cache`` where it holds them."""
    out = tmp_path / f"embedded-{pgn.stem}.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "streamer.cli", "replay", str(pgn), "--max-speed", "--no-ui",
                             "--out", str(out), *LIMITS, "--engines", "1", *cache_args(cache)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, out


@contextmanager
def worker_beside_embedded(broker: str, pgn: Path, tmp_path: Path, runtime: str = "transactional",
                           cache: Path | None = None):
    """A real worker on fresh topics, and the embedded runtime on the same PGN and limits running beside it, both with
    their searches from ``cache`` where it holds them.

    Yields (topics, embedded process, its output file, the worker processes); the workers are stopped on exit.
    """
    prefix = fresh_prefix()
    args = [*LIMITS, "--engines", "1", "--runtime", runtime.removesuffix("-split"), *cache_args(cache)]
    workers = start_workers(broker, prefix, *args, split=runtime.endswith("-split"))
    emb, emb_out = embedded_outputs(pgn, tmp_path, cache)
    try:
        yield Topics(prefix=prefix), emb, emb_out, workers
    finally:
        for w in workers:
            w.stop()


def summarise(records):
    msgs = [json.loads(r) for r in records]
    perceived = {(m["game_id"], m["ply"], m["scope"], m["player_id"]): (m["rating"], m["low"], m["high"], m["c_mean"])
                 for m in msgs if m["type"] == "perceived"}
    glicko = {(m["game_id"], m["player_id"]): (m["after"]["rating"], m["after"]["rd"]) for m in msgs if m["type"] == "glicko2"}
    return msgs, perceived, glicko


def test_london_2011_end_to_end_matches_the_embedded_runtime(broker, london, london_searches, tmp_path):
    """London 2011 (36 games, 9 players) through a worker and through the embedded runtime, both with their searches
    from the same cache (what is compared is the two runtimes' steps; the fault tests below compare a worker that
    searches afresh): every output once, equal ratings."""
    pgn = london
    games = list(read_pgn_games(pgn))
    with worker_beside_embedded(broker, pgn, tmp_path, cache=london_searches) as (t, emb, emb_out, workers):
        r = cli("produce", str(pgn), "--max-speed", "--broker", broker, "--topic-prefix", t.prefix)
        assert r.returncode == 0, r.stderr

        out = asyncio.run(consume_until(broker, [t.assessments, t.perceived, t.glicko2, t.deadletter], all_rated(t, games), timeout=420,
                                        workers=workers))
    assert emb.wait(420) == 0, emb.stderr.read()
    # Game-scope ratings equal the embedded runtime's rating for rating. Event and player scopes and the Glicko-2
    # chain aggregate over a player's games in the order they are processed; at --max-speed a player's 8 games run
    # at once and that interleaving is up to each runtime's scheduling, so the helper compares what does not depend
    # on it. (The round-1 test below, one game per player, compares every scope exactly.)
    assert_exactly_once_and_equal_to_embedded(out, t, games, emb_out)
    scores = {(m["game_id"], m["player_id"]): m["score"] for m in map(json.loads, out[t.glicko2])}
    emb_msgs = [json.loads(x) for x in emb_out.read_text().splitlines()]
    assert scores == {(m["game_id"], m["player_id"]): m["score"] for m in emb_msgs if m["type"] == "glicko2"}
    # what the state changelogs hold after the run (before compaction: their segments are still open)
    for topic in t.changelogs():
        held = asyncio.run(read_topic(broker, topic))
        values = [v for vs in held.values() for v in vs]
        live = [vs[-1] for vs in held.values() if vs[-1] is not None]
        print(f"{topic}: {len(values)} records, {sum(len(v or b'') for v in values) / 1e6:.2f} MB; live state "
              f"{len(live)} keys, {sum(map(len, live)) / 1e3:.0f} KB")


def test_event_pooling_runs_through_the_pool_stage_exactly_once(broker, london, london_searches):
    """With event pooling on (the default), London 2011's assessments go by way of the pool stage: every ply still
    gets exactly one assessment and one game-scope rating, the ratings after the event's first moves start from the
    event prior, and the pool stage keeps its evidence in its changelog. (The searches come from the cache: event
    pooling does not change them.)"""
    games = list(read_pgn_games(london))
    plies = sum(len(g.moves) for g in games)
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    workers = start_workers(broker, prefix, *POOLED, "--engines", "2", *cache_args(london_searches))
    try:
        r = cli("produce", str(london), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
        assert r.returncode == 0, r.stderr
        out = asyncio.run(consume_until(
            broker, [t.assessments, t.perceived, t.glicko2, t.deadletter],
            lambda o: sum(b'"scope":"game"' in x for x in o[t.perceived]) >= plies and len(o[t.glicko2]) >= 2 * len(games),
            timeout=420, workers=workers))
    finally:
        for w in workers:
            w.stop()
    moves = [(a["game_id"], a["ply"]) for a in map(json.loads, out[t.assessments]) if a["type"] == "assessment"]
    assert len(moves) == len(set(moves)) == plies
    rated = [m for m in map(json.loads, out[t.perceived]) if m["scope"] == "game"]
    assert len({(m["game_id"], m["ply"]) for m in rated}) == len(rated) == plies
    assert out[t.deadletter] == []
    pooled = [m for m in rated if (m["prior"] or "").startswith("event (")]
    assert len(pooled) > 0.9 * len([m for m in rated if m["prior"]]), "after the first counted moves, the event prior"
    assert all(m["low"] <= m["rating"] <= m["high"] for m in pooled)
    evidence = asyncio.run(read_topic(broker, t.state_events))
    assert list(evidence) == [b"3rd London Chess Classic"], "one event, one key of evidence"


def test_the_review_stage_searches_an_alerts_games_again_and_publishes_its_verdict_once(broker, tmp_path):
    """``kibitz worker --review``: three games of one event in which White plays the review's own first choice
    (tests/fixtures/review_assisted.pgn), produced one after another as they are played. The rate stage's alerts go
    out with review requests holding their scope's games; the review stage searches them again and publishes, once
    per request, White's verdict at the action tier with the review's evidence."""
    games = re.split(r"\n\n(?=\[Event )", (ROOT / "tests/fixtures/review_assisted.pgn").read_text().strip())
    assert len(games) == 3
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    workers = start_workers(broker, prefix, "--no-event-pool", "--engines", "2", "--review")
    try:
        for i, text in enumerate(games):
            pgn = tmp_path / f"round{i + 1}.pgn"
            pgn.write_text(text + "\n")
            r = cli("produce", str(pgn), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
            assert r.returncode == 0, r.stderr
            asyncio.run(consume_until(broker, [t.glicko2], lambda o, n=i + 1: len(o[t.glicko2]) >= 2 * n, timeout=240,
                                      workers=workers))
        out = asyncio.run(consume_until(
            broker, [t.alerts, t.reviews, t.deadletter, t.state_reviews],
            lambda o: any(b'"stage":"review"' in a and b'"Assisted, A"' in a for a in o[t.alerts]), timeout=300, workers=workers))
    finally:
        for w in workers:
            w.stop()
    alerts = [json.loads(a) for a in out[t.alerts]]
    requests = [json.loads(r) for r in out[t.reviews]]
    service = [a for a in alerts if a["stage"] == "service"]
    verdicts = [a for a in alerts if a["stage"] == "review"]
    assert out[t.deadletter] == []
    # every alert goes for review with the games of its scope (clocks and result included); while a crossing lasts,
    # each game end sends its grown scope again under the same crossing
    assert all(a in [r["alert"] for r in requests] for a in service)
    assert all(r["games"] and all(g["result"] == "1-0" and g["moves"] for g in r["games"]) for r in requests)
    white = [r for r in requests if r["player_id"] == "Assisted, A"]
    assert len(white) >= 2 and len({r["crossing"] for r in white}) == 1 and len(white[-1]["games"]) > len(white[0]["games"])
    (v,) = [a for a in verdicts if a["player_id"] == "Assisted, A"]  # one verdict for the crossing
    assert v["tier"] == "action" and v["z"] >= DEFAULT_REVIEW_Z and v["limits"] == "d12-mpv1" and v["moves"] >= 40
    assert v["observed"] == v["moves"]  # every counted move is the review search's first choice
    assert len({a["player_id"] for a in verdicts}) == len(verdicts)  # one crossing each here: one verdict each
    assert out[t.state_reviews] and json.loads(out[t.state_reviews][-1])["verdicts"]  # the review stage's state


def test_changelogs_are_created_so_that_compaction_runs(broker):
    """A changelog created by ensure_topics (CHANGELOG_CONFIG: 8 MB segments, dirty ratio 0.1) that receives 26 MB of
    versions of 9 states: once segments close, the broker's cleaner keeps only the last version of each key in them,
    so a restore reads a fraction of what was written, and every key's last state."""
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics

    settings = KafkaSettings(broker=broker, partitions=1, topics=Topics(prefix=fresh_prefix()))
    topic = settings.topics.state_players
    asyncio.run(ensure_topics(settings))
    versions = 360
    records = [(f"player{k}".encode(), f"{k}:{v}:".encode().ljust(8_000, b"x")) for v in range(versions) for k in range(9)]
    asyncio.run(produce(broker, topic, records))
    written = sum(len(v) for _, v in records)
    deadline = time.monotonic() + 120
    while True:  # the cleaner wakes every 15 s (log.cleaner.backoff.ms)
        held = asyncio.run(read_topic(broker, topic))
        kept = sum(len(v) for vs in held.values() for v in vs)
        if kept < written / 2 or time.monotonic() > deadline:
            break
        time.sleep(5)
    print(f"changelog: {written / 1e6:.1f} MB written, {kept / 1e6:.1f} MB left to restore after compaction")
    assert kept < written / 2, "compaction ran on the closed segments"
    assert {k: vs[-1].split(b":")[1] for k, vs in held.items()} == {f"player{k}".encode(): str(versions - 1).encode()
                                                                     for k in range(9)}, "every key's last state kept"


def test_the_dead_letters_are_kept_30_days_and_the_other_topics_as_the_broker_keeps_them(broker):
    """kibitz.deadletter, made by the worker or a producer, keeps its records 30 days (Kafka's default is 7): time to
    mend a fault and re-drive them."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics

    async def retention(settings: KafkaSettings, names: list[str]) -> dict[str, str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker)
        await admin.start()
        try:
            (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
        finally:
            await admin.close()
        return {r[3]: next(c[1] for c in r[4] if c[0] == "retention.ms") for r in response.resources}

    for names in (None, ["moves", "games", "deadletter"]):  # the worker's, a producer's
        settings = KafkaSettings(broker=broker, topics=Topics(prefix=fresh_prefix()))
        t = settings.topics
        asyncio.run(ensure_topics(settings, None if names is None else [t.name(n) for n in names]))
        assert asyncio.run(retention(settings, [t.deadletter, t.moves])) == {t.deadletter: str(30 * 86_400_000),
                                                                            t.moves: str(7 * 86_400_000)}


def garbage_stream(seed: int = 7):
    """London round 1 as wire records, with about 5 % bad records of every kind mixed in, and some pairs of a game's
    consecutive moves swapped (a producer's retry): the later ply comes first, waits for the earlier one and changes
    nothing; returns (records, bad)."""
    rng = random.Random(seed)
    records: list[tuple[bytes | None, bytes | None]] = []
    valid: dict[int, int] = {}  # index of each valid move record -> its ply
    swaps: list[int] = []  # valid move records drawn to change places with the record after them
    bad: dict[str, int] = {"malformed": 0, "illegal_move": 0, "unknown_game": 0, "key_mismatch": 0}
    for g in read_pgn_games(DEMO_PGN):
        board = chess.Board()
        for ev in g.events():
            key = g.game_id.encode()
            if ev.type == "move" and rng.random() < 0.02:
                # an illegal move at exactly the ply the game expects next, then the real one
                illegal = next(m for m in ("h1h8", "a1a8", "e1e8", "h8h1", "a8a1") if chess.Move.from_uci(m) not in board.legal_moves)
                records.append((key, json.dumps({"type": "move", "game_id": g.game_id, "ply": ev.ply, "uci": illegal}).encode()))
                bad["illegal_move"] += 1
            if ev.type == "move":
                board.push_uci(ev.uci)
                valid[len(records)] = ev.ply
                if rng.random() < 0.03:
                    swaps.append(len(records))
            records.append((key, ev.model_dump_json().encode()))
            if ev.type == "game_started":
                records.append((key, None))  # a record without a value: a tombstone written by hand or by a tool
                bad["malformed"] += 1
                if not any(v is not None and len(v) > 100_000 for _, v in records):
                    # a producer's bug: 900 KB of binary, under the broker's limit; its dead letter written whole was
                    # over it, and its partition's transactions aborted for ever (the game after it never rated)
                    records.append((key, rng.randbytes(900 * 1024)))
                    bad["malformed"] += 1
                    records.append((b"k" * (900 * 1024), ev.model_dump_json().encode()))  # and a 900 KB key: the same
                    bad["key_mismatch"] += 1
            roll = rng.random()
            if roll < 0.01:
                records.append((key, b"\x00\xffnot json at all"))
                bad["malformed"] += 1
            elif roll < 0.02:
                records.append((key, json.dumps({"type": "move", "game_id": g.game_id, "ply": -3, "uci": "zz"}).encode()))
                bad["malformed"] += 1
            elif roll < 0.03:
                records.append((b"ghost", json.dumps({"type": "move", "game_id": "ghost", "ply": 0, "uci": "e2e4"}).encode()))
                bad["unknown_game"] += 1
            elif roll < 0.04:
                # the same event again under another key (or none): it would land on another partition, outside the
                # game's state and the exactly-once bookkeeping kept under its key
                records.append((rng.choice([None, b"round1"]), ev.model_dump_json().encode()))
                bad["key_mismatch"] += 1
    swapped = 0
    for i in swaps:  # when the record after it is its game's next move (not a bad record, not moved already)
        if valid.get(i + 1) == valid[i] + 1 and records[i + 1][0] == records[i][0] and i - 1 not in swaps:
            records[i], records[i + 1] = records[i + 1], records[i]
            swapped += 1
    assert swapped >= 3
    return records, bad


@pytest.mark.parametrize("runtime", ["transactional", "transactional-split", "faust"])
def test_garbage_is_dead_lettered_and_no_valid_message_is_lost(broker, tmp_path, runtime):
    records, bad = garbage_stream()
    n_bad = sum(bad.values())
    assert 0.03 < n_bad / len(records) < 0.09 and all(bad.values())
    games = list(read_pgn_games(DEMO_PGN))
    with worker_beside_embedded(broker, DEMO_PGN, tmp_path, runtime) as (t, emb, emb_out, workers):
        asyncio.run(produce(broker, t.moves, records))

        def done(o):
            return all_rated(t, games)(o) and len(o[t.deadletter]) >= n_bad

        out = asyncio.run(consume_until(broker, [t.perceived, t.glicko2, t.deadletter], done, timeout=300, workers=workers))
    assert emb.wait(300) == 0
    dead = [json.loads(x) for x in out[t.deadletter]]
    reasons = {k: sum(1 for d in dead if d["reason"] == k) for k in bad}
    assert reasons == bad and len(dead) == n_bad
    assert all(d["raw"] or d["raw_base64"] or "without a value" in d["error"] for d in dead)
    assert all(len(d["error"]) < 10_000 for d in dead)  # the 900 KB key is not quoted whole
    assert [d["raw_size"] for d in dead if d.get("raw_size")] == [900 * 1024]  # the big one keeps its start
    assert [len(d["key"]) for d in dead if d["key"] and d["key"].startswith("kkk")] == [len("k" * 1024 + "... (921600 characters)")]
    assert any("without a value" in d["error"] for d in dead)
    _, perceived, glicko = summarise(out[t.perceived] + out[t.glicko2])
    _, emb_perceived, emb_glicko = summarise(emb_out.read_text().splitlines())
    assert perceived == emb_perceived and glicko == emb_glicko


def test_produce_dead_letters_what_it_refuses_and_sends_the_rest(broker, tmp_path, caplog):
    """``kibitz produce`` of a PGN file with an illegal move and a truncated game, and an SGF game with an illegal
    move: each refusal is printed and lands on ``kibitz.deadletter`` keyed by its game (exit 3), the moves before it
    are sent, and no end is sent for a game that was refused part way."""
    sgf = tmp_path / "occupied.sgf"
    sgf.write_bytes(b"(;GM[1]FF[4]SZ[9]KM[7]RE[B+R];B[ee];W[cc];B[cc];W[gg])")
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    r = cli("produce", str(ROOT / "tests/fixtures/bad.pgn"), str(sgf), "--max-speed", "--broker", broker, "--topic-prefix", prefix,
            env={"KIBITZ_KAFKA_PARTITIONS": "3"})
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("rejected (") == 3, r.stderr
    dead = {k: [json.loads(v) for v in vs] for k, vs in asyncio.run(read_topic(broker, t.deadletter)).items()}
    reasons = {k.decode(): [d["reason"] for d in ds] for k, ds in dead.items()}
    games = {g.game_id: g for g in read_pgn_games(ROOT / "tests/fixtures/bad.pgn")}
    illegal, _, truncated = games
    assert len(games) == 3
    occupied = next(k for k in reasons if k.startswith("occupied"))
    assert reasons == {illegal: ["illegal_move"], truncated: ["truncated"], occupied: ["illegal_move"]}
    assert dead[occupied.encode()][0]["ply"] == 2 and dead[illegal.encode()][0]["ply"] == 2
    moves = {k.decode(): [json.loads(v) for v in vs] for k, vs in asyncio.run(read_topic(broker, t.moves)).items()}
    kinds = {k: [m["type"] for m in ms] for k, ms in moves.items()}
    assert kinds[illegal] == ["game_started", "move", "move"]  # 1. e4 e5 2. Ke3??: the two moves before it
    assert kinds[occupied] == ["game_started", "move", "move"]  # no end: the game is not scored
    assert kinds[truncated][-1] == "move" and all(k[-1] == "game_ended" for g, k in kinds.items()
                                                  if g not in (illegal, occupied, truncated))
    # the topics it writes were created as kibitz configures them (here KIBITZ_KAFKA_PARTITIONS=3), not by the first
    # send with the broker's defaults (4 partitions on this broker; one on Kafka's own defaults); no other topic (on a
    # cluster with ACLs a producer's credentials see and may create only what it writes)
    assert asyncio.run(partition_counts(broker, t.written_by_producers())) == [3, 3, 3]
    assert t.state_games not in asyncio.run(topic_names(broker))
    # a worker configured otherwise uses them as they are (more partitions would move games off their state) and says so
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics

    with caplog.at_level(logging.WARNING, logger="kibitz.eos"):
        asyncio.run(ensure_topics(KafkaSettings(broker=broker, topics=t)))
    (said,) = [r for r in caplog.records if r.message.startswith("topics already there with another partition count")]
    assert said.configured == 4 and said.topics == {n: 3 for n in t.written_by_producers()}
    assert asyncio.run(partition_counts(broker, [t.state_games, t.assessments])) == [4, 4]  # the worker made the rest
    # a live feed through ``follow --produce``: the same refusal on the same topic
    feed = tmp_path / "feed.pgn"
    feed.write_text(ROOT.joinpath("tests/fixtures/bad.pgn").read_text().split("\n\n[Event")[0] + "\n")
    prefix = fresh_prefix()
    r = cli("follow", str(feed), "--produce", "--until-ended", "--interval", "0.2", "--broker", broker,
            "--topic-prefix", prefix, timeout=120)
    assert r.returncode == 0 and "rejected (illegal_move)" in r.stderr, r.stderr
    dead = [json.loads(v) for vs in asyncio.run(read_topic(broker, Topics(prefix=prefix).deadletter)).values() for v in vs]
    assert [(d["reason"], d["ply"]) for d in dead] == [("illegal_move", 2)]


async def partition_counts(broker: str, topics: list[str]) -> list[int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        described = {d["topic"]: d for d in await admin.describe_topics(topics)}
        return [len(described[t]["partitions"]) for t in topics]
    finally:
        await admin.close()


async def topic_names(broker: str) -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


def test_a_record_the_broker_refuses_stops_produce_and_follow_with_one_line(broker, tmp_path):
    """A record the broker refuses for good (here its moves topic takes records of at most 200 bytes, as a topic made
    by hand with a small ``max.message.bytes``; an authorization error is another): ``kibitz produce`` and ``follow
    --produce`` stop with one line naming the refusal, exit 1. The delivery of a record was never checked: produce
    said "produced N events" and exited 0, and a follow's saved state counted the record as sent."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)

    async def small_moves_topic() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(t.moves, 4, 1, topic_configs={"max.message.bytes": "200"})])
        finally:
            await admin.close()

    asyncio.run(small_moves_topic())
    game = ROOT / "tests/fixtures/broadcast_game.pgn"
    r = cli("produce", str(game), "--max-speed", "--broker", broker, "--topic-prefix", prefix, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr.splitlines()[-1].startswith("kibitz: the Kafka broker refused a record: MessageSizeTooLargeError"), r.stderr[-3000:]
    state = tmp_path / "follow.json"
    r = cli("follow", str(game), "--produce", "--state", str(state), "--until-ended", "--interval", "0.2", "--broker", broker,
            "--topic-prefix", prefix, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr.splitlines()[-1].startswith("kibitz: the Kafka broker refused a record: MessageSizeTooLargeError")
    assert not state.exists(), "nothing the broker has not taken is saved as sent"


def test_topics_made_by_ensure_topics_are_in_the_metadata_a_client_reads_next(broker):
    """A KRaft broker answers CreateTopics before its metadata shows the topics: a client asking right after
    ensure_topics missed 13 of its 15 new topics (19 runs of 20), and a worker subscribing then got no partition of
    them until its next metadata refresh, 5 minutes later (the split runtime's garbage test timed out so, now and
    then). ensure_topics returns once the metadata shows every topic it made with a leader per partition."""
    from aiokafka import AIOKafkaClient, TopicPartition

    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics

    async def run() -> list[list[str]]:
        missed = []
        for _ in range(5):
            settings = KafkaSettings(broker=broker, topics=Topics(prefix=fresh_prefix()))
            await ensure_topics(settings)
            client = AIOKafkaClient(bootstrap_servers=broker)
            await client.bootstrap()
            try:
                seen = await client.fetch_all_metadata()
            finally:
                await client.close()
            names = settings.topics.all() + settings.topics.changelogs()
            missed.append([n for n in names if not seen.partitions_for_topic(n)
                           or any(seen.leader_for_partition(TopicPartition(n, p)) in (None, -1) for p in seen.partitions_for_topic(n))])
        return missed

    assert asyncio.run(run()) == [[]] * 5


def test_a_tls_client_waiting_for_a_plaintext_listener_is_told_the_broker_resets_its_handshakes(broker, tmp_path):
    """The plaintext broker reads the TLS hello as an oversized request and resets the connection: the client waited
    as for an absent broker (a broker going down may do the same), without a word of TLS."""
    said = waiting_line(broker, fresh_prefix(), tmp_path / "tls.err", {
        "KIBITZ_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KIBITZ_KAFKA_SASL_MECHANISM": "PLAIN",
        "KIBITZ_KAFKA_SASL_USERNAME": "kibitz", "KIBITZ_KAFKA_SASL_PASSWORD": "secret"})
    assert ("(KafkaConnectionError; it resets each TLS handshake: if its listener is not TLS, set "
            "KIBITZ_KAFKA_SECURITY_PROTOCOL (now SASL_SSL) to SASL_PLAINTEXT)") in said, said
    assert "secret" not in said


def test_tail_prints_a_topic(broker):
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    asyncio.run(produce(broker, t.perceived, [(b"k", b'{"n": 1}'), (b"k", None), (b"k", b'{"n": 2}')]))
    r = cli("tail", "ratings.perceived", "--broker", broker, "--topic-prefix", prefix, "--from-beginning", "--max", "3", timeout=60)
    # a record without a value (a tombstone) is JSON's null: the line says so, and tail goes on
    assert r.returncode == 0 and r.stdout.splitlines() == ['{"n": 1}', "null", '{"n": 2}'], r.stderr[-2000:]
    # a topic that is not there (a typo, or its worker not started): said once, with the topics that are, then waited for
    r = cli("tail", "ratings.perceivd", "--broker", broker, "--topic-prefix", prefix, "--idle", "1", timeout=60)
    assert r.returncode == 0 and r.stdout == ""
    assert f"no topic {t.name('ratings.perceivd')} on the broker yet; waiting for it" in r.stderr, r.stderr[-2000:]
    assert f"kibitz's topics there: {t.perceived}" in r.stderr
    assert t.name("ratings.perceivd") not in asyncio.run(topic_names(broker))  # waited for, not created by subscribing


def redrive(broker: str, prefix: str, *args: str):
    """`kibitz redrive` on the deployment of ``prefix`` (whose app id test workers take from it): (exit code, its JSON
    lines by reason, stderr with its info logs)."""
    r = cli("--log-level", "INFO", "redrive", *args, "--broker", broker, "--topic-prefix", prefix, "--app-id", prefix,
            timeout=120)
    return r.returncode, {d["reason"]: d for d in map(json.loads, r.stdout.splitlines())}, r.stderr


def test_redrive_sends_each_chosen_dead_letter_back_once_and_says_why_not_for_the_rest(broker):
    """Dead letters of several reasons and sources: the chosen reason's are sent back to the topic they were read from
    (key and bytes as they were), once however often redrive runs; each reason has its own cursor; a dry run sends and
    moves nothing; the ones that cannot be sent are counted by why (exit 3)."""
    from analyzers.errors import EngineTimeout, KibitzError, PoisonRecord
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics
    from streamer.steps import dead_letter

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    asyncio.run(ensure_topics(KafkaSettings(broker=broker, topics=t)))
    poison = PoisonRecord("aborted 3 times")

    def dl(error, raw, source, key):
        return (key.encode(), dead_letter(error, raw, source=source, key=key).model_dump_json().encode())

    letters = [
        dl(poison, b'{"r": 1}', f"{t.assessments}/1@10", "p1"),
        dl(KibitzError("a step's bug"), b'{"m": 1}', f"{t.pool}/0@4", "London 2011"),  # reason "error"
        dl(poison, b"\xff\x00", f"{t.moves}/2@7", "g1"),  # not UTF-8: sent back from its base64 copy
        dl(poison, b"x", "london.pgn", "g2"),  # a producer's rejection of a file
        dl(EngineTimeout("hung"), b'{"e": 1}', f"{t.moves}/0@3", "g3"),  # its move was applied, its assessment lost
        (b"g4", b"not a dead letter"),
    ]
    asyncio.run(produce(broker, t.deadletter, letters))
    targets = [t.assessments, t.pool, t.moves]

    rc, out, err = redrive(broker, prefix, "--reason", "poison", "--dry-run")
    assert rc == 3 and out["poison"] == {"dry_run": True, "reason": "poison", "read": 3,
                                         "sent": {t.assessments: 1, t.moves: 1},
                                         "skipped": {"not read from a Kafka topic": 1}}, (out, err[-2000:])
    assert asyncio.run(_keyed(broker, targets)) == {name: [] for name in targets}, "a dry run sends nothing"
    rc, out, err = redrive(broker, prefix, "--reason", "poison")
    assert rc == 3 and out["poison"]["read"] == 3 and out["poison"]["sent"] == {t.assessments: 1, t.moves: 1}, err[-2000:]
    got = asyncio.run(_keyed(broker, targets))
    assert got == {t.assessments: [(b"p1", b'{"r": 1}')], t.pool: [], t.moves: [(b"g1", b"\xff\x00")]}
    # again: nothing new of that reason since its last run, so nothing is sent twice; the other reasons' cursors are
    # their own, and a letter written meanwhile is the only one the next run reads
    asyncio.run(produce(broker, t.deadletter, [dl(poison, b'{"r": 2}', f"{t.assessments}/3@11", "p2")]))
    rc, out, err = redrive(broker, prefix, "--reason", "poison", "--reason", "error", "--reason", "engine_timeout")
    assert out["poison"]["read"] == 1 and out["poison"]["sent"] == {t.assessments: 1}, err[-2000:]
    assert out["error"]["read"] == 1 and out["error"]["sent"] == {t.pool: 1}
    assert out["engine_timeout"]["sent"] == {} and out["engine_timeout"]["skipped"] == {
        "a move whose game has been played on (only its assessment was lost)": 1}
    assert rc == 3  # the engine timeout is left as it is, and says so
    got = asyncio.run(_keyed(broker, targets))
    assert got == {t.assessments: [(b"p1", b'{"r": 1}'), (b"p2", b'{"r": 2}')], t.pool: [(b"London 2011", b'{"m": 1}')],
                   t.moves: [(b"g1", b"\xff\x00")]}
    rc, out, _ = redrive(broker, prefix, "--reason", "poison", "--reason", "error")
    assert rc == 0 and out["poison"]["read"] == out["error"]["read"] == 0
    # a deployment without a dead-letter topic (a mistyped prefix): said, nothing read
    rc, out, err = redrive(broker, prefix + "x", "--reason", "poison")
    assert rc == 0 and out["poison"]["read"] == 0 and f"{prefix}xkibitz.deadletter is not on the broker after" in err
    # a reason whose records would be rejected again is refused before anything is read
    rc, _, err = redrive(broker, prefix, "--reason", "duplicate_ply")
    assert rc == 2 and "duplicate_ply dead letters are not re-driven: the ply was already applied" in err


def test_a_redrive_reads_every_partition_from_its_start_when_its_consumers_own_position_reset_is_slow(broker, monkeypatch):
    """Fault injection: the pass's look-up of its committed offsets answers in 0.5 s, and the offset request that
    aiokafka's fetcher makes by itself for partitions assigned without a committed offset takes 2 s. With aiokafka's
    default auto_offset_reset, "latest", the pass's seek to the beginning of its first partition came while that
    request was out and was answered by it: the partition started at its end, its dead letters unread, exit 0. (Seen
    once under CI load: 3 of 4 read, the missing one alone in its partition.)"""
    import contextvars

    from aiokafka import AIOKafkaConsumer
    from aiokafka.consumer.fetcher import Fetcher

    from analyzers.errors import PoisonRecord
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics
    from streamer.redrive import redrive as run_redrive
    from streamer.steps import dead_letter

    prefix = fresh_prefix()
    settings = KafkaSettings(broker=broker, app_id=prefix, topics=Topics(prefix=prefix))
    t = settings.topics
    asyncio.run(ensure_topics(settings))
    letters = [dead_letter(PoisonRecord("x"), b'{"r": %d}' % i, source=f"{t.assessments}/{i % 4}@{i}", key=f"p{i}")
               for i in range(8)]
    asyncio.run(produce(broker, t.deadletter, [(d.key.encode(), d.model_dump_json().encode()) for d in letters]))
    in_reset = contextvars.ContextVar("in_reset", default=False)
    update, request, committed = Fetcher._update_fetch_positions, Fetcher._proc_offset_request, AIOKafkaConsumer.committed

    async def slow_update(self, *args):  # noqa: ANN001, ANN202
        in_reset.set(True)  # the fetcher's own task: only its requests are slowed
        return await update(self, *args)

    async def slow_request(self, node_id, topic_data):  # noqa: ANN001, ANN202
        if in_reset.get():
            await asyncio.sleep(2.0)
        return await request(self, node_id, topic_data)

    async def slow_committed(self, tp):  # noqa: ANN001, ANN202
        await asyncio.sleep(0.5)
        return await committed(self, tp)

    monkeypatch.setattr(Fetcher, "_update_fetch_positions", slow_update)
    monkeypatch.setattr(Fetcher, "_proc_offset_request", slow_request)
    monkeypatch.setattr(AIOKafkaConsumer, "committed", slow_committed)
    (report,) = asyncio.run(run_redrive(settings, ["poison"]))
    assert report.read == 8 and report.sent == {t.assessments: 8}, report


def test_a_redrive_fenced_by_another_run_or_refused_by_the_broker_stops_and_sends_nothing_twice(broker, monkeypatch):
    """Two runs of one reason at once: the later one's transactional id fences the earlier, whose transaction aborts.
    The earlier stops (DeliveryFailed, naming the other run), nothing of its transaction sent; the cursor is where the
    last commit left it, so the next run sends the record once. Likewise a record the broker refuses (was aiokafka's
    traceback)."""
    from aiokafka import AIOKafkaProducer

    import streamer.redrive as rd
    from analyzers.errors import DeliveryFailed, PoisonRecord
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics
    from streamer.steps import dead_letter

    prefix = fresh_prefix()
    settings = KafkaSettings(broker=broker, app_id=prefix, topics=Topics(prefix=prefix))
    t = settings.topics
    asyncio.run(ensure_topics(settings))
    letter = dead_letter(PoisonRecord("x"), b'{"r": 1}', source=f"{t.assessments}/0@1", key="p1")
    asyncio.run(produce(broker, t.deadletter, [(b"p1", letter.model_dump_json().encode())]))
    send = rd._send

    async def fenced_first(settings, producer, group, tp, records, report):  # noqa: ANN001
        other = AIOKafkaProducer(bootstrap_servers=broker, transactional_id=group)
        await other.start()  # the other run: its InitProducerId bumps the id's epoch
        await other.stop()
        await send(settings, producer, group, tp, records, report)

    monkeypatch.setattr(rd, "_send", fenced_first)
    with pytest.raises(DeliveryFailed, match=f"another `kibitz redrive --reason poison` of app '{prefix}' started"):
        asyncio.run(rd.redrive(settings, ["poison"]))
    monkeypatch.setattr(rd, "_send", send)
    assert asyncio.run(_keyed(broker, [t.assessments])) == {t.assessments: []}
    # a record the broker refuses (its topic's limit lowered since): said, nothing sent, the cursor left before it
    asyncio.run(_topic_limit(broker, t.assessments, 100))
    letter = dead_letter(PoisonRecord("x"), b'{"r": 1}'.ljust(300), source=f"{t.assessments}/0@2", key="p2")
    # (under p1's key, so that both dead letters are in one partition, one transaction)
    asyncio.run(produce(broker, t.deadletter, [(b"p1", letter.model_dump_json().encode())]))
    with pytest.raises(DeliveryFailed, match=f"the Kafka broker did not take a re-driven record \\({t.assessments}\\)"):
        asyncio.run(rd.redrive(settings, ["poison"]))
    asyncio.run(_topic_limit(broker, t.assessments, 1048588))
    (report,) = asyncio.run(rd.redrive(settings, ["poison"]))
    assert report.sent == {t.assessments: 2}
    got = asyncio.run(_keyed(broker, [t.assessments]))[t.assessments]
    assert sorted(got) == [(b"p1", b'{"r": 1}'), (b"p2", b'{"r": 1}'.ljust(300))]


async def _topic_limit(broker: str, topic: str, max_bytes: int) -> None:
    """Set ``topic``'s largest record batch (max.message.bytes), as an operator does with kafka-configs.sh."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": str(max_bytes)})])
    finally:
        await admin.close()


def test_results_refused_by_a_topic_limit_are_rated_once_the_limit_is_raised_and_they_are_redriven(broker, london,
                                                                                                  london_searches, tmp_path):
    """The Glicko-2 topic takes no record over 200 bytes (a topic set up by hand): the rate stage's transactions with a
    game's result abort, and each result is dead-lettered unapplied (poison). With the limit raised, `kibitz redrive
    --reason poison` sends them back: every player's Glicko-2 update comes out once, nothing else twice.
    Before the rate stage renewed a partition's producer after such a refusal, the refused write had taken a sequence
    number the broker never stored, and the re-driven results were poisoned again (OutOfOrderSequenceNumber), as
    every later result of those partitions would have been while the worker ran."""
    import chess.pgn

    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics

    pgn = tmp_path / "two.pgn"
    with open(london) as f, open(pgn, "w") as w:
        for _ in range(2):
            print(chess.pgn.read_game(f), file=w, end="\n\n")
    games = list(read_pgn_games(pgn))
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    asyncio.run(ensure_topics(KafkaSettings(broker=broker, topics=t)))
    asyncio.run(_topic_limit(broker, t.glicko2, 200))
    (worker,) = start_workers(broker, prefix, *LIMITS, "--engines", "1", *cache_args(london_searches))
    try:
        r = cli("produce", str(pgn), "--max-speed", "--broker", broker, "--topic-prefix", prefix, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        plies = sum(len(g.moves) for g in games)
        out = asyncio.run(consume_until(broker, [t.perceived, t.glicko2, t.deadletter],
                                        lambda o: rated_plies(o, t) >= plies and len(o[t.deadletter]) >= 4, timeout=180,
                                        workers=[worker]))
        dead = [json.loads(v) for v in out[t.deadletter]]
        assert out[t.glicko2] == [] and sorted((d["reason"], json.loads(d["raw"])["type"]) for d in dead) == [
            ("poison", "game_result")] * 4, dead
        asyncio.run(_topic_limit(broker, t.glicko2, 1048588))  # Kafka's default
        rc, report, err = redrive(broker, prefix, "--reason", "poison")
        # a partition skipped shows in its logs: where each partition's pass began and ended (-k position_reset_is_slow)
        assert rc == 0 and report["poison"]["sent"] == {t.assessments: 4}, (
            report, [line for line in err.splitlines() if "partition passed" in line] or err[-2000:])
        out = asyncio.run(consume_until(broker, [t.perceived, t.glicko2, t.deadletter],
                                        lambda o: len(o[t.glicko2]) >= 4, timeout=120, workers=[worker]))
    finally:
        worker.stop()
    updates = sorted((u["game_id"], u["player_id"]) for u in map(json.loads, out[t.glicko2]))
    assert updates == sorted((g.game_id, p) for g in games for p in (g.white.id, g.black.id)), "each result once"
    assert len(out[t.deadletter]) == 4, "no new dead letter"
    game_scope = [(m["game_id"], m["ply"]) for m in map(json.loads, out[t.perceived]) if m["scope"] == "game"]
    assert len(game_scope) == len(set(game_scope)) == plies


def test_an_idle_game_evicted_by_the_worker_dead_letters_the_moves_that_waited_for_a_ply_that_never_came(broker):
    """`--idle-game-seconds 2`: a game's plies 1 and 2 came and its ply 0 never did. Once the game has been idle 2 s,
    the analyse stage's sweep (run with a batch of the partition's records: here another game's start) evicts it and
    dead-letters both held moves, each naming the input record it was read from, in the sweep's transaction."""
    from schemas import GameStarted, MoveEvent, PlayerInfo
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import ensure_topics

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    asyncio.run(ensure_topics(KafkaSettings(broker=broker, partitions=1, topics=t)))  # the two games on one partition
    start = GameStarted(game_id="g1", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"))
    early = [MoveEvent(game_id="g1", ply=ply, uci=uci) for ply, uci in ((1, "e7e5"), (2, "g1f3"))]
    (worker,) = start_workers(broker, prefix, *LIMITS, "--engines", "1", "--partitions", "1", "--idle-game-seconds", "2")
    try:
        asyncio.run(produce(broker, t.moves, [(b"g1", e.model_dump_json().encode()) for e in (start, *early)]))
        time.sleep(3)
        later = start.model_copy(update={"game_id": "g2"})
        asyncio.run(produce(broker, t.moves, [(b"g2", later.model_dump_json().encode())]))
        out = asyncio.run(consume_until(broker, [t.deadletter], lambda o: len(o[t.deadletter]) >= 2, timeout=90,
                                        workers=[worker]))
    finally:
        worker.stop()
    dead = [json.loads(v) for v in out[t.deadletter]]
    assert [(d["reason"], d["game_id"], d["ply"], d["source"], d["key"]) for d in dead] == [
        ("out_of_order_ply", "g1", 1, f"{t.moves}/0@1", "g1"), ("out_of_order_ply", "g1", 2, f"{t.moves}/0@2", "g1")], dead
    assert all("evicted after 2 s without an event" in d["error"] for d in dead)


async def _keyed(broker: str, topics: list[str]) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every committed record of ``topics`` as (key, value), by topic, sorted (read_topic: up to the end offsets)."""
    return {t: sorted((k, v) for k, vs in (await read_topic(broker, t)).items() for v in vs) for t in topics}


def final_player_scope(msgs):
    """Per player, the player-scope rating after their last move: counted moves, histogram moves, c mean."""
    last = {}
    for m in msgs:
        if m["type"] == "perceived" and m["scope"] == "player":
            if m["player_id"] not in last or m["gain_moves"] > last[m["player_id"]][1]:
                last[m["player_id"]] = (m["moves"], m["gain_moves"], m["c_mean"])
    return last


def rated_plies(o, t: Topics) -> int:
    """How many plies have their game-scope rating among the records ``o`` read (consume_until's outputs)."""
    return sum(1 for x in o[t.perceived] if b'"scope":"game"' in x)


def all_rated(t: Topics, games):
    """consume_until's stop: every ply of ``games`` rated and each game's two Glicko-2 updates out."""
    plies = sum(len(g.moves) for g in games)
    return lambda o: rated_plies(o, t) >= plies and len(o[t.glicko2]) >= 2 * len(games)


def assert_exactly_once_and_equal_to_embedded(out, t: Topics, games, emb_out: Path) -> None:
    plies = sum(len(g.moves) for g in games)
    moves = [(a["game_id"], a["ply"]) for a in map(json.loads, out[t.assessments]) if a["type"] == "assessment"]
    assert len(moves) == len(set(moves)) == plies, "every ply exactly one assessment"
    msgs, perceived, glicko = summarise(out[t.perceived] + out[t.glicko2])
    game_scope = [(m["game_id"], m["ply"]) for m in msgs if m["type"] == "perceived" and m["scope"] == "game"]
    assert len(game_scope) == len(set(game_scope)) == plies, "every ply exactly one perceived rating"
    updates = [(m["game_id"], m["player_id"]) for m in msgs if m["type"] == "glicko2"]
    assert len(updates) == len(set(updates)) == 2 * len(games), "every game end one Glicko-2 update per player"
    assert out[t.deadletter] == [], "a restart must not replay anything (no duplicate_ply / unknown_game dead letters)"
    emb_msgs, emb_perceived, emb_glicko = summarise(emb_out.read_text().splitlines())
    assert {k: v for k, v in perceived.items() if k[2] == "game"} == {k: v for k, v in emb_perceived.items() if k[2] == "game"}
    assert glicko.keys() == emb_glicko.keys()
    # Final player states: the same moves counted in the histogram and the posterior, and the same posterior mean up
    # to the order the games were folded in (the grid is refined as moves arrive; order is scheduling, see above).
    ours, theirs = final_player_scope(msgs), final_player_scope(emb_msgs)
    assert ours.keys() == theirs.keys() == {p for g in games for p in (g.white.id, g.black.id)}
    for player, (n, gain_n, c) in ours.items():
        assert (n, gain_n) == theirs[player][:2], player
        assert c == pytest.approx(theirs[player][2], abs=0.02), player


#: The fault tests' producer plays London 2011 rounds 1-4 at this multiple of live speed (no clocks: a nominal minute a
#: ply), so its longest game, 166 plies, arrives over 22 s: the fault falls mid-stream however fast the workers are
#: (here the 30 % trigger, read from the output topic, fired 7 s in) ...
FAULT_PACE = "440"
#: ... and over 45 s on the three-broker cluster, where a worker rated 50-70 plies a second here (every write
#: replicated by three brokers on the same cores), fewer than FAULT_PACE brings at first: the kill at 30 % came 21 s
#: into the stream (15 s into a 30 s one).
CLUSTER_PACE = "220"


def stop_all(workers: list[WorkerProcess], producer: subprocess.Popen[str] | None) -> None:
    """The end of a fault test, however it went: the workers stopped, the producer killed if it still runs."""
    for w in workers:
        w.stop()
    if producer is not None and producer.poll() is None:
        producer.kill()


def paced_producer(broker: str, prefix: str, pgn: Path, pace: str) -> subprocess.Popen[str]:
    """`kibitz produce` of ``pgn`` at ``pace`` times live speed, in the background (its stderr kept for the test)."""
    return subprocess.Popen([sys.executable, "-m", "streamer.cli", "produce", str(pgn), "--speed", pace, "--broker", broker,
                             "--topic-prefix", prefix], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def london_run(broker, london, tmp_path, workers, kill_at: float, store: tuple[str, ...] = (), cache: Path | None = None):
    """London 2011 into a fresh set of topics served by ``workers`` (instance ids); the first is SIGKILLed once a
    ``kill_at`` share of the plies has its rating, then (with one worker) restarted under the same instance id.
    The workers and the embedded runtime they are compared with read their searches from ``cache``; the producer
    starts once every worker owns partitions and paces the stream (:data:`FAULT_PACE`), so the kill falls while
    records are still arriving and in flight, and the rest comes while the worker is down or restoring. The workers
    log at info (``KIBITZ_WORKER_LOG``): their restores say when they own partitions. ``store``: extra worker
    arguments choosing the state store."""
    pgn = london
    games = list(read_pgn_games(pgn))
    plies = sum(len(g.moves) for g in games)
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    extra = [*LIMITS, "--engines", "1", "--transaction-timeout", "8", *store, *cache_args(cache)]
    procs = [WorkerProcess(broker, prefix, *extra, "--instance-id", workers[0])]
    emb, emb_out = embedded_outputs(pgn, tmp_path, cache)
    producer = None
    try:
        # the others join once the first owns every partition, so the rebalance that shares them is observable
        poll(lambda: owns_partitions(procs[0]), 60, f"worker {workers[0]} to own partitions")
        procs += [WorkerProcess(broker, prefix, *extra, "--instance-id", w) for w in workers[1:]]
        for p, w in zip(procs[1:], workers[1:]):
            poll(lambda p=p: owns_partitions(p), 60, f"worker {w} to own partitions")
        producer = paced_producer(broker, prefix, pgn, FAULT_PACE)
        producing_from = time.time()


        seen = asyncio.run(consume_until(broker, [t.perceived], lambda o: rated_plies(o, t) >= kill_at * plies, timeout=300,
                                         workers=procs))
        killed_at = time.time()
        print(f"worker killed {killed_at - producing_from:.0f} s into the paced stream, {rated_plies(seen, t)} of {plies} plies rated")
        procs[0].stop(signal.SIGKILL)
        assert rated_plies(seen, t) < plies and producer.poll() is None, "the kill fell mid-stream, records still arriving"
        if len(workers) == 1:
            procs.append(WorkerProcess(broker, prefix, *extra, "--instance-id", workers[0]))

        out = asyncio.run(consume_until(broker, [t.assessments, t.perceived, t.glicko2, t.deadletter], all_rated(t, games), timeout=420,
                                        workers=procs[1:]))  # the first was killed
        assert rated_plies(out, t) >= plies, f"only {rated_plies(out, t)} of {plies} plies rated"
        assert producer.wait(60) == 0, producer.stderr.read()
    finally:
        stop_all(procs, producer)
    assert emb.wait(420) == 0, emb.stderr.read()
    return out, t, games, emb_out, procs, killed_at


def restored(p):  # (time, stage, partition, (changelog offsets read from, to)) of every partition state rebuilt
    found = re.findall(r'^\{.*"msg": "restored".*\}$', Path(p.log.name).read_text(), re.M)
    return [(d["ts"], d["stage"], d["partition"], (d["from_offset"], d["to_offset"])) for d in map(json.loads, found)]


def owns_partitions(p: WorkerProcess, count: int = 1, since: float = 0.0) -> bool:
    """Whether worker ``p`` (logging at info) has restored ``count`` partitions' state since time ``since``, i.e. owns
    them; raises if it exited."""
    p.check()
    return len([r for r in restored(p) if r[0] > since]) >= count


@pytest.mark.solo
@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_worker_killed_mid_stream_and_restarted_loses_and_repeats_nothing(broker, london_rounds_1_to_4, london_searches,
                                                                          tmp_path, monkeypatch, store):
    monkeypatch.setenv("KIBITZ_WORKER_LOG", "info")  # the logs say where each restore started
    out, t, games, emb_out, procs, _ = london_run(broker, london_rounds_1_to_4, tmp_path, ["w1"], kill_at=0.3,
                                                  store=("--store", store, "--data-dir", str(tmp_path / "data")),
                                                  cache=london_searches)
    assert_exactly_once_and_equal_to_embedded(out, t, games, emb_out)
    after_restart = restored(procs[1])
    assert len(after_restart) == 4 * len(RUNNING), "the restarted worker restored every partition of every stage"
    spans = [span for *_, span in after_restart]
    if store == "rocksdb":  # the local DBs survived the kill: a restore reads only what they had not seen
        assert all(start > 0 or end == 0 for start, end in spans) and any(start > 0 for start, _ in spans), spans
    else:
        assert all(start == 0 for start, _ in spans), spans


@pytest.mark.solo
def test_two_workers_share_partitions_and_one_takes_over_when_the_other_is_killed(broker, london_rounds_1_to_4, london_searches,
                                                                                  tmp_path, monkeypatch):
    monkeypatch.setenv("KIBITZ_WORKER_LOG", "info")  # the logs say which partitions each worker restored
    out, t, games, emb_out, procs, killed_at = london_run(broker, london_rounds_1_to_4, tmp_path, ["a", "b"], kill_at=0.3,
                                                          cache=london_searches)
    assert_exactly_once_and_equal_to_embedded(out, t, games, emb_out)

    survivor = restored(procs[1])
    before = {(s, p) for ts, s, p, _ in survivor if ts < killed_at}
    after = {(s, p) for ts, s, p, _ in survivor if ts > killed_at}
    assert restored(procs[0]) and before, "both workers owned partitions before the kill"
    assert len(before) < 4 * len(RUNNING), "the survivor joined second and got only its share"
    assert after == {(s, p) for s in RUNNING for p in range(4)}, \
        "the survivor took over every partition of the killed worker"


async def run_stage(settings, config, records, outputs, done, timeout: float):
    """Produce ``records`` to the input topic of ``config`` (a :class:`~streamer.kafka_eos.StageConfig`), run that one
    transactional stage until ``done`` holds for the ``outputs`` topics read so far, then stop it; (stage, outputs)."""
    from streamer.kafka_eos import Stage, check_layout, ensure_topics

    await ensure_topics(settings)
    partitions = await check_layout(settings, [(config.source, config.changelog)])
    await produce(settings.broker, config.source, records)
    stage = Stage(settings, config, f"{config.name}-test", partitions=partitions[config.source])
    task = asyncio.create_task(stage.run())
    try:
        out = await consume_until(settings.broker, outputs, done, timeout=timeout)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return stage, out


@pytest.mark.parametrize("refused_by", ["client", "topic"])
def test_a_poison_record_is_dead_lettered_after_max_aborts_and_the_partition_moves_on(broker, refused_by):
    """A record whose output the broker refuses (2 MB, over the 1 MB limit the producer checks itself; or 200 KB on a
    topic whose max.message.bytes is 100 KB, which the broker refuses) aborts its transaction; after max_aborts tries
    it is dead-lettered unapplied and every other record's output arrives once. A refusal by the broker takes a
    sequence number of the partition's producer that the broker never stored: before the stage renewed the producer
    then, the dead letter's own write to that partition failed (OutOfOrderSequenceNumber) and the partition was stuck."""
    from analyzers.calibration import load_calibration
    from analyzers.profiles import get_profile
    from schemas import DeadLetter, GameResult, PlayerInfo
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import StageConfig, ensure_topics
    from streamer.pipeline import PipelineConfig, PlayerState
    from streamer.steps import Output, Steps

    settings = KafkaSettings(broker=broker, partitions=2, topics=Topics(prefix=fresh_prefix()))
    t = settings.topics
    steps = Steps(PipelineConfig(get_profile("fast"), load_calibration("fast")))
    calls = {"poison": 0}
    size = 2_000_000
    if refused_by == "topic":
        asyncio.run(ensure_topics(settings))
        asyncio.run(_topic_limit(broker, t.deadletter, 100_000))
        size = 200_000

    async def step(state, key, raw, source):  # noqa: ANN001
        if raw == b"POISON":
            calls["poison"] += 1
            return [Output(key, DeadLetter(source=source, reason="test", error="huge", raw="x" * size))]
        return steps.player_record(state, key, raw, source)

    results = []
    for i in range(12):
        me, opp = PlayerInfo(id=f"p{i % 4}", rating=2000), PlayerInfo(id=f"q{i}", rating=1900)
        r = GameResult(game_id=f"g{i}", player_id=me.id, color="white", score=1.0, player=me, opponent=opp)
        results.append((me.id.encode(), r.model_dump_json().encode()))
    records = results[:5] + [(b"p1", b"POISON")] + results[5:]

    stage, out = asyncio.run(run_stage(
        settings, StageConfig("rate", t.assessments, t.state_players, step, PlayerState, max_aborts=3), records,
        [t.glicko2, t.deadletter], lambda o: len(o[t.glicko2]) >= 12 and len(o[t.deadletter]) >= 1, timeout=120))
    games = sorted(json.loads(v)["game_id"] for v in out[t.glicko2])
    assert games == sorted(f"g{i}" for i in range(12)), "every other record's update, once"
    (dl,) = [json.loads(v) for v in out[t.deadletter]]
    assert dl["reason"] == "poison" and dl["raw"] == "POISON" and "aborted 3 times" in dl["error"]
    assert "MessageSizeTooLarge" in dl["error"]
    # once inside the batch that first aborted (which makes its records suspects), then 3 times alone
    assert stage.poisoned == 1 and calls["poison"] == 1 + 3


def test_a_partition_whose_record_never_finishes_makes_the_stage_not_live_while_the_others_go_on(broker):
    """A record whose step never ends (fault injected: a bug, a search no deadline stops) in a stage that runs records
    side by side (the analyse stage's way) is cut from every transaction and its partition's offset stays at it; the
    stage goes round all the while. /healthz said ok for as long as the worker ran; now, once that partition's records
    have been read for the progress limit without its offset moving, the stage is not live, naming the partition.
    Every record of other keys is processed meanwhile."""
    from schemas import DeadLetter
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import Stage, StageConfig, check_layout, ensure_topics
    from streamer.metrics import Metrics
    from streamer.steps import Output

    settings = KafkaSettings(broker=broker, partitions=2, topics=Topics(prefix=fresh_prefix()))
    t = settings.topics

    @dataclass
    class Seen:  # a key's state as the stage keeps a game's: what it has applied up to (input_offset)
        n: int = 0
        input_offset: int = -1

        def copy(self) -> Seen:
            return Seen(self.n, self.input_offset)

        def to_dict(self) -> dict:
            return {"n": self.n, "input_offset": self.input_offset}

        @classmethod
        def from_dict(cls, d: dict) -> Seen:
            return cls(d["n"], d["input_offset"])

    async def step(state, key, raw, source):  # noqa: ANN001 - one output per record
        if raw == b"HANG":
            await asyncio.Event().wait()  # never set
        k = key.decode()
        state[k] = Seen((state.get(k) or Seen()).n + 1)
        return [Output(key, DeadLetter(source=source, reason="test", error="-", raw=raw.decode()))]

    records = [(f"g{i % 4}".encode(), f"r{i}".encode()) for i in range(12)]
    records = records[:5] + [(b"g1", b"HANG")] + records[5:]
    metrics = Metrics()
    config = StageConfig("analyse", t.moves, t.state_games, step, Seen, window=4)

    async def run():
        await ensure_topics(settings)
        partitions = await check_layout(settings, [(config.source, config.changelog)])
        await produce(broker, config.source, records)
        stage = Stage(settings, config, "analyse-test", partitions=partitions[config.source], metrics=metrics)
        stage.progress_stale = 3.0
        task = asyncio.create_task(stage.run())
        try:
            # g1's records after the hung one wait for it (a key's records run in order); the rest are processed
            out = await consume_until(broker, [t.deadletter], lambda o: len(o[t.deadletter]) >= 10, timeout=60)
            deadline, said = time.monotonic() + 30, metrics.health.check()
            while said[0] and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                said = metrics.health.check()
            return out, said, list(stage.unprogressed)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    out, (live, why), stuck = asyncio.run(run())
    assert sorted(json.loads(v)["raw"] for v in out[t.deadletter]) == sorted(f"r{i}" for i in range(12) if i not in (5, 9))
    (tp,) = stuck
    assert not live and f"stage analyse: {t.moves} partition(s) {tp.partition} read again and again, nothing" in why, why
    assert "stuck for" not in why  # the loop went round all the while


@pytest.mark.solo
def test_an_engine_that_hangs_every_50th_search_holds_up_only_its_own_game(broker, london, tmp_path, stockfish):
    """Every 50th search of each engine never answers (the engine is killed at the 0.5 s deadline, 25x a depth-4
    search's cost, and the search retried). Every move is rated once or dead-lettered (engine_timeout, when both tries
    hang), and in games that never met a hung search the time from a move's send to its rating stays under 2 s at the
    99th percentile.
    The load (18 moves a second) leaves room for what two engines lose: a second, and a restart, in every 50
    searches."""
    hung_log = tmp_path / "hung.txt"
    wrapper = tmp_path / "engine.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).parent / 'fixtures' / 'hang_every.py'} 50 "
                       f"{hung_log} {stockfish}\n")
    wrapper.chmod(0o755)
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    games = list(read_pgn_games(london))  # each game's first 24 plies, and no end: 36 games side by side
    for g in games:
        g.moves, g.clocks, g.result = g.moves[:24], g.clocks[:24], "*"
    # shallow searches (depth 4), so that one engine alone carries the load while the other is hung or restarting
    (worker,) = start_workers(broker, prefix, "--depth", "4", "--multipv", "3", "--engines", "2", "--engine", str(wrapper), "--search-timeout", "0.5",
                              "--store", "memory")
    sent: dict[tuple[str, int], float] = {}
    got: dict[tuple[str, int], float] = {}
    dead: list[dict] = []
    twice: list[tuple[str, int]] = []

    async def run():
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        c = AIOKafkaConsumer(t.perceived, t.deadletter, bootstrap_servers=broker, group_id=None, auto_offset_reset="earliest",
                             isolation_level="read_committed")
        p = AIOKafkaProducer(bootstrap_servers=broker, enable_idempotence=True, acks="all")
        await c.start()
        await p.start()
        # the worker's topics exist once it has started: wait for it to be consuming before the clock starts
        await asyncio.sleep(8)

        async def consume():
            while True:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    for r in recs:
                        m = json.loads(r.value)
                        if r.topic == t.deadletter:
                            dead.append(m)
                        elif m["scope"] == "game":
                            if (m["game_id"], m["ply"]) in got:
                                twice.append((m["game_id"], m["ply"]))
                            got.setdefault((m["game_id"], m["ply"]), time.monotonic())

        reader = asyncio.create_task(consume())
        try:
            queues = [[e for e in g.events()] for g in games]
            while any(queues):  # the games side by side, one event each every 2 s: 18 events a second
                for q in queues:
                    if q:
                        ev = q.pop(0)
                        await p.send_and_wait(t.moves, ev.model_dump_json().encode(), key=ev.game_id.encode())
                        if ev.type == "move":
                            sent[(ev.game_id, ev.ply)] = time.monotonic()
                await asyncio.sleep(2.0)
            deadline = time.monotonic() + 120
            while len(got) + len(dead) < len(sent) and time.monotonic() < deadline:
                worker.check()
                await asyncio.sleep(0.5)
        finally:
            reader.cancel()
            await p.stop()
            await c.stop()

    try:
        asyncio.run(run())
    finally:
        worker.stop()
    hung = [ln.split(" ", 2)[2].split(" moves")[0] for ln in hung_log.read_text().splitlines()] if hung_log.exists() else []
    assert hung, "the fault was injected"
    hung_epd = {" ".join(f.split()[:4]) for f in hung}
    hit = set()
    for g in games:
        b = chess.Board()
        for u in g.moves:
            if b.epd() in hung_epd:
                hit.add(g.game_id)
            b.push_uci(u)
        if b.epd() in hung_epd:
            hit.add(g.game_id)
    # a search that hangs on both tries is an engine_timeout dead letter for its move: its game counts as hit
    assert all(d["reason"] == "engine_timeout" for d in dead), dead
    hit |= {d["game_id"] for d in dead}
    assert len(got) + len(dead) == len(sent) and not twice, "every move rated once or dead-lettered"
    others = sorted(got[k] - sent[k] for k in sent if k[0] not in hit)
    assert len(others) > 200 and len(hit) < len(games), (len(hit), len(hung))
    q = {f"p{x}": round(others[int(x / 100 * (len(others) - 1))], 2) for x in (50, 90, 95, 99)}
    print(f"games not hit by a hung search: {len(others)} moves of {len(games) - len(hit)} games, latency {q}; "
          f"{len(hung)} hung searches, {len(dead)} moves dead-lettered")
    # On this 2-core machine the tail is set by the lost engine (one engine carries the load while the other is hung
    # and restarted): p99 measured 1.39-1.42 s over three runs at a 0.5 s deadline (2.0-2.1 s at 1 s; README)
    assert q["p99"] < 2.0, q


def test_a_player_with_1000_open_games_does_not_stop_the_rate_stage(broker):
    """One player's 1,000 unfinished games in 1,000 events, interleaved with other players' moves: every assessment
    is rated once, nothing is dead-lettered, and every changelog record of that player stays under the stated bound."""
    from analyzers.calibration import load_calibration
    from analyzers.profiles import get_profile
    from analyzers.ratingmodel import load_move_model
    from schemas import MoveAssessment
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import StageConfig, _sync
    from streamer.pipeline import PLAYER_STATE_BOUND, PipelineConfig, PlayerState
    from streamer.steps import Steps

    settings = KafkaSettings(broker=broker, partitions=2, topics=Topics(prefix=fresh_prefix()))
    t = settings.topics
    steps = Steps(PipelineConfig(get_profile("fast"), load_calibration("fast"), model=load_move_model("fast")))
    cands = [{"uci": "e2e4", "cp": 30, "mate": None}, {"uci": "d2d4", "cp": 20, "mate": None}, {"uci": "g1f3", "cp": -40, "mate": None}]
    records = []
    for i in range(1000):
        for player, game, event in (("hoarder", f"g{i}", f"e{i}"), (f"other{i % 20}", f"o{i % 20}", "open")):
            a = MoveAssessment(game_id=game, ply=20 + 2 * (i // 20 if player != "hoarder" else 0), player_id=player,
                               color="white", uci="d2d4", event=event, reference_rating=1800, eval_before=30, eval_after=20,
                               gain=-10, loss=10, candidates=cands, played_rank=1, played_value=20, counted=True,
                               engine="test", limits="d8-mpv5", time_class="rapid")
            records.append((player.encode(), a.model_dump_json().encode()))

    async def run():
        stage, out = await run_stage(
            settings, StageConfig("rate", t.assessments, t.state_players, _sync(steps.player_record), PlayerState), records,
            [t.perceived, t.deadletter], lambda o: len(o[t.perceived]) >= 2000, timeout=240)
        return stage, out, [len(v) for v in (await read_topic(broker, t.state_players)).get(b"hoarder", []) if v]

    stage, out, sizes = asyncio.run(run())
    rated = [json.loads(v) for v in out[t.perceived]]
    assert not out[t.deadletter] and stage.poisoned == 0
    assert len(rated) == 2000 and len({(m["player_id"], m["game_id"], m["ply"]) for m in rated}) == 2000
    assert sum(m["player_id"].startswith("other") for m in rated) == 1000, "bystanders are rated throughout"
    assert sizes and max(sizes) < PLAYER_STATE_BOUND, (len(sizes), max(sizes or [0]))


@pytest.mark.solo
def test_a_zombie_worker_resumed_after_its_partitions_moved_publishes_nothing(broker, london_rounds_1_to_4, london_searches,
                                                                              tmp_path, monkeypatch):
    """Worker a is frozen (SIGSTOP) mid-stream, past its 10 s session timeout, with transactions open (their timeout is
    60 s, so the broker does not abort them for it); worker b takes over every partition; then a is resumed. Nothing
    a held open may commit (b re-did those records), and a rejoins and takes its share again: no gap, no duplicate."""
    monkeypatch.setenv("KIBITZ_WORKER_LOG", "info")
    pgn = london_rounds_1_to_4
    games = list(read_pgn_games(pgn))
    plies = sum(len(g.moves) for g in games)
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    extra = [*LIMITS, "--engines", "1", "--transaction-timeout", "60", *cache_args(london_searches)]

    a = WorkerProcess(broker, prefix, *extra, "--instance-id", "a")
    procs = [a]
    emb, emb_out = embedded_outputs(pgn, tmp_path, london_searches)
    producer = None
    try:
        poll(lambda: owns_partitions(a, 8), 90, "a to own every partition")
        b = WorkerProcess(broker, prefix, *extra, "--instance-id", "b")
        procs.append(b)
        poll(lambda: owns_partitions(b), 90, "b to own partitions")  # the group shared the partitions
        producer = paced_producer(broker, prefix, pgn, FAULT_PACE)
        producing_from = time.time()


        seen = asyncio.run(consume_until(broker, [t.perceived], lambda o: rated_plies(o, t) >= 0.3 * plies, timeout=300, workers=procs))
        os.killpg(a.proc.pid, signal.SIGSTOP)
        frozen_at = time.time()
        print(f"a frozen {frozen_at - producing_from:.0f} s into the paced stream, {rated_plies(seen, t)} of {plies} plies rated")
        assert rated_plies(seen, t) < plies and producer.poll() is None, "a froze mid-stream, records still arriving"
        poll(lambda: owns_partitions(b, 8, since=frozen_at), 120, "b to own every partition")  # of both stages
        time.sleep(3)  # and works on them for a while
        os.killpg(a.proc.pid, signal.SIGCONT)
        frozen = time.time() - frozen_at

        out = asyncio.run(consume_until(broker, [t.assessments, t.perceived, t.glicko2, t.deadletter], all_rated(t, games), timeout=420,
                                        workers=procs))
        a_back = [r for r in restored(a) if r[0] > frozen_at]
        assert producer.wait(60) == 0, producer.stderr.read()
    finally:
        stop_all(procs, producer)
    assert emb.wait(420) == 0, emb.stderr.read()
    print(f"a frozen {frozen:.1f} s; after it resumed a restored {len(a_back)} partitions")
    assert_exactly_once_and_equal_to_embedded(out, t, games, emb_out)
    assert a_back, "the resumed worker rejoined and took partitions again"


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3)
    c.start()
    yield c
    c.stop()


@pytest.mark.solo
def test_london_on_a_three_broker_cluster_with_one_broker_killed_mid_stream(cluster, london_rounds_1_to_4, london_searches,
                                                                            tmp_path, monkeypatch):
    """The end-to-end test (on rounds 1-4 of London 2011) on three KRaft brokers (replication factor 3, min.insync.replicas 2): one broker
    is SIGKILLed once 30 % of the plies are rated, while the producer is still sending the paced stream
    (:data:`CLUSTER_PACE`). The worker and the producer ride through the leader elections: every output once, no dead
    letter, ratings equal the embedded runtime's."""
    from aiokafka.admin import AIOKafkaAdminClient

    monkeypatch.setenv("KIBITZ_WORKER_LOG", "info")  # its restores say when it owns partitions
    pgn = london_rounds_1_to_4
    games = list(read_pgn_games(pgn))
    plies = sum(len(g.moves) for g in games)
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    worker = WorkerProcess(cluster.address, prefix, *LIMITS, "--engines", "1", "--replication-factor", "3",
                           *cache_args(london_searches))
    emb, emb_out = embedded_outputs(pgn, tmp_path, london_searches)
    producer = None
    try:
        poll(lambda: owns_partitions(worker), 90, "the worker to own partitions")
        producer = paced_producer(cluster.address, prefix, pgn, CLUSTER_PACE)
        producing_from = time.time()


        async def replicas():
            admin = AIOKafkaAdminClient(bootstrap_servers=cluster.address)
            await admin.start()
            try:
                described = await admin.describe_topics([t.perceived, t.state_games])
            finally:
                await admin.close()
            return {len(p["replicas"]) for d in described for p in d["partitions"]}

        seen = asyncio.run(consume_until(cluster.address, [t.perceived], lambda o: rated_plies(o, t) >= 0.3 * plies, timeout=300,
                                         workers=[worker]))
        assert asyncio.run(replicas()) == {3}
        cluster.kill(0)
        killed_at = time.time()
        print(f"broker killed {killed_at - producing_from:.0f} s into the paced stream, {rated_plies(seen, t)} of {plies} plies rated")
        assert rated_plies(seen, t) < plies and producer.poll() is None, "the broker died mid-stream, records still arriving"

        out = asyncio.run(consume_until(cluster.address, [t.assessments, t.perceived, t.glicko2, t.deadletter], all_rated(t, games),
                                        timeout=600, workers=[worker]))
        finished = time.time() - killed_at
        assert producer.wait(60) == 0, producer.stderr.read()
    finally:
        stop_all([worker], producer)
    assert emb.wait(420) == 0, emb.stderr.read()
    print(f"after the kill the rest of the stream took {finished:.0f} s")
    assert_exactly_once_and_equal_to_embedded(out, t, games, emb_out)


#: How long the only broker stays down in the outage test: longer than the worker's session timeout (10 s) and
#: transaction timeout (8 s here), so the group and the open transactions time out, not only the connections, and
#: than aiokafka's request timeout (40 s), after which its producer gives up on a record.
OUTAGE_S = 60.0


@pytest.fixture
def own_broker():
    """A broker of the test's own (its own port), which the test may kill and start again."""
    b = Broker(19300, own=True)
    b.start()
    yield b
    b.stop()


@pytest.mark.solo
def test_the_only_broker_killed_mid_stream_and_back_a_minute_later_loses_and_repeats_nothing(own_broker, london_rounds_1_to_4,
                                                                                              london_searches, tmp_path, monkeypatch):
    """A single-broker deployment whose broker dies (SIGKILL) once 30 % of the plies of the paced London rounds 1-4
    stream are rated, and comes back on its data :data:`OUTAGE_S` later (a restart, an upgrade, a machine rebooted):
    nothing answers meanwhile, neither the group coordinator nor the transaction coordinator nor any partition
    leader. The worker and the producer wait it out (neither exits) and go on when it is back: every output once, no
    dead letter, ratings equal the embedded runtime's. (`kibitz produce` ended with aiokafka's KafkaTimeoutError 40 s
    into such an outage, the rest of its records unsent.)"""
    monkeypatch.setenv("KIBITZ_WORKER_LOG", "info")  # its restores say when it owns partitions
    broker = own_broker.address
    pgn = london_rounds_1_to_4
    games = list(read_pgn_games(pgn))
    plies = sum(len(g.moves) for g in games)
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    worker = WorkerProcess(broker, prefix, *LIMITS, "--engines", "1", "--transaction-timeout", "8", *cache_args(london_searches))
    emb, emb_out = embedded_outputs(pgn, tmp_path, london_searches)
    producer = None
    try:
        poll(lambda: owns_partitions(worker), 90, "the worker to own partitions")
        producer = paced_producer(broker, prefix, pgn, FAULT_PACE)


        seen = asyncio.run(consume_until(broker, [t.perceived], lambda o: rated_plies(o, t) >= 0.3 * plies, timeout=300,
                                         workers=[worker]))
        own_broker.kill()
        killed_at = time.time()
        assert rated_plies(seen, t) < plies and producer.poll() is None, "the broker died mid-stream, records still arriving"
        time.sleep(OUTAGE_S)
        worker.check()  # raises if it exited
        assert producer.poll() is None, "the producer waits for the broker"
        own_broker.restart()

        out = asyncio.run(consume_until(broker, [t.assessments, t.perceived, t.glicko2, t.deadletter], all_rated(t, games),
                                        timeout=420, workers=[worker]))
        finished = time.time() - killed_at
        assert producer.wait(60) == 0
        said = producer.stderr.read()
    finally:
        stop_all([worker], producer)
    assert emb.wait(420) == 0, emb.stderr.read()
    print(f"broker killed at {rated_plies(seen, t)} of {plies} plies rated; the stream finished {finished:.0f} s after the kill")
    assert "the Kafka broker takes no records: waiting for it" in said and "the Kafka broker takes records again" in said, said[-3000:]
    assert_exactly_once_and_equal_to_embedded(out, t, games, emb_out)


def test_produce_interrupted_while_the_broker_is_away_stops_within_seconds_and_says_what_was_not_sent(own_broker,
                                                                                                    london_rounds_1_to_4):
    """Ctrl-C on `kibitz produce` whose records wait for a broker that is away: it stops within its STOP_TIMEOUT
    (10 s), logging how many records the broker had not acknowledged, exit 130. It waited for ever once its input was
    all queued (aiokafka's stop waits for every batch, and the producer keeps its batches until the broker is back)."""
    from streamer.input_producer import STOP_TIMEOUT

    proc = subprocess.Popen([sys.executable, "-m", "streamer.cli", "produce", str(london_rounds_1_to_4), "--speed", "1000", "--broker",
                             own_broker.address, "--topic-prefix", fresh_prefix()], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as in a terminal
    try:
        time.sleep(5)  # connected and sending (the stream takes about 10 s at this speed)
        own_broker.kill()
        time.sleep(12)  # every event queued: it waits for the broker to acknowledge them
        assert proc.poll() is None
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(STOP_TIMEOUT + 20)
        took = time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
    said = proc.stderr.read()
    assert rc == 130 and took < STOP_TIMEOUT + 5, (rc, took, said[-2000:])
    assert "stopped with records the broker has not acknowledged" in said


def panel_metrics() -> set[str]:
    """Every metric name a panel of the shipped Grafana dashboard queries."""
    dash = json.loads((ROOT / "deploy" / "grafana" / "kibitz.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert exprs, "the dashboard has no queries"
    return {m for e in exprs for m in re.findall(r"\bkibitz_[a-z0-9_]+", e)}


def scrape(url: str) -> dict[str, float]:
    """Sample name with labels -> value, from a Prometheus text exposition."""
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line and not line.startswith("#")}



def http_json(url: str):
    import urllib.request

    return json.loads(urllib.request.urlopen(url, timeout=5).read())


def test_follow_produce_worker_metrics_prometheus_and_serve(broker, tmp_path):
    """A live feed through Kafka, as a broadcast runs it: ``kibitz follow --produce`` feeds a worker; the worker
    exports every metric the Grafana dashboard queries (move latency included), Prometheus (Debian's package)
    scrapes it, and ``kibitz serve`` shows the game from the output topics."""
    from conftest import BROADCAST

    prefix, mport, pport, sport = fresh_prefix(), free_port(), free_port(), free_port()
    t = Topics(prefix=prefix)
    plies = len(next(read_pgn_games(BROADCAST)).moves)
    (worker,) = start_workers(broker, prefix, *POOLED, "--engines", "1", "--metrics-port", str(mport))
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: kibitz\n    static_configs:\n"
                   f"      - targets: ['127.0.0.1:{mport}']\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{pport}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    serve = subprocess.Popen([sys.executable, "-m", "streamer.cli", "serve", "--broker", broker, "--topic-prefix", prefix,
                              "--listen", f"127.0.0.1:{sport}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        r = cli("follow", str(BROADCAST), "--produce", "--until-ended", "--interval", "0.2", "--broker", broker,
                "--topic-prefix", prefix, timeout=120)
        assert r.returncode == 0, r.stderr
        out = asyncio.run(consume_until(broker, [t.perceived], lambda o: sum(b'"scope":"game"' in x for x in o[t.perceived]) >= plies,
                                        timeout=300, workers=[worker]))
        assert out[t.perceived]
        counter, last = 'kibitz_events_total{type="move"}', dict[str, float]()

        def counted() -> dict[str, float] | None:
            last.update(scrape(f"http://127.0.0.1:{mport}/metrics"))
            return dict(last) if last.get(counter) == plies else None

        try:
            samples = poll(counted, 30, "the worker's move counter")
        except AssertionError as e:
            raise AssertionError(f"{e}: {counter} is {last.get(counter)}, {plies} moves were rated") from None
        names = {k.split("{")[0] for k in samples}
        for metric in panel_metrics():
            assert metric in names, f"the dashboard queries {metric}, the worker does not export it"
        assert samples["kibitz_move_seconds_count"] == plies  # move latency, recorded by the Kafka worker
        # every stage caught up: its consumer lag, one series per stage and input partition (4 each), falls to 0 (a
        # transaction's commit marker takes an offset too: counted as unread, the lag of a stage reading another
        # stage's output would never reach 0)
        lag: dict[str, float] = {}

        def caught_up() -> dict[str, float] | None:
            lag.clear()
            lag.update({k: v for k, v in scrape(f"http://127.0.0.1:{mport}/metrics").items()
                        if k.startswith("kibitz_consumer_lag{")})
            return dict(lag) if len(lag) == 3 * 4 and not any(lag.values()) else None

        try:
            poll(caught_up, 30, "every stage's lag to fall to 0")
        except AssertionError as e:
            raise AssertionError(f"{e}: {lag}") from None
        assert {re.search(r'stage="(\w+)"', k)[1] for k in lag} == {"analyse", "pool", "rate"}, lag
        # the liveness probe of deploy/k8s: the worker's loop and each of its stages watched, all live
        with urllib.request.urlopen(f"http://127.0.0.1:{mport}/healthz", timeout=5) as r:
            health = r.read().decode()
        assert r.status == 200 and all(f"stage {s}" in health for s in ("analyse", "pool", "rate")), health
        assert health.startswith("ok (event loop, "), health
        q = f'http://127.0.0.1:{pport}/api/v1/query?query=kibitz_events_total{{type="move"}}'
        result = poll(lambda: http_json(q)["data"]["result"], 60, "Prometheus to scrape the worker")
        assert float(result[0]["value"][1]) == plies
        game = poll(lambda: [g for g in http_json(f"http://127.0.0.1:{sport}/api/games") if g["moves"] == plies], 60,
                    "kibitz serve to show the game")[0]
        snap = http_json(f"http://127.0.0.1:{sport}/api/games/{game['game_id']}")
        assert snap["result"] == "1-0" and snap["white"]["rating"]["kind"] == "performance" and snap["eval_cp"] is not None
    finally:
        worker.stop()
        for p in (prom, serve):
            p.terminate()
            p.wait(20)


def test_a_stage_started_on_a_backlog_shows_its_consumer_lag_falling_to_zero(broker, london_rounds_1_to_4):
    """``kibitz_consumer_lag``: London 2011 rounds 1-4 produced first, then a worker's analyse stage started on them
    (no analysis cache: it searches every position) reports how far behind it is, by input partition; the sum falls
    as the moves are rated, to 0 once every one is. (test_follow_produce_worker_metrics_prometheus_and_serve checks
    that the stages reading other stages' transactional outputs fall to 0 too.)"""
    prefix, mport = fresh_prefix(), free_port()
    r = cli("produce", str(london_rounds_1_to_4), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
    assert r.returncode == 0, r.stderr
    events = int(re.search(r"produced (\d+) events", r.stdout + r.stderr)[1])
    (worker,) = start_workers(broker, prefix, *LIMITS, "--engines", "1", "--stages", "analyse", "--metrics-port", str(mport))
    sums: list[float] = []

    def caught_up() -> bool:
        worker.check()
        lag = [v for k, v in scrape(f"http://127.0.0.1:{mport}/metrics").items()
               if k.startswith('kibitz_consumer_lag{partition="') and 'stage="analyse"' in k]
        if len(lag) == 4:  # every input partition reported
            sums.append(sum(lag))
        return bool(sums) and sums[-1] == 0

    try:
        poll(caught_up, 240, "the analyse stage's lag to fall to 0")
    finally:
        worker.stop()
    assert 0 < sums[0] <= events and max(sums) == sums[0], sums[:10]  # behind by at most the backlog, then less
    assert len(set(sums)) > 2, sums  # seen falling, not only at its start and end


def test_follow_produce_started_again_with_its_state_sends_only_what_is_new(broker, tmp_path):
    """``kibitz follow --produce --state FILE`` run, then run again over the feed grown by a game: the second run
    sends only the new game's events (without the state it sends every event again, each a duplicate dead letter at
    the worker). ``--state`` without ``--produce`` is a usage error."""
    from conftest import pgn_upto

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    feed, state = tmp_path / "round.pgn", tmp_path / "follow-state.json"
    feed.write_text(pgn_upto(49))
    common = ("--produce", "--until-ended", "--interval", "0.1", "--broker", broker, "--topic-prefix", prefix,
              "--state", str(state))
    r = cli("follow", str(feed), *common, timeout=120)
    assert r.returncode == 0, r.stderr
    assert state.exists()
    feed.write_text(pgn_upto(49) + pgn_upto(49, white="Other, Player"))
    r = cli("follow", str(feed), *common, timeout=120)
    assert r.returncode == 0, r.stderr
    out = asyncio.run(consume_until(broker, [t.moves], lambda o: sum(b'"game_ended"' in v for v in o[t.moves]) >= 2,
                                    timeout=60))
    events = [json.loads(v) for v in out[t.moves]]
    assert [e["type"] for e in events].count("game_started") == 2 and len(events) == 2 * (49 + 2)
    assert len({(e["game_id"], e.get("ply"), e["type"]) for e in events}) == len(events)  # nothing sent twice
    r = cli("follow", str(feed), "--until-ended", "--state", str(state), timeout=60)
    assert r.returncode == 2 and "--state keeps what a follow sent to Kafka: it needs --produce" in r.stderr
    r = cli("follow", str(feed), *common[:-1], str(tmp_path / "no-such-folder" / "state.json"), timeout=60)
    assert r.returncode == 2 and "no-such-folder to keep it in" in r.stderr


def test_a_rate_stage_run_with_another_profile_than_the_analyse_stage_dead_letters_what_it_cannot_rate(broker):
    """A split deployment whose analyse stage searches at other limits (here depth 6, 4 lines) than the rate stage's
    profile was fitted on (``fast``: depth 8, 5 lines): every assessment is dead-lettered ``limits_mismatch`` with the
    assessment kept and both limits named, no rating is published from those moves, and the game's result is still
    applied. Rated as given, such moves moved a player's ratings (depth 10 read by fast) by 230-890 Elo without a word."""
    from conftest import BROADCAST

    from analyzers.profiles import get_profile
    from schemas import MoveAssessment

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    workers = [WorkerProcess(broker, prefix, *LIMITS, "--engines", "1", "--stages", "analyse"),
               WorkerProcess(broker, prefix, "--no-event-pool", "--engines", "1", "--stages", "rate")]
    try:
        r = cli("produce", str(BROADCAST), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
        assert r.returncode == 0, r.stderr
        out = asyncio.run(consume_until(
            broker, [t.assessments, t.perceived, t.glicko2, t.deadletter],
            lambda o: len(o[t.glicko2]) >= 2 and len(o[t.deadletter]) >= 49,
            timeout=240, workers=workers))
    finally:
        stop_all(workers, None)
    assessed = [v for v in out[t.assessments] if b'"type":"assessment"' in v.replace(b" ", b"")]
    assert len(assessed) == 49
    letters = [json.loads(v) for v in out[t.deadletter]]
    assert {d["reason"] for d in letters} == {"limits_mismatch"} and len(letters) == 49
    assert sorted(d["raw"] for d in letters) == sorted(v.decode() for v in assessed)  # each kept as it was sent
    fast = get_profile("fast").limits.key
    assert all(MoveAssessment.model_validate_json(d["raw"]).limits == "d6-mpv4" for d in letters)
    assert all(f"searched at d6-mpv4, but this stage rates moves searched at {fast} (profile fast)" in d["error"]
               for d in letters)
    rated = [m for m in map(json.loads, out[t.perceived]) if m["moves"] > 0]
    assert rated == [], "no rating from moves searched at other limits"
    assert len(out[t.glicko2]) == 2  # the result is applied: Glicko-2 does not read the moves


async def add_partitions(broker: str, counts: dict[str, int]) -> None:
    """What an operator does with ``kafka-topics.sh --alter --partitions N``: each topic of ``counts`` gets that many."""
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions

    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        await admin.create_partitions({topic: NewPartitions(total_count=n) for topic, n in counts.items()})
    finally:
        await admin.close()


def test_another_app_id_or_partitions_added_on_the_same_topics_stop_the_worker_with_what_to_do(broker):
    """A worker of another ``--app-id`` on the same topics (a new consumer group: a reprocess "from scratch") stops at
    once naming both apps: it read every input again against the other app's states, published every assessment a
    second time and no rating (each move already seen), without a word.
    Partitions added to ``kibitz.moves`` (to scale out; Kafka cannot take them away) move games to partitions whose
    state does not hold them. The running worker stops (exit 1) naming the topic and both counts, within its metadata
    refresh: it had left the new partitions unread for aiokafka's 5-minute metadata age, then waited 40 s per partition
    for changelog partitions that do not exist and ended on "is another worker running with the same --instance-id?".
    Started again, it stops before it searches anything; with partitions added to the state changelog too (the counts
    agree, the keys moved), it stops on the count its states were written under (a changelog record header), where
    it would have rated every moved game and player from an empty state."""
    from conftest import BROADCAST

    from streamer.kafka_eos import METADATA_MAX_AGE_MS

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    worker_args = ["worker", "--broker", broker, "--topic-prefix", prefix, "--app-id", prefix, *LIMITS, "--engines", "1"]
    worker = subprocess.Popen([sys.executable, "-m", "streamer.cli", *worker_args], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        r = cli("produce", str(BROADCAST), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
        assert r.returncode == 0, r.stderr
        asyncio.run(consume_until(broker, [t.glicko2], lambda o: len(o[t.glicko2]) >= 2, timeout=240))
        other = cli("worker", *worker_args[1:5], "--app-id", "another", *worker_args[7:], timeout=120)
        assert other.returncode == 1
        assert re.search(rf"kibitz: the states in {re.escape(prefix)}kibitz\.state\.\w+ \(partition \d\) were written by "
                         rf"app '{re.escape(prefix)}'; this worker is app 'another'", other.stderr), other.stderr[-3000:]
        assert worker.poll() is None
        asyncio.run(add_partitions(broker, {t.moves: 8}))
        _, err = worker.communicate(timeout=METADATA_MAX_AGE_MS / 1000 + 60)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
    assert worker.returncode == 1, err[-3000:]
    assert f"kibitz: {t.moves} went from 4 to 8 partitions while this worker ran." in err, err[-3000:]
    assert "start a new deployment (another --topic-prefix, --partitions N)" in err
    assert "another worker running" not in err and "Traceback" not in err

    r = cli("worker", *worker_args[1:], timeout=120)
    assert r.returncode == 1
    assert f"kibitz: {t.moves} has 8 partitions and its state changelog {t.state_games} 4." in r.stderr, r.stderr[-3000:]

    asyncio.run(add_partitions(broker, {t.state_games: 8}))
    r = cli("worker", *worker_args[1:], timeout=120)
    assert r.returncode == 1
    assert re.search(rf"kibitz: the states in {re.escape(t.state_games)} \(partition \d\) were written when "
                     rf"{re.escape(t.moves)} had 4 partitions; it has 8 now\.", r.stderr), r.stderr[-3000:]


@pytest.mark.parametrize("first,then", [("transactional", "faust"), ("faust", "transactional")])
def test_a_worker_of_the_other_runtime_on_rated_topics_stops_naming_the_runtime_that_rated_them(broker, first, then):
    """One game rated by one runtime; a worker of the other runtime started on the same topics and app id stops at
    once, exit 1, naming the runtime and its consumer group (a faust worker under another app id too, naming the
    transactional runtime's changelog). The runtimes keep their states in different changelogs:
    faust started after the transactional runtime read the game again from its start with empty tables and published
    its assessments, ratings and Glicko-2 updates a second time."""
    from conftest import BROADCAST

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    worker = WorkerProcess(broker, prefix, *LIMITS, "--engines", "1", "--runtime", first)
    try:
        r = cli("produce", str(BROADCAST), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
        assert r.returncode == 0, r.stderr
        asyncio.run(consume_until(broker, [t.glicko2], lambda o: len(o[t.glicko2]) >= 2, timeout=240, workers=[worker]))
    finally:
        worker.stop()
    r = cli("worker", "--broker", broker, "--topic-prefix", prefix, "--app-id", prefix, *LIMITS, "--engines", "1",
            "--runtime", then, timeout=120)
    group = prefix if first == "faust" else f"{prefix}.analyse"
    assert r.returncode == 1, r.stderr[-3000:]
    assert (f"kibitz: consumer group {group!r} has read {t.moves}: the {first} runtime has rated these topics as app "
            f"{prefix!r}. The {then} runtime keeps its states elsewhere") in r.stderr, r.stderr[-3000:]
    if then == "faust":  # under an app id of its own too: the transactional runtime's changelogs hold states
        r = cli("worker", "--broker", broker, "--topic-prefix", prefix, "--app-id", "another", *LIMITS, "--engines", "1",
                "--runtime", "faust", timeout=120)
        assert r.returncode == 1, r.stderr[-3000:]
        assert re.search(rf"kibitz: {re.escape(prefix)}kibitz\.state\.\w+ holds states of the transactional runtime",
                         r.stderr), r.stderr[-3000:]
    glicko = asyncio.run(consume_until(broker, [t.glicko2], lambda o: True, timeout=30))[t.glicko2]
    assert len(glicko) == 2, "each player's Glicko-2 update once"


@pytest.mark.parametrize("made_with", [8, 2])
def test_an_input_topic_a_producer_made_with_another_partition_count_is_rated_on_a_fresh_deployment(broker, made_with):
    """``kibitz produce`` run first with another partition count (``KIBITZ_KAFKA_PARTITIONS``) than the worker's (4):
    the game is rated. With more partitions the worker gives its empty state changelog as many (nothing is kept there
    yet, so nothing moves); with fewer, the changelog's extra partitions are unused. Either stopped the worker (the
    counts differed) or, before that check, left the partitions past the changelog's unread for 5 minutes."""
    from conftest import BROADCAST

    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    r = cli("produce", str(BROADCAST), "--max-speed", "--broker", broker, "--topic-prefix", prefix,
            env={"KIBITZ_KAFKA_PARTITIONS": str(made_with)})
    assert r.returncode == 0, r.stderr
    worker = WorkerProcess(broker, prefix, *LIMITS, "--engines", "1")
    try:
        out = asyncio.run(consume_until(broker, [t.glicko2, t.deadletter], lambda o: len(o[t.glicko2]) >= 2,
                                        timeout=240, workers=[worker]))
    finally:
        worker.stop()
    assert len(out[t.glicko2]) == 2 and out[t.deadletter] == []

    assert asyncio.run(partition_counts(broker, [t.moves, t.state_games])) == [made_with, max(made_with, 4)]


def test_workers_starting_together_on_an_input_with_more_partitions_both_grow_its_empty_changelog(broker):
    """Two workers of one stage starting at once on a fresh deployment whose input a producer made with 6 partitions:
    both find the changelog short and ask the broker to grow it; the second request is refused (InvalidPartitions: it
    has 6 already), which ended that worker on aiokafka's traceback though the count it wanted was there."""
    from streamer.kafka_config import KafkaSettings, stage_topics
    from streamer.kafka_eos import check_layout, ensure_topics

    prefix = fresh_prefix()
    made = KafkaSettings(broker=broker, topics=Topics(prefix=prefix), partitions=6)
    asyncio.run(ensure_topics(made, [made.topics.moves]))
    settings = KafkaSettings(broker=broker, topics=Topics(prefix=prefix))
    asyncio.run(ensure_topics(settings))
    pair = stage_topics(settings.topics)["analyse"]

    async def both():  # noqa: ANN202
        return await asyncio.gather(*(check_layout(settings, [pair]) for _ in range(3)))

    assert asyncio.run(both()) == [{settings.topics.moves: 6}] * 3
    assert asyncio.run(partition_counts(broker, [settings.topics.moves, settings.topics.state_games])) == [6, 6]


def test_a_transaction_timeout_the_broker_refuses_is_a_usage_error_naming_its_limit(broker):
    """``--transaction-timeout`` above the broker's ``transaction.max.timeout.ms`` (900 s by default): exit 2 with what
    to do, where the worker ended on aiokafka's traceback and a dozen "Unclosed AIOKafkaProducer" lines."""
    prefix = fresh_prefix()
    r = cli("worker", "--broker", broker, "--topic-prefix", prefix, "--app-id", prefix, *LIMITS, "--engines", "1",
            "--transaction-timeout", "1000", timeout=120)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "kibitz: --transaction-timeout 1000 s: the broker refuses it, as above its transaction.max.timeout.ms" in r.stderr
    assert "Traceback" not in r.stderr and "Unclosed" not in r.stderr


def test_topics_the_broker_refuses_to_create_stop_the_worker_and_produce_naming_why(broker):
    """A replication factor above the brokers up (3 on this one broker, by option or environment): the worker and
    ``kibitz produce`` stop at once, exit 1, with the broker's reason and the settings that asked for it. aiokafka
    returns such refusals in the response: the worker hung without a line, and ``produce`` sent its records into
    topics the broker made itself at the first send, with one replica where three were asked for."""
    from conftest import BROADCAST

    prefix = fresh_prefix()
    r = cli("worker", "--broker", broker, "--topic-prefix", prefix, "--app-id", prefix, *LIMITS, "--engines", "1",
            "--replication-factor", "3", timeout=60)
    assert r.returncode == 1, r.stderr[-3000:]
    assert re.search(r"kibitz: the broker refused to create 1\d topic\(s\), e\.g\. \S+: InvalidReplicationFactorError "
                     r"\(.*only 1 broker\(s\) are registered.*\); asked for 4 partitions and 3 replicas", r.stderr), r.stderr
    r = cli("produce", str(BROADCAST), "--max-speed", "--broker", broker, "--topic-prefix", prefix + "p.", timeout=60,
            env={"KIBITZ_KAFKA_REPLICATION_FACTOR": "3"})
    assert r.returncode == 1 and "InvalidReplicationFactorError" in r.stderr, r.stderr[-3000:]

    assert not any(n.startswith(prefix) for n in asyncio.run(topic_names(broker))), "no topic made with the broker's defaults"


def go_through_worker_and_replay(broker: str, tmp_path: Path, sources: list[Path], go: tuple[str, ...],
                                 results: int) -> tuple[list[dict], list[dict]]:
    """Produce ``sources`` (SGF and PGN files) to one worker started with ``--go`` and the options ``go``; consume its
    ratings and Glicko-2 updates until ``results`` updates are in (nothing dead-lettered), then replay the SGF files with
    the same options. Returns (the worker's messages, the replay's)."""
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    worker = WorkerProcess(broker, prefix, *LIMITS, "--engines", "1", "--go", *go)
    try:
        for path in sources:
            r = cli("produce", str(path), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
            assert r.returncode == 0, r.stderr
        out = asyncio.run(consume_until(broker, [t.perceived, t.glicko2, t.deadletter],
                                        lambda o: len(o[t.glicko2]) >= results, timeout=420, workers=[worker]))
    finally:
        worker.stop()
    assert out[t.deadletter] == []
    replay_out = tmp_path / "replay.jsonl"
    r = cli("replay", *(str(p) for p in sources if p.suffix == ".sgf"), "--out", str(replay_out), "--quiet", *go)
    assert r.returncode == 0, r.stderr
    return ([json.loads(v) for v in out[t.perceived] + out[t.glicko2]],
            [json.loads(line) for line in replay_out.read_text().splitlines()])


def go_key(m: dict) -> tuple:
    """What must be equal of a Go message from either runtime."""
    return (m["type"], m.get("scope"), m["player_id"], m.get("ply"), m.get("rating"), m.get("low"), m.get("high"),
            m.get("rank"), m.get("method"), json.dumps(m.get("after")))


def test_a_go_game_runs_through_the_worker_beside_chess_as_through_the_replay(broker, tmp_path):
    """One worker with --go rates a held-out Fox game (SGF, produced as Go events) and chess games on the same topics:
    the Go ratings equal `kibitz replay FILE.sgf`'s (the embedded runtime, same steps), once per move."""
    fox, chess_pgn = ROOT / "tests/fixtures/fox_5d_testing.sgf", ROOT / "tests/fixtures/anonymous.pgn"
    msgs, replayed = go_through_worker_and_replay(broker, tmp_path, [fox, chess_pgn], ("--go-profile", "go-fox-gnugo-l1"),
                                                  results=6)
    go = [m for m in msgs if m["game"] == "go"]
    chess_game = [m for m in msgs if m["type"] == "perceived" and m["game"] == "chess" and m["scope"] == "game"]
    assert len(chess_game) == 20 and sum(m["game"] == "chess" for m in msgs if m["type"] == "glicko2") == 4
    assert len([m for m in go if m["type"] == "perceived" and m["scope"] == "game"]) == 105  # every move, once
    assert sorted(map(go_key, go)) == sorted(map(go_key, replayed))


def test_go_games_sent_to_a_worker_without_go_are_rated_once_redriven_to_one_with_it(broker, tmp_path):
    """A Go game produced to a worker started without --go: its start is dead-lettered `unsupported_game`, its moves and
    end `unknown_game`. The worker started again with --go, `kibitz redrive --reason unsupported_game --reason
    unknown_game` sends them back, start first: every move rated once, both Glicko-2 updates, no new dead letter."""
    root, *nodes = (ROOT / "tests/fixtures/fox_5d_testing.sgf").read_text().strip().removeprefix("(;").removesuffix(")").split(";")
    fox = tmp_path / "fox_opening.sgf"
    fox.write_text("(;" + ";".join([root, *nodes[:20]]) + ")\n")
    prefix = fresh_prefix()
    t = Topics(prefix=prefix)
    worker = WorkerProcess(broker, prefix, *LIMITS, "--engines", "1", "--store", "memory")
    try:
        r = cli("produce", str(fox), "--max-speed", "--broker", broker, "--topic-prefix", prefix)
        assert r.returncode == 0, r.stderr
        out = asyncio.run(consume_until(broker, [t.deadletter], lambda o: len(o[t.deadletter]) >= 22, timeout=120,
                                        workers=[worker]))
    finally:
        worker.stop()
    reasons = sorted(json.loads(v)["reason"] for v in out[t.deadletter])
    assert reasons == ["unknown_game"] * 21 + ["unsupported_game"], reasons
    worker = WorkerProcess(broker, prefix, *LIMITS, "--engines", "1", "--store", "memory", "--go", "--go-profile",
                           "go-fox-gnugo-l1")
    try:
        rc, report, err = redrive(broker, prefix, "--reason", "unsupported_game", "--reason", "unknown_game")
        assert rc == 0 and [report[r]["read"] for r in ("unsupported_game", "unknown_game")] == [1, 21], (report, err)
        out = asyncio.run(consume_until(broker, [t.perceived, t.glicko2, t.deadletter],
                                        lambda o: len(o[t.glicko2]) >= 2, timeout=180, workers=[worker]))
    finally:
        worker.stop()
    game = [(m["game_id"], m["ply"]) for m in map(json.loads, out[t.perceived]) if m["scope"] == "game"]
    assert len(game) == len(set(game)) == 20 and len(out[t.glicko2]) == 2 and len(out[t.deadletter]) == 22


def test_a_go_game_rated_by_katago_runs_through_the_worker_as_through_the_replay(broker, tmp_path):
    """The worker's Go pool runs the engine the calibration was fitted on: with the KataGo calibration, the opening of a
    held-out Fox game is rated from KataGo's evaluations (``method`` "network"), once per move, as the replay rates it."""
    from analyzers.engine.katago import KATAGO_HOME

    root, *nodes = (ROOT / "tests/fixtures/fox_5d_testing.sgf").read_text().strip().removeprefix("(;").removesuffix(")").split(";")
    fox = tmp_path / "fox_opening.sgf"
    fox.write_text("(;" + ";".join([root, *nodes[:8]]) + ")\n")
    # one cache for both: the replay reads the worker's evaluations (KataGo's answers are deterministic; tested in
    # test_katago.py) and what is compared is the two runtimes' steps
    go = ("--go-engine", str(KATAGO_HOME / "katago"), "--cache", str(tmp_path / "go.sqlite"))  # the default calibration
    rated, replayed = go_through_worker_and_replay(broker, tmp_path, [fox], go, results=2)
    game = [m for m in rated if m["type"] == "perceived" and m["scope"] == "game"]
    assert len(game) == 8 and all(m["method"] == "network" for m in game)
    assert sorted(map(go_key, rated)) == sorted(map(go_key, replayed))


def test_an_event_with_thousands_of_players_does_not_stop_the_pool_stage(broker):
    """An online event of 1,500 players, three rounds of 750 games all open at once, then their results: every record
    passes the pool stage once with its prior, nothing is dead-lettered, and every changelog record of the event stays
    under the stated bound (a state over the 1 MB a Kafka record may have would abort every transaction of the event)."""
    from analyzers.combination import load_combination
    from analyzers.eventpool import EVENT_STATE_BOUND, EventEvidence, load_event_pool
    from analyzers.profiles import get_profile
    from analyzers.ratingmodel import load_move_model
    from schemas import GameResult, MoveAssessment, PlayerInfo
    from streamer.kafka_config import KafkaSettings
    from streamer.kafka_eos import StageConfig, _sync
    from streamer.pipeline import PipelineConfig
    from streamer.steps import Steps

    settings = KafkaSettings(broker=broker, partitions=2, topics=Topics(prefix=fresh_prefix()))
    t = settings.topics
    steps = Steps(PipelineConfig(get_profile("fast"), None, model=load_move_model("fast"), combination=load_combination("fast"),
                                 event_pool=load_event_pool("fast")))
    cands = [{"uci": "e2e4", "cp": 30, "mate": None}, {"uci": "d2d4", "cp": 20, "mate": None}, {"uci": "g1f3", "cp": -40, "mate": None}]
    event, players = "Online Open 2026", 1500
    key = event.encode()
    records = []
    for rnd in range(3):
        for board in range(players // 2):
            w, b = f"fide:{10_000_000 + 2 * board}", f"fide:{10_000_000 + (2 * board + 2 * rnd + 1) % players}"
            game = f"online-open-2026:round-{rnd + 1}:board-{board + 1}"
            for ply, player in ((20, w), (21, b)):
                a = MoveAssessment(game_id=game, ply=ply, player_id=player, color="white" if player == w else "black",
                                   uci="d2d4", event=event, reference_rating=1800, eval_before=30, eval_after=20, gain=-10,
                                   loss=10, candidates=cands, played_rank=1, played_value=20, counted=True, engine="test",
                                   limits="d8-mpv5", time_class="rapid")
                records.append((key, a.model_dump_json().encode()))
        for board in range(players // 2):  # the round's results after all its moves: up to 1,500 games open at once
            w, b = f"fide:{10_000_000 + 2 * board}", f"fide:{10_000_000 + (2 * board + 2 * rnd + 1) % players}"
            game = f"online-open-2026:round-{rnd + 1}:board-{board + 1}"
            for me, opp, score in ((w, b, 1.0), (b, w, 0.0)):
                r = GameResult(game_id=game, player_id=me, color="white" if me == w else "black", score=score, event=event,
                               player=PlayerInfo(id=me), opponent=PlayerInfo(id=opp))
                records.append((key, r.model_dump_json().encode()))

    async def run():
        stage, out = await run_stage(
            settings, StageConfig("pool", t.pool, t.state_events, _sync(steps.pool_record), EventEvidence), records,
            [t.assessments, t.deadletter], lambda o: len(o[t.assessments]) + len(o[t.deadletter]) >= len(records), timeout=300)
        return stage, out, [len(v) for v in (await read_topic(broker, t.state_events)).get(key, []) if v]

    stage, out, sizes = asyncio.run(run())
    assert not out[t.deadletter] and stage.poisoned == 0, (len(out[t.deadletter]), stage.poisoned)
    passed = [json.loads(v) for v in out[t.assessments]]
    assert len(passed) == len(records)
    assert sum(m.get("event_prior") is not None for m in passed) >= len(records) - 2  # the event's first mover has none
    assert sizes and max(sizes) < EVENT_STATE_BOUND, (len(sizes), max(sizes or [0]))
