#include "driver/vfio_user/client.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "driver/backends.hpp"
#include "driver/log.hpp"

namespace rig::driver {

namespace vfio_user_detail {

namespace abi = rig::vfio_user::abi;
using abi::command;

namespace {

std::string describe(const io_result& r, std::chrono::milliseconds timeout) {
    switch (r.status) {
    case io::ok: return "ok";
    case io::closed: return "server closed the connection";
    case io::timeout: return "no reply within " + std::to_string(timeout.count()) + " ms";
    case io::malformed: return "malformed message from the server (size outside 16.." +
                               std::to_string(16 + max_payload) + " bytes)";
    case io::failed: return std::strerror(r.err);
    case io::stopped: break;   // only with a wake fd, which the client does not pass
    }
    return "?";
}

}  // namespace

client::client(std::string name, int sock, const open_options& options)
    : _name(std::move(name)),
      _options(options),
      _sock(sock),
      _iova({{0, ~std::uint64_t{0}}}, options.dma_limit) {}

client::~client() {
    release();
    for (int fd : _kept_fds) {
        ::close(fd);
    }
}

error client::lose_connection(std::string_view call, std::string reason, int err) {
    if (_sock >= 0) {
        ::close(_sock);
        _sock = -1;
    }
    if (_lost.empty()) {
        _lost = reason;
        log().warn("{}: connection lost in {}: {}", _name, call, reason);
    }
    return fail(call, _name, reason, err);
}

result<message> client::call(command cmd, std::span<const std::byte> payload, std::span<const int> fds) {
    const std::string_view what = abi::command_name(static_cast<std::uint16_t>(cmd));
    if (_sock < 0) {
        return std::unexpected(fail(what, _name, _lost.empty() ? "connection released" : _lost,
                                    ECONNRESET));
    }
    const auto deadline = clock::now() + _options.vfio_user_timeout;
    const abi::header h{++_next_id, static_cast<std::uint16_t>(cmd),
                        static_cast<std::uint32_t>(abi::header_size + payload.size()),
                        abi::flag_type_command, 0};
    if (auto r = send_message(_sock, h, payload, fds, deadline); !r) {
        return std::unexpected(lose_connection(what, describe(r, _options.vfio_user_timeout), ECONNRESET));
    }
    for (;;) {
        message m;
        if (auto r = receive_message(_sock, m, max_payload, our_max_fds, deadline); !r) {
            return std::unexpected(
                lose_connection(what, describe(r, _options.vfio_user_timeout),
                                r.status == io::timeout ? ETIMEDOUT : ECONNRESET));
        }
        const std::uint32_t type = m.hdr.flags & abi::flag_type_mask;
        if (type == abi::flag_type_command) {
            if (auto r = answer(m, deadline); !r) {
                return std::unexpected(lose_connection(what, describe(r, _options.vfio_user_timeout),
                                                       ECONNRESET));
            }
            continue;
        }
        if (type != abi::flag_type_reply || m.hdr.msg_id != h.msg_id || m.hdr.command != h.command) {
            return std::unexpected(lose_connection(
                what, "reply out of order (id " + std::to_string(m.hdr.msg_id) + ", command " +
                          std::to_string(m.hdr.command) + ")", EPROTO));
        }
        if ((m.hdr.flags & abi::flag_error) != 0) {
            return std::unexpected(os_error(what, _name, m.hdr.error_no != 0
                                                             ? static_cast<int>(m.hdr.error_no) : EIO));
        }
        if (m.fds_truncated) {
            return std::unexpected(fail(what, _name, "reply carried more fds than asked for", EPROTO));
        }
        return m;
    }
}

const client::window* client::find_window(std::uint64_t address, std::uint64_t count) const {
    auto it = _windows.upper_bound(address);
    if (it == _windows.begin()) {
        return nullptr;
    }
    const window& w = std::prev(it)->second;
    const std::uint64_t at = address - w.iova;
    if (at > w.bytes || count > w.bytes - at) {
        return nullptr;
    }
    return &w;
}

// VFIO_USER_DMA_READ/WRITE from the server (spec "Read and Write Operations"): only inside one of
// our windows, with the access the window allows; anything else gets an error reply.
io_result client::answer(const message& m, clock::time_point deadline) {
    const bool is_read = m.hdr.command == static_cast<std::uint16_t>(command::dma_read);
    const bool is_write = m.hdr.command == static_cast<std::uint16_t>(command::dma_write);
    abi::header h{m.hdr.msg_id, m.hdr.command, abi::header_size, abi::flag_type_reply, 0};
    auto refuse = [&](int err) {
        if ((m.hdr.flags & abi::flag_no_reply) != 0) {
            return io_result{};
        }
        h.flags |= abi::flag_error;
        h.error_no = static_cast<std::uint32_t>(err);
        return send_message(_sock, h, {}, {}, deadline);
    };
    if (!is_read && !is_write) {
        return refuse(ENOSYS);
    }
    const auto req = abi::decode<abi::dma_access>(m.payload);
    if (!req || req->count > our_max_xfer || (is_write && m.payload.size() - 16 != req->count)) {
        return refuse(EINVAL);
    }
    const window* w = find_window(req->address, req->count);
    if (w == nullptr || (is_read && !w->device_reads) || (is_write && !w->device_writes)) {
        log().warn("{}: server {} of {} bytes at IOVA {:#x} outside our windows: refused", _name,
                   is_read ? "read" : "write", req->count, req->address);
        return refuse(EFAULT);
    }
    std::byte* p = w->data + (req->address - w->iova);
    std::vector<std::byte> reply(16 + (is_read ? req->count : 0));
    abi::encode(std::span<std::byte>(reply), 0, *req);
    if (is_read) {
        std::memcpy(reply.data() + 16, p, req->count);
    } else {
        std::memcpy(p, m.payload.data() + 16, req->count);
    }
    if ((m.hdr.flags & abi::flag_no_reply) != 0) {
        return {};
    }
    h.msg_size = static_cast<std::uint32_t>(abi::header_size + reply.size());
    return send_message(_sock, h, reply, {}, deadline);
}

// spec "VFIO_USER_VERSION": we propose 0.0 with our capabilities; the reply must keep the major,
// may lower the minor, and its capabilities tell us how many fds and bytes one message may carry.
result<void> client::start() {
    constexpr std::string_view what = "VFIO_USER_VERSION";
    abi::caps ours;
    ours.max_msg_fds = our_max_fds;
    ours.max_data_xfer_size = our_max_xfer;
    std::array<char, 256> json{};
    const std::size_t json_bytes = abi::write_caps(ours, json);
    std::vector<std::byte> req(sizeof(abi::version) + json_bytes);
    abi::encode(std::span<std::byte>(req), 0, abi::version{abi::version_major, abi::version_minor});
    std::memcpy(req.data() + sizeof(abi::version), json.data(), json_bytes);
    auto m = call(command::version, req);
    if (!m) {
        return std::unexpected(m.error());
    }
    const auto v = abi::decode<abi::version>(m->payload);
    if (!v) {
        return std::unexpected(lose_connection(what, "reply shorter than its 4-byte version", EPROTO));
    }
    if (v->major != abi::version_major || v->minor > abi::version_minor) {
        return std::unexpected(lose_connection(
            what, "server answered version " + std::to_string(v->major) + "." + std::to_string(v->minor) +
                      " to our " + std::to_string(abi::version_major) + "." +
                      std::to_string(abi::version_minor), EPROTONOSUPPORT));
    }
    const std::span<const std::byte> rest = std::span<const std::byte>(m->payload).subspan(4);
    if (!rest.empty()) {
        const auto nul = std::find(rest.begin(), rest.end(), std::byte{0});
        if (nul == rest.end()) {
            return std::unexpected(lose_connection(what, "capabilities not NUL-terminated", EPROTO));
        }
        const std::string_view text(reinterpret_cast<const char*>(rest.data()),
                                    static_cast<std::size_t>(nul - rest.begin()));
        const auto c = abi::parse_caps(text);
        if (!c) {
            return std::unexpected(lose_connection(what, "malformed capabilities JSON", EPROTO));
        }
        if (c->twin_socket) {   // we did not offer it: an inconsistent reply (spec)
            return std::unexpected(lose_connection(what, "twin_socket answered but not offered", EPROTO));
        }
        _server = *c;
    }
    if (_server.max_data_xfer_size == 0) {
        return std::unexpected(lose_connection(what, "server's max_data_xfer_size is 0", EPROTO));
    }
    _xfer = std::min<std::size_t>(_server.max_data_xfer_size, our_max_xfer);

    abi::device_info di{sizeof(abi::device_info), 0, 0, 0};
    auto info = call(command::device_get_info, bytes_of(di));
    if (!info) {
        return std::unexpected(info.error());
    }
    const auto got = abi::decode<abi::device_info>(info->payload);
    if (!got || (got->flags & abi::device_flag_pci) == 0 || got->num_regions <= abi::pci_config_region) {
        return std::unexpected(fail("VFIO_USER_DEVICE_GET_INFO", _name,
                                    "not a PCI device with a configuration region", ENODEV));
    }
    _device_flags = got->flags;
    _num_regions = got->num_regions;
    _num_irqs = got->num_irqs;
    log().debug("{}: vfio-user {}.{}, {} regions, {} irq kinds, max_msg_fds {}, max_data_xfer_size {}",
                _name, v->major, v->minor, _num_regions, _num_irqs, _server.max_msg_fds,
                _server.max_data_xfer_size);
    return {};
}

// ---- DMA ----------------------------------------------------------------------------------------

// spec "VFIO_USER_DMA_MAP": the window [iova, iova + bytes) is the memory's fd at `offset`; the
// server mmaps it. Without the fd (vfio_user_dma_by_message) the server asks us by message.
result<std::uint64_t> client::dma_map(const dma_memory& memory, std::size_t offset, std::size_t bytes,
                                      dma_access access) {
                                          std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    constexpr std::string_view what = "VFIO_USER_DMA_MAP";
    // whole pages of the memory: a server can mmap a hugetlb memfd only in whole huge pages
    const std::size_t grain = _options.vfio_user_dma_by_message ? page : memory.page_size();
    if (!memory || bytes == 0 || offset > memory.size() || bytes > memory.size() - offset ||
        offset % grain != 0 || bytes % grain != 0) {
        return std::unexpected(fail(what, _name, "range not in whole pages of the memory", EINVAL));
    }
    // spec "VFIO_USER_VERSION": max_msg_fds is the most fds the server takes in one message; one
    // that takes none is not sent the memory's fd (enable_irqs refuses the same way), and can
    // only be given the window by message (vfio_user_dma_by_message)
    if (!_options.vfio_user_dma_by_message && _server.max_msg_fds == 0) {
        return std::unexpected(fail(what, _name, "server takes no fds (max_msg_fds 0): map by message", ENOTSUP));
    }
    if (!_options.vfio_user_dma_by_message && memory.fd() < 0) {
        return std::unexpected(fail(what, _name,
                                    "memory without a file descriptor: a vfio-user server maps client memory by fd "
                                    "(use memfd or hugetlbfs memory, or open with vfio_user_dma_by_message)",
                                    EINVAL));
    }
    if (_windows.size() >= _server.max_dma_maps) {
        return std::unexpected(fail(what, _name, "server's max_dma_maps reached", ENOSPC));
    }
    const auto iova = _iova.allocate(bytes, grain);
    if (!iova) {
        return std::unexpected(fail(what, _name, "no free IOVA range below the DMA limit", ENOSPC));
    }
    const auto bits = static_cast<std::uint32_t>(access);
    const bool by_fd = !_options.vfio_user_dma_by_message;
    const abi::dma_map req{sizeof(abi::dma_map), bits & (abi::dma_flag_read | abi::dma_flag_write),
                           by_fd ? memory.fd_offset() + offset : 0, *iova, bytes};
    const int fd = memory.fd();
    auto m = call(command::dma_map, bytes_of(req), by_fd ? std::span<const int>(&fd, 1) : std::span<const int>());
    if (!m) {
        _iova.release(*iova, bytes);
        return std::unexpected(m.error());
    }
    _windows[*iova] = window{*iova, bytes, memory.data() + offset, (bits & abi::dma_flag_read) != 0,
                             (bits & abi::dma_flag_write) != 0};
    return *iova;
}

// spec "VFIO_USER_DMA_UNMAP": exactly a mapped window; the server drops it before replying.
result<void> client::dma_unmap(std::uint64_t iova, std::size_t bytes) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    constexpr std::string_view what = "VFIO_USER_DMA_UNMAP";
    const auto it = _windows.find(iova);
    if (it == _windows.end() || it->second.bytes != bytes) {
        return std::unexpected(fail(what, _name, "not a mapped window", EINVAL));
    }
    const abi::dma_unmap req{sizeof(abi::dma_unmap), 0, iova, bytes};
    auto m = call(command::dma_unmap, bytes_of(req));
    if (!m && _sock >= 0) {
        return std::unexpected(m.error());   // the server still holds the window
    }
    // done, or the connection is gone and the server dropped every window with it
    _windows.erase(it);
    _iova.release(iova, bytes);
    if (!m) {
        return std::unexpected(m.error());
    }
    return {};
}

// ---- whole function -----------------------------------------------------------------------------

result<void> client::reset() {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    if ((_device_flags & abi::device_flag_reset) == 0) {
        return std::unexpected(fail("VFIO_USER_DEVICE_RESET", _name, "the function cannot be reset", ENOTSUP));
    }
    auto m = call(command::device_reset, {});
    if (!m) {
        return std::unexpected(m.error());
    }
    return {};
}

void client::release_device(bool placeholders) noexcept {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    if (_released) {
        return;
    }
    _released = true;
    if (placeholders) {
        // pollers keep valid, silent fds (function.hpp let_go); the server drops its copies
        // with the connection (spec "Socket Disconnection")
        for (auto& fds : _irq_fds) {
            _kept_fds.insert(_kept_fds.end(), fds.begin(), fds.end());
            fds.clear();
        }
    }
    try {
        if (_sock >= 0) {
            // stop the device's DMA and interrupts before taking its memory away
            (void)set_bus_master(false);
            for (unsigned k = 0; k < _irq_fds.size(); ++k) {
                if (!_irq_fds[k].empty() && _sock >= 0) {
                    (void)disable_irqs(static_cast<irq_kind>(k));
                }
            }
            while (!_windows.empty() && _sock >= 0) {
                const window w = _windows.begin()->second;
                (void)dma_unmap(w.iova, w.bytes);
                _windows.erase(w.iova);
            }
        }
    } catch (...) {
        // out of memory while building a message: the socket closes below, and the server then
        // drops every window and eventfd of this connection by itself (spec "Socket Disconnection")
    }
    for (auto& fds : _irq_fds) {
        for (int fd : fds) {
            ::close(fd);
        }
        fds.clear();
    }
    _windows.clear();
    for (auto& [key, b] : _bars) {
        const std::size_t length = (b.size + page - 1) / page * page;
        if (placeholders) {
            map_placeholder(b.base, length);
        } else {
            ::munmap(b.base, length);
        }
    }
    _bars.clear();
    if (_sock >= 0) {
        ::close(_sock);
        _sock = -1;
    }
}

}  // namespace vfio_user_detail

result<std::unique_ptr<function>> open_vfio_user(std::string_view path, const open_options& options) {
    std::string name = "vfio-user:";
    name += path;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        return std::unexpected(fail("connect", name, "socket path too long", ENAMETOOLONG));
    }
    std::memcpy(addr.sun_path, path.data(), path.size());
    const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        return std::unexpected(os_error("socket", name, errno));
    }
    // a server whose backlog is full makes connect wait; SO_SNDTIMEO bounds that wait
    const auto ms = options.vfio_user_timeout.count();
    const timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
    ::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int err = errno;
        ::close(sock);
        return std::unexpected(os_error("connect", name, err));
    }
    auto c = std::make_unique<vfio_user_detail::client>(std::move(name), sock, options);
    if (auto r = c->start(); !r) {
        return std::unexpected(r.error());
    }
    return c;
}

}  // namespace rig::driver
