// Ending idle kept-alive HTTP connections when a frontend stops. cpp-httplib (0.11) keeps a
// kept-alive connection open after stop() until its client goes quiet for the keep-alive
// timeout (5 s), and gives no handle on its connections; this finds them among the process's
// sockets.
#pragma once

#include <functional>
#include <string>

namespace kiln::serve {

/// Shuts down reading (SHUT_RD) on every connected TCP socket of this process whose local port
/// is `port` (the server side of the connections a listener on `port` accepted), except those
/// whose peer (numeric host, port) `busy` says is in the middle of a request: httplib takes a
/// write on a socket that reads EOF for a dead connection, so those must finish first (they
/// close by themselves once the listener has stopped). An idle connection sees EOF and closes
/// at once. Linux (/proc/self/fd); elsewhere it does nothing.
void shut_down_idle_connections(int port, const std::function<bool(const std::string&, int)>& busy);

}  // namespace kiln::serve
