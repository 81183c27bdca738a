"""The lazy-attack paper presets' structure (issue #53): the per-block seed counts of the
power-sized ``paper`` preset and the large-d grid of ``paper-large-d``, pinned so a change is
a deliberate one (the reasons are in the comments of studies/lazy/attack.py)."""

from __future__ import annotations

import collections

from robustlab.studies.base import plan
from robustlab.studies.lazy.attack import STUDY
from robustlab.studies.lazy.common import NON_LAZY_C0, RICH_INIT_SCALE


def _seeds_per_cell(preset: str) -> dict[tuple, int]:
    p = plan(STUDY, preset=preset)
    assert len(set(p.points)) == len(p.points)  # no point twice across blocks
    cells = collections.Counter((c.C0, c.m, c.sphere, c.init_scale, c.d) for c in p.points)
    return dict(cells)


def test_paper_preset_seeds_per_block_follow_the_power_estimate():
    cells = _seeds_per_cell("paper")
    by_block = collections.defaultdict(set)
    for (C0, m, sphere, init, d), n in cells.items():
        by_block[(C0, m, sphere, init)].add(n)
        assert d in {25, 49, 100, 196, 400, 784}
    assert {k: sorted(v) for k, v in by_block.items()} == {
        (5.0, 1024, True, 1.0): [160],        # lazy-generalise at C0 = 5 (power 0.8)
        (10.0, 1024, True, 1.0): [30],        # c0-more-robust (power ~0.9)
        (20.0, 1024, True, 1.0): [30],
        (10.0, 256, True, 1.0): [10],         # delta-scaling at the other widths (power 0.9)
        (10.0, 4096, True, 1.0): [10],
        (10.0, 256, False, 1.0): [5],         # raw pixels: the authors' 5 (no slice)
        (10.0, 1024, False, 1.0): [5],
        (10.0, 4096, False, 1.0): [5],
        (NON_LAZY_C0, 256, True, RICH_INIT_SCALE): [30],
        (NON_LAZY_C0, 256, False, RICH_INIT_SCALE): [5],
    }
    assert not any(C0 == 40.0 for (C0, *_rest) in cells)  # never lazy within 1000 epochs: dropped
    assert sum(cells.values()) == 1740


def test_paper_large_d_reaches_d_far_above_c0_squared_at_one_width():
    p = plan(STUDY, preset="paper-large-d")
    assert len(p.points) == 75  # 5 d × (2 lazy C0 + the rich control) × 5 seeds
    assert {c.dataset for c in p.points} == {"sphere"} and {c.m for c in p.points} == {4096}
    assert all(c.m >= c.d and c.dim == c.d for c in p.points)
    for C0 in (10.0, 20.0, NON_LAZY_C0):
        ds = sorted({c.d for c in p.points if c.C0 == C0})
        assert ds == [1024, 1448, 2048, 2896, 4096]  # >= 4 qualifying d per C0, all >= 2.5·20²
        assert {c.seed for c in p.points if c.C0 == C0} == set(range(5))
    rich = [c for c in p.points if c.C0 == NON_LAZY_C0]
    assert {c.init_scale for c in rich} == {RICH_INIT_SCALE} and {c.epochs for c in rich} == {250}
