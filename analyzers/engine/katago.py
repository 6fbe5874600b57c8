"""One KataGo analysis engine process for Go: start, one deterministic evaluation of a position, stop.

KataGo's analysis engine (``katago analysis -model M -config C``) reads one JSON query per line on stdin and answers
each with one JSON line on stdout. A query here is one position: the game's moves so far, the board size, komi and
Chinese (area) rules, evaluated with ``maxVisits`` visits (:class:`KataGoLimits`; 1, the default, is the network alone:
no search, about 0.9 s on two CPU cores with OpenCL on the CPU, docs/go.md). The answer kept
(:class:`~.gtp.GoAnalysis`) is

- ``lead``: the score lead of the side to move in points (KataGo's ``rawLead``, the network's own estimate, at one
  visit; the search's ``scoreLead`` at more);
- ``policy``: the network's prior over the moves, every move with at least ``POLICY_FLOOR`` (10^-4: a move below it is
  read at the floor; the policy of a position in a few hundred bytes instead of 362 numbers), best first;
- ``candidates``: the policy's first choice with the lead, the one candidate a network evaluation values.

What a move is worth is read from two answers, the position before it and the position after (docs/models.md s. 11):
the points it lost, the mover's lead before plus the opponent's lead after, and the prior the network gave it.

Determinism: ``deploy/katago/analysis.cfg`` evaluates with one thread and a fixed board orientation
(``nnRandomize = false``), so the same query gives the same answer. The network reads the board, the ko point and the
last five moves (its history features), so the cache key (:func:`katago_key`) is the position with those moves.
Unlike GNU Go one process serves every search: KataGo keeps no state between queries that changes an answer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EngineCrashed, EngineError
from ..goboard import PASS, GoPosition, from_gtp, to_gtp
from .gtp import POLICY_FLOOR, GoAnalysis, GoLimits, first_answers, kill_process, spawn

#: Where ``deploy/katago/setup.sh`` puts KataGo, its network and its configuration (``KIBITZ_KATAGO_HOME`` overrides it).
KATAGO_HOME = Path(os.environ.get("KIBITZ_KATAGO_HOME", Path(__file__).resolve().parents[2] / ".cache" / "katago"))
#: Moves of history the network reads (KataGo's input features): part of the cache key.
HISTORY = 5
#: Longest answer line accepted (a 19x19 policy is about 5 KB of JSON).
MAX_LINE = 1 << 20


def default_options() -> dict[str, Any]:
    """The network and configuration: ``$KIBITZ_KATAGO_MODEL`` / ``$KIBITZ_KATAGO_CONFIG``, else setup.sh's."""
    return {"model": os.environ.get("KIBITZ_KATAGO_MODEL", str(KATAGO_HOME / "model.bin.gz")),
            "config": os.environ.get("KIBITZ_KATAGO_CONFIG", str(KATAGO_HOME / "analysis.cfg"))}


@dataclass(frozen=True, slots=True)
class KataGoLimits:
    """Visits per evaluation: 1 is the network alone (no search); more search the position (and cost as many times)."""

    visits: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.visits <= 1_000_000:
            raise ValueError("KataGo visits are 1-1000000")

    @property
    def key(self) -> str:
        return f"v{self.visits}"


#: What a Go pool searches to: GNU Go's level or KataGo's visits.
GoEngineLimits = GoLimits | KataGoLimits


def katago_key(pos: GoPosition) -> str:
    """The cache key: the position (:meth:`GoPosition.key`) and its last :data:`HISTORY` moves, which the network reads."""
    return f"{pos.key()} h={','.join(f'{c}{m}' for c, m in pos.moves[-HISTORY:])}"


def policy_move(index: int, size: int) -> str:
    """The GTP move of an index of KataGo's policy array (rows from the top of the board, then pass)."""
    if index == size * size:
        return PASS
    return to_gtp((size - 1 - index // size, index % size))


def policy_index(move: str, size: int) -> int:
    """The index of a GTP move in KataGo's policy array."""
    point = from_gtp(move, size)
    if point is None:
        return size * size
    row, col = point
    return (size - 1 - row) * size + col


def query(pos: GoPosition, limits: KataGoLimits, qid: str) -> dict[str, Any]:
    """The analysis query of ``pos``: its moves, evaluated at the last turn. A record that lets one side move twice
    (a pass left out) gets the pass back, so that KataGo's side to move is the position's."""
    moves = [[c.upper(), m] for c, m in pos.moves]
    if moves and moves[-1][0] == pos.to_move.upper():
        moves.append(["W" if pos.to_move == "b" else "B", PASS])
    q: dict[str, Any] = {"id": qid, "moves": moves, "rules": "chinese", "komi": pos.komi, "boardXSize": pos.size,
                         "boardYSize": pos.size, "analyzeTurns": [len(moves)], "maxVisits": limits.visits,
                         "includePolicy": True}
    if not moves:
        q["initialPlayer"] = pos.to_move.upper()
    return q


def read_answer(answer: Mapping[str, Any], pos: GoPosition, engine: str, limits: KataGoLimits, seconds: float) -> GoAnalysis:
    """A :class:`GoAnalysis` from KataGo's answer to :func:`query`; :class:`EngineCrashed` when it is not one."""
    try:
        root = answer["rootInfo"]
        # one visit: the network's own estimate; a search's: what the search made of it
        lead = float(root["scoreLead"] if limits.visits > 1 or "rawLead" not in root else root["rawLead"])
        prior = [float(p) for p in answer["policy"]]
    except (KeyError, TypeError, ValueError) as e:
        raise EngineCrashed(f"KataGo answered without a score lead and a policy: {str(answer)[:200]!r}") from e
    if len(prior) != pos.size * pos.size + 1:
        raise EngineCrashed(f"KataGo's policy has {len(prior)} entries for a {pos.size}x{pos.size} board")
    kept = sorted(((policy_move(i, pos.size), p) for i, p in enumerate(prior) if p >= POLICY_FLOOR),
                  key=lambda mp: (-mp[1], mp[0]))
    if not kept:
        raise EngineCrashed("KataGo's policy gives no move any prior")
    policy = tuple((m, round(p, 6)) for m, p in kept)
    return GoAnalysis(key=katago_key(pos), candidates=((policy[0][0], round(lead, 3)),), engine=engine,
                      limits=limits.key, time=seconds, lead=round(lead, 3), policy=policy)


class KataGoEngine:
    """One KataGo analysis process; the same coroutines as :class:`~.gtp.GtpEngine` (start, analyse, kill, quit)."""

    def __init__(self, command: str | list[str], options: Mapping[str, Any]) -> None:
        opts = {**default_options(), **options}
        self.command = ([command, "analysis", "-model", str(opts["model"]), "-config", str(opts["config"])]
                        if isinstance(command, str) else list(command))
        self.options = opts
        self.name = "?"
        self._proc: asyncio.subprocess.Process | None = None
        self._ids = itertools.count()

    #: Seconds for a new process to load its network and answer its first queries (a few seconds on the CPU; the
    #: OpenCL tuning that could take minutes is skipped by deploy/katago/setup.sh's tuning file).
    start_timeout = 300.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def start(self) -> None:
        self._proc = await spawn(self.command, MAX_LINE)
        try:
            version, models = await first_answers(self, self._identify(), "KataGo's version and model queries",
                                                  "KataGo's analysis engine")
        except EngineCrashed as e:
            raise EngineCrashed(f"KataGo did not start ({e}): is {self.options['model']} a KataGo network and "
                                f"{self.options['config']} an analysis configuration? (deploy/katago/setup.sh installs "
                                "both)") from e
        self.name = f"KataGo {version.get('version', '?')} {models[0].get('internalName', '?')}"

    async def _identify(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        version = await self._ask({"id": f"v{next(self._ids)}", "action": "query_version"})
        # the network by its own name (part of every cache key: another network's answers are not these)
        models = (await self._ask({"id": f"m{next(self._ids)}", "action": "query_models"})).get("models") or [{}]
        return version, models

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return the answer with its id; KataGo's warnings (same id, ``warning``) are skipped and
        an ``error`` answer raises :class:`EngineCrashed`."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise EngineCrashed("the KataGo engine is not running")
        proc.stdin.write(json.dumps(request).encode() + b"\n")
        await proc.stdin.drain()
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                raise EngineCrashed("KataGo exited during a query")
            try:
                answer = json.loads(raw)
            except ValueError as e:
                raise EngineCrashed(f"KataGo answered garbage: {raw[:200]!r}") from e
            if not isinstance(answer, dict) or answer.get("id") != request["id"]:
                continue  # an answer to a query given up on earlier (a timed-out search's late answer)
            if "error" in answer:
                raise EngineCrashed(f"KataGo refused a query: {answer['error']}")
            if "warning" in answer and "rootInfo" not in answer and "action" not in answer:
                continue
            return answer

    async def analyse(self, pos: GoPosition, limits: KataGoLimits) -> GoAnalysis:
        if self._proc is None:  # a slot whose restart failed: start it again here
            try:
                await self.start()
            except (OSError, EngineError) as e:
                await self.kill()
                raise EngineCrashed(f"cannot start engine {self.command!r}: {e!r}") from e
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await self._ask(query(pos, limits, f"q{next(self._ids)}"))
        return read_answer(answer, pos, self.name, limits, loop.time() - started)

    async def quit(self, timeout: float = 5.0) -> None:
        if self._proc is None:
            return
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # KataGo finishes what it has and exits at the end of its input
            await asyncio.wait_for(self._proc.wait(), timeout)
        except Exception:  # noqa: BLE001 - whatever went wrong, make sure the process is gone
            await self.kill()
        finally:
            self._proc = None

    async def kill(self, reap_timeout: float = 5.0) -> None:
        """Kill the process and wait until it is reaped, so no zombie stays behind."""
        proc, self._proc = self._proc, None
        await kill_process(proc, reap_timeout)
