"""Deep ReLU networks with the initialisation table of the width-depth-init paper (width, depth, initialisation).

The fully connected family is an *ensemble* model (see :mod:`robustlab.models.ensemble`):
every weight carries a leading dimension ``E`` and copy ``e`` sees only ``x[e]``::

    f(x) = W_L σ(W_{L-1} … σ(W_1 x))            (width-depth-init, NeurIPS 2022, Eq. 2; no biases)
    x: (E, N, d)  ->  f: (E, N, k)              W_1: (E, d, m), W_l: (E, m, m), W_L: (E, m, k)

Entries of ``W_l`` are drawn i.i.d. ``N(0, β_l)`` with the variances of width-depth-init, NeurIPS 2022, Table 1
(SPEC §C; the non-lazy row is reconstructed, see :func:`init_variance`):

=========  ===========  ===========  ===========
init       β₁ (W_1)     β₂ (hidden)  β₃ (W_L)
=========  ===========  ===========  ===========
lecun      1/d          1/m          1/m
he         2/d          2/m          2/m
ntk        2/m          2/m          1
small      m^{-γ}       m^{-γ}       m^{-γ}
=========  ===========  ===========  ===========

Written per layer with fan-in/fan-out, the table is: LeCun ``1/fan_in``, He ``2/fan_in``,
NTK ``2/fan_out`` except the output layer (``1``), small ``m^{-γ}`` with ``m`` the width.
The convolutional and residual variants (width-depth-init, NeurIPS 2022, App. E.3/E.4) reuse exactly that rule,
with ``fan = channels × kernel area``; they are plain modules ``(N, C, H, W) -> (N, k)``, and
:class:`VmapEnsemble` stacks E of them into an ensemble model with ``torch.func``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import torch
from torch import nn

from ..config import ConfigError

__all__ = ["INITS", "init_variance", "check_architecture", "DeepMLP", "ConvNet", "ResNet",
           "VmapEnsemble", "AlphaScaled", "layer_weights"]

INITS = ("lecun", "he", "ntk", "small")


def check_architecture(*, width: int, depth: int, init: str, gamma: float | None = None) -> None:
    """Raise :class:`ConfigError` for a depth < 2, width < 1, unknown init or γ ≤ 0."""
    if not isinstance(depth, int) or depth < 2:
        raise ConfigError("depth", depth, "an integer >= 2 (an input and an output layer)")
    if not isinstance(width, int) or width < 1:
        raise ConfigError("width", width, "an integer >= 1")
    if init not in INITS:
        raise ConfigError("init", init, "one of " + ", ".join(INITS))
    if init == "small" and (gamma is None or not gamma > 0 or not math.isfinite(gamma)):
        raise ConfigError("gamma", gamma, "a finite value > 0 (variance m^-gamma)")


def init_variance(init: str, *, layer: int, n_layers: int, fan_in: int, fan_out: int, width: int,
                  gamma: float | None = None) -> float:
    """The variance β of the entries of layer ``layer`` (1-based) of ``n_layers`` (width-depth-init, NeurIPS 2022, Table 1).

    ``fan_in``/``fan_out`` count inputs/outputs of one unit (times the kernel area for a
    convolution); ``width`` is ``m``. ``small`` is the non-lazy regime of width-depth-init, NeurIPS 2022, Thm 2/3,
    whose exact exponents were lost in extraction: every layer gets ``m^{-γ}`` (γ > 1 makes
    the initial network vanish as ``m`` grows, which is what puts it outside the lazy regime).
    """
    if init == "lecun":
        return 1.0 / fan_in
    if init == "he":
        return 2.0 / fan_in
    if init == "ntk":
        return 1.0 if layer == n_layers else 2.0 / fan_out
    if init == "small":
        if gamma is None or not gamma > 0:
            raise ConfigError("gamma", gamma, "a value > 0 (variance m^-gamma)")
        return float(width) ** (-gamma)
    raise ConfigError("init", init, "one of " + ", ".join(INITS))


def _gaussian(shape: Sequence[int], var: float, generator: torch.Generator | None,
              dtype: torch.dtype) -> torch.Tensor:
    # Draw in float64 then cast: the same seed gives the same network in float32 and float64.
    w = torch.randn(*shape, generator=generator, dtype=torch.float64) * math.sqrt(var)
    return w.to(dtype)


def _depth2_quadratic(W1: torch.Tensor, W2: torch.Tensor, D: torch.Tensor) -> torch.Tensor:
    """``‖W_1 diag(D_n) W_2‖_F²`` for W1 (E, d, m), W2 (E, m, k), 0/1 patterns D (E, N, m):
    ``D_nᵀ Q D_n`` with ``Q = W_1ᵀW_1 ∘ W_2W_2ᵀ`` (E, m, m), positive semi-definite."""
    Q = torch.bmm(W1.transpose(1, 2), W1).mul_(torch.bmm(W2, W2.transpose(1, 2)))
    return torch.bmm(D, Q).mul_(D).sum(-1)


class DeepMLP(nn.Module):
    """E independent depth-``L`` width-``m`` ReLU networks, ``(E, N, d) -> (E, N, k)``.

    ``generators`` (one per copy) fix the initial weights of each copy, so copy ``e`` of an
    ensemble equals the network built alone from ``generators[e]``. ``weights[l]`` has shape
    ``(E, fan_in, fan_out)`` and computes ``h @ W`` (the transpose of the paper's ``W h``).
    """

    def __init__(self, d: int, width: int, depth: int, k: int = 1, *, init: str = "he",
                 gamma: float | None = None, generators: Sequence[torch.Generator] | None = None,
                 E: int | None = None, dtype: torch.dtype = torch.float32,
                 device: torch.device | str = "cpu"):
        super().__init__()
        check_architecture(width=width, depth=depth, init=init, gamma=gamma)
        if d < 1 or k < 1:
            raise ConfigError("d" if d < 1 else "k", d if d < 1 else k, "a value >= 1")
        if generators is None:
            generators = [None] * (E or 1)
        elif E is not None and E != len(generators):
            raise ValueError(f"E={E} but {len(generators)} generators")
        self.d, self.width, self.depth, self.k, self.init, self.gamma = d, width, depth, k, init, gamma
        self.E = len(generators)
        dims = [d] + [width] * (depth - 1) + [k]
        self.variances = [init_variance(init, layer=l + 1, n_layers=depth, fan_in=dims[l],
                                        fan_out=dims[l + 1], width=width, gamma=gamma)
                          for l in range(depth)]
        self.weights = nn.ParameterList(nn.Parameter(torch.empty(self.E, dims[l], dims[l + 1], dtype=dtype))
                                        for l in range(depth))
        with torch.no_grad():
            # Member by member, layer by layer inside each member's own stream: a member's
            # weights do not depend on how many other members share the ensemble.
            for e, g in enumerate(generators):
                for l, W in enumerate(self.weights):
                    W[e] = _gaussian((dims[l], dims[l + 1]), self.variances[l], g, dtype)
        self.to(device)

    def n_params(self) -> int:
        """Parameters of one copy."""
        return sum(W[0].numel() for W in self.weights)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.ndim != 3 or x.shape[0] != self.E or x.shape[2] != self.d:
            raise ValueError(f"expected input (E={self.E}, N, d={self.d}), got {tuple(x.shape)}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        h = x
        for W in self.weights[:-1]:
            h = torch.relu(torch.bmm(h, W))  # (E, N, m)
        return torch.bmm(h, self.weights[-1])  # (E, N, k)

    @torch.no_grad()
    def jacobian_fro_sq(self, x: torch.Tensor) -> torch.Tensor:
        """``‖∂f/∂x‖_F²`` of every copy at every point, ``(E, N)``, in closed form.

        With ``D_l`` the 0/1 pattern of layer ``l`` at ``x``, the Jacobian of copy ``e`` is
        ``W_1 D_1 W_2 … D_{L-1} W_L`` (``d × k``). Its ``k`` columns are carried back from
        the output through one batched matmul per layer, ``(E, N·k, fan_out) @ W_lᵀ``: the
        work of ``k`` backward passes without autograd's graph. ReLU's derivative at 0 is
        taken as 0, as autograd does (tests/test_deep_models.py checks the two agree).

        At depth 2, ``‖W_1 D W_2‖_F² = Dᵀ (W_1ᵀW_1 ∘ W_2W_2ᵀ) D`` (a Schur product of two Gram
        matrices, built once per call), which costs ``N·m²`` per copy instead of ``N·k·m·d``;
        it is taken whenever that, with the Gram matrices' ``m²·(d+k)``, is the smaller.
        """
        self._check_input(x)
        E, N, k = self.E, x.shape[1], self.k
        masks, h = [], x
        for W in self.weights[:-1]:
            h = torch.relu(torch.bmm(h, W))
            masks.append((h > 0).to(h.dtype)[:, :, None, :])  # (E, N, 1, m)
        m = self.width
        if self.depth == 2 and m * m * (self.d + k + N) < N * k * m * self.d:
            return _depth2_quadratic(self.weights[0], self.weights[1], masks[0][:, :, 0])
        # rows (n, j): column j of copy e's Jacobian at point n, carried back layer by layer
        g = (masks[-1] * self.weights[-1].transpose(1, 2)[:, None]).contiguous()  # (E, N, k, m)
        for l in range(self.depth - 2, -1, -1):
            if l < self.depth - 2:
                g.mul_(masks[l])
            Wt = self.weights[l].transpose(1, 2).contiguous()  # bmm runs faster on a plain layout
            g = torch.bmm(g.reshape(E, N * k, -1), Wt).view(E, N, k, -1)
        return g.pow(2).sum((2, 3))

    def member(self, e: int) -> DeepMLP:
        """Copy ``e`` as an ensemble of one (a detached deep copy)."""
        return self.members([e])

    def members(self, idx: Sequence[int]) -> DeepMLP:
        """Copies ``idx`` as an ensemble of ``len(idx)``, in that order (detached copies)."""
        sub = copy.copy(self)  # the architecture's fields; the module state is rebuilt below
        nn.Module.__init__(sub)
        sub.weights = nn.ParameterList(nn.Parameter(W.detach()[list(idx)].clone()) for W in self.weights)
        sub.E = len(idx)
        return sub.train(self.training)


class AlphaScaled(nn.Module):
    """The α-scaled ensemble ``f_α(x; θ) = f(x; θ0) + α (f(x; θ) − f(x; θ0))``, ``(E, N, d) -> (E, N, k)``
    (lazy training, Chizat, Oyallon & Bach 2019, kept on f(θ0) rather than centred).

    ``net`` (a :class:`DeepMLP`) holds the trainable θ, starting at θ0; a frozen copy of it holds θ0
    (``requires_grad`` off: a training loop sees θ only). At initialisation ``f_α = f(θ0)`` exactly;
    to first order in θ − θ0 it is ``f0 + J (α (θ − θ0))``, the model ``studies...linearised`` solves,
    so trained at rate lr/α² it converges to that model's training as α → ∞, θ moving O(1/α).
    Deliberately not a :class:`DeepMLP`: its closed forms (``jacobian_fro_sq``, the closed-form
    SGD step) are ``f(θ)``'s, not ``f_α``'s; everything on this module goes through autograd.
    ``weights`` are θ's (the per-layer change of θ is the lazy premise).
    """

    def __init__(self, net: DeepMLP, alpha: float):
        super().__init__()
        if not (alpha > 0 and math.isfinite(alpha)):
            raise ConfigError("alpha", alpha, "a finite value > 0")
        self.net, self.alpha = net, float(alpha)
        self.net0 = net.members(range(net.E)).requires_grad_(False)
        self.E, self.k, self.d, self.width, self.depth = net.E, net.k, net.d, net.width, net.depth

    @property
    def weights(self) -> nn.ParameterList:
        return self.net.weights

    def n_params(self) -> int:
        """Trainable parameters of one copy (θ; θ0 is a constant)."""
        return self.net.n_params()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f0 = self.net0(x)  # carries its input gradient: ∂f_α/∂x = (1 − α) ∂f(θ0)/∂x + α ∂f(θ)/∂x
        return f0 + self.alpha * (self.net(x) - f0)

    def member(self, e: int) -> AlphaScaled:
        return self.members([e])

    def members(self, idx: Sequence[int]) -> AlphaScaled:
        """Copies ``idx`` (detached copies of θ and θ0), in that order."""
        sub = copy.copy(self)
        nn.Module.__init__(sub)
        sub.net, sub.net0 = self.net.members(idx), self.net0.members(idx).requires_grad_(False)
        sub.E = len(idx)
        return sub.train(self.training)


# ----------------------------------------------------------------------------------------
# convolutional and residual variants (plain modules, the width-depth-init paper (NeurIPS 2022) App. E.3 / E.4)

def _init_conv_stack(layers: Sequence[nn.Module], init: str, width: int, gamma: float | None,
                     generator: torch.Generator | None) -> None:
    """Apply the table to a list of Conv2d/Linear layers (1-based position = layer index)."""
    n = len(layers)
    for i, layer in enumerate(layers, start=1):
        w = layer.weight
        area = w[0, 0].numel() if w.ndim == 4 else 1
        fan_in, fan_out = w.shape[1] * area, w.shape[0] * area
        var = init_variance(init, layer=i, n_layers=n, fan_in=fan_in, fan_out=fan_out, width=width,
                            gamma=gamma)
        with torch.no_grad():
            w.copy_(_gaussian(tuple(w.shape), var, generator, w.dtype))


class ConvNet(nn.Module):
    """Depth-``L`` ReLU CNN: ``L-1`` 3×3 convolutions of ``m`` channels, global average pool,
    then a linear output layer; no biases. ``(N, C, H, W) -> (N, k)`` (width-depth-init, NeurIPS 2022, App. E.3)."""

    def __init__(self, in_channels: int, width: int, depth: int, k: int = 1, *, init: str = "he",
                 gamma: float | None = None, generator: torch.Generator | None = None):
        super().__init__()
        check_architecture(width=width, depth=depth, init=init, gamma=gamma)
        chans = [in_channels] + [width] * (depth - 1)
        self.convs = nn.ModuleList(nn.Conv2d(chans[i], chans[i + 1], 3, padding=1, bias=False)
                                   for i in range(depth - 1))
        self.head = nn.Linear(width, k, bias=False)
        _init_conv_stack([*self.convs, self.head], init, width, gamma, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for conv in self.convs:
            h = torch.relu(conv(h))
        return self.head(h.mean(dim=(-2, -1)))


class ResNet(nn.Module):
    """Depth-``L`` residual ReLU CNN: a 3×3 stem, ``L-2`` pre-activation residual blocks
    ``h ← h + conv(σ(h))``, global average pool of ``σ(h)``, linear output; no biases and no
    normalisation, so the initialisation alone sets the scales (width-depth-init, NeurIPS 2022, App. E.4)."""

    def __init__(self, in_channels: int, width: int, depth: int, k: int = 1, *, init: str = "he",
                 gamma: float | None = None, generator: torch.Generator | None = None):
        super().__init__()
        check_architecture(width=width, depth=depth, init=init, gamma=gamma)
        self.stem = nn.Conv2d(in_channels, width, 3, padding=1, bias=False)
        self.blocks = nn.ModuleList(nn.Conv2d(width, width, 3, padding=1, bias=False)
                                    for _ in range(depth - 2))
        self.head = nn.Linear(width, k, bias=False)
        _init_conv_stack([self.stem, *self.blocks, self.head], init, width, gamma, generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for conv in self.blocks:
            h = h + conv(torch.relu(h))
        return self.head(torch.relu(h).mean(dim=(-2, -1)))


class VmapEnsemble(nn.Module):
    """E copies of a plain module as one ensemble model ``(E, N, ...) -> (E, N, k)``.

    The copies' parameters are stacked along a leading ``E`` (``torch.func.stack_module_state``)
    and the forward is ``vmap`` of a functional call, so the copies run in one batched pass.
    ``weights`` lists the stacked parameters in layer order (as :class:`DeepMLP`).
    """

    def __init__(self, modules: Sequence[nn.Module]):
        super().__init__()
        if not modules:
            raise ValueError("VmapEnsemble needs at least one module")
        params, _ = torch.func.stack_module_state(list(modules))
        self.names = list(params)
        self.weights = nn.ParameterList(nn.Parameter(params[n].detach().clone()) for n in self.names)
        base = copy.deepcopy(modules[0]).to("meta")
        object.__setattr__(self, "_base", base)  # not a submodule: its meta tensors hold no state
        self.E = len(modules)

    def _one(self, params: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self._base, dict(zip(self.names, params)), (x,))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != self.E:
            raise ValueError(f"expected a leading ensemble dimension E={self.E}, got {tuple(x.shape)}")
        return torch.func.vmap(self._one)(tuple(self.weights), x)

    def n_params(self) -> int:
        return sum(W[0].numel() for W in self.weights)

    def member(self, e: int) -> VmapEnsemble:
        """Copy ``e`` as an ensemble of one (detached)."""
        return self.members([e])

    def members(self, idx: Sequence[int]) -> VmapEnsemble:
        """Copies ``idx`` as an ensemble of ``len(idx)``, in that order (detached copies)."""
        sub = copy.copy(self)
        nn.Module.__init__(sub)
        sub.names, sub.E = self.names, len(idx)
        sub.weights = nn.ParameterList(nn.Parameter(W.detach()[list(idx)].clone()) for W in self.weights)
        object.__setattr__(sub, "_base", self._base)
        return sub.train(self.training)


def layer_weights(model: nn.Module) -> list[torch.Tensor]:
    """The ensemble model's weights in layer order, each ``(E, ...)``."""
    if isinstance(model, DeepMLP | VmapEnsemble):
        return list(model.weights)
    raise TypeError(f"{type(model).__name__} is not an ensemble model with per-layer weights")
