"""Study A's figures, drawn from the results table alone."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import stats
from ...report.plots import mean_band, plt, save
from ..base import Context, Figure
from .claims import MECHANISM_KNOBS, mechanism_table
from .common import ACTIVE_MIN, DIVERGED, ROBUST_MIN, SATURATED
from .common import rows as _rows
from .dynamics import regime as _regime
from .presets import FeatureLearningConfig
from .run import THREATS

# ----------------------------------------------------------------------------------------
# figures

def _regimes(df: pd.DataFrame, kind: str) -> list[tuple[str, pd.DataFrame]]:
    out = []
    for method, label in (("standard", "standard"), ("gradient_step", "adversarial (one step)")):
        sub = _rows(df, kind, experiment="main", method=method)
        if not sub.empty:
            out.append((label, sub))
    return out


_REGIME_STYLE = {"inactive": ("tab:grey", "x"), "unsaturated": ("tab:blue", "o"), "saturated": ("tab:red", "s"),
                 "unrecorded": ("tab:purple", "^"), "diverged": ("tab:orange", "D")}


def _eta_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    fin = _rows(df, "final", experiment=["main", "eta"], method="gradient_step")
    if fin.empty or fin["eta_tilde"].nunique() < 2:
        return []
    fin = fin.assign(regime=_regime(fin))
    fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.6))
    ax = axes[0]
    top = float(fin["steps"].max())
    for reg, sub in fin.groupby("regime"):
        color, marker = _REGIME_STYLE.get(reg, ("k", "o"))
        c = sub[sub["cross_step"].notna()]
        ax.loglog(c["eta_tilde"], c["cross_step"], marker, color=color, alpha=0.7, ls="", label=f"{reg}: crossed")
        nc = sub[sub["cross_step"].isna()]
        if len(nc):
            ax.loglog(nc["eta_tilde"], np.full(len(nc), top), marker, color=color, mfc="none", ls="",
                      label=f"{reg}: no crossing (drawn at the last step)")
    pts = fin[fin["cross_step"].notna() & (fin["regime"] == "saturated")]
    title = "saturated: too few crossings for a fit (the law is judged only there)"
    if pts["eta_tilde"].nunique() >= 2 and len(pts) >= 3:
        e = stats.slope_estimate(pts["eta_tilde"], pts["cross_step"], log_x=True, log_y=True)
        xs = np.array(sorted(pts["eta_tilde"].unique()), float)
        gm = float(np.exp(np.log(pts["cross_step"]).mean()))
        xm = float(np.exp(np.log(pts["eta_tilde"]).mean()))
        ax.loglog(xs, gm * (xs / xm) ** e.value, "r-", lw=1, label="OLS fit (saturated)")
        ax.loglog(xs, gm * (xs / xm) ** -1.0, "k--", lw=1, label="theory: slope −1")
        title = f"saturated slope {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("η̃ (one-step attack step size)")
    ax.set_ylabel("crossing step (A overtakes B)")
    ax.legend(fontsize=6)
    ax = axes[1]
    if "clip_frac_v_phase1" in fin.columns:
        for reg, sub in fin.groupby("regime"):
            color, marker = _REGIME_STYLE.get(reg, ("k", "o"))
            ax.semilogx(sub["eta_tilde"], sub["clip_frac_v_before_cross"], marker, color=color, ls="",
                        label=f"{reg}: largest before the crossing (v_y)")
            ax.semilogx(sub["eta_tilde"], sub["clip_frac_v_max"], marker, color=color, ls="", mfc="none", alpha=0.6)
            ax.semilogx(sub["eta_tilde"], sub["clip_frac_phase1"], ".", color=color, alpha=0.6)
        ax.axhline(SATURATED, color="tab:red", ls=":", lw=1, label=f"saturated at {SATURATED:g} (A3b's premise)")
        ax.axhline(ACTIVE_MIN, color="tab:grey", ls=":", lw=1, label=f"active: max >= {ACTIVE_MIN:g}")
        ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("η̃")
    ax.set_ylabel("clipped fraction of the one-step perturbation")
    ax.legend(fontsize=6)
    save(fig, ctx.figdir / "crossing_eta.png")
    figs = [Figure("figures/crossing_eta.png", "Crossing time against η̃, by perturbation regime",
                   "Left: crossing step per run (hollow: no crossing: no real phase 1 or no crossing that lasts), "
                   "coloured by regime: inactive (the one-step attack never reaches ε along v_y: standard training "
                   f"in effect), unsaturated (at most {SATURATED:g} of the v_y coordinates clipped before the "
                   "crossing: outside the law's trigger, not judged), saturated (A3b's Θ(1/η̃) law is judged only "
                   f"here), diverged (max(A, B) > {DIVERGED:g}: excluded). Right: the clipped fraction along v_y on "
                   "the non-robust patches (filled: largest before the crossing; hollow: largest over the run) and "
                   "over all coordinates (dots: phase-1 mean).")]
    return figs + _clip_trace_figure(df, ctx)


def _clip_trace_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """A3's clipped-fraction figure: the fraction of the one-step perturbation's v_y coordinates
    clipped at ε, per probe step, one curve per η̃ (mean over seeds), the saturation line at ½."""
    clip = _rows(df, "clip", experiment=["main", "eta"], method="gradient_step")
    if clip.empty:
        return []
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    etas = sorted(clip["eta_tilde"].unique())
    cmap = plt.get_cmap("viridis")
    for i, eta in enumerate(etas):
        sub = clip[clip["eta_tilde"] == eta].groupby("step")["clip_frac_v"]
        m, lo, hi = sub.mean(), sub.min(), sub.max()
        color = cmap(i / max(1, len(etas) - 1))
        ax.plot(m.index, m.to_numpy(), color=color, lw=1.2, label=f"η̃ = {eta:g}")
        ax.fill_between(m.index, lo.to_numpy(), hi.to_numpy(), color=color, alpha=0.15, lw=0)
    ax.axhline(SATURATED, color="tab:red", ls=":", lw=1, label="saturation (A3b's premise)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("step")
    ax.set_ylabel("clipped fraction of v_y coordinates")
    ax.legend(fontsize=6, ncol=2)
    save(fig, ctx.figdir / "clipped_fraction.png")
    return [Figure("figures/clipped_fraction.png", "How much of the one-step perturbation is clipped, per step",
                   "The fraction of the one-step perturbation's v_y coordinates on the non-robust patches that reach "
                   "the clip at ε, per probe (line: mean over seeds; band: min–max). The paper's phase 2 starts "
                   f"when this saturates (> {SATURATED:g}); A3b judges the Θ(1/η̃) law only on runs that do.")]


def _counter_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    cnt = _rows(df, "counter", experiment="counter")
    sweep = _rows(df, "eps_sweep", experiment="main", method="gradient_step")
    if cnt.empty and sweep.empty:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.8))
    ax = axes[0]
    if not cnt.empty:
        g = cnt.groupby(["P", "eval_eps"]).agg(x=("bound_ratio", "first"), ep=("threat_linf_all", "mean"),
                                                pgd=("pgd_acc", "mean"), holds=("assume_holds", "first")).reset_index()
        g["x"] = 1.0 / g["x"].clip(lower=1e-12)
        for holds, mfc, lab in ((True, None, "Assumption 2.3 holds"), (False, "none", "Assumption 2.3 violated")):
            sub = g[g["holds"].astype(bool) == holds]
            if len(sub):
                ax.semilogx(sub["x"], sub["ep"], "o", color="tab:blue", mfc=mfc, ls="",
                            label=f"hand-set, every-patch ({lab})")
                ax.semilogx(sub["x"], sub["pgd"], "s", color="tab:orange", mfc=mfc, ls="", ms=4,
                            label=f"hand-set, PGD ({lab})")
    if not sweep.empty:
        s2 = sweep.groupby("eps_over_alpha").agg(x=("bound_ratio", "first"), ep=("every_patch_acc", "mean"),
                                                 pgd=("pgd_acc", "mean")).reset_index()
        s2["x"] = 1.0 / s2["x"].clip(lower=1e-12)
        ax.semilogx(s2["x"], s2["ep"], "D-", color="tab:green", label="trained (one step), every-patch")
        ax.semilogx(s2["x"], s2["pgd"], "v-", color="tab:red", label="trained (one step), PGD")
    ax.axvline(1.0, color="k", ls="--", lw=1, label="bound: P = (α/ε − 1)^q")
    ax.set_xlabel("P / (α/ε − 1)^q  (>1: the every-patch attack wins)")
    ax.set_ylabel("robust accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=6)
    ax = axes[1]
    fin = _rows(df, "final", experiment="main", method="gradient_step")
    names = list(THREATS)
    bars = {}
    if not fin.empty and f"threat_{names[0]}" in fin.columns:
        bars["trained (one step)"] = [float(fin[f"threat_{n}"].mean()) for n in names] + \
            [float(fin["feature_acc"].mean()), float(fin["pgd_acc"].mean())]
    if not cnt.empty:
        dflt = cnt[cnt["assume_holds"].astype(bool)]  # the grid points inside Assumption 2.3
        if len(dflt):
            bars["hand-set robust (Assumption 2.3 holds)"] = [float(dflt[f"threat_{n}"].mean()) for n in names] + \
                [float(dflt["feature_acc"].mean()), float(dflt["pgd_acc"].mean())]
    labels = ["l_inf every patch (u)", "l_inf on J_NR only (u)", "per-patch l2 (u)", "v swap (every patch)",
              "u and v (every patch)", "paper: −ε v_y on J_NR", "l_inf PGD"]
    width = 0.8 / max(1, len(bars))
    for i, (name, vals) in enumerate(bars.items()):
        ax.bar(np.arange(len(labels)) + (i - (len(bars) - 1) / 2) * width, vals, width, label=name)
    ax.axhline(ROBUST_MIN, color="k", ls=":", lw=1)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
    ax.set_ylabel("robust accuracy at eval ε")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    save(fig, ctx.figdir / "every_patch.png")
    survive = "; ".join(f"{who}: " + (", ".join(lab for lab, val in zip(labels, vals) if val >= ROBUST_MIN) or "none")
                        for who, vals in bars.items())
    return [Figure("figures/every_patch.png", "The every-patch counter-experiment (a disagreement with the paper)",
                   "Disagreement with the paper, not a software failure. Left: robust accuracy against "
                   "P / (α/ε − 1)^q, the quantity the every-patch bound names (dashed: the boundary; to its right "
                   "the attack ε·u_j − ε·u_y in every patch, built without gradients, beats hand-set robust weights "
                   "in the noise-free closed form). Filled markers: grid points where Assumption 2.3 holds; lines: "
                   "the trained one-step networks over ε/α. Right: the threat models at the study's ε; mean "
                   f"accuracy >= {ROBUST_MIN:g} (dotted) only under: {survive}.")]


def _mechanism_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """Robust accuracy inside span{v} over ε/β × m (left), and one knob at a time (right)."""
    tab = mechanism_table(df)
    if tab.empty:
        return []
    base = FeatureLearningConfig()
    others = [k for k in MECHANISM_KNOBS if k not in ("eps", "m")]
    grid = tab[np.logical_and.reduce([np.isclose(tab[k].astype(float), float(getattr(base, k))) if k != "steps"
                                      else tab[k] == tab[tab["m"] == base.m]["steps"].min() for k in others])]
    fig, axes = plt.subplots(1, 2, figsize=(10.4, 3.8))
    ax = axes[0]
    if len(grid) and grid["eps"].nunique() > 1 and grid["m"].nunique() > 1:
        piv = grid.pivot_table(index="m", columns="eps_over_beta", values="span_v_acc")
        im = ax.imshow(piv.to_numpy(), origin="lower", vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(piv.shape[1]))
        ax.set_xticklabels([f"{x:g}" for x in piv.columns])
        ax.set_yticks(range(piv.shape[0]))
        ax.set_yticklabels([f"{int(x)}" for x in piv.index])
        for (i, j), val in np.ndenumerate(piv.to_numpy()):
            ax.text(j, i, f"{val:.2f}", ha="center", va="center", color="w" if val < 0.6 else "k", fontsize=8)
        fig.colorbar(im, ax=ax, label="accuracy inside span{v}")
        ax.set_xlabel("training ε / β  (ε / α = 0.4 × this)")
        ax.set_ylabel("neurons per class m")
    ax = axes[1]
    single = tab.drop(grid.index)
    ref = grid.iloc[0] if len(grid) else tab.iloc[0]  # the grid's other knobs: the baseline of the bars
    labels = [", ".join(f"{k}={r[k]:g}" for k in others if not np.isclose(float(r[k]), float(ref[k])))
              or "default" for _, r in single.iterrows()]
    if len(single):
        xs = np.arange(len(single))
        ax.bar(xs - 0.2, single["span_v_acc"], 0.4, label="accuracy inside span{v}")
        ax.bar(xs + 0.2, single["u_neuron_share_worst"], 0.4, label="share of u-neurons (worst class)")
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
        ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7)
    ax.axhline(ROBUST_MIN, color="k", ls=":", lw=1)
    save(fig, ctx.figdir / "mechanism.png")
    return [Figure("figures/mechanism.png", "Where one-step adversarial training becomes robust inside span{v}",
                   "Left: accuracy under the worst of the v swap and span{v} PGD (mean over seeds) over training ε/β and "
                   "neurons per class m, the other knobs at their defaults. Right: σ₀, P, q and the training length one "
                   "at a time, with the worst class's share of neurons that prefer u. Dotted: the 0.9 that reads robust.")]


def _panels_per_regime(regimes: list, draw, ylabel: str, path) -> None:
    """One panel per training regime (``(label, rows)`` pairs) over the step, drawn by ``draw(ax, rows)``,
    titled by its regime, with a shared y label; saved to ``path``."""
    fig, axes = plt.subplots(1, len(regimes), figsize=(4.6 * len(regimes), 3.2), squeeze=False)
    for ax, (label, sub) in zip(axes[0], regimes):
        draw(ax, sub)
        ax.set_title(label)
        ax.set_xlabel("step")
        ax.legend()
    axes[0][0].set_ylabel(ylabel)
    save(fig, path)


def _ab_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """A and B over training, standard against one-step adversarial training (main)."""
    probes = _regimes(df, "probe")
    if not probes:
        return []
    def draw(ax, sub: pd.DataFrame) -> None:
        mean_band(ax, sub, "step", "A", label="A = max_r <w, u> (robust)", marker="")
        mean_band(ax, sub, "step", "B", label="B = max_r <w, v> (non-robust)", marker="")

    _panels_per_regime(probes, draw, "feature alignment (mean over classes)", ctx.figdir / "ab_dynamics.png")
    return [Figure("figures/ab_dynamics.png", "Robust (A) and non-robust (B) feature learning",
                   "Mean over seeds, ±1 std band. Standard training should grow B and leave A small; "
                   "one-step adversarial training should grow B first, then let A overtake.")]


def _accuracy_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """Clean, feature-attack and PGD test accuracy over training (main)."""
    evals = _regimes(df, "eval")
    if not evals:
        return []
    def draw(ax, sub: pd.DataFrame) -> None:
        mean_band(ax, sub, "step", "clean_acc", label="clean", marker=".")
        mean_band(ax, sub, "step", "feature_acc", label="δ_p = −ε v_y", marker=".")
        p = sub[sub["pgd_acc"].notna()]
        if not p.empty:
            mean_band(ax, p, "step", "pgd_acc", label="l_inf PGD", marker="s")
        ax.set_ylim(-0.02, 1.02)

    _panels_per_regime(evals, draw, "test accuracy", ctx.figdir / "accuracy.png")
    return [Figure("figures/accuracy.png", "Clean and robust accuracy during training",
                   "Held-out accuracy clean, under the theory's feature-direction attack and under "
                   "l_inf PGD (at the end, or every pgd_eval_every steps).")]


def _eps_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """Final A − B (with 95% t intervals) and final accuracies across the training ε (eps, main)."""
    eps = _rows(df, "final", method="gradient_step", experiment=["eps", "main"])
    if eps.empty or eps["eps"].nunique() < 2:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(9.2, 3.2))
    mean_band(axes[0], eps, "eps", "A_minus_B", label="A − B (±1 std)")
    ci = [(float(x), stats.mean_estimate(sub["A_minus_B"])) for x, sub in eps.groupby("eps")]
    ci = [(x, e) for x, e in ci if e.finite]
    axes[0].errorbar([x for x, _ in ci], [e.value for _, e in ci],
                     yerr=[[e.value - e.low for _, e in ci], [e.high - e.value for _, e in ci]],
                     fmt="none", ecolor="k", capsize=3, lw=0.8, label="95% t interval")
    axes[0].axhline(0, color="k", lw=0.8)
    axes[0].axvline(float(eps["beta"].iloc[0]), color="grey", ls=":", label="β")
    axes[0].set_xlabel("training ε")
    axes[0].set_ylabel("final A − B")
    axes[0].legend()
    mean_band(axes[1], eps, "eps", "clean_acc", label="clean")
    mean_band(axes[1], eps, "eps", "feature_acc", label="δ_p = −ε v_y")
    mean_band(axes[1], eps, "eps", "pgd_acc", label="l_inf PGD")
    axes[1].set_xlabel("training ε (evaluation at eval_eps)")
    axes[1].set_ylabel("final test accuracy")
    axes[1].set_ylim(-0.02, 1.02)
    axes[1].legend()
    save(fig, ctx.figdir / "eps_spectrum.png")
    return [Figure("figures/eps_spectrum.png", "The ε spectrum",
                   "ε = 0 is standard training; the theory's regime is β ≤ ε ≪ α. Left: which feature "
                   "wins; right: the accuracy it buys (all evaluated at the same eval_eps).")]


def _variant(r: pd.Series) -> str:
    """A final row's bar label in the extensions figure: the setting it varies and its training."""
    if r["experiment"] == "main":
        return f"default / {r['method']}"
    val = {"activation": r["activation"], "attack": r["method"], "basis": r["basis"],
           "overlap": "overlap"}[r["experiment"]]
    return f"{val} / {r['method']}" if r["experiment"] != "attack" else f"{val} training"


def _extensions_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """The reviewer extensions beside the defaults: final A − B and robust accuracies (means over seeds)."""
    ext = _rows(df, "final", experiment=["activation", "attack", "basis", "overlap", "main"])
    if ext.empty or not (ext["experiment"] != "main").any():
        return []
    ext = ext.assign(variant=ext.apply(_variant, axis=1))
    g = ext.groupby("variant", sort=False)[["A_minus_B", "feature_acc", "pgd_acc"]].mean()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    axes[0].bar(range(len(g)), g["A_minus_B"])
    axes[0].axhline(0, color="k", lw=0.8)
    axes[0].set_ylabel("final A − B")
    width = 0.4
    axes[1].bar(np.arange(len(g)) - width / 2, g["feature_acc"], width, label="δ_p = −ε v_y")
    axes[1].bar(np.arange(len(g)) + width / 2, g["pgd_acc"], width, label="l_inf PGD")
    axes[1].set_ylabel("final robust accuracy")
    axes[1].legend()
    for ax in axes:
        ax.set_xticks(range(len(g)))
        ax.set_xticklabels(g.index, fontsize=7, rotation=40, ha="right")
    save(fig, ctx.figdir / "extensions.png")
    return [Figure("figures/extensions.png", "Reviewer extensions",
                   "Activation (ReLU, GELU), FGSM / multi-step PGD training, rotated features, "
                   "overlapping patches, beside the defaults (means over seeds).")]


def _images_figure(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """Real images: clean and PGD accuracy per epoch per dataset, and the Ilyas et al. test."""
    ep = _rows(df, "epoch", experiment="images")
    if ep.empty:
        return []
    dsets = sorted(ep["dataset"].unique())
    fig, axes = plt.subplots(1, len(dsets) + 1, figsize=(4.4 * (len(dsets) + 1), 3.2), squeeze=False)
    for ax, ds in zip(axes[0], dsets):
        for method, sub in ep[ep["dataset"] == ds].groupby("method"):
            name = "PGD training" if method == "pgd" else "standard"
            mean_band(ax, sub, "epoch", "clean_acc", label=f"{name}: clean", marker=".")
            mean_band(ax, sub, "epoch", "robust_acc", label=f"{name}: PGD", marker="s", ls="--")
        ax.set_title(f"{ds} (ε = {ep[ep['dataset'] == ds]['image_eps'].iloc[0]:g})")
        ax.set_xlabel("epoch")
        ax.set_ylim(-0.02, 1.02)
        ax.legend()
    axes[0][0].set_ylabel("test accuracy")
    _ilyas_panel(axes[0][-1], _rows(df, "ilyas", experiment="images"))
    save(fig, ctx.figdir / "images.png")
    return [Figure("figures/images.png", "Real images",
                   "Clean and PGD accuracy per epoch for standard and PGD adversarial training; right: "
                   "a fresh model trained only on targeted adversarial examples relabelled with their "
                   "target, scored on the true test set, against chance.")]


def _ilyas_panel(ax, il: pd.DataFrame) -> None:
    """True test accuracy of the models trained on the non-robust datasets, per dataset, against chance."""
    if not il.empty:
        g = il.groupby("dataset")[["ilyas_acc", "chance"]].mean()
        ax.bar(range(len(g)), g["ilyas_acc"], label="trained on the non-robust set")
        ax.scatter(range(len(g)), g["chance"], color="k", marker="_", s=400, label="chance", zorder=3)
        ax.set_xticks(range(len(g)))
        ax.set_xticklabels(g.index)
        ax.set_ylabel("true test accuracy")
        ax.set_ylim(0, 1.35 * max(float(g["ilyas_acc"].max()), 0.1))
        ax.legend(loc="upper right")
    ax.set_title("Ilyas et al. non-robust dataset")


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    """Every figure of Study A that ``df`` has the rows for, in the report's order."""
    figs: list[Figure] = []
    for draw in (_mechanism_figure, _ab_figure, _accuracy_figure, _eta_figure, _counter_figure, _eps_figure,
                 _extensions_figure, _images_figure):
        figs += draw(df, ctx)
    return figs
