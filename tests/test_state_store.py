"""The transactional runtime's partition stores, without a broker: memory and RocksDB behave alike for the steps,
and the RocksDB store survives a reopen with the changelog offset it is caught up to."""

from __future__ import annotations

import json

import pytest

from streamer.state_store import RocksState, TrackedState


class Box:
    """A minimal state codec: what GameState and PlayerState provide."""

    def __init__(self, n: int) -> None:
        self.n = n

    def to_dict(self) -> dict:
        return {"n": self.n}

    @classmethod
    def from_dict(cls, d: dict) -> Box:
        return cls(d["n"])


def raw(n: int) -> bytes:
    return json.dumps({"n": n}).encode()


def commit(state: TrackedState, next_offset: int) -> list[tuple[str, bytes | None]]:
    written = [(k, None if v is None else json.dumps(v.to_dict()).encode()) for k, v in state.changes()]
    state.committed(written, next_offset if written else None)
    return written


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_both_stores_track_changes_and_deletions_alike(tmp_path, kind):
    s = TrackedState() if kind == "memory" else RocksState(tmp_path / "p0", Box)
    s.load("a", raw(1), Box)
    s.load("b", raw(2), Box)
    s.load("b", None, Box)  # a tombstone later in the changelog
    s.loaded(3)
    assert s.get("a").n == 1 and s.get("b") is None and s.dirty == set()
    a = s.get("a")
    a.n = 5
    s["a"] = a
    s["c"] = Box(7)
    s.pop("a", None)
    assert s.get("a") is None, "a key popped in this batch is gone, although the DB still has it"
    assert [(k, v.n if v else None) for k, v in s.changes()] == [("a", None), ("c", 7)]
    s.close()


def test_rocksdb_store_reopens_where_it_was_committed_and_keeps_only_clean_entries_bounded(tmp_path):
    s = RocksState(tmp_path / "p1", Box, cache_size=2)
    assert s.start_offset == 0
    for i in range(5):
        s[f"k{i}"] = Box(i)
    commit(s, 41)
    assert len(s) == 2 and sorted(s.keys_on_disk()) == [f"k{i}" for i in range(5)], "evicted from memory, not lost"
    assert s.get("k0").n == 0, "an evicted key is read back from the DB"
    s["k1"] = Box(10)
    s.pop("k2")
    s["k9"] = Box(9)  # changed, but the transaction never commits (a crash): the DB must not see it
    s.close()
    s = RocksState(tmp_path / "p1", Box)
    assert s.start_offset == 41, "a restore reads the changelog from here on"
    assert s.get("k1").n == 1 and s.get("k2").n == 2 and s.get("k9") is None
    s["k1"] = Box(10)
    s.pop("k2")
    commit(s, 57)
    s.close()
    s = RocksState(tmp_path / "p1", Box)
    assert s.start_offset == 57 and s.get("k1").n == 10 and s.get("k2") is None
    with pytest.raises(KeyError):
        s.pop("k2")
    s.close()


def test_a_store_in_use_is_a_clear_error(tmp_path):
    from analyzers.errors import StateStoreError

    s = RocksState(tmp_path / "p2", Box)
    with pytest.raises(StateStoreError, match="same --instance-id"):
        RocksState(tmp_path / "p2", Box)
    s.close()


def test_states_carry_their_format_and_a_newer_one_is_refused():
    from analyzers.errors import StateStoreError
    from streamer.pipeline import STATE_FORMAT, PlayerState

    d = PlayerState("p").to_dict()
    assert d["format"] == STATE_FORMAT
    legacy = {k: v for k, v in d.items() if k != "format"}  # written before states were versioned
    assert PlayerState.from_dict(legacy).player_id == "p"
    with pytest.raises(StateStoreError, match="format"):
        PlayerState.from_dict({**d, "format": STATE_FORMAT + 1})
