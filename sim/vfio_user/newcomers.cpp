#include "sim/vfio_user/newcomers.hpp"

#include <algorithm>
#include <cerrno>
#include <span>
#include <sys/socket.h>
#include <unistd.h>

#include "abi/vfio_user/protocol.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::vfio_user {

namespace abi = rig::vfio_user::abi;

newcomers::~newcomers() {
    for (const newcomer& n : _held) {
        ::close(n.fd);
    }
    if (_refused != 0) {
        log().info("vfio-user server {}: {} other client(s) refused (EBUSY) while one was served: one client at a time",
                   _path, _refused);
    }
}

void newcomers::accept_all(int listen_fd, clock::time_point now) {
    for (;;) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            return;   // EAGAIN: none left; EMFILE and the like: try again at the next poll
        }
        ++_refused;
        if (_held.size() >= max_held) {
            ::close(fd);
            continue;
        }
        _held.push_back({fd, now + grace});
    }
}

void newcomers::add_pollfds(std::vector<pollfd>& p) const {
    for (const newcomer& n : _held) {
        p.push_back({n.fd, POLLIN, 0});
    }
}

// The first message's header, peeked without blocking: once all 16 bytes are there, a command
// that wants a reply gets an error reply with EBUSY (the header alone: 16 bytes, which an empty
// socket buffer always takes; a send that fails is a client that went). A libvfio-user or QEMU
// client then says the device is busy instead of waiting for its VERSION reply.
bool newcomers::answer(int fd) noexcept {
    std::byte head[abi::header_size];
    const ssize_t n = ::recv(fd, head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) {
        return errno != EAGAIN && errno != EINTR;
    }
    if (n == 0) {
        return true;
    }
    if (static_cast<std::size_t>(n) < sizeof head) {
        return false;
    }
    const auto h = abi::decode<abi::header>(std::span<const std::byte>(head));
    if (h && (h->flags & abi::flag_type_mask) == abi::flag_type_command && (h->flags & abi::flag_no_reply) == 0) {
        const abi::header reply{h->msg_id, h->command, abi::header_size, abi::flag_type_reply | abi::flag_error,
                                static_cast<std::uint32_t>(EBUSY)};
        std::byte out[abi::header_size];
        abi::encode(std::span<std::byte>(out), 0, reply);
        (void)!::send(fd, out, sizeof out, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    return true;
}

void newcomers::drop(std::size_t i) noexcept {
    ::close(_held[i].fd);
    _held[i] = _held.back();
    _held.pop_back();
}

void newcomers::serve(const std::vector<pollfd>& p, std::size_t first, clock::time_point now) {
    // back to front: drop() moves the last one into the hole, whose pollfd was already seen
    for (std::size_t i = _held.size(); i-- > 0;) {
        const bool ready = first + i < p.size() && p[first + i].fd == _held[i].fd && p[first + i].revents != 0;
        if ((ready && answer(_held[i].fd)) || now >= _held[i].deadline) {
            drop(i);
        }
    }
}

int newcomers::timeout_ms(clock::time_point now) const {
    if (_held.empty()) {
        return -1;
    }
    auto next = _held.front().deadline;
    for (const newcomer& n : _held) {
        next = std::min(next, n.deadline);
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::max<long long>(left, 0));
}

}  // namespace rig::sim::vfio_user
