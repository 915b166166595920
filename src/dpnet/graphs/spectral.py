"""Spectral quantities of sparse weight matrices: exact for small n, iterative for large n.

Up to :data:`DENSE_SPECTRAL_MAX` agents every quantity is computed from the dense matrix with
LAPACK (exact to rounding, as the papers' small examples need). Above it nothing dense is formed:

* symmetric matrices: ARPACK's Lanczos (``eigsh``) in shift-invert mode around the end of the
  spectrum that is asked for, with a sparse LU of the shifted matrix. Shift-invert turns the
  eigenvalues nearest the shift into the largest ones, so the clustered extreme eigenvalues of a
  ring or a grid (spaced ~(2 pi / n)^2 apart) converge in a few dozen iterations instead of
  ~n iterations of plain Lanczos;
* other matrices: ARPACK's Arnoldi (``eigs``) on a linear operator (deflated where the caller asks);
* null vectors of a Laplacian with a one-dimensional null space: one sparse LU solve of the
  Laplacian with one equation replaced by the normalisation (nonsingular exactly when the null
  space is one-dimensional, see :func:`null_vector`).

The iterative results carry ARPACK's relative tolerance :data:`TOLERANCE` on the eigenvalues of
the operator it iterates on; the tests compare them with the dense results on graphs above the
limit.
"""

from __future__ import annotations

# scipy.linalg and scipy.sparse.linalg are imported in the functions that use them, so that `import dpnet`
# stays within 0.5 s of `import torch` (benchmarks/bench_startup.py)
import numpy as np
import scipy.sparse as sp

from ..errors import require

#: above this many agents no dense matrix is formed for a spectral quantity
DENSE_SPECTRAL_MAX = 256
#: Lanczos/Arnoldi basis size: larger than ARPACK's default 2k + 1, so that the clustered and
#: repeated extreme eigenvalues of rings and grids do not stall the restarts
_NCV = 32
#: relative tolerance asked of ARPACK
TOLERANCE = 1e-12


def _csc(M) -> sp.csc_matrix:
    return sp.csc_matrix(M, dtype=np.float64)


def symmetric_extremes(M: sp.sparray, lower: float, upper: float) -> tuple[float, float]:
    """``(smallest, largest)`` eigenvalue of the symmetric sparse ``M`` whose spectrum lies in
    ``[lower, upper]``: shift-invert just outside each end (the shift can never hit an
    eigenvalue, so the LU is nonsingular)."""
    n = M.shape[0]
    if n <= DENSE_SPECTRAL_MAX:
        ev = np.linalg.eigvalsh(M.toarray())
        return float(ev[0]), float(ev[-1])
    pad = 1e-3 * max(upper - lower, 1.0)
    lo = _shift_invert_eigsh(M, lower - pad, 1)[0]
    hi = _shift_invert_eigsh(M, upper + pad, 1)[0]
    return lo, hi


def _shift_invert_eigsh(M, sigma: float, k: int) -> np.ndarray:
    """The k eigenvalues of symmetric M nearest ``sigma`` (sorted by distance to sigma)."""
    import scipy.sparse.linalg as spla

    vals = spla.eigsh(_csc(M), k=k, sigma=sigma, which="LM", tol=TOLERANCE,
                      ncv=min(M.shape[0], _NCV), return_eigenvectors=False)
    return np.asarray(sorted(vals, key=lambda v: abs(v - sigma)))


def laplacian_second_smallest(L: sp.sparray) -> float:
    """Second smallest eigenvalue of a symmetric PSD Laplacian with a one-dimensional null space
    (the algebraic connectivity). Shift-invert at a small negative shift: the null eigenvalue
    and the second one are the two nearest."""
    n = L.shape[0]
    if n <= DENSE_SPECTRAL_MAX:
        return float(np.linalg.eigvalsh(L.toarray())[1])
    scale = float(abs(L).sum(axis=1).max()) or 1.0
    vals = _shift_invert_eigsh(L, -1e-9 * scale, 2)
    return float(max(vals))


def circulant_eigenvalues(first_row: np.ndarray) -> np.ndarray:
    """Eigenvalues of the circulant matrix with this first row, ``lambda_k = sum_j c_j w^(jk)``
    (``w = exp(-2 pi i / n)``), by one FFT: exact to rounding in O(n log n). ``lambda_0`` belongs
    to the all-ones eigenvector."""
    return np.fft.fft(first_row)


def gap_sides(W: sp.sparray, symmetric: bool, doubly_stochastic: bool,
              circulant_row: np.ndarray | None = None) -> tuple[float, float] | None:
    """``(1 - lambda_2(W), 1 + lambda_min(W))`` for a symmetric doubly stochastic W, each side
    computed without the cancellation of ``1 - lambda`` near 1 (a ring of 10^7 agents has
    ``1 - lambda_2 = 1.3e-13``): as the extreme eigenvalues of the Laplacian ``L = I - W``
    (``lambda_2(L)`` and ``2 - lambda_max(L)``), and for circulant weights in closed form,
    ``1 - lambda_k = sum_j c_j 2 sin^2(pi j k / n)``, ``1 + lambda_k = sum_j c_j 2 cos^2(...)``.
    None for other matrices."""
    if not (symmetric and doubly_stochastic):
        return None
    n = W.shape[0]
    if n == 1:
        return 1.0, 1.0
    if circulant_row is not None:
        j = np.flatnonzero(circulant_row)
        c = circulant_row[j]
        if j.size * n <= 5e7:   # (n, nnz) table of phases pi (j k mod n) / n, exact integers
            m = np.outer(np.arange(1, n, dtype=np.int64), j) % n
            # sin^2 and cos^2 of pi m / n are symmetric in m <-> n - m: fold to keep the phase
            # small where it is small (its rounding is then relative, not ~1e-16 absolute)
            phase = np.pi * np.minimum(m, n - m) / n
            low = (2.0 * np.sin(phase) ** 2 @ c).min()
            high = (2.0 * np.cos(phase) ** 2 @ c).min()
            return float(low), float(high)
    L = sp.identity(n, format="csr") - W
    if n <= DENSE_SPECTRAL_MAX:
        ev = np.linalg.eigvalsh(L.toarray())
        return float(ev[1]), float(2.0 - ev[-1])
    radius = float(abs(L).sum(axis=1).max())
    top = _shift_invert_eigsh(L, radius * (1 + 1e-3) + 1e-3, 1)[0]
    return laplacian_second_smallest(L), float(2.0 - top)


def consensus_contraction(W: sp.sparray, symmetric: bool, doubly_stochastic: bool,
                          circulant_row: np.ndarray | None = None) -> float:
    """``rho(W - 11^T/n)``.

    For a symmetric doubly stochastic W (every undirected scheme in dpnet) ``1`` is an
    eigenvector, so the eigenvalues of ``W - J`` are W's with the 1 of that eigenvector replaced
    by 0: ``rho = 1 - min(gap_sides(W))``. A circulant W of any other kind: one FFT (``J`` is
    circulant too, with eigenvalues ``(1, 0, ...)``). Otherwise dense LAPACK (n <= 256) or
    Arnoldi on the operator ``v -> W v - 1 mean(v)``."""
    n = W.shape[0]
    sides = gap_sides(W, symmetric, doubly_stochastic, circulant_row)
    if sides is not None:
        return float(max(abs(1.0 - sides[0]), abs(1.0 - sides[1])))
    if circulant_row is not None:
        ev = circulant_eigenvalues(circulant_row)
        ev[0] -= 1.0
        return float(np.abs(ev).max())
    if n <= DENSE_SPECTRAL_MAX:
        J = np.full((n, n), 1.0 / n)
        return float(np.max(np.abs(np.linalg.eigvals(W.toarray() - J))))
    Wc = sp.csr_matrix(W)

    def deflated(v):
        v = np.asarray(v).reshape(-1)
        return Wc @ v - v.mean()

    import scipy.sparse.linalg as spla

    op = spla.LinearOperator((n, n), matvec=deflated, dtype=np.float64)
    return spectral_radius(op)


def spectral_radius(op) -> float:
    """Largest eigenvalue modulus by ARPACK's Arnoldi iteration (``op``: matrix or operator)."""
    n = op.shape[0]
    ncv = min(n, _NCV)
    import scipy.sparse.linalg as spla

    vals = spla.eigs(op, k=1, which="LM", tol=TOLERANCE, ncv=ncv, maxiter=100 * n,
                     return_eigenvectors=False)
    return float(np.abs(vals).max())


def eigenvalues(M: sp.sparray, symmetric: bool) -> np.ndarray:
    """All eigenvalues, sorted (real parts for a nonsymmetric matrix): dense only, small n."""
    n = M.shape[0]
    require(n <= DENSE_SPECTRAL_MAX, "n", n,
            f"the whole spectrum only for n <= {DENSE_SPECTRAL_MAX} (use the extreme "
            "eigenvalues, computed iteratively, at larger n)")
    A = M.toarray()
    if symmetric:
        return np.linalg.eigvalsh(A)
    return np.sort(np.linalg.eigvals(A).real)


def null_vector(M: sp.sparray, total: float, what: str) -> np.ndarray:
    """The nonnegative vector spanning the one-dimensional null space of M, summing to ``total``.

    Large n: M's rows sum to the zero row (the Laplacians of paper 003 have ``1^T L2 = 0`` and
    ``L1^T`` likewise), so they span ``null(M^T)^perp`` with the all-ones dependency involving every
    row; replacing the last row by ``1^T`` keeps rank n - 1 from the others and adds a direction
    outside their span (``1^T v = total != 0`` for the null vector v), so the bordered matrix is
    nonsingular and one sparse LU solve gives v."""
    n = M.shape[0]
    if n <= DENSE_SPECTRAL_MAX:
        import scipy.linalg

        N = scipy.linalg.null_space(M.toarray(), rcond=1e-10)
        require(N.shape[1] == 1, what, f"null space of dimension {N.shape[1]}",
                "dimension 1 (Assumption 1: a spanning tree)")
        v = N[:, 0] / N[:, 0].sum() * total
    else:
        B = sp.lil_matrix(M)
        B[n - 1, :] = np.ones(n)
        rhs = np.zeros(n)
        rhs[-1] = total
        import scipy.sparse.linalg as spla

        try:
            v = spla.splu(_csc(B)).solve(rhs)
        except RuntimeError as err:  # singular: the null space is not one-dimensional
            require(False, what, f"a singular bordered system ({err})",
                    "a one-dimensional null space (Assumption 1: a spanning tree)")
        residual = float(np.abs(M @ v).max())
        require(residual <= 1e-8 * max(1.0, float(abs(v).max())), what,
                f"residual {residual:.3g}", "a one-dimensional null space (Assumption 1)")
    require(bool(np.all(v >= -1e-9 * total)), what, f"min entry {v.min():.4g}",
            "a nonnegative vector (Lemma 1)")
    return np.clip(v, 0.0, None)
