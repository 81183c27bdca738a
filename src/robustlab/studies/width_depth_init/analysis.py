"""Views of the width-depth-init results table shared by the claims and the figures."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .run import (
    ACC_FLOOR,
    AT_TARGET,
    WidthDepthInitConfig,
)

# ---------------------------------------------------------------------------------------
# analysis helpers

PROTOCOLS = {"target": "at equal training loss (target_loss)", "end": "at the end of the schedule"}


def finals(df: pd.DataFrame) -> pd.DataFrame:
    if "kind" not in df.columns:
        return df.iloc[0:0]
    return df[df["kind"] == "final"]


def view(f: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """Final rows with ``stability``/``train_acc``/``test_acc``/``train_loss`` and a ``trained``
    flag taken from one protocol.

    ``target``: measured when the seed's training loss first reached ``target_loss``;
    trained means it did reach it. ``end``: measured at the end of the schedule; trained
    means a training accuracy of at least ``ACC_FLOOR``.
    """
    v = f.copy()
    if protocol == "target":
        for k in AT_TARGET:
            v[k] = v[f"{k}_at_target"]
        v["trained"] = v["reached_target"].astype(bool)
    else:
        v["trained"] = v["train_acc"] >= ACC_FLOOR
    return v


def protocols(f: pd.DataFrame) -> list[str]:
    """The protocols the results support, the one the claims are judged on first."""
    has_target = ("target_loss" in f.columns and "stability_at_target" in f.columns
                  and bool((f["target_loss"] > 0).all()))
    return ["target", "end"] if has_target else ["end"]


def _r(v: float, digits: int = 4) -> float | None:
    v = float(v)
    return float(f"{v:.{digits}g}") if math.isfinite(v) else None


def curve(v: pd.DataFrame, x: str, y: str = "stability") -> pd.DataFrame:
    """Seed statistics of ``y`` against ``x`` (mean, std, sem, n) with the mean accuracies and
    the fraction of seeds that trained (a :func:`view`)."""
    g = v.groupby(x)
    out = g[y].agg(["mean", "std", "count"]).rename(columns={"count": "n"})
    out["sem"] = out["std"] / np.sqrt(out["n"])
    for k in ("train_acc", "test_acc", "train_loss"):
        out[k] = g[k].mean()
    out["trained"] = g["trained"].mean()
    return out.sort_index()


def _table(c: pd.DataFrame) -> list[dict]:
    return [{"x": int(i), "mean": _r(r["mean"]), "sem": _r(r["sem"]), "n": int(r["n"]),
             "train_acc": _r(r["train_acc"], 3), "test_acc": _r(r["test_acc"], 3),
             "train_loss": _r(r["train_loss"], 3), "trained": _r(r["trained"], 3)}
            for i, r in c.iterrows()]


# Fields that index a curve or its seeds; any *other* field that varies within one init
# (a learning rate, gamma, a dataset, …) splits that init into separate series, so that the
# claims never pool networks trained differently. (A learning rate may still differ *between*
# inits — "a rate per init" — since inits are always compared as separate series.)
_CURVE_FIELDS = {"seed", "width", "depth", "init", "mc_samples", "mc_points", "mc_init", "mc_depth", "mc_width"}


def series(v: pd.DataFrame, init: str) -> list[tuple[str, pd.DataFrame]]:
    """The rows of ``init`` split by every setting that varies among them: ``[(label, rows)]``,
    ``label`` ``""`` when nothing else varies, else e.g. ``"[lr=0.3]"``."""
    sub = v[v["init"] == init]
    keys = [k for k in WidthDepthInitConfig.field_names()
            if k not in _CURVE_FIELDS and k in sub.columns and sub[k].astype(str).nunique() > 1]
    if not keys:
        return [("", sub)] if len(sub) else []
    out = []
    # group on the values' text: a list-valued field (classes) is not hashable
    for vals, s in sub.groupby([sub[k].astype(str) for k in keys], dropna=False, sort=True):
        vals = vals if isinstance(vals, tuple) else (vals,)
        out.append(("[" + ",".join(f"{k}={x}" for k, x in zip(keys, vals)) + "]", s))
    return out

