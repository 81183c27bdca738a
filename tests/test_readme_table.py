"""scripts/readme_table.py: the README's results table is generated from run directories."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("readme_table", ROOT / "scripts" / "readme_table.py")
readme_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(readme_table)


def _run(d: Path, study: str, preset: str, claims: list[dict]) -> Path:
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"study": study, "preset": preset}))
    (d / "claims.json").write_text(json.dumps(claims))
    return d


def _c(cid, verdict, kind="claim", effect=0.5, interval=(0.4, 0.6), reason=""):
    return {"id": cid, "kind": kind, "verdict": verdict, "effect": effect, "interval": list(interval), "reason": reason}


def test_table_from_a_quick_reproduce_and_paper_slices(tmp_path):
    quick = tmp_path / "quick"
    _run(quick / "lazy-attack", "lazy-attack", "quick",
         [_c("delta", "reproduced"), _c("grad", "contradicted", effect=-0.2, interval=(-0.3, -0.1)),
          _c("ball", "reproduced", kind="self-check"), _c("open", "inconclusive", kind="exploratory")])
    (quick / "reproduce.json").write_text(json.dumps({"studies": ["lazy-attack"]}))
    sl = _run(tmp_path / "slice", "lazy-attack", "paper-x",
              [_c("delta", "reproduced", effect=0.7, interval=(0.6, 0.8)),
               _c("grad", "not applicable", effect=None, reason="not measured in this run")])
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- results:start -->\nold\n<!-- results:end -->\n\nafter\n")
    assert readme_table.main(["--quick", str(quick), "--paper", str(sl), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "\nold\n" not in text and text.endswith("<!-- results:end -->\n\nafter\n")
    assert "**1 of 2 claims reproduced**" in text
    assert "| lazy-attack | `delta` | reproduced 0.5 [0.4, 0.6] | reproduced 0.7 [0.6, 0.8] |" in text
    assert "| lazy-attack | `grad` | contradicted -0.2 [-0.3, -0.1] | no paper run |" in text  # a slice that did not measure it
    assert "`ball`" not in text and "`open`" not in text and "lazy-attack 1/1" in text  # self-checks apart
    assert readme_table.main(["--quick", str(quick), "--paper", str(sl), "--readme", str(readme), "--check"]) == 0
    assert readme_table.main(["--quick", str(quick), "--readme", str(readme), "--check"]) == 1


def test_slices_that_disagree_are_each_shown_with_their_name(tmp_path):
    quick = _run(tmp_path / "quick", "wdi", "quick", [_c("peak", "reproduced"), _c("kappa", "reproduced")])
    a = _run(tmp_path / "a", "wdi", "paper-width-n", [_c("peak", "not applicable", effect=None, reason="premises"),
                                                     _c("kappa", "not applicable", effect=None,
                                                        reason="not measured in this run: needs ...")])
    b = _run(tmp_path / "b", "wdi", "paper-width", [_c("peak", "inconclusive", effect=-0.8, interval=(-1.4, 0.3))])
    c = _run(tmp_path / "c", "wdi", "paper-kappa", [_c("kappa", "contradicted", effect=0.33, interval=(0.32, 0.34))])
    text = readme_table.table(readme_table.load([quick]), readme_table.load([a, b, c]))
    assert "| wdi | `peak` | reproduced 0.5 [0.4, 0.6] | inconclusive -0.8 [-1.4, 0.3] (`paper-width`); " \
           "not applicable in `paper-width-n` |" in text  # both measured it: neither is chosen
    assert "| wdi | `kappa` | reproduced 0.5 [0.4, 0.6] | contradicted 0.33 [0.32, 0.34] |" in text  # one measured it



def test_keep_paper_refreshes_one_study_and_keeps_the_others_cells(tmp_path):
    quick = tmp_path / "quick"
    _run(quick / "fl", "fl", "quick", [_c("a6", "reproduced")])
    _run(quick / "wdi", "wdi", "quick", [_c("peak", "inconclusive")])
    (quick / "reproduce.json").write_text(json.dumps({"studies": ["fl", "wdi"]}))
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:start -->\n| study | claim | quick preset | paper preset |\n|---|---|---|---|\n"
                      "| fl | `a6` | reproduced 0.5 [0.4, 0.6] | reproduced 0.49 [0.355, 0.625] |\n"
                      "| wdi | `peak` | inconclusive 0.5 [0.4, 0.6] | inconclusive -0.837 [-1.45, 0.29] (`paper-width`) |\n"
                      "<!-- results:end -->\n")
    fl = _run(tmp_path / "fl-paper", "fl", "paper", [_c("a6", "reproduced", effect=0.477, interval=(0.374, 0.581))])
    assert readme_table.main(["--quick", str(quick), "--paper", str(fl), "--readme", str(readme), "--keep-paper"]) == 0
    text = readme.read_text()
    assert "| fl | `a6` | reproduced 0.5 [0.4, 0.6] | reproduced 0.477 [0.374, 0.581] |" in text  # refreshed
    assert "| wdi | `peak` | inconclusive 0.5 [0.4, 0.6] | inconclusive -0.837 [-1.45, 0.29] (`paper-width`) |" in text
    # without the flag the study with no paper directory reads "no paper run"
    assert readme_table.main(["--quick", str(quick), "--paper", str(fl), "--readme", str(readme)]) == 0
    assert "| wdi | `peak` | inconclusive 0.5 [0.4, 0.6] | no paper run |" in readme.read_text()
