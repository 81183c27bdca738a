"""Why the one-step perturbation never saturates in feature-learning's η̃ runs (A3b, issue 33).

A3b tests the Θ(1/η̃) crossing law on runs whose one-step perturbation ``clip_ε(η̃ ∇ₓℓ)``
saturates (more than half of its v_y coordinates on the non-robust patches clipped at ε) before
the crossing. In the paper preset no run does: the largest clipped fraction is 0.11–0.18 at every
active η̃ (25–150), flat in η̃, so A3b reads "not applicable". This script measures why.

Hypothesis, written before the run: one-step training reaches a plateau within ~100 steps at
which the perturbation's typical size along v_y, ``r = η̃ |⟨∇_{x_p} ℓ, v_y⟩| / ε`` on the
non-robust patches, is the same whatever η̃ (the weights settle where the attack erases just
enough of v_y to stop B's growth). A larger η̃ then buys a smaller plateau B, not a larger
perturbation, and the clipped fraction (the share of patches with r >= 1) stays flat. Under
σ̃'s polynomial part (σ̃'(z) = (z/ρ)^{q−1}) with z ≈ β·B on a patch, ``η̃ β^{q−1} B^q`` constant
gives a plateau B ∝ η̃^{−1/q}.

What would refute it: the median r at the plateau growing with η̃ by more than 1.5× per decade,
or the clipped fraction growing with η̃ (then a larger η̃ would reach saturation and the paper
preset's η̃ grid is simply too short). Both are printed, with the fitted plateau-B exponent
against −1/q. A second question, added after the first reading (η̃ 15–150 all gave a median r
of 0.49–0.52): is the pinned quantity r, or the move r·ε along v_y? The same runs at η̃ = 50 with
ε = 0.3 (below β, outside Assumption 2.3), 0.5 and 0.8 answer it.

The setting is the paper preset's η̃ block (P 64, d 64, m 8, n 200, lr 3, ε = β = 0.4, q 3,
σ₀ 0.05, 900 steps), η̃ extended to three decades (5 … 1500), 3 seeds per η̃. The plateau is the
mean over the probes of the last third of training (values 0 there mean the run left the
small-weight regime: its clean loss, and with it the perturbation, vanished). Writes a JSON of every trace and a figure.

    python scripts/a3_saturation.py --out docs/studies/figures/a3-saturation
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from robustlab.data.patches import sample_ensemble
from robustlab.models.patch_cnn import PatchCNN
from robustlab.studies.feature_learning.presets import PAPER_BASE, FeatureLearningConfig
from robustlab.train.feature import ClosedFormStep, train_patch_cnn
from robustlab.utils import make_generator

ETAS = (5.0, 15.0, 50.0, 150.0, 500.0, 1500.0)
# the second question: is the pinned quantity r (relative to ε) or the move r·ε along v_y? The same
# runs at η̃ = 50 with ε below β (outside Assumption 2.3), and above it
EPS, EPS_ETA = (0.3, 0.5, 0.8), 50.0


def run(eta: float, seeds: list[int], steps: int, probe_every: int, eps: float = 0.4) -> dict:
    cfg = FeatureLearningConfig(**{**PAPER_BASE, "experiment": "eta", "method": "gradient_step",
                                   "eta_tilde": eta, "eps": eps, "steps": steps, "probe_every": probe_every})
    spec, tspec = cfg.patch_spec(), cfg.train_spec()
    features, train, test = sample_ensemble(spec, seeds, cfg.n_train, cfg.n_test, make_generator)
    E = len(seeds)
    model = PatchCNN(E, cfg.k, cfg.m, cfg.d, activation=cfg.activation, q=cfg.q, rho=cfg.rho, sigma0=cfg.sigma0,
                     generators=[make_generator(s, "patch-cnn-init") for s in seeds])
    v_y = torch.stack([features.v[e][train.y[e]] for e in range(E)]).to(train.x.dtype)  # (E, N, d)
    nr = train.nonrobust.to(train.x.dtype)  # (E, N, P)
    grads = ClosedFormStep(model, tspec)
    trace: dict[str, list] = {k: [] for k in ("step", "clipped", "r_median", "r_p90", "erased", "p_wrong")}

    def hook(t: int) -> None:
        step = grads.input_step(train.x, train.y)
        r = torch.einsum("enpd,end->enp", step, v_y).abs() / cfg.eps  # (E, N, P)
        with torch.no_grad():
            prob = torch.softmax(model(train.x), -1).gather(-1, train.y[..., None]).squeeze(-1)  # (E, N)
        clipped, med, p90, erased = [], [], [], []
        for e in range(E):
            re = r[e][nr[e] > 0]
            clipped.append(float((re >= 1).float().mean()))
            med.append(float(re.median()))
            p90.append(float(re.quantile(0.9)))
            erased.append(float(re.clamp(max=1).mean()))  # mean erased share of ε along v_y
        trace["step"].append(t)
        trace["clipped"].append(clipped)
        trace["r_median"].append(med)
        trace["r_p90"].append(p90)
        trace["erased"].append(erased)
        trace["p_wrong"].append([float(1 - p) for p in prob.mean(1)])

    hist = train_patch_cnn(model, features, train, test, tspec, batch_generator=make_generator(seeds[0], "batches"),
                           attack_generator=make_generator(seeds[0], "train-attack"),
                           eval_generator=make_generator(seeds[0], "eval-attack"), probe_hook=hook)
    A, B = hist.A.mean(-1), hist.B.mean(-1)  # (E, T), averaged over classes
    return {"eta_tilde": eta, "eps": eps, "seeds": seeds, "probe_steps": hist.probe_steps.tolist(),
            "A": A.T.tolist(), "B": B.T.tolist(), "loss": hist.loss.T.tolist(), **trace}


def plateau(values: list[list[float]]) -> np.ndarray:
    """Per seed, the mean over the last third of the probes."""
    a = np.asarray(values, dtype=float)  # (T, E)
    return a[-max(1, len(a) // 3):].mean(0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=900)
    ap.add_argument("--etas", type=float, nargs="*", default=list(ETAS))
    ap.add_argument("--eps", type=float, nargs="*", default=list(EPS),
                    help="training budgets run at η̃ = EPS_ETA besides ε = β = 0.4 at every η̃")
    ap.add_argument("--probe-every", type=int, default=30)
    args = ap.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = []
    for eta, eps in [(e, 0.4) for e in args.etas] + [(EPS_ETA, e) for e in args.eps]:
        t0 = time.perf_counter()
        runs.append(run(eta, list(range(args.seeds)), args.steps, args.probe_every, eps))
        print(f"eps {eps:g}, eta {eta:g}: {time.perf_counter() - t0:.1f} s", flush=True)
    q = FeatureLearningConfig().q
    summary = []
    for rr in runs:
        B_end = plateau(rr["B"])
        row = {"eta_tilde": rr["eta_tilde"], "eps": rr["eps"], "B_plateau": B_end.tolist(), "A_end": np.asarray(rr["A"])[-1].tolist(),
               "clipped_plateau": plateau(rr["clipped"]).tolist(), "clipped_max": np.asarray(rr["clipped"]).max(0).tolist(),
               "r_median_plateau": plateau(rr["r_median"]).tolist(), "erased_plateau": plateau(rr["erased"]).tolist(),
               "p_wrong_plateau": plateau(rr["p_wrong"]).tolist()}
        summary.append(row)
        print(f"eps {rr['eps']:g} eta {rr['eta_tilde']:7g}  B {np.mean(B_end):.3f}  A_end {np.mean(row['A_end']):.3f}  "
              f"clipped {np.mean(row['clipped_plateau']):.3f} (max {np.max(row['clipped_max']):.3f})  "
              f"median r {np.mean(row['r_median_plateau']):.3f} (move r*eps {rr['eps'] * np.mean(row['r_median_plateau']):.3f})  erased {np.mean(row['erased_plateau']):.3f}  "
              f"1-p_y {np.mean(row['p_wrong_plateau']):.3f}")
    # the plateau-B exponent over the runs whose attack is active (clipped fraction > 0.01)
    act = [(s["eta_tilde"], b) for s in summary if s["eps"] == 0.4 for b, c in zip(s["B_plateau"], s["clipped_plateau"]) if c > 0.01]
    fit = None
    if len({e for e, _ in act}) >= 2:
        x, y = np.log([e for e, _ in act]), np.log([b for _, b in act])
        slope, icpt = np.polyfit(x, y, 1)
        fit = {"slope": float(slope), "predicted": -1.0 / q, "etas": sorted({e for e, _ in act})}
        print(f"plateau B ∝ eta^{slope:.3f} over the active runs (predicted {-1 / q:.3f})")
    meds = {f"eps {s['eps']:g}, eta {s['eta_tilde']:g}": float(np.mean(s["r_median_plateau"])) for s in summary}
    (args.out / "a3-saturation.json").write_text(json.dumps({"runs": runs, "summary": summary, "B_fit": fit,
                                                             "median_r": meds}))
    _figure(runs, summary, args.out / "a3-saturation.png")


def _figure(runs: list[dict], summary: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    cmap = plt.get_cmap("viridis")
    eta_runs = [rr for rr in runs if rr["eps"] == 0.4]
    for i, rr in enumerate(eta_runs):
        c = cmap(i / max(1, len(eta_runs) - 1))
        s = np.asarray(rr["step"])
        ax[0].plot(rr["probe_steps"], np.asarray(rr["B"]).mean(1), color=c, label=f"η̃ {rr['eta_tilde']:g}")
        ax[0].plot(rr["probe_steps"], np.asarray(rr["A"]).mean(1), color=c, ls="--")
        ax[1].plot(s, np.asarray(rr["clipped"]).mean(1), color=c)
        ax[1].plot(s, np.asarray(rr["r_median"]).mean(1), color=c, ls=":")
    ax[0].set(xlabel="step", ylabel="B (solid), A (dashed)", title="features")
    ax[0].legend(fontsize=7)
    ax[1].axhline(0.5, color="grey", lw=0.8)
    ax[1].set(xlabel="step", ylabel="clipped fraction (solid), median r (dotted)",
              title="the one-step perturbation along v_y")
    at = [s for s in summary if s["eps"] == 0.4]
    etas = [s["eta_tilde"] for s in at]
    ax[2].loglog(etas, [np.mean(s["B_plateau"]) for s in at], "o-", label="plateau B")
    ax[2].loglog(etas, [max(np.mean(s["r_median_plateau"]), 1e-3) for s in at], "s-", label="median r")
    ax[2].loglog(etas, [max(np.mean(s["clipped_plateau"]), 1e-3) for s in at], "^-", label="clipped fraction")
    ax[2].axhline(0.5, color="grey", lw=0.8)
    ax[2].set(xlabel="η̃", title="at the plateau (last third)")
    ax[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
