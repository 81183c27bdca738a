"""`robustlab compare A B`: what differs between two runs — their configuration first, then
every claim's verdict and effect, side by side.

``A`` and ``B`` are run directories (``manifest.json`` + ``claims.json``, as ``robustlab run``
writes) or reproduce directories (``reproduce.json`` and one run directory per study). Studies
are matched by name and claims by id, so a run compares with a re-run at other base seeds, a
reproduce directory with another, or a run with the same study inside a reproduce directory.

The configuration block lists, per study, every recorded setting that differs between the two
manifests (:func:`manifest_differences`): the preset, each base-config field, the expanded
grid, the seeds, the code version (git commit, and whether the tree was dirty), the device and
thread count, and the versions of the packages the numbers depend on. Two runs reported
"same" on every claim may still differ there: the verdicts agree, on different experiments.

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
import os
import textwrap
from pathlib import Path
from typing import Any

from .. import records
from ..config import UserError
from .html import VERDICT_WORDS, decision_text, kind_of, verdict_of

__all__ = ["Side", "Row", "load_side", "compare_dirs", "compare_text", "manifest_differences", "claims_table",
           "config_table"]


@dataclasses.dataclass(frozen=True)
class Side:
    """One directory's claims: study name -> list of claim dicts, and the base seeds used."""

    path: Path
    kind: str  # "run" or "reproduce"
    claims: dict[str, list[dict[str, Any]]]
    seeds: dict[str, list[int]]
    manifests: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # study -> points planned/done/failed/missing, from its store (None: no store to count)
    completeness: dict[str, dict[str, Any] | None] = dataclasses.field(default_factory=dict)

    def partial(self, study: str) -> str | None:
        """``points 104/520 done, 0 failed, 416 not run`` when the study's run is partial, else None."""
        from ..studies.integrity import completeness_text

        c = self.completeness.get(study)
        return completeness_text(c) if c and not c["complete"] else None


def _completeness(run: Path, manifest: dict[str, Any]) -> dict[str, Any] | None:
    from ..studies.integrity import store_completeness

    return store_completeness(run, manifest)


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
    maximum over networks) has no sampling interval to be outside of, and an edge one rounding
    step away counts as inside (a Wilson bound of 1 − 1e-16 against an accuracy of 1)."""
    if effect is None or not interval or len(interval) != 2 or None in interval:
        return False
    lo, hi = float(interval[0]), float(interval[1])
    if not (math.isfinite(lo) or math.isfinite(hi)) or hi <= lo:
        return False
    tol = 1e-12 * max(1.0, *(abs(v) for v in (lo, hi) if math.isfinite(v)))
    return not lo - tol <= float(effect) <= hi + tol


def _read_claims(run: Path) -> list[dict[str, Any]]:
    path = run / "claims.json"
    if not os.path.lexists(path):  # whatever stands there is read (a pipe in its place is one line)
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
        claims, seeds, manifests = {}, {}, {}
        for name in meta.get("studies", []):
            sub = path / name
            if (sub / "manifest.json").is_file() and (sub / "claims.json").is_file():
                claims[name] = _read_claims(sub)
                manifests[name] = records.read_json(sub / "manifest.json")
                seeds[name] = list(manifests[name].get("seeds") or [])
        if not claims:
            raise UserError(f"dir={str(path)!r} is not allowed: the reproduce directory holds no finished study")
        return Side(path, "reproduce", claims, seeds, manifests,
                    {n: _completeness(path / n, m) for n, m in manifests.items()})
    if (path / "manifest.json").is_file():
        manifest = records.read_json(path / "manifest.json")
        name = manifest.get("study")
        if not name:
            raise UserError(f"dir={str(path)!r} is not allowed: its manifest.json names no study")
        return Side(path, "run", {name: _read_claims(path)}, {name: list(manifest.get("seeds") or [])},
                    {name: manifest}, {name: _completeness(path, manifest)})
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


# package versions the numbers can depend on (others are listed in the manifest, not compared)
_VERSIONS = ("robustlab", "torch", "numpy", "python")


def _text(v: Any) -> str:
    return v if isinstance(v, str) else records.dumps(v)


def _code_text(m: dict[str, Any]) -> str:
    code = m.get("code") or {}
    commit = code.get("git_commit")
    if not commit:
        return "unknown"
    return commit[:10] + (" (dirty)" if code.get("dirty") else "")


def manifest_differences(ma: dict[str, Any], mb: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(field, A, B)`` for every recorded setting that differs between two manifests of one
    study, in a fixed order: preset, base_config.FIELD, grid, seeds, code, device, threads,
    versions.PKG."""
    out: list[tuple[str, str, str]] = []

    def check(field: str, a: Any, b: Any) -> None:
        if records.dumps(a) != records.dumps(b):
            out.append((field, "(none)" if a is None else _text(a), "(none)" if b is None else _text(b)))

    check("preset", ma.get("preset"), mb.get("preset"))
    ba, bb = ma.get("base_config") or {}, mb.get("base_config") or {}
    for key in dict.fromkeys([*ba, *bb]):
        if key != "seed":  # the base seed shows in `seeds`
            check(f"base_config.{key}", ba.get(key), bb.get(key))
    def axes(m: dict[str, Any]) -> Any:  # the grid's blocks without the seed axis (that is `seeds`)
        return [{k: v for k, v in blk.items() if k != "seed"} if isinstance(blk, dict) else blk
                for blk in (m.get("grid") or [])]

    check("grid", axes(ma), axes(mb))
    check("seeds", _seeds_text(list(ma.get("seeds") or [])), _seeds_text(list(mb.get("seeds") or [])))
    check("code", _code_text(ma), _code_text(mb))
    check("device", ma.get("device"), mb.get("device"))
    check("threads", ma.get("threads"), mb.get("threads"))
    va, vb = ma.get("versions") or {}, mb.get("versions") or {}
    for pkg in _VERSIONS:
        check(f"versions.{pkg}", va.get(pkg), vb.get(pkg))
    return out


def config_table(sa: Side, sb: Side):
    """The configuration differences of the studies two sides share, as a DataFrame
    (``study, field, a, b``; empty when the recorded settings agree)."""
    import pandas as pd

    rows = [{"study": st, "field": f, "a": a, "b": b} for st in sa.claims if st in sb.claims
            for f, a, b in manifest_differences(sa.manifests.get(st, {}), sb.manifests.get(st, {}))]
    return pd.DataFrame(rows, columns=["study", "field", "a", "b"])


def claims_table(rows: list[Row]):
    """The claim rows as a DataFrame: ``study, claim, kind_a, kind_b, verdict_a, verdict_b,
    effect_a, effect_b, interval_lo_a, interval_hi_a, interval_lo_b, interval_hi_b, changed,
    apart`` (intervals split into bounds, as :func:`robustlab.api.claims_frame` splits them)."""
    import pandas as pd

    def get(c: dict[str, Any] | None, key: str) -> Any:
        return None if c is None else c.get(key)

    def bounds(c: dict[str, Any] | None) -> tuple[Any, Any]:
        iv = get(c, "interval")
        return (iv[0], iv[1]) if isinstance(iv, list | tuple) and len(iv) == 2 else (None, None)

    cols = ["study", "claim", "kind_a", "kind_b", "verdict_a", "verdict_b", "effect_a", "effect_b",
            "interval_lo_a", "interval_hi_a", "interval_lo_b", "interval_hi_b", "changed", "apart"]
    out = []
    for r in rows:
        (lo_a, hi_a), (lo_b, hi_b) = bounds(r.a), bounds(r.b)
        out.append({"study": r.study, "claim": r.claim,
                    "kind_a": kind_of(r.a) if r.a is not None else None,
                    "kind_b": kind_of(r.b) if r.b is not None else None,
                    "verdict_a": r.verdict_a, "verdict_b": r.verdict_b,
                    "effect_a": get(r.a, "effect"), "effect_b": get(r.b, "effect"),
                    "interval_lo_a": lo_a, "interval_hi_a": hi_a, "interval_lo_b": lo_b, "interval_hi_b": hi_b,
                    "changed": r.changed, "apart": r.apart})
    df = pd.DataFrame(out, columns=cols)
    for c in ("effect_a", "effect_b", "interval_lo_a", "interval_hi_a", "interval_lo_b", "interval_hi_b"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


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
        for tag, side in (("A", sa), ("B", sb)):
            if side.partial(study):
                lines.append(f"      PARTIAL: {tag} holds {side.partial(study)}: its verdicts rest on an incomplete "
                             "grid, and a verdict change may be only that")
        diffs = manifest_differences(sa.manifests.get(study, {}), sb.manifests.get(study, {}))
        if not diffs:
            lines.append("      configuration: the same (preset, base config, grid, seeds, code, device)")
        for field, a, b in diffs:
            lines += textwrap.wrap(f"differs: {field}: A {a} | B {b}", width, initial_indent="      ",
                                   subsequent_indent="         ")
    n_diff = sum(len(manifest_differences(sa.manifests.get(st, {}), sb.manifests.get(st, {})))
                 for st in dict.fromkeys(r.study for r in rows))
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
    partial = [f"{tag} ({study})" for study in dict.fromkeys(r.study for r in rows)
               for tag, side in (("A", sa), ("B", sb)) if side.partial(study)]
    lines.append(f"compared {len(rows)} claims: {changed} verdict change{'s' if changed != 1 else ''}, "
                 f"{apart} with effects outside each other's interval; {n_diff} configuration "
                 f"difference{'s' if n_diff != 1 else ''}"
                 + (f"; PARTIAL runs: {', '.join(partial)}" if partial else ""))
    return "\n".join(lines)

