"""Regenerate the tiny synthetic dataset fixtures of tests/data (run from the repository root:
``.venv/bin/python tests/data/make_fixtures.py``).

Every file has the real dataset's format and name but synthetic content (deterministic, seed 0),
so the loaders can be tested without the real data:

* ``a9a/a9a``, ``a9a/a9a.t``: LIBSVM text, labels -1/+1, 123 binary features; 240 / 60 rows drawn
  from a planted logistic model so that a classifier can learn them;
* ``mushrooms/mushrooms``: LIBSVM text, labels 1/2, 112 features, trailing spaces and no final
  newline (as the real file);
* ``epsilon/epsilon_normalized.bz2``: bzip2-compressed LIBSVM text, labels -1/+1, 2000 features
  (12 sparse rows: the real file is 400k dense rows);
* ``mnist/``: IDX gzip train (60) / test (20) images and labels, plus the training images again as
  two ``train-images-part{0,1}.npz`` shards (keys images, labels, index);
* ``cifar10/cifar-10-batches-py/``: python pickles data_batch_1..5 (8 images each) and test_batch
  (8), plus ``{train,test}-jpegq75-part0.npz`` shards (keys images, labels, file_num).
"""

from __future__ import annotations

import bz2
import gzip
import pickle
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _libsvm_lines(X: np.ndarray, y: np.ndarray, trailing: bool) -> list[str]:
    lines = []
    for row, label in zip(X, y):
        toks = [f"{j + 1}:1" for j in np.nonzero(row)[0]]
        lines.append(f"{int(label)} " + " ".join(toks) + (" " if trailing else ""))
    return lines


def _planted(rng: np.random.Generator, n: int, d: int, active: int):
    X = np.zeros((n, d))
    for i in range(n):
        X[i, rng.choice(d, size=active, replace=False)] = 1.0
    w = rng.standard_normal(d) * 1.5
    p = 1.0 / (1.0 + np.exp(-(X @ w - np.median(X @ w))))
    y = np.where(rng.random(n) < p, 1, -1)
    return X, y


def _idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def main() -> None:
    rng = np.random.default_rng(0)
    (HERE / "a9a").mkdir(exist_ok=True)
    X, y = _planted(rng, 300, 123, 14)
    (HERE / "a9a" / "a9a").write_text("\n".join(_libsvm_lines(X[:240], y[:240], True)) + "\n")
    (HERE / "a9a" / "a9a.t").write_text("\n".join(_libsvm_lines(X[240:], y[240:], False)) + "\n")

    (HERE / "mushrooms").mkdir(exist_ok=True)
    X, y = _planted(rng, 30, 112, 22)
    lines = _libsvm_lines(X, np.where(y > 0, 2, 1), True)
    (HERE / "mushrooms" / "mushrooms").write_text("\n".join(lines))

    mn = HERE / "mnist"
    mn.mkdir(exist_ok=True)
    for split, count in (("train", 60), ("t10k", 20)):
        labels = np.arange(count) % 10
        images = rng.integers(0, 40, size=(count, 28, 28))
        for i, c in enumerate(labels):  # a label-dependent bright bar: learnable
            images[i, 4 + 2 * c: 6 + 2 * c, 4:24] = 255
        _idx(mn / f"{split}-images-idx3-ubyte.gz", images)
        _idx(mn / f"{split}-labels-idx1-ubyte.gz", labels)
        if split == "train":
            for part in (0, 1):
                sl = slice(30 * part, 30 * (part + 1))
                np.savez_compressed(mn / f"train-images-part{part}.npz",
                                    images=images[sl].astype(np.uint8),
                                    labels=labels[sl].astype(np.uint8),
                                    index=np.arange(60, dtype=np.int32)[sl])

    cf = HERE / "cifar10"
    (cf / "cifar-10-batches-py").mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = rng.integers(0, 10, size=8)
        hwc = rng.integers(0, 256, size=(8, 32, 32, 3), dtype=np.uint8)
        rows = hwc.transpose(0, 3, 1, 2).reshape(8, 3072)
        batch = {b"batch_label": name.encode(), b"labels": labels.tolist(), b"data": rows,
                 b"filenames": [f"{name}_{i}.png".encode() for i in range(8)]}
        with open(cf / "cifar-10-batches-py" / name, "wb") as fh:
            pickle.dump(batch, fh, protocol=2)
    for split in ("train", "test"):
        np.savez_compressed(cf / f"{split}-jpegq75-part0.npz",
                            images=rng.integers(0, 256, size=(6, 32, 32, 3), dtype=np.uint8),
                            labels=np.arange(6, dtype=np.uint8),
                            file_num=np.arange(6, dtype=np.int32))

    # last, so that adding it left the other fixtures' random draws unchanged
    (HERE / "epsilon").mkdir(exist_ok=True)
    X, y = _planted(rng, 12, 2000, 5)
    text = "\n".join(f"{int(lab)} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in
                                                  zip(np.nonzero(row)[0], rng.random(5)))
                     for row, lab in zip(X, y)) + "\n"
    (HERE / "epsilon" / "epsilon_normalized.bz2").write_bytes(bz2.compress(text.encode()))


if __name__ == "__main__":
    main()
