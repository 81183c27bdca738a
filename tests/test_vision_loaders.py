"""torchvision loaders, on small files written here in each dataset's standard format.

Run in the second environment that has torchvision (`.ci/run` makes it); skipped without it.
"""

import pickle
import struct

import numpy as np
import pytest
import torch

from robustlab.config import UserError
from robustlab.data import load_images

pytestmark = pytest.mark.vision
tv = pytest.importorskip("torchvision")


def _idx(path, arr: np.ndarray):
    magic = {3: 0x00000803, 1: 0x00000801}[arr.ndim]
    with open(path, "wb") as fh:
        fh.write(struct.pack(">I", magic))
        for n in arr.shape:
            fh.write(struct.pack(">I", n))
        fh.write(arr.astype(np.uint8).tobytes())


def write_mnist(root, n_train=30, n_test=10, seed=0):
    rng = np.random.default_rng(seed)
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    out = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        y = np.arange(n) % 10
        _idx(raw / f"{prefix}-images-idx3-ubyte", x)
        _idx(raw / f"{prefix}-labels-idx1-ubyte", y)
        out[prefix] = (x, y)
    return out


def write_cifar(root, hundred=False, n=20, seed=0):
    rng = np.random.default_rng(seed)
    folder = root / ("cifar-100-python" if hundred else "cifar-10-batches-py")
    folder.mkdir(parents=True)
    key = "fine_labels" if hundred else "labels"
    n_classes = 100 if hundred else 10
    names = ["train", "test"] if hundred else [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    data = {}
    for name in names:
        x = rng.integers(0, 256, size=(n, 3 * 32 * 32), dtype=np.uint8)
        y = list(np.arange(n) % n_classes)
        with open(folder / name, "wb") as fh:
            pickle.dump({"data": x, key: y}, fh)
        data[name] = (x, y)
    meta_key = "fine_label_names" if hundred else "label_names"
    with open(folder / ("meta" if hundred else "batches.meta"), "wb") as fh:
        pickle.dump({meta_key: [f"c{i}" for i in range(n_classes)]}, fh)
    return data


def write_svhn(root, n=20, seed=0):
    sio = pytest.importorskip("scipy.io")
    rng = np.random.default_rng(seed)
    out = {}
    for split in ("train", "test"):
        x = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
        y = (np.arange(n) % 10).reshape(-1, 1)
        y[y == 0] = 10  # SVHN stores digit 0 as label 10
        sio.savemat(root / f"{split}_32x32.mat", {"X": x, "y": y})
        out[split] = (x, y)
    return out


def test_mnist_idx_files(tmp_path):
    raw = write_mnist(tmp_path)
    s = load_images("mnist", data_dir=tmp_path, classes=(0, 1))
    assert s.binary and s.x_train.shape == (6, 1, 28, 28) and s.x_test.shape == (2, 1, 28, 28)
    x, y = raw["train"]
    expect = torch.tensor(x[y == 0][0], dtype=torch.float32) / 255
    torch.testing.assert_close(s.x_train[s.y_train == -1][0, 0], expect)


def test_mnist_resize_flatten_sphere(tmp_path):
    write_mnist(tmp_path)
    s = load_images("mnist", data_dir=tmp_path, size=7, flatten=True, sphere=True)
    assert s.x_train.shape == (30, 49) and s.n_classes == 10
    torch.testing.assert_close(s.x_train.norm(dim=1), torch.ones(30))


def test_cifar10_batches(tmp_path):
    data = write_cifar(tmp_path)
    s = load_images("cifar10", data_dir=tmp_path)
    assert s.x_train.shape == (100, 3, 32, 32) and s.x_test.shape == (20, 3, 32, 32)
    x0 = torch.tensor(data["data_batch_1"][0][0].reshape(3, 32, 32), dtype=torch.float32) / 255
    torch.testing.assert_close(s.x_train[0], x0)


def test_cifar100(tmp_path):
    write_cifar(tmp_path, hundred=True, n=200)
    s = load_images("cifar100", data_dir=tmp_path, classes=(5, 17, 99))
    assert s.n_classes == 3 and len(s.x_train) == 6 and set(s.y_train.tolist()) == {0, 1, 2}


def test_svhn_mat(tmp_path):
    write_svhn(tmp_path)
    s = load_images("svhn", data_dir=tmp_path, classes=(0, 1))
    assert s.x_train.shape[1:] == (3, 32, 32) and len(s.x_train) == 4  # labels 10 -> digit 0


def test_missing_files_clear_error(tmp_path):
    for name in ("mnist", "cifar10", "svhn"):
        with pytest.raises(UserError, match="files not found"):
            load_images(name, data_dir=tmp_path)


@pytest.mark.parametrize("dataset", ["mnist", "cifar10"])
def test_width_depth_study_end_to_end_on_standard_files(tmp_path, dataset):
    """Study C (the width-depth-init paper uses MNIST and CIFAR-10) through the CLI on small files in the
    standard formats: every point finishes and every claim gets one of the four verdicts."""
    import json

    from robustlab.cli import main

    if dataset == "mnist":
        write_mnist(tmp_path / "data", n_train=40)
    else:
        write_cifar(tmp_path / "data", n=20)
    out = tmp_path / "run"
    rc = main(["run", "width-depth-init", "--data-dir", str(tmp_path / "data"), "--out", str(out), "--quiet",
               "--seeds", "2", "--set", f"dataset={dataset}", "--set", "size=8", "--set", "n_train=20",
               "--set", "n_test=10", "--set", "epochs=2", "--set", "batch_size=10", "--set", "decay_start=0",
               "--set", "mc_samples=0", "--grid", "width=2,4,8", "--grid", "depth=2,3"])
    assert rc == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    # 20 training points, or fewer in the two-class (Thm 3) block when the tiny file holds fewer of those
    assert {r["dataset"] for r in results} == {dataset} and max(r["n_train"] for r in results) == 20
    claims = json.loads((out / "claims.json").read_text())
    assert {"width-peak", "depth-init-at-init", "depth-init-trained-he", "kappa"} <= {c["id"] for c in claims}
    assert all(c["verdict"] in ("reproduced", "contradicted", "inconclusive", "not applicable") for c in claims)
    assert (out / "report.html").exists()
