"""Would a learned combination on top of the move model rate players better? Cross-validated on rated-dev only.

    python bench/stacking_cv.py [--profile fast] [--dev 6400] [--seed 0] [--folds 5]

Takes the rated-dev player-events that ``bench/warm_cache.py`` analysed (drawn as it draws them; games not in the
analysis cache are left out and counted) and, per player-game and per player-event (5+ games), computes the features
the live combination keeps as running sums (:class:`analyzers.combination.ScopeFeatures`, docs/models.md s. 10), so
that a combination of them still updates per move:

- the played move's win-probability loss delta (docs/models.md s. 9): its mean, the mean of sqrt(delta), the share
  of moves with delta = 0 and above 0.02, 0.05, 0.1, 0.2;
- position difficulty: the mean loss of the second candidate, the mean number of candidates within 0.05 of the best,
  the share of best moves where the second candidate is more than 0.1 worse;
- the move model itself: mean and sd of the tempered likelihood convolved with the person effect (no prior);
- clocks (:func:`analyzers.ratingmodel.clock_inputs`): mean and sd of x_spent, the last x_left, the share of moves
  played in under e^-2 of base / 40; the time-control class;
- for a player-game, the opponent's features in the same game (moves only; no rating of either player is used).

Each learner is fitted on four fifths of the **events** and predicts the fifth (event-disjoint, hence player-disjoint:
no event and no player is on both sides of a split). Printed against the published estimate (the move model's
posterior with its time-control population prior; the combination publishes on top of it) and a constant (the sample mean: an oracle) on the same rows.
Needs scikit-learn (``pip install -e '.[bench]'``). Nothing here touches rated-holdout.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

import numpy as np
from common import add_data_argument, data_dir
from fit_model import analysed, extract, game_class

from analyzers.combination import CLASSES, CLOCK_FEATURES, FEATURES, MoveFeatures, ScopeFeatures, moments, phi
from analyzers.profiles import get_profile
from analyzers.ratingmodel import FLAT_PRIOR, RATING_GRID, MoveModel, choice_loglik, load_move_model
from streamer.batch import sample_player_events

#: The class indicators end :data:`FEATURES`; the opponent's features are taken without them.
N_OWN, N_OPP = len(FEATURES), len(FEATURES) - len(CLASSES)


def move_grids(model: MoveModel, m) -> np.ndarray:  # noqa: ANN001
    """log P(played | R) on the rating grid for every move (moves x grid), in chunks, each move with its class's
    parameters and clock shift (as the live player step computes it)."""
    out = np.zeros((len(m.played), RATING_GRID.size), np.float32)
    with np.errstate(divide="ignore"):
        log_d = np.log(m.deltas)
    shift = m.clock @ np.asarray(model.clock)
    for tc in np.unique(m.tclass):
        rows = np.flatnonzero(m.tclass == tc)
        log_s, c = model._grid_params(str(tc))
        for a in range(0, rows.size, 20000):
            r = rows[a:a + 20000]
            out[r] = choice_loglik(log_d[r, None, :], np.broadcast_to(m.played[r, None], (r.size, RATING_GRID.size)),
                                   log_s[None, :] + shift[r, None], c[None, :])
    return out


class Featurizer:
    """The live features (:class:`~analyzers.combination.ScopeFeatures`) of any set of counted moves, replayed in order."""

    def __init__(self, model: MoveModel, m) -> None:  # noqa: ANN001
        self.model, self.m = model, m
        self.grids = move_grids(model, m)

    def loglik(self, idx: np.ndarray) -> np.ndarray:
        return self.grids[idx].sum(axis=0).astype(float)

    def __call__(self, idx: list[int], tclass: str) -> list[float]:
        feats, m = ScopeFeatures(), self.m
        for i in idx:
            d = m.deltas[i]
            feats.add(MoveFeatures.of(d[np.isfinite(d)], int(m.played[i]), (float(m.clock[i, 0]), float(m.clock[i, 1])),
                                      bool(m.clocked[i])))
        return list(feats.vector(*moments(self.model.posterior(self.loglik(np.asarray(idx)), FLAT_PRIOR)), tclass))


def cross_validated(make, X: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int) -> np.ndarray:  # noqa: ANN001
    from sklearn.model_selection import GroupKFold

    pred = np.zeros_like(y)
    for train, test in GroupKFold(folds).split(X, y, groups):
        pred[test] = make().fit(X[train], y[train]).predict(X[test])
    return pred


def ridge():  # noqa: ANN201
    from sklearn.linear_model import RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-2, 4, 13)))


def boosting():  # noqa: ANN201
    from sklearn.ensemble import HistGradientBoostingRegressor

    return HistGradientBoostingRegressor(loss="absolute_error", max_iter=300, learning_rate=0.05, max_leaf_nodes=15,
                                         min_samples_leaf=40, random_state=0)


def report(name: str, pred: np.ndarray, y: np.ndarray) -> None:
    err = pred - y
    mae, const = np.mean(np.abs(err)), np.mean(np.abs(y - y.mean()))
    r = f"{np.corrcoef(pred, y)[0, 1]:.2f}" if np.std(pred) > 0 else "   -"
    print(f"| {name:<52} | {mae:4.0f} | {1 - mae / const:+6.1%} | {err.mean():+5.0f} | {r} |")


def dev_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of the scripts that learn on rated-dev player-events (this one and fit_combination.py)."""
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=6400, help="rated-dev games, as whole player-events (as warm_cache draws them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--folds", type=int, default=5)
    add_data_argument(ap)


def load_dev(args: argparse.Namespace, script: str):  # noqa: ANN201
    """The profile's move model, the analysed rated-dev games (drawn as warm_cache draws them) and their counted
    moves: (model, games, Moves, player-game groups, player-event groups). No engine runs."""
    logging.getLogger("kibitz").setLevel(logging.ERROR)  # each unanalysed game is a rejection; counted below instead
    data = data_dir(args, "pgn/rated-dev")
    profile = get_profile(args.profile)
    model = load_move_model(profile.name)
    if model is None:
        sys.exit(f"profile {profile.name} has no move model")
    t0 = time.time()
    dev = sample_player_events(data / "pgn" / "rated-dev", args.dev, seed=args.seed)
    complete, results = analysed([(g, False) for g in dev], profile)
    games = [g for g, _ in complete]
    m, pg_groups, pe_groups = extract(complete, results)
    print(f"{script}: profile {profile.name}, move model {model.fitted_on}; {len(games)} of {len(dev)} rated-dev "
          f"games analysed, {len(m.played)} counted moves; {time.time() - t0:.0f} s to load")
    return model, games, m, pg_groups, pe_groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    dev_arguments(ap)
    args = ap.parse_args()
    model, games, m, pg_groups, pe_groups = load_dev(args, "stacking_cv")
    feat = Featurizer(model, m)

    # per player-game: extract() appends white then black for each game
    rows: list[list[float]] = []
    truths: list[float] = []
    events: list[str] = []
    published: list[float] = []
    for gi, g in enumerate(games):
        sides = (pg_groups[2 * gi], pg_groups[2 * gi + 1])
        if not all(s.moves for s in sides):
            continue
        tc = game_class(g, False)
        f = [feat(s.moves, tc) for s in sides]
        for me, (mine, theirs) in enumerate(((f[0], f[1]), (f[1], f[0]))):
            rows.append(mine + theirs[:N_OPP])
            truths.append(sides[me].truth)
            events.append(g.event)
            est = model.estimate(feat.loglik(np.asarray(sides[me].moves)), len(sides[me].moves), model.prior_for(tc))
            published.append(est.rating)
    X, y, groups = np.asarray(rows, float), np.asarray(truths, float), np.asarray(events)
    own = list(range(N_OWN))
    no_clock = [c for c in own if FEATURES[c] not in CLOCK_FEATURES]
    print(f"\nper player-game: {len(y)} player-games in {len(set(groups))} events; FIDE mean {y.mean():.0f}, sd {y.std():.0f}; "
          f"{args.folds}-fold cross-validation, event-disjoint")
    print("\n| estimate | MAE | cut vs constant | bias | r |\n|---|---|---|---|---|")
    report("move model alone, moves only", np.asarray(published), y)
    report("ridge on own features", cross_validated(ridge, phi(X[:, own]), y, groups, args.folds), y)
    report("ridge on own features, no clock", cross_validated(ridge, phi(X[:, no_clock]), y, groups, args.folds), y)
    report("ridge on own and the opponent's features", cross_validated(ridge, phi(X), y, groups, args.folds), y)
    report("gradient boosting, own and the opponent's features", cross_validated(boosting, X, y, groups, args.folds), y)
    report("constant = sample mean (oracle)", np.full_like(y, y.mean()), y)

    # per player-event with 5+ games: the same own features over all the player's moves in the event
    rows_e: list[list[float]] = []
    truths_e: list[float] = []
    events_e: list[str] = []
    pub_e: list[float] = []
    seen_in: dict[int, tuple[str, set[str]]] = {}  # player-event -> (its event, its games)
    for gi, g in enumerate(games):
        for side in (pg_groups[2 * gi], pg_groups[2 * gi + 1]):
            if side.moves:
                seen_in.setdefault(int(m.pe[side.moves[0]]), (g.event, set()))[1].add(g.game_id)
    for pe, grp in enumerate(pe_groups):
        if pe not in seen_in or len(seen_in[pe][1]) < 5:
            continue
        tc = grp.tclass
        rows_e.append(feat(grp.moves, tc))
        truths_e.append(grp.truth)
        events_e.append(seen_in[pe][0])
        pub_e.append(model.estimate(feat.loglik(np.asarray(grp.moves)), len(grp.moves), model.prior_for(tc)).rating)
    Xe, ye, ge = np.asarray(rows_e, float), np.asarray(truths_e, float), np.asarray(events_e)
    print(f"\nper player-event (5+ games): {len(ye)} player-events in {len(set(ge))} events; FIDE mean {ye.mean():.0f}, "
          f"sd {ye.std():.0f}")
    print("\n| estimate | MAE | cut vs constant | bias | r |\n|---|---|---|---|---|")
    report("move model alone, moves only", np.asarray(pub_e), ye)
    report("ridge on own features", cross_validated(ridge, phi(Xe), ye, ge, args.folds), ye)
    report("ridge on own features, no clock", cross_validated(ridge, phi(Xe[:, no_clock]), ye, ge, args.folds), ye)
    report("constant = sample mean (oracle)", np.full_like(ye, ye.mean()), ye)


if __name__ == "__main__":
    main()
