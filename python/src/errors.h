// kiln::Error -> the Python exception classes of kiln/_errors.py, chosen by ErrorKind.
#pragma once

#include <nanobind/nanobind.h>

namespace kiln::python {

/// Defines `_kiln._set_error_classes({kind name: class})` (called once by kiln/_errors.py) and
/// registers the translator that raises the class of a kiln::Error's kind with its what().
void bind_errors(nanobind::module_& m);

}  // namespace kiln::python
