// The binding functions of kiln._kiln, one file per bound class (module.cc calls them).
#pragma once

#include <nanobind/nanobind.h>

namespace kiln::python {

void bind_session_options(nanobind::module_& m);  // session_options.cc: kiln::SessionOptions
void bind_terminate_flag(nanobind::module_& m);   // terminate_flag.cc: RunOptions::terminate's flag
void bind_session(nanobind::module_& m);          // session.cc: kiln::Session
void bind_training(nanobind::module_& m);         // training.cc: kiln::TrainingSession and its options

}  // namespace kiln::python
