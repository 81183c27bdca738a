"""Small shared helpers: devices, generators, thread limits, the allocator."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

import torch

from .config import UserError

__all__ = ["resolve_device", "make_generator", "derive_seed", "matmul_rate", "retain_freed_memory",
           "release_freed_memory", "large_blocks_mapped"]


def resolve_device(name: str = "cpu") -> torch.device:
    """``cpu``, ``cuda`` (error if absent) or ``auto`` (CUDA when present)."""
    if name == "auto":
        return resolve_device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"device={name!r} is not allowed: CUDA is not available on this machine (use cpu or auto)")
        _full_float32_on_cuda()
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    raise UserError(f"device={name!r} is not allowed: one of cpu, cuda, auto")


def _full_float32_on_cuda() -> None:
    """Float32 products and convolutions in full float32 on the GPU, as on the CPU: cuDNN
    otherwise runs float32 convolutions in TF32 (a 10-bit mantissa) on Ampere and later, which
    moves results by ~1e-3 relative and breaks "same config, same numbers" across devices."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def derive_seed(seed: int, *salt: int | str) -> int:
    """A child seed from a parent seed and a salt (stable across runs and platforms)."""
    import hashlib

    blob = ":".join([str(seed), *map(str, salt)]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:7], "little")


def make_generator(seed: int, *salt: int | str, device: torch.device | str = "cpu") -> torch.Generator:
    """An explicit torch.Generator seeded from the config seed (and an optional salt)."""
    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(seed, *salt) if salt else seed)
    return g


def matmul_rate(n: int = 1024, threads: int | None = None, reps: int = 4,
                device: torch.device | str = "cpu") -> float:
    """The machine's dense float32 matmul rate in FLOP/s (``n × n`` by ``n × n``, best of three
    rounds of ``reps`` products). On the CPU with ``threads`` intra-op threads (default:
    torch's current setting); on a CUDA ``device`` timed between synchronisations, at torch's
    float32 matmul precision (full float32 unless the caller allowed TF32). The yardstick of
    training rates and of ``--dry-run``'s compute floor."""
    import time

    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    old = torch.get_num_threads()
    if threads is not None and dev.type == "cpu":
        torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        torch.mm(a, b)  # warm-up
        sync()
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                torch.mm(a, b)
            sync()
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2.0 * n**3 * reps / best


_RETAINED: list[bool] = []


def retain_freed_memory() -> bool:
    """Make glibc's malloc keep freed memory for reuse (once per process; True if it applied).

    glibc serves a request above its mmap threshold (adaptive, at most 32 MB) from a fresh
    mapping and unmaps it on free, and trims the heap top above 128 KB: each large tensor is
    then page-faulted in anew, page by page. An ensemble's tensors are E times a seed's and
    cross that line where a Python loop over seeds does not (feature-learning quick, E = 16:
    the (E·200, 48, 64) evaluation tensors are 39 MB), and on the 2-core VM a fault costs
    microseconds: one E = 8 study point took 6.4 s of CPU with ~900 000 faults, 4.1 s with
    this on (the loop over its seeds: 4.6 s either way). Here every request comes from the
    heap (``M_MMAP_MAX = 0``) and the heap is never trimmed, so the process keeps its peak
    footprint: the same peak while its passes reuse blocks of like sizes, a growing one where
    passes far larger than a step fragment the heap (wrap those in :func:`large_blocks_mapped`).
    Results are unchanged (no arithmetic is involved). A no-op off Linux/glibc.
    """
    if _RETAINED:
        return _RETAINED[0]
    ok = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6")
            M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # <malloc.h>
            ok = bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
        except (OSError, AttributeError):  # not glibc (musl has no mallopt)
            ok = False
    _RETAINED.append(ok)
    return ok


@contextlib.contextmanager
def large_blocks_mapped(threshold: int = 32 * 2**20) -> Iterator[None]:
    """Inside the block, serve requests above ``threshold`` bytes from their own mappings
    again (glibc's default way), in a process under :func:`retain_freed_memory`; on leaving,
    go back to retaining and give the freed pages back (:func:`release_freed_memory`).

    For passes far larger than a training step (a full-MNIST evaluation or Ilyas pass, 4,000
    images per seed a chunk). On the retained heap their blocks fragment it: each pass
    touches memory the last one freed but cannot reuse. A 5-seed full-MNIST worker grew by
    about a GB per evaluation to 16.5 GB (the kernel killed it when a second process needed
    memory); with 2 seeds and 10,000 test images, six rounds of an epoch and an evaluation
    peaked at 4.34 GB retained, 1.75 GB here. A mapped block is returned whole when freed,
    but faults in anew each step: those rounds took 24 s against 14 s. No arithmetic is
    involved: the numbers are the same. A no-op where retaining did not apply
    (``threshold`` at most 32 MB, glibc's cap)."""
    if not (_RETAINED and _RETAINED[0]):
        yield
        return
    libc = ctypes.CDLL("libc.so.6")
    M_MMAP_THRESHOLD, M_MMAP_MAX = -3, -4  # <malloc.h>
    libc.mallopt(M_MMAP_THRESHOLD, threshold)
    libc.mallopt(M_MMAP_MAX, 65536)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_MAX, 0)
        release_freed_memory()


def release_freed_memory() -> bool:
    """Give the freed pages of a process under :func:`retain_freed_memory` back to the system
    (glibc's ``malloc_trim(0)``; True if it ran). No arithmetic is involved. Not for every
    step or group: their pages would fault in again, which is what retaining saves; see
    :func:`large_blocks_mapped` for the passes that need it.
    """
    if not (_RETAINED and _RETAINED[0]):
        return False
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return False
    return True
