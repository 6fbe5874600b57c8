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
    assert PlayerState.from_dict({**d, "format": 1}).player_id == "p"  # before deferred moves: read as it is
    with pytest.raises(StateStoreError, match="format"):
        PlayerState.from_dict({**d, "format": STATE_FORMAT + 1})


def test_a_player_with_1000_open_games_stays_under_the_stated_bound(caplog):
    import json as _json

    from analyzers.calibration import load_calibration
    from analyzers.profiles import get_profile
    from analyzers.ratingmodel import load_move_model
    from schemas import MoveAssessment
    from streamer.pipeline import PLAYER_STATE_BOUND, PipelineConfig, apply_player_event

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"), model=load_move_model("fast"))
    state = None
    cands = [{"uci": "e2e4", "cp": 30, "mate": None}, {"uci": "d2d4", "cp": 20, "mate": None}, {"uci": "g1f3", "cp": -40, "mate": None}]
    for i in range(1000):  # a thousand games started and never ended, in a thousand events
        a = MoveAssessment(game_id=f"g{i}", ply=20, player_id="p", color="white", uci="d2d4", event=f"e{i}", reference_rating=1800,
                           eval_before=30, eval_after=20, gain=-10, loss=10, candidates=cands, played_rank=1, played_value=20,
                           counted=True, engine="test", limits="d8-mpv5", time_class="rapid")
        state, out = apply_player_event(state, a, config)
        assert out and out[0].moves == 1  # every move still rated
    size = len(_json.dumps(state.to_dict(), separators=(",", ":")))
    assert len(state.games) == config.max_open_games and len(state.events) == config.max_events
    assert state.evicted == (1000 - config.max_open_games) + (1000 - config.max_events)
    assert size < PLAYER_STATE_BOUND, size
    assert state.overall.rating.n == 1000  # the player scope keeps every move
    assert any("scope limit" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("kind", ["memory", "rocksdb"])
def test_a_sweep_sees_every_key_and_its_deletions_reach_the_changelog(tmp_path, kind):
    s = TrackedState() if kind == "memory" else RocksState(tmp_path / "p0", Box, cache_size=2)
    for i in range(6):
        s[f"k{i}"] = Box(i)
    commit(s, 6)  # the RocksDB store keeps 2 live, the rest on disk only
    assert sorted((k, v.n) for k, v in s.scan()) == [(f"k{i}", i) for i in range(6)]
    for k, v in s.scan():
        if v.n % 2:
            del s[k]
    assert [(k, v) for k, v in commit(s, 9)] == [("k1", None), ("k3", None), ("k5", None)]
    assert sorted(k for k, _ in s.scan()) == ["k0", "k2", "k4"]


# -- damaged state: a typed error for the record that needs it, never a stopped partition --------------------
def _game_state(position: str) -> dict:
    from schemas import GameStarted, PlayerInfo
    from streamer.pipeline import start_game

    d = start_game(None, GameStarted(game_id="g1", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), None, None).to_dict()
    return {**d, "position": position}


def test_a_stored_position_that_cannot_be_read_is_a_corrupt_state_naming_the_game():
    from analyzers.errors import CorruptState
    from streamer.pipeline import GameState

    with pytest.raises(CorruptState, match="game g1: stored position 'not a fen'"):
        GameState.from_dict(_game_state("not a fen"))
    go = {**_game_state("19 7.5 b:D4 w:Q16"), "game": "go"}
    assert GameState.from_dict(go).position().moves == [("b", "D4"), ("w", "Q16")]
    with pytest.raises(CorruptState, match="game g1"):
        GameState.from_dict({**go, "position": "19 7.5 b:D4 b:D4"})  # a stone on a stone


def test_a_memory_restore_drops_a_damaged_record_and_loads_the_rest(caplog):
    from analyzers.errors import CorruptState
    from streamer.state_store import decode

    with pytest.raises(CorruptState, match="Box state of 'k'"):
        decode(b"{not json", Box, "k")
    s = TrackedState()
    s.load("a", raw(1), Box)
    s.load("bad", b'{"m": 2}', Box)
    s.load("b", raw(3), Box)
    assert {k: v.n for k, v in s.items()} == {"a": 1, "b": 3}
    assert any(r.getMessage() == "corrupt state dropped" and r.key == "bad" for r in caplog.records)


def test_rocksdb_lookups_and_sweeps_of_a_damaged_key_drop_it_as_a_memory_restore_does(tmp_path, caplog):
    s = RocksState(tmp_path / "p", Box)
    s.committed([("a", raw(1)), ("bad", b"\xff")], 2)
    s.close()
    s = RocksState(tmp_path / "p", Box)
    assert [(k, v.n) for k, v in s.scan()] == [("a", 1)]
    assert s.get("bad") is None and s.get("a").n == 1
    assert sum(r.getMessage() == "corrupt state dropped" and r.key == "bad" for r in caplog.records) == 2
    s["bad"] = Box(5)  # the key starts afresh; its next commit replaces the damaged bytes
    commit(s, 3)
    s.close()
    assert RocksState(tmp_path / "p", Box).get("bad").n == 5


@pytest.mark.asyncio
async def test_the_steps_dead_letter_what_a_damaged_or_unsupported_state_stops_and_go_on(caplog):
    from analyzers.calibration import load_calibration
    from analyzers.profiles import get_profile
    from schemas import DeadLetter, GameEnded, MoveAssessment
    from streamer.pipeline import GameState, PipelineConfig, PlayerState
    from streamer.steps import ObjectTable, Steps

    steps = Steps(PipelineConfig(get_profile("fast"), load_calibration("fast")))
    store = {"g1": _game_state("not a fen"), "g2": _game_state(_game_state("")["position"])}
    games = ObjectTable(store, GameState)
    out = await steps.game(games, GameEnded(game_id="g1", result="1-0"))
    assert len(out) == 1 and isinstance(out[0].message, DeadLetter) and out[0].message.reason == "corrupt_state"
    assert "g1" in out[0].message.error
    out = await steps.game(games, GameEnded(game_id="g2", result="1-0"))  # the next game is untouched
    assert [o.message.type for o in out] == ["game_result", "game_result"]
    # the damaged value is dropped (logged with its content): the key starts afresh, one record lost, not all later ones
    assert "g1" not in store
    dropped = [r for r in caplog.records if r.getMessage() == "corrupt state dropped" and r.key == "g1"]
    assert len(dropped) == 1 and "not a fen" in dropped[0].state
    again = await steps.game(games, GameEnded(game_id="g1", result="1-0"))  # now a game kibitz does not know
    assert [o.message.reason for o in again] == ["unknown_game"]

    # a player state missing a field: a corrupt state (not read as absent, not an internal error), then afresh
    a = MoveAssessment(game_id="g9", ply=20, player_id="p", color="white", uci="e2e4", eval_before=0, eval_after=0, gain=0,
                       loss=0, candidates=[{"uci": "e2e4", "cp": 0, "mate": None}], played_rank=0, played_value=0,
                       counted=False, engine="Stockfish", limits="d8-mpv5")
    players = ObjectTable({"p": {"format": 1, "player_id": "p"}}, PlayerState)
    out = steps.player(players, a)
    assert len(out) == 1 and out[0].message.reason == "corrupt_state" and "PlayerState state of 'p'" in out[0].message.error
    out = steps.player(players, a)
    assert not any(isinstance(o.message, DeadLetter) for o in out) and players["p"].player_id == "p"

    # a Go assessment reaching a rate stage without a Go calibration: its own reason, not an internal error
    go = MoveAssessment(game="go", game_id="x", ply=3, player_id="p", color="white", uci="Q16", eval_before=0,
                        eval_after=0, gain=0, loss=0, candidates=[{"uci": "Q16", "cp": 0, "mate": None}], played_rank=0,
                        played_value=0, counted=True, engine="GNU Go", limits="lvl1")
    out = steps.player({}, go)
    assert len(out) == 1 and out[0].message.reason == "unsupported_game" and "not set up for Go" in out[0].message.error
