"""(Re)export the weightless skeletons in sample_models/.

Dev-only: needs torch==2.14.1, torchvision==0.29.1, transformers, onnx, onnxscript in a separate
venv (never a dependency of dnnperf):

    python -m venv .venv-export && .venv-export/bin/pip install torch==2.14.1 torchvision==0.29.1 \
        transformers onnx onnxscript && .venv-export/bin/pip install -e .
    .venv-export/bin/python scripts/export_sample_models.py
    .venv-export/bin/python scripts/export_sample_models.py --cpu-sets   # bench/models/cpu/ only
    .venv-export/bin/python scripts/export_sample_models.py --cpu-sets fresh   # one of its sets
    .venv-export/bin/python scripts/export_sample_models.py --unseen   # bench/models/unseen/ only
    .venv-export/bin/python scripts/export_sample_models.py --networks   # bench/models/networks/ only

Each model is exported with full random weights to a temporary file, then stripped with
``dnnperf strip`` logic (dims and dtypes kept, payloads removed). torchvision's published MAC
figures ("GFLOPS" in its docs, which count multiply-accumulates) are written to
sample_models/published.json for the tests.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch

try:
    import torchvision
except RuntimeError:  # a PyPI torchvision next to a CPU-only torch: its compiled ops do not load, and the
    # import fails while registering shape functions for two detection ops none of these models uses
    _lib = torch.library.Library("torchvision", "DEF")
    _lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "sample_models")
sys.path.insert(0, os.path.join(HERE, ".."))

from dnnperf.load.weights import strip_file  # noqa: E402

VISION = {
    "resnet50": {},
    "mobilenet_v2": {},
    "shufflenet_v2_x1_0": {},
    "squeezenet1_1": {},
    "vit_b_16": {},
    "swin_t": {},
}


# Models the sample set does not have, for the CPU accuracy benchmark (bench/cpu_unseen.py): "tune"
# models may be looked at while improving the CPU model, "held_out" ones never are.
CPU_SETS = {
    "tune": ["resnet18", "mobilenet_v3_large", "densenet121", "efficientnet_b0", "regnet_y_400mf", "mnasnet1_0"],
    "held_out": ["resnet34", "resnet101", "resnext50_32x4d", "wide_resnet50_2", "googlenet", "alexnet", "vgg11",
                 "mobilenet_v3_small", "shufflenet_v2_x0_5", "squeezenet1_0", "regnet_x_400mf", "efficientnet_b1",
                 "mnasnet0_5", "convnext_tiny"],
    # exported later, kept apart from both: no constant is fitted on them (bench/cpu_unseen.py --set
    # fresh; changes are checked on them next to the other sets)
    "fresh": ["inception_v3", "shufflenet_v2_x1_5", "regnet_x_800mf", "regnet_y_800mf", "mnasnet0_75", "densenet169",
              "vgg13_bn", "efficientnet_b2", "resnet152", "resnext101_32x8d", "efficientnet_v2_s", "convnext_small"],
}
CPU_OUT = os.path.join(HERE, "..", "bench", "models", "cpu")

# Architectures nothing was tuned on, for tests/test_unseen_models.py: detection (control flow,
# data-dependent sizes), segmentation (with the auxiliary head torchvision's count includes), video
# (3-D convolutions) and newer classifiers. name -> (constructor keywords, input shapes); a detector
# takes a list of one [3, H, W] image.
UNSEEN = {
    "regnet_y_1_6gf": ({}, [(1, 3, 224, 224)]),
    "efficientnet_v2_m": ({}, [(1, 3, 480, 480)]),
    "vit_l_32": ({}, [(1, 3, 224, 224)]),
    "maxvit_t": ({}, [(1, 3, 224, 224)]),
    "swin_v2_t": ({}, [(1, 3, 256, 256)]),
    "r3d_18": ({}, [(1, 3, 16, 112, 112)]),
    "r2plus1d_18": ({}, [(1, 3, 16, 112, 112)]),
    "s3d": ({}, [(1, 3, 16, 224, 224)]),
    "mvit_v2_s": ({}, [(1, 3, 16, 224, 224)]),  # tensor_split as a Loop filling a tensor sequence
    "mvit_v1_b": ({}, [(1, 3, 16, 224, 224)]),  # ... and If branches declared with stale sizes
    "fcn_resnet50": ({"aux_loss": True, "weights_backbone": None}, [(1, 3, 520, 520)]),
    "deeplabv3_mobilenet_v3_large": ({"aux_loss": True, "weights_backbone": None}, [(1, 3, 520, 520)]),
    "lraspp_mobilenet_v3_large": ({"weights_backbone": None}, [(1, 3, 520, 520)]),
    "ssdlite320_mobilenet_v3_large": ({"weights_backbone": None}, [[(3, 320, 320)]]),
    "retinanet_resnet50_fpn": ({"weights_backbone": None}, [[(3, 512, 512)]]),
    "fcos_resnet50_fpn": ({"weights_backbone": None}, [[(3, 512, 512)]]),
    "fasterrcnn_mobilenet_v3_large_320_fpn": ({"weights_backbone": None}, [[(3, 320, 320)]]),
    "maskrcnn_resnet50_fpn": ({"weights_backbone": None}, [[(3, 512, 512)]]),
}
UNSEEN_OUT = os.path.join(HERE, "..", "bench", "models", "unseen")


class _SEBottleneck(torchvision.models.resnet.Bottleneck):
    """DeepLearningExamples' SE bottleneck (image_classification/models/resnet.py, common.py): the
    bottleneck's output scaled per channel by a squeeze-excite branch (global average pool, a 1 x 1
    convolution to 16 channels, ReLU, a 1 x 1 convolution back, sigmoid) and added to the shortcut in one
    torch.addcmul, then ReLU."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        c = self.conv3.out_channels
        self.se = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Conv2d(c, 16, 1), torch.nn.ReLU(inplace=True),
                                      torch.nn.Conv2d(16, c, 1), torch.nn.Sigmoid())

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(torch.addcmul(identity, out, self.se(out), value=1))


# Architectures a published whole-network table (bench/data/networks-published.json) times that
# torchvision does not ship under that name, built from its classes: name -> constructor.
NETWORKS = {
    # DeepLearningExamples' ResNeXt101-32x4d: ResNet-101's bottleneck layout [3, 4, 23, 3] with 3 x 3
    # convolutions in 32 groups of 4 channels per group at the first stage (its README's config:
    # cardinality 32, widths 128 / 256 / 512 / 1024, expansion 2), what torchvision's ResNet builds
    # with groups=32, width_per_group=4
    "resnext101_32x4d": lambda: torchvision.models.resnet.ResNet(torchvision.models.resnet.Bottleneck, [3, 4, 23, 3],
                                                                 groups=32, width_per_group=4),
    # its SE-ResNeXt101-32x4d: the same with _SEBottleneck (se_squeeze 16: 16 channels in the branch)
    "se_resnext101_32x4d": lambda: torchvision.models.resnet.ResNet(_SEBottleneck, [3, 4, 23, 3], groups=32,
                                                                    width_per_group=4),
}
NETWORKS_OUT = os.path.join(HERE, "..", "bench", "models", "networks")
# torchvision classifiers a published table times (bench/data/torch2trt-jetson-published.json) that no other
# model folder holds, exported as torchvision ships them
NETWORKS_TORCHVISION = ("densenet161", "densenet201", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg16_bn", "vgg19_bn",
                        "shufflenet_v2_x2_0", "mnasnet1_3")


def export_networks() -> None:
    """NETWORKS into bench/models/networks/ (dynamic batch, as the vision samples), then BERT-Large and the
    torchvision classifiers of NETWORKS_TORCHVISION."""
    os.makedirs(NETWORKS_OUT, exist_ok=True)
    for name, build in NETWORKS.items():
        model = build().eval()
        with tempfile.TemporaryDirectory() as tmp:
            full = os.path.join(tmp, f"{name}.onnx")
            torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), full, opset_version=17, dynamo=False,
                              input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "batch_size"}, "logits": {0: "batch_size"}})
            info = strip_file(full, os.path.join(NETWORKS_OUT, f"{name}.onnx"), drop_metadata=True)
        print(name, info)
    export_bert_large()
    for name in NETWORKS_TORCHVISION:
        export_vision(name, {}, {}, NETWORKS_OUT)


def export_vision(name: str, kwargs: dict, published: dict, out: str = OUT) -> None:
    model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
    meta = torchvision.models.get_model_weights(name).DEFAULT.meta
    published[name] = {"gmacs": meta["_ops"], "params": meta["num_params"], "source": "torchvision weights meta (_ops)"}
    size = {"inception_v3": 299, "efficientnet_b1": 240, "efficientnet_b2": 288, "efficientnet_v2_s": 384}.get(name, 224)  # the resolution _ops is counted at
    x = torch.randn(1, 3, size, size)
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, f"{name}.onnx")
        torch.onnx.export(model, (x,), full, opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch_size"}, "logits": {0: "batch_size"}})
        info = strip_file(full, os.path.join(out, f"{name}.onnx"), drop_metadata=True)
    print(name, info)


def export_gpt2(published: dict) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(use_cache=False)
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    batch = torch.export.Dim("batch_size", min=1, max=1024)
    seq = torch.export.Dim("sequence_length", min=2, max=1024)
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, "gpt2.onnx")
        torch.onnx.export(model, (ids,), full, dynamo=True, input_names=["input_ids"],
                          output_names=["logits"], dynamic_shapes={"input_ids": {0: batch, 1: seq}},
                          external_data=False)
        info = strip_file(full, os.path.join(OUT, "gpt2.onnx"), drop_metadata=True)
    n_params = sum(p.numel() for p in model.parameters())
    published["gpt2"] = {"params": n_params, "source": "transformers GPT2Config() defaults"}
    print("gpt2", info)


def _export_bert(cfg, path: str) -> int:
    """A transformers BertModel of ``cfg`` (eager attention) exported with dynamic batch and sequence
    length and stripped to ``path``; returns its parameter count."""
    from transformers import BertModel

    cfg._attn_implementation = "eager"
    model = BertModel(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128))
    mask = torch.ones(1, 128, dtype=torch.long)
    batch = torch.export.Dim("batch_size", min=1, max=1024)
    seq = torch.export.Dim("sequence_length", min=2, max=512)
    with tempfile.TemporaryDirectory() as tmp:
        full = os.path.join(tmp, os.path.basename(path))
        torch.onnx.export(model, (ids, mask), full, dynamo=True, input_names=["input_ids", "attention_mask"],
                          output_names=["last_hidden_state", "pooler_output"],
                          dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
                          external_data=False)
        print(os.path.basename(path), strip_file(full, path, drop_metadata=True))
    return sum(p.numel() for p in model.parameters())


def export_bert(published: dict) -> None:
    from transformers import BertConfig

    published["bert_base"] = {"params": _export_bert(BertConfig(), os.path.join(OUT, "bert_base.onnx")),
                              "source": "transformers BertConfig() defaults"}


def export_bert_large() -> None:
    """BERT-Large (24 layers, 1024 hidden, 16 heads, 4096 intermediate) into bench/models/networks/, for
    the published TensorRT BERT-Large latencies (bench/trt_bert.py)."""
    from transformers import BertConfig

    cfg = BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    _export_bert(cfg, os.path.join(NETWORKS_OUT, "bert_large.onnx"))


def export_cpu_sets(only: list[str] | None = None) -> None:
    """Every model of CPU_SETS (or of the sets named in ``only``: the others' files are kept)."""
    os.makedirs(CPU_OUT, exist_ok=True)
    published: dict = {}
    listing = os.path.join(CPU_OUT, "sets.json")
    if only and os.path.exists(listing):
        with open(listing) as fh:
            published = json.load(fh)["published"]
    for set_name, names in CPU_SETS.items():
        if only and set_name not in only:
            continue
        for name in names:
            export_vision(name, {}, published, CPU_OUT)
    with open(os.path.join(CPU_OUT, "sets.json"), "w") as fh:
        json.dump({"sets": CPU_SETS, "published": published}, fh, indent=2, sort_keys=True)
        fh.write("\n")


def export_unseen() -> None:
    """UNSEEN into bench/models/unseen/, with torchvision's published MAC figures (weights meta _ops,
    counted at the input sizes above) in published.json."""
    os.makedirs(UNSEEN_OUT, exist_ok=True)
    published = {}
    for name, (kw, shapes) in UNSEEN.items():
        model = torchvision.models.get_model(name, weights=None, **kw).eval()
        meta = torchvision.models.get_model_weights(name).DEFAULT.meta
        published[name] = {"gmacs": meta["_ops"], "params": meta["num_params"], "source": "torchvision weights meta (_ops)"}
        args = tuple([torch.randn(*s) for s in x] if isinstance(x, list) else torch.randn(*x) for x in shapes)
        with tempfile.TemporaryDirectory() as tmp:
            full = os.path.join(tmp, f"{name}.onnx")
            torch.onnx.export(model, args, full, opset_version=17, dynamo=False)
            info = strip_file(full, os.path.join(UNSEEN_OUT, f"{name}.onnx"), drop_metadata=True)
        print(name, info)
    with open(os.path.join(UNSEEN_OUT, "published.json"), "w") as fh:
        json.dump(published, fh, indent=2, sort_keys=True)
        fh.write("\n")


def main() -> None:
    if "--unseen" in sys.argv:  # only bench/models/unseen/
        export_unseen()
        return
    if "--networks" in sys.argv:  # only bench/models/networks/
        export_networks()
        return
    if "--cpu-sets" in sys.argv:  # only the CPU benchmark's unseen models (--cpu-sets fresh: that set only)
        i = sys.argv.index("--cpu-sets")
        export_cpu_sets(sys.argv[i + 1:] or None)
        return
    os.makedirs(OUT, exist_ok=True)
    published: dict = {}
    for name, kw in VISION.items():
        export_vision(name, kw, published)
    export_gpt2(published)
    export_bert(published)
    with open(os.path.join(OUT, "published.json"), "w") as fh:
        json.dump(published, fh, indent=2, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main()
