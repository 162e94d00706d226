#include "sim/vfio_user/session.hpp"

#include "sim/vfio_user/newcomers.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <unistd.h>
#include <vector>

#include "sim/vfio_user/log.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::sim::vfio_user {

namespace abi = rig::vfio_user::abi;
using abi::command;

namespace {

constexpr std::uint64_t host_page = 4096;  // mmap granularity of the areas handed out

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
    return std::as_bytes(std::span<const T, 1>(&v, 1));
}

// The shared areas of a region that can really be handed out: page aligned, inside the region,
// backed by an fd and by the device's own mapping (which serves REGION_READ/WRITE on them).
std::vector<shared_area> usable_areas(const region_desc& d) {
    std::vector<shared_area> out;
    if (d.fd < 0 || d.memory == nullptr || d.fd_offset % host_page != 0) {
        return out;
    }
    for (const shared_area& a : d.shared) {
        if (a.size != 0 && a.offset % host_page == 0 && a.size % host_page == 0 && a.offset <= d.size &&
            a.size <= d.size - a.offset) {
            out.push_back(a);
        }
    }
    return out;
}

bool inside_one(const std::vector<shared_area>& areas, std::uint64_t offset, std::uint64_t n) {
    return std::any_of(areas.begin(), areas.end(), [&](const shared_area& a) {
        return offset >= a.offset && offset - a.offset <= a.size && n <= a.size - (offset - a.offset);
    });
}

}  // namespace

session::session(server& srv, int conn)
    : _srv(srv), _conn(conn), _max_payload(std::size_t{srv._options.max_data_xfer_size} + 4096) {}

void session::run() {
    const auto& path = _srv._path;
    newcomers others(path);
    std::vector<pollfd> p;
    while (!_broken) {
        // an idle client may stay as long as it likes; a started message must finish in time
        p.assign({{_conn, POLLIN, 0}, {_srv._wake, POLLIN, 0}, {_srv._listen, POLLIN, 0}});
        others.add_pollfds(p);
        if (::poll(p.data(), p.size(), others.timeout_ms(clock::now())) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        if (p[1].revents != 0) {
            return;
        }
        if (p[0].revents == 0) {
            // other clients, refused; the current client's own events go first, so one that
            // has just left (EOF) ends its session and the newcomer is served, not refused
            others.serve(p, 3, clock::now());
            if (p[2].revents != 0) {
                others.accept_all(_srv._listen, clock::now());
            }
            continue;
        }
        message m;
        const auto r = receive_message(_conn, m, _max_payload, _srv._options.max_msg_fds,
                                       clock::now() + _srv._options.io_timeout, _srv._wake);
        switch (r.status) {
        case io::ok: break;
        case io::closed: return;
        case io::stopped: return;
        case io::malformed:
            log().warn("vfio-user server {}: message size {} outside 16..{}: closing the connection", path,
                       m.hdr.msg_size, 16 + _max_payload);
            return;
        case io::timeout:
            log().warn("vfio-user server {}: message incomplete after {} ms: closing the connection", path,
                       _srv._options.io_timeout.count());
            return;
        case io::failed:
            log().warn("vfio-user server {}: receive: {}: closing the connection", path, std::strerror(r.err));
            return;
        }
        if (handle(m) == next::close) {
            return;
        }
    }
}

void session::reply(const message& req, std::span<const std::byte> payload, std::span<const int> fds) {
    if ((req.hdr.flags & abi::flag_no_reply) != 0) {
        return;
    }
    const abi::header h{req.hdr.msg_id, req.hdr.command, static_cast<std::uint32_t>(abi::header_size + payload.size()),
                        abi::flag_type_reply, 0};
    if (!send_message(_conn, h, payload, fds, clock::now() + _srv._options.io_timeout, _srv._wake)) {
        _broken = true;
    }
}

// spec "Header": an error reply is the header alone, with the Error flag and an errno
void session::reply_error(const message& req, int err) {
    log().debug("vfio-user server {}: {} refused: {}", _srv._path, abi::command_name(req.hdr.command),
                std::strerror(err));
    if ((req.hdr.flags & abi::flag_no_reply) != 0) {
        return;
    }
    const abi::header h{req.hdr.msg_id, req.hdr.command, abi::header_size, abi::flag_type_reply | abi::flag_error,
                        static_cast<std::uint32_t>(err)};
    if (!send_message(_conn, h, {}, {}, clock::now() + _srv._options.io_timeout, _srv._wake)) {
        _broken = true;
    }
}

session::next session::handle(message& m) {
    if ((m.hdr.flags & abi::flag_type_mask) != abi::flag_type_command) {
        // nothing of ours is waiting for a reply here: the peer is confused
        log().warn("vfio-user server {}: unexpected message of type {}: closing the connection", _srv._path,
                   m.hdr.flags & abi::flag_type_mask);
        return next::close;
    }
    const auto cmd = static_cast<command>(m.hdr.command);
    if (cmd == command::version) {
        return version(m);
    }
    if (!_negotiated) {   // spec: VERSION is the first message
        reply_error(m, EINVAL);
        return next::close;
    }
    const bool takes_fds = cmd == command::dma_map || cmd == command::device_set_irqs;
    if (m.fds_truncated || (!m.fds.empty() && !takes_fds)) {
        reply_error(m, EINVAL);   // the fds close with the message
        return next::keep;
    }
    switch (cmd) {
    case command::dma_map: dma_map(m); break;
    case command::dma_unmap: dma_unmap(m); break;
    case command::device_get_info: device_info(m); break;
    case command::device_get_region_info: region_info(m); break;
    case command::device_get_irq_info: irq_info(m); break;
    case command::device_set_irqs: set_irqs(m); break;
    case command::region_read: region_read(m); break;
    case command::region_write: region_write(m); break;
    case command::device_reset: device_reset(m); break;
    default: reply_error(m, ENOSYS); break;   // incl. GET_REGION_IO_FDS, WRITE_MULTI, features
    }
    return next::keep;
}

// spec "VFIO_USER_VERSION": same major, minor at most the client's, our capabilities in the reply.
// A client we cannot talk to gets an error reply and the connection ends.
session::next session::version(const message& m) {
    if (_negotiated) {
        reply_error(m, EINVAL);
        return next::keep;
    }
    const auto v = abi::decode<abi::version>(m.payload);
    if (!v || !m.fds.empty()) {
        reply_error(m, EINVAL);
        return next::close;
    }
    if (v->major != abi::version_major) {
        log().warn("vfio-user server {}: client speaks version {}.{}, we {}.{}: closing", _srv._path, v->major,
                   v->minor, abi::version_major, abi::version_minor);
        reply_error(m, ENOTSUP);
        return next::close;
    }
    abi::caps theirs;
    const auto rest = std::span<const std::byte>(m.payload).subspan(sizeof(abi::version));
    if (!rest.empty()) {
        const auto nul = std::find(rest.begin(), rest.end(), std::byte{0});
        const auto c = nul == rest.end()
                           ? std::nullopt
                           : abi::parse_caps(std::string_view(reinterpret_cast<const char*>(rest.data()),
                                                              static_cast<std::size_t>(nul - rest.begin())));
        if (!c || c->max_data_xfer_size == 0) {
            log().warn("vfio-user server {}: malformed capabilities in VERSION: closing", _srv._path);
            reply_error(m, EINVAL);
            return next::close;
        }
        theirs = *c;
    }
    _client = theirs;
    abi::caps ours;
    ours.max_msg_fds = _srv._options.max_msg_fds;
    ours.max_data_xfer_size = _srv._options.max_data_xfer_size;
    // QEMU's client refuses more than the spec's default, 65535 (hw/vfio-user/proxy.c
    // check_max_dma: "max_dma_maps too large", the server may only lower it), kernel type1's
    // dma_entry_limit default too; the server's own limit may be higher, and is what it enforces
    ours.max_dma_maps = std::min(_srv._options.max_dma_maps, abi::caps{}.max_dma_maps);
    std::array<char, 256> json{};
    const std::size_t n = abi::write_caps(ours, json);
    std::vector<std::byte> out(sizeof(abi::version) + n);
    abi::encode(std::span<std::byte>(out), 0,
                abi::version{abi::version_major, std::min(v->minor, abi::version_minor)});
    std::memcpy(out.data() + sizeof(abi::version), json.data(), n);
    reply(m, out);
    _negotiated = true;
    return next::keep;
}

// spec "VFIO_USER_DMA_MAP": one fd (its file mapped once for all its windows: dma_files.hpp) or
// none (reached by DMA_READ/WRITE); EEXIST over an existing window.
void session::dma_map(message& m) {
    const auto req = abi::decode<abi::dma_map>(m.payload);
    if (!req || req->argsz < sizeof(abi::dma_map) ||
        (req->flags & ~(abi::dma_flag_read | abi::dma_flag_write)) != 0 || m.fds.size() > 1) {
        reply_error(m, EINVAL);
        return;
    }
    if (_srv._dma.window_count() >= _srv._options.max_dma_maps) {
        reply_error(m, ENOSPC);
        return;
    }
    const int fd = m.fds.empty() ? -1 : m.fds.take(0);
    const int err = _srv._dma.map(req->address, req->size, (req->flags & abi::dma_flag_read) != 0,
                                  (req->flags & abi::dma_flag_write) != 0, fd, fd >= 0 ? req->offset : 0);
    if (fd >= 0) {
        ::close(fd);   // the mapping holds the file
    }
    if (err != 0) {
        reply_error(m, err);
        return;
    }
    reply(m, {});
}

// spec "VFIO_USER_DMA_UNMAP": the windows inside the span are dropped before the reply, which
// echoes the request when argsz leaves room for it. The spec asks for exactly an earlier window;
// QEMU unmaps a whole IOMMU address space in power-of-two spans when the guest switches a
// device's domain (hw/i386/intel_iommu.c vtd_address_space_unmap), spans that hold many windows
// or none, as kernel type1 takes them (dma_space::unmap). VFIO_DMA_UNMAP_FLAG_ALL with address
// and size 0 drops every window, as vfio_dma_do_unmap does.
void session::dma_unmap(const message& m) {
    const auto req = abi::decode<abi::dma_unmap>(m.payload);
    if (!req || (req->flags & ~abi::dma_unmap_flag_all) != 0) {
        reply_error(m, EINVAL);
        return;
    }
    if (req->flags == abi::dma_unmap_flag_all) {
        if (req->address != 0 || req->size != 0) {
            reply_error(m, EINVAL);
            return;
        }
        _srv._dma.unmap_every_window();
    } else if (const int err = _srv._dma.unmap(req->address, req->size); err != 0) {
        reply_error(m, err);
        return;
    }
    if (req->argsz >= sizeof(abi::dma_unmap)) {
        reply(m, std::span<const std::byte>(m.payload).first(sizeof(abi::dma_unmap)));
    } else {
        reply(m, {});
    }
}

void session::device_info(const message& m) {
    const auto req = abi::decode<abi::device_info>(m.payload);
    if (!req || req->argsz < sizeof(abi::device_info)) {
        reply_error(m, EINVAL);
        return;
    }
    const abi::device_info out{sizeof(abi::device_info), abi::device_flag_reset | abi::device_flag_pci, region_count,
                               irq_kind_count};
    reply(m, bytes_of(out));
}

// spec "VFIO_USER_DEVICE_GET_REGION_INFO". When the client's argsz is too small for the capability
// chain, argsz says how much is needed and CAPS is clear, as libvfio-user's
// handle_device_get_region_info (lib/libvfio-user.c) sets CAPS only when the chain fits. Kernel
// vfio-pci sets CAPS with cap_offset 0 there, but QEMU's vfio-user client
// (hw/vfio-user/device.c vfio_user_device_io_get_region_info) refuses CAPS with a cap_offset
// below sizeof(vfio_region_info) with EINVAL before its caller (hw/vfio/device.c
// vfio_device_get_region_info) could ask again with the larger argsz; clients that retry (that
// one, and Rig's driver/vfio_user) look at argsz alone. The fd goes with every reply for a region
// with shared pages (QEMU closes the first one when it asks again).
void session::region_info(const message& m) {
    const auto req = abi::decode<abi::region_info>(m.payload);
    if (!req || req->argsz < sizeof(abi::region_info) || req->index >= region_count) {
        reply_error(m, EINVAL);
        return;
    }
    const region_desc d = _srv._dev.region(req->index);
    const auto areas = _client.max_msg_fds >= 1 ? usable_areas(d) : std::vector<shared_area>{};
    const bool mmap = d.size != 0 && !areas.empty();
    const std::size_t cap_bytes =
        mmap ? sizeof(abi::cap_header) + sizeof(abi::sparse_mmap) + areas.size() * sizeof(abi::sparse_area) : 0;
    const std::size_t full = sizeof(abi::region_info) + cap_bytes;
    const bool fits = req->argsz >= full;
    abi::region_info info{static_cast<std::uint32_t>(full), 0, req->index, 0, d.size, mmap ? d.fd_offset : 0};
    if (d.size != 0) {
        info.flags |= (d.readable ? abi::region_flag_read : 0) | (d.writable ? abi::region_flag_write : 0);
    }
    if (mmap) {
        info.flags |= abi::region_flag_mmap;
    }
    if (mmap && fits) {
        info.flags |= abi::region_flag_caps;
        info.cap_offset = static_cast<std::uint32_t>(sizeof(abi::region_info));
    }
    std::vector<std::byte> out(fits ? full : sizeof(abi::region_info));
    std::span<std::byte> o(out);
    abi::encode(o, 0, info);
    if (mmap && fits) {
        std::size_t at = sizeof(abi::region_info);
        abi::encode(o, at, abi::cap_header{abi::cap_sparse_mmap, abi::cap_sparse_mmap_version, 0});
        at += sizeof(abi::cap_header);
        abi::encode(o, at, abi::sparse_mmap{static_cast<std::uint32_t>(areas.size()), 0});
        at += sizeof(abi::sparse_mmap);
        for (const shared_area& a : areas) {
            abi::encode(o, at, abi::sparse_area{a.offset, a.size});
            at += sizeof(abi::sparse_area);
        }
    }
    const int fd = d.fd;
    reply(m, out, mmap ? std::span<const int>(&fd, 1) : std::span<const int>());
}

void session::irq_info(const message& m) {
    const auto req = abi::decode<abi::irq_info>(m.payload);
    if (!req || req->argsz < sizeof(abi::irq_info) || req->index >= irq_kind_count) {
        reply_error(m, EINVAL);
        return;
    }
    const std::uint32_t count = _srv.vectors(req->index);
    std::uint32_t flags = 0;
    if (count > 0) {
        flags = abi::irq_info_eventfd | (req->index == static_cast<unsigned>(irq::intx)
                                             ? abi::irq_info_maskable | abi::irq_info_automasked
                                             : abi::irq_info_noresize);
    }
    const abi::irq_info out{sizeof(abi::irq_info), flags, req->index, count};
    reply(m, bytes_of(out));
}

// spec "VFIO_USER_DEVICE_SET_IRQS" (QEMU docs/interop/vfio-user.rst). One data kind and one action
// per message.
void session::set_irqs(message& m) {
    const auto req = abi::decode<abi::irq_set>(m.payload);
    if (!req || req->argsz < sizeof(abi::irq_set) || req->index >= irq_kind_count) {
        reply_error(m, EINVAL);
        return;
    }
    const std::uint32_t data = req->flags & abi::irq_set_data_mask;
    const std::uint32_t action = req->flags & abi::irq_set_action_mask_bits;
    if (std::popcount(data) != 1 || std::popcount(action) != 1 ||
        (req->flags & ~(abi::irq_set_data_mask | abi::irq_set_action_mask_bits)) != 0 ||
        (!m.fds.empty() && data != abi::irq_set_data_eventfd)) {
        reply_error(m, EINVAL);
        return;
    }
    const bool intx = req->index == static_cast<unsigned>(irq::intx);
    std::lock_guard g(_srv._irq_lock);
    auto& s = _srv._irqs[req->index];
    const std::size_t vectors = s.fds.size();
    // DATA_NONE | ACTION_TRIGGER with start = count = 0: disable the whole index
    if (data == abi::irq_set_data_none && action == abi::irq_set_action_trigger && req->start == 0 &&
        req->count == 0) {
        s.disable();
        reply(m, {});
        return;
    }
    if (req->count == 0 || req->start > vectors || req->count > vectors - req->start) {
        reply_error(m, EINVAL);
        return;
    }
    if (data == abi::irq_set_data_bool && m.payload.size() - sizeof(abi::irq_set) < req->count) {
        reply_error(m, EINVAL);
        return;
    }
    auto chosen = [&](std::uint32_t i) {
        return data != abi::irq_set_data_bool || m.payload[sizeof(abi::irq_set) + i] != std::byte{0};
    };
    if (data == abi::irq_set_data_eventfd) {
        if (action != abi::irq_set_action_trigger || (!m.fds.empty() && m.fds.size() != req->count)) {
            reply_error(m, EINVAL);   // mask/unmask notification eventfds are not offered
            return;
        }
        for (std::uint32_t i = 0; i < req->count; ++i) {   // no fds: de-assign the range
            int& fd = s.fds[req->start + i];
            if (fd >= 0) {
                ::close(fd);
            }
            fd = m.fds.empty() ? -1 : m.fds.take(i);
        }
        reply(m, {});
        return;
    }
    if (action == abi::irq_set_action_trigger) {   // the client fires the interrupt itself
        for (std::uint32_t i = 0; i < req->count; ++i) {
            if (chosen(i)) {
                _srv.trigger_locked(req->index, req->start + i);
            }
        }
        reply(m, {});
        return;
    }
    if (!intx) {   // only INTx is MASKABLE (irq_info)
        reply_error(m, EINVAL);
        return;
    }
    if (chosen(0)) {
        if (action == abi::irq_set_action_mask) {
            s.masked = true;
        } else {
            s.masked = false;
            if (s.pending) {
                s.pending = false;
                _srv.trigger_locked(req->index, 0);
            }
        }
    }
    reply(m, {});
}

// spec "VFIO_USER_REGION_READ/WRITE": inside the region, at most max_data_xfer_size bytes; shared
// pages from the device's mapping, the rest through the device's callbacks.
void session::region_read(const message& m) {
    const auto req = abi::decode<abi::region_access>(m.payload);
    if (!req || m.payload.size() != sizeof(abi::region_access) || req->region >= region_count ||
        req->count > _srv._options.max_data_xfer_size) {
        reply_error(m, EINVAL);
        return;
    }
    const region_desc d = _srv._dev.region(req->region);
    if (d.size == 0 || !d.readable || req->offset > d.size || req->count > d.size - req->offset) {
        reply_error(m, EINVAL);
        return;
    }
    std::vector<std::byte> out(sizeof(abi::region_access) + req->count);
    abi::encode(std::span<std::byte>(out), 0, *req);
    const std::span<std::byte> data = std::span<std::byte>(out).subspan(sizeof(abi::region_access));
    if (inside_one(usable_areas(d), req->offset, req->count)) {
        std::memcpy(data.data(), d.memory + req->offset, req->count);
    } else if (!_srv._dev.read(req->region, req->offset, data)) {
        reply_error(m, EIO);
        return;
    }
    reply(m, out);
}

void session::region_write(const message& m) {
    const auto req = abi::decode<abi::region_access>(m.payload);
    if (!req || m.payload.size() - sizeof(abi::region_access) != req->count || req->region >= region_count ||
        req->count > _srv._options.max_data_xfer_size) {
        reply_error(m, EINVAL);
        return;
    }
    const region_desc d = _srv._dev.region(req->region);
    if (d.size == 0 || !d.writable || req->offset > d.size || req->count > d.size - req->offset) {
        reply_error(m, EINVAL);
        return;
    }
    const auto data = std::span<const std::byte>(m.payload).subspan(sizeof(abi::region_access));
    if (inside_one(usable_areas(d), req->offset, req->count)) {
        std::memcpy(d.memory + req->offset, data.data(), req->count);
    } else if (!_srv._dev.write(req->region, req->offset, data)) {
        reply_error(m, EIO);
        return;
    }
    reply(m, std::span<const std::byte>(m.payload).first(sizeof(abi::region_access)));
}

void session::device_reset(const message& m) {
    _srv._dev.reset();
    reply(m, {});
}

// ---- the server's own commands: DMA_READ/WRITE for windows without fd ---------------------------

bool session::in_band(bool is_write, std::uint64_t iova, std::byte* p, std::size_t n) {
    const std::size_t chunk = std::min<std::size_t>(_client.max_data_xfer_size, _srv._options.max_data_xfer_size);
    const auto cmd = static_cast<std::uint16_t>(is_write ? command::dma_write : command::dma_read);
    std::vector<std::byte> out;
    for (std::size_t done = 0; done < n;) {
        if (_broken) {
            return false;
        }
        const std::size_t k = std::min(chunk, n - done);
        const abi::dma_access head{iova + done, k};
        out.assign(sizeof head + (is_write ? k : 0), std::byte{0});
        abi::encode(std::span<std::byte>(out), 0, head);
        if (is_write) {
            std::memcpy(out.data() + sizeof head, p + done, k);
        }
        const abi::header h{++_next_id, cmd, static_cast<std::uint32_t>(abi::header_size + out.size()),
                            abi::flag_type_command, 0};
        const auto deadline = clock::now() + _srv._options.io_timeout;
        message r;
        if (!send_message(_conn, h, out, {}, deadline, _srv._wake) ||
            !receive_message(_conn, r, _max_payload, _srv._options.max_msg_fds, deadline, _srv._wake)) {
            _broken = true;
            return false;
        }
        // A synchronous client sends nothing else while it waits for our reply; anything but the
        // answer leaves the stream in a state we do not untangle.
        if ((r.hdr.flags & abi::flag_type_mask) != abi::flag_type_reply || r.hdr.msg_id != h.msg_id ||
            r.hdr.command != cmd || !r.fds.empty()) {
            log().warn("vfio-user server {}: no answer to our {}: closing the connection", _srv._path,
                       abi::command_name(cmd));
            _broken = true;
            return false;
        }
        if ((r.hdr.flags & abi::flag_error) != 0) {
            return false;
        }
        const auto echo = abi::decode<abi::dma_access>(r.payload);
        if (is_write ? r.payload.size() < abi::dma_write_reply_min
                     : (!echo || echo->address != head.address || echo->count != k ||
                        r.payload.size() != sizeof head + k)) {
            _broken = true;
            return false;
        }
        if (!is_write) {
            std::memcpy(p + done, r.payload.data() + sizeof head, k);
        }
        done += k;
    }
    return true;
}

bool session::dma_read(std::uint64_t iova, std::span<std::byte> out) {
    return in_band(false, iova, out.data(), out.size());
}

bool session::dma_write(std::uint64_t iova, std::span<const std::byte> in) {
    return in_band(true, iova, const_cast<std::byte*>(in.data()), in.size());
}

}  // namespace rig::sim::vfio_user
