"""Prometheus metrics of a runtime: events in, outputs out, rejections by reason, and the engine pool.

The pool's counters live in :class:`analyzers.engine.PoolStats` (analyzers stay free of exporters); a custom
collector reads them at scrape time, so the cache hit rate and search time cost nothing on the hot path.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
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


class Metrics:
    """One registry per runtime (tests run several in one process)."""

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
        if pool_getter is not None:
            self.registry.register(PoolCollector(pool_getter))

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        start_http_server(port, addr=addr, registry=self.registry)
