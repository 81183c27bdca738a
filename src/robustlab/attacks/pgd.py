"""Projected gradient descent (Madry et al. 2018), with restarts run as one batch.

Each step ``x ← Π_{ball ∩ box}(x + α · s(∇ₓL))`` with ``s = sign`` (ℓ∞) or ``g/‖g‖`` (ℓ2).
Per sample it keeps the worst case over every iterate (the start included) and every
restart: a misclassified iterate beats a correctly classified one, then the higher loss
wins (cross-entropy alone can rank a correct point above a misclassified one for k > 2).
Restarts are stacked into the batch, ``(N·R, ...)`` point-major, so they cost one pass,
not R, and :class:`robustlab.models.Flat` ensembles stay exact.

``early_stop=True`` stops attacking a row (sample × restart) at its first misclassified
iterate and drops it from the batch. Rows do not interact, so which samples end up
misclassified is unchanged — robust accuracy is the same, at a fraction of the cost on
a breakable model — but the returned point is then a misclassified iterate (the first, for
a plain model) rather than the highest-loss one (keep the default for adversarial
training). A :class:`robustlab.models.Flat` ensemble needs the same samples in every copy
(its rows are grouped by copy), so there a sample (× restart) leaves the batch in all
copies together, once every copy misclassifies it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch
from torch import nn

from ..config import ConfigError
from ..models.ensemble import Flat
from . import checks
from .base import Attack, Bounds, GradFn, _check_flag, _check_loss, gradient_fn
from .losses import correct, get_loss, is_binary, loss_grad_correct
from .threat import L2, Linf

__all__ = ["PGD"]


def _rank_offset(loss: object, out: torch.Tensor) -> float | None:
    """A constant c such that ``loss − c·[correct]`` ranks every misclassified row above
    every correctly classified one while keeping the loss order within each group, or None
    for a loss without such a bound (custom callables).

    Cross-entropy of a correct row is at most log k (its own class has probability >= 1/k);
    margin and logistic losses already put misclassified rows above correct ones.
    """
    if loss == "ce" and not is_binary(out):
        return math.log(out.shape[1]) + 1.0
    if loss in ("ce", "margin", "logistic"):
        return 1.0
    return None


def _ranked_loss_and_grad(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: object, *, grad: bool, check: bool,
    loss_fn: Callable | None = None, grad_fn: GradFn | None = None, saturation_safe: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Per row: the rank key, the input gradient (if ``grad``), correctness and the loss (with
    ``saturation_safe`` and cross-entropy, the log-odds ``log(1/p_y − 1)`` it ranks by instead).
    ``grad_fn``: :func:`~robustlab.attacks.base.gradient_fn` of the model and loss, if resolved."""
    loss_fn = loss_fn or get_loss(loss)
    if grad:
        out, value, g, ok = (grad_fn or gradient_fn(model, loss_fn))(x, y, check=check)
    else:
        with torch.no_grad():
            out = model(x)
            if check:
                checks.check_labels(out, y)
            closed = loss_grad_correct(loss_fn, out, y, grad=False)
            value, _, ok = closed if closed is not None else (loss_fn(out, y), None, correct(out, y))
        g = None
    offset = _rank_offset(loss, out)
    if saturation_safe and loss == "ce" and not is_binary(out):
        # rank by s = log(1/p_y − 1) = logsumexp_{j≠y} z_j − z_y, an increasing function of the
        # cross-entropy (softplus(s)) that does not round to 0 where the softmax saturates (the
        # cross-entropy does past a margin of about 17, and every iterate would then tie with the
        # start); a correct row has p_y >= 1/k, so s <= log(k − 1) there, and s >= 0 if misclassified
        yi = y[:, None]
        value = torch.logsumexp(out.scatter(1, yi, -math.inf), 1).sub_(out.gather(1, yi).squeeze(1))
        offset = math.log(out.shape[1] - 1) + 1.0
    if offset is None:  # lexicographic (misclassified, loss) folded into one float key
        key = torch.where(ok, torch.atan(value) - math.pi, torch.atan(value) + math.pi)
    else:
        key = torch.add(value, ok, alpha=-offset)  # one op per step
    return key, g, ok, value


def _feasible_box(xr: torch.Tensor, threat: Linf | L2, bounds: Bounds) -> tuple[torch.Tensor, ...]:
    """What :func:`_project` projects onto: for ℓ∞ the ball ∩ box, itself a box ``(lo, hi)``
    (one fused clamp per step); otherwise the ball's centres ``(xr,)``."""
    if not isinstance(threat, Linf):
        return (xr,)
    lo, hi = xr - threat.eps, xr + threat.eps
    if bounds is not None:
        lo.clamp_(min=bounds[0])
        hi.clamp_(max=bounds[1])
    return lo, hi


def _project(z: torch.Tensor, box: tuple[torch.Tensor, ...], threat: Linf | L2, bounds: Bounds) -> torch.Tensor:
    """``Π_{ball ∩ box}(z)``, a fresh tensor; ``box`` from :func:`_feasible_box`."""
    if isinstance(threat, Linf):
        return torch.clamp(z, box[0], box[1])
    z = threat.project(box[0], z)
    return z if bounds is None else z.clamp(bounds[0], bounds[1])


def _keep_better(best: torch.Tensor, x_adv: torch.Tensor, better: torch.Tensor, linf: bool) -> torch.Tensor:
    """``best ← where(better, x_adv, best)`` per row, in place; ``better`` 0./1., ``(M, 1, ...)``."""
    if linf:  # a lerp with weights in {0, 1} is exact on finite values, and unlike where
        # it is vectorised (~6x faster on CPU); l-inf iterates stay finite (sign(nan) = 0)
        return best.lerp_(x_adv, better)
    return torch.where(better > 0, x_adv, best, out=best)


def _rows_left(ok: torch.Tensor, copies: int) -> torch.Tensor | None:
    """With ``early_stop``, the indices of the rows still attacked once the misclassified ones
    (``ok`` False) leave, or None where every row stays. In a Flat ensemble of ``copies`` a
    column (one sample in every copy) leaves together, once no copy classifies it correctly."""
    live = ok if copies == 1 else ok.view(copies, -1).any(0).repeat(copies)
    if copies == 1 or not bool(live.all()):
        return live.nonzero().squeeze(1)
    return None


def _step(x_adv: torch.Tensor, g: torch.Tensor, step: float, threat: Linf | L2, box: tuple[torch.Tensor, ...],
          bounds: Bounds) -> torch.Tensor:
    """``x ← Π_{ball ∩ box}(x + α·s(g))``: for ℓ∞ in place in ``x_adv`` (and ``g``, ours to
    overwrite), otherwise a fresh tensor."""
    if isinstance(threat, Linf):  # x ← clamp(x + α·sign(g), lo, hi)
        x_adv.add_(g.sign_(), alpha=step)
        return torch.clamp(x_adv, box[0], box[1], out=x_adv)
    return _project(torch.add(x_adv, threat.steepest(g), alpha=step), box, threat, bounds)


@dataclasses.dataclass(frozen=True)
class PGD(Attack):
    """``PGD(Linf(eps))``: ``steps=10`` steps of ``step_size=2.5·eps/steps`` (``eps/4``) from a
    uniform random start in the ball, one restart, cross-entropy — usable as is, like
    ``torchattacks.PGD(model, eps=8/255)`` (``alpha=2/255 = eps/4``, 10 steps, random start).

    * ``steps``: gradient steps (0: only the start is scored).
    * ``step_size``: absolute, in input units; ``None`` (the default) means ``2.5·ε/steps``,
      the rule of Madry et al. 2018 (the steps together travel 2.5ε, so an iterate can cross
      the ball and come back); an explicit value is kept as given, and :meth:`with_eps` keeps
      its ratio to ε.
    * ``random_start``: start from a uniform draw in the ball (``threat.random_init``), drawn
      from ``generator`` when the call passes one, else from torch's global generator (set
      ``random_start=False`` for a deterministic attack without a generator).
    * ``restarts``: independent random starts run as one batch; per sample the worst case wins.
    * ``loss``: ce, margin, logistic or a callable ``(out, y) -> (N,)``; ``early_stop``: see
      the module docstring.
    * ``saturation_safe``: step along the loss's input gradient taken up to a positive factor
      per sample (:func:`~robustlab.attacks.losses.loss_grad_correct` with ``direction``), which
      a sign or normalised step does not see, and rank cross-entropy iterates by
      ``log(1/p_y − 1)``, which orders them as the cross-entropy does. In exact arithmetic the
      same attack; in float32 the plain one stalls where the softmax saturates (the gradient is
      exactly 0 past a margin of about 100, the cross-entropy 0 past about 17, so no iterate
      beats the start). Off by default, so the default attack's records stay as they were;
      adversarial training on confidently fitted data needs it (the patch CNN's PGD training:
      97 % of its training points had an all-zero gradient without it).
    """

    steps: int = 10
    step_size: float | None = None
    random_start: bool = True
    restarts: int = 1
    loss: str | Callable = "ce"
    early_stop: bool = False
    saturation_safe: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 0:
            raise ConfigError("steps", self.steps, "an integer >= 0")
        if self.step_size is not None and not (
                isinstance(self.step_size, (int, float)) and not isinstance(self.step_size, bool)
                and math.isfinite(self.step_size) and self.step_size >= 0):
            raise ConfigError("step_size", self.step_size, "None (2.5·eps/steps) or a finite number >= 0")
        if self.steps > 0 and self.step_size == 0 and self.threat.eps > 0:
            raise ConfigError("step_size", self.step_size, "a number > 0 when steps > 0")
        if isinstance(self.restarts, bool) or not isinstance(self.restarts, int) or self.restarts < 1:
            raise ConfigError("restarts", self.restarts, "an integer >= 1")
        if self.restarts > 1 and not self.random_start:
            raise ConfigError("restarts", self.restarts, "1 unless random_start=True (restarts from x are identical)")
        _check_loss(self.loss)
        _check_flag("saturation_safe", self.saturation_safe)

    @property
    def alpha(self) -> float:
        """The step size in input units: ``step_size``, or ``2.5·ε/steps`` where it is None."""
        if self.step_size is not None:
            return float(self.step_size)
        return 2.5 * self.threat.eps / self.steps if self.steps > 0 else 0.0

    def with_eps(self, eps: float) -> PGD:
        """Budget ``eps``; an explicit step size keeps its ratio to ε (``step_size · eps /
        self.eps``), the default stays ``2.5·eps/steps``."""
        if self.step_size is None or self.threat.eps == 0:
            step = self.step_size
        else:
            step = self.step_size * eps / self.threat.eps
        return dataclasses.replace(self, threat=type(self.threat)(eps), step_size=step)

    def _start(self, x: torch.Tensor, xr: torch.Tensor, box: tuple[torch.Tensor, ...], bounds: Bounds,
               generator: torch.Generator | None) -> torch.Tensor:
        """The first iterate of every row of ``xr`` (M, ...): a fresh tensor, updated in place later."""
        if not self.random_start:
            return xr.clone()  # never the caller's x
        R, N, threat = self.restarts, x.shape[0], self.threat
        # drawn restart-major, so restart 0 sees exactly the noise of a single run
        start = threat.random_init(x.repeat(R, *[1] * (x.ndim - 1)) if R > 1 else x, generator)  # row r·N + n
        if R > 1:
            start = start.view(R, N, *x.shape[1:]).transpose(0, 1).reshape(xr.shape)
        if isinstance(threat, Linf):  # projected in place: one clamp
            return torch.clamp(start, box[0], box[1], out=start)
        return _project(start, box, threat, bounds)

    def run(
        self,
        model: nn.Module,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        bounds: Bounds,
        generator: torch.Generator | None = None,
        **kw,
    ) -> torch.Tensor:
        R, N = self.restarts, x.shape[0]
        threat, linf = self.threat, isinstance(self.threat, Linf)
        ones = [1] * (x.ndim - 1)
        copies = model.E if isinstance(model, Flat) else 1  # early_stop drops columns of (E, rows/E)
        # point-major tiling, row n·R + r: every chunk of consecutive rows still belongs to
        # the same points, so models.Flat ensembles (rows grouped by copy) stay exact
        xr = x.repeat_interleave(R, dim=0) if R > 1 else x  # (M, ...), M = N·R
        ya = y.repeat_interleave(R, dim=0) if R > 1 else y
        M = xr.shape[0]
        box = _feasible_box(xr, threat, bounds)
        x_adv = self._start(x, xr, box, bounds, generator)
        best = x_adv.clone()  # the worst iterate so far, updated in place
        # one float per row ranks iterates: misclassified first, then by loss
        best_key = torch.full((M,), -math.inf, dtype=x.dtype, device=x.device)
        rows = torch.arange(M, device=x.device) if self.early_stop else None  # rows still attacked
        loss_fn, step = get_loss(self.loss), self.alpha
        grad_fn = gradient_fn(model, loss_fn, direction=self.saturation_safe)  # the route (closed form or autograd) is chosen once
        better = best_key.new_empty(M, *ones)  # 1. where a row's iterate beats its worst case so far
        better_rows = better.view(M)
        for t in range(self.steps + 1):
            # the last pass only scores the final iterate (no gradient needed)
            key, g, ok, _ = _ranked_loss_and_grad(model, x_adv, ya, self.loss, grad=t < self.steps,
                                                  check=t == 0, loss_fn=loss_fn, grad_fn=grad_fn,
                                                  saturation_safe=self.saturation_safe)
            if rows is None or rows.shape[0] == M:  # every row still attacked: in place
                torch.gt(key, best_key, out=better_rows)
                _keep_better(best, x_adv, better, linf)
                torch.fmax(best_key, key, out=best_key)  # fmax: a NaN key never wins
            else:  # the same arithmetic on the rows left
                bk = best_key[rows]
                better_left = (key > bk).to(x.dtype).view(-1, *ones)
                best.index_copy_(0, rows, _keep_better(best[rows], x_adv, better_left, linf))
                best_key.index_copy_(0, rows, torch.fmax(bk, key))
            if rows is not None and t < self.steps and not bool(ok.all()):  # drop rows misclassified now
                keep = _rows_left(ok, copies)
                if keep is not None:
                    if keep.numel() == 0:
                        break
                    rows, x_adv, g, ya = rows[keep], x_adv[keep], g[keep], ya[keep]
                    box = tuple(b[keep] for b in box)
            if t < self.steps:
                x_adv = _step(x_adv, g, step, threat, box, bounds)
        if R == 1:
            return best
        idx = best_key.view(N, R).nan_to_num(nan=-math.inf).argmax(1)  # worst restart per sample
        return best.view(N, R, *x.shape[1:])[torch.arange(N, device=x.device), idx]
