#include "transport/vfio_user/socket.hpp"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rig::vfio_user::transport {

owned_fds& owned_fds::operator=(owned_fds&& o) noexcept {
    if (this != &o) {
        close_all();
        _fds = std::move(o._fds);
        o._fds.clear();
    }
    return *this;
}

int owned_fds::take(std::size_t i) noexcept {
    const int fd = _fds[i];
    _fds[i] = -1;
    return fd;
}

void owned_fds::close_all() noexcept {
    for (int fd : _fds) {
        if (fd >= 0) {
            ::close(fd);
        }
    }
    _fds.clear();
}

namespace {

// Waits until `sock` is ready for `events`, the deadline passes or `wake` (if >= 0) fires. Hang-up and
// errors count as ready: the following recv/send reports them.
io_result wait_ready(int sock, short events, clock::time_point deadline, int wake) {
    for (;;) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
        if (left.count() <= 0) {
            return {io::timeout, 0};
        }
        pollfd p[2] = {{sock, events, 0}, {wake, POLLIN, 0}};
        const int n = ::poll(p, wake >= 0 ? 2 : 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
        if (n > 0) {
            if (wake >= 0 && p[1].revents != 0) {
                return {io::stopped, 0};
            }
            return {};
        }
        if (n < 0 && errno != EINTR) {
            return {io::failed, errno};
        }
    }
}

// Exactly n bytes into p, collecting SCM_RIGHTS fds from every segment.
io_result receive_exact(int sock, std::byte* p, std::size_t n, message& out, std::size_t max_fds,
                        clock::time_point deadline, int wake) {
    std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<std::size_t>(max_fds, 1)));
    std::size_t got = 0;
    while (got < n) {
        if (auto w = wait_ready(sock, POLLIN, deadline, wake); !w) {
            return w;
        }
        iovec iov{p + got, n - got};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control.data();
        mh.msg_controllen = control.size();
        const ssize_t r = ::recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            if (errno == ECONNRESET) {
                return {io::closed, errno};
            }
            return {io::failed, errno};
        }
        for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const auto* fds = reinterpret_cast<const int*>(CMSG_DATA(c));
                for (std::size_t i = 0; i < k; ++i) {
                    out.fds.add(fds[i]);
                }
            }
        }
        if ((mh.msg_flags & MSG_CTRUNC) != 0 || out.fds.size() > max_fds) {
            out.fds_truncated = true;
        }
        if (r == 0) {
            return {io::closed, 0};
        }
        got += static_cast<std::size_t>(r);
    }
    return {};
}

}  // namespace

io_result send_message(int sock, const abi::header& hdr, std::span<const std::byte> payload,
                       std::span<const int> fds, clock::time_point deadline, int wake) {
    std::byte head[abi::header_size];
    abi::encode(std::span<std::byte>(head), 0, hdr);
    const std::size_t total = sizeof head + payload.size();
    std::vector<char> control;
    if (!fds.empty()) {
        control.assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
    }
    std::size_t sent = 0;
    while (sent < total) {
        iovec iov[2];
        int parts = 0;
        if (sent < sizeof head) {
            iov[parts++] = {head + sent, sizeof head - sent};
            if (!payload.empty()) {
                iov[parts++] = {const_cast<std::byte*>(payload.data()), payload.size()};
            }
        } else {
            const std::size_t at = sent - sizeof head;
            iov[parts++] = {const_cast<std::byte*>(payload.data()) + at, payload.size() - at};
        }
        msghdr mh{};
        mh.msg_iov = iov;
        mh.msg_iovlen = static_cast<std::size_t>(parts);
        if (sent == 0 && !control.empty()) {
            mh.msg_control = control.data();
            mh.msg_controllen = control.size();
            cmsghdr* c = CMSG_FIRSTHDR(&mh);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
            std::copy(fds.begin(), fds.end(), reinterpret_cast<int*>(CMSG_DATA(c)));
        }
        const ssize_t r = ::sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN) {
                if (auto w = wait_ready(sock, POLLOUT, deadline, wake); !w) {
                    return w;
                }
                continue;
            }
            if (errno == EPIPE || errno == ECONNRESET) {
                return {io::closed, errno};
            }
            return {io::failed, errno};
        }
        sent += static_cast<std::size_t>(r);
    }
    return {};
}

io_result receive_message(int sock, message& out, std::size_t max_payload, std::size_t max_fds,
                          clock::time_point deadline, int wake) {
    out = message{};
    std::byte head[abi::header_size];
    if (auto r = receive_exact(sock, head, sizeof head, out, max_fds, deadline, wake); !r) {
        return r;
    }
    out.hdr = *abi::decode<abi::header>(std::span<const std::byte>(head));
    if (out.hdr.msg_size < abi::header_size || out.hdr.msg_size - abi::header_size > max_payload) {
        return {io::malformed, 0};
    }
    out.payload.resize(out.hdr.msg_size - abi::header_size);
    if (!out.payload.empty()) {
        if (auto r = receive_exact(sock, out.payload.data(), out.payload.size(), out, max_fds, deadline, wake); !r) {
            return r;
        }
    }
    return {};
}

}  // namespace rig::vfio_user::transport
