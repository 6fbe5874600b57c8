"""deploy/kafka/kafka.sh keeps a broker's data across stop and start; reset wipes it (real broker, own ports)."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
from pathlib import Path

import pytest

from streamer.devkafka import ROOT, worker_port

pytestmark = pytest.mark.kafka
PORT = worker_port(19192)
ENV = {**os.environ, "KIBITZ_KAFKA_PORT": str(PORT), "KIBITZ_KAFKA_CONTROLLER_PORT": str(PORT + 1)}


def kafka_sh(cmd: str, **env: str) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", str(ROOT / "deploy/kafka/kafka.sh"), cmd], env={**ENV, **env}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    return r


async def topics() -> set[str]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{PORT}")
    await admin.start()
    try:
        return set(await admin.list_topics())
    finally:
        await admin.close()


async def create(name: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{PORT}")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()


def test_start_keeps_data_and_reset_wipes_it():
    # a cluster id that starts with "-" (URL-safe base64 of bytes from 0xf8) is still read as the id, not an option
    dashed = base64.urlsafe_b64encode(bytes([0xF8]) + os.urandom(15)).decode().rstrip("=")
    assert dashed.startswith("-")
    kafka_sh("reset")
    try:
        kafka_sh("start", KIBITZ_KAFKA_CLUSTER_ID=dashed)
        asyncio.run(create("kept.across.restarts"))
        kafka_sh("stop")
        kafka_sh("start")
        assert "kept.across.restarts" in asyncio.run(topics())
        kafka_sh("reset")
        kafka_sh("start")
        assert "kept.across.restarts" not in asyncio.run(topics())
    finally:
        kafka_sh("reset")


def test_worker_and_producer_started_before_the_broker_wait_for_it_and_lose_nothing(tmp_path):
    import json
    import sys
    import time

    from streamer.devkafka import WorkerProcess, consume_until, fresh_prefix, poll
    from streamer.kafka_config import Topics

    broker, prefix = f"127.0.0.1:{PORT}", fresh_prefix()
    kafka_sh("reset")
    worker = WorkerProcess(broker, prefix, "--depth", "5", "--multipv", "3", "--engines", "1", "--store", "memory")
    produce = subprocess.Popen([sys.executable, "-m", "streamer.cli", "produce", str(ROOT / "tests/fixtures/anonymous.pgn"),
                                "--broker", broker, "--topic-prefix", prefix, "--max-speed"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # both up and waiting (nothing answers on the port yet): the worker, the slower to start, has said so, and
        # both have retried for a few seconds since
        poll(lambda: worker.check() or "waiting for the Kafka broker" in Path(worker.log.name).read_text(), 60,
             "the worker to say it waits for the broker")
        time.sleep(5)
        worker.check()
        assert produce.poll() is None
        kafka_sh("start")
        _, err = produce.communicate(timeout=120)
        assert produce.returncode == 0, err
        waiting = [ln for ln in err.splitlines() if "waiting for the Kafka broker" in ln]
        assert len(waiting) == 1 and "answered after" in err, err  # one clear line, not a flood
        assert "Unable connect" not in err, err  # aiokafka's error line for the first refused connection came before it
        topics = Topics(prefix=prefix)
        out = asyncio.run(consume_until(broker, [topics.perceived, topics.glicko2],
                                        lambda o: len(o[topics.glicko2]) >= 4, timeout=180, workers=[worker]))
        game = [json.loads(v) for v in out[topics.perceived] if json.loads(v)["scope"] == "game"]
        assert len(game) == 20 and len({(m["game_id"], m["ply"]) for m in game}) == 20  # every ply, once
        assert len(out[topics.glicko2]) == 4
    finally:
        produce.kill()
        worker.stop()
        kafka_sh("reset")


def test_new_cluster_ids_are_kafka_uuids_that_never_look_like_an_option():
    from streamer.devkafka import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]  # about 31 of 2,000 raw ids would start with "-"
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)


def test_worker_logs_of_earlier_runs_are_pruned_and_this_runs_kept(tmp_path):
    from streamer.devkafka import prune_worker_logs

    old, new, other = tmp_path / "worker-told.1.log", tmp_path / "worker-tnew.2.log", tmp_path / "notes.log"
    for path in (old, new, other):
        path.write_text("x")
    day_ago = old.stat().st_mtime - 2 * 24 * 3600
    os.utime(old, (day_ago, day_ago))
    os.utime(other, (day_ago, day_ago))
    assert prune_worker_logs(tmp_path, keep_s=24 * 3600) == 1
    assert not old.exists() and new.exists() and other.exists()  # only worker logs, only old ones
