"""dnnperf command line: one module per command group, all registered on the app in ``cli.app``.

    app        the app, shared options, the command decorator (exit codes, -f/-o/-q), main()
    models     inspect, analyze, strip
    targets    compare, sweep
    gate       baseline, check
    design     lut, shapes, diff
    pictures   plot, report
    measure    calibrate, validate
    hw         hw list / show / schema
    llm        llm skeleton (LLM phases are analyze/sweep --phase)
"""

# registration order is the order of `dnnperf --help`: the pipeline first
from dnnperf.cli import models  # noqa: F401,I001
from dnnperf.cli import targets  # noqa: F401
from dnnperf.cli import gate  # noqa: F401
from dnnperf.cli import design  # noqa: F401
from dnnperf.cli import pictures  # noqa: F401
from dnnperf.cli import measure  # noqa: F401
from dnnperf.cli import hw  # noqa: F401
from dnnperf.cli import llm  # noqa: F401
from dnnperf.cli.app import app, main

__all__ = ["app", "main"]
