"""Running a group of Study A's points: one ensemble of seeds trained in one batched pass,
with every probe and evaluation the claims read."""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import torch

from ...attacks.every_patch import every_patch, every_patch_bound, span_pgd
from ...data import images as image_data
from ...data import load_images
from ...data.patches import (
    AssumptionWarning,
    assumption_report,
    check_assumptions,
    sample_ensemble,
)
from ...models.ensemble import Flat, fold
from ...models.patch_cnn import PatchCNN
from ...models.small_cnn import SmallCNN
from ...train.feature import (
    ClosedFormStep,
    FeatureTrainSpec,
    by_copies,
    crossing_step,
    evaluate_patch_cnn,
    pgd_accuracy,
    train_patch_cnn,
)
from ...train.images import nonrobust_dataset, train_images
from ...utils import make_generator, resolve_device
from .presets import FeatureLearningConfig

# ----------------------------------------------------------------------------------------
# running

def run_points(cfgs: list[FeatureLearningConfig], device: str = "cpu") -> list:
    """Train len(cfgs) seeds of one point as one ensemble (E = len(cfgs))."""
    base = cfgs[0]
    dev = resolve_device(device)
    t0, c0 = time.perf_counter(), time.process_time()
    if base.experiment == "images":
        rows = _run_images(cfgs, dev)
    else:
        rows = _run_patches(cfgs, dev)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    for r in rows:
        if isinstance(r, list):  # wall and CPU seconds of the whole group (one row per member)
            r.append({"kind": "timing", "seconds": seconds, "cpu_seconds": cpu, "ensemble": len(cfgs)})
    return rows


# the evaluation budgets (as ε/α) of the trained networks' every-patch / PGD sweep: it crosses
# the every-patch boundary (α/ε − 1)^q = P, at ε/α ≈ 0.22 for P = 48, q = 3, from both sides. 0.1 and
# 0.25 were dropped in issue 52 to pay for the radii (RADII: ε/2, 3ε/4, ε are 0.2, 0.3, 0.4 here, whose
# PGD the radii reuse); the attribution budgets and both sides of the boundary stay
EPS_OVER_ALPHA = (0.15, 0.2, 0.3, 0.4)
# the threats run at the budgets of A2c's attribution (as ε/α), to attribute a failure to the feature
# it plants: u on every patch, the v swap, or both; the other budgets run u on every patch only
ATTRIBUTION_EPS = (0.15, 0.2, 0.4)
SWEEP_THREATS = ("linf_all", "nonrobust_subspace", "linf_uv")
# hand-set robust weights w_{i,r} = a u_i with α·a = HAND_SCALE·ρ: inside σ̃'s polynomial part,
# where the ratio the every-patch bound names is largest (the most favourable robust solution)
HAND_SCALE = 0.5


THREATS = ("linf_all", "linf_nonrobust_patches", "l2_per_patch", "nonrobust_subspace", "linf_uv")


def _threat_rows(model: PatchCNN, features, test, eps: float, names: tuple[str, ...] = THREATS) -> dict:
    """Accuracy (per member) under the explicit every-patch attacks of four threat models at ε
    (``names``: those of them to run).

    * ``linf_all``: ℓ∞, any patch: ε(u_j − u_y) on every patch;
    * ``linf_nonrobust_patches``: ℓ∞ confined to the non-robust patches J_NR (ε(u_j − u_y) there);
    * ``l2_per_patch``: ‖δ_p‖₂ ≤ ε in every patch: ε(u_j − u_y)/√2 on every patch;
    * ``nonrobust_subspace``: δ_p in the span of the non-robust features (the paper's attack
      geometry): ε(v_j − v_y) on every patch (the targeted swap);
    * ``linf_uv``: both at once, ε(u_j − u_y) + ε(v_j − v_y) on every patch (within the ℓ∞ ball
      for one-hot features: the two act on different coordinates).
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
                           ("l2_per_patch", u, {"norm": "l2_patch"}), ("nonrobust_subspace", v, {}),
                           ("linf_uv", u + v, {})):
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
    coordinate that matters to the theory, ``⟨δ_p, v_y⟩`` on the non-robust patches; and the
    median over those patches of the unclipped move ``η̃ |⟨∇_{x_p} ℓ, v_y⟩|`` (whether the
    typical patch reaches the clip at ε, which the tail alone can do)."""
    E = model.E
    steps: list[int] = []
    frac_all: list[torch.Tensor] = []
    frac_v: list[torch.Tensor] = []
    move_v: list[torch.Tensor] = []
    v_y = torch.stack([features.v[e][train.y[e]] for e in range(E)]).to(train.x.dtype)  # (E, N, d)
    nr = train.nonrobust.to(train.x.dtype)  # (E, N, P)

    grads = ClosedFormStep(model, spec)  # closed-form input gradients in a reused buffer

    def hook(t: int) -> None:
        step = grads.input_step(train.x, train.y)  # η̃ ∇ₓℓ_n (E, N, P, d), per-sample gradients
        along = torch.einsum("enpd,end->enp", step, v_y).abs()  # (E, N, P)
        frac_all.append(step.abs_().ge_(spec.eps).mean(dim=(1, 2, 3)).cpu())  # in place: the buffer is ours
        frac_v.append((((along >= spec.eps).float() * nr).sum(dim=(1, 2)) / nr.sum(dim=(1, 2))).cpu())
        move_v.append(torch.stack([along[e][nr[e] > 0].median() for e in range(E)]).cpu())
        steps.append(t)

    return hook, steps, frac_all, frac_v, move_v


def _phase1_mean(steps: list[int], values: torch.Tensor, cross: float | None) -> float:
    """Mean of a probe trace over phase 1 (steps up to the crossing; the whole run without one)."""
    s = torch.tensor(steps, dtype=torch.float64)
    sel = s <= cross if cross is not None else torch.ones_like(s, dtype=torch.bool)
    return float(values[sel].double().mean())


# the experiments whose trained models are asked which feature they use (A2's four parts) and how
# robust they are at the radii of RADII
FEATURE_USE = ("main", "attack", "mechanism", "regime")
# the one-step runs whose clipped share is probed (the phase-2 premise and A3 read it)
CLIP_PROBED = ("main", "eta", "regime")
# robustness by radius (issue 52): span{v} and ℓ∞ accuracy at these fractions of the training ε
# (``eval_eps``), on the one-step and the standard models alike; column suffix r50, r75, r100
RADII = (0.5, 0.75, 1.0)


def radius_tag(r: float) -> str:
    return f"r{round(100 * r)}"
SATURATION = 0.5  # the one-step perturbation saturates when > half its v_y coordinates are clipped


def _saturation(steps: list[int], frac_v: torch.Tensor, cross: float | None) -> dict:
    """T₀, the saturation time (first probe where more than :data:`SATURATION` of the v_y
    coordinates of the one-step perturbation are clipped at ε; None if never), and the largest
    clipped fraction at probes before the crossing (the whole run without one): A3b's premise."""
    s = torch.tensor(steps, dtype=torch.float64)
    before = s < cross if cross is not None else torch.ones_like(s, dtype=torch.bool)
    over = (frac_v > SATURATION).nonzero()
    return {"saturation_step": float(s[int(over[0])]) if len(over) else None,
            "clip_frac_v_before_cross": float(frac_v[before].max()) if bool(before.any()) else 0.0}


def _per_class(values: torch.Tensor, y: torch.Tensor, k: int) -> list[list[float]]:
    """Per member, the mean of ``values`` (E, N) over the samples of each class: (E, k) as lists."""
    onehot = torch.nn.functional.one_hot(y, k).to(values.dtype)  # (E, N, k)
    per = torch.einsum("en,enk->ek", values, onehot) / onehot.sum(1).clamp_min(1)
    return [[round(float(v), 6) for v in row] for row in per]


def _span_v_ok(model: PatchCNN, features, test, base: FeatureLearningConfig, seeds: list[int], eps: float,
               clean_ok: torch.Tensor, *, steps: int | None = None, restarts: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per test point (E, N): survives the targeted swap ε(v_j − v_y) on every patch, and span{v} PGD
    (``span_steps`` × ``span_restarts`` unless given)."""
    x, y = test.x, test.y
    with torch.no_grad():
        flat = Flat(model, model.E).eval()
        v = features.v.to(x.dtype).repeat_interleave(x.shape[1], dim=0)
        swap = every_patch(flat, fold(x), fold(y), v, eps).view_as(x)
        swap_ok = (model(swap).argmax(-1) == y) & clean_ok
    # each member its own generator: its numbers do not depend on E
    _, margin = span_pgd(model, x, y, features.v, eps, steps=steps or base.span_steps,
                         restarts=restarts or base.span_restarts,
                         generators=[make_generator(s, "span-pgd") for s in seeds])
    return swap_ok, (margin > 0) & clean_ok


def _by_radius(model: PatchCNN, features, test, base: FeatureLearningConfig, seeds: list[int],
               tspec: FeatureTrainSpec, g, clean_ok: torch.Tensor, at_eps: torch.Tensor,
               linf_known: dict[float, torch.Tensor]) -> dict:
    """span{v} and ℓ∞ PGD accuracy per member at each radius of :data:`RADII` × ``eval_eps``
    (columns ``span_v_acc_r50`` … and ``linf_acc_r50`` …).

    span{v}: at ε itself the full attack's ``at_eps`` (the worst of the swap and span{v} PGD,
    ``span_steps`` × ``span_restarts``); below ε the worst of the swap and a shorter span{v} PGD
    (``radius_span_steps`` × ``radius_span_restarts``, 25 × 1 by default: on robust models the
    full attack cannot stop early and cost 21 CPU-s over the quick preset's 16 one-step models,
    and the swap alone was within 0.025 of it at ε). ℓ∞: the evaluation PGD at that budget,
    taken from ``linf_known`` (budget -> accuracy: the final evaluation at ``eval_eps``, the
    budget sweep) where it was run, else run here."""
    out = {}
    for r in RADII:
        eps = r * base.eval_eps
        tag = radius_tag(r)
        if r == 1.0:
            worst = at_eps
        else:
            swap_ok, pgd_ok = _span_v_ok(model, features, test, base, seeds, eps, clean_ok,
                                         steps=base.radius_span_steps, restarts=base.radius_span_restarts)
            worst = swap_ok & pgd_ok
        out[f"span_v_acc_{tag}"] = [float(v) for v in worst.to(test.x.dtype).mean(1)]
        known = next((a for b, a in linf_known.items() if math.isclose(b, eps, rel_tol=1e-9)), None)
        if known is None:
            known = pgd_accuracy(model, test, dataclasses.replace(tspec, eval_eps=eps), g(f"eval-radius-{tag}"))
        out[f"linf_acc_{tag}"] = [float(v) for v in known.cpu()]
    return out


def _feature_use(model: PatchCNN, features, test, base: FeatureLearningConfig, seeds: list[int],
                 tspec: FeatureTrainSpec | None = None, g=None, linf_known: dict | None = None) -> dict:
    """Which feature the trained model uses (A2's parts), per member (lists of length E):

    * ``span_swap_acc``: accuracy under the targeted swap ε(v_j − v_y) on every patch;
    * ``span_pgd_acc``: under ℓ∞ PGD confined to span{v} in every patch
      (:func:`~robustlab.attacks.every_patch.span_pgd`, ``span_steps`` × ``span_restarts``);
    * ``span_v_acc``: the per-sample worst case of the two (a point counts only if it survives
      both, and is correct when clean), with ``span_v_acc_i`` per class;
    * ``v_only_acc``: clean accuracy on the test inputs with their span{u} component removed
      (the robust feature deleted; the non-robust one left), ``v_only_acc_i`` per class;
    * ``robust_logit_share``: the share of the true-class logit ``F_y`` carried by the robust
      patches, ``Σ_{p∈J_R} Σ_r σ̃(⟨w_{y,r}, x_p⟩) / F_y``, averaged over test points (per class
      in ``robust_logit_share_i``);
    * ``u_neuron_share_i``: per class, the share of its neurons with ⟨w, u_i⟩ > ⟨w, v_i⟩.
    """
    E, k, m = model.E, model.k, model.m
    eps = base.eval_eps
    x, y = test.x, test.y
    with torch.no_grad():
        clean_ok = model(x).argmax(-1) == y  # (E, N)
    swap_ok, pgd_ok = _span_v_ok(model, features, test, base, seeds, eps, clean_ok)
    worst = swap_ok & pgd_ok
    radii = _by_radius(model, features, test, base, seeds, tspec, g, clean_ok, worst, linf_known or {}) \
        if tspec is not None else {}
    with torch.no_grad():
        u = features.u.to(x.dtype)  # (E, k, d)
        x_v = x - torch.einsum("enpj,ejd->enpd", torch.einsum("enpd,ejd->enpj", x, u), u)
        v_ok = model(x_v).argmax(-1) == y
        act = model.act(model.preactivations(x))  # (E, N, P, k, m)
        own = act.sum(-1).gather(-1, y[:, :, None, None].expand(-1, -1, x.shape[2], 1)).squeeze(-1)  # (E, N, P)
        share = (own * test.robust.to(own.dtype)).sum(-1) / own.sum(-1).clamp_min(1e-30)
        a_n, b_n = model.feature_alignment(features.u), model.feature_alignment(features.v)  # (E, k, m)
        u_share = (a_n > b_n).to(x.dtype).mean(-1)  # (E, k)
    mean = lambda t: [float(r) for r in t.to(x.dtype).mean(1)]  # noqa: E731 - (E, N) -> per member
    return {"span_swap_acc": mean(swap_ok), "span_pgd_acc": mean(pgd_ok), "span_v_acc": mean(worst),
            "span_v_acc_i": _per_class(worst.to(x.dtype), y, k), "v_only_acc": mean(v_ok),
            "v_only_acc_i": _per_class(v_ok.to(x.dtype), y, k), "robust_logit_share": mean(share),
            "robust_logit_share_i": _per_class(share, y, k),
            "u_neuron_share_i": [[round(float(v_), 6) for v_ in row] for row in u_share],
            "A_minus_B_neuron_mean": [float(r) for r in (a_n - b_n).mean(dim=(1, 2))],
            "neurons_per_class": [m] * E, **radii}


def _run_patches(cfgs: list[FeatureLearningConfig], dev: torch.device) -> list:
    base = cfgs[0]
    if base.experiment == "counter":
        return _run_counter(cfgs, dev)
    spec = base.patch_spec()
    assumption = _assumption_cols(base, spec)
    seeds = [c.seed for c in cfgs]
    features, train, test = sample_ensemble(spec, seeds, base.n_train, base.n_test, make_generator)
    features, train, test = features.to(dev), train.to(dev), test.to(dev)
    model = PatchCNN(len(cfgs), base.k, base.m, base.d, activation=base.activation, q=base.q, rho=base.rho,
                     sigma0=base.sigma0, generators=[make_generator(s, "patch-cnn-init") for s in seeds],
                     device=dev)
    g = lambda salt: make_generator(base.seed, salt)  # noqa: E731 - one stream per purpose
    tspec = base.train_spec()
    clip = None
    if base.method == "gradient_step" and base.experiment in CLIP_PROBED:
        clip = _clip_probe(model, features, train, tspec)
    hist = train_patch_cnn(model, features, train, test, tspec, batch_generator=g("batches"),
                           attack_generator=g("train-attack"), eval_generator=g("eval-attack"),
                           probe_hook=clip[0] if clip else None)
    threats = _threat_rows(model, features, test, base.eval_eps)
    # every-patch and PGD across the budget, on the adversarially trained networks (A2d's evidence
    # and the counter figure read only those; on the standard ones it cost ~40% of the main block)
    sweep = []
    if base.experiment == "main" and base.method != "standard":
        sweep = _eps_sweep(model, features, test, base, tspec, g)
    # the ε = 0 runs of the ε sweep are A2f's control (standard training bit for bit, measured the same way)
    measured = base.experiment in FEATURE_USE or (base.experiment == "eps" and base.eps == 0)
    linf_known = {eps: pgd for _, eps, pgd, _ in sweep}
    if base.eval_pgd_steps:
        linf_known[base.eval_eps] = hist.pgd_acc[:, -1]  # the final evaluation's PGD at eval_eps
    use = _feature_use(model, features, test, base, seeds, tspec, g, linf_known) if measured else None
    return [_member_rows(e, base, hist, clip, sweep, threats, assumption, use) for e in range(len(cfgs))]


def _assumption_cols(base: FeatureLearningConfig, spec) -> dict:
    """The data model's assumptions at the training ε (``eval_eps`` for standard training), as
    ``assume_*`` columns; their violations are warned once per group (not per seed), except in
    the limit experiment, whose tiny ε is below β by design."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", AssumptionWarning)
        report = check_assumptions(spec, q=base.q, eps=base.eps if base.method != "standard" else base.eval_eps,
                                   gamma=base.gamma)
    for w in caught if base.experiment != "limit" else ():
        warnings.warn(w.message, AssumptionWarning, stacklevel=3)  # at run_points
    assumption = {f"assume_{k}": v for k, v in report.items() if k not in ("violations", "q", "eps")}
    assumption["assume_violations"] = "; ".join(report["violations"])
    return assumption


def _eps_sweep(model: PatchCNN, features, test, base: FeatureLearningConfig, tspec: FeatureTrainSpec,
               g) -> list[tuple]:
    """PGD and the every-patch threats at each budget of :data:`EPS_OVER_ALPHA`: per budget
    ``(ε/α, ε, pgd (E,), {threat: (E,)})`` (all of :data:`SWEEP_THREATS` at the attribution
    budgets, ``linf_all`` alone at the others)."""
    sweep = []
    for r in EPS_OVER_ALPHA:
        eps = r * base.alpha
        ts = dataclasses.replace(tspec, eval_eps=eps)
        pgd = pgd_accuracy(model, test, ts, g(f"eval-sweep-{r}"))  # (what evaluate_patch_cnn's PGD gives)
        th = _threat_rows(model, features, test, eps, SWEEP_THREATS if r in ATTRIBUTION_EPS else SWEEP_THREATS[:1])
        sweep.append((r, eps, pgd.cpu(), {n: a.cpu() for n, a in th.items()}))
    return sweep


def _member_rows(e: int, base: FeatureLearningConfig, hist, clip, sweep: list[tuple], threats: dict,
                 assumption: dict, use: dict | None) -> list[dict]:
    """Member ``e``'s records: its probe, eval and neuron rows, the clip probes (``clip``: the
    :func:`_clip_probe` hook and traces, or None), the budget sweep and the final row."""
    A, B = hist.A.mean(-1), hist.B.mean(-1)  # (E, T): averaged over classes
    rows: list[dict] = []
    for j, t in enumerate(hist.probe_steps.tolist()):
        rows.append({"kind": "probe", "step": t, "A": float(A[e, j]), "B": float(B[e, j]),
                     "loss": float(hist.loss[e, j]), "A_i": hist.A[e, j].tolist(), "B_i": hist.B[e, j].tolist()})
    for j, t in enumerate(hist.eval_steps.tolist()):
        p = float(hist.pgd_acc[e, j])
        rows.append({"kind": "eval", "step": t, "clean_acc": float(hist.clean_acc[e, j]),
                     "feature_acc": float(hist.feature_acc[e, j]), "pgd_acc": None if math.isnan(p) else p})
    cross = crossing_step(hist.probe_steps, A[e], B[e])
    b_peak = int(hist.probe_steps[int(B[e].argmax())])
    rows.append({"kind": "neuron", "step": int(hist.probe_steps[-1]),
                 "A_neuron": [round(v, 6) for v in hist.A_neuron[e, -1].flatten().tolist()],
                 "B_neuron": [round(v, 6) for v in hist.B_neuron[e, -1].flatten().tolist()]})
    clip_cols = _clip_rows(rows, clip, e, cross, hist.probe_steps.tolist(), hist.loss[e], base.k) if clip else {}
    for r, eps, pgd, th in sweep:
        rows.append({"kind": "eps_sweep", "eps_over_alpha": r, "attack_eps": eps, "pgd_acc": float(pgd[e]),
                     "every_patch_acc": float(th["linf_all"][e]),
                     **({"v_swap_acc": float(th["nonrobust_subspace"][e]), "uv_every_patch_acc": float(th["linf_uv"][e])}
                        if "linf_uv" in th else {}),
                     "bound_ratio": every_patch_bound(base.alpha, eps, base.q, base.P)})
    rows.append({"kind": "final", "step": int(hist.probe_steps[-1]), "A": float(A[e, -1]), "B": float(B[e, -1]),
                 "A_minus_B": float(A[e, -1] - B[e, -1]), "loss": float(hist.loss[e, -1]),
                 # the adversarial training loss (at the moved points); none for standard training
                 "loss_adv": float(hist.loss[e, -1]) if base.method != "standard" and base.eps > 0 else None,
                 "A_init": float(A[e, 0]), "B_peak": float(B[e].max()),
                 "clean_acc": float(hist.clean_acc[e, -1]), "feature_acc": float(hist.feature_acc[e, -1]),
                 "pgd_acc": float(hist.pgd_acc[e, -1]), "cross_step": cross, "b_peak_step": b_peak,
                 "chance": 1.0 / base.k, **{f"threat_{n}": float(a[e]) for n, a in threats.items()},
                 "every_patch_bound": every_patch_bound(base.alpha, base.eval_eps, base.q, base.P),
                 **clip_cols, **assumption, **({k: v[e] for k, v in use.items()} if use else {})})
    return rows


def phase2_columns(steps: list[int], frac_v: torch.Tensor, loss: torch.Tensor, k: int) -> dict:
    """The phase-2 premise's measurements (issue 52), from the clip probes and the adversarial
    training loss at the same probes: ``clip_frac_v_max`` (the clipped share of the v_y
    coordinates, max over probes) and ``loss_at_clip_max`` (the loss at that probe);
    ``phase2_step``, the first probe where the share exceeds :data:`SATURATION` while the loss is
    still >= ½·log k (None if none); the final-loss half of the premise is read from ``loss_adv``."""
    frac = frac_v.double()
    lo = loss.double()[: len(frac)]
    j = int(frac.argmax())
    hit = ((frac > SATURATION) & (lo >= 0.5 * math.log(k))).nonzero()
    return {"clip_frac_v_max": float(frac[j]), "loss_at_clip_max": float(lo[j]),
            "phase2_step": float(steps[int(hit[0])]) if len(hit) else None}


def _clip_rows(rows: list[dict], clip, e: int, cross: float | None, probe_steps: list[int], loss: torch.Tensor,
               k: int) -> dict:
    """Append member ``e``'s clip-probe rows to ``rows``; its final row's ``clip_*`` and phase-2 columns
    (``loss``: member ``e``'s training loss at ``probe_steps``, the same probes as the clip hook's)."""
    _, cs, fa, fv, mv = clip
    fa_e, fv_e, mv_e = torch.stack(fa)[:, e], torch.stack(fv)[:, e], torch.stack(mv)[:, e]
    at = {t: j for j, t in enumerate(probe_steps)}
    loss_e = torch.stack([loss[at[t]] for t in cs])
    for j, t in enumerate(cs):
        rows.append({"kind": "clip", "step": t, "clip_frac": float(fa_e[j]), "clip_frac_v": float(fv_e[j]),
                     "move_v_median": float(mv_e[j]), "loss_adv": float(loss_e[j])})
    late = mv_e[-max(1, len(cs) // 3):]  # the last third of the probes: where the move has settled
    return {"clip_frac_phase1": _phase1_mean(cs, fa_e, cross), "clip_frac_v_phase1": _phase1_mean(cs, fv_e, cross),
            "move_v_median_late": float(late.double().mean()), **phase2_columns(cs, fv_e, loss_e, k),
            **_saturation(cs, fv_e, cross)}


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
    report = assumption_report(spec, q=base.q, eps=base.eval_eps, gamma=base.gamma)
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


def train_image_group(cfgs: list[FeatureLearningConfig], dev: torch.device):
    """The image models of one group of points (its seeds as one ensemble), trained as the study
    trains them: returns the model, the data split and the training history. Scripts that
    examine the study's models (``scripts/a6_masking.py``) re-train them through this."""
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
    return model, data, hist


def _run_images(cfgs: list[FeatureLearningConfig], dev: torch.device) -> list:
    base = cfgs[0]
    model, data, hist = train_image_group(cfgs, dev)
    E, k, C = len(cfgs), data.n_classes, data.x_train.shape[1]
    seeds = [c.seed for c in cfgs]
    g = lambda salt: make_generator(base.seed, salt)  # noqa: E731
    ilyas = None
    # the test on the standard model; its mirror (ilyas_mirror) on the PGD-trained one: the same
    # construction from a model that should rely on robust features
    if base.ilyas and base.image_eps > 0 and (base.method == "standard" or base.ilyas_mirror):
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
    ilyas = (2 * c.ilyas_steps + 3 * c.epochs) * n_train if c.ilyas and (c.method == "standard" or c.ilyas_mirror) \
        else 0
    return float(macs * (train + evals + ilyas))


def probe_point(cfg: FeatureLearningConfig, steps: int) -> FeatureLearningConfig | None:
    """``--dry-run``'s probe of an image point (``Study.probe``): the same epochs, attacks and
    evaluations on a random ``steps`` minibatches' worth of its training images and the same
    share of its test images. Training, the evaluations and the Ilyas test keep their shares
    of the work (:func:`_work` is linear in both counts), so the difference of two probes'
    times is the time per unit of work of the point's own mix. Other experiments: None (their
    groups take seconds to a few minutes and run whole)."""
    if cfg.experiment != "images":
        return None
    shape = image_data.SHAPES[cfg.dataset]
    n_train, n_test = min(shape.n_train, cfg.max_train or shape.n_train), min(shape.n_test, cfg.max_test or shape.n_test)
    train = min(n_train, max(1, steps) * cfg.image_batch)
    return dataclasses.replace(cfg, max_train=train, max_test=max(1, min(n_test, math.ceil(train * n_test / n_train))))


