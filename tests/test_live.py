"""The overlay's store (streamer.live): what it keeps of a stream that runs for weeks is bounded, and what it drops
first is what a viewer misses least."""

from __future__ import annotations

from schemas import GameEnded, GameStarted, MoveEvent, PerceivedRating, PlayerInfo
from streamer import live
from streamer.live import LiveStore


def start(gid: str, white: str, black: str) -> GameStarted:
    return GameStarted(game_id=gid, white=PlayerInfo(id=white, name=white.upper(), rating=2000),
                       black=PlayerInfo(id=black, name=black.upper()), event="e")


def player_rating(pid: str, rating: float) -> PerceivedRating:
    return PerceivedRating(player_id=pid, scope="player", scope_id=pid, game_id="g0", ply=0, rating=rating,
                           low=rating - 300, high=rating + 300, method="model", moves=10, gain_moves=10, profile="fast",
                           provisional=False)


def test_players_kept_are_bounded_and_a_player_of_a_kept_game_is_still_shown():
    store = LiveStore(max_games=2, max_players=3)
    store.apply(start("g0", "a", "b"))
    store.apply(player_rating("a", 1900))
    for i in range(1, 4):  # six more players: a and b are the least recently updated
        store.apply(start(f"g{i}", f"w{i}", f"b{i}"))
    assert len(store._players) == 3
    assert store.player("a") is None  # dropped, and its game too (two games kept)
    assert store.player("w3")["games"] == ["g3"] and store.player("w3")["name"] == "W3"
    # a player dropped from the players kept while a game of theirs is kept: shown from the game's start
    store = LiveStore(max_games=10, max_players=2)
    store.apply(start("g0", "a", "b"))
    store.apply(start("g1", "c", "d"))
    assert "a" not in store._players
    assert store.player("a") == {"id": "a", "name": "A", "declared": 2000, "games": ["g0"]}
    store.apply(player_rating("a", 1900))  # a rating brings the player back, the least recently updated goes
    assert store.player("a")["player"]["rating"] == 1900 and "c" not in store._players


def test_games_kept_are_bounded_and_finished_ones_go_first():
    store = LiveStore(max_games=2)
    store.apply(start("g0", "a", "b"))
    store.apply(start("g1", "c", "d"))
    store.apply(GameEnded(game_id="g1", result="1-0", plies=0))
    store.apply(start("g2", "e", "f"))
    assert {g["game_id"] for g in store.games()} == {"g0", "g2"}
    store.apply(start("g3", "g", "h"))  # none finished: the oldest goes
    assert {g["game_id"] for g in store.games()} == {"g2", "g3"}


def test_messages_of_games_not_started_are_held_within_bounds(monkeypatch):
    monkeypatch.setattr(live, "MAX_EARLY_GAMES", 2)
    monkeypatch.setattr(live, "MAX_EARLY_MESSAGES", 3)
    store = LiveStore()
    for gid in ("x", "y", "z"):
        for ply in range(5):
            store.apply(MoveEvent(game_id=gid, ply=ply, uci="e2e4" if ply == 0 else "e7e5"))
    assert list(store._early) == ["y", "z"] and all(len(v) == 3 for v in store._early.values())
    store.apply(start("z", "a", "b"))  # the held messages are applied once the game starts: 1. e4 e5 (the third is illegal)
    assert store.game("z")["moves"] == 2 and "z" not in store._early


def test_go_games_are_not_drawn_as_chess():
    """The overlay draws chess boards: a Go game's start, moves, ratings (GoR, not Elo) and end are left out, even
    when a message overtakes its start; a chess game beside it is shown."""
    store = LiveStore()
    go_rating = player_rating("a", 2400).model_copy(update={"game": "go", "scope": "game", "game_id": "go1"})
    store.apply(go_rating)  # before its start: held, then dropped with the start
    store.apply(GameStarted(game="go", game_id="go1", white=PlayerInfo(id="a", name="A"), black=PlayerInfo(id="b", name="B"),
                            board_size=19, komi=6.5))
    store.apply(MoveEvent(game="go", game_id="go1", ply=0, uci="D4"))
    store.apply(player_rating("a", 2400).model_copy(update={"game": "go"}))
    store.apply(GameEnded(game_id="go1", result="1-0", plies=1))
    store.apply(start("c1", "a", "d"))
    assert [g["game_id"] for g in store.games()] == ["c1"] and store._early == {}
    assert "player" not in store.player("a")  # the Go player-scope rating is not shown as a chess one


def test_the_last_move_is_numbered_as_its_position_counts():
    """A game set up from a FEN at move 30 with Black to move: its first move is "30... Kf8" (numbered from the
    game's first ply, it was "1. Kf8", and a Black move shown as White's number)."""
    store = LiveStore()
    store.apply(GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"),
                            initial_fen="4k3/8/8/8/8/8/4P3/4K3 b - - 0 30"))
    store.apply(MoveEvent(game_id="g", ply=0, uci="e8f8"))
    assert store.game("g")["last_move"] == {"ply": 0, "number": 30, "uci": "e8f8", "san": "Kf8", "color": "black"}
    store.apply(MoveEvent(game_id="g", ply=1, uci="e2e4"))
    assert store.game("g")["last_move"]["number"] == 31



def test_the_replay_view_numbers_moves_as_the_position_counts():
    """The replay's live table shows a board's last move as the overlay does: "30...Kf8" for a game set up from a
    FEN at move 30 (it showed "1...Kf8")."""
    from rich.console import Console

    from schemas import Candidate, MoveAssessment
    from streamer.ui import ReplayView

    view = ReplayView(Console(file=None, quiet=True), 2, live=False)
    view.started(GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"),
                             initial_fen="4k3/8/8/8/8/8/4P3/4K3 b - - 0 30"))
    view.publish(MoveAssessment(game_id="g", ply=0, player_id="b", color="black", uci="e8f8", eval_before=300,
                                eval_after=300, gain=0, candidates=[Candidate(uci="e8f8", cp=-300), Candidate(uci="e8d8", cp=-300)],
                                played_rank=0, counted=False, engine="stockfish", limits="depth=8", time_class="unknown"))
    assert view.boards["g"].last == "30...Kf8"


def test_the_clock_of_the_side_to_move_runs_from_its_last_move_until_the_game_ends():
    """A snapshot names the clock that runs (the side to move's, once that side's time left is known), how far it has
    run since the last move and how fast: the overlay counts it down between moves. A paced replay's clock runs at its
    speed, one at full speed not at all; a game over (a result, or mate on the board) stops it, and so does a game that
    left its feed without one until its next move; a move held until its game starts keeps the time it came."""
    import time

    store = LiveStore()
    store.apply(start("g", "a", "b"))
    store.apply(MoveEvent(game_id="g", ply=0, uci="e2e4", clock=290.0), at=1000.0)
    g = store._games["g"]
    assert store.running_clock(g, now=1005.0) == (None, 0.0)  # Black to move, Black's time left not known yet
    store.apply(MoveEvent(game_id="g", ply=1, uci="e7e5", clock=295.0), at=1010.0)
    assert store.running_clock(g, now=1012.5) == ("white", 2.5)
    assert store.running_clock(g, now=2000.0) == ("white", 290.0)  # never past the time left
    snap = store.game("g")
    assert snap["clock_runs"] == "white" and snap["clock_rate"] == 1.0
    assert abs(snap["clock_elapsed"] - min(time.time() - 1010.0, 290.0)) < 1.0
    store.pause("g")  # the game left its feed without a result: its clock stops
    assert store.running_clock(g, now=1012.5) == (None, 0.0)
    store.apply(MoveEvent(game_id="g", ply=2, uci="g1f3", clock=288.0), at=1020.0)  # it came back: Black's runs
    assert store.running_clock(g, now=1021.0) == ("black", 1.0)
    store.apply(GameEnded(game_id="g", result="1-0"))
    assert store.game("g")["clock_runs"] is None and store.game("g")["clock_rate"] is None

    paced, still = LiveStore(clock_rate=60.0), LiveStore(clock_rate=None)
    for s in (paced, still):
        s.apply(MoveEvent(game_id="h", ply=0, uci="f2f3", clock=60.0), at=100.0)  # before its start: held
        s.apply(start("h", "a", "b"))
        for ply, (uci, clock) in enumerate([("e7e5", 58.0), ("g2g4", 55.0)], start=1):
            s.apply(MoveEvent(game_id="h", ply=ply, uci=uci, clock=clock), at=100.0 + ply)
    assert paced.running_clock(paced._games["h"], now=102.5) == ("black", 30.0)  # half a second at x60
    assert still.running_clock(still._games["h"], now=102.5) == (None, 0.0)
    assert paced._games["h"].moved_at == 102.0
    paced.apply(MoveEvent(game_id="h", ply=3, uci="d8h4", clock=57.0), at=103.0)  # mate: nobody's clock runs
    assert paced.running_clock(paced._games["h"], now=104.0) == (None, 0.0)


def test_an_overlay_of_a_corrected_game_goes_on_showing_it_under_its_new_id():
    """A feed's operator corrects a wrongly entered move: the tracker restarts the game under ``<id>~2`` (its start
    names the game it corrects). The overlay a streamer opened on the old id follows the game: the old id's snapshot
    and subscription are the new game's, the list shows it once, and the old game's late ratings are not shown; a
    second correction moves both ids on."""
    from conftest import pgn_upto

    from streamer.follow import FeedTracker

    t, store = FeedTracker("round1"), LiveStore()
    for ev in t.update(pgn_upto(6)):
        store.apply(ev)
    gid = store.games()[0]["game_id"]
    watching = store.subscribe(gid)
    for ev in t.update(pgn_upto(6).replace("3. g3", "3. e3")):
        store.apply(ev)
    snap = store.game(gid)
    assert snap is not None and snap["game_id"] == f"{gid}~2" and snap["moves"] == 6 and snap["last_move"]["san"] == "Bg7"
    assert store._games[f"{gid}~2"].board.move_stack[4].uci() == "e2e3"  # the corrected move
    assert [g["game_id"] for g in store.games()] == [f"{gid}~2"]
    assert watching.get_nowait()["game_id"] == f"{gid}~2"  # the viewer of the old id was moved over at once
    store.apply(PerceivedRating(player_id="late", scope="game", scope_id=gid, game_id=gid, ply=3, rating=1500, low=1000,
                                high=2000, method="model", moves=1, gain_moves=1, profile="fast", provisional=False))
    assert gid not in store._early  # a late rating of the old game is dropped, not held
    for ev in t.update(pgn_upto(6).replace("3. g3", "3. e3").replace("2. Nf3", "2. c4")):
        store.apply(ev)
    assert store.game(gid)["game_id"] == store.game(f"{gid}~2")["game_id"] == f"{gid}~3"
    assert watching.get_nowait()["game_id"] == f"{gid}~3"
    store.unsubscribe(gid, watching)
    assert not store._subscribers
