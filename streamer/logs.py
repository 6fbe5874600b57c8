"""Structured logs: one JSON object per line on stderr, with the ``extra`` fields of each call.

Credentials never reach a line: fields named like one are written as ``***``, and the values of the secrets kibitz
was configured with (the broker's SASL password from ``KIBITZ_KAFKA_SASL_PASSWORD``, a followed feed URL's password
or token) are cut out of every line, whichever logger wrote it, at every level: aiokafka's DEBUG request dumps
included.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterable

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
#: Keys never written to a log line, whatever a caller passes (credentials from broker configuration).
REDACTED = {"password", "sasl_plain_password", "ssl_password", "secret", "token"}


#: Environment variables whose values are secrets.
SECRET_ENV = ("KIBITZ_KAFKA_SASL_PASSWORD",)


class JsonFormatter(logging.Formatter):
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # each secret as it can appear in a message: raw, or inside the repr of a str or of bytes
        forms = {f for sec in secrets if sec for f in (sec, repr(sec)[1:-1], repr(sec.encode())[2:-1])}
        self._secrets = sorted(forms, key=len, reverse=True)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(time.time(), 3), "level": record.levelname.lower(), "logger": record.name,
               "msg": self._scrub(record.getMessage())}
        for k, v in vars(record).items():
            if k not in _STANDARD and not k.startswith("_"):
                out[k] = "***" if k.lower() in REDACTED else self._scrub(v) if isinstance(v, str) else v
        if record.exc_info:
            out["exc"] = self._scrub(self.formatException(record.exc_info))
        # extra fields may hold the secret in any type: scrub the line too (json.dumps may escape it, so raw
        # forms were scrubbed above, before encoding)
        return self._scrub(json.dumps(out, default=lambda v: self._scrub(str(v))))


class LibraryFlood(logging.Filter):
    """At most one line per ``interval`` seconds from each library logger (aiokafka, faust, mode) at WARNING or
    above: during a broker outage aiokafka logs every failed connection, hundreds a second. The line that gets
    through says how many it stands for (``suppressed``). kibitz's own loggers are never limited."""

    LIBRARIES = ("aiokafka", "faust", "mode", "kafka")

    def __init__(self, interval: float = 10.0, clock=time.monotonic) -> None:  # noqa: ANN001
        super().__init__()
        self.interval, self.clock = interval, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or not record.name.startswith(self.LIBRARIES):
            return True
        key = record.name.split(".", 1)[0]
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            record.suppressed = held  # written as a field of the line (see JsonFormatter)
        return True


def setup_logging(level: str = "WARNING", secrets: Iterable[str] | None = None, more: Iterable[str] = ()) -> None:
    """JSON lines on stderr at ``level`` for every logger; ``secrets`` (default: the values of :data:`SECRET_ENV`)
    and ``more`` (e.g. the credentials in a followed feed's URL) are cut out of every line."""
    if secrets is None:
        secrets = [v for v in (os.environ.get(k) for k in SECRET_ENV) if v]
    secrets = [*secrets, *more]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(secrets))
    handler.addFilter(LibraryFlood())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
