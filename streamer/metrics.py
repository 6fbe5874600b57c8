"""Prometheus metrics of a runtime: events in, outputs out, rejections by reason, and the engine pool; and its health.

The pool's counters live in :class:`analyzers.engine.PoolStats` (analyzers stay free of exporters); a custom
collector reads them at scrape time, so the cache hit rate and search time cost nothing on the hot path.

The metrics server also answers ``/healthz`` (:class:`Health`), for a liveness probe: 200 while the runtime's event
loop beats and each of its parts (a worker's stages) goes round its loop, 503 naming what stopped otherwise. The
server runs on a thread of its own, so it can tell a wedged event loop (a blocking call, a deadlock) from a live one.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from analyzers.engine import EnginePool


class PoolCollector:
    def __init__(self, pool_getter) -> None:  # noqa: ANN001 - a callable returning the pool or None
        self._get = pool_getter

    def collect(self):
        pool: EnginePool | None = self._get()
        if pool is None:
            return
        s = pool.stats
        for name, value, doc in (
            ("searches", s.searches, "engine searches run"),
            ("cache_hits", s.cache_hits, "analyses served from the position cache"),
            ("joined", s.joined, "requests that joined a search already running (look-ahead)"),
            ("restarts", s.restarts, "engine processes killed and replaced"),
            ("failures", s.failures, "requests that failed after the retry"),
            ("search_seconds", s.search_seconds, "seconds spent in engine searches"),
        ):
            yield CounterMetricFamily(f"kibitz_engine_{name}", doc, value=value)
        served = s.cache_hits + s.joined
        total = served + s.searches
        yield GaugeMetricFamily("kibitz_engine_cache_hit_ratio", "share of analyses not needing a new search",
                                value=served / total if total else 0.0)
        yield GaugeMetricFamily("kibitz_engine_processes", "engine processes in the pool", value=pool.size)


#: The event loop beats every this many seconds (:meth:`Metrics.heartbeat`).
BEAT_SECONDS = 1.0
#: A runtime is not live once its event loop has not beaten for this long: a callback has held the loop (a blocking
#: call, a deadlock); the longest step a loop runs is a few ms.
LOOP_STALE_SECONDS = 30.0
#: ... or once one of its parts has not gone round its loop for this long: a worker's stage goes round at least every
#: poll (0.1 s) and commit (a transaction is bounded by the broker's 30 s timeout), so ten times that is stuck.
PART_STALE_SECONDS = 300.0
#: ... or once one of its parts has had work and done none of it for this long (a worker's input partition whose
#: records were read again and again and none committed: a record whose processing never ends, a producer that every
#: write fails): :meth:`Health.stall`. A record's longest work, a review's searches, takes about a minute.
PROGRESS_STALE_SECONDS = 600.0


class Health:
    """When the runtime's event loop last beat and when each of its named parts last went round its loop (monotonic
    seconds), and whether that is live. Written by the loop, read by the metrics server's thread (a float's assignment
    is atomic)."""

    def __init__(self, loop_stale: float = LOOP_STALE_SECONDS, part_stale: float = PART_STALE_SECONDS) -> None:
        self.loop_stale, self.part_stale = loop_stale, part_stale
        self.loop_beat: float | None = None  # None: no heartbeat runs (a runtime that serves metrics without a loop)
        self.parts: dict[str, float] = {}
        self.stalls: dict[str, str] = {}  # part -> what it has not done (set and cleared by the part: stall)

    def beat(self, part: str | None = None) -> None:
        """The loop beats (``part`` None), or ``part`` has gone round its loop."""
        now = time.monotonic()
        if part is None:
            self.loop_beat = now
        else:
            self.parts[part] = now

    def stall(self, part: str, why: str | None) -> None:
        """``part`` goes round but makes no progress (``why`` says on what), or does again (None)."""
        if why is None:
            self.stalls.pop(part, None)
        else:
            self.stalls[part] = why

    def check(self, now: float | None = None) -> tuple[bool, str]:
        """(live, why): not live when the loop or a part is stale, naming it and for how long; live, naming what is
        watched."""
        now = time.monotonic() if now is None else now
        stale = []
        if self.loop_beat is not None and now - self.loop_beat > self.loop_stale:
            stale.append(f"event loop silent for {now - self.loop_beat:.0f} s")
        parts = dict(self.parts)  # a copy: the loop may add a part while this thread reads
        stale += [f"{part} stuck for {now - t:.0f} s" for part, t in parts.items() if now - t > self.part_stale]
        stale += [f"{part}: {why}" for part, why in sorted(dict(self.stalls).items())]
        if stale:
            return False, "; ".join(stale)
        watched = (["event loop"] if self.loop_beat is not None else []) + sorted(parts)
        return True, f"ok ({', '.join(watched) or 'nothing watched'})"


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # a scrape or probe every few seconds is no news


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def serve_wsgi(app: Any, port: int, addr: str) -> WSGIServer:
    """``app`` on ADDR:PORT (IPv4 or IPv6, as the address resolves), on a daemon thread."""
    family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("_Server", (_ThreadingServer,), {"address_family": family})
    httpd: WSGIServer = make_server(addr, port, app, server_class, handler_class=_QuietHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="kibitz-metrics").start()
    return httpd


class Metrics:
    """One registry per runtime (tests run several in one process), and the runtime's :class:`Health`."""

    def __init__(self, pool_getter=None) -> None:  # noqa: ANN001
        self.registry = CollectorRegistry()
        self.events = Counter("kibitz_events", "input events accepted for processing", ["type"], registry=self.registry)
        self.rejected = Counter("kibitz_rejected", "input rejected and dead-lettered", ["reason"], registry=self.registry)
        self.evicted = Counter("kibitz_evicted", "state dropped to keep memory bounded (idle games, least recently "
                               "used games, players and review states of the embedded runtime)", ["what"], registry=self.registry)
        self.outputs = Counter("kibitz_outputs", "messages published", ["type"], registry=self.registry)
        self.step_seconds = Histogram("kibitz_move_seconds", "time from a move's arrival at its worker to its rating",
                                      buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=self.registry)
        self.reviews = Counter("kibitz_reviews", "fair-play reviews run after a service alert, by outcome (action: "
                               "published; cleared: under the action tier; failed: the engine or the games failed it)",
                               ["outcome"], registry=self.registry)
        # the Kafka transactional runtime's: how far each stage is behind its input (the other runtimes have no offsets)
        self.lag = Gauge("kibitz_consumer_lag", "records of a stage's input partition not processed yet: the partition's "
                         "last stable offset minus the stage's position (transactional Kafka runtime)",
                         ["stage", "partition"], registry=self.registry)
        if pool_getter is not None:
            self.registry.register(PoolCollector(pool_getter))
        self.health = Health()
        self._heartbeat: asyncio.Task | None = None

    def app(self) -> Any:
        """The WSGI app: ``/healthz`` (200 or 503 with the reason, plain text), the metrics on any other path."""
        metrics = make_wsgi_app(self.registry)

        def app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/healthz":
                live, why = self.health.check()
                start_response("200 OK" if live else "503 Service Unavailable",
                               [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")])
                return [why.encode() + b"\n"]
            return metrics(environ, start_response)

        return app

    def serve(self, port: int, addr: str = "127.0.0.1") -> WSGIServer:
        """Serve the metrics and ``/healthz`` on ADDR:PORT; called in a running event loop, also start its heartbeat
        (a runtime that serves before its loop runs, the faust worker, beats from a timer of its own)."""
        httpd = serve_wsgi(self.app(), port, addr)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return httpd
        self._heartbeat = asyncio.create_task(self.heartbeat(), name="kibitz-heartbeat")
        return httpd

    async def heartbeat(self) -> None:
        """Beat every :data:`BEAT_SECONDS` until cancelled."""
        while True:
            self.health.beat()
            await asyncio.sleep(BEAT_SECONDS)
