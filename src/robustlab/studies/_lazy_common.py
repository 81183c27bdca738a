"""What the two lazy-training studies share (Seed 001): the config fields for data, model
and lazy ball; the data (cached per process); the network; and small analysis helpers.

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

import numpy as np
import pandas as pd
import torch

from ..config import Config, ConfigError, param
from ..data import SPHERE_BOUNDS, Split, load_images, resize, sphere_teacher
from ..models.two_layer import TwoLayerReLU
from ..utils import make_generator

__all__ = ["LazyConfig", "SOURCES", "load_data", "build_model", "radius_of", "input_bounds",
           "neuron_params", "crossing", "log_interp_crossing", "point_ids", "describe_family"]

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
    classes: tuple[int, ...] = param((0, 1), "the two image classes, labelled −1 and +1 (Seed 001: digits 0, 1)")
    size: int = param(8, "images resized to size×size, d = size² (sphere data: d = size² unless dim is set)", ge=2)
    dim: int | None = param(None, "input dimension of the sphere data (default size²)", ge=2)
    allow_upsample: bool = param(False, "allow size larger than the source images")
    sphere: bool = param(True, "normalise every input to the unit sphere ‖x‖ = 1 (the theorem's setting)")
    data_dir: str | None = param(None, "folder with the torchvision MNIST files (dataset=mnist)")
    max_train: int | None = param(None, "use at most this many training points", ge=2)
    max_test: int | None = param(None, "use at most this many test points", ge=1)
    teacher_width: int = param(4, "sphere data: hidden units of the random teacher", ge=1)
    teacher_margin: float = param(0.0, "sphere data: drop points with |teacher| below margin·std", ge=0, le=2)
    m: int = param(256, "width: hidden neurons", ge=1)
    bias: bool = param(True, "hidden biases b_s ~ N(0,1) and a fixed top bias ±1/√m (authors' code); "
                             "false is the theorem's model")
    C0: float = param(10.0, "lazy ball radius C0/√m per neuron, bias included (Seed 001, Def. 2.1)", gt=0)
    R: float | None = param(None, "absolute per-neuron radius; overrides C0/√m when set", gt=0)

    def check(self) -> None:
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
    """Per-neuron ball radius: ``R`` if set, else ``C0/√m``."""
    return cfg.R if cfg.R is not None else cfg.C0 / math.sqrt(cfg.m)


def input_bounds(cfg: LazyConfig) -> tuple[float, float]:
    """The box attacks clip to: pixels live in [0, 1] (sphere-normalised pixels too)."""
    return SPHERE_BOUNDS if cfg.dataset == "sphere" else (0.0, 1.0)


@functools.lru_cache(maxsize=8)
def _source(name: str, classes: tuple[int, ...], data_dir: str | None) -> Split:
    # Loading and parsing the embedded MNIST takes seconds: load each source once per
    # process at its own resolution; every size is then a cheap resize of these tensors.
    return load_images(name, classes=classes, flatten=False, data_dir=data_dir)


@functools.lru_cache(maxsize=32)
def _prepared(cfg_key: tuple) -> Split:
    (dataset, classes, size, dim, sphere, data_dir, max_train, max_test, tw, tm) = cfg_key
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
    return Split(prep(src.x_train[tr]), src.y_train[tr], prep(src.x_test[te]), src.y_test[te],
                 src.classes, True)


def load_data(cfg: LazyConfig) -> Split:
    """Flat inputs ``(N, d)`` with ±1 labels for ``cfg`` (shared by every seed of a point)."""
    key = (cfg.dataset, tuple(cfg.classes), cfg.size, cfg.dim, cfg.sphere, cfg.data_dir,
           cfg.max_train, cfg.max_test, cfg.teacher_width, cfg.teacher_margin)
    return _prepared(key)


def build_model(cfgs: list[LazyConfig], d: int, device: torch.device) -> TwoLayerReLU:
    """One copy per config, each drawn from its own seed."""
    base = cfgs[0]
    gens = [make_generator(c.seed, "lazy-init") for c in cfgs]
    return TwoLayerReLU.init(gens, m=base.m, d=d, bias=base.bias, device=device)


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


def describe_family(sub: pd.DataFrame, fields: tuple[str, ...]) -> dict:
    """The values of a few identifying fields of a family of runs (for claim evidence)."""
    out = {}
    for f in fields:
        if f in sub.columns:
            v = sub[f].iloc[0]
            out[f] = v.item() if hasattr(v, "item") else v
    return out
