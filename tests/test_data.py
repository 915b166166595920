"""Dataset loaders on the tiny fixtures of tests/data (always) and on $DPNET_DATA (when present)."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from dpnet import data
from dpnet.errors import ParameterError, UnknownNameError

FIX = Path(__file__).parent / "data"
REAL = Path(os.environ.get("DPNET_DATA", "/nonexistent"))
needs_real = pytest.mark.skipif(not (REAL / "a9a" / "a9a").is_file(),
                                reason="real datasets ($DPNET_DATA) absent")


def test_libsvm_fixture():
    d = data.load_libsvm("a9a", root=FIX, verify=False, download=False)
    assert d.X.shape == (240, 123) and set(np.unique(d.y)) == {-1, 1}
    assert d.binary_labels().tolist() == d.y.astype(float).tolist()
    t = data.load_libsvm("a9a", "test", root=FIX, verify=False, download=False)
    assert t.X.shape == (60, 123)
    m = data.load_libsvm("mushrooms", root=FIX, verify=False, download=False)
    assert m.X.shape == (30, 112) and set(np.unique(m.y)) == {1, 2}
    # 1 (poisonous) -> -1, 2 (edible) -> +1; the file has no final newline
    assert np.array_equal(m.binary_labels(), np.where(m.y == 2, 1.0, -1.0))


def test_epsilon_bz2_and_decompressed(tmp_path):
    d = data.load_libsvm("epsilon", root=FIX, verify=False, download=False, dtype=np.float32)
    assert d.X.shape == (12, 2000) and d.X.dtype == np.float32
    (tmp_path / "epsilon").mkdir()
    data.decompress_bz2(FIX / "epsilon" / "epsilon_normalized.bz2",
                        tmp_path / "epsilon" / "epsilon_normalized")
    e = data.load_libsvm("epsilon", root=tmp_path, verify=False, download=False)
    assert np.allclose(e.X.toarray(), d.X.toarray(), atol=1e-6)
    with pytest.raises(data.DataError, match="known facts"):  # 12 rows, not 400000
        data.load_libsvm("epsilon", root=FIX, download=False)


def test_verification_accepts_known_and_rejects_tampered(tmp_path):
    src = FIX / "a9a" / "a9a"
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    spec = data.FileSpec("a9a/a9a", sha256=(sha,))
    assert data.verify_file(src, spec) == "sha256"
    bad = tmp_path / "a9a"
    bad.write_bytes(src.read_bytes() + b"-1 1:1\n")
    with pytest.raises(data.DataError, match="does not match any known checksum"):
        data.verify_file(bad, spec)
    # a gzip file is recognised by the MD5 of its decompressed content whatever wrapped it
    gz = FIX / "mnist" / "t10k-labels-idx1-ubyte.gz"
    content = hashlib.md5(gzip.decompress(gz.read_bytes())).hexdigest()
    assert data.verify_file(gz, data.FileSpec("x.gz", md5=("0" * 32,), content_md5=(content,))) \
        == "content_md5"


def test_a_file_with_known_digests_is_never_accepted_by_its_facts(tmp_path):
    (tmp_path / "a9a").mkdir()
    shutil.copy(FIX / "a9a" / "a9a", tmp_path / "a9a" / "a9a")
    with pytest.raises(data.DataError, match="does not match any known checksum"):
        data.load_libsvm("a9a", root=tmp_path, download=False)


def test_one_changed_byte_is_refused_and_trailing_whitespace_is_not_a_change(tmp_path):
    text = (FIX / "a9a" / "a9a").read_bytes()
    spec = data.FileSpec("a9a/a9a", sha256=(hashlib.sha256(text).hexdigest(),),
                         text_sha256=(data._text_digest(FIX / "a9a" / "a9a"),),
                         facts={"rows": text.count(b"\n")})
    mirror = tmp_path / "mirror"
    mirror.write_bytes(text.replace(b"\n", b" \n"))          # a mirror's trailing blanks
    assert data.verify_file(mirror, spec) == "text_sha256"
    flipped = tmp_path / "flipped"
    i = text.index(b":1")                                   # one feature value changed
    flipped.write_bytes(text[:i] + b":0" + text[i + 2:])
    with pytest.raises(data.DataError, match="does not match any known checksum"):
        data.verify_file(flipped, spec)                     # same rows: facts would accept it


def test_missing_offline_says_where(tmp_path, monkeypatch):
    def offline(*a, **k):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    with pytest.raises(data.DataError) as err:
        data.load_mnist("test", root=tmp_path, download=True)
    msg = str(err.value)
    assert str(tmp_path) in msg and "mnist/t10k-images-idx3-ubyte.gz" in msg
    assert "no network" in msg and "DPNET_DATA" in msg
    with pytest.raises(data.DataError, match="downloads disabled"):
        data.load_libsvm("w8a", root=tmp_path, download=False)


def test_mnist_fixture_idx_and_shards(tmp_path):
    a = data.load_mnist("train", root=FIX, verify=False, download=False)
    t = data.load_mnist("test", root=FIX, verify=False, download=False)
    assert a.X.shape == (60, 28, 28) and a.X.dtype == np.uint8 and t.X.shape == (20, 28, 28)
    assert a.y.tolist() == [i % 10 for i in range(60)]
    # without the IDX training images the shards are used and must agree with the IDX labels
    (tmp_path / "mnist").mkdir()
    for f in ("train-labels-idx1-ubyte.gz", "train-images-part0.npz", "train-images-part1.npz"):
        shutil.copy(FIX / "mnist" / f, tmp_path / "mnist" / f)
    s = data.load_mnist("train", root=tmp_path, verify=False, download=False)
    assert np.array_equal(s.X, a.X) and np.array_equal(s.y, a.y)
    assert any("part0" in p for p in s.source)


def test_cifar_fixture_pickles_and_degraded_shards(tmp_path):
    c = data.load_cifar10("train", root=FIX, verify=False, download=False)
    assert c.X.shape == (40, 32, 32, 3) and not c.degraded
    with open(FIX / "cifar10" / "cifar-10-batches-py" / "data_batch_1", "rb") as fh:
        import pickle

        raw = pickle.load(fh, encoding="bytes")
    # channel-planar rows become HWC pixels
    assert c.X[0, 0, 1, 2] == raw[b"data"][0][2 * 1024 + 1]
    (tmp_path / "cifar10").mkdir()
    shutil.copy(FIX / "cifar10" / "test-jpegq75-part0.npz", tmp_path / "cifar10")
    j = data.load_cifar10("test", root=tmp_path, verify=False, download=False)
    assert j.degraded and "JPEG" in j.notes[0] and j.X.shape == (6, 32, 32, 3)
    with pytest.raises(data.DataError):
        data.load_cifar10("test", root=tmp_path, verify=False, download=False, allow_degraded=False)


def test_split_even_and_by_label():
    idx = data.split_even(103, 10, seed=3)
    assert idx.shape == (10, 10) and len(np.unique(idx)) == 100
    assert np.array_equal(idx, data.split_even(103, 10, seed=3))
    labels = np.repeat(np.arange(10), 50)
    parts = data.split_by_label(labels, 10, shards_per_agent=2, seed=0)
    assert parts.shape == (10, 50) and len(np.unique(parts)) == 500
    assert max(len(np.unique(labels[p])) for p in parts) <= 2
    even = data.partition(labels, 10, how="even")
    assert min(len(np.unique(labels[p])) for p in even) >= 5
    with pytest.raises(ParameterError):
        data.split_even(5, 10)
    with pytest.raises(UnknownNameError, match="dirichlet"):
        data.partition(labels, 10, how="dirichet")


@needs_real
def test_real_libsvm_verified():
    for name, shape in (("mushrooms", (8124, 112)), ("a9a", (32561, 123)), ("w8a", (49749, 300))):
        d = data.load_libsvm(name, download=False)
        assert d.X.shape == shape
    assert data.load_libsvm("a9a", "test", download=False).X.shape == (16281, 123)


@needs_real
def test_real_mnist_and_cifar_verified():
    tr = data.load_mnist("train", download=False)
    assert tr.X.shape == (60000, 28, 28)
    counts = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert np.bincount(tr.y).tolist() == counts
    assert abs(tr.X.mean() - 33.318) < 1e-3
    te = data.load_mnist("test", download=False)
    assert np.bincount(te.y).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    c = data.load_cifar10("test", download=False)
    assert c.degraded and c.X.shape == (10000, 32, 32, 3)
    assert np.bincount(c.y).tolist() == [1000] * 10


def test_a_libsvm_file_of_your_own(tmp_path):
    path = tmp_path / "mine.svm"
    path.write_text("1 1:0.5 3:1\n2 2:1\n1 1:0.25 2:0.5\n2 3:0.75\n")
    ds = data.load_libsvm(str(path))
    assert ds.X.shape == (4, 3) and ds.binary_labels().tolist() == [-1, 1, -1, 1]
    assert "not verified" in ds.notes[0]
    key = data.libsvm_file_key(path)
    assert key.endswith(hashlib.sha256(path.read_bytes()).hexdigest())
    assert data.load_libsvm(key).X.shape == (4, 3)
    path.write_text("1 1:0.5\n2 2:1\n")                # changed since it was named: refused
    with pytest.raises(ParameterError, match="changed since it was named"):
        data.load_libsvm(key)
    with pytest.raises(ParameterError, match="existing LIBSVM file"):
        data.load_libsvm(str(tmp_path / "nothing.svm"))
    with pytest.raises(ParameterError, match="LIBSVM text file"):
        (tmp_path / "bad.svm").write_text("this is not libsvm\n")
        data.load_libsvm(str(tmp_path / "bad.svm"))


def test_a_configuration_reads_your_libsvm_file_with_its_labels_as_minus_and_plus_one(tmp_path):
    from dpnet import problems

    rng = np.random.default_rng(0)
    rows = [f"{1 + (i % 2)} 1:{rng.random():.3f} 2:{rng.random():.3f}" for i in range(40)]
    (tmp_path / "mine.svm").write_text("\n".join(rows) + "\n")
    p = problems.from_spec({"name": "logistic_regression", "dataset": str(tmp_path / "mine.svm"),
                            "n_agents": 4, "how": "iid"})
    # labels 1 and 2 (mushrooms' convention) become -1 and +1, not two "positive" classes
    assert sorted(np.unique(p.b.numpy()).tolist()) == [-1.0, 1.0]


def test_a_file_spec_with_facts_is_hashable_and_compares_them():
    a = data.FileSpec("x", facts={"rows": 12})
    assert hash(a) == hash(data.FileSpec("x", facts={"rows": 13}))
    assert a == data.FileSpec("x", facts={"rows": 12}) != data.FileSpec("x", facts={"rows": 13})
    assert len({a, data.FileSpec("x", facts={"rows": 12})}) == 1
