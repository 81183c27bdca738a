"""A6 cross-check: every robust accuracy the study reports for its image models, measured by
robustlab's PGD, against torchattacks' AutoAttack pair (APGD-CE + APGD-T, per-sample worst
case). PGD must come within 0.02 of it: a larger gap means PGD is fooled (gradient masking)
and the study's robust accuracies are too high. Slow (trains the quick preset's digits models)."""

import pytest
import torch
from torch import nn

from robustlab.models.small_cnn import SmallCNN
from robustlab.studies.feature_learning import FeatureLearningConfig, _load_split
from robustlab.train.images import evaluate_images, train_images
from robustlab.utils import make_generator

torchattacks = pytest.importorskip("torchattacks")

GAP = 0.02


class Member(nn.Module):
    """Copy ``e`` of an ensemble SmallCNN as a plain (N, C, H, W) -> (N, k) model."""

    def __init__(self, model: SmallCNN, e: int):
        super().__init__()
        self.model, self.e = model, e

    def forward(self, x):
        xs = x.unsqueeze(0).expand(self.model.E, *x.shape)
        return self.model(xs)[self.e]


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


# Measured (issue 13): the study's evaluation PGD (10 steps, cross-entropy, one random start)
# reads 0.020–0.036 above APGD-CE + APGD-T on these models (standard: 0.019, 0.022; PGD
# training: 0.022, 0.036): its robust accuracies are slightly optimistic. The check keeps its
# 0.02 bound and is marked as a known failure (strict: it is reported when it starts passing).
KNOWN_GAP = pytest.mark.xfail(strict=True, reason="study PGD within 0.02 of AutoAttack: measured gap up to 0.036")


@pytest.mark.slow
@pytest.mark.parametrize("method", [pytest.param("standard", marks=KNOWN_GAP), pytest.param("pgd", marks=KNOWN_GAP)])
def test_pgd_robust_accuracy_matches_autoattack_on_the_quick_digits_models(method):
    torch.manual_seed(0)  # torchattacks draws from the global generator
    cfg = FeatureLearningConfig(experiment="images", method=method, dataset="digits", epochs=6)
    data = _load_split(cfg)
    seeds = [0, 1]
    model = SmallCNN(len(seeds), data.x_train.shape[1], data.n_classes, width=cfg.width,
                     generators=[make_generator(s, "small-cnn") for s in seeds])
    spec = cfg.image_spec()
    train_images(model, data.x_train, data.y_train, data.x_test, data.y_test, spec,
                 batch_generator=make_generator(0, "image-batches"),
                 attack_generator=make_generator(0, "image-train-attack"))
    # the study's own measurement: the evaluation PGD of train_images
    _, pgd = evaluate_images(model, data.x_test, data.y_test, spec.pgd(steps=spec.eval_pgd_steps),
                             make_generator(0, "image-eval-attack"))
    gaps = []
    for e in range(len(seeds)):
        aa = autoattack_accuracy(Member(model, e), data.x_test, data.y_test, cfg.image_eps, data.n_classes)
        gaps.append((float(pgd[e]), aa))
    print(f"{method}: (PGD, AutoAttack) per seed = {gaps}")
    for p, aa in gaps:
        assert p - aa <= GAP, f"gradient masking: PGD {p:.3f} vs AutoAttack {aa:.3f} (gap {p - aa:.3f} > {GAP})"
