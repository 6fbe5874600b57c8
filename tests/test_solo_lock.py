"""The lock that lets a `solo` test run while no other test does under pytest-xdist (tests/conftest.py)."""

from __future__ import annotations

import threading
import time

from conftest import machine_share


def test_a_solo_test_waits_for_running_tests_and_holds_back_new_ones_until_it_ends(tmp_path):
    run, events, lock = tmp_path / "run", [], threading.Lock()

    def test(name: str, solo: bool, start_after: float, seconds: float) -> threading.Thread:
        def body() -> None:
            time.sleep(start_after)
            with machine_share(run, solo):
                with lock:
                    events.append(f"{name} start")
                time.sleep(seconds)
                with lock:
                    events.append(f"{name} end")

        t = threading.Thread(target=body)
        t.start()
        return t

    # a and b share the machine; solo asks while they run; c asks after solo and must wait for it
    threads = [test("a", False, 0.0, 0.4), test("b", False, 0.0, 0.6), test("solo", True, 0.1, 0.3),
               test("c", False, 0.2, 0.1)]
    for t in threads:
        t.join(10)
    assert set(events[:2]) == {"a start", "b start"}, events  # shared holders run together
    assert events.index("solo start") > max(events.index("a end"), events.index("b end")), events
    assert events.index("solo end") == events.index("solo start") + 1, events  # nothing ran beside it
    assert events.index("c start") > events.index("solo end"), events  # the turnstile held c back
