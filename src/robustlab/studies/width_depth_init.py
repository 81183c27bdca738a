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

Claims (the issue's; thresholds are module constants fixed before the runs, never tuned):

1. ``width-peak`` — for He and LeCun at depth 2 and at every deeper depth with a width
   sweep, an *interior maximum*: the seed-mean curve peaks strictly inside the width grid,
   the peak is ≥ ``PEAK_RATIO`` × and ≥ ``PEAK_Z`` standard errors above each end, and every
   seed of every width past the peak trained (so the fall is not an untrained network's).
2. ``depth-init`` — LeCun: stability falls with depth (OLS slope of log P on L, 95 % CI
   below 0); He and NTK: it rises (slope of log P on log L, CI above 0); judged at every
   width whose ≥ ``MIN_DEPTHS`` depths all trained.
3. ``nonlazy-width`` — the non-lazy (``small``) two-layer network, every seed trained,
   falls at every step of the width grid, its log–log slope has a CI below 0, and it lies
   below the He two-layer network at every common width.
4. ``kappa`` — at depth 2 and widths ≥ the number of training points (where lazy training
   applies): He's κ(t) *nearly flat* (growth exponent of κ ∝ t^b over the late constant-rate
   window b ≤ ``FLAT_MAX_EXP``) and its final κ falls with width (CI below 0); the non-lazy
   κ(t) *grows* (b ≥ ``GROW_MIN_EXP``) and is ≥ ``FAR_RATIO`` × He's at every such width.

Beside them, ``mc-identity`` checks the Monte Carlo estimate against the identity. Settings
that vary within one initialisation (a learning rate, γ, …) split it into separate series,
each judged; a rate may differ between initialisations ("a rate per init").
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..config import Config, ConfigError, param
from ..data import load_images
from ..data.images import Split
from ..errors import NumericalError
from ..metrics import perturbation_stability
from ..models.deep import INITS, ConvNet, DeepMLP, ResNet, VmapEnsemble
from ..models.ensemble import Flat, fold
from ..report.plots import COLORS, fit_power_law, label_panels, log_axes, mean_band, save, subplots
from ..train.supervised import SGDSpec, evaluate, train_supervised
from ..utils import make_generator, resolve_device
from .base import Claim, Context, Figure, Preset, Study

SOURCE = "Seed 002 (Robustness in deep learning: the good (width), the bad (depth), the ugly (initialization))"

DATASETS = ("mnist5k", "digits", "mnist", "cifar10", "cifar100")
ARCHS = ("fcn", "cnn", "resnet")

# Claim thresholds (see the module docstring). Chosen before the runs; never tuned to pass.
ACC_FLOOR = 0.9  # end-of-schedule protocol: a seed "trained" when its training accuracy is at least this
PEAK_RATIO = 1.2  # interior maximum: peak ≥ 1.2 × each end of the width grid ...
PEAK_Z = 2.0  # ... and ≥ 2 standard errors above each end (needs ≥ 2 seeds)
MIN_WIDTHS = 4  # a width curve needs this many widths to show a peak
MIN_DEPTHS = 3  # a depth curve needs this many depths for a slope with an interval
FLAT_MAX_EXP = 1 / 3  # κ ∝ t^b with b ≤ 1/3 over the late window: < 26 % growth per doubling of t
GROW_MIN_EXP = 1 / 2  # κ ∝ t^b with b ≥ 1/2: grows at least like √t (linear growth is b = 1)
FAR_RATIO = 10.0  # "far larger": an order of magnitude


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

    @property
    def loss(self) -> str:
        return "ce" if self.output == "multi" else "mse"

    def sgd(self) -> SGDSpec:
        return SGDSpec(epochs=self.epochs, lr=self.lr, batch_size=self.batch_size, momentum=self.momentum,
                       decay_start=self.decay_start, lr_step=self.lr_step, lr_gamma=self.lr_gamma,
                       loss=self.loss, target_loss=self.target_loss, stop_at_target=self.stop_at_target)


# ---------------------------------------------------------------------------------------
# data

@functools.lru_cache(maxsize=4)
def _prepared(dataset: str, data_dir: str | None, classes: tuple[int, ...], size: int | None, sphere: bool,
              flatten: bool, binary: bool, n_train: int, n_test: int) -> Split:
    split = load_images(dataset, classes=classes or None, binary=binary, size=size, flatten=flatten,
                        sphere=sphere, data_dir=data_dir)

    def subset(y: torch.Tensor, n: int, salt: str) -> torch.Tensor:
        # Stratified and fixed across seeds (Def. 1 averages over initialisations only):
        # the loaders order points by class, so a prefix would hold one class.
        if n == 0 or n >= len(y):
            return torch.arange(len(y))
        g = make_generator(0, "wdi-subset", salt)
        labels = y.long() if not binary else (y > 0).long()
        order = torch.randperm(len(y), generator=g)
        counts = torch.bincount(labels)
        k = len(counts)
        # the same number per class (the first n mod k classes one more), as far as each has
        quota = torch.minimum(counts, torch.full_like(counts, n // k) + (torch.arange(k) < n % k).long())
        picked, taken, rest = [], torch.zeros_like(counts), []
        for i in order.tolist():
            c = int(labels[i])
            if taken[c] < quota[c]:
                picked.append(i)
                taken[c] += 1
            else:
                rest.append(i)
        picked += rest[: n - len(picked)]  # a class short of its quota: fill from the others
        return torch.tensor(sorted(picked))

    tr, te = subset(split.y_train, n_train, "train"), subset(split.y_test, n_test, "test")
    return dataclasses.replace(split, x_train=split.x_train[tr], y_train=split.y_train[tr],
                               x_test=split.x_test[te], y_test=split.y_test[te])


def load_data(cfg: WidthDepthInitConfig) -> Split:
    return _prepared(cfg.dataset, cfg.data_dir, cfg.classes, cfg.size, cfg.sphere, cfg.arch == "fcn",
                     cfg.output == "single", cfg.n_train, cfg.n_test)


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
    within ``budget``: the Jacobian's k backward passes run batched, k copies of each.
    """
    flat = Flat(model, E)
    chunk = max(1, budget // max(1, E * width))
    parts = []
    for i in range(0, len(x), chunk):
        xc = x[i:i + chunk]
        per = perturbation_stability(flat, fold(xc.expand(E, *xc.shape)), eps, per_sample=True)  # (E·n,)
        parts.append(per.reshape(E, len(xc)))
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
        vals = dict(zip(("train_loss", "train_acc"), evaluate(model, data.x_train, data.y_train, spec.loss, E=E)))
        vals["test_acc"] = evaluate(model, data.x_test, data.y_test, spec.loss, E=E)[1]
        vals["stability"] = _per_member_stability(model, data.x_test, base.eps, E, width=act)
        for k in AT_TARGET:
            at[k][newly] = vals[k].detach().double().cpu()[newly]

    log = train_supervised(model, data.x_train, data.y_train, spec, on_target=on_target,
                           generators=[make_generator(c.seed, "wdi-order") for c in cfgs])
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
    seconds = time.perf_counter() - t0
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
                 "seconds": seconds}
        if is_mc_point:
            final.update(mc_stability=float(mc[e]), mc_stderr=float(mc_se[e]), mc_exact=float(mc_exact[e]),
                         mc_samples=c.mc_samples, mc_points=len(xm))
        out.append(rows + [final])
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


def _pow_fit(x, y) -> dict:
    """OLS of log y on log x (a power law) with the slope's 95 % t-interval.

    Points with ``y = 0`` (a network whose units all died: its output ignores the input) have
    no logarithm; they are left out and counted in ``dropped``.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = y > 0
    if np.unique(x[keep]).size < 2:
        return {"slope": None, "slope_ci": [None, None], "n": int(keep.sum()), "dropped": int((~keep).sum())}
    fit = fit_power_law(x[keep], y[keep])
    return {"slope": _r(fit.slope), "slope_ci": [_r(fit.slope_ci[0]), _r(fit.slope_ci[1])], "n": fit.n,
            "dropped": int((~keep).sum())}


def _line_fit(x, y) -> dict:
    """OLS of log y on x (an exponential trend) with the slope's 95 % t-interval."""
    # fit_power_law regresses log y on log x; feeding exp(x) makes that log x = x.
    return _pow_fit(np.exp(np.asarray(x, float)), y)


def _below(ci: list, value: float = 0.0) -> bool:
    return ci[1] is not None and ci[1] < value


def _above(ci: list, value: float = 0.0) -> bool:
    return ci[0] is not None and ci[0] > value


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


def _judge(f: pd.DataFrame, check) -> tuple[bool, dict]:
    """Run ``check(view) -> (passed, evidence)`` on every protocol the results hold; the claim
    passes on the first (equal training loss when measured), the others are reported beside."""
    if f.empty or "stability" not in f.columns:
        return False, {"reason": "no final results"}
    ps = protocols(f)
    ev: dict = {"judged_on": PROTOCOLS[ps[0]]}
    passed = False
    for i, p in enumerate(ps):
        ok, e = check(view(f, p))
        ev[p] = {"passed": bool(ok), **e}
        if i == 0:
            passed = ok
    return bool(passed), ev


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
    for vals, s in sub.groupby(keys, dropna=False):
        vals = vals if isinstance(vals, tuple) else (vals,)
        out.append(("[" + ",".join(f"{k}={x}" for k, x in zip(keys, vals)) + "]", s))
    return out


# ---------------------------------------------------------------------------------------
# claims

def width_peak(c: pd.DataFrame) -> dict:
    """Is there an interior maximum in ``c`` (a :func:`curve` against width)? With the numbers.

    Interior maximum: the seed-mean curve peaks strictly inside the grid, the peak is at least
    ``PEAK_RATIO`` × and ``PEAK_Z`` standard errors above each end, and every width past the
    peak trained (so the fall is not an untrained network's).
    """
    widths = c.index.to_numpy()
    mean = c["mean"].to_numpy(float)
    sem = c["sem"].to_numpy(float)
    if len(widths) < MIN_WIDTHS:
        return {"passed": False, "reason": f"fewer than {MIN_WIDTHS} widths", "curve": _table(c)}
    i = int(np.nanargmax(mean))
    ev: dict = {"peak_width": int(widths[i]), "peak": _r(mean[i])}
    ok, reasons = True, []
    if i in (0, len(widths) - 1):
        ok = False
        reasons.append("the maximum is at an end of the width grid")
    for j, name in ((0, "narrowest"), (len(widths) - 1, "widest")):
        if i == j:
            continue
        ratio = mean[i] / mean[j] if mean[j] > 0 else math.inf
        z = (mean[i] - mean[j]) / math.sqrt(sem[i] ** 2 + sem[j] ** 2)
        ev[f"ratio_to_{name}"] = _r(ratio)
        ev[f"z_to_{name}"] = _r(z, 3)
        if not (ratio >= PEAK_RATIO and math.isfinite(z) and z >= PEAK_Z):
            ok = False
            reasons.append(f"peak/{name} = {ratio:.3g} (need >= {PEAK_RATIO}), z = {z:.3g} (need >= {PEAK_Z})")
    past = c[c.index > widths[i]]
    untrained = [int(m) for m in past.index[past["trained"] < 1]]
    if untrained:
        ok = False
        reasons.append(f"widths {untrained} past the peak did not all train")
    ev["tail_change"] = _r(mean[-1] / mean[-2] - 1, 3)  # → 0 where the curve levels off
    ev["curve"] = _table(c)
    return {"passed": ok, "reason": "; ".join(reasons) or "interior maximum", **ev}


def claim_width(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    f = f[f["init"].isin(["he", "lecun"])]
    statement = ("Lazy regime, width: stability first rises then falls with width (an interior maximum) "
                 "for He and LeCun at depth 2 and deeper")

    def check(v: pd.DataFrame) -> tuple[bool, dict]:
        ok, ev = True, {}
        for init in ("he", "lecun"):
            parts = series(v, init) or [("", v.iloc[0:0])]
            for label, vi in parts:
                depths = sorted(int(L) for L, s in vi.groupby("depth") if s["width"].nunique() >= MIN_WIDTHS)
                if 2 not in depths or not any(L > 2 for L in depths):
                    ok = False
                    ev[init + label] = (f"needs width sweeps (>= {MIN_WIDTHS} widths) at depth 2 and deeper; "
                                        f"has depths {depths}")
                    continue
                for L in depths:
                    sub = vi[vi["depth"] == L]
                    res = width_peak(curve(sub, "width"))
                    if "peak_width" in res:
                        pk = res["peak_width"]
                        up, down = sub[sub["width"] <= pk], sub[sub["width"] >= pk]
                        res["rise_fit"] = _pow_fit(up["width"], up["stability"])
                        res["fall_fit"] = _pow_fit(down["width"], down["stability"])
                    ev[f"{init}_L{L}{label}"] = res
                    ok &= res["passed"]
        return ok, ev

    passed, ev = _judge(f, check)
    ev = {"definition": f"interior maximum: the seed-mean stability peaks strictly inside the width grid, is >= "
                        f"{PEAK_RATIO}x and >= {PEAK_Z} standard errors above both ends, and every seed of every "
                        "width past the peak trained; required for He and LeCun at depth 2 and at every deeper "
                        "depth with a width sweep", **ev}
    return Claim("width-peak", statement, passed, ev, SOURCE + ", Thm 1, §5.3, Fig. 4(a)")


def claim_depth(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    statement = "Depth: with LeCun init stability falls with depth; with He and NTK it rises"

    def check(v: pd.DataFrame) -> tuple[bool, dict]:
        ok, ev = True, {}
        for init, sign in (("lecun", -1), ("he", 1), ("ntk", 1)):
            fit_fn = _line_fit if sign < 0 else _pow_fit
            judged = 0
            for label, vi in series(v, init):
                for m, sub in vi.groupby("width"):
                    if sub["depth"].nunique() < MIN_DEPTHS:
                        continue
                    c = curve(sub, "depth")
                    fit = fit_fn(sub["depth"], sub["stability"])
                    comparable = bool((c["trained"] == 1).all())
                    passed = comparable and (_below(fit["slope_ci"]) if sign < 0 else _above(fit["slope_ci"]))
                    ev[f"{init}_m{int(m)}{label}"] = {
                        "passed": passed, "comparable": comparable, "fit": fit,
                        "fit_at_init": fit_fn(sub["depth"], sub["stability_init"]), "curve": _table(c)}
                    if comparable:
                        judged += 1
                        ok &= passed
            if judged == 0:
                ok = False
                ev[init] = f"no width with >= {MIN_DEPTHS} depths whose every seed trained"
        return ok, ev

    passed, ev = _judge(f, check)
    ev = {"definition": "LeCun: the OLS slope of log P on L (exponential trend) has a 95% CI below 0; He and "
                        "NTK: the OLS slope of log P on log L (power law) has a 95% CI above 0; judged at every "
                        f"width with >= {MIN_DEPTHS} depths whose every seed trained (others are reported, "
                        "marked comparable=false); fit_at_init is the same fit before training", **ev}
    return Claim("depth-init", statement, passed, ev, SOURCE + ", Thm 1, §5.4, Fig. 5, App. E.6")


def claim_nonlazy(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    f = finals(df)
    f = f[f["depth"] == 2]
    statement = ("Non-lazy two-layer networks: stability falls monotonically with width and lies below "
                 "the lazy (He) network at the same width")

    def one(small: pd.DataFrame, he: pd.DataFrame) -> tuple[bool, dict]:
        if small["width"].nunique() < 3:
            return False, {"reason": "fewer than 3 widths with init=small at depth 2"}
        c = curve(small, "width")
        monotone = bool((np.diff(c["mean"].to_numpy(float)) < 0).all())
        fit = _pow_fit(small["width"], small["stability"])
        trained = bool((c["trained"] == 1).all())
        ch = curve(he, "width") if len(he) else None
        common = [m for m in c.index if ch is not None and m in ch.index]
        ratio = {int(m): _r(c.loc[m, "mean"] / ch.loc[m, "mean"]) for m in common}
        below = len(common) >= 3 and all(r is not None and r < 1 for r in ratio.values())
        ok = monotone and _below(fit["slope_ci"]) and trained and below
        return ok, {"passed": ok, "monotone": monotone, "fit": fit, "all_trained": trained,
                    "ratio_small_to_he": ratio, "below_he_everywhere": below, "curve_small": _table(c),
                    "curve_he": _table(ch) if ch is not None else None}

    def check(v: pd.DataFrame) -> tuple[bool, dict]:
        # every non-lazy series against every He series (a rate or gamma swept is judged each)
        smalls, hes = series(v, "small"), series(v, "he") or [("", v.iloc[0:0])]
        if not smalls:
            return False, {"reason": "no init=small runs at depth 2"}
        ok, ev = True, {}
        for ls, small in smalls:
            for lh, he in hes:
                res_ok, res = one(small, he)
                ev[f"small{ls}_vs_he{lh}"] = res
                ok &= res_ok
        return ok, ev

    passed, ev = _judge(f, check)
    ev = {"definition": "every consecutive width step lowers the seed-mean stability of init=small, its log-log "
                        "slope has a 95% CI below 0, every seed trained, and small < He (depth 2) at every one "
                        "of >= 3 common widths", **ev}
    return Claim("nonlazy-width", statement, passed, ev, SOURCE + ", Thm 3, Fig. 4(b)")


def growth_exponent(trace: pd.DataFrame, decay_start: int) -> dict:
    """Log–log growth exponent of the seed-mean κ(t) over the late constant-rate window.

    The window is the second half of the epochs run at the initial rate, ``[T₁/2, T₁]`` with
    ``T₁ = decay_start`` (the last epoch when the rate never decays): past the first
    transient, before a decay slows every curve down.
    """
    k = trace.groupby("epoch")["kappa"].mean().sort_index()
    last = int(k.index.max())
    T1 = int(decay_start) if 0 < decay_start <= last else last
    win = k[(k.index >= max(1, T1 // 2)) & (k.index <= T1)]
    if len(win) < 2 or (win <= 0).any():
        return {"exponent": None, "window": [max(1, T1 // 2), T1]}
    fit = fit_power_law(win.index.to_numpy(float), win.to_numpy(float))
    return {"exponent": _r(fit.slope, 3), "window": [int(win.index.min()), int(win.index.max())],
            "kappa_start": _r(win.iloc[0]), "kappa_end": _r(win.iloc[-1])}


def claim_kappa(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("kappa: nearly flat in time and falling with width for He; growing in time and far larger "
                 "for the non-lazy init")
    ev: dict = {"definition": f"at depth 2 and every width m >= the number of training points (the "
                              f"over-parameterised widths where lazy training applies; >= 3 needed): nearly "
                              f"flat = growth exponent b of kappa(t) ~ t^b over the late constant-rate window "
                              f"<= {FLAT_MAX_EXP:.3g} for He; growing = b >= {GROW_MIN_EXP:.3g} for the "
                              f"non-lazy init; falling with width = log-log slope of He's final kappa with a 95% "
                              f"CI below 0; far larger = non-lazy final kappa >= {FAR_RATIO:g}x He's at every "
                              f"such width. Narrower widths are reported, not judged."}
    f = finals(df)
    if f.empty:
        return Claim("kappa", statement, False, {**ev, "reason": "no results"}, SOURCE + ", §5.2, Figs. 2-3")
    ep = df[(df["kind"] == "epoch") & (df["depth"] == 2)]
    f = f[f["depth"] == 2]
    n_train = int(f["n_train"].max()) if len(f) else 0
    ok = True

    def in_time(tr_all: pd.DataFrame, want: str) -> tuple[bool, dict]:
        res, judged, good = {}, 0, True
        for m, tr in tr_all.groupby("width"):
            g = growth_exponent(tr, int(tr["decay_start"].iloc[0]))
            b = g["exponent"]
            g["passed"] = b is not None and (b <= FLAT_MAX_EXP if want == "flat" else b >= GROW_MIN_EXP)
            g["judged"] = bool(m >= n_train)
            res[int(m)] = g
            if m >= n_train:
                judged += 1
                good &= g["passed"]
        return good and judged >= 3, res

    hes, smalls = series(f, "he"), series(f, "small")
    if not hes or not smalls:
        ok = False
        ev["reason"] = "needs init=he and init=small runs at depth 2"
    for label, he in hes:
        flat, res = in_time(ep[ep["point"].isin(he["point"])], "flat")
        ev[f"he{label}_in_time"] = {"passed": flat, "per_width": res}
        over = he[he["width"] >= n_train]
        fit = _pow_fit(over["width"], over["kappa"]) if over["width"].nunique() >= 3 else None
        falls = fit is not None and _below(fit["slope_ci"])
        ev[f"he{label}_vs_width"] = {
            "passed": falls, "fit": fit, "fit_all_widths": _pow_fit(he["width"], he["kappa"]),
            "mean": {int(m): _r(v) for m, v in he.groupby("width")["kappa"].mean().items()}}
        ok &= flat and falls
    for label, small in smalls:
        grows, res = in_time(ep[ep["point"].isin(small["point"])], "grow")
        ev[f"small{label}_in_time"] = {"passed": grows, "per_width": res}
        ok &= grows
        for lh, he in hes:
            kh, ks = he.groupby("width")["kappa"].mean(), small.groupby("width")["kappa"].mean()
            common = sorted(set(kh.index) & set(ks.index))
            ratios = {int(m): _r(ks[m] / kh[m]) for m in common}
            over = [int(m) for m in common if m >= n_train]
            far = len(over) >= 3 and all(ratios[m] >= FAR_RATIO for m in over)
            ev[f"small{label}_vs_he{lh}_far_larger"] = {"passed": far, "ratio": ratios}
            ok &= far
    ev["n_train"] = n_train
    return Claim("kappa", statement, bool(ok), ev, SOURCE + ", §5.2, Figs. 2-3")


def claim_mc(df: pd.DataFrame, ctx: Context | None = None) -> Claim:
    statement = ("The Monte Carlo estimate of E|<J, delta>|^2 agrees with the identity "
                 "eps^2 ||J||_F^2 / (d+2) (within 4 standard errors)")
    f = finals(df)
    if "mc_stability" not in f.columns or f["mc_stability"].isna().all():
        return Claim("mc-identity", statement, False, {"reason": "no grid point had a Monte Carlo estimate"},
                     SOURCE + ", Def. 1")
    m = f.dropna(subset=["mc_stability"])
    z = ((m["mc_stability"] - m["mc_exact"]) / m["mc_stderr"]).to_numpy(float)
    ev = {"point": {"init": str(m["init"].iloc[0]), "depth": int(m["depth"].iloc[0]),
                    "width": int(m["width"].iloc[0])},
          "per_seed": [{"seed": int(r.seed), "mc": _r(r.mc_stability), "stderr": _r(r.mc_stderr),
                        "exact": _r(r.mc_exact), "z": _r(zz, 3)} for r, zz in zip(m.itertuples(), z)],
          "draws": int(m["mc_samples"].iloc[0]), "points": int(m["mc_points"].iloc[0])}
    return Claim("mc-identity", statement, bool(np.all(np.abs(z) <= 4)), ev, SOURCE + ", Def. 1")


def claims(df: pd.DataFrame, ctx: Context) -> list[Claim]:
    return [claim_width(df, ctx), claim_depth(df, ctx), claim_nonlazy(df, ctx), claim_kappa(df, ctx),
            claim_mc(df, ctx)]


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
                  "initialisation (dotted) against depth, one line per width with the fullest depth sweep, log scale. Claim 2 expects LeCun to "
                  "fall and He/NTK to rise with depth. Bottom: the accuracies of the same networks.")


def _nonlazy_figure(v: pd.DataFrame, ctx: Context, protocol: str, suffix: str) -> Figure | None:
    two = v[(v["depth"] == 2) & v["init"].isin(["he", "small"])]
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
    ep = df[(df["kind"] == "epoch") & (df["depth"] == 2) & df["init"].isin(["he", "small"])]
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


def figures(df: pd.DataFrame, ctx: Context) -> list[Figure]:
    f = finals(df)
    if f.empty:
        return []
    out: list[Figure | None] = []
    for i, p in enumerate(protocols(f)):
        v, suffix = view(f, p), ("" if i == 0 else f"_{p}")
        out += [_width_figure(v, ctx, p, suffix), _depth_figure(v, ctx, p, suffix),
                _nonlazy_figure(v, ctx, p, suffix)]
    out.append(_kappa_figure(df, f, ctx))
    return [x for x in out if x is not None]


# ---------------------------------------------------------------------------------------
# presets

_POW2 = [2**i for i in range(11)]  # 1 … 1024

# quick: 200 training points (20 per digit) at 14x14, so that widths 1…1024 run from
# under-parameterised (m·(d+k) < N at m = 1) to 5x the training set.
QUICK_BASE = {"size": 14, "n_train": 200, "n_test": 500, "epochs": 50, "batch_size": 20, "decay_start": 40,
              "lr_step": 5, "mc_width": 128}
QUICK_GRID = (
    # width sweeps (claim 1), He and LeCun: depth 2 up to 5x the training set, depth 3 up to 2.5x
    {"init": ["he", "lecun"], "depth": [2], "width": _POW2},
    {"init": ["he", "lecun"], "depth": [3], "width": _POW2[:10]},
    # depth sweeps (claim 2); NTK's unit-variance output layer makes its updates larger: a
    # smaller rate lets it train as steadily as the others (it diverged at 0.1, depth 6)
    {"init": ["lecun", "he"], "depth": [2, 3, 4, 6], "width": [128]},
    {"init": ["ntk"], "depth": [2, 3, 4, 6], "width": [128], "lr": [0.03]},
    # the non-lazy two-layer network (claims 3, 4), at He's rate: it reaches the target loss
    # before the decay (at 0.3 it fits sooner, and its κ(t) then levels off like He's)
    {"init": ["small"], "depth": [2], "width": [16, 64, 256, 512, 1024]},
)

PAPER_BASE = {"n_train": 0, "n_test": 1000, "epochs": 50, "batch_size": 64, "decay_start": 30, "lr_step": 10,
              "mc_width": 1024, "mc_samples": 500, "target_loss": 0.05}
PAPER_GRID = (
    {"init": ["he", "lecun"], "depth": [2], "width": [2**i for i in range(15)]},
    {"init": ["he", "lecun"], "depth": [4, 6, 8], "width": [2**i for i in range(13)]},
    {"init": ["ntk"], "depth": [2, 4, 6, 8], "width": [2**i for i in range(4, 13)], "lr": [0.03]},
    {"init": ["small"], "depth": [2], "width": [2**i for i in range(4, 15)]},
)

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
        "quick": Preset(QUICK_BASE, QUICK_GRID, n_seeds=3,
                        description="mnist5k 14x14, 200 training points, widths 1-1024, depths 2-6, 50 epochs, "
                                    "3 seeds (~1.5 min on 2 cores)"),
        "paper": Preset(PAPER_BASE, PAPER_GRID, n_seeds=5,
                        description="mnist5k 28x28 (4000 training points), widths 1-16384, depths 2-8, 50 epochs "
                                    "with step decay, 5 seeds (hours; GPU advised)"),
    },
    run_points=run_points,
    claims=claims,
    figures=figures,
    ensemble=True,
)
