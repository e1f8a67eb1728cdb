"""The from-scratch route for short windows: every window solved on its own, in batches.

For a call of ``b`` rows, the ``b + 1`` windows it passes through (before each new row,
and after the last) are independent small problems. In the unit-row coordinates of
:mod:`._window` (``z = s·ẑ``, weights ``w = λ^age``)::

    dual   (D ≥ N):  (K̂ + diag(α / (w s²))) â = y / s,        β = Ẑᵀ â
    primal (D < N):  (Σ ω ẑẑᵀ + α/ω_max I) β = Σ (w s / ω_max) y ẑ,   ω = w s² / ω_max

The inner products of a whole call come from a few matrix products (a band of the Gram
matrix), the small systems are solved together (:func:`solve_normal_stack`), and a window
whose Gram matrix is too ill-conditioned (or has an all-zero row) is recomputed on the
orthogonal route (:func:`lstsq_stack`, :func:`numpy.linalg.lstsq`'s cut-off). Nothing is
carried from one window to the next, so nothing drifts; the cost is ``O(N³)`` (dual) or
``O(N·D² + D³)`` (primal) a window, the right trade for ``N`` up to a few tens and for
windows of a few features (``N·D² ≤ 50,000``, ``SCRATCH_PRIMAL_FLOPS``). With ``c``
targets, a dual window whose ``â`` serves only its prediction is solved for the new row
instead, ``ŷ/s = k̂ᵀK⁻¹ỹ = (K⁻¹k̂)ᵀỹ``: one column, not ``c``.
"""

import math

import numpy as np
from scipy.linalg.blas import dnrm2, idamax

from .._docstrings import fill_doc
from ._window import (
    OVERFLOW_MESSAGE, WindowBuffer, _norm_overflow, first_immoderate, moderate, normalise_rows, unit_scale,
)
from ._kernels import (
    EPS, GRAM_KAPPA_MAX, REDUCED_SHARE_SCRATCH, SHIFT_MAX, cho_solve_checked, dual_window_solve, few_rows,
    lstsq_stack, packed_rows, probe_columns, solve_normal_stack, weight_spread,
)

__all__ = ["BatchSolver"]

# numbers held by the temporary stacks of one block (≈ 32 MB)
_BLOCK_NUMBERS = 2**22
# primal normal equations without rescaling while norms lie in [1e-50, 1e50] and weights
# are at least 1e-50: ω = w s² then lies in [1e-150, 1e100]
_PRIMAL_RANGE = 1e50


@fill_doc()
class BatchSolver:
    """Each window solved from scratch (see the module docstring).

    Parameters
    ----------
    {solver_parameters}
    orthogonal_only : bool, default=False
        Send every window to the orthogonal route (``solver="svd"``).
    dual : bool, default=None
        Solve the windows' dual systems (``n×n``) rather than their normal equations
        (``D×D``); ``None``: when ``D ≥ N``.
    """

    #: :meth:`update` takes a call of any length (it works in bounded blocks itself)
    handles_long_calls = True

    def __init__(self, *, window_size, n_features, n_targets, forgetting_factor, alpha, orthogonal_only=False,
                 dual=None):
        self.N, self.D, self.c = window_size, n_features, n_targets
        self.lam, self.alpha = float(forgetting_factor), float(alpha)
        self.orthogonal_only = orthogonal_only
        self.dual = n_features >= window_size if dual is None else bool(dual)
        self.buf = WindowBuffer(
            window_size=window_size, n_features=n_features, n_targets=n_targets,
            gram=self.dual and not orthogonal_only,
        )
        self.sw = np.sqrt(self.lam) ** np.arange(window_size - 1, -1, -1)  # oldest first
        self.n_orthogonal = 0
        self._beta = np.zeros((n_features, n_targets))

    def coef(self):
        """``β`` of the current window, shape ``(D, n_targets)``."""
        return self._beta

    def checkpoint(self, n_rows):
        """A record to undo the next ``n_rows`` rows with (see :meth:`restore`)."""
        # a call of several rows (or any call on the orthogonal-only route) reloads the
        # whole window; one row on the other routes writes one slot
        one_slot = n_rows == 1 and not self.orthogonal_only
        return dict(self.__dict__), self.buf.checkpoint(1 if one_slot else self.N)

    def restore(self, record):
        """Put the solver back as it was at :meth:`checkpoint`."""
        attrs, token = record
        self.__dict__.clear()
        self.__dict__.update(attrs)
        self.buf.restore(token)

    #: :meth:`update` predicts zero-weight rows itself (see ``update_rows``)
    takes_inert = True

    def update(self, Z, Y, *, predict, inert=None):
        """Learn the rows of ``Z`` in order; return the prequential predictions if asked.

        ``inert``: ``(mask, X)``, rows of ``Z`` that are zero (zero-weight rows) and are
        predicted as the rows of ``X``, by the coefficients of the window before each,
        in the same pass.
        """
        if Z.shape[0] == 1 and not self.orthogonal_only:
            Zh, s = normalise_rows(Z)
            if predict and inert is not None and inert[0][0]:
                Y_pred = inert[1][:1] @ self._beta
            else:
                Y_pred = (Z @ self._beta) if predict else None
            self._one(Zh[0], s[0], Y[0])
            return Y_pred
        # while every norm (the new rows' and the window's) and weight is moderate, the
        # products of the rows as given (divided by the norms on the dual route) are as
        # exact as the unit rows' and save a pass over the call (_block)
        raw = not self.orthogonal_only
        Y_pred = np.empty((Z.shape[0], self.c)) if predict else None
        N, D = self.N, self.D
        # blocks of rows whose temporaries hold about _BLOCK_NUMBERS numbers (a call of any
        # length: the estimator hands it over whole); unit rows are a copy of the block
        rows = max(1, _BLOCK_NUMBERS // (N * (N + 1) if self.dual else (D * D + N * D)))
        if not raw:
            rows = min(rows, max(1, _BLOCK_NUMBERS // max(D, 1)))
        a, upto = 0, None
        while a < Z.shape[0]:
            b = min(a + rows, Z.shape[0]) if upto is None else upto
            upto = None
            try:
                Yp = self._block(Z[a:b], Y[a:b], predict=predict, raw=raw,
                                 inert=None if inert is None else (inert[0][a:b], inert[1][a:b]))
            except _NotModerate as stop:
                if stop.first:
                    # the rows before the first of extreme norm are learned as given, as
                    # they would be in a call that ended there: a later row must not
                    # change an earlier prediction, to the last bit
                    upto = a + stop.first
                else:
                    # extreme norms: this block, and the rest of the call, on unit rows
                    raw, rows = False, min(rows, max(1, _BLOCK_NUMBERS // max(D, 1)))
                continue
            if predict:
                Y_pred[a:b] = Yp
            a = b
        return Y_pred

    # ------------------------------------------------------------------ a block of rows
    def _block(self, Zn, Yn, *, predict, raw=False, inert=None):
        """Windows ``j = 0 … b`` of ``E = [window (N rows, zero rows before the stream); new]``.

        ``Zn`` are the new rows. Without ``raw`` they are normalised first. With ``raw``
        the rows as given are used: on the dual route the band of their inner products,
        divided by the norms; on the primal route their weighted normal equations. Raises
        :class:`_NotModerate`, before anything is changed, when a norm (or, on the primal
        route, a weight) is not moderate. ``inert``: as in :meth:`update`, for these rows.
        """
        if not raw:
            Zn, sn = normalise_rows(Zn)
        N, b = self.N, Zn.shape[0]
        buf = self.buf
        pad_rows = N - buf.n
        slots = buf.slots()
        Zo = np.zeros((N, self.D))
        so = np.zeros(N)
        Yo = np.zeros((N, self.c))
        Zo[pad_rows:], so[pad_rows:], Yo[pad_rows:] = buf.Zh[slots], buf.s[slots], buf.Y[slots]
        band = None
        if raw and self.dual:
            Zo *= so[:, None]
            band = _band(Zo, Zn, N)
            ss = band[N:, 0]  # ‖z‖² of the new rows, from the band
            if not moderate(so):
                raise _NotModerate
            first = first_immoderate(ss, Zn)
            if first is not None:
                raise _NotModerate(first)
            sn = np.sqrt(ss)
        elif raw:
            # norms in [1e-50, 1e50] and weights ≥ 1e-50: w z zᵀ neither overflows nor
            # loses a row to underflow (_primal's unscaled case, _primal_unscaled)
            ss = np.einsum("ij,ij->i", Zn, Zn)
            if not self._primal_unscaled(moderate(so, _PRIMAL_RANGE)):
                raise _NotModerate
            first = first_immoderate(ss, Zn, _PRIMAL_RANGE)
            if first is not None:
                raise _NotModerate(first)
            Zo *= so[:, None]
            sn = np.sqrt(ss)
        # E = [Zo; Zn] is never formed (a copy of the whole call): rows come from _take
        sE, YE = np.concatenate([so, sn]), np.concatenate([Yo, Yn])

        def unit_rows(idx):  # unit rows of E
            R = _take(Zo, Zn, idx)
            if raw:
                R /= np.where(sE[idx] > 0, sE[idx], 1.0)[..., None]
            return R

        def rows_of(idx):  # rows of E as given
            R = _take(Zo, Zn, idx)
            return R if raw else R * sE[idx][..., None]

        # the new rows predicted as other rows (zero-weight rows: a zero row to the solver,
        # predicted as the row given): ŷ_j = x_j·β_j, β_j of the window before row j
        inert_j = None
        if predict and inert is not None and inert[0].any():
            inert_j, X_inert = np.flatnonzero(inert[0]), inert[1]

        def pred_rows(js):  # the rows as given of the new rows js, inert ones as in X
            R = rows_of(N + js)
            if inert_j is not None:
                m = inert[0][js]
                R[m] = X_inert[js[m]]
            return R

        win = _windows(np.arange(N + b), N)  # (b+1, N) rows of E
        # s_w[j, i], Y_w[j, i]: norm and targets of row i of window j (strided views)
        s_w = _windows(sE, N)
        Y_w = _windows(YE, N)
        w = self.sw**2
        before_stream = win < pad_rows
        Y_pred = np.zeros((b, self.c)) if predict else None
        K_last = None
        if self.orthogonal_only:
            flagged = np.ones(b + 1, dtype=bool)
        elif self.dual:
            if raw:
                # ⟨ẑ_r, ẑ_r'⟩ = ⟨z_r, z_r'⟩/(s_r s_r'): the norms are in [1e-100, 1e100], so
                # the products neither overflow nor lose more than D·1e-108 to underflow
                band = _unit_band(band, sE, N)
            else:
                band = _band(Zo, Zn, N)
            # k̂_j[i] = ⟨ẑ_new j, row i of window j⟩ = band[N+j, N−i]
            k_new = band[N : N + b, N:0:-1]
            # several targets: a window whose â serves only its prediction ŷ_j = s_j k̂_jᵀâ_j
            # is solved for t_j = K̂_j⁻¹k̂_j instead (one column, not c), ŷ_j = s_j t_jᵀỹ_j;
            # the last window (β) and those before inert rows keep â
            by_t = np.zeros(b + 1, dtype=bool)
            if predict and self.c > 1:
                by_t[:b] = True
                if inert_j is not None:
                    by_t[inert_j] = False
            K = _windows_from_band(band, s_w.shape[0], N)
            jt = np.flatnonzero(by_t)
            if jt.size:
                ja = np.flatnonzero(~by_t)
                a = np.zeros((b + 1, N, self.c))
                flagged = np.zeros(b + 1, dtype=bool)
                t, flagged[jt] = self._dual(K[jt], s_w[jt], Y_w[jt], before_stream[jt], w, rhs=k_new[jt, :, None])
                a[ja], flagged[ja] = self._dual(K[ja], s_w[ja], Y_w[ja], before_stream[ja], w)
            else:
                a, flagged = self._dual(K, s_w, Y_w, before_stream, w)
            js = np.flatnonzero(flagged)
            if js.size:
                # windows with repeated (parallel) rows: singular, but not once merged
                a_m, ok = self._dual_merged(_windows_from_band(band, s_w.shape[0], N, js), rows_of,
                                            win[js], s_w[js], Y_w[js], before_stream[js], w)
                a[js[ok]], flagged[js[ok]] = a_m[ok], False
                by_t[js[ok]] = False  # (predicted from their merged â)
            if predict:
                # ŷ_j = s_j (k̂_j · â_j)
                Y_pred[:] = sn[:, None] * np.einsum("jn,jnc->jc", k_new, a[:b])
                if jt.size:
                    # ŷ_j = s_j t_jᵀỹ_j, ỹ = y/s (t_i = 0 exactly on the decoupled rows)
                    tj = np.flatnonzero(by_t[jt])
                    j = jt[tj]
                    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                        u = np.where(s_w[j] > 0, t[tj, :, 0] / np.where(s_w[j] > 0, s_w[j], 1.0), 0.0)
                    Y_pred[j] = sn[j, None] * np.einsum("jn,jnc->jc", u, Y_w[j])
                if inert_j is not None:
                    # x_j·β_j = Σ_i â_j[i] ⟨x_j, ẑ_i⟩ over window j's unit rows, with x_j
                    # taken to unit scale first (m_j = max|x_j|, put back at the end): a
                    # zero-weight row's x is checked for no scale, and on the raw route
                    # its products with rows of norm up to 1e100 would otherwise overflow
                    m, X_j = unit_scale(X_inert[inert_j])
                    k = _window_products(Zo, Zn, inert_j, X_j)
                    if raw:
                        k /= np.where(s_w[inert_j] > 0, s_w[inert_j], 1.0)
                    Y_pred[inert_j] = np.einsum("jn,jnc->jc", k, a[inert_j]) * m[:, None]
            beta = unit_rows(win[b]).T @ a[b]
            K_last = _gram_of_window(band, N + b, N)
        else:
            # D < N ≤ 32: the stacked rows are small; window j is a strided view of them
            E = np.concatenate([Zo, Zn])
            Ew = np.swapaxes(_windows(E, N), 1, 2)
            # the route of each window by its effective window: one with at most D rows
            # that carry anything (the fill phase, zero-weight rows) has singular normal
            # equations (with a small ridge, conditioned like 1/α): its dual system
            # (n×n) instead
            # (rows before the stream are zero rows: s = 0)
            c = np.concatenate([[0], np.cumsum(sE > 0)])
            few = c[N:] - c[:-N] <= self.D
            pred = None  # (the predictions, when _primal makes them)
            if not few.any():
                # (the windows' sums from the call's rows as given, weights λ^age ≥ 1e-50)
                rows = (None if N < _SUMS_ROWS_PER_FEATURE * self.D or (N - 1) * -np.log(self.lam) > np.log(1e50)
                        else E if raw else E * sE[:, None])
                P = pred_rows(np.arange(b)) if predict and self.c > 1 and rows is None else None
                betas, flagged, pred = self._primal(Ew, s_w, Y_w, w, sE, raw=raw, rows=(rows, YE), pred=P)
                if pred is not None:
                    Y_pred[:] = pred
            else:
                betas = np.empty((b + 1, self.D, self.c))
                flagged = np.empty(b + 1, dtype=bool)
                many = ~few
                if many.any():
                    betas[many], flagged[many], _ = self._primal(Ew[many], s_w[many], Y_w[many], w,
                                                                 sE, raw=raw)
                # each such window's non-zero rows only (at most D of them, in order;
                # padded with rows that carry nothing): a D×D system, not an N×N one
                nz = s_w[few] > 0
                jj, ii = np.nonzero(nz)
                rank = np.cumsum(nz, axis=1)[jj, ii] - 1
                pos = np.zeros((nz.shape[0], self.D), dtype=np.intp)
                real = np.zeros(pos.shape, dtype=bool)
                pos[jj, rank], real[jj, rank] = ii, True
                rows_few = np.take_along_axis(win[few], pos, axis=1)
                U = unit_rows(rows_few)
                U[~real] = 0.0
                s_few = np.where(real, np.take_along_axis(s_w[few], pos, axis=1), 0.0)
                a, flagged[few] = self._dual(U @ np.swapaxes(U, 1, 2), s_few,
                                             YE[rows_few] * real[:, :, None], ~real, w[pos])
                betas[few] = np.swapaxes(U, 1, 2) @ a
            if predict and pred is None:
                Y_pred[:] = np.einsum("jd,jdc->jc", pred_rows(np.arange(b)), betas[:b])
            beta = betas[b]
        idx = np.flatnonzero(flagged)
        if idx.size:
            # the orthogonal route: QR + SVD of each flagged window, in chunks
            for chunk in np.array_split(idx, max(1, idx.size // 64)):
                W = win[chunk]
                # windows with few non-negligible rows: those rows alone are gathered
                keep, few = few_rows(s_w[chunk] * self.sw, lambda: np.abs(Y_w[chunk]).max(axis=2) * self.sw,
                                     cap=REDUCED_SHARE_SCRATCH * N)
                bts = np.empty((chunk.size, self.D, self.c))
                # each window solved as it would be alone, to the last bit: a stack's
                # padding and method must not depend on which other windows of the call
                # need this route (later rows would change an earlier prediction): the
                # windows with few rows padded to the most rows a window may keep, the
                # others by the SVD
                if few.any():
                    order, real = packed_rows(keep[few], width=REDUCED_SHARE_SCRATCH * N)
                    rows = np.take_along_axis(W[few], order, axis=1)
                    swk = (self.sw[order] * real)[:, :, None]
                    bts[few] = lstsq_stack(rows_of(rows) * swk, YE[rows] * swk, alpha=self.alpha, keep=real,
                                           n_rows=N, width=real.shape[1])[0]
                if not few.all():
                    bts[~few] = lstsq_stack(rows_of(W[~few]) * self.sw[:, None], YE[W[~few]] * self.sw[None, :, None],
                                            alpha=self.alpha, reduce=False, ridge_qr=False)[0]
                pred = chunk < b
                if predict and pred.any():
                    Y_pred[chunk[pred]] = np.einsum("jd,jdc->jc", pred_rows(chunk[pred]), bts[pred])
                if chunk[-1] == b:
                    beta = bts[-1]
            self.n_orthogonal += int(idx.size)
        # commit: the window is the last N rows of E
        # invariant: buf holds the window's unit rows, norms and targets (G = Ẑ Ẑᵀ on the
        # dual route) and _beta = pinv(W½ Z) W½ Y of it (ridge: its regularised solution)
        self._beta = beta
        n_keep = min(N, buf.n + b)
        keep = np.arange(N + b - n_keep, N + b)
        buf.load(unit_rows(keep), sE[keep], YE[keep], gram=None if K_last is None else K_last[-n_keep:, -n_keep:])
        return Y_pred

    def _dual(self, K, s_w, Y_w, before_stream, w, rhs=None):
        """``(K̂_j + diag(α/(w s²))) â_j = y/s`` for windows ``j`` (``K``: their unit rows'
        Gram matrices, a fresh array, solved in place); the windows of the dual route
        (``D ≥ N``), and of the primal route those with at most ``D`` non-zero rows.
        ``rhs``: other right-hand sides than ``y/s`` (zeroed on the rows decoupled)."""
        n = K.shape[-1]
        w = w if w.ndim == 2 else w[None, :]  # a weight per window position, or per row
        with np.errstate(divide="ignore", over="ignore", under="ignore"):
            # a subnormal s² only makes an already negligible row's shift inexact
            shift = self.alpha / (w * s_w * s_w) if self.alpha else np.zeros_like(s_w)
        # rows that carry nothing: before the stream, zero rows (a zero weight included),
        # or (with a ridge) negligible ones
        dec = before_stream | (s_w == 0) | ((self.alpha > 0) & ~(shift <= SHIFT_MAX))
        S = K  # a fresh array: solved in place
        jj, ii = np.nonzero(dec)
        S[jj, ii, :] = 0.0
        S[jj, :, ii] = 0.0
        if self.alpha:
            il = np.arange(n)
            S[:, il, il] += np.where(dec, 0.0, shift)
        if rhs is None:
            with np.errstate(divide="ignore"):
                rhs = np.where(dec | (s_w == 0), 0.0, 1.0 / np.where(s_w > 0, s_w, 1.0))[:, :, None] * Y_w
        # without a ridge the coupled diagonal is that of unit rows: 1
        a, kappa = solve_normal_stack(S, rhs, pad=dec, jacobi=bool(self.alpha))
        if self.alpha == 0.0:
            kappa = kappa * weight_spread(w * s_w, s_w, ~dec)
        return a, ~(kappa <= GRAM_KAPPA_MAX)

    def _dual_merged(self, K, rows, ids, s_w, Y_w, before_stream, w):
        """The dual systems of windows (``K``: their unit rows' Gram matrices; ``rows(ix)``
        the rows of an index array, ``ids`` the windows' row indices, shape ``(m, n)``)
        with each group of parallel rows merged into one.

        Rows ``σ_i s_i ẑ`` with one direction ``ẑ`` (``σ_i = ±1``) contribute
        ``Σ w_i (σ_i s_i ẑ·β − y_i)² = Ω (ẑ·β − t)² + const``, ``Ω = Σ w_i s_i²``,
        ``t = Σ w_i s_i σ_i y_i / Ω``: one row of weight ``Ω`` and target ``t`` has the same
        (minimum-norm, or ridge) solution, and the window's Gram matrix loses the exact
        singularity that sent it to the orthogonal route (repeated rows, a constant start).
        Rows count as parallel when their rows, normalised here by one routine, differ
        by at most ``min(8, max(n, D)/2)·eps`` (copies of one row stored by different
        calls differ by a unit or two in the last place): the singular value such a
        difference makes is below lstsq's cut-off, which would drop it too. Candidates
        come from ``K̂_il ≥ 1 − 1e-8``, then the rows are compared. ``O(n² + pairs·D)`` a
        window, on windows whose first solve failed only.

        Returns ``(â, ok)``; ``ok`` false: no merge, or the merged system is still too
        ill-conditioned (the orthogonal route).
        """
        m, n = s_w.shape
        w = np.broadcast_to(w, (m, n))
        live = ~before_stream & (s_w > 0) & (w > 0)
        il = np.arange(n)
        cand = (np.abs(K) >= 1.0 - 1e-8) & live[:, :, None] & live[:, None, :] & (il[:, None] < il[None, :])
        jj, ii, ll = np.nonzero(cand)
        sign = np.sign(K[jj, ii, ll])  # −1: opposite directions, ẑ_l = −ẑ_i
        # a pair of rows is compared once, whichever windows share it (windows that slide
        # by one row share most of their pairs): O(pairs·D) for the distinct pairs
        gi, gl = ids[jj, ii], ids[jj, ll]
        base = int(ids.max(initial=0)) + 1
        pairs, first, back = np.unique(gi * base + gl, return_index=True, return_inverse=True)
        P, Q = rows(pairs // base), rows(pairs % base)
        D = P.shape[1]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
            P = P / np.linalg.norm(P, axis=1, keepdims=True)
            Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
            close = np.linalg.norm(P - sign[first][:, None] * Q, axis=1) <= min(8.0, max(n, D) / 2) * EPS
        close = close[back.ravel()]
        jj, ii, ll, sign = jj[close], ii[close], ll[close], sign[close]
        merged = np.zeros(m, dtype=bool)
        merged[jj] = True
        if not merged.any():
            return np.zeros((m, n, self.c)), merged
        # rep[j, i]: the first row of i's group in window j (the smallest index linked)
        # and sgn[j, i] = ±1: ẑ_i = sgn · ẑ_rep (signs multiply along a chain of links)
        rep = np.broadcast_to(il, (m, n)).copy()
        np.minimum.at(rep, (jj, ll), ii)
        sgn = np.ones((m, n))
        first = rep[jj, ll] == ii  # the link that set rep
        sgn[jj[first], ll[first]] = sign[first]
        while True:
            nxt = np.take_along_axis(rep, rep, axis=1)
            if np.array_equal(nxt, rep):
                break
            sgn = sgn * np.take_along_axis(sgn, rep, axis=1)
            rep = nxt
        jw = np.broadcast_to(np.arange(m)[:, None], (m, n))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            om = np.where(live, w * s_w * s_w, 0.0)  # w s²
            Om = np.zeros((m, n))
            np.add.at(Om, (jw, rep), om)
            Wy = np.zeros((m, n, self.c))
            np.add.at(Wy, (jw, rep), np.where(live, sgn * w * s_w, 0.0)[:, :, None] * Y_w)
            head = live & (rep == il)
            s2 = np.where(head, s_w, 0.0)
            # one row of norm s_rep, weight Ω / s_rep², target t·s_rep
            w2 = np.where(head, Om / np.where(head, s_w * s_w, 1.0), 0.0)
            Y2 = np.where(head[:, :, None], Wy / np.where(head, Om, 1.0)[:, :, None] * s_w[:, :, None], 0.0)
            finite = np.isfinite(w2).all(axis=1) & np.isfinite(Y2).all(axis=(1, 2))
        a, flagged = self._dual(np.array(K), s2, Y2, ~head, w2)
        return a, merged & finite & ~flagged

    def _primal(self, Ew, s_w, Y_w, w, sE, raw=False, rows=(None, None), pred=None):
        """``D < N``: the weighted normal equations of every window (``Ew``: the windows'
        unit rows, shape ``(b+1, D, N)``, or with ``raw`` their rows as given, whose norms
        and weights the caller has checked are moderate; ``sE``: the norms of all the rows).
        ``rows``: the rows as given of the whole stack ``E`` and their targets, or None:
        the windows' weighted sums are then taken from them (:func:`_window_sums`,
        ``O(D²)`` a window, not ``O(N·D²)``).

        Returns ``β`` of every window, which are flagged for the orthogonal route, and
        the predictions or None. ``pred``: the rows (as given) that windows ``0 … b−1``
        predict, for several targets: those windows are then only predicted, and from one
        column each (:meth:`_primal_predictions`; their ``β`` are not solved); None: every
        window's ``β``."""
        unscaled = raw or self._primal_unscaled(moderate(sE, _PRIMAL_RANGE))
        if unscaled and rows[0] is not None:
            # S_j = Σ_{i ∈ window j} w_i z_i z_iᵀ (+ αI), rhs_j = Σ w_i z_i y_iᵀ
            with np.errstate(over="ignore", invalid="ignore"):  # a huge target: caught below
                S, rhs = _window_sums(rows[0], rows[1], self.N, self.lam)
            if self.alpha:
                d = np.arange(self.D)
                S[:, d, d] += self.alpha
            bad = None
            if not (np.isfinite(S).all() and np.isfinite(rhs).all()):
                bad = ~(np.isfinite(S).all(axis=(1, 2)) & np.isfinite(rhs).all(axis=(1, 2)))
        elif unscaled:
            # norms and weights in a moderate range (the common case): ω = w s² lies in
            # [1e-150, 1e100], so S = Σ ω ẑẑᵀ neither overflows nor loses rows to
            # underflow, and the estimate of κ(S) needs no Jacobi scaling. Rows as given
            # carry their norms: then ω = w and w s → w, one weight per window position
            if raw:
                # (every weight 1 when λ = 1: the rows themselves, with no product by 1)
                om = cy = None if self.lam == 1.0 else w[None, :]
            else:
                om, cy = w[None, :] * s_w * s_w, w[None, :] * s_w
            S = (Ew if om is None else Ew * om[:, None, :]) @ np.swapaxes(Ew, 1, 2)
            if self.alpha:
                d = np.arange(self.D)
                S[:, d, d] += self.alpha
            if pred is not None:
                return self._primal_predictions(S, Ew, Y_w, cy, pred)
            with np.errstate(over="ignore", invalid="ignore"):  # a huge target: caught below
                rhs = Ew @ (Y_w if cy is None else cy[:, :, None] * Y_w)
            bad = None if np.isfinite(rhs).all() else ~np.isfinite(rhs).all(axis=(1, 2))
        else:
            # ω = w s²/ω_max and w s/ω_max, with s divided by its largest value first: the
            # squares cannot overflow, and only rows negligible beside the largest underflow
            with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
                top = s_w.max(axis=1, keepdims=True)
                r = s_w / top
                om = w[None, :] * r * r
                om_max = om.max(axis=1, keepdims=True)
                S = (Ew * (om / om_max)[:, None, :]) @ np.swapaxes(Ew, 1, 2)
                if self.alpha:
                    d = np.arange(self.D)
                    S[:, d, d] += self.alpha / (om_max * top * top)
                cy = w[None, :] * r / (om_max * top)  # w s / ω_max
                rhs = Ew @ (cy[:, :, None] * Y_w)
            bad = ~np.isfinite(S).all(axis=(1, 2)) | ~np.isfinite(rhs).all(axis=(1, 2))
        if bad is not None:
            S[bad], rhs[bad] = 0.0, 0.0
        beta, kappa = solve_normal_stack(S, rhs, jacobi=not unscaled)
        if bad is not None:
            kappa[bad] = np.inf
        return beta, ~(kappa <= GRAM_KAPPA_MAX), None

    def _primal_predictions(self, S, Ew, Y_w, cy, P):
        """The predictions of windows ``0 … b−1`` and ``β`` of window ``b`` (see
        :meth:`_primal`; moderate norms and weights, ``S`` their normal matrices).

        ``x·β = x·S⁻¹Ẑ(cy ∘ Y) = tᵀY`` with ``t = cy ∘ (Ẑᵀ S⁻¹x)``: one solve and one
        product with the window's rows a window, ``O(D² + N·D)``, then ``O(N·c)`` for
        ``tᵀY``, where forming its right-hand sides costs ``O(N·D·c)``.
        """
        b = P.shape[0]
        if cy is not None:  # (one row of weights for every window on the raw route)
            cy = np.broadcast_to(cy, (b + 1, Ew.shape[2]))
        beta = np.zeros((b + 1, self.D, self.c))
        u, kappa = solve_normal_stack(S[:b], np.ascontiguousarray(P)[:, :, None], jacobi=False)
        t = (np.swapaxes(Ew[:b], 1, 2) @ u)[:, :, 0]
        if cy is not None:
            t *= cy[:b]
        with np.errstate(over="ignore", invalid="ignore"):  # a huge target: flagged below
            pred = np.einsum("jn,jnc->jc", t, Y_w[:b])
            rhs = Ew[b:] @ (Y_w[b:] if cy is None else cy[b:, :, None] * Y_w[b:])
        beta[b:], kappa_b = solve_normal_stack(S[b:], rhs, jacobi=False)
        flagged = ~(np.concatenate([kappa, kappa_b]) <= GRAM_KAPPA_MAX)
        flagged[:b] |= ~np.isfinite(pred).all(axis=1)
        flagged[b] |= not np.isfinite(rhs).all()
        return beta, flagged, pred

    def _primal_unscaled(self, norms_moderate):
        """Whether the primal normal equations may be formed without rescaling: every
        norm in ``[1/_PRIMAL_RANGE, _PRIMAL_RANGE]`` (``norms_moderate``) and every
        weight at least ``1/_PRIMAL_RANGE`` (``sw[0]² = λ^(N−1)``, the smallest)."""
        return bool(norms_moderate and self.sw[0] ** 2 >= 1.0 / _PRIMAL_RANGE)

    # ------------------------------------------------------------------ one row
    def save_one(self):
        """An undo record for :meth:`learn_one`: the slot the next row overwrites (the
        Gram matrix is symmetric: its row is enough), the ring's counters and ``β``."""
        buf = self.buf
        p = buf.pos
        G = None if buf.G is None else buf.G[p].copy()
        return p, buf.Zh[p].copy(), buf.s[p], buf.Y[p].copy(), G, buf.n, self._beta, self.n_orthogonal

    def restore_one(self, record):
        """Put the solver back as it was at :meth:`save_one` (idempotent)."""
        buf = self.buf
        p, Zh, s, Y, G, buf.n, self._beta, self.n_orthogonal = record
        buf.Zh[p], buf.s[p], buf.Y[p] = Zh, s, Y
        if G is not None:
            buf.G[p], buf.G[:, p] = G, G
        buf.pos = p

    def learn_one(self, z, y, norm=None):
        """Learn one row; return the new ``β`` (shape ``(D, n_targets)``).

        The single-observation path: the update of :meth:`update` for one row with the
        fewest numpy calls; ``norm`` is ``‖z‖`` when the caller has it (from
        :func:`check_one_row`).
        Raises ``ValueError`` when the row's norm or the solution overflows. The caller
        makes it all or nothing with :meth:`save_one` and :meth:`restore_one`.
        """
        with np.errstate(all="ignore"):  # overflow is checked below, not warned about
            n = dnrm2(z) if norm is None else norm
            if n == np.inf:
                _norm_overflow()
            # the unit row straight into the slot it takes (save_one has kept the old one);
            # a product with 1/n where 1/n is a normal number is cheaper than a division
            row = self.buf.Zh[self.buf.pos]
            if 1e-300 < n < 1e300:
                np.multiply(z, 1.0 / n, out=row)
            elif n > 0:
                np.divide(z, n, out=row)
            else:
                row[:] = 0.0
            bounded = self._one(row, n, y, written=True)
            beta = self._beta
            # ‖β‖ is not finite when β is not (or when the norm alone overflows: then the
            # entries are checked one by one)
            if not bounded:
                v = beta.ravel(order="K")
                if not math.isfinite(dnrm2(v)) and not np.isfinite(v).all():
                    raise ValueError(OVERFLOW_MESSAGE)
        return beta

    def _one(self, zh, s, y, written=False):
        """Learn one row: push it, then solve the new window alone (the lean twin of a
        block of one row: the single-observation path's cost is its number of calls).

        ``written``: ``zh`` is already in the slot the row takes. Returns whether ``β``
        is known to be finite (``|β_j| ≤ √N ‖â‖`` on the dual route, ``ẑ`` unit rows).
        Called under ``np.errstate(all="ignore")`` (by :meth:`learn_one`, and by
        :meth:`update` through the estimator): overflow is detected, not warned about.
        """
        buf, N = self.buf, self.N
        # (products with the slot's own row are replaced by push: ẑ·ẑ = 1 exactly)
        buf.push(zh, s, y, None if buf.G is None else buf.Zh @ zh, written=written)
        w = buf.slot_weights(self.lam)  # (None: every weight is 1)
        bounded = False
        if self.dual:
            a = self._one_dual(w)
            if a is None and buf.G is not None:
                # repeated (parallel) rows: singular, but not once merged (empty slots
                # and zero rows carry w = 0 or s = 0: _dual_merged leaves them out)
                a_m, ok = self._dual_merged(buf.G[None], buf.Zh.__getitem__, np.arange(N)[None], buf.s[None],
                                            buf.Y[None], np.zeros((1, N), dtype=bool),
                                            np.ones(N) if w is None else w)
                a = a_m[0] if ok[0] else None
            sol = None if a is None else buf.Zh.T @ a  # β = Ẑᵀ â
            bounded = a is not None and dnrm2(a.ravel()) < 1e300
        else:
            sol = self._one_primal(w)
        if sol is None:
            Z, Y = buf.raw()
            sw = buf.sqrt_weights(self.lam)
            sol = lstsq_stack((Z * sw[:, None])[None], (Y * sw[:, None])[None], alpha=self.alpha)[0][0]
            self.n_orthogonal += 1
        self._beta = sol
        return bounded

    def _one_dual(self, w):
        """``â``: ``(K̂ + diag(α/(w s²))) â = y/s`` over the ring's slots (``β = Ẑᵀ â``)."""
        buf = self.buf
        s = buf.s
        c = self.c
        if w is None and not self.alpha:
            # the common case (a full window, λ = 1, no ridge): with every row non-zero
            # there is no row to decouple, the system is K̂ itself (LAPACK factorises a
            # copy of the ring's) and the spread of s² is (max/min)²; 1/s (inf for a
            # zero row, under the caller's np.errstate) gives min s and the right-hand
            # side y·(1/s), the block route's
            inv = 1.0 / s
            lo_inv = inv[idamax(inv)]
            if lo_inv < math.inf:
                q = s[idamax(s)] * lo_inv
                B = probe_columns(self.N, c)
                np.multiply(buf.Y, inv[:, None], out=B[:, :c])
                return cho_solve_checked(buf.G, B, spread=float(q * q), jacobi=False,
                                          overwrite_S=False)
        return dual_window_solve(buf.G, s, buf.Y, w, alpha=self.alpha)

    def _one_primal(self, w):
        """The weighted normal equations of the ring's rows (scaled as :meth:`_primal`)."""
        buf = self.buf
        s, Zh = buf.s, buf.Zh
        # (under the caller's np.errstate: overflow and underflow are dealt with here)
        top = s.max()
        moderate = 1e-50 <= top <= 1e50
        if moderate:
            # moderate norms (the common case): S = Σ w s² ẑẑᵀ cannot overflow, and a row
            # whose w s² underflows is as negligible as on the rescaled route below; the
            # estimate of κ(S) needs no Jacobi scaling (it bounds κ(S) itself)
            ws = s if w is None else w * s
            S = Zh.T @ (Zh * (ws * s)[:, None])
            if self.alpha:
                S.flat[:: self.D + 1] += self.alpha
            rhs = Zh.T @ (ws[:, None] * buf.Y)
        else:
            # ω = w (s/s_max)², the Gram matrix divided by s_max² (Jacobi scaling follows)
            r = s / top
            wr = r if w is None else w * r
            S = Zh.T @ (Zh * (wr * r)[:, None])
            if self.alpha:
                S.flat[:: self.D + 1] += self.alpha / (top * top)
            rhs = Zh.T @ ((wr / top)[:, None] * buf.Y)
        # a non-finite S fails the factorisation; a non-finite rhs (a tiny window with a
        # large target) goes to the orthogonal route, which works on the raw rows
        if not math.isfinite(dnrm2(rhs.ravel())):
            return None
        B = probe_columns(self.D, self.c)
        B[:, : self.c] = rhs
        return cho_solve_checked(S, B, jacobi=not moderate)


class _NotModerate(Exception):
    """A block's norms are too small or too large for the band of the rows as given.

    ``first``: the first new row whose norm is (0: the window's own norms, or weights,
    already are): the rows before it may still be learned as given."""

    def __init__(self, first=0):
        super().__init__(first)
        self.first = int(first)


def _windows(A, N):
    """A read-only view of the windows of ``N`` consecutive rows of the contiguous array
    ``A``: shape ``(len(A) − N + 1, N) + A.shape[1:]`` (``sliding_window_view``'s windows,
    with the window axis second, at a fraction of its fixed cost)."""
    V = np.ndarray((A.shape[0] - N + 1, N) + A.shape[1:], A.dtype, buffer=A,
                   strides=(A.strides[0],) + A.strides)
    V.flags.writeable = False
    return V


#: :meth:`BatchSolver._primal` sums the normal equations by blocks (:func:`_window_sums`)
#: for windows of at least this many rows a feature (``λ^(N−1) ≥ 1e-50``); others form each window's
#: product. Measured (one BLAS thread, µs an update after the fill, calls of 250 rows,
#: products → sums): N = 5000, D = 2 19.6 → 8.0; N = 1000, D = 7 14.4 → 8.2; N = 500,
#: D = 10 9.2 → 8.6; N = 100, D = 20 9.0 → 13.2; N = 40, D = 30 12.0 → 24.3.
_SUMS_ROWS_PER_FEATURE = 64


def _window_sums(E, Y, N, lam=1.0):
    """``Σ_{i=j}^{j+N−1} λ^{j+N−1−i} e_i e_iᵀ`` and ``Σ λ^{j+N−1−i} e_i y_iᵀ`` for every
    window ``j`` of ``N`` consecutive rows of ``E`` (shapes ``(L−N+1, D, D)`` and
    ``(L−N+1, D, c)``): each window's normal equations, its newest row weighted 1.

    The rows are cut into blocks of ``N`` from the first: a window is the tail of one
    block and the head of the next, each a running sum within its block (one cumulative
    sum backwards and one forwards), the weights relative to the block's last row
    (tails: ``λ^{N−1−r}`` down to 1) and first row (heads: ``λ^{−r}``), scaled to the
    window's afterwards. Nothing is subtracted, so a window's sums round as a sum of its
    own ``N`` terms would, whatever came before it (a running sum over the whole stack,
    differenced, would carry the rounding of every earlier row); ``O(D²)`` a window where
    forming each window's product is ``O(N·D²)``. The caller keeps ``λ^{−(N−1)}`` moderate
    (at most ``1e50``).
    """
    L, D = E.shape
    c = Y.shape[1]
    T = np.concatenate([(E[:, :, None] * E[:, None, :]).reshape(L, D * D),
                        (E[:, :, None] * Y[:, None, :]).reshape(L, D * c)], axis=1)
    n_blocks = -(-L // N)
    B = np.zeros((n_blocks * N + N, T.shape[1]))  # one empty block more: every head exists
    B[:L] = T
    B = B.reshape(n_blocks + 1, N, -1)
    pos = np.arange(N)  # a row's position r in its block
    if lam == 1.0:
        head = np.cumsum(B, axis=1)  # head[k, r] = Σ rows kN … kN + r
        tail = np.cumsum(B[:, ::-1], axis=1)[:, ::-1]  # tail[k, r] = Σ rows kN + r … kN + N − 1
    else:
        head = np.cumsum(B * (lam ** -pos)[None, :, None], axis=1)  # Σ λ^{−r'} rows, r' ≤ r
        tail = np.cumsum((B * (lam ** (N - 1 - pos))[None, :, None])[:, ::-1], axis=1)[:, ::-1]
    j = np.arange(L - N + 1)
    k, r = np.divmod(j, N)
    # window j = tail of block k from r, and head of block k + 1 up to r − 1 (none if
    # r = 0); its newest row, kN + N + r − 1, has weight 1: the tail's rows λ^{(N−1−r')+r},
    # the head's λ^{r−1−r'}
    h = head[k + 1, np.maximum(r - 1, 0)]
    if lam != 1.0:
        tail_k = tail[k, r] * (lam ** r)[:, None]
        h = h * (lam ** np.maximum(r - 1, 0))[:, None]
    else:
        tail_k = tail[k, r]
    out = tail_k + np.where((r > 0)[:, None], h, 0.0)
    return out[:, : D * D].reshape(-1, D, D), out[:, D * D :].reshape(-1, D, c)


def _take(Zo, Zn, idx):
    """Rows ``idx`` of ``E = [Zo; Zn]`` without forming ``E``."""
    out = np.empty(np.shape(idx) + (Zo.shape[1],))
    old = idx < Zo.shape[0]
    out[old] = Zo[idx[old]]
    out[~old] = Zn[idx[~old] - Zo.shape[0]]
    return out


def _window_products(Zo, Zn, js, X):
    """``k[q, i] = ⟨X[q], E[js[q] + i]⟩`` for ``i < N``, ``E = [Zo; Zn]`` (``N`` rows in
    ``Zo``): the products of rows ``X`` with the rows of windows ``js``, one product of a
    window's rows (views of ``Zo`` and ``Zn``, not gathered copies) with its row each, so
    that a window's products do not depend on the others asked for (later rows of a call
    must not change an earlier prediction, to the last bit)."""
    N = Zo.shape[0]
    k = np.empty((js.size, N))
    for q, j in enumerate(js.tolist()):
        if j >= N:
            np.dot(Zn[j - N : j], X[q], out=k[q])
        else:
            np.dot(Zo[j:], X[q], out=k[q, : N - j])
            np.dot(Zn[:j], X[q], out=k[q, N - j :])
    return k


def _band(Zo, Zn, N):
    """``band[r, δ] = ⟨E[r], E[r−δ]⟩`` for ``δ = 0 … N`` (zero before the start of
    ``E = [Zo; Zn]``), block by block with matrix products."""
    n = N + Zn.shape[0]
    D = Zo.shape[1]
    band = np.zeros((n, N + 1))
    # a block of ``step`` rows computes ``step × (step + N)`` products of which it keeps
    # ``step × (N + 1)``: short blocks waste fewer flops, long ones fewer calls. Measured
    # (N = 20, 1000 rows, one thread, ms for steps 4/8/16/32): D = 64: 2.4/1.4/0.9/0.6;
    # D = 1024: 4.0/3.1/3.0/3.9; D = 4096: 9.1/8.6/13.3/14.1
    step = min(32, max(8, 8192 // max(D, 1)))
    head = np.concatenate([Zo, Zn[: N + step]])  # the rows a block may need before Zn
    # wide rows in slices of _BAND_COLUMNS features, each slice over all the blocks: a
    # block's step + N rows of a slice stay in the core's cache for the next block, which
    # shares N of them, and the products of the slices add up (measured, 1000 rows, one
    # thread: D = 8192: 28 -> 20 ms; D = 16384: 58 -> 41 ms)
    for c0 in range(0, max(D, 1), _BAND_COLUMNS):
        cols = slice(c0, c0 + _BAND_COLUMNS)

        def rows(lo, hi):  # E[lo:hi] (of the slice), a view of Zn when it lies there
            return Zn[lo - N : hi - N, cols] if lo >= N else head[lo:hi, cols]

        for r0 in range(0, n, step):
            r1 = min(r0 + step, n)
            lo = max(0, r0 - N)
            G = rows(r0, r1) @ rows(lo, r1).T  # (r1-r0, r1-lo)
            i = np.arange(r1 - r0)[:, None]
            src = r0 + i - np.arange(N + 1)[None, :]  # E index of the partner row
            valid = src >= lo
            part = np.where(valid, G[i, np.where(valid, src - lo, 0)], 0.0)
            if c0:
                band[r0:r1] += part
            else:
                band[r0:r1] = part
    return band


#: the widest slice of features :func:`_band` multiplies at once
_BAND_COLUMNS = 4096


def _unit_band(band, sE, N):
    """The band of the unit rows from that of the rows: ``band[r, δ] / (s_r s_{r−δ})``
    (zero for a zero row)."""
    # partner[r, δ] = s_{r−δ} (1 before the start of E, where the band is zero)
    padded = np.concatenate([np.ones(N), sE])
    partner = np.lib.stride_tricks.sliding_window_view(padded, N + 1)[:, ::-1]
    den = sE[:, None] * partner
    return np.divide(band, den, out=np.zeros_like(band), where=den > 0)


def _windows_from_band(band, nwin, N, js=None):
    """``K_j[i, l] = ⟨E[j+i], E[j+l]⟩`` for every window ``j`` (or the windows ``js``),
    from the band."""
    il = np.arange(N)
    # for l ≤ i it is band[j + i, i − l], the flat element j(N+1) + i(N+2) − l: a strided
    # view (N zeros in front keep the unused upper triangle's reads inside the buffer)
    flat = np.concatenate([np.zeros(N), band.ravel()])
    step = flat.itemsize
    V = np.lib.stride_tricks.as_strided(
        flat[N:], shape=(nwin, N, N), strides=((N + 1) * step, (N + 2) * step, -step), writeable=False
    )
    if js is not None:
        V = V[js]
    return np.where(il[None, :, None] >= il[None, None, :], V, V.transpose(0, 2, 1))


def _gram_of_window(band, n, N):
    """The Gram matrix of the last ``N`` rows of ``E`` (``n`` rows), from the band."""
    return _windows_from_band(band[n - N :], 1, N)[0] if n >= N else None
