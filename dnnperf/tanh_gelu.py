"""The tanh GELU as exports spell it (GPT-2's and Phi's gelu_new, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715
x^3))), or its product form, Megatron's and BLOOM's bias GELU), which of its spellings ONNX Runtime's CPU
provider runs as one FastGelu kernel, and the constants a weightless skeleton's copy needs for a run to
see it. ``dnnperf.kernel_groups`` groups it with the runtime's other kernels."""

from __future__ import annotations

from dnnperf.ir import Graph


def tanh_gelu_nodes(graph: Graph, tanh, producer: dict, only_user) -> tuple[list, str] | None:
    """(its nodes, x) when ``tanh`` is the middle of an exported tanh GELU (GPT-2's and Phi's
    gelu_new): 0.5 x (1 + Tanh(c (x + 0.044715 x^3))), the cube a Pow or x * (x * x), or its product
    form 0.5 x (1 + Tanh(c x (1 + 0.044715 x x))), every intermediate read only by the next node.
    ONNX Runtime fuses the ones ``ort_fuses_tanh_gelu`` says into one FastGelu kernel."""
    def const_and_other(node, op):
        if node is None or node.op_type != op or len(node.inputs) != 2:
            return None
        other = [i for i in node.inputs if i not in graph.constants]
        return other[0] if len(other) == 1 else None

    def sole(t, node):
        return only_user(t) is node

    scale = producer.get(tanh.inputs[0]) if tanh.inputs else None
    inner = const_and_other(scale, "Mul")
    add = producer.get(inner) if inner else None
    if add is None or add.op_type != "Add" or len(add.inputs) != 2 or not sole(inner, scale):
        found = _tanh_gelu_product(scale, producer, const_and_other, sole)
        if found is None:
            return None
        members, x = found
        return _tanh_gelu_tail(graph, tanh, members + [tanh], x, producer, only_user, const_and_other, sole)
    for x, cubic_t in (add.inputs, add.inputs[::-1]):
        coef = producer.get(cubic_t)
        cube_t = const_and_other(coef, "Mul")
        cube = producer.get(cube_t) if cube_t else None
        if cube is None or not sole(cubic_t, add) or not sole(cube_t, coef):
            continue
        members = [cube, coef, add, scale, tanh]
        if cube.op_type == "Pow" and cube.inputs and cube.inputs[0] == x and cube.inputs[1] in graph.constants:
            break
        if cube.op_type == "Mul" and x in cube.inputs:
            sq = producer.get(next((i for i in cube.inputs if i != x), x))
            if sq is not None and sq.op_type == "Mul" and list(sq.inputs) == [x, x] and sole(sq.outputs[0], cube):
                members.insert(0, sq)
                break
    else:
        return None
    return _tanh_gelu_tail(graph, tanh, members, x, producer, only_user, const_and_other, sole)


def _tanh_gelu_product(scale, producer: dict, const_and_other, sole) -> tuple[list, str] | None:
    """(its nodes, x) when ``scale``, the Tanh's input, is the product form of the tanh GELU's argument
    (Megatron's and BLOOM's bias GELU): (c x) * (1 + 0.044715 x x), x * 0.044715 then * x."""
    if scale is None or scale.op_type != "Mul" or len(scale.inputs) != 2:
        return None
    for cx_t, one_t in (scale.inputs, scale.inputs[::-1]):
        cx, one = producer.get(cx_t), producer.get(one_t)
        x = const_and_other(cx, "Mul")
        sq_t = const_and_other(one, "Add")
        sq = producer.get(sq_t) if sq_t else None
        if x is None or sq is None or sq.op_type != "Mul" or x not in sq.inputs or len(sq.inputs) != 2:
            continue
        coef = producer.get(sq.inputs[1] if sq.inputs[0] == x else sq.inputs[0])
        if const_and_other(coef, "Mul") == x and sole(cx_t, scale) and sole(one_t, scale) and sole(sq_t, one) \
                and sole(coef.outputs[0], sq):
            return [coef, sq, one, cx, scale], x
    return None


def _tanh_gelu_tail(graph: Graph, tanh, members: list, x: str, producer: dict, only_user, const_and_other,
                    sole) -> tuple[list, str] | None:
    """The tanh GELU's nodes after its Tanh: 1 + tanh, times 0.5 x (or x, then 0.5)."""
    plus = only_user(tanh.outputs[0]) if tanh.outputs else None  # 1 + tanh(...)
    if const_and_other(plus, "Add") != tanh.outputs[0]:
        return None
    mul = only_user(plus.outputs[0]) if plus.outputs else None
    if mul is None or mul.op_type != "Mul" or len(mul.inputs) != 2:
        return None
    other = next((i for i in mul.inputs if i != plus.outputs[0]), None)
    half = producer.get(other) if other else None
    if half is not None and const_and_other(half, "Mul") == x and sole(other, mul):
        return [half] + members + [plus, mul], x  # (0.5 x) * (1 + tanh)
    last = only_user(mul.outputs[0]) if mul.outputs else None  # x * (1 + tanh) * 0.5, or 0.5 (1 + tanh) * x
    if other == x and const_and_other(last, "Mul") is not None:
        return members + [plus, mul, last], x
    if other in graph.constants and last is not None and last.op_type == "Mul" and x in last.inputs:
        return members + [plus, mul, last], x
    return None


# the constants of gelu_new, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), by the node that reads them
TANH_GELU_CONSTANTS = {"cube": 3.0, "coef": 0.044715, "scale": 0.7978845608028654, "plus": 1.0, "half": 0.5}


def tanh_gelu_constants(graph: Graph) -> dict[str, float]:
    """{constant tensor: the value gelu_new gives it} for every tanh GELU ``tanh_gelu_nodes`` finds: the
    exponent of its Pow, the 0.044715 of its cube, the sqrt(2 / pi) before its Tanh, the 1 added to
    the Tanh and the 0.5. The estimate reads the pattern as ONNX Runtime's FastGelu kernel whatever
    the constants hold (a weightless skeleton has none); a validation run of a skeleton gives them
    these values, or the runtime sees another function and runs it node by node (GPT-2's skeleton with
    stand-in random constants: no FastGelu, a generic Pow of 620 us per layer where the fused kernel
    takes 80-90)."""
    from dnnperf.kernel_groups import _sole_user

    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    only_user = _sole_user(graph)
    out: dict[str, float] = {}
    for node in graph.nodes:
        if node.op_type != "Tanh" or node.domain not in ("", "ai.onnx"):
            continue
        found = tanh_gelu_nodes(graph, node, producer, only_user)
        if found is None:
            continue
        members, x = found
        names = {m.name for m in members}
        cube = next((m for m in members if m.op_type == "Pow"), None) or \
            next((m for m in members if m.op_type == "Mul" and x in m.inputs and any(
                (p := producer.get(i)) is not None and p.name in names and i != x for i in m.inputs)), None)
        arg = producer.get(node.inputs[0]) if node.inputs else None  # the Tanh's argument
        for m in members:
            consts = [i for i in m.inputs if i in graph.constants]
            if len(consts) != 1:
                continue
            if m.op_type == "Pow":
                role = "cube"
            elif m.op_type == "Add":
                role = "plus"
            elif m.op_type == "Mul" and (node.inputs[0] in m.outputs or (arg is not None and m is not arg and
                                                                         m.outputs[0] in arg.inputs)):
                role = "scale"  # c (x + ...), or the c x of the product form
            elif m.op_type == "Mul" and ((cube is not None and any(o in m.inputs for o in cube.outputs)) or any(
                    u.op_type == "Mul" and x in u.inputs and m.outputs[0] in u.inputs for u in members)):
                role = "coef"  # 0.044715 x^3, or the product form's 0.044715 x (times x next)
            else:
                role = "half"
            out[consts[0]] = TANH_GELU_CONSTANTS[role]
    return out


def ort_fuses_tanh_gelu(graph: Graph, members: list, x: str) -> bool:
    """Whether ONNX Runtime's CPU provider fuses a tanh GELU ``tanh_gelu_nodes`` found into one FastGelu kernel
    (its FastGeluFusion): float32 only, the cube a Pow (or the product form), the last Mul the product of
    (1 + tanh) and 0.5 x, and not a graph output. Probed, ORT 1.32's optimised graphs at opsets 13, 17 and
    20: with Pow(x, 3) and with (c x)(1 + 0.044715 x x), FastGelu; the cube spelt x * (x * x), or the GELU
    written as a graph output, eight or nine nodes as they are."""
    t = graph.tensors.get(x)
    first, last = members[0], members[-1]
    return t is not None and t.dtype == "float32" and bool(last.outputs) and last.outputs[0] not in graph.outputs \
        and not any(m.op_type == "Mul" and list(m.inputs) == [x, x] for m in members) \
        and first.op_type == "Mul" and x in first.inputs and bool(first.outputs) and first.outputs[0] in last.inputs
