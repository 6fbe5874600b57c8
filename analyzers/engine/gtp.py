"""One GTP engine process for Go (GNU Go by default): start, one deterministic search, stop.

A search of a :class:`~analyzers.goboard.GoPosition` is GNU Go's move generation without playing
(``reg_genmove``) followed by ``top_moves`` and ``all_move_values``: every move GNU Go found a reason for, with its
value in points (GNU Go's own estimate of what the move gains: territory, captures, safety). A move it lists no value
for has none: kibitz counts it at 0 points. The candidates' values are the Go counterpart of a multi-PV search's
scores, so the posterior over c and the gain per move read them the same way (docs/models.md s. 11).

Determinism: the engine runs area scoring (``--chinese-rules``, so prisoners do not change any value), a fixed
random seed is set before every search, and the engine's board is brought to the position by replaying the game's
moves from an empty board. The cache key is the position alone
(stones, side to move, ko point, komi: :meth:`GoPosition.key`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ..errors import EngineCrashed, EngineError
from ..goboard import PASS, GoPosition, from_gtp

#: Arguments the default engine is started with (GNU Go): GTP on stdin/stdout, area scoring.
GNUGO_ARGS = ("--mode", "gtp", "--chinese-rules")
#: The seed set before every search (GNU Go breaks ties between equal moves at random).
SEED = 1
#: Longest answer line accepted from an engine: a hostile or broken process cannot make us buffer without bound.
MAX_LINE = 1 << 16
T = TypeVar("T")
#: A network's policy is kept down to this prior (:mod:`.katago`); a move below it is read at it.
POLICY_FLOOR = 1e-4


@dataclass(frozen=True, slots=True)
class GoLimits:
    """GNU Go's strength level (0-10; the engine's own default is 10). Higher reads deeper and costs more."""

    level: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.level <= 10:
            raise ValueError("a GNU Go level is 0-10")

    @property
    def key(self) -> str:
        return f"lvl{self.level}"


@dataclass(frozen=True, slots=True)
class GoAnalysis:
    """One search of one Go position: candidates best first as (GTP move, value in points for the side to move).

    A network evaluation (:mod:`.katago`) also has the position's ``lead`` (points, side to move) and the network's
    ``policy`` (moves with their prior, best first; GNU Go's searches have neither)."""

    key: str
    candidates: tuple[tuple[str, float], ...]
    engine: str
    limits: str
    time: float = 0.0
    lead: float | None = None
    policy: tuple[tuple[str, float], ...] = ()

    def prior(self, move: str) -> float:
        """The policy's prior of ``move``; :data:`POLICY_FLOOR` for a move the policy does not list."""
        m = move.upper()
        return next((p for c, p in self.policy if c.upper() == m), POLICY_FLOOR)

    def judged(self, played: str, after: GoAnalysis | None = None) -> tuple[list[float], int, float | None]:
        """The move ``played`` judged: (candidate values in points, its index among them, a network's prior of it).

        A search's candidates (GNU Go) value moves: :meth:`values`, no prior. A network's evaluation values the
        position, so the move is judged with ``after``, the evaluation of the position after it: (the mover's lead
        before, minus the opponent's lead after), index 1, and the policy's prior of the move."""
        if self.lead is None:
            values, index = self.values(played)
            return values, index, None
        if after is None or after.lead is None:
            raise ValueError("a network's evaluation judges a move with the evaluation of the position after it")
        return [self.lead, -after.lead], 1, self.prior(played)

    def values(self, played: str) -> tuple[list[float], int]:
        """Candidate values and the index of ``played`` among them (appended at 0 points when not listed)."""
        vals = [v for _, v in self.candidates]
        m = played.upper()
        for i, (c, _) in enumerate(self.candidates):
            if c.upper() == m:
                return vals, i
        return [*vals, 0.0], len(vals)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "engine": self.engine, "limits": self.limits, "time": self.time,
                "candidates": [list(c) for c in self.candidates],
                **({"lead": self.lead, "policy": [list(p) for p in self.policy]} if self.lead is not None else {})}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GoAnalysis:
        return cls(key=d["key"], engine=d["engine"], limits=d["limits"], time=d.get("time", 0.0),
                   candidates=tuple((str(m), float(v)) for m, v in d["candidates"]),
                   lead=float(d["lead"]) if d.get("lead") is not None else None,
                   policy=tuple((str(m), float(p)) for m, p in d.get("policy", ())))


def parse_values(text: str, size: int) -> dict[str, float]:
    """Moves and values from ``top_moves`` ("Q16 75.00 P3 74.01") or ``all_move_values`` (one "Q16 75.00" a line)."""
    tokens = text.split()
    if len(tokens) % 2:
        raise EngineCrashed(f"engine answered an odd number of move/value tokens: {text[:200]!r}")
    out: dict[str, float] = {}
    for move, value in zip(tokens[::2], tokens[1::2]):
        try:
            from_gtp(move, size)
            v = float(value)
        except ValueError as e:
            raise EngineCrashed(f"engine answered garbage in a move list: {move!r} {value!r}") from e
        out[move.upper()] = max(v, out.get(move.upper(), v))
    return out


class GtpEngine:
    """One GTP engine process; the same three coroutines as :class:`~.uci.UciEngine` (start, analyse, kill)."""

    def __init__(self, command: str | list[str], options: Mapping[str, Any]) -> None:
        self.command = [command, *GNUGO_ARGS] if isinstance(command, str) else list(command)
        self.options = dict(options)
        self.name = "?"
        self._proc: asyncio.subprocess.Process | None = None
        self._game: tuple[int, float] | None = None  # the engine's board size and komi
        self._level: int | None = None
        self._searched = False

    #: Seconds for a new process to answer ``name`` and ``version`` (GNU Go: milliseconds); a program that is no GTP
    #: engine may never answer.
    start_timeout = 30.0

    async def start(self) -> None:
        self._proc = await spawn(self.command, MAX_LINE)
        self._game, self._level, self._searched = None, None, False
        name, version = await first_answers(self, self._identify(), "GTP's name and version", "a GTP engine")
        self.name = f"{name} {version}".strip() or "unknown GTP engine"

    async def _identify(self) -> tuple[str, str]:
        return await self._send("name"), await self._send("version")

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def _send(self, command: str) -> str:
        """One GTP command; the answer's text. A "?" answer raises :class:`EngineCrashed` (a refusal is a fault here:
        kibitz only sends what the position makes legal)."""
        if self._proc is None or self._proc.stdin is None or self._proc.stdout is None:
            raise EngineCrashed("the GTP engine is not running")
        self._proc.stdin.write(command.encode() + b"\n")
        await self._proc.stdin.drain()
        lines: list[str] = []
        while True:
            raw = await self._proc.stdout.readline()
            if not raw:
                raise EngineCrashed(f"GTP engine exited during {command.split()[0]!r}")
            line = raw.decode(errors="replace").rstrip("\r\n")
            if not line.strip():
                if lines:
                    break
                continue
            lines.append(line)
        head, rest = lines[0], lines[1:]
        if head.startswith("?"):
            raise EngineCrashed(f"GTP engine refused {command!r}: {head[1:].strip()}")
        if not head.startswith("="):
            raise EngineCrashed(f"GTP engine answered garbage to {command!r}: {head[:200]!r}")
        return "\n".join([head[1:].strip(), *rest]).strip()

    async def _sync(self, pos: GoPosition) -> None:
        """Bring the engine's board to ``pos`` by replaying its game from an empty board.

        Always from the start: GNU Go's values carry a trace of the order its board was built in (differences of
        0.01 point between a game played on and the same position replayed), so only a full replay makes the answer
        the same on every process whatever it analysed before."""
        size, komi = (pos.size, pos.komi)
        if self._game != (size, komi):
            await self._send(f"boardsize {size}")
            await self._send(f"komi {komi:g}")
            self._game = (size, komi)
        await self._send("clear_board")
        for colour, move in pos.moves:
            await self._send(f"play {colour} {move}")

    async def analyse(self, pos: GoPosition, limits: GoLimits) -> GoAnalysis:
        loop = asyncio.get_running_loop()
        started = loop.time()
        # GNU Go keeps state between searches that clear_cache does not reset (values move by up to ~0.2 point with
        # what the process searched before): a fresh process per search is what makes answers reproducible. The same
        # restart serves a slot whose earlier restart failed.
        if self._proc is None or self._searched:
            await self.kill()
            try:
                await self.start()
            except (OSError, EngineError) as e:
                await self.kill()
                raise EngineCrashed(f"cannot start engine {self.command!r}: {e!r}") from e
        self._searched = True
        if self._level != limits.level:
            await self._send(f"level {limits.level}")
            self._level = limits.level
        await self._sync(pos)
        await self._send(f"set_random_seed {SEED}")
        best = (await self._send(f"reg_genmove {pos.to_move}")).upper()
        values = parse_values(await self._send("top_moves"), pos.size)
        for move, v in parse_values(await self._send("all_move_values"), pos.size).items():
            values[move] = max(v, values.get(move, v))
        if best != "RESIGN":
            values.setdefault(best, 0.0)  # GNU Go's choice is a candidate even when it lists no value for it
        if not values:
            values["PASS"] = 0.0
        # best first; ties keep GNU Go's choice first, then by name, so the order is reproducible
        ordered = sorted(values.items(), key=lambda kv: (-kv[1], kv[0] != best, kv[0]))
        return GoAnalysis(key=pos.key(), candidates=tuple((PASS if m == "PASS" else m, v) for m, v in ordered),
                          engine=self.name, limits=limits.key, time=loop.time() - started)

    async def quit(self, timeout: float = 5.0) -> None:
        if self._proc is None:
            return
        try:
            await asyncio.wait_for(self._send("quit"), timeout)
            await asyncio.wait_for(self._proc.wait(), timeout)
        except Exception:  # noqa: BLE001 - whatever went wrong, make sure the process is gone
            await self.kill()
        finally:
            self._proc = None

    async def kill(self, reap_timeout: float = 5.0) -> None:
        """Kill the process and wait until it is reaped, so no zombie stays behind."""
        proc, self._proc, self._game = self._proc, None, None
        await kill_process(proc, reap_timeout)


async def spawn(command: list[str], max_line: int) -> asyncio.subprocess.Process:
    """An engine process speaking a line protocol on stdin/stdout (GTP, KataGo's JSON lines); its stderr discarded."""
    return await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.DEVNULL, limit=max_line)


async def first_answers(engine: Any, answers: Awaitable[T], asked: str, kind: str) -> T:
    """``answers``, the first exchange of a newly started ``engine`` (what it was ``asked``), within its
    ``start_timeout``; a program that does not answer in time (no engine of this ``kind``, or one waiting for input of
    its own) is killed and refused."""
    try:
        return await asyncio.wait_for(answers, engine.start_timeout)
    except TimeoutError:
        await engine.kill()
        raise EngineCrashed(f"{engine.command[0]!r} did not answer {asked} within {engine.start_timeout:g} s: is it "
                            f"{kind}?") from None


async def kill_process(proc: asyncio.subprocess.Process | None, reap_timeout: float = 5.0) -> None:
    """Kill an engine's process (None: nothing to do) and wait until it is reaped, so no zombie stays behind."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(asyncio.TimeoutError, EngineError):
        await asyncio.wait_for(proc.wait(), reap_timeout)
