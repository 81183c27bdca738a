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
