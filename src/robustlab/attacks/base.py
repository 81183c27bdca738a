"""The ``Attack`` base: it runs a subclass, then enforces the ε-ball and the input box itself.

"We don't really know what the attack returns" (foolbox): whatever ``run`` produces, the
base projects it onto the ball around ``x`` and clamps it to ``bounds``. The model runs in
eval mode (its mode restored afterwards), parameters are frozen while attacking (their
``.grad`` is never touched), inputs are never mutated, and input gradients come from
``torch.autograd.grad`` on per-sample losses — or, for a model with a closed-form
``output_and_vjp(x) -> (outputs, dz ↦ input gradient)`` (robustlab's patch CNN, and
``Flat`` around it) or a plain ``nn.Sequential`` of linear, convolution and ReLU layers, or a
module whose ``forward`` traces to such a chain (:mod:`robustlab.models.pullback`), from
that, whenever the loss's logit gradient is closed-form too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import nn

from ..config import ConfigError
from ..models.pullback import sequential_pullback
from . import checks
from .losses import LOSSES, closed_form, correct, is_binary, loss_grad_correct
from .threat import L2, Linf

__all__ = ["Attack", "loss_and_grad", "Bounds"]

Bounds = tuple[float, float] | None


def loss_and_grad(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    check: bool = False,
    direction: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-sample loss ``(N,)``, its input gradient (shape of ``x``) and correctness ``(N,)``.

    ``check=True`` runs the output / gradient sanity checks (one host sync each); ``direction``
    as in :func:`gradient_fn`.
    """
    _, loss, g, ok = forward_and_grad(model, x, y, loss_fn, check=check, direction=direction)
    return loss, g, ok


def forward_and_grad(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    check: bool = False,
    direction: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Detached outputs, per-sample loss ``(N,)``, its input gradient (shape of ``x``) and
    correctness ``(N,)``: ``gradient_fn(model, loss_fn, direction=direction)(x, y, check=check)``."""
    return gradient_fn(model, loss_fn, direction=direction)(x, y, check=check)


GradFn = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]


def gradient_fn(model: nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *,
                direction: bool = False) -> GradFn:
    """``(x, y, *, check=False) ↦ (outputs, loss, input gradient, correct)`` for a fixed model
    and loss, with the route chosen once (an iterative attack calls it every step).

    Built-in multi-class losses take their logit gradient in closed form
    (:func:`losses.loss_grad_correct`) and pull it back with the model's own
    ``output_and_vjp`` where it has one, else in closed form for a plain ``nn.Sequential`` or a
    ``forward`` that traces to one (:func:`~robustlab.models.pullback.sequential_pullback`; a
    traced chain's first outputs are checked against ``model(x)``), else with one
    ``autograd.grad(out, x, ·)``; other losses go through autograd of ``loss.sum()``.
    ``check=True`` runs the label, output and gradient sanity checks (one host sync each).
    ``direction=True``: the input gradient up to a positive factor per sample, for attacks that
    only use its sign or its normalised direction; a built-in loss then takes a logit gradient
    that cannot underflow (cross-entropy's on a saturated softmax: see
    :func:`losses.loss_grad_correct`).
    """
    closed = closed_form(loss_fn)
    pullback, confirm = None, False
    if closed is not None:
        pullback = getattr(model, "output_and_vjp", None)
        if pullback is None:
            pullback = sequential_pullback(model)
            # a custom forward traced to a chain: its first outputs are checked against the model's
            confirm = pullback is not None and type(model) is not nn.Sequential

    def grad(x: torch.Tensor, y: torch.Tensor, *, check: bool = False):
        nonlocal pullback, confirm
        result = None
        if pullback is not None:
            with torch.no_grad():  # closed-form pull-back, no graph
                pulled = pullback(x.detach())
                if pulled is not None and confirm:
                    confirm = False
                    if not _same_outputs(pulled[0], model(x.detach())):
                        pulled, pullback = None, None  # the trace missed something: autograd
                if pulled is not None:
                    z, vjp = pulled
                    if check:
                        checks.check_labels(z, y)
                    if z.ndim == 2 and not is_binary(z):
                        loss, dz, ok = closed(z, y, True, direction)
                        result = z, loss, vjp(dz), ok
                    else:  # binary scores have no closed-form loss here: autograd, from now on
                        pullback = None
        if result is None:
            result = _autograd_forward_and_grad(model, x, y, loss_fn, check, direction)
        if check:
            checks.check_outputs(result[0])
            checks.check_gradients(result[2])
        return result

    return grad


def _same_outputs(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to the rounding of another GEMM layout (a wrong chain is off by O(1))."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    scale = float(b.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).max()) if b.numel() else 0.0
    return torch.allclose(a, b, rtol=1e-3, atol=1e-3 * scale, equal_nan=True)


def _autograd_forward_and_grad(model, x, y, loss_fn, check: bool, direction: bool = False):
    x = x.detach().requires_grad_(True)
    out = model(x)
    if check:  # labels first: a bad label can crash the loss with a less helpful error
        checks.check_labels(out, y)
    z = out.detach()
    closed = loss_grad_correct(loss_fn, z, y, direction=direction)
    if closed is None:
        loss = loss_fn(out, y)
        (g,) = torch.autograd.grad(loss.sum(), x)
        return z, loss.detach(), g, correct(z, y)
    loss, dz, ok = closed
    # Σ out·dz pulls back exactly dz (its backward multiplies dz by 1.0), the same g as
    # grad(out, x, dz); a tensor grad_outputs makes torch import sympy on its first use,
    # 0.34 CPU-s in every worker process that attacks (dz contiguous: user Functions may .view() it)
    (g,) = torch.autograd.grad((out * dz.contiguous()).sum(), x)
    return z, loss, g, ok


def _check_loss(loss: object) -> None:
    if not callable(loss) and loss not in LOSSES:
        raise ConfigError("loss", loss, f"one of {', '.join(LOSSES)} or a callable (out, y) -> (N,)")


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(name, value, "True or False")


def _check_threat(threat: object) -> None:
    if not isinstance(threat, (Linf, L2)):
        raise ConfigError("threat", threat, "Linf(eps) or L2(eps)")


@dataclasses.dataclass(frozen=True)
class Attack:
    """Base of every attack: ``x_adv = attack(model, x, y, bounds=(0, 1))``.

    Subclasses implement ``run(model, x, y, *, bounds, generator, **kw)`` and may return any
    tensor of the shape of ``x``; ``__call__`` then projects it onto ``threat``'s ball around
    ``x`` and clamps it to ``bounds`` (``None``: unbounded inputs). ``ε = 0`` returns ``x``.
    """

    threat: Linf | L2

    def __post_init__(self) -> None:
        _check_threat(self.threat)

    @property
    def eps(self) -> float:
        return self.threat.eps

    def with_eps(self, eps: float) -> Attack:
        """The same attack with budget ``eps`` (PGD also rescales its step size; see there)."""
        return dataclasses.replace(self, threat=type(self.threat)(eps))

    def run(
        self,
        model: nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        bounds: Bounds,
        generator: torch.Generator | None,
        **kw,
    ) -> torch.Tensor:
        raise NotImplementedError

    def __call__(
        self,
        model: nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        bounds: Bounds = (0.0, 1.0),
        generator: torch.Generator | None = None,
        **kw,
    ) -> torch.Tensor:
        """Adversarial inputs, same shape as ``x``, inside the ball and the box.

        ``bounds`` defaults to the image box (0, 1); inputs outside it raise ``ValueError``
        (pass ``bounds=None`` for unbounded data). ``generator`` drives every random choice.
        """
        x0 = x.detach()
        checks.check_bounds(x0, bounds)
        if self.threat.eps == 0 or x0.shape[0] == 0:
            return x0.clone()
        with checks.eval_mode(model), checks.frozen_params(model), torch.enable_grad():
            x_adv = self.run(model, x0, y, bounds=bounds, generator=generator, **kw)
        if x_adv.shape != x0.shape:
            raise RuntimeError(f"{type(self).__name__}.run returned shape {tuple(x_adv.shape)}, expected {tuple(x0.shape)}")
        x_adv = self.threat.project(x0, x_adv.detach())  # a fresh tensor: clamped in place
        if bounds is not None:
            x_adv.clamp_(bounds[0], bounds[1])
        return x_adv
