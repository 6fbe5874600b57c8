"""Go: the position (captures, ko, suicide, passes), SGF records with their errors, GNU Go through the engine pool
(real engine; a fake GTP engine only to inject faults), the skill model, and `kibitz replay FILE.sgf` end to end."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.calibration import load_calibration
from analyzers.engine.adapter import GO
from analyzers.engine.gtp import GoLimits, parse_values
from analyzers.engine.pool import EnginePool
from analyzers.errors import EngineCrashed, EngineTimeout, IllegalMove, InputError, LimitsMismatch, MalformedRecord, UnsupportedGame
from analyzers.goboard import GoPosition, from_gtp, to_gtp
from analyzers.gorank import parse_rank, rank_label
from analyzers.gorate import GNUGO_PROFILE, GoSkill, RankModel, go_gain, load_go_calibration
from analyzers.profiles import get_profile
from schemas import GameEnded, GameStarted, MoveEvent, PlayerInfo
from streamer.goassess import assess_go_game
from streamer.goreplay import game_events
from streamer.pipeline import PipelineConfig, apply_move, start_game
from streamer.sgf import parse_game, read_sgf_games

FIXTURES = Path(__file__).parent / "fixtures"
FOX = FIXTURES / "fox_5d_testing.sgf"
FAKE_GTP = str(FIXTURES / "fake_gtp.py")


def gnugo() -> str:
    path = shutil.which("gnugo") or shutil.which("gnugo", path="/usr/games")
    if path is None:
        pytest.fail("GNU Go is not installed: run `make setup` (apt-get install gnugo)")
    return path


# -- position ---------------------------------------------------------------------------------------------
def test_gtp_coordinates_skip_i():
    assert to_gtp((3, 3)) == "D4" and to_gtp((15, 15)) == "Q16" and to_gtp((0, 8)) == "J1" and to_gtp(None) == "pass"
    assert from_gtp("q16", 19) == (15, 15) and from_gtp("PASS", 19) is None
    for bad in ("I5", "A20", "Z1", "D0", "44"):
        with pytest.raises(ValueError):
            from_gtp(bad, 19)


def test_ko_and_captures():
    pos = GoPosition(size=9)
    # Black: D5 E4 E6 (around E5), White: F5 E4? Build the classic ko: B at D5 E6 E4, W at F6 F4 G5, then W E5, B F5
    for colour, m in [("b", "D5"), ("w", "F6"), ("b", "E6"), ("w", "F4"), ("b", "E4"), ("w", "G5"), ("b", "A9"),
                      ("w", "E5"), ("b", "F5")]:
        pos.play(m, colour=colour)
    assert pos.captures["b"] == 1 and pos.board.get(4, 4) is None  # E5 taken
    assert pos.ko == (4, 4) and pos.to_move == "w"
    with pytest.raises(IllegalMove, match="ko"):
        pos.play("E5")
    pos.play("A1")  # a ko threat elsewhere
    pos.play("A2")
    pos.play("E5")  # now White may retake
    assert pos.captures["w"] == 1 and pos.board.get(4, 5) is None


def test_suicide_and_occupied_are_illegal_and_leave_the_position():
    pos = GoPosition(size=9)
    for colour, m in [("b", "A2"), ("b", "B1")]:
        pos.play(m, colour=colour)
    key = pos.key()
    with pytest.raises(IllegalMove, match="suicide"):
        pos.play("A1", colour="w")
    with pytest.raises(IllegalMove, match="occupied"):
        pos.play("A2", colour="w")
    assert pos.key() == key and pos.to_move == "w" and not pos.is_legal("A1") and pos.is_legal("A3")
    pos.play("pass")
    pos.play("pass")
    assert pos.over


def test_unsupported_size():
    with pytest.raises(ValueError, match="size"):
        GoPosition(size=7)


# -- ranks and the skill model -------------------------------------------------------------------------
def test_rank_scale_round_trips():
    assert parse_rank("1d") == 2100 and parse_rank("1k") == 2000 and parse_rank("9段") == 2900
    assert parse_rank("18级") == 300 and parse_rank("3k?") == 1800 and parse_rank("P9段") > parse_rank("9d")
    for text in ("5k", "1k", "1d", "4d", "9d", "20k"):
        assert rank_label(parse_rank(text)) == text
    with pytest.raises(ValueError):
        parse_rank("10d")


def test_skill_posterior_prefers_the_player_who_loses_fewer_points():
    strong, weak = GoSkill(), GoSkill()
    values = [20.0, 15.0, 12.0, 8.0, 3.0, 0.0]
    for i in range(60):
        strong.add(values, 0 if i % 4 else 1)
        weak.add(values, 3 + i % 3)
    assert strong.posterior.mean > weak.posterior.mean + 0.5
    assert go_gain(values, 3) == -12 and strong.gains.count == 60


def test_rank_model_starts_at_the_population_and_narrows_towards_its_floor():
    cal = load_go_calibration(GNUGO_PROFILE)
    model = RankModel.of(cal)
    none = GoSkill().estimate(cal)
    assert abs(none.rating - model.prior_mean) < 1 and none.n == 0  # no move: the population prior
    strong, weak = GoSkill(), GoSkill()
    values = [20.0, 15.0, 12.0, 8.0, 3.0, 0.0]
    widths = []
    for i in range(400):
        strong.add(values, 0)
        weak.add(values, 5)
        if i + 1 in (10, 100, 400):
            e = strong.estimate(cal)
            widths.append(e.high - e.low)
    assert widths[0] > widths[1] > widths[2] > 0
    assert strong.estimate(cal).rating > model.prior_mean > weak.estimate(cal).rating
    assert all(0 < x.estimate(cal).low < x.estimate(cal).high < 3600 for x in (strong, weak))


# -- SGF records -----------------------------------------------------------------------------------------
def test_an_sgf_collection_whose_games_run_together_gives_every_game(tmp_path):
    """SGF lets a collection's game trees follow each other with nothing between ("(;...)(;...)", as files joined with
    ``cat`` give): only the first was read, the others lost without a word. Each is a game now, with the id it has in
    a collection of one per line; a record that does not close is still reported, and the games before it are read."""
    good = FOX.read_bytes().strip()
    other = good.replace(b"PB[", b"PB[Other ", 1)
    f = tmp_path / "lines.sgf"
    f.write_bytes(good + b"\n" + other)
    want = [(g.game_id, g.black.name, g.moves) for g in read_sgf_games(f)]
    assert len(want) == 2 and want[1][1].startswith("Other ") and want[0][2] == want[1][2]
    for between in (b"", b" ", b"\t;junk "):
        f.write_bytes(good + between + other)
        assert [(g.game_id, g.black.name, g.moves) for g in read_sgf_games(f)] == want, between
    f.write_bytes(good + b"(;GM[1]FF[4]SZ[19]PB[a]PW[b];B[dd];W[c")
    games = read_sgf_games(f)
    assert [g.error is None for g in games] == [True, False] and isinstance(games[1].error, MalformedRecord)
    # a value that never closes, with 200,000 openings after it: read in linear time (a scan that tried each opening
    # to the end took 13 s for 20,000 of them)
    f.write_bytes(good + b"(;GM[1]SZ[19]" + b"[a" * 200_000)
    t0 = time.perf_counter()
    games = read_sgf_games(f)
    assert time.perf_counter() - t0 < 2.0 and isinstance(games[1].error, MalformedRecord)


def test_sgf_errors_are_typed_and_name_the_game(tmp_path):
    good = FOX.read_bytes().strip()
    small = b"(;GM[1]FF[4]SZ[7]PB[a]PW[b];B[dd];W[cc])"
    handicap = b"(;GM[1]FF[4]SZ[19]HA[2]AB[dd][pp]PB[a]PW[b];W[qd])"
    truncated = b"(;GM[1]FF[4]SZ[19]PB[a]PW[b];B[dd];W[c"
    f = tmp_path / "mixed.sgf"
    f.write_bytes(b"\n".join([good, small, handicap, truncated, good]))
    games = read_sgf_games(f)
    assert len(games) == 5
    assert games[0].error is None and len(games[0].moves) == 105 and games[0].black.rating == 2500
    assert games[0].komi == 6.5  # Fox writes KM[0] in komi games
    assert isinstance(games[1].error, UnsupportedGame) and "size 7" in str(games[1].error)
    assert isinstance(games[2].error, UnsupportedGame) and "handicap" in str(games[2].error)
    assert isinstance(games[3].error, MalformedRecord) and "mixed.sgf#3" in str(games[3].error)
    assert games[4].error is None and games[4].moves == games[0].moves


def test_stones_set_up_after_the_first_move_keep_the_game_out():
    """AB/AW/AE in a move node change the position beside the moves: rating the moves alone would search positions
    the game never had, so the game is unsupported (as a handicap setup in the root is)."""
    g = parse_game(b"(;GM[1]FF[4]SZ[19]KM[6.5];B[pd];W[dd]AB[aa];B[pp])", "mid.sgf#0")
    assert isinstance(g.error, UnsupportedGame) and "set up after 1 moves" in str(g.error) and g.error.ply == 1
    assert game_events(g) == ([], g.error)
    assert parse_game(b"(;GM[1]FF[4]SZ[19]KM[6.5];B[pd];W[dd];B[pp])", "ok.sgf#0").error is None


def test_an_illegal_move_keeps_the_moves_before_it_and_leaves_the_game_unscored():
    """As a PGN game with an illegal move: the start and the moves before it are streamed (and rated), the error names
    the move, and no end is sent (no Glicko-2 update from a game whose record is wrong)."""
    g = parse_game(b"(;GM[1]FF[4]SZ[9]KM[7]RE[B+R];B[ee];W[cc];B[cc];W[gg])", "occ.sgf#0")
    events, error = game_events(g)
    assert isinstance(error, IllegalMove) and error.ply == 2 and "move 3 (B C7)" in str(error)
    assert isinstance(events[0], GameStarted) and [e.uci for e in events[1:] if isinstance(e, MoveEvent)] == ["E5", "C7"]
    assert not any(isinstance(e, GameEnded) for e in events)
    twice = parse_game(b"(;GM[1]FF[4]SZ[9]KM[7]RE[B+R];B[ee];B[cc])", "twice.sgf#0")
    events, error = game_events(twice)
    assert isinstance(error, IllegalMove) and "moves twice" in str(error) and len(events) == 2
    events, error = game_events(parse_game(b"(;GM[1]FF[4]SZ[9]KM[7]RE[B+R];B[ee];W[cc])", "ok.sgf#0"))
    assert error is None and isinstance(events[-1], GameEnded) and events[-1].result == "0-1"


def test_fox_komi_quirks():
    assert parse_game(b"(;SZ[19]KM[650]TC[3]TT[30];B[dd])", "x.sgf#0").komi == 6.5
    assert parse_game(b"(;SZ[19]KM[375]AP[foxwq];B[dd])", "x.sgf#0").komi == 7.5
    assert parse_game(b"(;SZ[19]KM[0]HA[1]TC[3]TT[30];B[dd])", "x.sgf#0").komi == 0.0
    assert parse_game(b"(;SZ[19]KM[5.5];B[dd])", "x.sgf#0").komi == 5.5


# -- the streaming pipeline: Go where it is set up for it, a typed refusal where not -------------------------
def test_a_pipeline_without_go_refuses_go_events_with_a_typed_error():
    config = PipelineConfig(get_profile("fast"), load_calibration("fast"))
    ev = GameStarted(game="go", game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"))
    with pytest.raises(UnsupportedGame, match="not set up for Go"):
        start_game(None, ev, None, config)
    chess = start_game(None, GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b")), None, config)
    with pytest.raises(UnsupportedGame, match="a go move for a chess game"):
        apply_move(chess, MoveEvent(game="go", game_id="g", ply=0, uci="Q16"))
    go = replace(config, go_calibration=load_go_calibration(GNUGO_PROFILE))
    with pytest.raises(UnsupportedGame, match="board size 7"):
        start_game(None, GameStarted(game="go", game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"),
                                     board_size=7), None, go)
    with pytest.raises(ValueError, match="Go's setup"):
        GameStarted(game_id="g", white=PlayerInfo(id="w"), black=PlayerInfo(id="b"), komi=6.5)


def test_a_go_move_searched_at_other_limits_than_the_rate_stages_is_refused_with_its_reason():
    """A Go assessment from an analyse stage run with other Go limits (KataGo's network) reaching a rate stage set up
    for GNU Go level 1: ``limits_mismatch`` naming both, nothing counted; at the stage's limits it is rated."""
    from schemas import MoveAssessment
    from streamer.pipeline import apply_player_event

    config = replace(PipelineConfig(get_profile("fast"), load_calibration("fast")),
                     go_calibration=load_go_calibration(GNUGO_PROFILE))
    move = MoveAssessment(game="go", game_id="x", ply=3, player_id="p", color="white", uci="Q16", eval_before=0,
                          eval_after=0, gain=0, loss=0, candidates=[{"uci": "Q16", "cp": 0}, {"uci": "D4", "cp": -2}],
                          played_rank=0, played_value=0, counted=True, engine="KataGo", limits="v1")
    with pytest.raises(LimitsMismatch, match="searched at v1, but this stage rates moves searched at lvl1: .* --go-profile"):
        apply_player_event(None, move, config)
    state, out = apply_player_event(None, move.model_copy(update={"limits": GoLimits(1).key}), config)
    assert len(out) == 1 and out[0].moves == 1


def test_go_moves_of_another_network_than_the_calibrations_make_their_scopes_provisional():
    """KataGo with another network than the calibration's (its engine name names the network): the moves are rated,
    the game and player scopes published as provisional from then on; the calibration's own network's are not."""
    from analyzers.engine.katago import KataGoLimits
    from analyzers.gorate import KATAGO_PROFILE
    from schemas import GameResult, MoveAssessment
    from streamer.pipeline import PlayerState, apply_player_event

    cal = load_go_calibration(KATAGO_PROFILE)
    assert not cal.provisional and cal.engine.startswith("KataGo ")
    config = replace(PipelineConfig(get_profile("fast"), load_calibration("fast")), go_calibration=cal,
                     go_limits=KataGoLimits(1))

    def move(game: str, ply: int, engine: str) -> MoveAssessment:
        return MoveAssessment(game="go", game_id=game, ply=ply, player_id="p", color="black", uci="Q16", eval_before=0,
                              eval_after=0, gain=0, loss=0, candidates=[{"uci": "Q16", "cp": 0}, {"uci": "D4", "cp": -2}],
                              played_rank=0, played_value=0, counted=True, engine=engine, limits="v1", prior=0.4)

    state, marks = None, []
    for ply, engine in ((0, cal.engine), (2, "KataGo 1.18.1 b18c384nbt"), (4, cal.engine)):
        state, out = apply_player_event(state, move("g", ply, engine), config)
        marks.append(out[0].provisional)
    assert marks == [False, True, True]
    result = GameResult(game="go", game_id="g", player_id="p", color="black", score=1.0, player=PlayerInfo(id="p"),
                        opponent=PlayerInfo(id="q"))
    state, out = apply_player_event(state, result, config)
    assert [(m.scope, m.provisional) for m in out if m.type == "perceived"] == [("player", True)]
    state = PlayerState.from_dict(json.loads(json.dumps(state.to_dict())))  # the mark survives the state store
    state, out = apply_player_event(state, move("h", 0, cal.engine), config)
    assert out[0].scope == "game" and not out[0].provisional
    assert state.go_overall is not None and state.go_overall.other_engine


def test_go_searches_get_their_own_deadline_not_the_chess_profiles():
    from analyzers.engine.pool import DEFAULT_TIMEOUT

    config = PipelineConfig(get_profile("fast"), load_calibration("fast"))
    assert config.timeout < 10 < config.go_timeout == DEFAULT_TIMEOUT  # depth 8 takes 0.05 s; GNU Go level 10, seconds
    assert replace(config, search_timeout=3.0).go_timeout == 3.0


# -- GNU Go through the pool -----------------------------------------------------------------------------
def test_gnugo_values_are_reproducible_whatever_was_searched_before():
    positions = read_sgf_games(FOX)[0].positions(24)

    async def run() -> tuple[list, list]:
        async with EnginePool(gnugo(), size=1, game=GO) as pool:
            forward = [await pool.analyse_limits(p, GoLimits(1)) for p in positions]
        async with EnginePool(gnugo(), size=2, game=GO) as pool:
            backward = await asyncio.gather(*(pool.analyse_limits(p, GoLimits(1)) for p in reversed(positions)))
        return forward, backward[::-1]

    forward, backward = asyncio.run(run())
    assert [a.candidates for a in forward] == [b.candidates for b in backward]
    assert all(a.candidates and a.candidates[0][1] >= a.candidates[-1][1] for a in forward)
    assert forward[0].engine.startswith("GNU Go")


def test_gtp_value_lists_reject_garbage():
    assert parse_values("Q16 75.00 P3 74.01", 19) == {"Q16": 75.0, "P3": 74.01}
    with pytest.raises(EngineCrashed):
        parse_values("ZZ99 lots", 19)
    with pytest.raises(EngineCrashed):
        parse_values("Q16", 19)


@pytest.mark.parametrize("mode,error", [("crash", EngineCrashed), ("garbage", EngineCrashed), ("hang", EngineTimeout)])
def test_a_failing_gtp_engine_fails_the_search_and_is_replaced(mode, error):
    async def run() -> None:
        async with EnginePool([sys.executable, FAKE_GTP, mode], size=1, game=GO, timeout=1.0) as pool:
            with pytest.raises(error):
                await pool.analyse_limits(GoPosition(), GoLimits(1))
            assert pool.stats.restarts == 2 and pool.stats.failures == 1
            assert len(pool.pids) == 1  # the slot holds a fresh process

    asyncio.run(run())


def test_an_illegal_move_stops_its_game_only(tmp_path):
    game = read_sgf_games(FOX)[0]
    game.moves = game.moves[:6] + [(game.moves[6][0], game.moves[0][1])] + game.moves[7:]  # play on an occupied point

    async def run():
        async with EnginePool(gnugo(), size=2, game=GO) as pool:
            return await assess_go_game(game, pool, GoLimits(1))

    moves, err = asyncio.run(run())
    assert len(moves) == 6 and isinstance(err, IllegalMove)
    assert err.game_id == game.game_id and err.ply == 6 and "move 7" in str(err) and "occupied" in str(err)


# -- kibitz replay FILE.sgf ------------------------------------------------------------------------------
def test_replay_of_a_held_out_fox_game_rates_both_players_move_by_move(tmp_path):
    bad = tmp_path / "bad_then_good.sgf"
    bad.write_bytes(b"(;GM[1]FF[4]SZ[19]PB[x]PW[y];B[dd];W[dd])\n(;GM[1]FF[4]SZ[19]PB[a]PW[b];B[dd];W[c\n"
                    + FOX.read_bytes())
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "streamer.cli", "replay", str(bad), "--out", str(out), "--quiet",
                           "--go-profile", GNUGO_PROFILE, "--go-engine", gnugo()], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 3, proc.stderr  # rejections happened, the rest was rated
    msgs = [json.loads(line) for line in out.read_text().splitlines()]
    dead = [m for m in msgs if m["type"] == "deadletter"]
    assert [d["reason"] for d in dead] == ["illegal_move", "malformed_record"]
    assert dead[0]["raw"] == "(;GM[1]FF[4]SZ[19]PB[x]PW[y];B[dd];W[dd])" and dead[0]["source"] == "bad_then_good.sgf#0"
    assert "move 2 (W dd" not in dead[0]["error"] and "move 2" in dead[0]["error"] and dead[0]["ply"] == 1
    # the bad game's first move (before the illegal one) is rated; the game is not scored
    assert [m["moves"] for m in msgs if m["type"] == "perceived" and m["player_id"] == "x" and m["scope"] == "game"] == [1]
    game = [m for m in msgs if m["type"] == "perceived" and m["scope"] == "game" and m["game_id"].startswith("bad_then_good")]
    fox = [m for m in game if m["moves"] and m["player_id"] in ("E9A38EE584BFE58EBB", "jkl012")]
    by_player = {p: [m for m in fox if m["player_id"] == p] for p in ("E9A38EE584BFE58EBB", "jkl012")}
    # one perceived rating per move for both players (105 moves: 53 black, 52 white), each with its interval
    assert [len(v) for v in by_player.values()] == [53, 52]
    for ratings in by_player.values():
        assert [m["moves"] for m in ratings] == list(range(1, len(ratings) + 1))
        assert all(m["game"] == "go" and m["low"] < m["rating"] < m["high"] and m["rank"] for m in ratings)
        first, last = ratings[0], ratings[-1]
        # the interval narrows (GNU Go's view of 5d play says little per game: a few percent over one game)
        assert last["high"] - last["low"] < 0.95 * (first["high"] - first["low"])
    updates = [m for m in msgs if m["type"] == "glicko2"]
    assert len(updates) == 2 and {u["score"] for u in updates} == {0.0, 1.0}
    black = next(u for u in updates if u["player_id"] == "E9A38EE584BFE58EBB")
    assert black["before"]["rating"] == 2500 and black["after"]["rating"] > 2500  # B+R from the declared 5d


#: Pieces of SGF text, well-formed and not, that the property test below strings together.
SGF_PIECES = ["(", ")", ";", "GM[1]", "FF[4]", "SZ[19]", "SZ[9]", "SZ[0]", "SZ[52]", "SZ[x]", "KM[6.5]", "KM[abc]", "HA[2]",
              "AB[pd]", "AW[dd]", "PB[a]", "PW[b]", "BR[3d]", "WR[30k]", "BR[x]", "RE[B+R]", "RE[W+3.5]", "RE[?]",
              "B[pd]", "W[dd]", "B[]", "W[tt]", "B[zz]", "W[pd]", "B[aa]", "C[a \\] b]", "[", "]", "\\", "\n", " ",
              "B[pdx]", "AE[pd]", "PL[W]"]


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(SGF_PIECES) | st.text(max_size=3), max_size=50))
def test_any_sgf_text_reads_into_alternating_legal_moves_or_a_typed_error(tmp_path_factory, pieces):
    """Property (3,000 random examples passed; 100 derandomized here): whatever the text, reading it raises nothing,
    and each game's events are a start, moves alternating from Black and playable in turn, at most one end; or the
    typed error that keeps the game out."""
    p = tmp_path_factory.mktemp("sgf") / "x.sgf"
    p.write_text("".join(pieces), encoding="utf-8", errors="replace")
    for game in read_sgf_games(p):
        evs, error = game_events(game)
        if not evs:
            assert isinstance(error, InputError)
            continue
        assert isinstance(evs[0], GameStarted)
        assert error is None or not isinstance(evs[-1], GameEnded)  # a game stopped by an error is not scored
        pos = GoPosition(size=evs[0].board_size, komi=evs[0].komi)
        for e in evs[1:]:
            if isinstance(e, MoveEvent):
                pos.play(e.uci)  # raises IllegalMove were a move not playable in turn
