"""The three papers robustlab reproduces, by a short name used everywhere the code cites them.

The full texts are in ``../shared/seeds/`` (file names ``000_…``, ``001_…``, ``002_…``); code,
reports and docs call them by these names, never by the seed file's number, which would read
like a random seed.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Paper", "FEATURE_LEARNING", "LAZY_TRAINING", "WIDTH_DEPTH_INIT", "PAPERS"]


@dataclasses.dataclass(frozen=True)
class Paper:
    short: str  # what a sentence calls it: "feature learning, ICLR 2025"
    title: str
    venue: str
    seed_file: str  # the file in ../shared/seeds/ holding its text

    def cite(self, where: str = "") -> str:
        """``feature learning, ICLR 2025, Thm 4.4`` (the short name, then a place in it)."""
        return f"{self.short}, {where}" if where else self.short


FEATURE_LEARNING = Paper(
    "feature learning, ICLR 2025",
    "Adversarial training can provably improve robustness: theoretical analysis of feature "
    "learning process under structured data",
    "ICLR 2025 (OpenReview page: abstract, reviews and rebuttal)", "000")
LAZY_TRAINING = Paper(
    "lazy training, NeurIPS 2022", "Adversarial robustness is at odds with lazy training",
    "NeurIPS 2022", "001")
WIDTH_DEPTH_INIT = Paper(
    "width-depth-init, NeurIPS 2022",
    "Robustness in deep learning: the good (width), the bad (depth), and the ugly (initialization)",
    "NeurIPS 2022", "002")

PAPERS = {"feature-learning": FEATURE_LEARNING, "lazy-training": LAZY_TRAINING,
          "width-depth-init": WIDTH_DEPTH_INIT}
