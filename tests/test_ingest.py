import logging
import re
from pathlib import Path

import pytest
from conftest import pgn_upto
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.errors import IllegalMove, InputError, MalformedEvent, UnsupportedGame
from schemas import GameEnded, GameStarted, MoveEvent
from streamer.follow import STABLE_POLLS, FeedTracker, PgnSource, parse_feed
from streamer.ingest import DEMO_PGN, TruncatedInput, normalize_pgn, not_a_text, read_pgn_games, replay_timeline
from streamer.live import LiveStore

BAD_PGN = (Path(__file__).parent / "fixtures" / "bad.pgn").read_text()
FIXTURES = Path(__file__).parent / "fixtures"
N_BROADCAST = 49  # the broadcast fixture's plies


def test_demo_is_round_one_of_london_2011():
    games = list(read_pgn_games(DEMO_PGN))
    assert len(games) == 4 and all(not g.errors for g in games)
    assert {g.white.id for g in games} | {g.black.id for g in games} >= {"Carlsen,M", "Anand,V", "Kramnik,V"}
    evs = games[0].events()
    assert isinstance(evs[0], GameStarted) and isinstance(evs[-1], GameEnded)
    assert [e.ply for e in evs if isinstance(e, MoveEvent)] == list(range(len(games[0].moves)))


def test_illegal_move_and_truncation_name_game_and_ply(tmp_path):
    p = tmp_path / "bad.pgn"
    p.write_text(BAD_PGN)
    games = list(read_pgn_games(p))
    assert len(games) == 3
    illegal = games[0]
    assert isinstance(illegal.errors[0], IllegalMove) and illegal.errors[0].ply == 2
    assert illegal.moves == ["e2e4", "e7e5"]
    assert not any(isinstance(e, GameEnded) for e in illegal.events())  # an unfinished game is not rated
    assert not games[1].errors and games[1].white.rating == 1800 and games[1].black.rating is None
    assert isinstance(games[2].errors[0], TruncatedInput) and games[2].errors[0].ply == 5
    assert "stops at 'd4'" in str(games[2].errors[0])  # the text's last word, so a user sees where it was cut
    forfeit = tmp_path / "forfeit.pgn"  # a database's forfeit mark where a result belongs: named, not just "truncated"
    forfeit.write_text('[White "A"]\n[Black "B"]\n[Result "+/-"]\n\n1. e4 e5 +/- { forfeit }\n')
    (game,) = read_pgn_games(forfeit)
    assert isinstance(game.errors[0], TruncatedInput) and "stops at '+/-', not at a result" in str(game.errors[0])


def test_a_parse_error_is_reported_by_kibitz_alone(tmp_path, caplog):
    """python-chess logs each parse error itself; kibitz reports it once (as a rejection naming game and ply), so
    reading the PGN logs nothing of python-chess's and keeps the error on the game."""
    p = tmp_path / "bad.pgn"
    p.write_text(BAD_PGN)
    with caplog.at_level(logging.DEBUG):
        games = list(read_pgn_games(p))
        parsed = parse_feed(BAD_PGN)
    assert isinstance(games[0].errors[0], IllegalMove) and parsed[0].error
    assert not [r for r in caplog.records if r.name.startswith("chess")], caplog.text


def test_a_chess_variant_or_a_start_that_does_not_read_is_refused_and_the_other_games_are_read(tmp_path):
    """Chess960, Crazyhouse (drops are no UCI move of chess) and Atomic games: each an UnsupportedGame naming its
    variant, with no events (this used to stop `kibitz replay` with a validation error); a FEN that does not read: an
    IllegalMove, no events; a standard game in the same file is read as usual."""
    p = tmp_path / "variants.pgn"
    p.write_text(
        '[Event "v"]\n[White "A"]\n[Black "B"]\n[Result "*"]\n[Variant "Crazyhouse"]\n\n1. e4 d5 2. exd5 Qxd5 3. Nc3 Qa5 4. P@d5 *\n\n'
        '[Event "w"]\n[White "C"]\n[Black "D"]\n[Result "*"]\n[Variant "Chess960"]\n[SetUp "1"]\n'
        '[FEN "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9"]\n\n9. g3 Nbc6 10. O-O *\n\n'
        '[Event "x"]\n[White "E"]\n[Black "F"]\n[Result "*"]\n[Variant "Atomic"]\n\n1. e4 d5 2. exd5 *\n\n'
        '[Event "y"]\n[White "G"]\n[Black "H"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'
        '[Event "z"]\n[White "I"]\n[Black "J"]\n[Result "*"]\n[SetUp "1"]\n[FEN "garbage"]\n\n*\n')
    games = list(read_pgn_games(p))
    assert [type(e) for e in games[4].errors] == [IllegalMove] and "initial position" in str(games[4].errors[0])
    assert games[4].events() == []  # no start with a position nothing downstream can read
    for g, variant in zip(games, ("Crazyhouse", "Chess960", "Atomic")):
        assert [type(e) for e in g.errors] == [UnsupportedGame] and variant in str(g.errors[0]) and g.events() == []
    assert not games[3].errors and len(games[3].moves) == 7 and isinstance(games[3].events()[-1], GameEnded)


def test_a_null_move_stops_its_game_at_its_ply_and_the_feed_reads_it_the_same_way(tmp_path):
    """python-chess reads "--" as the null move (UCI "0000"), which is no move of chess: an IllegalMove at its ply,
    the moves before it kept (it used to stop `kibitz replay` with a validation error)."""
    text = '[Event "n"]\n[White "A"]\n[Black "B"]\n[Result "*"]\n\n1. e4 -- 2. d4 e5 *\n\n'
    p = tmp_path / "null.pgn"
    p.write_text(text + '[Event "m"]\n[White "C"]\n[Black "D"]\n[Result "*"]\n\n1. d4 *\n')
    games = list(read_pgn_games(p))
    assert games[0].moves == ["e2e4"] and isinstance(games[0].errors[0], IllegalMove) and games[0].errors[0].ply == 1
    assert [e.uci for e in games[0].events() if isinstance(e, MoveEvent)] == ["e2e4"]
    assert games[1].moves == ["d2d4"] and not games[1].errors
    (parsed,) = parse_feed(text)
    assert parsed.moves == ["e2e4"] and "null move" in (parsed.error or "")


def test_a_games_file_is_read_one_game_at_a_time(tmp_path):
    """``kibitz produce`` of a large file (a backfill) held every game, then every event of every game, at once: a
    52 MB file of 77,783 games took 5.5 GB. Games now come one at a time, so a caller that takes each as it comes
    holds the file's text and one game: here 600 games (0.9 MB of PGN) turned into their events peak under 4 times
    the file's size in traced memory (2.5 times; every game held, as before: 10 times)."""
    import tracemalloc

    one = pgn_upto(N_BROADCAST).split("\n\n", 1)[1]  # a game's moves (49 plies, clocks), its result
    text = "".join(f'[Event "e"]\n[White "w{i}"]\n[Black "b{i}"]\n[Result "1-0"]\n\n{one}\n' for i in range(600))
    path = tmp_path / "big.pgn"
    path.write_text(text)
    tracemalloc.start()
    try:
        games = events = 0
        for g in read_pgn_games(path):
            games += 1
            events += len(g.events())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert games == 600 and events == 600 * (N_BROADCAST + 2)
    assert peak < 4 * len(text), (peak, len(text))


def test_timeline_keeps_each_game_in_order():
    games = list(read_pgn_games(DEMO_PGN))
    tl = replay_timeline(games, speed=60)
    per_game = {}
    for te in tl:
        per_game.setdefault(te.event.game_id, []).append(te.event)
    for evs in per_game.values():
        plies = [e.ply for e in evs if isinstance(e, MoveEvent)]
        assert plies == sorted(plies) and isinstance(evs[0], GameStarted) and isinstance(evs[-1], GameEnded)
    assert tl[-1].at > 60  # about a second per ply at x60


def _headers(**tags):
    import chess.pgn

    h = chess.pgn.Headers()
    for k, v in tags.items():
        h[k] = v
    return h


def test_player_id_prefers_the_fide_id_then_the_name():
    from streamer.ingest import player_id_for

    h = _headers(White="Carlsen, Magnus", WhiteFideId="1503014", Black="Anand,V", BlackFideId="")
    assert player_id_for(h, "White", "g1") == "fide:1503014"
    assert player_id_for(h, "Black", "g1") == "Anand,V"
    # the same FIDE id under two spellings of the name is one player
    assert player_id_for(_headers(White="Carlsen,M", WhiteFideId="1503014"), "White", "g2") == "fide:1503014"


def test_names_and_file_names_that_make_no_valid_id_are_made_one(tmp_path):
    """A player's name is their id when there is no FIDE id; a name of 250 characters or with a tab in it is no valid
    id (1-200 characters, no control characters), and GameStarted refused it: `kibitz replay` stopped with a
    ValidationError and rated nothing of the file. The same for a long file name in game ids, in files, feeds and
    SGF records."""
    from streamer.sgf import read_sgf_games

    long_name = "Grandmaster " * 25
    p = tmp_path / ("round-" + "x" * 200 + ".pgn")
    p.write_text(f'[Event "Open\tA {long_name}"]\n[White "{long_name}"]\n[Black "Tab\tName"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n'
                 f'[Event "e"]\n[White "{long_name}2"]\n[Black "C"]\n[Result "1-0"]\n\n1. d4 d5 1-0\n')
    a, b = read_pgn_games(p)
    evs = a.events() + b.events()
    starts = [e for e in evs if isinstance(e, GameStarted)]
    assert len(starts) == 2 and len({s.game_id for s in starts}) == 2 and all(len(s.game_id) <= 200 for s in starts)
    assert len(a.white.id) == 200 and a.white.id != b.white.id and a.white.name == long_name.strip()[:197] + "..."
    assert a.black.id == "Tab Name" and a.white.id == read_pgn_games(p).__next__().white.id  # stable
    assert a.event.startswith("Open A Grandmaster") and len(a.event) == 200  # an event keys state too
    tracker = FeedTracker(p.stem)
    fed = tracker.update(p.read_text())
    assert [(e.white.id, e.event) for e in fed if isinstance(e, GameStarted)] == [(a.white.id, a.event), (b.white.id, b.event)]
    sgf = tmp_path / ("kifu-" + "y" * 220 + ".sgf")
    sgf.write_text(f"(;GM[1]FF[4]SZ[9]KM[7]PB[{long_name}]PW[Tab\tName];B[ee];W[cc])")
    (g,) = read_sgf_games(sgf)
    assert g.error is None and len(g.black.id) == 200 and g.white.id == "Tab Name" and len(g.game_id) <= 200


def test_a_game_of_one_player_on_both_sides_is_refused_in_files_feeds_sgf_and_the_game_step(tmp_path):
    """A player against themselves (one name or one FIDE id on both sides; one game in the 108,444 of the validation
    PGNs): its moves went into one player's game scope twice over and a win against oneself moved the player's
    Glicko-2 rating by +240. Refused once, as an unsupported game; the game beside it is read. Placeholder names
    are different players."""
    from analyzers.profiles import get_profile
    from schemas import PlayerInfo
    from streamer.pipeline import PipelineConfig, start_game
    from streamer.sgf import parse_game

    p = tmp_path / "self.pgn"
    p.write_text('[Event "e"]\n[White "Same"]\n[Black "Same"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n'
                 '[Event "e"]\n[White "A"]\n[WhiteFideId "7"]\n[Black "B"]\n[BlackFideId "7"]\n[Result "*"]\n\n1. d4 *\n\n'
                 '[Event "e"]\n[White "?"]\n[Black "?"]\n[Result "*"]\n\n1. c4 *\n')
    same, fide, anon = read_pgn_games(p)
    for g, who in ((same, "Same"), (fide, "fide:7")):
        assert g.events() == [] and isinstance(g.errors[0], UnsupportedGame) and f"same player ({who})" in str(g.errors[0])
    assert not anon.errors and len(anon.events()) == 2
    errors: list = []
    fed = FeedTracker("f", errors.append).update(p.read_text())
    assert len(errors) == 2 and [e.white.id[:5] for e in fed if isinstance(e, GameStarted)] == ["anon:"]
    g = parse_game(b"(;GM[1]FF[4]SZ[9]PB[x]PW[x];B[ee])", "s.sgf#0")
    assert isinstance(g.error, UnsupportedGame) and "same player (x)" in str(g.error)
    assert parse_game(b"(;GM[1]FF[4]SZ[9];B[ee])", "s.sgf#1").error is None  # unnamed: ids of their own
    start = GameStarted(game_id="g", white=PlayerInfo(id="p"), black=PlayerInfo(id="p"))
    try:
        start_game(None, start, None, PipelineConfig(get_profile("fast")))
    except UnsupportedGame as e:
        assert "a game against oneself is not rated" in str(e) and e.game_id == "g"
    else:
        raise AssertionError("a start with one player on both sides was accepted")


def test_a_windows_1252_file_keeps_its_players_apart_and_a_feed_cut_inside_a_character_waits_for_it(tmp_path, caplog):
    """Older PGN databases and ChessBase exports are Windows-1252: read as UTF-8 with replacement characters, Müller
    and Möller were both "M\ufffdller", one id and one rating. A UTF-8 text with one stray byte stays UTF-8; a feed
    cut inside a UTF-8 character leaves that character for the next poll."""
    from streamer.ingest import decode_pgn

    game = '[Event "e"]\n[White "{w}"]\n[Black "{b}"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n\n'
    p = tmp_path / "old.pgn"
    p.write_bytes((game.format(w="Müller", b="Möller") + game.format(w="Šimek", b="Müller")).encode("cp1252"))
    with caplog.at_level(logging.WARNING, logger="kibitz.ingest"):
        a, b = read_pgn_games(p)
    assert (a.white.id, a.black.id, b.white.id, b.black.id) == ("Müller", "Möller", "Šimek", "Müller")
    assert [r.getMessage() for r in caplog.records] == ["PGN file is not UTF-8: read as cp1252"]
    assert decode_pgn("Müller".encode("latin-1") + bytes([0x81])) == ("Müller\x81", "latin-1")  # 0x81: not cp1252
    assert decode_pgn("Möller ".encode() + b"\xff") == ("Möller \ufffd", "utf-8")
    text = game.format(w="Möller", b="B").encode()
    cut = text[: text.index("ö".encode()) + 1]  # half of the two bytes of "ö"
    assert decode_pgn(cut, partial=True) == ('[Event "e"]\n[White "M', "utf-8")


def test_a_pgn_with_old_mac_line_ends_reads_as_the_same_games(tmp_path):
    """Line ends of a carriage return alone (classic Mac text): python-chess reads lines at LF, so such a file was one
    game of "?" against "?" without a move, and no error. Now a file or a feed reads as the same games as with LF (or
    CRLF, or the three mixed)."""
    text = (FIXTURES / "london_chess_classic_2011.pgn").read_text()
    want = [(g.white.id, g.black.id, list(g.moves)) for g in read_pgn_games(FIXTURES / "london_chess_classic_2011.pgn")]
    lines = text.split("\n")
    mixed = "".join(line + ("\r", "\r\n", "\n")[i % 3] for i, line in enumerate(lines))
    for name, variant in {"cr": text.replace("\n", "\r"), "crlf": text.replace("\n", "\r\n"), "mixed": mixed}.items():
        p = tmp_path / f"{name}.pgn"
        p.write_bytes(variant.encode())
        assert [(g.white.id, g.black.id, list(g.moves)) for g in read_pgn_games(p)] == want, name
    feed = pgn_upto(12)
    lf = [(type(e).__name__, getattr(e, "ply", None)) for e in FeedTracker("r").update(feed)]
    cr = PgnSource("unused")._pgn_text(feed.replace("\n", "\r").encode())
    assert [(type(e).__name__, getattr(e, "ply", None)) for e in FeedTracker("r").update(cr)] == lf and len(lf) == 13


def test_games_joined_without_a_blank_line_keep_their_tags(tmp_path):
    """Files joined with ``cat``, one not ending in a blank line, glue a game's moves to the next game's tags:
    python-chess ends a game's moves only at a blank line, so it read the tags as moves and the next game as "?"
    against "?", with no error. Now each game keeps its tags, in a file and in a feed."""
    text = (FIXTURES / "london_chess_classic_2011.pgn").read_text()
    want = [(g.white.id, g.black.id, list(g.moves)) for g in read_pgn_games(FIXTURES / "london_chess_classic_2011.pgn")]
    glued = re.sub(r"\n\s*\n\[Event ", "\n[Event ", text)
    assert glued.count("\n[Event ") == len(want) - 1 and "\n\n[Event" not in glued
    for line_end in ("\n", "\r\n"):
        p = tmp_path / "glued.pgn"
        p.write_bytes(glued.replace("\n", line_end).encode())
        assert [(g.white.id, g.black.id, list(g.moves)) for g in read_pgn_games(p)] == want, repr(line_end)
    feed = pgn_upto(10).rstrip() + "\n" + pgn_upto(12, white="Other, Player")
    started = [e for e in FeedTracker("r").update(PgnSource("unused")._pgn_text(feed.encode())) if isinstance(e, GameStarted)]
    assert [e.white.name for e in started] == ["Bai, Jinshi", "Other, Player"]
    assert normalize_pgn(text) == text  # a text that needs nothing is left as it is
    # each file with its byte order mark, one after a blank line too many: no game of "?" against "?" between them
    p.write_text("\ufeff" + pgn_upto(10) + "\n\n\ufeff" + pgn_upto(12, white="Other, Player"))
    assert [(g.white.name, len(g.moves)) for g in read_pgn_games(p)] == [("Bai, Jinshi", 10), ("Other, Player", 12)]


def test_figurine_notation_and_a_draw_written_with_halves_read_as_standard_pgn(tmp_path):
    """Figurine notation (♘f3: python-chess skipped the figure, read "f3", and rejected the game at a later move) and
    a draw written "½-½" or "1/2" (not result tokens: the game was taken as cut short, not scored) read as their
    standard spelling."""
    tags, moves = pgn_upto(N_BROADCAST).split("\n\n", 1)
    standard = tags.replace('"1-0"', '"1/2-1/2"') + "\n\n" + moves.replace(" 1-0", " 1/2-1/2")
    figures = dict(zip("KQRBN", "♔♕♖♗♘"))
    fancy = (tags.replace('"1-0"', '"½-½"') + "\n\n"
             + re.sub(r"\b([KQRBN])(?=[a-h1-8x])", lambda m: figures[m.group(1)], moves).replace(" 1-0", " ½-½"))
    assert "♘" in fancy and "½-½" in fancy
    short = tags.replace('"1-0"', '"1/2"') + "\n\n" + moves.replace(" 1-0", " 1/2")
    read = []
    for name, text in (("standard", standard), ("fancy", fancy), ("short", short)):
        p = tmp_path / f"{name}.pgn"
        p.write_text(text)
        (g,) = read_pgn_games(p)
        read.append((g.result, g.moves, [str(e) for e in g.errors]))
    assert read[2] == read[1] == read[0] and read[0][0] == "1/2-1/2" and len(read[0][1]) == N_BROADCAST and read[0][2] == []


def test_utf16_is_read_and_compressed_or_binary_bytes_are_not_a_pgn_text(tmp_path):
    """A binary file read as PGN started a game of "?" against "?" from the moves python-chess found in its strings, and
    a .pgn.gz one of garbage; a Windows "Unicode" (UTF-16) export was such garbage too. Now UTF-16 with its byte order
    mark reads as the same games as UTF-8, and compressed or binary bytes raise MalformedEvent naming the file."""
    import gzip

    from streamer.ingest import decode_pgn

    text = (FIXTURES / "london_chess_classic_2011.pgn").read_text()
    want = [(g.white.id, g.black.id, list(g.moves)) for g in read_pgn_games(FIXTURES / "london_chess_classic_2011.pgn")]
    for codec in ("utf-16", "utf-16-be"):
        p = tmp_path / f"{codec}.pgn"
        p.write_bytes((("\ufeff" if codec.endswith("be") else "") + text).encode(codec))
        assert [(g.white.id, g.black.id, list(g.moves)) for g in read_pgn_games(p)] == want, codec
    raw = text.encode("utf-16")
    assert decode_pgn(raw[:101], partial=True)[0] == text[:49]  # a feed cut inside a character waits for it
    assert not_a_text(text.encode()) is None and not_a_text(raw) is None
    cases = {"gz": (gzip.compress(text.encode()), "gzip-compressed: decompress it first"),
             "zst": (bytes.fromhex("28b52ffd") + b"rest", "zstd-compressed"),
             "bin": (b"\x7fELF\x02\x01\x01\x00" + b"1. e4 e5 " * 50, "binary content")}
    for name, (data, why) in cases.items():
        assert why in (not_a_text(data) or ""), name
        p = tmp_path / f"x.{name}"
        p.write_bytes(data)
        with pytest.raises(MalformedEvent, match=f"x.{name}: not a PGN text: {why}"):
            list(read_pgn_games(p))


def test_a_game_past_the_ply_bound_keeps_its_first_plies_in_files_feeds_and_sgf(tmp_path, monkeypatch):
    """A PGN game of 2,004 plies (knights shuffled back and forth): the ply past schemas.MAX_PLIES failed MoveEvent's
    validation and `kibitz replay` stopped, rating nothing of the file. Now the first 2,000 plies are rated, the rest
    refused as unsupported (one error), no end sent; the game after it is read."""
    from schemas import MAX_PLIES
    from streamer import goreplay
    from streamer.sgf import parse_game

    shuffle = " ".join(f"{i + 1}. Nf3 Nf6 {i + 2}. Ng1 Ng8" for i in range(0, 1002, 2))
    p = tmp_path / "long.pgn"
    p.write_text(f'[Event "e"]\n[White "A"]\n[Black "B"]\n[Result "1/2-1/2"]\n\n{shuffle} 1/2-1/2\n\n'
                 '[Event "e"]\n[White "C"]\n[Black "D"]\n[Result "1-0"]\n\n1. e4 e5 1-0\n')
    long, short = read_pgn_games(p)
    evs = long.events()
    assert len(long.moves) == MAX_PLIES == 2000 and [e.ply for e in evs if isinstance(e, MoveEvent)][-1] == MAX_PLIES - 1
    assert [(type(e), e.ply) for e in long.errors] == [(UnsupportedGame, MAX_PLIES)] and not isinstance(evs[-1], GameEnded)
    assert isinstance(short.events()[-1], GameEnded)
    errors: list = []
    fed = FeedTracker("f", errors.append).update(p.read_text())
    assert [type(e) for e in errors] == [UnsupportedGame] and "longer than 2000 plies" in str(errors[0])
    assert sum(isinstance(e, MoveEvent) for e in fed) == MAX_PLIES + 2
    monkeypatch.setattr(goreplay, "MAX_PLIES", 3)
    events, error = goreplay.game_events(parse_game(b"(;GM[1]FF[4]SZ[9]KM[7];B[ee];W[cc];B[gg];W[cg];B[gc])", "g.sgf#0"))
    assert isinstance(error, UnsupportedGame) and error.ply == 3 and sum(isinstance(e, MoveEvent) for e in events) == 3


def test_placeholder_names_are_never_merged(caplog):
    games = list(read_pgn_games(Path(__file__).parent / "fixtures" / "anonymous.pgn"))
    ids = [p.id for g in games for p in (g.white, g.black)]
    assert len(set(ids)) == 4 and all(i.startswith("anon:") for i in ids)
    assert [g.white.name for g in games] == ["??", "NN"]  # the name shown stays what the file says
    assert sum("placeholder player name" in r.getMessage() for r in caplog.records) == 4


def test_a_parenthesis_that_closes_no_variation_is_skipped(tmp_path):
    """After an illegal move python-chess pops the main line itself at an unmatched ")" and fails with an IndexError at
    the game's next comment or annotation, which stopped reading the file; kibitz skips the ")", so the game is
    rejected at its illegal move and the next game is read."""
    p = tmp_path / "paren.pgn"
    p.write_text('[Event "p"]\n[White "A"]\n[Black "B"]\n[Result "*"]\n\n1. e5 ) { [%clk 0:03:00] } ? *\n\n'
                 '[Event "q"]\n[White "C"]\n[Black "D"]\n[Result "*"]\n\n1. e4 e5 *\n')
    bad, good = read_pgn_games(p)
    assert bad.moves == [] and isinstance(bad.errors[0], IllegalMove) and bad.errors[0].ply == 0
    assert good.moves == ["e2e4", "e7e5"] and not good.errors


#: Pieces of PGN text, well-formed and not, that the property test below strings together.
PGN_PIECES = ['[Event "e"]\n', '[White "A"]\n', '[Black "B"]\n', '[Result "*"]\n', '[Result "1-0"]\n',
              '[Variant "Chess960"]\n', '[Variant "Crazyhouse"]\n', '[Variant "nonsense"]\n', '[SetUp "1"]\n',
              '[FEN "8/8/8/8/8/8/8/8 w - - 0 1"]\n', '[FEN "4k3/8/8/8/8/8/8/4K2R w K - 0 1"]\n', '[FEN "garbage"]\n',
              '[WhiteElo "abc"]\n', '[WhiteElo "99999"]\n', '[TimeControl "x"]\n', '\n', ' ', '1. ', 'e4 ', 'e5 ', 'Nf3 ',
              'O-O ', 'O-O-O ', '0-0 ', '-- ', 'P@e4 ', 'Z0 ', 'e8=Q ', 'exd5 ', 'Kxe8 ', '{ [%clk 0:03:00] } ',
              '{ [%clk 99:99:99] } ', '{ [%clk 0:00:00.5] } ', '{', '}', '(', ')', '$1 ', '?', ';c\n', '1-0', '0-1',
              '1/2-1/2', '*', '%escape\n', '\x00', '\ufeff', '[', ']', '"', '[White "' + "W" * 250 + '"]\n',
              '[Black "a\tb\x01"]\n', '[Event "x\ty"]\n']


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(PGN_PIECES) | st.text(max_size=3), max_size=60))
def test_any_pgn_text_reads_into_well_formed_events_or_typed_errors(tmp_path_factory, pieces):
    """Property: whatever the text (6,000 random examples passed; this runs 150 derandomized), reading it as a file
    and following it as a feed, polled whole and cut, into the overlay's store raise nothing (python-chess's own
    IndexError, a null move's or a drop's ValidationError and a bad FEN in the store once did); every game's events
    are a start, its plies 0, 1, ... and at most one end; every error is a typed InputError."""
    text = "".join(pieces)
    p = tmp_path_factory.mktemp("pgn") / "x.pgn"
    p.write_text(text, encoding="utf-8", errors="replace")
    try:
        games = list(read_pgn_games(p))
    except MalformedEvent as e:  # bytes that are not a text: the file is refused whole
        assert not_a_text(p.read_bytes()) and "not a PGN text" in str(e)
        games = []
    for g in games:
        evs = g.events()
        assert all(isinstance(e, InputError) for e in g.errors)
        if evs:
            assert isinstance(evs[0], GameStarted)
            assert [e.ply for e in evs if isinstance(e, MoveEvent)] == list(range(len(g.moves)))
            assert [isinstance(e, GameEnded) for e in evs[1:]].count(True) <= 1
    errors: list = []
    t = FeedTracker("f", errors.append)
    got = [e for i in range(0, len(text) + 1, max(1, len(text) // 7)) for e in t.update(text[:i])]
    got += t.update(text) + [e for _ in range(STABLE_POLLS) for e in t.update(None)]
    assert all(isinstance(e, InputError) for e in errors)
    store = LiveStore()  # what the overlay shows of them: built from every event, raising nothing
    for e in got:
        store.apply(e)
    plies: dict[str, list[int]] = {}
    for e in got:
        if isinstance(e, MoveEvent):
            plies.setdefault(e.game_id, []).append(e.ply)
    assert all(ps == list(range(len(ps))) for ps in plies.values())


def test_a_file_passes_its_time_control_as_a_feed_does(tmp_path):
    """A file's game start carried no TimeControl, a feed's did: the same PGN without clocks was classical through
    ``follow`` and of unknown class through ``replay`` and ``produce``."""
    text = '[Event "e"]\n[White "a"]\n[Black "b"]\n[Result "*"]\n[TimeControl "40/5400+30:1800+30"]\n\n1. e4 e5 *\n'
    path = tmp_path / "g.pgn"
    path.write_text(text)
    (start, *_), = [g.events() for g in read_pgn_games(path)]
    fed = [e for e in FeedTracker("g").update(text) if isinstance(e, GameStarted)]
    assert start.time_control == fed[0].time_control == "40/5400+30:1800+30"


def test_a_comment_outside_any_game_is_no_game(tmp_path):
    """Some exports and relays write a comment before the first tag pair ("{ Generated by ... }") or after the last
    game: python-chess reads it as a game without tags or moves, which was rated as "?" against "?" and, in a followed
    feed, never ended (``--until-ended`` waited for ever). Files and feeds now read the same games as without it,
    under the same ids; a tagless game that has moves, or an error, is still a game."""
    plain = pgn_upto(N_BROADCAST)
    commented = "{ Generated by relay 1.2 }\n\n" + plain + "\n{ end of round }\n"
    for name, text in (("a", plain), ("b", commented)):
        (tmp_path / f"{name}.pgn").write_text(text)
    files = [[(g.game_id.split(":", 1)[1], g.white.name, len(g.moves), [str(e) for e in g.errors])
              for g in read_pgn_games(tmp_path / f"{name}.pgn")] for name in ("a", "b")]
    assert files[0] == files[1] and len(files[1]) == 1
    feeds = [[(type(e).__name__, getattr(e, "ply", None)) for e in FeedTracker("r").update(text)]
             for text in (plain, commented)]
    assert feeds[0] == feeds[1] and feeds[1][-1] == ("GameEnded", None)
    (tmp_path / "c.pgn").write_text("1. e4 e5 *\n\n1. Ke3 *\n")  # movetext without tags; an illegal first move
    kept = list(read_pgn_games(tmp_path / "c.pgn"))
    assert [len(g.moves) for g in kept] == [2, 0] and kept[1].errors
