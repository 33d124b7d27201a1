"""ONNX Runtime's IOBinding: inputs and outputs bound to memory before the run.

An output bound to memory (a numpy buffer through bind_output's buffer_ptr, or an OrtValue
through bind_ortvalue_output) is written by the model's kernels in place: the native run gets it
as kiln::RunOptions::outputs_into (docs/python.md, "I/O binding"), so no copy is made. An
output bound by name only is allocated by Kiln, as ORT allocates it.
"""
import numpy as np

from ._errors import InvalidArgument
from .ort_value import OrtValue, array_at, check_cpu


class IOBinding:
    """Made by InferenceSession.io_binding(); run with InferenceSession.run_with_iobinding."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}    # name -> array / list / None (what the run takes)
        self._outputs = {}   # name -> the array the run writes into, or None (Kiln allocates)
        self._results = []   # OrtValues of the last run, in the order the outputs were bound
        self._plan = None    # (output indices, {name: array}) for the native run, made once per binding

    def _input_name(self, name):
        if name not in self._session._input_kinds:
            raise InvalidArgument(f"'{name}' is not an input of the model (inputs: "
                                  f"{', '.join(self._session._input_kinds)})")
        return name

    def _output_name(self, name):
        if name not in self._session._output_index:
            raise InvalidArgument(f"'{name}' is not an output of the model (outputs: "
                                  f"{', '.join(self._session._output_index)})")
        return name

    # -- inputs ---------------------------------------------------------------------------------

    def bind_cpu_input(self, name, arr_on_cpu):
        """Binds input `name` to an array (kept by reference: later writes to it are seen)."""
        self._inputs[self._input_name(name)] = self._session._feed_value(name, arr_on_cpu)

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        """Binds input `name` to `shape` elements of `element_type` at address `buffer_ptr`."""
        check_cpu(device_type, f"input '{name}'")
        self._inputs[self._input_name(name)] = array_at(buffer_ptr, element_type, shape, f"input '{name}'")

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[self._input_name(name)] = ortvalue._value

    def synchronize_inputs(self):
        """Nothing to wait for: Kiln's inputs are host memory."""

    def clear_binding_inputs(self):
        self._inputs.clear()

    # -- outputs --------------------------------------------------------------------------------

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        """With buffer_ptr, the run writes output `name` into that memory (its element_type and
        shape must be the output's, else the run fails naming it); without, Kiln allocates it."""
        check_cpu(device_type, f"output '{name}'")
        self._output_name(name)
        self._plan = None
        if buffer_ptr is None:
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise ValueError("`element_type` and `shape` are to be provided if pre-allocated memory is provided")
        self._outputs[name] = array_at(buffer_ptr, element_type, shape, f"output '{name}'")

    def bind_ortvalue_output(self, name, ortvalue):
        """The run writes output `name` into `ortvalue`'s tensor."""
        self._output_name(name)
        if not ortvalue.is_tensor():
            raise InvalidArgument(f"output '{name}': only a tensor OrtValue can be bound as an output")
        self._plan = None
        self._outputs[name] = ortvalue.numpy()

    def synchronize_outputs(self):
        """Nothing to wait for: run_with_iobinding returns when the outputs are written."""

    def clear_binding_outputs(self):
        self._outputs.clear()
        self._results = []
        self._plan = None

    # -- results --------------------------------------------------------------------------------

    def get_outputs(self):
        """The last run's outputs as OrtValues, in binding order (a bound buffer's OrtValue is
        over that buffer)."""
        return list(self._results)

    def get_outputs_as_ortvaluevector(self):
        return list(self._results)

    def copy_outputs_to_cpu(self):
        """Copies of the last run's outputs as numpy arrays (lists for sequences)."""
        out = []
        for v in self._results:
            value = v._value
            out.append([a.copy() for a in value] if isinstance(value, list) else
                       None if value is None else np.array(value, copy=True))
        return out

    def _run(self, terminate):
        if self._plan is None:
            if not self._outputs:
                raise InvalidArgument("run_with_iobinding: at least one output should be requested (bind_output)")
            index = self._session._output_index
            self._plan = ([index[n] for n in self._outputs],
                          {n: a for n, a in self._outputs.items() if a is not None} or None)
        which, into = self._plan
        self._results = [OrtValue(r) for r in self._session._sess.run(self._inputs, which, terminate, into)]
