"""Print the trained-networks table of a lazy-attack or lazy-adversarial run (markdown).

One row per group of networks (inputs, C0, width m, and, for lazy-adversarial, the radius in
lazy radii): how many networks, their clean accuracy (min / mean), the share that meets the
study's "trained" premise (clean accuracy >= 0.9), and how long they trained. Used for the
issue notes: "does the preset train every network its claims use?".

    python scripts/trained_table.py RUN_DIR [--bound 0.9]
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from robustlab.studies.base import load


def table(df: pd.DataFrame, bound: float) -> str:
    acc = "clean_acc" if "clean_acc" in df else "test_acc"
    keys = [k for k in ("sphere", "C0", "m", "R_factor") if k in df and df[k].notna().any()]
    df = df.assign(**{k: df[k].astype(object).where(df[k].notna(), "—") for k in keys})
    rows = []
    for key, g in df.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        trained = g[acc] >= bound
        worst = g.loc[g[acc].idxmin()]
        rows.append([*[f"{v:g}" if isinstance(v, float) else str(v) for v in key], str(len(g)),
                     f"{g['d'].min():g}–{g['d'].max():g}", f"{g[acc].min():.3f} (d={worst['d']:g})",
                     f"{g[acc].mean():.3f}", f"{trained.mean():.2f}",
                     f"{g['epochs_run'].median():g} [{g['epochs_run'].min():g}, {g['epochs_run'].max():g}]"])
    head = [*keys, "networks", "d", f"min {acc}", f"mean {acc}", f"share >= {bound:g}", "epochs median [min, max]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    total = (df[acc] >= bound).mean()
    lines.append(f"\n{len(df)} networks; {total:.3f} meet clean accuracy >= {bound:g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--bound", type=float, default=0.9)
    a = ap.parse_args(argv)
    df = load(a.run_dir)
    if "kind" in df:
        df = df[df["kind"] == "final"] if (df["kind"] == "final").any() else df
    print(table(df, a.bound))
    return 0


if __name__ == "__main__":
    sys.exit(main())
