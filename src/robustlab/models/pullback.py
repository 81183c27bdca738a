"""A closed-form forward pass and input pull-back for plain feed-forward stacks.

An attack needs, per step, the logits ``z = f(x)`` and one vector-Jacobian product
``dz ↦ (∂z/∂x)ᵀ dz``. For an ``nn.Sequential`` of the layers below that product is a few
matmuls or transposed convolutions run backwards over saved activations::

    Linear   z = h Wᵀ + b          pull-back  g ↦ g W
    Conv2d   z = conv(h, W) + b    pull-back  g ↦ convᵀ(g, W)  (input gradient only)
    ReLU     z = max(h, 0)         pull-back  g ↦ g · 1[z > 0]
    Flatten / Unflatten / Identity / Dropout (eval)   reshapes or nothing

Autograd computes the same numbers, but on small models its graph bookkeeping (a node and
saved tensors per op, the engine's scheduling) costs about as much as the arithmetic; the
pull-back here saves only what its backward reads. :func:`sequential_pullback` returns
None for anything it does not model exactly — another layer type, a subclass, a hook, a
parametrisation, training-mode dropout — and callers then use autograd.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module
from torch.nn.utils import parametrize

__all__ = ["sequential_pullback"]

Pullback = Callable[[torch.Tensor], torch.Tensor]
_RESHAPES = (nn.Flatten, nn.Unflatten, nn.Identity)


def _plain(m: nn.Module) -> bool:
    """No hook and no parametrisation: ``m(x)`` is exactly its layer formula."""
    return not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or getattr(m, "_backward_pre_hooks", None) or parametrize.is_parametrized(m))


def _layers(model: nn.Module) -> list[nn.Module] | None:
    """The layers of a plain ``nn.Sequential`` (nested ones flattened), or None."""
    if type(model) is not nn.Sequential or not _plain(model):
        return None
    out: list[nn.Module] = []
    for m in model:
        if type(m) is nn.Sequential:
            inner = _layers(m)
            if inner is None:
                return None
            out += inner
        elif not _plain(m):
            return None
        elif type(m) in (nn.Linear, nn.ReLU) or type(m) in _RESHAPES:
            out.append(m)
        elif type(m) is nn.Dropout and not m.training:
            out.append(nn.Identity())
        elif (type(m) is nn.Conv2d and m.padding_mode == "zeros" and not isinstance(m.padding, str)):
            out.append(m)
        else:
            return None
    return out


def sequential_pullback(model: nn.Module) -> Callable[[torch.Tensor], tuple[torch.Tensor, Pullback] | None] | None:
    """``x ↦ (f(x), dz ↦ (∂f/∂x)ᵀ dz)`` (or None for an input it does not cover: a
    convolution fed an unbatched image), or None when ``model`` is not a plain
    ``nn.Sequential`` of the layers in the module docstring (or a global module hook is set).

    The layers are read once, here (an attack resolves this once per call, then steps many
    times). Both maps run in the caller's grad mode: call them under ``torch.no_grad()`` when
    the parameters require gradients, or the outputs carry a graph nobody needs.
    """
    if _module._global_forward_hooks or _module._global_forward_pre_hooks or _module._global_backward_hooks:
        return None
    layers = _layers(model)
    if not layers:
        return None
    last = len(layers) - 1

    def output_and_vjp(x: torch.Tensor) -> tuple[torch.Tensor, Pullback] | None:
        tape: list[tuple[nn.Module, torch.Tensor | torch.Size]] = []  # what each pull-back reads
        h, owned = x, False  # owned: h is our own intermediate (the caller's x is never written)
        for i, m in enumerate(layers):
            kind = type(m)
            if kind is nn.Linear and i == last and h.ndim == 2:
                # the logits class-major, (k, N), returned as their (N, k) view: the layout the
                # closed-form losses read (attacks.losses), and for a short class axis the
                # faster GEMM on CPU (a 512 x 128 -> 10 head: 1.2x at 2 threads, 1.9x at 1)
                tape.append((m, h))
                bias = m.bias[:, None] if m.bias is not None else None
                zt = torch.mm(m.weight, h.t()) if bias is None else torch.addmm(bias, m.weight, h.t())
                h, owned = zt.t(), True
            elif kind is nn.Linear:
                tape.append((m, h))
                h, owned = F.linear(h, m.weight, m.bias), True
            elif kind is nn.ReLU:
                h, owned = (h.relu_() if owned else h.relu()), True
                tape.append((m, h))  # the output: 1[relu(a) > 0] = 1[a > 0]
            elif kind is nn.Conv2d:
                if h.ndim != 4:  # an unbatched image: the caller falls back to autograd
                    return None
                tape.append((m, h))
                h, owned = F.conv2d(h, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups), True
            else:
                tape.append((m, h.shape))
                h = m(h)

        def vjp(dz: torch.Tensor) -> torch.Tensor:
            g = dz
            for m, saved in reversed(tape):
                kind = type(m)
                if kind is nn.Linear:
                    g = g @ m.weight
                elif kind is nn.ReLU:
                    g = torch.ops.aten.threshold_backward(g, saved, 0)
                elif kind is nn.Conv2d:  # the input gradient only
                    g = torch.ops.aten.convolution_backward(
                        g, saved, m.weight, None, m.stride, m.padding, m.dilation, False, [0, 0], m.groups,
                        [True, False, False])[0]
                else:
                    g = g.reshape(saved)
            return g

        return h, vjp

    return output_and_vjp

