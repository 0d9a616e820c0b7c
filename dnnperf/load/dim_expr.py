"""Symbolic dims written as arithmetic on other symbols: optimum's decoders declare an attention mask of
``[batch_size, "past_sequence_length + 1"]``, and PyTorch's dynamo exporter writes dims such as
``"s0 + 1"`` or ``"2*s1"``. With the symbols they use given (``--dim past_sequence_length=127``, or the
dims ``--phase`` sets) such a dim is computed; a plain name stays a name.

Only integer arithmetic is read (``+ - * // / %``, parentheses, unary minus, integer literals), through
Python's own parser with every other construct refused: a dim name is never executed.
"""

from __future__ import annotations

import ast
from functools import lru_cache

_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}


@lru_cache(maxsize=4096)
def _tree(param: str):
    """The parsed expression of ``param`` when it is arithmetic over names (not a plain name), else None."""
    if not any(c in param for c in "+-*/%()") or len(param) > 200:
        return None
    try:
        tree = ast.parse(param.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _OPS and not isinstance(node.op, ast.Div):
                return None
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                return None
        elif isinstance(node, ast.Constant):
            if type(node.value) is not int:
                return None
        elif not isinstance(node, (ast.Name, ast.Load, ast.operator, ast.unaryop)):
            return None
    if not any(isinstance(node, ast.Name) for node in ast.walk(tree)):
        return None  # a number written as one ("-1", Paddle's unknown): not arithmetic on symbols
    return tree


def names(param: str) -> set[str]:
    """The symbols ``param`` is made of: the names in an expression, else ``{param}``."""
    tree = _tree(param)
    if tree is None:
        return {param}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def resolved(param, given: dict):
    """``param`` as ``given`` sizes it: its own entry, else its value as an expression, else itself."""
    if param.__class__ is int:
        return param
    if param in given:
        return given[param]
    v = value(param, given)
    return param if v is None else v


def value(param: str, given: dict) -> int | None:
    """``param``'s size when it is an expression whose every name is in ``given``; None otherwise (a
    division that is not exact, a name not given, a plain name)."""
    tree = _tree(param)
    if tree is None:
        return None
    try:
        return _eval(tree, given)
    except (KeyError, ZeroDivisionError, ValueError):
        return None


def _eval(node, given: dict) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return int(given[node.id])
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, given)
        return -v if isinstance(node.op, ast.USub) else v
    a, b = _eval(node.left, given), _eval(node.right, given)
    if isinstance(node.op, ast.Div):
        if b == 0 or a % b:
            raise ValueError("inexact division")
        return a // b
    return _OPS[type(node.op)](a, b)
