"""ONNX's protobuf classes and operator schemas, without importing the ``onnx`` package.

``import onnx`` runs the package's ``__init__``, which imports its helpers, and they import numpy's
extra element types (``ml_dtypes``): with onnx 1.23 and ml_dtypes 0.7 that is ~0.6 s of the
reference VM's CPU, most of a one-model command, spent before the first byte is read. Loading a model
needs two pieces of the package only: the generated protobuf module (``onnx_ml_pb2``: ``ModelProto``)
and the C++ extension's operator schemas (``onnx_cpp2py_export.defs``). Both are loaded here from the
installed package's own files, under the names the package gives them, so that a later ``import onnx``
(ONNX's shape inference for a graph the Python rules do not cover, the reference evaluator, ``strip``)
finds them in ``sys.modules`` and uses the very same classes. Anything unexpected (another layout of
the package, an ONNX build without the -ml protos) falls back to ``import onnx``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _parts():
    """(the protobuf module, the schemas' C++ module)."""
    if "onnx" not in sys.modules:
        try:
            return _from_files()
        except Exception:  # not the layout this expects: the package's own import, whatever it costs
            pass
    import onnx
    import onnx.onnx_cpp2py_export.defs  # noqa: F401

    return onnx.onnx_ml_pb2, onnx.onnx_cpp2py_export.defs


def _from_files():
    spec = importlib.util.find_spec("onnx")  # finds the package; does not run its __init__
    if spec is None or not spec.submodule_search_locations or not hasattr(spec.loader, "exec_module"):
        raise ImportError("onnx")
    where = list(spec.submodule_search_locations)[0]
    pb2 = sys.modules.get("onnx.onnx_ml_pb2")
    if pb2 is None:
        pb2 = _load("onnx.onnx_ml_pb2", os.path.join(where, "onnx_ml_pb2.py"))
    ext = sys.modules.get("onnx.onnx_cpp2py_export")
    if ext is None:
        found = [f for f in os.listdir(where) if f.startswith("onnx_cpp2py_export.")
                 and f.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))]
        if len(found) != 1:
            raise ImportError("onnx_cpp2py_export")
        path = os.path.join(where, found[0])
        ext = _load("onnx.onnx_cpp2py_export", path,
                    importlib.machinery.ExtensionFileLoader("onnx.onnx_cpp2py_export", path))
    if "onnx" not in sys.modules:  # (a build whose generated module imports the package has run it already)
        sys.meta_path.insert(0, _Parent())
    return pb2, ext.defs


class _Parent:
    """Finds the ``onnx`` package when something imports it later, as the other finders do, and has the
    two submodules loaded here set on it as its attributes after its ``__init__`` runs (as the import
    system does for submodules it loads itself). Leaves ``sys.meta_path`` at its first use."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "onnx":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("onnx")
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            for sub in ("onnx_ml_pb2", "onnx_cpp2py_export"):
                found = sys.modules.get(f"onnx.{sub}")
                if found is not None and not hasattr(module, sub):
                    setattr(module, sub, found)

        loader.exec_module = exec_module
        return spec


def _load(name: str, path: str, loader=None):
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    if spec is None or spec.loader is None:
        raise ImportError(name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def model_proto():
    """A new, empty ``onnx.ModelProto``."""
    return _parts()[0].ModelProto()


def defs():
    """ONNX's operator-schema functions (``get_schema``, ``has_schema``, ``schema_version_map``, ``OpSchema``)."""
    return _parts()[1]


def opset_version() -> int:
    """The newest default-domain opset the installed onnx knows (``onnx.defs.onnx_opset_version()``)."""
    return defs().schema_version_map()[""][1]
