"""Engine profiles: the named search limits every analysis, cache key and calibration is tied to.

A profile fixes the limit (depth or nodes) and the number of principal variations. Results under different
profiles are different numbers: a calibration is only valid for the profile it was fitted on.
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine.analysis import Limits


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Search limits and which moves count.

    ``skip_plies``: opening plies not counted (book moves say little about skill); ``decided_cp``: positions whose
    best score is beyond this (side to move) are not counted for the posterior (docs/accuracy.md: decided
    positions are noise, any move wins or loses).
    """

    name: str
    depth: int | None = None
    nodes: int | None = None
    multipv: int = 10
    skip_plies: int = 16
    decided_cp: int = 500
    #: mean seconds per search on the reference machine (2 cores; bench/warm_cache.py's totals): the engine
    #: pool's default deadline per search is derived from it (:attr:`search_timeout`)
    search_seconds: float = 0.05

    def __post_init__(self) -> None:
        self.limits  # noqa: B018 - Limits validates (exactly one of depth or nodes, multipv >= 1)

    @property
    def gains_only(self) -> bool:
        """One principal variation: no position has the two candidates the posterior over c needs, so the profile
        rates by gain histograms (Algorithm 4) alone and its calibration has no c map."""
        return self.multipv == 1

    @property
    def search_timeout(self) -> float:
        """The default deadline of one search: 50x its mean cost, at least MIN_SEARCH_TIMEOUT. A hung engine holds
        its game (and its stage's transaction) this long, twice at most (the pool retries once on a fresh process),
        instead of a fixed minute; a slow but sound search on a loaded machine is still far inside it."""
        return max(MIN_SEARCH_TIMEOUT, 50.0 * self.search_seconds)

    @property
    def limits(self) -> Limits:
        """The search limits of this profile; ``limits.key`` is their short form in cache keys and messages."""
        return Limits(depth=self.depth, nodes=self.nodes, multipv=self.multipv)


#: The shortest default search deadline, seconds (see EngineProfile.search_timeout).
MIN_SEARCH_TIMEOUT = 5.0

#: The profiles kibitz ships.
#: - ``standard``: the Bayesian paper's setting as docs/accuracy.md uses it (depth 10, multipv 10).
#: - ``fast`` (the default): depth 8, multipv 5; about as accurate as ``standard`` on the held-out games for a fifth of
#:   the engine time (docs/accuracy.md), the best accuracy per CPU-second measured.
#: - ``deep``: Ferreira's method, a single principal variation at a fixed depth, for bench/ferreira_tables.py. The
#:   paper used depth 20 (Houdini 1.5a). Depth 12 is what this 2-core machine affords for a calibration plus 1,000+
#:   held-out player-games within one working session (0.067 s per position; depth 14 is 0.15 s, depth 16 0.33 s;
#:   ``ferreira_tables.py --depth 16`` reproduces the paper's engine strength). Single-PV depth 12 still searches
#:   deeper than ``standard``. With one PV no move is counted for the posterior over c (it needs two candidates or
#:   more), so ``deep`` rates by gains only (Algorithm 4): its calibration has no c map and the live service refuses it.
PROFILES: dict[str, EngineProfile] = {
    p.name: p
    for p in (
        # fast: 5,500 engine-seconds for 130,638 searches of rated games (bench/warm_cache.py, 2 engines)
        EngineProfile("fast", depth=8, multipv=5, search_seconds=0.042),
        EngineProfile("standard", depth=10, multipv=10, search_seconds=0.21),
        EngineProfile("deep", depth=12, multipv=1, search_seconds=0.067),
    )
}
DEFAULT_PROFILE = "fast"


def get_profile(name: str) -> EngineProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}") from None
