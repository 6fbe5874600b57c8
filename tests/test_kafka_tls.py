"""A real broker whose listener speaks TLS (own ports; kafka.sh's self-signed certificate for 127.0.0.1): with the
certificate's CA file the worker and the producer rate games over it; a client whose CAs did not sign it stops at once
naming the setting; a plaintext client waiting for it is told the broker closes its connections (the other way round,
a TLS client waiting for a plaintext listener: test_kafka.py -k resets_its_handshakes)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamer.devkafka import ROOT, WorkerProcess, fresh_prefix, read_records, waiting_line, worker_port
from streamer.kafka_config import KafkaSettings, Topics

pytestmark = pytest.mark.kafka
PORT = worker_port(19392)
BROKER_ENV = {**os.environ, "KIBITZ_KAFKA_PORT": str(PORT), "KIBITZ_KAFKA_CONTROLLER_PORT": str(PORT + 1),
              "KIBITZ_KAFKA_TLS": "1"}
CA = Path(os.environ.get("KIBITZ_CACHE") or ROOT / ".cache") / "kafka" / f"run-{PORT}" / "tls" / "ca.pem"  # kafka.sh makes it
TLS_ENV = {"KIBITZ_KAFKA_SECURITY_PROTOCOL": "SSL", "KIBITZ_KAFKA_SSL_CAFILE": str(CA)}


def kafka_sh(cmd: str) -> None:
    r = subprocess.run(["bash", str(ROOT / "deploy/kafka/kafka.sh"), cmd], env=BROKER_ENV, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr


def kibitz(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamer.cli", *args], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)


def test_over_tls_the_worker_rates_and_a_certificate_that_does_not_verify_or_a_plaintext_client_is_told_why(tmp_path,
                                                                                                            monkeypatch):
    broker, prefix = f"127.0.0.1:{PORT}", fresh_prefix()
    kafka_sh("reset")
    kafka_sh("start")
    try:
        # the system's CAs (no KIBITZ_KAFKA_SSL_CAFILE) did not sign the broker's certificate: waited for as an absent
        # broker, for ever, before BrokerRefused
        started = time.monotonic()
        r = kibitz("tail", "moves", "--broker", broker, "--topic-prefix", prefix, "--idle", "1",
                   env={"KIBITZ_KAFKA_SECURITY_PROTOCOL": "SSL"})
        assert r.returncode == 2 and time.monotonic() - started < 60, r.stderr
        assert (f"the Kafka broker at {broker} refused this client (SSL): SSLCertVerificationError: [SSL: "
                f"CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate") in r.stderr, r.stderr
        assert "check KIBITZ_KAFKA_SSL_CAFILE" in r.stderr

        # a plaintext client: the broker takes each connection and closes it; still waited for (a broker starting
        # does so too), with the hint
        said = waiting_line(broker, prefix, tmp_path / "plain.err")
        assert ("(KafkaConnectionError; it closes each connection: if its listener expects TLS or SASL, set "
                "KIBITZ_KAFKA_SECURITY_PROTOCOL (now PLAINTEXT))") in said, said

        # with the CA file: the worker and the producer over TLS
        for k, v in TLS_ENV.items():
            monkeypatch.setenv(k, v)
        worker = WorkerProcess(broker, prefix, "--depth", "5", "--multipv", "3", "--engines", "1", "--store", "memory")
        try:
            r = kibitz("produce", str(ROOT / "tests/fixtures/anonymous.pgn"), "--max-speed", "--broker", broker,
                       "--topic-prefix", prefix, env=TLS_ENV)
            assert r.returncode == 0, r.stderr[-3000:]
            settings = KafkaSettings.from_env(broker=broker, topics=Topics(prefix=prefix))
            updates = asyncio.run(read_records(settings, settings.topics.glicko2, 4, workers=[worker]))
        finally:
            worker.stop()
        assert len(updates) == 4, "the worker rated both games over TLS"
    finally:
        kafka_sh("reset")

