"""Windowed, exponentially weighted, minimum-norm least squares (ABO / QR-EWRLS).

The estimator validates each call and hands its rows to one window solver (see
:func:`make_solver`); every solver keeps an undo record, so a call that fails changes
nothing.
"""

import operator
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._compat import Interval, StrOptions
from .._docstrings import fill_doc
from ._batch_solver import BatchSolver
from ._dual_solver import DualSolver, direct_block_size, iteration_block_size
from ._givens import GivensSolver
from ._kernels import lstsq_cutoff
from ._primal_solver import PrimalSolver, direct_shifts, primal_block_size
from .._streaming._base import (
    LinearPredictMixin,
    OneRowLearnMixin,
    OneRowPredictMixin,
    StreamingRegressorMixin,
    check_stream_params,
    enclosing_call,
    on_rollback,
    make_private_once,
    stream_lock,
)
from .._streaming._validation import check_one_row, check_one_target
from ._window import OVERFLOW_MESSAGE
from ._window_solvers import inert_rows, update_rows

__all__ = ["QREWRLSRegressor"]


@fill_doc()
class QREWRLSRegressor(
    OneRowLearnMixin, OneRowPredictMixin, LinearPredictMixin, StreamingRegressorMixin,
    RegressorMixin, BaseEstimator
):
    """Sliding-window, exponentially weighted, minimum-norm recursive least squares.

    After each row ``t`` the coefficients are the least-squares solution on the
    window of the last ``window_size`` rows, with weights ``w_i = λ^(t−i)``::

        β_t = argmin_β Σ_i w_i (y_i − z_iᵀβ)² + α‖β‖²     (minimum ℓ2 norm when α = 0)
            = pinv(W½ Z_t) W½ Y_t                          (α = 0)

    With ``D`` features, both regimes are covered: ``D ≤ N`` (classical least squares)
    and ``D > N`` (overparameterised: ``β_t`` interpolates the window, and then does not
    depend on ``λ``). Feed it random Fourier features (:class:`RandomFourierFeatures`) to
    get the ABO model of the paper.

    Parameters
    ----------
    {window_size}
    {window_forgetting_factor}
    alpha : float, default=0.0
        Ridge penalty ``α ≥ 0`` (not forgotten). ``0`` gives the minimum-norm solution.
    solver : {"auto", "svd", "givens"}, default="auto"
        * ``"auto"`` — exact (within a condition-number-scaled bound of
          :func:`numpy.linalg.lstsq` on the weighted window) at ``O(N·D + N²)`` a row
          for ``D ≥ N`` and ``O(D²)`` a row for ``D < N`` (plus amortised
          refactorisations, see Notes), by the route that fits the window:

          - windows of up to 32 rows, and windows of a few features (``N·D² ≤ 50,000``):
            every window solved from scratch, the small ``N×N`` or ``D×D`` systems of a
            whole call together (with ``N ≥ 64·D`` and weights ``λ^(N−1) ≥ 1e-50``, the
            normal equations of every window summed by blocks of ``N`` rows, ``O(D²)`` a
            window);
          - ``D ≥ N``: the dual route — a Cholesky factor of the rows that stay in the
            window for a block of rows, and a small Schur complement for the others;
          - ``D < N``: the dual route while the window has at most ``D`` non-zero rows
            (the fill phase, or a window of many zero weights), the primal route while
            it has more — a Cholesky factor of the weighted normal equations of those
            rows (their Gram matrix carried from block to block), and Woodbury's
            identity for the others. With a ridge and forgetting, a window of at most
            160 rows whose primal blocks the ridge would cut short (``D > 64``) stays on
            the dual route (its matrix is positive definite whatever the rows), until a
            stretch of its windows goes mostly to the orthogonal route.

          Zero rows and zero-weight rows carry nothing and are decoupled (they keep
          their window slot). A ridge together with forgetting does not scale with the
          weights: the block's factor then has the ridge of its middle window, and each
          window's system, which differs from it by one scalar, is solved by a short
          iteration against that factor (blocks are kept short enough that it contracts
          by at least ``1/9`` a step); where that would make blocks shorter than usual
          (``λ ≤ 0.98`` at ``D = 64``), each window's own system is formed and solved
          instead, in blocks of the usual length, on the primal route with ``D ≤ 64``
          (``D×D``) and on the dual route while windows have at most 64 rows (the fill).

          A window whose Gram matrix is worse conditioned than ``1e6``
          (``κ(W½Z) ≳ 1e3``), or that is rank deficient, goes to the orthogonal route: an
          economic QR factorisation of the window (of the ridge-augmented window when
          ``alpha > 0``) slid from row to row (``O(N·D)``), the same cut-off as
          :func:`numpy.linalg.lstsq`: a triangular solve with the factor (``O(N²)``)
          when no singular value can be near that cut-off (``κ₂ ≤ √(κ₁κ_∞)`` from
          LAPACK's condition estimates), an SVD of the factor (``O(N³)``) otherwise.
          Nothing is carried between windows in a way that could drift: factors are
          recomputed, not updated, every block.
        * ``"svd"`` — every window from scratch on the orthogonal route (QR + SVD of the
          window). Slowest; the reference.
        * ``"givens"`` — the ABO paper's recursion (Algorithm 1): a QR factorisation of
          the window updated by Givens rotations, its pseudo-inverse by Greville
          (new row) and Cline (oldest row) formulas, recomputed from ``R`` whenever a
          Penrose identity probe detects drift. With ``alpha > 0`` (not in the paper) the
          ridge solution is read off the rotated factor, ``β = Rᵀ(RRᵀ + αI)⁻¹η``. One row
          at a time, ``O(N·D + N²)`` a row with a Python loop over ``2N`` rotations.

    Attributes
    ----------
    {window_attributes}
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
    Cost of ``"auto"`` per row, with ``b`` rows per block (``b ≈ 0.64 N^¾`` on the dual
    route, ``b ≈ 3√D`` on the primal one):

    * dual (``D ≥ N``): the new row's products with the window (``N·D``, as matrix
      products over the rows of a call), two triangular solves with the core factor
      (``N²``), the window's periphery system (``b³``), and the core's factorisation
      amortised over its block (``N³/(3b)``); memory: the window (``N×D``), its Gram
      matrix and the core factor (``N×N`` each).
    * primal (``D < N``): a triangular solve (``D²``), the periphery (``b³ + D·b``),
      and per block a rank-``2b`` update and factorisation of the ``D×D`` normal
      equations (``D² + D³/b`` a row), recomputed from the window every ``N`` rows;
      memory: the window and ``O(D²)``.
    * windows of up to 32 rows: ``O(N³)`` (``D ≥ N``) or ``O(N·D² + D³)`` per window;
      windows of a few features, ``O(N·D² + D³)`` per window, or ``O(D³)`` with
      ``N ≥ 64·D`` and ``λ^(N−1) ≥ 1e-50`` (sums by blocks).
    * a ridge with forgetting: blocks of at most ``2 ln 1.25 / −ln λ`` rows, and per
      block of windows at most about 17 steps of the iteration (a few with a small
      ridge), each two triangular solves with the core factor (``2N²`` dual, ``2D²``
      primal) and ``O(N·b)`` for the periphery; primal with ``D ≤ 64`` and such short
      blocks: ``O(D²·b + D³)`` a window, blocks of the usual ``b``; dual windows of at
      most 64 rows: ``O(n³)`` a window.
    * the coefficients each call ends with (``coef_``, ``c`` columns): the block's route,
      or, where a cost model of the two gives it at most 3/4 of that route's cost, the
      window's own matrix solved by Cholesky (``O(N³ + N²c)`` dual, ``O(D²·b + D³ +
      D²c)`` primal; the block's route is taken when that matrix is too ill-conditioned):
      with a ridge and forgetting, whose block route iterates all ``c`` columns, and for
      short dual windows or few primal features, where the block route's fixed cost
      dominates. A stream fed one row a call pays this every row: at ``N = 400``,
      ``D = 1024``, ``λ = 0.99``, ``α = 1e-3`` a one-row call with 96 targets costs about
      5 ms (23 ms through the iteration).

    The measured costs against the window length are in the benchmarks
    (``benchmarks/bench_window_scaling.py``). There is no intercept: centre ``y`` or
    append a constant feature.

    :meth:`predict_one` and :meth:`learn_one` are the single-observation path: they skip
    scikit-learn's input validation (only shape, dtype and finiteness are checked) and are
    meant for one row at a time in a live loop.

    When the weighted window has full row rank (generic for ``D ≥ N``), every residual is
    zero whatever the weights, so ``β_t`` does not depend on ``λ``; this holds to rounding.

    **Per-row weights.** ``sample_weight`` (``w_i >= 0``, in :meth:`fit`,
    :meth:`partial_fit` and :meth:`prequential_predict`) multiplies each row's forgetting
    weight: the window's solution minimises ``Σ_i λ^(t−i) w_i (y_i − z_iᵀβ)² + α‖β‖²``
    (minimum norm among the minimisers when ``α = 0``). The solver is handed
    ``√w_i z_i`` and ``√w_i y_i``, so every route above stays exact; the prequential
    prediction of a row is that of the unweighted row ``z_i·β``. A zero-weight row
    still takes its slot (the window is the last ``N`` rows by count) but contributes
    nothing; its prediction is still made (the call is split there, one extra solver
    call per zero-weight row). ``condition_number_`` and ``rank_`` are those of the
    window with these weights. Uniform weights ``c`` are no weights when ``α = 0``
    (with a ridge they act as ``α/c``). Integer weights equal repeated rows only when
    ``λ = 1`` and the window holds every row of the stream: repeats take window slots
    and push older rows out, and with ``λ < 1`` the copies of a row get different ages.

    References
    ----------
    ABO: "Adaptive Benign Overfitting (ABO): Overparameterized RLS for Online Learning in
    Non-stationary Time-series" (QR-EWRLS, Algorithm 1).

    Examples
    --------
    >>> from sklearn_orfit import QREWRLSRegressor
    >>> reg = QREWRLSRegressor(window_size=20)
    {linear_example}
    >>> reg.n_window_, reg.rank_
    (20, 3)
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

    # ------------------------------------------------------------------ one row
    def _learn_one(self, x, y):
        """The work of :meth:`learn_one`: for the short-window solver, whose cost per
        row is its number of calls, the base's template (lock, parameter check,
        validation, all or nothing, undone with an enclosing call) inlined; else the
        template itself."""
        solver = self.__dict__.get("_solver")
        if not isinstance(solver, BatchSolver) or solver.orthogonal_only:
            return super()._learn_one(x, y)
        enclosing_call()  # forgets a call an interrupt left set; before the lock (see there)
        with stream_lock(self):
            if not all(map(operator.is_, self._stream_param_values, self._solver_params())):
                check_stream_params(self)
            x, norm = check_one_row(x, n_features=self.n_features_in_, return_norm=True)
            yv = check_one_target(y, n_targets=self._n_targets)
            # loaded with mmap_mode="r" or "r+", or in a joblib worker (see _checkpoint)
            make_private_once(solver)
            record = solver.save_one()
            before = {"coef_": self.coef_, "n_samples_seen_": self.n_samples_seen_}
            try:
                beta = solver.learn_one(x, yv, norm=norm)
                # commit, in one statement (β is replaced, never written into: no copy)
                self.__dict__.update(
                    coef_=beta[:, 0] if self._n_targets is None else beta,
                    n_samples_seen_=self.n_samples_seen_ + 1,
                )
            except BaseException:
                solver.restore_one(record)
                raise
            # undone with the enclosing learning call (a forecaster's update) if that
            # fails later: the undo records run in reverse order
            on_rollback(lambda: (solver.restore_one(record), self.__dict__.update(before)))
        return self

    @property
    def n_window_(self):
        check_is_fitted(self)
        return int(self._solver.buf.n)

    @property
    def n_orthogonal_windows_(self):
        check_is_fitted(self)
        return int(self._solver.n_orthogonal)

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
        cut = lstsq_cutoff(s[0], n=self.window_size, D=self.n_features_in_)
        return int(np.sum(s > cut))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a sliding window forgets: the model fits the last ``window_size`` rows, so its
        # score on a whole training set is not a fit criterion
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ state
    _stream_params = ("window_size", "forgetting_factor", "alpha", "solver")

    def _solver_params(self):
        return (self.window_size, self.forgetting_factor, self.alpha, self.solver)

    def _init_state(self, n_features, n_targets, y_ndim):
        self._solver = make_solver(self, n_features=n_features, n_targets=n_targets)
        self.coef_ = np.zeros(n_features if y_ndim == 1 else (n_features, n_targets))
        self.n_samples_seen_ = 0

    def _begin_pieces(self, n_rows):
        # one undo record for the next n_rows rows, learned in several _learn calls
        self._checkpoint(n_rows)
        return {"checkpoint": False}

    def _checkpoint(self, n_rows):
        solver = self._solver
        # loaded with mmap_mode="r" or "r+", or handed to a joblib worker (which maps
        # arrays above 1 MB read-only): learn on plain copies, never into the file (once
        # per solver object: a loaded model's solver is a new one)
        make_private_once(solver)
        # the solver writes into its arrays: if the call fails, its undo record puts them back
        record = solver.checkpoint(n_rows)
        on_rollback(lambda: solver.restore(record))

    # zero-weight rows are predicted by the solver in the call's one pass (update_rows)
    _learns_inert_rows = True

    def _learn_weighted(self, X, Y, sample_weight, *, predict, **piece):
        if predict and X.shape[0] == 1:
            # one row: its prediction is x·β of the window before it, the coefficients the
            # last call committed (that call's solve of this window); the row is then
            # learned without a second solve of the same window. (The row as given, not
            # √w·x: with a huge weight that product overflows where x·β does not.)
            with np.errstate(over="ignore", invalid="ignore"):  # reported below
                Y_pred = self._predict_rows(X)
            if not np.isfinite(Y_pred).all():
                raise ValueError(OVERFLOW_MESSAGE)
            super()._learn_weighted(X, Y, sample_weight, predict=False, **piece)
            return Y_pred
        return super()._learn_weighted(X, Y, sample_weight, predict=predict, **piece)

    def _learn(self, X, Y, *, predict, checkpoint=True, inert=None):
        """Hand the rows to the solver; all or nothing.

        The solver keeps an undo record of what the rows overwrite (``checkpoint=False``:
        the caller took one for them, :meth:`_begin_pieces`); an error (overflow, or an
        interrupt) puts everything back. ``inert``: zero rows predicted as other rows
        (see :func:`~._window_solvers.update_rows`).
        """
        solver = self._solver
        if checkpoint:
            self._checkpoint(X.shape[0])
        # overflow is detected below and reported as an error, not as a warning
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            # long calls in pieces: the solvers' temporaries are O(rows × (N + D)) (the
            # short-window solver bounds its own, and is handed the call whole)
            step = max(1, _CALL_NUMBERS // max(X.shape[1], self.window_size))
            if getattr(solver, "handles_long_calls", False):
                step = X.shape[0]
            if X.shape[0] <= step:
                Y_pred = update_rows(solver, X, Y, predict=predict, inert=inert)
            else:
                parts = [update_rows(solver, X[a : a + step], Y[a : a + step], predict=predict,
                                     inert=inert_rows(inert, a, a + step))
                         for a in range(0, X.shape[0], step)]
                Y_pred = np.concatenate(parts) if predict else None
            coef = solver.coef()
        if not np.isfinite(coef).all() or (Y_pred is not None and not np.isfinite(Y_pred).all()):
            raise ValueError(OVERFLOW_MESSAGE)
        # commit, in one statement
        self.__dict__.update(
            coef_=coef[:, 0].copy() if self.coef_.ndim == 1 else coef.copy(),
            n_samples_seen_=self.n_samples_seen_ + X.shape[0],
        )
        return Y_pred

    def _window_singular_values(self):
        check_is_fitted(self)
        return self._solver.buf.singular_values(self.forgetting_factor)


# numbers per piece of a long call handed to the solver (≈ 16 MB a temporary)
_CALL_NUMBERS = 2**21

# windows up to this length are solved from scratch, in batches (the fastest exact way for
# short windows); longer ones by the block solvers
SHORT_WINDOW = 32
# and so are windows of a few features (D < N): their normal equations cost N·D² a window,
# formed for a whole call in a few stacked products, less than a block solver's fixed cost
# a row (measured: N = 500, D = 2, calls of 250 rows: 38 µs an update, 638 µs on the
# primal block route)
SCRATCH_PRIMAL_FLOPS = 50_000


def make_solver(est, *, n_features, n_targets):
    """The window solver for the estimator's parameters (see ``solver`` in its docstring)."""
    params = dict(
        window_size=est.window_size, n_features=n_features, n_targets=n_targets,
        forgetting_factor=est.forgetting_factor, alpha=est.alpha,
    )
    if est.solver == "givens":
        return GivensSolver(**params)
    if est.solver == "svd":
        return BatchSolver(**params, orthogonal_only=True)
    if est.window_size <= SHORT_WINDOW or (
        n_features < est.window_size and est.window_size * n_features**2 <= SCRATCH_PRIMAL_FLOPS
    ):
        return BatchSolver(**params)
    if n_features >= est.window_size:
        return DualSolver(**params)
    if est.forgetting_factor < 1e-20:
        # weights spanning more than the double range within a few rows: from scratch
        return BatchSolver(**params)
    return DualThenPrimal(**params)


#: Largest window a ridge with forgetting keeps on the dual route for good
#: (:func:`ridge_stays_dual`): its ``O(N³)`` direct solve of each window against the
#: primal route's iteration (``D > 64``, blocks of 4 rows at ``λ = 0.9``). Measured (one
#: BLAS thread, µs an update after the fill, λ = 0.9, α = 0.1, primal → dual): N = 100,
#: D = 70 / 80 / 99: 370 → 182, 390 → 185, 425 → 192; N = 150, D = 100: 435 → 334;
#: N = 160, D = 90: 431 → 392; N = 200, D = 150 / 100: 562 → 519, 407 → 572; N = 230,
#: D = 160: 452 → 633.
DUAL_ONLY_MAX_N = 160

#: A tall window kept on the dual route (:func:`ridge_stays_dual`) leaves it for good when
#: more than half of the full windows of a stretch of rows go to the orthogonal route; the
#: first stretch is this many rows long (measured: N = 80 and 100, D = 70 and 80, λ = 0.9, α = 1e-12, Gaussian rows: 2
#: of 200 windows orthogonal on the primal route, 212 and 222 on the dual one, 1.4× the
#: time).
DUAL_ONLY_WATCH = 16


def ridge_stays_dual(*, window_size, n_features, forgetting_factor, alpha, **_):
    """Whether a ridge with forgetting keeps a tall window (``D < N ≤ 2D``) on the dual
    route for good.

    With a ridge the dual system is positive definite whatever the rows, so the dual route
    can hold windows of more rows than features. It is taken where the primal route would
    iterate in blocks cut short by the shift spread (``D`` too large for its direct
    solves, :func:`~._primal_solver.direct_shifts`) while the dual route solves each full
    window directly (:func:`~._dual_solver.direct_block_size`), for windows of at most
    :data:`DUAL_ONLY_MAX_N` rows.
    """
    N, D, lam = window_size, n_features, forgetting_factor
    if (not (alpha > 0 and lam < 1.0 and N <= min(2 * D, DUAL_ONLY_MAX_N))
            or direct_shifts(N, D, lam, alpha)):
        return False
    cut_short = primal_block_size(N, D, lam, alpha) < primal_block_size(N, D, lam, 0.0)
    return cut_short and direct_block_size(
        N, N, forgetting_factor=lam, alpha=alpha, iteration_block=iteration_block_size(N, lam, alpha)) > 0


class DualThenPrimal:
    """``D < N``: the dual route while the window holds at most ``D`` non-zero rows, the
    primal route while it holds more.

    A window with no more non-zero rows (zero-weight rows are zero rows) than features
    has singular normal equations (or, with a small ridge, conditioned like ``1/α``):
    such a window is the dual route's (``O(n·D + n²)`` a row), whose ring holds
    ``min(N, 2D)`` rows. The route is chosen by this *effective* window, row by row: the
    rows are handed to the primal route before the row that would make ``D + 1`` non-zero
    rows (or when the dual ring is full), and back to the dual route when the window has
    fewer than ``D − D/16`` non-zero rows again and the dual ring can hold it (the margin
    keeps a window whose count hovers at ``D`` from switching at every row: each switch
    refactorises the window, ``O(N·D·min(N, D))``).

    Without a ridge, repeated rows count once: a window of ``n > D`` rows with at most
    ``D`` distinct non-zero ones (a constant start, duplicated records) is rank deficient
    on the primal route, where every window would need an SVD, but on the dual route's
    orthogonal factors its repeated rows are one column (:class:`SlidingQR`), solved by a
    triangular solve. Rows are compared by a hash of their bytes (:func:`row_keys`): a
    row and a multiple of it count twice, which only keeps today's route; two distinct
    rows with one key (probability ``≈ 2⁻⁶⁴`` a pair) would only make a window slower.
    """

    def __init__(self, **params):
        self.params = params
        D = params["n_features"]
        self.dual_params = dict(params, window_size=min(params["window_size"], 2 * D))
        self.inner = self._dual()
        self.primal = False
        self.n_orthogonal_switched = 0  # windows of the solvers switched away from
        self.n_switches = 0
        # invariant: keys[i] = row_keys of the window's row i (oldest first), or None
        # when rows are counted by their norms alone (a ridge: no rank deficiency)
        self.keys = None if params["alpha"] else np.zeros(0, dtype=np.uint64)
        # a ridge with forgetting whose dual route is the faster: no switch (see there)
        self.dual_only = ridge_stays_dual(**params)
        # full windows learned in the stretch watched, those of them sent to the orthogonal
        # route, and the stretch's length (see _update_dual_only)
        self.watch = (0, 0, DUAL_ONLY_WATCH)

    def _dual(self):
        if self.dual_params["window_size"] <= SHORT_WINDOW:
            return BatchSolver(**self.dual_params, dual=True)
        return DualSolver(**self.dual_params)

    @property
    def buf(self):
        return self.inner.buf

    @property
    def n_orthogonal(self):
        return self.n_orthogonal_switched + self.inner.n_orthogonal

    @property
    def handles_long_calls(self):
        return getattr(self.inner, "handles_long_calls", False)

    def coef(self):
        return self.inner.coef()

    def checkpoint(self, n_rows):
        return dict(self.__dict__), self.inner.checkpoint(n_rows)

    def restore(self, record):
        attrs, token = record
        self.__dict__.clear()
        self.__dict__.update(attrs)
        self.inner.restore(token)

    takes_inert = True

    #: ``(lo, hi)``: bounds on the non-zero (distinct) rows of the window, or None
    #: (:meth:`_keeps_route`)
    count_bounds = None

    def update(self, Z, Y, *, predict, inert=None):
        if self.dual_only:
            self.count_bounds = None
            return self._update_dual_only(Z, Y, predict=predict, inert=inert)
        D = self.params["n_features"]
        N, N_dual = self.params["window_size"], self.dual_params["window_size"]
        new_keys = None if self.keys is None else row_keys(Z)
        if Z.shape[0] == 1 and self._keeps_route(Z):
            Y_pred = update_rows(self.inner, Z, Y, predict=predict, inert=inert)
            if self.keys is not None:
                self.keys = np.concatenate([self.keys, new_keys])[-N:]
            return Y_pred
        self.count_bounds = None
        parts, a = [], 0
        while a < Z.shape[0]:
            buf = self.inner.buf
            # non-zero (distinct) rows and rows of the window once each row of Z[a:] is
            # learned
            held = np.concatenate([buf.s[buf.slots()] != 0, Z[a:].any(axis=1)])
            end = buf.n + 1 + np.arange(Z.shape[0] - a)
            if self.keys is None:
                c = np.concatenate([[0], np.cumsum(held)])
                n_nonzero = c[end] - c[np.maximum(0, end - N)]
            else:
                n_nonzero = distinct_in_windows(
                    np.concatenate([self.keys, new_keys[a:]]), held, end, N)
            n_rows = np.minimum(end, N)
            if self.primal:
                # back to the dual route at the first row whose window qualifies
                dual = (n_nonzero < D - max(1, D // 16)) & (n_rows <= N_dual)
            else:
                # the dual route until a row's window has D + 1 non-zero rows or
                # overflows its ring
                dual = ~((n_nonzero <= D) & (n_rows <= N_dual))
            k = int(np.argmax(dual)) if dual.any() else Z.shape[0] - a
            if k:
                parts.append(update_rows(self.inner, Z[a : a + k], Y[a : a + k], predict=predict,
                                         inert=inert_rows(inert, a, a + k)))
                count = int(n_nonzero[k - 1])  # (the window after these rows)
                self.count_bounds = (count, count) if a + k == Z.shape[0] else None
                if self.keys is not None:  # a new array: checkpoints keep the old one
                    self.keys = np.concatenate([self.keys, new_keys[a : a + k]])[-N:]
                a += k
            if a < Z.shape[0]:
                self._switch()
        if not predict:
            return None
        return np.concatenate(parts) if parts else np.zeros((0, self.params["n_targets"]))

    def _keeps_route(self, Z):
        """Whether the one row ``Z`` keeps the route, known from :attr:`count_bounds`
        without counting the rows of the window (a sort of its keys): a row adds at most
        one to the count, and the oldest row, leaving, takes at most one away. The
        bounds move with the row when it does."""
        if self.count_bounds is None:
            return False
        N, N_dual = self.params["window_size"], self.dual_params["window_size"]
        D, buf = self.params["n_features"], self.inner.buf
        if min(buf.n + 1, N) > N_dual:
            return self.primal  # (the dual ring cannot hold the window)
        lo, hi = self.count_bounds
        lo, hi = max(0, lo - (buf.n + 1 > N)), hi + bool(Z.any())
        keeps = lo >= D - max(1, D // 16) if self.primal else hi <= D  # (see update)
        if keeps:
            self.count_bounds = (lo, hi)
        return keeps

    def _update_dual_only(self, Z, Y, *, predict, inert):
        """The dual route for good while its full windows stay off the orthogonal route.

        A stretch of full windows of which more than half go to the orthogonal route
        means a ridge too small for the window (its ``n − D`` null directions leave the
        dual matrix conditioned like ``‖Ã‖²/α``), which the primal route solves on its
        fast route: the rest of the stream then takes the usual routes. The stretches
        watched are :data:`DUAL_ONLY_WATCH` rows long, twice as long after each that
        passes (up to ``4N``): the rows of a call are learned in pieces that end where a
        stretch does (the fill of the window in one piece).
        """
        N, parts, a = self.params["window_size"], [], 0
        while a < Z.shape[0] and self.dual_only:
            full, orth, stretch = self.watch
            fill = max(0, N - self.inner.buf.n)  # rows before the window is full
            b = min(Z.shape[0], a + fill + stretch - full)
            orth_before = self.inner.n_orthogonal
            parts.append(update_rows(self.inner, Z[a:b], Y[a:b], predict=predict,
                                     inert=inert_rows(inert, a, b)))
            full += max(0, b - a - fill)
            orth += self.inner.n_orthogonal - orth_before
            if full >= stretch:
                self.dual_only = 2 * orth <= full
                full, orth, stretch = 0, 0, min(2 * stretch, max(DUAL_ONLY_WATCH, 4 * N))
            self.watch = (full, orth, stretch)
            a = b
        if a < Z.shape[0]:
            parts.append(self.update(Z[a:], Y[a:], predict=predict, inert=inert_rows(inert, a, Z.shape[0])))
        if not predict:
            return None
        return np.concatenate(parts) if parts else np.zeros((0, self.params["n_targets"]))

    def _switch(self):
        """Hand the window to the other route."""
        buf = self.inner.buf
        slots = buf.slots()
        other = self._dual() if self.primal else PrimalSolver(**self.params)
        other.buf.load(buf.Zh[slots], buf.s[slots], buf.Y[slots])
        self.n_orthogonal_switched += self.inner.n_orthogonal
        self.n_switches += 1
        self.inner, self.primal = other, not self.primal


def row_keys(Z):
    """A 64-bit key of each row's bytes: equal rows, equal keys (deterministic across
    processes, so a pickled stream continues with the same routes)."""
    V = np.ascontiguousarray(Z, dtype=np.float64).view(np.uint64)
    mult = (np.arange(1, V.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) | np.uint64(1)
    h = V ^ (V >> np.uint64(29))
    h *= mult
    h ^= h >> np.uint64(32)
    return h.sum(axis=1, dtype=np.uint64)


def distinct_in_windows(keys, nonzero, end, N):
    """Distinct non-zero rows of the windows ``[max(0, e − N), e)`` of a sequence.

    ``keys`` and ``nonzero`` describe the sequence's rows, ``end`` the windows' ends.
    A row counts when no earlier row of its window has its key: with ``prev[u]`` the last
    earlier row of the same key, row ``u`` counts in the window ending at ``e`` when
    ``u < e ≤ u + N`` and ``prev[u] < e − N`` (or it has none), a range of ends
    ``(max(u, prev[u] + N), u + N]``: the counts are one cumulative sum over a difference
    array, ``O(L log L)`` for a sequence of ``L`` rows (the sort), whatever ``N``.
    """
    L = keys.size
    order = np.argsort(keys, kind="stable")
    ks = keys[order]
    prev = np.full(L, -1, dtype=np.intp)
    same = np.flatnonzero(ks[1:] == ks[:-1]) + 1
    prev[order[same]] = order[same - 1]
    u = np.flatnonzero(nonzero)
    first_end = np.where(prev[u] >= 0, np.maximum(u, prev[u] + N), u) + 1
    size = L + N + 2
    diff = np.bincount(first_end, minlength=size) - np.bincount(u + N + 1, minlength=size)
    return np.cumsum(diff)[end]
