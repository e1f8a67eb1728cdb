"""The window of a sliding-window least-squares model: a ring buffer of its rows.

Rows are stored normalised, ``z = s·ẑ`` with ``‖ẑ‖ = 1`` (``s = 0``, ``ẑ = 0`` for a zero
row): inner products of unit rows can neither overflow nor underflow, whatever the scale of
the input (``1e-300`` … ``1e300``), and the Gram matrix of the window has a unit diagonal,
which is the Jacobi scaling the Gram-based solvers need anyway.
"""

import weakref

import numpy as np
from scipy.linalg.blas import dnrm2

from .._docstrings import fill_doc
from .._streaming._base import make_private, needs_private
from ._kernels import svd

__all__ = [
    "OVERFLOW_MESSAGE", "RingBuffer", "WindowBuffer", "first_immoderate", "moderate",
    "normalise_rows", "unit_scale",
]

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


def unit_scale(X):
    """Rows at unit scale: ``(m, X/m)`` with ``m = max |x|`` per row (1 for a zero row).

    A zero-weight row's ``x`` is checked for no scale: its products with the window's
    rows are taken at this scale, and ``m`` put back on the prediction, so that neither
    overflows where the prediction does not."""
    m = np.abs(X).max(axis=1, initial=0.0)
    m = np.where(m > 0, m, 1.0)
    return m, X / m[:, None]


def moderate(s, bound=1e100):
    """Whether every norm in ``s`` is ``0`` or lies in ``[1/bound, bound]`` (default
    ``[1e-100, 1e100]``).

    ``s`` are exact norms (a ``0`` is a zero row; see :func:`normalise_rows`). Inner
    products of rows of such norms neither overflow nor lose more than ``D·1e-108`` of
    their scale to underflow: divided by the norms they are the unit rows' products.
    A squared norm computed from the rows is no such ``s``: the squares of a row of norm
    ``1e-170`` underflow to ``0`` (see :func:`first_immoderate`).
    """
    nonzero = np.where(s > 0.0, s, 1.0)
    return bool(nonzero.min(initial=1.0) >= 1.0 / bound and nonzero.max(initial=1.0) <= bound)


def first_immoderate(ss, rows, bound=1e100):
    """The index of the first row whose squared norm ``ss[i] = ‖rows[i]‖²`` (computed
    from ``rows``) is not ``0`` or in ``[1/bound², bound²]`` (see :func:`moderate`), or
    None; a ``0`` counts only for a row that is zero, not one whose squares underflowed."""
    with np.errstate(invalid="ignore"):
        s = np.sqrt(ss)
        bad = ((ss == 0.0) & rows.any(axis=1)) | ((s > 0) & ~((s >= 1.0 / bound) & (s <= bound)))
    i = np.flatnonzero(bad)
    return int(i[0]) if i.size else None


def _norm_overflow():
    raise ValueError(
        "a row's Euclidean norm exceeds the largest float64 (1.8e308); rescale X, e.g. "
        "with RecursiveStandardScaler."
    )


#: values a ring derives from its position and row count alone, by ring: kept outside its
#: state (not pickled, copied or compared; an interrupted call's restore need not undo
#: them: each is keyed by what it depends on)
_KEPT = weakref.WeakKeyDictionary()


def _kept(ring, name, key, compute):
    """``compute()``, or the value kept for ``ring`` under ``name`` while ``key`` stays."""
    kept = _KEPT.get(ring)
    if kept is None:
        kept = _KEPT[ring] = {}
    value = kept.get(name)
    if value is None or value[0] != key:
        value = kept[name] = (key, compute())
    return value[1]


class RingBuffer:
    """The last ``N`` rows of a stream, in a ring: one array per field, indexed by slot.

    The one ring of the package: :class:`WindowBuffer` (the window solvers' unit rows)
    and the sliding-window baselines (their raw rows) keep their windows in it.

    Parameters
    ----------
    window_size : int
        ``N``, the number of slots.
    **fields : tuple of int
        The name of each per-slot array and the shape of one row of it (``()``: one
        number per row), e.g. ``X=(n_features,), Y=(n_targets,)``. The arrays start at 0.

    Attributes
    ----------
    N : int
        Number of slots.
    fields : tuple of str
        The names of the per-slot arrays, in the order :meth:`push` takes their values.
    <field> : ndarray of shape (N, ...)
        One array per field, by slot (e.g. ``X``, ``Y``).
    pos : int
        The slot the next row is written to (the oldest row's slot once full).
    n : int
        Rows held, ``≤ N``.
    """

    def __init__(self, window_size, **fields):
        self.N = window_size
        self.fields = tuple(fields)
        for name, shape in fields.items():
            setattr(self, name, np.zeros((window_size, *shape)))
        self.pos = 0
        self.n = 0

    def slots(self):
        """Slots of the held rows, oldest first (kept while ``pos`` and ``n`` stay, on
        which alone it depends: see :func:`_kept`; not to be written to)."""
        return _kept(self, "slots", (self.pos, self.n),
                     lambda: (self.pos - self.n + np.arange(self.n)) % self.N)

    def next_slots(self, k):
        """The slots the next ``k`` rows are written to, in order (a slot recurs every
        ``N`` rows)."""
        return (self.pos + np.arange(k)) % self.N

    def push(self, *values):
        """Write one row, a value per field (in the order of :attr:`fields`), into slot
        :attr:`pos`; ``None`` leaves that field's slot as it is (already written)."""
        p = self.pos
        for name, value in zip(self.fields, values):
            if value is not None:
                getattr(self, name)[p] = value
        self._advance()

    def _advance(self):
        """Move to the next slot once the row at :attr:`pos` is written."""
        # invariant: the held rows are the last n ≤ N pushed, the newest in slot pos − 1
        self.pos = (self.pos + 1) % self.N
        if self.n < self.N:
            self.n += 1

    def load(self, *arrays):
        """Replace the window by the rows ``arrays`` (a value array per field, oldest
        first, at most ``N`` rows); the other slots are zeroed."""
        n = arrays[0].shape[0]
        for name, rows in zip(self.fields, arrays):
            a = getattr(self, name)
            a[:n] = rows
            a[n:] = 0.0
        self.n = n
        self.pos = n % self.N

    def checkpoint(self, n_rows):
        """What writing ``n_rows`` more rows would overwrite (restore with :meth:`restore`)."""
        if n_rows == 1:  # the single-observation path: one slot, basic indexing
            slots = self.pos
        else:
            slots = self.next_slots(min(n_rows, self.N))
        saved = tuple(getattr(self, name)[slots].copy() for name in self.fields)
        return slots, saved, self.pos, self.n

    def restore(self, token):
        """Undo the writes since :meth:`checkpoint` (of at most the rows it was given)."""
        slots, saved, self.pos, self.n = token
        for name, values in zip(self.fields, saved):
            getattr(self, name)[slots] = values

    def writable(self):
        """The ring, its arrays first replaced by plain, writable copies if one maps a
        file or is read-only (:func:`~sklearn_orfit._streaming._base.make_private`):
        learning writes into them."""
        if any(needs_private(getattr(self, name)) for name in self.fields):
            make_private(self)
        return self


@fill_doc()
class WindowBuffer(RingBuffer):
    """The last ``N`` rows of a stream, in a ring (:class:`RingBuffer`): unit rows, their
    norms and their targets.

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
        super().__init__(window_size, Zh=(n_features,), s=(), Y=(n_targets,))
        N = window_size
        self.G = np.zeros((N, N)) if gram else None

    def push(self, zh, s, y, k=None, written=False):
        """Write one row; ``k`` are its products with every slot (``ẑ·Zh[slot]``).

        ``written``: the unit row is already in its slot (the single-observation path
        normalises it there).
        """
        # the fields written here rather than through RingBuffer.push's loop: this is
        # the single-observation path's write
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
        self._advance()

    def raw(self, slots=None):
        """Rows ``s·ẑ`` and targets of ``slots`` (default: the window, oldest first)."""
        slots = self.slots() if slots is None else slots
        return self.Zh[slots] * self.s[slots, None], self.Y[slots]

    def slot_weights(self, forgetting_factor):
        """``λ^age`` of each slot's row (``0`` for an empty slot), or None when every
        weight is 1 (``λ = 1``, a full window)."""
        N = self.N
        if forgetting_factor == 1.0 and self.n == N:
            return None
        age = (self.pos - 1 - np.arange(N)) % N
        return np.where(age < self.n, forgetting_factor ** np.minimum(age, self.n), 0.0)

    def sqrt_weights(self, forgetting_factor):
        """``√λ^age`` of the held rows, oldest first (the newest has weight 1; kept while
        ``n`` and ``λ`` stay, on which alone it depends: ``O(N)`` powers, 35 µs at
        ``N = 2000``, once per window on the orthogonal route otherwise; not to be
        written to)."""
        return _kept(self, "sqrt_weights", (self.n, float(forgetting_factor)),
                     lambda: np.sqrt(forgetting_factor) ** np.arange(self.n - 1, -1, -1))

    def singular_values(self, forgetting_factor):
        """Singular values of the weighted window ``W½ Z``."""
        Z, _ = self.raw()
        return svd(Z * self.sqrt_weights(forgetting_factor)[:, None], compute_uv=False)

    def load(self, Zh, s, Y, *, gram=None):
        """Replace the window by rows ``Zh, s, Y`` (oldest first, at most ``N``).

        ``gram`` is their unit-row Gram matrix when the caller has it (else computed).
        """
        super().load(Zh, s, Y)
        if self.G is not None:
            n = Zh.shape[0]
            self.G[:] = 0.0
            self.G[:n, :n] = Zh @ Zh.T if gram is None else gram

    def checkpoint(self, n_rows):
        """What writing ``n_rows`` more rows would overwrite (restore with :meth:`restore`)."""
        token = super().checkpoint(n_rows)
        slots = token[0]
        G = None if self.G is None else (self.G[slots].copy(), self.G[:, slots].copy())
        return token, G

    def restore(self, token):
        """Undo the writes since :meth:`checkpoint` (of at most the rows it was given)."""
        token, G = token
        super().restore(token)
        if G is not None:
            slots = token[0]
            self.G[:, slots] = G[1]
            self.G[slots] = G[0]
