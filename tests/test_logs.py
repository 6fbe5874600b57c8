"""No credential in any log line, whichever logger writes it and at any level."""

import io
import json
import logging

from streamer.logs import JsonFormatter


def test_secret_values_are_cut_from_every_logger_at_debug():
    secret = 'pa"ss\\word-1234'
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter([secret]))
    log = logging.getLogger("aiokafka.conn.test")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        log.debug("Sending request %r", b"\x00user\x00" + secret.encode())  # a SASL/PLAIN auth payload, as aiokafka dumps it
        log.debug("config %s", {"sasl_plain_password": secret})
        log.warning("x", extra={"password": "other", "broker": "127.0.0.1:9092"})
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert "1234" not in text and "***" in text
    lines = [json.loads(x) for x in text.splitlines()]
    assert len(lines) == 3 and lines[2]["password"] == "***" and lines[2]["broker"] == "127.0.0.1:9092"


def test_a_library_flood_becomes_one_line_per_interval():
    from streamer.logs import LibraryFlood

    now = [0.0]
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(LibraryFlood(interval=10.0, clock=lambda: now[0]))
    lib, own = logging.getLogger("aiokafka.flood.test"), logging.getLogger("kibitz.flood.test")
    for lg in (lib, own):
        lg.addHandler(handler)
        lg.propagate = False
    try:
        for i in range(180):  # 180 connection errors in 18 s, as an outage gives
            now[0] = i * 0.1
            lib.error("Unable connect to node with id 1")
        now[0] = 30.0
        lib.error("Unable connect to node with id 1")
        for _ in range(3):
            own.warning("kibitz's own line")
    finally:
        for lg in (lib, own):
            lg.removeHandler(handler)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    library = [ln for ln in lines if ln["logger"].startswith("aiokafka")]
    assert len(library) == 3  # at 0 s, 10 s and 30 s
    assert library[1]["suppressed"] == 99 and library[2]["suppressed"] == 79  # 1..99, then 101..179
    assert sum(ln["logger"].startswith("kibitz") for ln in lines) == 3  # never limited
