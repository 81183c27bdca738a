"""Thm 1's own regime, exactly: the network linearised at initialisation and solved in closed form.

Lazy training converges to the network linearised at its initialisation (Chizat et al. 2019: the
α-scaled model as α → ∞, κ → 0 at any width), trained to the minimum-norm least-squares fit of
the training targets: with ``J`` the Jacobian of the training outputs in the parameters,

    Δθ = J⁺ r = Jᵀ Θ⁺ r,    Θ = J Jᵀ (the empirical NTK, ``n·k × n·k``),    r = Y − f₀(X),
    f_lin(x) = f₀(x) + J(x) Δθ = f₀(x) + Θ(x, X) Θ⁺ r   (kernel regression on the residual).

``Θ`` is built without ``J`` (``n·k × P`` would not fit at width 1024): for a bias-free ReLU MLP,
``∂f_i/∂W_l[a, b] = h_{l−1}[a] · g_l[i, b]`` (the layer's input times the output's gradient at
its pre-activation), so ``Θ = Σ_l (H_{l−1} H_{l−1}ᵀ) ⊗_rows (G_l G_lᵀ)``. ``Δθ = Jᵀ α`` is one
backward pass with ``α`` as the cotangent; the input Jacobian of ``f_lin`` comes from
:mod:`torch.func` (``jacrev`` in x of ``f₀ + jvp_θ``). Everything in float64.
"""

from __future__ import annotations

import math

import torch

__all__ = ["mlp", "ntk", "solve", "fitted_share", "linearised", "input_jacobian_sq", "RCOND"]

# eigenvalues of Θ below RCOND · λ_max are treated as 0 (the pseudo-inverse): float64 keeps
# ~1e-16 relative accuracy, and Θ's condition number at the interpolation width reaches ~1e8
# on the quick data, so 1e-10 separates the numerical null space from the smallest real mode
RCOND = 1e-10


def mlp(ws: list[torch.Tensor] | tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
    """``f(x) = W_L σ(… σ(W_1 x))`` for one network, weights ``(fan_in, fan_out)``, ``x (N, d)``."""
    h = x
    for W in ws[:-1]:
        h = torch.relu(h @ W)
    return h @ ws[-1]


def _factors(ws: list[torch.Tensor], x: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer ``l``: its input ``h_{l−1}`` ``(N, fan_in)`` and the gradients of the k outputs
    at its pre-activation ``g_l`` ``(N, k, fan_out)`` (ReLU's derivative at 0 taken as 0)."""
    hs, masks, h = [x], [], x
    for W in ws[:-1]:
        z = h @ W
        masks.append((z > 0).to(x.dtype))
        h = torch.relu(z)
        hs.append(h)
    k = ws[-1].shape[1]
    g = torch.eye(k, dtype=x.dtype).expand(len(x), k, k)  # output layer: ∂f_i/∂z_L = e_i
    out = [None] * len(ws)
    out[-1] = (hs[-1], g)
    for l in range(len(ws) - 2, -1, -1):
        g = (g @ ws[l + 1].T) * masks[l][:, None, :]
        out[l] = (hs[l], g)
    return out  # type: ignore[return-value]


def ntk(ws: list[torch.Tensor], x: torch.Tensor, x2: torch.Tensor | None = None) -> torch.Tensor:
    """The empirical NTK ``Θ[(n, i), (n', j)] = ⟨∂f_i(x_n)/∂θ, ∂f_j(x2_n')/∂θ⟩``,
    ``(N·k, N2·k)`` with rows ordered point-major (``n·k + i``)."""
    fa = _factors(ws, x)
    fb = fa if x2 is None else _factors(ws, x2)
    k = ws[-1].shape[1]
    out = None
    for (ha, ga), (hb, gb) in zip(fa, fb):
        hh = (ha @ hb.T).repeat_interleave(k, 0).repeat_interleave(k, 1)
        gg = ga.reshape(len(ha) * k, -1) @ gb.reshape(len(hb) * k, -1).T
        out = hh * gg if out is None else out + hh * gg
    return out


def fitted_share(lam: torch.Tensor, n: int, *, steps: int, lr: float, momentum: float = 0.0) -> torch.Tensor:
    """Per NTK eigenvalue ``λ``, the share ``1 − ρ_T(λ)`` of the training residual's component along it that
    ``steps`` full-batch steps of heavy-ball gradient descent fit on the linearised network (PyTorch's SGD: ``b ←
    μ b + g``, ``θ ← θ − lr b``; loss the mean over the ``n`` points of ½‖f − y‖², so a step moves the outputs
    by ``−(lr/n) Θ b``): per mode ``β_{t+1} = μ β_t + e_t``, ``e_{t+1} = e_t − (lr λ / n) β_{t+1}``, ``ρ_T = e_T /
    e_0``. 1 − ρ_T → 1 as T → ∞ for a stable rate (the min-norm solve)."""
    h = lr * lam / n
    beta, e = torch.zeros_like(lam), torch.ones_like(lam)
    for _ in range(steps):
        beta = momentum * beta + e
        e = e - h * beta
    return 1.0 - e


def solve(ws: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, *, rcond: float = RCOND, steps: int = 0,
          lr: float = 0.0, momentum: float = 0.0) -> tuple[list[torch.Tensor], dict[str, float]]:
    """The minimum-norm least-squares step ``Δθ = Jᵀ Θ⁺ (Y − f₀(X))`` per layer, and facts about
    the solve (``rank`` of Θ kept, its smallest kept eigenvalue, ``|Δθ| / |θ₀|``).

    ``steps > 0``: instead the step that ``steps`` full-batch (heavy-ball) gradient steps at ``lr`` take on
    the linearised network from Δθ = 0, ``Δθ_T = Jᵀ U diag((1 − ρ_T(λ)) / λ) Uᵀ r`` (:func:`fitted_share`):
    the α-scaled network's limit as α → ∞ at the same steps (lazy training, Chizat et al. 2019)."""
    ws = [w.detach() for w in ws]
    r = (y - mlp(ws, x)).reshape(-1)
    theta = ntk(ws, x)
    lam, u = torch.linalg.eigh(theta)
    keep = lam > rcond * lam.max().clamp_min(torch.finfo(lam.dtype).tiny)
    gain = 1.0 / lam[keep] if not steps else \
        fitted_share(lam[keep], len(x), steps=steps, lr=lr, momentum=momentum) / lam[keep]
    alpha = u[:, keep] @ ((u[:, keep].T @ r) * gain)
    wr = [w.clone().requires_grad_(True) for w in ws]
    out = mlp(wr, x)
    grads = torch.autograd.grad((out * alpha.reshape(out.shape)).sum(), wr)  # Jᵀ α, layer by layer
    dws = [g.detach() for g in grads]
    norm0 = sum(float(w.pow(2).sum()) for w in ws)
    shift = math.sqrt(sum(float(d.pow(2).sum()) for d in dws) / norm0) if norm0 > 0 else 0.0
    return dws, {"rank": int(keep.sum()), "size": int(len(lam)),
                 "lambda_min_kept": float(lam[keep].min()) if keep.any() else None, "param_shift": shift}


def linearised(ws: list[torch.Tensor], dws: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``f_lin(x) = f₀(x) + J(x) Δθ`` ``(N, k)``: the forward pass with its tangent in the
    direction ``Δθ`` carried beside it (what ``torch.func.jvp`` computes, ReLU's derivative at 0
    taken as 0; written out, so that ``jacrev`` over it is a plain backward pass)."""
    h, hd = x, None
    for W, dW in zip(ws[:-1], dws[:-1]):
        z = h @ W
        on = (z > 0).to(x.dtype)
        zd = h @ dW if hd is None else hd @ W + h @ dW
        h, hd = torch.relu(z), zd * on
    return h @ ws[-1] + hd @ ws[-1] + h @ dws[-1]


def input_jacobian_sq(ws: list[torch.Tensor], dws: list[torch.Tensor], x: torch.Tensor, *,
                      chunk: int = 512) -> torch.Tensor:
    """``‖∂f_lin/∂x‖_F²`` at every point of ``x`` ``(N,)``, from :mod:`torch.func`: the points
    do not interact, so ``jacrev`` of the outputs summed over the points gives every point's
    Jacobian at once (k backward passes per chunk)."""
    def summed(xc: torch.Tensor) -> torch.Tensor:
        return linearised(ws, dws, xc).sum(0)  # (k,)
    return torch.cat([torch.func.jacrev(summed)(x[i:i + chunk]).pow(2).sum((0, 2))
                      for i in range(0, len(x), chunk)])
