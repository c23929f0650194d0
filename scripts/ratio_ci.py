"""Ratios of paired rates with 95% intervals, for the measuring scripts in this folder.

A ratio is the geometric mean of per-round ratios (the rounds interleave the two sides, so
drift falls on both), with a Student t interval on their logs.
"""
import math
import statistics

# Two-sided 95% t quantiles, df 1..30 (df above 30 uses the last).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
       2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def log_ratio_ci(pairs):
    """(ratio, low, high, n) of a over b for pairs (a, b) of positive rates; the interval is
    infinite with fewer than two pairs."""
    d = [math.log(a / b) for a, b in pairs if a > 0 and b > 0]
    n = len(d)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = statistics.fmean(d)
    half = T95[min(n - 1, 30) - 1] * statistics.stdev(d) / math.sqrt(n) if n >= 2 else float("inf")
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), n
