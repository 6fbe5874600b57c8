"""Structured logs: one JSON object per line on stderr, with the ``extra`` fields of each call."""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}
#: Keys never written to a log line, whatever a caller passes (credentials from broker configuration).
REDACTED = {"password", "sasl_plain_password", "ssl_password", "secret", "token"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(time.time(), 3), "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        for k, v in vars(record).items():
            if k not in _STANDARD and not k.startswith("_"):
                out[k] = "***" if k.lower() in REDACTED else v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(level: str = "WARNING") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
