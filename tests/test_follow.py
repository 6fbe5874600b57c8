"""Following live PGN feeds (streamer.follow): a growing file, a URL answering 304/404/500, half-written text,
corrections. The URL tests run a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from conftest import FIXTURES, pgn_upto
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.errors import IllegalMove, UnsupportedGame
from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
from streamer.follow import STABLE_POLLS, FeedParser, FeedTracker, Follower, PgnSource, PgnStream, http_date, parse_feed
from streamer.live import LiveStore

N_PLIES = 49


def moves_of(events) -> list[tuple[str, int, str]]:
    return [(e.game_id, e.ply, e.uci) for e in events if isinstance(e, MoveEvent)]


def test_a_growing_feed_gives_each_new_ply_once_with_its_clock_and_ends_on_the_result():
    t = FeedTracker("round1")
    first = t.update(pgn_upto(2))
    assert isinstance(first[0], GameStarted) and first[0].white.name == "Bai, Jinshi" and first[0].white.rating == 2618
    assert [e.ply for e in first[1:]] == [0, 1] and first[1].clock == 180.0 and first[2].clock == 164.1
    assert t.update(pgn_upto(2)) == []  # the same text again: nothing new
    grown = t.update(pgn_upto(5))
    assert [e.ply for e in grown] == [2, 3, 4]
    end = t.update(pgn_upto(N_PLIES))
    assert [e.ply for e in end if isinstance(e, MoveEvent)] == list(range(5, N_PLIES))
    assert isinstance(end[-1], GameEnded) and end[-1].result == "1-0" and end[-1].plies == N_PLIES
    assert t.update(pgn_upto(N_PLIES)) == []


def test_a_shorter_or_half_written_feed_loses_nothing_and_invents_nothing():
    t = FeedTracker("round1")
    t.update(pgn_upto(10))
    assert t.update(pgn_upto(6)) == []  # being rewritten: known plies stay, no restart
    assert t.update("") == []
    full = pgn_upto(12)
    assert t.update(full[: full.index("6. b3") + len("6. b")]) == []  # stops inside a move: retried
    # stops right after a move: it may be half-written ("O-O" of "O-O-O" is legal) and its clock may follow, so it
    # waits until the text grows or ends with the result token
    upto_b3 = full[: full.index("6. b3") + len("6. b3")]
    assert t.update(upto_b3) == []
    assert t.update(upto_b3 + " ") == []
    assert t.update(upto_b3 + " { [%clk 0:0") == []
    b3 = t.update(pgn_upto(11))
    assert moves_of(b3) == [(next(iter(t.games)), 10, "b2b3")] and b3[0].clock == 181.1
    assert [e.ply for e in t.update(pgn_upto(12))] == [11]


def test_a_feed_cut_in_its_tags_or_short_of_its_last_moves_starts_and_ends_nothing_early():
    """A text cut inside the tags would name another game (White "Bai, Jin"); one cut after the final result tag
    but short of the last moves would end the game without them."""
    t = FeedTracker("round1")
    full = pgn_upto(N_PLIES)
    assert t.update(full[: full.index("Bai, Jinshi") + 3]) == []
    assert t.update(full[: full.index("[BlackElo")]) == []   # whole tags so far, but more may follow
    started = t.update(pgn_upto(0))
    assert len(started) == 1 and started[0].white.name == "Bai, Jinshi"
    cut = full[: full.index("25. Nxf5")]
    assert [e.ply for e in t.update(cut)] == list(range(47))  # the final result tag, ply 47 still to come: no end
    end = t.update(full)
    assert [e.ply for e in end if isinstance(e, MoveEvent)] == [47, 48]
    assert isinstance(end[-1], GameEnded) and end[-1].plies == N_PLIES and len(t.games) == 1


def test_a_feed_with_a_byte_order_mark_cut_in_its_tags_starts_nothing_early():
    """Files written on Windows often start with a BOM: the first game's tags looked whole from the first character,
    so a poll cut inside them started a game under a half-written name."""
    t = FeedTracker("round1")
    full = "\ufeff" + pgn_upto(N_PLIES).replace("\n", "\r\n")
    assert t.update(full[: full.index("Bai, Jinshi") + 3]) == []
    started = t.update(full)
    assert [e.white.name for e in started if isinstance(e, GameStarted)] == ["Bai, Jinshi"]
    assert [e.ply for e in started if isinstance(e, MoveEvent)] == list(range(N_PLIES))


def test_a_feed_without_result_tokens_is_taken_as_it_is_after_stable_polls():
    """PGN ends every game's moves with its result token; a feed that leaves it out has its last move and its end
    taken once the same text has been polled STABLE_POLLS times (the Follower polls an unchanged feed as None)."""
    t = FeedTracker("round1")
    full = pgn_upto(N_PLIES)
    bare = full.rstrip()[: -len("1-0")]
    assert [e.ply for e in t.update(bare) if isinstance(e, MoveEvent)] == list(range(N_PLIES - 1))
    for _ in range(STABLE_POLLS - 2):
        assert t.update(None) == []
    end = t.update(None)
    assert [e.ply for e in end if isinstance(e, MoveEvent)] == [N_PLIES - 1] and isinstance(end[-1], GameEnded)
    assert t.update(None) == []


def test_a_half_written_move_at_the_end_is_retried_and_an_illegal_one_rejected_once():
    errors = []
    t = FeedTracker("round1", errors.append)
    t.update(pgn_upto(4))
    bad = pgn_upto(4).replace("*", "3. Qxh7 *")  # illegal in the position
    for _ in range(STABLE_POLLS - 1):
        assert t.update(bad) == [] and errors == []  # could be a move still being typed
    assert t.update(bad) == [] and len(errors) == 1 and isinstance(errors[0], IllegalMove)
    assert t.update(bad) == [] and len(errors) == 1  # rejected once, not at every poll
    assert [e.ply for e in t.update(pgn_upto(6))] == [4, 5]  # the operator fixed it


def test_a_corrected_move_restarts_the_game_under_a_new_id_with_a_log_line(caplog):
    t = FeedTracker("round1")
    start = t.update(pgn_upto(6))
    gid = start[0].game_id
    corrected = pgn_upto(6).replace("3. g3", "3. e3")
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        out = t.update(corrected)
    assert isinstance(out[0], GameStarted) and out[0].game_id == f"{gid}~2" and out[0].corrects == gid
    assert out[0].corrects_from == 4  # the first ply that differs: "3. g3" became "3. e3"
    assert [(e.game_id, e.ply) for e in out[1:]] == [(f"{gid}~2", p) for p in range(6)]
    assert any(r.message == "game corrected in the feed: restarted" and r.ply == 4 for r in caplog.records)


def test_a_game_taken_out_of_the_feed_is_over_after_stable_polls_and_followed_again_if_it_returns(caplog):
    """A game taken out of the feed, here replaced by a game of two other players (corrected names on both sides at
    once make another game, which nothing ties to the old one), can no longer end in this feed. Gone for STABLE_POLLS
    polls (unchanged polls count), it is taken as over, logged once, so that a follow ``until_ended`` ends; a game that
    comes back is followed again."""
    gone: list[str] = []
    t = FeedTracker("round1", on_gone=gone.append)
    t.update(pgn_upto(6, white="Bai, Jin", black="Ding, L"))
    renamed = pgn_upto(6)
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        t.update(renamed)
        for _ in range(STABLE_POLLS - 2):
            t.update(None)
        assert sum(g.over for g in t.games.values()) == 0  # not yet: a half-written text may lack a game for a poll
        t.update(None)
    over = [g for g in t.games.values() if g.over]
    assert len(over) == 1 and len(over[0].moves) == 6
    assert gone == [over[0].game_id]  # told once (the overlay's store stops its clock)
    assert over[0].game_id != next(e.game_id for e in t.update(pgn_upto(7)) if isinstance(e, MoveEvent))
    assert [r.message for r in caplog.records].count("game no longer in the feed: taken as over") == 1
    back = t.update(pgn_upto(7, white="Bai, Jin", black="Ding, L") + pgn_upto(7))  # it returns: followed again
    assert [e.ply for e in back if e.game_id == over[0].game_id and isinstance(e, MoveEvent)] == [6]
    assert not over[0].over


def test_a_game_renamed_in_the_feed_is_followed_under_its_new_id_as_a_correction_of_the_old_one(caplog):
    """An operator corrects White's name (or the round) in the middle of a game: the tags make another key, so the
    game under its new tags was a new game, started from ply 0, and the old one was left to be taken as over after
    STABLE_POLLS polls: an overlay of the old id froze, and the plies before the rename counted twice in the
    unchanged player's event and overall scopes. The new game now names the one it replaces (GameStarted.corrects,
    corrects_from the plies delivered) and which sides have another player (``renamed``); the old one is over at once,
    not reported as gone (its overlay follows the new game)."""
    gone: list[str] = []
    t = FeedTracker("round1", on_gone=gone.append)
    first = t.update(pgn_upto(6, white="Bai, Jin"))
    old = first[0]
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        out = t.update(pgn_upto(8))
    start = out[0]
    assert isinstance(start, GameStarted) and start.game_id != old.game_id and start.white.name == "Bai, Jinshi"
    assert (start.corrects, start.corrects_from, start.renamed) == (old.game_id, 6, ["white"])
    assert moves_of(out[1:]) == [(start.game_id, p, u) for _, p, u in moves_of(FeedTracker("x").update(pgn_upto(8)))]
    assert t.games[old.game_id].over and gone == []
    assert [r.message for r in caplog.records] == ["game renamed in the feed: followed under its new id"]
    store = LiveStore()  # the overlay of the old id shows the game under its new tags
    for e in [*first, *out]:
        store.apply(e)
    assert store.resolve(old.game_id) == start.game_id and [g["game_id"] for g in store.games()] == [start.game_id]

    # the round corrected: the same players, nothing renamed; a later move of the game follows under its new id
    t = FeedTracker("round1")
    t.update(pgn_upto(6))
    out = t.update(pgn_upto(7).replace('Round "1.7"', 'Round "1.8"'))
    assert (out[0].corrects_from, out[0].renamed) == (6, []) and moves_of(out)[-1][1] == 6
    ply_7 = moves_of(FeedTracker("x").update(pgn_upto(8)))[7][2]
    assert moves_of(t.update(pgn_upto(8).replace('Round "1.7"', 'Round "1.8"'))) == [(out[0].game_id, 7, ply_7)]


def test_a_new_game_is_not_taken_for_a_renamed_one_unless_it_continues_it_one_to_one():
    """What is not a rename: a new game of the same White that does not begin with the old game's delivered moves (the
    next round's game on a feed that shows one round at a time), a game of two other players, and a new game that two
    gone games could both be (the same players under two rounds): each starts on its own, and the old games are
    taken as over when they have been gone STABLE_POLLS polls."""
    t = FeedTracker("r")
    t.update(pgn_upto(6))
    out = t.update(pgn_upto(0).replace('Round "1.7"', 'Round "2.1"'))
    assert out[0].corrects is None
    t = FeedTracker("r")
    t.update(pgn_upto(6))
    assert t.update(pgn_upto(6, white="A", black="B"))[0].corrects is None
    t = FeedTracker("r")
    t.update(pgn_upto(4) + pgn_upto(4).replace('Round "1.7"', 'Round "1.8"'))
    out = t.update(pgn_upto(5).replace('Round "1.7"', 'Round "1.9"'))
    assert out[0].corrects is None
    for _ in range(STABLE_POLLS - 1):
        t.update(None)
    assert sum(g.over for g in t.games.values()) == 2


def test_two_games_in_one_feed_have_distinct_stable_ids():
    a, b = pgn_upto(3), pgn_upto(3).replace('Round "1.7"', 'Round "1.8"')
    ids = {e.game_id for e in FeedTracker("r").update(a + b) if isinstance(e, GameStarted)}
    again = {e.game_id for e in FeedTracker("r").update(a + b) if isinstance(e, GameStarted)}
    assert len(ids) == 2 and ids == again


def test_a_variant_game_in_a_feed_is_refused_once_and_the_standard_game_beside_it_is_followed():
    """A Crazyhouse game (drops such as P@d5 are no UCI move of chess) beside a standard one: one UnsupportedGame, no
    event of it, the standard game's plies as usual."""
    errors: list = []
    t = FeedTracker("round1", errors.append)
    variant = '[Event "v"]\n[White "A"]\n[Black "B"]\n[Variant "Crazyhouse"]\n[Result "*"]\n\n1. e4 d5 2. exd5 Qxd5 3. Nc3 Qa5 4. P@d5 *\n\n'
    out = t.update(variant + pgn_upto(3)) + t.update(variant + pgn_upto(5))
    assert len(errors) == 1 and isinstance(errors[0], UnsupportedGame) and "Crazyhouse" in str(errors[0])
    assert [e.ply for e in out if isinstance(e, MoveEvent)] == list(range(5))
    assert [e.white.name for e in out if isinstance(e, GameStarted)] == ["Bai, Jinshi"]


def test_a_setup_position_that_does_not_read_is_refused_once_and_the_overlay_ignores_such_a_start():
    """A [FEN "garbage"] game in a feed: one IllegalMove ("invalid initial position"), no event of it; the game beside
    it is followed. The overlay's store, which builds a board from every start it is given (a worker's topics may carry
    one), skips a start that does not read: it used to raise and stop `kibitz follow --serve`."""
    errors: list = []
    t = FeedTracker("round1", errors.append)
    bad = '[Event "x"]\n[White "A"]\n[Black "B"]\n[SetUp "1"]\n[FEN "garbage"]\n[Result "*"]\n\n*\n\n'
    out = t.update(bad + pgn_upto(2)) + t.update(bad + pgn_upto(3))
    assert len(errors) == 1 and isinstance(errors[0], IllegalMove) and "initial position" in str(errors[0])
    assert [e.white.name for e in out if isinstance(e, GameStarted)] == ["Bai, Jinshi"]
    store = LiveStore()
    store.apply(GameStarted(game_id="g", white=PlayerInfo(id="a"), black=PlayerInfo(id="b"), initial_fen="garbage"))
    store.apply(MoveEvent(game_id="g", ply=0, uci="e2e4"))
    for e in out:
        store.apply(e)
    assert store.game("g") is None and [g["moves"] for g in store.games()] == [3]


def two_games(k1: int, k2: int) -> str:
    """A feed of two games after k1 and k2 plies (the second under another White, so another game)."""
    return pgn_upto(k1) + pgn_upto(k2, white="Other, Player")


def delivered(events) -> list[tuple]:
    return [(type(e).__name__, e.game_id, getattr(e, "ply", None), getattr(e, "uci", None), getattr(e, "clock", None),
             getattr(e, "plies", None)) for e in events]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, N_PLIES), st.integers(0, N_PLIES), st.none() | st.floats(0.0, 1.0)),
                max_size=10), st.sampled_from(["", "\ufeff"]), st.sampled_from(["\n", "\r\n"]))
def test_any_growth_of_a_feed_polled_whole_or_cut_anywhere_delivers_what_the_final_feed_does(polls, bom, newline):
    """Property: a two-game feed growing by any steps, each poll seeing the text whole or cut at any character (a
    relay rewriting the file, a site serving it half-uploaded), then the final text: every game starts once under
    its real tags, every ply comes once with its clock, each game ends once after its last ply, no error; the same
    events as the final text read in one poll. With or without a byte order mark and Windows line ends (a BOM made
    the first game's tags look whole from the first character: phantom games under half-written names)."""

    def feed(k1: int, k2: int) -> str:
        return bom + two_games(k1, k2).replace("\n", newline)

    final = feed(N_PLIES, N_PLIES)
    expected = sorted(delivered(FeedTracker("r").update(final)))
    errors: list = []
    t, got, k1, k2, previous = FeedTracker("r", errors.append), [], 0, 0, None
    for a, b, cut in polls:
        k1, k2 = max(k1, a), max(k2, b)  # a feed grows; a cut text may still look shorter
        text = feed(k1, k2)
        text = text if cut is None else text[: int(cut * len(text))]
        if text != previous:  # an unchanged feed is polled as None (Follower), the same text fewer than STABLE_POLLS times
            got += t.update(text)
        previous = text
    got += t.update(final)
    for _ in range(STABLE_POLLS):
        got += t.update(None)
    assert errors == []
    assert sorted(delivered(got)) == expected
    assert len(expected) == 2 * (N_PLIES + 2)


#: Games a feed's text is made of for the parser's property test, each after k plies: plain ones under two names, and
#: texts that end a game unusually: a comment with a blank line inside, a "%" escape line and a ";" comment, an illegal
#: move, a game of tags only (python-chess reads the next game's tags as its own), no blank line after the result.
FEED_PIECES = (
    lambda k: pgn_upto(k),
    lambda k: pgn_upto(k, white="Other, Player"),
    lambda k: pgn_upto(k, white="Third, Player").replace("1. e4", "1. e4 { a long\n\nthought }", 1),
    lambda k: "% an escape line\n" + pgn_upto(k, white="Fourth, Player").replace("1. e4", "1. e4 ; a remark\n", 1),
    lambda k: pgn_upto(k, white="Fifth, Player").replace("2. ", "2. Qxh7 ", 1),
    lambda k: pgn_upto(0, white="Sixth, Player").split("\n\n")[0] + "\n\n",
    lambda k: pgn_upto(k, white="Seventh, Player").rstrip() + "\n",
)


def fields(games) -> list[tuple]:
    return [(dict(g.headers), g.moves, g.clocks, g.error, g.at_end, g.whole, g.text, g.error_type) for g in games]


@settings(max_examples=80, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, len(FEED_PIECES) - 1), st.integers(0, N_PLIES)), max_size=6),
                          st.none() | st.floats(0.0, 1.0)), min_size=1, max_size=8))
def test_the_feed_parser_reads_each_text_as_a_fresh_parse_does(polls):
    """Property: a parser that keeps the games of its last parse gives, for any sequence of texts (games growing,
    inserted, removed, reordered, corrected, the text cut at any character), exactly what parsing each text afresh
    gives: reusing a game is only ever a shortcut."""
    parser = FeedParser()
    for pieces, cut in polls:
        text = "".join(FEED_PIECES[i](k) for i, k in pieces)
        text = text if cut is None else text[: int(cut * len(text))]
        assert fields(parser.parse(text)) == fields(parse_feed(text))


def test_the_feed_parser_parses_again_only_the_games_that_changed():
    """A poll of a round in which one game moved reuses the other games as they were parsed, and parses the one that
    moved (the last game of a text, which may be growing, is always parsed); the results are a fresh parse's."""
    round_ = [pgn_upto(10, white=f"Board {b}, Player") for b in range(4)]
    parser = FeedParser()
    first = parser.parse("".join(round_))
    round_[1] = pgn_upto(11, white="Board 1, Player")
    second = parser.parse("".join(round_))
    assert [a is b for a, b in zip(first, second)] == [True, False, True, False]
    assert second[1].moves == first[1].moves + [second[1].moves[-1]] and len(second[1].moves) == 11
    assert fields(second) == fields(parse_feed("".join(round_)))
    assert parser.parse("".join(round_[2:]))[0] is first[2]  # the games before it gone: still the same text


def same_tags(k: int) -> str:
    """Another game (London 2011's first, 40 of its plies) under the broadcast game's tags: a tiebreak game the feed
    does not tell apart from the game before it."""
    import chess.pgn

    game = chess.pgn.read_game(io.StringIO(pgn_upto(min(k, 40), source=FIXTURES / "london_chess_classic_2011.pgn")))
    assert game is not None
    result = "1/2-1/2" if k >= 40 else "*"
    first = chess.pgn.read_game(io.StringIO(pgn_upto(0)))
    assert first is not None
    game.headers.clear()
    game.headers.update({**first.headers, "Result": result})
    return str(game) + "\n\n"


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, N_PLIES), st.integers(0, 40), st.none() | st.floats(0.0, 1.0)), max_size=10))
def test_two_games_under_the_same_tags_are_two_games_however_the_feed_grows(polls):
    """Property: a feed of two games with the same identifying tags (Event, Site, Date, Round, White, Black), growing
    by any steps and cut anywhere, gives what its final text read at once gives: two games, each started once under
    its own id, each ply once, each ended once, and no game restarted as corrected (keyed by the tags alone, the two
    were one game whose moves changed at every poll, restarted under a new id each time)."""
    final = pgn_upto(N_PLIES) + same_tags(40)
    expected = sorted(delivered(FeedTracker("r").update(final)))
    assert len({e[1] for e in expected}) == 2 and len(expected) == N_PLIES + 40 + 4
    t, got, k1, k2 = FeedTracker("r"), [], 0, 0
    for a, b, cut in polls:
        k1, k2 = max(k1, a), max(k2, b)
        text = pgn_upto(k1) + same_tags(k2)
        got += t.update(text if cut is None else text[: int(cut * len(text))])
    got += t.update(final)
    for _ in range(STABLE_POLLS):
        got += t.update(None)
    assert sorted(delivered(got)) == expected
    assert all(g.revision == 1 for g in t.games.values())
    # the first keeps the id a game alone under those tags has: a feed that gains a same-tags game renames nothing
    alone = FeedTracker("r").update(pgn_upto(3))[0].game_id
    assert [e.game_id for e in FeedTracker("r").update(final) if isinstance(e, GameStarted)] == [alone, f"{alone}#2"]


def test_a_game_changed_after_its_end_is_logged_once_and_not_applied(caplog):
    """A game's end is final (its rating updates are out): a result set too early and moves added after it, or a result
    corrected, apply nothing, and the operator is told once in the log. The ended text polled again, or cut short
    while rewritten, is no change."""
    t = FeedTracker("round1")
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        ended = t.update(pgn_upto(10, result="1-0"))
        assert isinstance(ended[-1], GameEnded) and ended[-1].plies == 10
        assert t.update(pgn_upto(10, result="1-0") + "\n") == [] and t.update(pgn_upto(6)) == []
        assert not [r for r in caplog.records if "after its end" in r.getMessage()]
        assert t.update(pgn_upto(12)) == []  # the result taken back, play goes on
        assert t.update(pgn_upto(14, result="0-1")) == []
    (warning,) = [r for r in caplog.records if "after its end" in r.getMessage()]
    assert (warning.plies, warning.result, warning.feed_plies, warning.feed_result) == (10, "1-0", 12, "*")
    t2 = FeedTracker("round1")
    t2.update(pgn_upto(N_PLIES))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        assert t2.update(pgn_upto(N_PLIES, result="1/2-1/2")) == []
    assert [r.feed_result for r in caplog.records if "after its end" in r.getMessage()] == ["1/2-1/2"]


def test_a_game_listed_twice_in_a_feed_is_one_game():
    """The same game twice in one feed (the same tags, moves and result) is one game, each ply rated once; once the two
    listings differ they are two games, the second rated from its first ply under ``<id>#2``."""
    t = FeedTracker("r")
    events = t.update(pgn_upto(6) + pgn_upto(6)) + t.update(pgn_upto(10) + pgn_upto(10)) + t.update(pgn_upto(12) + pgn_upto(12))
    assert [e.ply for e in events if isinstance(e, MoveEvent)] == list(range(12))
    assert len({e.game_id for e in events}) == 1 and len(t.games) == 1
    later = t.update(pgn_upto(12) + same_tags(3))
    second = f"{events[0].game_id}#2"
    assert [(type(e).__name__, e.game_id) for e in later[:2]] == [("GameStarted", second), ("MoveEvent", second)]
    assert [e.ply for e in later if isinstance(e, MoveEvent)] == [0, 1, 2]


def test_of_two_games_under_the_same_tags_the_one_left_in_the_feed_keeps_its_id():
    """Two games under the same tags that open alike (the second's moves take the first's further): when the feed
    keeps only the first and it goes on, its new plies are the first game's, not taken for a shorter text of the
    second (which would hold them back, then restart the game as corrected)."""
    t = FeedTracker("r")
    first = t.update(pgn_upto(12) + pgn_upto(20))
    ids = [e.game_id for e in first if isinstance(e, GameStarted)]
    assert len(ids) == 2 and ids[1] == f"{ids[0]}#2"
    ply_12 = moves_of(FeedTracker("r").update(pgn_upto(13)))[12][2]
    assert moves_of(t.update(pgn_upto(13))) == [(ids[0], 12, ply_12)]
    assert all(g.revision == 1 for g in t.games.values())


async def test_a_follow_started_again_from_its_saved_state_sends_only_what_is_new(tmp_path):
    """A follow's state, saved (as JSON) and taken up by a new follower of the same sources, delivers nothing of what
    was delivered: the same text gives no event, a grown one only the new plies and ends, under the same ids (games
    under shared tags included). A state that is not one is refused, not guessed at."""
    import json

    path = tmp_path / "round.pgn"
    path.write_text(pgn_upto(10) + same_tags(4))
    first: list = []
    one = Follower([PgnSource(str(path))], first.append, interval=0.01)
    await one.poll_once()
    assert len(moves_of(first)) == 14
    saved = json.loads(json.dumps(one.state()))
    for g in saved["feeds"][str(path)]["games"].values():
        del g["players"]  # as a state saved before the players were kept: taken up as well
    again: list = []
    two = Follower([PgnSource(str(path))], again.append, interval=0.01)
    two.restore(saved)
    assert await two.poll_once() == 0 and again == []
    path.write_text(pgn_upto(N_PLIES) + same_tags(40))
    os.utime(path, ns=(10**9, 10**9))
    await two.poll_once()
    assert sorted(delivered(first + again)) == sorted(delivered(FeedTracker(path.stem).update(path.read_text())))
    # a poll that only refuses a game (a variant) counts as one that sent something: its state is saved, and the
    # refusal is not reported again by a follow started from it
    variant = pgn_upto(3, white="Variant, Player").replace("[Event ", '[Variant "Chess960"]\n[Event ', 1)
    path.write_text(path.read_text() + variant)
    os.utime(path, ns=(2 * 10**9, 2 * 10**9))
    errors: list = []
    three = Follower([PgnSource(str(path))], again.append, interval=0.01, on_error=errors.append)
    three.restore(two.state())
    assert await three.poll_once() == 1 and len(errors) == 1 and isinstance(errors[0], UnsupportedGame)
    four = Follower([PgnSource(str(path))], again.append, interval=0.01, on_error=errors.append)
    four.restore(json.loads(json.dumps(three.state())))
    assert await four.poll_once() == 0 and len(errors) == 1
    for bad in ({"version": 99, "feeds": {}}, {"version": 1, "feeds": {str(path): {"games": {"k": {}}}}}, []):
        with pytest.raises(ValueError):
            Follower([PgnSource(str(path))], again.append).restore(bad)  # type: ignore[arg-type]


async def test_a_growing_file_is_followed_ply_by_ply(tmp_path):
    path = tmp_path / "games.pgn"
    got: list = []
    follower = Follower([PgnSource(str(path)), PgnSource(str(path))], got.append, interval=0.01)
    assert len(follower.sources) == 1  # named twice, followed once
    assert await follower.poll_once() == 0 and follower.unavailable  # not there yet: retried, not fatal
    for k in (1, 2, 3, 10, 10, N_PLIES):
        path.write_text(pgn_upto(k))
        os.utime(path, ns=(k * 10**9, k * 10**9))  # a distinct mtime even within one clock tick
        await follower.poll_once()
    assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(N_PLIES))
    assert isinstance(got[-1], GameEnded) and follower.all_ended()


async def test_until_ended_stops_once_a_game_rejected_at_a_move_has_its_result(tmp_path):
    """A game with an illegal move waits in the feed for its correction (no end is sent: it is not scored); once its
    result is set, a follow ``until_ended`` does not wait for it for ever. While it is still being played it does."""

    def feed(result: str) -> str:
        bad = pgn_upto(4, result=result).rstrip()
        assert bad.endswith(result)
        return bad[: -len(result)] + f"3. Qxh7 {result}\n\n" + pgn_upto(N_PLIES).replace('Round "1.7"', 'Round "1.8"')

    path = tmp_path / "games.pgn"
    path.write_text(feed("*"))
    got: list = []
    errors: list = []
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01, on_error=errors.append)
    with pytest.raises(TimeoutError):  # "*": the game is still being played
        await asyncio.wait_for(follower.run(until_ended=True), 0.5)
    assert len(errors) == 1 and isinstance(errors[0], IllegalMove)
    path.write_text(feed("1-0"))
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01, on_error=errors.append)
    await asyncio.wait_for(follower.run(until_ended=True), 5)
    ended = [e for e in got if isinstance(e, GameEnded)]
    assert len(errors) == 2 and len(ended) == 2 and len({e.game_id for e in ended}) == 1  # the good game, once per run


class Feed:
    """A broadcast site on 127.0.0.1: serves ``text`` with an ETag and Last-Modified, honours conditional GETs, or
    answers the next queued status instead."""

    def __init__(self) -> None:
        self.text = ""
        self.version = 0
        self.fail: list[int] = []
        self.conditional = 0

    async def handle(self, request: web.Request) -> web.Response:
        if self.fail:
            return web.Response(status=self.fail.pop(0), text="unavailable")
        etag = f'"v{self.version}"'
        if request.headers.get("If-None-Match") == etag:
            self.conditional += 1
            return web.Response(status=304)
        return web.Response(text=self.text, headers={"ETag": etag, "Last-Modified": http_date(1_600_000_000 + self.version)})

    def set(self, text: str) -> None:
        self.text, self.version = text, self.version + 1


@contextlib.asynccontextmanager
async def serving(path: str, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[str]:
    """A real HTTP server on 127.0.0.1 answering GET ``path`` with ``handler``; yields the URL."""
    app = web.Application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}{path}"
    finally:
        await runner.cleanup()


@pytest.fixture
async def feed():
    f = Feed()
    async with serving("/round1.pgn", f.handle) as url:
        yield f, url


async def test_a_source_that_does_not_answer_holds_up_no_other_source(tmp_path, caplog):
    """A feed URL that hangs (a server that accepts and never answers) is waited for until its timeout at every poll;
    the other sources' plies go on arriving meanwhile, each source polled on its own. The follow ends once every
    source was polled and every game seen is over; the hung one is logged as unavailable."""
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="")

    path = tmp_path / "round1.pgn"
    path.write_text(pgn_upto(5))
    got: list = []
    loop = asyncio.get_running_loop()
    async with serving("/round2.pgn", hang) as url:
        try:
            follower = Follower([PgnSource(url, timeout=4.0), PgnSource(str(path))], got.append, interval=0.01)
            with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
                run = asyncio.create_task(follower.run(until_ended=True))
                t0 = loop.time()
                while len(moves_of(got)) < 5:
                    assert loop.time() - t0 < 2.0, "the file's plies waited for the hung URL"
                    await asyncio.sleep(0.01)
                path.write_text(pgn_upto(N_PLIES))
                while not any(isinstance(e, GameEnded) for e in got):
                    assert loop.time() - t0 < 3.0, "the file's plies waited for the hung URL"
                    await asyncio.sleep(0.01)
                assert not run.done()  # the URL has not been polled yet: it may have games
                await asyncio.wait_for(run, 10)
            assert loop.time() - t0 >= 4.0 and follower.unavailable[url] == f"cannot fetch {url}: no answer within 4 s"
            assert [r for r in caplog.records if r.getMessage() == "feed unavailable, retrying"]
            assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(N_PLIES))
        finally:
            release.set()  # the server's cleanup waits for its handlers


async def test_a_streaming_endpoint_is_unavailable_with_a_reason_that_names_it():
    """A URL that streams (Lichess's /api/stream/broadcast/... sends each update and never ends its body) is never
    read to its end by a poll: unavailable, saying it was still sending and what to follow instead, not a bare
    TimeoutError."""
    release = asyncio.Event()

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            await resp.write(pgn_upto(3).encode())
            while not release.is_set():
                await asyncio.sleep(0.1)
                await resp.write(b"\n")
        return resp

    got: list = []
    async with serving("/stream.pgn", stream) as url:
        follower = Follower([PgnSource(url, timeout=1.0)], got.append, interval=0.01)
        try:
            assert await follower.poll_once() == 0 and got == []
            why = follower.unavailable[url]
            assert why.startswith(f"{url} was still sending after 1 s (") and "a streaming endpoint?" in why
            assert f"follow stream+{url} to read it as a stream" in why and "the round's whole PGN" in why
        finally:
            release.set()
            await follower.sources[0].close()


async def test_a_stream_is_followed_as_its_games_change(monkeypatch):
    """``stream+URL``: a server that sends every game of the round, then a game's whole PGN again at each of its moves,
    and never ends its body (as Lichess's /api/stream/broadcast/round/ID.pgn does). Each ply comes once, with its
    clock, each game ends once; a game's PGN half sent is taken only once whole; a stream that ends is opened again
    and, everything sent again, delivers nothing twice."""
    from streamer import follow

    monkeypatch.setattr(follow, "STREAM_RETRY", 0.05)
    updates: asyncio.Queue[bytes | None] = asyncio.Queue()
    plies = {"a": 2, "b": 1}
    connections = 0

    def game(which: str, k: int) -> bytes:
        return (pgn_upto(k) if which == "a" else pgn_upto(k, white="Other, Player")).encode()

    async def stream(request: web.Request) -> web.StreamResponse:
        nonlocal connections
        connections += 1
        resp = web.StreamResponse()
        await resp.prepare(request)
        for which, k in plies.items():
            await resp.write(game(which, k) + b"\n")
        while (item := await updates.get()) is not None:
            await resp.write(item)
        return resp  # the server ends the stream

    def move(which: str, k: int) -> bytes:
        plies[which] = k
        return game(which, k)

    got: list = []

    async def until(check: Callable[[], bool]) -> None:
        for _ in range(500):
            if check():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"not delivered: {delivered(got)}")

    def plies_of(player: str) -> list[int]:
        ids = {e.game_id for e in got if isinstance(e, GameStarted) and e.white.name == player}
        return [e.ply for e in got if isinstance(e, MoveEvent) and e.game_id in ids]

    async with serving("/round.pgn", stream) as url:
        source = PgnStream(f"stream+{url}")
        follower = Follower([source], got.append, interval=0.01)
        run = asyncio.create_task(follower.run(until_ended=True))
        try:
            await until(lambda: plies_of("Bai, Jinshi") == [0, 1] and plies_of("Other, Player") == [0])
            updates.put_nowait(move("a", 5))
            await until(lambda: plies_of("Bai, Jinshi") == [0, 1, 2, 3, 4])
            half = move("b", 3)
            updates.put_nowait(half[: len(half) // 2])
            await asyncio.sleep(0.3)
            assert plies_of("Other, Player") == [0]  # half a game's PGN: nothing taken from it
            updates.put_nowait(half[len(half) // 2 :])
            await until(lambda: plies_of("Other, Player") == [0, 1, 2])
            updates.put_nowait(None)  # the stream ends: opened again, every game sent again
            await until(lambda: connections == 2)
            updates.put_nowait(move("a", N_PLIES) + move("b", N_PLIES))
            await asyncio.wait_for(run, 10)
        finally:
            updates.put_nowait(None)
            run.cancel()
    assert plies_of("Bai, Jinshi") == plies_of("Other, Player") == list(range(N_PLIES))
    assert [e.plies for e in got if isinstance(e, GameEnded)] == [N_PLIES, N_PLIES]
    first = [e for e in got if isinstance(e, MoveEvent)][0]
    assert first.clock == 180.0 and sum(isinstance(e, GameStarted) for e in got) == 2


async def test_a_stream_that_is_not_pgn_is_unavailable_with_its_reason(monkeypatch):
    """A ``stream+`` URL that answers an HTML page, or ends in the middle of a game's PGN, is unavailable with the
    reason (it was opened again every 2 s without a word), and nothing is taken from it."""
    from streamer import follow

    monkeypatch.setattr(follow, "STREAM_RETRY", 0.05)

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html><body>1. e4 e5 *</body></html>\n\n", content_type="text/html")

    async def cut(request: web.Request) -> web.Response:
        return web.Response(text=pgn_upto(N_PLIES)[:-40])

    for path, handler, why in (("/page.pgn", page, "is markup"), ("/cut.pgn", cut, "in the middle of a game's PGN")):
        async with serving(path, handler) as url:
            got: list = []
            follower = Follower([PgnStream(f"stream+{url}")], got.append, interval=0.01)
            try:
                for _ in range(300):
                    await follower.poll_once()
                    if follower.unavailable:
                        break
                    await asyncio.sleep(0.01)
                assert why in follower.unavailable[f"stream+{url}"] and got == []
            finally:
                await follower.sources[0].close()


async def test_a_stream_that_never_stops_bringing_games_keeps_a_bounded_number(monkeypatch):
    """A stream keeps at most MAX_STREAM_GAMES games (here 3): past it the game updated longest ago is dropped from its
    text (the tracker takes it as over once missing), so a platform's endless stream holds bounded memory."""
    from streamer import follow

    monkeypatch.setattr(follow, "MAX_STREAM_GAMES", 3)
    source = PgnStream("stream+http://127.0.0.1:1/round.pgn")  # nothing listens there: only what is fed below
    try:
        games = [pgn_upto(2, white=f"Board {i}, Player") for i in range(5)] + [pgn_upto(3, white="Board 2, Player")]
        data = "".join(games).encode()
        assert source._take_games(data) == len(data)  # every game whole: all taken
        text = await source.fetch()
        assert text is not None
        names = [e.white.name for e in FeedTracker("r").update(text) if isinstance(e, GameStarted)]
        assert names == ["Board 2, Player", "Board 3, Player", "Board 4, Player"]
    finally:
        await source.close()


async def test_a_url_answering_304_404_500_or_half_written_text_never_loses_a_ply(feed):
    f, url = feed
    got: list = []
    follower = Follower([PgnSource(url)], got.append, interval=0.01)
    f.set(pgn_upto(3))
    await follower.poll_once()
    await follower.poll_once()  # unchanged: a 304, nothing parsed
    assert f.conditional == 1
    f.set(pgn_upto(8))
    f.fail = [404, 500]  # the site hiccups while plies 3..7 exist
    await follower.poll_once()
    await follower.poll_once()
    assert follower.unavailable and [e.ply for e in got if isinstance(e, MoveEvent)] == [0, 1, 2]
    full = pgn_upto(12)
    f.set(full[: full.index("6... c5")])  # half-written upload
    await follower.poll_once()
    f.set(pgn_upto(N_PLIES))
    await follower.poll_once()
    assert not follower.unavailable
    assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(N_PLIES))
    assert isinstance(got[-1], GameEnded)


async def test_an_unreachable_url_is_retried(feed):
    _, url = feed
    dead = url.replace(url.split(":")[2].split("/")[0], "1")  # port 1: connection refused
    follower = Follower([PgnSource(dead, timeout=1)], lambda e: None, interval=0.01)
    assert await follower.poll_once() == 0 and "cannot fetch" in follower.unavailable[dead]
    await asyncio.sleep(0)
    await follower.sources[0].close()


async def test_an_html_page_in_place_of_the_feed_is_unavailable_not_a_game(feed, tmp_path):
    """A wrong URL, or a site's error or login page served with 200: python-chess reads "e4" in its words as a move
    and would start a game of them. It is refused as the feed being unavailable, fetched and refused again at each
    poll (logged once), and the feed is followed once it serves PGN; the same for a file."""
    f, url = feed
    html = "<!DOCTYPE html>\n<html><body><p>Round 1: Game e4 started, see d4 and Nf3</p></body></html>"
    f.set(html)
    got: list = []
    follower = Follower([PgnSource(url)], got.append, interval=0.01)
    for _ in range(3):
        assert await follower.poll_once() == 0
        assert "markup" in follower.unavailable[url] and got == []
    assert f.conditional == 0  # no ETag kept of the page: it is fetched whole again
    f.set(pgn_upto(3))
    await follower.poll_once()
    assert not follower.unavailable and [e.ply for e in got if isinstance(e, MoveEvent)] == [0, 1, 2]
    await follower.sources[0].close()
    path = tmp_path / "round.pgn"
    path.write_text("\ufeff  " + html)
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01)
    assert await follower.poll_once() == 0 and "markup" in follower.unavailable[str(path)]


async def test_a_compressed_or_binary_feed_is_unavailable_until_it_is_pgn(tmp_path):
    """A feed file replaced by a compressed archive or a binary: no game is started of the moves python-chess would
    find in its bytes; the feed is followed once it is PGN again."""
    import gzip

    path = tmp_path / "round.pgn"
    path.write_bytes(gzip.compress(pgn_upto(3).encode()))
    got: list = []
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01)
    assert await follower.poll_once() == 0 and "gzip-compressed" in follower.unavailable[str(path)] and got == []
    path.write_bytes(b"\x00\x01" + pgn_upto(3).encode())
    os.utime(path, ns=(10**9, 10**9))
    assert await follower.poll_once() == 0 and "binary content" in follower.unavailable[str(path)] and got == []
    path.write_text(pgn_upto(3))
    os.utime(path, ns=(2 * 10**9, 2 * 10**9))
    await follower.poll_once()
    assert not follower.unavailable and [e.ply for e in got if isinstance(e, MoveEvent)] == [0, 1, 2]


async def test_an_sgf_record_in_place_of_the_feed_is_unavailable_not_a_game(tmp_path):
    """Go games (SGF) where the PGN feed should be: python-chess read them as one game of "?" against "?" without a
    move, which never ended (``--until-ended`` waited for ever). Now the feed is unavailable, saying so, until it
    serves PGN."""
    path = tmp_path / "round.pgn"
    path.write_text("\ufeff\n (\n;GM[1]FF[4]SZ[19]PB[a]PW[b];B[dd];W[pp])\n")
    got: list = []
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01)
    assert await follower.poll_once() == 0 and "an SGF record (Go games), not PGN" in follower.unavailable[str(path)]
    assert got == []
    path.write_text(pgn_upto(3))
    os.utime(path, ns=(10**9, 10**9))
    await follower.poll_once()
    assert not follower.unavailable and [e.ply for e in got if isinstance(e, MoveEvent)] == [0, 1, 2]


async def test_a_feed_over_the_size_bound_is_unavailable_not_read_into_memory(feed, tmp_path, monkeypatch):
    """A feed is read whole at every change: a file or a URL serving far more than any round (a whole database, a URL
    serving something else, endless) was read into memory whole. Now past MAX_FEED_BYTES (here 4 KB) it is the feed
    being unavailable, a URL's body read no further than the bound, with or without a stated length; a feed back
    under it is followed."""
    from streamer import follow

    monkeypatch.setattr(follow, "MAX_FEED_BYTES", 4096)
    big = pgn_upto(N_PLIES) * 20
    assert len(big.encode()) > 4096 >= len(pgn_upto(3).encode())
    path = tmp_path / "round.pgn"
    path.write_text(big)
    got: list = []
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01)
    assert await follower.poll_once() == 0 and "over the 4096 bytes a feed may be" in follower.unavailable[str(path)]
    path.write_text(pgn_upto(3))
    os.utime(path, ns=(10**9, 10**9))
    await follower.poll_once()
    assert not follower.unavailable and [e.ply for e in got if isinstance(e, MoveEvent)] == [0, 1, 2]
    f, url = feed
    f.set(big)
    follower = Follower([PgnSource(url)], got.append, interval=0.01)
    assert await follower.poll_once() == 0 and "a feed may be" in follower.unavailable[url]
    await follower.sources[0].close()
    sent = 0

    async def endless(request: web.Request) -> web.StreamResponse:  # no length stated, never ends
        nonlocal sent
        resp = web.StreamResponse()
        await resp.prepare(request)
        with contextlib.suppress(ConnectionError):
            while True:
                await resp.write(pgn_upto(3).encode())
                sent += 1
                await asyncio.sleep(0)  # the server shares this event loop: let the client read
        return resp

    async with serving("/endless.pgn", endless) as endless_url:
        follower = Follower([PgnSource(endless_url, timeout=30)], got.append, interval=0.01)
        try:
            assert await follower.poll_once() == 0 and "a feed may be" in follower.unavailable[endless_url]
        finally:
            await follower.sources[0].close()
    assert sent < 1000  # the body was read no further than the bound (a few chunks in flight aside)


def test_an_internal_error_on_one_game_of_a_feed_skips_that_game_only(monkeypatch, caplog):
    """Fault injection: building one game's start raises (as a name that made no valid id once did). The feed's other
    game is followed ply by ply; the error is logged once, not at every poll."""
    original = FeedTracker._started

    def started(self, game_id, pg, corrects=None):
        if pg.headers.get("Round") == "1.8":
            raise RuntimeError("injected")
        return original(self, game_id, pg, corrects)

    monkeypatch.setattr(FeedTracker, "_started", started)
    t = FeedTracker("round1")
    other = pgn_upto(4).replace('Round "1.7"', 'Round "1.8"')
    with caplog.at_level(logging.ERROR, logger="kibitz.follow"):
        got = t.update(other + pgn_upto(3)) + t.update(other + pgn_upto(5))
    assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(5))
    assert [r.message for r in caplog.records].count("internal error following a game of the feed: skipped") == 1
    assert sum(g.over for g in t.games.values()) == 1  # a follow until_ended does not wait for the skipped game


async def test_a_windows_1252_feed_is_read_as_such_and_logged_once(tmp_path, caplog):
    path = tmp_path / "round.pgn"
    path.write_bytes(pgn_upto(3, white="Müller, Jörg").encode("cp1252"))
    got: list = []
    follower = Follower([PgnSource(str(path))], got.append, interval=0.01)
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        await follower.poll_once()
        path.write_bytes(pgn_upto(5, white="Müller, Jörg").encode("cp1252"))
        os.utime(path, ns=(10**9, 10**9))
        await follower.poll_once()
    assert [e.white.name for e in got if isinstance(e, GameStarted)] == ["Müller, Jörg"]
    assert [e.ply for e in got if isinstance(e, MoveEvent)] == list(range(5))
    assert [r.getMessage() for r in caplog.records] == ["feed is not UTF-8: read as cp1252"]


async def test_a_feed_urls_credentials_reach_no_message_and_no_log_line(feed, caplog):
    """A private broadcast's feed URL carries a password or a token: what says the feed is unavailable (the
    follower's state, its log line) names the URL with them as ``***``, and the log formatter cuts them out of every
    line, a library's quoting of the URL included."""
    import logging

    from streamer.follow import shown_url, url_secrets
    from streamer.logs import JsonFormatter

    f, url = feed
    private = url.replace("http://", "http://relay:hunter2@") + "?round=3&api_token=s3cr%2Bt"
    assert shown_url(private) == url.replace("http://", "http://relay:***@") + "?round=3&api_token=***"
    assert url_secrets("stream+" + private) == ["hunter2", "s3cr%2Bt", "s3cr+t"]
    f.fail = [401]
    follower = Follower([PgnSource(private)], lambda e: None, interval=0.01)
    with caplog.at_level(logging.WARNING, logger="kibitz.follow"):
        await follower.poll_once()
    (said,) = follower.unavailable.values()
    assert said == f"{shown_url(private)} answered HTTP 401"
    (line,) = [r for r in caplog.records if r.message == "feed unavailable, retrying"]
    assert "hunter2" not in str(vars(line)) and "s3cr" not in str(vars(line))
    record = logging.makeLogRecord({"msg": "GET %s failed", "args": (private,), "name": "aiohttp.client"})
    written = JsonFormatter(url_secrets(private)).format(record)
    assert "hunter2" not in written and "s3cr" not in written and "api_token=***" in written
    await follower.sources[0].close()
