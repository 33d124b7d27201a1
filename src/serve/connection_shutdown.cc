// Ending a stopped listener's idle kept-alive connections (see the header).
#include "serve/connection_shutdown.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>

namespace kiln::serve {
namespace {

int port_of(const sockaddr_storage& a) {
    if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    return -1;
}

}  // namespace

void shut_down_idle_connections(int port, const std::function<bool(const std::string&, int)>& busy) {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return;
    while (const dirent* entry = readdir(dir)) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        const int fd = std::atoi(entry->d_name);
        sockaddr_storage addr{};
        socklen_t len = sizeof addr;
        if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;  // not a socket
        if (port_of(addr) != port) continue;
        len = sizeof addr;
        if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;  // not connected
        char host[NI_MAXHOST];  // numeric, as httplib writes Request::remote_addr
        if (getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
            continue;
        if (busy(host, port_of(addr))) continue;
        shutdown(fd, SHUT_RD);
    }
    closedir(dir);
}

}  // namespace kiln::serve
