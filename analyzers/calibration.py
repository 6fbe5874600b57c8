"""Calibrations: from model parameters (c, a gain histogram) to Elo, for one engine profile.

A :class:`Calibration` is fitted from rated games (``bench/fit_calibration.py``) and saved as a small JSON file in
``analyzers/calibrations/<profile>.json``. It holds

- ``engine_elo``: the engine spike's strength for Ferreira's Algorithm 4 (Algorithm 3 on the fitting set);
- ``c_knots``: a monotone piecewise-linear map c -> Elo (linear beyond the end knots), from a fit of FIDE rating
  on the posterior mean of c per player-game; empty for a single-PV profile (``deep``), which counts no move for the
  posterior: such a calibration is *gains only* and rates by Algorithm 4 alone;
- ``residual_sd``: the sd of FIDE rating around that fit per player-game, for reference;
- ``model_sd`` / ``gain_model_sd``: the part of that residual that more moves would not remove (residual variance
  minus the mean sampling variance of the estimates, floored at 0), for the posterior and the gain estimators;
- ``error_var`` (optional): the posterior estimate's squared error against FIDE ratings as a function of the counted
  moves n behind it, a + b / n, fitted on rated-dev players followed through their events (5 to 160+ moves).

An interval is the posterior's point estimate +/- z sqrt(a + b / n) when ``error_var`` is there: it is what the
error was on players like these, after that many moves. Otherwise (and always for Algorithm 4) it is the sampling
interval (the posterior's c interval mapped through the monotone knots, or Algorithm 4's interval) widened by the
model error: half-width = z sqrt(sampling_sd^2 + model_sd^2). Both exist because the posterior's own sd treats moves
as independent draws from the model and is far too small: alone, a long game would claim +/- 30 Elo for an
estimator whose error is hundreds of points. The widened form does not narrow with moves, though the error does.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .calibrations import read_fitted
from .errors import CalibrationError
from .gain import GainHistogram
from .perceived import DEFAULT_LEVEL, RatingEstimate, spike_rating, z_for
from .posterior import SkillPosterior

#: Perceived ratings are clipped to this range: outside it no data supports them.
ELO_FLOOR, ELO_CEILING = 0.0, 3600.0


@dataclass(frozen=True)
class Calibration:
    profile: str
    engine: str
    engine_elo: float
    c_knots: list[tuple[float, float]]
    residual_sd: float
    model_sd: float = 0.0
    gain_model_sd: float = 0.0
    error_var: tuple[float, float] | None = None
    provisional: bool = True
    fitted_on: str = ""
    command: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.c_knots:
            return  # gains only
        if len(self.c_knots) < 2:
            raise CalibrationError("a c map needs at least two knots (or none, for a gains-only calibration)")
        cs = [c for c, _ in self.c_knots]
        es = [e for _, e in self.c_knots]
        if any(b <= a for a, b in zip(cs, cs[1:])) or any(b < a for a, b in zip(es, es[1:])):
            raise CalibrationError("c knots must be strictly increasing in c and non-decreasing in Elo")

    # -- mapping ----------------------------------------------------------------------------------------
    @property
    def has_c_map(self) -> bool:
        """False for a gains-only calibration: no posterior rating, no fair-play reference c."""
        return bool(self.c_knots)

    def _need_c_map(self) -> None:
        if not self.c_knots:
            raise CalibrationError(f"the {self.profile!r} calibration is gains only (single PV): it has no c -> Elo map")

    def elo_from_c(self, c: float) -> float:
        self._need_c_map()
        cs = np.array([k[0] for k in self.c_knots])
        es = np.array([k[1] for k in self.c_knots])
        if c < cs[0]:
            slope = (es[1] - es[0]) / (cs[1] - cs[0])
            e = es[0] + slope * (c - cs[0])
        elif c > cs[-1]:
            slope = (es[-1] - es[-2]) / (cs[-1] - cs[-2])
            e = es[-1] + slope * (c - cs[-1])
        else:
            e = float(np.interp(c, cs, es))
        return float(min(ELO_CEILING, max(ELO_FLOOR, e)))

    def c_from_elo(self, elo: float) -> float:
        """Inverse map (for a reference rating in fair-play statistics); flat stretches map to their start."""
        self._need_c_map()
        cs = [k[0] for k in self.c_knots]
        es = [k[1] for k in self.c_knots]
        if elo <= es[0]:
            slope = (es[1] - es[0]) / (cs[1] - cs[0])
            return cs[0] + (elo - es[0]) / slope if slope > 0 else cs[0]
        if elo >= es[-1]:
            slope = (es[-1] - es[-2]) / (cs[-1] - cs[-2])
            return cs[-1] + (elo - es[-1]) / slope if slope > 0 else cs[-1]
        return float(np.interp(elo, es, cs))

    def from_posterior(self, post: SkillPosterior, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        self._need_c_map()
        if self.error_var is not None:  # the posterior's own interval is not needed: no quantiles on the hot path
            a, b = self.error_var
            rating, half = self.elo_from_c(post.mean), z_for(level) * math.sqrt(a + b / max(post.n, 1))
            return RatingEstimate(rating, _clip(rating - half), _clip(rating + half), post.n, level)
        mean, _, lo, hi = post.summary(level)
        sampling = RatingEstimate(self.elo_from_c(mean), self.elo_from_c(lo), self.elo_from_c(hi), post.n, level)
        return _widen(sampling, self.model_sd)

    def from_histogram(self, h: GainHistogram, level: float = DEFAULT_LEVEL) -> RatingEstimate:
        """Algorithm 4's rating of ``h``, clipped and widened by the model error."""
        return _gain_estimate(h.count, h.zeros, h.positives, self.engine_elo, self.gain_model_sd, level)

    # -- files ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["c_knots"] = [list(k) for k in self.c_knots]
        d["error_var"] = list(self.error_var) if self.error_var is not None else None
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        try:
            return cls(
                profile=data["profile"], engine=data["engine"], engine_elo=float(data["engine_elo"]),
                c_knots=[(float(c), float(e)) for c, e in data["c_knots"]], residual_sd=float(data["residual_sd"]),
                model_sd=float(data.get("model_sd", 0.0)), gain_model_sd=float(data.get("gain_model_sd", 0.0)),
                error_var=(float(data["error_var"][0]), float(data["error_var"][1])) if data.get("error_var") else None,
                provisional=bool(data.get("provisional", True)), fitted_on=data.get("fitted_on", ""),
                command=data.get("command", ""), extra=dict(data.get("extra", {})),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise CalibrationError(f"malformed calibration: {e}") from e

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        try:
            return cls.from_dict(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise CalibrationError(f"cannot read calibration {path}: {e}") from e


@functools.lru_cache(maxsize=1 << 16)  # per published message; it depends on three counts, which players share
def _gain_estimate(count: int, zeros: int, positives: int, engine_elo: float, model_sd: float,
                   level: float) -> RatingEstimate:
    est = spike_rating(count, zeros, positives, engine_elo, level)
    return _widen(RatingEstimate(_clip(est.rating), _clip(est.low), _clip(est.high), est.n, level), model_sd)


def _clip(x: float) -> float:
    return min(ELO_CEILING, max(ELO_FLOOR, x))


def _widen(est: RatingEstimate, model_sd: float) -> RatingEstimate:
    """Add the model error to a sampling interval (see the module docstring); keeps any asymmetry of the sides."""
    if model_sd <= 0:
        return est
    z = z_for(est.level)
    lo_sd = (est.rating - est.low) / z
    hi_sd = (est.high - est.rating) / z
    low = est.rating - z * math.hypot(lo_sd, model_sd)
    high = est.rating + z * math.hypot(hi_sd, model_sd)
    return RatingEstimate(est.rating, _clip(low), _clip(high), est.n, est.level)


def load_calibration(profile: str) -> Calibration:
    """The calibration shipped for ``profile`` (``analyzers/calibrations/<profile>.json``)."""
    d = read_fitted(f"{profile}.json")
    if d is None:
        raise CalibrationError(f"no calibration shipped for profile {profile!r}; fit one with bench/fit_calibration.py")
    cal = Calibration.from_dict(d)
    if cal.profile != profile:
        raise CalibrationError(f"calibrations/{profile}.json is for profile {cal.profile!r}, not {profile!r}")
    return cal
