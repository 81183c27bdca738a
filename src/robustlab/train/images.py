"""Standard vs ℓ∞-PGD adversarial training of a small CNN on real images, and the
non-robust-dataset test of Ilyas et al. 2019.

feature learning, ICLR 2025, Sec. 6 (real images): multi-step PGD adversarial training (Madry et al. 2018)
against standard training, clean and robust accuracy per epoch.

Ilyas et al. 2019, Sec. 3.2 ("non-robust features suffice"): for every training image
``x`` of class ``y`` pick a target ``t`` uniformly among the k classes (their D_rand), move
``x`` by a targeted ℓ∞ attack on a *standardly* trained model towards ``t``, and relabel it
``t``. The labels are then independent of the robust features (t is drawn regardless of y),
so a fresh model trained on the new set can beat chance on the true test set only through
the non-robust features the attack planted. Its test accuracy is reported against 1/k.
(Excluding ``t = y`` would make "looks like y" evidence *against* y, and push the test
accuracy below chance for a reason unrelated to non-robust features.)

Ensemble convention: E copies (seeds) train at once; images are shared, initialisations
and minibatch orders are per copy. Inputs (E, N, C, H, W) → logits (E, N, k).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import torch
import torch.nn.functional as F

from ..attacks import FGSM, PGD, Linf
from ..config import ConfigError
from ..errors import NumericalError
from ..metrics import robust_accuracy
from ..models.ensemble import Flat, fold, unfold
from ..models.small_cnn import SmallCNN
from ..utils import large_blocks_mapped

__all__ = ["ImageTrainSpec", "ImageHistory", "train_images", "evaluate_images",
           "nonrobust_dataset", "IMAGE_METHODS"]

IMAGE_METHODS = ("standard", "pgd")

# Images per member that one evaluation or non-robust-dataset pass takes at once. Those passes
# run every copy on every image together, so memory grows with E·N: on the full MNIST (10,000
# test and 50,000 training images, 5 seeds) one pass held 13.4 GB and the Ilyas construction
# would need several times that. Chunks bound it; mnist5k's splits (4,000 / 1,000) and the
# digits' fit one chunk, so the built-in presets draw and compute exactly as unchunked.
IMAGE_CHUNK = 4000


def _images(t: torch.Tensor, start: int, stop: int, shared_dim: int) -> torch.Tensor:
    """Images ``start:stop`` of a shared tensor (``shared_dim`` dims, images first) or of a
    per-member one (one more dim, members first)."""
    return t[start:stop] if t.dim() == shared_dim else t[:, start:stop]


@dataclasses.dataclass(frozen=True)
class ImageTrainSpec:
    """Minibatch SGD with momentum; ``pgd_step_size=0`` means ``2.5 ε / pgd_steps``.

    Adversarial training ramps the training budget up linearly over ``warmup_epochs``
    (ε·e/(w+1) in epoch e ≤ w): from a random init, a small CNN attacked at full ε from the
    first step often never leaves the constant classifier. Evaluation always uses ε.

    Two evaluation attacks. Every ``eval_every`` epochs a cheap one draws the learning curve
    (``eval_pgd_steps`` steps of cross-entropy PGD, one random start). After the last epoch
    the *reported* robust accuracy comes from a strong one (:meth:`final_attacks`): the
    per-sample worst case over PGD on each loss in ``final_losses`` (cross-entropy and the
    CW margin), ``final_pgd_steps`` steps of ``final_step_frac·ε``, ``final_restarts`` random
    starts each. Against torchattacks' APGD-CE + APGD-T (50 steps each) on the quick
    preset's digits models the cheap attack read 0.019–0.039 too high, the strong one
    within 0.006 (tests/test_feature_autoattack.py). ``final_pgd_steps=0`` reports the
    cheap attack's last value instead.
    """

    method: str = "standard"
    epochs: int = 10
    lr: float = 0.05
    momentum: float = 0.9
    batch_size: int = 64
    eps: float = 0.1
    pgd_steps: int = 5
    pgd_step_size: float = 0.0
    eval_pgd_steps: int = 10
    eval_every: int = 1
    warmup_epochs: int = 2
    final_pgd_steps: int = 50
    final_step_frac: float = 0.125
    final_restarts: int = 1
    final_losses: tuple[str, ...] = ("ce", "margin")

    def __post_init__(self) -> None:
        if self.method not in IMAGE_METHODS:
            raise ConfigError("method", self.method, "one of " + ", ".join(IMAGE_METHODS))
        if self.warmup_epochs < 0:
            raise ConfigError("warmup_epochs", self.warmup_epochs, ">= 0")
        for name in ("epochs", "batch_size", "pgd_steps", "eval_every"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), ">= 1")
        for name in ("eval_pgd_steps", "final_pgd_steps"):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), ">= 0")
        if self.final_restarts < 1:
            raise ConfigError("final_restarts", self.final_restarts, ">= 1")
        if not (math.isfinite(self.final_step_frac) and self.final_step_frac > 0):
            raise ConfigError("final_step_frac", self.final_step_frac, "a finite value > 0")
        if not self.final_losses or any(loss not in ("ce", "margin") for loss in self.final_losses):
            raise ConfigError("final_losses", self.final_losses, "a non-empty tuple of 'ce' and/or 'margin'")
        for name in ("lr", "momentum", "eps", "pgd_step_size"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(name, v, "a finite value >= 0")
        if self.lr == 0:
            raise ConfigError("lr", self.lr, "> 0")

    def pgd(self, steps: int | None = None, eps: float | None = None) -> PGD:
        eps = self.eps if eps is None else eps
        steps = self.pgd_steps if steps is None else steps
        size = self.pgd_step_size or 2.5 * eps / steps
        return PGD(Linf(eps), steps=steps, step_size=size, random_start=True)

    def final_attacks(self) -> list[PGD] | None:
        """The reported evaluation: one PGD per loss in ``final_losses`` (worst case per sample),
        or None without a budget or with ``final_pgd_steps=0``."""
        if self.final_pgd_steps == 0 or self.eps == 0:
            return None
        return [PGD(Linf(self.eps), steps=self.final_pgd_steps, step_size=self.final_step_frac * self.eps,
                    random_start=True, restarts=self.final_restarts, loss=loss) for loss in self.final_losses]


@dataclasses.dataclass
class ImageHistory:
    """Per evaluated epoch: epochs (T,), train_loss, clean_acc, robust_acc (E, T), the last
    under the cheap per-epoch attack; ``final_robust_acc`` (E,): after the last epoch under
    the strong attack (:meth:`ImageTrainSpec.final_attacks`; the cheap value when it is off)."""

    epochs: torch.Tensor
    train_loss: torch.Tensor
    clean_acc: torch.Tensor
    robust_acc: torch.Tensor
    final_robust_acc: torch.Tensor | None = None


def _expand(x: torch.Tensor, E: int) -> torch.Tensor:
    """Shared data (N, ...) -> (E, N, ...) as a view; per-member data passes through."""
    return x.unsqueeze(0).expand(E, *x.shape) if x.dim() == 4 else x


def evaluate_images(model: SmallCNN, x: torch.Tensor, y: torch.Tensor, attack: PGD | list[PGD] | None,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Clean and robust (PGD, box [0, 1]) test accuracy per member, each (E,).

    ``attack`` may be a list: a point then counts as robust only if no attack breaks it. More
    than :data:`IMAGE_CHUNK` images are evaluated a chunk at a time (the attacks' random
    starts are then drawn chunk by chunk)."""
    E = model.E
    N = x.shape[0] if x.dim() == 4 else x.shape[1]
    if N > IMAGE_CHUNK:
        clean = rob = None
        with large_blocks_mapped():  # else each pass's big blocks fragment a worker's retained heap
            for s in range(0, N, IMAGE_CHUNK):
                c, r = evaluate_images(model, _images(x, s, s + IMAGE_CHUNK, 4), _images(y, s, s + IMAGE_CHUNK, 1),
                                       attack, generator)
                n = min(IMAGE_CHUNK, N - s)
                c, r = torch.round(c * n), torch.round(r * n)  # the chunk's counts
                clean, rob = (c, r) if clean is None else (clean + c, rob + r)
        return clean / N, rob / N
    flat = Flat(model, E).eval()
    xe = fold(_expand(x, E))  # (E*N, C, H, W)
    ye = y.repeat(E) if y.dim() == 1 else fold(y)
    with torch.no_grad():
        clean = unfold((flat(xe).argmax(-1) == ye).float(), E).mean(1)
    attacks = [] if attack is None else [attack] if isinstance(attack, PGD) else list(attack)
    if not attacks or all(a.eps == 0 for a in attacks):
        return clean, clean.clone()
    # early_stop: a test image leaves the batch once every copy misclassifies it (same outcome)
    ok = robust_accuracy(flat, xe, ye, attacks, bounds=(0.0, 1.0), generator=generator, per_sample=True,
                         early_stop=True)
    return clean, unfold(ok.float(), E).mean(1)


@torch.no_grad()
def _momentum_step(params: list[torch.Tensor], grads: tuple[torch.Tensor, ...], bufs: list[torch.Tensor] | None,
                   lr: float, momentum: float) -> list[torch.Tensor]:
    """``torch.optim.SGD(lr, momentum)``'s step, the same numbers (``b ← μ b + g``, the first
    ``b = g``; ``p ← p − lr b``; without momentum ``p ← p − lr g``), without the optimizer:
    its first use imports torch._dynamo, 1.1 CPU-s in every worker process that trains
    images."""
    if momentum == 0:
        for p, g in zip(params, grads):
            p.add_(g, alpha=-lr)
        return []
    if bufs is None:
        bufs = [g.clone() for g in grads]
    else:
        for b, g in zip(bufs, grads):
            b.mul_(momentum).add_(g)
    for p, b in zip(params, bufs):
        p.add_(b, alpha=-lr)
    return bufs


def train_images(model: SmallCNN, x_train: torch.Tensor, y_train: torch.Tensor,
                 x_test: torch.Tensor, y_test: torch.Tensor, spec: ImageTrainSpec, *,
                 batch_generator: torch.Generator | None = None,
                 attack_generator: torch.Generator | None = None,
                 eval_generator: torch.Generator | None = None) -> ImageHistory:
    """Train ``model`` in place. ``x_train`` (N, C, H, W) shared or (E, N, C, H, W) per member.

    Robust accuracy is measured with ℓ∞ PGD at ``spec.eps``: ``eval_pgd_steps`` steps each
    evaluated epoch, and the strong :meth:`ImageTrainSpec.final_attacks` after the last one
    (``ImageHistory.final_robust_acc``; drawn from ``eval_generator`` after the per-epoch ones).
    """
    E = model.E
    xtr = _expand(x_train, E)  # (E, N, C, H, W)
    ytr = y_train.unsqueeze(0).expand(E, -1) if y_train.dim() == 1 else y_train  # (E, N)
    N = xtr.shape[1]
    flat = Flat(model, E).eval()  # no dropout / batch-norm: eval mode changes nothing here
    adversarial = spec.method == "pgd" and spec.eps > 0
    eval_attack = spec.pgd(steps=spec.eval_pgd_steps) if spec.eval_pgd_steps > 0 and spec.eps > 0 else None
    params = [p for p in model.parameters() if p.requires_grad]
    bufs: list[torch.Tensor] | None = None  # momentum buffers, from the first step's gradients
    rows = torch.arange(E, device=xtr.device)[:, None]
    epochs, losses, cleans, robs = [], [], [], []
    for epoch in range(1, spec.epochs + 1):
        # one permutation per member: independent minibatch orders
        perm = torch.argsort(torch.rand(E, N, generator=batch_generator), dim=1).to(xtr.device)
        ramp = min(1.0, epoch / (spec.warmup_epochs + 1))
        attack = spec.pgd(eps=spec.eps * ramp) if adversarial else None
        total = torch.zeros(E, device=xtr.device)
        for s in range(0, N, spec.batch_size):
            idx = perm[:, s:s + spec.batch_size]  # (E, b)
            xb, yb = xtr[rows, idx], ytr[rows, idx]  # (E, b, C, H, W), (E, b)
            if attack is not None:
                xb = unfold(attack(flat, fold(xb), fold(yb), bounds=(0.0, 1.0), generator=attack_generator), E)
            out = model(xb)
            loss = F.cross_entropy(out.reshape(-1, model.k), yb.reshape(-1), reduction="none")
            loss = loss.reshape(E, -1).mean(1)  # (E,): members are independent
            grads = torch.autograd.grad(loss.sum(), params)
            bufs = _momentum_step(params, grads, bufs, spec.lr, spec.momentum)
            total += loss.detach() * idx.shape[1]
        mean_loss = total / N
        if not bool(torch.isfinite(mean_loss).all()):
            raise NumericalError(f"image training loss is not finite at epoch {epoch} (lr={spec.lr})")
        if epoch % spec.eval_every == 0 or epoch == spec.epochs:
            c, r = evaluate_images(model, x_test, y_test, eval_attack, eval_generator)
            epochs.append(epoch)
            losses.append(mean_loss.cpu())
            cleans.append(c.cpu())
            robs.append(r.cpu())
    final_attacks = spec.final_attacks()
    if final_attacks is not None:
        _, final = evaluate_images(model, x_test, y_test, final_attacks, eval_generator)
        final = final.cpu()
    else:
        final = robs[-1].clone()
    return ImageHistory(torch.tensor(epochs), torch.stack(losses, 1), torch.stack(cleans, 1),
                        torch.stack(robs, 1), final)


def nonrobust_dataset(model: SmallCNN, x: torch.Tensor, y: torch.Tensor, k: int, *, eps: float,
                      steps: int, step_size: float, generator: torch.Generator | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ilyas et al.'s D_rand for every member: (x_adv (E, N, C, H, W), targets (E, N), success (E,)).

    Targets are uniform over all k classes (independent of y). The targeted attack is ``steps`` ℓ∞ sign
    steps that *descend* the cross-entropy to the target (FGSM of size ``step_size`` on the
    loss ``−CE(·, t)``), each followed by projection onto the ε-ball around the clean image
    and the [0, 1] box. ``success`` is the fraction of moved images the model assigns to t.
    """
    E = model.E
    N = x.shape[0] if x.dim() == 4 else x.shape[1]
    t_all = unfold(torch.randint(0, k, (E * N,), generator=generator).to(y.device), E)  # independent of y
    flat = Flat(model, E).eval()
    ball = Linf(eps)
    step = FGSM(Linf(step_size), loss=lambda out, tt: -F.cross_entropy(out, tt, reduction="none"))
    parts, hits = [], None
    mapped = large_blocks_mapped() if N > IMAGE_CHUNK else contextlib.nullcontext()
    with mapped:
        for s in range(0, N, IMAGE_CHUNK):  # a chunk of images at a time, every member on each (IMAGE_CHUNK)
            xe = fold(_expand(_images(x, s, s + IMAGE_CHUNK, 4), E))  # (E*n, C, H, W)
            t = fold(t_all[:, s:s + IMAGE_CHUNK].contiguous())
            x_adv = xe
            for _ in range(steps):
                x_adv = ball.project(xe, step(flat, x_adv, t, bounds=(0.0, 1.0))).clamp(0.0, 1.0)
            with torch.no_grad():
                h = unfold((flat(x_adv).argmax(-1) == t).float(), E).sum(1)
            hits = h if hits is None else hits + h
            parts.append(unfold(x_adv, E))
    x_adv = parts[0] if len(parts) == 1 else torch.cat(parts, 1)
    return x_adv, t_all, hits / N
