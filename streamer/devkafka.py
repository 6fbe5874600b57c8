"""Development Kafka: the real broker started by deploy/kafka/kafka.sh, real `kibitz worker` processes, and
produce/consume helpers. Used by the integration tests and bench/throughput.py; everything talks to 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

from .kafka_config import STAGES, KafkaSettings, running_stages

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")
TEST_PORT = 19092


def worker_port(base: int) -> int:
    """A test broker's port: ``base`` in a plain pytest run, ``base + 1000 * N`` in pytest-xdist's worker ``gwN``, so
    that parallel test processes each start their own brokers (a broker's data lives under its port, kafka.sh)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return base + 1000 * int(worker.removeprefix("gw")) if worker.startswith("gw") else base


def reachable(hostport: str, timeout: float = 1.0) -> bool:
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def broker_pid(port: int) -> int:
    """The process id of the broker kafka.sh runs on ``port``."""
    cache = Path(os.environ.get("KIBITZ_CACHE", ROOT / ".cache"))
    return int((cache / "kafka" / f"run-{port}" / "pid").read_text())


class Broker:
    """A broker at $KIBITZ_KAFKA if one answers there, else one started on 127.0.0.1:``port`` (19092) by
    deploy/kafka/kafka.sh (:func:`worker_port`: another port in each parallel test process). ``own``: always start
    one (a test that kills it)."""

    def __init__(self, port: int = TEST_PORT, *, own: bool = False) -> None:
        self.address = "" if own else os.environ.get("KIBITZ_KAFKA", "")
        self.started = False
        self.port = worker_port(port)

    def _script(self, command: str, timeout: float) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KIBITZ_KAFKA_PORT": str(self.port), "KIBITZ_KAFKA_CONTROLLER_PORT": str(self.port + 1)}
        return subprocess.run(["bash", str(ROOT / "deploy/kafka/kafka.sh"), command], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def start(self) -> str:
        if self.address and reachable(self.address):
            return self.address
        # a test broker starts empty (kafka.sh keeps data across starts; tests want none of an earlier run's topics)
        self._script("reset", 120)
        return self.restart()

    def restart(self) -> str:
        """Start the broker on the data it has (after :meth:`kill`: a machine back up)."""
        r = self._script("start", 600)
        if r.returncode != 0:
            raise RuntimeError(f"could not start the Kafka broker:\n{r.stdout}\n{r.stderr}")
        self.started = True
        self.address = f"127.0.0.1:{self.port}"
        return self.address

    def kill(self) -> None:
        """SIGKILL the broker, like a machine that died."""
        os.kill(broker_pid(self.port), signal.SIGKILL)

    def stop(self) -> None:
        if self.started:
            self._script("stop", 120)


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64, as ``kafka-storage random-uuid`` makes one, and like it
    never starting with "-" (one id in 64 would, and a command line then reads it as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class Cluster:
    """A KRaft cluster of ``nodes`` brokers on loopback (each node broker and controller, started by
    deploy/kafka/kafka.sh with its own ports: 19200 + 10 * i and the next one, :func:`worker_port`), replication
    factor 3 and min.insync.replicas 2 for internal topics; the fault tests kill one node with :meth:`kill`."""

    def __init__(self, nodes: int = 3, base_port: int = 19200) -> None:
        base_port = worker_port(base_port)
        self.ports = [base_port + 10 * i for i in range(nodes)]
        voters = ",".join(f"{i + 1}@127.0.0.1:{p + 1}" for i, p in enumerate(self.ports))
        cluster_id = new_cluster_id()
        self.envs = [{**os.environ, "KIBITZ_KAFKA_PORT": str(p), "KIBITZ_KAFKA_CONTROLLER_PORT": str(p + 1),
                      "KIBITZ_KAFKA_NODE_ID": str(i + 1), "KIBITZ_KAFKA_VOTERS": voters,
                      "KIBITZ_KAFKA_CLUSTER_ID": cluster_id, "KIBITZ_KAFKA_REPLICATION": str(min(3, nodes))}
                     for i, p in enumerate(self.ports)]
        self.address = ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def _script(self, i: int, command: str) -> subprocess.Popen:
        return subprocess.Popen(["bash", str(ROOT / "deploy/kafka/kafka.sh"), command], env=self.envs[i],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def start(self) -> str:
        """Start every node at once (a node accepts clients only once a majority of controllers is up)."""
        for proc in [self._script(i, "reset") for i in range(len(self.ports))]:
            proc.wait(120)
        starts = [self._script(i, "start") for i in range(len(self.ports))]
        out = [(p.communicate(timeout=600)[0], p.returncode) for p in starts]
        if any(rc != 0 for _, rc in out):
            self.stop()
            raise RuntimeError("could not start the Kafka cluster:\n" + "\n".join(o for o, _ in out))
        return self.address

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` (0-based), like a machine that died."""
        os.kill(broker_pid(self.ports[i]), signal.SIGKILL)

    def stop(self) -> None:
        for proc in [self._script(i, "stop") for i in range(len(self.ports))]:
            proc.wait(120)


def fresh_prefix() -> str:
    return f"t{uuid.uuid4().hex[:8]}."


#: Where the worker subprocesses of the tests write their logs (kept for debugging a failed run).
WORKER_LOGS = ROOT / ".cache" / "worker-logs"
#: A worker log older than this is removed when the next worker starts: the logs of earlier runs, not this one's.
WORKER_LOG_KEEP_S = 24 * 3600.0


def prune_worker_logs(folder: Path = WORKER_LOGS, keep_s: float = WORKER_LOG_KEEP_S) -> int:
    """Remove the worker logs in ``folder`` last written more than ``keep_s`` seconds ago (every test run starts
    workers, and their logs would pile up); returns how many. A log another process removes first is skipped."""
    cutoff, removed = time.time() - keep_s, 0
    for path in folder.glob("worker-*.log"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
    return removed


class WorkerProcess:
    """A real `kibitz worker` subprocess (so a test can SIGKILL it like a crashed pod); its log is in
    .cache/worker-logs/ (:data:`WORKER_LOGS`), where logs older than a day are pruned as workers start."""

    started = 0

    def __init__(self, broker: str, prefix: str, *extra: str) -> None:
        WorkerProcess.started += 1
        name = f"worker-{prefix}{WorkerProcess.started}.log"  # one file per process: two workers share a prefix
        self.log: IO[bytes] | int = subprocess.DEVNULL
        if (ROOT / ".cache").is_dir():
            WORKER_LOGS.mkdir(exist_ok=True)
            if WorkerProcess.started == 1:
                prune_worker_logs()
            self.log = open(WORKER_LOGS / name, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamer.cli", "--log-level", os.environ.get("KIBITZ_WORKER_LOG", "warning"), "worker",
             "--broker", broker, "--topic-prefix", prefix, "--app-id", prefix, *extra],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def check(self) -> None:
        """Raise if the worker has exited: a test waiting for its output then fails at once, with the log's tail."""
        if self.proc.poll() is not None:
            tail = Path(self.log.name).read_text(errors="replace")[-2000:] if not isinstance(self.log, int) else ""
            raise RuntimeError(f"worker exited with code {self.proc.returncode}:\n{tail}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if not isinstance(self.log, int):
            self.log.close()


def waiting_line(broker: str, prefix: str, stderr: Path, env: Mapping[str, str] | None = None, timeout: float = 30) -> str:
    """What ``kibitz tail`` prints to stderr (kept in the file ``stderr``) by the time it says it waits for the broker
    at ``broker``, with ``env`` over the environment (the settings of a connection that broker does not take); the
    client is killed then."""
    with stderr.open("w") as f:
        client = subprocess.Popen([sys.executable, "-m", "streamer.cli", "tail", "moves", "--broker", broker,
                                   "--topic-prefix", prefix], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=f,
                                  env={**os.environ, **(env or {})})
    try:
        poll(lambda: "waiting for the Kafka broker" in stderr.read_text(), timeout, "the client to wait for the broker")
    finally:
        client.kill()
        client.wait(10)
    return stderr.read_text()


def poll(fn: Callable[[], T], timeout: float, what: str) -> T:
    """fn() until it returns something truthy (OSError counts as not yet: a port not open yet); AssertionError naming
    ``what`` after ``timeout`` seconds. Other errors, such as :meth:`WorkerProcess.check`'s, end the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fn()
            if got:
                return got
        except OSError:
            pass
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


def start_workers(broker: str, prefix: str, *extra: str, split: bool = False) -> list[WorkerProcess]:
    """One worker process, or with ``split`` one per stage, each in its own process."""
    if split:
        return [WorkerProcess(broker, prefix, *extra, "--stages", stage) for stage in running_stages(STAGES, "--review" in extra)]
    return [WorkerProcess(broker, prefix, *extra)]


async def produce(broker: str | KafkaSettings, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    """Send ``records`` (key, value) to ``topic`` in order, at ``broker`` (an address, or the settings of a secured
    connection)."""
    from aiokafka import AIOKafkaProducer

    kw = broker.aiokafka_kwargs() if isinstance(broker, KafkaSettings) else {"bootstrap_servers": broker}
    p = AIOKafkaProducer(enable_idempotence=True, acks="all", max_request_size=2 * 1024 * 1024, **kw)
    await p.start()
    try:
        for key, value in records:
            await p.send(topic, value, key=key)
        await p.flush()
    finally:
        await p.stop()


async def read_records(settings: KafkaSettings, topic: str, want: int, timeout: float = 180.0,
                       workers: Sequence[WorkerProcess] = ()) -> list[bytes]:
    """The committed records of ``topic`` from the beginning, over the connection ``settings`` describe (SASL, TLS),
    until ``want`` of them or ``timeout`` seconds. ``workers`` must stay alive meanwhile."""
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, group_id=None, auto_offset_reset="earliest", isolation_level="read_committed",
                         **settings.aiokafka_kwargs())
    await c.start()
    out: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < want and time.monotonic() < deadline:
            for w in workers:
                w.check()
            for recs in (await c.getmany(timeout_ms=500)).values():
                out += [r.value for r in recs]
    finally:
        await c.stop()
    return out


async def consume_until(broker: str, topics: list[str], done, timeout: float = 240.0,
                        workers: Sequence[WorkerProcess] = ()) -> dict[str, list[bytes]]:
    """Read committed records of ``topics`` from the beginning until ``done(records)`` or ``timeout`` seconds.

    After ``done`` first holds, keeps reading 3 more seconds so that extra (duplicate) records would be seen.
    ``workers`` must stay alive meanwhile (:meth:`WorkerProcess.check`).
    """
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(*topics, bootstrap_servers=broker, group_id=None, auto_offset_reset="earliest",
                         isolation_level="read_committed")
    await c.start()
    out: dict[str, list[bytes]] = {t: [] for t in topics}
    deadline = time.monotonic() + timeout
    settle_until = None
    try:
        while time.monotonic() < deadline:
            for w in workers:
                w.check()
            batch = await c.getmany(timeout_ms=500)
            for tp, recs in batch.items():
                out[tp.topic].extend(r.value for r in recs)
            if settle_until is None and done(out):
                settle_until = time.monotonic() + 3.0
            if settle_until is not None and time.monotonic() > settle_until:
                break
    finally:
        await c.stop()
    return out


async def read_topic(broker: str, topic: str) -> dict[bytes | None, list[bytes | None]]:
    """Every record of ``topic`` (read_committed, from the beginning to the end offsets when called), as each key's
    values in offset order: what a reader restoring a changelog reads, and so what compaction leaves."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(bootstrap_servers=broker, group_id=None, auto_offset_reset="earliest",
                         isolation_level="read_committed", enable_auto_commit=False)
    await c.start()
    out: dict[bytes | None, list[bytes | None]] = {}
    try:
        cluster = await c._client.fetch_all_metadata()  # a fresh metadata response (topics() does not keep it)
        tps = [TopicPartition(topic, p) for p in sorted(cluster.partitions_for_topic(topic) or [])]
        if not tps:
            raise LookupError(f"topic {topic} not found on {broker}")
        c.assign(tps)
        ends = await c.end_offsets(tps)
        await c.seek_to_beginning(*tps)
        behind = set(tps)
        while behind:
            for recs in (await c.getmany(timeout_ms=500)).values():
                for r in recs:
                    out.setdefault(r.key, []).append(r.value)
            behind = {tp for tp in behind if await c.position(tp) < ends[tp]}
    finally:
        await c.stop()
    return out
