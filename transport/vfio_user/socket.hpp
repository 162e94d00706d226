#pragma once
// One end of a vfio-user socket, client's or server's: whole messages in and out, with their
// fds, and every wait bounded by a deadline and, where the caller has one, cut short by a wake
// fd. AF_UNIX SOCK_STREAM, fds as SCM_RIGHTS (spec "Socket"; QEMU
// docs/interop/vfio-user.rst).
//
// The driver's client (driver/vfio_user/) and the model's server (sim/vfio_user/) both use this
// file; the dependency rule (docs/architecture.md) keeps each from the other, and abi/ does no I/O.
// The wire format itself is abi/vfio_user/protocol.hpp.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "abi/vfio_user/protocol.hpp"

namespace rig::vfio_user::transport {

using clock = std::chrono::steady_clock;

// fds received with a message: closed unless taken
class owned_fds {
public:
    owned_fds() = default;
    owned_fds(owned_fds&& o) noexcept : _fds(std::move(o._fds)) { o._fds.clear(); }
    owned_fds& operator=(owned_fds&& o) noexcept;
    owned_fds(const owned_fds&) = delete;
    owned_fds& operator=(const owned_fds&) = delete;
    ~owned_fds() { close_all(); }

    void add(int fd) { _fds.push_back(fd); }
    std::size_t size() const noexcept { return _fds.size(); }
    bool empty() const noexcept { return _fds.empty(); }
    // the i-th fd, now the caller's to close
    int take(std::size_t i) noexcept;
    void close_all() noexcept;

private:
    std::vector<int> _fds;
};

struct message {
    abi::header hdr{};
    std::vector<std::byte> payload;
    owned_fds fds;
    bool fds_truncated = false;   // the sender attached more fds than we take (MSG_CTRUNC)
};

// `stopped` only comes with a wake fd (below).
enum class io { ok, closed, timeout, failed, malformed, stopped };
struct io_result {
    io status = io::ok;
    int err = 0;   // errno for failed
    explicit operator bool() const noexcept { return status == io::ok; }
};

// Header and payload in one sendmsg (partial sends continue without the fds, which went with
// the first byte). MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE.
// `wake`: an fd that becomes readable when the caller must stop waiting (the server's stop;
// -1: none); then `stopped`.
io_result send_message(int sock, const abi::header& hdr, std::span<const std::byte> payload,
                       std::span<const int> fds, clock::time_point deadline, int wake = -1);

// One whole message. The header is checked before anything is allocated for the body: a
// msg_size below 16 or above 16 + max_payload is `malformed`, and the stream can no longer be
// trusted. fds are collected from every segment; beyond max_fds the kernel drops them.
// `wake` as for send_message.
io_result receive_message(int sock, message& out, std::size_t max_payload, std::size_t max_fds,
                          clock::time_point deadline, int wake = -1);

}  // namespace rig::vfio_user::transport
