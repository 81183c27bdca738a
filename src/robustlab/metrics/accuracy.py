"""Clean and robust accuracy, accuracy-vs-ε curves, margins and input-gradient norms.

Robust accuracy is the per-sample worst case: a point counts as robust only if it is
classified correctly on its own *and* under every attack in the list (AutoAttack habit).
Models are evaluated in eval mode (mode restored); a model found in train mode is warned
about once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..attacks import checks
from ..attacks.base import Attack, Bounds
from ..attacks.losses import correct, get_loss, is_binary, scores
from ..attacks.losses import margins as _margins
from ..attacks.threat import per_sample_norm
from ..models.ensemble import Flat

__all__ = ["accuracy", "robust_accuracy", "robust_correct", "accuracy_vs_eps", "margins", "input_grad_norm"]


def _chunks(n: int, batch_size: int | None, model: nn.Module | None = None) -> list[slice]:
    if batch_size and batch_size < n and isinstance(model, Flat):
        raise ValueError("batch_size would split a models.Flat ensemble's rows across copies; leave it None")
    b = n if not batch_size else batch_size
    return [slice(i, min(i + b, n)) for i in range(0, n, max(b, 1))] or [slice(0, 0)]


@torch.no_grad()
def _outputs(model: nn.Module, x: torch.Tensor, batch_size: int | None) -> torch.Tensor:
    return torch.cat([model(x[s]) for s in _chunks(x.shape[0], batch_size, model)])


def _mean(b: torch.Tensor) -> float:
    return float(b.float().mean()) if b.numel() else float("nan")


def accuracy(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int | None = None, per_sample: bool = False
) -> float | torch.Tensor:
    """Fraction classified correctly (binary: ``sign f == y``; multi-class: argmax).

    ``per_sample=True`` returns the boolean ``(N,)`` instead.
    """
    checks.check_train_mode(model)
    with checks.eval_mode(model):
        out = _outputs(model, x, batch_size)
    checks.check_labels(out, y)
    checks.check_outputs(out)
    ok = correct(out, y)
    return ok if per_sample else _mean(ok)


def robust_correct(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    attacks: Attack | Sequence[Attack],
    *,
    bounds: Bounds = (0.0, 1.0),
    generator: torch.Generator | None = None,
    batch_size: int | None = None,
    early_stop: bool = False,
    **kw,
) -> torch.Tensor:
    """Boolean ``(N,)``: correct on ``x`` and on every attack's ``x_adv`` (per-sample worst case).

    ``early_stop=True`` lets attacks that support it (PGD) stop per sample at the first
    misclassified iterate: the outcome per sample is the same, the cost lower (about 2x
    once most points break; for a :class:`robustlab.models.Flat` ensemble a sample stops
    once every copy misclassifies it). ``batch_size`` splits the points into chunks (not
    for ``Flat``, whose rows must stay with their copies). Extra keywords (e.g. ``mask=`` for :class:`FeatureDirection`) go to every
    attack.
    """
    attacks = [attacks] if isinstance(attacks, Attack) else list(attacks)
    if early_stop:
        attacks = [
            dataclasses.replace(a, early_stop=True) if getattr(a, "early_stop", True) is False else a
            for a in attacks
        ]
    checks.check_train_mode(model)
    ok = accuracy(model, x, y, batch_size=batch_size, per_sample=True)
    with checks.eval_mode(model):
        for attack in attacks:
            for s in _chunks(x.shape[0], batch_size, model):
                kws = {k: (v[s] if isinstance(v, torch.Tensor) and v.shape[:1] == x.shape[:1] else v) for k, v in kw.items()}
                x_adv = attack(model, x[s], y[s], bounds=bounds, generator=generator, **kws)
                with torch.no_grad():
                    ok[s] &= correct(model(x_adv), y[s])
    return ok


def robust_accuracy(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    attacks: Attack | Sequence[Attack],
    *,
    bounds: Bounds = (0.0, 1.0),
    generator: torch.Generator | None = None,
    batch_size: int | None = None,
    per_sample: bool = False,
    early_stop: bool = False,
    **kw,
) -> float | torch.Tensor:
    """Robust accuracy: mean over points of "correct on x and under every attack".

    ``bounds`` defaults to (0, 1); pass ``None`` for unbounded data. ``per_sample=True``
    returns the boolean ``(N,)``. ``early_stop``: see :func:`robust_correct`.
    """
    ok = robust_correct(
        model, x, y, attacks, bounds=bounds, generator=generator, batch_size=batch_size, early_stop=early_stop, **kw
    )
    return ok if per_sample else _mean(ok)


def accuracy_vs_eps(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    attack: Attack | Sequence[Attack] | Callable[[float], Attack | Sequence[Attack]],
    eps: Sequence[float],
    *,
    bounds: Bounds = (0.0, 1.0),
    generator: torch.Generator | None = None,
    batch_size: int | None = None,
    cumulative: bool = True,
    early_stop: bool = False,
    **kw,
) -> list[float]:
    """Robust accuracy at each budget in ``eps`` (ascending), one value per ε.

    ``attack`` is an attack (or list) used as a template via ``with_eps`` (PGD keeps its
    step size's ratio to ε), or a callable ``eps -> attack(s)``. With ``cumulative=True``
    a point broken at a smaller ε counts as broken at every larger ε (the smaller ball lies
    inside the larger one, so this is still a valid attack), which makes the curve
    non-increasing by construction rather than by luck.
    """
    eps = [float(e) for e in eps]
    if cumulative and any(b < a for a, b in zip(eps, eps[1:])):
        raise ValueError("eps must be ascending when cumulative=True")

    def make(e: float) -> list[Attack]:
        if callable(attack) and not isinstance(attack, Attack):
            a = attack(e)
        else:
            a = attack
        a = [a] if isinstance(a, Attack) else list(a)
        return a if callable(attack) and not isinstance(attack, Attack) else [t.with_eps(e) for t in a]

    alive = None
    accs = []
    for e in eps:
        ok = robust_correct(
            model, x, y, make(e), bounds=bounds, generator=generator, batch_size=batch_size, early_stop=early_stop, **kw
        )
        alive = ok if alive is None or not cumulative else alive & ok
        accs.append(_mean(alive))
    return accs


def margins(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int | None = None) -> torch.Tensor:
    """Margins ``(N,)``: ``y f(x)`` (binary) or ``z_y − max_{j≠y} z_j``; positive = correct."""
    with checks.eval_mode(model):
        return _margins(_outputs(model, x, batch_size), y)


def input_grad_norm(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor | None = None,
    *,
    loss: str | Callable = "ce",
    p: float = 2.0,
) -> torch.Tensor:
    """Per-sample input-gradient norms ``‖∇ₓ h(x)‖_p``, ``(N,)``.

    ``h = f`` for a binary model when ``y`` is None (the lazy-training paper's ``‖∇ₓ f‖``); otherwise ``h`` is
    the per-sample ``loss`` at labels ``y``.
    """
    with checks.eval_mode(model), checks.frozen_params(model), torch.enable_grad():
        xg = x.detach().clone().requires_grad_(True)
        out = model(xg)
        if y is None:
            if not is_binary(out):
                raise ValueError("input_grad_norm without labels needs a binary model (N,) or (N, 1)")
            h = scores(out)
        else:
            h = get_loss(loss)(out, y)
        (g,) = torch.autograd.grad(h.sum(), xg)
    checks.check_gradients(g)
    return per_sample_norm(g, p)
