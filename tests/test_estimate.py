"""The dry-run estimator (robustlab.studies.estimate): which groups it times, how it scales
their time to the run, and the floor it never goes below."""

import pytest


def _fake_clock(monkeypatch, per_epoch, per_copy=False):
    """Replace the estimator's sweep and clock: a group takes 1 s of setup and
    per_epoch[lr] seconds an epoch (with ``per_copy``, that much for each of its points: a
    large ensemble's time grows with its copies), so every time is exact. Returns the list of
    the (lr, epochs) groups it ran, in order."""
    import types

    from robustlab.studies import estimate

    now, ran, sizes = [0.0], _Ran(), []

    def fake_sweep(pts, *a, **k):
        ran.append((pts[0].lr, pts[0].epochs))
        now[0] += (1.0 + per_epoch[pts[0].lr] * pts[0].epochs) * (len(pts) if per_copy else 1)
        sizes.append(len(pts))

    monkeypatch.setattr(estimate, "run_sweep", fake_sweep)
    monkeypatch.setattr(estimate, "time", types.SimpleNamespace(perf_counter=lambda: now[0], process_time=lambda: now[0]))
    ran.sizes = sizes
    return ran


class _Ran(list):
    sizes: list


def test_dry_run_with_a_cost_model_samples_the_cheap_half_and_states_the_floor(monkeypatch):
    """A study that counts its points' FLOPs: the samples come from the cheaper half of the
    groups, the estimate scales their time per FLOP to the whole run, and the floor is the
    run's FLOPs at the measured matmul rate over the workers."""
    import dataclasses

    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    flops = {0.05: 1e6, 0.1: 2e6, 0.2: 4e6, 0.4: 8e15}  # the last point alone would take hours
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: flops[c.lr])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2)
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda threads=None: 1e10)
    ran = []
    real = estimate.run_sweep
    monkeypatch.setattr(estimate, "run_sweep", lambda pts, *a, **k: (ran.append(pts[0].lr), real(pts, *a, **k))[1])
    e = estimate.estimate(p, SweepOptions(workers=2), samples=2)
    assert sorted(ran) == [0.05, 0.1]  # never the expensive group
    total = 2 * sum(flops.values())
    assert e["flops"] == pytest.approx(total)
    assert e["floor_seconds"] == pytest.approx(total / 1e10 / 2)
    assert e["estimate_seconds"] == pytest.approx(e["sample_seconds"] / (2 * 3e6) * total / 2)
    # a study without a cost model: evenly spread samples, no floor
    e = estimate.estimate(base.plan(get_study("smoke"), grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2),
                      SweepOptions(workers=2), samples=2)
    assert e["floor_seconds"] is None and e["flops"] is None


def test_dry_run_times_the_costlier_half_whole_or_by_two_probes(monkeypatch):
    """With a cost model and a probe, the costlier half of the groups gets its own time per
    FLOP: its group at the middle of its FLOPs runs whole where the cheaper half's rate says
    it is quick, its costliest through probes of one of its copies at 8 and 16 steps (after a
    warm-up), whose difference is the warm time per FLOP and whose rest is one copy's setup; no
    estimate is shorter than that costliest group. A fake clock whose groups take time per copy
    makes every time exact."""
    import dataclasses

    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    unit = {0.05: 1.0, 0.1: 1.0, 0.2: 1.0, 0.3: 2.0, 0.4: 3.0, 0.8: 1e9}  # FLOPs per seed and epoch
    per_epoch = {0.05: 0.01, 0.1: 0.01, 0.2: 0.01, 0.3: 0.02, 0.4: 0.03, 0.8: 100.0}  # seconds per group epoch
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: unit[c.lr] * c.epochs,
                                probe=lambda c, steps: dataclasses.replace(c, epochs=steps))
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.3,0.4,0.8"], n_seeds=2)
    ran = _fake_clock(monkeypatch, per_epoch, per_copy=True)
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda threads=None: 1e30)
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    # the cheaper half whole; of the costlier (0.3, 0.4, 0.8), 0.8 holds the middle of its FLOPs
    # and is the costliest: probed (one copy of its two), never run whole
    assert ran == [(0.05, 30), (0.1, 30), (0.2, 30), (0.8, 1), (0.8, 8), (0.8, 16)]  # a warm-up first
    assert ran.sizes == [2, 2, 2, 1, 1, 1]
    assert (e["sampled_groups"], e["sampled_points"], e["probed_groups"]) == (3, 6, 1)
    cheap_s, cheap_f = 3 * 2 * (1 + 0.3), 3 * 2 * 30.0
    heavy_f = 2 * 30 * (2.0 + 3.0 + 1e9)
    # probes: warm rate 800 s / 8e9 FLOPs (one copy); setup 1 s a copy; the group: 2 * (1 + 100 * 30) s
    heavy_s = 2 * (1 + 100.0 * 30)
    # the two halves over 2 workers: 1504 s; but the costliest group runs on one worker alone
    assert (cheap_s / cheap_f * cheap_f + heavy_s / (2 * 30 * 1e9) * heavy_f) / 2 < heavy_s
    assert e["estimate_seconds"] == pytest.approx(heavy_s)
    assert e["sample_seconds"] == pytest.approx(cheap_s + (1 + 100) + (1 + 800) + (1 + 1600))
    # a step too quick to tell from the setup's noise in 8 more steps: each round adds one
    # probe twice as long as the last and pairs the two, until the longer probe's extra time
    # is a quarter of the shorter's: (32, 64) adds 0.32 s to 1.32 s, (64, 128) 0.64 s to 1.64 s
    ran.clear()
    per_epoch[0.8] = 0.01
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran[3:] == [(0.8, 1), (0.8, 8), (0.8, 16), (0.8, 32), (0.8, 64), (0.8, 128)]
    assert e["sample_seconds"] == pytest.approx(cheap_s + 1.01 + sum(1 + 0.01 * s for s in (8, 16, 32, 64, 128)))
    assert e["estimate_seconds"] == pytest.approx(max((cheap_s + 2 * (1 + 0.3) / (2 * 30 * 1e9) * heavy_f) / 2,
                                                      2 * 1.3))
    # never resolved: PROBE_ROUNDS pairs, up to 256 steps, and the last pair's time stands
    ran.clear()
    per_epoch[0.8] = 1e-4
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran[3:] == [(0.8, 1)] + [(0.8, 8 * 2**j) for j in range(estimate.PROBE_ROUNDS + 1)]
    assert e["estimate_seconds"] == pytest.approx(max((cheap_s + 2 * (1 + 0.003) / (2 * 30 * 1e9) * heavy_f) / 2,
                                                      2 * 1.003))
    per_epoch[0.8] = 100.0
    # a costlier half quick enough to run whole: no probe
    ran.clear()
    unit[0.8], per_epoch[0.8] = 4.0, 0.04
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran == [(0.05, 30), (0.1, 30), (0.2, 30), (0.4, 30), (0.8, 30)]  # 0.4: the middle of 2+3+4
    assert (e["sampled_groups"], e["sampled_points"], e["probed_groups"]) == (5, 10, 0)
    heavy_s, heavy_t = 2 * ((1 + 0.9) + (1 + 1.2)), 2 * 30 * (3.0 + 4.0)
    assert e["estimate_seconds"] == pytest.approx((cheap_s + heavy_s / heavy_t * 2 * 30 * 9.0) / 2)
    # without a probe, a costliest group too slow to run whole leaves the cheaper half's rate
    ran.clear()
    unit[0.8], per_epoch[0.8] = 1e9, 100.0
    e = estimate.estimate(dataclasses.replace(p, study=dataclasses.replace(study, probe=None)), SweepOptions(workers=2),
                      samples=3)
    assert ran == [(0.05, 30), (0.1, 30), (0.2, 30)] and e["probed_groups"] == 0
    assert e["estimate_seconds"] == pytest.approx(cheap_s / cheap_f * 2 * 30 * (3 + 2 + 3 + 1e9) / 2)


def test_dry_run_runs_every_probe_even_where_two_are_the_same_point(monkeypatch):
    """Each timing has a store of its own: a store skips the points it holds, and a study's
    warm-up (a probe at 1 step) may be the same point as its shortest probe (both one epoch)."""
    import dataclasses

    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    smoke = get_study("smoke")
    calls = []
    study = dataclasses.replace(
        smoke, cost=lambda c: (1e15 if c.lr == 0.8 else 1.0) * c.epochs,
        probe=lambda c, steps: dataclasses.replace(c, epochs=max(1, steps // 8)),
        run_points=lambda cfgs, device="cpu": (calls.append((cfgs[0].lr, cfgs[0].epochs)), smoke.run_points(cfgs, device))[1])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.3,0.4,0.8"], n_seeds=1)
    e = estimate.estimate(p, SweepOptions(workers=1), samples=3)
    probed = [ep for lr, ep in calls if lr == 0.8]
    assert probed[:3] == [1, 1, 2] and e["probed_groups"] == 1  # the warm-up, then 8 and 16 steps
    assert 30 not in probed  # never the whole group


def test_dry_run_with_weights_samples_across_them_and_scales_by_weight(monkeypatch):
    """A study that weighs its points (no FLOPs): the samples are spread over the groups ranked
    by weight, the lightest and the heaviest included, and the estimate scales their time per
    unit of weight to the whole run. A missing weight falls back to groups spread over the grid."""
    import dataclasses

    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    w = {0.05: 3.0, 0.1: 1.0, 0.2: 4.0, 0.4: 2.0, 0.8: 0.0}
    study = dataclasses.replace(get_study("smoke"), weight=lambda c: w[c.lr])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4,0.8"], n_seeds=2)
    ran = []
    real = estimate.run_sweep
    monkeypatch.setattr(estimate, "run_sweep", lambda pts, *a, **k: (ran.append(pts[0].lr), real(pts, *a, **k))[1])
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran == [0.8, 0.4, 0.2]  # ranked by weight 0, 1, 2, 3, 4: the first, middle and last
    assert e["flops"] is None and e["floor_seconds"] is None
    assert e["estimate_seconds"] >= e["sample_seconds"] / (2 * (0.0 + 2.0 + 4.0)) * 2 * 10.0 / 2
    assert e["estimate_seconds"] == pytest.approx(e["sample_seconds"] / (2 * (0.0 + 2.0 + 4.0)) * 2 * 10.0 / 2) \
        or e["estimate_seconds"] <= e["sample_seconds"]  # or its longest group, where that is longer
    ran.clear()
    study = dataclasses.replace(study, weight=lambda c: None if c.lr == 0.8 else w[c.lr])
    e = estimate.estimate(base.plan(study, grids=["lr=0.05,0.1,0.2,0.4,0.8"], n_seeds=2), SweepOptions(workers=2), samples=3)
    assert ran == [0.05, 0.2, 0.8]  # the grid's first, middle and last
    assert e["estimate_seconds"] == pytest.approx(e["sample_seconds"] / 3 * 5 / 2) \
        or e["sample_seconds"] / 3 * 5 / 2 < e["estimate_seconds"] <= e["sample_seconds"]


def test_dry_run_with_weights_probes_a_group_too_long_to_run_whole(monkeypatch):
    """A study that weighs its points and probes some of them (feature-learning's image
    points: the full MNIST's groups take hours): the sampled groups run lightest first; one
    the last whole group's seconds per unit of weight says would take more than
    WHOLE_SAMPLE_SECONDS is timed through its probes instead, and one its probes say is quick
    runs whole after them. A fake clock makes every time exact."""
    import dataclasses

    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    unit = {0.05: 1.0, 0.4: 3.0, 0.8: 1e9}  # weight per seed and epoch
    per_epoch = {0.05: 0.01, 0.4: 0.03, 0.8: 100.0}  # seconds per group epoch
    study = dataclasses.replace(get_study("smoke"), weight=lambda c: unit[c.lr] * c.epochs,
                                probe=lambda c, steps: dataclasses.replace(c, epochs=steps) if c.lr == 0.8 else None)
    p = base.plan(study, grids=["lr=0.05,0.4,0.8"], n_seeds=2)
    ran = _fake_clock(monkeypatch, per_epoch)
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran == [(0.05, 30), (0.4, 30), (0.8, 1), (0.8, 8), (0.8, 16)]  # never 0.8 whole
    assert (e["sampled_groups"], e["sampled_points"], e["probed_groups"]) == (2, 4, 1)
    group_s = [1 + 0.3, 1 + 0.9, 1 + 100.0 * 30]  # the probed one: 1 s of setup and 30 epochs at the warm rate
    assert e["estimate_seconds"] == pytest.approx(group_s[2])  # on 2 workers, the longest group, not the mean
    assert e["sample_seconds"] == pytest.approx(1.3 + 1.9 + (1 + 100) + (1 + 800) + (1 + 1600))
    # probes that say the group is quick: it runs whole after them
    ran.clear()
    unit[0.8], per_epoch[0.8] = 100.0, 0.5  # 0.4's rate says 63 s, its probes 16 s
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran == [(0.05, 30), (0.4, 30), (0.8, 1), (0.8, 8), (0.8, 16), (0.8, 30)]
    assert e["probed_groups"] == 0 and e["sampled_groups"] == 3
    assert e["estimate_seconds"] == pytest.approx(16.0)
    # the study declines to probe every group: all run whole, as without a probe
    ran.clear()
    unit[0.8], per_epoch[0.8] = 1e9, 0.05
    study = dataclasses.replace(study, probe=lambda c, steps: None)
    e = estimate.estimate(dataclasses.replace(p, study=study), SweepOptions(workers=2), samples=3)
    assert ran == [(0.05, 30), (0.4, 30), (0.8, 30)] and e["probed_groups"] == 0


def test_dry_run_floor_with_cuda_is_the_gpu_rate_once(monkeypatch, capsys):
    """With device=cuda the local workers share one GPU: the floor is the run's FLOPs at that
    GPU's rate, not divided by the workers, and the estimate is never below it. (The device is
    faked here: the sampled points run on the CPU.)"""
    import dataclasses

    import torch

    from robustlab.cli import _dry_run
    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    flops = {0.05: 1e6, 0.1: 2e6, 0.2: 4e6, 0.4: 8e15}
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: flops[c.lr])
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2)
    asked = []
    monkeypatch.setattr("robustlab.utils.resolve_device", lambda name="cpu": torch.device("cuda"))
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda **k: (asked.append(k), 5e13)[1])
    e = estimate.estimate(p, SweepOptions(workers=4), samples=2)
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


def test_dry_run_states_its_cost_model_and_calibration_points(monkeypatch, capsys):
    """Every timing the estimate rests on is listed (the group as the plan tells it apart, its
    FLOPs, its seconds) with the cost model in words, and --dry-run prints both; a fake study
    whose groups cost a known time per FLOP is estimated exactly from them."""
    import dataclasses

    from robustlab.cli import _dry_run
    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    unit = {0.05: 1.0, 0.1: 2.0, 0.2: 4.0, 0.4: 8.0}  # FLOPs per seed and epoch
    per_epoch = {lr: 0.01 * u for lr, u in unit.items()}  # 0.01 s per FLOP a copy, plus 1 s of setup
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: unit[c.lr] * c.epochs, probe=None)
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.4"], n_seeds=2)
    _fake_clock(monkeypatch, per_epoch)
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda threads=None: 1e30)
    e = estimate.estimate(p, SweepOptions(workers=1), samples=2)
    # the cheaper half (0.05, 0.1) whole; of the costlier, 0.4 holds the middle of its FLOPs and is its costliest
    assert [s for _, s in e["calibration"]] == pytest.approx([1.3, 1.6, 3.4])
    assert all("lr=" in what and "GFLOP" in what and "seed" not in what for what, _ in e["calibration"])
    assert "FLOPs" in e["model"] and "costlier half at its own seconds per FLOP" in e["model"]
    assert e["busy"] == 1.0  # the fake clock's CPU seconds are its wall seconds: no contention
    # each half at its own seconds per FLOP: 2.9 s / 180 FLOPs, and 3.4 s / 480 for the 720 of 0.2 and 0.4;
    # the true time is 8.5 s (1.3 + 1.6 + 2.2 + 3.4): the 1 s of setup is not per FLOP
    assert e["estimate_seconds"] == pytest.approx(2.9 + 3.4 / 480 * 720)
    monkeypatch.setattr(estimate, "estimate", lambda *a, **k: e)
    assert _dry_run([p], SweepOptions(workers=1), "robustlab run smoke") == 0
    out = capsys.readouterr().out
    assert "model: time per group = its FLOPs" in out and out.count("calibration: ") == 3
    assert "on idle cores" not in out
    # timings that got half their core (a shared machine): the estimate on idle cores is half the estimate
    e["busy"] = 0.5
    assert _dry_run([p], SweepOptions(workers=1), "robustlab run smoke") == 0
    assert "got 50% of their cores" in capsys.readouterr().out


def test_dry_run_probes_a_small_costly_group_with_every_copy(monkeypatch):
    """A costly group whose probes are short (the cheaper half's rate puts its 16-step probe under
    ONE_COPY_SECONDS) is probed with all its copies, so its steps stand out of the setup's noise;
    its setup is then counted once."""
    import dataclasses

    from robustlab.studies import base, estimate, get_study
    from robustlab.sweep.runner import SweepOptions

    unit = {0.05: 1.0, 0.1: 1.0, 0.2: 1.0, 0.3: 2.0, 0.4: 3.0, 0.8: 10.0}  # FLOPs per seed and epoch
    per_epoch = {0.05: 0.01, 0.1: 0.01, 0.2: 0.01, 0.3: 0.02, 0.4: 0.03, 0.8: 2.0}  # 0.8: 60 s, too long whole
    study = dataclasses.replace(get_study("smoke"), cost=lambda c: unit[c.lr] * c.epochs,
                                probe=lambda c, steps: dataclasses.replace(c, epochs=steps))
    p = base.plan(study, grids=["lr=0.05,0.1,0.2,0.3,0.4,0.8"], n_seeds=2)
    ran = _fake_clock(monkeypatch, per_epoch, per_copy=True)
    monkeypatch.setattr("robustlab.utils.matmul_rate", lambda threads=None: 1e30)
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    # cheaper half: 7.8 s / 180 FLOPs; 0.8 whole: 600 FLOPs -> 26 s (<= 30: run whole) -- so make it longer
    assert e["probed_groups"] in (0, 1)
    unit[0.8] = 100.0  # 6000 FLOPs: 260 s whole, its 16-step probe of both copies 3200 FLOPs -> 139 s: one copy
    ran.clear(), ran.sizes.clear()
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran.sizes[3:] == [1, 1, 1] and e["probed_groups"] == 1
    monkeypatch.setattr(estimate, "ONE_COPY_SECONDS", 1e6)  # every probe counts as short: both copies
    ran.clear(), ran.sizes.clear()
    e = estimate.estimate(p, SweepOptions(workers=2), samples=3)
    assert ran.sizes[3:] == [1, 2, 2] and e["probed_groups"] == 1  # the warm-up is one point's, as before
    # probes of both copies: warm 2 * 2.0 * 8 s / (2 * 8 * 100 FLOPs); setup 2 * 1 s, counted once
    assert e["estimate_seconds"] == pytest.approx(2 * (1 + 2.0 * 30))
