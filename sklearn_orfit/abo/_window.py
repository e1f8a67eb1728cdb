"""The window of a sliding-window least-squares model: a ring buffer of its rows.

Rows are stored normalised, ``z = s·ẑ`` with ``‖ẑ‖ = 1`` (``s = 0``, ``ẑ = 0`` for a zero
row): inner products of unit rows can neither overflow nor underflow, whatever the scale of
the input (``1e-300`` … ``1e300``), and the Gram matrix of the window has a unit diagonal,
which is the Jacobi scaling the Gram-based solvers need anyway.
"""

import numpy as np
from scipy.linalg.blas import dnrm2

from .._docstrings import fill_doc
from ._kernels import svd

__all__ = ["OVERFLOW_MESSAGE", "WindowBuffer", "moderate", "moderate_squared", "normalise_rows"]

OVERFLOW_MESSAGE = (
    "the window's least-squares solution overflowed (non-finite coefficients); rescale X "
    "and y, e.g. with RecursiveStandardScaler."
)


def normalise_rows(Z):
    """Split rows into norms and unit rows without overflow or underflow.

    Parameters
    ----------
    Z : ndarray of shape (n_rows, n_features)
        Finite rows.

    Returns
    -------
    Zh : ndarray of shape (n_rows, n_features)
        ``Z[i] / s[i]`` (zero rows stay zero).
    s : ndarray of shape (n_rows,)
        ``‖Z[i]‖``: ``sqrt(Σ z²)`` where the squares neither overflow nor underflow,
        else ``m·‖Z[i]/m‖`` with ``m = max|Z[i]|`` (BLAS ``nrm2`` for a single row).
    """
    if Z.shape[0] == 1 and Z.shape[1]:
        # one row (the single-observation path): BLAS nrm2 scales internally
        n = dnrm2(Z[0])
        if n == np.inf:
            _norm_overflow()
        return (Z / n if n > 0 else np.zeros_like(Z)), np.array([n])
    # the common case in two passes: squared norms that neither overflow nor lose
    # precision to underflow (1e-290 < ‖z‖² < 1e290)
    ss = np.einsum("ij,ij->i", Z, Z)
    fine = (ss > 1e-290) & (ss < 1e290)
    s = np.sqrt(np.where(fine, ss, 1.0))
    Zh = Z / s[:, None]
    bad = np.flatnonzero(~fine)
    if bad.size:
        # the others (zero, tiny or huge rows): scaled by their largest entry first
        Zb = Z[bad]
        m = np.abs(Zb).max(axis=1) if Z.shape[1] else np.zeros(bad.size)
        safe = np.where(m > 0, m, 1.0)
        Zs = Zb / safe[:, None]
        r = np.sqrt(np.einsum("ij,ij->i", Zs, Zs))
        Zh[bad] = Zs / np.where(r > 0, r, 1.0)[:, None]
        s[bad] = np.where(m > 0, m * r, 0.0)
        if np.isinf(s[bad]).any():
            _norm_overflow()
    return Zh, s


def moderate(s, bound=1e100):
    """Whether every norm in ``s`` is ``0`` or lies in ``[1/bound, bound]`` (default
    ``[1e-100, 1e100]``).

    ``s`` are exact norms (a ``0`` is a zero row; see :func:`normalise_rows`). Inner
    products of rows of such norms neither overflow nor lose more than ``D·1e-108`` of
    their scale to underflow: divided by the norms they are the unit rows' products.
    A squared norm computed from the rows is no such ``s``: the squares of a row of norm
    ``1e-170`` underflow to ``0`` (see :func:`moderate_squared`).
    """
    nonzero = np.where(s > 0.0, s, 1.0)
    return bool(nonzero.min(initial=1.0) >= 1.0 / bound and nonzero.max(initial=1.0) <= bound)


def moderate_squared(ss, rows, bound=1e100):
    """Whether the squared norms ``ss = ‖rows[i]‖²`` (computed from ``rows``) all lie in
    ``[1/bound², bound²]``, a ``0`` only for a row that is zero (not one whose squares
    underflowed)."""
    zero = ss == 0.0
    if zero.any() and rows[zero].any():
        return False
    return moderate(np.sqrt(ss), bound)


def _norm_overflow():
    raise ValueError(
        "a row's Euclidean norm exceeds the largest float64 (1.8e308); rescale X, e.g. "
        "with RecursiveStandardScaler."
    )


@fill_doc()
class WindowBuffer:
    """The last ``N`` rows of a stream, in a ring.

    Parameters
    ----------
    {solver_sizes}
    gram : bool
        Also keep ``G[i, j] = ẑ_i·ẑ_j`` over the ring's slots (``N×N``), updated with one
        row and column per new row.

    Attributes
    ----------
    Zh : ndarray of shape (N, D)
        Unit rows by slot.
    s : ndarray of shape (N,)
        Row norms by slot.
    Y : ndarray of shape (N, n_targets)
        Targets by slot.
    G : ndarray of shape (N, N) or None
        Gram matrix of the unit rows by slot.
    pos : int
        The slot the next row is written to (the oldest row's slot once full).
    n : int
        Rows held, ``≤ N``.
    """

    def __init__(self, *, window_size, n_features, n_targets, gram):
        N = window_size
        self.N = N
        self.Zh = np.zeros((N, n_features))
        self.s = np.zeros(N)
        self.Y = np.zeros((N, n_targets))
        self.G = np.zeros((N, N)) if gram else None
        self.pos = 0
        self.n = 0

    def slots(self):
        """Slots of the held rows, oldest first."""
        return (self.pos - self.n + np.arange(self.n)) % self.N

    def push(self, zh, s, y, k=None, written=False):
        """Write one row; ``k`` are its products with every slot (``ẑ·Zh[slot]``).

        ``written``: the unit row is already in its slot (the single-observation path
        normalises it there).
        """
        p = self.pos
        if not written:
            self.Zh[p] = zh
        self.s[p] = s
        self.Y[p] = y
        if self.G is not None:
            # invariant: G[i, j] = ẑ_i·ẑ_j for every pair of slots
            self.G[p, :] = k
            self.G[:, p] = k
            self.G[p, p] = 1.0 if s > 0 else 0.0  # ẑ·ẑ of a unit (or zero) row
        self.pos = (p + 1) % self.N
        if self.n < self.N:
            self.n += 1

    def raw(self, slots=None):
        """Rows ``s·ẑ`` and targets of ``slots`` (default: the window, oldest first)."""
        slots = self.slots() if slots is None else slots
        return self.Zh[slots] * self.s[slots, None], self.Y[slots]

    def sqrt_weights(self, forgetting_factor):
        """``√λ^age`` of the held rows, oldest first (the newest has weight 1)."""
        return np.sqrt(forgetting_factor) ** np.arange(self.n - 1, -1, -1)

    def singular_values(self, forgetting_factor):
        """Singular values of the weighted window ``W½ Z``."""
        Z, _ = self.raw()
        return svd(Z * self.sqrt_weights(forgetting_factor)[:, None], compute_uv=False)

    def load(self, Zh, s, Y, *, gram=None):
        """Replace the window by rows ``Zh, s, Y`` (oldest first, at most ``N``).

        ``gram`` is their unit-row Gram matrix when the caller has it (else computed).
        """
        n = Zh.shape[0]
        self.Zh[:n], self.s[:n], self.Y[:n] = Zh, s, Y
        self.Zh[n:], self.s[n:], self.Y[n:] = 0.0, 0.0, 0.0
        if self.G is not None:
            self.G[:] = 0.0
            self.G[:n, :n] = Zh @ Zh.T if gram is None else gram
        self.n = n
        self.pos = n % self.N

    def checkpoint(self, n_rows):
        """What writing ``n_rows`` more rows would overwrite (restore with :meth:`restore`)."""
        if n_rows == 1:  # the single-observation path: one slot, basic indexing
            p = self.pos
            G = None if self.G is None else (self.G[p].copy(), self.G[:, p].copy())
            return (p, self.Zh[p].copy(), self.s[p], self.Y[p].copy()), G, p, self.n
        k = min(n_rows, self.N)
        slots = (self.pos + np.arange(k)) % self.N
        saved = (slots, self.Zh[slots].copy(), self.s[slots].copy(), self.Y[slots].copy())
        G = None if self.G is None else (self.G[slots].copy(), self.G[:, slots].copy())
        return saved, G, self.pos, self.n

    def restore(self, token):
        """Undo the writes since :meth:`checkpoint` (of at most the rows it was given)."""
        (slots, Zh, s, Y), G, self.pos, self.n = token
        self.Zh[slots], self.s[slots], self.Y[slots] = Zh, s, Y
        if G is not None:
            self.G[:, slots] = G[1]
            self.G[slots] = G[0]
