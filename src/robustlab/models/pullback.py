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

A module with its own ``forward`` is covered too when that forward is such a chain: ``torch.fx``
traces it symbolically (once per module and ``forward``, cached) into a line of calls of the
layers above — submodules, ``F.relu``/``torch.relu``/``.relu()`` and ``torch.flatten``/``.flatten``
— each feeding the next. Anything else in the trace (a branch on the input, another function,
two uses of a value, a buffer) refuses. The chain is resolved from the module's current
submodules at every call, and :func:`~robustlab.attacks.base.gradient_fn` checks the chain's
outputs against ``model(x)`` (to rounding) on its first call before relying on it.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module
from torch.nn.utils import parametrize

__all__ = ["sequential_pullback", "traced_layers"]

Pullback = Callable[[torch.Tensor], torch.Tensor]
_RESHAPES = (nn.Flatten, nn.Unflatten, nn.Identity)


def _plain(m: nn.Module) -> bool:
    """No hook and no parametrisation: ``m(x)`` is exactly its layer formula."""
    return not (m._forward_hooks or m._forward_pre_hooks or m._backward_hooks
                or getattr(m, "_backward_pre_hooks", None) or parametrize.is_parametrized(m))


def runs_as_written(m: nn.Module, cls: type[nn.Module]) -> bool:
    """``m(x)`` is exactly ``cls.forward``'s formula: ``m`` does not override it, and no hook
    (its own or a global one) or parametrisation changes what it computes. A closed form of a
    model's outputs holds only then."""
    return (type(m).forward is cls.forward and _plain(m)
            and not (_module._global_forward_hooks or _module._global_forward_pre_hooks))


def _layers(model: nn.Module) -> list[nn.Module] | None:
    """The layers of a plain ``nn.Sequential`` (nested ones flattened), or None."""
    if type(model) is not nn.Sequential or not _plain(model):
        return None
    out: list[nn.Module] = []
    for m in model:
        layers = _layer(m)
        if layers is None:
            return None
        out += layers
    return out


def _layer(m: nn.Module) -> list[nn.Module] | None:
    """One module as layers of the chain (a plain Sequential flattened), or None."""
    if type(m) is nn.Sequential:
        return _layers(m)
    if not _plain(m):
        return None
    if type(m) in (nn.Linear, nn.ReLU) or type(m) in _RESHAPES:
        return [m]
    if type(m) is nn.Dropout and not m.training:
        return [nn.Identity()]
    if type(m) is nn.Conv2d and m.padding_mode == "zeros" and not isinstance(m.padding, str):
        return [m]
    return None


# module -> (its forward, the chain's steps or None), traced once per forward:
# ("module", name) | ("relu",) | ("flatten", start_dim, end_dim)
_TRACES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _trace_chain(model: nn.Module) -> tuple | None:
    """The steps of ``model.forward`` when torch.fx traces it to a line of supported calls, else None."""
    import torch.fx  # loaded with torch already

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = torch.fx.Tracer().trace(model)
    except Exception:  # a branch on the input, an untraceable call, ...: autograd instead
        return None
    nodes = list(graph.nodes)
    if len(nodes) < 3 or nodes[0].op != "placeholder" or nodes[-1].op != "output":
        return None
    steps, prev = [], nodes[0]
    for node in nodes[1:-1]:  # each takes the one before as its input, and only it uses that
        args, kw = node.args, node.kwargs
        if len(prev.users) != 1 or not args or args[0] is not prev or any(
                isinstance(a, torch.fx.Node) for a in (*args[1:], *kw.values())):
            return None
        rest = args[1:]
        if node.op == "call_module" and not rest and not kw:
            steps.append(("module", node.target))
        elif (node.op == "call_function" and node.target in (torch.relu, F.relu)) or (
                node.op == "call_method" and node.target == "relu"):
            if len(rest) > 1 or kw.keys() - {"inplace"}:
                return None
            steps.append(("relu",))
        elif (node.op == "call_function" and node.target is torch.flatten) or (
                node.op == "call_method" and node.target == "flatten"):
            if len(rest) > 2 or kw.keys() - {"start_dim", "end_dim"}:
                return None
            start = rest[0] if len(rest) > 0 else kw.get("start_dim", 0)
            end = rest[1] if len(rest) > 1 else kw.get("end_dim", -1)
            if type(start) is not int or type(end) is not int:
                return None
            steps.append(("flatten", start, end))
        else:
            return None
        prev = node
    if len(prev.users) != 1 or nodes[-1].args != (prev,) or nodes[-1].kwargs:
        return None
    return tuple(steps)


def traced_layers(model: nn.Module) -> list[nn.Module] | None:
    """The layers of a module whose own ``forward`` is a plain chain of supported calls (see the
    module docstring), read from its current submodules; None otherwise. The trace is cached
    per module and class ``forward``."""
    if isinstance(model, nn.Sequential) or not _plain(model) or "forward" in vars(model):
        return None  # (torch.fx traces the class's forward, not one set on the instance)
    forward = type(model).forward
    cached = _TRACES.get(model)
    if cached is None or cached[0] is not forward:
        cached = (forward, _trace_chain(model))
        _TRACES[model] = cached
    if not cached[1]:
        return None
    out: list[nn.Module] = []
    for step in cached[1]:
        if step[0] == "relu":
            out.append(nn.ReLU())
        elif step[0] == "flatten":
            out.append(nn.Flatten(step[1], step[2]))
        else:
            try:
                layers = _layer(model.get_submodule(step[1]))
            except AttributeError:  # the submodule was removed since the trace
                return None
            if layers is None:
                return None
            out += layers
    return out


def sequential_pullback(model: nn.Module) -> Callable[[torch.Tensor], tuple[torch.Tensor, Pullback] | None] | None:
    """``x ↦ (f(x), dz ↦ (∂f/∂x)ᵀ dz)`` (or None for an input it does not cover: a
    convolution fed an unbatched image), or None when ``model`` is not a plain
    ``nn.Sequential`` of the layers in the module docstring, nor a module whose ``forward``
    traces to a chain of them (:func:`traced_layers`), or a global module hook is set.

    The layers are read once, here (an attack resolves this once per call, then steps many
    times). Both maps run in the caller's grad mode: call them under ``torch.no_grad()`` when
    the parameters require gradients, or the outputs carry a graph nobody needs.
    """
    if _module._global_forward_hooks or _module._global_forward_pre_hooks or _module._global_backward_hooks:
        return None
    layers = _layers(model) if type(model) is nn.Sequential else traced_layers(model)
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

