"""The width-depth-init claims, each a verdict of robustlab.stats."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ...metrics import expected_stability_at_init
from ...stats import (
    INCONCLUSIVE,
    Condition,
    Estimate,
    Verdict,
    combine,
    decide,
    difference_estimate,
    mean_estimate,
    not_applicable,
    slope_estimate,
)
from ..base import Claim, Context
from .analysis import PROTOCOLS, _r, _table, curve, finals, protocols, series, view
from .run import (
    ACC_FLOOR,
    MIN_DEPTHS,
    MIN_WIDTHS,
    SOURCE,
)

# ---------------------------------------------------------------------------------------
# claims
#
# Every claim is a verdict (robustlab.stats): an effect with a 95 % interval over seeds,
# decided against the threshold the paper's statement implies, with the premises it rests
# on as conditions (a network that did not train, weights that left the lazy regime: "not
# applicable", never evidence). A statement with several parts (one per init, depth, width
# or series) holds when every part does (stats.combine).

def _part(v: Verdict, **extra) -> dict:
    return {**v.to_dict(), **extra}


def _log_pivot(sub: pd.DataFrame, col: str, x: str = "width") -> pd.DataFrame:
    """``log col`` as a seed x ``x`` table (non-positive values become NaN)."""
    piv = sub.pivot_table(index="seed", columns=x, values=col, aggfunc="first").sort_index(axis=1)
    return np.log(piv.where(piv > 0))


def _trained_at(sub: pd.DataFrame, x: str) -> pd.Series:
    """Per value of ``x``: did every seed train (a :func:`view`'s ``trained``)?"""
    return sub.groupby(x)["trained"].all().sort_index()


def peak_estimate(sub: pd.DataFrame) -> tuple[Estimate, dict]:
    """The interior-peak statistic of one width sweep, one value per seed, with its t interval.

    For seed ``s`` the peak width is the interior width where the *other* seeds' mean of
    ``log P`` is largest (cross-fitted, so that picking the maximum does not bias the seed's
    own value upwards), and its statistic is ``min(log P_s(peak) − log P_s(narrowest),
    log P_s(peak) − log P_s(widest))``: positive when the peak stands above both ends of
    the grid. With fewer than three seeds the peak is picked on all seeds. A network whose
    units all died has ``P = 0`` exactly (``log P = −∞``): an end at zero lies below any peak,
    and the peak is picked on the other seeds' living networks. A seed whose own network is
    dead at its peak width has no finite statistic (``−∞``, dropped by the mean): those seeds
    are listed in ``dead_at_peak`` as ``[seed, width]``, for the claim to say so rather than
    judge the peak on the seeds that are left.
    """
    piv = sub.pivot_table(index="seed", columns="width", values="stability", aggfunc="first").sort_index(axis=1)
    with np.errstate(divide="ignore"):
        logp = np.log(piv.clip(lower=0))
    widths = list(logp.columns)
    inner = widths[1:-1]
    vals, peaks, dead = [], [], []
    for s in logp.index:
        rest = logp.drop(index=s) if len(logp) >= 3 else logp
        pk = rest[inner].replace(-np.inf, np.nan).mean().idxmax()
        peaks.append(int(pk))
        row = logp.loc[s]
        if row[pk] == -np.inf:  # (−∞) − (−∞) would be NaN where an end is dead too
            dead.append([int(s), int(pk)])
            vals.append(-math.inf)
        else:
            vals.append(min(row[pk] - row[widths[0]], row[pk] - row[widths[-1]]))
    est = mean_estimate(vals, what="seeds")
    pk_all = int(logp[inner].replace(-np.inf, np.nan).mean().idxmax())
    return est, {"peak_width": pk_all, "peak_width_per_seed": peaks, "dead_at_peak": dead,
                 "peak_over_ends": _r(math.exp(est.value)) if math.isfinite(est.value) else None}


def _judge(f: pd.DataFrame, check) -> tuple[Verdict, dict]:
    """Run ``check(view) -> (verdict, evidence)`` on every protocol the results hold; the claim's
    verdict is the first's (equal training loss when measured), the others are reported beside."""
    if f.empty or "stability" not in f.columns:
        return Verdict(INCONCLUSIVE, reason="no final results"), {"reason": "no final results"}
    ps = protocols(f)
    ev: dict = {"judged_on": PROTOCOLS[ps[0]]}
    first = None
    for p in ps:
        verdict, e = check(view(f, p))
        ev[p] = {"verdict": verdict.verdict, "effect": verdict.effect, "interval": verdict.interval, **e}
        first = first or verdict
    return first, ev


def claim_width(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    f = f[f["init"].isin(["he", "lecun"])]
    statement = ("Lazy regime, width: stability first rises then falls with width (an interior maximum) "
                 "for He and LeCun at depth 2 and deeper")

    def check(v: pd.DataFrame) -> tuple[Verdict, dict]:
        # Every width sweep is judged, in its own series; each init needs sweeps at depth 2 and
        # deeper over its series together (a series that holds only some depths, e.g. a second
        # training-set size swept at depth 2 alone, adds its parts and takes nothing away).
        parts, ev = [], {}
        for init in ("he", "lecun"):
            judged: set[int] = set()
            for label, vi in series(v, init):
                depths = sorted(int(L) for L, s in vi.groupby("depth") if s["width"].nunique() >= MIN_WIDTHS)
                judged.update(depths)
                for L in depths:
                    sub = vi[vi["depth"] == L]
                    est, extra = peak_estimate(sub)
                    tr = _trained_at(sub, "width")
                    untrained = [int(m) for m in tr.index[(tr.index > extra["peak_width"]) & ~tr.to_numpy()]]
                    cond = Condition("widths past the peak trained", not untrained,
                                     f"untrained widths {untrained}" if untrained else "every seed trained")
                    dead = extra["dead_at_peak"]
                    alive = Condition("every seed alive at its peak width", not dead,
                                      f"P = 0 (every unit dead) for [seed, width] {dead}" if dead else
                                      "every seed's network alive there")
                    verdict = decide(est, threshold=0.0, side="above", conditions=[cond, alive],
                                     reason=f"{init} L={L}{label}")
                    parts.append(verdict)
                    ev[f"{init}_L{L}{label}"] = _part(verdict, **extra, curve=_table(curve(sub, "width")))
            if 2 not in judged or not any(L > 2 for L in judged):
                why = (f"needs width sweeps (>= {MIN_WIDTHS} widths) at depth 2 and deeper; has depths "
                       f"{sorted(judged)}")
                parts.append(decide(None, threshold=0.0, reason=f"{init}: {why}"))
                ev[init] = why
        return combine(parts), ev

    verdict, ev = _judge(f, check)
    ev = {"definition": "per seed, the interior-peak statistic min(log P(peak) - log P(narrowest), log P(peak) - "
                        "log P(widest)), the peak picked on the other seeds (cross-fitted); its mean over seeds "
                        "with a 95% t interval must lie above 0 for He and LeCun at depth 2 and every deeper depth "
                        "with a width sweep; not applicable where a width past the peak did not train every seed, "
                        "or a seed's network is dead (P = 0) at its peak width",
          **ev}
    return Claim("width-peak", statement, verdict, ev, SOURCE + ", Thm 1, §5.3, Fig. 4(a)")


def _seed_peaks(sub: pd.DataFrame) -> list[float]:
    """log2 of each seed's own interior peak width: the interior width of largest stability."""
    out = []
    for _, s in sub.groupby("seed"):
        s = s.sort_values("width")
        if s["width"].nunique() >= MIN_WIDTHS:
            inner = s.iloc[1:-1]
            out.append(float(np.log2(inner["width"].iloc[int(np.nanargmax(inner["stability"].to_numpy(float)))])))
    return out


def claim_width_moves(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    """The width peak against the training-set size.

    Thm 1 ties the rise and fall to the passage from under- to over-parameterisation, so a
    larger training set should move the peak to larger widths. For He and LeCun at every depth
    swept in width at two or more training-set sizes: each seed's interior peak width (log2),
    mean at the largest size minus mean at the smallest, Welch interval above 0. A width past
    the smaller peak where a seed did not train makes the part not applicable; a run with one
    training-set size makes the claim not applicable.
    """
    f = finals(df)
    f = f[f["init"].isin(["he", "lecun"])] if len(f) else f
    statement = "Lazy regime, width: the stability peak moves to larger widths with a larger training set"
    src = SOURCE + ", Thm 1, §5.3"
    if f.empty or "stability" not in f.columns or "n_train" not in f.columns or f["n_train"].nunique() < 2:
        return Claim("width-peak-n-train", statement,
                     not_applicable("the run has one training-set size: the peak cannot be compared across sizes"),
                     {"reason": "needs width sweeps at two or more training-set sizes (paper-width-n)"}, src)

    def check(v: pd.DataFrame) -> tuple[Verdict, dict]:
        parts, ev = [], {}
        for init in ("he", "lecun"):
            for L, sub in v[v["init"] == init].groupby("depth"):
                sizes = sorted(int(n) for n, s in sub.groupby("n_train") if s["width"].nunique() >= MIN_WIDTHS)
                if len(sizes) < 2:
                    continue
                small, large = sub[sub["n_train"] == sizes[0]], sub[sub["n_train"] == sizes[-1]]
                a, b = _seed_peaks(large), _seed_peaks(small)
                first = 2 ** min(b) if b else 0
                past = sub[sub["width"] > first]
                untrained = sorted({int(n) for n, s in past.groupby("n_train") if not s["trained"].all()})
                cond = Condition("trained past the smaller peak", not untrained,
                                 f"n_train {untrained}: a seed did not train at a width past {first}"
                                 if untrained else "every seed trained")
                verdict = decide(difference_estimate(a, b), threshold=0.0, side="above", conditions=[cond],
                                 reason=f"{init} L={int(L)}: log2 peak width at n_train={sizes[-1]} minus "
                                        f"n_train={sizes[0]}")
                parts.append(verdict)
                ev[f"{init}_L{int(L)}"] = _part(verdict, peak_log2_width={str(sizes[0]): b, str(sizes[-1]): a})
        if not parts:
            return not_applicable("no depth swept in width at two training-set sizes"), ev
        return combine(parts), ev

    verdict, ev = _judge(f, check)
    ev = {"definition": "per seed, log2 of the interior width where its stability is largest; the mean at the "
                        "largest training-set size minus the mean at the smallest, with a Welch 95% interval, "
                        "must lie above 0 for He and LeCun at every depth swept at two sizes", **ev}
    return Claim("width-peak-n-train", statement, verdict, ev, src)


DEPTH_SIGNS = (("lecun", -1), ("he", 1), ("ntk", 1))

# Why He and NTK cannot "rise" at initialisation (robustlab.metrics.expected_stability_at_init)
MECHANISM_AT_INIT = (
    "Closed form (exact at finite width, bias-free ReLU network): E_W ||J_x f||_F^2 = d k beta_L "
    "prod_{l<L} (m beta_l / 2). LeCun (m beta = 1) halves it per layer; He (m beta = 2) and NTK keep it "
    "constant in depth. Seed 002's polynomial growth for He and NTK is that of its upper bound (Thm 1), "
    "not of the quantity: at initialisation the expectation is flat, so the He/NTK parts of this claim "
    "cannot be reproduced by more seeds; a slight measured fall is Jensen's gap of log P (its seed "
    "variance grows with depth). closed_form, closed_form_slope and measured_over_closed_form give the "
    "check per width. Network by network it is exact too: from the same seed He's weights are LeCun's "
    "times sqrt 2 in every layer and ReLU is positively homogeneous, so P_He = 2^L P_LeCun "
    "(he_vs_lecun_same_seed): LeCun falling by ln 1/2 per layer and He staying flat are one fact.")


def _depth_parts(v: pd.DataFrame, col: str, need_trained: bool) -> tuple[Verdict, dict]:
    """One part per init: LeCun's slope of log ``col`` on L below 0, He's and NTK's slope of
    log ``col`` on log L above 0, at every width with >= MIN_DEPTHS depths (combined over widths
    and series). With ``need_trained`` only depths where every seed trained are fitted, and a
    width with fewer than MIN_DEPTHS such depths is not applicable."""
    inits, ev = [], {}
    for init, sign in DEPTH_SIGNS:
        parts = []
        for label, vi in series(v, init):
            for m, sub in vi.groupby("width"):
                if sub["depth"].nunique() < MIN_DEPTHS:
                    continue
                conds, use = [], sub
                if need_trained:
                    tr = _trained_at(sub, "depth")
                    ok = [int(L) for L in tr.index[tr.to_numpy()]]
                    bad = [int(L) for L in tr.index[~tr.to_numpy()]]
                    conds.append(Condition("trained", len(ok) >= MIN_DEPTHS,
                                           f"depths {ok} trained every seed" + (f"; {bad} did not (left out)"
                                                                                  if bad else "")))
                    use = sub[sub["depth"].isin(ok)]
                est = slope_estimate(use["depth"], use[col], log_x=sign > 0, log_y=True)
                verdict = decide(est, threshold=0.0, side="below" if sign < 0 else "above", conditions=conds,
                                 reason=f"{init} m={int(m)}{label}")
                extra = {}
                if init == "lecun" and verdict.interval and None not in verdict.interval:
                    extra["ln_half_in_interval"] = bool(verdict.interval[0] <= math.log(0.5) <= verdict.interval[1])
                if col == "stability_init":
                    extra.update(_closed_form_at_init(sub))
                    flat = extra.get("closed_form_slope") is not None and abs(extra["closed_form_slope"]) < 1e-9
                    if flat and verdict.verdict == INCONCLUSIVE:
                        # the true slope sits on the threshold: seeds_needed would be a formula's number
                        verdict = dataclasses.replace(verdict, seeds_needed=None, reason=(
                            f"{verdict.reason}: the exact expectation at initialisation is flat in depth (closed "
                            "form), so no number of seeds decides a rise"))
                parts.append(verdict)
                ev[f"{init}_m{int(m)}{label}"] = _part(verdict, **extra, curve=_table(curve(sub, "depth", col)))
        if not parts:
            parts = [decide(None, threshold=0.0, reason=f"{init}: no width with >= {MIN_DEPTHS} depths")]
            ev[init] = f"no width with >= {MIN_DEPTHS} depths"
        inits.append(combine(parts, reason=init))
    return combine(inits), ev


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
    log-slope (LeCun ln ½ per layer; He and NTK 0), and measured mean / closed form per depth.

    The claim fits the mean over seeds of log P; since log is concave, that sits below
    log E P by about half the seed-to-seed variance of log P, which grows with depth (the
    product of more random layers) — so a flat expectation can read as a slight fall."""
    rows = sub.groupby("depth").first()
    closed = {int(L): closed_form_at_init({**r.to_dict(), "depth": L}) for L, r in rows.iterrows()}
    if any(v is None or v <= 0 for v in closed.values()):
        return {}
    mean = sub.groupby("depth")["stability_init"].mean()
    logvar = sub.assign(lp=np.log(sub["stability_init"].where(sub["stability_init"] > 0))).groupby("depth")["lp"].var()
    Ls = sorted(closed)
    xs = np.log(Ls) if rows["init"].iloc[0] != "lecun" else np.asarray(Ls, float)
    slope = float(np.polyfit(xs, np.log([closed[L] for L in Ls]), 1)[0]) if len(Ls) >= 2 else float("nan")
    return {"closed_form": {str(L): _r(closed[L]) for L in Ls},
            "closed_form_slope": _r(slope),
            "measured_over_closed_form": {str(L): _r(float(mean[L]) / closed[L], 3) for L in Ls},
            "var_log_P_over_seeds": {str(L): _r(float(logvar[L]), 3) for L in Ls if np.isfinite(logvar[L])}}


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


def claim_depth_at_init(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("Depth at initialisation (Thm 1's lazy regime): LeCun stability falls exponentially with depth "
                 "(about ln 1/2 per layer), He and NTK stability rise polynomially")
    f = finals(df)
    if f.empty or "stability_init" not in f.columns:
        return Claim("depth-init-at-init", statement, Verdict(INCONCLUSIVE, reason="no final results"),
                     {"reason": "no final results"}, SOURCE + ", Thm 1")
    v = f.assign(trained=True)
    verdict, ev = _depth_parts(v, "stability_init", need_trained=False)
    same = _he_vs_lecun_same_seed(v)
    if same:
        ev["he_vs_lecun_same_seed"] = same
    ev = {"definition": "stability at initialisation (before any step: the lazy regime holds exactly); LeCun: OLS "
                        "slope of log P on L (seeds pooled as rows) with a 95% t interval below 0; He and NTK: "
                        f"slope of log P on log L above 0; at every width with >= {MIN_DEPTHS} depths; "
                        "ln_half_in_interval says whether LeCun's slope is consistent with ln(1/2)",
          "mechanism": MECHANISM_AT_INIT, **ev}
    return Claim("depth-init-at-init", statement, verdict, ev, SOURCE + ", Thm 1")


def claim_depth_trained(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = "Depth after training (§5.4): with LeCun init stability falls with depth; with He and NTK it rises"
    verdict, ev = _judge(finals(df), lambda v: _depth_parts(v, "stability", need_trained=True))
    ev = {"definition": "as depth-init-at-init on the trained networks' stability, fitted over the depths where "
                        "every seed trained (reached the target loss; at the end of the schedule: train accuracy "
                        f">= {ACC_FLOOR}); a width with fewer than {MIN_DEPTHS} trained depths is not applicable",
          **ev}
    return Claim("depth-init-trained", statement, verdict, ev, SOURCE + ", §5.4, Fig. 5, App. E.6")


def claim_nonlazy_early(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    """Thm 3: two-layer, one output, squared loss, the small (non-lazy) init, early in training.

    The OLS slope of log stability at the end of epoch ``early_epoch`` on log width, over the
    init=small, depth-2, output=single runs, must have a 95 % t interval below 0. Conditions:
    such runs exist at >= 3 widths, and the window is early: at no width has the mean training
    loss fallen below ``target_loss`` by then (a fitted network is past Thm 3's time limit).
    (We train by minibatch SGD with momentum; Thm 3 is stated for gradient descent.)
    """
    statement = ("Non-lazy width, early training (Thm 3: squared loss, small init): stability falls with width "
                 "in the early stage of training")
    src = SOURCE + ", Thm 3"
    f = finals(df)
    ok = (len(f) > 0 and "stability_early" in f.columns and "output" in f.columns)
    small = f[(f["init"] == "small") & (f["depth"] == 2) & (f["output"] == "single")
              & f["stability_early"].notna()] if ok else f.iloc[0:0]
    widths = sorted(int(m) for m in small["width"].unique()) if len(small) else []
    conds = [Condition("squared loss and small init, measured early", len(widths) >= 3,
                       f"init=small, depth 2, output=single runs with stability at an early epoch at widths "
                       f"{widths}" if widths else "no init=small, depth-2, output=single run with stability "
                                                  "measured at an early epoch (early_epoch > 0)")]
    ev: dict = {"definition": "init=small, depth 2, output=single (squared loss): the OLS slope of log stability at "
                              "the end of epoch early_epoch on log m has a 95% t interval below 0"}
    if len(widths) >= 3:
        loss = small.groupby("width")["train_loss_early"].mean()
        target = float(small["target_loss"].iloc[0]) if "target_loss" in small.columns else 0.0
        fitted = [int(m) for m, v in loss.items() if target > 0 and v <= target]
        conds.append(Condition("early in training", not fitted,
                               f"mean training loss at epoch {int(small['early_epoch'].iloc[0])} by width: "
                               + ", ".join(f"{int(m)}: {v:.3g}" for m, v in loss.items())
                               + (f"; at or below target_loss {target:g} at widths {fitted}" if fitted else "")))
        est = slope_estimate(small["width"], small["stability_early"], log_x=True, log_y=True)
        ev["early_by_width"] = {int(m): {"stability": _r(g["stability_early"].mean()),
                                         "train_loss": _r(g["train_loss_early"].mean()), "seeds": int(len(g))}
                                for m, g in small.groupby("width")}
    else:
        est = None
    verdict = decide(est, threshold=0.0, side="below", conditions=conds,
                     reason="slope of log P(early) on log m") if est is not None else \
        not_applicable("Thm 3's premise (an early-training window under the squared loss) is not measured", conds)
    ev["conditions"] = [c.to_dict() for c in conds]
    return Claim("nonlazy-width-early", statement, verdict, ev, src)


# What makes a non-lazy run and a He run comparable: the same data, training budget and loss
# (a learning rate or an init scale may differ per init). A grid with He runs at two
# training-set sizes compares the non-lazy init only with the He runs on its own data.
_PAIRING_FIELDS = ("dataset", "data_dir", "classes", "size", "sphere", "n_train", "n_test", "epochs", "batch_size",
                   "output")


def _same_setting(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return all(set(a[k].astype(str)) == set(b[k].astype(str))
               for k in _PAIRING_FIELDS if k in a.columns and k in b.columns)


def _same_output_as_he(f: pd.DataFrame) -> pd.DataFrame:
    """The rows trained with the loss He's runs use: a small-init run under another loss (the
    squared-loss runs of Thm 3) is no partner for comparing against He."""
    if "output" not in f.columns or not (f["init"] == "he").any():
        return f
    return f[f["output"].isin(set(f.loc[f["init"] == "he", "output"]))]


def claim_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    f = _same_output_as_he(f[f["depth"] == 2])
    statement = ("Non-lazy two-layer networks after training (Fig. 4b): stability falls with width and lies "
                 "below the lazy (He) network at the same width")

    def one(small: pd.DataFrame, he: pd.DataFrame, name: str) -> tuple[list[Verdict], dict]:
        tr_s = _trained_at(small, "width")
        ok_s = [int(m) for m in tr_s.index[tr_s.to_numpy()]]
        cond = Condition("trained", len(ok_s) >= 3, f"widths {ok_s} trained every seed (of {list(map(int, tr_s.index))})")
        use = small[small["width"].isin(ok_s)]
        slope = decide(slope_estimate(use["width"], use["stability"], log_x=True, log_y=True), threshold=0.0,
                       side="below", conditions=[cond], reason=f"{name}: slope of log P on log m")
        tr_h = _trained_at(he, "width") if len(he) else pd.Series(dtype=bool)
        common = [m for m in ok_s if m in tr_h.index and bool(tr_h[m])]
        cond2 = Condition("trained at equal quality", len(common) >= 3,
                          f"common widths where both trained every seed: {common}")
        ls = _log_pivot(small[small["width"].isin(common)], "stability").mean(axis=1)
        lh = _log_pivot(he[he["width"].isin(common)], "stability").mean(axis=1) if common else pd.Series(dtype=float)
        below = decide(difference_estimate(ls, lh), threshold=0.0, side="below", conditions=[cond2],
                       reason=f"{name}: log(P_small / P_he) averaged over common widths")
        ch = curve(he, "width") if len(he) else None
        return [slope, below], {"slope": _part(slope), "below_he": _part(below, widths=common),
                                "curve_small": _table(curve(small, "width")),
                                "curve_he": _table(ch) if ch is not None else None}

    def check(v: pd.DataFrame) -> tuple[Verdict, dict]:
        smalls, hes = series(v, "small"), series(v, "he") or [("", v.iloc[0:0])]
        if not smalls:
            return decide(None, threshold=0.0, reason="no init=small runs at depth 2"), \
                {"reason": "no init=small runs at depth 2"}
        parts, ev = [], {}
        for ls, small in smalls:
            for lh, he in hes:
                if len(he) and not _same_setting(small, he):
                    continue  # He on other data (another training-set size, ...): no partner
                name = f"small{ls}_vs_he{lh}"
                p, e = one(small, he, name)
                parts += p
                ev[name] = e
        if not parts:
            return not_applicable("no He run on the small init's data and schedule"), \
                {"reason": "no He run on the small init's data and schedule"}
        return combine(parts), ev

    verdict, ev = _judge(f, check)
    ev = {"definition": "end of schedule, depth 2: (i) the OLS slope of log P on log m of init=small, over the widths "
                        "where every seed trained (>= 3), has a 95% t interval below 0; (ii) the per-seed mean over "
                        "the common trained widths of log P_small minus that of log P_he (Welch interval) is below 0",
          **ev}
    return Claim("nonlazy-width", statement, verdict, ev, SOURCE + ", Fig. 4(b)")


def growth_exponent(trace: pd.DataFrame, decay_start: int) -> dict:
    """Log–log growth exponent ``b`` of κ(t) ∝ t^b (the mean over the rows at each epoch) over the
    late constant-rate window ``[T₁/2, T₁]`` with ``T₁ = decay_start`` (the last epoch when the
    rate never decays): past the first transient, before a decay slows every curve down."""
    k = trace.groupby("epoch")["kappa"].mean().sort_index()
    last = int(k.index.max())
    T1 = int(decay_start) if 0 < decay_start <= last else last
    win = k[(k.index >= max(1, T1 // 2)) & (k.index <= T1)]
    if len(win) < 2 or (win <= 0).any():
        return {"exponent": None, "window": [max(1, T1 // 2), T1]}
    est = slope_estimate(win.index.to_numpy(float), win.to_numpy(float), log_x=True, log_y=True)
    return {"exponent": _r(est.value, 3), "window": [int(win.index.min()), int(win.index.max())],
            "kappa_start": _r(win.iloc[0]), "kappa_end": _r(win.iloc[-1])}


def _seed_exponents(ep: pd.DataFrame, widths: list[int]) -> pd.Series:
    """Per seed, the mean over ``widths`` of its own κ(t) growth exponent."""
    per: dict[int, list[float]] = {}
    for (_m, s), tr in ep[ep["width"].isin(widths)].groupby(["width", "seed"]):
        b = growth_exponent(tr, int(tr["decay_start"].iloc[0]))["exponent"]
        if b is not None:
            per.setdefault(int(s), []).append(b)
    return pd.Series({s: float(np.mean(b)) for s, b in per.items()}, dtype=float)


def claim_kappa(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("kappa: nearly flat in time and falling with width for He; growing in time and an order of "
                 "magnitude larger for the non-lazy init")
    ev: dict = {"definition": "depth 2, widths m >= the number of training points (where lazy training applies; "
                              ">= 3 needed, else not applicable): (i) He's growth exponent b of kappa(t) ~ t^b over "
                              "the late constant-rate window, per seed averaged over widths, minus the non-lazy "
                              "one (Welch interval) is below 0; (ii) the OLS slope of log final kappa on log m for "
                              "He is below 0; (iii) the per-seed mean over common widths of log10 kappa_small minus "
                              "that of log10 kappa_he (Welch interval) is above 1: an order of magnitude, factor 10"}
    f = finals(df)
    if f.empty or "kappa" not in f.columns:
        return Claim("kappa", statement, Verdict(INCONCLUSIVE, reason="no results"), {**ev, "reason": "no results"},
                     SOURCE + ", §5.2, Figs. 2-3")
    ep = df[(df["kind"] == "epoch") & (df["depth"] == 2)]
    f = _same_output_as_he(f[f["depth"] == 2])
    n_train = int(f["n_train"].max()) if len(f) else 0
    ev["n_train"] = n_train
    hes, smalls = series(f, "he"), series(f, "small")
    if not hes or not smalls:
        return Claim("kappa", statement, decide(None, threshold=0.0, reason="needs init=he and init=small at depth 2"),
                     {**ev, "reason": "needs init=he and init=small runs at depth 2"}, SOURCE + ", §5.2, Figs. 2-3")
    parts = []
    for lh, he in hes:
        n_he = int(he["n_train"].max())  # this series' own training set
        wh = sorted(int(m) for m in he["width"].unique() if m >= n_he)
        lazy = Condition("over-parameterised widths", len(wh) >= 3, f"He widths >= {n_he}: {wh}")
        over = he[he["width"].isin(wh)]
        falls = decide(slope_estimate(over["width"], over["kappa"], log_x=True, log_y=True), threshold=0.0,
                       side="below", conditions=[lazy], reason=f"he{lh}: slope of log kappa on log m")
        parts.append(falls)
        ev[f"he{lh}_vs_width"] = _part(falls, mean={int(m): _r(x) for m, x in he.groupby("width")["kappa"].mean().items()})
        b_he = _seed_exponents(ep[ep["point"].isin(he["point"])], wh)
        for ls, small in smalls:
            if not _same_setting(small, he):
                continue  # He on other data: no partner for the non-lazy init
            ws = sorted(int(m) for m in small["width"].unique() if m >= n_he)
            common = [m for m in ws if m in wh]
            cond = Condition("over-parameterised widths", len(common) >= 3, f"common widths >= {n_he}: {common}")
            b_small = _seed_exponents(ep[ep["point"].isin(small["point"])], common)
            flat = decide(difference_estimate(_seed_exponents(ep[ep["point"].isin(he["point"])], common), b_small),
                          threshold=0.0, side="below", conditions=[cond],
                          reason=f"b_he{lh} - b_small{ls}: growth exponents in time")
            kh = np.log10(he[he["width"].isin(common)].pivot_table(index="seed", columns="width", values="kappa"))
            ks = np.log10(small[small["width"].isin(common)].pivot_table(index="seed", columns="width",
                                                                          values="kappa"))
            larger = decide(difference_estimate(ks.mean(axis=1), kh.mean(axis=1)), threshold=1.0, side="above",
                            conditions=[cond], reason=f"log10(kappa_small{ls} / kappa_he{lh})")
            parts += [flat, larger]
            ev[f"small{ls}_vs_he{lh}_in_time"] = _part(flat, b_he={int(s): _r(b, 3) for s, b in b_he.items()},
                                                       b_small={int(s): _r(b, 3) for s, b in b_small.items()})
            ev[f"small{ls}_vs_he{lh}_far_larger"] = _part(larger)
    return Claim("kappa", statement, combine(parts), ev, SOURCE + ", §5.2, Figs. 2-3")


MC_BAND = 0.05  # relative: the Monte Carlo mean within ±5 % of the identity (see claim_mc)


def claim_mc(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("The Monte Carlo estimate of E|<J, delta>|^2 agrees with the identity "
                 f"eps^2 ||J||_F^2 / (d+2) (its 95% interval within ±{MC_BAND:.0%} of it)")
    f = finals(df)
    if "mc_stability" not in f.columns or f["mc_stability"].isna().all():
        return Claim("mc-identity", statement, decide(None, threshold=(-MC_BAND, MC_BAND), side="inside",
                                                      reason="no grid point had a Monte Carlo estimate"),
                     {"reason": "no grid point had a Monte Carlo estimate"}, SOURCE + ", Def. 1")
    m = f.dropna(subset=["mc_stability"])
    mc, se, exact = (m[k].to_numpy(float) for k in ("mc_stability", "mc_stderr", "mc_exact"))
    # the pooled relative error over seeds; its standard error from the draws' own (normal, 95 %)
    rel = float((mc - exact).sum() / exact.sum())
    half = 1.96 * float(np.sqrt((se ** 2).sum()) / exact.sum())
    sd = float(np.median(se / exact))
    est = Estimate(rel, rel - half, rel + half, len(m), f"pooled relative error over {len(m)} seeds, normal interval "
                   "from the Monte Carlo standard errors", sd=sd)
    verdict = decide(est, threshold=(-MC_BAND, MC_BAND), side="inside")
    z = (mc - exact) / se
    ev = {"definition": f"pooled relative error sum(MC - exact) / sum(exact) over seeds with a 95% interval from "
                        f"the draws' standard errors, inside ±{MC_BAND:.0%}: a normalisation error (a wrong d + 2, "
                        "a radius squared twice) is larger; an agreement finer than the band is not claimed",
          "point": {"init": str(m["init"].iloc[0]), "depth": int(m["depth"].iloc[0]), "width": int(m["width"].iloc[0])},
          "per_seed": [{"seed": int(r.seed), "mc": _r(r.mc_stability), "stderr": _r(r.mc_stderr),
                        "exact": _r(r.mc_exact), "z": _r(zz, 3)} for r, zz in zip(m.itertuples(), z)],
          "draws": int(m["mc_samples"].iloc[0]), "points": int(m["mc_points"].iloc[0])}
    return Claim("mc-identity", statement, verdict, ev, SOURCE + ", Def. 1")


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    return [claim_width(df, ctx), claim_width_moves(df, ctx), claim_depth_at_init(df, ctx), claim_depth_trained(df, ctx),
            claim_nonlazy_early(df, ctx), claim_nonlazy(df, ctx), claim_kappa(df, ctx), claim_mc(df, ctx)]
