"""ORT's default logger settings (set_default_logger_severity / _verbosity). Kiln has no native
logger; the severity gates the warnings of Kiln's own (the options it ignores, such as
optimized_model_filepath): issued while it admits warnings (<= 2, ORT's default), dropped above,
as ORT's logger drops its warnings. Warnings ORT's Python layer issues whatever the severity
(a provider it lacks) Kiln issues likewise."""
import warnings

from ._errors import InvalidArgument

_severity = 2   # ORT's: 0 verbose, 1 info, 2 warning, 3 error, 4 fatal
_verbosity = 0


def set_default_logger_severity(severity):
    """ORT's: 0 (verbose) .. 4 (fatal); above 2 Kiln's warnings are dropped."""
    global _severity
    severity = int(severity)
    if not 0 <= severity <= 4:
        raise InvalidArgument(f"Invalid logging severity {severity}: expected 0:Verbose, 1:Info, 2:Warning, "
                              "3:Error, 4:Fatal")
    _severity = severity


def set_default_logger_verbosity(verbosity):
    """ORT's VLOG level (only read by verbose logging); kept for get_default_logger_verbosity."""
    global _verbosity
    _verbosity = int(verbosity)


def severity():
    return _severity


def warn(message, stacklevel=2):
    if _severity <= 2:
        warnings.warn(message, stacklevel=stacklevel + 1)
