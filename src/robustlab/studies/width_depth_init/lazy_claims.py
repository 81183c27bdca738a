"""The width-depth-init claims drawn from Thm 1 (the lazy regime): the width peak, its move
with the training-set size, and depth at initialisation and after training.

Every one is decided on Def. 1's quantity, ``log E_W P`` (the log of the mean over networks,
P = 0 networks kept in the mean), with a percentile bootstrap over networks, at the moment
the theorem speaks of, over the networks that meet its premises (``analysis.PREMISES``,
counted per network); its control applies the same rule where the effect is absent.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ... import claims as cl
from ...metrics import expected_stability_at_init
from ...stats import INCONCLUSIVE, Condition, Verdict, combine, decide, not_applicable
from .analysis import (
    PREMISES,
    PROTOCOLS,
    _r,
    _table,
    boot_estimate,
    curve,
    groups_by,
    kept,
    peak_stat,
    peak_width,
    series,
    slope_stat,
    view,
)
from .run import MIN_DEPTHS, MIN_WIDTHS

WIDTH_PREMISES = ("equal-fit", "lazy", "width>=classes", "fd-linear")
DEPTH_TRAINED_PREMISES = ("equal-fit", "lazy", "fd-linear")
AT_INIT_PREMISES = ("fd-linear",)

# depth at initialisation: the exact expectation (closed form) falls by ln ½ per layer for
# LeCun and is flat for He and NTK. SLOPE_BAND: the per-layer slope of log E P must lie within
# ±0.15 of that (a factor 1.16 per layer), fixed before the run: wide enough for 35 networks per
# depth at width 128 (the seed spread of log P there is ~0.1), narrow against the ln 2 = 0.69
# that separates the two inits (so the swapped-init control must fail).
SLOPE_BAND = 0.15
AT_INIT_CENTRE = {"lecun": math.log(0.5), "he": 0.0, "ntk": 0.0}
# after training (Thm 1 on lazy networks, §5.4): LeCun falls with L, He and NTK rise with log L
TRAINED_SIGN = {"lecun": ("below", False), "he": ("above", True), "ntk": ("above", True)}
SWAPPED = {"lecun": "he", "he": "lecun", "ntk": "lecun"}

MECHANISM_AT_INIT = (
    "Closed form (exact at finite width, bias-free ReLU network): E_W ||J_x f||_F^2 = d k beta_L "
    "prod_{l<L} (m beta_l / 2). LeCun (m beta = 1) halves it per layer; He (m beta = 2) and NTK keep it "
    "constant in depth. The paper's polynomial growth for He and NTK is that of its upper bound (Thm 1), not "
    "of the quantity, so at initialisation the claim decided is the closed form's: LeCun falls by ln 1/2 per "
    "layer, He and NTK are flat. From the same seed He's weights are LeCun's times sqrt 2 in every layer and "
    "ReLU is positively homogeneous, so P_He = 2^L P_LeCun network by network (he_vs_lecun_same_seed).")


def _multi(f: pd.DataFrame) -> pd.DataFrame:
    """The cross-entropy (k-logit) networks: Thm 1's claims are judged on those."""
    return f[f["output"] == "multi"] if "output" in f.columns else f


# ---------------------------------------------------------------------------------------
# width

def _peak_part(sub: pd.DataFrame, ctl: pd.DataFrame, name: str) -> tuple[Verdict, Verdict, dict]:
    """One width sweep: the peak statistic on ``sub`` (kept networks) and on ``ctl`` (the same
    networks at initialisation)."""
    widths, groups = groups_by(sub, "width")
    cond = Condition(f">= {MIN_WIDTHS} widths with >= 2 kept networks", len(widths) >= MIN_WIDTHS,
                     f"widths {list(map(int, widths))}")
    if len(widths) < MIN_WIDTHS:
        na = not_applicable(f"{name}: too few widths after the premises", [cond])
        return na, na, {"widths": list(map(int, widths))}
    est = boot_estimate(groups, peak_stat, "networks")
    v = decide(est, threshold=0.0, side="above", conditions=[cond], reason=name)
    cw, cg = groups_by(ctl, "width")
    cv = decide(boot_estimate(cg, peak_stat, "networks"), threshold=0.0, side="above", reason=f"{name} at init")
    lm = np.log([g.mean() for g in groups])[None, :]
    ev = {**v.to_dict(), "peak_width": int(2 ** peak_width(lm, widths)[0]), "widths": list(map(int, widths)),
          "curve": _table(curve(sub, "width")), "control_effect": cv.effect, "control_interval": cv.interval}
    return v, cv, ev


def decide_width(f: pd.DataFrame, protocol: str) -> tuple[Verdict, Verdict, list[cl.Exclusion], dict]:
    """width-peak at one moment: every He/LeCun width sweep (each depth and series), combined."""
    v = view(_multi(f[f["init"].isin(["he", "lecun"])]), protocol)
    k, exc = kept(v, WIDTH_PREMISES)
    init = view(_multi(f[f["init"].isin(["he", "lecun"])]), "init")
    parts, ctls, ev = [], [], {}
    for name0 in ("he", "lecun"):
        for label, s in series(k, name0):
            for L, sub in s.groupby("depth"):
                if sub["width"].nunique() < 2:
                    continue
                name = f"{name0}_L{int(L)}{label}"
                ctl = init[init.set_index(["point", "seed"]).index.isin(sub.set_index(["point", "seed"]).index)]
                p, c, e = _peak_part(sub, ctl, name)
                parts.append(p)
                ctls.append(c)
                ev[name] = e
    if not parts:
        na = cl.too_few(k, None, exc, what="width sweeps")
        return na, na, exc, ev
    return combine(parts), combine(ctls), exc, ev


def decide_width_moves(f: pd.DataFrame, protocol: str) -> tuple[Verdict, Verdict, list[cl.Exclusion], dict]:
    """width-peak-n-train: log2 peak width at the largest training set minus at the smallest."""
    v = view(_multi(f[f["init"].isin(["he", "lecun"])]), protocol)
    k, exc = kept(v, WIDTH_PREMISES)
    init = view(_multi(f[f["init"].isin(["he", "lecun"])]), "init")
    parts, ctls, ev = [], [], {}
    for name0 in ("he", "lecun"):
        s = k[k["init"] == name0]
        for L, sub in s.groupby("depth"):
            sizes = sorted(int(n) for n, g in sub.groupby("n_train") if g["width"].nunique() >= MIN_WIDTHS)
            if len(sizes) < 2:
                continue
            name = f"{name0}_L{int(L)}"
            out = []
            for src in (sub, init[init.set_index(["point", "seed"]).index.isin(sub.set_index(["point", "seed"]).index)]):
                ws = [groups_by(src[src["n_train"] == n], "width") for n in (sizes[0], sizes[-1])]
                if min(len(w[0]) for w in ws) < MIN_WIDTHS:
                    out.append(not_applicable(f"{name}: too few widths at one size after the premises"))
                    continue
                n0 = len(ws[0][1])

                def stat(lm: np.ndarray, ws=ws, n0=n0) -> np.ndarray:
                    return peak_width(lm[:, n0:], ws[1][0]) - peak_width(lm[:, :n0], ws[0][0])
                est = boot_estimate(ws[0][1] + ws[1][1], stat, "networks")
                out.append(decide(est, threshold=0.0, side="above",
                                  reason=f"{name}: log2 peak width at n_train={sizes[-1]} minus {sizes[0]}"))
            parts.append(out[0])
            ctls.append(out[1])
            ev[name] = {**out[0].to_dict(), "sizes": sizes, "expected_move_log2": _r(math.log2(sizes[-1] / sizes[0]))}
    if not parts:
        swept = any(sum(g["width"].nunique() >= MIN_WIDTHS for _, g in sub.groupby("n_train")) >= 2
                    for _, sub in v.groupby(["init", "depth"]))
        na = (cl.too_few(k, None, exc, what="networks") if swept  # the grid has it; the premises left too few
              else not_applicable("no depth swept in width at two training-set sizes (paper-width-n runs it)"))
        return na, na, exc, ev
    return combine(parts), combine(ctls), exc, ev


# ---------------------------------------------------------------------------------------
# depth

def _depth_slope(sub: pd.DataFrame, col: str, log_x: bool, name: str) -> tuple[Verdict | None, dict]:
    depths, groups = groups_by(sub, "depth", col)
    if len(depths) < MIN_DEPTHS:
        return None, {"depths": list(map(int, depths))}
    xs = np.log(depths) if log_x else np.asarray(depths, float)
    est = boot_estimate(groups, slope_stat(xs), "networks")
    return est, {"depths": list(map(int, depths)), "networks_per_depth": [len(g) for g in groups]}


def _at_init_units(f: pd.DataFrame) -> pd.DataFrame:
    """One row per network at initialisation: each trained network's own t = 0 measurement and
    its ``init_draws`` extra draws (``stability``, ``fd``, ``draw``)."""
    v = view(f, "init").assign(draw=-1)
    rows = [v]
    if "stability_init_draws" in f.columns:
        ex = f.dropna(subset=["stability_init_draws"])
        for j in range(int(ex["stability_init_draws"].map(len).max()) if len(ex) else 0):
            e = view(ex, "init").assign(draw=j)
            e["stability"] = ex["stability_init_draws"].map(lambda xs, j=j: xs[j] if j < len(xs) else np.nan)
            fd = ex["fd_ratio_init_draws"] if "fd_ratio_init_draws" in ex.columns else None
            e["fd"] = fd.map(lambda xs, j=j: xs[j] if xs is not None and j < len(xs) else np.nan) \
                if fd is not None else np.nan
            rows.append(e)
    return pd.concat(rows, ignore_index=True)


def _has_depth_sweep(f: pd.DataFrame) -> bool:
    """Some width of the grid (before any premise) has >= MIN_DEPTHS depths."""
    return bool(len(f)) and bool((f.groupby("width")["depth"].nunique() >= MIN_DEPTHS).any())


def decide_depth_at_init(f: pd.DataFrame) -> tuple[Verdict, Verdict, list[cl.Exclusion], dict]:
    """LeCun's slope of log E P on L within ±SLOPE_BAND of ln ½, He's and NTK's within ±SLOPE_BAND
    of 0, at every width with >= MIN_DEPTHS depths; the control swaps the bands."""
    units = _at_init_units(_multi(f))
    k, exc = cl.apply_premises(units, [PREMISES[n] for n in AT_INIT_PREMISES],
                               unit=[u for u in ("point", "seed", "draw") if u in units.columns])
    parts, ctls, ev = [], [], {}
    for init, centre in AT_INIT_CENTRE.items():
        for label, s in series(k, init):
            for m, sub in s.groupby("width"):
                est, extra = _depth_slope(sub, "stability", False, f"{init} m={int(m)}")
                if est is None:
                    continue
                band = (centre - SLOPE_BAND, centre + SLOPE_BAND)
                swap = AT_INIT_CENTRE[SWAPPED[init]]
                name = f"{init}_m{int(m)}{label}"
                p = decide(est, threshold=band, side="inside", reason=name)
                c = decide(est, threshold=(swap - SLOPE_BAND, swap + SLOPE_BAND), side="inside",
                           reason=f"{name} against {SWAPPED[init]}'s band")
                parts.append(p)
                ctls.append(c)
                ev[name] = {**p.to_dict(), **extra, **_closed_form_at_init(f[(f["init"] == init) & (f["width"] == m)])}
    if not parts:
        na = (cl.too_few(k, None, exc, what="networks") if _has_depth_sweep(units)
              else not_applicable(f"not measured in this run: needs a width with >= {MIN_DEPTHS} depths "
                                  "(paper-depth runs it)"))
        return na, na, exc, ev
    return combine(parts), combine(ctls), exc, ev


def decide_depth_trained(f: pd.DataFrame, protocol: str) -> tuple[Verdict, Verdict, list[cl.Exclusion], dict]:
    """Thm 1's depth trend on trained networks that stayed lazy: LeCun's slope of log E P on L
    below 0, He's and NTK's on log L above 0; the control applies each init the other's rule."""
    v = view(_multi(f[f["init"].isin(list(TRAINED_SIGN))]), protocol)
    k, exc = kept(v, DEPTH_TRAINED_PREMISES)
    parts, ctls, ev = [], [], {}
    for init, (side, log_x) in TRAINED_SIGN.items():
        other_side, other_log = TRAINED_SIGN[SWAPPED[init]]
        for label, s in series(k, init):
            for m, sub in s.groupby("width"):
                if sub["depth"].nunique() < 2:
                    continue
                name = f"{init}_m{int(m)}{label}"
                est, extra = _depth_slope(sub, "stability", log_x, name)
                cond = Condition(f">= {MIN_DEPTHS} depths with >= 2 kept networks", est is not None,
                                 f"depths {extra['depths']}")
                p = decide(est, threshold=0.0, side=side, conditions=[cond], reason=name)
                cest = _depth_slope(sub, "stability", other_log, name)[0]
                c = decide(cest, threshold=0.0, side=other_side, conditions=[cond],
                           reason=f"{name} under {SWAPPED[init]}'s rule")
                parts.append(p)
                ctls.append(c)
                ev[name] = {**p.to_dict(), **extra, "curve": _table(curve(sub, "depth"))}
    if not parts:
        na = (cl.too_few(k, None, exc, what="depth sweeps") if _has_depth_sweep(v)
              else not_applicable(f"not measured in this run: needs a width with >= {MIN_DEPTHS} depths "
                                  "(paper-depth runs it)"))
        return na, na, exc, ev
    return combine(parts), combine(ctls), exc, ev


def lecun_nonlazy(f: pd.DataFrame, protocol: str = "target") -> tuple[Verdict, list[cl.Exclusion], dict]:
    """Exploratory: LeCun's trained depth trend on the networks that left the lazy regime (at the
    target fit, κ above KAPPA_LAZY), with its mechanism: how far training moved P from its value
    at initialisation, per depth."""
    v = view(_multi(f[f["init"] == "lecun"]), protocol)
    k, exc = kept(v, ("equal-fit", "fd-linear"))
    lazy = kept(k, ("lazy",))[0]
    nonlazy = k[~k.set_index(["point", "seed"]).index.isin(lazy.set_index(["point", "seed"]).index)]
    parts, ev = [], {}
    for m, sub in nonlazy.groupby("width"):
        est, extra = _depth_slope(sub, "stability", False, f"lecun m={int(m)}")
        if est is None:
            continue
        parts.append(decide(est, threshold=0.0, side="below", reason=f"lecun m={int(m)} (kappa > lazy bound)"))
        by = sub.groupby("depth")
        ev[f"lecun_m{int(m)}"] = {**parts[-1].to_dict(), **extra,
                                  "kappa": {int(L): _r(x, 3) for L, x in by["kappa_m"].mean().items()},
                                  "log10_P_trained_over_init": {int(L): _r(np.log10(g["stability"].mean()
                                                                                     / g["stability_init"].mean()), 3)
                                                                for L, g in by}}
    exc.append(cl.Exclusion("not-lazy", len(lazy.groupby(["point", "seed"])) if len(lazy) else 0,
                            len(k.groupby(["point", "seed"])) if len(k) else 0,
                            "networks that stayed lazy are left out here (they are depth-init-trained's)"))
    if not parts:
        return not_applicable(f"no width with >= {MIN_DEPTHS} depths of non-lazy LeCun networks"), exc, ev
    return combine(parts), exc, ev


# ---------------------------------------------------------------------------------------
# the closed form at initialisation (evidence beside the depth claims)

def closed_form_at_init(row: pd.Series | dict) -> float | None:
    """``E_W P(f, ε)`` at initialisation for the network of ``row`` (fully connected only;
    :func:`robustlab.metrics.expected_stability_at_init`), or None where it does not apply."""
    if row.get("arch", "fcn") != "fcn" or "outputs" not in row or not np.isfinite(row.get("outputs", np.nan)):
        return None
    return expected_stability_at_init(str(row["init"]), d=int(row["d"]), width=int(row["width"]),
                                      depth=int(row["depth"]), k=int(row["outputs"]), eps=float(row["eps"]),
                                      gamma=float(row["gamma"]) if row["init"] == "small" else None)


def _closed_form_at_init(sub: pd.DataFrame) -> dict:
    """Evidence beside a depth curve at initialisation: the exact expectation per depth, its
    log-slope on L (LeCun ln ½; He and NTK 0), and the measured mean / closed form per depth."""
    if sub.empty:
        return {}
    rows = sub.groupby("depth").first()
    closed = {int(L): closed_form_at_init({**r.to_dict(), "depth": L}) for L, r in rows.iterrows()}
    if any(v is None or v <= 0 for v in closed.values()):
        return {}
    mean = sub.groupby("depth")["stability_init"].mean()
    Ls = sorted(closed)
    slope = float(np.polyfit(np.asarray(Ls, float), np.log([closed[L] for L in Ls]), 1)[0]) if len(Ls) >= 2 \
        else float("nan")
    return {"closed_form": {str(L): _r(closed[L]) for L in Ls}, "closed_form_slope": _r(slope),
            "measured_over_closed_form": {str(L): _r(float(mean[L]) / closed[L], 3) for L in Ls}}


def _he_vs_lecun_same_seed(v: pd.DataFrame) -> dict:
    """max |log(P_He / P_LeCun) − L ln 2| at initialisation over the (seed, width, depth) that
    both inits ran: 0 up to rounding (float32 networks), by positive homogeneity."""
    keys = [k for k in ("seed", "width", "depth", "d", "eps", "outputs", "dataset", "size", "n_test", "classes")
            if k in v.columns]
    if "classes" in keys:  # a list per row: compare its text
        v = v.assign(classes=v["classes"].astype(str))
    a, b = v[v["init"] == "he"], v[v["init"] == "lecun"]
    if a.empty or b.empty:
        return {}
    j = a[keys + ["stability_init"]].merge(b[keys + ["stability_init"]], on=keys, suffixes=("_he", "_lecun"))
    j = j.drop_duplicates(subset=keys)
    if j.empty:
        return {}
    dev = np.abs(np.log(j["stability_init_he"] / j["stability_init_lecun"]) - j["depth"].astype(float) * math.log(2))
    return {"pairs": int(len(j)), "max_abs_log_ratio_minus_L_ln2": _r(float(dev.max()), 3)}


__all__ = ["decide_width", "decide_width_moves", "decide_depth_at_init", "decide_depth_trained", "lecun_nonlazy",
           "closed_form_at_init", "MECHANISM_AT_INIT", "PROTOCOLS", "INCONCLUSIVE"]
