"""The figures of both lazy-training studies (drawn from a study's records; the ε-threshold panel
and the control's halving ε reuse the claims' own measurements).

* lazy-attack: ``vs_d.png`` (‖∇ₓf‖, η, ‖δ‖/‖x‖ against d, per width; sphere and raw pixels) and
  ``vs_C0.png`` (the same per C0, and ‖δ‖ against C0);
* lazy-adversarial: ``robust_vs_eps.png`` and ``robust_vs_radius.png``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.ticker import NullLocator

from ...report.plots import COLORS, fit_power_law, label_panels, save, subplots, theory_line
from ..base import Context, Figure
from . import adversarial_claims as lvc
from . import attack_claims as lac
from .common import NON_LAZY_C0

THEORY = lac.THEORY

# -- lazy-attack

PANELS = [("grad", "‖∇ₓf‖", "grad_std"), ("eta", "η = ‖δ‖/‖∇ₓf‖", "eta_std"),
          ("delta_rel", "‖δ‖/‖x‖", "delta_rel_std")]


def _pooled(sub: pd.DataFrame, x: str, value: str, std: str) -> pd.DataFrame:
    """Mean over seeds (each a mean over test points) and the spread over points and seeds:
    the std of the pooled points, from the per-seed means and stds."""
    sub = sub.dropna(subset=[value])
    g = sub.assign(sq=sub[std] ** 2 + sub[value] ** 2).groupby(x)
    mean = g[value].mean()
    spread = np.sqrt(np.maximum(g["sq"].mean() - mean ** 2, 0.0))
    return pd.DataFrame({"mean": mean, "spread": spread}).sort_index()


def _band(ax, st: pd.DataFrame, *, color, label, marker="o"):
    xs = st.index.to_numpy(float)
    mean, sp = st["mean"].to_numpy(), st["spread"].to_numpy()
    ax.plot(xs, mean, marker=marker, color=color, label=label)
    lo = np.where(mean - sp > 0, mean - sp, mean / 3)  # a log axis cannot show values <= 0
    ax.fill_between(xs, lo, mean + sp, color=color, alpha=0.18, lw=0)


def _panel_row(axes, df: pd.DataFrame, by: str, fmt, theory: dict[str, float] | None, title: str) -> None:
    """Three log–log panels (‖∇f‖, η, ‖δ‖/‖x‖ against d), one curve per level of ``by``;
    ``theory`` maps a quantity to the slope drawn (dashed) through the largest-d point."""
    levels = sorted(df[by].dropna().unique())
    ds = sorted(int(v) for v in df["d"].unique())
    for j, (value, name, std) in enumerate(PANELS):
        ax = axes[j]
        anchor = None
        for i, lev in enumerate(levels):
            sub = df[(df[by] == lev) & (df[value] > 0)]
            st = _pooled(sub, "d", value, std)
            if st.empty:
                continue
            label = fmt(lev)
            if sub["d"].nunique() >= 3:  # the fitted slope (per-seed means), as in the claims
                label += f": slope {fit_power_law(sub['d'], sub[value]).text()}"
            _band(ax, st, color=COLORS[i % len(COLORS)], label=label)
            anchor = anchor or (float(st.index[-1]), float(st["mean"].iloc[-1]))
        if theory and anchor and len(ds) > 1:
            if value == "grad":
                theory_line(ax, ds, 0.5, 1.0, math.sqrt(0.5), "√(d/2) (at init)")
            else:
                theory_line(ax, ds, theory[value], *anchor, f"d^{theory[value]:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(ds, [str(v) for v in ds])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("input dimension d")
        ax.set_ylabel(name)
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=7)


def attack_figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    figs: list[Figure] = []
    base = ctx.base_config
    sph, raw = lac.theory_runs(df), lac.raw_runs(df)
    c0_ref = base.get("C0", 10.0)
    rows = [("unit sphere", sph[sph["C0"] == c0_ref]), ("raw pixels", raw[raw["C0"] == c0_ref])]
    rows = [(n, r) for n, r in rows if len(r)]
    if rows:
        fig, axes = subplots(len(rows), 3, squeeze=False)
        for i, (name, sub) in enumerate(rows):
            # raw pixels: ‖x‖ ∝ √d, and f is (nearly) 1-homogeneous in x, so η ∝ ‖x‖/d ∝ d^−1/2
            slopes = THEORY if name == "unit sphere" else {**THEORY, "eta": -0.5}
            _panel_row(axes[i], sub, "m", lambda v: f"m={int(v)}", slopes,
                       f"{name}, C0={c0_ref:g}, bias={'/'.join(sorted({str(b) for b in sub['bias']}))}")
        label_panels(axes)
        save(fig, ctx.figdir / "vs_d.png")
        figs.append(Figure(
            "figures/vs_d.png", "Gradient norm, step size and flipping perturbation against d, per width",
            "Mean over seeds and correctly classified test points, band ±1 std over points and seeds; "
            "dashed: the theorem's slopes (‖∇f‖ ≈ √(d/2) at init, η ∝ 1/d, ‖δ‖/‖x‖ ∝ d^−1/2). Top row: "
            "unit-sphere inputs (the theorem's setting, where the slopes are checked); bottom row: raw "
            "pixels with biases (the authors' main experiment), where ‖x‖ itself grows with d, so the "
            "same theorem predicts η ∝ ‖x‖/d there (dashed: d^−1/2, for ‖x‖ ∝ √d; MNIST's pixels grow "
            "a little faster, and raw-eta-scaling judges η/‖x‖ against d^−1)."))
    sph = sph[sph["C0"] < NON_LAZY_C0]  # the non-lazy control is not drawn against C0
    c0_runs = sph.groupby(["m"]).filter(lambda g: g["C0"].nunique() >= 2)
    if len(c0_runs):
        m_ref = int(c0_runs["m"].value_counts().idxmax())
        sub = c0_runs[c0_runs["m"] == m_ref]
        fig, axes = subplots(1, 4, squeeze=False)
        _panel_row(axes[0][:3], sub, "C0", lambda v: f"C0={v:g}", None, f"unit sphere, m={m_ref}")
        ax = axes[0][3]
        for i, (d, g) in enumerate(sub.groupby("d")):
            st = _pooled(g, "C0", "delta", "delta_std")
            _band(ax, st, color=COLORS[i % len(COLORS)], label=f"d={int(d)}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        c0s = sorted(float(v) for v in sub["C0"].unique())
        ax.set_xticks(c0s, [f"{v:g}" for v in c0s])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel("C0 (ball radius C0/√m)")
        ax.set_ylabel("‖δ‖")
        ax.legend(fontsize=7)
        label_panels(axes)
        save(fig, ctx.figdir / "vs_C0.png")
        figs.append(Figure(
            "figures/vs_C0.png", "The same against the ball radius C0",
            f"Width m={m_ref}, unit-sphere inputs. (a–c) the quantities against d, one curve per C0; "
            "(d) ‖δ‖ against C0, one curve per d: allowing more movement should give larger ‖δ‖."))
    return figs



# -- lazy-adversarial

def adversarial_figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    figs: list[Figure] = []
    lazy = df[df["R"].isna() & df["R_factor"].isna() & (df["C0"] < NON_LAZY_C0)
              & (df["init_scale"].fillna(1.0) == 1.0 if "init_scale" in df.columns else True)]
    if len(lazy):
        fig, axes = subplots(1, 2, squeeze=False)
        ax = axes[0][0]
        for i, (d, g) in enumerate(lazy.groupby("d")):
            st = g.groupby("eps")["robust_acc"].agg(["mean", "std"]).sort_index()
            st = st[st.index > 0]
            c = COLORS[i % len(COLORS)]
            ax.plot(st.index, st["mean"], "o-", color=c, label=f"d={int(d)}")
            ax.fill_between(st.index, st["mean"] - st["std"].fillna(0), st["mean"] + st["std"].fillna(0),
                            color=c, alpha=0.18, lw=0)
        ax.set_xscale("log")
        ax.set_xlabel("ε (ℓ2 budget)")
        ax.set_ylabel("robust test accuracy")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
        ax = axes[0][1]
        claim = lvc.eps_threshold_claim(df)
        pts = claim.evidence.get("seed_eps_half") or [
            p for fam in claim.evidence.get("families", []) for p in fam.get("seed_eps_half", [])]
        if pts:
            ds, es = zip(*pts)
            ax.plot(ds, es, "o", color=COLORS[0], alpha=0.7, label="ε at half the clean accuracy (per seed)")
            if len(set(ds)) >= 2:
                fit = fit_power_law(ds, es)
                xs = np.geomspace(min(ds), max(ds), 32)
                ax.plot(xs, fit.predict(xs), "-", color=COLORS[0], lw=1, label=f"fit: slope {fit.text()}")
                theory_line(ax, ds, -0.5, min(ds), float(fit.predict(min(ds))), "d^−1/2")
        # the non-lazy control beside them (eps-half-lazy-vs-control): where the images' margin, not
        # laziness, sets ε½ the two coincide
        margin = lvc.eps_margin_claim(df).evidence
        per_d = margin.get("per_d") or [r for fam in margin.get("families", []) for r in fam.get("per_d", [])]
        ctl = sorted((r["d"], r["control_eps_half"]) for r in per_d if r.get("control_eps_half"))
        if ctl:
            ax.plot(*zip(*ctl), "s--", color=COLORS[1], lw=1,
                    label="rich control (init ×0.01, C0 = 1000), geometric mean")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("input dimension d")
        ax.set_ylabel("halving ε")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        label_panels(axes)
        save(fig, ctx.figdir / "robust_vs_eps.png")
        figs.append(Figure(
            "figures/robust_vs_eps.png", "Robust accuracy against ε inside the lazy ball, per d",
            "(a) Robust test accuracy under ℓ2 PGD after projected adversarial training, mean ± std over "
            "seeds; it should collapse past a threshold that moves left as d grows. (b) The ε at which "
            "robust accuracy falls to half the clean accuracy, with its log–log fit; dashed: the "
            "theorem's d^−1/2; squares: the same for the rich control (a learned input gradient) "
            "(geometric mean over seeds per d; the exploratory question eps-half-lazy-vs-control)."))
    runs = lvc._radius_rows(df)
    if len(runs):
        fig, axes = subplots(1, 1, squeeze=False)
        ax = axes[0][0]
        init = runs["init_scale"].fillna(1.0) if "init_scale" in runs.columns else pd.Series(1.0, index=runs.index)
        for i, ((rich, m, d), g) in enumerate(runs.groupby([init < 1.0, "m", "d"])):
            ev = lvc._growth_family(g)[1]["eps_half_by_R_factor"]
            if not ev:
                continue
            c = COLORS[i % len(COLORS)]
            fs = sorted(float(f) for f in ev)
            ax.plot(fs, [ev[f"{f:g}"] for f in fs], "s--" if rich else "o-", color=c,
                    label=f"{'rich' if rich else 'lazy'} m={int(m)}, d={int(d)}")
        ax.axvline(1.0, color="0.5", ls=":", lw=1, label="the lazy radius C0/√m")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("radius R in lazy radii (R·√m/C0)")
        ax.set_ylabel("ε½ (robust/clean accuracy halves)")
        ax.legend(fontsize=7)
        save(fig, ctx.figdir / "robust_vs_radius.png")
        figs.append(Figure(
            "figures/robust_vs_radius.png", "The halving ε against the radius R, per (m, d)",
            "Projected adversarial training with every neuron kept within R of its initialisation; the ε "
            "at which robust/clean accuracy halves (geometric mean over seeds) against R in lazy radii. "
            "radius-growth: beyond the lazy radius (dotted) ε½ should grow with R for the lazy networks "
            "(circles); the rich control (squares, in balls where they bind) should stay flat."))
    return figs


