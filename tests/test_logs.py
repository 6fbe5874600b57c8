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
