// The binding functions of kiln._kiln, one file per bound class (module.cc calls them).
#pragma once

#include <nanobind/nanobind.h>

#include <map>
#include <string>

#include "kiln/tensor.h"

namespace kiln::python {

void bind_session_options(nanobind::module_& m);  // session_options.cc: kiln::SessionOptions
void bind_terminate_flag(nanobind::module_& m);   // terminate_flag.cc: RunOptions::terminate's flag
void bind_session(nanobind::module_& m);          // session.cc: kiln::Session
void bind_training(nanobind::module_& m);         // training.cc: kiln::TrainingSession and its options
void bind_distributed(nanobind::module_& m);      // distributed.cc: data-parallel training over MPI

/// A batch given as {name: numpy array}, borrowed for the call (training.cc).
std::map<std::string, Tensor> batch_from_python(const nanobind::dict& batch);

}  // namespace kiln::python
