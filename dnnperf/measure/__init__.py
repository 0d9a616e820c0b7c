"""Ground truth on this machine's CPU through ONNX Runtime (optional extra ``dnnperf[measure]``).

    ort        sessions, robust timing, runnable copies of skeletons, profiled runs
    micro      the micro-benchmark table (each entry with the ops and bytes it does)
    calibrate  timings -> a hardware profile
    validate   a model's measured kernels mapped back to dnnperf's layers, predicted vs measured
"""

from dnnperf.measure.calibrate import calibrate
from dnnperf.measure.micro import micro_models
from dnnperf.measure.ort import runnable_bytes
from dnnperf.measure.validate import map_kernels, validate

__all__ = ["calibrate", "micro_models", "runnable_bytes", "map_kernels", "validate"]
