"""Standard and adversarial training of the patch CNN, with the probes of the feature-learning paper (ICLR 2025).

Training (feature learning, ICLR 2025, Sec. 2, Alg. 1): gradient descent on the softmax cross-entropy, full
batch or minibatch SGD. Adversarial training first moves each training point inside the
ℓ∞ ball of radius ε, then takes the descent step at the moved points:

* ``gradient_step`` — the theory's one step ``x + clip_ε(η̃ ∇ₓ ℓ(x))`` (per-sample gradient);
* ``fgsm`` — ``x + ε sign(∇ₓ ℓ)``;
* ``pgd`` — k sign steps with projection (what practice uses).

Probes (every ``probe_every`` steps; feature learning, ICLR 2025, Sec. 5): robust-feature learning
``A_i(t) = max_r ⟨w_{i,r}, u_i⟩`` and non-robust ``B_i(t) = max_r ⟨w_{i,r}, v_i⟩`` (and the
per-neuron values), the training loss; every ``eval_every`` steps, on held-out data: clean
accuracy and robust accuracy under the theory's attack ``δ_p = −ε v_y`` on the non-robust
patches (Prop. 3.2) and under ℓ∞ PGD.

Everything carries the leading ensemble dimension E (independent seeds trained in one pass).
Standard and one-step (``gradient_step``) training take the loss's input and weight gradients
in closed form (:class:`ClosedFormStep`, checked against autograd in float64); FGSM and PGD
training go through the attack objects and autograd.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from ..attacks import FGSM, PGD, FeatureDirection, GradientStep, Linf
from ..config import ConfigError
from ..data.patches import Features, PatchData
from ..errors import NumericalError
from ..metrics import robust_accuracy
from ..models.ensemble import Flat, fold, unfold
from ..models.patch_cnn import PatchCNN

__all__ = ["FeatureTrainSpec", "FeatureHistory", "train_patch_cnn", "crossing_step", "METHODS",
           "train_attack", "evaluate_patch_cnn", "pgd_accuracy", "ClosedFormStep", "PHASE1_GROWTH"]

METHODS = ("standard", "gradient_step", "fgsm", "pgd")
CLOSED_FORM = ("standard", "gradient_step")  # trained by ClosedFormStep


@dataclasses.dataclass(frozen=True)
class FeatureTrainSpec:
    """How to train and what to record. ``batch_size=0`` means full-batch gradient descent.

    ``pgd_step_size=0`` means ``2.5 ε / pgd_steps`` (Madry et al.'s rule of thumb). Clean and
    feature-attack accuracy are measured every ``eval_every`` steps, PGD robust accuracy (the
    costly one) every ``pgd_eval_every`` steps (0: at the last step only).
    """

    method: str = "gradient_step"
    steps: int = 200
    lr: float = 3.0
    batch_size: int = 0
    eps: float = 0.4
    eta_tilde: float = 15.0
    pgd_steps: int = 5
    pgd_step_size: float = 0.0
    probe_every: int = 5
    eval_every: int = 50
    pgd_eval_every: int = 0
    eval_eps: float = 0.4
    eval_pgd_steps: int = 10
    eval_pgd_restarts: int = 1

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError("method", self.method, "one of " + ", ".join(METHODS))
        for name in ("steps", "probe_every", "eval_every", "pgd_steps", "eval_pgd_restarts"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), ">= 1")
        if self.batch_size < 0:
            raise ConfigError("batch_size", self.batch_size, ">= 0 (0: full batch)")
        if self.eval_pgd_steps < 0:
            raise ConfigError("eval_pgd_steps", self.eval_pgd_steps, ">= 0")
        if self.pgd_eval_every < 0:
            raise ConfigError("pgd_eval_every", self.pgd_eval_every, ">= 0 (0: at the last step only)")
        for name in ("lr", "eps", "eta_tilde", "pgd_step_size", "eval_eps"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(name, v, "a finite value >= 0")
        if self.lr == 0:
            raise ConfigError("lr", self.lr, "> 0")
        if self.method == "gradient_step" and self.eta_tilde == 0:
            raise ConfigError("eta_tilde", self.eta_tilde, "> 0 for gradient_step training")


@dataclasses.dataclass
class FeatureHistory:
    """Recorded traces (CPU tensors). Probe traces have T_p entries, evaluations T_e.

    probe_steps (T_p,); A, B (E, T_p, k) = max over neurons; A_neuron, B_neuron
    (E, T_p, k, m); loss (E, T_p) = training objective at the points trained on (adversarial
    ones for adversarial training), measured before that step's update;
    eval_steps (T_e,); clean_acc, feature_acc, pgd_acc (E, T_e).
    """

    probe_steps: torch.Tensor
    A: torch.Tensor
    B: torch.Tensor
    A_neuron: torch.Tensor
    B_neuron: torch.Tensor
    loss: torch.Tensor
    eval_steps: torch.Tensor
    clean_acc: torch.Tensor
    feature_acc: torch.Tensor
    pgd_acc: torch.Tensor


def train_attack(spec: FeatureTrainSpec):
    """The inner maximisation of adversarial training (None for standard training).

    FGSM and PGD step along the sign of cross-entropy's gradient taken up to a positive factor
    per point (``saturation_safe``): the patch CNN fits its training points with margins far
    past float32's softmax, where the plain gradient is exactly 0 and a sign step does not move
    (97 % of the PGD-trained network's training points after its first tenth of training, at
    the quick preset), which made FGSM and PGD training standard training in disguise. The
    one-step method of the paper (``gradient_step``, ``x + η̃∇ℓ``) uses the gradient's size, so
    it keeps the plain gradient: a vanishing loss is a vanishing step there, as in the paper.
    """
    if spec.method == "standard":
        return None
    threat = Linf(spec.eps)
    if spec.method == "gradient_step":
        return GradientStep(threat, step=spec.eta_tilde)
    if spec.method == "fgsm":
        return FGSM(threat, saturation_safe=True)
    step = spec.pgd_step_size or 2.5 * spec.eps / spec.pgd_steps
    return PGD(threat, steps=spec.pgd_steps, step_size=step, random_start=True, saturation_safe=True)


# Evaluation runs an ensemble a few copies at a time, as many as keep a copy of the test inputs
# within 2**19 floats (2 MB, a core's L2 here): an elementwise pass over one copy's quick-scale
# inputs (200 x 48 x 64 floats) then stays in cache instead of streaming the whole ensemble's,
# and with early_stop a copy's test points leave as soon as that copy misclassifies them. Each
# copy's numbers are its own either way (per-copy GEMMs, elementwise passes, and random draws
# taken in copy order from one generator), so the results are the same bits; the quick
# main group's PGD evaluation (16 copies) took 171-182 ms a copy at a time against 226-228 ms
# all at once (2 copies: 197, 4: 224-227).
CHUNK_FLOATS = 2**19


def member_chunks(E: int, floats_per_copy: int, device: torch.device | str = "cpu") -> list[tuple[int, int]]:
    """``[(start, stop), …]`` covering copies ``0 … E − 1`` in order, each within :data:`CHUNK_FLOATS`
    on a CPU; one chunk on a GPU, where a kernel launch per copy costs more than a cache miss."""
    if torch.device(device).type != "cpu":
        return [(0, E)]
    per = max(1, CHUNK_FLOATS // max(1, floats_per_copy))
    return [(a, min(E, a + per)) for a in range(0, E, per)]


def member_slice(data, start: int, stop: int):
    """Copies ``start … stop − 1`` of a :class:`PatchData` or :class:`Features` (leading dim E)."""
    return dataclasses.replace(data, **{f.name: getattr(data, f.name)[start:stop] for f in dataclasses.fields(data)})


def by_copies(fn: Callable, model: PatchCNN, data: tuple, *args, **kw):
    """``fn(model, *data, *args, **kw)`` a few copies at a time (:func:`member_chunks`, sized by
    the test inputs, ``data[-1]``), its per-copy results — a tensor, or a tuple or dict of
    tensors, each (E, …) — joined in copy order; None when the ensemble is one chunk."""
    test = data[-1]
    chunks = member_chunks(model.E, test.x[0].numel(), test.x.device)
    if len(chunks) == 1:
        return None
    parts = [fn(model.members(range(a, b)), *(member_slice(d, a, b) for d in data), *args, **kw) for a, b in chunks]
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts)
    if isinstance(parts[0], dict):
        return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
    return tuple(torch.cat(z) for z in zip(*parts))


def _per_member(ok: torch.Tensor, E: int) -> torch.Tensor:
    return unfold(ok.float(), E).mean(1)  # (E*N,) -> (E,)


def evaluate_patch_cnn(model: PatchCNN, features: Features, test: PatchData, spec: FeatureTrainSpec,
                       generator: torch.Generator | None, *, with_pgd: bool = True
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(clean, feature-attack, PGD) accuracy per ensemble member, each (E,).

    The feature attack subtracts ``eval_eps · v_y`` on the non-robust patches of each test
    point (its own member's ``v``; feature learning, ICLR 2025, Prop. 3.2). PGD is ℓ∞ with radius ``eval_eps``,
    random start, step ``2.5 ε / steps``, on the margin loss: the cross-entropy of a
    saturated softmax has exactly zero input gradient in float32, which would pass for
    robustness (gradient masking). NaN when ``with_pgd`` is False. Robust accuracy counts a
    point only if it is also correct when clean.
    """
    joined = by_copies(evaluate_patch_cnn, model, (features, test), spec, generator, with_pgd=with_pgd)
    if joined is not None:  # a few copies at a time: the same numbers (see member_chunks)
        return joined
    E = model.E
    flat = Flat(model, E).eval()
    x, y = fold(test.x), fold(test.y)
    with torch.no_grad():
        clean_ok = model(test.x).argmax(-1) == test.y  # (E, N)
    clean = clean_ok.float().mean(1)  # (E,)
    if spec.eval_eps == 0:
        return clean, clean.clone(), clean.clone()
    # every member has its own features: fold (E, N) and pick the row of member e for sample e*N+n
    member = torch.arange(E, device=x.device).repeat_interleave(test.x.shape[1])
    dirs = features.v.reshape(E * model.k, model.d)
    attack = FeatureDirection(spec.eval_eps, dirs)
    # FeatureDirection indexes dirs by label (member e, class y -> row e*k + y), while
    # correctness needs the true class: so the attack is called here, not via robust_accuracy
    with torch.no_grad():
        x_feat = attack(flat, x, member * model.k + y, bounds=None, mask=fold(test.nonrobust))
        feat_ok = (flat(x_feat).argmax(-1) == y) & fold(clean_ok)
    pgd = pgd_accuracy(model, test, spec, generator) if with_pgd else torch.full((E,), math.nan)
    return clean, _per_member(feat_ok, E), pgd.to(clean.device)


def pgd_accuracy(model: PatchCNN, test: PatchData, spec: FeatureTrainSpec, generator: torch.Generator | None
                 ) -> torch.Tensor:
    """The PGD part of :func:`evaluate_patch_cnn` alone: robust accuracy per member (E,) under
    ℓ∞ PGD at ``spec.eval_eps`` (margin loss, random start, step ``2.5 ε / steps``; NaN without
    steps, clean accuracy at ε = 0), the same numbers from the same generator, a few copies at
    a time (:func:`member_chunks`)."""
    joined = by_copies(pgd_accuracy, model, (test,), spec, generator)
    if joined is not None:
        return joined
    E = model.E
    if spec.eval_eps == 0:
        with torch.no_grad():
            return (model(test.x).argmax(-1) == test.y).float().mean(1)
    if spec.eval_pgd_steps == 0:
        return torch.full((E,), math.nan)
    attack = PGD(Linf(spec.eval_eps), steps=spec.eval_pgd_steps, step_size=2.5 * spec.eval_eps / spec.eval_pgd_steps,
                 random_start=True, restarts=spec.eval_pgd_restarts, loss="margin")
    # early_stop: a column of test points leaves once every copy misclassifies its own (same outcome)
    ok = robust_accuracy(Flat(model, E).eval(), fold(test.x), fold(test.y), attack, bounds=None, generator=generator,
                         per_sample=True, early_stop=True)
    return _per_member(ok, E)


def train_patch_cnn(model: PatchCNN, features: Features, train: PatchData, test: PatchData,
                    spec: FeatureTrainSpec, *, batch_generator: torch.Generator | None = None,
                    attack_generator: torch.Generator | None = None,
                    eval_generator: torch.Generator | None = None,
                    probe_hook: Callable[[int], None] | None = None) -> FeatureHistory:
    """Train ``model`` (E copies) in place and return its probe traces.

    ``probe_hook(t)``, if given, is called at every probe with the weights of step ``t`` (a
    study's extra measurements, e.g. the clipped fraction of the one-step perturbation).

    ``train.x`` (E, N, P, d); gradient of Σ_e mean_n ℓ, so each copy takes its own GD step.
    Separate generators for minibatches, training attacks and evaluation attacks keep the
    training trajectory independent of how often it is evaluated (and make ε = 0
    adversarial training reproduce standard training bit for bit).
    """
    E = model.E
    N = train.x.shape[1]
    # no dropout / normalisation: eval mode only silences the attacks' train-mode warning
    flat = Flat(model, E).eval()
    attack = train_attack(spec)
    # standard and one-step training take the closed-form gradients (no autograd, no attack object)
    closed = ClosedFormStep(model, spec) if spec.method in CLOSED_FORM else None
    u, v = features.u.to(model.W.dtype), features.v.to(model.W.dtype)
    probe_steps, As, Bs, An, Bn, losses = [], [], [], [], [], []
    eval_steps, cleans, feats, pgds = [], [], [], []

    def probe(t: int, loss: torch.Tensor | None) -> None:
        a = model.feature_alignment(u)  # (E, k, m)
        b = model.feature_alignment(v)
        probe_steps.append(t)
        An.append(a.cpu())
        Bn.append(b.cpu())
        As.append(a.max(-1).values.cpu())
        Bs.append(b.max(-1).values.cpu())
        losses.append(loss.detach().cpu() if loss is not None else torch.full((E,), math.nan))
        if probe_hook is not None:
            probe_hook(t)

    def evaluate(t: int) -> None:
        final = t == spec.steps
        with_pgd = final or (spec.pgd_eval_every > 0 and t % spec.pgd_eval_every == 0)
        c, f, p = evaluate_patch_cnn(model, features, test, spec, eval_generator, with_pgd=with_pgd)
        eval_steps.append(t)
        cleans.append(c.cpu())
        feats.append(f.cpu())
        pgds.append(p.cpu())

    for t in range(spec.steps + 1):
        if t % spec.eval_every == 0 or t == spec.steps:
            evaluate(t)
        if t == spec.steps:
            final = closed(train.x, train.y, with_grad=False)[0] if closed is not None else \
                _objective(model, train.x, train.y, attack, spec, flat, attack_generator).detach()
            probe(t, final)
            break
        if spec.batch_size and spec.batch_size < N:
            idx = torch.randperm(N, generator=batch_generator)[: spec.batch_size].to(train.x.device)
            xb, yb = train.x[:, idx], train.y[:, idx]
        else:
            xb, yb = train.x, train.y
        if closed is not None:
            loss, g = closed(xb, yb, with_grad=True)  # (E,), (E, k, m, d)
        else:
            loss = _objective(model, xb, yb, attack, spec, flat, attack_generator)  # (E,)
        if t % spec.probe_every == 0:
            probe(t, loss)
        if not bool(torch.isfinite(loss).all()):
            raise NumericalError(f"training loss is not finite at step {t} (lr={spec.lr}, eta_tilde={spec.eta_tilde})")
        if closed is None:
            (g,) = torch.autograd.grad(loss.sum(), model.W)
        with torch.no_grad():
            model.W -= spec.lr * g
    return FeatureHistory(
        probe_steps=torch.tensor(probe_steps), A=torch.stack(As, 1), B=torch.stack(Bs, 1),
        A_neuron=torch.stack(An, 1), B_neuron=torch.stack(Bn, 1), loss=torch.stack(losses, 1),
        eval_steps=torch.tensor(eval_steps), clean_acc=torch.stack(cleans, 1),
        feature_acc=torch.stack(feats, 1), pgd_acc=torch.stack(pgds, 1))


class ClosedFormStep:
    """The training loss and its weight gradient for standard and one-step adversarial training,
    in closed form: no autograd, and no fresh (E, N, P, d) tensor per step.

    With pre-activations ``z_{irnp} = ⟨w_{ir}, x_{np}⟩``, logits ``F_{ni} = Σ_{r,p} σ(z_{irnp})``
    and ``c_{ni} = ∂ℓ_n/∂F_{ni} = softmax(F_n)_i − 1[i = y_n]`` (cross-entropy),

        ∇_{x_np} ℓ_n      = Σ_{i,r} c_{ni} σ'(z_{irnp}) w_{ir}              (the attack's gradient)
        ∇_{w_ir} mean_n ℓ_n = (1/N) Σ_{n,p} c_{ni} σ'(z_{irnp}) x_{np}       (the descent step's)

    each one batched GEMM over the (E, k·m, N·P) layout of :meth:`PatchCNN.preactivations_t`.
    One-step training (``gradient_step``, feature learning, ICLR 2025, Alg. 1) moves the points to
    ``x + clip_ε(η̃ ∇ₓℓ)``, which is what ``GradientStep`` followed by the ℓ∞ projection
    returns (up to rounding: the projection there computes ``x + clip((x + η̃g) − x)``);
    ε = 0 skips the move, so it reproduces standard training bit for bit.

    The buffers live as long as this object (a training run, a probe): on the 2-core VM a fresh
    tensor per step costs page faults, which made an elementwise pass over the quick scale's
    6 MB ensemble input ~5× slower than the same pass in place. Copy ``e``'s numbers do not depend on E
    (each GEMM of the batch and each elementwise pass is per member).
    """

    def __init__(self, model: PatchCNN, spec: FeatureTrainSpec):
        self.model = model
        self.adversarial = spec.method == "gradient_step" and spec.eps > 0
        self.eps, self.eta = spec.eps, spec.eta_tilde
        self._buffers: dict[tuple, list[torch.Tensor | None]] = {}  # z, σ'(z), scratch, moved points

    def _work(self, x: torch.Tensor, *, moved: bool) -> tuple[torch.Tensor, ...]:
        E, N, P, d = x.shape
        key = (N, P, d, x.dtype, x.device)
        if key not in self._buffers:  # the training set and (with minibatches) the batch shape
            K = self.model.k * self.model.m
            self._buffers[key] = [torch.empty(E, K, N * P, dtype=x.dtype, device=x.device) for _ in range(3)] + [None]
        work = self._buffers[key]
        if moved and work[3] is None:
            work[3] = torch.empty(E, N * P, d, dtype=x.dtype, device=x.device)
        return tuple(work)

    def _input_step(self, xf: torch.Tensor, y: torch.Tensor, z, s, w, out: torch.Tensor) -> torch.Tensor:
        """η̃ ∇ₓℓ_n (per-sample loss, unclipped) into ``out`` (E, N·P, d)."""
        _, c = self._forward(xf, y, z, s, w)
        g = self._times_c(s, c.mul_(self.eta))  # η̃ folded into c: (E, k·m, N·P)
        return torch.bmm(g.transpose(1, 2), self.model.W.reshape(xf.shape[0], -1, xf.shape[2]), out=out)

    @torch.no_grad()
    def input_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The one-step attack's unclipped move ``η̃ ∇ₓℓ_n`` at ``x`` (E, N, P, d), per-sample
        cross-entropy, in a buffer reused by the next call (a probe reads it, e.g. the clipped
        fraction of Study A)."""
        z, s, w, out = self._work(x, moved=True)
        E, N, P, d = x.shape
        return self._input_step(x.reshape(E, N * P, d), y, z, s, w, out).view(E, N, P, d)

    def _forward(self, xf: torch.Tensor, y: torch.Tensor, z, s, w) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-sample loss (E, N) and c = ∂ℓ_n/∂F_n (E, N, k); leaves σ'(z) in ``s``."""
        model, (E, N) = self.model, y.shape
        torch.bmm(model.W.reshape(E, -1, model.d), xf.transpose(1, 2), out=z)  # (E, k·m, N·P)
        model.act_and_grad_(z, s, w)
        logp = torch.log_softmax(model.logits_from_act(z, N), -1)  # (E, N, k)
        loss = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1)
        c = logp.exp_().scatter_add_(-1, y.unsqueeze(-1), logp.new_full((E, N, 1), -1.0))
        return loss, c

    def _times_c(self, s: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """σ'(z) · c_{ni} in place: (E, k·m, N·P) with c (E, N, k)."""
        model, (E, N, k) = self.model, c.shape
        s.view(E, k, model.m, N, -1).mul_(c.transpose(1, 2).reshape(E, k, 1, N, 1))
        return s

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, y: torch.Tensor, *, with_grad: bool
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Mean loss per member (E,) at the (moved) points ``x`` (E, N, P, d), and its gradient
        with respect to ``W`` (E, k, m, d) when ``with_grad``."""
        model = self.model
        E, N, P, d = x.shape
        z, s, w, x_adv = self._work(x, moved=self.adversarial)
        xf = x.reshape(E, N * P, d)
        if self.adversarial:
            self._input_step(xf, y, z, s, w, x_adv)  # η̃ ∇ₓℓ (E, N·P, d)
            xf = x_adv.clamp_(-self.eps, self.eps).add_(xf)
        loss, c = self._forward(xf, y, z, s, w)
        if not with_grad:
            return loss.mean(1), None
        g = self._times_c(s, c.div_(N))
        return loss.mean(1), torch.bmm(g, xf).view_as(model.W)


def _objective(model: PatchCNN, x: torch.Tensor, y: torch.Tensor, attack, spec: FeatureTrainSpec,
               flat: Flat, generator: torch.Generator | None) -> torch.Tensor:
    """Per-member mean cross-entropy (E,) at the (adversarially moved) points ``x`` (E, N, P, d)."""
    E, k = model.E, model.k
    if attack is not None:
        x = unfold(attack(flat, fold(x), fold(y), bounds=None, generator=generator), E)
    out = model(x)  # (E, N, k)
    return F.cross_entropy(out.reshape(-1, k), y.reshape(-1), reduction="none").reshape(E, -1).mean(1)


# A real phase 1: B grows to at least this multiple of its value at initialisation (|B(0)|)
# while leading A. At σ₀ = 0.05 the initial max over neurons is ~0.05–0.1 and noise moves it by
# a few hundredths; tripling it is growth no random walk of the probes gives.
PHASE1_GROWTH = 3.0


def crossing_step(steps: torch.Tensor, A: torch.Tensor, B: torch.Tensor, *,
                  growth: float = PHASE1_GROWTH) -> float | None:
    """The step at which A overtakes B for good after a real first phase (None if it does not).

    ``A``, ``B``: (T,) traces of one run (class-averaged), probed at ``steps``. The "two
    phases" of feature learning, ICLR 2025 (Lemma 5.2, Sec. 5): B leads and grows first, then A
    overtakes. So the crossing needs

    * a real phase 1: a probe where ``B ≥ growth·|B(0)|`` and ``B > A`` (a flat B, or A leading
      from the start, has no first phase to end);
    * a sustained crossing: the returned step is the first probe after that phase-1 probe from
      which ``A > B`` at every later probe to the end of the run (a crossing that reverts is
      not one).
    """
    s, a, b = steps.tolist(), A.tolist(), B.tolist()
    if not s:
        return None
    floor = growth * abs(b[0])
    start = next((i for i in range(len(s)) if b[i] >= floor and b[i] > a[i]), None)
    if start is None:
        return None
    cross = None
    for i in range(start + 1, len(s)):
        if a[i] > b[i]:
            if cross is None:
                cross = i
        else:
            cross = None
    return None if cross is None else float(s[cross])
