"""The width-depth-init study end to end: config validation and the CLI's exit 2, the data
subset, a point run (rows, exact vs Monte Carlo, divergence), and a tiny sweep into a run
directory (studies/width_depth_init.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from robustlab.cli import main
from robustlab.config import ConfigError
from robustlab.errors import NumericalError
from robustlab.studies import get_study
from robustlab.studies import width_depth_init as W
from robustlab.studies.base import Preset, execute, plan
from robustlab.sweep.runner import SweepOptions

TINY = {"dataset": "digits", "n_train": 60, "n_test": 40, "epochs": 4, "batch_size": 20, "decay_start": 3,
        "lr_step": 0, "mc_samples": 0}


def cfgs(n=2, **kw):
    return [W.WidthDepthInitConfig(**{**TINY, **kw, "seed": s}) for s in range(n)]


@pytest.mark.parametrize("field,value", [
    ("depth", 1), ("width", 0), ("init", "xavier"), ("gamma", 0.0), ("gamma", -2.0), ("eps", 0.0), ("eps", -0.1),
    ("mc_samples", 1), ("arch", "mlp"), ("momentum", 1.0), ("lr", 0.0),
])
def test_bad_config_is_a_config_error(field, value):
    with pytest.raises(ConfigError) as info:
        W.WidthDepthInitConfig(**{field: value})
    assert info.value.field == field


def test_cross_field_rules():
    with pytest.raises(ConfigError, match="exactly two classes"):
        W.WidthDepthInitConfig(output="single", classes=(0, 1, 2))
    with pytest.raises(ConfigError, match="data_dir"):
        W.WidthDepthInitConfig(dataset="cifar10")
    with pytest.raises(ConfigError, match="<= 8"):
        W.WidthDepthInitConfig(dataset="digits", size=12)
    with pytest.raises(ConfigError):
        W.WidthDepthInitConfig(classes=(3,))
    with pytest.raises(ConfigError, match="target_acc > 0 or target_loss"):
        W.WidthDepthInitConfig(stop_at_target=True, target_loss=0.0, target_acc=0.0)
    with pytest.raises(ConfigError, match="target_acc"):
        W.WidthDepthInitConfig(target_acc=1.5)
    with pytest.raises(ConfigError, match="init_draws"):
        W.WidthDepthInitConfig(arch="cnn", init_draws=3)
    W.WidthDepthInitConfig(output="single", classes=(0, 1))  # fine


@pytest.mark.parametrize("args", [
    ["--set", "depth=1"], ["--set", "width=0"], ["--set", "init=glorot"], ["--set", "gamma=0"],
    ["--set", "eps=0"], ["--set", "eps=-1"], ["--grid", "depth=1,2"], ["--grid", "width=0,4"],
])
def test_cli_bad_input_exit_2_no_run_dir(tmp_path, capsys, args):
    out = tmp_path / "run"
    assert main(["run", "width-depth-init", *args, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("robustlab: error:")
    assert not out.exists()


def test_registry_and_presets_plan():
    study = get_study("width-depth-init")
    assert study is W.STUDY and study.ensemble
    quick = plan(study, preset="quick")
    widths = {c.width for c in quick.points}
    n_train = quick.base.n_train
    assert min(widths) == 1 and max(widths) >= 4 * n_train  # from under- to well over-parameterised
    assert {c.init for c in quick.points} == {"lecun", "he", "ntk", "small"}
    assert {c.depth for c in quick.points} >= {2, 3, 4, 6}
    assert len({c.seed for c in quick.points}) >= 3
    paper = plan(study, preset="paper")
    assert paper.base.epochs == 50 and paper.base.decay_start > 0  # the paper's 50 epochs, step decay
    assert max(c.width for c in paper.points) >= 4 * 4000


def test_data_subset_is_stratified_and_fixed():
    cfg = W.WidthDepthInitConfig(**TINY)
    d = W.load_data(cfg)
    assert d.x_train.shape == (60, 64) and d.x_test.shape == (40, 64)
    counts = torch.bincount(d.y_train, minlength=10)
    assert int(counts.min()) == 6 and int(counts.max()) == 6
    torch.testing.assert_close(d.x_train.norm(dim=1), torch.ones(60))  # on the sphere
    again = W.load_data(W.WidthDepthInitConfig(**{**TINY, "seed": 5}))
    torch.testing.assert_close(d.x_train, again.x_train)  # the seed moves the init, not the data


def _subset_by_loop(labels, n, generator):
    """The stratified subset point by point, as it was first written: the reference."""
    if n == 0 or n >= len(labels):
        return list(range(len(labels)))
    order = torch.randperm(len(labels), generator=generator)
    counts = torch.bincount(labels)
    k = len(counts)
    quota = torch.minimum(counts, torch.full_like(counts, n // k) + (torch.arange(k) < n % k).long())
    picked, taken, rest = [], [0] * k, []
    for i in order.tolist():
        c = int(labels[i])
        if taken[c] < int(quota[c]):
            picked.append(i)
            taken[c] += 1
        else:
            rest.append(i)
    return sorted(picked + rest[: n - len(picked)])


@pytest.mark.parametrize("n", [0, 1, 7, 10, 33, 95, 150, 199, 200, 500])
def test_stratified_subset_matches_the_point_by_point_reference(n):
    # imbalanced classes (one with 3 points, one absent) so that quotas run short
    labels = torch.cat([torch.full((c,), i) for i, c in enumerate([40, 3, 25, 0, 60, 45, 27])])
    labels = labels[torch.randperm(len(labels), generator=torch.Generator().manual_seed(1))]
    got = W._stratified_subset(labels, n, torch.Generator().manual_seed(7))
    assert got.dtype == torch.int64
    assert got.tolist() == _subset_by_loop(labels, n, torch.Generator().manual_seed(7))


def test_point_flops_from_the_size_table_equal_those_from_the_data():
    study = get_study("width-depth-init")
    seen = {}
    for preset in study.presets:
        for c in plan(study, preset=preset).points:
            key = (c.dataset, c.classes, c.size, c.output, c.n_train, c.width, c.depth, c.epochs, c.arch)
            if c.arch != "fcn" or c.dataset not in ("digits", "mnist5k") or key in seen or c.regime != "sgd":
                continue
            data = W.load_data(c)
            dims = [data.d] + [c.width] * (c.depth - 1) + [1 if c.output == "single" else data.n_classes]
            seen[key] = W.point_flops(c)
            assert seen[key] == 6.0 * len(data.x_train) * sum(a * b for a, b in zip(dims, dims[1:])) * c.epochs, key
    assert len({k[0] for k in seen}) >= 1 and len(seen) > 20
    assert W.point_flops(W.WidthDepthInitConfig(**{**TINY, "arch": "cnn"})) is None


def test_probe_keeps_the_step_shapes_and_its_lengths_differ_only_in_steps():
    """--dry-run's probe of a point: the same model and minibatch size, PROBE_BATCHES
    minibatches an epoch, epochs for the steps asked; two lengths differ in epochs alone, so
    their FLOPs differ by the steps between them. Every paper point has a valid probe."""
    study = get_study("width-depth-init")
    assert study.probe is W.probe_point
    for c in plan(study, preset="paper").points:
        if c.regime == "linearised":  # no training: a share of the points is solved, all at 4 PROBE_BATCHES
            a, b, w, full = (W.probe_point(c, s) for s in (8, 16, 1, 32))
            assert (a.width, a.classes, a.regime) == (c.width, c.classes, c.regime) and a.n_test == 16
            assert w.n_train <= a.n_train == round(W._n_train(c) / 4) and b.n_train == round(W._n_train(c) / 2)
            assert W.point_flops(b) > W.point_flops(a) and full.n_train == W.probe_point(c, 64).n_train == W._n_train(c)
            continue
        a, b = W.probe_point(c, 8), W.probe_point(c, 16)
        assert (a.width, a.depth, a.init, a.batch_size, a.lr, a.classes, a.output) == \
            (c.width, c.depth, c.init, c.batch_size, c.lr, c.classes, c.output)
        assert a.n_train == b.n_train == min(W._n_train(c), W.PROBE_BATCHES * c.batch_size)
        assert a.mc_samples == 0 and a.target_loss == 0 and a.target_acc == 0 and a.early_epoch == 0 and a.n_test == 16
        assert a.fd_points == 0  # and so no per-layer spectral change (its SVDs dominated the paper probes)
        w = W.probe_point(c, 1)  # the warm-up: one minibatch, not one epoch of PROBE_BATCHES
        assert (w.epochs, w.n_train) == (1, min(W._n_train(c), c.batch_size))
        if a.n_train == W.PROBE_BATCHES * c.batch_size:
            assert (a.epochs, b.epochs) == (1, 2)
            per_step = W.point_flops(c) / c.epochs / (W._n_train(c) / c.batch_size)
            assert W.point_flops(b) - W.point_flops(a) == pytest.approx(8 * per_step)
    # a point with fewer points than PROBE_BATCHES minibatches: more epochs over all of them
    small = W.WidthDepthInitConfig(**TINY)  # 60 points, batch 20: 3 steps an epoch
    assert (W.probe_point(small, 8).n_train, W.probe_point(small, 8).epochs, W.probe_point(small, 16).epochs) == (60, 3, 5)


def test_no_fd_check_means_no_spectral_change():
    """fd_points=0 (a --dry-run probe) turns the per-layer spectral change off with the
    finite-difference check; the default keeps both."""
    on, off = (W.run_points(cfgs(1, width=8, depth=3, init="he", epochs=1, fd_points=f))[0][-1] for f in (10, 0))
    assert on["spectral_change_max"] is not None and len(on["spectral_change_layers"]) == 3
    assert off["spectral_change_max"] is None and off["fd_ratio"] is None


def test_run_points_rows_and_mc_against_exact():
    out = W.run_points(cfgs(2, width=16, depth=2, init="he", mc_samples=400, mc_points=20, mc_width=16,
                            target_loss=1.5, target_acc=0.0))
    assert len(out) == 2
    for rows in out:
        epochs = [r for r in rows if r["kind"] == "epoch"]
        (final,) = [r for r in rows if r["kind"] == "final"]
        assert [r["epoch"] for r in epochs] == [1, 2, 3, 4]
        assert all(len(r["kappa_layers"]) == 2 for r in epochs)
        assert final["kappa"] == epochs[-1]["kappa"] > 0
        d = final["d"]
        assert final["grad_norm2"] == pytest.approx(final["stability"] * (d + 2) / 0.1**2)
        assert final["stability"] > 0 and final["stability_init"] > 0
        assert 0 <= final["train_acc"] <= 1 and final["n_train"] == 60
        if final["reached_target"]:
            assert final["train_loss_at_target"] <= 1.5 and final["epoch_at_target"] <= 4
            assert final["kappa_at_target"] == epochs[final["epoch_at_target"] - 1]["kappa"]
        else:  # never reached: nothing measured there, no end-of-schedule value in its place
            assert final["stability_at_target"] is None and final["kappa_at_target"] is None
        for k in ("fd_ratio", "fd_ratio_init"):  # the finite difference against the linear formula
            assert 0.5 < final[k] < 1.5, (k, final[k])
        z = (final["mc_stability"] - final["mc_exact"]) / final["mc_stderr"]
        assert abs(z) < 4.5, z
        json.dumps(rows)  # rows are JSON-able


def test_single_output_squared_loss_and_conv_variants():
    (rows, *_) = W.run_points(cfgs(1, output="single", classes=(0, 1), width=8, depth=3))
    final = rows[-1]
    assert final["kind"] == "final" and math.isfinite(final["stability"])
    for arch in ("cnn", "resnet"):
        out = W.run_points(cfgs(2, arch=arch, width=4, depth=3, epochs=2, init="ntk"))
        assert all(r[-1]["kind"] == "final" and r[-1]["stability"] > 0 for r in out)


def test_divergence_becomes_a_numerical_error():
    out = W.run_points(cfgs(2, width=32, depth=4, lr=1e7, momentum=0.0))
    assert all(isinstance(o, NumericalError) for o in out)


def test_tiny_sweep_writes_claims_and_figures(tmp_path):
    study = W.STUDY.__class__(**{**W.STUDY.__dict__, "presets": {"tiny": Preset(
        {**TINY, "mc_samples": 50, "mc_points": 10, "mc_width": 8, "target_loss": 1.0, "target_acc": 0.0},
        ({"init": ["he", "lecun"], "depth": [2, 3], "width": [2, 4, 8, 32]},
         {"init": ["small"], "depth": [2], "width": [8, 32], "lr": [0.3]}), n_seeds=2)}})
    p = plan(study, preset="tiny")
    summary = execute(p, tmp_path / "run", SweepOptions(quiet=True))
    claims = {c["id"]: c for c in summary["claims"]}
    assert set(claims) == {"width-peak", "width-peak-location", "width-peak-lazy-limit", "width-peak-n-train",
                           "depth-init-at-init", "depth-init-trained-lecun", "depth-init-trained-he",
                           "depth-init-trained-ntk", "depth-lecun-nonlazy", "nonlazy-width-early", "nonlazy-width",
                           "kappa", "kappa-width", "mc-identity"}
    assert claims["mc-identity"]["kind"] == "self-check" and claims["depth-lecun-nonlazy"]["kind"] == "exploratory"
    assert all(c["control"] for c in claims.values() if c["kind"] == "claim" and c["verdict"] != "not applicable")
    assert not summary["problems"], summary["problems"]
    # 50 draws at 10 points: too few to place the estimate inside the ±5 % band, never outside it
    assert claims["mc-identity"]["verdict"] != "contradicted", claims["mc-identity"]["evidence"]
    figs = {f.name for f in (tmp_path / "run" / "figures").iterdir()}
    # 4 epochs on 60 digits: no network reaches the loss target, so nothing is drawn at equal fit
    # (no end-of-schedule value stands in for it); the end of the schedule is drawn as its own
    assert {"stability_vs_width_end.png", "stability_vs_depth_end.png", "lazy_vs_nonlazy_end.png", "kappa.png"} <= figs
    assert "stability_vs_width.png" not in figs
    # 4 epochs: no loss change over the last 10 epochs can be measured, so no network is on a plateau
    assert claims["width-peak"]["excluded"][0] == {"premise": "plateau-acc", "excluded": 32, "of": 32,
                                                    "detail": W.PREMISES["plateau-acc"].description}
    assert (tmp_path / "run" / "report.html").exists()


def test_stability_in_chunks_equals_one_pass():
    from robustlab.models.deep import DeepMLP
    from robustlab.utils import make_generator

    model = DeepMLP(20, 64, 3, 5, generators=[make_generator(s) for s in range(3)], dtype=torch.float64)
    x = torch.randn(37, 20, generator=make_generator(1, "x"), dtype=torch.float64)
    whole = W._per_member_stability(model, x, 0.1, 3, width=64)
    chunked = W._per_member_stability(model, x, 0.1, 3, width=64, budget=64 * 3 * 5)  # 5 points a chunk
    torch.testing.assert_close(whole, chunked, rtol=1e-12, atol=0)
    one = W._per_member_stability(model.member(2), x, 0.1, 1, width=64)
    torch.testing.assert_close(whole[2:], one, rtol=1e-12, atol=0)


def test_at_target_values_of_the_copies_that_stopped_equal_their_final_values():
    """``stop_at_target``: a copy's values at the target are measured on a sub-ensemble of the
    copies reaching it in that epoch; the copy is frozen from then on, so the full ensemble's
    final measurement must give the same numbers (the sub-ensemble is not another network)."""
    out = W.run_points(cfgs(5, width=32, depth=2, init="he", epochs=30, decay_start=0, lr=0.1, batch_size=10,
                            target_loss=0.6, target_acc=0.0, stop_at_target=True))
    finals = [rows[-1] for rows in out]
    epochs = [f["epoch_at_target"] for f in finals if f["reached_target"]]
    assert len(epochs) >= 3 and len(set(epochs)) >= 2, f"copies must stop at different epochs: {epochs}"
    for f in finals:
        if f["reached_target"]:
            for k in ("train_loss", "train_acc", "test_acc", "stability"):
                assert f[f"{k}_at_target"] == pytest.approx(f[k], rel=1e-5, abs=1e-7), k


# A run whose second checkpoint save is its last act: SIGKILL right after the file is written.
_DIES_AFTER_TWO_SAVES = """
import os, signal, sys
import robustlab.sweep.checkpoint as ck
ck.CHECKPOINT_EVERY_S = 0.0  # a save at every epoch boundary
save, n = ck.Checkpoint.save, [0]
def save_then_die(self, state, **kw):
    save(self, state, **kw)
    n[0] += 1
    if n[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
ck.Checkpoint.save = save_then_die
from robustlab.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_group_killed_while_it_trains_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    """SIGKILL a run right after a group saved its state at epoch 2: the checkpoint is in the
    run's checkpoints/ folder, the re-run goes on from it (it saves nothing more and starts no
    epoch before 3), and its records equal an uninterrupted run's but for the timing fields;
    the folder is gone once the run is done."""
    import subprocess
    import sys

    from robustlab import records
    from robustlab.sweep import checkpoint

    args = ["run", "width-depth-init", "--grid", "width=16", "--grid", "depth=3", "--grid", "init=he",
            "--grid", "lr=0.1,0.05", "--seeds", "2", "--workers", "1", "--quiet",
            # the blocks that set their own regime or schedule (the lazy limit, the depth blocks) made one
            "--grid", "regime=sgd", "--grid", "epochs=6", "--grid", "decay_start=40",
            *[a for kv in ("dataset=digits", "size=8", "n_train=60", "n_test=40", "batch_size=20",
                           "mc_samples=0", "target_loss=0", "early_epoch=0", "init_draws=0", "output=multi",
                           "gamma=2", "classes=", "loss_marks=", "early_steps=") for a in ("--set", kv)]]  # one block of the preset, two rates: 2 groups
    out, clean = tmp_path / "killed", tmp_path / "clean"
    res = subprocess.run([sys.executable, "-c", _DIES_AFTER_TWO_SAVES, *args, "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == -9, res.stderr
    (saved,) = (out / "checkpoints").glob("*.pt")
    assert checkpoint.progress_of(out / "checkpoints") == ["he depth 3 width 16 epoch 2/6"]  # for the log line
    assert checkpoint.Checkpoint(saved, torch.load(saved, weights_only=True)["keys"]).load()["train"]["epoch"] == 2
    epochs, real = [], W.run.train_supervised

    mapped = []

    def train(*a, **k):  # the epoch each group's training starts from
        epochs.append(k["resume"]["epoch"] if k.get("resume") else 0)
        on_epoch = k["on_epoch"]

        def check(epoch):  # while it trains, the loaded checkpoint is no longer mapped
            mapped.append(str(saved.name) in Path("/proc/self/maps").read_text())
            on_epoch(epoch)

        return real(*a, **{**k, "on_epoch": check})

    monkeypatch.setattr(W.run, "train_supervised", train)
    assert main([*args, "--out", str(out)]) == 0  # resumes
    monkeypatch.setattr(W.run, "train_supervised", real)
    assert epochs == [2, 0]  # the killed group goes on from its epoch 2, the other starts afresh
    assert mapped and not any(mapped)
    assert not (out / "checkpoints").exists()
    assert main([*args, "--out", str(clean)]) == 0
    timing = {"seconds", "train_seconds", "gflops", "cpu_seconds"}
    rows = [[{k: v for k, v in r.items() if k not in timing} for r in records.read_jsonl(d / "results.jsonl")]
            for d in (out, clean)]
    assert rows[0] == rows[1] and len(rows[0]) == 4 * 7  # two groups of 2 seeds: 6 epoch rows and a final row each


def test_width_slices_split_the_old_one_by_init_and_each_keeps_the_control():
    """paper-width-he and paper-width-lecun are the one paper-width slice (measured 1,758 CPU-s,
    over 15 min on 2 cores) split along init, nothing cut: together exactly its points, each with
    the small-init sweep (width-peak's control) and one lazy init's sweeps."""
    import dataclasses

    from robustlab.config import config_hash

    study = get_study("width-depth-init")
    old_grid = ({"init": ["he", "lecun"], "depth": [2, 3, 4], "width": [2**i for i in range(11)]},
                {"init": ["he", "lecun"], "depth": [2], "classes": [(0, 1)], "width": [2**i for i in range(1, 11)]},
                {"init": ["small"], "depth": [2], "width": [2**i for i in range(11)]})
    old_study = dataclasses.replace(study, presets={"old": Preset(W.PAPER_BASE, old_grid, n_seeds=5)})
    old = {config_hash(c.to_dict()) for c in plan(old_study, preset="old").points}
    keys = {}
    for init in ("he", "lecun"):
        pts = plan(study, preset=f"paper-width-{init}").points
        keys[init] = {config_hash(c.to_dict()) for c in pts}
        assert {c.init for c in pts} == {init, "small"}
        assert {c.width for c in pts if c.init == "small"} == {2**i for i in range(11)}
    assert keys["he"] | keys["lecun"] == old and len(old) == 485
    # the lazy limit's slice carries its control too: the same small-init points
    lazy = plan(study, preset="paper-lazy-limit").points
    small = {config_hash(c.to_dict()) for c in lazy if c.init == "small"}
    assert len(small) == 55 and small <= keys["he"] & keys["lecun"]


def test_gpu_paper_script_runs_every_width_depth_init_paper_preset():
    text = (Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_paper.sh").read_text()
    listed = {line.strip().strip('"').split()[1] for line in text.splitlines()
              if line.strip().startswith('"width-depth-init ')}
    assert listed == {p for p in get_study("width-depth-init").presets if p.startswith("paper")}


def test_the_plateau_quantities_are_recorded_and_agree_with_the_epoch_trace():
    """wdi5 (App. E.2 plateau): the final row records |Δ loss| and |Δ accuracy| of the running training trace
    over the last 10 epochs (the same numbers the epoch rows give, so old records re-decide identically) and P
    on the first 100 held-out points at epoch T - 10 and at the end."""
    out = W.run_points(cfgs(2, width=16, depth=2, init="he", epochs=12, fd_points=0))
    frame = pd.DataFrame([dict(r, point="p", seed=i) for i, rows in enumerate(out) for r in rows])
    recorded = frame[frame["kind"] == "final"].reset_index(drop=True)
    from_trace = W.finals(frame.drop(columns=["loss_drop_last10", "acc_change_last10"])).reset_index(drop=True)
    for rows, (_, f), (_, g) in zip(out, recorded.iterrows(), from_trace.iterrows()):
        ep = {r["epoch"]: r for r in rows if r["kind"] == "epoch"}
        assert f["loss_drop_last10"] == pytest.approx(abs(ep[12]["loss"] - ep[2]["loss"]), rel=1e-12)
        assert f["acc_change_last10"] == pytest.approx(abs(ep[12]["train_acc_running"] - ep[2]["train_acc_running"]))
        assert g["loss_drop_last10"] == pytest.approx(f["loss_drop_last10"], rel=1e-12)
        assert g["acc_change_last10"] == pytest.approx(f["acc_change_last10"], abs=1e-12)
        assert f["stability_head"] > 0 and f["stability_head_last10"] > 0
        # n_test 40 < 100: the first 100 held-out points are all of them, so the end's P on them is the end's P
        assert f["stability_head"] == pytest.approx(f["stability"], rel=1e-12)
    short = W.run_points(cfgs(1, width=8, depth=2, epochs=4))[0][-1]
    assert short["loss_drop_last10"] is None and short["acc_change_last10"] is None
    assert short["stability_head_last10"] is None


def test_the_alpha_arm_fields_leave_every_stored_points_key_unchanged():
    """alpha, fd_draws and lin_steps came after the paper slices were stored: at their defaults they stay out
    of the key, so every preset point without the alpha arm keeps the key it had before them (its dict without
    the three fields), and the alpha arm's points, which set them, are keyed on them."""
    from robustlab.config import config_hash

    new = ("alpha", "fd_draws", "lin_steps")
    study = get_study("width-depth-init")
    for preset in ("quick", "paper-depth", "paper-lazy-limit"):
        for c in plan(study, preset=preset).points:
            d = c.to_dict()
            if all(d[f] == W.WidthDepthInitConfig().to_dict()[f] for f in new):
                assert c.key() == config_hash({k: v for k, v in d.items() if k not in new})
    arm = [c for c in plan(study, preset="paper-alpha").points if c.regime == "alpha"]
    assert arm and all(c.key() == config_hash(c.key_dict()) and {"alpha", "fd_draws"} <= set(c.key_dict())
                       for c in arm)
