"""A dict with a size limit, for the embedded runtime's in-memory state: least recently used entries go first.

The embedded runtime (``kibitz stream``, ``kibitz replay``) keeps every game and player in memory; a feed of games
that never end would grow it without limit. :class:`LruMap` bounds the number of entries and reports each eviction,
so memory is bounded by ``max_items`` x the largest state (GameState: a move list and a board; PlayerState:
:data:`streamer.pipeline.PLAYER_STATE_BOUND`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any


class LruMap(MutableMapping[str, Any]):
    """A mapping of at most ``max_items`` entries; reading or writing a key makes it the most recent, and a new key
    beyond the limit evicts the least recent one, passed to ``on_evict(key, value)``."""

    def __init__(self, max_items: int, on_evict: Callable[[str, Any], None] | None = None) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self.max_items = max_items
        self.on_evict = on_evict
        self._d: OrderedDict[str, Any] = OrderedDict()

    def __getitem__(self, key: str) -> Any:
        value = self._d[key]
        self._d.move_to_end(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self._d[key] = value
        self._d.move_to_end(key)
        while len(self._d) > self.max_items:
            old_key, old = self._d.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(old_key, old)

    def __delitem__(self, key: str) -> None:
        del self._d[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._d))  # a snapshot: a sweep may delete while iterating

    def __len__(self) -> int:
        return len(self._d)
