"""Two-layer ReLU networks with a fixed top layer, as an ensemble of E independent copies.

    f(x) = (1/√m) Σ_{s=1}^m a_s ReLU(⟨w_s, x⟩ + b_s) + c          (lazy training, NeurIPS 2022, §2)

with the top layer fixed: ``a_s ∈ {±1}`` uniform, ``w_s(0) ~ N(0, I_d)``. The theorem has
no biases (``bias=False``: ``b_s = 0``, ``c = 0``). The authors' code has them, and so does
the default here: ``b_s(0) ~ N(0, 1)`` trained, and a fixed top bias ``c = ±1/√m``.

The lazy regime (lazy training, NeurIPS 2022, Def. 2.1) keeps every neuron near its initialisation,
``‖θ_s − θ_s(0)‖₂ ≤ r`` with ``r = C₀/√m`` (or an absolute radius ``R``), where the
neuron's incoming parameters ``θ_s = (w_s, b_s)`` include its bias when there is one (the
bias is the weight of a constant input, so the ball constrains the whole incoming vector).

Shapes: parameters carry a leading ensemble dimension E; the model maps ``(E, N, d)`` to
scores ``(E, N)`` (copy ``e`` sees only ``x[e]``). Wrap it in :class:`robustlab.models.Flat`
to present it to attacks as ``(E·N, d) -> (E·N,)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from .pullback import runs_as_written

__all__ = ["TwoLayerReLU", "neuron_offsets", "project_to_ball", "outside_ball"]

# floats of the work tensor of one pass of TwoLayerReLU.scores_along (16 MB in float32)
LINE_BUDGET = 2**22


class TwoLayerReLU(nn.Module):
    """E copies of ``f(x) = (1/√m) Σ_s a_s ReLU(⟨w_s, x⟩ + b_s) + c``; only ``w`` (and ``b``) train.

    Parameters: ``weight`` (E, m, d), ``bias`` (E, m) or None. Buffers: ``top`` (E, m) the
    fixed signs ``a_s``, ``top_bias`` (E,) the fixed ``c``, and ``weight0`` / ``bias0`` the
    initialisation that defines the lazy ball.
    """

    def __init__(self, weight: torch.Tensor, top: torch.Tensor, bias: torch.Tensor | None = None,
                 top_bias: torch.Tensor | None = None):
        super().__init__()
        E, m, _ = weight.shape
        if top.shape != (E, m):
            raise ValueError(f"top has shape {tuple(top.shape)}, expected {(E, m)}")
        self.weight = nn.Parameter(weight.clone())
        self.bias = nn.Parameter(bias.clone()) if bias is not None else None
        self.register_buffer("top", top.clone())
        self.register_buffer("top_bias", top_bias.clone() if top_bias is not None else torch.zeros(E, dtype=weight.dtype, device=weight.device))
        self.register_buffer("weight0", weight.detach().clone())
        self.register_buffer("bias0", bias.detach().clone() if bias is not None else None)

    @classmethod
    def init(cls, generators: Sequence[torch.Generator], *, m: int, d: int, bias: bool = True,
             scale: float = 1.0, dtype: torch.dtype = torch.float32,
             device: torch.device | str = "cpu") -> TwoLayerReLU:
        """Draw copy ``e`` from ``generators[e]`` alone, so a seed's network does not depend on
        which other seeds share its ensemble. ``w_s ~ N(0, I_d)``, ``a_s ~ U{±1}``,
        ``b_s ~ N(0, 1)`` and ``c = ±1/√m`` when ``bias``; ``scale`` multiplies the trained
        layer (``w_s`` and ``b_s``) after the draw, so it changes no random number."""
        if m < 1 or d < 1:
            raise ValueError(f"need m >= 1 and d >= 1, got m={m}, d={d}")
        if not scale > 0:
            raise ValueError(f"need scale > 0, got {scale}")
        Ws, As, Bs, Cs = [], [], [], []
        for g in generators:
            Ws.append(torch.randn(m, d, generator=g, dtype=torch.float64))
            As.append(torch.randint(0, 2, (m,), generator=g).to(torch.float64) * 2 - 1)
            if bias:
                Bs.append(torch.randn(m, generator=g, dtype=torch.float64))
                Cs.append((torch.randint(0, 2, (), generator=g).to(torch.float64) * 2 - 1) / math.sqrt(m))
        # drawn in float64 on the CPU, so the same seed gives the same network in any dtype/device
        kw = {"dtype": dtype, "device": device}
        return cls((torch.stack(Ws) * scale).to(**kw), torch.stack(As).to(**kw),
                   (torch.stack(Bs) * scale).to(**kw) if bias else None,
                   torch.stack(Cs).to(**kw) if bias else None)

    def select(self, idx: torch.Tensor) -> TwoLayerReLU:
        """A new ensemble of the copies ``idx`` (their current weights, init and top layer)."""
        sub = TwoLayerReLU(self.weight.detach()[idx], self.top[idx],
                           self.bias.detach()[idx] if self.bias is not None else None, self.top_bias[idx])
        sub.weight0 = self.weight0[idx]
        if self.bias0 is not None:
            sub.bias0 = self.bias0[idx]
        return sub

    @torch.no_grad()
    def put(self, idx: torch.Tensor, sub: TwoLayerReLU) -> None:
        """Write the trainable weights of ``sub`` (from :meth:`select`) back into copies ``idx``."""
        self.weight[idx] = sub.weight
        if self.bias is not None:
            self.bias[idx] = sub.bias

    @property
    def E(self) -> int:
        return self.weight.shape[0]

    @property
    def m(self) -> int:
        return self.weight.shape[1]

    @property
    def d(self) -> int:
        return self.weight.shape[2]

    def preactivation(self, x: torch.Tensor) -> torch.Tensor:
        """``⟨w_s, x_n⟩ + b_s``: (E, N, d) -> (E, N, m)."""
        h = torch.einsum("end,emd->enm", x, self.weight)
        if self.bias is not None:
            h = h + self.bias[:, None, :]
        return h

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scores (E, N) for inputs (E, N, d)."""
        if x.ndim != 3 or x.shape[0] != self.E or x.shape[2] != self.d:
            raise ValueError(f"expected inputs (E={self.E}, N, d={self.d}), got {tuple(x.shape)}")
        act = torch.relu(self.preactivation(x))  # (E, N, m)
        return torch.einsum("enm,em->en", act, self.top) / math.sqrt(self.m) + self.top_bias[:, None]

    def input_grad(self, x: torch.Tensor) -> torch.Tensor:
        """Closed-form ``∇ₓf = (1/√m) Σ_s a_s 1[⟨w_s,x⟩+b_s > 0] w_s``: (E, N, d) -> (E, N, d)."""
        on = (self.preactivation(x) > 0).to(x.dtype)  # (E, N, m)
        return torch.einsum("enm,em,emd->end", on, self.top, self.weight) / math.sqrt(self.m)

    def scores_along(self, x: torch.Tensor, u: torch.Tensor):
        """``f(x + t·u)`` along per-point directions, in closed form: ``x``, ``u`` (E, N, d) ->
        a function of steps ``t`` (E, N, G) that returns the scores (E, N, G).

        The pre-activations are affine in ``t``: ``⟨w_s, x + t u⟩ + b_s = z_s + t v_s`` with
        ``z = Wx + b`` and ``v = Wu`` computed once, so each evaluation costs ``O(m)`` per
        point and step instead of a forward pass's ``O(d·m)`` (a line search evaluates tens of
        steps per point). The same numbers as ``forward(x + t u)`` up to float rounding.
        None where ``forward`` is overridden, hooked or parametrised (then callers evaluate
        the model)."""
        if not runs_as_written(self, TwoLayerReLU):
            return None
        z = self.preactivation(x)  # (E, N, m)
        v = torch.einsum("end,emd->enm", u, self.weight)
        a, c, scale = self.top[:, None, None, :], self.top_bias[:, None, None], 1.0 / math.sqrt(self.m)
        E, N, m = z.shape
        cols = max(1, LINE_BUDGET // max(1, E * N * m))  # steps per pass: (E, N, cols, m) floats at most

        def at(t: torch.Tensor) -> torch.Tensor:
            parts = []
            for j in range(0, t.shape[2], cols):
                tj = t[:, :, j:j + cols, None]  # (E, N, g, 1)
                h = torch.addcmul(z[:, :, None, :], tj, v[:, :, None, :])  # (E, N, g, m)
                parts.append(h.relu_().mul_(a).sum(-1).mul_(scale).add_(c))
            return torch.cat(parts, 2)

        return at


def neuron_offsets(model: TwoLayerReLU) -> torch.Tensor:
    """``‖θ_s − θ_s(0)‖₂`` per neuron, θ_s = (w_s, b_s): (E, m)."""
    return _weight_offsets(model)[1]


def _weight_offsets(model: TwoLayerReLU) -> tuple[torch.Tensor, torch.Tensor]:
    """``w − w(0)`` (E, m, d), a fresh tensor, and :func:`neuron_offsets` (E, m)."""
    # (contiguous first: a training loop may hold the weight transposed in memory, and the
    # sum's bits depend on the layout)
    diff = model.weight.contiguous() - model.weight0
    sq = diff.pow(2).sum(-1)
    if model.bias is not None:
        sq = sq + (model.bias - model.bias0).pow(2)
    return diff, sq.sqrt()


def _radius(radius: float | torch.Tensor, model: TwoLayerReLU) -> torch.Tensor:
    r = torch.as_tensor(radius, dtype=model.weight.dtype, device=model.weight.device)
    return r.expand(model.E) if r.ndim == 0 else r  # (E,)


def outside_ball(model: TwoLayerReLU, radius: float | torch.Tensor, *, rtol: float = 1e-5) -> torch.Tensor:
    """Which copies have at least one neuron outside its ball: (E,) bool.

    ``radius`` is a scalar or one radius per copy (E,). A relative tolerance absorbs the
    rounding of a projection that put a neuron exactly on the sphere.
    """
    r = _radius(radius, model)
    return (neuron_offsets(model) > r[:, None] * (1 + rtol)).any(dim=1)


@torch.no_grad()
def project_to_ball(model: TwoLayerReLU, radius: float | torch.Tensor) -> None:
    """Project every neuron back onto its ball, in place (lazy training, NeurIPS 2022, Alg. 1):
    ``θ_s ← θ_s(0) + (θ_s − θ_s(0)) · min(1, r / ‖θ_s − θ_s(0)‖)``."""
    r = _radius(radius, model)
    # the weight offsets are kept for the update: every minibatch step of adversarial
    # training projects, so one pass less over the weights
    diff, dist = _weight_offsets(model)  # (E, m, d), (E, m)
    scale = (r[:, None] / dist.clamp_min(torch.finfo(dist.dtype).tiny)).clamp(max=1.0)  # (E, m)
    model.weight.copy_(diff.mul_(scale[..., None]).add_(model.weight0))  # θ(0) + (θ − θ(0))·scale
    if model.bias is not None:
        model.bias.copy_(model.bias0 + (model.bias - model.bias0) * scale)
