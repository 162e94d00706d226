#include "sim/roce/udp_port.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "sim/vfio_user/log.hpp"

namespace rig::sim::roce {

namespace {

sockaddr_in socket_address(const udp_address& a) noexcept {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    s.sin_port = htons(a.port);
    s.sin_addr.s_addr = htonl(a.ip);
    return s;
}

// A socket buffer of `bytes`: the forced form first (CAP_NET_ADMIN: past net.core.*mem_max),
// else the capped one (socket(7)); what the kernel then reads back (twice what it granted:
// it counts its bookkeeping too).
int buffer(int fd, int force, int plain, int bytes) noexcept {
    if (::setsockopt(fd, SOL_SOCKET, force, &bytes, sizeof bytes) != 0) {
        ::setsockopt(fd, SOL_SOCKET, plain, &bytes, sizeof bytes);
    }
    int got = 0;
    socklen_t n = sizeof got;
    ::getsockopt(fd, SOL_SOCKET, plain, &got, &n);
    return got;
}

std::string rmem_max() {
    std::ifstream f("/proc/sys/net/core/rmem_max");
    std::string v;
    return f >> v ? v : std::string("?");
}

}  // namespace

std::expected<std::unique_ptr<udp_port>, std::string> udp_port::open(wire& w, const udp_address& local,
                                                                    const udp_address& peer, int receive_buffer) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return std::unexpected("cannot open a UDP socket: " + std::string(std::strerror(errno)));
    }
    const auto fail = [fd](std::string what) {
        const int e = errno;
        ::close(fd);
        return std::unexpected(what + ": " + std::strerror(e));
    };
    const int got = buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, receive_buffer);
    const int on = 1;   // each arrival tells how many the kernel dropped so far (SO_RXQ_OVFL)
    ::setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on);
    buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, default_send_buffer);
    const sockaddr_in l = socket_address(local), p = socket_address(peer);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&l), sizeof l) != 0) {
        return fail("cannot bind UDP " + to_string(local));
    }
    udp_address bound = local;
    sockaddr_in b{};
    socklen_t bn = sizeof b;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&b), &bn) == 0) {
        bound.port = ntohs(b.sin_port);
    }
    // connected: send() needs no address, and the kernel hands us only the peer's datagrams
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&p), sizeof p) != 0) {
        return fail("cannot send from UDP " + to_string(bound) + " to " + to_string(peer));
    }
    if (got < receive_buffer) {
        log().warn("UDP port {}: the socket's receive buffer is {} bytes, not the {} asked: the host caps it at "
                   "net.core.rmem_max = {} (SO_RCVBUFFORCE needs CAP_NET_ADMIN); RoCE bursts beyond it are lost "
                   "there and retransmitted (slower). `sysctl -w net.core.rmem_max={}` lifts the cap",
                   to_string(bound), got, receive_buffer, rmem_max(), receive_buffer);
    }
    return std::unique_ptr<udp_port>(new udp_port(w, fd, bound, peer, got));
}

udp_port::udp_port(wire& w, int fd, const udp_address& local, const udp_address& peer, int receive_buffer)
    : _wire(w), _fd(fd), _local(local), _peer(peer), _receive_buffer(receive_buffer), _port(w.attach_uplink()) {
    _core = &w.core();
    _core->join(*this);   // last: the core may run a step at once
}

udp_port::~udp_port() {
    _core->leave(*this);   // no step runs after this
    for (std::size_t i = 0; i < _spares; ++i) {
        _port->release(_spare[i]);
    }
    for (std::size_t i = 0; i < _pendings; ++i) {
        _port->release(_pending[i]);
    }
    _port.reset();   // gives back what it holds, detaches
    ::close(_fd);
}

udp_counters udp_port::counters() const noexcept {
    constexpr auto r = std::memory_order_relaxed;
    udp_counters c;
    c.datagrams_in = _counters.datagrams_in.load(r);
    c.bytes_in = _counters.bytes_in.load(r);
    c.datagrams_out = _counters.datagrams_out.load(std::memory_order_acquire);   // send()'s release
    c.bytes_out = _counters.bytes_out.load(r);
    c.not_for_us = _counters.not_for_us.load(r) + _port->unrouted();   // the wire counts unknown unicast
    c.malformed = _counters.malformed.load(r);
    c.send_errors = _counters.send_errors.load(r);
    c.learned = _counters.learned.load(r);
    c.mac_clashes = _counters.mac_clashes.load(r);
    c.kernel_drops = _counters.kernel_drops.load(r);
    return c;
}

bool udp_port::step(clock::time_point now) noexcept {
    _port->flush(now);   // arrivals a full queue held back go first (wire.hpp: lossless)
    const bool sent = send(now);
    const bool received = receive(now);
    return sent || received;
}

}  // namespace rig::sim::roce
