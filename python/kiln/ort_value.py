"""ONNX Runtime's OrtValue: a value a run takes or gives (a tensor, a sequence of tensors, or an
empty optional), held on the CPU as numpy holds it.

A tensor OrtValue is a numpy array: ortvalue_from_numpy keeps the caller's array (no copy, as ORT
does on the CPU), numpy() returns it (writes show through, as in ORT), and an OrtValue bound as
an IOBinding output is the memory the run writes into.
"""
import ctypes

import numpy as np

from ._dtypes import ONNX_ELEMENT_TYPE, kiln_name_of_element_type, kiln_name_of_numpy, numpy_dtype, ort_type
from ._errors import InvalidArgument


def check_cpu(device_type, what):
    """Kiln runs on the CPU: any other device is refused by name."""
    if str(device_type).lower() != "cpu":
        raise InvalidArgument(f"{what}: device '{device_type}' is not available (Kiln runs on the CPU only)")


def numpy_dtype_of(element_type, what):
    """The numpy dtype of ORT's element_type (a numpy type or an ONNX TensorProto integer)."""
    name = kiln_name_of_element_type(element_type)
    if name is None:
        raise InvalidArgument(f"{what}: element type {element_type!r} has no Kiln dtype")
    return numpy_dtype(name)


def array_at(address, element_type, shape, what):
    """A numpy array over `address` (an int, ORT's buffer_ptr): the caller's memory, no copy."""
    dtype = numpy_dtype_of(element_type, what)
    shape = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise InvalidArgument(f"{what}: shape {list(shape)} has a negative dimension")
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(shape, dtype)
    if not address:
        raise InvalidArgument(f"{what}: buffer_ptr is null")
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(address))
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


class OrtValue:
    """A tensor (numpy array), a sequence (list of arrays) or an empty optional (None)."""

    def __init__(self, value, numpy_obj=None, session=None):
        self._value = value

    # -- factories ------------------------------------------------------------------------------

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, /, device_type="cpu", device_id=0, vendor_id=-1):
        """An OrtValue over `numpy_obj`'s memory (no copy; a non-contiguous or byte-swapped array
        is made contiguous first, as the run would)."""
        check_cpu(device_type, "OrtValue.ortvalue_from_numpy")
        a = np.asarray(numpy_obj)
        if a.dtype.kind not in "OUS" and (not a.flags.c_contiguous or not a.dtype.isnative):
            a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))
        return cls(a)

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, /, onnx_element_type):
        """`data`'s memory read as ONNX element type `onnx_element_type` (same element size)."""
        dtype = numpy_dtype_of(int(onnx_element_type), "OrtValue.ortvalue_from_numpy_with_onnx_type")
        if dtype.itemsize != data.dtype.itemsize:
            raise InvalidArgument(f"OrtValue.ortvalue_from_numpy_with_onnx_type: element type {onnx_element_type} "
                                  f"is {dtype.itemsize} bytes, the array's {data.dtype} is {data.dtype.itemsize}")
        return cls(np.ascontiguousarray(data).view(dtype))

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0, vendor_id=-1,
                                     memory_info=None):
        """A new, uninitialized tensor (as ORT's allocator gives)."""
        check_cpu(device_type, "OrtValue.ortvalue_from_shape_and_type")
        dtype = numpy_dtype_of(element_type, "OrtValue.ortvalue_from_shape_and_type")
        if dtype.kind == "O":
            return cls(np.full(tuple(shape), "", dtype=object))
        return cls(np.empty(tuple(int(d) for d in shape), dtype))

    @classmethod
    def from_dlpack(cls, data, /):
        return cls(np.from_dlpack(data))

    # -- queries --------------------------------------------------------------------------------

    def _tensor(self, what):
        if not isinstance(self._value, np.ndarray):
            raise InvalidArgument(f"OrtValue.{what}: the value is not a tensor "
                                  f"({'an empty optional' if self._value is None else 'a sequence'})")
        return self._value

    def data_ptr(self):
        return self._tensor("data_ptr").ctypes.data

    def device_name(self):
        return "cpu"

    def shape(self):
        return list(self._tensor("shape").shape)

    def _kiln_dtype(self):
        a = self._value[0] if isinstance(self._value, list) and self._value else self._value
        return kiln_name_of_numpy(a.dtype) if isinstance(a, np.ndarray) else None

    def data_type(self):
        """ORT's type string: "tensor(float)", "seq(tensor(int64))"."""
        kind = "sequence" if isinstance(self._value, list) else "tensor"
        return ort_type(kind, self._kiln_dtype() or "f32")

    def element_type(self):
        """The ONNX TensorProto element type (1 = float, 7 = int64, ...)."""
        return ONNX_ELEMENT_TYPE[kiln_name_of_numpy(self._tensor("element_type").dtype)]

    def tensor_size_in_bytes(self):
        return self._tensor("tensor_size_in_bytes").nbytes

    def has_value(self):
        return self._value is not None

    def is_tensor(self):
        return isinstance(self._value, np.ndarray)

    def is_sparse_tensor(self):
        return False

    def is_tensor_sequence(self):
        return isinstance(self._value, list)

    def numpy(self):
        """The tensor as a numpy array over the same memory (writes show through)."""
        return self._tensor("numpy")

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if copy is not None:
            return np.array(a, dtype=dtype, copy=copy)
        return a if dtype is None else np.asarray(a, dtype=dtype)

    def __dlpack__(self, *, stream=None):
        return self._tensor("__dlpack__").__dlpack__()

    def __dlpack_device__(self):
        return self._tensor("__dlpack_device__").__dlpack_device__()

    def update_inplace(self, data):
        """Copies `data` (a numpy array or an OrtValue of the same shape) into this tensor's memory."""
        src = data.numpy() if isinstance(data, OrtValue) else data
        if not isinstance(src, np.ndarray):
            raise TypeError("data must be a numpy.ndarray or an OrtValue.")
        dst = self._tensor("update_inplace")
        if src.shape != dst.shape or src.dtype != dst.dtype:
            raise InvalidArgument(f"OrtValue.update_inplace: expected {dst.dtype}{list(dst.shape)}, "
                                  f"got {src.dtype}{list(src.shape)}")
        np.copyto(dst, src)

    def __repr__(self):
        if isinstance(self._value, np.ndarray):
            return f"OrtValue({self.data_type()}, shape={self.shape()})"
        return f"OrtValue({'None' if self._value is None else self.data_type()})"


def feed_value(value):
    """What a run takes for an OrtValue (its array, list of arrays or None); other values as given."""
    return value._value if isinstance(value, OrtValue) else value
