#include "helpers.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace rig::test {

namespace abi = rig::vfio_user::abi;

local_server::local_server(sim::vfio_user::server_options o) {
    auto s = sim::vfio_user::server::create(socket_in(dir), dev, o);
    REQUIRE(s.has_value());
    srv = std::move(*s);
    dev.attach(*srv);
    srv->start();
}

bool local_server::wait_served(std::uint64_t served, std::chrono::milliseconds bound) const {
    const auto until = steady_clock::now() + bound;
    while (steady_clock::now() < until) {
        if (!srv->client_connected() && srv->clients_served() >= served) {
            return true;
        }
        std::this_thread::sleep_for(2ms);
    }
    return false;
}

child_server::child_server() {
    const char* exe = std::getenv("RIG_VFIO_USER_TEST_SERVER");
    REQUIRE(exe != nullptr);
    int ready[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    const std::string sock = socket_in(dir);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(ready[1], 3);   // dup2 clears close-on-exec on fd 3
        ::execl(exe, exe, sock.c_str(), "3", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(ready[1]);
    pollfd p{ready[0], POLLIN, 0};
    const int n = ::poll(&p, 1, 5000);
    char c = 0;
    const bool up = n == 1 && ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
    REQUIRE(up);
}

child_server::~child_server() { kill_now(); }

void child_server::kill_now() {
    if (pid > 0) {
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        pid = -1;
    }
}

std::unique_ptr<driver::function> open_ok(const std::string& where, driver::open_options o) {
    auto f = driver::open(where, o);
    if (!f) {
        FAIL(f.error().message);
    }
    return std::move(*f);
}

std::uint32_t reg_read(driver::function& f, std::uint32_t off) {
    std::uint32_t v = 0;
    auto r = f.region_read(driver::region::bar0, off, std::as_writable_bytes(std::span<std::uint32_t, 1>(&v, 1)));
    if (!r) {
        FAIL(r.error().message);
    }
    return v;
}

void reg_write(driver::function& f, std::uint32_t off, std::uint32_t v) {
    auto r = f.region_write(driver::region::bar0, off, bytes_of(v));
    if (!r) {
        FAIL(r.error().message);
    }
}

std::uint64_t ms_since(steady_clock::time_point t0) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(steady_clock::now() - t0).count());
}

raw_message::raw_message(raw_message&& o) noexcept
    : hdr(o.hdr), payload(std::move(o.payload)), fds(std::move(o.fds)) {
    o.fds.clear();
}

raw_message::~raw_message() {
    for (int fd : fds) {
        ::close(fd);
    }
}

raw_conn::raw_conn(const std::string& socket_path) {
    _fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(_fd >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket_path.c_str(), sizeof a.sun_path - 1);
    REQUIRE(::connect(_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
}

raw_conn::~raw_conn() {
    if (_fd >= 0) {
        ::close(_fd);
    }
}

void raw_conn::send_bytes(std::span<const std::byte> b, std::span<const int> fds) {
    iovec iov{const_cast<std::byte*>(b.data()), b.size()};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    std::vector<char> control;
    if (!fds.empty()) {
        control.assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
        mh.msg_control = control.data();
        mh.msg_controllen = control.size();
        cmsghdr* c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    // the peer may already have closed: that is for the test to observe, not a SIGPIPE
    (void)::sendmsg(_fd, &mh, MSG_NOSIGNAL);
}

void raw_conn::send(std::uint16_t cmd, std::span<const std::byte> payload, std::span<const int> fds,
                    std::optional<std::uint32_t> msg_size, std::uint32_t flags, std::uint16_t id) {
    const abi::header h{id, cmd, msg_size.value_or(static_cast<std::uint32_t>(16 + payload.size())), flags, 0};
    std::vector<std::byte> b(16 + payload.size());
    std::memcpy(b.data(), &h, 16);
    if (!payload.empty()) {
        std::memcpy(b.data() + 16, payload.data(), payload.size());
    }
    send_bytes(b, fds);
}

void raw_conn::send_reply(const raw_message& to, std::span<const std::byte> payload, std::span<const int> fds) {
    send(to.hdr.command, payload, fds, {}, abi::flag_type_reply, to.hdr.msg_id);
}

namespace {
// n bytes, collecting fds; false on EOF or timeout
bool read_exact(int fd, std::byte* p, std::size_t n, std::vector<int>& fds, steady_clock::time_point until) {
    std::size_t got = 0;
    while (got < n) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_clock::now()).count();
        pollfd pf{fd, POLLIN, 0};
        if (left <= 0 || ::poll(&pf, 1, static_cast<int>(left)) <= 0) {
            return false;
        }
        char control[CMSG_SPACE(sizeof(int) * 16)];
        iovec iov{p + got, n - got};
        msghdr mh{};
        mh.msg_iov = &iov;
        mh.msg_iovlen = 1;
        mh.msg_control = control;
        mh.msg_controllen = sizeof control;
        const ssize_t r = ::recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (r <= 0) {
            return false;
        }
        for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
            if (c->cmsg_type == SCM_RIGHTS) {
                const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (std::size_t i = 0; i < k; ++i) {
                    int v;
                    std::memcpy(&v, CMSG_DATA(c) + i * sizeof(int), sizeof v);
                    fds.push_back(v);
                }
            }
        }
        got += static_cast<std::size_t>(r);
    }
    return true;
}
}  // namespace

std::optional<raw_message> raw_conn::receive(std::chrono::milliseconds bound) {
    const auto until = steady_clock::now() + bound;
    raw_message m;
    std::byte h[16];
    if (!read_exact(_fd, h, 16, m.fds, until)) {
        return std::nullopt;
    }
    std::memcpy(&m.hdr, h, 16);
    if (m.hdr.msg_size < 16 || m.hdr.msg_size > (1u << 21)) {
        return std::nullopt;
    }
    m.payload.resize(m.hdr.msg_size - 16);
    if (!m.payload.empty() && !read_exact(_fd, m.payload.data(), m.payload.size(), m.fds, until)) {
        return std::nullopt;
    }
    return m;
}

bool raw_conn::closed_by_peer(std::chrono::milliseconds bound) {
    const auto until = steady_clock::now() + bound;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - steady_clock::now()).count();
        pollfd pf{_fd, POLLIN, 0};
        if (left <= 0 || ::poll(&pf, 1, static_cast<int>(left)) <= 0) {
            return false;
        }
        char buf[256];
        const ssize_t r = ::recv(_fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) {
            return true;
        }
        if (r < 0) {
            return false;
        }
        // data (an error reply, say) before the close: keep reading
    }
}

void raw_conn::handshake() {
    const char json[] = "{}";
    std::vector<std::byte> p(4 + sizeof json);
    const abi::version v{0, 0};
    std::memcpy(p.data(), &v, 4);
    std::memcpy(p.data() + 4, json, sizeof json);
    send(static_cast<std::uint16_t>(abi::command::version), p);
    auto r = receive();
    REQUIRE(r);
    REQUIRE_FALSE(r->is_error());
    REQUIRE(r->payload.size() > 4);
}

}  // namespace rig::test
