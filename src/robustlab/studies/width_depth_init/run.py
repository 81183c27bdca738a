"""The width-depth-init study's configuration, data and the running of one point (E seeds as
an ensemble): training, stability at initialisation, at the target and at the end, kappa(t)."""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch

from ...config import Config, ConfigError, param
from ...data import load_images
from ...data.images import SHAPES, Split
from ...errors import NumericalError
from ...metrics import perturbation_stability
from ...models.deep import INITS, AlphaScaled, ConvNet, DeepMLP, ResNet, VmapEnsemble
from ...models.ensemble import Flat, fold
from ...papers import WIDTH_DEPTH_INIT
from ...sweep import checkpoint
from ...train.supervised import SGDSpec, evaluate, resume_fits, train_supervised
from ...utils import make_generator, resolve_device
from . import linearised as lin

SOURCE = WIDTH_DEPTH_INIT.short

DATASETS = ("mnist5k", "digits", "mnist", "cifar10", "cifar100")
ARCHS = ("fcn", "cnn", "resnet")

# Claim thresholds (see the module docstring). Chosen before the runs; never tuned to pass.
ACC_FLOOR = 0.9  # end-of-schedule protocol: a seed "trained" when its training accuracy is at least this
MIN_WIDTHS = 4  # a width curve needs this many widths to show a peak
MIN_DEPTHS = 3  # a depth curve needs this many depths for a slope with an interval


# the alpha arm's fields (issue 54): at their defaults they stay out of a point's key, so the runs stored
# before them (every paper slice) keep their keys and can be resumed, reused and re-executed
ALPHA_ARM_SINCE = "2026-11-28, issue 54's alpha arm"


@dataclasses.dataclass(frozen=True)
class WidthDepthInitConfig(Config):
    study = "width-depth-init"
    # data
    dataset: str = param("mnist5k", "image dataset (mnist, cifar10, cifar100 need data_dir)", choices=DATASETS)
    data_dir: str | None = param(None, "folder holding the torchvision files of mnist/cifar10/cifar100")
    classes: tuple[int, ...] = param((), "class subset (empty: all classes)")
    size: int | None = param(None, "resize images to size x size (none: native)", ge=2)
    sphere: bool = param(True, "normalise every input to the unit sphere (width-depth-init, NeurIPS 2022, Assumption 1)")
    n_train: int = param(0, "training points, stratified over classes (0: all)", ge=0)
    n_test: int = param(500, "held-out points for accuracy and stability (0: all)", ge=0)
    # model
    arch: str = param("fcn", "fully connected (ensemble), or the CNN / ResNet variants (App. E)", choices=ARCHS)
    width: int = param(256, "width m (channels for cnn/resnet)", ge=1)
    depth: int = param(2, "depth L: number of weight layers", ge=2)
    init: str = param("he", "initialisation (width-depth-init, NeurIPS 2022, Table 1; small: variance m^-gamma)", choices=INITS)
    gamma: float = param(2.0, "exponent of the non-lazy init, variance m^-gamma (reconstructed)", gt=0)
    output: str = param("multi", "multi: k logits + cross-entropy; single: one output + squared loss (2 classes)",
                        choices=("multi", "single"))
    # training (the width-depth-init paper (NeurIPS 2022) §5.1: SGD, 50 epochs, step decay; the numbers were lost: reconstructed)
    epochs: int = param(50, "training epochs", ge=1)
    batch_size: int = param(64, "minibatch size", ge=1)
    lr: float = param(0.1, "initial learning rate", gt=0)
    momentum: float = param(0.9, "heavy-ball momentum", ge=0, lt=1)
    decay_start: int = param(30, "first epoch (0-based) of the step decay (0: constant rate)", ge=0)
    lr_step: int = param(10, "epochs between further decays (0: one decay)", ge=0)
    lr_gamma: float = param(0.1, "decay factor", gt=0, le=1)
    target_acc: float = param(0.99, "measure each seed also when its training accuracy first reaches this "
                                    "(equal fit; 0: no accuracy target)", ge=0, le=1)
    target_loss: float = param(0.0, "... and (if > 0) its training loss is at most this (0: no loss target)", ge=0)
    stop_at_target: bool = param(False, "stop training a seed at its target (cheaper; kappa(t) then ends there)")
    early_epoch: int = param(1, "also measure stability at the end of this epoch: the early-training window of "
                                "Thm 3 (0: off)", ge=0)
    early_steps: tuple[int, ...] = param((), "also measure stability after these SGD steps (Thm 3's window, a few "
                                             "steps in; measured while every seed still trains: empty: off)")
    loss_marks: tuple[float, ...] = param((), "also measure each seed the first epoch its full-pass training loss is "
                                               "at most each of these (matched training loss; empty: off)")
    # measurement
    eps: float = param(0.1, "radius of the l2 perturbation ball", gt=0)
    mc_samples: int = param(200, "Monte Carlo draws per point at the MC grid point (0: none)", ge=0)
    mc_points: int = param(100, "held-out points used for the Monte Carlo estimate", ge=1)
    mc_init: str = param("he", "the grid point that gets the Monte Carlo estimate: init", choices=INITS)
    mc_depth: int = param(2, "... depth", ge=2)
    mc_width: int = param(256, "... width", ge=1)
    fd_points: int = param(100, "held-out points for the finite-difference check of the linear formula "
                                "(one delta each, at every measurement; 0: off, and the per-layer spectral change "
                                "with it)", ge=0)
    fd_draws: int = param(0, "draws of delta per held-out point for P by finite differences, E|f(x+delta) - "
                              "f(x)|^2 (stability_fd, at init and the end; 0: off; regime=alpha needs it: its "
                              "gradient identity is not its lazy limit's)", ge=0, since=ALPHA_ARM_SINCE)
    init_draws: int = param(0, "extra networks per seed drawn at initialisation only (stability at init, "
                                "the depth claim at t = 0; fcn only)", ge=0)
    regime: str = param("sgd", "sgd: train with the schedule above; linearised: the network linearised at "
                               "initialisation, solved exactly (min-norm least squares on one-hot targets through "
                               "the empirical NTK, float64; Thm 1's lazy limit); alpha: the alpha-scaled network "
                               "f0 + alpha (f(theta) - f0) trained with the schedule above at lr / alpha^2 on the "
                               "squared loss, one-hot targets (Chizat et al. 2019's lazy training, fcn, multi)",
                        choices=("sgd", "linearised", "alpha"))
    alpha: float = param(1.0, "the output scale alpha of regime=alpha (1: unused otherwise)", gt=0,
                         since=ALPHA_ARM_SINCE)
    lin_steps: int = param(0, "regime=linearised: 0 solves min-norm least squares; > 0 instead takes this many "
                              "full-batch steps of (heavy-ball) gradient descent at lr, momentum on the linearised "
                              "network, in closed form: the alpha arm's limit as alpha grows, at its steps", ge=0,
                           since=ALPHA_ARM_SINCE)

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
        if self.stop_at_target and not (self.target_loss or self.target_acc):
            raise ConfigError("stop_at_target", True, "false unless target_acc > 0 or target_loss > 0")
        if self.init_draws and self.arch != "fcn":
            raise ConfigError("init_draws", self.init_draws, "0 for arch=cnn/resnet")
        if self.arch != "fcn" and self.output == "single":
            raise ConfigError("output", self.output, "multi for arch=cnn/resnet")
        if self.early_epoch > self.epochs:
            raise ConfigError("early_epoch", self.early_epoch, f"0 (off) or <= epochs ({self.epochs})")
        if any(s < 1 for s in self.early_steps) or list(self.early_steps) != sorted(set(self.early_steps)):
            raise ConfigError("early_steps", list(self.early_steps), "increasing step counts >= 1")
        if any(not v > 0 for v in self.loss_marks):
            raise ConfigError("loss_marks", list(self.loss_marks), "training losses > 0")
        if self.early_steps and self.stop_at_target:
            raise ConfigError("early_steps", list(self.early_steps), "empty when stop_at_target is true")
        if self.regime in ("linearised", "alpha") and (self.arch != "fcn" or self.output != "multi"):
            raise ConfigError("regime", self.regime, "sgd unless arch=fcn and output=multi")
        if self.regime == "alpha" and not self.fd_draws:
            raise ConfigError("fd_draws", self.fd_draws, ">= 1 for regime=alpha (its P is the finite difference)")
        if self.lin_steps and self.regime != "linearised":
            raise ConfigError("lin_steps", self.lin_steps, f"0 unless regime=linearised (regime={self.regime})")
        if self.alpha != 1.0 and self.regime != "alpha":
            raise ConfigError("alpha", self.alpha, f"1.0 unless regime=alpha (regime={self.regime})")

    @property
    def loss(self) -> str:
        if self.regime == "alpha":  # k outputs, one-hot targets: the loss the linearised arm solves
            return "sq"
        return "ce" if self.output == "multi" else "mse"

    def sgd(self) -> SGDSpec:
        # regime=alpha steps theta at lr / alpha^2: in u = alpha (theta - theta0) that is the linearised
        # model's gradient descent at rate lr, whatever alpha (Chizat et al. 2019); alpha is 1 otherwise
        return SGDSpec(epochs=self.epochs, lr=self.lr / self.alpha**2, batch_size=self.batch_size, momentum=self.momentum,
                       decay_start=self.decay_start, lr_step=self.lr_step, lr_gamma=self.lr_gamma,
                       loss=self.loss, target_loss=self.target_loss, target_acc=self.target_acc,
                       stop_at_target=self.stop_at_target)

    @property
    def has_target(self) -> bool:
        return bool(self.target_acc or self.target_loss)


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
    if cfg.regime == "linearised":  # the NTK's products and its eigendecomposition
        nk = _n_train(cfg) * (len(cfg.classes) or shape.classes)
        return 2.0 * nk * nk * cfg.width * cfg.depth + 10.0 * nk**3
    side, k = cfg.size or shape.side, len(cfg.classes) or shape.classes
    dims = [shape.channels * side * side] + [cfg.width] * (cfg.depth - 1) + [1 if cfg.output == "single" else k]
    # regime=alpha: the frozen θ0's forward pass beside θ's forward and backward (2 more per weight)
    per = 8.0 if cfg.regime == "alpha" else 6.0
    return per * _n_train(cfg) * sum(a * b for a, b in zip(dims, dims[1:])) * cfg.epochs


def _n_train(cfg: WidthDepthInitConfig) -> int:
    """The training points a point uses, from the size table (as :func:`point_flops`)."""
    shape = SHAPES[cfg.dataset]
    n_train = shape.n_train * (len(cfg.classes) or shape.classes) // shape.classes
    return min(n_train, cfg.n_train) if cfg.n_train else n_train


PROBE_BATCHES = 8  # minibatches per epoch of a --dry-run probe


def probe_point(cfg: WidthDepthInitConfig, steps: int) -> WidthDepthInitConfig | None:
    """``cfg`` cut to about ``steps`` minibatches of its size (``Study.probe``, for
    ``--dry-run``): epochs over :data:`PROBE_BATCHES` minibatches of training points (fewer
    if it has fewer, or if ``steps`` is fewer: the warm-up probe is one step, not one epoch),
    so every step multiplies the same shapes as the point's own training, with 16 test points,
    no Monte Carlo estimate, no finite-difference check and so no per-layer spectral change
    (float64 SVDs at the end, per copy: 84 s for one depth-8 width-4096 copy, which made the
    paper grid's dry run take over 10 min; the estimate leaves them out, see the issue-54 note)
    and no measurement at a target loss or an early epoch. Probes of different lengths from
    :data:`PROBE_BATCHES` steps up differ only in their epochs, so the difference of their
    times is training alone."""
    if cfg.regime == "linearised":
        # no training to cut short, but the solve's cost grows as (n k)^3 (its eigendecomposition): a
        # probe solves a share of the training points, steps / (4 PROBE_BATCHES), all of them from
        # 4 PROBE_BATCHES steps on; the first pair (PROBE_BATCHES, 2 PROBE_BATCHES) is a quarter and a
        # half of them, whose difference is a large solve's rate, a little slower than the point's own
        # (the n = 400, 10-class groups: 55 CPU-s each, which the small groups' seconds per FLOP put at 5 min)
        n = _n_train(cfg)
        return dataclasses.replace(cfg, n_train=max(1, min(n, round(n * steps / (4 * PROBE_BATCHES)))), n_test=16)
    n = min(_n_train(cfg), max(1, min(steps, PROBE_BATCHES)) * cfg.batch_size)
    epochs = max(1, round(steps / math.ceil(n / cfg.batch_size)))
    return dataclasses.replace(cfg, epochs=epochs, n_train=n, n_test=16, mc_samples=0, target_loss=0.0, target_acc=0.0,
                               stop_at_target=False, early_epoch=0, early_steps=(), loss_marks=(), fd_points=0,
                               init_draws=0)


# ---------------------------------------------------------------------------------------
# running a point

def build_model(cfgs: list[WidthDepthInitConfig], data: Split, device: torch.device) -> torch.nn.Module:
    """The E seeds of one point as one ensemble model ``(E, N, ...) -> (E, N, k)`` (regime=alpha: the
    :class:`~robustlab.models.deep.AlphaScaled` wrapper of the same networks)."""
    base = cfgs[0]
    k = 1 if base.output == "single" else data.n_classes
    gens = [make_generator(c.seed, "wdi-init") for c in cfgs]
    gamma = base.gamma if base.init == "small" else None
    if base.arch == "fcn":
        net = DeepMLP(data.d, base.width, base.depth, k, init=base.init, gamma=gamma, generators=gens,
                      dtype=data.x_train.dtype, device=device)
        # regime=alpha: the same initial network, α-scaled around its initialisation (f_α(θ0) = f(θ0))
        return AlphaScaled(net, base.alpha) if base.regime == "alpha" else net
    cls = ConvNet if base.arch == "cnn" else ResNet
    nets = [cls(data.x_train.shape[1], base.width, base.depth, k, init=base.init, gamma=gamma, generator=g)
            for g in gens]
    return VmapEnsemble(nets).to(device)


def _per_member_stability(model: torch.nn.Module, x: torch.Tensor, eps: float, E: int, *,
                          width: int = 1, budget: int = 2**24, per_point: bool = False) -> torch.Tensor:
    """Def. 3 for each copy, ``(E,)``: the identity ε²‖J‖_F²/(d+2) averaged over the points
    (``per_point``: not averaged, ``(E, n)``).

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
    per = torch.cat(parts, 1)
    return per if per_point else per.mean(1)


@torch.no_grad()
def spectral_change(w0: list[torch.Tensor], w: list[torch.Tensor]) -> torch.Tensor:
    """Per copy and layer, ``‖W_l − W_l(0)‖₂ / ‖W_l(0)‖₂`` (spectral norms), ``(E, L)`` float64: how far
    each layer left its initialisation, beside the Frobenius κ_l (issue 54: the pooled κ is set by the
    d×m input layer)."""
    out = []
    for a, b in zip(w0, w):
        d = (b.detach() - a).double()
        ok = torch.isfinite(d).flatten(1).all(1)  # a diverged copy: NaN (its row becomes a NumericalError)
        r = torch.linalg.matrix_norm(torch.where(ok[:, None, None], d, 0.0), ord=2) / \
            torch.linalg.matrix_norm(a.double(), ord=2)
        out.append(torch.where(ok, r, float("nan")))
    return torch.stack(out, 1).cpu()


def steps_per_epoch(cfg: WidthDepthInitConfig, n_train: int) -> int:
    """SGD steps in one epoch (the last minibatch may be short)."""
    return math.ceil(n_train / min(cfg.batch_size, n_train))


AT_TARGET = ("stability", "train_loss", "train_acc", "test_acc", "fd_ratio")
EARLY_KEYS = ("stability", "train_loss", "train_acc", "fd_ratio")
MARK_KEYS = ("stability", "train_loss", "train_acc", "fd_ratio", "epoch")


# P on the first PLATEAU_POINTS held-out points (the finite-difference check's) at the end of epoch
# T - PLATEAU_BACK and at the end (``stability_head*``): the plateau-P evidence, paired on the same points
PLATEAU_POINTS = 100
PLATEAU_BACK = 10


def _measure(model: torch.nn.Module, data: Split, base: WidthDepthInitConfig, E: int, act: int,
             gens: list[torch.Generator], *, train: bool = True, head: int = 0) -> dict[str, torch.Tensor]:
    """Stability (Def. 3 per copy), the finite-difference ratio and, with ``train``, the
    training loss and accuracy and the test loss and accuracy of every copy, each ``(E,)``
    float64; with ``head``, also ``stability_head``: P on the first ``head`` held-out points."""
    per = _per_member_stability(model, data.x_test, base.eps, E, width=act, per_point=True)
    out = {"stability": per.mean(1)}
    if head:
        out["stability_head"] = per[:, :head].mean(1)
    if base.fd_points:
        out["fd_ratio"] = _fd_ratio(model, data.x_test[: base.fd_points], base.eps, gens)
    if train:
        out["train_loss"], out["train_acc"] = evaluate(model, data.x_train, data.y_train, base.loss, E=E)
        out["test_loss"], out["test_acc"] = evaluate(model, data.x_test, data.y_test, base.loss, E=E)
    return {k: v.detach().double().cpu() for k, v in out.items()}


def _fd_ratio(model: torch.nn.Module, x: torch.Tensor, eps: float, gens: list[torch.Generator]) -> torch.Tensor:
    """Whether ε is small enough for the linear formula, per copy ``(E,)``: the finite
    difference against the Jacobian on the same draws, ``Σ‖f(x+δ) − f(x)‖² / Σ‖J_x f δ‖²``
    over the points of ``x`` with one ``δ ~ U(B₂(0, ε))`` each, copy ``e``'s drawn on the CPU
    from ``gens[e]``. 1 where the network is linear on every segment x → x + δ; the stability
    P measures the right side only (the ``fd-linear`` premise bounds the gap)."""
    E = len(gens)
    de = _ball_draws(x, eps, gens)
    with torch.no_grad():
        if isinstance(model, DeepMLP):
            xe = x.expand(E, *x.shape)
            f0, jd = _mlp_jvp(model, xe, de)
        else:
            xe = x.expand(E, *x.shape).contiguous()  # forward AD needs its own memory per copy
            f0, jd = torch.func.jvp(model, (xe,), (de,))
        diff = model(xe + de) - f0
    return (diff.double().pow(2).sum((1, 2)) / jd.double().pow(2).sum((1, 2))).cpu()


def _ball_draws(x: torch.Tensor, eps: float, gens: list[torch.Generator]) -> torch.Tensor:
    """One ``δ ~ U(B₂(0, ε))`` per point of ``x`` for every copy, copy ``e``'s drawn on the CPU from
    ``gens[e]``, ``(E, *x.shape)`` in ``x``'s dtype and device."""
    n, D = len(x), x[0].numel()
    deltas = []
    for g in gens:
        u = torch.randn(n, D, generator=g, dtype=torch.float64)
        r = eps * torch.rand(n, 1, generator=g, dtype=torch.float64) ** (1.0 / D)
        deltas.append(u / u.norm(dim=1, keepdim=True) * r)
    return torch.stack(deltas).to(x.dtype).reshape(len(gens), *x.shape).to(x.device)


def _fd_stability(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, eps: float,
                  gens: list[torch.Generator], draws: int) -> torch.Tensor:
    """``E_x E_δ ‖f(x + δ) − f(x)‖²``, ``δ ~ U(B₂(0, ε))``, per copy ``(E,)`` float64 (Def. 1 without the
    linearisation in x; Monte Carlo, ``draws`` per point of ``x``), ``f: (E, N, d) -> (E, N, k)``.

    The α-arm's stability: its input gradient is not the linearised network's, however large α. A ReLU
    unit whose sign at x flipped while θ moved O(1/α) leaves f_α = f(θ0) + α (f(θ) − f(θ0)) with a slab
    of width O(1/α) around x where ‖J_x f_α‖ is O(α): the identity ε² E‖J_x f_α‖²/(d + 2) grows ~α in
    the mean (measured: 1.5x, 6x and 60x the linearised P at α = 10, 100, 1000, width 64, while the
    median point converges), but the function moves across such a slab by O(1) only and f_α → f_lin,
    so this finite difference converges to the linearised network's (tests/test_width_depth_alpha.py)."""
    E = len(gens)
    xe = x.expand(E, *x.shape)
    tot = torch.zeros(E, dtype=torch.float64)
    with torch.no_grad():
        f0 = f(xe)
        for _ in range(draws):
            tot += (f(xe + _ball_draws(x, eps, gens)) - f0).double().pow(2).sum(-1).mean(1).cpu()
    return tot / draws


def _mlp_jvp(model: DeepMLP, x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``f(x)`` and ``J_x f · v`` of a :class:`DeepMLP` in one pass, in closed form: the tangent
    goes through the same weights, masked by each layer's ReLU pattern at ``x`` (derivative 0 at 0,
    as autograd). The same numbers as ``torch.func.jvp`` up to rounding (tested), at about twice a
    forward pass instead of forward AD's ~10x (issue 54: the finite-difference check was most of a
    measurement's cost)."""
    h, t = x, v
    for W in model.weights[:-1]:
        z = torch.bmm(h, W)
        t = torch.bmm(t, W) * (z > 0).to(z.dtype)
        h = torch.relu(z)
    return torch.bmm(h, model.weights[-1]), torch.bmm(t, model.weights[-1])


def _fd_gens(cfgs: list[WidthDepthInitConfig], when: str) -> list[torch.Generator]:
    return [make_generator(c.seed, "wdi-fd", when) for c in cfgs]


def _fd_p_gens(cfgs: list[WidthDepthInitConfig], when: str) -> list[torch.Generator]:
    return [make_generator(c.seed, "wdi-fd-p", when) for c in cfgs]


def _init_draws(cfgs: list[WidthDepthInitConfig], data: Split, dev: torch.device, act: int
                ) -> list[dict[str, list[float]]] | None:
    """``init_draws`` more networks per seed, measured at initialisation only (drawn from
    ``make_generator(seed, "wdi-init-draw", j)``): Def. 1's expectation over W at t = 0 needs
    more networks than training can afford, and an untrained network costs one measurement."""
    base = cfgs[0]
    if not base.init_draws:
        return None
    out = []
    k = 1 if base.output == "single" else data.n_classes
    gamma = base.gamma if base.init == "small" else None
    for c in cfgs:
        gens = [make_generator(c.seed, "wdi-init-draw", j) for j in range(base.init_draws)]
        net = DeepMLP(data.d, base.width, base.depth, k, init=base.init, gamma=gamma, generators=gens,
                      dtype=data.x_train.dtype, device=dev)
        fd = [make_generator(c.seed, "wdi-fd-draw", j) for j in range(base.init_draws)]
        m = _measure(net, data, base, len(gens), act, fd, train=False)
        out.append({"stability_init_draws": [float(v) for v in m["stability"]],
                    "fd_ratio_init_draws": [float(v) for v in m["fd_ratio"]] if "fd_ratio" in m else None})
    return out


def _train(cfgs: list[WidthDepthInitConfig], model: torch.nn.Module, data: Split, act: int
           ) -> tuple[object, dict, dict, float]:
    """Train the group (resuming from its checkpoint if one fits); measure each copy when it
    first meets the targets (``at``, NaN for a copy that never does: no substitute) and at the
    end of epoch ``early_epoch`` (``early``). Returns the log, ``at``, ``early`` and the
    training seconds of earlier runs of this group."""
    base, E = cfgs[0], len(cfgs)
    spec = base.sgd()
    at = {k: torch.full((E,), float("nan"), dtype=torch.float64) for k in AT_TARGET}
    early: dict[str, torch.Tensor] = {}
    fd_gens = _fd_gens(cfgs, "target")

    def on_target(newly: torch.Tensor, epoch: int) -> None:
        # only the copies that reached the target now are measured, as a sub-ensemble of those
        idx = newly.nonzero().flatten().tolist()
        sub, n = (model, E) if len(idx) == E else (model.members(idx), len(idx))
        vals = _measure(sub, data, base, n, act, [fd_gens[i] for i in idx])
        for k in AT_TARGET:
            if k in vals:
                at[k][newly] = vals[k]

    per_epoch = steps_per_epoch(base, len(data.x_train))
    for L in base.loss_marks:  # kept in ``early``: saved and resumed with it
        for k in MARK_KEYS:
            early.setdefault(f"{k}_L{L:g}", torch.full((E,), float("nan"), dtype=torch.float64))

    def on_mark(epoch: int) -> None:
        """Each copy the first epoch its full-pass training loss is at most L* (matched loss)."""
        todo = [L for L in base.loss_marks if early[f"stability_L{L:g}"].isnan().any()]
        if not todo:
            return
        loss, acc = (v.detach().double().cpu() for v in evaluate(model, data.x_train, data.y_train, base.loss, E=E))
        for L in todo:
            newly = early[f"stability_L{L:g}"].isnan() & (loss <= L)
            idx = newly.nonzero().flatten().tolist()
            if not idx:
                continue
            sub = model if len(idx) == E else model.members(idx)
            vals = _measure(sub, data, base, len(idx), act, [_fd_gens(cfgs, f"L{L:g}")[i] for i in idx], train=False)
            for k, v in (("stability", vals["stability"]), ("fd_ratio", vals.get("fd_ratio")),
                         ("train_loss", loss[newly]), ("train_acc", acc[newly]),
                         ("epoch", torch.full((len(idx),), float(epoch), dtype=torch.float64))):
                if v is not None:
                    early[f"{k}_L{L:g}"][newly] = v

    def on_epoch(epoch: int) -> None:
        if base.loss_marks:
            on_mark(epoch)
        if epoch == base.epochs - PLATEAU_BACK and epoch > 0:  # the plateau-P evidence's first side
            early["stability_head_last10"] = _per_member_stability(
                model, data.x_test[:PLATEAU_POINTS], base.eps, E, width=act).detach().double().cpu()
        if epoch == base.early_epoch:  # Thm 3's window: the network as it stands early in training
            s = epoch * per_epoch
            if f"stability_step{s}" in early:  # the same state, measured at that step a moment ago
                early.update({k: early[f"{k}_step{s}"] for k in EARLY_KEYS if f"{k}_step{s}" in early})
                return
            vals = _measure(model, data, base, E, act, _fd_gens(cfgs, "early"))
            early.update({k: vals[k] for k in EARLY_KEYS if k in vals})

    def on_step(step: int) -> None:
        # Thm 3's window, a few SGD steps in (P(t) of the theorem); the last step of the schedule is the
        # end's measurement (run_points copies it), not measured twice
        if step in base.early_steps and step < spec.epochs * per_epoch:
            vals = _measure(model, data, base, E, act, _fd_gens(cfgs, f"step{step}"))
            early.update({f"{k}_step{step}": vals[k] for k in EARLY_KEYS if k in vals})

    # a long group saves its state now and then in the run's checkpoints/ and, run again after
    # an interruption, goes on from there (the same records; robustlab.sweep.checkpoint)
    ck = checkpoint.for_group(cfgs)
    saved = ck.load() if ck is not None else None
    if saved is not None and not resume_fits(saved["train"], model, spec, E):
        saved = None  # saved by other code: this run starts the group afresh
    before = 0.0  # seconds of training in earlier runs of this group
    if saved is not None:  # copies of the small parts; the training state goes to train_supervised,
        for k in AT_TARGET:  # and no reference here keeps the mapped file (Checkpoint.load) alive
            if k in saved["at"]:
                at[k].copy_(saved["at"][k])
        early.update({k: v.clone() for k, v in saved["early"].items()})
        before = float(saved["train_seconds"])
        saved = {"train": saved["train"]}
    t0 = time.perf_counter()

    def on_checkpoint(state: Callable[[], dict]) -> None:
        if ck.due():
            st = state()
            ck.save({"train": st, "at": at, "early": early, "train_seconds": before + time.perf_counter() - t0},
                    progress=f"{base.init} depth {base.depth} width {base.width} epoch {st['epoch']}/{spec.epochs}")

    log = train_supervised(model, data.x_train, data.y_train, spec, on_target=on_target, on_epoch=on_epoch,
                           on_step=on_step if base.early_steps else None,
                           generators=[make_generator(c.seed, "wdi-order") for c in cfgs],
                           on_checkpoint=on_checkpoint if ck is not None else None,
                           resume=saved.pop("train") if saved is not None else None)
    if ck is not None:
        ck.clear()
    return log, at, early, before + time.perf_counter() - t0


def _mc_estimate(cfgs: list[WidthDepthInitConfig], model: torch.nn.Module, data: Split, act: int) -> dict | None:
    """At the grid's Monte Carlo point: per copy the Monte Carlo estimate of P, its standard
    error and the identity on the same points (the ``mc-identity`` self-check)."""
    base, E = cfgs[0], len(cfgs)
    if not (base.mc_samples > 0 and base.init == base.mc_init and base.depth == base.mc_depth
            and base.width == base.mc_width):
        return None
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
    exact = _per_member_stability(model, xm, base.eps, E, width=act)
    return {"mc": mc, "se": mc_se, "exact": exact, "points": n}


def run_points(cfgs: list[WidthDepthInitConfig], device: str = "cpu") -> list:
    """Train the seeds of one point as an ensemble; measure stability, accuracy and κ.

    Measured at initialisation, when a seed first meets the targets (``target_acc`` /
    ``target_loss``: every network compared at the same fit of the training set), at the end
    of epoch ``early_epoch`` and at the end of the schedule; each with the finite-difference
    ratio of the linear formula (``fd_ratio*``). A seed that never meets the targets has NaN
    ``*_at_target`` values and ``reached_target`` false: the claims exclude it by premise and
    report the end of the schedule as its own variant, never as a substitute.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    base = cfgs[0]
    dev = resolve_device(device)
    if base.regime == "linearised":
        return _with_cpu(_run_linearised(cfgs, dev, t0), c0)
    data = load_data(base).to(dev)
    E = len(cfgs)
    model = build_model(cfgs, data, dev)
    # floats of one hidden activation per point (a CNN's channels at every pixel)
    act = base.width if base.arch == "fcn" else base.width * data.x_test[0, 0].numel()
    m0 = _measure(model, data, base, E, act, _fd_gens(cfgs, "init"), train=False)
    # P by finite differences beside the identity (fd_draws; regime=alpha's P, see _fd_stability), at init and
    # the end, on the same draws as the linearised twin's (seed, "wdi-fd-p", moment)
    fd0 = _fd_stability(model, data.x_test, base.eps, _fd_p_gens(cfgs, "init"), base.fd_draws) \
        if base.fd_draws else None
    # regime=alpha: θ's weights (AlphaScaled.weights), whose change is the lazy premise of f_α. Every
    # measurement below is f_α's: AlphaScaled is not a DeepMLP, so the stability, the finite-difference
    # ratio (torch.func.jvp, not _mlp_jvp) and the Monte Carlo estimate take their autograd paths
    w0 = [W.detach().clone() for W in model.weights] if isinstance(model, (DeepMLP, AlphaScaled)) else None
    draws = _init_draws(cfgs, data, dev, act)
    log, at, early, t_train = _train(cfgs, model, data, act)
    end = _measure(model, data, base, E, act, _fd_gens(cfgs, "end"), head=PLATEAU_POINTS)
    fd1 = _fd_stability(model, data.x_test, base.eps, _fd_p_gens(cfgs, "end"), base.fd_draws) \
        if base.fd_draws else None
    # with the finite-difference check off (fd_points=0, as --dry-run's probes), the per-layer
    # spectral change is off too: both check the linear regime, and its float64 SVDs dominate a probe
    spec_change = spectral_change(w0, list(model.weights)) if w0 is not None and base.fd_points else None
    last = base.epochs * steps_per_epoch(base, len(data.x_train))
    if last in base.early_steps and bool(log.finite.all()) and int(log.stopped.min()) == base.epochs \
            and not base.stop_at_target:  # every copy trained to the last step: the end is that step
        early.update({f"{k}_step{last}": end[k] for k in EARLY_KEYS if k in end})
    te_loss = end["test_loss"]  # measured with the test accuracy (one pass over the held-out points)
    mc = _mc_estimate(cfgs, model, data, act)
    seconds = time.perf_counter() - t0
    n_params = model.n_params()
    out: list = []
    for e, c in enumerate(cfgs):
        finals = [float(v[e]) for v in (end["train_loss"], end["train_acc"], te_loss, end["test_acc"],
                                        end["stability"], m0["stability"])]
        if not bool(log.finite[e]) or not all(math.isfinite(v) for v in finals):
            out.append(NumericalError(f"seed {c.seed}: training diverged or stability is not finite "
                                      f"(lr={c.lr}, init={c.init}, width={c.width}, depth={c.depth})"))
            continue
        trained, reached = int(log.stopped[e]), int(log.reached[e])
        # training FLOPs of this copy (fcn: the matrix products, 6 per weight and sample: forward 2,
        # backward 4), and the rate the whole ensemble trained at (its wall time, callbacks included)
        fcn = base.arch == "fcn"
        gflop = (6.0 * len(data.x_train) * n_params * trained / 1e9) if fcn else None
        ens_gflop = (6.0 * len(data.x_train) * n_params * float(log.stopped.sum()) / 1e9) if fcn else None
        rows = [{"kind": "epoch", "epoch": t + 1, "loss": float(log.loss[e, t]),
                 "train_acc_running": float(log.acc[e, t]), "kappa": float(log.kappa[e, t]),
                 "kappa_layers": [float(v) for v in log.kappa_layers[e, t]], "lr": log.lr[t]}
                for t in range(trained)]
        final = {"kind": "final", "epoch": trained, "train_loss": finals[0], "train_acc": finals[1],
                 "test_loss": finals[2], "test_acc": finals[3], "stability": finals[4],
                 "grad_norm2": finals[4] * (data.d + 2) / c.eps**2, "stability_init": finals[5],
                 **{f"{k}_at_target": _finite(at[k][e]) for k in AT_TARGET},
                 "reached_target": reached > 0, "epoch_at_target": reached or None,
                 "kappa_at_target": float(log.kappa[e, reached - 1]) if reached else None,
                 "kappa": float(log.kappa[e, trained - 1]),
                 "loss_change_last10": _loss_change(log.loss[e], trained),
                 **_last10(log, e, trained),
                 "stability_head": _opt(end, "stability_head", e),
                 "stability_head_last10": _opt(early, "stability_head_last10", e)
                 if trained == base.epochs else None,
                 "kappa_layers": [float(v) for v in log.kappa_layers[e, trained - 1]],
                 "spectral_change_layers": None if spec_change is None else [_finite(v) for v in spec_change[e]],
                 "spectral_change_max": None if spec_change is None else _finite(spec_change[e].max()),
                 "fd_ratio": _opt(end, "fd_ratio", e), "fd_ratio_init": _opt(m0, "fd_ratio", e),
                 "n_params": n_params, "n_train": len(data.x_train), "n_test": len(data.x_test), "d": data.d,
                 "outputs": 1 if c.output == "single" else data.n_classes,
                 "seconds": seconds, "train_seconds": t_train, "train_gflop": gflop,
                 "gflops": ens_gflop / t_train if ens_gflop is not None and t_train > 0 else None}
        if c.regime == "alpha":  # the scale and the rate θ stepped at (lr / α²)
            final.update(alpha=c.alpha, lr_theta=c.lr / c.alpha**2)
        if fd1 is not None:
            final.update(stability_fd=_finite(fd1[e]), stability_fd_init=_finite(fd0[e]))
        if "stability" in early:
            final.update(early_epoch=c.early_epoch, stability_early=float(early["stability"][e]),
                         train_loss_early=float(early["train_loss"][e]),
                         train_acc_early=float(early["train_acc"][e]), fd_ratio_early=_opt(early, "fd_ratio", e))
        for L in c.loss_marks:  # None where the copy never reached L*
            final.update({f"{k}_L{L:g}": _opt(early, f"{k}_L{L:g}", e) for k in MARK_KEYS})
        for st in c.early_steps:  # None where the step was not reached with every seed training
            final.update({f"{k}_step{st}": _opt(early, f"{k}_step{st}", e) for k in EARLY_KEYS})
        if draws is not None:
            final.update(draws[e])
        if mc is not None:
            final.update(mc_stability=float(mc["mc"][e]), mc_stderr=float(mc["se"][e]),
                         mc_exact=float(mc["exact"][e]), mc_samples=c.mc_samples, mc_points=mc["points"])
        out.append(rows + [final])
    return _with_cpu(out, c0)


def _with_cpu(out: list, c0: float) -> list:
    """Every final row gets the group's CPU seconds (``cpu_seconds``: this process, all its threads;
    unlike ``seconds``, not inflated by other processes sharing the machine)."""
    cpu = time.process_time() - c0
    for rows in out:
        if isinstance(rows, list):
            rows[-1]["cpu_seconds"] = cpu
    return out


def _run_linearised(cfgs: list[WidthDepthInitConfig], dev: torch.device, t0: float) -> list:
    """Thm 1's lazy limit, exactly (:mod:`.linearised`): each seed's network (the same initial
    weights as its SGD twin, ``make_generator(seed, "wdi-init")``) linearised at initialisation
    and solved by min-norm least squares on one-hot targets, in float64; its stability (Def. 3)
    at initialisation and of the solution, and the solution's fit."""
    base = cfgs[0]
    data = load_data(base).to(dev)
    x, xt = data.x_train.double(), data.x_test.double()
    k = data.n_classes
    y = torch.nn.functional.one_hot(data.y_train.long(), k).double()
    out: list = []
    for c in cfgs:
        net = DeepMLP(data.d, c.width, c.depth, k, init=c.init, gamma=c.gamma if c.init == "small" else None,
                      generators=[make_generator(c.seed, "wdi-init")], dtype=torch.float64, device=dev)
        ws = [W.detach()[0] for W in net.weights]
        # lin_steps: the linearised network after that many full-batch steps (the alpha arm's twin), else min-norm
        dws, info = lin.solve(ws, x, y, steps=c.lin_steps, lr=c.lr, momentum=c.momentum)
        scale = c.eps**2 / (data.d + 2)
        p0 = float(lin.input_jacobian_sq(ws, [torch.zeros_like(w) for w in ws], xt).mean()) * scale
        p1 = float(lin.input_jacobian_sq(ws, dws, xt).mean()) * scale
        with torch.no_grad():
            ftr, fte = lin.linearised(ws, dws, x), lin.linearised(ws, dws, xt)
        # P by finite differences on the alpha arm's draws (its limit as alpha grows; see _fd_stability)
        fd = {} if not c.fd_draws else {
            "stability_fd_init": float(_fd_stability(lambda xe, ws=ws: lin.mlp(ws, xe[0])[None], xt, c.eps,
                                                     _fd_p_gens([c], "init"), c.fd_draws)[0]),
            "stability_fd": float(_fd_stability(lambda xe, ws=ws, dws=dws: lin.linearised(ws, dws, xe[0])[None],
                                                xt, c.eps, _fd_p_gens([c], "end"), c.fd_draws)[0])}
        yt = torch.nn.functional.one_hot(data.y_test.long(), k).double()
        final = {"kind": "final", "epoch": 0, "stability": p1, "stability_init": p0,
                 "train_loss": float((ftr - y).pow(2).sum(1).mean()), "test_loss": float((fte - yt).pow(2).sum(1).mean()),
                 "train_acc": float((ftr.argmax(1) == data.y_train.long()).double().mean()),
                 "test_acc": float((fte.argmax(1) == data.y_test.long()).double().mean()),
                 "grad_norm2": p1 * (data.d + 2) / c.eps**2, "reached_target": None, "fd_ratio": None,
                 **fd,
                 "ntk_rank": info["rank"], "ntk_size": info["size"], "ntk_lambda_min": info["lambda_min_kept"],
                 "param_shift": info["param_shift"], "n_params": net.n_params(), "n_train": len(x), "n_test": len(xt),
                 "d": data.d, "outputs": k, "seconds": time.perf_counter() - t0, "train_seconds": 0.0}
        if not all(math.isfinite(v) for v in (p0, p1, final["train_loss"])):
            out.append(NumericalError(f"seed {c.seed}: the linearised solve is not finite (width={c.width})"))
            continue
        out.append([final])
    for rows in out:  # every row carries the group's time, as the SGD groups' rows do
        if isinstance(rows, list):
            rows[-1]["seconds"] = time.perf_counter() - t0
    return out


def _loss_change(loss: torch.Tensor, trained: int, back: int = 10) -> float | None:
    """|loss(T) − loss(T − back)| / loss(T − back) of one copy's running training loss (the
    ``plateau`` premise, App. E.2), None when it trained fewer than ``back + 1`` epochs."""
    if trained <= back:
        return None
    a, b = float(loss[trained - 1 - back]), float(loss[trained - 1])
    return abs(b - a) / a if a > 0 else None


def _last10(log, e: int, trained: int, back: int = PLATEAU_BACK) -> dict[str, float | None]:
    """The ``plateau-loss`` and ``plateau-acc`` premises' quantities (App. E.2: "loss and accuracy almost
    unchanged"): |running training loss(T) − loss(T − back)| and |running training accuracy(T) −
    accuracy(T − back)| of copy ``e``; None when it trained fewer than ``back + 1`` epochs."""
    if trained <= back:
        return {"loss_drop_last10": None, "acc_change_last10": None}
    t0, t1 = trained - 1 - back, trained - 1
    return {"loss_drop_last10": _finite(abs(float(log.loss[e, t1]) - float(log.loss[e, t0]))),
            "acc_change_last10": _finite(abs(float(log.acc[e, t1]) - float(log.acc[e, t0])))}


def _opt(vals: dict, key: str, e: int) -> float | None:
    return _finite(vals[key][e]) if key in vals else None


def _finite(v: torch.Tensor | float) -> float | None:
    """A record's number, None where it was not measured (NaN)."""
    v = float(v)
    return v if math.isfinite(v) else None
