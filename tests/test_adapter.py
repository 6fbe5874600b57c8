"""The game adapter: chess and Go answer the same questions (start, play, side to move, store and restore), and the
game step handles positions only through it."""

import json

import chess
import pytest

from analyzers.engine.adapter import CHESS, GAMES, GO
from analyzers.errors import IllegalMove
from analyzers.profiles import get_profile
from schemas import GameStarted, MoveEvent, PlayerInfo
from streamer.pipeline import GameState, PipelineConfig, apply_move, start_game

GAMES_AND_MOVES = [(CHESS, None, ["e2e4", "e7e5", "g1f3"]), (GO, "19 6.5", ["Q16", "D4", "pass"])]


@pytest.mark.parametrize(("game", "setup", "moves"), GAMES_AND_MOVES, ids=["chess", "go"])
def test_play_alternates_sides_and_a_snapshot_restores_the_position(game, setup, moves):
    pos = game.start(setup)
    assert game.mover(pos) == 0  # the first player: White in chess, Black in Go
    for i, m in enumerate(moves):
        game.play(pos, m)
        assert game.mover(pos) == (i + 1) % 2
    again = game.restore(game.snapshot(pos))
    assert game.key(again) == game.key(pos)
    assert game.mover(again) == game.mover(pos)
    assert GAMES[game.name] is game


@pytest.mark.parametrize(("game", "setup", "illegal"),
                         [(CHESS, None, "e2e5"), (CHESS, None, "xyz"), (GO, "19 7.5", "Z99"), (GO, "9 7", "J10")],
                         ids=["chess-illegal", "chess-not-uci", "go-off-board", "go-off-small-board"])
def test_an_illegal_move_is_a_typed_error_and_leaves_the_position(game, setup, illegal):
    pos = game.start(setup)
    key = game.key(pos)
    with pytest.raises(IllegalMove):
        game.play(pos, illegal)
    assert game.key(pos) == key


def test_a_copy_is_independent():
    for game, setup, moves in GAMES_AND_MOVES:
        pos = game.start(setup)
        other = game.copy(pos)
        game.play(other, moves[0])
        assert game.key(pos) != game.key(other)


def test_invalid_setups_are_illegal_moves():
    with pytest.raises(IllegalMove, match="invalid initial position"):
        CHESS.start("not a fen")
    with pytest.raises(IllegalMove, match="not a Go position"):
        GO.start("21 7.5")  # a size kibitz does not rate


@pytest.mark.parametrize("fen,why", [
    ("4k3/8/8/8/8/8/8/R7 w - - 0 1", "no white king"),  # Stockfish crashes (signal 11) on it
    ("4k3/8/8/8/8/8/8/K3k3 w - - 0 1", "more than one king"),
    ("PPPPkPPP/8/8/8/8/8/8/4K3 w - - 0 1", "a pawn on the first or last rank"),
    ("4k3/8/8/8/8/8/8/4K2r b - - 0 1", "the side not to move is in check"),
    ("8/8/8/8/8/8/8/8 w - - 0 1", "an empty board"),
])
def test_a_fen_that_is_no_position_of_chess_is_an_invalid_setup(fen, why):
    with pytest.raises(IllegalMove, match=why):
        CHESS.start(fen)


def test_odd_castling_rights_or_en_passant_squares_are_not_refused():
    """Castling rights or an en-passant square the position does not allow: python-chess and the engine ignore them."""
    board = CHESS.start("4k3/8/8/8/8/8/8/4K3 w KQkq e6 0 1")
    assert not list(board.generate_castling_moves()) and not board.has_legal_en_passant()


def test_chess_side_override_must_be_the_side_to_move():
    board = CHESS.start()
    with pytest.raises(IllegalMove, match="White is to move"):
        CHESS.play(board, "e7e5", 1)
    CHESS.play(board, "e2e4", 0)
    assert board.fullmove_number == 1 and board.turn == chess.BLACK


def test_go_side_override_lets_a_record_move_one_side_twice():
    pos = GO.start("19 7.5")
    GO.play(pos, "Q16", 0)
    GO.play(pos, "D4", 0)  # a pass left out of the record
    assert GO.mover(pos) == 1
    assert GO.restore(GO.snapshot(pos)).moves == [("b", "Q16"), ("b", "D4")]


def test_chess_recapture_facts():
    board = chess.Board()
    for m in ("e2e4", "d7d5", "e4d5"):
        board.push_uci(m)
    on = CHESS.last_capture(board)
    assert on == chess.D5
    assert CHESS.retakes(board, "d8d5", on)
    assert not CHESS.retakes(board, "g8f6", on)
    board.push_uci("g8f6")
    assert CHESS.last_capture(board) is None


def test_game_state_stores_the_position_and_reads_states_stored_with_a_fen():
    config = PipelineConfig(get_profile("fast"))
    w, b = PlayerInfo(id="w"), PlayerInfo(id="b")
    state = start_game(None, GameStarted(game_id="g", white=w, black=b), None, config)
    for ply, uci in enumerate(["e2e4", "c7c5", "g1f3"]):
        state = apply_move(state, MoveEvent(game_id="g", ply=ply, uci=uci)).state
    d = json.loads(json.dumps(state.to_dict()))
    assert "game" not in d  # chess states keep their form
    fen = state.position().fen()
    assert GameState.from_dict(d).position().fen() == fen
    legacy = {k: v for k, v in d.items() if k != "position"} | {"fen": fen}
    assert GameState.from_dict(legacy).position().fen() == fen
    replayed = {k: v for k, v in d.items() if k != "position"}  # no stored position: the moves are replayed
    assert GameState.from_dict(replayed).position().fen() == fen
    applied = apply_move(GameState.from_dict(d), MoveEvent(game_id="g", ply=3, uci="d7d6"))
    assert applied.side == 1 and not applied.white_moved
    with pytest.raises(IllegalMove) as e:
        apply_move(applied.state, MoveEvent(game_id="g", ply=4, uci="e1e3"))
    assert e.value.game_id == "g" and e.value.ply == 4
