"""A real broker that requires SASL/PLAIN and ACLs (own ports): credentials it refuses and ACLs missing stop the clients
naming why; the ACLs README lists are enough; no credential in any log of a worker at DEBUG."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
import time

import pytest

from analyzers.errors import PoisonRecord
from streamer.devbrowser import free_port
from streamer.devkafka import ROOT, fresh_prefix, poll, read_records, worker_port
from streamer.devkafka import produce as send_records
from streamer.kafka_config import KafkaSettings, Topics
from streamer.kafka_eos import ensure_topics
from streamer.steps import dead_letter

pytestmark = pytest.mark.kafka
PORT = worker_port(19292)
PASSWORD = "kbz-" + secrets.token_hex(12)
FEEDER_PASSWORD = "kbz-" + secrets.token_hex(12)
#: the first user administers the ACLs (a super user); kibitz runs the worker, feeder produces
BROKER_ENV = {**os.environ, "KIBITZ_KAFKA_PORT": str(PORT), "KIBITZ_KAFKA_CONTROLLER_PORT": str(PORT + 1),
              "KIBITZ_KAFKA_SASL_USERS": f"admin:kbz-{secrets.token_hex(12)} kibitz:{PASSWORD} feeder:{FEEDER_PASSWORD}",
              "KIBITZ_KAFKA_ACLS": "1"}
#: the worker signs in with SCRAM-SHA-512 (deploy/k8s's), the producer with PLAIN
CLIENT_ENV = {**os.environ, "KIBITZ_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KIBITZ_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
              "KIBITZ_KAFKA_SASL_USERNAME": "kibitz", "KIBITZ_KAFKA_SASL_PASSWORD": PASSWORD}
FEEDER_ENV = {**CLIENT_ENV, "KIBITZ_KAFKA_SASL_MECHANISM": "PLAIN", "KIBITZ_KAFKA_SASL_USERNAME": "feeder",
              "KIBITZ_KAFKA_SASL_PASSWORD": FEEDER_PASSWORD}


def kafka_sh(cmd: str, *args: str) -> None:
    r = subprocess.run(["bash", str(ROOT / "deploy/kafka/kafka.sh"), cmd, *args], env=BROKER_ENV, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr


def run_worker(broker: str, prefix: str, app: str) -> subprocess.CompletedProcess:
    """A worker as the kibitz user, until it exits (each use here expects it to stop on a refusal)."""
    return subprocess.run([sys.executable, "-m", "streamer.cli", "worker", "--broker", broker, "--topic-prefix", prefix,
                           "--app-id", app, "--depth", "5", "--multipv", "3", "--engines", "1", "--store", "memory"],
                          cwd=ROOT, env=CLIENT_ENV, capture_output=True, text=True, timeout=180)


def allow(user: str, resource: list[str], *operations: str) -> None:
    """Add an ACL (kafka.sh acl: Kafka's own kafka-acls tool)."""
    kafka_sh("acl", "--add", "--allow-principal", f"User:{user}", *[a for op in operations for a in ("--operation", op)],
             *resource)


async def read(settings: KafkaSettings, topic: str, want: int, timeout: float = 180) -> list[dict]:
    return [json.loads(v) for v in await read_records(settings, topic, want, timeout)]


def test_a_worker_at_debug_on_a_sasl_broker_with_acls_works_and_never_logs_the_password_and_refusals_stop_it(tmp_path):
    """Refused credentials (a wrong password, a mechanism the broker does not enable) were waited for as an absent
    broker, for ever: "waiting for the Kafka broker ... (KafkaConnectionError)", the cause nowhere. Now a usage error
    (exit 2) at once, naming the broker's refusal and the settings to check. So is an ACL missing (NotAuthorized), and
    with the ACLs README lists the worker and the producer, each under its own user, rate the games."""
    broker, prefix = f"127.0.0.1:{PORT}", fresh_prefix()
    kafka_sh("reset")
    kafka_sh("start")
    wrong = "kbz-" + secrets.token_hex(12)
    app = prefix.rstrip(".")
    # README, "Kafka ACLs": the producer's, and the worker's topic ACLs; its group and transactional ids after the
    # checks below that each one missing stops the worker naming it
    inputs = [a for t in ("moves", "games", "deadletter") for a in ("--topic", f"{prefix}kibitz.{t}")]
    allow("feeder", inputs, "Create", "Describe")
    for denied, then in [
        # was aiokafka's traceback, exit 1: with WRITE on no topic the broker gives no idempotent producer id
        ("a producer id (WRITE on the input topics): [Error 31] ClusterAuthorizationFailedError",
         ["--topic", f"{prefix}kibitz.deadletter"]),
        # was exit 1, "the Kafka broker refused a record: TopicAuthorizationFailedError(...)"
        (f"writing the inputs (WRITE): [Error 29] TopicAuthorizationFailedError: {prefix}kibitz.moves", inputs),
    ]:
        r = subprocess.run([sys.executable, "-m", "streamer.cli", "produce", str(ROOT / "tests/fixtures/anonymous.pgn"),
                            "--max-speed", "--broker", broker, "--topic-prefix", prefix],
                           cwd=ROOT, env=FEEDER_ENV, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "Unclosed" not in r.stderr, r.stderr[-3000:]
        assert f"denies user feeder {denied}. Grant the ACLs that README, 'Kafka ACLs', lists" in r.stderr, r.stderr[-3000:]
        allow("feeder", then, "Write")
    allow("kibitz", ["--topic", f"{prefix}kibitz.", "--resource-pattern-type", "prefixed"], "Create", "Describe", "Read", "Write")
    for command, env, said in [
        (["worker", "--engines", "1", "--store", "memory"], {"KIBITZ_KAFKA_SASL_PASSWORD": wrong},
         "SaslAuthenticationFailed: Authentication failed during authentication due to invalid credentials with SASL "
         "mechanism SCRAM-SHA-512"),
        (["produce", str(ROOT / "tests/fixtures/anonymous.pgn"), "--max-speed"],
         {"KIBITZ_KAFKA_SASL_MECHANISM": "PLAIN", "KIBITZ_KAFKA_SASL_USERNAME": "nobody"},
         "SaslAuthenticationFailed: Authentication failed: Invalid username or password"),
        (["tail", "kibitz.moves"], {"KIBITZ_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256"}, "UnsupportedSaslMechanismError"),
    ]:
        started = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "streamer.cli", *command, "--broker", broker, "--topic-prefix", prefix],
                           cwd=ROOT, env={**CLIENT_ENV, **env}, capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, (command, r.stderr[-2000:])
        assert f"the Kafka broker at {broker} refused this client" in r.stderr and said in r.stderr, r.stderr
        assert "KIBITZ_KAFKA_SASL_PASSWORD" in r.stderr and "waiting for the Kafka broker" not in r.stderr, r.stderr
        assert wrong not in r.stdout + r.stderr and PASSWORD not in r.stdout + r.stderr
        assert time.monotonic() - started < 60
    # an input topic a producer made with more partitions than the worker's changelogs: growing an empty changelog to
    # its input's count needs ALTER, which README's rows leave to the operator (was aiokafka's traceback, exit 1)
    grown = fresh_prefix()
    allow("kibitz", ["--topic", f"{grown}kibitz.", "--resource-pattern-type", "prefixed"], "Create", "Describe", "Read", "Write")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {**CLIENT_ENV, "KIBITZ_KAFKA_PARTITIONS": "6"}.items():
            mp.setenv(k, v)
        made = KafkaSettings.from_env(broker=broker, topics=Topics(prefix=grown))
    asyncio.run(ensure_topics(made, [made.topics.moves]))
    r = subprocess.run([sys.executable, "-m", "streamer.cli", "worker", "--broker", broker, "--topic-prefix", grown,
                        "--stages", "analyse", "--engines", "1", "--store", "memory"], cwd=ROOT,
                       env={**CLIENT_ENV, "KIBITZ_KAFKA_PARTITIONS": "4"}, capture_output=True, text=True, timeout=180)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert (f"denies user kibitz growing the state changelog {grown}kibitz.state.games to its input {grown}kibitz.moves's "
            f"6 partitions (ALTER on {grown}kibitz.state.games): [Error 29] TopicAuthorizationFailedError") in r.stderr, r.stderr
    stage = "(analyse|pool|rate)"  # the stages run side by side: whichever asks first is denied first
    for denied, grant in [
        (rf"denies user kibitz the {stage} stage's consumer group '{app}\.\1' or its input topic {prefix}kibitz\.\S+ "
         r"\(READ\): \[Error 30\] GroupAuthorizationFailedError",
         (["--group", app, "--resource-pattern-type", "prefixed"], "Read", "Describe")),
        (rf"denies user kibitz the transactional id '{app}\.{stage}\.p\d' \(the \1 stage's for partition \d: WRITE and "
         r"DESCRIBE\): \[Error 53\] TransactionalIdAuthorizationFailed",
         (["--transactional-id", f"{app}.", "--resource-pattern-type", "prefixed"], "Write", "Describe")),
    ]:
        # an ACL missing hung the worker (the transactional id: its producers' errors were dropped by the rebalance
        # listener) or ended it on a traceback (the group)
        r = run_worker(broker, prefix, app)
        assert r.returncode == 2 and re.search(denied, r.stderr) and "README, 'Kafka ACLs'" in r.stderr, r.stderr[-3000:]
        assert "Traceback" not in r.stderr and "Unclosed" not in r.stderr, r.stderr[-3000:]
        allow("kibitz", *grant)
    with pytest.MonkeyPatch.context() as mp:  # the same settings as the worker, from the environment
        for k, v in CLIENT_ENV.items():
            mp.setenv(k, v)
        settings = KafkaSettings.from_env(broker=broker, topics=Topics(prefix=prefix))
    # one output topic not writable (here denied; an ACL forgotten in a list of topics): each of the rate stage's records
    # was dead-lettered as poison after 3 aborted transactions ("OutOfOrderSequenceNumber"), every rating lost. Now the
    # worker stops with nothing committed, and once the ACL is there the next one rates every move, once.
    no_write = ["--topic", settings.topics.glicko2]
    kafka_sh("acl", "--add", "--deny-principal", "User:kibitz", "--operation", "Write", *no_write)
    produce = subprocess.run([sys.executable, "-m", "streamer.cli", "--log-level", "DEBUG", "produce",
                              str(ROOT / "tests/fixtures/anonymous.pgn"), "--broker", broker, "--topic-prefix", prefix,
                              "--max-speed"], cwd=ROOT, env=FEEDER_ENV, capture_output=True, text=True, timeout=180)
    assert produce.returncode == 0, produce.stderr[-2000:]
    r = run_worker(broker, prefix, app)
    assert r.returncode == 2, r.stderr[-3000:]
    assert (f"denies user kibitz writing the rate stage's outputs or changelog (WRITE): [Error 29] "
            f"TopicAuthorizationFailedError: {settings.topics.glicko2}") in r.stderr, r.stderr[-3000:]
    assert asyncio.run(read(settings, settings.topics.deadletter, 1, timeout=3)) == []
    kafka_sh("acl", "--remove", "--force", "--deny-principal", "User:kibitz", "--operation", "Write", *no_write)
    log = tmp_path / "worker.log"
    worker = subprocess.Popen([sys.executable, "-m", "streamer.cli", "--log-level", "DEBUG", "worker", "--broker", broker,
                               "--topic-prefix", prefix, "--app-id", app, "--depth", "5", "--multipv", "3",
                               "--engines", "1", "--store", "memory"],
                              cwd=ROOT, env=CLIENT_ENV, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        updates = asyncio.run(read(settings, settings.topics.glicko2, 4))
        assert len(updates) == 4, "the worker authenticated and rated both games"
        game = [m for m in asyncio.run(read(settings, settings.topics.perceived, 28, timeout=30)) if m["scope"] == "game"]
        assert len(game) == 20 and len({(m["game_id"], m["ply"]) for m in game}) == 20  # every ply, once
        assert asyncio.run(read(settings, settings.topics.deadletter, 1, timeout=2)) == []
        # the producer's user may not read the outputs: the broker does not show it the topic, so it looks missing
        tail = subprocess.run([sys.executable, "-m", "streamer.cli", "tail", "ratings.glicko2", "--broker", broker,
                               "--topic-prefix", prefix, "--from-beginning", "--idle", "2"],
                              cwd=ROOT, env=FEEDER_ENV, capture_output=True, text=True, timeout=60)
        assert tail.returncode == 0 and not tail.stdout, tail.stderr
        assert "or user feeder may not describe it: README, 'Kafka ACLs'" in tail.stderr, tail.stderr
        # a topic it may describe but not read (its own input): was aiokafka's traceback
        tail = subprocess.run([sys.executable, "-m", "streamer.cli", "tail", "moves", "--broker", broker,
                               "--topic-prefix", prefix, "--from-beginning", "--idle", "2"],
                              cwd=ROOT, env=FEEDER_ENV, capture_output=True, text=True, timeout=60)
        assert tail.returncode == 2 and not tail.stdout, tail.stderr
        assert (f"denies user feeder reading {prefix}kibitz.moves (READ): [Error 29] TopicAuthorizationFailedError"
                in tail.stderr and "Traceback" not in tail.stderr), tail.stderr
        # the overlay's reader, allowed to describe the outputs but not to read them: was aiokafka's traceback
        allow("feeder", ["--topic", f"{prefix}kibitz.", "--resource-pattern-type", "prefixed"], "Describe")
        serve = subprocess.run([sys.executable, "-m", "streamer.cli", "serve", "--broker", broker, "--topic-prefix",
                                prefix, "--listen", f"127.0.0.1:{free_port()}"],
                               cwd=ROOT, env=FEEDER_ENV, capture_output=True, text=True, timeout=60)
        assert serve.returncode == 2, serve.stderr[-3000:]
        assert ("denies user feeder reading the output topics (READ): [Error 29] TopicAuthorizationFailedError"
                in serve.stderr and "Traceback" not in serve.stderr), serve.stderr[-3000:]
    finally:
        worker.terminate()
        worker.wait(30)
    try:
        # redrive: the producer's user has no rows for it; under the worker's user (README: its rows cover redrive's)
        # a dead letter's record goes back to its topic
        with pytest.MonkeyPatch.context() as mp:
            for k, v in FEEDER_ENV.items():
                mp.setenv(k, v)
            feeder = KafkaSettings.from_env(broker=broker, topics=Topics(prefix=prefix))
        letter = dead_letter(PoisonRecord("test"), b'{"x": 1}', source=f"{settings.topics.assessments}/0@0", key="p")
        asyncio.run(send_records(feeder, settings.topics.deadletter, [(b"p", letter.model_dump_json().encode())]))
        for env, rc, said in [(FEEDER_ENV, 2, f"denies user feeder the transactional id '{app}.redrive.poison'"),
                              (CLIENT_ENV, 0, f'"sent": {{"{settings.topics.assessments}": 1}}')]:
            r = subprocess.run([sys.executable, "-m", "streamer.cli", "redrive", "--reason", "poison", "--broker", broker,
                                "--topic-prefix", prefix, "--app-id", app], cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=60)
            assert r.returncode == rc and said in r.stdout + r.stderr, r.stdout + r.stderr[-3000:]
        assert {"x": 1} in asyncio.run(read(settings, settings.topics.assessments, 1000, timeout=3))
        # a changelog it may not read (ACLs narrower than README's), now that it holds states the restore reads
        kafka_sh("acl", "--add", "--deny-principal", "User:kibitz", "--operation", "Read", "--topic",
                 settings.topics.state_players)
        r = run_worker(broker, prefix, app)
        assert r.returncode == 2, r.stderr[-3000:]
        assert (f"denies user kibitz the rate stage's changelog {settings.topics.state_players} (READ and DESCRIBE): "
                f"[Error 29] TopicAuthorizationFailedError") in r.stderr, r.stderr[-3000:]
    finally:
        kafka_sh("reset")
    text = log.read_text() + produce.stdout + produce.stderr
    assert len(text.splitlines()) > 500, "DEBUG logging was on (aiokafka's request dumps included)"
    assert PASSWORD not in text and FEEDER_PASSWORD not in text
    assert "SASL" in text or "sasl" in text


def test_credentials_the_broker_stops_taking_while_clients_run_stop_them(tmp_path):
    """The clients' password rotated on the broker (here: the broker restarted with another one for their user) while a
    worker, a paced producer and the overlay's server run. They retried for ever, idle: the worker's /healthz "ok" and
    its lag stale, a game produced meanwhile never rated, the producer "waiting" for the broker, the overlay still.
    Now each stops, exit 2, naming the refusal: Kubernetes restarts the worker, and a restart with the old secret stops
    at once the same way (test above)."""
    prefix = fresh_prefix()
    app = prefix.rstrip(".")
    broker = f"127.0.0.1:{PORT}"
    kafka_sh("reset")
    kafka_sh("start")
    # PLAIN: its users are the broker's configuration, which a restart changes (SCRAM's are kept in its metadata)
    env = {**CLIENT_ENV, "KIBITZ_KAFKA_SASL_MECHANISM": "PLAIN"}
    clients = {
        "worker": ["worker", "--depth", "5", "--multipv", "3", "--engines", "1", "--store", "memory", "--app-id", app],
        # paced, a record every few seconds: a producer finds the refusal when it next has a record to send
        "produce": ["produce", str(ROOT / "tests/fixtures/broadcast_game.pgn"), "--speed", "10"],
        "serve": ["serve", "--listen", f"127.0.0.1:{free_port()}"],
    }
    procs: dict[str, subprocess.Popen] = {}
    try:
        allow("kibitz", ["--topic", f"{prefix}kibitz.", "--resource-pattern-type", "prefixed"], "Create", "Describe", "Read", "Write")
        allow("kibitz", ["--group", app, "--resource-pattern-type", "prefixed"], "Read", "Describe")
        allow("kibitz", ["--transactional-id", f"{app}.", "--resource-pattern-type", "prefixed"], "Write", "Describe")
        for name, args in clients.items():
            procs[name] = subprocess.Popen([sys.executable, "-m", "streamer.cli", *args, "--broker", broker,
                                            "--topic-prefix", prefix], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                           stderr=(tmp_path / f"{name}.err").open("w"))
        time.sleep(10)  # up: the worker subscribed, the producer sending, serve reading the topics the worker made
        assert all(p.poll() is None for p in procs.values()), {n: (tmp_path / f"{n}.err").read_text() for n in procs}
        kafka_sh("stop")
        r = subprocess.run(["bash", str(ROOT / "deploy/kafka/kafka.sh"), "start"], capture_output=True, text=True,
                           timeout=600, env={**BROKER_ENV, "KIBITZ_KAFKA_SASL_USERS":
                                             BROKER_ENV["KIBITZ_KAFKA_SASL_USERS"].replace(PASSWORD, PASSWORD + "-new")})
        assert r.returncode == 0, r.stderr
        restarted, took = time.monotonic(), {}
        poll(lambda: (took.update({n: time.monotonic() - restarted for n, p in procs.items()
                                   if p.poll() is not None and n not in took}) or len(took) == len(procs)), 60,
             "every client to stop")
        for name, p in procs.items():
            rc = p.returncode
            err = (tmp_path / f"{name}.err").read_text()
            assert rc == 2, (name, err[-3000:])
            assert ("refused this client (SASL_PLAINTEXT, PLAIN): [Error 58] SaslAuthenticationFailed" in err
                    and "(refused while running)" in err), (name, err[-3000:])
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        kafka_sh("reset")
