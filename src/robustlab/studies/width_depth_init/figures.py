"""The width-depth-init figures, their captions ending with the measured verdicts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd

from ...models.deep import INITS
from ...report.plots import COLORS, label_panels, log_axes, mean_band, save, subplots
from ..base import Claim, Context, Figure
from .analysis import KAPPA_LAZY, PROTOCOLS, finals, protocols, view
from .claims import _same_output_as_he, claims
from .lazy_claims import closed_form_at_init

# ---------------------------------------------------------------------------------------
# figures

def _acc_panel(ax, sub: pd.DataFrame, x: str, color, label: str | None = None) -> None:
    mean_band(ax, sub, x, "train_acc", color=color, label=label, marker="o")
    mean_band(ax, sub, x, "test_acc", color=color, ls="--", marker="x")


def _when(protocol: str, f: pd.DataFrame) -> str:
    if protocol == "target":
        return f"measured when the training accuracy first reached {f['target_acc'].iloc[0]:g}"
    return "measured at the end of the schedule"


def _width_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    swept = {i for (i, _L), s in v.groupby(["init", "depth"]) if s["width"].nunique() >= 2}
    inits = [i for i in INITS if i in swept]
    if not inits:
        return None
    fig, axes = subplots(2, len(inits), panel=(3.2, 2.5), squeeze=False)
    for j, init in enumerate(inits):
        vi = v[v["init"] == init]
        for n, (L, sub) in enumerate(vi.groupby("depth")):
            if sub["width"].nunique() < 2:
                continue
            col = COLORS[n % len(COLORS)]
            mean_band(axes[0, j], sub, "width", "stability", color=col, label=f"L={L}", band="minmax")
            _acc_panel(axes[1, j], sub, "width", col, f"L={L}")
        for ax in axes[:, j]:
            ax.axvline(int(vi["n_train"].iloc[0]), color="0.5", lw=0.8, ls=":")
        log_axes(axes[0, j])
        log_axes(axes[1, j], y=False)
        axes[0, j].set_title(f"init = {init}")
        axes[0, j].legend()
        axes[1, j].set_xlabel("width m")
        axes[1, j].set_ylim(0, 1.02)
    axes[0, 0].set_ylabel("stability P(f, ε)")
    axes[1, 0].set_ylabel("accuracy (train —, test --)")
    label_panels(axes)
    name = f"stability_vs_width{suffix}.png"
    save(fig, ctx.figdir / name)
    return Figure(f"figures/{name}", f"Stability against width ({PROTOCOLS[protocol]})",
                  f"Top: perturbation stability ({_when(protocol, v)}), mean over seeds (Def. 1) with the "
                  "min–max band of the per-seed values (Def. 3), log–log, one panel per initialisation, one line per "
                  "depth; the dotted line marks the number of training points. Claim 1 expects a rise then a "
                  "fall for He and LeCun. Bottom: training (solid) and test (dashed) accuracy of the same "
                  "networks at the same moment — a low stability with a low accuracy is an untrained network, "
                  "not a robust one.")


def _main_task(v: pd.DataFrame) -> pd.DataFrame:
    """The k-logit networks on the run's most common class set (the 2-class sweep and Thm 3's
    one-output block are other experiments: a depth curve must not pool them)."""
    if "output" in v.columns:
        v = v[v["output"] == "multi"]
    if "classes" in v.columns and len(v):
        text = v["classes"].astype(str)
        v = v[text == text.mode().iloc[0]]
    return v


def _depth_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    v = _main_task(v)
    inits = [i for i, s in v.groupby("init") if s.groupby("width")["depth"].nunique().max() >= 2]
    inits = [i for i in INITS if i in inits]
    if not inits:
        return None
    fig, axes = subplots(3, len(inits), panel=(3.2, 2.5), squeeze=False)
    for j, init in enumerate(inits):
        vi = v[v["init"] == init]
        n_depths = vi.groupby("width")["depth"].nunique()
        # the widths with the fullest depth sweep (at most four, evenly spread), for legibility
        ws = n_depths[n_depths == n_depths.max()].index.to_list()
        ws = [ws[i] for i in sorted({round(k * (len(ws) - 1) / 3) for k in range(4)})] if len(ws) > 4 else ws
        for n, m in enumerate(ws):
            sub = vi[vi["width"] == m]
            col = COLORS[n % len(COLORS)]
            mean_band(axes[0, j], sub, "depth", "stability", color=col, label=f"m={m}", band="minmax")
            mean_band(axes[0, j], sub, "depth", "stability_init", color=col, ls=":", marker="", band="minmax")
            # the closed form per row, averaged like the measured values (rows may mix settings)
            cf_rows = [(int(r["depth"]), closed_form_at_init(r)) for _, r in sub.iterrows()]
            cf = [(L, float(np.mean([p for LL, p in cf_rows if LL == L and p])))
                  for L in sorted({L for L, p in cf_rows if p})]
            if cf:
                axes[0, j].plot(*zip(*cf), "x", color=col, ms=5, label="closed form at init" if n == 0 else None)
            _acc_panel(axes[1, j], sub, "depth", col)
            kap = sub.dropna(subset=["kappa_m"])
            if (kap["kappa_m"] > 0).any():
                mean_band(axes[2, j], kap[kap["kappa_m"] > 0], "depth", "kappa_m", color=col, band="minmax")
                axes[2, j].set_yscale("log")
        axes[2, j].axhline(KAPPA_LAZY, color="0.5", lw=0.8, ls=":")
        axes[0, j].set_yscale("log")
        axes[0, j].set_title(f"init = {init}")
        axes[2, j].set_xlabel("depth L")
        axes[1, j].set_ylim(0, 1.02)
        axes[0, j].legend()
    axes[0, 0].set_ylabel("stability P(f, ε)")
    axes[1, 0].set_ylabel("accuracy (train —, test --)")
    axes[2, 0].set_ylabel("κ when measured")
    label_panels(axes)
    name = f"stability_vs_depth{suffix}.png"
    save(fig, ctx.figdir / name)
    return Figure(f"figures/{name}", f"Stability against depth ({PROTOCOLS[protocol]})",
                  f"Top: stability after training (solid, {_when(protocol, v)}; mean and min–max over seeds) and at "
                  "initialisation (dotted) against depth, one line per width with the fullest depth sweep, log scale; "
                  "crosses: the exact expectation at initialisation (LeCun halves per layer, He and NTK are flat in "
                  "depth — the paper's rise for He/NTK is its bound's, not the quantity's). Claim 2 expects LeCun to "
                  "fall and He/NTK to rise with depth (trained, lazy networks) and the closed form at init. Middle: the "
                  "accuracies of the same networks. Bottom: κ = ‖θ − θ₀‖/‖θ₀‖ when measured; the dotted line is "
                  "the lazy bound: networks above it are outside Thm 1 and excluded from depth-init-trained.")


def _nonlazy_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    two = _same_output_as_he(v[(v["depth"] == 2) & v["init"].isin(["he", "small"])])
    if two["init"].nunique() < 2:
        return None
    fig, axes = subplots(1, 2, panel=(3.4, 2.6))
    for n, (init, sub) in enumerate(two.groupby("init")):
        label = "lazy (He)" if init == "he" else f"non-lazy (small, γ={sub['gamma'].iloc[0]:g})"
        mean_band(axes[0], sub, "width", "stability", color=COLORS[n], label=label, band="minmax")
        _acc_panel(axes[1], sub, "width", COLORS[n], label)
    log_axes(axes[0])
    log_axes(axes[1], y=False)
    for ax in axes:
        ax.set_xlabel("width m")
    axes[0].set_ylabel("stability P(f, ε)")
    axes[1].set_ylabel("accuracy (train —, test --)")
    axes[1].set_ylim(0, 1.02)
    axes[0].legend()
    label_panels(axes)
    name = f"lazy_vs_nonlazy{suffix}.png"
    save(fig, ctx.figdir / name)
    return Figure(f"figures/{name}", f"Lazy vs non-lazy two-layer networks ({PROTOCOLS[protocol]})",
                  f"(a) Stability against width ({_when(protocol, v)}) for He (lazy) and the small initialisation "
                  "(non-lazy), depth 2, mean and min–max over seeds. Claim 3 expects the non-lazy curve to fall at "
                  "every width and to lie below He. (b) Their training (solid) and test (dashed) accuracy.")


def _kappa_figure(df: pd.DataFrame, f: pd.DataFrame, ctx: Context) -> Figure | None:
    ep = _same_output_as_he(df[(df["kind"] == "epoch") & (df["depth"] == 2) & df["init"].isin(["he", "small"])])
    f = _same_output_as_he(f)
    if ep.empty:
        return None
    fig, axes = subplots(1, 2, panel=(3.4, 2.6))
    n = 0
    for init, ls in (("he", "-"), ("small", "--")):
        widths = sorted(ep[ep["init"] == init]["width"].unique())
        if len(widths) > 4:  # four widths, evenly spread, for legibility
            widths = [widths[i] for i in sorted({round(k * (len(widths) - 1) / 3) for k in range(4)})]
        for m in widths:
            sub = ep[(ep["init"] == init) & (ep["width"] == m)]
            mean_band(axes[0], sub, "epoch", "kappa", color=COLORS[n % len(COLORS)], ls=ls, marker="",
                      label=f"{init}, m={m}", band="minmax")
            n += 1
    axes[0].set_yscale("log")
    axes[0].set_xlabel("epoch t")
    axes[0].set_ylabel("κ(t) = ‖θ(t) − θ(0)‖ / ‖θ(0)‖")
    axes[0].legend(ncol=2, fontsize=6)
    two = f[(f["depth"] == 2) & f["init"].isin(["he", "small"])]
    for n, (init, sub) in enumerate(two.groupby("init")):
        mean_band(axes[1], sub, "width", "kappa", color=COLORS[n], label=init, band="minmax")
    log_axes(axes[1])
    axes[1].set_xlabel("width m")
    axes[1].set_ylabel("final κ")
    axes[1].legend()
    label_panels(axes)
    save(fig, ctx.figdir / "kappa.png")
    return Figure("figures/kappa.png", "Lazy-training ratio κ",
                  "(a) κ(t) at the end of every epoch for He (solid) and the non-lazy init (dashed), depth 2, "
                  "mean and min–max over seeds, four widths each. (b) The final κ against width. Claim 4 expects He nearly flat in time "
                  "and falling with width, the non-lazy init growing and an order of magnitude larger.")


def _early_figure(f: pd.DataFrame, ctx: Context) -> Figure | None:
    if "stability_early" not in f.columns or "output" not in f.columns:
        return None
    early = f[(f["depth"] == 2) & (f["output"] == "single") & f["stability_early"].notna()]
    if early["width"].nunique() < 2:
        return None
    early = early.assign(ratio=early["stability_early"] / early["stability_init"])
    fig, axes = subplots(1, 2, panel=(3.4, 2.6))
    epoch = int(early["early_epoch"].iloc[0])
    for n, ((init, g), sub) in enumerate(early.groupby(["init", "gamma"])):
        label = f"small, γ={g:g}" if init == "small" else "He (control)"
        mean_band(axes[0], sub, "width", "ratio", color=COLORS[n % len(COLORS)], label=label, band="minmax")
        mean_band(axes[1], sub, "width", "train_loss_early", color=COLORS[n % len(COLORS)], band="minmax")
    log_axes(axes[0])
    log_axes(axes[1], y=False)
    for ax in axes:
        ax.set_xlabel("width m")
    axes[0].set_ylabel(f"P(epoch {epoch}) / P(init)")
    axes[1].set_ylabel(f"training loss at epoch {epoch}")
    axes[0].legend()
    label_panels(axes)
    save(fig, ctx.figdir / "nonlazy_early.png")
    return Figure("figures/nonlazy_early.png", "Non-lazy width early in training (Thm 3)",
                  f"(a) Stability at the end of epoch {epoch} over stability at initialisation, per network, "
                  "against width for the two-layer network with one output and the squared loss (Thm 3's setting), "
                  "small init at each γ and He as the control, mean and min–max over seeds, log–log: what the first "
                  "epoch did, without the init's own m^(1−2γ). nonlazy-width-early expects a fall for the small init "
                  "and none for He. (b) The training loss at that moment: the "
                  "window is early only while the networks have not yet fitted the training set.")


# which claims each figure shows (its caption ends with their measured verdicts)
FIGURE_CLAIMS = {"stability_vs_width": ("width-peak", "width-peak-location", "width-peak-n-train"),
                 "stability_vs_depth": ("depth-init-at-init", "depth-init-trained-lecun", "depth-init-trained-he",
                                        "depth-init-trained-ntk", "depth-lecun-nonlazy"),
                 "lazy_vs_nonlazy": ("nonlazy-width",), "nonlazy_early": ("nonlazy-width-early",),
                 "kappa": ("kappa", "kappa-width")}


def _measured(fig: Figure, by_id: dict[str, Claim]) -> Figure:
    stem = Path(fig.file).stem
    ids = next((v for k, v in FIGURE_CLAIMS.items() if stem == k or stem.startswith(k + "_")), ())
    said = []
    for cid in ids:
        if cid not in by_id:
            continue
        v = by_id[cid].verdict
        num = ""
        if v.effect is not None and v.interval is not None and v.interval[0] is not None:
            num = f", {v.effect:.3g} [{v.interval[0]:.3g}, {v.interval[1]:.3g}]"
        said.append(f"{cid} {v.verdict}{num}")
    if not said:
        return fig
    return dataclasses.replace(fig, caption=fig.caption + " Measured in this run: " + "; ".join(said)
                               + " (claim table).")


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    f = finals(df)
    if "regime" in f.columns:  # the linearised solutions are the lazy-limit claim's table, not drawn here
        f = f[f["regime"].fillna("sgd") == "sgd"]
    if f.empty:
        return []
    out: list[Figure | None] = []
    for i, p in enumerate(protocols(f)):
        v, suffix = view(f, p).dropna(subset=["stability"]), ("" if i == 0 else f"_{p}")
        v = v[v["stability"] > 0]  # a network never measured at the target is not drawn there
        out += [_width_figure(v, ctx, p, suffix), _depth_figure(v, ctx, p, suffix),
                _nonlazy_figure(v, ctx, p, suffix)]
    out += [_early_figure(f, ctx), _kappa_figure(df, f, ctx)]
    by_id = {c.id: c for c in claims(df, ctx)}
    return [_measured(x, by_id) for x in out if x is not None]

