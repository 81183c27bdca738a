"""`robustlab compare A B`: every claim's verdict and effect in two runs, side by side.

``A`` and ``B`` are run directories (``manifest.json`` + ``claims.json``, as ``robustlab run``
writes) or reproduce directories (``reproduce.json`` and one run directory per study). Studies
are matched by name and claims by id, so a run compares with a re-run at other base seeds, a
reproduce directory with another, or a run with the same study inside a reproduce directory.

Each row flags

* ``VERDICT CHANGED`` — the two verdicts differ (or the claim exists on one side only);
* ``effects apart``   — an effect lies outside the other run's interval (either way round):
  the two runs disagree on the number itself, whatever the verdicts.

Only saved files are read (nothing re-runs; an old ``claims.json`` without verdicts reads its
``passed`` as reproduced / contradicted). Bad input — a missing directory, a directory that is
not a run, runs with no study in common — is a :class:`~robustlab.config.UserError`.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path
from typing import Any

from .. import records
from ..config import UserError
from .html import VERDICT_WORDS, decision_text, verdict_of

__all__ = ["Side", "Row", "load_side", "compare_dirs", "compare_text"]


@dataclasses.dataclass(frozen=True)
class Side:
    """One directory's claims: study name -> list of claim dicts, and the base seeds used."""

    path: Path
    kind: str  # "run" or "reproduce"
    claims: dict[str, list[dict[str, Any]]]
    seeds: dict[str, list[int]]


@dataclasses.dataclass(frozen=True)
class Row:
    study: str
    claim: str
    a: dict[str, Any] | None
    b: dict[str, Any] | None

    @property
    def verdict_a(self) -> str | None:
        return verdict_of(self.a) if self.a is not None else None

    @property
    def verdict_b(self) -> str | None:
        return verdict_of(self.b) if self.b is not None else None

    @property
    def changed(self) -> bool:
        return self.verdict_a != self.verdict_b

    @property
    def apart(self) -> bool:
        """Either effect lies outside the other's interval (both must have an effect and interval)."""
        if self.a is None or self.b is None:
            return False
        return _outside(self.a.get("effect"), self.b.get("interval")) or _outside(
            self.b.get("effect"), self.a.get("interval"))

    @property
    def flags(self) -> list[str]:
        out = []
        if self.changed:
            out.append("VERDICT CHANGED")
        if self.apart:
            out.append("effects apart")
        return out


def _outside(effect: Any, interval: Any) -> bool:
    """``effect`` lies outside ``interval``; an exact value (an interval of zero width, e.g. a
    maximum over networks) has no sampling interval to be outside of."""
    if effect is None or not interval or len(interval) != 2 or None in interval:
        return False
    lo, hi = float(interval[0]), float(interval[1])
    if not (math.isfinite(lo) or math.isfinite(hi)) or hi <= lo:
        return False
    return not lo <= float(effect) <= hi


def _read_claims(run: Path) -> list[dict[str, Any]]:
    path = run / "claims.json"
    if not path.is_file():
        raise UserError(f"dir={str(run)!r} is not allowed: the run has no claims.json "
                        "(unfinished? `robustlab report DIR` rebuilds it)")
    data = records.read_json(path)
    if not isinstance(data, list) or not all(isinstance(c, dict) and "id" in c for c in data):
        raise UserError(f"dir={str(run)!r} is not allowed: its claims.json is not a list of claims")
    return data


def load_side(path: str | Path) -> Side:
    """The claims of a run or reproduce directory (``UserError`` when it is neither)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"dir={str(path)!r} is not allowed: no such directory")
    if not path.is_dir():
        raise UserError(f"dir={str(path)!r} is not allowed: not a directory")
    if (path / "reproduce.json").is_file():
        meta = records.read_json(path / "reproduce.json")
        claims, seeds = {}, {}
        for name in meta.get("studies", []):
            sub = path / name
            if (sub / "manifest.json").is_file() and (sub / "claims.json").is_file():
                claims[name] = _read_claims(sub)
                seeds[name] = list(records.read_json(sub / "manifest.json").get("seeds") or [])
        if not claims:
            raise UserError(f"dir={str(path)!r} is not allowed: the reproduce directory holds no finished study")
        return Side(path, "reproduce", claims, seeds)
    if (path / "manifest.json").is_file():
        manifest = records.read_json(path / "manifest.json")
        name = manifest.get("study")
        if not name:
            raise UserError(f"dir={str(path)!r} is not allowed: its manifest.json names no study")
        return Side(path, "run", {name: _read_claims(path)}, {name: list(manifest.get("seeds") or [])})
    raise UserError(f"dir={str(path)!r} is not allowed: not a robustlab run directory "
                    "(no manifest.json or reproduce.json)")


def compare_dirs(a: str | Path, b: str | Path) -> tuple[Side, Side, list[Row]]:
    """Match the two directories' studies by name and their claims by id (A's order first)."""
    sa, sb = load_side(a), load_side(b)
    common = [s for s in sa.claims if s in sb.claims]
    if not common:
        raise UserError(f"dirs={str(sa.path)!r}, {str(sb.path)!r} are not allowed: they hold runs of "
                        f"different studies ({', '.join(sa.claims)} vs {', '.join(sb.claims)}); "
                        "compare runs of the same study")
    rows: list[Row] = []
    for study in common:
        ca = {c["id"]: c for c in sa.claims[study]}
        cb = {c["id"]: c for c in sb.claims[study]}
        for cid in list(ca) + [k for k in cb if k not in ca]:
            rows.append(Row(study, cid, ca.get(cid), cb.get(cid)))
    return sa, sb, rows


def _seeds_text(seeds: list[int]) -> str:
    if not seeds:
        return "?"
    s = sorted(seeds)
    return f"{s[0]}–{s[-1]}" if s == list(range(s[0], s[-1] + 1)) and len(s) > 2 else ",".join(map(str, s))


def _cell(c: dict[str, Any] | None) -> tuple[str, str]:
    if c is None:
        return "(missing)", ""
    return VERDICT_WORDS[verdict_of(c)], decision_text(c) or "-"


def compare_text(sa: Side, sb: Side, rows: list[Row], *, width: int = 120) -> str:
    """The comparison as a plain-text table, one block per claim, and a summary line."""
    lines = [f"A: {sa.path}  ({sa.kind})", f"B: {sb.path}  ({sb.kind})"]
    for study in dict.fromkeys(r.study for r in rows):
        lines.append(f"   {study}: seeds A {_seeds_text(sa.seeds.get(study, []))}, "
                     f"B {_seeds_text(sb.seeds.get(study, []))}")
    only = [(s, "A") for s in sa.claims if s not in sb.claims] + [(s, "B") for s in sb.claims if s not in sa.claims]
    for s, side in only:
        lines.append(f"   {s}: only in {side} (not compared)")
    sw = max([5] + [len(r.study) for r in rows])
    cw = max([5] + [len(r.claim) for r in rows])
    vw = 14
    head = f"{'study':<{sw}}  {'claim':<{cw}}  {'verdict A':<{vw}}  {'verdict B':<{vw}}  flags"
    lines += [head, "-" * min(width, max(len(head), 60))]
    pad = " " * (sw + cw + 4)
    for r in rows:
        (va, ea), (vb, eb) = _cell(r.a), _cell(r.b)
        lines.append(f"{r.study:<{sw}}  {r.claim:<{cw}}  {va:<{vw}}  {vb:<{vw}}  {', '.join(r.flags) or 'same'}")
        for tag, text in (("A", ea), ("B", eb)):
            if text:
                lines += textwrap.wrap(f"{tag}: {text}", width, initial_indent=pad, subsequent_indent=pad + "   ")
    changed = sum(r.changed for r in rows)
    apart = sum(r.apart for r in rows)
    lines.append(f"compared {len(rows)} claims: {changed} verdict change{'s' if changed != 1 else ''}, "
                 f"{apart} with effects outside each other's interval")
    return "\n".join(lines)

