"""End to end (slow): the quick presets run the lazy-training claims on the embedded MNIST:
every self-check holds, every claim carries its control and exclusion counts.

Each run takes about a minute on one CPU core (12 and 8 seeds, chosen by a power estimate).
"""

from __future__ import annotations

import json

import pytest

from robustlab.cli import main
from robustlab.studies.base import load

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("study, n_claims", [("lazy-attack", 11), ("lazy-adversarial", 4)])
def test_quick_preset_runs_the_claims(tmp_path, study, n_claims):
    out = tmp_path / study
    assert main(["run", study, "--out", str(out), "--quiet"]) == 0
    claims = json.loads((out / "claims.json").read_text())
    assert len(claims) == n_claims, claims
    assert all(c["verdict"] == "reproduced" for c in claims if c["kind"] == "self-check")
    assert all(c["control"] is not None and "excluded" in c for c in claims if c["kind"] == "claim")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sweep"]["failed_now"] == 0
    df = load(out)
    assert (df["offset_ratio"] <= 1 + 1e-4).all()  # every network stayed in its ball


def test_quick_lazy_attack_is_reproducible_bit_for_bit(tmp_path):
    """Same config, same bits: two runs of a small grid give identical rows."""
    args = ["--quiet", "--seeds", "2", "--set", "dataset=digits", "--set", "epochs=5",
            "--set", "lr=1.0", "--grid", "size=5,8", "--grid", "m=32"]
    assert main(["run", "lazy-attack", "--out", str(tmp_path / "a"), *args]) == 0
    assert main(["run", "lazy-attack", "--out", str(tmp_path / "b"), *args]) == 0
    a = (tmp_path / "a" / "results.jsonl").read_text()
    b = (tmp_path / "b" / "results.jsonl").read_text()
    assert a == b
