"""Study ``width-depth-init``: how width, depth and initialisation move perturbation stability
(Seed 002, "Robustness in deep learning: the good (width), the bad (depth), and the ugly
(initialization)"; SPEC §C).

Each point trains E seeds of a depth-``L`` width-``m`` ReLU network (``init`` from Seed 002,
Table 1, see :mod:`robustlab.models.deep`) as one ensemble with minibatch SGD and a
step-decay schedule (§5.1), recording ``κ(t) = ‖θ(t) − θ(0)‖ / ‖θ(0)‖`` every epoch (§5.2),
and measures on held-out points

    P(f, ε) = E_x E_δ ‖J_x f(x) δ‖²  = ε² E_x ‖J_x f(x)‖_F² / (d + 2),   δ ~ U(B₂(0, ε))

exactly (the identity; Def. 3 per seed, Def. 1 the mean over the seeds of a point), with a
Monte Carlo estimate beside it at one point of the grid, and the accuracy (train and test)
beside every stability number: a network whose output hardly depends on its input is
"stable" without being robust (the pitfall SPEC §C records for deep LeCun networks).

**Two moments of measurement.** Stability grows as a network fits its training set (its
logits grow), and under a fixed schedule a wide, deep or NTK-initialised network fits much
further than a narrow or non-lazy one. So every seed is measured (a) when its training loss
first reaches ``target_loss`` — all networks compared at the same fit, which is what "train
to comparable training accuracy" asks — and (b) at the end of the schedule (the paper's
protocol). Claims are judged on (a); (b) is reported beside each, with its own verdict.
A seed that never reaches the target (an under-parameterised network) counts as untrained.

Claims, each a verdict of :mod:`robustlab.stats` (an effect with a 95 % interval over seeds,
decided against the threshold the paper's statement implies: reproduced, contradicted,
inconclusive with the seeds that would decide it, or not applicable where a premise fails),
each tested where seed 002 states it (SPEC §C, "where each statement lives"):

1. ``width-peak`` (Thm 1, Fig. 4a) — per seed, the interior-peak statistic
   ``min(log P(peak) − log P(narrowest), log P(peak) − log P(widest))`` (peak width picked on
   the other seeds) has a mean above 0, for He and LeCun at depth 2 and every deeper swept
   depth; not applicable where a width past the peak did not train, or where a seed's network
   is dead (P = 0) at its peak width (its statistic is −∞: named, not averaged away).
2. ``depth-init-at-init`` (Thm 1's lazy regime: at initialisation) — LeCun: slope of log P on
   L below 0 (the bound says about ln ½); He and NTK: slope of log P on log L above 0. Beside
   it, the exact expectation at initialisation (:func:`robustlab.metrics.expected_stability_at_init`):
   LeCun halves per layer, He and NTK are flat in depth, so the paper's polynomial rise is its
   upper bound's and the He/NTK parts cannot be reproduced at initialisation (see
   ``MECHANISM_AT_INIT``; the depth figure draws the closed form).
   ``depth-init-trained`` (§5.4, after training) — the same signs over the depths where every
   seed trained; a width with fewer than ``MIN_DEPTHS`` trained depths is not applicable.
3. ``nonlazy-width-early`` (Thm 3: early training, squared loss, small init) — the slope of
   log P on log m at the end of epoch ``early_epoch`` below 0, for one output under the squared
   loss, while no width has fitted yet; ``nonlazy-width`` (Fig. 4b, end of
   schedule) — the non-lazy slope of log P on log m below 0 and log(P_small / P_He) below 0.
4. ``kappa`` (§5.2) — at depth 2 and widths ≥ the training-set size: He's growth exponent of
   κ(t) below the non-lazy one, He's final κ falling with width, and the non-lazy κ an order
   of magnitude (a factor 10: mean log10 ratio above 1) larger.

Beside them, ``mc-identity`` checks the Monte Carlo estimate against the identity. Settings
that vary within one initialisation (a learning rate, γ, …) split it into separate series,
each judged; a rate may differ between initialisations ("a rate per init").
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..config import Config, ConfigError, param
from ..data import load_images
from ..data.images import SHAPES, Split
from ..errors import NumericalError
from ..metrics import expected_stability_at_init, perturbation_stability
from ..models.deep import INITS, ConvNet, DeepMLP, ResNet, VmapEnsemble
from ..models.ensemble import Flat, fold
from ..report.plots import COLORS, label_panels, log_axes, mean_band, save, subplots
from ..stats import (
    INCONCLUSIVE,
    Condition,
    Estimate,
    Verdict,
    combine,
    decide,
    difference_estimate,
    mean_estimate,
    not_applicable,
    slope_estimate,
)
from ..sweep import checkpoint
from ..train.supervised import SGDSpec, evaluate, resume_fits, train_supervised
from ..utils import make_generator, resolve_device
from .base import SEEDS_KEY, Claim, Context, Figure, Preset, Study

SOURCE = "Seed 002 (Robustness in deep learning: the good (width), the bad (depth), the ugly (initialization))"

DATASETS = ("mnist5k", "digits", "mnist", "cifar10", "cifar100")
ARCHS = ("fcn", "cnn", "resnet")

# Claim thresholds (see the module docstring). Chosen before the runs; never tuned to pass.
ACC_FLOOR = 0.9  # end-of-schedule protocol: a seed "trained" when its training accuracy is at least this
MIN_WIDTHS = 4  # a width curve needs this many widths to show a peak
MIN_DEPTHS = 3  # a depth curve needs this many depths for a slope with an interval


@dataclasses.dataclass(frozen=True)
class WidthDepthInitConfig(Config):
    study = "width-depth-init"
    # data
    dataset: str = param("mnist5k", "image dataset (mnist, cifar10, cifar100 need data_dir)", choices=DATASETS)
    data_dir: str | None = param(None, "folder holding the torchvision files of mnist/cifar10/cifar100")
    classes: tuple[int, ...] = param((), "class subset (empty: all classes)")
    size: int | None = param(None, "resize images to size x size (none: native)", ge=2)
    sphere: bool = param(True, "normalise every input to the unit sphere (Seed 002, Assumption 1)")
    n_train: int = param(0, "training points, stratified over classes (0: all)", ge=0)
    n_test: int = param(500, "held-out points for accuracy and stability (0: all)", ge=0)
    # model
    arch: str = param("fcn", "fully connected (ensemble), or the CNN / ResNet variants (App. E)", choices=ARCHS)
    width: int = param(256, "width m (channels for cnn/resnet)", ge=1)
    depth: int = param(2, "depth L: number of weight layers", ge=2)
    init: str = param("he", "initialisation (Seed 002, Table 1; small: variance m^-gamma)", choices=INITS)
    gamma: float = param(2.0, "exponent of the non-lazy init, variance m^-gamma (reconstructed)", gt=0)
    output: str = param("multi", "multi: k logits + cross-entropy; single: one output + squared loss (2 classes)",
                        choices=("multi", "single"))
    # training (Seed 002 §5.1: SGD, 50 epochs, step decay; the numbers were lost: reconstructed)
    epochs: int = param(50, "training epochs", ge=1)
    batch_size: int = param(64, "minibatch size", ge=1)
    lr: float = param(0.1, "initial learning rate", gt=0)
    momentum: float = param(0.9, "heavy-ball momentum", ge=0, lt=1)
    decay_start: int = param(30, "first epoch (0-based) of the step decay (0: constant rate)", ge=0)
    lr_step: int = param(10, "epochs between further decays (0: one decay)", ge=0)
    lr_gamma: float = param(0.1, "decay factor", gt=0, le=1)
    target_loss: float = param(0.2, "measure each seed also when its training loss first reaches this "
                                    "(comparable training; 0: only at the end)", ge=0)
    stop_at_target: bool = param(False, "stop training a seed at target_loss (cheaper; kappa(t) then ends there)")
    early_epoch: int = param(1, "also measure stability at the end of this epoch: the early-training window of "
                                "Thm 3 (0: off)", ge=0)
    # measurement
    eps: float = param(0.1, "radius of the l2 perturbation ball", gt=0)
    mc_samples: int = param(200, "Monte Carlo draws per point at the MC grid point (0: none)", ge=0)
    mc_points: int = param(100, "held-out points used for the Monte Carlo estimate", ge=1)
    mc_init: str = param("he", "the grid point that gets the Monte Carlo estimate: init", choices=INITS)
    mc_depth: int = param(2, "... depth", ge=2)
    mc_width: int = param(256, "... width", ge=1)

    def check(self) -> None:
        if self.mc_samples == 1:
            raise ConfigError("mc_samples", 1, "0 (off) or >= 2")
        if self.dataset in ("mnist", "cifar10", "cifar100") and self.data_dir is None:
            raise ConfigError("data_dir", None, f"a folder holding the {self.dataset} files (dataset={self.dataset})")
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            raise ConfigError("data_dir", self.data_dir, "an existing directory")
        if self.dataset == "digits" and self.size is not None and self.size > 8:
            raise ConfigError("size", self.size, "<= 8 for digits (8x8 images)")
        if self.output == "single" and len(self.classes) != 2:
            raise ConfigError("classes", list(self.classes), "exactly two classes for output=single")
        if len(set(self.classes)) != len(self.classes) or any(c < 0 for c in self.classes):
            raise ConfigError("classes", list(self.classes), "distinct non-negative class labels")
        if len(self.classes) == 1:
            raise ConfigError("classes", list(self.classes), "at least two classes (or empty: all)")
        if self.stop_at_target and not self.target_loss:
            raise ConfigError("stop_at_target", True, "false unless target_loss > 0")
        if self.arch != "fcn" and self.output == "single":
            raise ConfigError("output", self.output, "multi for arch=cnn/resnet")
        if self.early_epoch > self.epochs:
            raise ConfigError("early_epoch", self.early_epoch, f"0 (off) or <= epochs ({self.epochs})")

    @property
    def loss(self) -> str:
        return "ce" if self.output == "multi" else "mse"

    def sgd(self) -> SGDSpec:
        return SGDSpec(epochs=self.epochs, lr=self.lr, batch_size=self.batch_size, momentum=self.momentum,
                       decay_start=self.decay_start, lr_step=self.lr_step, lr_gamma=self.lr_gamma,
                       loss=self.loss, target_loss=self.target_loss, stop_at_target=self.stop_at_target)


# ---------------------------------------------------------------------------------------
# data

def _stratified_subset(labels: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """Sorted indices of ``n`` points, as many of each class as it has up to ``n // k`` (the
    first ``n mod k`` classes one more), taken in a random order drawn from ``generator``;
    a class short of its quota is made up from the others, in that order. All points when
    ``n`` is 0 or at least their number."""
    if n == 0 or n >= len(labels):
        return torch.arange(len(labels))
    order = torch.randperm(len(labels), generator=generator)
    counts = torch.bincount(labels)
    k = len(counts)
    quota = torch.minimum(counts, torch.full_like(counts, n // k) + (torch.arange(k) < n % k).long())
    # in the drawn order a point is taken while its class is under quota: the first quota[c]
    # points of class c, found from each point's rank within its class. A few tensor ops in
    # all: a loop with tensor ops per point took 0.03 s alone, but seconds in a driver whose
    # drawing thread takes the GIL back each time such an op lets it go
    lab = labels[order]
    by_class = torch.sort(lab, stable=True).indices
    rank = torch.empty_like(lab)
    rank[by_class] = torch.arange(len(lab)) - (torch.cumsum(counts, 0) - counts)[lab[by_class]]
    keep = rank < quota[lab]
    picked, rest = order[keep], order[~keep]
    return torch.sort(torch.cat([picked, rest[: n - len(picked)]])).values


@functools.lru_cache(maxsize=4)
def _prepared(dataset: str, data_dir: str | None, classes: tuple[int, ...], size: int | None, sphere: bool,
              flatten: bool, binary: bool, n_train: int, n_test: int) -> Split:
    split = load_images(dataset, classes=classes or None, binary=binary, size=size, flatten=flatten,
                        sphere=sphere, data_dir=data_dir)

    def subset(y: torch.Tensor, n: int, salt: str) -> torch.Tensor:
        # Stratified and fixed across seeds (Def. 1 averages over initialisations only):
        # the loaders order points by class, so a prefix would hold one class.
        labels = y.long() if not binary else (y > 0).long()
        return _stratified_subset(labels, n, make_generator(0, "wdi-subset", salt))

    tr, te = subset(split.y_train, n_train, "train"), subset(split.y_test, n_test, "test")
    return dataclasses.replace(split, x_train=split.x_train[tr], y_train=split.y_train[tr],
                               x_test=split.x_test[te], y_test=split.y_test[te])


def load_data(cfg: WidthDepthInitConfig) -> Split:
    return _prepared(cfg.dataset, cfg.data_dir, cfg.classes, cfg.size, cfg.sphere, cfg.arch == "fcn",
                     cfg.output == "single", cfg.n_train, cfg.n_test)


def point_flops(cfg: WidthDepthInitConfig) -> float | None:
    """FLOPs of one seed's training (fcn: the matrix products, 6 per weight and sample and
    epoch: forward 2, backward 4 — as the rows' ``train_gflop``); None for the conv archs.

    Counted from the dataset's sizes (``data.images.SHAPES``), not from the data: the driver
    weighs every point before the first one starts, and loading there took 1.5–2 s while the
    workers waited (the previous study's drawing thread holds the GIL). Exact where
    ``n_train`` is set and the chosen classes hold that many training points (every preset);
    otherwise it counts the classes' share of the training set, which their balance moves
    by a few per cent."""
    if cfg.arch != "fcn":
        return None
    shape = SHAPES[cfg.dataset]
    side, k = cfg.size or shape.side, len(cfg.classes) or shape.classes
    dims = [shape.channels * side * side] + [cfg.width] * (cfg.depth - 1) + [1 if cfg.output == "single" else k]
    return 6.0 * _n_train(cfg) * sum(a * b for a, b in zip(dims, dims[1:])) * cfg.epochs


def _n_train(cfg: WidthDepthInitConfig) -> int:
    """The training points a point uses, from the size table (as :func:`point_flops`)."""
    shape = SHAPES[cfg.dataset]
    n_train = shape.n_train * (len(cfg.classes) or shape.classes) // shape.classes
    return min(n_train, cfg.n_train) if cfg.n_train else n_train


PROBE_BATCHES = 8  # minibatches per epoch of a --dry-run probe


def probe_point(cfg: WidthDepthInitConfig, steps: int) -> WidthDepthInitConfig:
    """``cfg`` cut to about ``steps`` minibatches of its size (``Study.probe``, for
    ``--dry-run``): epochs over :data:`PROBE_BATCHES` minibatches of training points (fewer
    if it has fewer), so every step multiplies the same shapes as the point's own training,
    with 16 test points, no Monte Carlo estimate and no measurement at a target loss or an
    early epoch. Probes of different lengths differ only in their epochs, so the difference
    of their times is training alone."""
    n = min(_n_train(cfg), PROBE_BATCHES * cfg.batch_size)
    epochs = max(1, round(steps / math.ceil(n / cfg.batch_size)))
    return dataclasses.replace(cfg, epochs=epochs, n_train=n, n_test=16, mc_samples=0, target_loss=0.0,
                               stop_at_target=False, early_epoch=0)


# ---------------------------------------------------------------------------------------
# running a point

def build_model(cfgs: list[WidthDepthInitConfig], data: Split, device: torch.device) -> torch.nn.Module:
    """The E seeds of one point as one ensemble model ``(E, N, ...) -> (E, N, k)``."""
    base = cfgs[0]
    k = 1 if base.output == "single" else data.n_classes
    gens = [make_generator(c.seed, "wdi-init") for c in cfgs]
    gamma = base.gamma if base.init == "small" else None
    if base.arch == "fcn":
        return DeepMLP(data.d, base.width, base.depth, k, init=base.init, gamma=gamma, generators=gens,
                       dtype=data.x_train.dtype, device=device)
    cls = ConvNet if base.arch == "cnn" else ResNet
    nets = [cls(data.x_train.shape[1], base.width, base.depth, k, init=base.init, gamma=gamma, generator=g)
            for g in gens]
    return VmapEnsemble(nets).to(device)


def _per_member_stability(model: torch.nn.Module, x: torch.Tensor, eps: float, E: int, *,
                          width: int = 1, budget: int = 2**24) -> torch.Tensor:
    """Def. 3 for each copy, ``(E,)``: the identity ε²‖J‖_F²/(d+2) averaged over the points.

    Points go through in chunks that keep one hidden activation (E · chunk · width floats)
    within ``budget``: the Jacobian's k backward passes run batched, k copies of each. A
    :class:`DeepMLP` gives its Jacobian in closed form (its k columns held at once, so the
    chunk is k times smaller); other models go through autograd.
    """
    closed = isinstance(model, DeepMLP)
    flat = None if closed else Flat(model, E)
    chunk = max(1, budget // max(1, E * width * (model.k if closed else 1)))
    parts = []
    for i in range(0, len(x), chunk):
        xe = x[i:i + chunk].expand(E, *x[i:i + chunk].shape)  # (E, n, ...)
        if closed:
            parts.append(eps**2 * model.jacobian_fro_sq(xe) / (xe[0, 0].numel() + 2))
        else:
            per = perturbation_stability(flat, fold(xe), eps, per_sample=True)  # (E·n,)
            parts.append(per.reshape(E, xe.shape[1]))
    return torch.cat(parts, 1).mean(1)


AT_TARGET = ("stability", "train_loss", "train_acc", "test_acc")


def run_points(cfgs: list[WidthDepthInitConfig], device: str = "cpu") -> list:
    """Train the seeds of one point as an ensemble; measure stability, accuracy and κ.

    Stability and accuracy are measured twice: when a seed's training loss first reaches
    ``target_loss`` (every network compared at the same fit of the training set) and at the
    end of the schedule (the paper's protocol). A seed that never reaches the target (an
    under-parameterised network) is measured at the end for both, flagged ``reached_target``.
    """
    t0 = time.perf_counter()
    base = cfgs[0]
    dev = resolve_device(device)
    data = load_data(base).to(dev)
    E = len(cfgs)
    model = build_model(cfgs, data, dev)
    d = data.d
    # floats of one hidden activation per point (a CNN's channels at every pixel)
    act = base.width if base.arch == "fcn" else base.width * data.x_test[0, 0].numel()
    spec = base.sgd()
    stab0 = _per_member_stability(model, data.x_test, base.eps, E, width=act)
    at = {k: torch.full((E,), float("nan"), dtype=torch.float64) for k in AT_TARGET}

    def on_target(newly: torch.Tensor, epoch: int) -> None:
        # only the copies that reached the target now are measured (the others' values here
        # would be thrown away), as a sub-ensemble of those copies
        idx = newly.nonzero().flatten().tolist()
        sub, n = (model, E) if len(idx) == E else (model.members(idx), len(idx))
        vals = dict(zip(("train_loss", "train_acc"), evaluate(sub, data.x_train, data.y_train, spec.loss, E=n)))
        vals["test_acc"] = evaluate(sub, data.x_test, data.y_test, spec.loss, E=n)[1]
        vals["stability"] = _per_member_stability(sub, data.x_test, base.eps, n, width=act)
        for k in AT_TARGET:
            at[k][newly] = vals[k].detach().double().cpu()

    early: dict[str, torch.Tensor] = {}

    def on_epoch(epoch: int) -> None:
        if epoch == base.early_epoch:  # Thm 3's window: the network as it stands early in training
            early["train_loss"] = evaluate(model, data.x_train, data.y_train, spec.loss, E=E)[0]
            early["stability"] = _per_member_stability(model, data.x_test, base.eps, E, width=act)

    # a long group saves its state now and then in the run's checkpoints/ and, run again after
    # an interruption, goes on from there (the same records; robustlab.sweep.checkpoint)
    ck = checkpoint.for_group(cfgs)
    saved = ck.load() if ck is not None else None
    if saved is not None and not resume_fits(saved["train"], model, spec, E):
        saved = None  # saved by other code: this run starts the group afresh
    trained_before = 0.0  # seconds of training in earlier runs of this group
    if saved is not None:  # copies of the small parts; the training state goes to train_supervised,
        for k in AT_TARGET:  # and no reference here keeps the mapped file (Checkpoint.load) alive
            at[k].copy_(saved["at"][k])
        early.update({k: v.clone() for k, v in saved["early"].items()})
        trained_before = float(saved["train_seconds"])
        saved = {"train": saved["train"]}
    t_train = time.perf_counter()

    def on_checkpoint(state: Callable[[], dict]) -> None:
        if ck.due():
            st = state()
            ck.save({"train": st, "at": at, "early": early,
                     "train_seconds": trained_before + time.perf_counter() - t_train},
                    progress=f"{base.init} depth {base.depth} width {base.width} epoch {st['epoch']}/{spec.epochs}")

    log = train_supervised(model, data.x_train, data.y_train, spec, on_target=on_target, on_epoch=on_epoch,
                           generators=[make_generator(c.seed, "wdi-order") for c in cfgs],
                           on_checkpoint=on_checkpoint if ck is not None else None,
                           resume=saved.pop("train") if saved is not None else None)
    t_train = trained_before + time.perf_counter() - t_train
    tr_loss, tr_acc = evaluate(model, data.x_train, data.y_train, spec.loss, E=E)
    te_loss, te_acc = evaluate(model, data.x_test, data.y_test, spec.loss, E=E)
    stab = _per_member_stability(model, data.x_test, base.eps, E, width=act)
    end = {"stability": stab, "train_loss": tr_loss, "train_acc": tr_acc, "test_acc": te_acc}
    for k in AT_TARGET:  # never reached: the end of the schedule is as far as it got
        miss = log.reached == 0
        at[k][miss] = end[k].detach().double().cpu()[miss]
    mc = mc_se = mc_exact = None
    is_mc_point = (base.mc_samples > 0 and base.init == base.mc_init and base.depth == base.mc_depth
                   and base.width == base.mc_width)
    if is_mc_point:
        xm = data.x_test[: base.mc_points]
        n = len(xm)
        mc, mc_se = torch.zeros(E), torch.zeros(E)
        for e, c in enumerate(cfgs):
            # One copy at a time: the Monte Carlo path tiles the batch S times, which a Flat
            # ensemble would split across copies (rows e·N … no longer belong to copy e).
            est = perturbation_stability(Flat(model.member(e), 1), xm, base.eps, samples=base.mc_samples,
                                         generator=make_generator(c.seed, "wdi-mc"), per_sample=True)
            mc[e] = est.mean.mean()
            # draws are independent across points: the mean's variance is the sum over points / n²
            mc_se[e] = est.stderr.pow(2).sum().sqrt() / n
        mc_exact = _per_member_stability(model, xm, base.eps, E, width=act)
    seconds = trained_before + time.perf_counter() - t0
    n_params = model.n_params()
    out: list = []
    for e, c in enumerate(cfgs):
        finals = [float(v) for v in (tr_loss[e], tr_acc[e], te_loss[e], te_acc[e], stab[e], stab0[e])]
        finals += [float(at[k][e]) for k in AT_TARGET]
        if not bool(log.finite[e]) or not all(math.isfinite(v) for v in finals):
            out.append(NumericalError(f"seed {c.seed}: training diverged or stability is not finite "
                                      f"(lr={c.lr}, init={c.init}, width={c.width}, depth={c.depth})"))
            continue
        trained = int(log.stopped[e])
        reached = int(log.reached[e])
        # training FLOPs of this copy (fcn: the matrix products, 6 per weight and sample: forward 2,
        # backward 4), and the rate the whole ensemble trained at (its wall time, callbacks included)
        gflop = (6.0 * len(data.x_train) * n_params * trained / 1e9) if base.arch == "fcn" else None
        ens_gflop = (6.0 * len(data.x_train) * n_params * float(log.stopped.sum()) / 1e9) if gflop is not None else None
        rows = [{"kind": "epoch", "epoch": t + 1, "loss": float(log.loss[e, t]),
                 "train_acc_running": float(log.acc[e, t]), "kappa": float(log.kappa[e, t]),
                 "kappa_layers": [float(v) for v in log.kappa_layers[e, t]], "lr": log.lr[t]}
                for t in range(trained)]
        final = {"kind": "final", "epoch": trained, "train_loss": finals[0], "train_acc": finals[1],
                 "test_loss": finals[2], "test_acc": finals[3], "stability": finals[4],
                 "grad_norm2": finals[4] * (d + 2) / c.eps**2, "stability_init": finals[5],
                 **{f"{k}_at_target": float(at[k][e]) for k in AT_TARGET},
                 "reached_target": reached > 0, "epoch_at_target": reached or trained,
                 "kappa": float(log.kappa[e, trained - 1]),
                 "kappa_layers": [float(v) for v in log.kappa_layers[e, trained - 1]],
                 "n_params": n_params, "n_train": len(data.x_train), "n_test": len(data.x_test), "d": d,
                 "outputs": 1 if c.output == "single" else data.n_classes,
                 "seconds": seconds, "train_seconds": t_train, "train_gflop": gflop,
                 "gflops": ens_gflop / t_train if ens_gflop is not None and t_train > 0 else None}
        if early:
            final.update(early_epoch=c.early_epoch, stability_early=float(early["stability"][e]),
                         train_loss_early=float(early["train_loss"][e]))
        if is_mc_point:
            final.update(mc_stability=float(mc[e]), mc_stderr=float(mc_se[e]), mc_exact=float(mc_exact[e]),
                         mc_samples=c.mc_samples, mc_points=len(xm))
        out.append(rows + [final])
    if ck is not None:
        ck.clear()
    return out


# ---------------------------------------------------------------------------------------
# analysis helpers

PROTOCOLS = {"target": "at equal training loss (target_loss)", "end": "at the end of the schedule"}


def finals(df: pd.DataFrame) -> pd.DataFrame:
    if "kind" not in df.columns:
        return df.iloc[0:0]
    return df[df["kind"] == "final"]


def view(f: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """Final rows with ``stability``/``train_acc``/``test_acc``/``train_loss`` and a ``trained``
    flag taken from one protocol.

    ``target``: measured when the seed's training loss first reached ``target_loss``;
    trained means it did reach it. ``end``: measured at the end of the schedule; trained
    means a training accuracy of at least ``ACC_FLOOR``.
    """
    v = f.copy()
    if protocol == "target":
        for k in AT_TARGET:
            v[k] = v[f"{k}_at_target"]
        v["trained"] = v["reached_target"].astype(bool)
    else:
        v["trained"] = v["train_acc"] >= ACC_FLOOR
    return v


def protocols(f: pd.DataFrame) -> list[str]:
    """The protocols the results support, the one the claims are judged on first."""
    has_target = ("target_loss" in f.columns and "stability_at_target" in f.columns
                  and bool((f["target_loss"] > 0).all()))
    return ["target", "end"] if has_target else ["end"]


def _r(v: float, digits: int = 4) -> float | None:
    v = float(v)
    return float(f"{v:.{digits}g}") if math.isfinite(v) else None


def curve(v: pd.DataFrame, x: str, y: str = "stability") -> pd.DataFrame:
    """Seed statistics of ``y`` against ``x`` (mean, std, sem, n) with the mean accuracies and
    the fraction of seeds that trained (a :func:`view`)."""
    g = v.groupby(x)
    out = g[y].agg(["mean", "std", "count"]).rename(columns={"count": "n"})
    out["sem"] = out["std"] / np.sqrt(out["n"])
    for k in ("train_acc", "test_acc", "train_loss"):
        out[k] = g[k].mean()
    out["trained"] = g["trained"].mean()
    return out.sort_index()


def _table(c: pd.DataFrame) -> list[dict]:
    return [{"x": int(i), "mean": _r(r["mean"]), "sem": _r(r["sem"]), "n": int(r["n"]),
             "train_acc": _r(r["train_acc"], 3), "test_acc": _r(r["test_acc"], 3),
             "train_loss": _r(r["train_loss"], 3), "trained": _r(r["trained"], 3)}
            for i, r in c.iterrows()]


# Fields that index a curve or its seeds; any *other* field that varies within one init
# (a learning rate, gamma, a dataset, …) splits that init into separate series, so that the
# claims never pool networks trained differently. (A learning rate may still differ *between*
# inits — "a rate per init" — since inits are always compared as separate series.)
_CURVE_FIELDS = {"seed", "width", "depth", "init", "mc_samples", "mc_points", "mc_init", "mc_depth", "mc_width"}


def series(v: pd.DataFrame, init: str) -> list[tuple[str, pd.DataFrame]]:
    """The rows of ``init`` split by every setting that varies among them: ``[(label, rows)]``,
    ``label`` ``""`` when nothing else varies, else e.g. ``"[lr=0.3]"``."""
    sub = v[v["init"] == init]
    keys = [k for k in WidthDepthInitConfig.field_names()
            if k not in _CURVE_FIELDS and k in sub.columns and sub[k].astype(str).nunique() > 1]
    if not keys:
        return [("", sub)] if len(sub) else []
    out = []
    # group on the values' text: a list-valued field (classes) is not hashable
    for vals, s in sub.groupby([sub[k].astype(str) for k in keys], dropna=False, sort=True):
        vals = vals if isinstance(vals, tuple) else (vals,)
        out.append(("[" + ",".join(f"{k}={x}" for k, x in zip(keys, vals)) + "]", s))
    return out


# ---------------------------------------------------------------------------------------
# claims
#
# Every claim is a verdict (robustlab.stats): an effect with a 95 % interval over seeds,
# decided against the threshold the paper's statement implies, with the premises it rests
# on as conditions (a network that did not train, weights that left the lazy regime: "not
# applicable", never evidence). A statement with several parts (one per init, depth, width
# or series) holds when every part does (stats.combine).

def _part(v: Verdict, **extra) -> dict:
    return {**v.to_dict(), **extra}


def _log_pivot(sub: pd.DataFrame, col: str, x: str = "width") -> pd.DataFrame:
    """``log col`` as a seed x ``x`` table (non-positive values become NaN)."""
    piv = sub.pivot_table(index="seed", columns=x, values=col, aggfunc="first").sort_index(axis=1)
    return np.log(piv.where(piv > 0))


def _trained_at(sub: pd.DataFrame, x: str) -> pd.Series:
    """Per value of ``x``: did every seed train (a :func:`view`'s ``trained``)?"""
    return sub.groupby(x)["trained"].all().sort_index()


def peak_estimate(sub: pd.DataFrame) -> tuple[Estimate, dict]:
    """The interior-peak statistic of one width sweep, one value per seed, with its t interval.

    For seed ``s`` the peak width is the interior width where the *other* seeds' mean of
    ``log P`` is largest (cross-fitted, so that picking the maximum does not bias the seed's
    own value upwards), and its statistic is ``min(log P_s(peak) − log P_s(narrowest),
    log P_s(peak) − log P_s(widest))``: positive when the peak stands above both ends of
    the grid. With fewer than three seeds the peak is picked on all seeds. A network whose
    units all died has ``P = 0`` exactly (``log P = −∞``): an end at zero lies below any peak,
    and the peak is picked on the other seeds' living networks. A seed whose own network is
    dead at its peak width has no finite statistic (``−∞``, dropped by the mean): those seeds
    are listed in ``dead_at_peak`` as ``[seed, width]``, for the claim to say so rather than
    judge the peak on the seeds that are left.
    """
    piv = sub.pivot_table(index="seed", columns="width", values="stability", aggfunc="first").sort_index(axis=1)
    with np.errstate(divide="ignore"):
        logp = np.log(piv.clip(lower=0))
    widths = list(logp.columns)
    inner = widths[1:-1]
    vals, peaks, dead = [], [], []
    for s in logp.index:
        rest = logp.drop(index=s) if len(logp) >= 3 else logp
        pk = rest[inner].replace(-np.inf, np.nan).mean().idxmax()
        peaks.append(int(pk))
        row = logp.loc[s]
        if row[pk] == -np.inf:  # (−∞) − (−∞) would be NaN where an end is dead too
            dead.append([int(s), int(pk)])
            vals.append(-math.inf)
        else:
            vals.append(min(row[pk] - row[widths[0]], row[pk] - row[widths[-1]]))
    est = mean_estimate(vals, what="seeds")
    pk_all = int(logp[inner].replace(-np.inf, np.nan).mean().idxmax())
    return est, {"peak_width": pk_all, "peak_width_per_seed": peaks, "dead_at_peak": dead,
                 "peak_over_ends": _r(math.exp(est.value)) if math.isfinite(est.value) else None}


def _judge(f: pd.DataFrame, check) -> tuple[Verdict, dict]:
    """Run ``check(view) -> (verdict, evidence)`` on every protocol the results hold; the claim's
    verdict is the first's (equal training loss when measured), the others are reported beside."""
    if f.empty or "stability" not in f.columns:
        return Verdict(INCONCLUSIVE, reason="no final results"), {"reason": "no final results"}
    ps = protocols(f)
    ev: dict = {"judged_on": PROTOCOLS[ps[0]]}
    first = None
    for p in ps:
        verdict, e = check(view(f, p))
        ev[p] = {"verdict": verdict.verdict, "effect": verdict.effect, "interval": verdict.interval, **e}
        first = first or verdict
    return first, ev


def claim_width(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    f = f[f["init"].isin(["he", "lecun"])]
    statement = ("Lazy regime, width: stability first rises then falls with width (an interior maximum) "
                 "for He and LeCun at depth 2 and deeper")

    def check(v: pd.DataFrame) -> tuple[Verdict, dict]:
        # Every width sweep is judged, in its own series; each init needs sweeps at depth 2 and
        # deeper over its series together (a series that holds only some depths, e.g. a second
        # training-set size swept at depth 2 alone, adds its parts and takes nothing away).
        parts, ev = [], {}
        for init in ("he", "lecun"):
            judged: set[int] = set()
            for label, vi in series(v, init):
                depths = sorted(int(L) for L, s in vi.groupby("depth") if s["width"].nunique() >= MIN_WIDTHS)
                judged.update(depths)
                for L in depths:
                    sub = vi[vi["depth"] == L]
                    est, extra = peak_estimate(sub)
                    tr = _trained_at(sub, "width")
                    untrained = [int(m) for m in tr.index[(tr.index > extra["peak_width"]) & ~tr.to_numpy()]]
                    cond = Condition("widths past the peak trained", not untrained,
                                     f"untrained widths {untrained}" if untrained else "every seed trained")
                    dead = extra["dead_at_peak"]
                    alive = Condition("every seed alive at its peak width", not dead,
                                      f"P = 0 (every unit dead) for [seed, width] {dead}" if dead else
                                      "every seed's network alive there")
                    verdict = decide(est, threshold=0.0, side="above", conditions=[cond, alive],
                                     reason=f"{init} L={L}{label}")
                    parts.append(verdict)
                    ev[f"{init}_L{L}{label}"] = _part(verdict, **extra, curve=_table(curve(sub, "width")))
            if 2 not in judged or not any(L > 2 for L in judged):
                why = (f"needs width sweeps (>= {MIN_WIDTHS} widths) at depth 2 and deeper; has depths "
                       f"{sorted(judged)}")
                parts.append(decide(None, threshold=0.0, reason=f"{init}: {why}"))
                ev[init] = why
        return combine(parts), ev

    verdict, ev = _judge(f, check)
    ev = {"definition": "per seed, the interior-peak statistic min(log P(peak) - log P(narrowest), log P(peak) - "
                        "log P(widest)), the peak picked on the other seeds (cross-fitted); its mean over seeds "
                        "with a 95% t interval must lie above 0 for He and LeCun at depth 2 and every deeper depth "
                        "with a width sweep; not applicable where a width past the peak did not train every seed, "
                        "or a seed's network is dead (P = 0) at its peak width",
          **ev}
    return Claim("width-peak", statement, verdict, ev, SOURCE + ", Thm 1, §5.3, Fig. 4(a)")


def _seed_peaks(sub: pd.DataFrame) -> list[float]:
    """log2 of each seed's own interior peak width: the interior width of largest stability."""
    out = []
    for _, s in sub.groupby("seed"):
        s = s.sort_values("width")
        if s["width"].nunique() >= MIN_WIDTHS:
            inner = s.iloc[1:-1]
            out.append(float(np.log2(inner["width"].iloc[int(np.nanargmax(inner["stability"].to_numpy(float)))])))
    return out


def claim_width_moves(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    """The width peak against the training-set size.

    Thm 1 ties the rise and fall to the passage from under- to over-parameterisation, so a
    larger training set should move the peak to larger widths. For He and LeCun at every depth
    swept in width at two or more training-set sizes: each seed's interior peak width (log2),
    mean at the largest size minus mean at the smallest, Welch interval above 0. A width past
    the smaller peak where a seed did not train makes the part not applicable; a run with one
    training-set size makes the claim not applicable.
    """
    f = finals(df)
    f = f[f["init"].isin(["he", "lecun"])] if len(f) else f
    statement = "Lazy regime, width: the stability peak moves to larger widths with a larger training set"
    src = SOURCE + ", Thm 1, §5.3"
    if f.empty or "stability" not in f.columns or "n_train" not in f.columns or f["n_train"].nunique() < 2:
        return Claim("width-peak-n-train", statement,
                     not_applicable("the run has one training-set size: the peak cannot be compared across sizes"),
                     {"reason": "needs width sweeps at two or more training-set sizes (paper-width-n)"}, src)

    def check(v: pd.DataFrame) -> tuple[Verdict, dict]:
        parts, ev = [], {}
        for init in ("he", "lecun"):
            for L, sub in v[v["init"] == init].groupby("depth"):
                sizes = sorted(int(n) for n, s in sub.groupby("n_train") if s["width"].nunique() >= MIN_WIDTHS)
                if len(sizes) < 2:
                    continue
                small, large = sub[sub["n_train"] == sizes[0]], sub[sub["n_train"] == sizes[-1]]
                a, b = _seed_peaks(large), _seed_peaks(small)
                first = 2 ** min(b) if b else 0
                past = sub[sub["width"] > first]
                untrained = sorted({int(n) for n, s in past.groupby("n_train") if not s["trained"].all()})
                cond = Condition("trained past the smaller peak", not untrained,
                                 f"n_train {untrained}: a seed did not train at a width past {first}"
                                 if untrained else "every seed trained")
                verdict = decide(difference_estimate(a, b), threshold=0.0, side="above", conditions=[cond],
                                 reason=f"{init} L={int(L)}: log2 peak width at n_train={sizes[-1]} minus "
                                        f"n_train={sizes[0]}")
                parts.append(verdict)
                ev[f"{init}_L{int(L)}"] = _part(verdict, peak_log2_width={str(sizes[0]): b, str(sizes[-1]): a})
        if not parts:
            return not_applicable("no depth swept in width at two training-set sizes"), ev
        return combine(parts), ev

    verdict, ev = _judge(f, check)
    ev = {"definition": "per seed, log2 of the interior width where its stability is largest; the mean at the "
                        "largest training-set size minus the mean at the smallest, with a Welch 95% interval, "
                        "must lie above 0 for He and LeCun at every depth swept at two sizes", **ev}
    return Claim("width-peak-n-train", statement, verdict, ev, src)


DEPTH_SIGNS = (("lecun", -1), ("he", 1), ("ntk", 1))

# Why He and NTK cannot "rise" at initialisation (robustlab.metrics.expected_stability_at_init)
MECHANISM_AT_INIT = (
    "Closed form (exact at finite width, bias-free ReLU network): E_W ||J_x f||_F^2 = d k beta_L "
    "prod_{l<L} (m beta_l / 2). LeCun (m beta = 1) halves it per layer; He (m beta = 2) and NTK keep it "
    "constant in depth. Seed 002's polynomial growth for He and NTK is that of its upper bound (Thm 1), "
    "not of the quantity: at initialisation the expectation is flat, so the He/NTK parts of this claim "
    "cannot be reproduced by more seeds; a slight measured fall is Jensen's gap of log P (its seed "
    "variance grows with depth). closed_form, closed_form_slope and measured_over_closed_form give the "
    "check per width. Network by network it is exact too: from the same seed He's weights are LeCun's "
    "times sqrt 2 in every layer and ReLU is positively homogeneous, so P_He = 2^L P_LeCun "
    "(he_vs_lecun_same_seed): LeCun falling by ln 1/2 per layer and He staying flat are one fact.")


def _depth_parts(v: pd.DataFrame, col: str, need_trained: bool) -> tuple[Verdict, dict]:
    """One part per init: LeCun's slope of log ``col`` on L below 0, He's and NTK's slope of
    log ``col`` on log L above 0, at every width with >= MIN_DEPTHS depths (combined over widths
    and series). With ``need_trained`` only depths where every seed trained are fitted, and a
    width with fewer than MIN_DEPTHS such depths is not applicable."""
    inits, ev = [], {}
    for init, sign in DEPTH_SIGNS:
        parts = []
        for label, vi in series(v, init):
            for m, sub in vi.groupby("width"):
                if sub["depth"].nunique() < MIN_DEPTHS:
                    continue
                conds, use = [], sub
                if need_trained:
                    tr = _trained_at(sub, "depth")
                    ok = [int(L) for L in tr.index[tr.to_numpy()]]
                    bad = [int(L) for L in tr.index[~tr.to_numpy()]]
                    conds.append(Condition("trained", len(ok) >= MIN_DEPTHS,
                                           f"depths {ok} trained every seed" + (f"; {bad} did not (left out)"
                                                                                  if bad else "")))
                    use = sub[sub["depth"].isin(ok)]
                est = slope_estimate(use["depth"], use[col], log_x=sign > 0, log_y=True)
                verdict = decide(est, threshold=0.0, side="below" if sign < 0 else "above", conditions=conds,
                                 reason=f"{init} m={int(m)}{label}")
                extra = {}
                if init == "lecun" and verdict.interval and None not in verdict.interval:
                    extra["ln_half_in_interval"] = bool(verdict.interval[0] <= math.log(0.5) <= verdict.interval[1])
                if col == "stability_init":
                    extra.update(_closed_form_at_init(sub))
                    flat = extra.get("closed_form_slope") is not None and abs(extra["closed_form_slope"]) < 1e-9
                    if flat and verdict.verdict == INCONCLUSIVE:
                        # the true slope sits on the threshold: seeds_needed would be a formula's number
                        verdict = dataclasses.replace(verdict, seeds_needed=None, reason=(
                            f"{verdict.reason}: the exact expectation at initialisation is flat in depth (closed "
                            "form), so no number of seeds decides a rise"))
                parts.append(verdict)
                ev[f"{init}_m{int(m)}{label}"] = _part(verdict, **extra, curve=_table(curve(sub, "depth", col)))
        if not parts:
            parts = [decide(None, threshold=0.0, reason=f"{init}: no width with >= {MIN_DEPTHS} depths")]
            ev[init] = f"no width with >= {MIN_DEPTHS} depths"
        inits.append(combine(parts, reason=init))
    return combine(inits), ev


def closed_form_at_init(row: pd.Series | dict) -> float | None:
    """``E_W P(f, ε)`` at initialisation for the network of ``row`` (fully connected only;
    :func:`robustlab.metrics.expected_stability_at_init`), or None where it does not apply."""
    if row.get("arch", "fcn") != "fcn" or "outputs" not in row or not np.isfinite(row.get("outputs", np.nan)):
        return None
    return expected_stability_at_init(str(row["init"]), d=int(row["d"]), width=int(row["width"]),
                                      depth=int(row["depth"]), k=int(row["outputs"]), eps=float(row["eps"]),
                                      gamma=float(row["gamma"]) if row["init"] == "small" else None)


def _closed_form_at_init(sub: pd.DataFrame) -> dict:
    """Evidence beside a depth curve at initialisation: the exact expectation per depth, its
    log-slope (LeCun ln ½ per layer; He and NTK 0), and measured mean / closed form per depth.

    The claim fits the mean over seeds of log P; since log is concave, that sits below
    log E P by about half the seed-to-seed variance of log P, which grows with depth (the
    product of more random layers) — so a flat expectation can read as a slight fall."""
    rows = sub.groupby("depth").first()
    closed = {int(L): closed_form_at_init({**r.to_dict(), "depth": L}) for L, r in rows.iterrows()}
    if any(v is None or v <= 0 for v in closed.values()):
        return {}
    mean = sub.groupby("depth")["stability_init"].mean()
    logvar = sub.assign(lp=np.log(sub["stability_init"].where(sub["stability_init"] > 0))).groupby("depth")["lp"].var()
    Ls = sorted(closed)
    xs = np.log(Ls) if rows["init"].iloc[0] != "lecun" else np.asarray(Ls, float)
    slope = float(np.polyfit(xs, np.log([closed[L] for L in Ls]), 1)[0]) if len(Ls) >= 2 else float("nan")
    return {"closed_form": {str(L): _r(closed[L]) for L in Ls},
            "closed_form_slope": _r(slope),
            "measured_over_closed_form": {str(L): _r(float(mean[L]) / closed[L], 3) for L in Ls},
            "var_log_P_over_seeds": {str(L): _r(float(logvar[L]), 3) for L in Ls if np.isfinite(logvar[L])}}


def _he_vs_lecun_same_seed(v: pd.DataFrame) -> dict:
    """max |log(P_He / P_LeCun) − L ln 2| at initialisation over the (seed, width, depth) that
    both inits ran: 0 up to rounding (float32 networks), by positive homogeneity."""
    keys = [k for k in ("seed", "width", "depth", "d", "eps", "outputs", "dataset", "size", "n_test", "classes")
            if k in v.columns]
    if "classes" in keys:  # a list per row: compare its text
        v = v.assign(classes=v["classes"].astype(str))
    a, b = v[v["init"] == "he"], v[v["init"] == "lecun"]
    if a.empty or b.empty:
        return {}
    j = a[keys + ["stability_init"]].merge(b[keys + ["stability_init"]], on=keys, suffixes=("_he", "_lecun"))
    j = j.drop_duplicates(subset=keys)
    if j.empty:
        return {}
    dev = np.abs(np.log(j["stability_init_he"] / j["stability_init_lecun"]) - j["depth"].astype(float) * math.log(2))
    return {"pairs": int(len(j)), "max_abs_log_ratio_minus_L_ln2": _r(float(dev.max()), 3)}


def claim_depth_at_init(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("Depth at initialisation (Thm 1's lazy regime): LeCun stability falls exponentially with depth "
                 "(about ln 1/2 per layer), He and NTK stability rise polynomially")
    f = finals(df)
    if f.empty or "stability_init" not in f.columns:
        return Claim("depth-init-at-init", statement, Verdict(INCONCLUSIVE, reason="no final results"),
                     {"reason": "no final results"}, SOURCE + ", Thm 1")
    v = f.assign(trained=True)
    verdict, ev = _depth_parts(v, "stability_init", need_trained=False)
    same = _he_vs_lecun_same_seed(v)
    if same:
        ev["he_vs_lecun_same_seed"] = same
    ev = {"definition": "stability at initialisation (before any step: the lazy regime holds exactly); LeCun: OLS "
                        "slope of log P on L (seeds pooled as rows) with a 95% t interval below 0; He and NTK: "
                        f"slope of log P on log L above 0; at every width with >= {MIN_DEPTHS} depths; "
                        "ln_half_in_interval says whether LeCun's slope is consistent with ln(1/2)",
          "mechanism": MECHANISM_AT_INIT, **ev}
    return Claim("depth-init-at-init", statement, verdict, ev, SOURCE + ", Thm 1")


def claim_depth_trained(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = "Depth after training (§5.4): with LeCun init stability falls with depth; with He and NTK it rises"
    verdict, ev = _judge(finals(df), lambda v: _depth_parts(v, "stability", need_trained=True))
    ev = {"definition": "as depth-init-at-init on the trained networks' stability, fitted over the depths where "
                        "every seed trained (reached the target loss; at the end of the schedule: train accuracy "
                        f">= {ACC_FLOOR}); a width with fewer than {MIN_DEPTHS} trained depths is not applicable",
          **ev}
    return Claim("depth-init-trained", statement, verdict, ev, SOURCE + ", §5.4, Fig. 5, App. E.6")


def claim_nonlazy_early(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    """Thm 3: two-layer, one output, squared loss, the small (non-lazy) init, early in training.

    The OLS slope of log stability at the end of epoch ``early_epoch`` on log width, over the
    init=small, depth-2, output=single runs, must have a 95 % t interval below 0. Conditions:
    such runs exist at >= 3 widths, and the window is early: at no width has the mean training
    loss fallen below ``target_loss`` by then (a fitted network is past Thm 3's time limit).
    (We train by minibatch SGD with momentum; Thm 3 is stated for gradient descent.)
    """
    statement = ("Non-lazy width, early training (Thm 3: squared loss, small init): stability falls with width "
                 "in the early stage of training")
    src = SOURCE + ", Thm 3"
    f = finals(df)
    ok = (len(f) > 0 and "stability_early" in f.columns and "output" in f.columns)
    small = f[(f["init"] == "small") & (f["depth"] == 2) & (f["output"] == "single")
              & f["stability_early"].notna()] if ok else f.iloc[0:0]
    widths = sorted(int(m) for m in small["width"].unique()) if len(small) else []
    conds = [Condition("squared loss and small init, measured early", len(widths) >= 3,
                       f"init=small, depth 2, output=single runs with stability at an early epoch at widths "
                       f"{widths}" if widths else "no init=small, depth-2, output=single run with stability "
                                                  "measured at an early epoch (early_epoch > 0)")]
    ev: dict = {"definition": "init=small, depth 2, output=single (squared loss): the OLS slope of log stability at "
                              "the end of epoch early_epoch on log m has a 95% t interval below 0"}
    if len(widths) >= 3:
        loss = small.groupby("width")["train_loss_early"].mean()
        target = float(small["target_loss"].iloc[0]) if "target_loss" in small.columns else 0.0
        fitted = [int(m) for m, v in loss.items() if target > 0 and v <= target]
        conds.append(Condition("early in training", not fitted,
                               f"mean training loss at epoch {int(small['early_epoch'].iloc[0])} by width: "
                               + ", ".join(f"{int(m)}: {v:.3g}" for m, v in loss.items())
                               + (f"; at or below target_loss {target:g} at widths {fitted}" if fitted else "")))
        est = slope_estimate(small["width"], small["stability_early"], log_x=True, log_y=True)
        ev["early_by_width"] = {int(m): {"stability": _r(g["stability_early"].mean()),
                                         "train_loss": _r(g["train_loss_early"].mean()), "seeds": int(len(g))}
                                for m, g in small.groupby("width")}
    else:
        est = None
    verdict = decide(est, threshold=0.0, side="below", conditions=conds,
                     reason="slope of log P(early) on log m") if est is not None else \
        not_applicable("Thm 3's premise (an early-training window under the squared loss) is not measured", conds)
    ev["conditions"] = [c.to_dict() for c in conds]
    return Claim("nonlazy-width-early", statement, verdict, ev, src)


# What makes a non-lazy run and a He run comparable: the same data, training budget and loss
# (a learning rate or an init scale may differ per init). A grid with He runs at two
# training-set sizes compares the non-lazy init only with the He runs on its own data.
_PAIRING_FIELDS = ("dataset", "data_dir", "classes", "size", "sphere", "n_train", "n_test", "epochs", "batch_size",
                   "output")


def _same_setting(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return all(set(a[k].astype(str)) == set(b[k].astype(str))
               for k in _PAIRING_FIELDS if k in a.columns and k in b.columns)


def _same_output_as_he(f: pd.DataFrame) -> pd.DataFrame:
    """The rows trained with the loss He's runs use: a small-init run under another loss (the
    squared-loss runs of Thm 3) is no partner for comparing against He."""
    if "output" not in f.columns or not (f["init"] == "he").any():
        return f
    return f[f["output"].isin(set(f.loc[f["init"] == "he", "output"]))]


def claim_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    f = _same_output_as_he(f[f["depth"] == 2])
    statement = ("Non-lazy two-layer networks after training (Fig. 4b): stability falls with width and lies "
                 "below the lazy (He) network at the same width")

    def one(small: pd.DataFrame, he: pd.DataFrame, name: str) -> tuple[list[Verdict], dict]:
        tr_s = _trained_at(small, "width")
        ok_s = [int(m) for m in tr_s.index[tr_s.to_numpy()]]
        cond = Condition("trained", len(ok_s) >= 3, f"widths {ok_s} trained every seed (of {list(map(int, tr_s.index))})")
        use = small[small["width"].isin(ok_s)]
        slope = decide(slope_estimate(use["width"], use["stability"], log_x=True, log_y=True), threshold=0.0,
                       side="below", conditions=[cond], reason=f"{name}: slope of log P on log m")
        tr_h = _trained_at(he, "width") if len(he) else pd.Series(dtype=bool)
        common = [m for m in ok_s if m in tr_h.index and bool(tr_h[m])]
        cond2 = Condition("trained at equal quality", len(common) >= 3,
                          f"common widths where both trained every seed: {common}")
        ls = _log_pivot(small[small["width"].isin(common)], "stability").mean(axis=1)
        lh = _log_pivot(he[he["width"].isin(common)], "stability").mean(axis=1) if common else pd.Series(dtype=float)
        below = decide(difference_estimate(ls, lh), threshold=0.0, side="below", conditions=[cond2],
                       reason=f"{name}: log(P_small / P_he) averaged over common widths")
        ch = curve(he, "width") if len(he) else None
        return [slope, below], {"slope": _part(slope), "below_he": _part(below, widths=common),
                                "curve_small": _table(curve(small, "width")),
                                "curve_he": _table(ch) if ch is not None else None}

    def check(v: pd.DataFrame) -> tuple[Verdict, dict]:
        smalls, hes = series(v, "small"), series(v, "he") or [("", v.iloc[0:0])]
        if not smalls:
            return decide(None, threshold=0.0, reason="no init=small runs at depth 2"), \
                {"reason": "no init=small runs at depth 2"}
        parts, ev = [], {}
        for ls, small in smalls:
            for lh, he in hes:
                if len(he) and not _same_setting(small, he):
                    continue  # He on other data (another training-set size, ...): no partner
                name = f"small{ls}_vs_he{lh}"
                p, e = one(small, he, name)
                parts += p
                ev[name] = e
        if not parts:
            return not_applicable("no He run on the small init's data and schedule"), \
                {"reason": "no He run on the small init's data and schedule"}
        return combine(parts), ev

    verdict, ev = _judge(f, check)
    ev = {"definition": "end of schedule, depth 2: (i) the OLS slope of log P on log m of init=small, over the widths "
                        "where every seed trained (>= 3), has a 95% t interval below 0; (ii) the per-seed mean over "
                        "the common trained widths of log P_small minus that of log P_he (Welch interval) is below 0",
          **ev}
    return Claim("nonlazy-width", statement, verdict, ev, SOURCE + ", Fig. 4(b)")


def growth_exponent(trace: pd.DataFrame, decay_start: int) -> dict:
    """Log–log growth exponent ``b`` of κ(t) ∝ t^b (the mean over the rows at each epoch) over the
    late constant-rate window ``[T₁/2, T₁]`` with ``T₁ = decay_start`` (the last epoch when the
    rate never decays): past the first transient, before a decay slows every curve down."""
    k = trace.groupby("epoch")["kappa"].mean().sort_index()
    last = int(k.index.max())
    T1 = int(decay_start) if 0 < decay_start <= last else last
    win = k[(k.index >= max(1, T1 // 2)) & (k.index <= T1)]
    if len(win) < 2 or (win <= 0).any():
        return {"exponent": None, "window": [max(1, T1 // 2), T1]}
    est = slope_estimate(win.index.to_numpy(float), win.to_numpy(float), log_x=True, log_y=True)
    return {"exponent": _r(est.value, 3), "window": [int(win.index.min()), int(win.index.max())],
            "kappa_start": _r(win.iloc[0]), "kappa_end": _r(win.iloc[-1])}


def _seed_exponents(ep: pd.DataFrame, widths: list[int]) -> pd.Series:
    """Per seed, the mean over ``widths`` of its own κ(t) growth exponent."""
    per: dict[int, list[float]] = {}
    for (_m, s), tr in ep[ep["width"].isin(widths)].groupby(["width", "seed"]):
        b = growth_exponent(tr, int(tr["decay_start"].iloc[0]))["exponent"]
        if b is not None:
            per.setdefault(int(s), []).append(b)
    return pd.Series({s: float(np.mean(b)) for s, b in per.items()}, dtype=float)


def claim_kappa(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("kappa: nearly flat in time and falling with width for He; growing in time and an order of "
                 "magnitude larger for the non-lazy init")
    ev: dict = {"definition": "depth 2, widths m >= the number of training points (where lazy training applies; "
                              ">= 3 needed, else not applicable): (i) He's growth exponent b of kappa(t) ~ t^b over "
                              "the late constant-rate window, per seed averaged over widths, minus the non-lazy "
                              "one (Welch interval) is below 0; (ii) the OLS slope of log final kappa on log m for "
                              "He is below 0; (iii) the per-seed mean over common widths of log10 kappa_small minus "
                              "that of log10 kappa_he (Welch interval) is above 1: an order of magnitude, factor 10"}
    f = finals(df)
    if f.empty or "kappa" not in f.columns:
        return Claim("kappa", statement, Verdict(INCONCLUSIVE, reason="no results"), {**ev, "reason": "no results"},
                     SOURCE + ", §5.2, Figs. 2-3")
    ep = df[(df["kind"] == "epoch") & (df["depth"] == 2)]
    f = _same_output_as_he(f[f["depth"] == 2])
    n_train = int(f["n_train"].max()) if len(f) else 0
    ev["n_train"] = n_train
    hes, smalls = series(f, "he"), series(f, "small")
    if not hes or not smalls:
        return Claim("kappa", statement, decide(None, threshold=0.0, reason="needs init=he and init=small at depth 2"),
                     {**ev, "reason": "needs init=he and init=small runs at depth 2"}, SOURCE + ", §5.2, Figs. 2-3")
    parts = []
    for lh, he in hes:
        n_he = int(he["n_train"].max())  # this series' own training set
        wh = sorted(int(m) for m in he["width"].unique() if m >= n_he)
        lazy = Condition("over-parameterised widths", len(wh) >= 3, f"He widths >= {n_he}: {wh}")
        over = he[he["width"].isin(wh)]
        falls = decide(slope_estimate(over["width"], over["kappa"], log_x=True, log_y=True), threshold=0.0,
                       side="below", conditions=[lazy], reason=f"he{lh}: slope of log kappa on log m")
        parts.append(falls)
        ev[f"he{lh}_vs_width"] = _part(falls, mean={int(m): _r(x) for m, x in he.groupby("width")["kappa"].mean().items()})
        b_he = _seed_exponents(ep[ep["point"].isin(he["point"])], wh)
        for ls, small in smalls:
            if not _same_setting(small, he):
                continue  # He on other data: no partner for the non-lazy init
            ws = sorted(int(m) for m in small["width"].unique() if m >= n_he)
            common = [m for m in ws if m in wh]
            cond = Condition("over-parameterised widths", len(common) >= 3, f"common widths >= {n_he}: {common}")
            b_small = _seed_exponents(ep[ep["point"].isin(small["point"])], common)
            flat = decide(difference_estimate(_seed_exponents(ep[ep["point"].isin(he["point"])], common), b_small),
                          threshold=0.0, side="below", conditions=[cond],
                          reason=f"b_he{lh} - b_small{ls}: growth exponents in time")
            kh = np.log10(he[he["width"].isin(common)].pivot_table(index="seed", columns="width", values="kappa"))
            ks = np.log10(small[small["width"].isin(common)].pivot_table(index="seed", columns="width",
                                                                          values="kappa"))
            larger = decide(difference_estimate(ks.mean(axis=1), kh.mean(axis=1)), threshold=1.0, side="above",
                            conditions=[cond], reason=f"log10(kappa_small{ls} / kappa_he{lh})")
            parts += [flat, larger]
            ev[f"small{ls}_vs_he{lh}_in_time"] = _part(flat, b_he={int(s): _r(b, 3) for s, b in b_he.items()},
                                                       b_small={int(s): _r(b, 3) for s, b in b_small.items()})
            ev[f"small{ls}_vs_he{lh}_far_larger"] = _part(larger)
    return Claim("kappa", statement, combine(parts), ev, SOURCE + ", §5.2, Figs. 2-3")


MC_BAND = 0.05  # relative: the Monte Carlo mean within ±5 % of the identity (see claim_mc)


def claim_mc(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("The Monte Carlo estimate of E|<J, delta>|^2 agrees with the identity "
                 f"eps^2 ||J||_F^2 / (d+2) (its 95% interval within ±{MC_BAND:.0%} of it)")
    f = finals(df)
    if "mc_stability" not in f.columns or f["mc_stability"].isna().all():
        return Claim("mc-identity", statement, decide(None, threshold=(-MC_BAND, MC_BAND), side="inside",
                                                      reason="no grid point had a Monte Carlo estimate"),
                     {"reason": "no grid point had a Monte Carlo estimate"}, SOURCE + ", Def. 1")
    m = f.dropna(subset=["mc_stability"])
    mc, se, exact = (m[k].to_numpy(float) for k in ("mc_stability", "mc_stderr", "mc_exact"))
    # the pooled relative error over seeds; its standard error from the draws' own (normal, 95 %)
    rel = float((mc - exact).sum() / exact.sum())
    half = 1.96 * float(np.sqrt((se ** 2).sum()) / exact.sum())
    sd = float(np.median(se / exact))
    est = Estimate(rel, rel - half, rel + half, len(m), f"pooled relative error over {len(m)} seeds, normal interval "
                   "from the Monte Carlo standard errors", sd=sd)
    verdict = decide(est, threshold=(-MC_BAND, MC_BAND), side="inside")
    z = (mc - exact) / se
    ev = {"definition": f"pooled relative error sum(MC - exact) / sum(exact) over seeds with a 95% interval from "
                        f"the draws' standard errors, inside ±{MC_BAND:.0%}: a normalisation error (a wrong d + 2, "
                        "a radius squared twice) is larger; an agreement finer than the band is not claimed",
          "point": {"init": str(m["init"].iloc[0]), "depth": int(m["depth"].iloc[0]), "width": int(m["width"].iloc[0])},
          "per_seed": [{"seed": int(r.seed), "mc": _r(r.mc_stability), "stderr": _r(r.mc_stderr),
                        "exact": _r(r.mc_exact), "z": _r(zz, 3)} for r, zz in zip(m.itertuples(), z)],
          "draws": int(m["mc_samples"].iloc[0]), "points": int(m["mc_points"].iloc[0])}
    return Claim("mc-identity", statement, verdict, ev, SOURCE + ", Def. 1")


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    return [claim_width(df, ctx), claim_width_moves(df, ctx), claim_depth_at_init(df, ctx), claim_depth_trained(df, ctx),
            claim_nonlazy_early(df, ctx), claim_nonlazy(df, ctx), claim_kappa(df, ctx), claim_mc(df, ctx)]

# ---------------------------------------------------------------------------------------
# figures

def _acc_panel(ax, sub: pd.DataFrame, x: str, color, label: str | None = None) -> None:
    mean_band(ax, sub, x, "train_acc", color=color, label=label, marker="o")
    mean_band(ax, sub, x, "test_acc", color=color, ls="--", marker="x")


def _when(protocol: str, f: pd.DataFrame) -> str:
    if protocol == "target":
        return f"measured when the training loss first reached {f['target_loss'].iloc[0]:g}"
    return "measured at the end of the schedule"


def _width_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    swept = {i for (i, _L), s in v.groupby(["init", "depth"]) if s["width"].nunique() >= 2}
    inits = [i for i in INITS if i in swept]
    if not inits:
        return None
    fig, axes = subplots(2, len(inits), panel=(3.2, 2.5), squeeze=False)
    for j, init in enumerate(inits):
        vi = v[v["init"] == init]
        for n, (L, sub) in enumerate(vi.groupby("depth")):
            if sub["width"].nunique() < 2:
                continue
            col = COLORS[n % len(COLORS)]
            mean_band(axes[0, j], sub, "width", "stability", color=col, label=f"L={L}", band="minmax")
            _acc_panel(axes[1, j], sub, "width", col, f"L={L}")
        for ax in axes[:, j]:
            ax.axvline(int(vi["n_train"].iloc[0]), color="0.5", lw=0.8, ls=":")
        log_axes(axes[0, j])
        log_axes(axes[1, j], y=False)
        axes[0, j].set_title(f"init = {init}")
        axes[0, j].legend()
        axes[1, j].set_xlabel("width m")
        axes[1, j].set_ylim(0, 1.02)
    axes[0, 0].set_ylabel("stability P(f, ε)")
    axes[1, 0].set_ylabel("accuracy (train —, test --)")
    label_panels(axes)
    name = f"stability_vs_width{suffix}.png"
    save(fig, ctx.figdir / name)
    return Figure(f"figures/{name}", f"Stability against width ({PROTOCOLS[protocol]})",
                  f"Top: perturbation stability ({_when(protocol, v)}), mean over seeds (Def. 1) with the "
                  "min–max band of the per-seed values (Def. 3), log–log, one panel per initialisation, one line per "
                  "depth; the dotted line marks the number of training points. Claim 1 expects a rise then a "
                  "fall for He and LeCun. Bottom: training (solid) and test (dashed) accuracy of the same "
                  "networks at the same moment — a low stability with a low accuracy is an untrained network, "
                  "not a robust one.")


def _depth_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    inits = [i for i, s in v.groupby("init") if s.groupby("width")["depth"].nunique().max() >= 2]
    inits = [i for i in INITS if i in inits]
    if not inits:
        return None
    fig, axes = subplots(2, len(inits), panel=(3.2, 2.5), squeeze=False)
    for j, init in enumerate(inits):
        vi = v[v["init"] == init]
        n_depths = vi.groupby("width")["depth"].nunique()
        # the widths with the fullest depth sweep (at most four, evenly spread), for legibility
        ws = n_depths[n_depths == n_depths.max()].index.to_list()
        ws = [ws[i] for i in sorted({round(k * (len(ws) - 1) / 3) for k in range(4)})] if len(ws) > 4 else ws
        for n, m in enumerate(ws):
            sub = vi[vi["width"] == m]
            col = COLORS[n % len(COLORS)]
            mean_band(axes[0, j], sub, "depth", "stability", color=col, label=f"m={m}", band="minmax")
            mean_band(axes[0, j], sub, "depth", "stability_init", color=col, ls=":", marker="", band="minmax")
            # the closed form per row, averaged like the measured values (rows may mix settings)
            cf_rows = [(int(r["depth"]), closed_form_at_init(r)) for _, r in sub.iterrows()]
            cf = [(L, float(np.mean([p for LL, p in cf_rows if LL == L and p])))
                  for L in sorted({L for L, p in cf_rows if p})]
            if cf:
                axes[0, j].plot(*zip(*cf), "x", color=col, ms=5, label="closed form at init" if n == 0 else None)
            _acc_panel(axes[1, j], sub, "depth", col)
        axes[0, j].set_yscale("log")
        axes[0, j].set_title(f"init = {init}")
        axes[1, j].set_xlabel("depth L")
        axes[1, j].set_ylim(0, 1.02)
        axes[0, j].legend()
    axes[0, 0].set_ylabel("stability P(f, ε)")
    axes[1, 0].set_ylabel("accuracy (train —, test --)")
    label_panels(axes)
    name = f"stability_vs_depth{suffix}.png"
    save(fig, ctx.figdir / name)
    return Figure(f"figures/{name}", f"Stability against depth ({PROTOCOLS[protocol]})",
                  f"Top: stability after training (solid, {_when(protocol, v)}; mean and min–max over seeds) and at "
                  "initialisation (dotted) against depth, one line per width with the fullest depth sweep, log scale; "
                  "crosses: the exact expectation at initialisation (LeCun halves per layer, He and NTK are flat in "
                  "depth — the paper's rise for He/NTK is its bound's, not the quantity's). Claim 2 expects LeCun to "
                  "fall and He/NTK to rise with depth. Bottom: the accuracies of the same networks.")


def _nonlazy_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    two = _same_output_as_he(v[(v["depth"] == 2) & v["init"].isin(["he", "small"])])
    if two["init"].nunique() < 2:
        return None
    fig, axes = subplots(1, 2, panel=(3.4, 2.6))
    for n, (init, sub) in enumerate(two.groupby("init")):
        label = "lazy (He)" if init == "he" else f"non-lazy (small, γ={sub['gamma'].iloc[0]:g})"
        mean_band(axes[0], sub, "width", "stability", color=COLORS[n], label=label, band="minmax")
        _acc_panel(axes[1], sub, "width", COLORS[n], label)
    log_axes(axes[0])
    log_axes(axes[1], y=False)
    for ax in axes:
        ax.set_xlabel("width m")
    axes[0].set_ylabel("stability P(f, ε)")
    axes[1].set_ylabel("accuracy (train —, test --)")
    axes[1].set_ylim(0, 1.02)
    axes[0].legend()
    label_panels(axes)
    name = f"lazy_vs_nonlazy{suffix}.png"
    save(fig, ctx.figdir / name)
    return Figure(f"figures/{name}", f"Lazy vs non-lazy two-layer networks ({PROTOCOLS[protocol]})",
                  f"(a) Stability against width ({_when(protocol, v)}) for He (lazy) and the small initialisation "
                  "(non-lazy), depth 2, mean and min–max over seeds. Claim 3 expects the non-lazy curve to fall at "
                  "every width and to lie below He. (b) Their training (solid) and test (dashed) accuracy.")


def _kappa_figure(df: pd.DataFrame, f: pd.DataFrame, ctx: Context) -> Figure | None:
    ep = _same_output_as_he(df[(df["kind"] == "epoch") & (df["depth"] == 2) & df["init"].isin(["he", "small"])])
    f = _same_output_as_he(f)
    if ep.empty:
        return None
    fig, axes = subplots(1, 2, panel=(3.4, 2.6))
    n = 0
    for init, ls in (("he", "-"), ("small", "--")):
        widths = sorted(ep[ep["init"] == init]["width"].unique())
        if len(widths) > 4:  # four widths, evenly spread, for legibility
            widths = [widths[i] for i in sorted({round(k * (len(widths) - 1) / 3) for k in range(4)})]
        for m in widths:
            sub = ep[(ep["init"] == init) & (ep["width"] == m)]
            mean_band(axes[0], sub, "epoch", "kappa", color=COLORS[n % len(COLORS)], ls=ls, marker="",
                      label=f"{init}, m={m}", band="minmax")
            n += 1
    axes[0].set_yscale("log")
    axes[0].set_xlabel("epoch t")
    axes[0].set_ylabel("κ(t) = ‖θ(t) − θ(0)‖ / ‖θ(0)‖")
    axes[0].legend(ncol=2, fontsize=6)
    two = f[(f["depth"] == 2) & f["init"].isin(["he", "small"])]
    for n, (init, sub) in enumerate(two.groupby("init")):
        mean_band(axes[1], sub, "width", "kappa", color=COLORS[n], label=init, band="minmax")
    log_axes(axes[1])
    axes[1].set_xlabel("width m")
    axes[1].set_ylabel("final κ")
    axes[1].legend()
    label_panels(axes)
    save(fig, ctx.figdir / "kappa.png")
    return Figure("figures/kappa.png", "Lazy-training ratio κ",
                  "(a) κ(t) at the end of every epoch for He (solid) and the non-lazy init (dashed), depth 2, "
                  "mean and min–max over seeds, four widths each. (b) The final κ against width. Claim 4 expects He nearly flat in time "
                  "and falling with width, the non-lazy init growing and an order of magnitude larger.")


def _early_figure(f: pd.DataFrame, ctx: Context) -> Figure | None:
    if "stability_early" not in f.columns or "output" not in f.columns:
        return None
    small = f[(f["init"] == "small") & (f["depth"] == 2) & (f["output"] == "single") & f["stability_early"].notna()]
    if small["width"].nunique() < 2:
        return None
    fig, axes = subplots(1, 2, panel=(3.4, 2.6))
    epoch = int(small["early_epoch"].iloc[0])
    mean_band(axes[0], small, "width", "stability_early", color=COLORS[1], label=f"small init, epoch {epoch}",
              band="minmax")
    mean_band(axes[1], small, "width", "train_loss_early", color=COLORS[1], band="minmax")
    log_axes(axes[0])
    log_axes(axes[1], y=False)
    for ax in axes:
        ax.set_xlabel("width m")
    axes[0].set_ylabel("stability P(f, ε), early")
    axes[1].set_ylabel(f"training loss at epoch {epoch}")
    axes[0].legend()
    label_panels(axes)
    save(fig, ctx.figdir / "nonlazy_early.png")
    return Figure("figures/nonlazy_early.png", "Non-lazy width early in training (Thm 3)",
                  f"(a) Stability at the end of epoch {epoch} against width for the two-layer network with one "
                  "output, the squared loss and the small initialisation (Thm 3's setting), mean and min–max over "
                  "seeds, log–log. Thm 3 expects a fall with width. (b) The training loss at that moment: the "
                  "window is early only while the networks have not yet fitted the training set.")


# which claims each figure shows (its caption ends with their measured verdicts)
FIGURE_CLAIMS = {"stability_vs_width": ("width-peak", "width-peak-n-train"),
                 "stability_vs_depth": ("depth-init-at-init", "depth-init-trained"),
                 "lazy_vs_nonlazy": ("nonlazy-width",), "nonlazy_early": ("nonlazy-width-early",),
                 "kappa": ("kappa",)}


def _measured(fig: Figure, by_id: dict[str, Claim]) -> Figure:
    stem = Path(fig.file).stem
    ids = next((v for k, v in FIGURE_CLAIMS.items() if stem == k or stem.startswith(k + "_")), ())
    said = []
    for cid in ids:
        if cid not in by_id:
            continue
        v = by_id[cid].verdict
        num = ""
        if v.effect is not None and v.interval is not None and v.interval[0] is not None:
            num = f", {v.effect:.3g} [{v.interval[0]:.3g}, {v.interval[1]:.3g}]"
        said.append(f"{cid} {v.verdict}{num}")
    if not said:
        return fig
    return dataclasses.replace(fig, caption=fig.caption + " Measured in this run: " + "; ".join(said)
                               + " (claim table).")


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    f = finals(df)
    if f.empty:
        return []
    out: list[Figure | None] = []
    for i, p in enumerate(protocols(f)):
        v, suffix = view(f, p), ("" if i == 0 else f"_{p}")
        out += [_width_figure(v, ctx, p, suffix), _depth_figure(v, ctx, p, suffix),
                _nonlazy_figure(v, ctx, p, suffix)]
    out += [_early_figure(f, ctx), _kappa_figure(df, f, ctx)]
    by_id = {c.id: c for c in claims(df, ctx)}
    return [_measured(x, by_id) for x in out if x is not None]


# ---------------------------------------------------------------------------------------
# presets

_POW2 = [2**i for i in range(11)]  # 1 … 1024

# quick: 200 training points (20 per digit) at 14x14, so that widths 1…1024 run from
# under-parameterised (m·(d+k) < N at m = 1) to 5x the training set.
QUICK_BASE = {"size": 14, "n_train": 200, "n_test": 500, "epochs": 50, "batch_size": 20, "decay_start": 40,
              "lr_step": 5, "mc_width": 128}
THM3_BLOCK = {"init": ["small"], "depth": [2], "width": [16, 64, 256, 1024], "output": ["single"],
              "classes": [(0, 1)], "epochs": [5]}
# Seeds of the width sweeps (width-peak), from a power estimate on 40 pooled pilot seeds
# (1000–1019 and 100–119, the width blocks only; a seed's networks are bit for bit the same in
# any ensemble, so the pool is exchangeable with a quick run's seeds). Per part (init × depth)
# the per-seed peak-over-ends statistic has effect / sd 1.40/0.42 (He L=2), 1.30/0.35 (LeCun
# L=2), 1.97/0.90 (He L=3), 1.86/0.88 (LeCun L=3); stats.seeds_for gives 4, 4, 5, 5 at power 0.9
# and 5, 4, 7, 7 at 0.99. That understates a small run's spread: the peak is picked on the
# other seeds, and with 4 others it flips from 4 to 8 when two of them peak at 8 (2 of the 40
# do, at LeCun L=3). So the count was checked by drawing n of the 40 seeds 450 times and
# judging width-peak on them as a run does: n=5 reproduced 87 % (inconclusive 10 %, not
# applicable 3 %), n=6 97 % (1.3 %, 1.8 %), n=7 97 % (inconclusive 0 of 450, not applicable
# 3 %), n=8 95 %, n=10 91 %, n=12 89 %. 7 is where the interval always decides (seeds_for at
# power 0.99); more seeds do not help, since a part is not applicable unless *every* seed
# reaches the target loss at the widths past the peak, and width 8 does so for only 88–98 %
# of seeds. Cost (base seed 0, one worker): 61 -> 75 s of CPU, 379 points instead of 295 (the
# other blocks keep 5 seeds).
QUICK_WIDTH_SEEDS = 7
QUICK_GRID = (
    # width sweeps (claim 1), He and LeCun: depth 2 up to 5x the training set, depth 3 up to 2.5x
    {"init": ["he", "lecun"], "depth": [2], "width": _POW2, SEEDS_KEY: [QUICK_WIDTH_SEEDS]},
    {"init": ["he", "lecun"], "depth": [3], "width": _POW2[:10], SEEDS_KEY: [QUICK_WIDTH_SEEDS]},
    # depth sweeps (claim 2); NTK's unit-variance output layer makes its updates larger: a
    # smaller rate lets it train as steadily as the others (it diverged at 0.1, depth 6)
    {"init": ["lecun", "he"], "depth": [2, 3, 4, 6], "width": [128]},
    {"init": ["ntk"], "depth": [2, 3, 4, 6], "width": [128], "lr": [0.03]},
    # the non-lazy two-layer network (claims 3, 4), at He's rate: it reaches the target loss
    # before the decay (at 0.3 it fits sooner, and its κ(t) then levels off like He's)
    {"init": ["small"], "depth": [2], "width": [16, 64, 256, 512, 1024]},
    # Thm 3 (nonlazy-width-early): one output, squared loss, two classes, the small init; only
    # the first epoch is the claim's window, so the schedule stops at 5
    THM3_BLOCK,
)

PAPER_BASE = {"n_train": 0, "n_test": 1000, "epochs": 50, "batch_size": 64, "decay_start": 30, "lr_step": 10,
              "mc_width": 1024, "mc_samples": 500, "target_loss": 0.05}
PAPER_GRID = (
    {"init": ["he", "lecun"], "depth": [2], "width": [2**i for i in range(15)]},
    {"init": ["he", "lecun"], "depth": [4, 6, 8], "width": [2**i for i in range(13)]},
    {"init": ["ntk"], "depth": [2, 4, 6, 8], "width": [2**i for i in range(4, 13)], "lr": [0.03]},
    {"init": ["small"], "depth": [2], "width": [2**i for i in range(4, 15)]},
    # so that the preset measures every claim, the two experiments the blocks above lack, as
    # their slices run them: a second training-set size for width-peak-n-train (paper-width-n;
    # the first block is the 4000-point side) and Thm 3's squared-loss block for
    # nonlazy-width-early (paper-nonlazy): 135 points, 0.1 % of the preset's FLOPs.
    {"init": ["he", "lecun"], "depth": [2], "width": [2**i for i in range(11)], "n_train": [1000]},
    {**THM3_BLOCK, "width": [2**i for i in range(4, 13, 2)]},
)

# Paper slices: one claim's experiment each, at the paper's setting (mnist5k 28x28 with its full
# training split of 4000 points, 50 epochs, step decay from epoch 30 every 10), sized for about
# 15 minutes on 2 CPU cores (the estimate and how it was measured: the issue-12 note).
# ``robustlab run width-depth-init --preset paper-<name>``.
PAPER_SLICES = {
    # width-peak: He and LeCun, depth 2 and 3, from under-parameterised (m (d + k) << 4000 k) to
    # past the interpolation width (m ~ 50); five seeds, as every slice (the budget: the quick
    # preset gives its width blocks 7, from a power estimate at its scale, QUICK_WIDTH_SEEDS; the paper-width
    # slice measured 2026-11-23 decided its parts at 5)
    "width": ({"init": ["he", "lecun"], "depth": [2, 3], "width": [2**i for i in range(11)]},),
    # width-peak-n-train: depth 2 at two training-set sizes (1000 and all 4000): the peak should
    # move to larger widths with more data (Thm 1 places it at the passage to over-parameterisation)
    "width-n": ({"init": ["he", "lecun"], "depth": [2], "width": [2**i for i in range(11)], "n_train": [1000, 0]},),
    # depth-init-at-init and -trained: the paper's depths at one width, each init at its rate
    "depth": ({"init": ["lecun", "he"], "depth": [2, 4, 6, 8], "width": [256], "mc_width": [256]},
              {"init": ["ntk"], "depth": [2, 4, 6, 8], "width": [256], "lr": [0.03], "mc_width": [256]}),
    # nonlazy-width (Fig. 4b): the non-lazy and He two-layer networks across widths
    "nonlazy": ({"init": ["small", "he"], "depth": [2], "width": [2**i for i in range(4, 12)]},
                {**THM3_BLOCK, "width": [2**i for i in range(4, 13, 2)]}),
    # kappa: widths past the training-set size, where lazy training applies; 1000 training points
    # (not 4000) keep three such widths within the budget
    "kappa": ({"init": ["small", "he"], "depth": [2], "width": [256, 1024, 2048, 4096], "n_train": [1000]},),
}
PAPER_SLICE_SEEDS = 5


STUDY = Study(
    name="width-depth-init",
    title="Width, depth and initialisation: perturbation stability of trained ReLU networks",
    source=SOURCE,
    summary=("Trains depth-L width-m ReLU networks (LeCun, He, NTK and a small non-lazy initialisation) as "
             "ensembles over seeds with SGD and step decay, records kappa(t) every epoch, and measures the "
             "perturbation stability E|<grad f, delta>|^2 (exact identity, Monte Carlo at one point) beside "
             "train and test accuracy, across widths from under to well over the training-set size."),
    config=WidthDepthInitConfig,
    presets={
        # 5 seeds, from an 8-seed pilot (base seed 0): stats.seeds_for gives 4 for width-peak's He
        # depth-2 part (effect 1.22, per-seed sd 0.51) and 5 for its He depth-3 part, whose peak
        # sits where the networks start to fit 200 points; over 10 random 5-seed subsets of the
        # pilot every claim kept one verdict (at 4 seeds width-peak was inconclusive in 3 of 10).
        # Five base seeds then showed width-peak inconclusive at 2 of 5 (a 5-seed run decides it
        # only ~87 % of the time): the width sweeps now have QUICK_WIDTH_SEEDS = 7 (see there).
        # Their seeds also enter the claims that read He/LeCun depth-2/3 rows (the width-128
        # depth points, He beside the non-lazy network in nonlazy-width and kappa, mc-identity):
        # those pool rows or compare per-seed means, so the extra seeds only add rows.
        "quick": Preset(QUICK_BASE, QUICK_GRID, n_seeds=5,
                        description="mnist5k 14x14, 200 training points, widths 1-1024, depths 2-6, 50 epochs, "
                                    "5 seeds, 7 for the width sweeps (~1.5 min on 2 cores)"),
        "paper": Preset(PAPER_BASE, PAPER_GRID, n_seeds=5,
                        description="mnist5k 28x28 (4000 training points), widths 1-16384, depths 2-8, 50 epochs "
                                    "with step decay, 5 seeds, and the width-n and Thm 3 blocks of the slices (5695 TFLOP of "
                                    "products: >= 4 h on 2 CPU cores; about 8 min on one H100 with --device cuda)"),
        **{f"paper-{name}": Preset(PAPER_BASE, grid, n_seeds=PAPER_SLICE_SEEDS,
                                   description=f"the paper's setting, the {name} experiment only (~15 min on 2 "
                                               f"cores)")
           for name, grid in PAPER_SLICES.items()},
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
    cost=point_flops,
    probe=probe_point,
)
