import subprocess
import sys

import pytest

from robustlab.cli import main


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args", [
    ["run", "smoke", "--set", "bogus=1"],
    ["run", "smoke", "--set", "lr=-1"],
    ["run", "smoke", "--set", "lr=abc"],
    ["run", "nosuchstudy"],
    ["run", "smoke", "--preset", "nosuchpreset"],
    ["run", "smoke", "--set", "lr"],
    ["run", "smoke", "--grid", "lr="],
    ["run", "smoke", "--grid", "bogus=1,2"],
    ["run", "smoke", "--grid", "lr=1:2"],
    ["run", "smoke", "--device", "tpu"],
    ["run", "smoke", "--workers", "0"],
    ["run", "smoke", "--seed", "-1"],
    ["run", "smoke", "--set", "size=9"],
    ["report", "/nonexistent/dir"],
])
def test_bad_input_one_line_exit_2_no_run_dir(tmp_path, capsys, args):
    out = tmp_path / "run"
    code = main([*args, *(["--out", str(out)] if args[0] == "run" else [])])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("robustlab: error:"), err
    assert "Traceback" not in err
    assert not out.exists()


def test_subprocess_exit_code_and_message(tmp_path):
    r = run_cli("run", "smoke", "--set", "lr=abc", "--out", str(tmp_path / "x"))
    assert r.returncode == 2
    assert r.stderr.strip() == "robustlab: error: lr='abc' is not allowed: expected a number"


def test_list_shows_parameters(capsys):
    assert main(["list", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "lr" in out and "default=0.5" in out and "quick" in out


def test_run_writes_the_records(tmp_path):
    out = tmp_path / "r"
    assert main(["run", "smoke", "--out", str(out), "--quiet"]) == 0
    for name in ("manifest.json", "results.jsonl", "claims.json", "report.html", "figures/loss.png"):
        assert (out / name).exists(), name
    import json

    m = json.loads((out / "manifest.json").read_text())
    assert m["study"] == "smoke" and m["seeds"] == [0, 1] and m["finished"]
    assert {"torch", "numpy", "python"} <= set(m["versions"]) and "git_commit" in m["code"]
    claims = json.loads((out / "claims.json").read_text())
    assert all({"id", "statement", "passed", "evidence"} <= set(c) for c in claims)
    import robustlab

    df = robustlab.load(out)
    assert set(df["seed"]) == {0, 1} and "loss" in df


def test_same_seed_byte_identical_results(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "smoke", "--seed", "3", "--out", str(a), "--quiet"]) == 0
    assert main(["run", "smoke", "--seed", "3", "--out", str(b), "--quiet"]) == 0
    assert (a / "results.jsonl").read_bytes() == (b / "results.jsonl").read_bytes()
    assert (a / "claims.json").read_bytes() == (b / "claims.json").read_bytes()
    c = tmp_path / "c"
    assert main(["run", "smoke", "--seed", "4", "--out", str(c), "--quiet"]) == 0
    assert (a / "results.jsonl").read_bytes() != (c / "results.jsonl").read_bytes()


def test_existing_foreign_directory_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "precious.txt").write_text("keep")
    assert main(["run", "smoke", "--out", str(tmp_path / "d")]) == 2
    assert (tmp_path / "d" / "precious.txt").read_text() == "keep"


def test_data_dir_flag_is_checked(tmp_path, capsys):
    assert main(["run", "smoke", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "reads no dataset files" in capsys.readouterr().err
    assert main(["run", "lazy-attack", "--data-dir", str(tmp_path / "absent"),
                 "--out", str(tmp_path / "o")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_dry_run_counts_points_estimates_time_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out (runs/...) would land here
    out = tmp_path / "never"
    assert main(["run", "smoke", "--grid", "lr=0.1,0.5", "--seeds", "2", "--dry-run", "--out", str(out)]) == 0
    got = capsys.readouterr()
    assert "nothing is written" in got.err
    row = next(line.split() for line in got.out.splitlines() if line.startswith("smoke"))
    assert row[:4] == ["smoke", "4", "2", "2"]  # 4 points, 2 groups (seeds train together), both sampled
    assert "estimated wall time:" in got.out
    assert list(tmp_path.iterdir()) == []  # no --out, no runs/

    assert main(["reproduce", "--only", "smoke", "--dry-run", "--out", str(out)]) == 0
    got = capsys.readouterr()
    assert any(line.startswith("smoke") for line in got.out.splitlines()) and "estimated wall time:" in got.out
    assert list(tmp_path.iterdir()) == []


def test_dry_run_still_refuses_bad_input(tmp_path, capsys):
    assert main(["run", "smoke", "--set", "lr=-1", "--dry-run", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.startswith("robustlab: error: ")


# ----------------------------------------------------------------------------------------
# one meaning per flag


def _flag_helps(flag):
    """{command: help} of ``flag`` in every subcommand that has it."""
    import argparse

    from robustlab.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: a.help for name, p in sub.choices.items() for a in p._actions if flag in a.option_strings}


def test_strict_has_one_meaning_on_every_command():
    """--strict: exit 1 unless every paper claim is reproduced and every self-check holds, on
    run, reproduce, report and rerun alike; compare's own flag is --fail-on-change."""
    from robustlab.report.html import strict_failures

    helps = _flag_helps("--strict")
    assert set(helps) == {"run", "reproduce", "report", "rerun"}
    assert set(helps.values()) == {"exit 1 unless every paper claim is reproduced and every self-check holds"}
    assert set(_flag_helps("--fail-on-change")) == {"compare"}

    def c(cid, verdict, kind="claim"):
        return {"id": cid, "verdict": verdict, "kind": kind}

    claims = [c("rep", "reproduced"), c("con", "contradicted"), c("inc", "inconclusive"), c("na", "not applicable"),
              c("sc-ok", "reproduced", "self-check"), c("sc-na", "not applicable", "self-check"),
              c("ex", "contradicted", "exploratory")]
    assert [x["id"] for x in strict_failures(claims)] == ["con", "inc", "na", "sc-na"]  # never exploratory
    assert strict_failures([c("rep", "reproduced"), c("sc", "reproduced", "self-check")]) == []


def test_compare_has_no_strict(tmp_path, capsys):
    assert main(["compare", str(tmp_path), str(tmp_path), "--strict"]) == 2
    assert "unrecognized arguments: --strict" in capsys.readouterr().err


def test_workers_has_one_default_everywhere(monkeypatch):
    """--workers of run, reproduce and rerun, and workers= of robustlab.run and robustlab.rerun,
    all default to the machine's cores // threads."""
    import inspect

    import robustlab
    from robustlab import cli
    from robustlab.sweep.runner import default_workers

    helps = _flag_helps("--workers")
    assert set(helps) == {"run", "reproduce", "rerun"} and all("default: CPU cores //" in h for h in helps.values())
    parser = cli.build_parser()
    for argv in (["run", "smoke"], ["reproduce"], ["rerun", "x"]):
        assert parser.parse_args(argv).workers is None  # resolved later, to the one default
    assert inspect.signature(robustlab.run).parameters["workers"].default is None
    assert inspect.signature(robustlab.rerun).parameters["workers"].default is None
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert default_workers(1) == 6 and default_workers(4) == 1 and cli.default_workers(2) == 3


def test_version(capsys):
    import robustlab

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"robustlab {robustlab.__version__}"


@pytest.mark.parametrize("args, hint", [
    (["run", "smok"], "did you mean 'smoke'?"),
    (["run", "smoke", "--preset", "quik"], "did you mean 'quick'?"),
    (["run", "smoke", "--set", "lrr=0.1"], "did you mean 'lr'?"),
    (["run", "smoke", "--grid", "epoch=1,2"], "did you mean 'epochs'?"),
    (["reproduce", "--only", "lazy-atack"], "did you mean 'lazy-attack'?"),
])
def test_did_you_mean(tmp_path, capsys, args, hint):
    assert main([*args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert hint in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_preset_help_lists_the_studys_presets(capsys):
    from robustlab.studies import get_study

    with pytest.raises(SystemExit) as e:
        main(["run", "feature-learning", "--help"])
    assert e.value.code == 0
    out = "".join(capsys.readouterr().out.split())  # argparse wraps at hyphens too
    want = "named settings of feature-learning (default quick): " + ", ".join(get_study("feature-learning").presets)
    assert "".join(want.split()) in out
    with pytest.raises(SystemExit):
        main(["reproduce", "-h"])
    assert "everybuilt-instudyhasquick,paper" in "".join(capsys.readouterr().out.split())


def test_list_is_one_line_per_study_and_list_study_the_details(capsys):
    from robustlab.studies import REGISTRY

    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in REGISTRY:
        assert sum(line.startswith(name + ": ") for line in lines) == 1, name
    assert len(lines) <= len(REGISTRY) + 3 and all(len(line) <= 100 for line in lines)
    assert main(["list", "smoke"]) == 0
    out = capsys.readouterr().out
    assert "presets (--preset):" in out and "claims:" in out and "self-check" in out and "parameters" in out


def test_resume_without_out_continues_the_latest_run(tmp_path, monkeypatch, capsys):
    """run STUDY --resume: the newest runs/STUDY-* (what the default --out names), resumed
    in place; with nothing to resume, one line and exit 2."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "smoke", "--resume", "--quiet"]) == 2
    assert "--resume found no run of smoke" in capsys.readouterr().err
    assert main(["run", "smoke", "--out", "runs/smoke-20260101-000000", "--quiet"]) == 0
    assert main(["run", "smoke", "--out", "runs/smoke-20260102-000000", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", "smoke", "--resume", "--quiet"]) == 0
    assert "runs/smoke-20260102-000000/report.html" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["smoke-20260101-000000", "smoke-20260102-000000"]
