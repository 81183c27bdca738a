"""Supervised SGD for ensemble models, with the lazy-training ratio recorded every epoch.

One call trains ``E`` independent copies at once: the model maps ``(E, N, ...) -> (E, N, k)``,
every copy draws its own minibatch order from its own generator, and the loss is the *sum*
over copies of each copy's batch mean, so each copy receives exactly the gradient it would
get trained alone (width-depth-init, NeurIPS 2022, §5.1: SGD, cross-entropy, step decay of the learning rate).

Losses (``reduction="none"`` per sample, then a mean per copy):

* ``ce``  — softmax cross-entropy over ``k`` logits, integer labels ``0..k-1``;
* ``mse`` — ``½ (f(x) − y)²`` for a single output ``k = 1`` and labels ``±1`` (width-depth-init, NeurIPS 2022, Thm 3).

Probe, after every epoch and per copy ``e``, the lazy-training ratio (width-depth-init, NeurIPS 2022, §5.2)::

    κ_e(t) = ‖θ_e(t) − θ_e(0)‖₂ / ‖θ_e(0)‖₂            (whole network)
    κ_{e,l}(t) = ‖W_{e,l}(t) − W_{e,l}(0)‖_F / ‖W_{e,l}(0)‖_F   (layer l)

computed from the stacked ``(E, ...)`` parameters directly (one reduction per layer).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ConfigError

__all__ = ["SGDSpec", "TrainLog", "train_supervised", "resume_fits", "evaluate", "lazy_ratios", "member_loss"]

# ce: k logits, cross-entropy; mse: one output, ½ (f − y)² on ±1 labels; sq: k outputs, ½ Σ_j (f_j − 1[j = y])²
# on one-hot targets (the loss whose gradient flow on a linearised network reaches the min-norm least squares)
LOSSES = ("ce", "mse", "sq")


@dataclasses.dataclass(frozen=True)
class SGDSpec:
    """Minibatch SGD (heavy-ball momentum) with a step-decay schedule.

    The rate is ``lr`` until epoch ``decay_start`` (0-based; 0 = never decay), then it is
    multiplied by ``lr_gamma`` at ``decay_start`` and every ``lr_step`` epochs after it
    (``lr_step = 0``: a single decay).

    ``target_loss > 0`` and/or ``target_acc > 0`` report, per copy, the first epoch after which
    its training loss (a full pass) is ``<= target_loss`` and its training accuracy ``>=
    target_acc`` (every target set must be met) — the moment to compare copies at equal fit
    rather than equal time; ``stop_at_target`` also freezes a copy from then on. The full
    pass runs only once the running loss of the epoch (free to compute) is within 2× the loss
    target and its running accuracy within 0.1 of the accuracy target, for a copy still short.
    """

    epochs: int
    lr: float
    batch_size: int = 64
    momentum: float = 0.0
    decay_start: int = 0
    lr_step: int = 0
    lr_gamma: float = 0.1
    loss: str = "ce"
    target_loss: float = 0.0
    stop_at_target: bool = False
    target_acc: float = 0.0

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ConfigError("epochs", self.epochs, "a value >= 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ConfigError("lr", self.lr, "a finite value > 0")
        if self.batch_size < 1:
            raise ConfigError("batch_size", self.batch_size, "a value >= 1")
        if not 0 <= self.momentum < 1:
            raise ConfigError("momentum", self.momentum, "a value >= 0 and < 1")
        if self.decay_start < 0:
            raise ConfigError("decay_start", self.decay_start, "a value >= 0")
        if self.lr_step < 0:
            raise ConfigError("lr_step", self.lr_step, "a value >= 0")
        if not 0 < self.lr_gamma <= 1:
            raise ConfigError("lr_gamma", self.lr_gamma, "a value > 0 and <= 1")
        if self.loss not in LOSSES:
            raise ConfigError("loss", self.loss, "one of " + ", ".join(LOSSES))
        if not (self.target_loss >= 0 and math.isfinite(self.target_loss)):
            raise ConfigError("target_loss", self.target_loss, "a finite value >= 0 (0: none)")
        if not (0 <= self.target_acc <= 1):
            raise ConfigError("target_acc", self.target_acc, "a value in [0, 1] (0: none)")
        if self.stop_at_target and not self.has_target:
            raise ConfigError("stop_at_target", True, "false unless target_loss > 0 or target_acc > 0")

    @property
    def has_target(self) -> bool:
        return self.target_loss > 0 or self.target_acc > 0

    def near_target(self, run_loss: torch.Tensor, run_acc: torch.Tensor) -> torch.Tensor:
        """Copies whose running loss/accuracy of the epoch say a full pass may meet the targets."""
        near = torch.ones(run_loss.shape, dtype=torch.bool)
        if self.target_loss > 0:
            near &= run_loss <= 2 * self.target_loss
        if self.target_acc > 0:
            near &= run_acc >= self.target_acc - 0.1
        return near

    def at_target(self, loss: torch.Tensor, acc: torch.Tensor) -> torch.Tensor:
        """Copies whose full-pass loss and accuracy meet every target set."""
        ok = torch.ones(loss.shape, dtype=torch.bool)
        if self.target_loss > 0:
            ok &= loss <= self.target_loss
        if self.target_acc > 0:
            ok &= acc >= self.target_acc
        return ok

    def lr_at(self, epoch: int) -> float:
        """The rate used during epoch ``epoch`` (0-based)."""
        if not self.decay_start or epoch < self.decay_start:
            return self.lr
        n = 1 + ((epoch - self.decay_start) // self.lr_step if self.lr_step else 0)
        return self.lr * self.lr_gamma**n


@dataclasses.dataclass
class TrainLog:
    """Per-epoch traces, each with a leading copy dimension ``E``.

    ``loss``/``acc`` are running averages over the epoch's minibatches (before each update);
    ``kappa`` is ``κ(t)`` at the end of epoch ``t`` and ``kappa_layers`` its per-layer split;
    ``stopped`` is the number of epochs a copy trained (``epochs`` unless stopped at the
    target); ``reached`` the first epoch whose full pass met the targets (0: never).
    """

    loss: torch.Tensor  # (E, T)
    acc: torch.Tensor  # (E, T)
    kappa: torch.Tensor  # (E, T)
    kappa_layers: torch.Tensor  # (E, T, L)
    lr: list[float]  # (T,)
    steps: int
    finite: torch.Tensor  # (E,) bool: the copy's loss stayed finite throughout
    stopped: torch.Tensor  # (E,) int
    reached: torch.Tensor  # (E,) int


def member_loss(out: torch.Tensor, y: torch.Tensor, loss: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample loss and correctness, both ``(E, N)``, of outputs ``(E, N, k)``."""
    E, N, k = out.shape
    if loss == "ce":
        per = F.cross_entropy(out.reshape(E * N, k), y.reshape(E * N), reduction="none").reshape(E, N)
        correct = out.argmax(-1) == y
    elif loss == "mse":
        if k != 1:
            raise ValueError(f"the squared loss needs a single output, got k={k}")
        f = out[..., 0]
        per = 0.5 * (f - y) ** 2
        correct = torch.sign(f) == y
    elif loss == "sq":
        per = 0.5 * (out - F.one_hot(y, k).to(out.dtype)).pow(2).sum(-1)
        correct = out.argmax(-1) == y
    else:
        raise ConfigError("loss", loss, "one of " + ", ".join(LOSSES))
    return per, correct


def lazy_ratios(params: Sequence[torch.Tensor], init: Sequence[torch.Tensor],
                base2: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``κ`` per copy ``(E,)`` and per copy and layer ``(E, L)`` from stacked parameters.

    ``base2``: the squared initial norms ``(E, L)`` if already known (a training loop computes
    them once instead of re-reading every initial weight each epoch)."""
    # the square in place in the difference's memory (the bits of (p - p0).pow(2))
    diff2 = torch.stack([torch.sub(p, p0).pow_(2).flatten(1).sum(1) for p, p0 in zip(params, init)], 1)  # (E, L)
    if base2 is None:
        base2 = init_norms2(init)
    whole = diff2.sum(1).sqrt() / base2.sum(1).sqrt()
    return whole, diff2.sqrt() / base2.sqrt()


def init_norms2(init: Sequence[torch.Tensor]) -> torch.Tensor:
    """Squared norm of every copy's layer, ``(E, L)``: the denominators of :func:`lazy_ratios`."""
    return torch.stack([p0.flatten(1).pow(2).sum(1) for p0 in init], 1)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, loss: str, *, E: int,
             batch: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean loss and accuracy per copy ``(E,)`` on shared data ``x: (N, ...)``, ``y: (N,)``."""
    was = model.training
    model.eval()
    tot_loss = torch.zeros(E, dtype=torch.float64, device=x.device)
    tot_acc = torch.zeros(E, dtype=torch.float64, device=x.device)
    for i in range(0, len(x), batch):
        xb = x[i:i + batch]
        out = model(xb.unsqueeze(0).expand(E, *xb.shape))
        per, correct = member_loss(out, y[i:i + batch].unsqueeze(0).expand(E, -1), loss)
        tot_loss += per.double().sum(1)
        tot_acc += correct.double().sum(1)
    model.train(was)
    return (tot_loss / len(x)).to(x.dtype), (tot_acc / len(x)).to(x.dtype)


def _closed_form_mlp(model: nn.Module, params: Sequence[torch.Tensor]) -> bool:
    """Whether ``model`` is a plain :class:`DeepMLP` whose weights are exactly ``params``."""
    from ..models.deep import DeepMLP

    return (type(model) is DeepMLP and len(params) == len(model.weights)
            and all(p is W for p, W in zip(params, model.weights)))


@torch.no_grad()
def _mlp_step(weights: Sequence[torch.Tensor], bufs: Sequence[torch.Tensor] | None,
              masks: Sequence[torch.Tensor] | None, xb: torch.Tensor, yb: torch.Tensor,
              spec: SGDSpec, lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One SGD step of a :class:`DeepMLP` ensemble without autograd; per-sample loss and
    correctness ``(E, b)`` of the batch before the step.

    Forward ``h_l = ReLU(h_{l-1} W_l)`` keeping each ``h_l``; the output gradient of the
    per-copy batch mean is ``(softmax − onehot)/b`` (ce), ``(f − y)/b`` (mse) or ``(f − onehot)/b`` (sq); backward
    ``δ_{l-1} = (δ_l W_lᵀ) ⊙ 1[h_{l-1} > 0]`` (taken before ``W_l`` moves). The weight
    gradient ``h_{l-1}ᵀ δ_l`` is never stored: with momentum the product accumulates straight
    into the buffer (``b ← μ b + hᵀδ``, one ``baddbmm``), without it straight into the weight
    (``W ← W − lr hᵀδ``). That saves a write and a read of every weight per step, which is
    what bounds a step at batch sizes of tens (the products have an inner dimension of b).
    """
    hs = [xb]
    h = xb
    for W in weights[:-1]:
        h = torch.bmm(h, W).relu_()  # (E, b, m)
        hs.append(h)
    out = torch.bmm(h, weights[-1])  # (E, b, k)
    per, correct = member_loss(out, yb, spec.loss)
    b = out.shape[1]
    if spec.loss == "ce":
        delta = torch.softmax(out, -1)
        delta.scatter_add_(-1, yb.unsqueeze(-1), torch.full_like(delta[..., :1], -1.0))
    elif spec.loss == "sq":  # f − onehot
        delta = out.clone()
        delta.scatter_add_(-1, yb.unsqueeze(-1), torch.full_like(delta[..., :1], -1.0))
    else:  # mse, k = 1
        delta = out - yb.unsqueeze(-1).to(out.dtype)
    delta.div_(b)
    for l in range(len(weights) - 1, -1, -1):
        W, a = weights[l], hs[l]
        back = torch.bmm(delta, W.mT).mul_(a > 0) if l > 0 else None  # δ_{l-1}, with the old W
        if bufs is not None:
            bufs[l].baddbmm_(a.mT, delta, beta=spec.momentum)
            if masks is None:
                W.add_(bufs[l], alpha=-lr)
            else:
                W.addcmul_(bufs[l], masks[l], value=-lr)
        else:
            W.baddbmm_(a.mT, delta if masks is None else delta * masks[l], alpha=-lr)
        delta = back
    return per, correct


def train_supervised(model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: SGDSpec, *,
                     generators: Sequence[torch.Generator],
                     on_target: Callable[[torch.Tensor, int], None] | None = None,
                     on_epoch: Callable[[int], None] | None = None,
                     on_step: Callable[[int], None] | None = None,
                     backprop: str = "auto", compact: bool = True,
                     on_checkpoint: Callable[[Callable[[], dict]], None] | None = None,
                     resume: dict | None = None) -> TrainLog:
    """Train the ``E = len(generators)`` copies of ``model`` in place; return the traces.

    ``x``: shared training inputs ``(N, ...)``; ``y``: labels ``(N,)`` (int64 for ``ce`` and ``sq``,
    ±1 floats for ``mse``). Copy ``e`` visits the data in the order drawn from
    ``generators[e]`` (CPU generators: the same bits on every device). Parameters must all
    carry the leading ``E`` (as :class:`~robustlab.models.DeepMLP`). The update is
    ``b ← μ b + g``, ``θ ← θ − lr · active_e · b`` (PyTorch's SGD without dampening), with
    ``active_e = 0`` once copy ``e`` reached the target with ``stop_at_target``.
    ``on_target(newly, epoch)`` is called, with the model as it stands, after every epoch at
    which some copies (the ``(E,)`` bool mask ``newly``) first meet the targets (``SGDSpec``);
    ``on_epoch(epoch)`` after every epoch (1-based), before any target bookkeeping.
    ``on_step(step)`` after every SGD step (1-based, counted over the whole run), with the model
    as it stands, while every copy still trains in the model's own tensors (no copy stopped at
    the target yet; afterwards it is not called): Thm 3's early window, a few steps in.

    ``backprop="auto"`` trains a :class:`~robustlab.models.DeepMLP` (every weight trainable)
    with its closed-form backward pass and the momentum update fused into the weight-gradient
    product (:func:`_mlp_step`); other models, or ``backprop="autograd"``, use autograd. Both
    give the same update up to float rounding (tested in float64).

    ``compact`` (closed-form path): copies stopped at the target leave the batch — the
    copies still training are gathered into their own smaller stack, draw their minibatch
    orders from their own generators as before, and are written back to the model after every
    epoch (before ``on_epoch`` and the target check) — so a stopped copy costs nothing more.
    Their minibatches and steps are the same as in the masked run, and so are their numbers
    up to rounding (a batched product over fewer copies may sum in another order: ULPs); a
    stopped copy's later ``loss``/``acc`` entries hold its full-pass loss and accuracy at the
    stop (what its running average would repeat, up to summation order). ``compact=False`` keeps stopped copies in the batch with a masked update
    (the autograd path always does): the reference the tests and the benchmark compare with.

    ``on_checkpoint(state)``, if given, is called at the end of every epoch but the last, after
    the target bookkeeping; ``state()`` returns the training state at that epoch boundary
    (weights, momentum buffers, each generator's state, the traces so far; tensors on the
    CPU, sharing memory with the training's own on a CPU run), for the caller to save at once
    when it likes (:mod:`robustlab.sweep.checkpoint`).
    ``resume``: such a state, with ``model`` as built (its initial weights, from which the
    lazy ratio counts) and ``generators`` as created: training goes on from that epoch and
    returns what an uninterrupted call returns, bit for bit (tested). The dict is emptied once
    its values are copied into place. A state that does not fit the model and schedule raises
    :class:`ValueError` before anything changes.
    """
    loop = _Loop.start(model, spec, generators, backprop, compact)
    if resume is not None:  # go on from an earlier call's state at the end of an epoch
        loop.resume(resume, model, spec)
    model.train()
    for t in range(loop.start_epoch, spec.epochs):
        run_loss, run_acc = _run_epoch(loop, model, x, y, spec, t, on_step)
        _record_epoch(loop, t, run_loss, run_acc, len(x))
        if on_epoch is not None:
            on_epoch(t + 1)
        if not loop.traces["finite"].any():  # every copy diverged: nothing left to learn
            break
        if spec.has_target and _check_target(loop, model, x, y, spec, t, on_target):
            break  # every copy stopped at the target
        if on_checkpoint is not None and t + 1 < spec.epochs:
            on_checkpoint(lambda epoch=t + 1: loop.state(epoch))
    tr = loop.traces
    return TrainLog(tr["loss"], tr["acc"], tr["kappa"], tr["kappa_layers"], loop.lrs, loop.steps, tr["finite"],
                    tr["stopped"], tr["reached"])


@dataclasses.dataclass
class _Loop:
    """The state of one :func:`train_supervised` call: the parameters and their initial values,
    momentum buffers, which copies still train, the traces, and (compacted training) the stacks
    of the copies still training (``sel`` their indices, ``work``/``wbufs`` their weights and
    buffers; ``sel`` None: all copies, ``work`` is ``params``)."""

    params: list[torch.Tensor]
    init: list[torch.Tensor]
    base2: torch.Tensor
    bufs: list[torch.Tensor] | None
    active: torch.Tensor
    masks: list[torch.Tensor]
    traces: dict[str, torch.Tensor]
    generators: Sequence[torch.Generator]
    closed: bool
    compact: bool
    lrs: list[float] = dataclasses.field(default_factory=list)
    steps: int = 0
    frozen_any: bool = False
    sel: list[int] | None = None
    work: list[torch.Tensor] = dataclasses.field(default_factory=list)
    wbufs: list[torch.Tensor] | None = None
    start_epoch: int = 0

    @classmethod
    def start(cls, model: nn.Module, spec: SGDSpec, generators: Sequence[torch.Generator], backprop: str,
              compact: bool) -> _Loop:
        E = len(generators)
        params = [p for p in model.parameters() if p.requires_grad]
        if not params or any(p.shape[0] != E for p in params):
            raise ValueError(f"every trainable parameter needs a leading ensemble dimension E={E}")
        if backprop not in ("auto", "autograd"):
            raise ValueError(f"backprop={backprop!r}: one of auto, autograd")
        dev = params[0].device
        init = [p.detach().clone() for p in params]
        bufs = [torch.zeros_like(p) for p in params] if spec.momentum else None
        active = torch.ones(E, dtype=params[0].dtype, device=dev)
        masks = [active.view(E, *([1] * (p.ndim - 1))) for p in params]  # views: follow `active`
        T, L = spec.epochs, len(params)
        nan = torch.full((E,), float("nan"), dtype=torch.float64)
        traces = {"loss": torch.full((E, T), float("nan"), dtype=torch.float64),
                  "acc": torch.full((E, T), float("nan"), dtype=torch.float64),
                  "kappa": torch.zeros(E, T, dtype=torch.float64),
                  "kappa_layers": torch.zeros(E, T, L, dtype=torch.float64),
                  "finite": torch.ones(E, dtype=torch.bool), "stopped": torch.full((E,), T, dtype=torch.int64),
                  "reached": torch.zeros(E, dtype=torch.int64),
                  "frozen_loss": nan, "frozen_acc": nan.clone()}  # a full pass at the stop
        closed = backprop == "auto" and _closed_form_mlp(model, params)
        return cls(params, init, init_norms2(init), bufs, active, masks, traces, generators, closed,
                   compact and closed, work=params, wbufs=bufs)

    def state(self, epoch: int) -> dict:
        """The training state at the end of ``epoch`` (1-based): what ``resume`` takes."""
        return {"epoch": epoch, "params": [p.detach().cpu() for p in self.params],
                "bufs": None if self.wbufs is None else [b.detach().cpu() for b in self.wbufs], "sel": self.sel,
                "active": self.active.cpu(), "generators": [g.get_state() for g in self.generators],
                "lrs": list(self.lrs), "steps": self.steps, "frozen_any": self.frozen_any,
                **{k: v.clone() for k, v in self.traces.items()}}

    def resume(self, resume: dict, model: nn.Module, spec: SGDSpec) -> None:
        E = len(self.generators)
        if not resume_fits(resume, model, spec, E):
            raise ValueError(f"the training state to resume does not fit this model and schedule "
                             f"(E={E}, epochs={spec.epochs})")
        (self.start_epoch, self.lrs, self.steps, self.frozen_any, self.sel,
         saved_bufs) = _restore(resume, self.params, self.bufs, self.active, self.traces, self.generators)
        if self.sel is not None:  # the copies still training, in their own stacks (as compaction left them)
            self.work = [p.detach()[self.sel] for p in self.params]
            dev = self.params[0].device
            self.wbufs = None if saved_bufs is None else [b.to(dev) for b in saved_bufs]


def _run_epoch(loop: _Loop, model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: SGDSpec,
               t: int, on_step: Callable[[int], None] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass over the data in minibatches (each copy in its own order); the summed loss and
    correct counts of the copies that trained, before each update."""
    lr = spec.lr_at(t)
    loop.lrs.append(lr)
    N, B = len(x), min(spec.batch_size, len(x))
    gens = loop.generators if loop.sel is None else [loop.generators[e] for e in loop.sel]
    perm = torch.stack([torch.randperm(N, generator=g) for g in gens]).to(x.device)  # (E', N)
    run_loss = torch.zeros(len(gens), dtype=torch.float64, device=x.device)
    run_acc = torch.zeros(len(gens), dtype=torch.float64, device=x.device)
    params, bufs = loop.params, loop.bufs
    for i in range(0, N, B):
        idx = perm[:, i:i + B]  # (E', b): each copy its own minibatch
        if loop.closed:
            per, correct = _mlp_step(loop.work, loop.wbufs,
                                     loop.masks if loop.frozen_any and not loop.compact else None,
                                     x[idx], y[idx], spec, lr)
        else:
            out = model(x[idx])  # (E, b, k)
            per, correct = member_loss(out, y[idx], spec.loss)
            # copies are independent: the gradient of the sum splits into each copy's own
            grads = torch.autograd.grad(per.mean(1).sum(), params)
            with torch.no_grad():
                steps_ = grads
                if bufs is not None:
                    torch._foreach_mul_(bufs, spec.momentum)
                    torch._foreach_add_(bufs, grads)
                    steps_ = bufs
                if loop.frozen_any:  # some copies stopped at the target: mask their update
                    steps_ = [g * mk for g, mk in zip(steps_, loop.masks)]
                torch._foreach_add_(params, steps_, alpha=-lr)
        loop.steps += 1
        if on_step is not None and loop.sel is None and not loop.frozen_any:
            on_step(loop.steps)
        run_loss += per.detach().double().sum(1)
        run_acc += correct.double().sum(1)
    return run_loss, run_acc


def _record_epoch(loop: _Loop, t: int, run_loss: torch.Tensor, run_acc: torch.Tensor, N: int) -> None:
    """Write epoch ``t``'s running loss and accuracy and the lazy ratios into the traces (a
    compacted run first writes the copies still training back into the model)."""
    tr = loop.traces
    if loop.sel is None:
        tr["loss"][:, t] = (run_loss / N).cpu()
        tr["acc"][:, t] = (run_acc / N).cpu()
    else:  # the stopped copies repeat their full pass at the stop
        with torch.no_grad():
            for p, w in zip(loop.params, loop.work):
                p[loop.sel] = w
        tr["loss"][:, t], tr["acc"][:, t] = tr["frozen_loss"], tr["frozen_acc"]
        tr["loss"][loop.sel, t] = (run_loss / N).cpu()
        tr["acc"][loop.sel, t] = (run_acc / N).cpu()
    tr["finite"] &= torch.isfinite(tr["loss"][:, t])
    with torch.no_grad():
        whole, layers = lazy_ratios(loop.params, loop.init, loop.base2)
    tr["kappa"][:, t], tr["kappa_layers"][:, t] = whole.double().cpu(), layers.double().cpu()


def _check_target(loop: _Loop, model: nn.Module, x: torch.Tensor, y: torch.Tensor, spec: SGDSpec, t: int,
                  on_target: Callable[[torch.Tensor, int], None] | None) -> bool:
    """Mark the copies that first meet the targets after epoch ``t`` (a full pass, run only for
    the copies near them), call ``on_target`` and, with ``stop_at_target``, freeze them (and
    compact the batch). True when no copy is left training."""
    tr = loop.traces
    E = len(loop.generators)
    near = spec.near_target(tr["loss"][:, t], tr["acc"][:, t]) & (tr["reached"] == 0)
    newly = torch.zeros(E, dtype=torch.bool)
    if near.any():
        full, full_acc = evaluate(model, x, y, spec.loss, E=E)
        newly = near & spec.at_target(full.cpu(), full_acc.cpu())
    if not newly.any():
        return False
    tr["reached"][newly] = t + 1
    if on_target is not None:
        on_target(newly, t + 1)
    if not spec.stop_at_target:
        return False
    tr["stopped"][newly] = t + 1
    loop.active[newly.to(loop.active.device)] = 0.0
    loop.frozen_any = True
    if not loop.active.any():
        tr["kappa"][:, t + 1:] = tr["kappa"][:, t:t + 1]
        tr["kappa_layers"][:, t + 1:] = tr["kappa_layers"][:, t:t + 1]
        return True
    if loop.compact:  # drop the stopped copies from the batch (the model is current)
        tr["frozen_loss"][newly] = full.double().cpu()[newly]
        tr["frozen_acc"][newly] = full_acc.double().cpu()[newly]
        new = loop.active.nonzero().flatten().tolist()
        pos = new if loop.sel is None else [loop.sel.index(e) for e in new]  # rows of `work`
        loop.work = [w.detach()[pos] for w in loop.work]  # fancy indexing: copies
        loop.wbufs = None if loop.wbufs is None else [b[pos] for b in loop.wbufs]
        loop.sel = new
    return False


def _restore(resume: dict, params: Sequence[torch.Tensor], bufs: Sequence[torch.Tensor] | None,
             active: torch.Tensor, traces: dict[str, torch.Tensor], generators: Sequence[torch.Generator]
             ) -> tuple[int, list[float], int, bool, list[int] | None, list[torch.Tensor] | None]:
    """Copy a checked ``resume`` state into the training's own tensors and generators, and
    empty the dict: its tensors may map a checkpoint file of gigabytes, and the call's
    arguments stay referenced until ``train_supervised`` returns, so only emptying it (and
    keeping no tensor of it in a local name) lets that mapping, and a replaced file's disk
    space, go. Returns the epoch, the lrs, the steps, whether copies froze, the copies still
    training (None: all) and, when those are a subset, copies of their momentum buffers."""
    with torch.no_grad():
        for p, v in zip(params, resume["params"]):
            p.copy_(v)
        active.copy_(resume["active"])
        for k, mine in traces.items():
            mine.copy_(resume[k])
        for g, st in zip(generators, resume["generators"]):
            g.set_state(st)
        sel, saved_bufs = resume["sel"], None
        if resume["bufs"] is not None:
            if sel is None:
                for b, v in zip(bufs, resume["bufs"]):
                    b.copy_(v)
            else:
                saved_bufs = [v.clone() for v in resume["bufs"]]
    out = resume["epoch"], list(resume["lrs"]), resume["steps"], resume["frozen_any"], sel, saved_bufs
    resume.clear()
    return out


def resume_fits(resume: dict, model: nn.Module, spec: SGDSpec, E: int) -> bool:
    """Whether ``resume`` is a training state (``train_supervised``'s ``on_checkpoint``) of
    ``E`` copies of this model under this schedule: its epochs, shapes and fields."""
    params = [p for p in model.parameters() if p.requires_grad]
    T, L = spec.epochs, len(params)
    want = {"loss": ((E, T), torch.float64), "acc": ((E, T), torch.float64), "kappa": ((E, T), torch.float64),
            "kappa_layers": ((E, T, L), torch.float64), "finite": ((E,), torch.bool),
            "stopped": ((E,), torch.int64), "reached": ((E,), torch.int64),
            "frozen_loss": ((E,), torch.float64), "frozen_acc": ((E,), torch.float64)}
    try:
        sel = resume["sel"]
        rows = E if sel is None else len(sel)
        if not (isinstance(resume["epoch"], int) and 0 < resume["epoch"] < T and len(resume["generators"]) == E
                and len(resume["lrs"]) == resume["epoch"] and resume["active"].shape == (E,)):
            return False
        if len(resume["params"]) != L or any(v.shape != p.shape for v, p in zip(resume["params"], params)):
            return False
        bufs = resume["bufs"]
        if (bufs is None) != (not spec.momentum) or (bufs is not None and (
                len(bufs) != L or any(v.shape != (rows, *p.shape[1:]) for v, p in zip(bufs, params)))):
            return False
        return all(tuple(resume[k].shape) == shape and resume[k].dtype == dtype for k, (shape, dtype) in want.items())
    except (KeyError, TypeError, AttributeError):
        return False
