#pragma once
// Test fixture for sim/roce/udp_port: the far end of a UDP link as a plain socket (the test is
// the peer, as QEMU's -netdev socket,udp= or another rig-nicsim would be), RoCEv2 frames made
// with abi/roce, and waits that end by a deadline.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/roce/packet.hpp"
#include "sim/roce/udp_port.hpp"
#include "sim/roce/wire.hpp"
#include "test/within.hpp"

namespace rig::test::udp {

using namespace std::chrono_literals;
namespace sr = rig::sim::roce;
using bytes = std::vector<std::byte>;

inline sr::udp_address loopback(std::uint16_t port = 0) { return {0x7f00'0001u, port}; }

// A UDP socket on 127.0.0.1 (a port the kernel picks), sending to `peer` once told.
struct peer_socket {
    int fd = -1;
    sr::udp_address address;

    peer_socket() {
        fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd >= 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(0x7f00'0001u);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        socklen_t n = sizeof a;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0);
        address = loopback(ntohs(a.sin_port));
    }
    ~peer_socket() { ::close(fd); }
    peer_socket(const peer_socket&) = delete;
    peer_socket& operator=(const peer_socket&) = delete;

    void send_to(const sr::udp_address& to, std::span<const std::byte> b) const {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(to.port);
        a.sin_addr.s_addr = htonl(to.ip);
        REQUIRE(::sendto(fd, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&a), sizeof a) ==
                static_cast<ssize_t>(b.size()));
    }
    // The next datagram within `within`, whole (up to 64 KiB), or nothing.
    std::optional<bytes> receive(std::chrono::milliseconds within = 3000ms) const {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(within.count())) != 1) {
            return std::nullopt;
        }
        bytes b(65536);
        const ssize_t n = ::recv(fd, b.data(), b.size(), MSG_DONTWAIT);
        if (n < 0) {
            return std::nullopt;
        }
        b.resize(static_cast<std::size_t>(n));
        return b;
    }
};

inline sr::mac_address mac(std::uint8_t a, std::uint8_t b) {
    return {std::byte{0x02}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{a}, std::byte{b}};
}

inline rig::roce::gid link_local(const sr::mac_address& m) {
    rig::roce::gid g{};
    g[0] = std::byte{0xfe};
    g[1] = std::byte{0x80};
    g[8] = m[0] ^ std::byte{0x02};
    g[9] = m[1];
    g[10] = m[2];
    g[11] = std::byte{0xff};
    g[12] = std::byte{0xfe};
    g[13] = m[3];
    g[14] = m[4];
    g[15] = m[5];
    return g;
}

inline rig::roce::route route(const sr::mac_address& from, const sr::mac_address& to) {
    rig::roce::route r;
    r.src_mac = from;
    r.dst_mac = to;
    r.src_gid = link_local(from);
    r.dst_gid = link_local(to);
    return r;
}

inline rig::roce::transport send_only(std::uint32_t psn) {
    rig::roce::transport t;
    t.op = rig::roce::opcode::send_only;
    t.dest_qp = 0x12;
    t.psn = psn;
    return t;
}

inline bytes payload(std::size_t n, std::uint8_t seed) {
    bytes p(n);
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = std::byte(static_cast<std::uint8_t>(seed + i * 7));
    }
    return p;
}

// A whole sealed RoCEv2 SEND ONLY frame, as a link carries it.
inline bytes sealed_frame(const sr::mac_address& from, const sr::mac_address& to, std::size_t n, std::uint32_t psn) {
    const rig::roce::route r = route(from, to);
    bytes out(rig::roce::frame_bytes(r, rig::roce::opcode::send_only, n));
    out.resize(rig::roce::encode(r, send_only(psn), payload(n, static_cast<std::uint8_t>(psn)), out));
    return out;
}

// The same frame in a pool frame as the model's senders leave it: unsealed, and its payload by
// reference to `outside` when given (which must hold the payload and outlive the frame's trip).
inline sr::frame* model_frame(sr::port& p, const sr::mac_address& to, std::size_t n, std::uint32_t psn,
                              const bytes* outside = nullptr) {
    sr::frame* f = p.allocate();
    REQUIRE(f != nullptr);
    const rig::roce::route r = route(p.mac(), to);
    f->size = static_cast<std::uint32_t>(rig::roce::encode_headers(r, send_only(psn), n, f->bytes));
    const std::size_t at = rig::roce::payload_offset(r, rig::roce::opcode::send_only);
    const bytes body = payload(n, static_cast<std::uint8_t>(psn));
    std::memcpy(f->bytes.data() + at, body.data(), n);
    f->sealed = false;
    if (outside != nullptr) {
        std::memset(f->bytes.data() + at, 0, n);   // not there: the wire must take it from outside
        f->payload_ref = outside->data();
        f->payload_at = static_cast<std::uint32_t>(at);
        f->payload_bytes = static_cast<std::uint32_t>(n);
    }
    return f;
}

// Polls `done` until it holds or `within` passes.
template <class F>
bool eventually(F&& done, std::chrono::milliseconds bound = 3000ms) {
    return rig::test::within(bound, done);
}

inline sr::frame* receive_within(sr::port& p, std::chrono::milliseconds within = 3000ms) {
    sr::frame* f = nullptr;
    eventually([&] { return (f = p.receive(sr::clock::now())) != nullptr; }, within);
    return f;
}

inline bytes bytes_of(const sr::frame& f) { return bytes(f.data().begin(), f.data().end()); }

}  // namespace rig::test::udp
