"""Small shared helpers: devices, generators, thread limits."""

from __future__ import annotations

import torch

from .config import UserError

__all__ = ["resolve_device", "make_generator", "derive_seed", "matmul_rate"]


def resolve_device(name: str = "cpu") -> torch.device:
    """``cpu``, ``cuda`` (error if absent) or ``auto`` (CUDA when present)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UserError(f"device={name!r} is not allowed: CUDA is not available on this machine (use cpu or auto)")
        return torch.device(name)
    if name == "cpu":
        return torch.device("cpu")
    raise UserError(f"device={name!r} is not allowed: one of cpu, cuda, auto")


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


def matmul_rate(n: int = 1024, threads: int | None = None, reps: int = 4) -> float:
    """The machine's dense float32 matmul rate in FLOP/s (``n × n`` by ``n × n`` on the CPU,
    best of three rounds of ``reps`` products, ``threads`` intra-op threads; default: torch's
    current setting). The yardstick of training rates and of ``--dry-run``'s compute floor."""
    import time

    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)  # warm-up
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                torch.mm(a, b)
            best = min(best, time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    return 2.0 * n**3 * reps / best
