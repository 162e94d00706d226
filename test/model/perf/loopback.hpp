#pragma once
// TCP on the loopback for the rig-perf tests: a listening socket on a free port, and a connect
// that tries again until the listener is there or the bound passes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

#include <catch2/catch.hpp>

namespace rig::test {

// Listens on 127.0.0.1 at a port the kernel picks; `port` says which.
inline int listen_loopback(std::uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    socklen_t n = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0);
    port = ntohs(a.sin_port);
    return fd;
}

// A connection to 127.0.0.1:port, or -1 when none was accepted within `bound`.
inline int connect_loopback(std::uint16_t port, std::chrono::milliseconds bound) {
    const auto by = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < by) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
            return fd;
        }
        ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
}

}  // namespace rig::test
