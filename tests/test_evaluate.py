"""`robustlab.evaluate` and `robustlab evaluate`: robust accuracy per ε and attack and the
per-sample worst case; the library's APGD-CE and APGD-DLR agree with torchattacks' APGD on the
same small CNN and budgets within one sample in a hundred; bad input is one line, exit 2."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import robustlab
from robustlab.attacks import APGD, Linf
from robustlab.attacks.apgd import checkpoints, dlr_loss

SRC = str(Path(robustlab.__file__).resolve().parents[1])
MODEL_FILE = '''
from torch import nn


def small_cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1, stride=2),
                         nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16, 10))
'''


def small_cnn() -> nn.Module:
    ns: dict = {}
    exec(MODEL_FILE, ns)
    return ns["small_cnn"]()


@pytest.fixture(scope="module")
def cnn():
    """A small CNN trained for 20 epochs on 1,400 of the 8×8 digits (pixels in [0, 1]); 300
    held-out digits to attack. ~98 % clean accuracy, about half robust at ε = 0.1."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    tr, te = perm[:1400], perm[1400:1700]
    torch.manual_seed(0)
    net = small_cnn()
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(20):
        for b in torch.split(tr[torch.randperm(1400, generator=g)], 100):
            opt.zero_grad()
            nn.functional.cross_entropy(net(x[b]), y[b]).backward()
            opt.step()
    return net.eval(), x[te], y[te]


def cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "robustlab.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=env)


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("robustlab: error:"), r.stderr
    return lines[0]


def test_apgd_schedule_and_dlr_loss():
    assert checkpoints(100) == [21, 40, 56, 69, 79, 86, 92, 98]  # spacings 22, 19, 16, 13, 10, 7, 6, 6
    z = torch.tensor([[3.0, 1.0, 0.0, -1.0], [0.0, 2.0, 1.0, 5.0]])
    y = torch.tensor([0, 1])
    # correct: -(3 - 1) / (3 - 0); wrong: -(2 - 5) / (5 - 1)
    assert torch.allclose(dlr_loss(z, y), torch.tensor([-2 / 3, 3 / 4]))
    assert torch.allclose(dlr_loss(10 * z + 7, y), dlr_loss(z, y))  # shift and scale invariant
    with pytest.raises(ValueError):
        dlr_loss(torch.zeros(2, 2), torch.tensor([0, 1]))


@pytest.mark.parametrize("loss", ["ce", "dlr"])
def test_apgd_agrees_with_torchattacks(cnn, loss):
    """Robust accuracy under our APGD and torchattacks' APGD (100 steps, one restart, the same
    model, points and ε): within one sample in a hundred, at three budgets (ε = 0.05, 0.1,
    0.2: ~84 %, ~46 % and 0 % robust on this CNN)."""
    torchattacks = pytest.importorskip("torchattacks")
    net, x, y = cnn
    for eps in (0.05, 0.1, 0.2):
        ours = APGD(Linf(eps), steps=100, loss=loss)(net, x, y, generator=torch.Generator().manual_seed(1))
        theirs = torchattacks.APGD(net, norm="Linf", eps=eps, steps=100, n_restarts=1, loss=loss, seed=0)(x, y)
        with torch.no_grad():
            a = (net(ours).argmax(1) == y).float().mean().item()
            b = (net(theirs).argmax(1) == y).float().mean().item()
        assert abs(a - b) <= 0.01, (eps, loss, a, b)
        assert (ours - x).abs().max() <= eps + 1e-6 and ours.min() >= 0 and ours.max() <= 1


def test_evaluate_table_worst_case_and_figure(cnn, tmp_path):
    net, x, y = cnn
    ev = robustlab.evaluate(net, x, y, threat="linf", eps=[0.1, 0.05], attacks=["fgsm", "pgd", "apgd-ce", "apgd-dlr"],
                            steps=30)
    t = ev.table
    assert list(t["attack"]) == ["clean"] + ["fgsm", "pgd", "apgd-ce", "apgd-dlr", "worst case"] * 2
    assert list(t["eps"]) == [0.0] + [0.05] * 5 + [0.1] * 5  # sorted
    clean = t.loc[0, "accuracy"]
    assert clean > 0.95
    for e in (0.05, 0.1):
        sub = t[t["eps"] == e].set_index("attack")["accuracy"]
        assert sub["worst case"] <= sub.drop("worst case").min() <= clean
        assert sub["fgsm"] >= sub["apgd-ce"] - 0.02  # one step is weaker than 30 adaptive ones
    # the worst case is per sample: the AND of the attacks' columns and clean
    ps = ev.per_sample[ev.per_sample["eps"] == 0.1]
    both = ps["clean"] & ps["fgsm"] & ps["pgd"] & ps["apgd-ce"] & ps["apgd-dlr"]
    assert (ps["worst case"] == both).all() and len(ps) == len(y)
    assert t.set_index(["eps", "attack"]).loc[(0.1, "worst case"), "n_correct"] == both.sum()
    # same call, same numbers
    again = robustlab.evaluate(net, x, y, eps=[0.1, 0.05], attacks=["fgsm", "pgd", "apgd-ce", "apgd-dlr"], steps=30)
    pd.testing.assert_frame_equal(t, again.table)
    ev.figure(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 1000
    assert "worst case" in ev._repr_html_()


def test_normalized_wrapper_attacks_in_pixel_space(cnn):
    net, x, y = cnn
    mean, std = 0.3, 0.4
    # the same function, written as a model of normalised inputs
    inner = nn.Sequential(*[m for m in small_cnn()])
    inner.load_state_dict(net.state_dict())
    with torch.no_grad():
        inner[0].weight.mul_(std)
        inner[0].bias.add_(mean * net[0].weight.sum((1, 2, 3)))
    wrapped = robustlab.Normalized(inner, mean=[mean], std=[std])
    # conv with zero padding sees the normalised zero at the border: compare on the clean logits' argmax
    with torch.no_grad():
        agree = (wrapped(x).argmax(1) == net(x).argmax(1)).float().mean()
    assert agree > 0.9
    with torch.no_grad():
        expected = inner((x - mean) / std)
        assert torch.equal(wrapped(x), expected)
    ev = robustlab.evaluate(wrapped, x, y, eps=[0.05], attacks=["apgd-ce"], steps=20)
    assert 0 < ev.table["accuracy"].iloc[-1] <= ev.table["accuracy"].iloc[0]


@pytest.mark.parametrize("kwargs, expected", [
    ({"model": lambda z: z}, "expected a torch.nn.Module"),
    ({"x_scale": 255.0}, "outside the declared range"),
    ({"eps": [0.1, -0.1]}, "finite number >= 0"),
    ({"eps": [float("nan")]}, "finite number >= 0"),
    ({"eps": [float("inf")]}, "finite number >= 0"),
    ({"attacks": ["apgd-ce", "cw"]}, "attack='cw' is not allowed"),
    ({"threat": "l1"}, "threat='l1' is not allowed"),
])
def test_evaluate_bad_input_raises(cnn, kwargs, expected):
    net, x, y = cnn
    model = kwargs.pop("model", net)
    x = x * kwargs.pop("x_scale", 1.0)
    with pytest.raises(robustlab.UserError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        robustlab.evaluate(model, x[:5], y[:5], **{"eps": [0.1], **kwargs})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cli_evaluate_torchscript_and_state_dict(cnn, tmp_path):
    net, x, y = cnn
    torch.jit.script(net).save(str(tmp_path / "model.pt"))
    torch.save(net.state_dict(), tmp_path / "weights.pt")
    (tmp_path / "mymodels.py").write_text(MODEL_FILE)
    torch.save({"x": x[:60], "y": y[:60]}, tmp_path / "data.pt")
    np.savez(tmp_path / "data.npz", x=x[:60].numpy(), y=y[:60].numpy())
    r = cli("evaluate", tmp_path / "model.pt", "--data", tmp_path / "data.pt", "--eps", "0.05,0.1",
            "--attacks", "fgsm,apgd-ce", "--steps", "20", "--out", tmp_path / "ts")
    assert r.returncode == 0, r.stderr
    assert "worst case" in r.stdout
    assert {p.name for p in (tmp_path / "ts").iterdir()} == {"evaluation.csv", "per_sample.csv", "robust_accuracy.png"}
    ts = pd.read_csv(tmp_path / "ts" / "evaluation.csv")
    r = cli("evaluate", tmp_path / "weights.pt", "--module", f"{tmp_path / 'mymodels.py'}:small_cnn", "--data",
            tmp_path / "data.npz", "--eps", "0.05,0.1", "--attacks", "fgsm,apgd-ce", "--steps", "20", "--out",
            tmp_path / "sd")
    assert r.returncode == 0, r.stderr
    pd.testing.assert_frame_equal(ts, pd.read_csv(tmp_path / "sd" / "evaluation.csv"))  # the same model


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cli_evaluate_bad_input_one_line_exit_2_nothing_written(cnn, tmp_path):
    net, x, y = cnn
    torch.jit.script(net).save(str(tmp_path / "model.pt"))
    torch.save({"x": x[:10], "y": y[:10]}, tmp_path / "data.pt")
    torch.save({"x": x[:10] * 255, "y": y[:10]}, tmp_path / "pixels255.pt")
    (tmp_path / "notamodel.pt").write_text("hello")
    out = tmp_path / "out"
    base = ["evaluate", tmp_path / "model.pt", "--data", tmp_path / "data.pt", "--out", out]
    cases = [
        (["evaluate", tmp_path / "notamodel.pt", "--data", tmp_path / "data.pt", "--eps", "0.1", "--out", out],
         "not a TorchScript file"),
        (["evaluate", tmp_path / "model.pt", "--data", tmp_path / "pixels255.pt", "--eps", "0.1", "--out", out],
         "outside the declared range"),
        ([*base, "--eps", "0.1,-0.2"], "finite number >= 0"),
        ([*base, "--eps", "nan"], "finite number >= 0"),
        ([*base, "--eps", "0.1", "--attacks", "apgd-ce,deepfool"], "attack='deepfool' is not allowed"),
        (["evaluate", tmp_path / "model.pt", "--module", "nowhere.mod:f", "--data", tmp_path / "data.pt",
          "--eps", "0.1", "--out", out], "--module"),
    ]
    for args, expected in cases:
        line = one_line_error(cli(*args))
        assert expected in line, line
        assert not out.exists()


def test_fgsm_and_pgd_see_through_a_saturated_softmax():
    """Scaling a model's logits by 300 changes no prediction and, in exact arithmetic, no
    signed-gradient step; in float32 it saturates the softmax. `evaluate`'s fgsm and pgd
    (saturation-safe) read the same robust accuracy at both scales; the plain attacks on the
    scaled model read it far higher (they stall), which is what this test guards against."""
    from robustlab.attacks import FGSM, PGD
    from robustlab.metrics import robust_accuracy

    g = torch.Generator().manual_seed(4)
    W = torch.randn(3, 8, generator=g)
    x = torch.rand(300, 8, generator=g)
    base = nn.Linear(8, 3, bias=False)
    big = nn.Linear(8, 3, bias=False)
    with torch.no_grad():
        base.weight.copy_(W)
        big.weight.copy_(300 * W)
    y = base(x).argmax(1).detach()
    eps = 0.05
    read = {}
    for name, model in (("base", base), ("big", big)):
        t = robustlab.evaluate(model, x, y, eps=[eps], attacks=["fgsm", "pgd"]).table
        read[name] = t[t["eps"] == eps].set_index("attack")["accuracy"]
    for attack in ("fgsm", "pgd"):
        assert 0.2 < read["base"][attack] < 0.9
        assert abs(read["base"][attack] - read["big"][attack]) <= 0.01, attack
    gen = torch.Generator().manual_seed(0)
    plain_pgd = float(robust_accuracy(big, x, y, PGD(Linf(eps), steps=40, step_size=2.5 * eps / 40),
                                      bounds=(0.0, 1.0), generator=gen))
    plain_fgsm = float(robust_accuracy(big, x, y, FGSM(Linf(eps)), bounds=(0.0, 1.0)))
    assert plain_pgd > read["big"]["pgd"] + 0.1 and plain_fgsm > read["big"]["fgsm"] + 0.1


# ----------------------------------------------------------------------------------------
# the function's face, callables, loaders, the progress bar


def test_evaluate_is_a_function_with_a_real_signature():
    import inspect
    import pydoc

    assert inspect.isfunction(robustlab.evaluate)
    params = inspect.signature(robustlab.evaluate).parameters
    assert list(params)[:3] == ["model", "x", "y"] and "attacks" in params and "progress" in params
    text = pydoc.render_doc(robustlab.evaluate, renderer=pydoc.plaintext)
    assert "*args" not in text and "autoattack" in text and "DataLoader" in text


def test_callable_attacks_are_projected_counted_and_named(cnn):
    net, x, y = cnn
    x, y = x[:40], y[:40]

    def too_far(model, x, y):  # ignores its budget: 0.5 in every pixel, then the box
        return (x + 0.5).clamp(0, 1)

    def fgsm_like(model, x, y, eps):  # a correct attack, told its budget
        x = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(nn.functional.cross_entropy(model(x), y), x)
        return (x + eps * g.sign()).clamp(0, 1).detach()

    seen = []

    def spy(model, x, y, eps, generator):
        seen.append((eps, isinstance(generator, torch.Generator), model.training))
        return x

    ev = robustlab.evaluate(net, x, y, eps=[0.05, 0.1], attacks={"far": too_far, "mine": fgsm_like, "spy": spy,
                                                                 "fgsm": "fgsm"})
    t = ev.table.set_index(["eps", "attack"])
    clean = int(ev.table.loc[0, "n_correct"])
    for e in (0.05, 0.1):
        assert t.loc[(e, "far"), "n_projected"] == clean  # every attacked row had to be moved back
        assert t.loc[(e, "mine"), "n_projected"] == 0 and t.loc[(e, "fgsm"), "n_projected"] == 0
        assert t.loc[(e, "spy"), "n_correct"] == clean  # returning x changes nothing
        assert t.loc[(e, "mine"), "implementation"].startswith("callable")
        # the user's FGSM and the library's agree up to the saturation-safe direction
        assert abs(t.loc[(e, "mine"), "n_correct"] - t.loc[(e, "fgsm"), "n_correct"]) <= 1
    assert seen == [(0.05, True, False), (0.1, True, False)]
    # what "far" is scored on lies inside the ball: compare with clamping its output by hand
    x_far = robustlab.evaluation.CallableAttack(Linf(0.05), fn=too_far)(net, x, y)
    assert (x_far - x).abs().max() <= 0.05 + 1e-6


def test_callable_attack_bad_output_and_torchattacks_instance_are_one_line_errors(cnn):
    net, x, y = cnn
    with pytest.raises(robustlab.UserError, match="returned"):
        robustlab.evaluate(net, x[:5], y[:5], eps=0.1, attacks=[lambda m, x, y: x[:, 0]])
    torchattacks = pytest.importorskip("torchattacks")
    with pytest.raises(robustlab.UserError, match="lambda model, x, y, eps"):
        robustlab.evaluate(net, x[:5], y[:5], eps=0.1, attacks=[torchattacks.FGSM(net, eps=0.1)])


def test_dataloader_and_dataset_inputs_give_the_tensor_numbers(cnn):
    from torch.utils.data import DataLoader, TensorDataset

    net, x, y = cnn
    x, y = x[:64], y[:64]
    kw = {"eps": [0.1], "attacks": ["fgsm", "apgd-ce"], "steps": 10}
    ref = robustlab.evaluate(net, x, y, **kw).table
    ds = TensorDataset(x, y)
    for given in (DataLoader(ds, batch_size=25), ds):
        pd.testing.assert_frame_equal(robustlab.evaluate(net, given, **kw).table, ref)
    with pytest.raises(robustlab.UserError, match="y is not allowed to be missing"):
        robustlab.evaluate(net, x, **kw)


def test_progress_bar_goes_to_stderr_only_when_asked_or_on_a_terminal(cnn, capsys):
    net, x, y = cnn
    robustlab.evaluate(net, x[:20], y[:20], eps=0.1, attacks="fgsm")  # stderr is not a tty under pytest
    assert capsys.readouterr().err == ""
    robustlab.evaluate(net, x[:20], y[:20], eps=0.1, attacks="fgsm", progress=True)
    cap = capsys.readouterr()
    assert "ε=0.1 fgsm" in cap.err and "/20 " in cap.err and cap.out == ""


def test_cascade_gives_the_same_worst_case_for_less_work(cnn):
    net, x, y = cnn
    kw = {"eps": [0.1], "attacks": ["fgsm", "apgd-ce"], "steps": 20}
    full = robustlab.evaluate(net, x, y, **kw).table.set_index("attack")
    casc = robustlab.evaluate(net, x, y, cascade=True, **kw).table.set_index("attack")
    # fgsm runs first on the same rows either way; apgd-ce then only on fgsm's survivors
    assert casc.loc["fgsm", "n_correct"] == full.loc["fgsm", "n_correct"]
    assert casc.loc["apgd-ce", "n_attacked"] == full.loc["fgsm", "n_correct"] < full.loc["apgd-ce", "n_attacked"]
    assert abs(casc.loc["worst case", "n_correct"] - full.loc["worst case", "n_correct"]) <= 3  # random starts differ


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cli_evaluate_a_callable_attack_from_a_file(cnn, tmp_path):
    net, x, y = cnn
    torch.jit.script(net).save(str(tmp_path / "model.pt"))
    torch.save({"x": x[:30], "y": y[:30]}, tmp_path / "data.pt")
    (tmp_path / "myattacks.py").write_text("def shove(model, x, y, eps):\n    return (x + 2 * eps).clamp(0, 1)\n")
    r = cli("evaluate", tmp_path / "model.pt", "--data", tmp_path / "data.pt", "--eps", "0.1", "--attacks",
            f"fgsm,{tmp_path / 'myattacks.py'}:shove", "--no-progress", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    t = pd.read_csv(tmp_path / "o" / "evaluation.csv").set_index("attack")
    assert t.loc["shove", "n_projected"] > 0 and t.loc["fgsm", "n_projected"] == 0  # 2ε is outside the ball
    assert "callable" in t.loc["shove", "implementation"] and r.stderr == ""
    line = one_line_error(cli("evaluate", tmp_path / "model.pt", "--data", tmp_path / "data.pt", "--eps", "0.1",
                              "--attacks", f"{tmp_path / 'myattacks.py'}:nothere"))
    assert "--attacks" in line
