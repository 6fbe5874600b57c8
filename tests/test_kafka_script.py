"""deploy/kafka/kafka.sh keeps a broker's data across stop and start; reset wipes it (real broker, own ports)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from streamer.devkafka import ROOT

pytestmark = pytest.mark.kafka
PORT = 19192
ENV = {**os.environ, "KIBITZ_KAFKA_PORT": str(PORT), "KIBITZ_KAFKA_CONTROLLER_PORT": str(PORT + 1)}


def kafka_sh(cmd: str) -> subprocess.CompletedProcess:
    r = subprocess.run(["bash", str(ROOT / "deploy/kafka/kafka.sh"), cmd], env=ENV, capture_output=True, text=True, timeout=600)
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
    kafka_sh("reset")
    try:
        kafka_sh("start")
        asyncio.run(create("kept.across.restarts"))
        kafka_sh("stop")
        kafka_sh("start")
        assert "kept.across.restarts" in asyncio.run(topics())
        kafka_sh("reset")
        kafka_sh("start")
        assert "kept.across.restarts" not in asyncio.run(topics())
    finally:
        kafka_sh("reset")
