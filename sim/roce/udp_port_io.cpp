// udp_port's data path (udp_port.hpp): a round's recvmmsg and sendmmsg batches, on the model
// core's thread.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "abi/roce/headers.hpp"
#include "sim/roce/udp_port.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::roce {

namespace {
constexpr std::size_t eth_bytes = rig::roce::eth::size_bytes;   // destination MAC, source MAC, ethertype
bool multicast(const std::byte* mac) noexcept { return (std::to_integer<unsigned>(mac[0]) & 1) != 0; }
}  // namespace

// Up to batches_per_round recvmmsg batches, each straight into frames of the pool. None while
// the port is held back (a full destination queue: the socket buffer keeps the burst meanwhile).
bool udp_port::receive(clock::time_point now) noexcept {
    bool did = false;
    for (std::size_t round = 0; round < batches_per_round && !_port->paused(); ++round) {
        while (_spares < batch) {
            frame* f = _port->allocate();
            if (f == nullptr) {
                break;   // the pool is empty: read later
            }
            _spare[_spares++] = f;
        }
        if (_spares == 0) {
            break;
        }
        for (std::size_t i = 0; i < _spares; ++i) {
            // frame_capacity, not one byte more: a longer datagram comes back with MSG_TRUNC
            _iovecs[i] = {_spare[i]->bytes.data(), frame_capacity};
            _messages[i] = {};
            _messages[i].msg_hdr.msg_iov = &_iovecs[i];
            _messages[i].msg_hdr.msg_iovlen = 1;
            _messages[i].msg_hdr.msg_control = _controls[i].data();
            _messages[i].msg_hdr.msg_controllen = _controls[i].size();
        }
        const int n = ::recvmmsg(_fd, _messages.data(), static_cast<unsigned>(_spares), MSG_DONTWAIT, nullptr);
        if (n < 0) {
            if (errno == ECONNREFUSED) {
                // the peer refused an earlier datagram (ICMP port unreachable: not listening yet)
                _counters.send_errors.fetch_add(1, std::memory_order_relaxed);
                continue;
            }
            break;   // EAGAIN: nothing more now
        }
        did = did || n > 0;
        mac_address learned;
        learned.fill(std::byte{0xff});   // no source: the first frame's is looked up
        std::uint64_t bytes = 0;
        for (int i = 0; i < n; ++i) {
            bytes += _messages[i].msg_len;
            sort_arrival(_spare[i], _messages[i].msg_len, _messages[i].msg_hdr.msg_flags, learned);
        }
        if (n > 0) {
            kernel_drops(_messages[static_cast<std::size_t>(n) - 1].msg_hdr);
        }
        _counters.datagrams_in.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed);
        _counters.bytes_in.fetch_add(bytes, std::memory_order_relaxed);
        const std::size_t left = _spares - static_cast<std::size_t>(n);
        std::copy_n(_spare.begin() + n, left, _spare.begin());
        _spares = left;
        _port->flush(now);
        if (left != 0) {
            break;   // the socket had fewer than asked: it is empty
        }
    }
    return did;
}

// The kernel's count of datagrams it dropped on this socket, as of `m`'s arrival (the SO_RXQ_OVFL
// cmsg, present once there was a drop).
void udp_port::kernel_drops(const ::msghdr& m) noexcept {
    for (const cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(const_cast<::msghdr*>(&m), const_cast<cmsghdr*>(c))) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
            std::uint32_t dropped = 0;
            std::memcpy(&dropped, CMSG_DATA(c), sizeof dropped);
            _counters.kernel_drops.store(dropped, std::memory_order_relaxed);
        }
    }
}

// One arrived datagram in `f`: to the wire (which finds its function, or drops it as unknown
// unicast), or dropped and counted here. `learned`: the source MAC learn() was last told in
// this batch (a batch mostly comes from one peer: the table is looked at once).
void udp_port::sort_arrival(frame* f, std::uint32_t bytes, int flags, mac_address& learned) noexcept {
    if ((flags & MSG_TRUNC) != 0 || bytes < eth_bytes) {
        _counters.malformed.fetch_add(1, std::memory_order_relaxed);
        _port->release(f);
        return;
    }
    if (multicast(f->bytes.data())) {   // broadcast, multicast: ARP, IPv6 ND and MLD of a guest
        _counters.not_for_us.fetch_add(1, std::memory_order_relaxed);
        _port->release(f);
        return;
    }
    f->size = bytes;
    f->sealed = true;   // from outside: the receiver checks the ICRC
    f->payload_ref = nullptr;
    if (std::memcmp(learned.data(), f->bytes.data() + 6, learned.size()) != 0) {
        std::memcpy(learned.data(), f->bytes.data() + 6, learned.size());
        const learn_result r = _wire.learn(*_port, learned);
        if (r == learn_result::learned) {
            _counters.learned.fetch_add(1, std::memory_order_relaxed);
        } else if (r == learn_result::local) {
            _counters.mac_clashes.fetch_add(1, std::memory_order_relaxed);
            if (!_clash_said.exchange(true, std::memory_order_relaxed)) {   // once: not per frame
                log().warn("UDP port {}: frames arrive from a source MAC that a function here has (a loop, "
                           "or both ends with the same MACs: give one rig-nicsim another --first-mac)",
                           to_string(_local));
            }
        }
    }
    _port->send(f);
}

// `f` as the datagram's gather list in `pieces`, sealed: a payload by reference stays where it
// is (headers, payload, pad and ICRC: three pieces, the kernel's copy the only one), the ICRC
// computed over it there. Only within this round: the window it lies in may go between rounds
// (wire.hpp), so what waits for the next one is materialized (send()).
std::size_t udp_port::gather(frame* f, std::array<::iovec, 3>& pieces) noexcept {
    std::byte* b = f->bytes.data();
    if (f->payload_ref == nullptr) {
        if (!f->sealed) {
            rig::roce::seal(f->writable());
            f->sealed = true;
        }
        pieces[0] = {b, f->size};
        return 1;
    }
    if (!f->sealed) {
        rig::roce::seal(f->writable(), {f->payload_ref, f->payload_bytes}, f->payload_at);
        f->sealed = true;
    }
    const std::size_t tail = f->payload_at + f->payload_bytes;
    pieces[0] = {b, f->payload_at};
    pieces[1] = {const_cast<std::byte*>(f->payload_ref), f->payload_bytes};
    pieces[2] = {b + tail, f->size - tail};
    return 3;
}

// Up to batches_per_round sendmmsg batches of what the wire queued for this port, each frame
// sealed. EAGAIN keeps the rest for the next round; another error loses the frame.
bool udp_port::send(clock::time_point now) noexcept {
    bool did = false;
    std::array<frame*, batch> out;
    for (std::size_t round = 0; round < batches_per_round; ++round) {
        std::size_t n = std::exchange(_pendings, 0);
        std::copy_n(_pending.begin(), n, out.begin());
        for (frame* f; n < batch && (f = _port->receive(now)) != nullptr;) {
            out[n++] = f;
        }
        if (n == 0) {
            break;
        }
        did = true;
        for (std::size_t i = 0; i < n; ++i) {
            _messages[i] = {};
            _messages[i].msg_hdr.msg_iov = _pieces[i].data();
            _messages[i].msg_hdr.msg_iovlen = gather(out[i], _pieces[i]);
        }
        std::uint64_t sent = 0, bytes = 0, errors = 0;
        std::size_t at = 0;
        while (at < n) {
            const int r = ::sendmmsg(_fd, _messages.data() + at, static_cast<unsigned>(n - at), MSG_DONTWAIT);
            if (r > 0) {
                for (std::size_t i = at; i < at + static_cast<std::size_t>(r); ++i) {
                    bytes += out[i]->size;
                    _port->release(out[i]);
                }
                sent += static_cast<std::uint64_t>(r);
                at += static_cast<std::size_t>(r);
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                _pendings = n - at;   // the send buffer is full: these go first next round, whole
                std::copy_n(out.begin() + at, _pendings, _pending.begin());
                for (std::size_t i = 0; i < _pendings; ++i) {
                    _port->materialize(_pending[i]);
                }
                break;
            } else if (errno != EINTR) {
                ++errors;   // ECONNREFUSED (the peer not listening yet), ENOBUFS: a lossy cable
                _port->release(out[at++]);
            }
        }
        // release: whoever sees the datagram counted may free what it was sent from (a payload
        // by reference); counters() reads it with acquire
        _counters.datagrams_out.fetch_add(sent, std::memory_order_release);
        _counters.bytes_out.fetch_add(bytes, std::memory_order_relaxed);
        _counters.send_errors.fetch_add(errors, std::memory_order_relaxed);
        if (_pendings != 0 || n < batch) {
            break;
        }
    }
    return did;
}

}  // namespace rig::sim::roce
