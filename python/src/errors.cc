// The exception classes live in Python (kiln/_errors.py: a hierarchy under kiln.KilnError, with
// ValueError / MemoryError mixed in where ORT users would catch those); this file only maps a
// kiln::Error's kind to its class.
#include "errors.h"

#include <array>
#include <string>

#include "kiln/error.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

constexpr ErrorKind kKinds[] = {ErrorKind::kInvalidModel, ErrorKind::kInvalidArgument, ErrorKind::kUnsupported,
                                ErrorKind::kCompileError, ErrorKind::kOutOfMemory,     ErrorKind::kIOError,
                                ErrorKind::kParseError,   ErrorKind::kCancelled,       ErrorKind::kInternal};
constexpr size_t kNumKinds = sizeof(kKinds) / sizeof(kKinds[0]);

// Owned references, deliberately never released: the translator may run until interpreter exit.
std::array<PyObject*, kNumKinds> g_classes{};
PyObject* g_fallback = nullptr;

PyObject* class_for(ErrorKind kind) {
    for (size_t i = 0; i < kNumKinds; ++i)
        if (kKinds[i] == kind && g_classes[i]) return g_classes[i];
    return g_fallback ? g_fallback : PyExc_RuntimeError;
}

void set_error_classes(nb::dict classes, nb::handle fallback) {
    for (size_t i = 0; i < kNumKinds; ++i) {
        const char* name = error_kind_name(kKinds[i]);
        if (!classes.contains(name)) throw nb::key_error((std::string("no exception class for ") + name).c_str());
        nb::handle cls = classes[name];
        Py_XDECREF(g_classes[i]);
        g_classes[i] = cls.inc_ref().ptr();
    }
    Py_XDECREF(g_fallback);
    g_fallback = fallback.inc_ref().ptr();
}

}  // namespace

void bind_errors(nb::module_& m) {
    m.def("_set_error_classes", &set_error_classes, nb::arg("classes"), nb::arg("fallback"),
          "Sets the Python class raised for each kiln::Error kind (error_kind_name -> class).");
    m.def("_error_kind_names", [] {
        nb::list names;
        for (ErrorKind k : kKinds) names.append(error_kind_name(k));
        return names;
    });
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const Error& e) {
            PyErr_SetString(class_for(e.kind()), e.what());
        }
    });
}

}  // namespace kiln::python
