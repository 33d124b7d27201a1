"""ONNX Runtime's SessionOptions, GraphOptimizationLevel and ExecutionMode, mapped onto
kiln::SessionOptions (docs/python.md has the table)."""
import datetime
import enum
import os
from . import _kiln, _logging
from ._errors import InvalidArgument


class GraphOptimizationLevel(enum.IntEnum):
    """ORT's levels (same values) -> Kiln's -O0..-O3 (docs/passes.md)."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


_OPT_LEVEL = {
    GraphOptimizationLevel.ORT_DISABLE_ALL: 0,
    GraphOptimizationLevel.ORT_ENABLE_BASIC: 1,
    GraphOptimizationLevel.ORT_ENABLE_EXTENDED: 2,
    GraphOptimizationLevel.ORT_ENABLE_LAYOUT: 3,
    GraphOptimizationLevel.ORT_ENABLE_ALL: 3,
}


class ExecutionMode(enum.IntEnum):
    """ORT_SEQUENTIAL -> Kiln's sequential executor, ORT_PARALLEL -> the dataflow executor
    (independent kernels at once on inter_op_num_threads threads)."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


def _parse_bool(key, value):
    if value in ("1", "true", "True"):
        return True
    if value in ("0", "false", "False"):
        return False
    raise InvalidArgument(f"session config entry '{key}': expected 0 or 1, got '{value}'")


def _parse_bytes(key, value):
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise InvalidArgument(f"session config entry '{key}': expected a byte count >= 0, got '{value}'")
    return n


def _parse_choice(choices):
    def parse(key, value):
        if value not in choices:
            raise InvalidArgument(f"session config entry '{key}': expected one of {', '.join(choices)}, "
                                  f"got '{value}'")
        return value
    return parse


def _parse_count(key, value):
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidArgument(f"session config entry '{key}': expected a count >= 1, got '{value}'")
    return n


def _parse_specialize(key, value):
    """"seq=16,32,64;batch=1,8" -> {"seq": [16, 32, 64], "batch": [1, 8]} (every combination
    compiles at load)."""
    out = {}
    for piece in filter(None, (p.strip() for p in value.split(";"))):
        name, eq, sizes = piece.partition("=")
        try:
            values = [int(v) for v in sizes.split(",")] if eq and name.strip() else None
        except ValueError:
            values = None
        if not values or any(v < 0 for v in values):
            raise InvalidArgument(f"session config entry '{key}': expected NAME=SIZE,SIZE,...[;NAME=...] "
                                  f"with sizes >= 0, got '{piece}'")
        out[name.strip()] = values
    return out


def _parse_dim_ranges(key, value):
    """"seq=1..512;batch=1..8" -> {"seq": (1, 512), "batch": (1, 8)} (inclusive; a run outside a
    range is an error naming the input)."""
    out = {}
    for piece in filter(None, (p.strip() for p in value.split(";"))):
        name, eq, bounds = piece.partition("=")
        lo, dots, hi = bounds.partition("..")
        try:
            rng = (int(lo), int(hi)) if eq and dots and name.strip() else None
        except ValueError:
            rng = None
        if rng is None or rng[0] < 0 or rng[0] > rng[1]:
            raise InvalidArgument(f"session config entry '{key}': expected NAME=MIN..MAX[;NAME=...] with "
                                  f"0 <= MIN <= MAX, got '{piece}'")
        out[name.strip()] = rng
    return out


# "kiln.*" session config entries: key -> (parser, kiln::SessionOptions field, what it does).
KILN_CONFIG_ENTRIES = {
    "kiln.memory_limit": (_parse_bytes, "memory_limit", "memory budget in bytes (0 = unlimited)"),
    "kiln.kernels": (_parse_choice(["auto", "generated", "dnnl"]), "kernels",
                     "who computes convolutions and matrix products"),
    "kiln.tuning_log": (lambda k, v: v, "tuning_log", "tuning log to apply ('none' = untuned)"),
    "kiln.executor": (_parse_choice(["auto", "sequential", "dataflow"]), "executor",
                      "executor, overriding execution_mode"),
    "kiln.use_global_thread_pools": (_parse_bool, "use_global_thread_pools",
                                     "share the process-wide thread pools"),
    "kiln.profile": (_parse_bool, "profile", "per-kernel timings (InferenceSession.profile_summary())"),
    "kiln.specialize": (_parse_specialize, "specialize",
                        "shapes to compile at load, e.g. 'seq=16,32,64;batch=1,8' (every combination)"),
    "kiln.dim_ranges": (_parse_dim_ranges, "dim_ranges",
                        "declared ranges of symbolic dims, e.g. 'seq=1..512;batch=1..8' (a run outside one fails)"),
    "kiln.max_specializations": (_parse_count, "max_specializations",
                                 "compiled shapes the session keeps (least recently used out; default 16)"),
    "kiln.symbolic_shapes": (_parse_bool, "symbolic_shapes",
                             "compile once for every value of the symbolic dims (docs/dynamic_shapes.md)"),
    "kiln.preemptible": (_parse_bool, "preemptible",
                         "compile kernels for runs that will be preempted, as kiln serve does (same results, "
                         "a few percent slower)"),
    "kiln.tiered_compile": (_parse_bool, "tiered_compile",
                            "with a cold kernel cache, run on quickly compiled kernels while -O3 builds them"),
}


class SessionOptions:
    """ORT's SessionOptions. Fields Kiln has no use for (log levels, memory-arena switches) are
    accepted and ignored, as ORT's Python API accepts them on every platform."""

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self._execution_mode = None  # unset: Kiln picks (auto); ORT reports ORT_SEQUENTIAL
        self.enable_profiling = False
        self.profile_file_prefix = "kiln_profile"
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self.optimized_model_filepath = ""
        self._config = {}
        self._free_dims = {}

    @property
    def graph_optimization_level(self):
        return self._graph_optimization_level

    @graph_optimization_level.setter
    def graph_optimization_level(self, level):
        """A GraphOptimizationLevel (an int of one is taken and kept as the enum; ORT takes only
        the enum)."""
        try:
            self._graph_optimization_level = GraphOptimizationLevel(level)
        except ValueError:
            raise InvalidArgument(f"graph_optimization_level: unknown level {level!r} (expected one of "
                                  f"{', '.join(m.name for m in GraphOptimizationLevel)})") from None

    @property
    def execution_mode(self):
        return ExecutionMode.ORT_SEQUENTIAL if self._execution_mode is None else self._execution_mode

    @execution_mode.setter
    def execution_mode(self, mode):
        self._execution_mode = ExecutionMode(mode)

    def add_session_config_entry(self, key, value):
        """ORT's config entries; "kiln.*" keys set Kiln's own knobs (KILN_CONFIG_ENTRIES), other
        keys are kept and ignored, as ORT ignores keys it does not know."""
        key, value = str(key), str(value)
        if key.startswith("kiln.") and key not in KILN_CONFIG_ENTRIES:
            raise InvalidArgument(f"unknown session config entry '{key}' (Kiln's: "
                                  f"{', '.join(sorted(KILN_CONFIG_ENTRIES))})")
        if key in KILN_CONFIG_ENTRIES:
            KILN_CONFIG_ENTRIES[key][0](key, value)  # check now, like ORT does on add
        self._config[key] = value

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise InvalidArgument(f"session config entry '{key}' is not set")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        """Binds the symbolic dimension `dim_name` (Kiln's --dim NAME=VALUE): the model compiles
        for it when the session loads."""
        if int(dim_value) < 0:
            raise InvalidArgument(f"free dimension '{dim_name}': expected a size >= 0, got {dim_value}")
        self._free_dims[str(dim_name)] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation, dim_value):
        from ._errors import NotImplemented as KilnNotImplemented
        raise KilnNotImplemented("add_free_dimension_override_by_denotation: Kiln does not read dimension "
                                 "denotations; use add_free_dimension_override_by_name")

    def _native(self):
        """The kiln::SessionOptions these options give, and the profile path ("" when off)."""
        o = _kiln.SessionOptions()
        if self.intra_op_num_threads < 0 or self.inter_op_num_threads < 0:
            raise InvalidArgument(f"thread counts must be >= 0, got intra_op_num_threads="
                                  f"{self.intra_op_num_threads}, inter_op_num_threads={self.inter_op_num_threads}")
        o.threads = int(self.intra_op_num_threads)
        o.inter_op_threads = int(self.inter_op_num_threads)
        try:
            o.opt_level = _OPT_LEVEL[GraphOptimizationLevel(self.graph_optimization_level)]
        except ValueError:
            raise InvalidArgument(f"graph_optimization_level: unknown level {self.graph_optimization_level!r}") \
                from None
        if self._execution_mode is not None:
            o.executor = (_kiln.ExecutorKind.dataflow if self._execution_mode == ExecutionMode.ORT_PARALLEL
                          else _kiln.ExecutorKind.sequential)
        for key, value in self._config.items():
            if key in KILN_CONFIG_ENTRIES:
                parse, field, _ = KILN_CONFIG_ENTRIES[key]
                v = parse(key, value)
                if field == "executor":
                    v = getattr(_kiln.ExecutorKind, v)
                setattr(o, field, v)
        o.dims = dict(self._free_dims)
        profile_path = ""
        if self.enable_profiling:
            now = datetime.datetime.now()  # ORT's file name: PREFIX_date_time_milliseconds.json
            stamp = now.strftime("%Y-%m-%d_%H-%M-%S") + f"_{now.microsecond // 1000:03d}"
            profile_path = os.path.abspath(f"{self.profile_file_prefix}_{stamp}.json")
            o.profile_path = profile_path
        if self.optimized_model_filepath:
            _logging.warn("SessionOptions.optimized_model_filepath is ignored: Kiln does not write an "
                          "optimized ONNX model (`kiln compile` writes a .kiln artifact)", stacklevel=3)
        return o, profile_path
