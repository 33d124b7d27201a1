"""ONNX Runtime's module-level queries: providers, device, build info, version, telemetry."""
from . import _kiln

CPU_PROVIDER = "CPUExecutionProvider"

# ORT 1.32's get_all_providers(): every provider ORT knows of, whether built in or not.
_ORT_PROVIDERS = (
    "TensorrtExecutionProvider", "CUDAExecutionProvider", "MIGraphXExecutionProvider", "OpenVINOExecutionProvider",
    "DnnlExecutionProvider", "VitisAIExecutionProvider", "QNNExecutionProvider", "NnapiExecutionProvider",
    "VSINPUExecutionProvider", "JsExecutionProvider", "CoreMLExecutionProvider", "DmlExecutionProvider",
    "RknpuExecutionProvider", "WebNNExecutionProvider", "WebGpuExecutionProvider", "XnnpackExecutionProvider",
    "CANNExecutionProvider", "AzureExecutionProvider", CPU_PROVIDER,
)


def get_all_providers():
    """ORT's list of provider names; Kiln has one of them (get_available_providers)."""
    return list(_ORT_PROVIDERS)


def get_available_providers():
    """Kiln runs on the CPU: ORT's name for that provider."""
    return [CPU_PROVIDER]


def get_device():
    return "CPU"


def get_version_string():
    return _kiln.__version__


def get_build_info():
    """One line, as ORT's: the version and what the native library was built with."""
    return f"Kiln Build Info: version={_kiln.__version__}, oneDNN={'yes' if _kiln.have_dnnl else 'no'}"


def disable_telemetry_events():
    """Kiln sends no telemetry: nothing to disable."""


def enable_telemetry_events():
    """Kiln sends no telemetry: nothing to enable."""
