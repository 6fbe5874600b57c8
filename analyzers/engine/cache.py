"""The position cache: a bounded in-memory LRU in front of an optional SQLite file.

Keys are ``engine identity | limits | position`` strings; values are analyses (:class:`PositionAnalysis`, or
:class:`~.gtp.GoAnalysis` with a Go pool's ``decode``). The SQLite file
lets a second replay of the same games do no engine work at all. Writes go through WAL with
``synchronous=NORMAL``: a crash can lose the last few entries (they are recomputed), never corrupt the file.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .analysis import PositionAnalysis

log = logging.getLogger("kibitz.cache")


class AnalysisCache:
    def __init__(self, max_entries: int = 200_000, path: str | Path | None = None,
                 decode: Callable[[dict[str, Any]], Any] = PositionAnalysis.from_dict) -> None:
        self.max_entries = max_entries
        self.decode = decode  # an analysis from its to_dict(): PositionAnalysis (chess) or GoAnalysis
        self._mem: OrderedDict[str, Any] = OrderedDict()
        self._db: sqlite3.Connection | None = None
        self._warned: set[str] = set()  # the kinds of trouble with the file logged so far (once each)
        if path is not None:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS analyses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            except (OSError, sqlite3.Error) as e:  # not a database, not writable, a directory...
                raise ConfigurationError(f"analysis cache {str(path)!r} cannot be used: {e}") from None

    def get(self, key: str) -> Any | None:
        hit = self._mem.get(key)
        if hit is not None:
            self._mem.move_to_end(key)
            return hit
        if self._db is not None:
            try:
                row = self._db.execute("SELECT value FROM analyses WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    value = self.decode(json.loads(row[0]))
                    self._remember(key, value)
                    return value
            except sqlite3.Error as e:
                self._trouble("the cache file cannot be read: searching instead", e)
            except (ValueError, KeyError, TypeError) as e:
                # a damaged entry, or one another version wrote: a miss, which the search's put replaces
                self._trouble("an unreadable cache entry: searched again and replaced", e, key)
        return None

    def put(self, key: str, value: Any) -> None:
        """Keep ``value``; a file that cannot take it (full, read-only, damaged) costs the next run a search, never this
        one its answer."""
        self._remember(key, value)
        if self._db is not None:
            try:
                self._db.execute("INSERT OR REPLACE INTO analyses (key, value) VALUES (?, ?)", (key, json.dumps(value.to_dict())))
            except sqlite3.Error as e:
                self._trouble("the cache file cannot be written: kept in memory only", e)

    def _trouble(self, what: str, e: Exception, key: str | None = None) -> None:
        """Log a kind of trouble with the file once (a damaged file would otherwise log at every position)."""
        if what not in self._warned:
            self._warned.add(what)
            log.warning(what, extra={"error": repr(e)[:300], "key": key})

    def _remember(self, key: str, value: Any) -> None:
        self._mem[key] = value
        self._mem.move_to_end(key)
        while len(self._mem) > self.max_entries:
            self._mem.popitem(last=False)

    def __len__(self) -> int:
        return len(self._mem)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
