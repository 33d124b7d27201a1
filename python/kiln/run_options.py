"""ONNX Runtime's RunOptions. `terminate` is backed by the atomic flag a run watches
(kiln::RunOptions::terminate): set it from another thread and the run stops at its next kernel
boundary, raising kiln.Cancelled."""
from . import _kiln


class RunOptions:
    def __init__(self):
        self._flag = _kiln.TerminateFlag()
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self._config = {}

    @property
    def terminate(self):
        return self._flag.value

    @terminate.setter
    def terminate(self, value):
        self._flag.value = bool(value)

    def add_run_config_entry(self, key, value):
        """Kept and ignored (Kiln has no per-run knobs yet)."""
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        return self._config[key]
