"""Windowed, exponentially weighted, minimum-norm least squares (ABO / QR-EWRLS, SPEC §2)."""

from numbers import Integral, Real

import numpy as np
from scipy.linalg import lapack
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._givens import GivensWindow
from ._stream import OneRowPredictMixin, StreamingRegressorMixin
from ._validation import check_fitted_fast, check_one_row, check_one_target
from ._window_solvers import (
    GRAM_KAPPA_MAX,
    _probes,
    lstsq_stack,
    sliding_lstsq,
    solve_normal_stack,
)

__all__ = ["QREWRLSRegressor"]

# Rows processed per vectorised block: bounds the temporary stacks to
# O(_BLOCK · N · max(N, D)) numbers whatever the length of the call.
_BLOCK = 1024


class QREWRLSRegressor(OneRowPredictMixin, StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """Sliding-window, exponentially weighted, minimum-norm recursive least squares.

    After each row ``t`` the coefficients are the oracle solution of SPEC §2 on the
    window of the last ``window_size`` rows, with weights ``w_i = λ^(t−i)``::

        β_t = argmin_β Σ_i w_i (y_i − z_iᵀβ)² + α‖β‖²     (minimum ℓ2 norm when α = 0)
            = pinv(W½ Z_t) W½ Y_t                          (α = 0)

    Both regimes are covered: ``D ≤ N`` (classical least squares) and ``D > N``
    (overparameterised: ``β_t`` interpolates the window, and then does not depend on
    ``λ``). Feed it random Fourier features (:class:`RandomFourierFeatures`) to get the
    ABO model of the paper.

    Parameters
    ----------
    window_size : int, default=20
        ``N``, the number of most recent rows the solution is fitted on.
    forgetting_factor : float, default=1.0
        ``λ`` in ``(0, 1]``; row ``i`` of the window ending at ``t`` has weight
        ``λ^(t−i)``.
    alpha : float, default=0.0
        Ridge penalty ``α ≥ 0`` (not forgotten). ``0`` gives the minimum-norm solution.
    solver : {"auto", "svd", "givens"}, default="auto"
        * ``"auto"`` — each window is solved from scratch: the inner products it needs
          come from a few matrix products over the whole call, and the small ``N×N``
          (``D ≥ N``) or ``D×D`` (``D < N``) systems are solved together; a window whose
          Gram matrix is worse conditioned than ``1e6`` (``κ(W½Z) ≳ 1e3``), or that holds
          an all-zero row, is recomputed on the orthogonal route (the same cut-off as
          :func:`numpy.linalg.lstsq`): for ``D ≥ N`` a QR factorisation of the transposed
          window slid from one such window to the next (``O(N·D)`` per row plus an
          ``O(N³)`` SVD, refactorised from scratch every ``N`` rows), for ``D < N`` a QR
          of the window. Streams whose windows are all ill-conditioned (tiny ``sigma``,
          large ``window_size``, ``alpha=0``) are therefore slower, not wrong;
          ``alpha > 0`` keeps them on the fast route. The fast route carries nothing
          between windows, so nothing drifts.
        * ``"svd"`` — every window on the orthogonal route (QR + SVD of the window, the
          same cut-off as :func:`numpy.linalg.lstsq`). Slowest, most accurate at ``D ≈ N``.
        * ``"givens"`` — the ABO paper's recursion (Algorithm 1): a QR factorisation of
          the window updated by Givens rotations, its pseudo-inverse by Greville
          (new row) and Cline (oldest row) formulas, recomputed from ``R`` whenever a
          Penrose identity probe detects drift. With ``alpha > 0`` (not in the paper) the
          ridge solution is read off the rotated factor, ``β = Rᵀ(RRᵀ + αI)⁻¹η``. One row
          at a time.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_features, n_targets)
        ``β`` after the last learned row.
    n_features_in_ : int
        Number of features ``D``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when ``X`` had string column names.
    n_samples_seen_ : int
        Rows learned since the last :meth:`fit` (reset by ``fit``).
    n_window_ : int
        Rows in the current window (``min(n_samples_seen_, window_size)``).
    n_orthogonal_windows_ : int
        Windows of the ``"auto"`` solver that were sent to the orthogonal route since the
        last :meth:`fit` (ill-conditioned or rank-deficient windows).
    condition_number_ : float
        Condition number ``σ_max/σ_min`` of the current weighted window ``W½ Z``
        (over its non-zero singular values; computed on access).
    rank_ : int
        Numerical rank of the current weighted window (``numpy.linalg.lstsq``'s
        cut-off; computed on access).

    See Also
    --------
    RandomFourierFeatures : The feature map of ABO.
    prequential_predict : Predict-then-update over a stream, vectorised for this model.

    Notes
    -----
    Per step, ``"auto"`` costs one ``N×D`` matrix-vector product's worth of
    multiply-adds (done as matrix-matrix products over blocks of rows) plus an
    ``O(N³)`` (``D ≥ N``) or ``O(N·D² + D³)`` (``D < N``) small solve; ``"givens"``
    costs ``O(N·D)`` (``O(N·D + N²)`` with the rotations of ``Q``). There is no intercept:
    centre ``y`` or append a constant feature.

    :meth:`predict_one` and :meth:`learn_one` are the single-observation path: they skip
    scikit-learn's input validation (only shape, dtype and finiteness are checked) and are
    meant for one row at a time in a live loop.

    When the weighted window has full row rank (generic for ``D ≥ N``), every residual is
    zero whatever the weights, so ``β_t`` does not depend on ``λ``; this holds to rounding.

    References
    ----------
    ABO: "Adaptive Benign Overfitting (ABO): Overparameterized RLS for Online Learning in
    Non-stationary Time-series" (QR-EWRLS, Algorithm 1).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import QREWRLSRegressor, prequential_predict
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = X @ np.array([1.0, -2.0, 0.5])
    >>> reg = QREWRLSRegressor(window_size=10)
    >>> y_pred = prequential_predict(reg, X, y)
    >>> float(np.abs(y_pred[10:] - y[10:]).max()) < 1e-9
    True
    >>> reg.coef_.round(6)
    array([ 1. , -2. ,  0.5])
    """

    _parameter_constraints: dict = {
        "window_size": [Interval(Integral, 1, None, closed="left")],
        "forgetting_factor": [Interval(Real, 0, 1, closed="right")],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"auto", "svd", "givens"})],
    }

    def __init__(self, window_size=20, *, forgetting_factor=1.0, alpha=0.0, solver="auto"):
        self.window_size = window_size
        self.forgetting_factor = forgetting_factor
        self.alpha = alpha
        self.solver = solver

    # ------------------------------------------------------------------ public API
    def learn_one(self, x, y):
        """Learn one row with only cheap checks (shape, dtype, finiteness).

        Equivalent to ``partial_fit(x[None], [y])`` without scikit-learn's per-call
        validation overhead. The first row of a stream must go through :meth:`fit` or
        :meth:`partial_fit` (which fix ``n_features_in_`` and the target shape).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One row.
        y : float or array-like of shape (n_targets,)
            Its target(s).

        Returns
        -------
        self : QREWRLSRegressor
            The updated estimator.
        """
        check_fitted_fast(self)
        x = check_one_row(x, n_features=self.n_features_in_)
        yv = check_one_target(y, n_targets=self._n_targets)
        if self.solver == "givens":
            self._learn_givens(x[None, :], yv[None, :])
        else:
            self._push(x[None, :], yv[None, :])
            self._set_coef_one()
        self.n_samples_seen_ += 1
        return self

    @property
    def n_window_(self):
        check_is_fitted(self)
        return int(min(self.n_samples_seen_, self.window_size))

    @property
    def condition_number_(self):
        s = self._window_singular_values()
        s = s[s > 0]
        return float(s[0] / s[-1]) if s.size else float("nan")

    @property
    def rank_(self):
        s = self._window_singular_values()
        if not s.size:
            return 0
        cut = np.finfo(np.float64).eps * max(self.window_size, self.n_features_in_) * s[0]
        return int(np.sum(s > cut))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a sliding window forgets: the model fits the last ``window_size`` rows, so its
        # score on a whole training set is not a fit criterion
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ state
    def _reset(self):
        # _init_state sets every other piece of state; validate_data(reset=True) has
        # already reset n_features_in_ and feature_names_in_
        self.__dict__.pop("_givens", None)

    def _init_state(self, n_features, n_targets, y_ndim):
        N = self.window_size
        self.n_features_in_ = n_features
        self._n_targets = None if y_ndim == 1 else n_targets
        # ring buffers of the window: slot s holds a row, unused slots are zero rows
        self._Z = np.zeros((N, n_features))
        self._Y = np.zeros((N, n_targets))
        self._pos = 0  # the slot the next row is written to (= the oldest row's slot)
        # sqrt weights oldest-first: sqrt(λ^(N-1-i)), i = 0 .. N-1
        self._sqrt_w = np.sqrt(self.forgetting_factor) ** np.arange(N - 1, -1, -1)
        self.__dict__.pop("_sqrt_w_ring", None)
        # dual route: Gram matrix of the ring, K[s, r] = <Z[s], Z[r]>
        self._K = np.zeros((N, N)) if n_features >= N and self.solver == "auto" else None
        self.coef_ = np.zeros(n_features if y_ndim == 1 else (n_features, n_targets))
        self.n_samples_seen_ = 0
        self.n_orthogonal_windows_ = 0
        if self.solver == "givens":
            self._givens = GivensWindow(
                n_features=n_features,
                n_targets=n_targets,
                window_size=N,
                forgetting_factor=self.forgetting_factor,
                alpha=self.alpha,
            )

    def _partial_fit(self, X, y, *, predict, reset=False):
        """Validate the whole call, then learn it; on any error restore the prior state."""
        saved = self._snapshot()
        try:
            first_call = reset or not hasattr(self, "coef_")
            X, y = validate_data(
                self, X, y, reset=first_call, dtype=np.float64, multi_output=True, y_numeric=True
            )
            Y = y.reshape(y.shape[0], -1)
            if first_call:
                self._reset()
                self._init_state(X.shape[1], Y.shape[1], y.ndim)
            elif (y.ndim == 1) != (self._n_targets is None) or Y.shape[1] != self._Y.shape[1]:
                expected = (
                    "1-D (one target)"
                    if self._n_targets is None
                    else f"2-D with {self._n_targets} targets"
                )
                raise ValueError(f"y has shape {y.shape} but this stream's y is {expected}.")
            # overflow is detected below and reported as an error, not as a warning
            with np.errstate(over="ignore", invalid="ignore"):
                if self.solver == "givens":
                    Y_pred = self._learn_givens(X, Y, predict=predict)
                else:
                    Y_pred = self._learn_windows(X, Y, predict=predict)
            if not np.all(np.isfinite(self.coef_)) or (
                Y_pred is not None and not np.all(np.isfinite(Y_pred))
            ):
                raise ValueError(
                    "the window's least-squares solution overflowed (non-finite "
                    "coefficients); rescale X and y, e.g. with RecursiveStandardScaler."
                )
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        self.n_samples_seen_ += X.shape[0]
        if Y_pred is not None and y.ndim == 1:
            Y_pred = Y_pred[:, 0]
        return Y_pred

    def _snapshot(self):
        """A copy of the state deep enough to restore it after a failed call."""
        saved = dict(self.__dict__)
        for k, v in saved.items():
            if isinstance(v, np.ndarray):
                saved[k] = v.copy()
            elif isinstance(v, GivensWindow):
                saved[k] = v.copy()
        return saved

    # ------------------------------------------------------------------ "auto" / "svd"
    def _ordered_window(self):
        """The window's rows and targets oldest-first (unused slots are zero rows)."""
        order = (self._pos + np.arange(self.window_size)) % self.window_size
        return self._Z[order], self._Y[order]

    def _learn_windows(self, X, Y, *, predict):
        if X.shape[0] == 1:
            # one row: the single-observation update (same mathematics, less set-up)
            Y_pred = X @ self.coef_.reshape(X.shape[1], -1) if predict else None
            self._push(X, Y)
            self._set_coef_one()
            return Y_pred
        Y_pred = np.empty_like(Y) if predict else None
        for start in range(0, X.shape[0], _BLOCK):
            stop = min(start + _BLOCK, X.shape[0])
            Yp = self._block(X[start:stop], Y[start:stop], predict=predict)
            if predict:
                Y_pred[start:stop] = Yp
        return Y_pred

    def _block(self, Z_new, Y_new, *, predict):
        """Solve the windows ending before each new row and after the last one.

        Window ``j`` (``j = 0 .. b``) is made of the ``N`` rows before new row ``j`` in
        the sequence ``E = [current window (N rows, zero rows if not yet full); Z_new]``;
        window ``b`` is the state after the block.
        """
        N, b = self.window_size, Z_new.shape[0]
        Z_old, Y_old = self._ordered_window()
        YE = np.concatenate([Y_old, Y_new])
        sw = self._sqrt_w
        # Ỹ_j = W½ Y_j for each window j: rows j .. j+N-1 of E
        Yw = np.lib.stride_tricks.sliding_window_view(YE, N, axis=0)  # (b+1, c, N)
        Yw = np.swapaxes(Yw, 1, 2) * sw[None, :, None]
        dual = self.n_features_in_ >= N
        Y_pred = np.empty((b, Y_new.shape[1])) if predict else None
        coef, K_last = None, None
        if self.solver == "svd":
            flagged = np.ones(b + 1, dtype=bool)
        elif dual:
            # invariant: β_j = Ã_jᵀ c_j, c_j = (Ã_j Ã_jᵀ + αI)⁻¹ Ỹ_j, Ã_j = W½ Z_j
            c, flagged, K_last, k_new = self._dual_block(Z_old, Z_new, Yw)
            a = c * sw[None, :, None]  # dual coefficients on the unweighted rows
            if predict:
                # ŷ_j = z_jᵀ β_j = Σ_i <z_j, z_i> a_ji
                Y_pred[:] = np.einsum("jn,jnc->jc", k_new, a[:b])
            coef_rows = np.concatenate([Z_old, Z_new])[-N:] if b < N else Z_new[-N:]
            coef = coef_rows.T @ a[b]
        else:
            # invariant: β_j = (Z_jᵀ W Z_j + αI)⁻¹ Z_jᵀ W Y_j
            beta, flagged = self._primal_block(Z_old, Z_new, Yw)
            if predict:
                Y_pred[:] = np.einsum("jd,jdc->jc", Z_new, beta[:b])
            coef = beta[b]
        idx = np.flatnonzero(flagged)
        if idx.size:
            # orthogonal route on the flagged windows
            if self.solver == "svd" or not dual:
                # every window from scratch (QR + SVD), in blocks to bound memory
                betas = [
                    lstsq_stack(
                        self._windows_rows(Z_old, Z_new, chunk) * sw[None, :, None],
                        Yw[chunk],
                        alpha=float(self.alpha),
                    )[0]
                    for chunk in np.array_split(idx, max(1, idx.size // 64))
                ]
                beta = np.concatenate(betas)
            else:
                # D ≥ N, runs of ill-conditioned windows: slide one QR factorisation of
                # the transposed window, O(N·D) a row instead of O(N²·D)
                rows = np.concatenate([Z_old, Z_new])
                beta = sliding_lstsq(
                    rows, Yw, idx, window_size=N, sqrt_w=sw,
                    forgetting_factor=self.forgetting_factor, alpha=float(self.alpha),
                )
            pred_rows = idx[idx < b]
            if predict and pred_rows.size:
                Y_pred[pred_rows] = np.einsum("jd,jdc->jc", Z_new[pred_rows], beta[: pred_rows.size])
            if idx[-1] == b:
                coef = beta[-1]
            self.n_orthogonal_windows_ += int(idx.size)

        # commit the new window state (the last N rows of E)
        self._commit(Z_old, Y_old, Z_new, Y_new, K_last)
        self.coef_ = coef.reshape(self.coef_.shape)
        return Y_pred

    def _windows_rows(self, Z_old, Z_new, which):
        """Rows of windows ``which`` of ``E = [Z_old; Z_new]``: shape (len(which), N, D)."""
        N = self.window_size
        pos = which[:, None] + np.arange(N)[None, :]  # indices into E
        out = np.empty((which.size, N, self.n_features_in_))
        old = pos < N
        out[old] = Z_old[pos[old]]
        out[~old] = Z_new[pos[~old] - N]
        return out

    def _band(self, Z_old, Z_new):
        """Inner products of each row of ``E`` with itself and the ``N`` rows before it.

        ``band[r, δ] = <E[r], E[r−δ]>`` for ``r = 0 .. N+b−1``, ``δ = 0 .. N`` (zero
        before the start of ``E``), computed block by block with matrix products.
        """
        N, b = self.window_size, Z_new.shape[0]
        band = np.zeros((N + b, N + 1))
        step = max(N, 32)
        E_head = np.concatenate([Z_old, Z_new[: N + step]])

        def rows(lo, hi):  # E[lo:hi] without copying E when possible
            return Z_new[lo - N : hi - N] if lo >= N else E_head[lo:hi]

        for r0 in range(0, N + b, step):
            r1 = min(r0 + step, N + b)
            lo = max(0, r0 - N)
            G = rows(r0, r1) @ rows(lo, r1).T  # (r1-r0, r1-lo)
            i = np.arange(r1 - r0)[:, None]
            src = r0 + i - np.arange(N + 1)[None, :]  # E index of the partner row
            valid = src >= lo
            band[r0:r1] = np.where(valid, G[i, np.where(valid, src - lo, 0)], 0.0)
        return band

    def _dual_block(self, Z_old, Z_new, Yw):
        """``D ≥ N``: solve ``(W½ K W½ + αI) c = W½ y`` for every window."""
        N, b = self.window_size, Z_new.shape[0]
        band = self._band(Z_old, Z_new)
        il = np.arange(N)
        # K_j[i, l] = <E[j+i], E[j+l]> = band[j + i, i − l] for l ≤ i: in the flat band that
        # is element j(N+1) + i(N+2) − l, a strided view (N zeros in front keep the unused
        # upper triangle's reads inside the buffer); the upper triangle mirrors the lower
        flat = np.concatenate([np.zeros(N), band.ravel()])
        step = flat.itemsize
        V = np.lib.stride_tricks.as_strided(
            flat[N:], shape=(b + 1, N, N), strides=((N + 1) * step, (N + 2) * step, -step),
            writeable=False,
        )
        K = np.where(il[None, :, None] >= il[None, None, :], V, V.transpose(0, 2, 1))
        # k_j[i] = <E[N+j], E[j+i]> = band[N + j, N − i]: the new row against window j
        k_new = band[N : N + b, N:0:-1]
        K_last = K[b].copy()
        sw = self._sqrt_w
        S = K * (sw[:, None] * sw[None, :])[None]
        if self.alpha:
            S[:, il, il] += self.alpha
        # window j position i is E[j + i]; the first N − n_valid rows of E are padding
        n_valid = min(self.n_samples_seen_, N)
        pad = (np.arange(b + 1)[:, None] + il[None, :]) < N - n_valid
        c, kappa = solve_normal_stack(S, Yw.copy(), pad=pad)
        return c, ~(kappa <= GRAM_KAPPA_MAX), K_last, k_new

    def _primal_block(self, Z_old, Z_new, Yw):
        """``D < N``: solve ``(Zᵀ W Z + αI) β = Zᵀ W y`` for every window."""
        N = self.window_size
        E = np.concatenate([Z_old, Z_new])
        win = np.lib.stride_tricks.sliding_window_view(E, N, axis=0)  # (b+1, D, N)
        Wz = win * (self._sqrt_w**2)[None, None, :]
        S = Wz @ np.swapaxes(win, 1, 2)  # Σ_i w_i z_i z_iᵀ
        if self.alpha:
            d = np.arange(E.shape[1])
            S[:, d, d] += self.alpha
        rhs = win @ (Yw * self._sqrt_w[None, :, None])  # Σ_i w_i z_i y_i
        beta, kappa = solve_normal_stack(S, rhs)
        return beta, ~(kappa <= GRAM_KAPPA_MAX)

    def _commit(self, Z_old, Y_old, Z_new, Y_new, K_last):
        N, b = self.window_size, Z_new.shape[0]
        if b >= N:
            self._Z[:] = Z_new[-N:]
            self._Y[:] = Y_new[-N:]
        else:
            self._Z[: N - b] = Z_old[b:]
            self._Z[N - b :] = Z_new
            self._Y[: N - b] = Y_old[b:]
            self._Y[N - b :] = Y_new
        self._pos = 0
        if K_last is not None:
            self._K[:] = K_last

    # ------------------------------------------------------------------ single row
    def _push(self, Z_new, Y_new):
        """Write one row into the ring (and the ring's Gram matrix)."""
        s = self._pos
        z = Z_new[0]
        self._Z[s] = z
        if self._K is not None:
            # K[s, r] = <z, Z[r]> for every slot, itself included
            k = self._Z @ z
            self._K[s, :] = k
            self._K[:, s] = k
        self._Y[s] = Y_new[0]
        self._pos = (s + 1) % self.window_size

    def _set_coef_one(self):
        """Solve the current window alone (same mathematics as a block of one)."""
        sw = self._ring_sqrt_w()
        Yw = self._Y * sw[:, None]
        beta = None
        if self.solver == "auto":
            if self._K is not None:
                S = self._K * sw
                S *= sw[:, None]
                rhs = Yw
            else:
                Wz = self._Z * (sw * sw)[:, None]
                S = self._Z.T @ Wz
                rhs = Wz.T @ self._Y
            if self.alpha:
                S.flat[:: S.shape[0] + 1] += self.alpha
            # padding: window positions (s − pos) % N before the first row of the stream
            N, pad = self.window_size, None
            if self._K is not None and self.n_samples_seen_ + 1 < N:
                pad = ((np.arange(N) - self._pos) % N) < N - (self.n_samples_seen_ + 1)
            sol = _cho_solve_checked(S, rhs, pad=pad)
            if sol is not None:
                # dual: β = Zᵀ W½ c
                beta = (sol * sw[:, None]).T @ self._Z if self._K is not None else sol.T
        if beta is None:
            A = (self._Z * sw[:, None])[None]
            beta = lstsq_stack(A, Yw[None], alpha=float(self.alpha))[0][0].T
            self.n_orthogonal_windows_ += 1
        # beta is (n_targets, D): a 1-D target gives the row itself, without a copy
        self.coef_ = beta[0] if self._n_targets is None else beta.T

    # ------------------------------------------------------------------ "givens"
    def _learn_givens(self, X, Y, *, predict=False):
        Y_pred = np.empty_like(Y) if predict else None
        g = self._givens
        for t in range(X.shape[0]):
            if predict:
                Y_pred[t] = X[t] @ g.beta
            g.update(X[t], Y[t])
            self._Z[self._pos] = X[t]
            self._Y[self._pos] = Y[t]
            self._pos = (self._pos + 1) % self.window_size
        self.coef_ = g.beta.reshape(self.coef_.shape).copy()
        return Y_pred

    def _ring_sqrt_w(self):
        """sqrt weight of each ring slot: slot ``s`` holds window position ``(s − pos) % N``."""
        table = self.__dict__.get("_sqrt_w_ring")
        if table is None:
            # row ``pos`` of an N×N table (built once; the single-row path reads it per row)
            N = self.window_size
            idx = (np.arange(N)[None, :] - np.arange(N)[:, None]) % N
            table = self._sqrt_w_ring = self._sqrt_w[idx]
        return table[self._pos]

    def _window_singular_values(self):
        check_is_fitted(self)
        sw = self._ring_sqrt_w()
        return np.linalg.svd(self._Z * sw[:, None], compute_uv=False)


def _cho_solve_checked(S, rhs, pad=None):
    """Cholesky solve of one SPD system, or ``None`` when it is too ill-conditioned.

    The single-window twin of :func:`solve_normal_stack`: ``pad`` rows (ring slots not yet
    written) are decoupled (given the mean diagonal, so they do not distort the estimate);
    any other zero diagonal, a failed Cholesky factorisation, or a condition estimate
    above :data:`GRAM_KAPPA_MAX`, returns ``None``.
    """
    diag = S.diagonal()
    if diag.min() <= 0.0:
        empty = diag <= 0.0
        if pad is None or (empty & ~pad).any():
            return None
        S, rhs = S.copy(), rhs.copy()
        fill = diag[~empty].mean() if (~empty).any() else 1.0
        S[empty, :] = 0.0
        S[:, empty] = 0.0
        S[empty, empty] = fill
        rhs[empty] = 0.0
    flat = S.ravel()
    norm2 = flat @ flat  # ‖S‖_F², before S is factorised in place
    # S is symmetric, so Sᵀ — Fortran-ordered — is S: LAPACK works on it without a copy
    L, info = lapack.dpotrf(S.T, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return None
    # one triangular solve for the right-hand side and the two fixed probes v of
    # solve_normal_stack: κ(S) ≈ ‖S‖_F · max_v ‖S⁻¹v‖ (the same estimate as the batched path)
    n, c = rhs.shape
    buf = np.empty((n, c + 2), order="F")
    buf[:, :c] = rhs
    buf[:, c:] = _probes(n)
    sol, info = lapack.dpotrs(L, buf, lower=1, overwrite_b=1)
    u, v = sol[:, c], sol[:, c + 1]
    kappa = np.sqrt(norm2 * max(u @ u, v @ v))
    if info != 0 or not kappa <= GRAM_KAPPA_MAX:
        return None
    return sol[:, :c]
