"""Views of the width-depth-init results table shared by the claims and the figures: the
moments of measurement, the premises a point must meet, and the bootstrap of Def. 1's mean."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from ... import claims as cl
from ...stats import Estimate
from .run import ACC_FLOOR, WidthDepthInitConfig

# ---------------------------------------------------------------------------------------
# thresholds of the premises, fixed before any run of this version (issue 35); the reasons:
#
# KAPPA_LAZY: Thm 1 bounds networks that stay near their initialisation (lazy training);
#   κ = ‖θ − θ₀‖ / ‖θ₀‖ ≤ 0.3 keeps every weight matrix within about a third of its initial
#   norm, where the linearisation the theorem rests on still describes the network (Chizat
#   et al. 2019's lazy regime is κ → 0; 0.3 is the loosest bound we would still call lazy).
# FD_TOL: the stability P is the linear formula E‖J δ‖²; it describes the network's actual
#   change under a δ of radius ε only where the finite difference ‖f(x+δ) − f(x)‖² agrees
#   with it. Within 10 % (|ratio − 1| ≤ 0.1) the error in log P is ≤ 0.1, against effects of
#   ln 2 ≈ 0.69 per layer (depth) and ~1 in log P (the width peak).
KAPPA_LAZY = 0.3
FD_TOL = 0.1
# the alpha arm's lazy premise (issue 54): the largest per-layer relative spectral change of θ, chosen by
# the issue before any alpha run (f_α's distance from its linearisation is O(that change) of the linear term)
SPECTRAL_LAZY = 0.1
N_BOOT = 1000  # bootstrap resamples (percentile 95 % intervals)

PROTOCOLS = {"target": "at equal fit (the first epoch a network reached target_acc)",
             "end": "at the end of the schedule", "init": "at initialisation",
             "early": "at the end of epoch early_epoch", "step": "after SGD step t (early_steps)",
             "loss": "the first epoch the training loss was at most L* (loss_marks)"}

UNIT = ("point", "seed")  # one network: the premises count and drop these


# The plateau premises (App. E.2: "the loss and accuracy of the neural network remain almost unchanged from
# the 50th epoch to the 200th epoch"; issue 54, review defect 3, notes/wdi5.md), over the last
# PLATEAU_EPOCHS epochs (running training loss and accuracy of epoch T against epoch T - 10):
# PLATEAU_ACC: |accuracy change| <= 1 percentage point; PLATEAU_LOSS: |loss change| <= 1 % of the loss of
#   the uninformative predictor (log k for cross-entropy over k classes, 1/2 for the squared loss on
#   +-1 labels). "Almost unchanged" = at most 1 % of each quantity's full range, chosen from the scales
#   before any run of it; a fitted CE network's loss falling 0.02 -> 0.01 (-50 %) is on the plateau.
# PLATEAU_P (evidence and a variant, never the verdict): |log P(T) - log P(T - 10)| <= 0.1 on the first
#   100 held-out points, FD_TOL's tolerance in log P.
# PLATEAU_TOL (the relative loss change <= 10 %, the premise before; a reported variant only): the
#   relative change of a CE loss is large exactly for the slow near-interpolation widths (the peak).
PLATEAU_EPOCHS = 10
PLATEAU_ACC = 0.01
PLATEAU_LOSS = 0.01
PLATEAU_P = 0.1
PLATEAU_TOL = 0.1

_TRACE = {"loss_change_last10": "loss", "loss_drop_last10": "loss", "acc_change_last10": "train_acc_running"}


def _trace_changes(df: pd.DataFrame, f: pd.DataFrame) -> pd.DataFrame:
    """Per final row, from the network's epoch trace (its last epoch against PLATEAU_EPOCHS before):
    ``loss_change_last10`` |ΔL| / L(T − 10), ``loss_drop_last10`` |ΔL| and ``acc_change_last10``
    |Δ accuracy| of the running training loss and accuracy; NaN without a trace."""
    out = pd.DataFrame(np.nan, index=f.index, columns=list(_TRACE))
    keys = [k for k in UNIT if k in df.columns]
    if "loss" not in df.columns or not keys:
        return out
    ep = df.loc[df["kind"] == "epoch", keys + ["epoch"] + sorted({c for c in _TRACE.values() if c in df.columns})]
    ep = ep.dropna(subset=["loss"])
    if ep.empty:
        return out
    last = ep.groupby(keys)["epoch"].transform("max")
    end = ep[ep["epoch"] == last].set_index(keys)
    before = ep[ep["epoch"] == last - PLATEAU_EPOCHS].set_index(keys)
    end, before = end[~end.index.duplicated()], before[~before.index.duplicated()]
    with np.errstate(divide="ignore", invalid="ignore"):
        vals = {"loss_change_last10": (end["loss"] - before["loss"]).abs() / before["loss"],
                "loss_drop_last10": (end["loss"] - before["loss"]).abs()}
        if "train_acc_running" in ep.columns:
            vals["acc_change_last10"] = (end["train_acc_running"] - before["train_acc_running"]).abs()
    idx = pd.MultiIndex.from_frame(f[keys].astype(object)) if len(keys) > 1 else f[keys[0]]
    for c, v in vals.items():
        out[c] = pd.to_numeric(v, errors="coerce").reindex(idx).to_numpy()
    return out


def finals(df: pd.DataFrame) -> pd.DataFrame:
    """The final rows, one per network: a network that two grid blocks both ran (the same
    config but for ``init_draws``, which only adds untrained draws) is kept once, with its draws.
    The plateau premises' quantities (``loss_change_last10``, ``loss_drop_last10``,
    ``acc_change_last10``) are taken from the epoch rows where the run did not record them."""
    if "kind" not in df.columns:
        return df.iloc[0:0]
    f = df[df["kind"] == "final"]
    if len(f):  # recorded by the run since issue 54 (the last two since wdi5); from the epoch trace before
        have = pd.DataFrame({c: pd.to_numeric(f[c], errors="coerce") if c in f.columns
                             else pd.Series(np.nan, index=f.index) for c in _TRACE})
        if have.isna().to_numpy().any():
            have = have.fillna(_trace_changes(df, f))
        f = f.assign(**{c: have[c] for c in _TRACE})
    if "init_draws" not in f.columns or f.empty:
        return f
    text = f[_network_keys(f)].astype(str)
    # the row with the most untrained draws first, then the one with finite-difference draws (the alpha arm's
    # twins, paper-alpha, beside the same linearised network without them, paper): one network, one row
    order = f["init_draws"].fillna(0).to_numpy() * 1e6
    if "fd_draws" in f.columns:
        order = order + pd.to_numeric(f["fd_draws"], errors="coerce").fillna(0).to_numpy()
    keep = ~text.assign(_o=-order).sort_values("_o", kind="stable").drop(columns="_o").duplicated()
    return f.loc[keep.index[keep.to_numpy()]].sort_index()


_NOT_NETWORK = {"init_draws", "fd_points", "fd_draws", "mc_samples", "mc_points", "mc_init", "mc_depth", "mc_width"}


def _network_keys(df: pd.DataFrame) -> list[str]:
    """The config fields of ``df`` that identify one network (the seed included; not the measurement's)."""
    return [k for k in WidthDepthInitConfig.field_names() if k in df.columns and k not in _NOT_NETWORK]


def _fit_end(f: pd.DataFrame) -> pd.Series:
    """At the end of the schedule, did the network fit as well as the target asks?"""
    tgt = f["target_acc"] if "target_acc" in f.columns else pd.Series(0.0, index=f.index)
    bound = tgt.where(tgt > 0, ACC_FLOOR)
    return pd.to_numeric(f["train_acc"], errors="coerce") >= bound


def view(f: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """Final rows with the columns of one moment of measurement: ``stability``, ``train_acc``,
    ``test_acc``, ``train_loss``, ``fd`` (finite difference / linear formula), ``kappa_m`` (κ
    then), ``layer_m`` (the largest per-layer relative spectral change then, where recorded) and
    ``fit`` (the network is at the target fit then), plus ``trained`` (= ``fit``).

    ``target``: when the network first reached the targets (NaN where it never did: those
    networks fail ``fit`` and are excluded, never measured elsewhere in their place); ``end``:
    at the end of the schedule, ``fit`` where its training accuracy meets the target there;
    ``init``: before training (κ = 0, ``fit`` true); ``early``: after epoch ``early_epoch``;
    ``step<t>``: after SGD step t (``early_steps``); ``loss<L>``: the first epoch the full-pass
    training loss was at most L (``loss_marks``; ``fit`` false where it never was).
    """
    v = f.copy()
    col = lambda c: v[c] if c in v.columns else pd.Series(np.nan, index=v.index)  # noqa: E731
    if protocol == "target":
        for k in ("stability", "train_loss", "train_acc", "test_acc"):
            v[k] = col(f"{k}_at_target")
        v["fd"], v["kappa_m"] = col("fd_ratio_at_target"), col("kappa_at_target")
        v["fit"] = col("reached_target").fillna(False).astype(bool)
    elif protocol == "end":
        v["fd"], v["kappa_m"], v["fit"] = col("fd_ratio"), col("kappa"), _fit_end(v)
        v["layer_m"] = col("spectral_change_max")
    elif protocol == "init":
        v["stability"], v["fd"], v["kappa_m"], v["fit"] = col("stability_init"), col("fd_ratio_init"), 0.0, True
        v["layer_m"] = 0.0
    elif protocol == "early":
        v["stability"], v["fd"], v["kappa_m"] = col("stability_early"), col("fd_ratio_early"), np.nan
        v["train_acc"], v["train_loss"] = col("train_acc_early"), col("train_loss_early")
        v["fit"], v["acc_window"] = False, v["train_acc"]
    elif protocol.startswith("loss") and protocol[4:]:
        L = protocol[4:]
        v["stability"], v["fd"], v["kappa_m"] = col(f"stability_L{L}"), col(f"fd_ratio_L{L}"), np.nan
        v["train_acc"], v["train_loss"] = col(f"train_acc_L{L}"), col(f"train_loss_L{L}")
        v["fit"] = pd.to_numeric(v["stability"], errors="coerce").notna()
    elif protocol.startswith("step") and protocol[4:].isdigit():
        t = protocol[4:]
        v["stability"], v["fd"], v["kappa_m"] = col(f"stability_step{t}"), col(f"fd_ratio_step{t}"), np.nan
        v["train_acc"], v["train_loss"] = col(f"train_acc_step{t}"), col(f"train_loss_step{t}")
        v["fit"], v["acc_window"] = False, v["train_acc"]
    else:
        raise ValueError(f"protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")
    v["trained"] = v["fit"]
    return v


def protocols(f: pd.DataFrame) -> list[str]:
    """The moments the results support for trained networks, the claims' own first."""
    has = "stability_at_target" in f.columns and "reached_target" in f.columns
    return ["target", "end"] if has else ["end"]


def _classes(df: pd.DataFrame) -> pd.Series:
    out = pd.to_numeric(df["outputs"], errors="coerce") if "outputs" in df.columns else pd.Series(np.nan, df.index)
    return out.where(out > 1, 2)  # one output (squared loss) separates two classes


def _early_open(df: pd.DataFrame) -> pd.Series:
    """Training accuracy at the moment of the view (epoch ``early_epoch`` or step t) below the target."""
    tgt = df["target_acc"] if "target_acc" in df.columns else pd.Series(ACC_FLOOR, index=df.index)
    acc = df["acc_window"] if "acc_window" in df.columns else df.get("train_acc_early")
    return pd.to_numeric(acc, errors="coerce") < tgt.where(tgt > 0, ACC_FLOOR)


def _col(df: pd.DataFrame, c: str) -> pd.Series:
    return pd.to_numeric(df[c], errors="coerce") if c in df.columns else pd.Series(np.nan, index=df.index)


def chance_loss(df: pd.DataFrame) -> pd.Series:
    """Per row, the training loss of the uninformative predictor: log k (cross-entropy over k
    outputs: the uniform softmax) or 1/2 (one output, squared loss ½(f − y)² on ±1 labels: f = 0)."""
    k = _col(df, "outputs")
    return pd.Series(np.where(k > 1, np.log(k.where(k > 1, 2.0)), 0.5), index=df.index)


def _p_change(df: pd.DataFrame) -> pd.Series:
    """|log P_head(T) − log P_head(T − 10)| (NaN where either was not recorded)."""
    a, b = _col(df, "stability_head"), _col(df, "stability_head_last10")
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.log(a.where(a > 0)) - np.log(b.where(b > 0))).abs()


def _lazy(df: pd.DataFrame, outside: bool = False) -> pd.Series:
    """Per network: lazy (every layer within SPECTRAL_LAZY) or, with ``outside``, not lazy (some layer beyond
    it), from the moment's per-layer measure ``layer_m``; where that is not recorded, from the pooled κ against
    KAPPA_LAZY. Neither measured: neither lazy nor not lazy."""
    layer, kappa = _col(df, "layer_m"), _col(df, "kappa_m")
    val, bound = layer.where(layer.notna(), kappa), pd.Series(np.where(layer.notna(), SPECTRAL_LAZY, KAPPA_LAZY),
                                                              index=df.index)
    return (val > bound) if outside else (val <= bound)


PLATEAU_PREMISES = ("plateau-acc", "plateau-loss")  # App. E.2's "loss and accuracy almost unchanged"


def _per_setting(name: str, description: str, test: Callable[[pd.DataFrame], pd.Series]) -> cl.Premise:
    """A plateau premise decided per setting (every config field but the seed: one width of one sweep), not per
    network (review R2-2): a width whose networks are partly off the plateau is removed whole. Kept network by
    network, the premise selected on the outcome: at a narrow width it kept the networks stuck near chance (flat
    trace, low P) and dropped the ones still learning (higher P), which lowers the sweep's rising side and can
    make a falling curve read as a peak. Coverage then names the width's sweep when an end is lost."""
    def per_setting(df: pd.DataFrame) -> pd.Series:
        raw = np.asarray(test(df), dtype=object)
        ok = pd.Series(np.where(pd.isna(raw), False, raw).astype(bool), index=df.index)
        keys = [k for k in _network_keys(df) if k != "seed"]
        if not keys or df.empty:
            return ok
        setting = [df[k].map(str) for k in keys]
        return ok.groupby(setting, dropna=False, sort=False).transform("all").astype(bool)
    return cl.Premise(name, description + "; decided per width: every network of the setting (all seeds) must "
                                          "meet it, or the width is removed whole (review R2-2)", per_setting)


PREMISES: dict[str, cl.Premise] = {
    "equal-fit": cl.premise_true("equal-fit", "fit", "at the target fit when measured (target_acc reached; "
                                                      "at the end of the schedule: training accuracy >= target_acc)"),
    # per layer where the moment has a per-layer measure (issue 54: the pooled kappa is dominated by the d x m
    # input layer; the end of the schedule records every layer's spectral change), else the pooled kappa
    "lazy": cl.Premise("lazy", f"every layer's ||W_l - W_l(0)||_2 / ||W_l(0)||_2 <= {SPECTRAL_LAZY:g} where the "
                               f"moment records it (the end), else kappa = |theta - theta0| / |theta0| <= {KAPPA_LAZY:g}",
                       _lazy),
    "not-lazy": cl.Premise("not-lazy", f"some layer's ||W_l - W_l(0)||_2 / ||W_l(0)||_2 > {SPECTRAL_LAZY:g} where the "
                                       f"moment records it (the end), else kappa > {KAPPA_LAZY:g} (outside Thm 1's lazy "
                                       "regime: the small-init control's own regime)",
                           lambda df: _lazy(df, outside=True)),
    "width>=classes": cl.Premise("width>=classes", "width >= the number of classes (no bottleneck below k)",
                                 lambda df: pd.to_numeric(df["width"]) >= _classes(df)),
    "fd-linear": cl.Premise("fd-linear", f"|finite difference / linear formula - 1| <= {FD_TOL:g} at radius eps "
                                         "(sum |f(x+d) - f(x)|^2 / sum |J d|^2, one d per held-out point)",
                            lambda df: (pd.to_numeric(df["fd"], errors="coerce") - 1).abs() <= FD_TOL),
    "plateau-acc": _per_setting("plateau-acc", f"running training accuracy changed by at most "
                                               f"{PLATEAU_ACC * 100:g} percentage point over the last {PLATEAU_EPOCHS} "
                                               "epochs (App. E.2: accuracy almost unchanged)",
                                lambda df: _col(df, "acc_change_last10") <= PLATEAU_ACC + 1e-12),
    "plateau-loss": _per_setting("plateau-loss", f"running training loss changed by at most {PLATEAU_LOSS:.0%} of "
                                                 "the uninformative predictor's loss (log k for cross-entropy, 1/2 for "
                                                 f"the squared loss) over the last {PLATEAU_EPOCHS} epochs (App. E.2: "
                                                 "loss almost unchanged)",
                                 lambda df: _col(df, "loss_drop_last10") <= PLATEAU_LOSS * chance_loss(df)),
    "plateau-P": cl.Premise("plateau-P", f"|log P(T) - log P(T - {PLATEAU_EPOCHS})| <= {PLATEAU_P:g} on the first "
                                         "100 held-out points (P itself at a plateau; evidence, a variant)",
                            lambda df: _p_change(df) <= PLATEAU_P),
    "plateau-relative": cl.Premise("plateau-relative", f"training loss changed by at most {PLATEAU_TOL:.0%} of itself "
                                                       f"over the last {PLATEAU_EPOCHS} epochs (the premise before "
                                                       "wdi5; a variant)",
                                   lambda df: _col(df, "loss_change_last10") <= PLATEAU_TOL),
    "early-window": cl.Premise("early-window", "not yet at the target fit when measured (epoch "
                                               "early_epoch or step t; Thm 3: early training)", _early_open),
    "at-loss": cl.premise_true("at-loss", "fit", "reached the training loss L* (measured the first epoch its "
                                                 "full-pass training loss was at most L*)"),
    # the alpha arm (regime=alpha, a reported variant of width-peak-lazy-limit; issue 54): every layer of θ
    # within SPECTRAL_LAZY of its initialisation in spectral norm, every seed of the width (per setting)
    "spectral-lazy": _per_setting("spectral-lazy", f"every layer's ||W_l - W_l(0)||_2 / ||W_l(0)||_2 <= "
                                                   f"{SPECTRAL_LAZY:g} at the end (the alpha-scaled network's "
                                                   "parameters theta; issue 54's per-layer lazy premise)",
                                  lambda df: _col(df, "spectral_change_max") <= SPECTRAL_LAZY),
    # the alpha arm's P must have been measured (review ref6 defect 1): a network whose finite-difference P is
    # NaN (a numerical failure, recorded) must not count as kept, or its width's mean is NaN and the peak rule
    # reads a curve with holes; decided per width like spectral-lazy, so coverage and the interior-gap cap see it
    "fd-measured": _per_setting("fd-measured", "the finite-difference P (stability_fd) is finite and positive",
                                lambda df: _col(df, "stability_fd") > 0),
    "over-parameterised": cl.Premise("over-parameterised", "width >= the number of training points (kappa, §5.2)",
                                     lambda df: pd.to_numeric(df["width"]) >= pd.to_numeric(df["n_train"])),
}


def kept(v: pd.DataFrame, names: Sequence[str]) -> tuple[pd.DataFrame, list[cl.Exclusion]]:
    """The networks of ``v`` meeting every named premise, and what each premise excluded."""
    unit = [u for u in UNIT if u in v.columns] or None
    return cl.apply_premises(v, [PREMISES[n] for n in names], unit=unit)


def merge_exclusions(groups: Sequence[Sequence[cl.Exclusion]]) -> list[cl.Exclusion]:
    """Sum the exclusions of several parts, premise by premise."""
    out: dict[str, list[int]] = {}
    detail: dict[str, str] = {}
    for g in groups:
        for e in g:
            c = out.setdefault(e.premise, [0, 0])
            c[0] += e.excluded
            c[1] += e.of
            detail[e.premise] = e.detail
    return [cl.Exclusion(p, n, of, detail[p]) for p, (n, of) in out.items()]


# ---------------------------------------------------------------------------------------
# Def. 1's quantity: the log of the mean over networks, with a bootstrap over networks

def log_means(groups: Sequence[np.ndarray]) -> np.ndarray:
    """``log mean P`` of every group (P = 0 networks kept in the mean; a group whose mean is 0
    gives −inf)."""
    with np.errstate(divide="ignore"):
        return np.log(np.array([np.mean(g) for g in groups], dtype=np.float64))


def boot_log_means(groups: Sequence[np.ndarray], n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """``(n_boot, G)``: ``log mean P`` of every group in each resample, networks resampled
    within each group (groups are different networks: a depth, a width)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, len(groups)))
    with np.errstate(divide="ignore"):
        for j, g in enumerate(groups):
            g = np.asarray(g, dtype=np.float64)
            out[:, j] = np.log(g[rng.integers(0, len(g), size=(n_boot, len(g)))].mean(1))
    return out


def _estimate(value: float, boots: np.ndarray, n: int, groups: int, what: str) -> Estimate:
    boots = boots[np.isfinite(boots)]
    if boots.size < 2 or not math.isfinite(value):
        return Estimate(value, -math.inf, math.inf, n, f"bootstrap over {n} {what} (no finite resample)")
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return Estimate(value, float(lo), float(hi), n, f"percentile bootstrap over {n} {what} within "
                                                     f"{groups} groups ({N_BOOT} resamples)",
                    sd=float(boots.std(ddof=1) * math.sqrt(n / max(1, groups))), units_per_seed=float(groups))


def boot_estimate(groups: Sequence[np.ndarray], statistic: Callable[[np.ndarray], np.ndarray], what: str,
                  seed: int = 0) -> Estimate:
    """A percentile bootstrap interval of ``statistic`` (a function of the ``(B, G)`` log means,
    row-wise) with its value on the data; ``n`` counts the networks."""
    value = float(statistic(log_means(groups)[None, :])[0])
    n = int(sum(len(g) for g in groups))
    return _estimate(value, statistic(boot_log_means(groups, seed=seed)), n, len(groups), what)


def boot_paired(trained: Sequence[np.ndarray], init: Sequence[np.ndarray],
                statistic: Callable[[np.ndarray], np.ndarray], what: str, seed: int = 0) -> Estimate:
    """As :func:`boot_estimate` on the paired curve ``log mean P_T − log mean P_0`` per group:
    each resample draws networks within a group and takes both their values (``trained[j][i]``
    and ``init[j][i]`` are one network's)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        value = float(statistic((log_means(trained) - log_means(init))[None, :])[0])
        rng = np.random.default_rng(seed)
        out = np.empty((N_BOOT, len(trained)))
        for j, (a, b) in enumerate(zip(trained, init)):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            idx = rng.integers(0, len(a), size=(N_BOOT, len(a)))
            out[:, j] = np.log(a[idx].mean(1)) - np.log(b[idx].mean(1))
        boots = statistic(out)
    return _estimate(value, boots, int(sum(len(g) for g in trained)), len(trained), what)


PEAK_BOOT = 4000  # resamples for the peak's Bonferroni tails (alpha / 2K ~ 0.003: ~11 resamples past it)


def boot_peak(trained: Sequence[np.ndarray], init: Sequence[np.ndarray], what: str, seed: int = 0) -> Estimate:
    """``peak_stat`` of the paired curve D(m) with a valid interval (width-peak, defect 1): a
    union-intersection over the K interior candidate widths j. theta_j = min(D_j - D_first,
    D_j - D_last); a percentile bootstrap interval of each theta_j at the Bonferroni level
    0.05 / K (two-sided), simultaneous over j, so [max_j low_j, max_j high_j] covers
    theta = max_j theta_j (= ``peak_stat``) with >= 95 %. Re-selecting the argmax inside each
    resample (the old interval) is biased upward: a flat sweep read reproduced ~20 % of the time."""
    with np.errstate(divide="ignore", invalid="ignore"):
        d = log_means(trained) - log_means(init)
        value = float(peak_stat(d[None, :])[0])
        rng = np.random.default_rng(seed)
        out = np.empty((PEAK_BOOT, len(trained)))
        for j, (a, b) in enumerate(zip(trained, init)):
            a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
            idx = rng.integers(0, len(a), size=(PEAK_BOOT, len(a)))
            out[:, j] = np.log(a[idx].mean(1)) - np.log(b[idx].mean(1))
        theta = np.minimum(out[:, 1:-1] - out[:, :1], out[:, 1:-1] - out[:, -1:])
    n, k = int(sum(len(g) for g in trained)), theta.shape[1]
    ok = np.isfinite(theta).all(0)
    if not math.isfinite(value) or not ok.any():
        return Estimate(value, -math.inf, math.inf, n, f"bootstrap over {n} {what} (no finite resample)")
    q = 0.05 / (2 * k)
    lo = np.where(ok, np.quantile(np.where(np.isfinite(theta), theta, 0.0), q, axis=0), -np.inf)
    hi = np.where(ok, np.quantile(np.where(np.isfinite(theta), theta, 0.0), 1 - q, axis=0), np.inf)
    best = theta.max(1)
    return Estimate(value, float(lo.max()), float(hi.max()), n,
                    f"union-intersection over {k} interior candidate widths: percentile bootstrap of each "
                    f"peak-over-ends at Bonferroni level 0.05/{k}, interval [max low, max high] "
                    f"({PEAK_BOOT} resamples over {n} {what} within {len(trained)} widths)",
                    sd=float(best[np.isfinite(best)].std(ddof=1) * math.sqrt(n / max(1, len(trained)))),
                    units_per_seed=float(len(trained)))


def slope_stat(xs: Sequence[float]) -> Callable[[np.ndarray], np.ndarray]:
    """Row-wise OLS slope of the log means on ``xs``."""
    x = np.asarray(xs, dtype=np.float64)
    xc = x - x.mean()

    def stat(lm: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return (lm - lm.mean(1, keepdims=True)) @ xc / (xc @ xc)
    return stat


def peak_stat(lm: np.ndarray) -> np.ndarray:
    """Row-wise interior-peak statistic of a width curve of log means: ``min(peak − narrowest,
    peak − widest)`` at the interior width of largest log mean (positive: a rise then a fall)."""
    inner = lm[:, 1:-1]
    with np.errstate(invalid="ignore"):
        pk = np.nanmax(np.where(np.isfinite(inner), inner, -np.inf), axis=1)
        return np.minimum(pk - lm[:, 0], pk - lm[:, -1])


def peak_width(lm: np.ndarray, widths: Sequence[int]) -> np.ndarray:
    """Row-wise log2 of the interior width of largest log mean."""
    inner = np.where(np.isfinite(lm[:, 1:-1]), lm[:, 1:-1], -np.inf)
    return np.log2(np.asarray(widths[1:-1], dtype=np.float64))[inner.argmax(1)]


def groups_by(v: pd.DataFrame, x: str, col: str = "stability", min_n: int = 2) -> tuple[list, list[np.ndarray]]:
    """The values of ``col`` per value of ``x`` (sorted), keeping the values with >= ``min_n``
    networks."""
    xs, gs = [], []
    for val, s in v.groupby(x):
        g = pd.to_numeric(s[col], errors="coerce").dropna().to_numpy(np.float64)
        if len(g) >= min_n:
            xs.append(val)
            gs.append(g)
    return xs, gs


def _r(v: float, digits: int = 4) -> float | None:
    v = float(v)
    return float(f"{v:.{digits}g}") if math.isfinite(v) else None


def curve(v: pd.DataFrame, x: str, y: str = "stability") -> pd.DataFrame:
    """Seed statistics of ``y`` against ``x`` (mean, std, sem, n) with the mean accuracies and
    the fraction of networks at the target fit (a :func:`view`)."""
    g = v.groupby(x)
    out = g[y].agg(["mean", "std", "count"]).rename(columns={"count": "n"})
    out["sem"] = out["std"] / np.sqrt(out["n"])
    for k in ("train_acc", "test_acc", "train_loss", "kappa_m"):
        out[k] = g[k].mean() if k in v.columns else np.nan
    out["trained"] = g["trained"].mean()
    return out.sort_index()


def _table(c: pd.DataFrame) -> list[dict]:
    return [{"x": int(i), "mean": _r(r["mean"]), "sem": _r(r["sem"]), "n": int(r["n"]),
             "train_acc": _r(r["train_acc"], 3), "test_acc": _r(r["test_acc"], 3),
             "train_loss": _r(r["train_loss"], 3), "kappa": _r(r["kappa_m"], 3), "trained": _r(r["trained"], 3)}
            for i, r in c.iterrows()]


# Fields that index a curve or its seeds; any *other* field that varies within one init
# (a learning rate, gamma, a dataset, …) splits that init into separate series, so that the
# claims never pool networks trained differently. (A learning rate may still differ *between*
# inits — "a rate per init" — since inits are always compared as separate series.)
# fields that add measurements to a network without changing it (its training is the same): never a series
_MEASURE_ONLY = {"early_steps", "loss_marks"}
_CURVE_FIELDS = {"seed", "width", "depth", "init"} | _NOT_NETWORK | _MEASURE_ONLY


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
