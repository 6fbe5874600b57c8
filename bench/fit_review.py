"""Fit the review's expected matches (streamer/review.py, docs/models.md s. 7) on rated-dev. Never on rated-holdout.

    python bench/fit_review.py [--profile fast] [--dev 300] [--seed 0] [--write]

The review matches a player's moves against a deeper search's first choice (profile ``deep``: depth 12, one PV),
each expected with the move model's probability p of that move, which the model computes from the service's
shallower values. There the deeper choice is often second or third, and honest players find it more often than
those values say: uncorrected, the review's z of honest held-out player-events has mean +3.4 and sd 2.6. This fits

    P(match) = sigmoid(b0 + b1 logit(p) + b2 top)      (analyzers.fairplay.ReviewCalibration)

by maximum likelihood (scikit-learn) on every counted move of the rated-dev player-events sample (the first
``--dev`` games of the sample bench/warm_cache.py analyses; the service's analyses come from the analysis cache, the
depth-12 searches are made here and cached), and prints, per player-event of 40+ counted moves, the review's z
with the raw p and with the fit cross-validated by event (two folds: no event on both sides). ``--write`` saves
analyzers/calibrations/<profile>.review.json, fitted on every move, with the command.

Needs scikit-learn (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import defaultdict

import numpy as np
from common import ANALYSIS_CACHE, ROOT, add_data_argument, data_dir
from sklearn.linear_model import LogisticRegression

from analyzers.engine import EnginePool
from analyzers.fairplay import DEFAULT_MIN_MOVES, FairPlayStats, ReviewCalibration
from analyzers.profiles import get_profile
from analyzers.ratingmodel import load_move_model
from schemas import MoveAssessment
from streamer.batch import assess_games, sample_player_events
from streamer.pipeline import PipelineConfig
from streamer.review import REVIEW_PROFILE, first_choices, review_move

#: One row per counted move: (event, player id, the service's assessment, the deeper search's first choice).
Row = tuple[str, str, MoveAssessment, str]


async def rows(args: argparse.Namespace, config: PipelineConfig) -> list[Row]:
    games = sample_player_events(data_dir(args, "pgn/rated-dev") / "pgn" / "rated-dev", args.dev, seed=args.seed)
    limits = get_profile(REVIEW_PROFILE).limits
    async with EnginePool(size=args.engines, cache_path=ANALYSIS_CACHE) as pool:
        assessed = await assess_games(games, pool, config)
        units = [(g, color) for g in games for color in ("white", "black")]
        firsts = await first_choices(pool, units, assessed, limits)
    out: list[Row] = []
    for g, color in units:
        deep = firsts.get((g.game_id, color), {})
        pid = g.white.id if color == "white" else g.black.id
        out += [(g.event, pid, a, deep[a.ply]) for a in assessed.get(g.game_id, []) if a.color == color and a.ply in deep]
    return out


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logistic regression by maximum likelihood (scikit-learn, no penalty): b over the columns of ``x``, whose first
    column is the intercept's ones."""
    lr = LogisticRegression(penalty=None, fit_intercept=False, tol=1e-10, max_iter=1000).fit(x, y)
    return lr.coef_[0]


def design(raw: list[tuple[float, bool, int]]) -> tuple[np.ndarray, np.ndarray]:
    p = np.clip(np.array([r[0] for r in raw]), 1e-6, 1 - 1e-6)
    x = np.column_stack([np.ones(len(raw)), np.log(p / (1 - p)), [float(r[1]) for r in raw]])
    return x, np.array([r[2] for r in raw], dtype=float)


def event_z(data: list[Row], model, calibration: ReviewCalibration | None) -> list[float]:  # noqa: ANN001
    """The review's match z per player-event with DEFAULT_MIN_MOVES+ counted moves."""
    scopes: dict[tuple[str, str], FairPlayStats] = defaultdict(FairPlayStats)
    for event, pid, a, deep in data:
        scopes[(event, pid)].add(review_move(a, deep, model, calibration))
    return [s.z_match for s in scopes.values() if s.n >= DEFAULT_MIN_MOVES]


def describe(label: str, zs: list[float]) -> None:
    z = np.array(zs)
    print(f"{label:<34} {len(z):>5} {z.mean():+6.2f} {z.std(ddof=1):5.2f} "
          + "  ".join(f"{np.mean(z >= t):6.1%}" for t in (2.0, 3.0, 4.75)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--dev", type=int, default=300, help="games of the rated-dev player-events sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", type=int, default=2)
    ap.add_argument("--write", action="store_true")
    add_data_argument(ap)
    args = ap.parse_args()
    config = PipelineConfig(get_profile(args.profile))
    model = load_move_model(args.profile)
    if model is None:
        raise SystemExit(f"profile {args.profile} has no move model")
    data = asyncio.run(rows(args, config))

    def raw(part: list[Row]) -> list[tuple[float, bool, int]]:
        out = []
        for _, _, a, deep in part:
            m = review_move(a, deep, model)
            if m is not None:
                out.append((m.p_top, deep == a.candidates[0].uci, m.matched))
        return out

    events = sorted({r[0] for r in data})
    fold_of = {e: i % 2 for i, e in enumerate(events)}
    cv: list[float] = []
    for k in (0, 1):
        b = fit(*design(raw([r for r in data if fold_of[r[0]] != k])))
        cv += event_z([r for r in data if fold_of[r[0]] == k], model, ReviewCalibration(*map(float, b)))
    b = fit(*design(raw(data)))
    final = ReviewCalibration(*map(float, b), command=f"python bench/fit_review.py --profile {args.profile} --dev {args.dev} "
                                                      f"--seed {args.seed} --write")
    x, y = design(raw(data))
    print(f"review calibration: profile {args.profile}, review {get_profile(REVIEW_PROFILE).limits.key}, {len(y)} counted moves "
          f"of {len({(r[0], r[1]) for r in data})} rated-dev player-events ({len(events)} events); matched {y.mean():.3f}, "
          f"raw model p {np.mean(1 / (1 + np.exp(-x[:, 1]))):.3f}")
    print(f"P(match) = sigmoid({final.b0:+.3f} {final.b1:+.3f} logit(p) {final.b2:+.3f} top)")
    print("\nreview z per player-event (40+ counted moves)   n   mean    sd  >=2.0  >=3.0  >=4.75")
    describe("raw model p", event_z(data, model, None))
    describe("fitted, cross-validated by event", cv)
    describe("fitted on all (in-sample)", event_z(data, model, final))
    if args.write:
        path = ROOT / "analyzers" / "calibrations" / f"{args.profile}.review.json"
        path.write_text(json.dumps(final.to_dict(), indent=2) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
