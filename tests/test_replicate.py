"""`robustlab reproduce --replicate K`: every study at K base seeds, and whether each verdict agrees."""

from __future__ import annotations

import json

import pytest

from robustlab.config import UserError
from robustlab.studies import replicate as rep


def _write(run, study, claims):
    (run / study).mkdir(parents=True)
    (run / study / "claims.json").write_text(json.dumps(claims))


def test_base_seeds_are_17_apart_and_a_bad_count_is_refused():
    assert rep.base_seeds(None, 2) == [0, 17]
    assert rep.base_seeds(5, 3) == [5, 22, 39]
    with pytest.raises(UserError, match="--replicate 0 is not allowed"):
        rep.base_seeds(None, 0)


def test_a_claim_whose_verdict_changes_with_the_base_seed_is_marked_unstable(tmp_path):
    a = [{"id": "x", "kind": "claim", "verdict": "reproduced", "effect": 0.5},
         {"id": "y", "kind": "claim", "verdict": "inconclusive", "effect": 0.1},
         {"id": "e", "kind": "exploratory", "verdict": "reproduced"}]
    b = [{"id": "x", "kind": "claim", "verdict": "reproduced", "effect": 0.6},
         {"id": "y", "kind": "claim", "verdict": "reproduced", "effect": 0.3},
         {"id": "e", "kind": "exploratory", "verdict": "contradicted"}]
    _write(tmp_path / "seed-0", "s", a)
    _write(tmp_path / "seed-17", "s", b)
    st = rep.stability(tmp_path, [0, 17])
    assert st["claims"] == 2 and st["unstable_claims"] == ["s/y"] and st["unstable_other"] == ["s/e"]
    lines = rep.console_lines(st)
    assert lines[0] == ("stability over base seeds 0, 17: 2 claims, 1 unstable; "
                        "1 exploratory or self-check readings unstable")
    assert "unstable: s y (claim): seed 0: inconclusive, seed 17: reproduced" in lines[1]
    page = rep.write_report(tmp_path, st).read_text()
    assert page.count(">unstable<") == 2 and "seed-17/report.html" in page


def test_reproduce_replicate_runs_each_base_seed_and_writes_the_stability_table(tmp_path, capsys):
    from robustlab.cli import main

    out = tmp_path / "rep"
    assert main(["reproduce", "--only", "smoke", "--preset", "quick", "--replicate", "2", "--out", str(out),
                 "--workers", "1", "--quiet"]) == 0
    st = json.loads((out / "stability.json").read_text())
    assert st["seeds"] == [0, 17]
    assert (out / "seed-0" / "smoke" / "claims.json").is_file()
    assert (out / "seed-17" / "smoke" / "claims.json").is_file()
    assert {r["id"] for r in st["rows"]} == {"smoke-accuracy", "smoke-loss-falls"}
    text = capsys.readouterr().out
    assert "stability over base seeds 0, 17:" in text and (out / "report.html").is_file()
