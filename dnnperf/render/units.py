"""Human formatting for renderers (shared with the fix texts): see dnnperf.fmt."""

from dnnperf.fmt import b, count, pct, shape, t

__all__ = ["b", "count", "pct", "shape", "t"]
