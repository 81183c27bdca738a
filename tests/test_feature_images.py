"""Real-image training for the feature-learning paper's Sec. 6 and the Ilyas et al. 2019 non-robust dataset."""

import pytest
import torch

from robustlab.config import ConfigError
from robustlab.data import load_images
from robustlab.models.small_cnn import SmallCNN
from robustlab.train.images import ImageTrainSpec, nonrobust_dataset, train_images
from robustlab.utils import make_generator


@pytest.fixture(scope="module")
def digits():
    return load_images("digits", max_train=300, max_test=100)


def test_train_images_records_and_learns(digits):
    model = SmallCNN(2, 1, 10, width=4, generators=[make_generator(s, "c") for s in range(2)])
    spec = ImageTrainSpec(method="pgd", epochs=3, eps=0.1, pgd_steps=2, eval_pgd_steps=2, eval_every=2)
    h = train_images(model, digits.x_train, digits.y_train, digits.x_test, digits.y_test, spec,
                     batch_generator=make_generator(0, "b"), attack_generator=make_generator(0, "a"))
    assert h.epochs.tolist() == [2, 3]
    assert h.clean_acc.shape == (2, 2) and h.robust_acc.shape == (2, 2)
    assert (h.robust_acc <= h.clean_acc + 1e-9).all()  # robust counts only clean-correct points
    std = SmallCNN(2, 1, 10, width=4, generators=[make_generator(s, "c") for s in range(2)])
    h = train_images(std, digits.x_train, digits.y_train, digits.x_test, digits.y_test,
                     ImageTrainSpec(epochs=6, lr=0.1, eval_pgd_steps=0), batch_generator=make_generator(0, "b"))
    assert (h.train_loss[:, -1] < h.train_loss[:, 0] - 0.2).all()  # it learns:
    assert (h.clean_acc[:, -1] > 0.25).all()  # chance is 0.1


@pytest.mark.parametrize("momentum", [0.9, 0.0])
def test_momentum_step_is_torch_sgd_bit_for_bit(digits, momentum):
    # train_images steps without torch.optim (whose first use imports torch._dynamo)
    from robustlab.train.images import _momentum_step

    ours, ref = (SmallCNN(2, 1, 10, width=4, generators=[make_generator(s, "c") for s in range(2)]) for _ in range(2))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=momentum)
    xb, yb = digits.x_train[:32].expand(2, -1, -1, -1, -1), digits.y_train[:32].expand(2, -1)
    params, bufs = list(ours.parameters()), None
    for _ in range(4):
        loss = torch.nn.functional.cross_entropy(ours(xb).reshape(-1, 10), yb.reshape(-1))
        bufs = _momentum_step(params, torch.autograd.grad(loss, params), bufs, 0.05, momentum)
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(ref(xb).reshape(-1, 10), yb.reshape(-1)).backward()
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(ours.parameters(), ref.parameters()))
    fresh = SmallCNN(2, 1, 10, width=4, generators=[make_generator(s, "c") for s in range(2)])
    assert not any(torch.equal(a, b) for a, b in zip(ours.parameters(), fresh.parameters()))  # it moved


def test_nonrobust_dataset_stays_in_the_ball_and_box(digits):
    model = SmallCNN(2, 1, 10, width=4, generators=[make_generator(s, "c") for s in range(2)])
    x, y = digits.x_train[:50], digits.y_train[:50]
    x_adv, t, success = nonrobust_dataset(model, x, y, 10, eps=0.1, steps=3, step_size=0.05,
                                          generator=make_generator(0, "t"))
    assert x_adv.shape == (2, 50, 1, 8, 8) and t.shape == (2, 50) and success.shape == (2,)
    assert (x_adv - x).abs().max() <= 0.1 + 1e-6 and x_adv.min() >= 0 and x_adv.max() <= 1
    assert t.min() >= 0 and t.max() <= 9
    assert (t == y).float().mean() < 0.4  # targets drawn independently of y (about 1/10 coincide)
    x2, t2, _ = nonrobust_dataset(model, x, y, 10, eps=0.1, steps=3, step_size=0.05,
                                  generator=make_generator(0, "t"))
    assert torch.equal(x2, x_adv) and torch.equal(t2, t)


class _Widest(torch.nn.Module):
    """A SmallCNN that records the most images one forward pass saw."""

    def __init__(self, model):
        super().__init__()
        self.model, self.E, self.k, self.most = model, model.E, model.k, 0

    def forward(self, x):
        self.most = max(self.most, x.shape[0] * x.shape[1])
        return self.model(x)


def test_image_passes_take_a_chunk_at_a_time_with_the_same_numbers(digits, monkeypatch):
    # the full MNIST's 10,000 / 50,000 images × 5 members in one pass held 13.4 GB: both passes
    # go a chunk at a time; the result is the unchunked one (the draws and steps are per image)
    import robustlab.train.images as im
    from robustlab.attacks import PGD, Linf
    from robustlab.train.images import evaluate_images

    model = _Widest(SmallCNN(2, 1, 10, width=4, generators=[make_generator(s, "c") for s in range(2)]))
    x, y = digits.x_train[:90], digits.y_train[:90]
    pgd = PGD(Linf(0.1), steps=3, step_size=0.04, random_start=False)  # deterministic: comparable across chunks
    whole = nonrobust_dataset(model, x, y, 10, eps=0.1, steps=3, step_size=0.05, generator=make_generator(0, "t"))
    ev_whole = evaluate_images(model, x, y, pgd)
    assert model.most == 2 * 90
    monkeypatch.setattr(im, "IMAGE_CHUNK", 32)  # 90 images: chunks of 32, 32, 26
    model.most = 0
    entered = []  # a chunked pass maps its big blocks (robustlab.utils.large_blocks_mapped), once per pass
    real = im.large_blocks_mapped
    monkeypatch.setattr(im, "large_blocks_mapped", lambda: (entered.append(1), real())[1])
    parts = nonrobust_dataset(model, x, y, 10, eps=0.1, steps=3, step_size=0.05, generator=make_generator(0, "t"))
    ev_parts = evaluate_images(model, x, y, pgd)
    assert model.most == 2 * 32 and len(entered) == 2
    assert torch.equal(parts[1], whole[1])  # the targets: one draw for all images, as before
    assert torch.allclose(parts[0], whole[0], atol=1e-6) and torch.allclose(parts[2], whole[2])
    assert torch.equal(ev_parts[0], ev_whole[0]) and torch.allclose(ev_parts[1], ev_whole[1])
    assert (ev_whole[1] <= ev_whole[0]).all() and (ev_whole[0] > 0).all()


def test_targeted_steps_move_towards_the_target(digits):
    model = SmallCNN(1, 1, 10, width=4, generators=[make_generator(0, "c")])
    x, y = digits.x_train[:64], digits.y_train[:64]
    _, _, s0 = nonrobust_dataset(model, x, y, 10, eps=0.3, steps=1, step_size=1e-4, generator=make_generator(1, "t"))
    _, _, s1 = nonrobust_dataset(model, x, y, 10, eps=0.3, steps=10, step_size=0.05, generator=make_generator(1, "t"))
    assert s1.item() > s0.item() + 0.2


@pytest.mark.parametrize("kw, field", [({"method": "fgsm"}, "method"), ({"epochs": 0}, "epochs"),
                                       ({"lr": 0.0}, "lr"), ({"eps": -0.1}, "eps")])
def test_bad_image_spec(kw, field):
    with pytest.raises(ConfigError) as e:
        ImageTrainSpec(**kw)
    assert e.value.field == field


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_mirror_transfer_test_runs_on_the_pgd_model_only_when_asked():
    from robustlab.studies.feature_learning import FeatureLearningConfig, run_points

    tiny = dict(experiment="images", dataset="digits", epochs=1, max_train=120, max_test=60, image_pgd_steps=1,
                ilyas_steps=1, image_final_pgd_steps=2)
    for mirror, expect in ((False, 0), (True, 1)):
        cfgs = [FeatureLearningConfig(seed=s, method="pgd", ilyas_mirror=mirror, **tiny) for s in (0, 1)]
        rows = run_points(cfgs, "cpu")[0]
        il = [r for r in rows if r["kind"] == "ilyas"]
        assert len(il) == expect and all(0.0 <= r["ilyas_acc"] <= 1.0 for r in il)
