#include "sim/vfio_user/server.hpp"

#include <pthread.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sim/vfio_user/log.hpp"
#include "sim/vfio_user/session.hpp"

namespace rig::sim::vfio_user {

namespace abi = rig::vfio_user::abi;

namespace {
std::string os_reason(std::string_view call, const std::string& path, int err) {
    std::string m(call);
    m += " on ";
    m += path;
    m += ": ";
    m += std::strerror(err);
    return m;
}
bool nonblocking(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}
}  // namespace

std::expected<std::unique_ptr<server>, std::string> server::create(std::string path, device& dev,
                                                                   server_options options) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof addr.sun_path) {
        return std::unexpected("vfio-user server: socket path empty or too long: " + path);
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return std::unexpected(os_reason("socket", path, errno));
    }
    // A socket left by a server that died is replaced; a live server's is not, nor is any other
    // file (not ours to delete).
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            ::close(fd);
            return std::unexpected("vfio-user server: " + path + " exists and is not a socket");
        }
        const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        const bool live = probe >= 0 && (::connect(probe, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 ||
                                         errno == EAGAIN);
        if (probe >= 0) {
            ::close(probe);
        }
        if (live) {
            ::close(fd);
            return std::unexpected("vfio-user server: a server already listens at " + path);
        }
        ::unlink(path.c_str());
    }
    // A backlog as deep as the host allows (net.core.somaxconn): a burst of connections waits
    // there to be refused by the session (newcomers.hpp) instead of being refused by the kernel
    // (EAGAIN on a non-blocking AF_UNIX connect) before anyone looked at it. The socket is
    // non-blocking: every accept follows a poll, and the session accepts until none is left.
    // bind, then chmod, then listen: nobody can connect before listen, so nobody gets in
    // through the umask-derived mode that bind gave the file
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::chmod(path.c_str(), 0600) != 0 || ::listen(fd, SOMAXCONN) != 0 || !nonblocking(fd)) {
        const int err = errno;
        ::close(fd);
        ::unlink(path.c_str());
        return std::unexpected(os_reason("bind/chmod/listen", path, err));
    }
    const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake < 0) {
        const int err = errno;
        ::close(fd);
        ::unlink(path.c_str());
        return std::unexpected(os_reason("eventfd", path, err));
    }
    return std::unique_ptr<server>(new server(std::move(path), dev, options, fd, wake));
}

server::server(std::string path, device& dev, server_options options, int listen_fd, int wake_fd)
    : _path(std::move(path)), _dev(dev), _options(options), _listen(listen_fd), _wake(wake_fd) {
    if (_options.max_msg_fds == 0) {
        _options.max_msg_fds = 1;
    }
}

server::~server() {
    stop();
    _dev.server_closing();  // before the DMA space it may still be using goes
    ::close(_listen);
    ::close(_wake);
    ::unlink(_path.c_str());
}

void server::start() {
    if (!_thread.joinable()) {
        _thread = std::thread([this] { run(); });
        ::pthread_setname_np(_thread.native_handle(), "rig-vfio-user");   // perf sched, top -H
    }
}

void server::stop() {
    const std::uint64_t one = 1;
    (void)!::write(_wake, &one, sizeof one);
    if (_thread.joinable()) {
        _thread.join();
    }
}

void server::run() {
    for (;;) {
        pollfd p[2] = {{_listen, POLLIN, 0}, {_wake, POLLIN, 0}};
        if (::poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            log().error("vfio-user server {}: poll: {}", _path, std::strerror(errno));
            return;
        }
        if (p[1].revents != 0) {
            return;
        }
        const int conn = ::accept4(_listen, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) {
            if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
                log().warn("vfio-user server {}: accept: {}", _path, std::strerror(errno));
                std::this_thread::sleep_for(std::chrono::milliseconds(10));   // e.g. EMFILE: no spin
            }
            continue;
        }
        serve(conn);
    }
}

void server::serve(int conn) {
    {
        std::lock_guard g(_irq_lock);
        for (unsigned k = 0; k < irq_kind_count; ++k) {
            _irqs[k] = irq_state{};
            _irqs[k].fds.assign(vectors(k), -1);
        }
    }
    _connected = true;
    _dev.connected();
    log().debug("vfio-user server {}: client connected", _path);
    {
        session s(*this, conn);
        _dma.set_in_band(&s, std::this_thread::get_id());
        s.run();
        _dma.set_in_band(nullptr, {});
    }
    // spec "Socket Disconnection Behavior": the client's memory and fds go, the device stays.
    // The device is told first, as vfio-pci resets a device on its last close before the IOMMU
    // mappings go: a data path still running would otherwise DMA into windows being unmapped
    // (faults answered as remote access errors to its peers) instead of stopping with a reset.
    _dev.disconnected();
    _dma.unmap_all();
    drop_irqs();
    ::close(conn);
    log().debug("vfio-user server {}: client gone", _path);
    _connected = false;
    ++_served;
}

void server::irq_state::disable() noexcept {
    for (int& fd : fds) {
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
    }
    masked = false;
    pending = false;
}

// The device's count, and at least one ERR vector: kernel vfio-pci offers one for every PCIe
// function (drivers/vfio/pci/vfio_pci_core.c vfio_pci_get_irq_count, VFIO_PCI_ERR_IRQ_INDEX).
// QEMU warns "Could not enable error recovery for the device" unless the count is 1
// (hw/vfio/pci.c vfio_pci_populate_device), and with it vfio_register_err_notifier installs an
// eventfd. It is kept; a device model that reports an uncorrectable error signals it by
// trigger(irq::err, 0).
// And one REQ vector, as vfio-pci offers every function (vfio_pci_get_irq_count,
// VFIO_PCI_REQ_IRQ_INDEX) and libvfio-user's VFU_DEV_REQ_IRQ: the server asks its client to let
// go of the device by trigger(irq::req, 0) (request_removal).
std::uint32_t server::vectors(unsigned kind) {
    const std::uint32_t n = _dev.irq_count(static_cast<irq>(kind));
    const bool always = kind == static_cast<unsigned>(irq::err) || kind == static_cast<unsigned>(irq::req);
    return always ? std::max<std::uint32_t>(n, 1) : n;
}

void server::drop_irqs() {
    std::lock_guard g(_irq_lock);
    for (irq_state& s : _irqs) {
        s.disable();
    }
}

bool server::trigger(irq kind, std::uint32_t vector) {
    std::lock_guard g(_irq_lock);
    return trigger_locked(static_cast<unsigned>(kind), vector);
}

// with _irq_lock held
bool server::trigger_locked(unsigned k, std::uint32_t vector) {
    if (k >= irq_kind_count || vector >= _irqs[k].fds.size() || _irqs[k].fds[vector] < 0) {
        return false;
    }
    irq_state& s = _irqs[k];
    if (k == static_cast<unsigned>(irq::intx)) {
        if (s.masked) {
            s.pending = true;
            return false;
        }
        s.masked = true;   // INTx is automasked until the client unmasks it
    }
    const std::uint64_t one = 1;
    return ::write(s.fds[vector], &one, sizeof one) == sizeof one;
}

}  // namespace rig::sim::vfio_user
