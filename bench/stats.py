"""The benchmarks' statistics (bench/compare, report.py): a median with a distribution-free
confidence interval from order statistics.

For n independent rounds, the interval between the k-th smallest and the k-th largest value holds
the true median with probability 1 - 2 * P(Binomial(n, 1/2) < k), whatever the distribution
(the sign test's interval). interval() takes the largest k whose coverage is at least 95%; with too
few rounds for 95% (n < 6) it is the whole range, and its coverage is said: 3 rounds cover 75%,
4 cover 87.5%, 5 cover 93.8%. Rounds are interleaved (A, B, A, B, ...), so a ratio's rounds each
see the host as it was then, and the ratio of each round is what goes in.
"""
import math
import statistics


def coverage(n, k):
    """P(the k-th smallest <= median <= the k-th largest) for n rounds."""
    below = sum(math.comb(n, i) for i in range(k)) / 2 ** n
    return 1 - 2 * below


def interval(values, level=0.95):
    """{median, low, high, rounds, coverage} of `values` (None when there are none)."""
    v = sorted(x for x in values if x is not None)
    n = len(v)
    if n == 0:
        return None
    k = 1
    while k + 1 <= n // 2 and coverage(n, k + 1) >= level:
        k += 1
    return {"median": statistics.median(v), "low": v[k - 1], "high": v[n - k], "rounds": n,
            "coverage": round(coverage(n, k), 4)}


def fmt(iv, digits=3):
    """"0.912 [0.899, 0.925] (5 rounds, 94%)"."""
    if not iv:
        return "-"
    return (f"{iv['median']:.{digits}f} [{iv['low']:.{digits}f}, {iv['high']:.{digits}f}] "
            f"({iv['rounds']} rounds, {iv['coverage'] * 100:.0f}%)")
