"""Does KataGo tell Fox players apart where GNU Go does not? A probe on held-out Fox games.

    bash deploy/katago/setup.sh                       # once: KataGo on the CPU (docs/go.md, "KataGo on the CPU")
    python bench/go_katago_probe.py [--per-group 3] [--plies 80] [--fit-per-group 3]

The first ``--per-group`` games of each rank group of bench/go_accuracy.py's held-out sample (fox_ranked_5k-9d
`testing`, seed 0: the same games in the same order as that benchmark's), the first ``--plies`` moves of each. KataGo's
network evaluates every position once (``maxVisits`` 1: no search), which gives for each move

- the points it lost by the network's score lead: the mover's lead before it plus the opponent's lead after it;
- the network's policy probability of the played move, and whether it was the policy's first choice.

Per player-game the means of these are correlated with the declared rank (Pearson r, Kendall tau_a), beside GNU Go's
evidence on the same player-games (level 1, bench/go_accuracy.py's analyses: the posterior mean of c and the mean
points lost), and the engine seconds per position of each: whether the evidence is there, nothing fitted. With
``--fit-per-group N`` the same is done for N `candidating` games per rank group, a least-squares calibration of the
rank on the KataGo features is fitted on them and judged on the held-out games against a constant (the fitting games'
mean): the smallest calibration, not the service's rank model.
KataGo's answers are kept per game in .cache/katago-fox.jsonl, so an interrupted run resumes where it stopped; those
of the runs behind docs/go.md ship in bench/analyses/katago-fox.jsonl.xz (88 games: 5 held-out and 3 fitting games per
rank group), so those tables reprint in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import ROOT, add_data_argument, data_dir
from go_accuracy import PROBE_ANSWERS, analyse_all, probe_answers, sample

from analyzers.concordance import kendall_tau_a
from analyzers.engine.katago import policy_index
from analyzers.gorate import GoSkill
from streamer.sgf import GoGame

KATAGO = Path(os.environ.get("KIBITZ_KATAGO", ROOT / ".cache/katago/katago"))
MODEL = Path(os.environ.get("KIBITZ_KATAGO_MODEL", ROOT / ".cache/katago/model.bin.gz"))
CONFIG = ROOT / "deploy/katago/analysis.cfg"
CACHE = PROBE_ANSWERS[1]  # this machine's answers, appended as they come


def query(g: GoGame, plies: int) -> dict:
    moves = [[c.upper(), m] for c, m in g.moves[:plies]]
    return {"id": g.game_id, "moves": moves, "rules": "chinese", "komi": g.komi, "boardXSize": g.size,
            "boardYSize": g.size, "analyzeTurns": list(range(len(moves) + 1)), "maxVisits": 1, "includePolicy": True}


def evaluate(proc: subprocess.Popen, g: GoGame, plies: int) -> dict:
    """One game's turns: the side to move's score lead at each turn and, per move, its policy numbers."""
    q = query(g, plies)
    assert proc.stdin is not None and proc.stdout is not None
    started = time.monotonic()
    proc.stdin.write(json.dumps(q) + "\n")
    proc.stdin.flush()
    turns: dict[int, dict] = {}
    while len(turns) < len(q["analyzeTurns"]):
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"KataGo exited during {g.game_id}")
        r = json.loads(line)
        if "error" in r:
            raise RuntimeError(f"KataGo refused {g.game_id}: {r['error']}")
        turns[r["turnNumber"]] = r
    lead = [turns[t]["rootInfo"]["rawLead"] for t in q["analyzeTurns"]]
    played = []
    for t, (_, move) in enumerate(q["moves"]):
        policy = turns[t]["policy"]
        p = policy[policy_index(move, g.size)]
        played.append((p, max(policy), p >= max(policy)))
    return {"game_id": g.game_id, "plies": len(q["moves"]), "lead": lead, "played": played,
            "seconds": time.monotonic() - started}


def katago_evidence(games: list[GoGame], plies: int) -> dict[str, dict]:
    want = {g.game_id: min(plies, len(g.moves)) for g in games}
    done: dict[str, dict] = {}
    # the answers of the runs behind docs/go.md ship with the repository; this machine's cache adds to them
    for plies_of_game in set(want.values()):
        done |= {k: r for k, r in probe_answers(plies_of_game).items() if want.get(k) == plies_of_game}
    todo = [g for g in games if g.game_id not in done]
    if todo:
        if not KATAGO.exists():
            sys.exit(f"no KataGo at {KATAGO}: run bash deploy/katago/setup.sh (or set KIBITZ_KATAGO, KIBITZ_KATAGO_MODEL)")
        proc = subprocess.Popen([str(KATAGO), "analysis", "-model", str(MODEL), "-config", str(CONFIG)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            with CACHE.open("a") as out:
                for i, g in enumerate(todo):
                    r = done[g.game_id] = evaluate(proc, g, plies)
                    out.write(json.dumps(r) + "\n")
                    out.flush()
                    print(f"\rKataGo: {i + 1}/{len(todo)} games ({r['seconds'] / (r['plies'] + 1):.2f} s a position)",
                          end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
        finally:
            proc.kill()
            proc.wait()
    return done


def per_player(r: dict, colour: str) -> tuple[float, float, float]:
    """(mean points lost, mean log policy of the played move, share of the policy's first choice) of one colour."""
    first = 0 if colour == "b" else 1
    lead = r["lead"]
    lost = [lead[t] + lead[t + 1] for t in range(first, r["plies"], 2)]
    pol = [r["played"][t] for t in range(first, r["plies"], 2)]
    return (float(np.mean(lost)), float(np.mean([math.log(max(p, 1e-6)) for p, _, _ in pol])),
            float(np.mean([top for _, _, top in pol])))


def evidence(games: list[tuple[str, GoGame]], kg: dict[str, dict]) -> tuple[np.ndarray, np.ndarray]:
    """Per player-game: the features (mean log policy of the played move, mean points lost, share of the policy's first
    choice) and the declared rank (GoR)."""
    x, y = [], []
    for g, colour, rating in sides(games):
        if g.game_id in kg:
            lost, logp, top = per_player(kg[g.game_id], colour)
            x.append((logp, lost, top))
            y.append(rating)
    return np.array(x), np.array(y)


def sides(games: list[tuple[str, GoGame]]) -> list[tuple[GoGame, str, float]]:
    """Every player-game with a declared rank: (game, colour "b"/"w", rank on the GoR scale)."""
    return [(g, colour, p.rating) for _, g in games for colour, p in (("b", g.black), ("w", g.white))
            if p.rating is not None]


def calibrated(fit: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray], columns: list[int]) -> np.ndarray:
    """Least squares of the rank on ``columns`` of the features (with an intercept) on ``fit``; predictions on ``test``."""
    (xf, yf), (xt, _) = fit, test
    design = np.column_stack([np.ones(len(xf)), xf[:, columns]])
    coef, *_ = np.linalg.lstsq(design, yf, rcond=None)
    return np.column_stack([np.ones(len(xt)), xt[:, columns]]) @ coef


def accuracy_row(name: str, est: np.ndarray, truth: np.ndarray, const: float) -> None:
    err = est - truth
    mae, mae0 = np.mean(np.abs(err)) / 100, np.mean(np.abs(truth - const)) / 100
    spread = np.ptp(est) > 0  # a constant has no correlation
    r = f"{np.corrcoef(est, truth)[0, 1]:.2f}" if spread else "-"
    tau = f"{kendall_tau_a(list(est), list(truth)):.2f}" if spread else "-"
    print(f"| {name} | {mae:.2f} | {1 - mae / mae0:+.1%} | {np.mean(err) / 100:+.2f} | {r} | {tau} |")


def corr(name: str, x: list[float], truth: list[float]) -> None:
    r = float(np.corrcoef(x, truth)[0, 1])
    print(f"| {name} | {r:+.2f} | {kendall_tau_a(x, truth):+.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-group", type=int, default=3)
    ap.add_argument("--plies", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fit-per-group", type=int, default=0,
                    help="also fit a least-squares calibration on this many `candidating` games per rank group and "
                         "judge it on the held-out games (default 0: correlations only)")
    ap.add_argument("--engines", type=int, default=2, help="GNU Go processes for its side of the comparison")
    add_data_argument(ap)
    args = ap.parse_args()
    games = sample(data_dir(args), "testing", args.per_group, args.seed)
    kg = katago_evidence([g for _, g in games], args.plies)
    args.engine, args.level, args.progress, args.timeout = "gnugo", 1, False, 60.0
    gnugo = asyncio.run(analyse_all(games, args))
    truth, k_lost, k_logp, k_top, g_c, g_lost = [], [], [], [], [], []
    for g, colour, rating in sides(games):
        mine = [m for m in gnugo.get(g.game_id, []) if m.colour == colour]
        if not mine:
            continue
        lost, logp, top = per_player(kg[g.game_id], colour)
        skill = GoSkill()
        for m in mine:
            skill.add(m.values, m.played)
        truth.append(rating)
        k_lost.append(-lost)  # signs so that a stronger player scores higher on every row
        k_logp.append(logp)
        k_top.append(top)
        g_c.append(skill.posterior.mean)
        g_lost.append(-float(np.mean([m.loss for m in mine])))
    secs = sum(r["seconds"] for r in kg.values()) / sum(r["plies"] + 1 for r in kg.values())
    print(f"go_katago_probe: {len(games)} held-out Fox games ({args.per_group} per rank group, seed {args.seed}), "
          f"{len(truth)} player-games, the first {args.plies} moves; declared ranks "
          f"{min(truth):.0f}-{max(truth):.0f} (GoR)")
    print("\n| evidence per player-game (higher = stronger) | r with the declared rank | tau_a |")
    print("|---|---|---|")
    corr("KataGo network: minus the mean points lost", k_lost, truth)
    corr("KataGo network: mean log policy of the played move", k_logp, truth)
    corr("KataGo network: share of the policy's first choice", k_top, truth)
    corr("GNU Go level 1: posterior mean of c", g_c, truth)
    corr("GNU Go level 1: minus the mean points lost", g_lost, truth)
    if args.fit_per_group:
        fit_games = sample(data_dir(args), "candidating", args.fit_per_group, args.seed)
        fit, test = evidence(fit_games, katago_evidence([g for _, g in fit_games], args.plies)), evidence(games, kg)
        const = float(np.mean(fit[1]))
        print(f"\nA least-squares calibration fitted on {len(fit[1])} player-games of `candidating` "
              f"({args.fit_per_group} games per rank group), judged on the {len(test[1])} held-out player-games above "
              f"(ranks: GoR / 100):\n")
        print("| per player-game, held-out | MAE (ranks) | cut vs constant | bias | r | tau_a |")
        print("|---|---|---|---|---|---|")
        accuracy_row("KataGo: log policy, points lost, first-choice share", calibrated(fit, test, [0, 1, 2]), test[1], const)
        accuracy_row("KataGo: log policy of the played move alone", calibrated(fit, test, [0]), test[1], const)
        accuracy_row("constant = the fitting games' mean", np.full(len(test[1]), const), test[1], const)
    print(f"\nKataGo: {secs:.2f} engine-seconds a position (one network evaluation, PoCL on this machine's cores)")


if __name__ == "__main__":
    main()
