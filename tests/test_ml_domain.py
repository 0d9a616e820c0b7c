"""The ai.onnx.ml domain as scikit-learn's exporter (skl2onnx) writes it: an input [None, C] whose batch
dim has neither a value nor a name, and classifiers / regressors whose outputs ONNX's inference leaves
without dims. Both used to end the analysis: the anonymous batch was refused, and with --batch 1 every
node was unscored (a random forest: 0 of 3 nodes). Expected figures are counted by hand from the
module docstring of dnnperf.ops.ml."""

import os

import pytest
from onnx import TensorProto as T
from onnx import helper

from dnnperf.api import inspect_model
from dnnperf.ir import ShapeOverrides
from helpers import ROOT, ints, model, save

ML = (("ai.onnx.ml", 3),)


def _anonymous_batch(name, cols):
    v = helper.make_tensor_value_info(name, T.FLOAT, [None, cols])
    d = v.type.tensor_type.shape.dim[0]
    assert not d.HasField("dim_param") and not d.HasField("dim_value")
    return v


def _layer(insp, op):
    return next(r for r in insp.rows if r.node.op_type == op)


def test_a_tree_ensemble_from_skl2onnx_is_scored_per_sample(tmp_path):
    # two trees of 3 nodes (a root and two leaves): ceil(log2(4)) = 2 levels each, 4 ops a level,
    # plus one addition per tree into the single target: 1 x (4 x (2 + 2) + 2 x 1) = 18 ops a sample
    path = _forest_model(tmp_path)
    insp = inspect_model(path)
    assert insp.coverage()["complete"], insp.warnings
    assert any("X[0]='?' unresolved: assumed 1" in n for n in insp.warnings), insp.warnings
    trees = _layer(insp, "TreeEnsembleRegressor")
    assert trees.workload.family == "host" and trees.workload.other_ops == 18
    assert insp.graph.tensors["Y"].shape == (1, 1)
    eight = inspect_model(path, ShapeOverrides(batch=8))
    assert _layer(eight, "TreeEnsembleRegressor").workload.other_ops == 8 * 18
    assert eight.graph.tensors["Y"].shape == (8, 1)


def test_a_linear_classifier_and_feature_extractor_get_their_outputs(tmp_path):
    # 3 classes over 4 features: labels [N] int64, scores [N, 3]; the product is N x 3 x 4 = 12 N MACs,
    # then one op per score (3 N).
    # ArrayFeatureExtractor picks 2 of the 3 score columns: [N, 2]
    lin = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml", name="lin",
                           classlabels_ints=[0, 1, 2], coefficients=[0.1] * 12, intercepts=[0.0] * 3)
    pick = helper.make_node("ArrayFeatureExtractor", ["scores", "idx"], ["picked"], domain="ai.onnx.ml", name="pick")
    outs = [helper.make_tensor_value_info("label", T.INT64, None), helper.make_tensor_value_info("picked", T.FLOAT, None)]
    path = save(model([lin, pick], [_anonymous_batch("X", 4)], outs, [ints("idx", [0, 2])], extra_opsets=ML), tmp_path)
    insp = inspect_model(path, ShapeOverrides(batch=5))
    assert insp.coverage()["complete"], insp.warnings
    t = insp.graph.tensors
    assert (t["label"].shape, t["label"].dtype) == ((5,), "int64")
    assert (t["scores"].shape, t["scores"].dtype) == ((5, 3), "float32")
    assert t["picked"].shape == (5, 2)
    lin = _layer(insp, "LinearClassifier").workload
    assert (lin.macs, lin.other_ops) == (5 * 12, 5 * 3)  # and one post-transform op per score
    # its parameters are attributes, read whole for every inference: 12 coefficients + 3 intercepts
    # of 4 bytes are its weights (they were 0 B), once for the batch
    assert lin.weight_bytes == (12 + 3) * 4


def test_an_svms_support_vectors_are_its_weights(tmp_path):
    # 3 support vectors of 4 features (12 floats), 2 classes: (2 - 1) x 3 dual coefficients and one rho,
    # all read for every inference; 4 bytes each: (12 + 3 + 1) x 4 = 64 B
    svm = helper.make_node("SVMClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml", name="svm",
                           classlabels_ints=[0, 1], vectors_per_class=[2, 1], support_vectors=[0.5] * 12,
                           coefficients=[1.0] * 3, rho=[0.1], kernel_type="RBF", kernel_params=[0.1, 0.0, 3.0])
    outs = [helper.make_tensor_value_info("label", T.INT64, None), helper.make_tensor_value_info("scores", T.FLOAT, None)]
    insp = inspect_model(save(model([svm], [_anonymous_batch("X", 4)], outs, extra_opsets=ML), tmp_path))
    w = _layer(insp, "SVMClassifier").workload
    assert w.weight_bytes == (12 + 3 + 1) * 4
    # ONNX Runtime evaluates each row's 3 kernels of 4 terms in a scalar loop (0.50 ns a term on a 2-core
    # EPYC VM, an RBF SVR of 499 vectors x 30 features: 32 ms at 4,096 rows against 0.59 estimated from
    # its ops): a loop step a term, 12 a row; without a calibrated figure a note marks the estimate
    assert (w.kernel, w.loop_items) == ("SVM.term", 12)
    from dnnperf.api import analyze
    from dnnperf.hardware import load_profile
    from dnnperf.scoring import Settings

    rep = analyze(insp, load_profile("cpu-avx2"), Settings())
    assert any(n.startswith("1 SVM(s) with support vectors (svm) costed at cpu-avx2's op rate, an assumption")
               for n in rep.notes)


def _forest_model(tmp_path):
    # two trees of 3 nodes: 2 levels each, 4 levels a row (as in the first test)
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", name="trees", n_targets=1,
        nodes_treeids=[0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 0, 1, 2],
        nodes_featureids=[0, 0, 0, 3, 0, 0], nodes_values=[0.5, 0, 0, 1.5, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"] * 2, nodes_truenodeids=[1, 0, 0, 1, 0, 0],
        nodes_falsenodeids=[2, 0, 0, 2, 0, 0], target_treeids=[0, 0, 1, 1], target_nodeids=[1, 2, 1, 2],
        target_ids=[0, 0, 0, 0], target_weights=[1.0, 2.0, 3.0, 4.0])
    return save(model([node], [_anonymous_batch("X", 4)], [helper.make_tensor_value_info("Y", T.FLOAT, None)],
                      extra_opsets=ML), tmp_path, "forest.onnx")


def test_a_calibrated_cpu_times_a_forest_by_its_levels(tmp_path):
    """Each level of a row's walk down a tree waits for the one before: ONNX Runtime took 2.1-4.5 ns a
    level (2-core EPYC VM, 4,096 rows) where the ops at the calibrated rate said ~0.02, so scikit-learn
    forests came out 50-150x fast (a 100-tree random forest: 82 us against 11.7 ms). A profile with
    loop_ns 'TreeEnsemble.level' prices the levels: 1,000 rows x 4 levels x 3 ns = 12 us, after the
    profile's 2 us dispatch: 14 us. Without the figure, a note says the estimate is an assumption."""
    import yaml

    from dnnperf.api import analyze
    from dnnperf.hardware import load_profile
    from dnnperf.scoring import Settings

    insp = inspect_model(_forest_model(tmp_path), ShapeOverrides(batch=1000))
    assert _layer(insp, "TreeEnsembleRegressor").workload.loop_items == 1000 * 4
    d = yaml.safe_load(open(os.path.join(ROOT, "profiles", "cpu-avx2.yaml")))
    d.update(name="cal", loop_ns={"TreeEnsemble.level": 3}, launch_overhead_us=2)
    d["memory"]["bandwidth_curve"] = {1: 400, 1000: 200}
    p = tmp_path / "cal.yaml"
    p.write_text(yaml.safe_dump(d))
    rep = analyze(insp, load_profile(str(p)), Settings(batch=1000))
    assert rep.score.layers[0].time_s == pytest.approx(2e-6 + 1000 * 4 * 3e-9, rel=1e-6)
    assert not any("tree ensemble" in n for n in rep.notes)
    bare = analyze(insp, load_profile("cpu-avx2"), Settings(batch=1000))
    assert bare.score.layers[0].time_s < 0.5 * rep.score.layers[0].time_s
    assert any(n.startswith("1 tree ensemble(s) (trees) costed at cpu-avx2's op rate, an assumption") for n in bare.notes)


def test_a_zipmap_is_said_to_be_costed_below_its_maps(tmp_path):
    """skl2onnx ends a classifier with ZipMap by default: a map per row, ~20 ns an entry under ONNX
    Runtime (a 10-class forest at 4,096 rows: 818 us measured, 2.2 us estimated from its ops on a
    calibrated 2-core VM). Its estimate is marked as an assumption, with the converter's way out."""
    from dnnperf.api import analyze
    from dnnperf.hardware import load_profile
    from dnnperf.scoring import Settings

    lin = helper.make_node("LinearClassifier", ["X"], ["label", "scores"], domain="ai.onnx.ml", name="lin",
                           classlabels_ints=[0, 1, 2], coefficients=[0.1] * 12, intercepts=[0.0] * 3)
    zm = helper.make_node("ZipMap", ["scores"], ["probs"], domain="ai.onnx.ml", name="zm", classlabels_int64s=[0, 1, 2])
    seq = helper.make_value_info("probs", helper.make_sequence_type_proto(
        helper.make_map_type_proto(T.INT64, helper.make_tensor_type_proto(T.FLOAT, []))))
    path = save(model([lin, zm], [_anonymous_batch("X", 4)], [helper.make_tensor_value_info("label", T.INT64, None), seq],
                      extra_opsets=ML), tmp_path)
    insp = inspect_model(path, ShapeOverrides(batch=64))
    assert insp.coverage()["complete"], insp.warnings
    rep = analyze(insp, load_profile("cpu-avx2"), Settings(batch=64))
    zip_notes = [n for n in rep.notes if n.startswith("1 ZipMap(s) (zm) costed at their op rate, an assumption")]
    assert len(zip_notes) == 1 and "options={'zipmap': False}" in zip_notes[0]
    assert not any("tree ensemble" in n for n in rep.notes)  # no forest here
