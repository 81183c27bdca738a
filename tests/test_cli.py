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


def test_dry_run_with_a_cost_model_samples_the_cheap_half_and_states_the_floor(monkeypatch):
    """A study that counts its points' FLOPs: the samples come from the cheaper half of the
    groups, the estimate scales their time per FLOP to the whole run, and the floor is the
    run's FLOPs at the measured matmul rate over the workers."""
    import dataclasses

    from robustlab.studies import base, get_study
    from robustlab.sweep.runner import SweepOptions

    flops = {0.05: 1e6, 0.1: 2e6, 0.2: 4e6, 0.4: 8e15}  # the last point alone would take hours
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: flops[c.lr])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2)
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda threads=None: 1e10)
    ran = []
    real = base.run_sweep
    monkeypatch.setattr(base, "run_sweep", lambda pts, *a, **k: (ran.append(pts[0].lr), real(pts, *a, **k))[1])
    e = base.estimate(p, SweepOptions(workers=2), samples=2)
    assert sorted(ran) == [0.05, 0.1]  # never the expensive group
    total = 2 * sum(flops.values())
    assert e["flops"] == pytest.approx(total)
    assert e["floor_seconds"] == pytest.approx(total / 1e10 / 2)
    assert e["estimate_seconds"] == pytest.approx(e["sample_seconds"] / (2 * 3e6) * total / 2)
    # a study without a cost model: evenly spread samples, no floor
    e = base.estimate(base.plan(get_study("smoke"), grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2),
                      SweepOptions(workers=2), samples=2)
    assert e["floor_seconds"] is None and e["flops"] is None


def test_dry_run_times_the_costlier_half_whole_or_by_two_probes(monkeypatch):
    """With a cost model and a probe, the costlier half of the groups gets its own time per
    FLOP: its group at the middle of its FLOPs runs whole where the cheaper half's rate says
    it is quick, its costliest through probes of 8 and 16 steps (after a warm-up),
    whose difference is the warm time per FLOP and whose rest is the group's setup; no estimate is shorter than that
    costliest group. A fake clock makes every time exact."""
    import dataclasses
    import types

    from robustlab.studies import base, get_study
    from robustlab.sweep.runner import SweepOptions

    unit = {0.05: 1.0, 0.1: 1.0, 0.2: 1.0, 0.3: 2.0, 0.4: 3.0, 0.8: 1e9}  # FLOPs per seed and epoch
    per_epoch = {0.05: 0.01, 0.1: 0.01, 0.2: 0.01, 0.3: 0.02, 0.4: 0.03, 0.8: 100.0}  # seconds per group epoch
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: unit[c.lr] * c.epochs,
                                probe=lambda c, steps: dataclasses.replace(c, epochs=steps))
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.3,0.4,0.8"], n_seeds=2)
    now, ran = [0.0], []

    def fake_sweep(pts, *a, **k):  # a group takes 1 s of setup and its epochs
        ran.append((pts[0].lr, pts[0].epochs))
        now[0] += 1.0 + per_epoch[pts[0].lr] * pts[0].epochs

    monkeypatch.setattr(base, "run_sweep", fake_sweep)
    monkeypatch.setattr(base, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda threads=None: 1e30)
    e = base.estimate(p, SweepOptions(workers=2), samples=3)
    # the cheaper half whole; of the costlier (0.3, 0.4, 0.8), 0.8 holds the middle of its FLOPs
    # and is the costliest: probed, never run whole
    assert ran == [(0.05, 30), (0.1, 30), (0.2, 30), (0.8, 1), (0.8, 8), (0.8, 16)]  # a warm-up first
    assert (e["sampled_groups"], e["sampled_points"], e["probed_groups"]) == (3, 6, 1)
    cheap_s, cheap_f = 3 * (1 + 0.3), 3 * 2 * 30.0
    heavy_f = 2 * 30 * (2.0 + 3.0 + 1e9)
    # probes: warm rate 800 s / (2 * 8e9 FLOPs); setup 1 s; the group: 1 + 100 * 30 s
    heavy_s = 1 + 100.0 * 30
    # the two halves over 2 workers: 1504 s; but the costliest group runs on one worker alone
    assert (cheap_s / cheap_f * cheap_f + heavy_s / (2 * 30 * 1e9) * heavy_f) / 2 < heavy_s
    assert e["estimate_seconds"] == pytest.approx(heavy_s)
    assert e["sample_seconds"] == pytest.approx(cheap_s + (1 + 100) + (1 + 800) + (1 + 1600))
    # a step too quick to tell from the setup's noise in 8 more steps: each round adds one
    # probe twice as long as the last and pairs the two, until the longer probe's extra time
    # is a quarter of the shorter's: (32, 64) adds 0.32 s to 1.32 s, (64, 128) 0.64 s to 1.64 s
    ran.clear()
    per_epoch[0.8] = 0.01
    e = base.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran[3:] == [(0.8, 1), (0.8, 8), (0.8, 16), (0.8, 32), (0.8, 64), (0.8, 128)]
    assert e["sample_seconds"] == pytest.approx(cheap_s + 1.01 + sum(1 + 0.01 * s for s in (8, 16, 32, 64, 128)))
    assert e["estimate_seconds"] == pytest.approx(max((cheap_s + (1 + 0.3) / (2 * 30 * 1e9) * heavy_f) / 2, 1.3))
    # never resolved: PROBE_ROUNDS pairs, up to 256 steps, and the last pair's time stands
    ran.clear()
    per_epoch[0.8] = 1e-4
    e = base.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran[3:] == [(0.8, 1)] + [(0.8, 8 * 2**j) for j in range(base.PROBE_ROUNDS + 1)]
    assert e["estimate_seconds"] == pytest.approx(max((cheap_s + (1 + 0.003) / (2 * 30 * 1e9) * heavy_f) / 2, 1.003))
    per_epoch[0.8] = 100.0
    # a costlier half quick enough to run whole: no probe
    ran.clear()
    unit[0.8], per_epoch[0.8] = 4.0, 0.04
    e = base.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran == [(0.05, 30), (0.1, 30), (0.2, 30), (0.4, 30), (0.8, 30)]  # 0.4: the middle of 2+3+4
    assert (e["sampled_groups"], e["sampled_points"], e["probed_groups"]) == (5, 10, 0)
    heavy_s, heavy_t = (1 + 0.9) + (1 + 1.2), 2 * 30 * (3.0 + 4.0)
    assert e["estimate_seconds"] == pytest.approx((cheap_s + heavy_s / heavy_t * 2 * 30 * 9.0) / 2)
    # without a probe, a costliest group too slow to run whole leaves the cheaper half's rate
    ran.clear()
    unit[0.8], per_epoch[0.8] = 1e9, 100.0
    e = base.estimate(dataclasses.replace(p, study=dataclasses.replace(study, probe=None)), SweepOptions(workers=2),
                      samples=3)
    assert ran == [(0.05, 30), (0.1, 30), (0.2, 30)] and e["probed_groups"] == 0
    assert e["estimate_seconds"] == pytest.approx(cheap_s / cheap_f * 2 * 30 * (3 + 2 + 3 + 1e9) / 2)


def test_dry_run_runs_every_probe_even_where_two_are_the_same_point(monkeypatch):
    """Each timing has a store of its own: a store skips the points it holds, and a study's
    warm-up (a probe at 1 step) may be the same point as its shortest probe (both one epoch)."""
    import dataclasses

    from robustlab.studies import base, get_study
    from robustlab.sweep.runner import SweepOptions

    smoke = get_study("smoke")
    calls = []
    study = dataclasses.replace(
        smoke, cost=lambda c: (1e15 if c.lr == 0.8 else 1.0) * c.epochs,
        probe=lambda c, steps: dataclasses.replace(c, epochs=max(1, steps // 8)),
        run_points=lambda cfgs, device="cpu": (calls.append((cfgs[0].lr, cfgs[0].epochs)), smoke.run_points(cfgs, device))[1])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.3,0.4,0.8"], n_seeds=1)
    e = base.estimate(p, SweepOptions(workers=1), samples=3)
    probed = [ep for lr, ep in calls if lr == 0.8]
    assert probed[:3] == [1, 1, 2] and e["probed_groups"] == 1  # the warm-up, then 8 and 16 steps
    assert 30 not in probed  # never the whole group


def test_dry_run_with_weights_samples_across_them_and_scales_by_weight(monkeypatch):
    """A study that weighs its points (no FLOPs): the samples are spread over the groups ranked
    by weight, the lightest and the heaviest included, and the estimate scales their time per
    unit of weight to the whole run. A missing weight falls back to groups spread over the grid."""
    import dataclasses

    from robustlab.studies import base, get_study
    from robustlab.sweep.runner import SweepOptions

    w = {0.05: 3.0, 0.1: 1.0, 0.2: 4.0, 0.4: 2.0, 0.8: 0.0}
    study = dataclasses.replace(get_study("smoke"), weight=lambda c: w[c.lr])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4,0.8"], n_seeds=2)
    ran = []
    real = base.run_sweep
    monkeypatch.setattr(base, "run_sweep", lambda pts, *a, **k: (ran.append(pts[0].lr), real(pts, *a, **k))[1])
    e = base.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran == [0.8, 0.4, 0.2]  # ranked by weight 0, 1, 2, 3, 4: the first, middle and last
    assert e["flops"] is None and e["floor_seconds"] is None
    assert e["estimate_seconds"] == pytest.approx(e["sample_seconds"] / (2 * (0.0 + 2.0 + 4.0)) * 2 * 10.0 / 2)
    ran.clear()
    study = dataclasses.replace(study, weight=lambda c: None if c.lr == 0.8 else w[c.lr])
    e = base.estimate(base.plan(study, grids=["lr=0.05,0.1,0.2,0.4,0.8"], n_seeds=2), SweepOptions(workers=2), samples=3)
    assert ran == [0.05, 0.2, 0.8]  # the grid's first, middle and last
    assert e["estimate_seconds"] == pytest.approx(e["sample_seconds"] / 3 * 5 / 2)


def test_dry_run_floor_with_cuda_is_the_gpu_rate_once(monkeypatch, capsys):
    """With device=cuda the local workers share one GPU: the floor is the run's FLOPs at that
    GPU's rate, not divided by the workers, and the estimate is never below it. (The device is
    faked here: the sampled points run on the CPU.)"""
    import dataclasses

    import torch

    from robustlab.cli import _dry_run
    from robustlab.studies import base, get_study
    from robustlab.sweep.runner import SweepOptions

    flops = {0.05: 1e6, 0.1: 2e6, 0.2: 4e6, 0.4: 8e15}
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: flops[c.lr])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2)
    asked = []
    monkeypatch.setattr("robustlab.utils.resolve_device", lambda name="cpu": torch.device("cuda"))
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda **k: (asked.append(k), 5e13)[1])
    e = base.estimate(p, SweepOptions(workers=4), samples=2)
    assert [k["device"].type for k in asked] == ["cuda"]
    total = 2 * sum(flops.values())
    assert e["floor_device"] == "cuda" and e["floor_parallel"] == 1
    assert e["floor_seconds"] == pytest.approx(total / 5e13)  # one GPU: not / 4 workers
    # per group a fixed part (the samples' time less their products), spread over the workers,
    # plus every product on the one GPU
    fixed = max(0.0, e["sample_seconds"] - 2 * 3e6 / 5e13) / 2
    assert e["estimate_seconds"] == pytest.approx(fixed * 4 / 4 + total / 5e13)
    assert _dry_run([p], SweepOptions(workers=4), "robustlab run smoke") == 0
    assert "at the GPU's 50000 GFLOP/s (one device, shared by the workers)" in capsys.readouterr().out


def test_dry_run_still_refuses_bad_input(tmp_path, capsys):
    assert main(["run", "smoke", "--set", "lr=-1", "--dry-run", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.startswith("robustlab: error: ")
