"""The metrics server's liveness answer (streamer.metrics): ``/healthz`` says 200 while the runtime's event loop beats
and its parts go round, 503 naming what stopped; the metrics stay on every other path."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request

from streamer.devbrowser import free_port
from streamer.metrics import Health, Metrics


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_health_names_the_loop_or_the_part_that_went_silent():
    h = Health(loop_stale=30.0, part_stale=300.0)
    assert h.check() == (True, "ok (nothing watched)")  # no heartbeat yet: nothing to judge by
    h.beat()
    h.beat("stage rate")
    t = time.monotonic()
    assert h.check(now=t + 1) == (True, "ok (event loop, stage rate)")
    live, why = h.check(now=t + 31)
    assert not live and why == "event loop silent for 31 s"
    h.loop_beat = t + 290  # the loop beats on; the stage has not gone round since t
    assert h.check(now=t + 299)[0]
    live, why = h.check(now=t + 301)
    assert not live and why == "stage rate stuck for 301 s"
    h.loop_beat = t
    live, why = h.check(now=t + 301)
    assert not live and why == "event loop silent for 301 s; stage rate stuck for 301 s"
    # a part that goes round but makes no progress says so itself (the transactional stage's stalled partitions)
    h.loop_beat = h.parts["stage rate"] = t + 300
    h.stall("stage rate", "kibitz.assessments partition(s) 1 read again and again, nothing committed for 601 s")
    assert h.check(now=t + 301) == (False, "stage rate: kibitz.assessments partition(s) 1 read again and again, "
                                           "nothing committed for 601 s")
    h.stall("stage rate", None)
    assert h.check(now=t + 301) == (True, "ok (event loop, stage rate)")


async def test_healthz_answers_503_while_the_event_loop_is_blocked_and_200_once_it_beats_again():
    """The server runs on its own thread, so a probe is answered while the loop is held by a blocking call, and the
    answer says so; the metrics are served beside it."""
    m = Metrics()
    m.health.loop_stale = 0.5
    port = free_port()
    httpd = m.serve(port, "127.0.0.1")
    try:
        await asyncio.sleep(0.1)  # the heartbeat task runs
        status, body = await asyncio.to_thread(get, f"http://127.0.0.1:{port}/healthz")
        assert (status, body) == (200, "ok (event loop)\n")
        assert "kibitz_events_total" in (await asyncio.to_thread(get, f"http://127.0.0.1:{port}/metrics"))[1]
        seen: list[tuple[int, str]] = []
        probe = threading.Thread(target=lambda: (time.sleep(1.0), seen.append(get(f"http://127.0.0.1:{port}/healthz"))))
        probe.start()
        time.sleep(1.5)  # a blocking call on the loop: no beat
        probe.join()
        assert seen[0][0] == 503 and seen[0][1].startswith("event loop silent for ")
        await asyncio.sleep(1.2)  # the loop is free: the next beat makes it live again
        assert (await asyncio.to_thread(get, f"http://127.0.0.1:{port}/healthz"))[0] == 200
    finally:
        httpd.shutdown()
        if m._heartbeat is not None:
            m._heartbeat.cancel()
