"""Where a transactional stage keeps one input partition's state: in memory, or in a local RocksDB.

Both are a :class:`TrackedState`: a dict of live state objects (:class:`~streamer.pipeline.GameState`,
:class:`~streamer.pipeline.PlayerState`) that remembers which keys changed since the last commit, so a transaction
writes each changed key once to the partition's compacted changelog. The changelog is the source of truth; a store
is a copy of it that makes restarts cheap.

- :class:`TrackedState` (``--store memory``): everything in memory, rebuilt from the start of the changelog whenever
  the partition is assigned.
- :class:`RocksState` (``--store rocksdb``): every key's committed state in a RocksDB (``rocksdict``) on local disk,
  with the keys in use as live objects in front of it (at most ``cache_size`` clean ones). The DB also holds the
  changelog offset it is caught up to, written in the same atomic batch as the states, so a restore reads only what
  the changelog got since: nothing after a clean stop, the last transaction after a crash, other workers' writes
  after the partition comes back. State can then be larger than memory.

A DB is written only after its transaction committed. A crash between the two leaves the DB behind the changelog,
never ahead of it, and the next restore reads what it missed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analyzers.errors import CorruptState, StateStoreError

log = logging.getLogger(__name__)

#: The DB key of the changelog offset the DB is caught up to; NUL never occurs in a game or player id.
OFFSET_KEY = "\x00changelog-offset"


def encode(value: Any) -> bytes | None:
    """A state object as changelog and DB bytes (compact JSON of its ``to_dict()``); None (deleted) stays None."""
    return None if value is None else json.dumps(value.to_dict(), separators=(",", ":")).encode()


def decode(raw: bytes, codec: Any, key: str = "?") -> Any:
    """The inverse of :func:`encode`, for the state class ``codec``. Raises :class:`CorruptState` (naming ``key``)
    for bytes that are not such a state: kibitz wrote them, so they are damage, and the caller decides what it costs."""
    try:
        d = json.loads(raw)
    except ValueError as e:
        raise _unreadable(codec, key, e) from None
    return from_stored(d, codec, key)


def from_stored(d: Any, codec: Any, key: str = "?") -> Any:
    """``codec.from_dict(d)`` for a state's stored ``to_dict()`` form; :class:`CorruptState` (naming ``key``) when
    it is not one. A missing field is damage too, never an absent key."""
    try:
        return codec.from_dict(d)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise _unreadable(codec, key, e) from None


def _unreadable(codec: Any, key: str, cause: Exception) -> CorruptState:
    """The one wording of a stored state that does not read back, whichever layer (JSON, ``from_dict``) failed."""
    return CorruptState(f"{codec.__name__} state of {key!r} cannot be read: {cause!r}")


class TrackedState(dict):
    """One partition's state by key, in memory, remembering which keys changed since the last commit."""

    start_offset = 0  # a restore reads the whole changelog

    def __init__(self) -> None:
        super().__init__()
        self.dirty: set[str] = set()

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.dirty.add(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.dirty.add(key)
        return super().pop(key, *default)

    def __delitem__(self, key: str) -> None:
        self.pop(key)

    def scan(self) -> list[tuple[str, Any]]:
        """Every (key, state) of the partition, for a sweep (the in-memory store: its dict)."""
        return list(dict.items(self))

    def changes(self) -> list[tuple[str, Any]]:
        """(key, state or None for deleted) of every changed key, and forget them."""
        out = [(k, self.get(k)) for k in sorted(self.dirty)]
        self.dirty.clear()
        return out

    def load(self, key: str, raw: bytes | None, codec: type) -> None:
        """Apply one changelog record during a restore (``raw`` None: the key was deleted)."""
        dict.pop(self, key, None)
        if raw is not None:
            try:
                dict.__setitem__(self, key, decode(raw, codec, key))
            except CorruptState as e:  # one damaged key must not keep the partition from starting: it starts afresh
                log.error("corrupt state dropped", extra={"key": key, "error": str(e)})

    def loaded(self, next_offset: int) -> None:
        """A restore has read the changelog up to ``next_offset`` (called after each fetched batch, and at the end)."""

    def committed(self, written: Iterable[tuple[str, bytes | None]], next_offset: int | None) -> None:
        """A transaction committed ``written`` (key, serialised state or None) to the changelog, ending before
        ``next_offset`` (None: nothing written for this partition)."""

    def close(self) -> None:
        """Release the store (the partition was revoked, or the worker stops)."""


def _rocksdict():  # noqa: ANN202 - the optional module
    try:
        import rocksdict  # optional dependency: pip install 'kibitz[rocksdb]'
    except ImportError:
        return None
    return rocksdict


def resolve_store(choice: str) -> str:
    """The store a worker uses for ``--store`` (auto, memory, rocksdb): auto is rocksdb when rocksdict is installed,
    else memory; rocksdb without rocksdict is a :class:`StateStoreError`."""
    if _rocksdict() is None:
        if choice == "rocksdb":
            raise StateStoreError("--store rocksdb needs the rocksdict package: pip install 'kibitz[rocksdb]'")
        return "memory"
    return "rocksdb" if choice == "auto" else choice


class RocksState(TrackedState):
    """A :class:`TrackedState` over a local RocksDB holding every key's committed state (see the module docstring)."""

    def __init__(self, path: str | Path, codec: type, cache_size: int = 10_000) -> None:
        rocksdict = _rocksdict()
        if rocksdict is None:
            raise StateStoreError("the rocksdb store needs the rocksdict package: pip install 'kibitz[rocksdb]'")

        super().__init__()
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path, self.codec, self.cache_size = Path(path), codec, cache_size
        try:
            self.db = rocksdict.Rdict(str(path))
        except Exception as e:  # rocksdict raises a bare Exception; the usual cause is a second worker on the same dir
            raise StateStoreError(f"cannot open the state store {path} (is another worker running with the same "
                                  f"--instance-id and --data-dir?): {e}") from e
        self._pending: list[tuple[str, bytes | None]] = []
        self._deleted: set[str] = set()  # popped since the last commit: the DB still has them

    @property
    def start_offset(self) -> int:  # type: ignore[override]
        return int(self.db.get(OFFSET_KEY, 0))

    def get(self, key: str, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        if key in self._deleted:
            return default
        raw = self.db.get(key)
        if raw is None:
            return default
        try:
            value = decode(raw, self.codec, key)
        except CorruptState as e:  # as a memory restore does: the key starts afresh (its next write replaces it)
            log.error("corrupt state dropped", extra={"key": key, "error": str(e)})
            return default
        dict.__setitem__(self, key, value)  # in use now: kept live until evicted after a commit
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        dict.pop(self, key, None)  # to the end: eviction takes the least recently written first
        self._deleted.discard(key)
        super().__setitem__(key, value)

    def pop(self, key: str, *default: Any) -> Any:
        value = self.get(key, *default)
        if value is None and not default:
            raise KeyError(key)
        self.dirty.add(key)
        self._deleted.add(key)
        dict.pop(self, key, None)
        return value

    def scan(self) -> list[tuple[str, Any]]:
        """Every (key, state): the live ones and the rest of the DB's (decoded, not kept live)."""
        live = dict(dict.items(self))
        out = list(live.items())
        for key, raw in self.db.items():
            if key != OFFSET_KEY and key not in live and key not in self._deleted:
                try:
                    out.append((key, decode(raw, self.codec, key)))
                except CorruptState as e:  # as get() does: nothing to sweep, the key starts afresh when next used
                    log.error("corrupt state dropped", extra={"key": key, "error": str(e)})
        return out

    def load(self, key: str, raw: bytes | None, codec: type) -> None:
        self._pending.append((key, raw))
        dict.pop(self, key, None)

    def loaded(self, next_offset: int) -> None:
        self._write(self._pending, next_offset)
        self._pending = []

    def committed(self, written: Iterable[tuple[str, bytes | None]], next_offset: int | None) -> None:
        written = list(written)
        if written and next_offset is not None:
            self._write(written, next_offset)
        self._deleted.clear()
        excess = len(self) - self.cache_size
        if excess > 0:  # clean entries only: everything is clean right after a commit
            for key in list(dict.keys(self))[:excess]:
                dict.pop(self, key)

    def _write(self, items: list[tuple[str, bytes | None]], next_offset: int) -> None:
        from rocksdict import WriteBatch

        batch = WriteBatch()
        for key, raw in items:
            if raw is None:
                batch.delete(key)
            else:
                batch.put(key, raw)
        batch.put(OFFSET_KEY, next_offset)  # atomic with the states: the DB is never ahead of its offset
        self.db.write(batch)

    def keys_on_disk(self) -> list[str]:
        """Every key the DB holds (for tests and inspection)."""
        return [k for k in self.db.keys() if k != OFFSET_KEY]

    def close(self) -> None:
        self.db.close()
