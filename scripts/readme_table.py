"""Rewrite the README's results table from run directories: no verdict in the README is typed.

    python scripts/readme_table.py --quick runs/quick --paper runs/paper [--paper runs/fl-paper ...]
    python scripts/readme_table.py --quick runs/quick --check     # exit 1 if the README is stale

``--quick``: a ``robustlab reproduce --preset quick`` directory (or run directories of the
quick preset). ``--paper``: reproduce or run directories of a paper preset or one of its slices
(``paper-depth``, ...), repeatable. For each claim (kind "claim": what "N of M reproduced"
counts) the table gives its quick verdict and its paper verdict with effect [interval]; a paper
verdict comes from the full ``paper`` preset where one was given, otherwise from a slice that
measured the claim (a slice's "not measured in this run" does not count; where several slices
measured it and their verdicts differ, each is shown with its slice's name, never one chosen),
otherwise the cell says "no paper run" (with ``--keep-paper``, a study given no paper directory keeps
the paper cells an earlier call wrote: refresh one study's paper runs without the others'). A line per study under the table gives its self-checks. The table
replaces the block between ``<!-- results:start -->`` and ``<!-- results:end -->``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

START, END = "<!-- results:start -->", "<!-- results:end -->"
ROOT = Path(__file__).resolve().parent.parent


def run_dirs(path: Path) -> list[Path]:
    """The run directories in ``path``: itself, or a reproduce directory's studies."""
    if (path / "manifest.json").is_file():
        return [path]
    meta = path / "reproduce.json"
    if meta.is_file():
        return [path / name for name in json.loads(meta.read_text())["studies"] if (path / name / "claims.json").is_file()]
    raise SystemExit(f"readme_table: {path} is not a run or reproduce directory")


def load(paths: list[Path]) -> list[tuple[str, str, list[dict]]]:
    """(study, preset, claims) of every run directory under ``paths``."""
    out = []
    for p in paths:
        for d in run_dirs(p):
            if not (d / "claims.json").is_file():
                continue
            m = json.loads((d / "manifest.json").read_text())
            out.append((m["study"], m.get("preset", "?"), json.loads((d / "claims.json").read_text())))
    return out


def _num(x: float) -> str:
    return f"{x:.3g}"


def cell(c: dict | None) -> str:
    """``reproduced 0.41 [0.33, 0.49]``, or the verdict alone where there is no effect."""
    if c is None:
        return "no paper run"
    text = c.get("verdict") or ("reproduced" if c.get("passed") else "contradicted")
    if c.get("effect") is not None:
        text += f" {_num(c['effect'])}"
        if c.get("interval") and len(c["interval"]) == 2 and None not in c["interval"]:
            text += f" [{_num(c['interval'][0])}, {_num(c['interval'][1])}]"
    return text


def _measured(c: dict) -> bool:
    return not (c.get("verdict") == "not applicable" and "not measured" in (c.get("reason") or ""))


def paper_claims(paper: list[tuple[str, str, list[dict]]], study: str, cid: str) -> list[tuple[str, dict]]:
    """(preset, claim) of the paper verdict: the full preset's, else every slice that measured it."""
    full = next((cs for s, p, cs in paper if s == study and p == "paper"), None)
    if full is not None:
        return [("paper", c) for c in full if c["id"] == cid][:1]
    return [(p, c) for s, p, cs in paper if s == study and p != "paper" for c in cs if c["id"] == cid and _measured(c)]


def paper_cell(found: list[tuple[str, dict]]) -> str:
    """One verdict where the runs agree; each slice's, named, where they do not."""
    if len({c.get("verdict") for _, c in found}) <= 1:
        return cell(found[0][1] if found else None)
    na = [preset for preset, c in found if c.get("verdict") == "not applicable"]
    parts = [f"{cell(c)} (`{preset}`)" for preset, c in found if c.get("verdict") != "not applicable"]
    return "; ".join(parts + ([f"not applicable in {', '.join(f'`{p}`' for p in na)}"] if na else []))


def kept_cells(readme: Path) -> dict[tuple[str, str], str]:
    """The paper cells of the README's current table, by (study, claim id)."""
    text = readme.read_text()
    block = text.split(START, 1)[1].split(END, 1)[0] if START in text and END in text else ""
    out = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].startswith("`") and cells[1].endswith("`"):
            out[(cells[0], cells[1].strip("`"))] = cells[3]
    return out


def table(quick: list[tuple[str, str, list[dict]]], paper: list[tuple[str, str, list[dict]]],
          kept: dict[tuple[str, str], str] | None = None) -> str:
    """The results block; ``kept``: paper cells to keep for the studies ``paper`` has no run of."""
    kind = lambda c: c.get("kind") or "claim"  # noqa: E731 - a claim dict from before kinds is a claim
    measured = {s for s, _, _ in paper}
    rows = ["| study | claim | quick preset | paper preset |", "|---|---|---|---|"]
    notes = []
    n = n_rep = 0
    for study, _, claims in quick:
        for c in claims:
            if kind(c) != "claim":
                continue
            n += 1
            n_rep += c.get("verdict") == "reproduced"
            if study not in measured and kept and (study, c["id"]) in kept:
                right = kept[(study, c["id"])]
            else:
                right = paper_cell(paper_claims(paper, study, c["id"]))
            rows.append(f"| {study} | `{c['id']}` | {cell(c)} | {right} |")
        checks = [c for c in claims if kind(c) == "self-check"]
        if checks:
            held = sum(c.get("verdict") == "reproduced" for c in checks)
            notes.append(f"{study} {held}/{len(checks)}")
    lines = [f"Quick preset: **{n_rep} of {n} claims reproduced**. Effects with their 95 % intervals; "
             "each claim's control, exclusions and evidence are in the report.", "", *rows]
    if notes:
        lines += ["", "Self-checks of robustlab's own code (they hold or the run fails): " + ", ".join(notes) + "."]
    return "\n".join(lines)


def rewrite(readme: Path, block: str) -> str:
    text = readme.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"readme_table: {readme} has no {START} … {END} block")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", type=Path, action="append", required=True, help="quick-preset reproduce or run directory")
    p.add_argument("--paper", type=Path, action="append", default=[], help="paper-preset (or slice) directory")
    p.add_argument("--readme", type=Path, default=ROOT / "README.md")
    p.add_argument("--keep-paper", action="store_true",
                   help="a study with no --paper directory keeps the paper cells the README has (written from "
                        "its runs by an earlier call), instead of 'no paper run'")
    p.add_argument("--check", action="store_true", help="exit 1 if the README's block differs; write nothing")
    args = p.parse_args(argv)
    kept = kept_cells(args.readme) if args.keep_paper else None
    new = rewrite(args.readme, table(load(args.quick), load(args.paper), kept))
    if args.check:
        stale = new != args.readme.read_text()
        print("README results table is " + ("stale" if stale else "current"))
        return int(stale)
    args.readme.write_text(new)
    print(f"rewrote the results table in {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
