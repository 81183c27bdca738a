"""`robustlab reproduce` and `robustlab report`, on the smoke study and variants of it
(so these tests do not depend on which real studies exist)."""

import dataclasses
import json
import re
import sys
import types

import pytest

from robustlab import claims as cl
from robustlab import records
from robustlab.cli import main
from robustlab.studies import REGISTRY
from robustlab.studies.base import Claim, Preset
from robustlab.studies.reproduce import rebuild, reproduce
from robustlab.studies.smoke import STUDY as SMOKE
from robustlab.sweep.runner import SweepOptions

QUIET = SweepOptions(quiet=True)


def register(monkeypatch, study):
    """Make ``study`` known to the registry for this test only."""
    mod = types.ModuleType(f"robustlab_test_study_{study.name.replace('-', '_')}")
    mod.STUDY = study
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(REGISTRY, study.name, mod.__name__)
    return study


def failing_claims(df, ctx):
    acc = float(df["test_acc"].dropna().mean())
    return [Claim("too-good", "test accuracy >= 0.999 (cannot hold for this model)", acc >= 0.999,
                  {"test_acc_mean": acc}, "test")]


def smoke_variant(name, **changes):
    return dataclasses.replace(SMOKE, name=name, title=f"Variant {name}", **changes)


def table_of(stdout: str) -> str:
    """The summary printed by reproduce/report (everything before the report's path), without
    the seconds a study took (a single run directory's rebuild does not know them)."""
    lines = stdout.splitlines()
    end = next(i for i, ln in enumerate(lines) if ln.startswith("report"))
    return re.sub(r"  \d+(\.\d+)? (s|min)\b", "", "\n".join(lines[:end]))


def _assert_one_crash(captured, crashed: str, survivor: str, error: str) -> None:
    """One study reported as crashed (with ``error``) and the other's claim still judged."""
    assert f"1 study crashed ({crashed})" in captured.err
    assert re.search(rf"^  \? study-crashed  INCONCLUSIVE\n      the study crashed: {error}", captured.out, re.M)
    assert re.search(rf"^{survivor}  no paper claims .*self-checks: 1/1 hold", captured.out, re.M)


def test_reproduce_writes_study_dirs_top_report_and_prints_claim_table(tmp_path, capsys):
    out = tmp_path / "rep"
    assert reproduce(out, preset="quick", options=QUIET, studies=["smoke"], verbose=True) == 0
    printed = capsys.readouterr().out
    for f in ("report.html", "reproduce.json", "smoke/manifest.json", "smoke/results.jsonl",
              "smoke/claims.json", "smoke/figures/loss.png", "smoke/report.html", "smoke/store.sqlite"):
        assert (out / f).is_file(), f
    meta = records.read_json(out / "reproduce.json")
    assert meta["preset"] == "quick" and meta["studies"] == ["smoke"] and meta["finished"]
    assert meta["command"] == f"robustlab reproduce --preset quick --out {out} --only smoke"
    assert set(meta["timings"]) == {"smoke"} and meta["versions"]["torch"]
    assert re.search(r"^smoke  no paper claims  \d+\.\d s  ·  self-checks: 1/1 hold$", printed, re.M)
    assert re.search(r"^  ✓ \[exploratory\] smoke-accuracy  reproduced  0\.\d+ \[0\.\d+, 0\.\d+\] > 0\.85$", printed, re.M)
    assert f"report: {(out / 'report.html').resolve()}" in printed
    html = (out / "report.html").read_text()
    # the figure is stored once: the study's file, linked from the combined report
    assert "<table id='claims'>" in html and "base64" not in html and html.count('src="smoke/figures/loss.png"') == 1
    assert "smoke-loss-falls" in html and "id='study-smoke'" in html


def test_report_rebuild_gives_the_same_claim_table_without_running(tmp_path, capsys, monkeypatch):
    out = tmp_path / "rep"
    register(monkeypatch, smoke_variant("smoke-failing", claims=failing_claims))
    reproduce(out, preset="quick", options=QUIET, studies=["smoke", "smoke-failing"])
    first = capsys.readouterr().out
    claims_before = {n: (out / n / "claims.json").read_text() for n in ("smoke", "smoke-failing")}
    (out / "report.html").unlink()
    (out / "smoke" / "figures" / "loss.png").unlink()

    def boom(cfgs, device):
        raise AssertionError("rebuild must not run points")

    register(monkeypatch, dataclasses.replace(SMOKE, run_points=boom))
    register(monkeypatch, smoke_variant("smoke-failing", claims=failing_claims, run_points=boom))
    assert rebuild(out) == 0
    second = capsys.readouterr().out
    assert table_of(first) == table_of(second)
    assert "CONTRADICTED" in table_of(second) and "too-good" in table_of(second)
    assert {n: (out / n / "claims.json").read_text() for n in claims_before} == claims_before
    assert (out / "report.html").exists() and (out / "smoke" / "figures" / "loss.png").exists()
    assert rebuild(out, strict=True) == 1


def test_failed_claim_exits_0_unless_strict_and_is_shown(tmp_path, capsys, monkeypatch):
    register(monkeypatch, smoke_variant("smoke-failing", claims=failing_claims))
    assert reproduce(tmp_path / "a", preset="quick", options=QUIET, studies=["smoke-failing"]) == 0
    assert re.search(r"^  ✗ too-good  CONTRADICTED", capsys.readouterr().out, re.M)
    assert reproduce(tmp_path / "b", preset="quick", options=QUIET, studies=["smoke-failing"], strict=True) == 1
    html = (tmp_path / "b" / "report.html").read_text()
    assert "class='banner bad'" in html and re.search(r"claim <a class='cid'[^>]*>too-good</a> <span class='badge fail'>", html)
    assert reproduce(tmp_path / "c", preset="quick", options=QUIET, studies=["smoke"], strict=True) == 0


def _verdict_claims(state):
    def claims(df, ctx):
        from robustlab import stats

        est = stats.mean_estimate(df.groupby("seed")["loss"].mean())
        cond = [stats.Condition("premise", state != stats.NOT_APPLICABLE, "synthetic")]
        thr = est.value if state == stats.INCONCLUSIVE else -1.0

        def rule(rows):
            return stats.decide(stats.mean_estimate(rows.groupby("seed")["loss"].mean()), threshold=thr,
                                conditions=cond)
        # a working control: the same rule on the loss moved below the threshold
        spec = cl.ClaimSpec("one", control=cl.ControlSpec({"lr": 0.5}, "planted"))
        v, ctl = cl.judge(spec, rule, df, df.assign(loss=df["loss"] - 10.0))
        return [Claim("one", "a claim in a given state", v, {}, "test", control=ctl)]
    return claims


@pytest.mark.parametrize("state, code", [("reproduced", 0), ("inconclusive", 1), ("not applicable", 1)])
def test_strict_fails_unless_every_claim_is_reproduced(tmp_path, capsys, monkeypatch, state, code):
    register(monkeypatch, smoke_variant("smoke-state", claims=_verdict_claims(state)))
    assert reproduce(tmp_path / "r", preset="quick", options=QUIET, studies=["smoke-state"], strict=True) == code
    printed = capsys.readouterr().out
    if state == "reproduced":
        assert re.search(r"^smoke-state  1/1 reproduced", printed, re.M) and " one " not in printed
    else:
        assert re.search(rf"^  . one  {state.upper()}", printed, re.M)
    html = (tmp_path / "r" / "report.html").read_text()
    if state == "not applicable":
        assert "condition &#x27;premise&#x27; not met (synthetic)" in html
    if state == "inconclusive":
        assert "inconclusive:" in html


def test_failed_points_are_listed(tmp_path, capsys, monkeypatch):
    presets = {"quick": Preset({"fail_on_lr": 1.0}, ({"lr": [0.5, 1.0]},), n_seeds=2)}
    register(monkeypatch, smoke_variant("smoke-points", presets=presets))
    assert reproduce(tmp_path / "r", preset="quick", options=QUIET, studies=["smoke-points"]) == 0
    printed = capsys.readouterr().out
    assert "2 points failed" in printed and "2 failed points" in printed
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Failed points (2 of 4)" in html and "forced failure at lr=1.0" in html
    assert "2 of 4 points failed" in html


def test_a_crashed_study_is_reported_and_the_others_still_run(tmp_path, capsys, monkeypatch):
    import robustlab.studies.reproduce as rep

    real_execute = rep.execute

    def execute(plan_, out, options, **kw):  # a bug outside the points: execute() itself raises
        if plan_.study.name == "smoke-crash":
            out.mkdir(parents=True)
            raise ZeroDivisionError("a bug in the study")
        return real_execute(plan_, out, options, **kw)

    monkeypatch.setattr(rep, "execute", execute)
    register(monkeypatch, smoke_variant("smoke-crash"))
    out = tmp_path / "r"
    assert reproduce(out, preset="quick", options=QUIET, studies=["smoke-crash", "smoke"]) == 1
    captured = capsys.readouterr()
    _assert_one_crash(captured, "smoke-crash", "smoke", "ZeroDivisionError")
    html = (out / "report.html").read_text()
    assert "the study crashed" in html and "a bug in the study" in html and "Traceback" in html
    assert rebuild(out) == 0
    assert table_of(capsys.readouterr().out) == table_of(captured.out)


def test_rerun_into_the_same_dir_resumes_and_a_different_run_is_refused(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r"
    assert reproduce(out, preset="quick", options=QUIET, studies=["smoke"]) == 0
    first = records.read_jsonl(out / "smoke" / "results.jsonl")
    assert reproduce(out, preset="quick", options=QUIET, studies=["smoke"]) == 0
    manifest = records.read_json(out / "smoke" / "manifest.json")
    assert manifest["sweep"]["ran"] == 0 and manifest["sweep"]["skipped"] == 2
    assert records.read_jsonl(out / "smoke" / "results.jsonl") == first
    assert records.read_json(out / "reproduce.json")["resumed"] == 1
    for kw in ({"preset": "paper", "studies": ["smoke"]}, {"preset": "quick", "studies": ["smoke"], "seed": 5}):
        with pytest.raises(Exception, match="another kind"):
            reproduce(out, options=QUIET, **kw)
    register(monkeypatch, smoke_variant("smoke-b"))
    with pytest.raises(Exception, match="another kind"):
        reproduce(out, preset="quick", options=QUIET, studies=["smoke", "smoke-b"])
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(Exception, match="not a robustlab reproduce directory"):
        reproduce(other, preset="quick", options=QUIET, studies=["smoke"])
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]


def test_cli_reproduce_only_and_report(tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["reproduce", "--only", "smoke", "--out", str(out), "--quiet", "--seed", "3"]) == 0
    first = capsys.readouterr().out
    assert records.read_json(out / "smoke" / "manifest.json")["seeds"] == [3, 4]
    assert main(["report", str(out)]) == 0
    second = capsys.readouterr().out
    assert table_of(first) == table_of(second) and "report rebuilt:" in second
    # a single-study run directory can be rebuilt too
    assert main(["report", str(out / "smoke")]) == 0
    assert table_of(capsys.readouterr().out) == table_of(first)


@pytest.mark.parametrize("args", [
    ["reproduce", "--only", "bogus"],
    ["reproduce", "--only", "smoke,smoke"],
    ["reproduce", "--only", ","],
    ["reproduce", "--only", "smoke", "--preset", "nosuch"],
    ["reproduce", "--only", "smoke", "--seed", "-1"],
    ["reproduce", "--only", "smoke", "--workers", "0"],
])
def test_cli_reproduce_bad_input_one_line_exit_2_no_dir(tmp_path, capsys, args):
    out = tmp_path / "never"
    assert main([*args, "--out", str(out)]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("robustlab: error:"), err
    assert not out.exists()


def test_cli_report_of_a_plain_directory_exits_2(tmp_path, capsys):
    (tmp_path / "x.txt").write_text("")
    assert main(["report", str(tmp_path)]) == 2
    assert "not a robustlab run directory" in capsys.readouterr().err


def test_a_study_whose_module_is_missing_is_a_user_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(REGISTRY, "ghost", "robustlab.studies.ghost_study_that_does_not_exist")
    assert main(["reproduce", "--only", "ghost", "--out", str(tmp_path / "g")]) == 2
    assert "not available in this installation" in capsys.readouterr().err
    assert not (tmp_path / "g").exists()


def test_progress_lines_name_each_study_in_order(tmp_path, capsys, monkeypatch):
    register(monkeypatch, smoke_variant("smoke-b"))
    reproduce(tmp_path / "p", preset="quick", options=SweepOptions(quiet=False), studies=["smoke", "smoke-b"])
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert err[0].startswith("robustlab reproduce (preset quick): 2 studies, 4 points")
    assert [ln.split(":")[0] for ln in err[1:]] == ["[1/2] smoke"] * 2 + ["[2/2] smoke-b"] * 2
    assert re.fullmatch(r"\[1/2\] smoke: done in \d+\.\d s \(2 points\)", err[2])  # the tally is on stdout
    # smoke: its loss check is a self-check, its accuracy reading exploratory
    assert re.search(r"^smoke  no paper claims  \d+\.\d s  ·  self-checks: 1/1 hold$", captured.out, re.M)
    meta = json.loads((tmp_path / "p" / "reproduce.json").read_text())
    assert list(meta["timings"]) == ["smoke", "smoke-b"]


def test_studies_run_in_run_order_and_report_in_the_asked_order(tmp_path, capsys, monkeypatch):
    """reproduce runs the study that is slowest to draw early (its figures overlap the next
    study's points), but its report, claim table and timings keep the order asked for."""
    from robustlab.studies import reproduce as rep

    register(monkeypatch, smoke_variant("smoke-b"))
    register(monkeypatch, smoke_variant("smoke-c"))
    monkeypatch.setattr(rep, "REPRODUCE_RUN_ORDER", ["smoke-c", "smoke"])
    names = [p.study.name for p in rep.run_order([types.SimpleNamespace(study=types.SimpleNamespace(name=n))
                                                  for n in ("smoke", "smoke-b", "smoke-c")])]
    assert names == ["smoke-b", "smoke-c", "smoke"]  # not listed first, then the listed order
    out = tmp_path / "r"
    assert reproduce(out, preset="quick", options=SweepOptions(quiet=False),
                     studies=["smoke", "smoke-b", "smoke-c"]) == 0
    captured = capsys.readouterr()
    started = [ln.split(":")[0] for ln in captured.err.splitlines() if ln.endswith("points")]
    assert started == ["[1/3] smoke-b", "[2/3] smoke-c", "[3/3] smoke"]
    meta = json.loads((out / "reproduce.json").read_text())
    assert meta["studies"] == list(meta["timings"]) == ["smoke", "smoke-b", "smoke-c"]
    rows = [ln.split()[0] for ln in table_of(captured.out).splitlines() if ln.startswith("smoke")]
    assert list(dict.fromkeys(rows)) == ["smoke", "smoke-b", "smoke-c"]
    html = (out / "report.html").read_text()
    assert html.index("Variant smoke-b") < html.index("Variant smoke-c")


def _drawing_fails_for(monkeypatch, name: str):
    """Make drawing (``base.finalize``) raise for study ``name``; returns the real finalize."""
    from robustlab.studies import base

    real = base.finalize

    def finalize(out, study):
        if study.name == name:
            raise RuntimeError("drawing failed")
        return real(out, study)

    monkeypatch.setattr(base, "finalize", finalize)
    return real


def test_overlapped_finalize_with_two_workers_matches_one_worker_and_reports_a_crash(tmp_path, capsys, monkeypatch):
    """With worker processes, a study's claims and figures are drawn while the next study's
    points run: the records are the same as drawn in line (one worker), the studies are
    recorded in order, and a crash while drawing is a crashed study, not a lost run."""

    register(monkeypatch, smoke_variant("smoke-b"))
    one, two = tmp_path / "one", tmp_path / "two"
    assert reproduce(one, preset="quick", options=QUIET, studies=["smoke", "smoke-b"]) == 0
    printed_one = capsys.readouterr().out
    two_workers = dataclasses.replace(QUIET, workers=2)
    assert reproduce(two, preset="quick", options=two_workers, studies=["smoke", "smoke-b"]) == 0
    printed_two = capsys.readouterr().out
    assert table_of(printed_two) == table_of(printed_one)
    for study in ("smoke", "smoke-b"):
        for f in ("results.jsonl", "claims.json"):
            assert (two / study / f).read_bytes() == (one / study / f).read_bytes(), (study, f)
        assert (two / study / "figures" / "loss.png").is_file()
    assert list(records.read_json(two / "reproduce.json")["timings"]) == ["smoke", "smoke-b"]

    _drawing_fails_for(monkeypatch, "smoke")
    three = tmp_path / "three"
    assert reproduce(three, preset="quick", options=two_workers, studies=["smoke", "smoke-b"]) == 1
    _assert_one_crash(capsys.readouterr(), "smoke", "smoke-b", "RuntimeError")
    assert (three / "smoke" / "store.sqlite").is_file()  # the points are kept for a re-run


def test_a_study_that_crashed_while_drawing_is_analysed_again_by_report_once_fixed(tmp_path, capsys, monkeypatch):
    """The combined report does not keep a crash record from reproduce.json once the study's
    points are all there and its drawing works again (a study whose points never ran keeps it:
    test_a_crashed_study_is_reported_and_the_others_still_run)."""
    from robustlab.studies import base

    real = _drawing_fails_for(monkeypatch, "smoke")
    out = tmp_path / "r"
    assert reproduce(out, preset="quick", options=QUIET, studies=["smoke"]) == 1
    capsys.readouterr()
    assert "smoke" in records.read_json(out / "reproduce.json")["crashed"]
    monkeypatch.setattr(base, "finalize", real)  # the bug fixed
    assert rebuild(out) == 0
    printed = capsys.readouterr().out
    assert "study-crashed" not in printed and "smoke" in printed
    meta = records.read_json(out / "reproduce.json")
    assert meta["crashed"] == {} and meta["recovered"] == ["smoke"]
    assert "drawing failed" not in (out / "report.html").read_text()
