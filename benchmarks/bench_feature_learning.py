"""Study A's training: the ensemble dimension against a Python loop over seeds.

E seeds of the patch CNN train with one-step adversarial training (GradientStep, η̃=15,
ε=0.4) and, separately, standard training, either as one (E, k, m, d) ensemble in a single
batched pass, or one model per seed in a Python loop over the same code. Both must produce
the same weights (checked bit for bit: every GEMM of the batch and every elementwise pass is
per member), so the ratio is pure speed. Two scales, printed side by side with the ratios:

* the quick preset's (P=48, d=64, 64 samples). A one-step-training step of the ensemble is
  4 batched GEMMs of 2·E·N·P·d·k·m = 25 MFLOP each (E=8), ~1.7 ms at the ~60 GFLOP/s these
  skinny (k·m = 8) products reach on one core, at E=1 and E=8 alike, plus ~9 passes over the
  6.3 MB (E, N, P, d) input (~60 MB, L3-resident at ~85 GB/s: ~0.7 ms). The loop does the same
  FLOPs (its 0.8 MB per seed even stays in L2) and adds per-seed dispatch (~0.25 ms a
  seed-step). Loop/ensemble is therefore bounded by (GEMM + dispatch) / GEMM ≈ 2 here; 3×
  would need the loop's dispatch to cost twice a seed's GEMMs.
* a small one (P=16, d=16, 32 samples), where per-step dispatch dominates and batching pays.

A last line times a whole study point (``run_points``: data, training, probes, evaluation) at
the quick scale, 60 steps (evaluation, on 200 test points, is most of it there).

Then the images experiment's strong final evaluation (PGD on cross-entropy and on the margin,
50 steps each) of a 6-seed SmallCNN ensemble trained as in the quick preset, on the test
images: with ``early_stop`` (a test image leaves the batch once every copy misclassifies it)
against the full attack, the per-sample outcome checked equal.

Run: ``python benchmarks/bench_feature_learning.py`` (CPU, one thread, about a minute).
Times are CPU times of this process (robust to a shared machine; the load average is printed),
best of interleaved repeats. Like the sweep runner, the benchmark first makes glibc keep freed
memory (:func:`robustlab.utils.retain_freed_memory`).
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import torch
from _timing import best_times  # benchmarks/ is on sys.path when run as a script

from robustlab.data.patches import PatchSpec, sample_ensemble
from robustlab.models.patch_cnn import PatchCNN
from robustlab.studies.feature_learning import FeatureLearningConfig, run_points
from robustlab.train.feature import FeatureTrainSpec, train_patch_cnn
from robustlab.utils import make_generator, retain_freed_memory

E, STEPS = 8, 60
SCALES = {"quick (P=48, d=64, N=64)": (PatchSpec(k=2, P=48, d=64, alpha=1.0, beta=0.4), 64),
          "small (P=16, d=16, N=32)": (PatchSpec(k=2, P=16, d=16, alpha=1.0, beta=0.4), 32)}
METHODS = ("gradient_step", "standard")


def train(seeds: list[int], method: str, spec: PatchSpec, n: int) -> torch.Tensor:
    feats, tr, te = sample_ensemble(spec, seeds, n, 64, make_generator)
    model = PatchCNN(len(seeds), 2, 4, spec.d, sigma0=0.05, generators=[make_generator(s, "init") for s in seeds])
    spec = FeatureTrainSpec(method=method, steps=STEPS, lr=3.0, eps=0.4, eta_tilde=15.0, probe_every=5,
                            eval_every=STEPS, eval_pgd_steps=0)
    train_patch_cnn(model, feats, tr, te, spec)
    return model.W.detach()


def main() -> None:
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    retain_freed_memory()
    seeds = list(range(E))
    load = os.getloadavg()[0]
    print(f"patch CNN, {E} seeds x {STEPS} steps, m=4, CPU seconds, 1 thread (load average {load:.1f})")
    head = "".join(f" | {m:^27s}" for m in METHODS)
    print(f"{'scale':26s}{head}")
    print(f"{'':26s}" + " | ensemble     loop  loop/ens" * len(METHODS))
    mismatches = []
    for scale, (spec, n) in SCALES.items():
        cells = []
        for method in METHODS:
            w_ens = train(seeds, method, spec, n)
            w_loop = torch.cat([train([s], method, spec, n) for s in seeds])
            if not torch.equal(w_ens, w_loop):
                mismatches.append(f"{scale} {method}: max |W_ens - W_loop| = {(w_ens - w_loop).abs().max().item():.1e}")
            t = best_times({"ensemble": lambda m=method, sp=spec, n=n: train(seeds, m, sp, n),
                            "loop": lambda m=method, sp=spec, n=n: [train([s], m, sp, n) for s in seeds]})
            cells.append(f" | {t['ensemble']:8.3f} {t['loop']:8.3f} {t['loop'] / t['ensemble']:8.2f}x")
        print(f"{scale:26s}" + "".join(cells))
    cfgs = [FeatureLearningConfig(seed=s, steps=STEPS) for s in seeds]
    t = best_times({"ensemble": lambda: run_points(cfgs, "cpu"),
                    "loop": lambda: [run_points([c], "cpu") for c in cfgs]}, rounds=2)
    print(f"{'run_points, quick, main':26s} | {t['ensemble']:8.3f} {t['loop']:8.3f} {t['loop'] / t['ensemble']:8.2f}x"
          "   (gradient_step; whole study point, evaluation included)")
    print("weights: ensemble == loop bit for bit" if not mismatches else "weights DIFFER: " + "; ".join(mismatches))
    bench_ensemble_eval()
    print(f"(load average at the end {os.getloadavg()[0]:.1f})")


def bench_ensemble_eval() -> None:
    from robustlab.metrics import robust_accuracy
    from robustlab.models.ensemble import Flat, fold
    from robustlab.models.small_cnn import SmallCNN
    from robustlab.studies.feature_learning.presets import QUICK_IMAGE_SEEDS
    from robustlab.studies.feature_learning.run import _load_split
    from robustlab.train.images import train_images

    print(f"\nimages, final evaluation of a {QUICK_IMAGE_SEEDS}-seed SmallCNN ensemble (quick settings), CPU seconds")
    print(f"{'dataset, training':26s} | {'test':>5s} {'early stop':>10s} {'full':>8s} {'full/early':>10s}  robust acc")
    for dataset, extra in (("digits", {}), ("mnist5k", {"image_size": 14, "max_train": 800, "max_test": 300,
                                                        "image_lr": 0.1, "image_batch": 32, "image_pgd_steps": 3})):
        for method in ("standard", "pgd"):
            seeds = list(range(QUICK_IMAGE_SEEDS))
            cfgs = [FeatureLearningConfig(experiment="images", method=method, dataset=dataset, epochs=6, seed=s,
                                          **extra) for s in seeds]
            data = _load_split(cfgs[0])
            E = len(seeds)
            model = SmallCNN(E, data.x_train.shape[1], data.n_classes, width=cfgs[0].width,
                             generators=[make_generator(s, "small-cnn") for s in seeds])
            spec = cfgs[0].image_spec()
            train_images(model, data.x_train, data.y_train, data.x_test, data.y_test,
                         dataclasses.replace(spec, final_pgd_steps=0, eval_pgd_steps=0),
                         batch_generator=make_generator(0, "b"), attack_generator=make_generator(0, "a"))
            flat = Flat(model, E).eval()
            xe, ye = fold(data.x_test.unsqueeze(0).expand(E, *data.x_test.shape)), data.y_test.repeat(E)
            attacks = spec.final_attacks()
            res = {}

            def ev(early: bool, flat=flat, xe=xe, ye=ye, attacks=attacks, res=res) -> None:
                res[early] = robust_accuracy(flat, xe, ye, attacks, generator=make_generator(0, "eval"),
                                             per_sample=True, early_stop=early)

            t = best_times({"early": lambda: ev(True), "full": lambda: ev(False)}, rounds=2)
            same = "same per sample" if torch.equal(res[True], res[False]) else "DIFFERENT"
            print(f"{dataset + ', ' + method:26s} | {data.y_test.shape[0]:5d} {t['early']:10.3f} {t['full']:8.3f} "
                  f"{t['full'] / t['early']:9.2f}x  {res[True].float().mean():.3f} ({same})")


if __name__ == "__main__":
    main()
