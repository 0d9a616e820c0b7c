"""dnnperf: explain the gap between a device's quoted TOP/s and a network's real speed.

Counting convention used everywhere in this package:
1 MAC = one multiply + one add = 2 ops; TOP/s counts ops (10**12 ops per second).
Times are seconds, sizes are bytes, rates are ops/s or bytes/s unless a name says otherwise.
"""

__version__ = "0.1.0"

CONVENTION = "1 MAC = 1 multiply + 1 add = 2 ops; TOP/s = 10^12 ops/s"
