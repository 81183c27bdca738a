"""Study A's training: the ensemble dimension against a Python loop over seeds.

E seeds of the patch CNN train with one-step adversarial training (GradientStep, η̃=15,
ε=0.4) and, separately, standard training, either as one (E, k, m, d) ensemble in a single
batched pass, or one model per seed in a Python loop. Both produce the same weights (checked),
so the ratio is pure speed. Two scales: the quick preset's (P=48, d=64, 64 samples), where a
step is dominated by memory-bound passes over the (E, N, P, d) inputs and batching gains
little, and a small one (P=16, d=16, 32 samples), where per-step Python and dispatch
overhead dominate and batching pays. A last line times a whole study point (``run_points``:
data, training, probes, evaluation) at the quick scale.

Run: ``python benchmarks/bench_feature_learning.py`` (CPU, one thread, under a minute).
Times are CPU times of this process (robust to a shared machine), best of interleaved repeats.
"""

from __future__ import annotations

import warnings

import torch
from _timing import best_times  # benchmarks/ is on sys.path when run as a script

from robustlab.data.patches import PatchSpec, sample_ensemble
from robustlab.models.patch_cnn import PatchCNN
from robustlab.studies.feature_learning import FeatureLearningConfig, run_points
from robustlab.train.feature import FeatureTrainSpec, train_patch_cnn
from robustlab.utils import make_generator

E, STEPS = 8, 60
SCALES = {"quick scale (P=48, d=64, N=64)": (PatchSpec(k=2, P=48, d=64, alpha=1.0, beta=0.4), 64),
          "small scale (P=16, d=16, N=32)": (PatchSpec(k=2, P=16, d=16, alpha=1.0, beta=0.4), 32)}




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
    seeds = list(range(E))
    print(f"patch CNN, {E} seeds x {STEPS} steps, m=4, CPU time, 1 thread")
    for scale, (spec, n) in SCALES.items():
        print(f" {scale}")
        for method in ("gradient_step", "standard"):
            w_ens = train(seeds, method, spec, n)
            w_loop = torch.cat([train([s], method, spec, n) for s in seeds])
            err = (w_ens - w_loop).abs().max().item()
            t = best_times({"ensemble": lambda m=method, sp=spec, n=n: train(seeds, m, sp, n),
                            "loop": lambda m=method, sp=spec, n=n: [train([s], m, sp, n) for s in seeds]})
            print(f"  {method:14s} ensemble {t['ensemble']:6.2f}s   loop {t['loop']:6.2f}s   "
                  f"loop/ensemble = {t['loop'] / t['ensemble']:5.2f}x   (max |W_ens - W_loop| = {err:.1e})")
    cfgs = [FeatureLearningConfig(seed=s, steps=STEPS) for s in seeds]
    t = best_times({"ensemble": lambda: run_points(cfgs, "cpu"),
                    "loop": lambda: [run_points([c], "cpu") for c in cfgs]}, rounds=2)
    print(f"  run_points     ensemble {t['ensemble']:6.2f}s   loop {t['loop']:6.2f}s   "
          f"loop/ensemble = {t['loop'] / t['ensemble']:5.2f}x   (whole study point, evaluation included)")


if __name__ == "__main__":
    main()
