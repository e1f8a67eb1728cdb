"""The subcommands of ``sklearn-orfit``: ``forecast`` (one task per series, the models,
the future forecast, ``--tune``, the report), ``benchmark`` and ``double-descent``."""

import contextlib
import dataclasses
import json
import math
import os
import platform
import warnings

import numpy as np

from . import _experiments as ex
from .. import _forecast_models as fm
from .. import forecasting as fp
from . import _timestamps as _ts
from .._streaming._base import STATE_FORMAT
from ._parser import (
    CLIError,
    PROG,
    _DASK_TIMEOUT,
    _DEFAULT_ABO_ALPHA,
    _DEFAULT_D,
    _DEFAULT_TRANSFORM,
    _DEFAULT_WINDOW,
    _TUNE_ALPHAS,
    _TUNE_DIMS,
    _TUNE_MODELS,
    _TUNE_SIGMAS,
    _TUNE_SPLITS,
    _TUNE_WINDOWS,
)
from ._input import (
    _check_series,
    _check_values,
    _increasing,
    _listing,
    _load_input,
    _names,
)
from ._outputs import (
    _MODEL_FORMATS,
    _MODEL_FORMAT_VERSION,
    _STREAM_SETTINGS,
    _adopt_saved_settings,
    _check_model_path_is_free,
    _check_output_dir,
    _check_save_path,
    _drop_seen_rows,
    _flag,
    _load_model,
    _match_saved_series,
    _output_paths,
    _parse_step,
    _replacing,
    _save_model,
    _time_step,
    _write_future,
    _write_predictions,
)
from ._workers import _on_dask, _warning_text, _workers


def _available_memory():
    """Bytes of memory this process may still use (``None`` when unknown).

    psutil's "available" when installed, else ``MemAvailable`` of ``/proc/meminfo``,
    else the physical memory (``sysconf``); capped by a cgroup v2 limit if one is set.
    """
    found = None
    try:
        import psutil
    except ImportError:
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        found = int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            pass
        if found is None:
            try:
                found = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (AttributeError, ValueError, OSError):
                pass
    else:
        found = int(psutil.virtual_memory().available)
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        if limit.isdigit():
            found = int(limit) if found is None else min(found, int(limit))
    except OSError:
        pass
    return found if found and found > 0 else None


def _memory_terms(args, n_components, n_values):
    """The large arrays of a forecast run: ``[(bytes, what, options), ...]``.

    Counts (8-byte floats) from the models' state and their per-chunk work arrays, each
    rounded up (copies made by the solvers included), so that the estimate is of the
    right order without running anything. Python integers: no overflow.
    """
    D, N, L = n_components, args.window_size or _DEFAULT_WINDOW, args.n_lags
    c = min(args.chunk_size, max(n_values, 1))
    inputs = L * (1 + getattr(args, "n_exog", 0)) + getattr(args, "n_future_exog", 0)
    levels = len(getattr(args, "level", None) or (80, 95))
    terms = [(8 * n_values * (8 + 3 * levels), "the series, its forecasts and their "
              "intervals", "--n-rows"),
             (8 * 4 * c * (inputs + 2), "the lagged rows of one block",
              "--n-lags and --chunk-size")]
    model = args.model
    if model in ("abo", "orfit", "ewrls", "ensemble"):
        terms.append((8 * D * (inputs + 1), "the random features' frequencies",
                      "--n-components"))
        terms.append((8 * 4 * c * D, "the features of one chunk",
                      "--n-components and --chunk-size"))
    if model in ("abo", "ensemble"):
        terms.append((8 * 3 * N * D, "the window of feature rows",
                      "--window-size and --n-components"))
        terms.append((8 * 3 * (min(N, D) + c) ** 2, "the window's factorisation",
                      "--window-size" if N <= D else "--n-components"))
    elif model == "orfit":
        terms.append((8 * 3 * (args.memory_size + 1) * D, "the ORFit memory",
                      "--memory-size and --n-components"))
    elif model == "ewrls":
        terms.append((8 * 3 * D * D, "the D × D inverse Gram matrix", "--n-components"))
    elif model == "aggregate":
        grid = _parse_experts(getattr(args, "experts", None)) or fm.DEFAULT_EXPERTS
        n_sig = len(grid["sigmas"]) * len(grid.get("abo_alphas", (0.0,))) * len(
            grid.get("forgetting_factors", (1.0,)))
        abo = sum(8 * 3 * n * d * n_sig + 8 * 3 * (min(n, d) + c) ** 2 * n_sig
                  for n in grid.get("abo_windows", ()) for d in grid["n_components"])
        n_scales = len(grid.get("krls_length_scales") or grid["sigmas"]) * len(
            grid.get("krls_alphas", (1e-2,)))
        krls = sum(8 * 4 * (n + c) ** 2 * n_scales for n in grid.get("krls_windows", ()))
        terms.append((abo + krls, "the experts' windows and factorisations", "--experts"))
        terms.append((8 * 4 * c * max(grid["n_components"]) * len(grid["sigmas"]),
                      "the features of one chunk", "--experts and --chunk-size"))
    elif model == "sw-krls":
        terms.append((8 * 4 * (N + c) ** 2, "the window's kernel matrices",
                      "--window-size"))
        terms.append((8 * 2 * N * inputs, "the window of lagged rows",
                      "--window-size and --n-lags"))
    else:  # qrd-rls
        terms.append((8 * 2 * N * inputs, "the window of lagged rows",
                      "--window-size and --n-lags"))
        terms.append((8 * 4 * inputs * inputs, "the triangular factor", "--n-lags"))
    return terms


def _bytes(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"  # pragma: no cover


def _check_memory(args, n_components, n_values):
    """Refuse a run whose arrays cannot fit in the available memory (before any)."""
    available = _available_memory()
    if available is None:
        return
    terms = _memory_terms(args, n_components, n_values)
    total = sum(t[0] for t in terms)
    if total <= available:
        return
    size, what, options = max(terms)
    values = {"--n-components": n_components, "--window-size": args.window_size,
              "--n-lags": args.n_lags, "--chunk-size": args.chunk_size,
              "--memory-size": args.memory_size,
              "--experts": repr(getattr(args, "experts", None) or "(the default grid)")}
    named = " and ".join(f"{o} {values[o]}" for o in options.split(" and "))
    raise CLIError(
        f"--model {args.model} with {named} needs about {_bytes(total)} of memory "
        f"({what}: {_bytes(size)}), more than the {_bytes(available)} available; "
        f"reduce {options.replace(' and ', ' or ')}"
    )


def _model_description(args, n_components):
    feats = f"RandomFourierFeatures(D={n_components}, σ={args.sigma})"
    lam = f"λ={args.forgetting_factor}"
    return {
        "abo": f"{feats} → QREWRLSRegressor(N={args.window_size}, {lam}, "
               f"α={args.alpha or 0.0})",
        "orfit": f"{feats} → ORFitRegressor(memory={args.memory_size}, "
                 f"{args.memory_policy})",
        "ensemble": f"FeaturePartitionEnsemble({args.n_partitions} × {feats}[block] → "
                    f"QREWRLSRegressor(N={args.window_size}, {lam}))",
        "sw-krls": f"SlidingWindowKRLSRegressor(N={args.window_size}, "
                   f"s={args.length_scale or 1.0 / args.sigma:.4g}, "
                   f"α={1e-2 if args.alpha is None else args.alpha})",
        "qrd-rls": f"QRDRLSRegressor(N={args.window_size}, {lam}, "
                   f"α={1e-2 if args.alpha is None else args.alpha})",
        "ewrls": f"{feats} → EWRLSRegressor({lam}, δ={args.delta})",
        "aggregate": _aggregate_description(args),
    }[args.model]


def _aggregate_description(args):
    grid = _parse_experts(getattr(args, "experts", None)) or fm.DEFAULT_EXPERTS
    sig = ", ".join(f"{x:g}" for x in grid["sigmas"])
    n_abo = (len(grid.get("abo_windows", ())) * len(grid["sigmas"])
             * len(grid["n_components"]) * len(grid.get("abo_alphas", (0.0,)))
             * len(grid.get("forgetting_factors", (1.0,))))
    scales = grid.get("krls_length_scales") or grid["sigmas"]
    n_krls = (len(grid.get("krls_windows", ())) * len(scales)
              * len(grid.get("krls_alphas", (1e-2,))))
    parts = []
    if n_abo:
        parts.append(f"{n_abo} ABO (N ∈ {{{', '.join(map(str, grid['abo_windows']))}}}, "
                     f"σ ∈ {{{sig}}}, D ∈ {{{', '.join(map(str, grid['n_components']))}}})")
    if n_krls:
        parts.append(f"{n_krls} SW-KRLS (N ∈ "
                     f"{{{', '.join(map(str, grid['krls_windows']))}}}, s = "
                     + ("1/σ" if not grid.get("krls_length_scales") else
                        "{" + ", ".join(f"{x:g}" for x in scales) + "}") + ")")
    return f"AggregatingRegressor(BOA over {n_abo + n_krls} experts: {', '.join(parts)})"


def _fmt(x):
    return f"{x:.6g}" if np.isfinite(x) else str(x)


def _run_tasks(tasks, args):
    """Run the per-series forecasts: in this process, or through joblib's workers.

    Warnings (numpy's RuntimeWarnings included) are counted and summarised in one note,
    never printed raw: recorded here for the tasks run by this process (its threads
    too), and by each task itself in loky's worker processes (one task at a time per
    process; ``catch_warnings`` is not thread-safe, so threads never record their own).
    """
    sequential = len(tasks) == 1 or (args.n_jobs in (None, 1) and args.backend is None
                                     and args.scheduler is None)
    in_processes = not sequential and args.backend in (None, "loky") \
        and args.scheduler is None
    tasks = [{**t, "record_warnings": in_processes, "threads": args.threads} for t in tasks]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if sequential:
            def run():
                return [_forecast_task(t) for t in tasks]
        else:
            import joblib

            n_jobs = args.n_jobs if args.n_jobs is not None else (
                -1 if (args.backend == "dask" or args.scheduler) else None)

            def run():
                return joblib.Parallel(n_jobs=n_jobs)(
                    joblib.delayed(_forecast_task)(t) for t in tasks)
        # watched when the cluster computes: the series, or an ensemble's partitions
        client = getattr(args, "_dask_client", None) if (
            not sequential or args.model == "ensemble") else None
        timeout = _DASK_TIMEOUT if getattr(args, "timeout", None) is None else args.timeout
        outcomes = (run() if client is None else
                    _on_dask(run, client, args.scheduler, timeout))
    n_warn = len(caught) + sum(o[2] for o in outcomes)
    first = _warning_text(caught[0]) if caught else next(
        (o[3] for o in outcomes if o[2]), "")
    return outcomes, n_warn, first


def _forecast_task(task):
    """One series: its forecaster (new or continued) learns the values, making the
    backtest's forecasts as it goes, then forecasts the values after them.

    Returns ``(result, state, n_warnings, first_warning)``; ``state`` (when saving) is
    what the stream needs to continue: the forecaster (``forecaster``), and the same
    forecaster as it was at the last multiple of the chunk size (``checkpoint``) with the
    values learned after it (``pending``), from which the command line continues the
    stream as one uninterrupted run.
    """
    s = task["settings"]
    record = task.get("record_warnings", False)
    threads, _ = ex.blas_threads(task.get("threads", 1))
    with threads, (warnings.catch_warnings(record=True) if record
                   else contextlib.nullcontext()) as caught:
        if record:
            warnings.simplefilter("always")
        saved = task["state"]
        values, exog = task["values"], task["exog"]
        if saved is None:
            n_future = task["n_future_exog"]
            n_past = 0 if exog is None else exog.shape[1] - n_future
            fc = _make_forecaster(s, n_past, n_future, task["n_jobs"])
            fc._validate_params()
            fc._start(values, exog)
            report = max(task.get("report_from", 0), fp.first_forecast_position(
                n_lags=s["n_lags"], transform=s["transform"], horizon=s["horizon"]))
        else:
            fc = saved["checkpoint"]
            fc._check_params_unchanged()
            report = saved["n_values"]
            p_values, p_exog = saved["pending"]
            values = np.concatenate([p_values, values])
            if exog is not None:
                exog = np.concatenate([p_exog, exog])
        yv, Xv, _ = fc._check_chunk(values, exog, first=saved is None)
        result = ex.run_stream(fc, yv, Xv, skip=task["skip"], quiet=task["quiet"],
                               desc=task["desc"], report_from=report,
                               season=task["season"], checkpoint=task["save"])
        future = _future_forecast(task, fc, result)
        experts = (_experts_report(list(fc.regressor_.named_steps_.values())[-1])
                   if s["model"] == "aggregate" else None)
    state = None
    if task["save"]:
        ckpt, position = result.checkpoint
        first = fc.n_samples_seen_ - yv.shape[0]
        k = position - first
        state = {"checkpoint": ckpt, "pending": (yv[k:], Xv[k:]),
                 "n_values": fc.n_samples_seen_, "forecaster": fc}
    result = dataclasses.replace(result, checkpoint=None, future=future, experts=experts)
    caught = caught or []
    return result, state, len(caught), _warning_text(caught[0]) if caught else ""


def _make_forecaster(s, n_past, n_future, n_jobs):
    """The run's :class:`~sklearn_orfit.StreamForecaster`: the run's model behind a
    running standardisation of its rows, the run's lags, transform and horizon, direct
    (one row, ``horizon`` targets), ACI intervals at ``--level`` over the last
    ``--calibration`` residuals, learning one-step forecasts in blocks of
    ``--chunk-size`` values."""
    return fp._stream_forecaster(
        _new_model(s, n_jobs), transform=s["transform"], n_lags=s["n_lags"],
        horizon=s["horizon"], n_past=n_past, n_future=n_future,
        coverage=tuple(level / 100.0 for level in s["levels"]),
        conformal_window=max(s["calibration"], 20), chunk_size=s["chunk_size"])


_EXPERT_INTS = ("abo_windows", "n_components", "krls_windows")
_EXPERT_FLOATS = ("sigmas", "abo_alphas", "forgetting_factors", "krls_length_scales",
                  "krls_alphas")


def _parse_experts(text):
    """``--experts 'abo_windows=50,200;krls_windows='`` → make_expert_grid's keywords
    (``None`` → the default grid)."""
    if text is None:
        return None
    out = {}
    for part in (p.strip() for p in str(text).split(";")):
        if not part:
            continue
        key, eq, values = (x.strip() for x in part.partition("="))
        if not eq or key not in _EXPERT_INTS + _EXPERT_FLOATS:
            raise CLIError(f"--experts {text!r}: {part!r} is not 'name=v1,v2' with a name "
                           f"among {', '.join(_EXPERT_INTS + _EXPERT_FLOATS)}")
        if key in out:
            raise CLIError(f"--experts {text!r} gives {key} twice")
        cast = int if key in _EXPERT_INTS else float
        try:
            vals = tuple(cast(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise CLIError(f"--experts {text!r}: {key} needs "
                           f"{'integers' if cast is int else 'numbers'}, got "
                           f"{values!r}") from None
        if any(not math.isfinite(v) or v <= 0 for v in vals if key != "abo_alphas"
               and key != "krls_alphas") or any(v < 0 for v in vals):
            raise CLIError(f"--experts {text!r}: {key} needs positive values")
        if key == "forgetting_factors" and any(v > 1 for v in vals):
            raise CLIError(f"--experts {text!r}: forgetting factors are in (0, 1]")
        if key in ("sigmas", "n_components") and not vals:
            raise CLIError(f"--experts {text!r}: {key} needs at least one value")
        out[key] = vals
    grid = {**fm.DEFAULT_EXPERTS, **out}
    if not grid.get("abo_windows") and not grid.get("krls_windows"):
        raise CLIError(f"--experts {text!r} has no expert: give abo_windows or "
                       "krls_windows")
    return grid


def _expert_grid(s):
    return _parse_experts(s.get("experts")) or dict(fm.DEFAULT_EXPERTS)


def _new_model(s, n_jobs):
    return fm.make_forecast_model(
        s["model"], n_components=s["n_components"], sigma=s["sigma"],
        window_size=s["window_size"], forgetting_factor=s["forgetting_factor"],
        alpha=s["alpha"], length_scale=s["length_scale"],
        memory_size=s["memory_size"], memory_policy=s["memory_policy"],
        delta=s["delta"], n_partitions=s["n_partitions"], n_jobs=n_jobs,
        random_state=s["random_state"],
        experts=_expert_grid(s) if s["model"] == "aggregate" else None,
    )


def _experts_report(model):
    """The aggregate's final weights and each family's share of the weight over the
    stream (the mean over each quarter of the rows it learned)."""
    names = [name for name, _ in model.estimators]
    weights = np.asarray(model.weights_, dtype=np.float64)
    history = np.asarray(model.weights_history_, dtype=np.float64)
    family = np.array(["abo" if n.startswith("abo") else "sw-krls" for n in names])
    shares = {}
    for fam in ("abo", "sw-krls"):
        mask = family == fam
        if not mask.any():
            continue
        per_row = history[:, mask].sum(axis=1) if history.shape[0] else np.empty(0)
        quarters = [float(q.mean()) for q in np.array_split(per_row, 4) if q.size]
        shares[fam] = {"quarters": quarters, "final": float(weights[mask].sum())}
    return {"weights": dict(zip(names, weights.tolist())), "family_share": shares,
            "n_rows": int(history.shape[0])}


def _future_forecast(task, fc, result):
    """Forecast the next ``horizon`` values with the forecaster that learned the run:
    ``{"forecast", "intervals", "coverage", "n_calibration", "n_learned"}``.

    The coverage is the share of the run's reported values that fell inside the
    intervals (step ``horizon``) issued with their forecasts, over the values that had
    one.
    """
    h = task["settings"]["horizon"]
    X_future = task["future_exog"]
    if task["n_future_exog"]:
        if X_future is None or X_future.shape[0] < h:
            got = 0 if X_future is None else X_future.shape[0]
            raise CLIError(f"--exog-future: the forecast of the next {h} values needs the "
                           f"known-future columns at those times: {got} future row(s) "
                           f"after the data hold them (rows whose series are empty); "
                           f"give {h}")
        X_future = X_future[:h]
    forecast = np.asarray(fc.predict(h, X_future), dtype=np.float64)
    intervals = np.asarray(fc.predict_interval(h, X_future=X_future), dtype=np.float64)
    half = result.half_widths  # (n, n_levels): ACI's half-widths
    ok = np.isfinite(result.forecast)[:, None] & np.isfinite(half)
    inside = np.abs(result.actual - result.forecast)[:, None] <= half
    n_cal = ok.sum(axis=0)
    coverage = [float(inside[:, j][ok[:, j]].mean()) if n_cal[j] else None
                for j in range(half.shape[1])]
    return {"forecast": forecast, "intervals": intervals, "coverage": coverage,
            "n_calibration": int(n_cal.min()) if n_cal.size else 0,
            "n_learned": int(fc.n_samples_seen_)}


def _jsonable(x):
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


_METRICS = ("rmse", "mae", "mase", "skill_last_value", "skill_seasonal_naive", "res_mse",
            "res_var")


def _series_report(name, result, n_values):
    s = result.scores
    return {
        "name": name, "n_values": int(n_values), "n_forecasts": int(result.forecast.shape[0]),
        "n_scored": int(np.sum(result.scored)),
        "first_position": int(result.index[0]) if result.index.shape[0] else None,
        "rmse": s.get("rmse"), "mae": s.get("mae"), "mase": s.get("mase"),
        "skill_last_value": s.get("skill_last_value"),
        "skill_seasonal_naive": s.get("skill_seasonal_naive"),
        "beats_last_value": s.get("beats_last_value"),
        "beats_seasonal_naive": s.get("beats_seasonal_naive"),
        "summary": s.get("summary"),
        "res_mse": result.res_mse, "res_var": result.res_var,
        "persistence_res_mse": result.persistence_mse,
        "persistence_res_var": result.persistence_var,
        "seconds": result.seconds, "us_per_update": result.seconds_per_update * 1e6,
    }


def _aggregate(reports):
    """The mean of each metric over the series where it is defined."""
    out = {"method": "mean of the per-series metrics (each series has its own model)"}
    for key in _METRICS:
        vals = [r[key] for r in reports
                if r[key] is not None and math.isfinite(r[key])]
        out[key] = float(np.mean(vals)) if vals else None
        out[f"{key}_n_series"] = len(vals)
    return out


def _value(x, fmt="{:.4g}"):
    if x is None:
        return "n/a"
    return fmt.format(x) if math.isfinite(x) else str(x)


def _resolve_settings(args, name):
    """Fill the defaults that depend on the input and the model (transform, D)."""
    if args.transform == "auto":
        args.transform = _DEFAULT_TRANSFORM.get(name, "logdiff" if name.startswith("eur")
                                                and args.csv is None else "none")
    if args.n_components is None:
        args.n_components = _DEFAULT_D.get(args.model, 4096)


_TUNED = ("transform", "window_size", "sigma", "alpha", "n_components", "model")


def _tune(args, data, given):
    """``--tune``: choose the settings not given explicitly on the first part of the
    series (:func:`sklearn_orfit.forecasting.tune_forecast`), set them in ``args`` and
    return what the report says about the tuning."""
    import time

    from ..forecasting import tune_forecast

    if len(data.series) > 1:
        raise CLIError(f"--tune chooses the settings of one series; --column names "
                       f"{len(data.series)}: tune them one at a time")
    if data.n_future_exog:
        # tune_forecast searches rows whose exogenous columns are all lagged: it would
        # choose the settings of another model than the run's
        raise CLIError("--tune searches models whose exogenous columns are lagged; it "
                       "cannot tune with --exog-future columns (known at the target "
                       "time): give the settings instead of --tune, or use those "
                       "columns as --exog")
    (name, values), = data.series.items()
    _check_values(values, name, data.where)
    left = values.shape[0] - math.floor(args.tune_fraction * values.shape[0])
    if left < 2:
        raise CLIError(f"--tune-fraction {args.tune_fraction} leaves {left} value(s) of "
                       f"{values.shape[0]} after the tuning part to report on; give a "
                       "smaller --tune-fraction or a longer series")
    if data.exog is not None:
        for k, col in enumerate(data.exog_names):
            _check_values(data.exog[:, k], col, data.where, what="--exog column")
    fixed = [k for k in _TUNED if k in given and not (k == "transform"
                                                      and args.transform == "auto")]
    models = (args.model,) if "model" in fixed else (
        tuple(_names(args.tune_models, "--tune-models")) if args.tune_models
        else _TUNE_MODELS)
    unknown = [m for m in models if m not in fm.MODELS]
    if unknown:
        raise CLIError(f"--tune-models: unknown model(s) {_listing(unknown)}; choose among "
                       f"{_listing(fm.MODELS)}")
    transforms = (args.transform,) if "transform" in fixed else fp.TRANSFORMS
    params = {k: getattr(args, k) for k in (
        "forgetting_factor", "alpha", "length_scale", "memory_size", "memory_policy",
        "delta", "n_partitions")}
    if "length_scale" not in given:  # given, it fixes sw-krls's kernel (1/σ otherwise)
        params.pop("length_scale")
    if "alpha" not in fixed:  # searched
        params.pop("alpha")
    t0 = time.perf_counter()
    try:
        tuned = tune_forecast(
            values, horizon=args.horizon, n_lags=args.n_lags, exog=data.exog,
            transforms=transforms,
            window_sizes=(args.window_size,) if "window_size" in fixed else _TUNE_WINDOWS,
            sigmas=(args.sigma,) if "sigma" in fixed else _TUNE_SIGMAS, models=models,
            alphas=None if "alpha" in fixed else _TUNE_ALPHAS,
            n_components=(args.n_components if "n_components" in fixed
                          else _TUNE_DIMS),
            model_params=params, search="staged", refit=False,
            tune_fraction=args.tune_fraction, n_splits=_TUNE_SPLITS, n_jobs=args.n_jobs,
            threads=args.threads, random_state=args.random_state)
    except ValueError as exc:
        raise CLIError(f"--tune: {exc}") from None
    seconds = time.perf_counter() - t0
    args.transform, args.model = tuned.transform, tuned.model
    if tuned.window_size is not None:
        args.window_size = tuned.window_size
    if tuned.sigma is not None:
        args.sigma = tuned.sigma
    if tuned.alpha is not None:
        args.alpha = tuned.alpha
    if tuned.n_components is not None:
        args.n_components = tuned.n_components
    return {
        "n_tune": tuned.n_tune, "tune_fraction": args.tune_fraction,
        "report_from_position": tuned.n_tune,
        "validation_positions": list(tuned.validation_positions),
        "n_splits": tuned.n_splits, "fold_size": tuned.fold_size,
        "warmup_size": tuned.warmup_size,
        "choice": {k: tuned[k] for k in _TUNED}, "fixed": fixed,
        "validation_rmse": tuned.rmse, "last_value_rmse": tuned.last_value_rmse,
        "seconds": seconds, "table": tuned.table,
    }


def _say_tuning(tuning, say, units):
    """The validation table (the best candidates of each transform) and the choice."""
    u = f" ({units})" if units else ""
    a, b = tuning["validation_positions"]
    say(f"\ntuning: on the first {tuning['n_tune']} values only (--tune-fraction "
        f"{tuning['tune_fraction']}), {tuning['n_splits']} prequential folds of "
        f"{tuning['fold_size']} forecasts (positions {a}..{b - 1}); "
        f"{sum(r['target_rmse'] is not None for r in tuning['table'])} candidates in "
        f"{tuning['seconds']:.1f} s")
    say(f"{'stage':<6}{'transform':10}{'model':>9}{'N':>6}{'σ':>6}{'α':>6}{'D':>6}"
        f"{'tgt. RMSE':>11}{'rank':>6}{'RMSE' + u:>14}")
    shown = 0
    for r in tuning["table"]:
        if r["target_rmse"] is None and r["rank"] is None:
            say(f"{r.get('stage', 1):<6}{r['transform'] or '':10} {r['note']}")
            continue
        if r["rank"] > 3:
            continue
        shown += 1
        say(f"{r.get('stage', 1):<6}{r['transform']:10}{r['model']:>9}"
            f"{_value(r['window_size'], '{}'):>6}{_value(r['sigma'], '{:g}'):>6}"
            f"{_value(r.get('alpha'), '{:g}'):>6}{_value(r.get('n_components'), '{}'):>6}"
            f"{_value(r['target_rmse']):>11}{r['rank']:>6}"
            f"{_value(r['rmse']):>14}" + ("  <- chosen" if r["chosen"] else ""))
    more = sum(r["rank"] is not None for r in tuning["table"]) - shown
    say("(stage 1: transforms, windows and σ at the first α and D; stage 2: α and D of "
        "the chosen one; tgt. RMSE: of the targets the model learns (deviations "
        "from the running mean, changes or log changes), ranks the candidates of a "
        "transform and stage; RMSE: the best of each replayed on the same folds, in the "
        "series' units, chooses" + (f"; {more} more candidates in --json" if more else "")
        + ")")
    c = tuning["choice"]
    flags = " ".join(f"{_flag(k)} {c[k]}" for k in _TUNED if c[k] is not None)
    fixed = (f"; kept as given: {', '.join(_flag(k) for k in tuning['fixed'])}"
             if tuning["fixed"] else "")
    say(f"chosen: {flags} (validation RMSE {_value(tuning['validation_rmse'])}, last "
        f"value {_value(tuning['last_value_rmse'])}){fixed}")


def _infer_season(times):
    if times is None or len(times) < 3:
        return None, "no time stamps"
    try:
        from ..metrics import infer_season
    except ImportError:  # pragma: no cover
        return None, "no time stamps"
    try:
        season = infer_season(times)
    except ValueError:
        return None, "unreadable time stamps"
    if season is None:
        return None, "no natural cycle for the time stamps' spacing"
    return int(season), "from the time stamps"


def _forecast(args, out, given=frozenset()):
    from .. import __version__

    as_json = args.json
    say = (lambda *a, **k: None) if as_json else (lambda *a, **k: print(*a, file=out, **k))
    notes = []
    header = streams = None
    for flag in ("tune_fraction", "tune_models"):
        if flag in given and not args.tune:
            raise CLIError(f"{_flag(flag)} needs --tune")
    if args.tune and args.load_model is not None:
        raise CLIError("--tune cannot continue a stream: --load-model's settings are fixed "
                       "by the saved model (tune on a new stream, then --save-model)")
    args.levels = sorted({float(x) for x in args.level})
    if "level" in given:
        given = given | {"levels"}
    if args.skip_seen and args.load_model is None:
        raise CLIError("--skip-seen needs --load-model (it skips the rows the saved "
                       "model has already learned)")
    if args.load_model is not None:
        header, streams = _load_model(args.load_model)
        _adopt_saved_settings(args, header, given, args.load_model)
    data = _load_input(args)
    notes.extend(data.time_notes)
    args.n_future_exog = data.n_future_exog
    args.n_exog = len(data.exog_names) - data.n_future_exog
    names = list(data.series)
    if header is not None:
        data = _drop_seen_rows(args, data, header, notes)
    if args.window_size is None:  # not given, not saved: the default, or what fits
        longest = max(v.shape[0] for v in data.series.values())
        room = longest - fp.min_series_length(n_lags=args.n_lags, window_size=0,
                                              transform="diff", horizon=args.horizon)
        args.window_size = max(20, min(_DEFAULT_WINDOW, room // 2))
    if args.alpha is None and args.model == "abo" and not (args.tune and
                                                           args.tune_models):
        args.alpha = _DEFAULT_ABO_ALPHA
    tuning = _tune(args, data, given) if args.tune else None
    _resolve_settings(args, data.source)
    if args.experts is not None and args.model != "aggregate":
        raise CLIError(f"--experts is the expert grid of --model aggregate, not of "
                       f"--model {args.model}")
    _parse_experts(args.experts)  # refused before any computation
    continuing = header is not None
    saved_by_series = (_match_saved_series(names, header, streams, args.load_model)
                       if continuing else {})
    transform = args.transform
    for name, values in data.series.items():
        _check_series(values, name, data.where, args=args, transform=transform,
                      continuing=continuing)
    for k, name in enumerate(data.exog_names):
        _check_values(data.exog[:, k], name, data.where, what="--exog column")
    if data.time_column is not None and data.times is not None and not len(data.times):
        raise CLIError(f"--time-column {data.time_column!r} has no time stamps")
    n_values = max(v.shape[0] for v in data.series.values())
    _check_memory(args, args.n_components, n_values)
    if not args.no_save:
        _check_output_dir(args.output_dir)
    outputs = {} if args.no_save else _output_paths(args, data, names)
    if args.save_model is not None:
        _check_save_path(args.save_model)
        _check_model_path_is_free(args, outputs)
    if args.season is not None:
        season, season_how = args.season, "given" if "season" in given else "saved"
    else:
        season, season_how = (_infer_season(data.times) if _increasing(data.times) else
                              (None, "no time stamps" if data.times is None
                               else "time stamps not increasing"))
    settings = {key: getattr(args, key) for key in _STREAM_SETTINGS}
    first = fp.first_forecast_position(n_lags=args.n_lags, transform=transform,
                                       horizon=args.horizon)
    if continuing:
        skip = header["skip"]
        time_offset = next(iter(saved_by_series.values()))["n_values"]
    else:
        n_forecasts = n_values - first
        # the first window's forecasts are made but not scored
        skip = first + min(args.window_size, n_forecasts - 2)
        time_offset = 0
    report_from = 0
    if tuning is not None:  # report only the values after the tuning part
        report_from = tuning["n_tune"]
        if n_values - max(report_from, first) < 2:
            raise CLIError(f"--tune-fraction {args.tune_fraction} leaves "
                           f"{max(n_values - max(report_from, first), 0)} forecast(s) after "
                           "the tuning part to report on; give a smaller --tune-fraction "
                           "or a longer series")
    several = len(names) > 1
    tasks = [{
        "settings": settings, "values": values, "exog": data.exog,
        "state": saved_by_series.get(name), "skip": skip, "season": season,
        "quiet": args.quiet or as_json or several, "save": args.save_model is not None,
        "desc": f"{args.model} on {name}", "n_jobs": args.n_jobs,
        "report_from": report_from, "n_future_exog": data.n_future_exog,
        "future_exog": data.future_exog,
    } for name, values in data.series.items()]
    label = (data.source if args.csv is None or several
             else f"{data.source}:{names[0]}")
    h = args.horizon
    ahead_text = "the next value" if h == 1 else f"the values 1 to {h} steps ahead"
    modelled = {"none": f"{ahead_text} less the running mean (inputs: values)",
                "diff": f"changes to {ahead_text} (inputs: first differences)",
                "logdiff": f"log changes to {ahead_text} (inputs: log returns)"}[transform]
    # the workers (a dask cluster: connected) before anything is printed
    with _workers(args):
        say(f"{PROG} forecast: {label} — {data.description}; {n_values} values"
            + (f", continuing {args.load_model}" if continuing else ""))
        say(f"model: {args.model} = {_model_description(args, args.n_components)}"
            + (f", one per series ({len(names)} series)" if several else ""))
        exog_text = (f" + {', '.join(data.exog_names)} ({len(data.exog_names)} exog, "
                     "levels)" if data.exog_names else "")
        ahead = "one step" if h == 1 else f"{h} steps"
        n_steps = n_values * len(names)
        say(f"rows: targets {modelled}, {args.n_lags} lags{exog_text}, standardised "
            f"with running mean/std → {n_steps} values learned, each forecast "
            f"{ahead} before it arrives"
            + ("" if continuing else
               f" (from position {first} on; the first {skip - first} not scored)"
               if tuning is None else
               f"; reported and scored only from position {tuning['n_tune']} on, after "
               f"the {tuning['n_tune']} values the tuning saw"))
        if data.time_column is not None:
            say(f"time: column {data.time_column!r}")
        if tuning is not None:
            _say_tuning(tuning, say, data.units)
        if data.times is not None and not _increasing(data.times):
            notes.append("the time stamps are not increasing: the figure uses positions and "
                         "no season is inferred from them")
        outcomes, n_warn, first_warning = _run_tasks(tasks, args)
        results = {name: o[0] for name, o in zip(names, outcomes)}
        reports = [_series_report(name, results[name], data.series[name].shape[0])
                   for name in names]
        units = data.units
        u1 = f" ({units})" if units else ""
        u2, u4 = (f" ({units}²)", f" ({units}⁴)") if units else ("", "")
        season_text = (f"season {season}, {season_how}" if season else
                       f"no seasonal-naive comparison: {season_how}; give --season")
        if not several:
            (result,) = results.values()
            r = reports[0]
            say(f"\n{'':16}{'ResMSE' + u2:>16}{'ResVAR' + u4:>16}")
            say(f"{'forecast':16}{_fmt(result.res_mse):>16}{_fmt(result.res_var):>16}")
            say(f"{'persistence':16}{_fmt(result.persistence_mse):>16}"
                f"{_fmt(result.persistence_var):>16}")
            say("(persistence: the last value as forecast)")
            say(f"\nin the series' units{u1}: RMSE {_value(r['rmse'])}, MAE {_value(r['mae'])}, "
                f"MASE {_value(r['mase'], '{:.4g}')} ({r['n_scored']} forecasts scored; "
                f"{season_text})")
            say(f"MSE skill vs the last value {_value(r['skill_last_value'], '{:.3g}')}, vs the "
                f"seasonal naive {_value(r['skill_seasonal_naive'], '{:.3g}')}")
            if r["summary"]:
                say(r["summary"])
            say(f"\ntime per update: {result.seconds_per_update * 1e6:.1f} µs "
                f"(features + predict + update; {result.n_updates} "
                f"updates in "
                f"{result.seconds:.2f} s)")
        else:
            width = max(12, *(len(n) + 2 for n in names))
            say(f"\n{'series':{width}}" + "".join(f" {h:>11}" for h in (
                "RMSE", "MAE", "MASE", "skill last", "skill seas.", "ResMSE", "ResVAR")))
            agg = _aggregate(reports)
            for r in [*reports, {**agg, "name": "mean"}]:
                say(f"{r['name']:{width}}" + "".join(
                    f" {_value(r[k], '{:.4g}'):>11}" for k in (
                        "rmse", "mae", "mase", "skill_last_value", "skill_seasonal_naive",
                        "res_mse", "res_var")))
            say(f"(mean: the mean of the per-series metrics, each series with its own model; "
                f"skills: MSE skill vs the last value and the seasonal naive, {season_text})")
            for r in reports:
                if r["summary"]:
                    say(f"{r['name']}: {r['summary']}")
            total = sum(res.seconds for res in results.values())
            say(f"\ntime: {total:.2f} s of model time over {len(names)} series")
        for name, result in results.items():
            who = f"{name}: " if several else ""
            if not np.all(np.isfinite(result.forecast)):
                notes.append(f"{who}{int(np.sum(~np.isfinite(result.forecast)))} forecasts "
                             "are not finite: the model diverged on this stream")
            elif not all(np.isfinite(x) for x in (result.res_mse, result.res_var)):
                notes.append(f"{who}some scores overflow float64 (inf/nan above): the "
                             "forecasts are far from the series (the model diverged on this "
                             "stream)")
        for name, result in results.items():
            if result.experts is None:
                continue
            rep = result.experts
            who = f"{name}: " if several else ""
            top = sorted(rep["weights"].items(), key=lambda kv: -kv[1])
            say(f"\n{who}aggregate: final weights ({len(top)} experts): "
                + ", ".join(f"{k} {w:.3f}" for k, w in top))
            for fam, sh in rep["family_share"].items():
                say(f"  {who}{'ABO' if fam == 'abo' else 'SW-KRLS'} share of the weight "
                    f"over the {rep['n_rows']} rows learned (mean per quarter): "
                    + ", ".join(f"{q:.2f}" for q in sh["quarters"])
                    + f"; final {sh['final']:.2f}")
        # the future: the next h values after the data, with their intervals
        step = _time_step(data.times)
        if step is None and continuing and header.get("time_step") and \
                data.times is not None and len(data.times):
            step = _parse_step(header["time_step"])
        if data.future_times is not None and len(data.future_times) >= h:
            future_times = data.future_times[:h]
        elif step is not None:
            future_times = data.times[-1] + step * np.arange(1, h + 1)
        else:
            future_times = None
        levels = settings["levels"]
        future_docs = {}
        for name, result in results.items():
            fut = result.future
            first_position = time_offset + data.series[name].shape[0]
            future_docs[name] = {
                "first_position": first_position,
                "times": None if future_times is None else [str(t) for t in future_times],
                "forecast": fut["forecast"].tolist(),
                "intervals": {f"{level:g}": fut["intervals"][:, j, :].tolist()
                              for j, level in enumerate(levels)},
                "empirical_coverage": {f"{level:g}": c
                                       for level, c in zip(levels, fut["coverage"])},
                "n_calibration": fut["n_calibration"],
                "n_learned": fut["n_learned"],
            }
        after = (f"after {data.times[-1]}" + (f" (step {_ts.spacing_text(step)})" if step
                                              is not None else "")
                 if data.times is not None and len(data.times) else
                 f"after position {time_offset + n_values - 1}")
        say(f"\nfuture: the next {h} value{'s' * (h > 1)} {after}, by the same "
            f"StreamForecaster (direct, {h} target{'s' * (h > 1)} per row), which "
            + ("continued the saved stream" if continuing else "learned the whole series")
            + "; intervals: adaptive conformal (ACI) from its own prequential residuals")
        for name, result in results.items():
            fut, doc = result.future, future_docs[name]
            who = f"{name}: " if several else ""
            for k in sorted({0, h - 1}):
                when = (f"{doc['times'][k]}" if doc["times"] else
                        f"position {doc['first_position'] + k}")
                bands = ", ".join(
                    f"{level:g} % [{_value(fut['intervals'][k, j, 0], '{:.6g}')}, "
                    f"{_value(fut['intervals'][k, j, 1], '{:.6g}')}]"
                    for j, level in enumerate(levels))
                say(f"  {who}step {k + 1} ({when}): {_value(fut['forecast'][k], '{:.6g}')}{u1}; "
                    f"{bands}")
            cov = ", ".join(f"{level:g} %: " + ("n/a" if c is None else f"{100 * c:.1f} %")
                            for level, c in zip(levels, fut["coverage"]))
            say(f"  {who}coverage of the step-{h} intervals over the {doc['n_calibration']} "
                f"values they were issued for while learning: {cov}")
            if not np.all(np.isfinite(fut["intervals"])):
                notes.append(f"{who}some intervals of the future forecast are not defined "
                             "yet (too few residuals for their level): a longer series or "
                             "a larger --calibration")
        if n_warn:
            notes.append(f"{n_warn} warning(s) during the run; first: {first_warning}")
        for note in notes:
            say(f"note: {note}")
        files = {}
        if args.save_model is not None:
            last_times = data.times if data.times is not None and len(data.times) else None
            _save_model(args.save_model, {
                "format": _MODEL_FORMATS[0], "format_version": _MODEL_FORMAT_VERSION,
                "package_version": __version__, "state_format": STATE_FORMAT,
                "settings": settings, "series": names,
                "exog": list(data.exog_names[:args.n_exog]),
                "exog_future": list(data.exog_names[args.n_exog:]),
                "n_inputs": args.n_lags * (1 + args.n_exog) + args.n_future_exog,
                "skip": int(skip), "season": None if season is None else int(season),
                "source_kind": "csv" if args.csv is not None else "dataset",
                "last_time": None if last_times is None else str(last_times[-1]),
                "time_step": None if step is None else str(step.astype("timedelta64[s]")),
                "time_column": data.time_column,
            }, {name: o[1] for name, o in zip(names, outcomes)})
            say(f"model: {args.save_model}")
            files["model"] = args.save_model
        per_series = {}
        if not args.no_save:
            times = data.times
            plot_times = times if _increasing(times) else None
            plot_last = args.plot_last
            if plot_last is None:
                week = np.timedelta64(7, "D")
                plot_last = (int(max(2, week // step)) if step is not None
                             and step > np.timedelta64(0) else 336)
            for name, result in results.items():
                full = name if args.csv is None else f"{data.source}:{name}"
                csv_path, png_path, future_path = outputs[name]
                _write_predictions(csv_path, result, times, time_offset)
                say(f"predictions: {csv_path}")
                _write_future(future_path, result.future, future_times, levels,
                              future_docs[name]["first_position"])
                say(f"future forecast: {future_path}")
                per_series[name] = {"predictions": csv_path, "future": future_path}
                if args.no_plot:
                    continue
                k = result.index - time_offset
                fut = result.future
                with _replacing(png_path) as tmp:
                    drawn = ex.plot_forecast(
                        result, tmp,
                        title=f"{data.description if not several else full}\n{args.model}, "
                              f"{ahead} ahead, last {plot_last} values and the next "
                              + ("one " if h == 1 else f"{h} ") +
                              f"(ResMSE {result.res_mse:.4g}; persistence "
                              f"{result.persistence_mse:.4g})",
                        times=None if plot_times is None else plot_times[k],
                        rolling=args.rolling, last=plot_last, units=units,
                        horizon=h,
                        future={"x": (None if plot_times is None or future_times is None
                                      else future_times),
                                "forecast": fut["forecast"], "levels": levels,
                                "intervals": fut["intervals"]},
                    )
                say(f"figure: {png_path}" if drawn else
                    "figure: not drawn (matplotlib is not installed)")
                if drawn:
                    per_series[name]["figure"] = png_path
        if as_json:
            for r in reports:
                r.update(per_series.get(r["name"], {}))
                r["future"] = future_docs[r["name"]]
                if results[r["name"]].experts is not None:
                    r["aggregate"] = results[r["name"]].experts
            doc = {
                "command": "forecast", "version": __version__, "source": data.source,
                "description": data.description, "units": units,
                "continued_from": args.load_model,
                "settings": {**settings, "exog": list(data.exog_names[:args.n_exog]),
                             "exog_future": list(data.exog_names[args.n_exog:]),
                             "time_column": data.time_column, "season": season,
                             "season_from": season_how if season else None, "skip": skip,
                             "n_jobs": args.n_jobs, "backend": args.backend or (
                                 "dask" if args.scheduler else None)},
                "series": reports,
                "aggregate": _aggregate(reports),
                "tuning": tuning,
                "notes": notes, "files": files,
            }
            print(json.dumps(_jsonable(doc), allow_nan=False), file=out)  # ASCII: any terminal
        return 0


def _machine(threads_ctx_describe):
    return (f"{platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
            f"BLAS: {threads_ctx_describe()}")


def _benchmark(args, out):
    max_log2 = args.max_log2_d or (10 if args.quick else 14)
    dims = [2**k for k in range(1, max_log2 + 1)]
    repeat = 2 if args.quick else 3
    ctx, describe = ex.blas_threads(args.threads)
    with ctx:
        print(f"# {_machine(describe)}", file=out)
        print(f"# ABO Table 5 setting: N=20, 7 lags, {args.steps} predict+update steps, "
              f"best of {repeat}; ms per 1000 steps", file=out)
        rows = ex.speed_sweep(dims, n_steps=args.steps, repeat=repeat,
                              one_row=not args.no_one_row, quiet=args.quiet)
    scale = 1000.0 / args.steps
    print(f"{'D':>6} {'chunked':>10} {'one-row':>10} {'C++':>10} {'C++/chunked':>12}",
          file=out)
    for r in rows:
        print(f"{r['D']:>6} {r['chunked_ms'] * scale:10.2f} {r['one_row_ms'] * scale:10.2f}"
              f" {r['cpp_ms']:10.2f} {r['cpp_ms'] / (r['chunked_ms'] * scale):12.2f}",
              file=out)
    print("# chunked: one prequential_predict call (features included); one-row: "
          "transform_one + predict_one + learn_one; C++: the ABO authors' figures "
          "(i7-1370P, one thread)", file=out)
    return 0


def _double_descent(args, out):
    n_updates = args.n_updates or (2000 if args.quick else 10_000)
    max_log2 = args.max_log2_d or (11 if args.quick else 14)
    window = 20
    dims = sorted({2**k for k in range(1, max_log2 + 1)} | {window})
    if not args.no_plot:
        _check_output_dir(args.output_dir)
    ctx, describe = ex.blas_threads(args.threads)
    with ctx:
        print(f"# {_machine(describe)}", file=out)
        print(f"# ABO synthetic series, {n_updates} prequential updates, N={window}, "
              f"7 lags, σ=1, seed {args.random_state}", file=out)
        rows, identity = ex.double_descent_sweep(
            dims, n_updates=n_updates, window_size=window,
            random_state=args.random_state, quiet=args.quiet)
    print(f"{'λ':>5} {'D':>6} {'test mean':>11} {'test var':>11} {'κ median':>10} "
          f"{'µs/update':>10}", file=out)
    for r in rows:
        mark = "  <- D = N" if r["D"] == window else ""
        print(f"{r['lambda']:>5} {r['D']:>6} {r['test_mean']:11.4g} {r['test_var']:11.4g} "
              f"{r['kappa_median']:10.3g} {r['us_per_update']:10.1f}{mark}", file=out)
    if np.isfinite(identity):
        print(f"λ identity for D > N: max relative |ŷ(λ=1) − ŷ(λ=0.9)| = {identity:.2e}",
              file=out)
    if not args.no_plot:
        name = "double_descent_quick.png" if args.quick else "double_descent.png"
        path = os.path.join(args.output_dir, name)
        with _replacing(path) as tmp:
            drawn = ex.plot_double_descent(rows, tmp, window_size=window)
        print(f"figure: {path}" if drawn else
              "figure: not drawn (matplotlib is not installed)", file=out)
    return 0


_RUN = {"forecast": _forecast, "benchmark": _benchmark, "double-descent": _double_descent}
