import logging
from pathlib import Path

from analyzers.errors import IllegalMove, UnsupportedGame
from schemas import GameEnded, GameStarted, MoveEvent
from streamer.follow import parse_feed
from streamer.ingest import DEMO_PGN, TruncatedInput, read_pgn_games, replay_timeline

BAD_PGN = (Path(__file__).parent / "fixtures" / "bad.pgn").read_text()


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


def test_a_chess_variant_is_refused_as_an_unsupported_game_and_the_other_games_are_read(tmp_path):
    """Chess960, Crazyhouse (drops are no UCI move of chess) and Atomic games: each an UnsupportedGame naming its
    variant, with no events; a standard game in the same file is read as usual (this used to stop `kibitz replay` with
    a validation error)."""
    p = tmp_path / "variants.pgn"
    p.write_text(
        '[Event "v"]\n[White "A"]\n[Black "B"]\n[Result "*"]\n[Variant "Crazyhouse"]\n\n1. e4 d5 2. exd5 Qxd5 3. Nc3 Qa5 4. P@d5 *\n\n'
        '[Event "w"]\n[White "C"]\n[Black "D"]\n[Result "*"]\n[Variant "Chess960"]\n[SetUp "1"]\n'
        '[FEN "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9"]\n\n9. g3 Nbc6 10. O-O *\n\n'
        '[Event "x"]\n[White "E"]\n[Black "F"]\n[Result "*"]\n[Variant "Atomic"]\n\n1. e4 d5 2. exd5 *\n\n'
        '[Event "y"]\n[White "G"]\n[Black "H"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n')
    games = list(read_pgn_games(p))
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


def test_placeholder_names_are_never_merged(caplog):
    games = list(read_pgn_games(Path(__file__).parent / "fixtures" / "anonymous.pgn"))
    ids = [p.id for g in games for p in (g.white, g.black)]
    assert len(set(ids)) == 4 and all(i.startswith("anon:") for i in ids)
    assert [g.white.name for g in games] == ["??", "NN"]  # the name shown stays what the file says
    assert sum("placeholder player name" in r.getMessage() for r in caplog.records) == 4
