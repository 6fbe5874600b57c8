"""Fit the learned combination on top of the move model (analyzers/combination.py) on rated-dev. Never on rated-holdout.

    python bench/fit_combination.py [--profile fast] [--dev 6400] [--seed 0] [--folds 5] [--final]

Takes the rated-dev player-events that ``bench/warm_cache.py`` analysed (drawn as it draws them; games not in the
analysis cache are left out and counted) and replays every player's counted moves through the live
:class:`~analyzers.combination.ScopeFeatures`, the same code the player step runs. A row is a scope as the service
would publish it: one player-game after 1, 2, 3, 5, 8, ... counted moves and at its end; one player-event at the end of
each of its games. Its inputs are :data:`~analyzers.combination.FEATURES` (the move model's likelihood mean and sd
among them), its target the player's FIDE rating.

1. Ridge regression over phi(x) (standardised; the penalty chosen by internal CV), cross-validated event-disjoint
   (``--folds`` folds by event: no event and hence no player on both sides): MAE, cut against a constant, bias and r
   at the end of a game and of a player-event (5+ games), beside the move model's published estimate on the same rows.
2. The interval: quantiles of the cross-validated residuals (FIDE - R_hat) by bins of moves seen, and the coverage
   of the resulting 95 % and 68 % intervals on the same rows (in-sample for the quantiles, so ~95 % by construction;
   the held-out check is bench/accuracy.py).
3. An ablation: the cross-validated MAE with each group of inputs left out (clock, position difficulty, the move
   model's likelihood, the loss shares).
4. The weights refitted on every row, written to analyzers/calibrations/<profile>.combination.json with the command.

Needs scikit-learn (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import ROOT
from fit_model import game_class
from stacking_cv import dev_arguments, load_dev, move_grids, ridge

from analyzers.combination import CLOCK_FEATURES, FEATURES, Combination, MoveFeatures, ScopeFeatures, moments, phi
from analyzers.profiles import get_profile
from analyzers.ratingmodel import FLAT_PRIOR, RATING_GRID

#: Moves seen at which a player-game is a row (and at its end).
PREFIXES = (1, 2, 3, 5, 8, 12, 18, 25, 35, 50, 70, 100, 140)
#: Residual bins by moves seen (n < 3, 3 <= n < 6, ...) and the tails stored.
EDGES = (3, 6, 11, 21, 41, 81, 161, 321)
TAILS = (0.005, 0.025, 0.05, 0.16, 0.5, 0.84, 0.95, 0.975, 0.995)
#: Input groups the ablation leaves out, one at a time.
GROUPS = {
    "clock": CLOCK_FEATURES,
    "position difficulty": ("second's loss", "playable", "best when only one"),
    "move model likelihood": ("model mean", "model sd"),
    "loss shares and means": ("mean delta", "mean sqrt delta", "best", "delta>0.02", "delta>0.05", "delta>0.1", "delta>0.2"),
}


class Rows:
    """Rows of (kind, moves seen, x, truth, event, the move model's published estimate)."""

    def __init__(self) -> None:
        self.kind: list[str] = []
        self.n: list[int] = []
        self.x: list[np.ndarray] = []
        self.truth: list[float] = []
        self.event: list[str] = []
        self.published: list[float] = []
        self.final: list[bool] = []  # the scope's last row (end of a player-game; end of a 5+ game player-event)

    def arrays(self):  # noqa: ANN201
        return (np.asarray(self.kind), np.asarray(self.n), np.vstack(self.x), np.asarray(self.truth),
                np.asarray(self.event), np.asarray(self.published), np.asarray(self.final))


def replay(model, m, grids, moves: list[int], tclass: str, at, rows: Rows, kind: str, truth: float, event: str,  # noqa: ANN001
           final_ok: bool) -> None:
    """Feed ``moves`` (in order) through ScopeFeatures and the summed likelihood; a row wherever ``at(k, i)`` holds
    (k moves seen, i the move's index) and at the last move."""
    feats, ll = ScopeFeatures(), np.zeros(RATING_GRID.size)
    for k, i in enumerate(moves, 1):
        d = m.deltas[i]
        feats.add(MoveFeatures.of(d[np.isfinite(d)], int(m.played[i]), (float(m.clock[i, 0]), float(m.clock[i, 1])),
                                  bool(m.clocked[i])))
        ll += grids[i]
        last = k == len(moves)
        if not (last or at(k, i)) or not Combination.applies(feats):  # the combination rates clocked scopes only
            continue
        flat, pub = model.posteriors(ll, (FLAT_PRIOR, model.prior_for(tclass)))
        rows.kind.append(kind)
        rows.n.append(k)
        rows.x.append(feats.vector(*moments(flat), tclass))
        rows.truth.append(truth)
        rows.event.append(event)
        rows.published.append(float(pub @ RATING_GRID))
        rows.final.append(last and final_ok)


def oof(X: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int) -> np.ndarray:
    """Out-of-fold predictions of ridge over phi(X), folds by group."""
    from sklearn.model_selection import GroupKFold

    pred = np.zeros_like(y)
    P = phi(X)
    for train, test in GroupKFold(folds).split(P, y, groups):
        pred[test] = ridge().fit(P[train], y[train]).predict(P[test])
    return np.clip(pred, RATING_GRID[0], RATING_GRID[-1])


def report(name: str, pred: np.ndarray, y: np.ndarray) -> str:
    err = pred - y
    mae, const = np.mean(np.abs(err)), np.mean(np.abs(y - y.mean()))
    r = f"{np.corrcoef(pred, y)[0, 1]:.2f}" if np.std(pred) > 0 else "-"
    return f"| {name} | {len(y)} | {mae:.0f} | {1 - mae / const:+.1%} | {err.mean():+.0f} | {r} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    dev_arguments(ap)
    ap.add_argument("--final", action="store_true", help="mark the combination final (not provisional)")
    ap.add_argument("--out", help="write here instead of analyzers/calibrations/<profile>.combination.json")
    args = ap.parse_args()
    t0 = time.time()
    model, games, m, pg_groups, pe_groups = load_dev(args, "fit_combination")
    grids = move_grids(model, m)
    profile = get_profile(args.profile)

    rows = Rows()
    prefixes = set(PREFIXES)
    for gi, g in enumerate(games):  # extract() appends white then black for each game
        for grp in (pg_groups[2 * gi], pg_groups[2 * gi + 1]):
            if grp.moves:
                replay(model, m, grids, grp.moves, game_class(g, False), lambda k, i: k in prefixes, rows, "game",
                       grp.truth, g.event, True)
    for grp in pe_groups:
        if not grp.moves:
            continue
        pg = m.pg[grp.moves]
        ends = set(np.asarray(grp.moves)[np.flatnonzero(np.diff(pg))].tolist())  # the last move of each game but the last
        event = games[int(pg[0]) // 2].event
        replay(model, m, grids, grp.moves, grp.tclass, lambda k, i, ends=ends: i in ends, rows, "event", grp.truth, event,
               len(set(pg.tolist())) >= 5)
    kind, n, X, y, ev, pub, final = rows.arrays()
    print(f"{len(y)} rows: {int((kind == 'game').sum())} player-game prefixes and ends, {int((kind == 'event').sum())} "
          f"player-event game ends; {len(set(ev))} events; {time.time() - t0:.0f} s")

    pred = oof(X, y, ev, args.folds)
    print(f"\n1. cross-validated ({args.folds} folds by event), at the end of each scope; constant = the rows' own mean (oracle)")
    print("\n| estimate | rows | MAE | cut vs constant | bias | r |\n|---|---|---|---|---|---|")
    for label, sel in (("player-game", (kind == "game") & final), ("player-event (5+ games)", (kind == "event") & final)):
        print(report(f"{label}: move model, moves only", pub[sel], y[sel]))
        print(report(f"{label}: combination", pred[sel], y[sel]))
        print(report(f"{label}: constant", np.full(sel.sum(), y[sel].mean()), y[sel]))

    resid = y - pred
    bins = np.searchsorted(EDGES, n, side="right")
    table = [np.quantile(resid[bins == b], TAILS) if (bins == b).sum() >= 30 else None for b in range(len(EDGES) + 1)]
    for b in range(len(table)):  # a bin too thin to estimate takes its neighbour's quantiles
        if table[b] is None:
            table[b] = next(t for t in (table[b - 1:b] + table[b + 1:]) if t is not None)
    quantiles = [t for t in table if t is not None]
    assert len(quantiles) == len(table)  # every thin bin took a neighbour's
    comb = Combination(profile.name, FEATURES, (0.0,) * (2 * len(FEATURES)), 0.0, EDGES, TAILS,
                       tuple(tuple(round(float(q), 1) for q in t) for t in quantiles))
    print("\n2. interval from the cross-validated residuals, by moves seen (rows of every kind)")
    print("\n| moves seen | rows | MAE | 95 % half-width | in 95 % | in 68 % |\n|---|---|---|---|---|---|")
    lows = ["<" + str(EDGES[0])] + [f"{a}-{b - 1}" for a, b in zip(EDGES, EDGES[1:], strict=False)] + [f"{EDGES[-1]}+"]
    for b, label in enumerate(lows):
        sel = bins == b
        if not sel.any():
            continue
        lo95, hi95, lo68, hi68 = (comb.residual_quantile(int(n[sel][0]), p) for p in (0.025, 0.975, 0.16, 0.84))
        r = resid[sel]
        print(f"| {label} | {sel.sum()} | {np.mean(np.abs(r)):.0f} | {(hi95 - lo95) / 2:.0f} | "
              f"{np.mean((r >= lo95) & (r <= hi95)):.1%} | {np.mean((r >= lo68) & (r <= hi68)):.1%} |")

    print("\n3. ablation: cross-validated MAE at the end of each scope with a group of inputs left out (lower is better)")
    print("\n| inputs | player-game MAE | player-event MAE |\n|---|---|---|")
    sel_g, sel_e = (kind == "game") & final, (kind == "event") & final
    print(f"| all | {np.mean(np.abs(resid[sel_g])):.0f} | {np.mean(np.abs(resid[sel_e])):.0f} |")
    for name, cols in GROUPS.items():
        Xa = X.copy()
        Xa[:, [FEATURES.index(c) for c in cols]] = 0.0  # a constant column carries nothing
        ra = y - oof(Xa, y, ev, args.folds)
        print(f"| without {name} | {np.mean(np.abs(ra[sel_g])):.0f} | {np.mean(np.abs(ra[sel_e])):.0f} |")

    fit = ridge().fit(phi(X), y)
    scaler, reg = fit[0], fit[-1]
    w = reg.coef_ / scaler.scale_
    out = Combination(
        profile.name, FEATURES, tuple(round(float(v), 8) for v in w), round(float(reg.intercept_ - w @ scaler.mean_), 6),
        EDGES, TAILS, comb.residual_quantiles, model_fitted_on=model.fitted_on,
        fitted_on=f"{len(games)} rated-dev games (player-events, seed {args.seed}); {len(y)} scope rows",
        command=f"python bench/fit_combination.py --profile {profile.name} --dev {args.dev} --seed {args.seed} "
                f"--folds {args.folds}" + (" --final" if args.final else ""),
        provisional=not args.final,
        extra={"ridge_alpha": float(reg.alpha_),
               "cv_mae_game": round(float(np.mean(np.abs(resid[sel_g]))), 1),
               "cv_mae_event": round(float(np.mean(np.abs(resid[sel_e]))), 1)},
    )
    dest = args.out or str(ROOT / "analyzers" / "calibrations" / f"{profile.name}.combination.json")
    out.save(dest)
    print(f"\n4. ridge alpha {reg.alpha_:.3g}; written {dest}")


if __name__ == "__main__":
    main()
