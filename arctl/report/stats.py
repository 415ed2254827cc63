"""Mean and 95% confidence interval over seeds (Student t, two-sided)."""

from __future__ import annotations

import warnings

import numpy as np

# t_{0.975, df} for df = 1..30; beyond that the normal quantile is close enough
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    """Two-sided 95% Student-t quantile for ``df`` degrees of freedom (NaN for df < 1)."""
    if df < 1:
        return float("nan")
    return _T975[df - 1] if df <= len(_T975) else 1.96


def mean_ci95(samples, axis: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, half-width of the 95% CI, n) along ``axis`` ignoring NaN:
    half-width = t_{0.975, n-1} · s / √n, s the sample standard deviation; NaN where n < 2."""
    x = np.asarray(samples, dtype=float)
    n = np.sum(~np.isnan(x), axis=axis)
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(x, axis=axis)
        sd = np.nanstd(x, axis=axis, ddof=1)
    tq = np.array([t975(int(k) - 1) for k in np.ravel(n)], dtype=float).reshape(np.shape(n))
    half = np.where(n >= 2, tq * sd / np.sqrt(np.maximum(n, 1)), np.nan)
    return mean, half, n
