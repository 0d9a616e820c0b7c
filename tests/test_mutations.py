"""Mutation fuzz of every input a user hands the CLI: model files (bytes flipped, cut, inserted or
repeated; fields of the parsed model changed), profile YAML and baseline JSON (values replaced by
other types, keys dropped). Whatever the input, a command ends with exit 0, 1 or 2, never an
internal error (3) or a traceback, and an exit 2 is one line on stderr. Seeds are fixed, so a run is
repeatable; the default count is small for CI. For a longer session:

    DNNPERF_MUTATIONS=2000 python -m pytest tests/test_mutations.py

Each mutation kind here found at least one internal error before the fix it guards (a dim name that
is not UTF-8, a zero latency divided by, a baseline's dims given as a number, 0.5 SMs).
"""

import copy
import json
import os
import random

import onnx
import pytest
import yaml
from typer.testing import CliRunner

from dnnperf.cli import app
from helpers import SAMPLES

N = int(os.environ.get("DNNPERF_MUTATIONS", "40"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
runner = CliRunner()
ODD = [0, -1, 1, 0.5, 2.5, 1e30, -1e30, 10 ** 20, "x", "", None, [], {}, [1, 2], [[1, 2]], {"a": 1}, True]


def run_ok(args):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code in (0, 1, 2), (args, r.exit_code, r.output[-2000:])
    if r.exit_code == 2:
        err = r.stderr
        assert err.startswith("dnnperf: error: ") and err.count("\n") == 1 and "Traceback" not in err, (args, err)
    return r


def _paths(d, pre=()):
    if isinstance(d, dict):
        for k, v in d.items():
            yield pre + (k,)
            yield from _paths(v, pre + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield pre + (i,)
            yield from _paths(v, pre + (i,))


def mutate_tree(d, rng, times):
    """Replace a few values anywhere in a parsed YAML/JSON tree by values of other types, or drop keys."""
    d = copy.deepcopy(d)
    for _ in range(times):
        where = list(_paths(d))
        if not where:
            break
        p = rng.choice(where)
        parent = d
        for k in p[:-1]:
            parent = parent[k]
        if isinstance(parent, dict) and rng.random() < 0.2:
            del parent[p[-1]]
        else:
            parent[p[-1]] = copy.deepcopy(rng.choice(ODD))
    return d


def mutate_model(data: bytes, rng) -> bytes:
    kind = rng.choice(["flip", "cut", "insert", "repeat", "field"])
    b = bytearray(data)
    if kind == "flip":
        for _ in range(rng.randint(1, 20)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == "cut":
        b = b[:rng.randrange(len(b))]
    elif kind == "insert":
        i = rng.randrange(len(b))
        b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    elif kind == "repeat":
        i = rng.randrange(len(b))
        b[i:i] = b[i:i + rng.randint(1, 200)]
    else:
        m = onnx.load_from_string(data)
        g = m.graph
        node = rng.choice(g.node)
        what = rng.randrange(5)
        if what == 0:
            node.input[rng.randrange(len(node.input))] = rng.choice([o for n in g.node for o in n.output] + [""])
        elif what == 1:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.INTS and a.ints:
                    a.ints[rng.randrange(len(a.ints))] = rng.choice([0, -1, 2, 1000, 2 ** 40])
                elif a.type == onnx.AttributeProto.INT:
                    a.i = rng.choice([0, -1, 2, 1000, 2 ** 40])
        elif what == 2:
            node.op_type = rng.choice(["Conv", "MatMul", "Reshape", "NotAnOp", "Loop", "Split", "Resize"])
        elif what == 3 and g.initializer:
            init = rng.choice(g.initializer)
            if init.dims:
                init.dims[rng.randrange(len(init.dims))] = rng.choice([0, 1, 3, 2 ** 31])
        else:
            del g.node[rng.randrange(len(g.node))]
        b = bytearray(m.SerializeToString())
    return bytes(b)


MODELS = ["squeezenet1_1.onnx", "tiny_llama_genai.onnx", "tiny_llama_kv.onnx"]


@pytest.mark.parametrize("seed", range(N))
def test_mutated_models(tmp_path, seed):
    rng = random.Random(seed)
    name = MODELS[seed % len(MODELS)]
    with open(os.path.join(SAMPLES, name), "rb") as fh:
        data = fh.read()
    p = tmp_path / "m.onnx"
    p.write_bytes(mutate_model(data, rng))
    for args in (["analyze", p, "--hw", rng.choice(["v100", "cpu-avx2", "tpu-v4"]), "-f", "json", "-q"],
                 ["inspect", p, "-f", "csv", "-q"],
                 rng.choice([["shapes", p, "--hw", "t4", "-q"], ["lut", "--from", p, "--hw", "a100", "-q"],
                             ["diff", p, os.path.join(SAMPLES, name), "--hw", "v100", "-q"],
                             ["analyze", p, "--hw", "h100", "--phase", "decode", "--context", "16", "-q"]])):
        run_ok(args)


@pytest.mark.parametrize("seed", range(N))
def test_mutated_profiles(tmp_path, seed):
    rng = random.Random(1000 + seed)
    names = sorted(f for f in os.listdir(os.path.join(ROOT, "profiles")) if f.endswith(".yaml"))
    with open(os.path.join(ROOT, "profiles", names[seed % len(names)]), encoding="utf-8") as fh:
        d = yaml.safe_load(fh)
    p = tmp_path / "hw.yaml"
    p.write_text(yaml.safe_dump(mutate_tree(d, rng, rng.randint(1, 3))))
    squeeze = os.path.join(SAMPLES, "squeezenet1_1.onnx")
    run_ok(["analyze", squeeze, "--hw", p, "-f", "json", "-q"])
    run_ok(rng.choice([["sweep", squeeze, "--hw", p, "--batch", "1,8", "-q"], ["hw", "show", p],
                       ["compare", squeeze, "--hw", p, "--hw", "v100", "-q"], ["shapes", squeeze, "--hw", p, "-q"]]))


@pytest.mark.parametrize("seed", range(N))
def test_mutated_baselines(tmp_path, seed):
    rng = random.Random(2000 + seed)
    squeeze = os.path.join(SAMPLES, "squeezenet1_1.onnx")
    b = tmp_path / "b.json"
    r = run_ok(["baseline", squeeze, "--hw", "v100", "-o", b, "-q"])
    assert r.exit_code == 0
    text = json.dumps(mutate_tree(json.loads(b.read_text()), rng, rng.randint(1, 3)))
    b.write_text(text)
    r = run_ok(["check", squeeze, "--baseline", b, "-q", *rng.choice([[], ["-f", "json"], ["--update"]])])
    if r.exit_code == 2:
        assert b.read_text() == text  # a refused baseline is never rewritten


@pytest.fixture(scope="module")
def suite_models():
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [c.model for c in collect_testcases()]


def mutate_node_model(m, rng):
    """One of ONNX's node test models with an attribute, an input's dim or dtype, a node input or the
    opset changed (they cover every operator, so every cost function and shape rule is reached)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    g = out.graph
    node = rng.choice(g.node)
    what = rng.randrange(5)
    if what == 0 and node.attribute:
        a = rng.choice(node.attribute)
        if a.type == onnx.AttributeProto.INT:
            a.i = rng.choice([0, -1, 2, 7, 2 ** 31])
        elif a.type == onnx.AttributeProto.INTS and a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice([0, -1, 5, 2 ** 40])
        elif a.type == onnx.AttributeProto.STRING:
            a.s = rng.choice([b"", b"xyz", b"SAME_UPPER", b"VALID"])
    elif what == 1 and g.input and g.input[0].type.tensor_type.shape.dim:
        dims = g.input[0].type.tensor_type.shape.dim
        d = dims[rng.randrange(len(dims))]
        if rng.random() < 0.5:
            d.dim_value = rng.choice([0, 1, 2, 100000])
        else:
            d.dim_param = "S"
    elif what == 2 and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice([""] + list(node.input))
    elif what == 3 and g.input:
        rng.choice(g.input).type.tensor_type.elem_type = rng.choice([1, 10, 16, 7, 9, 11])
    else:
        out.opset_import[0].version = rng.choice([1, 7, 13, 21, 99])
    return out


@pytest.mark.parametrize("seed", range(N))
def test_mutated_node_test_models(tmp_path, seed, suite_models):
    """A segmentation fault in ONNX's own inference (a RegexFullMatch with an empty input name) and a
    sequence handle divided by its 0 bits under -p were found this way."""
    rng = random.Random(3000 + seed)
    p = tmp_path / "m.onnx"
    for m in rng.sample(suite_models, 10):
        p.write_bytes(mutate_node_model(m, rng).SerializeToString())
        run_ok(["analyze", p, "--hw", rng.choice(["v100", "cpu-avx2", "tpu-v4"]), "-p", rng.choice(["best", "fp16"]),
                "-q", "-f", "json"] if rng.random() < 0.3 else ["analyze", p, "--hw", "t4", "-q", "-f", "json"])


CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_corpus")


@pytest.mark.parametrize("name,args", [
    # each file is a fuzz find, kept with the command that failed on it (exit 3, a hang or a crash)
    ("resnet50_weight_dim_2e31.onnx", ["shapes", "--hw", "v100"]),  # ran for ever (2^31 widths)
    ("regexfullmatch_empty_input.onnx", ["analyze", "--hw", "cpu-avx2"]),  # segmentation fault in ONNX
    ("treeensemble_empty_input.onnx", ["analyze", "--hw", "cpu-avx2"]),  # the same, ai.onnx.ml
    ("layernorm_axis_2e31.onnx", ["analyze", "--hw", "v100"]),  # the same: an axis past the int32 range
    ("split_more_outputs_than_parts.onnx", ["analyze", "--hw", "t4"]),  # an assertion in ONNX aborted
    ("split_2e31_parts.onnx", ["analyze", "--hw", "t4"]),  # 51 s
    ("affine_grid_value_2e62.onnx", ["analyze", "--hw", "v100"]),  # a folded dim past int64 (exit 3)
    ("scan_2e31_scan_inputs.onnx", ["analyze", "--hw", "v100"]),  # a list of 2^31 axes (16 GB)
    ("scan_over_scalar.onnx", ["analyze", "--hw", "t4"]),  # modulo by zero
    ("rotary_fold_not_integers.onnx", ["analyze", "--hw", "v100"]),  # a fold without integers
    ("loop_sequence_handle.onnx", ["analyze", "--hw", "tpu-v4", "-p", "best"]),  # 0 bits divided by
    ("genai_input_name_not_utf8.onnx", ["analyze", "--hw", "v100", "--phase", "decode", "--context", "8"]),
])
def test_fuzz_corpus(name, args):
    path = os.path.join(CORPUS, name)
    r = run_ok([args[0], path, *args[1:], "-q"])
    assert r.exit_code in (0, 2)
