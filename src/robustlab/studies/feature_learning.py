"""Study A — feature learning under structured data (seed 000).

"Adversarial training can provably improve robustness": on patch data whose robust feature
``u_y`` is strong but sparse and whose non-robust feature ``v_y`` is weak but dense, standard
training of a two-layer smoothed-ReLU CNN learns ``v`` (``B ≫ A``) and is broken by
``δ_p = −ε v_y``; one-step adversarial training first grows ``B``, then ``A`` overtakes it.

Sub-experiments share one grid, told apart by the ``experiment`` field:

* ``main`` — standard vs one-step (``gradient_step``) adversarial training at the defaults;
* ``eta`` — the η̃ sweep (crossing time of A over B against η̃, log–log);
* ``eps`` — the ε spectrum from 0 (ε = 0 must reproduce standard training exactly);
* ``activation`` / ``attack`` / ``basis`` / ``overlap`` — the reviewers' extensions (ReLU and
  GELU; FGSM and multi-step PGD training; rotated features; overlapping patches);
* ``images`` — a small CNN on the embedded digits / mnist5k (or MNIST, CIFAR-10, SVHN from
  ``--data-dir``): standard vs ℓ∞-PGD adversarial training, and Ilyas et al. 2019's
  non-robust-dataset test on the standard model.

Why the defaults are what they are (measured while building the study on the shared 2-core
CPU; ``run_points`` on 2–6 seeds):

* Assumption 2.3 holds in its numeric reading (``robustlab.data.patches.MUCH = 2``):
  ``α/β = 2.5``, ``Σβ^q / Σα^q = 47·0.4³ / 1 = 3.0``, ``ε = β`` and ``ε/α = 0.4``.
* ``ε = β`` exactly: the theory's attack then *erases* the non-robust signal. With
  ``ε > β`` it reverses it (``−(ε−β) v_y``), which a network holding the usual discriminative
  weights (``v_i`` up, ``v_j`` down) reads as evidence *for* a wrong class: at ε = 0.45 the
  adversarially trained model's feature-attack accuracy fell from ~0.9 to ~0.5.
* ``d = 64`` (``σ_n = 1/√d``): at ``d = 32`` one-step adversarial training ended with
  ``A − B`` within ±0.04 of 0 for most seeds and feature-attack accuracy 0.78–0.93; at
  ``d = 64`` all six seeds tried crossed, ``A − B = 0.04…0.29``, accuracy 0.88–1.0.
  (At ``d = 128`` the run left the small-weight regime below and B grew back past A.)
* ``η̃ = 15``: below η̃ ≈ 8 the one-step attack is too weak once the loss is small and
  adversarial training behaves like standard training (B wins). Above it, the unclipped
  step ``η̃∇ₓℓ`` equalises the logits at small weights (it acts as a penalty ``η̃‖∇ₓℓ‖²``),
  A and B settle where the step reaches the size that cancels the margin, and that size
  falls with η̃: A overtakes B later and less clearly (at 200 steps, η̃ = 60 and 120 did not
  cross at all). η̃ = 15 crosses early with the highest feature-attack accuracy seen.
* ``lr = 3``, 200 steps: the runs settle at a fixed point reached at ``lr·t ≈ 600`` (lr 1/2/3
  with 600/300/200 steps gave the same A, B and accuracies); the larger lr cuts wall time.
  ``σ₀ = 0.05``: ``ασ₀ ≪ ρ`` (training starts in the polynomial part), and the first phase
  takes tens rather than thousands of steps.
* The paper preset keeps these and scales up what was checked to help: P = 64 (density 4.0),
  200 samples, m = 8, 600 steps (``A − B ≈ 0.4``, feature-attack accuracy ≈ 1 on 2 seeds).

What the claims meet at these scales (reported, not hidden):

* Verdicts. Every claim is a :func:`robustlab.stats.decide` verdict on an effect with its 95%
  interval over seeds (reproduced / contradicted / inconclusive with the seeds a decision
  would need / not applicable when Assumption 2.3, as the generator reports it, fails).
* PGD — a disagreement with the paper, not a software failure. An ℓ∞ attacker may add
  ``ε u_j`` (and ``−ε u_y``) to *every* patch. A class-j detector with ``⟨w, u_j⟩ = a`` then
  gains ``P·σ̃(εa)`` against the robust patch's ``σ̃((α−ε)a)``; over ``a`` the best ratio is
  ``(α/ε − 1)^q / P`` (:func:`robustlab.attacks.every_patch.every_patch_bound`), above 1 only
  if ``P < (α/ε − 1)^q < (α/β)^q``, while the non-robust feature is denser only if
  ``P ≳ (α/β)^q``. So the robust-feature solution is not ℓ∞-robust where Assumption 2.3
  holds. Claim A2 is split: (a) A overtakes B, (b) robustness under the paper's attack along
  the non-robust features, (c) robustness under unrestricted ℓ∞ PGD (expected contradicted);
  and A2d checks the analysis itself (``experiment=counter``): the explicit every-patch
  attack on hand-set robust weights over a grid of P and ε/α, and on the trained networks
  over ε/α, with four threat models (ℓ∞ everywhere, ℓ∞ on the non-robust patches only, a
  per-patch ℓ2 budget, the span of the non-robust features).
* η̃. The one-step perturbation is recorded per probe: the fraction of its coordinates, and
  of its ``v_y`` coordinates on the non-robust patches, clipped at ±ε. The sweep runs
  η̃ = 0.5…150 (the quick preset stops at 50: its 400-step horizon cannot hold a crossing at 150). Below η̃ ≈ 5 the attack never reaches ε along ``v_y`` (inactive: standard
  training in effect, B wins); from 15 up about 10–20% of the ``v_y`` coordinates are clipped
  over phase 1 and the fraction never passed 0.5 (a pilot went to η̃ = 1500): the
  perturbation does not saturate, the dynamics shrink the gradient instead. In the
  unsaturated range the crossing comes *later* for larger η̃ up to 50 (the attack's strength
  slows the robust feature too); at 150 runs either never cross or leave the small-weight
  regime within ten steps (A − B ≈ 6, feature-attack accuracy at chance); such *diverged* runs
  (final max(A, B) > ``DIVERGED``) are left out of A3a and A3b, and counted in the evidence.
* Real images. The robust accuracy A6 judges is a strong final evaluation (per-sample worst case
  over 50-step PGD on cross-entropy and on the margin); the cheap per-epoch 10-step PGD that
  draws the learning curves read up to 0.04 too high against AutoAttack (APGD-CE + APGD-T).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import numpy as np
import pandas as pd
import torch

from .. import stats
from ..attacks.every_patch import every_patch, every_patch_bound
from ..config import Config, ConfigError, param
from ..data import images as image_data
from ..data import load_images
from ..data.patches import (
    AssumptionWarning,
    PatchSpec,
    assumption_report,
    check_assumptions,
    sample_ensemble,
)
from ..models.ensemble import Flat, fold
from ..models.patch_cnn import ACTIVATIONS, PatchCNN
from ..models.small_cnn import SmallCNN
from ..report.plots import mean_band, plt, save
from ..train.feature import (
    METHODS,
    ClosedFormStep,
    FeatureTrainSpec,
    by_copies,
    crossing_step,
    evaluate_patch_cnn,
    pgd_accuracy,
    train_patch_cnn,
)
from ..train.images import ImageTrainSpec, nonrobust_dataset, train_images
from ..utils import make_generator, resolve_device
from .base import SEEDS_KEY, Claim, Context, Figure, Preset, Study

__all__ = ["FeatureLearningConfig", "STUDY", "run_points", "claims", "figures", "EXPERIMENTS",
           "CLAIM_RATIO", "CLEAN_MIN", "CHANCE_SLACK", "ROBUST_MIN", "SLOPE_TOL", "EXACT_TOL"]

EXPERIMENTS = ("main", "eta", "eps", "activation", "attack", "basis", "overlap", "counter", "images")
SOURCE = "Seed 000: Adversarial training can provably improve robustness (ICLR 2025)"

# claim thresholds (from the issue; never loosened to make a report green)
CLAIM_RATIO = 2.0  # claim 1: B > c·A with c = 2 (the same "≫" factor as Assumption 2.3's report)
CLEAN_MIN = 0.95  # claim 1: clean accuracy of standard training
CHANCE_SLACK = 0.1  # claim 1: feature-attack accuracy <= chance + 0.1
ROBUST_MIN = 0.9  # claim 2: robust accuracy under both attacks
SLOPE_TOL = 0.25  # claim 3: |slope − (−1)| <= 0.25 reads "close to −1"
EXACT_TOL = 1e-6  # claim 4: ε = 0 adversarial vs standard probes


@dataclasses.dataclass(frozen=True)
class FeatureLearningConfig(Config):
    study = "feature-learning"
    experiment: str = param("main", "sub-experiment label (what the claims and figures group by)",
                            choices=EXPERIMENTS)
    method: str = param("gradient_step", "training: standard, gradient_step (the theory's one step "
                        "x + clip(η̃∇ℓ)), fgsm or pgd; images use standard or pgd", choices=METHODS)
    # data (Seed 000 Def. 2.2)
    k: int = param(2, "classes", ge=1)
    P: int = param(48, "patches per sample", ge=1)
    d: int = param(64, "patch dimension (noise sigma_n = 1/sqrt(d) by default)", ge=1)
    n_robust: int = param(1, "robust patches per sample (|J_R|)", ge=0)
    alpha: float = param(1.0, "robust feature strength (min of the range when alpha_max is set)", ge=0)
    alpha_max: float | None = param(None, "draw alpha_p ~ U[alpha, alpha_max] (none: fixed)")
    beta: float = param(0.4, "non-robust feature strength (min of the range when beta_max is set)", ge=0)
    beta_max: float | None = param(None, "draw beta_p ~ U[beta, beta_max] (none: fixed)")
    sigma_n: float | None = param(None, "patch noise std (none: 1/sqrt(d))")
    feature_noise: float = param(0.0, "feature-noise weight c: gamma ~ U[0, c sigma_n/sqrt(d)] on the other features", ge=0)
    basis: str = param("onehot", "feature basis: onehot (u_j = e_j, v_j = e_{k+j}) or rotated (random orthonormal)",
                       choices=("onehot", "rotated"))
    overlap: bool = param(False, "robust patches also carry beta v_y (the authors' overlapping generalisation)")
    n_train: int = param(64, "training samples", ge=1)
    n_test: int = param(200, "held-out samples for the accuracies", ge=1)
    # model (Seed 000 Sec. 2)
    m: int = param(4, "neurons per class", ge=1)
    activation: str = param("smooth_relu", "activation", choices=ACTIVATIONS)
    q: float = param(3.0, "smoothed-ReLU power (the theory: q >= 3)")
    rho: float = param(1.0, "smoothed-ReLU threshold (polynomial below, linear above)")
    sigma0: float = param(0.05, "init std of w_{i,r} (small: start in the polynomial part)")
    # training
    steps: int = param(200, "gradient steps", ge=1)
    lr: float = param(3.0, "learning rate", gt=0)
    batch_size: int = param(0, "minibatch size (0: full-batch gradient descent)", ge=0)
    eps: float = param(0.4, "training l_inf budget (= beta: the theory's attack then erases v_y exactly)")
    eta_tilde: float = param(15.0, "one-step attack step size eta~ (gradient_step)")
    pgd_steps: int = param(5, "steps of PGD adversarial training", ge=1)
    probe_every: int = param(5, "record A, B, loss every n steps", ge=1)
    eval_every: int = param(50, "clean / feature-attack accuracy every n steps", ge=1)
    pgd_eval_every: int = param(0, "PGD robust accuracy every n steps (0: at the end only)", ge=0)
    eval_eps: float = param(0.4, "budget of the evaluation attacks (fixed across the eps sweep)", ge=0)
    eval_pgd_steps: int = param(10, "steps of the evaluation PGD (margin loss, random start)", ge=0)
    # real images
    dataset: str = param("digits", "images: digits, mnist5k (embedded) or mnist, cifar10, svhn (--set data_dir=)",
                         choices=("digits", "mnist5k", "mnist", "cifar10", "svhn"))
    data_dir: str = param("", "folder with torchvision datasets (images only)")
    image_size: int = param(0, "resize images to size x size (0: native)", ge=0)
    max_train: int = param(0, "cap on training images (0: all)", ge=0)
    max_test: int = param(0, "cap on test images (0: all)", ge=0)
    width: int = param(8, "small-CNN width (channels of the first conv)", ge=1)
    epochs: int = param(8, "image training epochs", ge=1)
    image_eval_every: int = param(2, "clean / PGD test accuracy every n epochs (and at the end)", ge=1)
    image_lr: float = param(0.05, "image SGD learning rate (momentum 0.9)", gt=0)
    image_batch: int = param(64, "image minibatch", ge=1)
    image_eps: float = param(0.1, "image l_inf budget (pixels in [0, 1])", ge=0)
    image_pgd_steps: int = param(5, "PGD steps in image adversarial training", ge=1)
    image_final_pgd_steps: int = param(50, "steps of the reported (final) image evaluation: worst case per sample "
                                       "over PGD on cross-entropy and on the margin, step ε/8 (0: the per-epoch "
                                       "10-step PGD)", ge=0)
    ilyas: bool = param(True, "run the non-robust-dataset test on the standard model")
    ilyas_steps: int = param(10, "targeted attack steps for the non-robust dataset", ge=1)

    def check(self) -> None:
        if self.q < 1:
            raise ConfigError("q", self.q, ">= 1 (the theory takes q >= 3)")
        if not self.rho > 0:
            raise ConfigError("rho", self.rho, "> 0")
        for name in ("eps", "eta_tilde", "sigma0"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise ConfigError(name, v, "a finite value >= 0")
        if self.method == "gradient_step" and self.eta_tilde == 0:
            raise ConfigError("eta_tilde", self.eta_tilde, "> 0 for gradient_step training")
        if self.experiment == "images":
            if self.method not in ("standard", "pgd"):
                raise ConfigError("method", self.method, "standard or pgd for experiment=images")
            if self.dataset in ("mnist", "cifar10", "svhn") and not self.data_dir:
                raise ConfigError("data_dir", self.data_dir, f"a folder holding {self.dataset} (torchvision files)")
            return
        self.patch_spec()  # k, d vs 2k, n_robust, P, alpha/beta ranges: ConfigError on bad values

    # -- the pieces --------------------------------------------------------------------
    def patch_spec(self) -> PatchSpec:
        return PatchSpec(k=self.k, P=self.P, d=self.d, n_robust=self.n_robust, alpha=self.alpha,
                         beta=self.beta, alpha_max=self.alpha_max, beta_max=self.beta_max,
                         sigma_n=self.sigma_n, feature_noise=self.feature_noise, basis=self.basis,
                         overlap=self.overlap)

    def train_spec(self) -> FeatureTrainSpec:
        return FeatureTrainSpec(method=self.method, steps=self.steps, lr=self.lr, batch_size=self.batch_size,
                                eps=self.eps, eta_tilde=self.eta_tilde, pgd_steps=self.pgd_steps,
                                probe_every=self.probe_every, eval_every=self.eval_every,
                                pgd_eval_every=self.pgd_eval_every, eval_eps=self.eval_eps,
                                eval_pgd_steps=self.eval_pgd_steps)

    def image_spec(self, method: str | None = None) -> ImageTrainSpec:
        return ImageTrainSpec(method=method or self.method, epochs=self.epochs, lr=self.image_lr,
                              batch_size=self.image_batch, eps=self.image_eps,
                              pgd_steps=self.image_pgd_steps, eval_every=self.image_eval_every,
                              final_pgd_steps=self.image_final_pgd_steps)


# ----------------------------------------------------------------------------------------
# running

def run_points(cfgs: list[FeatureLearningConfig], device: str = "cpu") -> list:
    """Train len(cfgs) seeds of one point as one ensemble (E = len(cfgs))."""
    base = cfgs[0]
    dev = resolve_device(device)
    t0 = time.perf_counter()
    if base.experiment == "images":
        rows = _run_images(cfgs, dev)
    else:
        rows = _run_patches(cfgs, dev)
    seconds = time.perf_counter() - t0
    for r in rows:
        if isinstance(r, list):
            r.append({"kind": "timing", "seconds": seconds, "ensemble": len(cfgs)})
    return rows


# the evaluation budgets (as ε/α) of the trained networks' every-patch / PGD sweep: it crosses
# the every-patch boundary (α/ε − 1)^q = P, at ε/α ≈ 0.22 for P = 48, q = 3, from both sides
EPS_OVER_ALPHA = (0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
# hand-set robust weights w_{i,r} = a u_i with α·a = HAND_SCALE·ρ: inside σ̃'s polynomial part,
# where the ratio the every-patch bound names is largest (the most favourable robust solution)
HAND_SCALE = 0.5


THREATS = ("linf_all", "linf_nonrobust_patches", "l2_per_patch", "nonrobust_subspace")


def _threat_rows(model: PatchCNN, features, test, eps: float, names: tuple[str, ...] = THREATS) -> dict:
    """Accuracy (per member) under the explicit every-patch attacks of four threat models at ε
    (``names``: those of them to run).

    * ``linf_all``: ℓ∞, any patch: ε(u_j − u_y) on every patch;
    * ``linf_nonrobust_patches``: ℓ∞ confined to the non-robust patches J_NR (ε(u_j − u_y) there);
    * ``l2_per_patch``: ‖δ_p‖₂ ≤ ε in every patch: ε(u_j − u_y)/√2 on every patch;
    * ``nonrobust_subspace``: δ_p in the span of the non-robust features (the paper's attack
      geometry): ε(v_j − v_y) on every patch.
    """
    joined = by_copies(_threat_rows, model, (features, test), eps, names)
    if joined is not None:  # a few copies at a time (the same numbers, in cache; see member_chunks)
        return joined
    E = model.E
    flat = Flat(model, E).eval()
    x, y = fold(test.x), fold(test.y)
    N = test.x.shape[1]
    u = features.u.to(x.dtype).repeat_interleave(N, dim=0)  # (E*N, k, d): each sample its member's
    v = features.v.to(x.dtype).repeat_interleave(N, dim=0)
    with torch.no_grad():
        clean_ok = flat(x).argmax(-1) == y
    out = {}
    for name, dirs, kw in (("linf_all", u, {}), ("linf_nonrobust_patches", u, {"mask": fold(test.nonrobust)}),
                           ("l2_per_patch", u, {"norm": "l2_patch"}), ("nonrobust_subspace", v, {})):
        if name in names:
            x_adv = every_patch(flat, x, y, dirs, eps, **kw)
            with torch.no_grad():
                out[name] = _per_member(clean_ok & (flat(x_adv).argmax(-1) == y), E)
    return out


def _per_member(ok: torch.Tensor, E: int) -> torch.Tensor:
    return ok.float().reshape(E, -1).mean(1)


def _clip_probe(model: PatchCNN, features, train, spec: FeatureTrainSpec):
    """A probe hook recording, per member, the fraction of clipped coordinates of the one-step
    perturbation ``clip_ε(η̃ ∇ₓℓ)`` at the training points: over all coordinates, and over the
    coordinate that matters to the theory, ``⟨δ_p, v_y⟩`` on the non-robust patches."""
    E = model.E
    steps: list[int] = []
    frac_all: list[torch.Tensor] = []
    frac_v: list[torch.Tensor] = []
    v_y = torch.stack([features.v[e][train.y[e]] for e in range(E)]).to(train.x.dtype)  # (E, N, d)
    nr = train.nonrobust.to(train.x.dtype)  # (E, N, P)

    grads = ClosedFormStep(model, spec)  # closed-form input gradients in a reused buffer

    def hook(t: int) -> None:
        step = grads.input_step(train.x, train.y)  # η̃ ∇ₓℓ_n (E, N, P, d), per-sample gradients
        along = torch.einsum("enpd,end->enp", step, v_y).abs()  # (E, N, P)
        frac_all.append(step.abs_().ge_(spec.eps).mean(dim=(1, 2, 3)).cpu())  # in place: the buffer is ours
        frac_v.append((((along >= spec.eps).float() * nr).sum(dim=(1, 2)) / nr.sum(dim=(1, 2))).cpu())
        steps.append(t)

    return hook, steps, frac_all, frac_v


def _phase1_mean(steps: list[int], values: torch.Tensor, cross: float | None) -> float:
    """Mean of a probe trace over phase 1 (steps up to the crossing; the whole run without one)."""
    s = torch.tensor(steps, dtype=torch.float64)
    sel = s <= cross if cross is not None else torch.ones_like(s, dtype=torch.bool)
    return float(values[sel].double().mean())


def _run_patches(cfgs: list[FeatureLearningConfig], dev: torch.device) -> list:
    base = cfgs[0]
    if base.experiment == "counter":
        return _run_counter(cfgs, dev)
    spec = base.patch_spec()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AssumptionWarning)
        report = check_assumptions(spec, q=base.q, eps=base.eps if base.method != "standard" else base.eval_eps)
    for w in caught:  # once per group (not per seed), still visible to the user
        warnings.warn(w.message, AssumptionWarning, stacklevel=2)
    seeds = [c.seed for c in cfgs]
    features, train, test = sample_ensemble(spec, seeds, base.n_train, base.n_test, make_generator)
    features, train, test = features.to(dev), train.to(dev), test.to(dev)
    model = PatchCNN(len(cfgs), base.k, base.m, base.d, activation=base.activation, q=base.q, rho=base.rho,
                     sigma0=base.sigma0, generators=[make_generator(s, "patch-cnn-init") for s in seeds],
                     device=dev)
    g = lambda salt: make_generator(base.seed, salt)  # noqa: E731 - one stream per purpose
    tspec = base.train_spec()
    clip = None
    if base.method == "gradient_step" and base.experiment in ("main", "eta"):
        clip = _clip_probe(model, features, train, tspec)
    hist = train_patch_cnn(model, features, train, test, tspec, batch_generator=g("batches"),
                           attack_generator=g("train-attack"), eval_generator=g("eval-attack"),
                           probe_hook=clip[0] if clip else None)
    A, B = hist.A.mean(-1), hist.B.mean(-1)  # (E, T): averaged over classes
    assumption = {f"assume_{k}": v for k, v in report.items() if k not in ("violations", "q", "eps")}
    assumption["assume_violations"] = "; ".join(report["violations"])
    threats = _threat_rows(model, features, test, base.eval_eps)
    sweep = []
    # every-patch and PGD across the budget, on the adversarially trained networks (A2d's evidence
    # and the counter figure read only those; on the standard ones it cost ~40% of the main block)
    if base.experiment == "main" and base.method != "standard":
        for r in EPS_OVER_ALPHA:
            eps = r * base.alpha
            ts = dataclasses.replace(tspec, eval_eps=eps)
            pgd = pgd_accuracy(model, test, ts, g(f"eval-sweep-{r}"))  # (what evaluate_patch_cnn's PGD gives)
            ep = _threat_rows(model, features, test, eps, ("linf_all",))["linf_all"]
            sweep.append((r, eps, pgd.cpu(), ep.cpu()))
    out = []
    for e in range(len(cfgs)):
        rows: list[dict] = []
        for j, t in enumerate(hist.probe_steps.tolist()):
            rows.append({"kind": "probe", "step": t, "A": float(A[e, j]), "B": float(B[e, j]),
                         "loss": float(hist.loss[e, j]), "A_i": hist.A[e, j].tolist(),
                         "B_i": hist.B[e, j].tolist()})
        for j, t in enumerate(hist.eval_steps.tolist()):
            p = float(hist.pgd_acc[e, j])
            rows.append({"kind": "eval", "step": t, "clean_acc": float(hist.clean_acc[e, j]),
                         "feature_acc": float(hist.feature_acc[e, j]), "pgd_acc": None if math.isnan(p) else p})
        cross = crossing_step(hist.probe_steps, A[e], B[e])
        b_peak = int(hist.probe_steps[int(B[e].argmax())])
        rows.append({"kind": "neuron", "step": int(hist.probe_steps[-1]),
                     "A_neuron": [round(v, 6) for v in hist.A_neuron[e, -1].flatten().tolist()],
                     "B_neuron": [round(v, 6) for v in hist.B_neuron[e, -1].flatten().tolist()]})
        clip_cols = {}
        if clip:
            _, cs, fa, fv = clip
            fa_e, fv_e = torch.stack(fa)[:, e], torch.stack(fv)[:, e]
            for j, t in enumerate(cs):
                rows.append({"kind": "clip", "step": t, "clip_frac": float(fa_e[j]), "clip_frac_v": float(fv_e[j])})
            clip_cols = {"clip_frac_phase1": _phase1_mean(cs, fa_e, cross),
                         "clip_frac_v_phase1": _phase1_mean(cs, fv_e, cross),
                         "clip_frac_v_max": float(fv_e.max())}
        for r, eps, pgd, ep in sweep:
            rows.append({"kind": "eps_sweep", "eps_over_alpha": r, "attack_eps": eps, "pgd_acc": float(pgd[e]),
                         "every_patch_acc": float(ep[e]),
                         "bound_ratio": every_patch_bound(base.alpha, eps, base.q, base.P)})
        final = {"kind": "final", "step": int(hist.probe_steps[-1]), "A": float(A[e, -1]), "B": float(B[e, -1]),
                 "A_minus_B": float(A[e, -1] - B[e, -1]), "loss": float(hist.loss[e, -1]),
                 "clean_acc": float(hist.clean_acc[e, -1]), "feature_acc": float(hist.feature_acc[e, -1]),
                 "pgd_acc": float(hist.pgd_acc[e, -1]), "cross_step": cross, "b_peak_step": b_peak,
                 "chance": 1.0 / base.k, **{f"threat_{n}": float(a[e]) for n, a in threats.items()},
                 "every_patch_bound": every_patch_bound(base.alpha, base.eval_eps, base.q, base.P),
                 **clip_cols, **assumption}
        rows.append(final)
        out.append(rows)
    return out


def _hand_set(E: int, base: FeatureLearningConfig, features, dev: torch.device) -> PatchCNN:
    """Robust-feature weights set by hand: every neuron of class i is ``a u_i``, α·a = HAND_SCALE·ρ."""
    model = PatchCNN(E, base.k, base.m, base.d, activation=base.activation, q=base.q, rho=base.rho, sigma0=0.0,
                     device=dev)
    a = HAND_SCALE * base.rho / base.alpha
    with torch.no_grad():
        model.W.copy_(a * features.u.to(model.W.dtype).unsqueeze(2).expand(-1, -1, base.m, -1))
    return model


def _run_counter(cfgs: list[FeatureLearningConfig], dev: torch.device) -> list:
    """The counter-experiment on hand-set robust weights (no training): clean, every-patch (four
    threat models), the paper's feature attack and ℓ∞ PGD, all at ``eval_eps``."""
    base = cfgs[0]
    spec = base.patch_spec()
    report = assumption_report(spec, q=base.q, eps=base.eval_eps)
    seeds = [c.seed for c in cfgs]
    features, _, test = sample_ensemble(spec, seeds, 1, base.n_test, make_generator)
    features, test = features.to(dev), test.to(dev)
    model = _hand_set(len(cfgs), base, features, dev)
    ts = base.train_spec()
    clean, feat, pgd = evaluate_patch_cnn(model, features, test, ts, make_generator(base.seed, "counter-pgd"))
    threats = _threat_rows(model, features, test, base.eval_eps)
    ratio = every_patch_bound(base.alpha, base.eval_eps, base.q, base.P)
    out = []
    for e in range(len(cfgs)):
        out.append([{"kind": "counter", "clean_acc": float(clean[e]), "feature_acc": float(feat[e]),
                     "pgd_acc": float(pgd[e]), **{f"threat_{n}": float(a[e]) for n, a in threats.items()},
                     "bound_ratio": ratio, "eps_over_alpha": base.eval_eps / base.alpha,
                     "density": report["beta_q_over_alpha_q"], "assume_holds": bool(report["holds"]),
                     "chance": 1.0 / base.k}])
    return out


def _load_split(cfg: FeatureLearningConfig):
    return load_images(cfg.dataset, size=cfg.image_size or None, max_train=cfg.max_train or None,
                       max_test=cfg.max_test or None, data_dir=cfg.data_dir or None)


def _run_images(cfgs: list[FeatureLearningConfig], dev: torch.device) -> list:
    base = cfgs[0]
    data = _load_split(base).to(dev)
    E, k, C = len(cfgs), data.n_classes, data.x_train.shape[1]
    seeds = [c.seed for c in cfgs]
    g = lambda salt: make_generator(base.seed, salt)  # noqa: E731
    model = SmallCNN(E, C, k, width=base.width, generators=[make_generator(s, "small-cnn") for s in seeds],
                     device=dev)
    hist = train_images(model, data.x_train, data.y_train, data.x_test, data.y_test, base.image_spec(),
                        batch_generator=g("image-batches"), attack_generator=g("image-train-attack"),
                        eval_generator=g("image-eval-attack"))
    ilyas = None
    if base.method == "standard" and base.ilyas and base.image_eps > 0:
        x_nr, t_nr, success = nonrobust_dataset(model, data.x_train, data.y_train, k, eps=base.image_eps,
                                                steps=base.ilyas_steps, step_size=base.image_eps / 4,
                                                generator=g("ilyas-targets"))
        fresh = SmallCNN(E, C, k, width=base.width, generators=[make_generator(s, "ilyas-init") for s in seeds],
                         device=dev)
        spec = dataclasses.replace(base.image_spec("standard"), eval_pgd_steps=0, final_pgd_steps=0)
        h2 = train_images(fresh, x_nr, t_nr, data.x_test, data.y_test, spec, batch_generator=g("ilyas-batches"))
        ilyas = (h2.clean_acc[:, -1], success.cpu())
    out = []
    for e in range(E):
        rows = [{"kind": "epoch", "epoch": int(ep), "loss": float(hist.train_loss[e, j]),
                 "clean_acc": float(hist.clean_acc[e, j]), "robust_acc": float(hist.robust_acc[e, j])}
                for j, ep in enumerate(hist.epochs.tolist())]
        # robust_acc: the strong final evaluation (what A6 judges); robust_acc_epoch_pgd: the cheap
        # per-epoch attack at the same weights, kept to show how much the strong one adds
        rows.append({"kind": "image_final", "clean_acc": float(hist.clean_acc[e, -1]),
                     "robust_acc": float(hist.final_robust_acc[e]),
                     "robust_acc_epoch_pgd": float(hist.robust_acc[e, -1]), "n_test": int(data.y_test.shape[0]),
                     "chance": 1.0 / k})
        if ilyas is not None:
            rows.append({"kind": "ilyas", "ilyas_acc": float(ilyas[0][e]), "attack_success": float(ilyas[1][e]),
                         "chance": 1.0 / k, "n_test": int(data.y_test.shape[0])})
        out.append(rows)
    return out


def _work(cfg: FeatureLearningConfig) -> float:
    """A point's relative cost, in multiply-adds up to a constant per kind of model: its
    training's passes over the data and its evaluations' attack steps. Only orders the groups
    of a parallel run, costliest first (``Study.weight``); on the quick preset the measured
    seconds per unit vary 4× across groups, which keeps the order of the costly ones."""
    c = cfg
    if c.experiment == "counter":  # hand-set weights: evaluation only
        return float(c.n_test * c.P * c.d * c.k * c.m)
    if c.experiment != "images":
        passes = {"standard": 2, "gradient_step": 4, "fgsm": 6, "pgd": 2 * c.pgd_steps + 4}[c.method]
        train = c.steps * (c.batch_size or c.n_train) * passes
        evals = (c.steps // c.eval_every + 1) * c.n_test * 4
        pgd = 2 * c.eval_pgd_steps * c.n_test * (1 + (c.steps // c.pgd_eval_every if c.pgd_eval_every else 0))
        if c.experiment == "main" and c.method != "standard":
            pgd *= 1 + len(EPS_OVER_ALPHA)  # the budget sweep
        return float(c.P * c.d * c.k * c.m * (train + evals + pgd))
    shape = image_data.SHAPES[c.dataset]
    side, n_train, n_test, channels = c.image_size or shape.side, shape.n_train, shape.n_test, shape.channels
    n_train, n_test = min(n_train, c.max_train or n_train), min(n_test, c.max_test or n_test)
    macs = 9 * side * side * c.width * (channels + c.width / 2)  # conv C→w at full size, w→2w at half
    train = c.epochs * n_train * 3 * (1 + (2 * c.image_pgd_steps if c.method == "pgd" else 0))
    evals = (c.epochs // c.image_eval_every + 1) * n_test * 21 + n_test * 4 * c.image_final_pgd_steps
    ilyas = (2 * c.ilyas_steps + 3 * c.epochs) * n_train if c.method == "standard" and c.ilyas else 0
    return float(macs * (train + evals + ilyas))


# ----------------------------------------------------------------------------------------
# claims
#
# Every claim is a stats.decide verdict on an effect with its 95% interval over seeds, under
# the condition its statement rests on (Assumption 2.3 in the generator's numeric reading:
# a violated assumption makes the claim "not applicable"). Thresholds were fixed from the
# paper's statements before the runs they judge, and are never moved to turn a verdict.

# config fields that may differ between the two runs claim 4 compares
_ADV_ONLY = {"experiment", "method", "eps", "eta_tilde", "pgd_steps", "point"}

# A3: phases are judged on runs whose one-step attack is *active* — it reaches the ball along
# v_y on at least ACTIVE_MIN of the non-robust patches at some probe. Below that the attack
# never erases the non-robust feature (the premise of Lemma 5.2's first phase) and the run is
# standard training in all but name. A run is *saturated* when, over phase 1, more than
# SATURATED of those coordinates were clipped on average: then most of the perturbation no
# longer scales with η̃ and the 1/η̃ law has no reason to hold. Both cut-offs were fixed
# (a small floor; a majority rule) before any slope was fitted on the swept η̃ grid.
ACTIVE_MIN = 0.05
SATURATED = 0.5
# A run has *diverged* when its weights left the small-weight regime the two-phase analysis lives
# in: final max(A, B) above DIVERGED (in units of ρ/α, where σ̃ turns linear on the robust patch),
# more than twice where standard training settles (B ≈ 2). It is the η̃·lr interaction the spec
# notes (η̃ = 300 at lr 1 "broke training"); at the quick preset's η̃ = 150 it happens within ten
# steps (A ≈ 14, B ≈ 7, feature-attack accuracy at chance), and the "crossing" it records is the
# blow-up, not a second phase. Such runs are excluded from A3a and A3b like inactive ones, and
# counted in the evidence (regime "diverged"). Fixed from the scale of the dynamics (standard
# training's B), not from a slope.
DIVERGED = 5.0
PHASES_MIN = 0.75  # A3a: the share of active runs with two phases ("w.h.p." read as >= 3 in 4)
SLOPE_BAND = (-1.0 - SLOPE_TOL, -1.0 + SLOPE_TOL)  # A3b: Θ(1/η̃) read as an exponent within 0.25 of −1
AGREE_MIN = 0.95  # A2d: share of hand-set grid points where the every-patch bound predicts the outcome
AGREE_MARGIN = 2.0  # ... counting points whose bound ratio is at least this factor from 1 (noise smears the edge)


def _rows(df: pd.DataFrame, kind: str, **match) -> pd.DataFrame:
    if "kind" not in df.columns:
        return df.iloc[0:0]
    sel = df["kind"] == kind
    for col, val in match.items():
        if col not in df.columns:
            return df.iloc[0:0]
        sel &= df[col].isin(val) if isinstance(val, list | tuple | set) else df[col] == val
    return df[sel]


def _missing(cid: str, statement: str, what: str) -> Claim:
    """A claim this run does not measure (a paper-<experiment> slice, or a grid without the
    experiment): not applicable — no evidence either way, and not a call for more seeds."""
    return Claim(cid, statement, stats.not_applicable(f"not measured in this run: needs {what}"),
                 {"missing": what}, SOURCE)


def _f(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def _assumption(fin: pd.DataFrame) -> stats.Condition:
    """Assumption 2.3 (numeric reading, data/patches.MUCH) as the generator reported it."""
    if "assume_violations" not in fin.columns:
        return stats.Condition("Assumption 2.3", False, "not recorded with these results")
    v = sorted({str(x) for x in fin["assume_violations"].fillna("") if str(x)})
    return stats.Condition("Assumption 2.3", not v, "; ".join(v) if v else "holds (robust stronger, non-robust "
                           "denser, β <= ε << α)")


def _est(e: stats.Estimate) -> dict:
    return e.to_dict()


def _power(v: stats.Verdict) -> dict:
    return {"seeds": v.seeds, "seeds_needed": v.seeds_needed}


def _claim_standard(df: pd.DataFrame) -> Claim:
    st = (f"standard training learns the non-robust feature: final B > {CLAIM_RATIO:g}·A, clean accuracy "
          f">= {CLEAN_MIN}, accuracy under δ_p = −ε v_y <= chance + {CHANCE_SLACK}")
    fin = _rows(df, "final", experiment="main", method="standard")
    if fin.empty:
        return _missing("A1-standard-learns-nonrobust", st, "no experiment=main, method=standard results")
    cond = [_assumption(fin)]
    e_ratio = stats.mean_estimate(fin["B"] - CLAIM_RATIO * fin["A"])
    e_clean = stats.mean_estimate(fin["clean_acc"])
    e_feat = stats.mean_estimate(fin["feature_acc"] - fin["chance"])
    parts = [stats.decide(e_ratio, threshold=0.0, side="above", conditions=cond, reason=f"B − {CLAIM_RATIO:g}·A"),
             stats.decide(e_clean, threshold=CLEAN_MIN, side="above", conditions=cond, reason="clean accuracy"),
             stats.decide(e_feat, threshold=CHANCE_SLACK, side="below", conditions=cond,
                          reason="feature-attack accuracy − chance")]
    A, B = fin["A"].mean(), fin["B"].mean()
    return Claim("A1-standard-learns-nonrobust", st, stats.combine(parts), {
        "B_minus_2A": _est(e_ratio), "clean_acc": _est(e_clean), "feature_acc_minus_chance": _est(e_feat),
        "A_mean": _f(A), "B_mean": _f(B), "B_over_A": _f(B / A) if A > 0 else None,
        "pgd_acc": _f(fin["pgd_acc"].mean()), "eval_eps": _f(fin["eval_eps"].iloc[0]),
        "power": [_power(p) for p in parts], "n_seeds": int(len(fin))}, SOURCE + ", Thm 4.3 / Prop. 3.2")


def _threat_summary(fin: pd.DataFrame) -> dict:
    out = {}
    for col in [c for c in fin.columns if c.startswith("threat_")]:
        vals = fin[col].dropna()
        if len(vals):
            e = stats.mean_estimate(vals)
            out[col[len("threat_"):]] = {**_est(e), "survives": bool(e.low >= ROBUST_MIN)}
    return out


FINDING = ("Disagreement with the paper (not a software failure): the robust-feature solution that one-step "
           "adversarial training finds is not robust to l_inf attacks in general. An attacker who adds ε·u_j "
           "(and −ε·u_y) to every patch makes the wrong class j gain P·σ̃(εa) against the true class's "
           "σ̃((α−ε)a); the robust detector survives only if (α/ε − 1)^q / P > 1, i.e. P < (α/ε − 1)^q, "
           "while Assumption 2.3 needs the non-robust feature to be dense, P ≳ (α/β)^q > (α/ε − 1)^q.")


def _adv_final(df: pd.DataFrame) -> pd.DataFrame:
    return _rows(df, "final", experiment="main", method="gradient_step")


def _claim_adv_overtakes(df: pd.DataFrame) -> Claim:
    st = "one-step adversarial training learns the robust feature: final A − B > 0"
    fin = _adv_final(df)
    if fin.empty:
        return _missing("A2a-adversarial-A-overtakes-B", st, "no experiment=main, method=gradient_step results")
    e = stats.mean_estimate(fin["A_minus_B"])
    v = stats.decide(e, threshold=0.0, side="above", conditions=[_assumption(fin)], reason="final A − B")
    ev = {"A_minus_B": _est(e), "A_mean": _f(fin["A"].mean()), "B_mean": _f(fin["B"].mean()),
          "A_minus_B_per_seed": [_f(x) for x in fin["A_minus_B"]], "power": _power(v)}
    for method, sub in _rows(df, "final", experiment="attack").groupby("method"):  # practice variants, context
        ev[f"{method}_training_A_minus_B"] = _f(sub["A_minus_B"].mean())
    return Claim("A2a-adversarial-A-overtakes-B", st, v, ev, SOURCE + ", Thm 4.4")


def _claim_adv_feature_attack(df: pd.DataFrame) -> Claim:
    st = (f"one-step adversarial training is robust under the paper's attack along the non-robust features "
          f"(δ_p = −ε v_y on the non-robust patches): accuracy >= {ROBUST_MIN}")
    fin = _adv_final(df)
    if fin.empty:
        return _missing("A2b-adversarial-robust-feature-attack", st, "no experiment=main, method=gradient_step results")
    e = stats.mean_estimate(fin["feature_acc"])
    v = stats.decide(e, threshold=ROBUST_MIN, side="above", conditions=[_assumption(fin)],
                     reason="accuracy under δ_p = −ε v_y")
    return Claim("A2b-adversarial-robust-feature-attack", st, v, {
        "feature_acc": _est(e), "per_seed": [_f(x) for x in fin["feature_acc"]],
        "clean_acc": _f(fin["clean_acc"].mean()), "eval_eps": _f(fin["eval_eps"].iloc[0]), "power": _power(v)},
        SOURCE + ", Thm 4.4 / Prop. 3.2")


def _claim_adv_pgd(df: pd.DataFrame) -> Claim:
    st = (f"one-step adversarial training is robust to arbitrary attacks (the authors' answer to reviewers): "
          f"accuracy >= {ROBUST_MIN} under unrestricted l_inf PGD at the same ε")
    fin = _adv_final(df)
    if fin.empty:
        return _missing("A2c-adversarial-robust-linf-pgd", st, "no experiment=main, method=gradient_step results")
    e = stats.mean_estimate(fin["pgd_acc"])
    v = stats.decide(e, threshold=ROBUST_MIN, side="above", conditions=[_assumption(fin)],
                     reason="l_inf PGD accuracy")
    if v.verdict == stats.CONTRADICTED:
        v = dataclasses.replace(v, reason=v.reason + ". " + FINDING)
    ev = {"pgd_acc": _est(e), "pgd_acc_per_seed": [_f(x) for x in fin["pgd_acc"]],
          "eval_eps": _f(fin["eval_eps"].iloc[0]), "finding": FINDING,
          "every_patch_bound_at_eval_eps": _f(fin["every_patch_bound"].iloc[0]) if "every_patch_bound" in fin else None,
          "threat_models_trained": _threat_summary(fin), "power": _power(v)}
    return Claim("A2c-adversarial-robust-linf-pgd", st, v, ev, SOURCE + ", Thm 4.4 and the answers to reviewers")


def _claim_every_patch(df: pd.DataFrame) -> Claim:
    st = ("the every-patch analysis (this study's, against the paper's promise): hand-set robust weights are "
          "broken by the explicit every-patch attack exactly where (α/ε − 1)^q / P < 1 and survive where it is "
          f"> 1 (judged at grid points at least a factor {AGREE_MARGIN:g} from the boundary; share of agreement "
          f">= {AGREE_MIN})")
    cnt = _rows(df, "counter", experiment="counter")
    if cnt.empty:
        return _missing("A2d-every-patch-counter-experiment", st, "experiment=counter results")
    far = cnt[(cnt["bound_ratio"] >= AGREE_MARGIN) | (cnt["bound_ratio"] <= 1 / AGREE_MARGIN)]
    agree = ((far["threat_linf_all"] >= 0.5) == (far["bound_ratio"] > 1)).astype(float)
    # a proportion over (grid point, seed) cells with its Wilson interval: a t interval over the
    # per-seed shares has zero width whenever the few seeds happen to agree on the same share
    # (the grid is discrete), and then claimed a decision the data do not carry
    n_seeds = max(1, int(far["seed"].nunique()))
    e = stats.proportion_estimate(int(agree.sum()), int(len(agree)), what="grid points × seeds")
    e = dataclasses.replace(e, units_per_seed=len(agree) / n_seeds)
    v = stats.decide(e, threshold=AGREE_MIN, side="above", reason="share of grid points the bound predicts")
    if v.verdict == stats.REPRODUCED:
        v = dataclasses.replace(v, reason=v.reason + ". " + FINDING)
    grid = cnt.groupby(["P", "eval_eps"]).agg(bound_ratio=("bound_ratio", "first"),
                                               every_patch=("threat_linf_all", "mean"), pgd=("pgd_acc", "mean"),
                                               clean=("clean_acc", "mean"), density=("density", "first"),
                                               assumption_holds=("assume_holds", "first")).reset_index()
    dense = grid[grid["assumption_holds"].astype(bool)]
    ev = {"agreement": _est(e), "grid_points_judged": int(far[["P", "eval_eps"]].drop_duplicates().shape[0]),
          "finding": FINDING,
          "grid": [{k: (_f(r[k]) if k not in ("P", "assumption_holds") else (int(r[k]) if k == "P" else bool(r[k])))
                    for k in grid.columns} for _, r in grid.iterrows()],
          "robust_where_assumption_holds": None if dense.empty else _f(dense["every_patch"].max()),
          "threat_models_hand_set": _threat_summary(cnt[cnt["assume_holds"].astype(bool)]) if len(dense) else {}}
    sweep = _rows(df, "eps_sweep", experiment="main", method="gradient_step")
    if not sweep.empty:
        g = sweep.groupby("eps_over_alpha").agg(bound_ratio=("bound_ratio", "first"),
                                                 every_patch=("every_patch_acc", "mean"), pgd=("pgd_acc", "mean"))
        ev["trained_networks_eps_sweep"] = [{"eps_over_alpha": _f(i), **{k: _f(r[k]) for k in g.columns}}
                                            for i, r in g.iterrows()]
    return Claim("A2d-every-patch-counter-experiment", st, v, ev,
                 "this study's analysis of " + SOURCE + ", Thm 4.4 (disagreement)")


def _regime(fin: pd.DataFrame) -> pd.Series:
    """inactive / unsaturated / saturated / diverged per run (see ACTIVE_MIN, SATURATED, DIVERGED)."""
    big = np.maximum(fin["A"].to_numpy(float), fin["B"].to_numpy(float)) > DIVERGED
    if "clip_frac_v_max" not in fin.columns:
        return pd.Series(np.where(big, "diverged", "unrecorded"), index=fin.index)
    act = fin["clip_frac_v_max"].fillna(0.0) >= ACTIVE_MIN
    sat = fin["clip_frac_v_phase1"].fillna(0.0) > SATURATED
    reg = np.where(~act, "inactive", np.where(sat, "saturated", "unsaturated"))
    return pd.Series(np.where(big, "diverged", reg), index=fin.index)


def _claim_two_phases(df: pd.DataFrame) -> list[Claim]:
    """A3a (two phases) and A3b (the 1/η̃ law where unsaturated): two verdicts on one table."""
    st_a = (f"two phases in one-step adversarial training (B leads, then A overtakes) in >= {PHASES_MIN:g} of the "
            f"runs whose one-step attack is active (reaches ε along v_y on >= {ACTIVE_MIN:g} of the non-robust "
            f"patches at some probe) and which stay in the small-weight regime (final max(A, B) <= {DIVERGED:g})")
    st_b = (f"the crossing time scales like 1/η̃ where the one-step perturbation is not saturated (<= {SATURATED:g} "
            f"of its v_y coordinates clipped over phase 1): log–log slope inside "
            f"[{SLOPE_BAND[0]:g}, {SLOPE_BAND[1]:g}]; the saturated range is reported separately")
    fin = _rows(df, "final", experiment=["main", "eta"], method="gradient_step")
    if fin.empty or fin["eta_tilde"].nunique() < 3:
        what = "gradient_step results at >= 3 values of eta_tilde (experiments main and eta)"
        return [_missing("A3a-two-phases", st_a, what), _missing("A3b-crossing-time-inverse-eta", st_b, what)]
    fin = fin.assign(regime=_regime(fin))
    cond = [_assumption(fin)]
    by_eta = {}
    for eta, sub in fin.groupby("eta_tilde"):
        by_eta[f"{eta:g}"] = {"crossing_steps": [_f(c) for c in sub["cross_step"]], "n_runs": int(len(sub)),
                              "regimes": sorted(set(sub["regime"])),
                              "clip_frac_v_phase1": [_f(c) for c in sub.get("clip_frac_v_phase1", [])],
                              "clip_frac_phase1": [_f(c) for c in sub.get("clip_frac_phase1", [])],
                              "A_minus_B": [_f(c) for c in sub["A_minus_B"]],
                              "clean_acc": [_f(c) for c in sub["clean_acc"]]}
    active = fin[fin["regime"].isin(["unsaturated", "saturated", "unrecorded"])]
    crossed = active["cross_step"].notna()
    if active.empty:
        pv = stats.not_applicable("no run had an active one-step attack", cond)
        e_ph = None
    else:
        e_ph = stats.proportion_estimate(int(crossed.sum()), int(len(active)), what="active runs")
        pv = stats.decide(e_ph, threshold=PHASES_MIN, side="above", conditions=cond,
                          reason="share of active runs where B leads then A overtakes")
    pts = active[crossed & (active["regime"] != "saturated")]
    e_sl = None
    if pts["eta_tilde"].nunique() >= 2 and len(pts) >= 3:
        e_sl = stats.slope_estimate(pts["eta_tilde"], pts["cross_step"], log_x=True, log_y=True)
        sv = stats.decide(e_sl, threshold=SLOPE_BAND, side="inside", conditions=cond,
                          reason="log–log slope of crossing step on η̃, unsaturated active runs")
    else:
        sv = stats.not_applicable("fewer than 2 values of η̃ with unsaturated active runs that crossed", cond)
    sat = active[crossed & (active["regime"] == "saturated")]
    ev = {"phases": _est(e_ph) if e_ph else None, "slope_unsaturated": _est(e_sl) if e_sl else None,
          "by_eta_tilde": by_eta, "regime_counts": fin["regime"].value_counts().to_dict(),
          "cutoffs": {"active_min": ACTIVE_MIN, "saturated": SATURATED, "diverged": DIVERGED},
          "saturated_runs_crossed": int(len(sat)),
          "power": [_power(pv), _power(sv)]}
    if sat["eta_tilde"].nunique() >= 2 and len(sat) >= 3:
        ev["slope_saturated"] = _est(stats.slope_estimate(sat["eta_tilde"], sat["cross_step"], log_x=True,
                                                          log_y=True))
    diverged = fin[fin["regime"] == "diverged"]
    if len(diverged):
        ev["diverged"] = {"eta_tilde": [float(x) for x in diverged["eta_tilde"]],
                          "cross_step": [_f(x) for x in diverged["cross_step"]],
                          "A": [_f(x) for x in diverged["A"]], "B": [_f(x) for x in diverged["B"]],
                          "note": f"weights left the small-weight regime (max(A, B) > {DIVERGED:g}): excluded"}
    inactive = fin[fin["regime"] == "inactive"]
    if len(inactive):
        ev["inactive"] = {"eta_tilde": sorted(float(x) for x in inactive["eta_tilde"].unique()),
                          "A_minus_B_mean": _f(inactive["A_minus_B"].mean()),
                          "note": "the one-step attack never reached ε along v_y: standard training in effect"}
    src = SOURCE + ", Lemma 5.2 / Sec. 5; answer to reviewer Q2"
    return [Claim("A3a-two-phases", st_a, pv, ev, src), Claim("A3b-crossing-time-inverse-eta", st_b, sv, ev, src)]


def _claim_eps_zero(df: pd.DataFrame) -> Claim:
    st = f"ε = 0 adversarial training reproduces standard training exactly (A, B, loss probes within {EXACT_TOL:g})"
    adv = _rows(df, "probe", method="gradient_step", eps=0.0)
    std = _rows(df, "probe", method="standard")
    if adv.empty or std.empty:
        return _missing("A4-eps-zero-is-standard", st, "probes of standard and of eps=0 gradient_step runs")
    cfg_cols = [c for c in FeatureLearningConfig.field_names() if c in df.columns and c not in _ADV_ONLY]
    worst, n = 0.0, 0
    pairs = []
    for _, a in adv.groupby("point"):
        key = a.iloc[0][cfg_cols]
        same = std
        for c in cfg_cols:
            same = same[(same[c] == key[c]) | (same[c].isna() & pd.isna(key[c]))]
        if same.empty:
            continue
        m = a.merge(same, on="step", suffixes=("_adv", "_std"))
        if m.empty:
            continue
        diff = max(float((m[f"{c}_adv"] - m[f"{c}_std"]).abs().max()) for c in ("A", "B", "loss"))
        worst, n = max(worst, diff), n + len(m)
        pairs.append({"seed": int(key["seed"]), "max_abs_diff": diff, "probes": int(len(m))})
    if n == 0:
        return _missing("A4-eps-zero-is-standard", st, "a standard run with the same settings and seed "
                        "as an eps=0 gradient_step run")
    # an exact identity: the worst difference is the effect, with no spread to estimate
    est = stats.Estimate(worst, worst, worst, len(pairs), "max |difference| over matched probes", sd=0.0)
    v = stats.decide(est, threshold=EXACT_TOL, side="below", reason="worst probe difference")
    return Claim("A4-eps-zero-is-standard", st, v,
                 {"max_abs_diff": worst, "probes_compared": n, "pairs": pairs}, SOURCE + " (reviewer question)")


def _sign_change(eps_v: np.ndarray, means: np.ndarray) -> float:
    for i in range(1, len(means)):  # first change of sign, linearly interpolated
        if np.sign(means[i - 1]) != np.sign(means[i]) and means[i - 1] != means[i]:
            return float(eps_v[i - 1] - means[i - 1] * (eps_v[i] - eps_v[i - 1]) / (means[i] - means[i - 1]))
    return math.nan


def _claim_eps_spectrum(df: pd.DataFrame) -> Claim:
    st = ("ε spectrum: final A − B increases with ε over [0, ε_max] (ε_max: the largest swept ε <= α/2, "
          "Assumption 2.3's ε ≪ α): OLS slope of A − B on ε > 0 over seeds and ε; the sign change reported")
    fin = _rows(df, "final", method="gradient_step", experiment=["eps", "main"])
    if not fin.empty:
        base = fin[fin["experiment"] == "eps"]
        if not base.empty:  # main joins only if it shares the sweep's other settings
            fin = fin[(fin["experiment"] == "eps") | (fin["eta_tilde"] == base["eta_tilde"].iloc[0])]
    if fin.empty or fin["eps"].nunique() < 3:
        return _missing("A5-eps-spectrum", st, ">= 3 values of eps (experiment eps, with main)")
    alpha = float(fin["alpha"].iloc[0])
    inside = fin[fin["eps"] <= alpha / 2 + 1e-12]
    if inside["eps"].nunique() < 3:
        return _missing("A5-eps-spectrum", st, ">= 3 values of eps <= alpha/2")
    e = stats.slope_estimate(inside["eps"], inside["A_minus_B"])
    # the assumption's ε-part (β <= ε) fails below β by design of the sweep: only the data part is a premise
    v = stats.decide(e, threshold=0.0, side="above", reason="slope of final A − B on ε")
    per_eps = [{"eps": float(x), **_est(stats.mean_estimate(sub["A_minus_B"]))}
               for x, sub in fin.groupby("eps")]
    piv = fin.pivot_table(index="seed", columns="eps", values="A_minus_B").dropna()
    eps_v = piv.columns.to_numpy(float)
    sign = _sign_change(eps_v, piv.mean(axis=0).to_numpy()) if len(piv) else math.nan
    sign_est = None
    if len(piv) >= 2 and math.isfinite(sign):
        rows_ = [r for r in piv.to_numpy()]
        sign_est = stats.bootstrap_estimate(rows_, lambda rs: _sign_change(eps_v, np.mean(rs, 0)))
    acc = fin.groupby("eps")[["feature_acc", "pgd_acc", "clean_acc"]].mean().sort_index()
    return Claim("A5-eps-spectrum", st, v, {
        "slope": _est(e), "A_minus_B_by_eps": per_eps, "eps_max": float(inside["eps"].max()),
        "sign_change_eps": _f(sign), "sign_change_interval": _est(sign_est) if sign_est else None,
        "feature_acc": [_f(x) for x in acc["feature_acc"]], "pgd_acc": [_f(x) for x in acc["pgd_acc"]],
        "clean_acc": [_f(x) for x in acc["clean_acc"]], "eval_eps": _f(fin["eval_eps"].iloc[0]),
        "power": _power(v)}, SOURCE + " (reviewer question: the effect of ε)")


def _claim_images(df: pd.DataFrame) -> Claim:
    st = ("real images: PGD adversarial training gives higher PGD robust accuracy than standard training at the "
          "same ε on every dataset (paired over seeds); the Ilyas et al. non-robust-dataset test accuracy is "
          "above chance (Wilson interval)")
    fin = _rows(df, "image_final", experiment="images")
    if fin.empty:
        return _missing("A6-real-images", st, "experiment=images results")
    ev: dict = {}
    parts = []
    for ds, sub in fin.groupby("dataset"):
        std = sub[sub["method"] == "standard"].set_index("seed")["robust_acc"]
        adv = sub[sub["method"] == "pgd"].set_index("seed")["robust_acc"]
        common = std.index.intersection(adv.index)
        e = stats.difference_estimate(adv[common], std[common], paired=True)
        parts.append(stats.decide(e, threshold=0.0, side="above", reason=f"{ds}: robust accuracy, PGD − standard"))
        entry = {"eps": _f(sub["image_eps"].iloc[0]), "robust_gain": _est(e),
                 "standard": {"clean": _f(sub[sub["method"] == "standard"]["clean_acc"].mean()), "robust": _f(std.mean())},
                 "pgd_training": {"clean": _f(sub[sub["method"] == "pgd"]["clean_acc"].mean()), "robust": _f(adv.mean())}}
        if "robust_acc_epoch_pgd" in sub:  # the cheap per-epoch attack at the final weights, for comparison
            for m, key in (("standard", "standard"), ("pgd", "pgd_training")):
                entry[key]["robust_epoch_pgd"] = _f(sub[sub["method"] == m]["robust_acc_epoch_pgd"].mean())
        il = _rows(df, "ilyas", experiment="images", dataset=ds)
        if len(il):
            n = int(il["n_test"].sum())
            ep = stats.proportion_estimate(int(round(float((il["ilyas_acc"] * il["n_test"]).sum()))), n,
                                           what="test images over seeds")
            chance = float(il["chance"].iloc[0])
            parts.append(stats.decide(ep, threshold=chance, side="above", reason=f"{ds}: Ilyas accuracy vs chance"))
            entry["ilyas"] = {**_est(ep), "chance": _f(chance),
                              "targeted_attack_success": _f(il["attack_success"].mean()), "n_runs": int(len(il))}
        else:
            parts.append(stats.Verdict(stats.INCONCLUSIVE, reason=f"{ds}: no Ilyas test results"))
        ev[str(ds)] = entry
    return Claim("A6-real-images", st, stats.combine(parts), ev, SOURCE + ", Sec. 6; Ilyas et al. 2019, Sec. 3.2")


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    return [_claim_standard(df), _claim_adv_overtakes(df), _claim_adv_feature_attack(df), _claim_adv_pgd(df),
            _claim_every_patch(df), *_claim_two_phases(df), _claim_eps_zero(df), _claim_eps_spectrum(df),
            _claim_images(df)]


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
    pts = fin[fin["cross_step"].notna() & (fin["regime"] == "unsaturated")]
    title = "unsaturated: too few crossings for a fit"
    if pts["eta_tilde"].nunique() >= 2 and len(pts) >= 3:
        e = stats.slope_estimate(pts["eta_tilde"], pts["cross_step"], log_x=True, log_y=True)
        xs = np.array(sorted(pts["eta_tilde"].unique()), float)
        gm = float(np.exp(np.log(pts["cross_step"]).mean()))
        xm = float(np.exp(np.log(pts["eta_tilde"]).mean()))
        ax.loglog(xs, gm * (xs / xm) ** e.value, "b-", lw=1, label="OLS fit (unsaturated)")
        ax.loglog(xs, gm * (xs / xm) ** -1.0, "k--", lw=1, label="theory: slope −1")
        title = f"unsaturated slope {e.value:.2f} [{e.low:.2f}, {e.high:.2f}]"
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("η̃ (one-step attack step size)")
    ax.set_ylabel("crossing step (A overtakes B)")
    ax.legend(fontsize=6)
    ax = axes[1]
    if "clip_frac_v_phase1" in fin.columns:
        for reg, sub in fin.groupby("regime"):
            color, marker = _REGIME_STYLE.get(reg, ("k", "o"))
            ax.semilogx(sub["eta_tilde"], sub["clip_frac_v_phase1"], marker, color=color, ls="",
                        label=f"{reg}: mean over phase 1 (v_y)")
            ax.semilogx(sub["eta_tilde"], sub["clip_frac_v_max"], marker, color=color, ls="", mfc="none", alpha=0.6)
            ax.semilogx(sub["eta_tilde"], sub["clip_frac_phase1"], ".", color=color, alpha=0.6)
        ax.axhline(SATURATED, color="tab:red", ls=":", lw=1, label=f"saturated above {SATURATED:g}")
        ax.axhline(ACTIVE_MIN, color="tab:grey", ls=":", lw=1, label=f"active: max >= {ACTIVE_MIN:g}")
        ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("η̃")
    ax.set_ylabel("clipped fraction of the one-step perturbation")
    ax.legend(fontsize=6)
    save(fig, ctx.figdir / "crossing_eta.png")
    return [Figure("figures/crossing_eta.png", "Crossing time against η̃, by perturbation regime",
                   "Left: crossing step per run (hollow: no crossing), coloured by regime: inactive (the one-step "
                   "attack never reaches ε along v_y: standard training in effect), unsaturated (at most "
                   f"{SATURATED:g} of the v_y coordinates clipped over phase 1: the −1 law is judged here), "
                   f"saturated (judged separately), diverged (max(A, B) > {DIVERGED:g}: the weights left the "
                   "small-weight regime; excluded). Right: the clipped fraction along v_y on the non-robust patches "
                   "(filled: phase-1 mean; hollow: maximum) and over all coordinates (dots).")]


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
    fin = _adv_final(df)
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
    labels = ["l_inf every patch", "l_inf on J_NR only", "per-patch l2", "span of v (every patch)",
              "paper: −ε v_y on J_NR", "l_inf PGD"]
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


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    figs: list[Figure] = []
    probes = _regimes(df, "probe")
    if probes:
        fig, axes = plt.subplots(1, len(probes), figsize=(4.6 * len(probes), 3.2), squeeze=False)
        for ax, (label, sub) in zip(axes[0], probes):
            mean_band(ax, sub, "step", "A", label="A = max_r <w, u> (robust)", marker="")
            mean_band(ax, sub, "step", "B", label="B = max_r <w, v> (non-robust)", marker="")
            ax.set_title(label)
            ax.set_xlabel("step")
            ax.legend()
        axes[0][0].set_ylabel("feature alignment (mean over classes)")
        save(fig, ctx.figdir / "ab_dynamics.png")
        figs.append(Figure("figures/ab_dynamics.png", "Robust (A) and non-robust (B) feature learning",
                           "Mean over seeds, ±1 std band. Standard training should grow B and leave A small; "
                           "one-step adversarial training should grow B first, then let A overtake."))
    evals = _regimes(df, "eval")
    if evals:
        fig, axes = plt.subplots(1, len(evals), figsize=(4.6 * len(evals), 3.2), squeeze=False)
        for ax, (label, sub) in zip(axes[0], evals):
            mean_band(ax, sub, "step", "clean_acc", label="clean", marker=".")
            mean_band(ax, sub, "step", "feature_acc", label="δ_p = −ε v_y", marker=".")
            p = sub[sub["pgd_acc"].notna()]
            if not p.empty:
                mean_band(ax, p, "step", "pgd_acc", label="l_inf PGD", marker="s")
            ax.set_ylim(-0.02, 1.02)
            ax.set_title(label)
            ax.set_xlabel("step")
            ax.legend()
        axes[0][0].set_ylabel("test accuracy")
        save(fig, ctx.figdir / "accuracy.png")
        figs.append(Figure("figures/accuracy.png", "Clean and robust accuracy during training",
                           "Held-out accuracy clean, under the theory's feature-direction attack and under "
                           "l_inf PGD (at the end, or every pgd_eval_every steps)."))
    figs += _eta_figure(df, ctx)
    figs += _counter_figure(df, ctx)
    eps = _rows(df, "final", method="gradient_step", experiment=["eps", "main"])
    if not eps.empty and eps["eps"].nunique() >= 2:
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
        figs.append(Figure("figures/eps_spectrum.png", "The ε spectrum",
                           "ε = 0 is standard training; the theory's regime is β ≤ ε ≪ α. Left: which feature "
                           "wins; right: the accuracy it buys (all evaluated at the same eval_eps)."))
    ext = _rows(df, "final", experiment=["activation", "attack", "basis", "overlap", "main"])
    if not ext.empty and (ext["experiment"] != "main").any():
        def label(r):
            if r["experiment"] == "main":
                return f"default / {r['method']}"
            val = {"activation": r["activation"], "attack": r["method"], "basis": r["basis"],
                   "overlap": "overlap"}[r["experiment"]]
            return f"{val} / {r['method']}" if r["experiment"] != "attack" else f"{val} training"
        ext = ext.assign(variant=ext.apply(label, axis=1))
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
        figs.append(Figure("figures/extensions.png", "Reviewer extensions",
                           "Activation (ReLU, GELU), FGSM / multi-step PGD training, rotated features, "
                           "overlapping patches, beside the defaults (means over seeds)."))
    ep = _rows(df, "epoch", experiment="images")
    if not ep.empty:
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
        il = _rows(df, "ilyas", experiment="images")
        ax = axes[0][-1]
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
        save(fig, ctx.figdir / "images.png")
        figs.append(Figure("figures/images.png", "Real images",
                           "Clean and PGD accuracy per epoch for standard and PGD adversarial training; right: "
                           "a fresh model trained only on targeted adversarial examples relabelled with their "
                           "target, scored on the true test set, against chance."))
    return figs


# ----------------------------------------------------------------------------------------
# presets

ETA_GRID = [0.5, 1.5, 5.0, 25.0, 50.0, 150.0]
# the counter-experiment (hand-set robust weights, no training): P across the density threshold
# (Assumption 2.3 needs P − 1 >= MUCH·(α/β)^q ≈ 31) and ε/α across the every-patch boundary
COUNTER_GRID = {"experiment": ["counter"], "method": ["standard"], "P": [2, 4, 8, 16, 32, 64, 128],
                "eval_eps": [0.1, 0.2, 0.3, 0.4]}

_SYNTH = [
    {"experiment": ["main"], "method": ["standard", "gradient_step"]},
    # η̃ over 2.5 decades around the default 15: from a perturbation far inside the ball (0.5–5:
    # the attack never reaches ε along v_y) up to 150; 300 steps so that late crossings fall inside
    {"experiment": ["eta"], "method": ["gradient_step"], "eta_tilde": ETA_GRID, "steps": [300]},
    {"experiment": ["eps"], "method": ["gradient_step"], "eps": [0.0, 0.2, 0.3, 0.5, 0.7]},
    {"experiment": ["activation"], "method": ["standard", "gradient_step"], "activation": ["relu", "gelu"]},
    {"experiment": ["attack"], "method": ["fgsm", "pgd"], "pgd_steps": [3]},
    {"experiment": ["basis"], "method": ["standard", "gradient_step"], "basis": ["rotated"]},
    {"experiment": ["overlap"], "method": ["standard", "gradient_step"], "overlap": [True]},
    COUNTER_GRID,
]

# The quick preset: the defaults (200 steps at lr 3) for the reviewer extensions, with four
# changes where a claim's own dynamics or power asked for them (measured 2026-11-24; chosen from
# the paper's statements and power estimates, never from a verdict; the thresholds are untouched):
#
# * Horizon, 400 steps for experiments main, eps and eta. A2a/A2b/A5 are statements about the
#   end state of adversarial training, A3a/A3b about the crossing of A over B. Of 32 one-step
#   runs traced to 600 steps (seeds 200–215, 400–415), 8 were still mid-switch to the robust
#   feature at step 200 (feature-attack accuracy 0.45–0.78; 5 had not crossed yet: at 255–430
#   steps, one never): a bimodal spread that measured where a run was in the switch, not where
#   it ends. By step 400, 30 of 32 had crossed (A − B 0.21 ± 0.13, against 0.14 ± 0.14 at step
#   200). The three blocks share the horizon because A4 pairs eps=0 with main's standard runs,
#   A5 pools eps with main, and A3 pools eta with main (mixing horizons would censor crossing
#   times differently per η̃). The paper preset keeps 600 steps.
# * Seeds of main: 16 (about 3 s a seed). A2a's power estimate at 400 steps (A − B 0.21, sd
#   0.13 over the 32 traced seeds) is seeds_for(0.21, 0.13, power=0.8) = 6: decided. A2b
#   (feature-attack accuracy against 0.9) is not: a few seeds stay stuck below the switch at any
#   horizon (one never crossed in 600 steps, one settled at 0.83); the mean is 0.93 (sd 0.16) at
#   400 steps and 0.96 (sd 0.11) at 600, and seeds_for asks 95 (power 0.5) to 190 (0.8) seeds at
#   400, 18–34 at 600. Neither fits the quick budget, so A2b keeps 16 seeds and may read
#   inconclusive (the paper preset, m = 8 and P = 64, gives 0.994 [0.983, 1.005] on 5 seeds).
#   Measured, not assumed: 600 steps with seeds_for(0.96, 0.11, 0.9, power=0.95) = 48 seeds made
#   feature-learning quick take 195 s on 2 workers (the 48-seed main group alone 190 s of CPU,
#   6.6 ms a seed-step against 4.8 at 16 seeds: the ensemble is memory-bound) and the whole quick
#   reproduce about 285 s, over its 5-minute budget under any load; so A2b stays power-limited
#   here (R R I R R over base seeds 0–400) and is decided by the paper preset.
# * η̃ sweep. The quick horizon cannot hold a crossing at η̃ = 150: the crossing time grows with
#   η̃ (η̃ = 25: 60–315 steps, 50: 100–350, over base seeds 0 and 200; paper-eta's slope +1.08
#   puts 150 past 600), so its runs were censored, counted as "no second phase" in A3a, and one
#   in three blew up (see DIVERGED). 150 stays in the paper preset (900 steps). The active range
#   (25, 50) gets 6 seeds: A3a is a Wilson proportion over active runs, and with ~1 censored main
#   run in 16 it needs ~28 active runs (16 + 12) for its lower bound to clear 0.75 (its
#   seeds_needed at base seed 0 with 3 seeds was 43 runs, with the censored η̃ = 150 runs in);
#   the inactive range (0.5–5, the attack never reaches ε) stays at 3 seeds: it only documents
#   where the law cannot apply.
# * Images, 6 seeds (was 3). A6's paired PGD-training − standard gain in robust accuracy was
#   0.21 with sd 0.10 over seeds on digits (0.20, sd 0.05, on mnist5k) at base seed 0:
#   seeds_for(0.21, 0.10, power=0.8) = 5, and 6 leaves room for a spread estimated from 3 seeds.
QUICK_MAIN_SEEDS = 16
QUICK_STEPS = 400
QUICK_ETA_ACTIVE = [25.0, 50.0]
QUICK_ETA_ACTIVE_SEEDS = 6
QUICK_IMAGE_SEEDS = 6
QUICK_GRID = [
    {"experiment": ["main"], "method": ["standard", "gradient_step"], "steps": [QUICK_STEPS],
     SEEDS_KEY: [QUICK_MAIN_SEEDS]},
    {"experiment": ["eta"], "method": ["gradient_step"], "eta_tilde": [e for e in ETA_GRID if e < 15],
     "steps": [QUICK_STEPS]},
    {"experiment": ["eta"], "method": ["gradient_step"], "eta_tilde": QUICK_ETA_ACTIVE, "steps": [QUICK_STEPS],
     SEEDS_KEY: [QUICK_ETA_ACTIVE_SEEDS]},
    {"experiment": ["eps"], "method": ["gradient_step"], "eps": [0.0, 0.2, 0.3, 0.5, 0.7], "steps": [QUICK_STEPS]},
    *[b for b in _SYNTH if b["experiment"][0] not in ("main", "eta", "eps")],
    {"experiment": ["images"], "method": ["standard", "pgd"], "dataset": ["digits"], "epochs": [6],
     SEEDS_KEY: [QUICK_IMAGE_SEEDS]},
    {"experiment": ["images"], "method": ["standard", "pgd"], "dataset": ["mnist5k"], "image_size": [14],
     "max_train": [800], "max_test": [300], "epochs": [6], "image_lr": [0.1], "image_batch": [32],
     "image_pgd_steps": [3], SEEDS_KEY: [QUICK_IMAGE_SEEDS]},
]

PAPER_GRID = [
    {"experiment": ["main"], "method": ["standard", "gradient_step"]},
    {"experiment": ["eta"], "method": ["gradient_step"], "eta_tilde": ETA_GRID, "steps": [900]},
    {"experiment": ["eps"], "method": ["gradient_step"], "eps": [0.0, 0.1, 0.2, 0.3, 0.35, 0.45, 0.5, 0.6, 0.8]},
    {"experiment": ["activation"], "method": ["standard", "gradient_step"], "activation": ["relu", "gelu"]},
    {"experiment": ["attack"], "method": ["fgsm", "pgd"]},
    {"experiment": ["basis"], "method": ["standard", "gradient_step"], "basis": ["rotated"]},
    {"experiment": ["overlap"], "method": ["standard", "gradient_step"], "overlap": [True]},
    COUNTER_GRID,
    {"experiment": ["images"], "method": ["standard", "pgd"], "dataset": ["digits"], "epochs": [30]},
    {"experiment": ["images"], "method": ["standard", "pgd"], "dataset": ["mnist5k"], "epochs": [15],
     "image_lr": [0.1], "image_batch": [32]},
]

PAPER_BASE = {"P": 64, "n_train": 200, "n_test": 500, "m": 8, "steps": 600, "eval_every": 100,
              "pgd_eval_every": 300, "eval_pgd_steps": 20}

STUDY = Study(
    name="feature-learning",
    title="Feature learning under structured data: standard vs adversarial training",
    source=SOURCE,
    summary=("Patch data with a strong sparse robust feature and a weak dense non-robust one: standard "
             "training learns the non-robust feature, one-step adversarial training the robust one. "
             "η̃ and ε sweeps, reviewer extensions, and real images (with Ilyas et al.'s test)."),
    config=FeatureLearningConfig,
    presets={
        "quick": Preset({}, QUICK_GRID, n_seeds=3,
                        description="d=64, P=48, 64 samples, lr 3; 400 steps for main/eta/eps, 200 for the "
                                    "extensions; 3 seeds (16 for main, 6 for the active η̃ and the images); "
                                    "digits + mnist5k (14x14, 1000 images)"),
        "paper": Preset(PAPER_BASE, PAPER_GRID, n_seeds=5,
                        description="P=64, 200 samples, m=8, 600 steps, 20-step PGD, 5 seeds; full mnist5k"),
        # one experiment of the paper preset each (a slice fits a ~15 min budget on 2 cores)
        **{f"paper-{e}": Preset(PAPER_BASE, [b for b in PAPER_GRID if b["experiment"] == [e]], n_seeds=5,
                                description=f"the paper preset's experiment={e} only")
           for e in EXPERIMENTS},
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    weight=_work,  # images and the 16-seed main group first; the extensions' small groups last
)
