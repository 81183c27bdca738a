"""What the two lazy-training studies share (lazy training, NeurIPS 2022): the config fields
for data, model and lazy ball; the start of every point (data, network, radius, generators);
the "trained" premise; and the analysis helpers (families of runs, crossings, the asymptotic
exponent of a quantity against d).

Data sources: ``mnist5k`` (embedded, default), ``digits`` (embedded 8×8), ``mnist``
(torchvision files under ``data_dir``) — a binary pair of classes resized to ``size×size``
(``d = size²``) — and ``sphere``: points on ``S^{d−1}`` labelled by a random teacher
network (``d = dim``, or ``size²`` when ``dim`` is unset).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .. import claims as claimsmod
from .. import papers, stats
from ..config import Config, ConfigError, param
from ..data import SPHERE_BOUNDS, Split, load_images, resize, sphere_teacher
from ..models.two_layer import TwoLayerReLU
from ..utils import make_generator, resolve_device

__all__ = ["LazyConfig", "SOURCES", "PAPER", "NON_LAZY_C0", "RICH_INIT_SCALE", "MIN_TRAINED", "load_data", "build_model",
           "radius_of", "input_bounds", "neuron_params", "crossing", "log_interp_crossing", "point_ids",
           "describe_family", "Start", "start_point", "families", "asymptotic_exponent"]

PAPER = papers.LAZY_TRAINING
# The non-lazy control of every lazy claim: a ball so large that it never binds (C0/√m = 62.5
# at m = 256 against ‖w_s(0)‖ ≈ √d <= 28): the same network and training, the premise removed.
NON_LAZY_C0 = 1000.0
# The rich-regime control of the exponent claims (chosen 2026-11-26 from the argument below, before
# any run at it): SGD from the standard init with C0 = 1000 moves the neurons by C0_used ~ 10-40
# only, and then ‖∇ₓf‖² = ‖∇ₓf₀‖² + O(C0_used²) with ‖∇ₓf₀‖² ≈ d/2: a lazy network after all, whose
# asymptotic exponents the theorem covers. Shrinking the first layer at init by 0.01 (Chizat et
# al.'s small-scale, rich regime) puts ‖∇ₓf₀‖ at 0.01·√(d/2) <= 0.2 for d <= 784, an order below
# the O(1) gradient a trained classifier of unit inputs needs: its input gradient is learned.
RICH_INIT_SCALE = 0.01
# The "trained" premise, one bound for every network any claim of either study uses: a binary
# classifier of two well-separated digit classes that reaches 0.9 has learnt the task (the
# authors' networks reach 0.95-0.99); below it, what the attack measures is an untrained net.
MIN_TRAINED = 0.9

# Source image side and label set of each image dataset (checked before anything runs).
SOURCES: dict[str, tuple[int, tuple[int, ...]]] = {
    "mnist5k": (28, tuple(range(10))),
    "digits": (8, tuple(range(10))),
    "mnist": (28, tuple(range(10))),
}


@dataclasses.dataclass(frozen=True)
class LazyConfig(Config):
    """Fields shared by ``lazy-attack`` and ``lazy-adversarial`` (one grid point)."""

    study = "lazy"
    dataset: str = param("mnist5k", "data: an image dataset (binary pair of classes) or the sphere teacher",
                         choices=("mnist5k", "digits", "mnist", "sphere"))
    classes: tuple[int, ...] = param((0, 1), "the two image classes, labelled −1 and +1 (the paper: digits 0, 1)")
    size: int = param(8, "images resized to size×size, d = size² (sphere data: d = size² unless dim is set)", ge=2)
    dim: int | None = param(None, "input dimension of the sphere data (default size²)", ge=2)
    allow_upsample: bool = param(False, "allow size larger than the source images")
    sphere: bool = param(True, "normalise every input to the unit sphere ‖x‖ = 1 (the theorem's setting)")
    input_scale: str = param("none", "image data off the sphere: 'unit-mean' divides every input by the "
                                     "mean norm of the training inputs at its size (the spread of the norms "
                                     "kept, their growth with d removed)", choices=("none", "unit-mean"))
    data_dir: str | None = param(None, "folder with the torchvision MNIST files (dataset=mnist)")
    max_train: int | None = param(None, "use at most this many training points", ge=2)
    max_test: int | None = param(None, "use at most this many test points", ge=1)
    teacher_width: int = param(4, "sphere data: hidden units of the random teacher", ge=1)
    teacher_margin: float = param(0.0, "sphere data: drop points with |teacher| below margin·std", ge=0, le=2)
    m: int = param(256, "width: hidden neurons", ge=1)
    bias: bool = param(True, "hidden biases b_s ~ N(0,1) and a fixed top bias ±1/√m (authors' code); "
                             "false is the theorem's model")
    C0: float = param(10.0, "lazy ball radius C0/√m per neuron, bias included (Def. 2.1)", gt=0)
    R: float | None = param(None, "absolute per-neuron radius; overrides C0/√m when set", gt=0)
    R_factor: float | None = param(None, "per-neuron radius as a multiple of the lazy radius C0/√m "
                                         "(the radius sweep); overrides C0/√m when set", gt=0)
    init_scale: float = param(1.0, "multiplies the first layer (w_s, b_s) at initialisation; 1 is the "
                                   "theorem's model, a small value the rich (non-lazy) regime", gt=0, le=1)

    def check(self) -> None:
        if self.R is not None and self.R_factor is not None:
            raise ConfigError("R_factor", self.R_factor, "unset when R is set (one radius per point)")
        if self.input_scale != "none" and (self.sphere or self.dataset == "sphere"):
            raise ConfigError("input_scale", self.input_scale,
                              "none when sphere=true or dataset=sphere (those inputs have unit norm already)")
        if self.dataset == "sphere":
            return
        src, present = SOURCES[self.dataset]
        if len(self.classes) != 2 or self.classes[0] == self.classes[1]:
            raise ConfigError("classes", list(self.classes), "two distinct classes (a binary task)")
        missing = [c for c in self.classes if c not in present]
        if missing:
            raise ConfigError("classes", list(self.classes),
                              f"classes present in {self.dataset}: {present[0]}..{present[-1]}")
        if self.size > src and not self.allow_upsample:
            raise ConfigError("size", self.size, f"<= {src} for {self.dataset} ({src}x{src} images), "
                                                 "or set allow_upsample=true")
        if self.dim is not None:
            raise ConfigError("dim", self.dim, "unset for image data (use size)")
        if self.dataset == "mnist":
            if self.data_dir is None:
                raise ConfigError("data_dir", None, "a folder holding the MNIST files (dataset=mnist)")
            if not Path(self.data_dir).is_dir():
                raise ConfigError("data_dir", self.data_dir, "an existing directory")

    @property
    def d(self) -> int:
        if self.dataset == "sphere" and self.dim is not None:
            return self.dim
        return self.size * self.size


def work(cfg: LazyConfig, passes_per_epoch: int = 1) -> float:
    """A point's relative cost, ``d · m · epochs · passes``: its training's products up to a
    constant (``epochs`` is the cap; a run that stops sooner costs less). Only orders the
    groups of a parallel run, costliest first (``Study.weight``)."""
    return float(cfg.d * cfg.m * cfg.epochs * passes_per_epoch)


def radius_of(cfg: LazyConfig) -> float:
    """Per-neuron ball radius: ``R`` if set, else ``R_factor·C0/√m``, else ``C0/√m``."""
    if cfg.R is not None:
        return cfg.R
    return (cfg.R_factor or 1.0) * cfg.C0 / math.sqrt(cfg.m)


def input_bounds(cfg: LazyConfig) -> tuple[float, float]:
    """The box attacks clip to: pixels live in [0, 1] (sphere-normalised pixels too); pixels
    divided by their mean norm (``input_scale='unit-mean'``) only in [0, ∞)."""
    if cfg.dataset == "sphere":
        return SPHERE_BOUNDS
    return (0.0, math.inf) if cfg.input_scale == "unit-mean" else (0.0, 1.0)


@functools.lru_cache(maxsize=8)
def _source(name: str, classes: tuple[int, ...], data_dir: str | None) -> Split:
    # Loading and parsing the embedded MNIST takes seconds: load each source once per
    # process at its own resolution; every size is then a cheap resize of these tensors.
    return load_images(name, classes=classes, flatten=False, data_dir=data_dir)


@functools.lru_cache(maxsize=32)
def _prepared(cfg_key: tuple) -> Split:
    (dataset, classes, size, dim, sphere, data_dir, max_train, max_test, tw, tm, scale) = cfg_key
    if dataset == "sphere":
        n_tr = max_train or 1000
        n_te = max_test or 500
        # the sphere data is normalised by construction; `sphere` has nothing to do
        return sphere_teacher(dim or size * size, n_train=n_tr, n_test=n_te, teacher_width=tw,
                              margin=tm, seed=0)
    src = _source(dataset, classes, data_dir)

    def subset(n_all: int, n: int | None, salt: str) -> torch.Tensor:
        # the split lists each class in turn: a prefix would hold one class only, so a
        # smaller set is a fixed random subset (the same for every seed and every size)
        if not n or n >= n_all:
            return torch.arange(n_all)
        return torch.randperm(n_all, generator=make_generator(0, "lazy-subset", salt))[:n].sort().values

    # the same steps as load_images(size=..., flatten=True, sphere=...), on cached tensors
    def prep(x: torch.Tensor) -> torch.Tensor:
        x = resize(x, size).reshape(len(x), -1)
        if sphere:
            x = x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)
        return x.contiguous()

    tr = subset(len(src.y_train), max_train, "train")
    te = subset(len(src.y_test), max_test, "test")
    x_train, x_test = prep(src.x_train[tr]), prep(src.x_test[te])
    if scale == "unit-mean":  # one constant per size, from the training inputs: test inputs share it
        c = x_train.norm(dim=1).mean().clamp_min(1e-12)
        x_train, x_test = x_train / c, x_test / c
    return Split(x_train, src.y_train[tr], x_test, src.y_test[te], src.classes, True)


def load_data(cfg: LazyConfig) -> Split:
    """Flat inputs ``(N, d)`` with ±1 labels for ``cfg`` (shared by every seed of a point)."""
    key = (cfg.dataset, tuple(cfg.classes), cfg.size, cfg.dim, cfg.sphere, cfg.data_dir,
           cfg.max_train, cfg.max_test, cfg.teacher_width, cfg.teacher_margin, cfg.input_scale)
    return _prepared(key)


def build_model(cfgs: list[LazyConfig], d: int, device: torch.device) -> TwoLayerReLU:
    """One copy per config, each drawn from its own seed."""
    base = cfgs[0]
    gens = [make_generator(c.seed, "lazy-init") for c in cfgs]
    return TwoLayerReLU.init(gens, m=base.m, d=d, bias=base.bias, scale=base.init_scale, device=device)


@dataclasses.dataclass(frozen=True)
class Start:
    """What every point of either study starts from: its data, its E copies at initialisation,
    the per-neuron radius and one mini-batch-order generator per seed."""

    base: Any
    device: torch.device
    data: Split
    E: int
    d: int
    model: TwoLayerReLU
    radius: float
    generators: list[torch.Generator]


def start_point(cfgs: list, device: str = "cpu") -> Start:
    """The shared start of ``run_points``: the data on the device, the network (one copy per
    config, each from its own seed), the radius and the order generators."""
    base = cfgs[0]
    dev = resolve_device(device)
    data = load_data(base).to(dev)
    model = build_model(cfgs, data.d, dev)
    return Start(base, dev, data, len(cfgs), data.d, model, radius_of(base),
                 [make_generator(c.seed, "lazy-order") for c in cfgs])


def neuron_params(model: TwoLayerReLU) -> tuple[torch.Tensor, torch.Tensor]:
    """Each neuron's incoming parameters θ_s = (w_s, b_s) now and at init: (E, m, d[+1]) twice,
    for :func:`robustlab.metrics.neuron_distance` (the ball constrains the bias too)."""
    if model.bias is None:
        return model.weight, model.weight0
    return (torch.cat([model.weight, model.bias[..., None]], -1),
            torch.cat([model.weight0, model.bias0[..., None]], -1))


# ---------------------------------------------------------------------------------------
# analysis helpers (claims and figures)

def log_interp_crossing(xs: np.ndarray, ys: np.ndarray, level: float) -> float:
    """The first x at which a decreasing curve ``ys(xs)`` falls to ``level``, interpolated
    linearly in ``log x``. NaN when the curve never falls that far; ``xs[0]`` when it
    starts below."""
    order = np.argsort(xs)
    xs, ys = np.asarray(xs, float)[order], np.asarray(ys, float)[order]
    if ys[0] <= level:
        return float(xs[0])
    for i in range(1, len(xs)):
        if ys[i] <= level:
            a, b = math.log(xs[i - 1]), math.log(xs[i])
            t = (ys[i - 1] - level) / (ys[i - 1] - ys[i])
            return float(math.exp(a + t * (b - a)))
    return float("nan")


def crossing(xs, ys, level: float, *, rising: bool = False) -> float:
    """:func:`log_interp_crossing` for falling curves; for rising ones, the first x where the
    curve reaches ``level``."""
    ys = np.asarray(ys, float)
    return log_interp_crossing(np.asarray(xs, float), -ys if rising else ys, -level if rising else level)


def point_ids(df: pd.DataFrame, config: type[Config], exclude: tuple[str, ...] = ("seed",)) -> pd.Series:
    """A label per row naming its config without the ``exclude`` fields.

    With the default it names the grid point (its seeds share it); excluding the swept axis
    too (e.g. ``("seed", "size", "dim")``) names a *family* of runs that differ only along
    that axis, so a fit never pools runs that differ in anything else (lr, width, data…).
    """
    keys = [f for f in config.field_names() if f not in exclude and f in df.columns]
    return df[keys].apply(lambda row: "|".join(map(str, row)), axis=1)


def families(df: pd.DataFrame, config: type[Config], axes: tuple[str, ...]) -> list[pd.DataFrame]:
    """Runs grouped so that each group differs only along ``axes`` (and the seed)."""
    if df.empty:
        return []
    return [g for _, g in df.groupby(point_ids(df, config, ("seed", *axes)))]


def trained_premise(col: str) -> claimsmod.Premise:
    """The one "trained" premise, per network: ``col`` (clean test accuracy) >= MIN_TRAINED."""
    return claimsmod.premise_at_least("trained", col, MIN_TRAINED, "clean test accuracy of the network")


def asymptotic_exponent(d, q, *, level: float = 0.95) -> stats.Estimate:
    """The signed exponent of ``Q ≈ a·d^p + b`` over networks ``(d_i, Q_i)``
    (:func:`robustlab.stats.power_exponent`).

    Why this estimator (chosen from the theorem, not from the data): inside the lazy ball
    ``∇ₓf = ∇ₓf₀ + Δ`` with ``‖Δ‖ <= C0`` whatever d, and ``‖∇ₓf₀‖² ≈ d/2`` on the sphere, so
    ``‖∇ₓf‖² = d/2 + O(C0²)``; the one-step flip gives ``1/η ≈ ‖∇ₓf‖²/|f|`` and
    ``1/‖δ‖² ≈ ‖∇ₓf‖²/f²`` with ``|f| = O(1)``. Each is ``a·d + b`` with an offset set by C0, not
    by d, so the offset is fitted and the theorem's exponent left to the d-dependent part. A
    falling quantity reads a negative exponent, and a significant lack of fit leaves the
    estimate undecidable.
    """
    return stats.power_exponent(d, q, level=level)


def scaled(est: stats.Estimate, k: float, what: str) -> stats.Estimate:
    """``k·est`` (k < 0 swaps the bounds): the exponent of ‖∇ₓf‖ is p/2, of η −p, of ‖δ‖ −p/2."""
    lo, hi = sorted((k * est.low, k * est.high))
    return dataclasses.replace(est, value=k * est.value, low=lo, high=hi,
                               sd=None if est.sd is None else abs(k) * est.sd,
                               method=f"{what}: {est.method}")


def describe_family(sub: pd.DataFrame, fields: tuple[str, ...]) -> dict:
    """The values of a few identifying fields of a family of runs (for claim evidence)."""
    out = {}
    for f in fields:
        if f in sub.columns:
            v = sub[f].iloc[0]
            out[f] = v.item() if hasattr(v, "item") else v
    return out
