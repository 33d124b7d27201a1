// A std::atomic<bool> that Python can own (kiln.RunOptions) and a run can watch.
#pragma once

#include <atomic>

namespace kiln::python {

struct TerminateFlag {
    std::atomic<bool> flag{false};
};

}  // namespace kiln::python
