"""ONNX Runtime's `onnxruntime.capi` package, as far as programs import from it: the exception
classes of `onnxruntime_pybind11_state` (and its alias `_pybind_state`), so that
`from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument` ports by changing the
package name."""
from . import _pybind_state, onnxruntime_pybind11_state  # noqa: F401,E402 (attributes, as in ORT)
