"""The kibitz command as a user runs it (subprocess, real Stockfish, shallow limits)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BAD_PGN = (Path(__file__).parent / "fixtures" / "bad.pgn").read_text()

FAST = ["--depth", "5", "--multipv", "3", "--engines", "2"]


def kibitz(*args, stdin=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "streamer.cli", *args], input=stdin, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("cmd", [[], ["replay"], ["stream"], ["pool"], ["schemas", "export"]])
def test_help_is_complete(cmd):
    r = kibitz(*cmd, "--help")
    assert r.returncode == 0 and "usage: kibitz" in r.stdout
    if cmd == ["replay"]:
        for opt in ("--speed", "--max-speed", "--depth", "--nodes", "--multipv", "--engines", "--out", "--no-ui"):
            assert opt in r.stdout


@pytest.mark.parametrize(("args", "said"), [
    (["replay", "tests/fixtures/bad.pgn", "--engines", "0"], "argument --engines: must be above 0: '0'"),
    (["follow", "x.pgn", "--interval", "-1"], "argument --interval: must be above 0: '-1'"),
    (["follow", "x.pgn", "--interval", "nan"], "argument --interval: must be above 0: 'nan'"),
    (["replay", "tests/fixtures/bad.pgn", "--speed", "fast"], "argument --speed: not a number: 'fast'"),
    (["worker", "--go-engines", "0"], "argument --go-engines: must be above 0"),
    (["tail", "x", "--topic-prefix", "a/b"], "argument --topic-prefix: 'a/b': a topic prefix is at most 180 of the characters"),
    # kibitz pool: a traceback (ValueError) for the first two, a 150 % draw rate and a negative count taken as given
    (["pool", "tests/fixtures/bad.pgn", "--anchor", "Carlsen,M=abc"], "argument --anchor: want NAME=RATING with a rating in [0, 4000]"),
    (["pool", "tests/fixtures/bad.pgn", "--white-advantage", "xyz"], "argument --white-advantage: want auto or rating points"),
    (["pool", "tests/fixtures/bad.pgn", "--draw-rate", "1.5"], "argument --draw-rate: want auto or a rate in (0, 1); got '1.5'"),
    (["pool", "tests/fixtures/bad.pgn", "--simulations", "-5"], "argument --simulations: want a whole number >= 0"),
    (["pool", "tests/fixtures/bad.pgn", "--average", "nan"], "argument --average: want a rating in [0, 4000]; got 'nan'"),
    (["--log-level", "BOGUS", "pool", "tests/fixtures/bad.pgn"], "argument --log-level: invalid choice: 'BOGUS'"),
    # ports out of range and an address without a port: tracebacks from bind or parse_hostport once the engines ran
    (["replay", "--metrics-port", "70000"], "argument --metrics-port: want a port in 1-65535; got '70000'"),
    (["follow", "x.pgn", "--serve", "127.0.0.1:70000"], "argument --serve: expected HOST:PORT with a port in 0-65535"),
    (["serve", "--listen", "nohost"], "argument --listen: expected HOST:PORT with a port in 0-65535, got 'nohost'"),
])
def test_a_count_or_interval_not_above_0_or_a_bad_topic_prefix_or_pool_option_is_a_usage_error(args, said):
    """0 engines failed with a traceback deep in the engine pool; a negative poll interval polled without pause; a
    topic prefix Kafka refuses failed at the broker."""
    r = kibitz(*args, timeout=60)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_replay_with_bad_pgn_reports_each_problem_and_processes_the_rest(tmp_path, stockfish):
    pgn = tmp_path / "bad.pgn"
    pgn.write_text(BAD_PGN)
    out = tmp_path / "out.jsonl"
    r = kibitz("replay", str(pgn), "--max-speed", "--no-ui", "--out", str(out), *FAST)
    assert r.returncode == 3, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("rejected")]
    assert len(lines) == 2
    assert "illegal_move" in lines[0] and "bad:0:" in lines[0] and "ply 2" in lines[0]
    assert "truncated" in lines[1] and "bad:2:" in lines[1] and "ply 5" in lines[1]
    msgs = [json.loads(x) for x in out.read_text().splitlines()]
    # the good game (C-D) was rated at its end; the broken ones still got live ratings for their legal moves
    assert {m["player_id"] for m in msgs if m["type"] == "glicko2"} == {"C", "D"}
    assert {m["game_id"].split(":")[1] for m in msgs if m["type"] == "perceived"} == {"0", "1", "2"}


def test_stream_reads_json_lines_from_stdin(stockfish):
    events = [
        {"type": "game_started", "game_id": "s1", "white": {"id": "w", "rating": 2000}, "black": {"id": "b", "rating": 1900}},
        {"type": "move", "game_id": "s1", "ply": 0, "uci": "e2e4"},
        {"type": "move", "game_id": "s1", "ply": 1, "uci": "e7e5"},
        {"type": "move", "game_id": "s1", "ply": 1, "uci": "e7e5"},
        {"type": "game_ended", "game_id": "s1", "result": "1-0", "plies": 2},
    ]
    # with a byte order mark first, as Windows tools write UTF-8 (the game's start was malformed, its moves unknown)
    stdin = "\ufeff" + "\n".join(json.dumps(e) for e in events) + "\n{broken\n"
    r = kibitz("stream", *FAST, stdin=stdin)
    assert r.returncode == 3
    assert "duplicate_ply" in r.stderr and "stdin:6" in r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert [m["type"] for m in out].count("perceived") >= 2 and [m["type"] for m in out].count("glicko2") == 2


def test_schemas_export(tmp_path):
    r = kibitz("schemas", "export", str(tmp_path))
    assert r.returncode == 0
    assert (tmp_path / "MoveEvent.v2.schema.json").is_file() and (tmp_path / "PerceivedRating.v5.schema.json").is_file()


def test_pool_on_london_2011_orders_by_standings(london):
    r = kibitz("pool", str(london), "--simulations", "200")
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln[:3].strip().isdigit()]
    names = [row[1] for row in rows]
    assert names[0] == "Kramnik,V" and names[-1] == "Adams,Mi"
    points = [float(row[4]) for row in rows]
    assert points == sorted(points, reverse=True)


def test_pool_names_an_anchored_player_as_such_rather_than_with_an_error_of_0(london, tmp_path):
    """``--anchor`` pins a rating: the table says "anchor" where the others' errors are, the JSON and CSV give it no
    error (null) and ``anchored`` true (its simulated error is 0 only because it is pinned)."""
    r = kibitz("pool", str(london), "--simulations", "50", "--anchor", "Carlsen,M=2826")
    assert r.returncode == 0, r.stderr
    rows = {ln.split()[1]: ln.split() for ln in r.stdout.splitlines() if ln[:3].strip().isdigit()}
    assert rows["Carlsen,M"][2:4] == ["2826.0", "anchor"] and rows["Kramnik,V"][3].isdigit()
    r = kibitz("pool", str(london), "--simulations", "50", "--anchor", "Carlsen,M=2826", "--json")
    players = {p["player"]: p for p in json.loads(r.stdout)["players"]}
    assert players["Carlsen,M"]["error"] is None and players["Carlsen,M"]["anchored"] is True
    assert players["Kramnik,V"]["error"] > 0 and players["Kramnik,V"]["anchored"] is False
    table = tmp_path / "pool.csv"
    assert kibitz("pool", str(london), "--anchor", "Carlsen,M=2826", "--csv", str(table)).returncode == 0
    assert table.read_text().splitlines()[0] == "rank,player,rating,error,anchored,points,games,score"


def test_pool_sets_perfect_scores_aside_and_rates_the_rest(tmp_path):
    """A beat B in their only game, C and D drew: the whole pool was refused for A's and B's perfect scores; now they
    are reported (on stderr and under "unrated") and C and D are rated."""
    pgn = tmp_path / "pool.pgn"
    pgn.write_text('[White "A"]\n[Black "B"]\n[Result "1-0"]\n\n1. e4 1-0\n\n'
                   '[White "C"]\n[Black "D"]\n[Result "1/2-1/2"]\n\n1. d4 1/2-1/2\n')
    r = kibitz("pool", str(pgn), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [p["player"] for p in out["players"]] == ["C", "D"] and all(p["rating"] == 2300.0 for p in out["players"])
    assert out["unrated"] == [{"player": "A", "points": 1.0, "games": 1, "why": "perfect score"},
                              {"player": "B", "points": 0.0, "games": 1, "why": "perfect score"}]
    assert "not rated, a perfect score has no maximum-likelihood rating: A 1/1" in r.stderr


def test_a_file_or_port_that_cannot_be_used_is_one_line_not_a_traceback(tmp_path):
    """An --out in a directory that is not there, a --cache that is not a database, a schema export onto a file, a
    --metrics-port in use: each was a Python traceback. A worker's --data-dir that cannot hold its state: the worker
    waited for the broker first and failed only at its first partition."""
    import socket

    not_db = tmp_path / "notes.txt"
    not_db.write_text("not a database")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = str(busy.getsockname()[1])
    try:
        for args, code, said in [
            (["replay", "--out", str(tmp_path / "no" / "dir" / "out.jsonl"), "--no-ui"], 1, "No such file or directory"),
            (["replay", "--cache", str(not_db), "--no-ui", "--max-speed"], 2, "cannot be used: file is not a database"),
            (["schemas", "export", str(not_db)], 1, "File exists"),
            (["replay", "--metrics-port", port, "--no-ui", "--max-speed"], 1, "Address already in use"),
            (["worker", "--store", "rocksdb", "--data-dir", str(not_db), "--broker", "127.0.0.1:1"], 1,
             "the worker's state directory"),
        ]:
            r = kibitz(*args, timeout=120)
            assert r.returncode == code and said in r.stderr and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
    finally:
        busy.close()


def test_missing_file_is_a_clear_usage_error(tmp_path):
    r = kibitz("replay", str(tmp_path / "nope.pgn"), "--no-ui")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("command", ["replay", "pool", "review", "produce"])
def test_a_compressed_or_binary_games_file_is_a_usage_error(command, tmp_path, capsys):
    import gzip

    from streamer.cli import build_parser

    extra = ["--player", "x"] if command == "review" else []
    for name, data, why in (("r.pgn.gz", gzip.compress(BAD_PGN.encode()), "gzip-compressed: decompress it first"),
                            ("r.pgn", b"\x00\x01\x02" + BAD_PGN.encode(), "binary content")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([command, str(tmp_path / name), *extra])
        assert e.value.code == 2 and f"r.pgn{name[5:]} is not a PGN or SGF text: {why}" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["pool", "review", "follow"])
def test_go_games_named_to_a_chess_command_are_a_usage_error(command, tmp_path, capsys):
    """``pool``, ``review`` and ``follow`` read chess (PGN). Given an SGF record, under any name, python-chess read it
    as one game of "?" against "?" without a move: pool said "no games", review "no player named", follow waited for
    that game's end for ever."""
    from streamer.cli import build_parser

    extra = ["--player", "x"] if command == "review" else []
    for name in ("fox.sgf", "fox.txt", "fox.pgn"):
        (tmp_path / name).write_bytes(Path(__file__).parent.joinpath("fixtures", "fox_5d_testing.sgf").read_bytes())
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([command, str(tmp_path / name), *extra])
        assert e.value.code == 2 and f"{name} is an SGF record (Go games)" in capsys.readouterr().err


def test_replay_reads_an_sgf_record_as_go_whatever_its_name(tmp_path):
    """An SGF record saved as .txt or .pgn was replayed as PGN: one game of "?" against "?", rejected as truncated."""
    from streamer.cli import is_sgf

    fox = Path(__file__).parent.joinpath("fixtures", "fox_5d_testing.sgf").read_bytes()
    for name, data, want in (("a.txt", fox, True), ("b.pgn", b"\xef\xbb\xbf\r\n" + fox, True), ("c.sgf", b"", True),
                             ("d.pgn", BAD_PGN.encode(), False), ("e.pgn", b"(;", True), ("f.pgn", b"( 1. e4", False)):
        (tmp_path / name).write_bytes(data)
        assert is_sgf(tmp_path / name) is want, name


@pytest.mark.parametrize("command", ["replay", "pool", "review", "produce", "follow"])
def test_a_directory_a_pipe_or_a_missing_file_named_as_games_is_a_usage_error(command, tmp_path, capsys):
    """A directory was retried for ever by ``follow`` ("Is a directory" at every poll), reported as "no such file" by
    ``replay`` and as an OSError by the others; the files in it are not read: the user names them."""
    from streamer.cli import build_parser

    extra = ["--player", "x"] if command == "review" else []
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args([command, str(tmp_path), *extra])
    assert e.value.code == 2 and f"{tmp_path} is a directory: name its" in capsys.readouterr().err
    # a pipe (`<(zcat games.pgn.gz)`) or a device was "no such file": its start is sniffed, so it could not be read whole
    pipe = tmp_path / "games.pgn"
    os.mkfifo(pipe)
    for path in (str(pipe), "/dev/null"):
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([command, path, *extra])
        assert e.value.code == 2 and f"{path} is not a regular file (a pipe or a device" in capsys.readouterr().err
    missing = str(tmp_path / "later.pgn")
    if command == "follow":  # a feed file a relay has not written yet is polled until it appears
        assert build_parser().parse_args([command, missing]).sources == [missing]
        for bad in ("ftp://example.org/round1.pgn", "stream+ftp://example.org/round1.pgn"):
            with pytest.raises(SystemExit) as e:
                build_parser().parse_args([command, bad])
            assert e.value.code == 2 and "not an http(s) URL, a stream+http(s) URL or a file" in capsys.readouterr().err
        good = ["https://example.org/round1.pgn", "stream+https://lichess.org/api/stream/broadcast/round/ab12cd34.pgn"]
        assert build_parser().parse_args([command, *good, missing]).sources == [*good, missing]
    else:
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args([command, missing, *extra])
        assert e.value.code == 2 and f"no such file: {missing}" in capsys.readouterr().err


def test_the_live_service_refuses_a_gains_only_profile():
    """deep (one PV) has a calibration for Algorithm 4 only: no posterior, no fair-play reference, so no live use."""
    r = kibitz("replay", "--profile", "deep", "--no-ui")
    assert r.returncode == 1 and "gains only" in r.stderr and "--profile fast or standard" in r.stderr


def test_four_placeholder_players_get_four_glicko_updates(tmp_path, stockfish):
    out = tmp_path / "out.jsonl"
    r = kibitz("replay", str(Path(__file__).parent / "fixtures" / "anonymous.pgn"), "--max-speed", "--no-ui", "--out", str(out), *FAST)
    assert r.returncode == 0, r.stderr
    updates = [m for m in map(json.loads, out.read_text().splitlines()) if m["type"] == "glicko2"]
    assert len(updates) == 4 and len({u["player_id"] for u in updates}) == 4
    # each anonymous player has played once: nobody's rating carries another game
    assert all(u["before"]["rating"] == 1500 for u in updates)


def test_stream_dead_letters_any_bytes_and_rates_what_follows(stockfish):
    game = [
        {"type": "game_started", "game_id": "g1", "white": {"id": "w", "rating": 1800}, "black": {"id": "b"}},
        *({"type": "move", "game_id": "g1", "ply": i, "uci": u} for i, u in enumerate(["e2e4", "e7e5", "g1f3", "b8c6"])),
        {"type": "game_ended", "game_id": "g1", "result": "1/2-1/2", "plies": 4},
    ]
    bad = [b"\xff\xfe not utf-8", b"[" * 100_000 + b"]" * 100_000, b"[" * 1000 + b"]" * 1000,
           b'{"type": "move", "game_id": "g1", "ply": "2", "uci": "e2e4"}',
           b'{"type": "move", "game_id": "g1", "ply": 1, "uci": "e7e5", "timestamp": NaN}']
    stdin = b"\n".join(bad + [json.dumps(e).encode() for e in game]) + b"\n"
    r = subprocess.run([sys.executable, "-m", "streamer.cli", "stream", *FAST], input=stdin, capture_output=True, timeout=120)
    assert r.returncode == 3, r.stderr
    rejections = [ln for ln in r.stderr.decode().splitlines() if ln.startswith("rejected (malformed)")]
    assert len(rejections) == len(bad), r.stderr
    # each line says once where the record was: its game and ply when known, else its line on stdin
    assert all(ln.count("game g1") <= 1 for ln in rejections), rejections
    assert sum(ln.startswith("rejected (malformed) stdin:") for ln in rejections) >= 3, rejections
    out = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert sum(m["type"] == "perceived" and m["scope"] == "game" for m in out) == 4
    assert sum(m["type"] == "glicko2" for m in out) == 2


@pytest.mark.solo
def test_stream_answers_each_line_as_it_arrives(stockfish):
    import time

    p = subprocess.Popen([sys.executable, "-m", "streamer.cli", "stream", *FAST], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(8)  # start-up: imports and engine processes (generous: CI machines are busy)
        t0 = time.monotonic()
        for e in ({"type": "game_started", "game_id": "g1", "white": {"id": "w"}, "black": {"id": "b"}},
                  {"type": "move", "game_id": "g1", "ply": 0, "uci": "e2e4"}):
            p.stdin.write(json.dumps(e).encode() + b"\n")
        p.stdin.flush()  # and the input stays open, as a live feed's does
        first = json.loads(p.stdout.readline())
        elapsed = time.monotonic() - t0
        assert first["type"] == "perceived" and first["ply"] == 0
        assert elapsed < 2.0, elapsed
    finally:
        p.kill()
        p.wait()


def test_stream_into_a_reader_that_goes_away_stops_at_once(stockfish):
    """`kibitz stream < events | head -1`: the reader closes the pipe after one line. The write's BrokenPipeError killed
    the runtime's worker for that partition and the stream waited for it for ever; now it stops at once, quietly
    (exit 1, nothing on stderr), as a Unix filter does."""
    import shutil

    events = "".join(json.dumps(e) + "\n" for i in range(4) for e in (
        {"type": "game_started", "game_id": f"g{i}", "white": {"id": f"w{i}"}, "black": {"id": f"b{i}"}},
        {"type": "move", "game_id": f"g{i}", "ply": 0, "uci": "e2e4"}, {"type": "move", "game_id": f"g{i}", "ply": 1, "uci": "e7e5"}))
    cmd = f"{shutil.which('head') or 'head'} -n 1"
    p = subprocess.run(["bash", "-c", f'"$0" -m streamer.cli stream {" ".join(FAST)} | {cmd}; echo "rc=${{PIPESTATUS[0]}}" >&2',
                        sys.executable], input=events, capture_output=True, text=True, timeout=120)
    assert json.loads(p.stdout.splitlines()[0])["type"] == "perceived"
    lines = [ln for ln in p.stderr.splitlines() if not ln.startswith("note: limits")]  # FAST's uncalibrated limits
    assert lines == ["rc=1"], p.stderr[-2000:]


def test_metrics_bind_where_asked(stockfish):
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "streamer.cli", "stream", *FAST, "--metrics-port", str(port),
                          "--metrics-host", "127.0.0.2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        body = ""
        for _ in range(100):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.2:{port}/metrics", timeout=1).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert "kibitz_events_total" in body or "kibitz_engine_searches" in body
        with pytest.raises(OSError):  # bound to 127.0.0.2 only
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)
    finally:
        p.kill()
        p.wait()


def test_search_deadline_comes_from_the_profile_unless_given():
    import argparse

    from analyzers.profiles import MIN_SEARCH_TIMEOUT, get_profile
    from streamer.cli import build_config

    base = dict(profile="fast", depth=None, nodes=None, multipv=None, prior=None)
    assert build_config(argparse.Namespace(**base)).timeout == MIN_SEARCH_TIMEOUT  # fast: 50 x 42 ms is under the floor
    assert build_config(argparse.Namespace(**base, search_timeout=2.5)).timeout == 2.5
    standard = get_profile("standard")
    assert standard.search_timeout == 50 * standard.search_seconds > MIN_SEARCH_TIMEOUT
    stream = build_config(argparse.Namespace(**base, idle_game_seconds=60.0))
    assert stream.idle_game_seconds == 60.0


def test_fair_play_tiers_are_options_and_the_screening_tier_is_the_lower():
    import argparse

    from analyzers.errors import CalibrationError
    from analyzers.fairplay import DEFAULT_SCREEN_Z, DEFAULT_Z_THRESHOLD
    from streamer.cli import add_engine_options, build_config

    p = argparse.ArgumentParser()
    add_engine_options(p)
    default = build_config(p.parse_args([]))
    assert (default.screen_z, default.z_threshold) == (DEFAULT_SCREEN_Z, DEFAULT_Z_THRESHOLD)
    lower = build_config(p.parse_args(["--screen-z", "1.5", "--action-z", "5"]))
    assert (lower.screen_z, lower.z_threshold) == (1.5, 5.0)
    with pytest.raises(CalibrationError, match="screening tier is the lower"):
        build_config(p.parse_args(["--screen-z", "5", "--action-z", "4"]))
    for bad in ("-1", "nan", "x"):
        with pytest.raises(SystemExit):
            p.parse_args(["--screen-z", bad])


def test_the_worker_refuses_stages_it_cannot_run_before_it_looks_for_a_broker(tmp_path):
    """The review stage runs only with --review; an unknown stage is named; none at all is said so (it read as "the
    review stage runs only with --review"). All exit 2 at once (no broker here), before the worker's state directory
    is made (it was made first, in ./kibitz-data by default)."""
    data = tmp_path / "data"
    review = kibitz("worker", "--stages", "review", "--broker", "127.0.0.1:1", "--data-dir", str(data))
    assert review.returncode == 2 and "the review stage runs only with --review" in review.stderr
    bogus = kibitz("worker", "--stages", "analyse,bogus", "--broker", "127.0.0.1:1", "--data-dir", str(data))
    assert bogus.returncode == 2 and "no stage named bogus" in bogus.stderr
    empty = kibitz("worker", "--stages", ",", "--broker", "127.0.0.1:1", "--data-dir", str(data))
    assert empty.returncode == 2 and "no stage given" in empty.stderr
    assert not data.exists()
    faust = kibitz("worker", "--runtime", "faust", "--review", "--broker", "127.0.0.1:1", "--data-dir", str(tmp_path))
    assert faust.returncode == 2 and "--review needs the transactional runtime" in faust.stderr


@pytest.mark.parametrize("files,options,says", [
    (["tests/fixtures/fox_5d_testing.sgf"], ["--serve", "127.0.0.1:8099", "--review"], "--serve, --review: for chess (PGN) games"),
    (["tests/fixtures/fox_5d_testing.sgf"], ["--depth", "4", "--profile", "standard"], "--profile, --depth: for chess"),
    (["tests/fixtures/bad.pgn"], ["--go-profile", "go-fox-gnugo-l1", "--quiet"], "--go-profile, --quiet: for Go (SGF) games"),
])
def test_replay_refuses_the_options_of_the_other_game(files, options, says):
    """Each was ignored without a word: an SGF replay with ``--serve`` rated its games and served nothing (the
    overlay draws chess), with ``--review`` reviewed nothing; a PGN replay read no ``--go-*`` option. Refused before
    any engine starts."""
    r = kibitz("replay", *files, *options, "--no-ui", timeout=60)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr
    assert "games in" not in r.stdout  # nothing was replayed



def test_go_events_on_kibitz_stream_say_where_go_is_rated():
    """``kibitz stream`` has no Go engines: a Go game is refused saying which commands rate Go (it named the worker's
    --go alone, an option stream does not have)."""
    events = ('{"type": "game_started", "game": "go", "game_id": "g1", "white": {"id": "a"}, "black": {"id": "b"}}\n'
              '{"type": "move", "game": "go", "game_id": "g1", "ply": 0, "uci": "Q16"}\n')
    r = kibitz("stream", *FAST, stdin=events, timeout=120)
    assert r.returncode == 3
    assert "rejected (unsupported_game) game g1: this kibitz is not set up for Go" in r.stderr
    assert "kibitz replay FILE.sgf" in r.stderr


def test_an_engine_other_than_the_calibrations_rates_every_move_as_provisional_with_one_note(tmp_path, stockfish):
    """``--engine`` a build that introduces itself otherwise than the engine the calibrations were fitted on (Stockfish
    15.1; here that Stockfish under another name, tests/fixtures/renamed_engine.py): one note on the console and one
    log line, every rating published as provisional, the ratings themselves those of the same searches. The
    calibrations' own engine publishes them as calibrated. (Stockfish 16's own searches at the profile's limits moved
    the game ratings of London 2011 rounds 1-2 by -460 to +380, published as calibrated.)"""
    from conftest import BROADCAST, FIXTURES

    other = tmp_path / "stockfish-16"
    other.write_text(f"#!/bin/sh\nexec {sys.executable} {FIXTURES / 'renamed_engine.py'} 'Stockfish 16' {stockfish}\n")
    other.chmod(0o755)
    runs = {}
    for name, engine in (("calibrated", stockfish), ("other", str(other))):
        out = tmp_path / f"{name}.jsonl"
        r = kibitz("replay", str(BROADCAST), "--max-speed", "--no-ui", "--out", str(out), "--engine", engine)
        assert r.returncode == 0, r.stderr
        ratings = sorted((m for m in map(json.loads, out.read_text().splitlines()) if m["type"] == "perceived"),
                         key=lambda m: (m["scope"], m["player_id"], m["ply"]))
        runs[name] = (" ".join(r.stdout.split()), r.stderr, ratings)
    (said, logged, calibrated), (said_other, logged_other, provisional) = runs["calibrated"], runs["other"]
    assert len(calibrated) == len(provisional) > 49 and not any(m["provisional"] for m in calibrated)
    assert all(m["provisional"] for m in provisional)
    assert [m | {"provisional": False} for m in provisional] == calibrated  # rated alike, only marked
    note = "engine Stockfish 16 is not the one the calibrations were fitted on (Stockfish 15.1): ratings are PROVISIONAL"
    assert said_other.count(note) == 1 and "calibrations were fitted on" not in said
    assert logged_other.count('"calibrated_engine": "Stockfish 15.1"') == 1 and "calibrated_engine" not in logged
