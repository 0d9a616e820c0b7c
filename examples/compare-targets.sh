#!/usr/bin/env bash
# Compare hardware targets for one model from a shell script, using the stable JSON output.
# Usage: compare-targets.sh MODEL.onnx [PROFILES]   (PROFILES defaults to v100,t4,a100,tpu-v2)
# Exit codes follow dnnperf: 0 ok, 2 bad input.
set -euo pipefail
model="$1"
targets="${2:-v100,t4,a100,tpu-v2}"
DNNPERF="${DNNPERF:-dnnperf}"
json=$($DNNPERF compare "$model" --hw "$targets" --format json)
python3 - "$json" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
best = d["rows"][0]
for r in d["rows"]:
    print(f"{r['hardware']:<14} {r['latency_s'] * 1e3:9.3f} ms  {r['fraction_of_peak'] * 100:6.2f}% of peak  {r['top_cause']}")
print(f"fastest: {best['hardware']} ({best['latency_s'] * 1e3:.3f} ms)")
PY
