"""A6 cross-check: every robust accuracy the study reports for its image models (the final,
strong evaluation of ``train_images``: worst case per sample over 50-step PGD on cross-entropy
and on the margin), against torchattacks' AutoAttack pair (APGD-CE + APGD-T, per-sample worst
case). The study's number must come within 0.02 of it: a larger gap means the evaluation
attack is too weak (or fooled by gradient masking) and the reported robust accuracies are too
high. Slow (trains the quick preset's digits models)."""

import pytest
import torch
from torch import nn

from robustlab.models.ensemble import Member
from robustlab.models.small_cnn import SmallCNN
from robustlab.studies.feature_learning import FeatureLearningConfig
from robustlab.studies.feature_learning.run import _load_split
from robustlab.train.images import evaluate_images, train_images
from robustlab.utils import make_generator

torchattacks = pytest.importorskip("torchattacks")

GAP = 0.02


def autoattack_accuracy(net: nn.Module, x, y, eps: float, n_classes: int) -> float:
    """Robust accuracy under APGD-CE and APGD-T (worst case per sample), clean-correct only."""
    net.eval()
    with torch.no_grad():
        ok = net(x).argmax(-1) == y
    for atk in (torchattacks.APGD(net, norm="Linf", eps=eps, steps=50, n_restarts=1, loss="ce", seed=0),
                torchattacks.APGDT(net, norm="Linf", eps=eps, steps=50, n_restarts=1,
                                   n_classes=n_classes, seed=0)):
        x_adv = atk(x, y)
        assert (x_adv - x).abs().max() <= eps + 1e-5
        with torch.no_grad():
            ok &= net(x_adv).argmax(-1) == y
    return float(ok.float().mean())


# Measured (issue 13, same models): the per-epoch evaluation PGD (10 steps, cross-entropy, one
# random start), which the study used to report, read 0.019–0.039 above APGD-CE + APGD-T
# (standard: 0.019, 0.022; PGD training: 0.022, 0.039). The reported number is now the strong
# final evaluation, measured at −0.003…0.006 from AutoAttack; the per-epoch value is printed
# beside it.


@pytest.mark.slow
@pytest.mark.parametrize("method", ["standard", "pgd"])
def test_pgd_robust_accuracy_matches_autoattack_on_the_quick_digits_models(method):
    torch.manual_seed(0)  # torchattacks draws from the global generator
    cfg = FeatureLearningConfig(experiment="images", method=method, dataset="digits", epochs=6)
    data = _load_split(cfg)
    seeds = [0, 1]
    model = SmallCNN(len(seeds), data.x_train.shape[1], data.n_classes, width=cfg.width,
                     generators=[make_generator(s, "small-cnn") for s in seeds])
    spec = cfg.image_spec()
    hist = train_images(model, data.x_train, data.y_train, data.x_test, data.y_test, spec,
                        batch_generator=make_generator(0, "image-batches"),
                        attack_generator=make_generator(0, "image-train-attack"),
                        eval_generator=make_generator(0, "image-eval-attack"))
    assert spec.final_pgd_steps >= 50 and set(spec.final_losses) == {"ce", "margin"}
    pgd = hist.final_robust_acc  # what the study reports (the image_final row's robust_acc)
    # the cheap per-epoch attack at the same weights, for the record
    _, cheap = evaluate_images(model, data.x_test, data.y_test, spec.pgd(steps=spec.eval_pgd_steps),
                               make_generator(0, "image-eval-attack"))
    gaps = []
    for e in range(len(seeds)):
        aa = autoattack_accuracy(Member(model, e), data.x_test, data.y_test, cfg.image_eps, data.n_classes)
        gaps.append((float(pgd[e]), aa))
        print(f"{method} seed {seeds[e]}: reported {float(pgd[e]):.4f}, per-epoch PGD {float(cheap[e]):.4f}, "
              f"AutoAttack {aa:.4f}: gap {float(pgd[e]) - aa:+.4f} (was {float(cheap[e]) - aa:+.4f})")
    for p, aa in gaps:
        assert p - aa <= GAP, f"gradient masking: PGD {p:.3f} vs AutoAttack {aa:.3f} (gap {p - aa:.3f} > {GAP})"
