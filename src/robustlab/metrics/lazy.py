"""How far training moved the weights: the lazy-training ratio and the per-neuron distance.

``κ = ‖θ − θ₀‖₂ / ‖θ₀‖₂`` over all parameters (width-depth-init, NeurIPS 2022), and the lazy-training paper's lazy-ball radius
``max_s ‖w_s − w_s(0)‖₂`` over the neurons (rows) of a weight matrix (lazy training, NeurIPS 2022, Def. 2.1).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

__all__ = ["lazy_ratio", "neuron_distance"]

Params = nn.Module | Mapping[str, torch.Tensor]


def _params(p: Params, trainable_only: bool) -> dict[str, torch.Tensor]:
    if isinstance(p, nn.Module):
        named = dict(p.named_parameters())
        if trainable_only and any(t.requires_grad for t in named.values()):
            named = {k: t for k, t in named.items() if t.requires_grad}
        return {k: t.detach() for k, t in named.items()}
    return {k: t.detach() for k, t in p.items()}


@torch.no_grad()
def lazy_ratio(
    model: Params,
    model_at_init: Params,
    *,
    per_layer: bool = False,
    ensemble: bool = False,
    trainable_only: bool = True,
) -> float | torch.Tensor | dict[str, float | torch.Tensor]:
    """``‖θ − θ₀‖₂ / ‖θ₀‖₂`` (the width-depth-init paper's κ).

    Args:
        model, model_at_init: modules (or name -> tensor mappings) with the same parameter names.
        per_layer: return ``{name: ratio}`` per parameter tensor instead of one number.
        ensemble: every parameter has a leading ensemble dim ``E``; norms run over all other
            dims and the result is an ``(E,)`` tensor (or a dict of them).
        trainable_only: for modules, use only parameters with ``requires_grad`` (a fixed
            top layer never moves and would only dilute κ); all of them if none requires grad.
    """
    now, init = _params(model, trainable_only), _params(model_at_init, False)
    missing = [k for k in now if k not in init]
    if missing:
        raise ValueError(f"model_at_init lacks parameters {missing}")
    if not now:
        raise ValueError("lazy_ratio: the model has no parameters")

    def sq(t: torch.Tensor) -> torch.Tensor:  # squared norm: scalar, or (E,) for ensembles
        t = t.double()
        return t.reshape(t.shape[0], -1).pow(2).sum(1) if ensemble else t.pow(2).sum()

    num = {k: sq(now[k] - init[k].to(now[k].device)) for k in now}
    den = {k: sq(init[k]) for k in now}
    if per_layer:
        out = {k: (num[k] / den[k]).sqrt() for k in now}
        return {k: (v.float() if ensemble else float(v)) for k, v in out.items()}
    r = (sum(num.values()) / sum(den.values())).sqrt()
    return r.float() if ensemble else float(r)


@torch.no_grad()
def neuron_distance(W: torch.Tensor, W0: torch.Tensor, *, per_neuron: bool = False) -> float | torch.Tensor:
    """``max_s ‖w_s − w_s(0)‖₂`` over rows ``s`` of ``W (m, d)``; with a leading ensemble dim
    ``W (E, m, d)`` the result is ``(E,)``. ``per_neuron=True`` returns the row distances
    ``(m,)`` / ``(E, m)`` instead of their maximum.
    """
    if W.shape != W0.shape or W.ndim not in (2, 3):
        raise ValueError(f"neuron_distance needs W and W0 of the same shape (m, d) or (E, m, d); got {tuple(W.shape)}, {tuple(W0.shape)}")
    dist = torch.linalg.vector_norm(W.detach() - W0.detach().to(W.device), dim=-1)
    if per_neuron:
        return dist
    m = dist.amax(-1)
    return m if W.ndim == 3 else float(m)
