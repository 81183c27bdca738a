"""The two-layer patch CNN of feature learning, ICLR 2025, as an ensemble of E independent copies.

feature learning, ICLR 2025, Sec. 2 (model): with weights shared across patches and a fixed second layer,

    F_i(X) = Σ_{r∈[m]} Σ_{p∈[P]} σ̃(⟨w_{i,r}, x_p⟩),   i ∈ [k],   prediction argmax_i F_i,

where σ̃ is the smoothed ReLU with parameters ``q ≥ 1`` (the theory takes q ≥ 3), ``ρ > 0``:

    σ̃(z) = 0                    z ≤ 0
           z^q / (q ρ^{q-1})     0 ≤ z ≤ ρ
           z − (1 − 1/q) ρ       z ≥ ρ        (value and slope continuous at ρ).

Plain ReLU and GELU are options (a reviewer's question). Weights ``w_{i,r} ~ N(0, σ₀² I_d)``
with a small σ₀ so training starts in the polynomial part.

Shapes: weights ``W`` (E, k, m, d); input (E, N, P, d) → logits (E, N, k). Present the
ensemble to attacks with :class:`robustlab.models.Flat`.

Pre-activations are laid out (E, k·m, N·P) (:meth:`PatchCNN.preactivations_t`): the batched
GEMM ``W (E, k·m, d) @ xᵀ (E, d, N·P)`` runs about twice as fast on CPU as ``x @ Wᵀ`` with its
8-wide output, and the weight gradient ``(E, k·m, N·P) @ (E, N·P, d)`` avoids the strided
``xᵀ @ g`` that autograd takes for the other layout (5× slower, measured at the quick scale).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import nn

from ..config import ConfigError

__all__ = ["smoothed_relu", "smoothed_relu_grad", "PatchCNN", "ACTIVATIONS"]

ACTIVATIONS = ("smooth_relu", "relu", "gelu")


class _SmoothedReLU(torch.autograd.Function):
    """σ̃ with a hand-written backward: one fused pass each way instead of autograd's chain of
    clamp / pow / where kernels (the activation is most of the model's elementwise work)."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, q: float, rho: float) -> torch.Tensor:
        ctx.save_for_backward(z)
        ctx.q, ctx.rho = q, rho
        zc = z.clamp(0.0, rho)
        return torch.where(z >= rho, z - (1.0 - 1.0 / q) * rho, zc.pow(q) / (q * rho ** (q - 1)))

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (z,) = ctx.saved_tensors
        return grad * smoothed_relu_grad(z, ctx.q, ctx.rho), None, None


def smoothed_relu(z: torch.Tensor, q: float, rho: float) -> torch.Tensor:
    """σ̃(z) of feature learning, ICLR 2025, elementwise (the custom backward is used whenever z needs a gradient)."""
    if torch.is_grad_enabled() and z.requires_grad:
        return _SmoothedReLU.apply(z, float(q), float(rho))
    zc = z.clamp(0.0, rho)
    return torch.where(z >= rho, z - (1.0 - 1.0 / q) * rho, zc.pow(q) / (q * rho ** (q - 1)))


def smoothed_relu_grad(z: torch.Tensor, q: float, rho: float) -> torch.Tensor:
    """σ̃'(z) in closed form: (z/ρ)^{q-1} on (0, ρ), 1 above, 0 at and below 0."""
    poly = torch.where(z > 0, (z.clamp(0.0, rho) / rho).pow(q - 1), torch.zeros_like(z))
    return torch.where(z >= rho, torch.ones_like(z), poly)


class PatchCNN(nn.Module):
    """``F(X)`` for E independent copies: (E, N, P, d) → (E, N, k)."""

    def __init__(self, E: int, k: int, m: int, d: int, *, activation: str = "smooth_relu",
                 q: float = 3.0, rho: float = 1.0, sigma0: float = 0.01,
                 generators: Sequence[torch.Generator] | None = None,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ConfigError("activation", activation, "one of " + ", ".join(ACTIVATIONS))
        if not q >= 1:
            raise ConfigError("q", q, ">= 1")
        if not rho > 0:
            raise ConfigError("rho", rho, "> 0")
        if not (sigma0 >= 0 and math.isfinite(sigma0)):
            raise ConfigError("sigma0", sigma0, "a finite value >= 0")
        for name, val in (("E", E), ("k", k), ("m", m), ("d", d)):
            if val < 1:
                raise ConfigError(name, val, ">= 1")
        self.E, self.k, self.m, self.d = E, k, m, d
        self.activation, self.q, self.rho, self.sigma0 = activation, float(q), float(rho), float(sigma0)
        if generators is not None and len(generators) != E:
            raise ValueError(f"need one generator per ensemble member: got {len(generators)} for E={E}")
        # each copy draws from its own generator so that copy e does not depend on E
        draws = [torch.randn(k, m, d, generator=g, dtype=dtype) for g in generators] if generators \
            else [torch.randn(k, m, d, dtype=dtype) for _ in range(E)]
        self.W = nn.Parameter((sigma0 * torch.stack(draws)).to(device))  # (E, k, m, d)

    def act(self, z: torch.Tensor) -> torch.Tensor:
        if self.activation == "smooth_relu":
            return smoothed_relu(z, self.q, self.rho)
        if self.activation == "relu":
            return torch.relu(z)
        return torch.nn.functional.gelu(z)

    def act_and_grad_(self, z: torch.Tensor, grad: torch.Tensor, work: torch.Tensor) -> None:
        """σ(z) written over ``z`` and σ'(z) into ``grad`` (``work``: scratch of z's shape).

        No autograd and no allocation (for the smoothed ReLU): with ``t = clamp(z, 0, ρ)/ρ``,
        ``σ̃'(z) = t^{q-1}`` and ``σ̃(z) = relu(z − ρ) + (ρ/q) t^q``, which is the three
        pieces of σ̃ at once (above ρ, t = 1: ``z − ρ + ρ/q``). Derivatives at the kinks follow
        autograd's: 0 at z = 0 for ReLU and the smoothed ReLU.
        """
        if self.activation == "smooth_relu":
            q, rho = self.q, self.rho
            t = torch.clamp(z, 0.0, rho, out=work)
            if rho != 1.0:
                t.div_(rho)
            if q == 1.0:  # t^0 would be 1 at z <= 0
                torch.sign(z, out=grad).clamp_min_(0.0)
            else:
                torch.pow(t, q - 1.0, out=grad)
            z.sub_(rho).clamp_min_(0.0).addcmul_(t, grad, value=rho / q)
        elif self.activation == "relu":
            torch.sign(z, out=grad).clamp_min_(0.0)
            z.clamp_min_(0.0)
        else:
            grad.copy_(torch.ops.aten.gelu_backward(torch.ones_like(z), z))
            z.copy_(torch.nn.functional.gelu(z))

    def preactivations_t(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """⟨w_{i,r}, x_{n,p}⟩: (E, N, P, d) → (E, k·m, N·P), one batched GEMM (``out``: without grad)."""
        E, N, P, d = x.shape
        return torch.bmm(self.W.reshape(E, self.k * self.m, d), x.reshape(E, N * P, d).transpose(1, 2), out=out)

    def logits_from_act(self, a: torch.Tensor, N: int) -> torch.Tensor:
        """Σ_{r,p} of activations (E, k·m, N·P) → logits (E, N, k)."""
        E, P = self.E, a.shape[-1] // N
        return a.view(E, self.k, self.m, N, P).sum(-1).sum(2).transpose(1, 2)

    def preactivations(self, x: torch.Tensor) -> torch.Tensor:
        """⟨w_{i,r}, x_p⟩: (E, N, P, d) → (E, N, P, k, m) (a permuted view of the GEMM's layout)."""
        E, N, P, _ = x.shape
        return self.preactivations_t(x).view(E, self.k, self.m, N, P).permute(0, 3, 4, 1, 2)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.dim() != 4 or x.shape[0] != self.E or x.shape[-1] != self.d:
            raise ValueError(f"PatchCNN expects (E={self.E}, N, P, d={self.d}) input, got {tuple(x.shape)}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        return self.logits_from_act(self.act(self.preactivations_t(x)), x.shape[1]).contiguous()  # (E, N, k)

    @torch.no_grad()
    def output_and_vjp(self, x: torch.Tensor):
        """Logits (E, N, k) at ``x`` and the pull-back ``dz ↦ Σ_i dz_i ∂F_i/∂x`` in closed form.

        ``∂F_i/∂x_p = Σ_r σ'(⟨w_{i,r}, x_p⟩) w_{i,r}``: σ and σ' come from one fused pass
        (:meth:`act_and_grad_`), and the pull-back is one batched GEMM
        ``(E, N·P, k·m) @ W (E, k·m, d)``. Attacks use it instead of autograd
        (:func:`robustlab.attacks.base.forward_and_grad`).
        """
        self._check_input(x)
        E, N, P, d = x.shape
        k, m = self.k, self.m
        z = self.preactivations_t(x)  # (E, k·m, N·P)
        s = torch.empty_like(z)
        self.act_and_grad_(z, s, torch.empty_like(z))  # z <- σ(z), s <- σ'(z)
        out = self.logits_from_act(z, N).contiguous()

        @torch.no_grad()
        def vjp(dz: torch.Tensor) -> torch.Tensor:
            g = s.view(E, k, m, N, P) * dz.transpose(1, 2).reshape(E, k, 1, N, 1)
            return torch.bmm(g.view(E, k * m, N * P).transpose(1, 2), self.W.reshape(E, k * m, d)).view(E, N, P, d)

        return out, vjp

    def members(self, idx: Sequence[int]) -> PatchCNN:
        """Copies ``idx`` as an ensemble of ``len(idx)``, in that order (detached copies), as
        :meth:`robustlab.models.DeepMLP.members`: for evaluating an ensemble a few copies at a time."""
        sub = copy.copy(self)  # the architecture's fields; the module state is rebuilt below
        nn.Module.__init__(sub)
        sub.W = nn.Parameter(self.W.detach()[list(idx)].clone())
        sub.E = len(idx)
        return sub.train(self.training)

    @torch.no_grad()
    def feature_alignment(self, features: torch.Tensor) -> torch.Tensor:
        """⟨w_{i,r}, f_i⟩ per class and neuron, for features (E, k, d): returns (E, k, m)."""
        return torch.einsum("ekmd,ekd->ekm", self.W, features.to(self.W.dtype))
