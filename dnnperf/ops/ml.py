"""The ai.onnx.ml domain (classical ML: trees, linear and kernel models, encoders), run on the host.

Shapes: ONNX's inference leaves most of these outputs without dims once the batch is symbolic (a
skl2onnx export declares its input [None, C]), so each op has a rule here, from the spec: X is [N, C]
or [C] (one sample); a classifier's labels are [N] and its scores [N, E] (E classes, from its class
labels); a regressor's outputs [N, targets]; the per-element transforms keep X's shape.

Costs (family ``host``; ops as in ``dnnperf.ops.extra``, a comparison or multiply-add 1 each):

- Tree ensembles: every sample walks each tree from the root to a leaf; a tree of n nodes is taken
  as balanced, ceil(log2(n + 1)) levels, at 4 ops a level (load the feature, compare, pick the child,
  follow it); then one addition per tree and output (the leaf's weight into the sum). Those ops are
  not what sets the time: each level waits for the one before (the next node's address comes from
  this comparison), so ONNX Runtime takes several nanoseconds a level where the ops alone say well
  under one. A calibrated CPU profile times a level (``loop_ns`` 'TreeEnsemble.level'); without that
  figure the estimate is the ops' and a note says it is an assumption.
- LinearClassifier / LinearRegressor: the product X x coefficients, N x C x E multiply-adds, and one
  op per score for the post-transform.
- SVMs: a kernel against every support vector (C multiply-adds each, plus 4 for the kernel
  function) and the per-class sums; a linear SVM without support vectors is the product above.
  ONNX Runtime evaluates the kernels' terms in a scalar loop (~0.5 ns a term on a 2-core x86 VM,
  tens of times the vector rate): a calibrated CPU times a term (``loop_ns`` 'SVM.term').
- Weights: the linear models' and SVMs' parameters live in attributes, not initializers, and are
  read whole for every inference: their bytes (4 per float) are the layer's weights. A tree
  ensemble's node tables are not: a sample reads only the nodes on its paths.
- The rest (scalers, encoders, feature extraction, ZipMap): 4 ops per element read, each element
  an independent item of work. ZipMap builds a map per row (an allocation an entry: ~20 ns under
  ONNX Runtime), far more than that: ``unpriced_notes`` says so where a model has one.
"""

from __future__ import annotations

from dataclasses import replace
from math import ceil, log2, prod

from dnnperf.ops import Contradiction, Ctx, register, register_shapes

_F32 = "float32"


def _rows(x) -> int:
    """N of an input [N, C] (or 1 for a single sample [C])."""
    return int(x[0]) if x is not None and len(x) >= 2 else 1


def _cols(x) -> int:
    return int(x[-1]) if x else 1


def _labels(a: dict) -> tuple[int, str]:
    """(classes, label dtype) from a classifier's class-label attribute."""
    for name, dtype in (("classlabels_ints", "int64"), ("classlabels_int64s", "int64"),
                        ("classlabels_strings", "string")):
        if a.get(name):
            return len(a[name]), dtype
    return 0, "int64"


def _first(ins):
    return ins[0][0] if ins and ins[0] is not None and ins[0][0] is not None else None


def _classifier_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    if x is None:
        return []
    e, ldtype = _labels(a)
    if not e:
        e = max(1, len(a.get("intercepts") or a.get("rho") or ()))
    n = _rows(x)
    return [((n,), ldtype), ((n, e), _F32)][:n_out]


def _regressor_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    if x is None:
        return []
    targets = int(a.get("n_targets") or a.get("targets") or 1)
    return [((_rows(x), targets), ins[0][1] if "tree_roots" in a else _F32)]


def _same_shape(dtype: str | None = None):
    def rule(a: dict, ins: list, n_out: int) -> list:
        x = _first(ins)
        return [] if x is None else [(tuple(x), dtype or ins[0][1])]
    return rule


def _label_encoder_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    for name, dtype in (("values_int64s", "int64"), ("values_strings", "string"), ("values_floats", _F32)):
        if x is not None and name in a:
            return [(tuple(x), dtype)]
    return []  # values given as a tensor: its dtype is not read here


def _category_mapper_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    return [] if x is None else [(tuple(x), "int64" if ins[0][1] == "string" else "string")]


def _array_feature_extractor_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    idx = ins[1][0] if len(ins) > 1 and ins[1] is not None else None
    if x is None or idx is None:
        return []
    k = int(prod(idx)) if idx else 1
    return [((1, k) if len(x) == 1 else tuple(x[:-1]) + (k,), ins[0][1])]


def _one_hot_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    cats = a.get("cats_int64s") or a.get("cats_strings") or ()
    return [] if x is None or not cats else [(tuple(x) + (len(cats),), _F32)]


def _feature_vectorizer_shape(a: dict, ins: list, n_out: int) -> list:
    x = _first(ins)
    dims = a.get("inputdimensions")
    return [] if x is None or not dims else [((_rows(x), int(sum(dims))), _F32)]


def _ml_host(ctx: Ctx, other: int, macs: int = 0, parallel: int | None = None, **kw):
    return ctx.workload("host", macs=macs, other=other, dtype=_F32 if ctx.dtype(0) == "string" else None,
                        parallel=parallel, **kw)


def _tree_levels(a: dict) -> int:
    """Levels walked per sample over all trees (each tree balanced: ceil(log2(nodes + 1)))."""
    ids = a.get("nodes_treeids")
    if ids:
        per_tree: dict = {}
        for t in ids:
            per_tree[t] = per_tree.get(t, 0) + 1
        return sum(ceil(log2(n + 1)) for n in per_tree.values())
    roots = a.get("tree_roots") or ()  # TreeEnsemble (ai.onnx.ml 5): nodes in flat tensors
    nodes = len(a.get("nodes_featureids") or ())
    if not roots:
        return 1
    return len(roots) * ceil(log2(nodes / len(roots) + 1))


def tree_ensemble(ctx: Ctx):
    a = ctx.node.attrs
    if ctx.node.op_type == "TreeEnsemble" and len(ctx.in_shape(0)) != 2:  # (ai.onnx.ml 5: samples x features)
        raise Contradiction(f"its input has rank {len(ctx.in_shape(0))} where TreeEnsemble takes a 2-D one")
    n = _rows(ctx.in_shape(0))
    trees = len(set(a.get("nodes_treeids") or ())) or len(a.get("tree_roots") or ()) or 1
    outputs = max((ctx.out_numel(i) for i, o in enumerate(ctx.node.outputs) if o), default=0) // max(1, n)
    levels = _tree_levels(a)
    # each level is a step of a dependent chain (the next node's address comes from this one's
    # comparison): a calibrated CPU times the step itself (loop_ns 'TreeEnsemble.level')
    return _ml_host(ctx, other=n * (4 * levels + trees * max(1, outputs)), kernel="TreeEnsemble.level",
                    loop_items=n * levels)


def _parameters(a: dict, names: tuple) -> int:
    """Bytes of the float parameters a model keeps in its attributes and reads whole for every
    inference (4 bytes each: the spec types them float): its weights, although no initializer
    holds them."""
    return 4 * sum(len(a.get(k) or ()) for k in names)


_LINEAR_PARAMETERS = ("coefficients", "intercepts")
_SVM_PARAMETERS = ("support_vectors", "coefficients", "rho", "prob_a", "prob_b")


def linear_model(ctx: Ctx):
    x = ctx.in_shape(0)
    n, c = _rows(x), _cols(x)
    coef = len(ctx.node.attrs.get("coefficients") or ())
    w = _ml_host(ctx, other=n * max(1, coef // max(1, c)), macs=n * max(coef, c))  # (+ a post-transform per score)
    return replace(w, weight_bytes=w.weight_bytes + _parameters(ctx.node.attrs, _LINEAR_PARAMETERS))


def svm(ctx: Ctx):
    a = ctx.node.attrs
    x = ctx.in_shape(0)
    n, c = _rows(x), _cols(x)
    sv = len(a.get("support_vectors") or ())
    if sv:  # a kernel per support vector, then the per-class sums over the support vectors
        n_sv = sv // max(1, c)
        # each kernel's C terms are a scalar loop in ONNX Runtime: a calibrated CPU times a term
        # (loop_ns 'SVM.term')
        w = _ml_host(ctx, macs=n * (sv + len(a.get("coefficients") or ())), other=n * 4 * n_sv, kernel="SVM.term",
                     loop_items=n * sv)
    else:
        w = _ml_host(ctx, macs=n * max(c, len(a.get("coefficients") or ())))
    return replace(w, weight_bytes=w.weight_bytes + _parameters(a, _SVM_PARAMETERS))


def per_element_read(ctx: Ctx):
    n = sum(ctx.in_numel(i) for i, name in enumerate(ctx.node.inputs) if name)
    # every element is handled on its own: as many independent items as elements read (ZipMap's
    # output, a sequence of N maps, counts as one tensor and would make the op one serial item)
    return _ml_host(ctx, other=4 * max(n, 1), parallel=max(ctx.in_numel(0), 1))


_PER_ELEMENT = ("ArrayFeatureExtractor", "Binarizer", "CastMap", "CategoryMapper", "DictVectorizer",
                "FeatureVectorizer", "Imputer", "LabelEncoder", "Normalizer", "OneHotEncoder", "Scaler", "ZipMap")
register({f"ai.onnx.ml:{op}": per_element_read for op in _PER_ELEMENT})
register({
    "ai.onnx.ml:TreeEnsemble": tree_ensemble,
    "ai.onnx.ml:TreeEnsembleClassifier": tree_ensemble,
    "ai.onnx.ml:TreeEnsembleRegressor": tree_ensemble,
    "ai.onnx.ml:LinearClassifier": linear_model,
    "ai.onnx.ml:LinearRegressor": linear_model,
    "ai.onnx.ml:SVMClassifier": svm,
    "ai.onnx.ml:SVMRegressor": svm,
})
register_shapes({
    "ai.onnx.ml:TreeEnsembleClassifier": _classifier_shape,
    "ai.onnx.ml:LinearClassifier": _classifier_shape,
    "ai.onnx.ml:SVMClassifier": _classifier_shape,
    "ai.onnx.ml:TreeEnsembleRegressor": _regressor_shape,
    "ai.onnx.ml:TreeEnsemble": _regressor_shape,
    "ai.onnx.ml:LinearRegressor": _regressor_shape,
    "ai.onnx.ml:SVMRegressor": lambda a, ins, n: [] if _first(ins) is None else [((_rows(_first(ins)), 1), _F32)],
    "ai.onnx.ml:Scaler": _same_shape(_F32),
    "ai.onnx.ml:Normalizer": _same_shape(_F32),
    "ai.onnx.ml:Binarizer": _same_shape(),
    "ai.onnx.ml:Imputer": _same_shape(),
    "ai.onnx.ml:LabelEncoder": _label_encoder_shape,
    "ai.onnx.ml:CategoryMapper": _category_mapper_shape,
    "ai.onnx.ml:ArrayFeatureExtractor": _array_feature_extractor_shape,
    "ai.onnx.ml:OneHotEncoder": _one_hot_shape,
    "ai.onnx.ml:FeatureVectorizer": _feature_vectorizer_shape,
})


# loop kernels of this domain a calibrated CPU times: what each waits on, and the step calibrate times
_LOOPS = (("TreeEnsemble.level", "tree ensemble(s)", "each level of a row's walk down a tree waits for the one before "
           "(ONNX Runtime takes 2-5 ns a level on an x86 core)", "a level"),
          ("SVM.term", "SVM(s) with support vectors", "ONNX Runtime evaluates their kernels in a scalar loop (~0.5 ns "
           "a term on an x86 core)", "a term"))


def _named(names: list[str]) -> str:
    return f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"


def unpriced_notes(hw, layers) -> list[str]:
    """What the op counts above leave out, said where a model has it: a forest's levels and an SVM's
    terms on a profile that was not calibrated (``loop_ns``), and ZipMap's maps."""
    notes = []
    for kernel, what, why, step in _LOOPS:
        if hw.bandwidth_curve:  # a calibrated CPU: dnnperf.api names every loop figure its calibration lacks
            break
        found = [l.name for l in layers if l.workload.kernel == kernel and kernel not in hw.loop_ns]
        if found:
            notes.append(f"{len(found)} {what} {_named(found)} costed at {hw.name}'s op rate, an assumption: {why}, so at large "
                         f"batches they can take 10-100x the estimate; on a CPU, dnnperf calibrate times {step}")
    zipmaps = [l.name for l in layers if l.op_type == "ZipMap"]
    if zipmaps:
        notes.append(f"{len(zipmaps)} ZipMap(s) {_named(zipmaps)} costed at their op rate, an assumption: ZipMap builds a map for every "
                     "row (ONNX Runtime takes ~20 ns an entry on an x86 core, hundreds of times what its op count "
                     "says); converters can return the scores as a tensor instead (skl2onnx: options={'zipmap': False})")
    return notes
