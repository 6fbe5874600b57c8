import codecs
import json

import pytest
from pydantic import ValidationError

from analyzers.errors import MalformedEvent
from schemas import MESSAGES, GameStarted, MoveEvent, PlayerInfo, export_json_schemas, parse_event, parse_player_event


def test_parse_event_discriminates_and_validates():
    ev = parse_event('{"type": "move", "game_id": "g1", "ply": 0, "uci": "e2e4"}')
    assert isinstance(ev, MoveEvent) and ev.schema_version == 2 and ev.game == "chess"
    v1 = parse_event('{"type": "move", "game_id": "g1", "ply": 0, "uci": "e2e4", "schema_version": 1}')
    assert isinstance(v1, MoveEvent) and v1.game == "chess"
    go = parse_event('{"type": "move", "game": "go", "game_id": "g1", "ply": 0, "move": "Q16"}')
    assert isinstance(go, MoveEvent) and go.uci == "Q16"
    gs = parse_event(json.dumps({"type": "game_started", "game_id": "g1", "white": {"id": "a", "rating": 2000}, "black": {"id": "b"}}))
    assert isinstance(gs, GameStarted) and gs.white.rating == 2000


@pytest.mark.parametrize("bad,where", [
    ('{"type": "move", "game_id": "g", "ply": -1, "uci": "e2e4"}', "ply"),
    ('{"type": "move", "game_id": "g", "ply": 0, "uci": "e2e9"}', "uci"),
    ('{"type": "move", "game_id": "g", "ply": 0, "uci": "Nf3"}', "uci"),
    ('{"type": "move", "game_id": "g", "ply": 0, "uci": "e2e4", "extra": 1}', "extra"),
    ('{"type": "move", "game_id": "", "ply": 0, "uci": "e2e4"}', "game_id"),
    ('{"type": "move", "game_id": "g", "ply": 0, "uci": "e2e4", "schema_version": 3}', "schema_version"),
    ('{"type": "move", "game": "go", "game_id": "g", "ply": 0, "uci": "e2e4"}', "uci"),
    ('{"type": "move", "game": "go", "game_id": "g", "ply": 0, "uci": "I5"}', "uci"),
    ('{"type": "move", "game_id": "g", "ply": 0, "uci": "Q16"}', "uci"),
    ('{"type": "move", "game": "shogi", "game_id": "g", "ply": 0, "uci": "e2e4"}', "game"),
    ('{"type": "game_started", "game_id": "g", "white": {"id": "a", "rating": 9000}, "black": {"id": "b"}}', "rating"),
    ('{"type": "teleport", "game_id": "g"}', "type"),
    ('not json at all', "message"),
    ('{"type": "move", "game_id": "g", "ply": "2", "uci": "e2e4"}', "ply"),
    ('{"type": "move", "game_id": "g", "ply": true, "uci": "e2e4"}', "ply"),
    ('{"type": "move", "game_id": "g", "ply": 2001, "uci": "e2e4"}', "ply"),
    ('{"type": "game_ended", "game_id": "g", "result": "1-0", "plies": 100000000000000000000}', "plies"),
    ('{"type": "move", "game_id": "g", "ply": 1, "uci": "e2e4", "timestamp": NaN}', "timestamp"),
    # milliseconds where seconds are meant: a date 50,000 years ahead, after which no Glicko-2 deviation would grow
    ('{"type": "game_ended", "game_id": "g", "result": "1-0", "timestamp": 1700000000000}', "milliseconds? it is seconds"),
    ('{"type": "move", "game_id": "g", "ply": 1, "uci": "e2e4", "timestamp": -1e11}', "timestamp"),
    ('{"type": "move", "game_id": "g", "ply": 1, "uci": "e2e4", "clock": Infinity}', "clock"),
    ('[' * 100 + ']' * 100, "message"),
    ('{"type": "move", "game_id": "\\u0000changelog-offset", "ply": 1, "uci": "e2e4"}', "game_id"),
    # an event keys the pool stage's state: the state store's own bookkeeping key starts with NUL
    ('{"type": "game_started", "game_id": "g", "white": {"id": "a"}, "black": {"id": "b"}, "event": "\\u0000changelog-offset"}',
     "event"),
    ('{"type": "move", "game_id": "' + 'g' * 70000 + '", "ply": 1, "uci": "e2e4"}', "bytes"),
    # a producer that sends SAN or another notation hears which one is wanted
    ('{"type": "move", "game_id": "g", "ply": 0, "uci": "Nf3"}', "not a UCI move (from-square, to-square, promotion piece: e2e4"),
    ('{"type": "move", "game": "go", "game_id": "g", "ply": 0, "uci": "I9"}', "not a GTP move (a point such as D4, or pass)"),
])
def test_strict_validation_names_the_field(bad, where):
    with pytest.raises(MalformedEvent) as e:
        parse_event(bad)
    assert where in str(e.value)


def test_a_byte_order_mark_before_an_event_is_ignored():
    """Windows tools write one before UTF-8 text (RFC 8259 s. 8.1 lets a parser ignore it): a JSON-lines file's first
    line, its game's start, was malformed, and every move of that game then unknown."""
    start = '{"type": "game_started", "game_id": "g", "white": {"id": "a"}, "black": {"id": "b"}}'
    assert parse_event(codecs.BOM_UTF8 + start.encode()) == parse_event(start) == parse_event("\ufeff" + start)
    with pytest.raises(MalformedEvent):
        parse_event(codecs.BOM_UTF8 * 2 + start.encode())  # one mark, at the start: not any number of them


def test_malformed_keeps_game_and_ply_when_it_can():
    with pytest.raises(MalformedEvent) as e:
        parse_event('{"type": "move", "game_id": "g7", "ply": 3, "uci": "zz"}')
    assert e.value.game_id == "g7" and e.value.ply == 3


def _assessment(**kw) -> str:  # noqa: ANN003
    return json.dumps({"type": "assessment", "game_id": "g", "ply": 9, "player_id": "p", "color": "white", "uci": "e2e4",
                       "eval_before": 0, "eval_after": 0, "gain": 0, "candidates": [{"uci": "e2e4", "cp": 10}],
                       "played_rank": 0, "counted": True, "engine": "Stockfish", "limits": "d8-mpv5"} | kw)


@pytest.mark.parametrize("kw,where", [
    ({"played_rank": 1}, "played_rank 1 outside the 1 candidates"),
    ({"candidates": [], "played_rank": None}, "a counted move needs its candidates"),
])
def test_an_assessment_whose_candidates_do_not_hold_its_move_is_malformed(kw, where):
    """The steps index the candidates by played_rank and read a counted move's candidates: a record that cannot hold
    them is refused with its reason, not failed on inside a step."""
    assert parse_player_event(_assessment()).played_rank == 0
    assert parse_player_event(_assessment(candidates=[], played_rank=None, counted=False)).candidates == []
    with pytest.raises(MalformedEvent) as e:
        parse_player_event(_assessment(**kw))
    assert where in str(e.value)


@pytest.mark.parametrize("declared", [0, 0.0, "0", "", " - ", "?"])
def test_a_rating_of_0_or_a_placeholder_is_no_rating(declared):
    """As PGN's Elo tags say it (streamer.ingest.rating_from_tag) and many platforms send it: read as a rating of 0 it
    started the player's Glicko-2 at 0 (a draw with Anand took 60 points off his 2811)."""
    assert PlayerInfo(id="p", rating=declared).rating is None
    start = {"type": "game_started", "game_id": "g", "white": {"id": "a", "rating": declared}, "black": {"id": "b"}}
    assert parse_event(json.dumps(start)).white.rating is None


def test_a_real_rating_is_kept_and_a_negative_one_refused():
    assert PlayerInfo(id="p", rating="2100").rating == 2100 and PlayerInfo(id="p", rating=0.5).rating == 0.5
    with pytest.raises(ValidationError):
        PlayerInfo(id="p", rating=-5)


def test_player_info_is_frozen_and_strict():
    with pytest.raises(ValidationError):
        PlayerInfo(id="a", nickname="x")


def test_export_writes_one_valid_schema_per_message(tmp_path):
    paths = export_json_schemas(tmp_path)
    assert len(paths) == len(MESSAGES) >= 9
    for p in paths:
        schema = json.loads(p.read_text())
        assert schema["type"] == "object" and "schema_version" in schema["properties"]
        assert schema.get("additionalProperties") is False


def test_a_start_with_a_name_or_time_control_of_60_kb_keeps_their_start():
    """A player's name and a time control travel with every record of a game (its state, its record, the review's
    requests with a player's last 20 games): one name of 60 KB (within an event's 64 KB) made a player's kept games
    over the broker's record limit. They keep their first 200 and 100 characters; the game is not refused."""
    import json

    from schemas import parse_event
    from schemas.messages import MAX_NAME, MAX_TIME_CONTROL

    raw = json.dumps({"type": "game_started", "game_id": "g", "white": {"id": "w", "name": "N" * 60_000},
                      "black": {"id": "b", "name": "Short Name"}, "time_control": "9" * 3_000})
    ev = parse_event(raw)
    assert len(ev.white.name) == MAX_NAME and ev.white.name.endswith("...") and ev.black.name == "Short Name"
    assert len(ev.time_control) == MAX_TIME_CONTROL
