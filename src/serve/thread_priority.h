// The OS priority of a server thread (ServerOptions::be_nice): best-effort workers run at a
// higher nice value, so that a real-time thread waking on the same cores is run first.
#pragma once

namespace kiln::serve {

/// Sets the calling thread's nice value to `nice` (raising it needs no privilege; the thread
/// keeps it until it exits). A refusal is reported once on stderr, and the thread runs on at
/// the priority it had.
void lower_thread_priority(int nice);

}  // namespace kiln::serve
