#pragma once
// A UDP port of the model's wire: the wire leaves the process, to another rig-nicsim or to a
// QEMU guest's NIC, as Ethernet over UDP with QEMU's framing (net/socket.c
// net_socket_send_dgram / net_socket_receive_dgram, net/dgram.c for -netdev dgram): one
// datagram is one whole Ethernet frame from the destination MAC on, with no header of its own,
// no FCS and no padding. The port binds `local` and sends to `peer` (connect(2): the kernel
// then also hands it only the peer's datagrams).
//
// On the wire it is an uplink (wire.hpp): it takes the frames for MACs no local function owns
// and delivers what arrives to the local function owning the destination MAC. Arriving frames
// for no local function (unknown unicast, and broadcast or multicast: a guest's ARP, IPv6
// ND/MLD) are dropped and counted, never logged one by one; so are datagrams shorter than an
// Ethernet header or longer than frame_capacity. Source MACs that arrive are learned (with
// several UDP ports a frame to a learned MAC leaves by its port only).
//
// Frames leave sealed (rig::roce::seal: a real ICRC, as a NIC puts on a link). A frame whose
// payload is by reference (wire.hpp) goes as a gather list, headers from the frame and payload
// from the sender's memory, the ICRC computed over it where it lies: the kernel's copy into its
// buffer is the only one, as in the process the receiver's is. Arriving frames are sealed, so
// the receiving engine checks their ICRC (engine.cpp).
//
// I/O: a station of the wire's model core (model_core.hpp), no thread of its own: each round
// moves what is there with recvmmsg(2)/sendmmsg(2) batches on a non-blocking socket, so an idle
// model costs no CPU and a busy one one system call per batch of frames. Datagrams are received
// straight into frame buffers from the wire's pool (the kernel's copy is the only one). Inside
// the process the wire is lossless (a full destination queue holds the port back, and then it
// reads nothing more: the socket buffer takes the burst); the UDP hop is like a lossy cable: a
// datagram the kernel drops (receive buffer full) or a send error (ECONNREFUSED while the peer
// is not listening yet, ENOBUFS) loses the frame, counted, and the RC transport recovers.
// EAGAIN (send buffer full) keeps the frames for the next round.
//
// Faults and capture: the port's wire port takes them as a function's (set_faults, set_link:
// frames from or to this UDP port), and the wire's capture records frames arriving by it and
// leaving by it.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>

#include <sys/socket.h>
#include <sys/uio.h>

#include "sim/roce/udp_address.hpp"
#include "sim/roce/wire.hpp"

namespace rig::sim::roce {

struct udp_counters {
    std::uint64_t datagrams_in = 0, bytes_in = 0;     // every datagram read from the socket
    std::uint64_t datagrams_out = 0, bytes_out = 0;   // every datagram the kernel took
    std::uint64_t not_for_us = 0;   // arrived for no local function: unknown unicast, broadcast, multicast
    std::uint64_t malformed = 0;    // shorter than an Ethernet header, or longer than frame_capacity
    std::uint64_t send_errors = 0;  // frames lost to a send error (ECONNREFUSED, ENOBUFS, ...)
    // datagrams the kernel dropped for want of room in the socket's receive buffer (SO_RXQ_OVFL,
    // socket(7)): a burst bigger than receive_buffer(), or a model core kept from reading it
    std::uint64_t kernel_drops = 0;
    std::uint64_t learned = 0;      // source MACs learned on this port (that were new to the table)
    std::uint64_t mac_clashes = 0;  // arrivals whose source MAC is a local function's (a loop, or --first-mac)
};

class udp_port final : public station {
public:
    static constexpr std::size_t batch = 32;   // datagrams per recvmmsg / sendmmsg
    static constexpr std::size_t batches_per_round = 4;
    // Asked of the kernel for the socket's receive buffer: a few RoCE bursts (a queue pair's
    // send queue of 64 KiB messages is 8 MiB), so a burst waits there while the model core
    // is busy, instead of being dropped.
    static constexpr int default_receive_buffer = 16 << 20;
    static constexpr int default_send_buffer = 4 << 20;

    // Binds `local`, connects to `peer`, attaches to `w` and joins its model core. Else why not
    // (the address and the errno text), nothing made. A receive buffer the host caps below
    // `receive_buffer` (net.core.rmem_max, when SO_RCVBUFFORCE is not allowed) is said once, as
    // a warning on the model's logger.
    static std::expected<std::unique_ptr<udp_port>, std::string> open(wire& w, const udp_address& local,
                                                                      const udp_address& peer,
                                                                      int receive_buffer = default_receive_buffer);
    ~udp_port();  // leaves the core, gives its frames back, closes the socket
    udp_port(const udp_port&) = delete;
    udp_port& operator=(const udp_port&) = delete;

    bool step(clock::time_point now) noexcept override;

    const udp_address& local() const noexcept { return _local; }   // the bound one (port 0: the kernel's)
    const udp_address& peer() const noexcept { return _peer; }
    int receive_buffer() const noexcept { return _receive_buffer; }   // as getsockopt(SO_RCVBUF) reads it
    // Faults and link of this port: frames from or to it (wire.hpp).
    void set_faults(const faults& f) { _port->set_faults(f); }
    void set_link(bool up) { _port->set_link(up); }
    udp_counters counters() const noexcept;

private:
    udp_port(wire& w, int fd, const udp_address& local, const udp_address& peer, int receive_buffer);
    bool receive(clock::time_point now) noexcept;
    bool send(clock::time_point now) noexcept;
    void sort_arrival(frame* f, std::uint32_t bytes, int flags, mac_address& learned) noexcept;
    void kernel_drops(const ::msghdr& m) noexcept;
    std::size_t gather(frame* f, std::array<::iovec, 3>& pieces) noexcept;

    wire& _wire;
    const int _fd;
    udp_address _local;
    const udp_address _peer;
    const int _receive_buffer;
    std::unique_ptr<port> _port;
    model_core* _core = nullptr;
    // the core thread's own: empty frames for the next recvmmsg, frames the last sendmmsg left
    // (EAGAIN), and the batches' headers
    std::array<frame*, batch> _spare{};
    std::size_t _spares = 0;
    std::array<frame*, batch> _pending{};
    std::size_t _pendings = 0;
    std::array<::mmsghdr, batch> _messages{};
    std::array<::iovec, batch> _iovecs{};            // a received datagram's frame
    std::array<std::array<::iovec, 3>, batch> _pieces{};   // a sent one's: headers, payload, pad and ICRC
    // room for each arrival's SO_RXQ_OVFL count (a cmsg of one 32-bit word)
    std::array<std::array<char, CMSG_SPACE(sizeof(std::uint32_t))>, batch> _controls{};
    struct alignas(64) atomic_counters {
        std::atomic<std::uint64_t> datagrams_in{0}, bytes_in{0}, datagrams_out{0}, bytes_out{0}, not_for_us{0},
            malformed{0}, send_errors{0}, learned{0}, mac_clashes{0}, kernel_drops{0};
    };
    atomic_counters _counters;
    std::atomic<bool> _clash_said{false};
};

}  // namespace rig::sim::roce
