// TEMPORARY (branch serve-http): Server::create until the server core (branch serve-core) is
// merged, so that `kiln` links here; delete this file then.
#include "kiln/error.h"
#include "serve/server.h"

namespace kiln::serve {

std::unique_ptr<Server> Server::create(const ServerOptions&) {
    KILN_THROW(kUnsupported) << "the server core is not built in this branch (serve-http)";
}

}  // namespace kiln::serve
