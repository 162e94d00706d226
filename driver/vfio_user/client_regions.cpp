// The vfio-user client: regions (config space, BARs, sparse mmap) and interrupts.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "driver/vfio_user/client.hpp"

namespace rig::driver::vfio_user_detail {

namespace abi = rig::vfio_user::abi;
using abi::command;

// ---- regions ------------------------------------------------------------------------------------

// spec "VFIO_USER_DEVICE_GET_REGION_INFO": ask with argsz = 32; when the reply says it needs more
// (a capability chain), ask again with that argsz. The last reply's fd is the one to mmap.
result<client::region_entry> client::query_region(region index) {
    constexpr std::string_view what = "VFIO_USER_DEVICE_GET_REGION_INFO";
    const auto idx = static_cast<std::uint32_t>(index);
    if (idx >= _num_regions) {
        return std::unexpected(fail(what, _name, "no region " + std::to_string(idx), EINVAL));
    }
    std::uint32_t argsz = sizeof(abi::region_info);
    result<message> m;
    std::optional<abi::region_info> ri;
    for (int pass = 0; pass < 2; ++pass) {
        const abi::region_info req{argsz, 0, idx, 0, 0, 0};
        m = call(command::device_get_region_info, bytes_of(req));
        if (!m) {
            return std::unexpected(m.error());
        }
        ri = abi::decode<abi::region_info>(m->payload);
        if (!ri || ri->index != idx) {
            return std::unexpected(fail(what, _name, "reply is not region " + std::to_string(idx), EPROTO));
        }
        if (ri->argsz <= m->payload.size()) {
            break;
        }
        if (pass == 1 || ri->argsz > max_region_info) {
            return std::unexpected(fail(what, _name, "region info of " + std::to_string(ri->argsz) +
                                                         " bytes does not fit", EPROTO));
        }
        argsz = ri->argsz;
    }
    const std::span<const std::byte> p = m->payload;
    region_entry e;
    e.info.index = index;
    e.info.size = ri->size;
    e.info.readable = (ri->flags & abi::region_flag_read) != 0;
    e.info.writable = (ri->flags & abi::region_flag_write) != 0;
    e.mmap_offset = ri->offset;
    auto bad = [&](std::string why) { return std::unexpected(fail(what, _name, std::move(why), EPROTO)); };

    bool sparse = false;
    std::vector<area> areas;
    if ((ri->flags & abi::region_flag_caps) != 0) {
        // the chain: offsets from the start of region_info, each further than the last, all inside
        for (std::uint32_t at = ri->cap_offset, hops = 0; at != 0; ++hops) {
            const auto cap = abi::decode<abi::cap_header>(p, at);
            if (at < sizeof(abi::region_info) || !cap || hops >= 16) {
                return bad("capability chain leaves the reply at offset " + std::to_string(at));
            }
            if (cap->id == abi::cap_sparse_mmap) {
                const auto sm = abi::decode<abi::sparse_mmap>(p, at + sizeof(abi::cap_header));
                const std::size_t first = at + sizeof(abi::cap_header) + sizeof(abi::sparse_mmap);
                if (cap->version != abi::cap_sparse_mmap_version || !sm ||
                    sm->nr_areas > (p.size() - std::min(first, p.size())) / sizeof(abi::sparse_area)) {
                    return bad("sparse mmap capability truncated or of an unknown version");
                }
                for (std::uint32_t i = 0; i < sm->nr_areas; ++i) {
                    const auto a = *abi::decode<abi::sparse_area>(p, first + i * sizeof(abi::sparse_area));
                    if (a.size == 0 || a.offset % page != 0 || a.size % page != 0 || a.offset > ri->size ||
                        a.size > ri->size - a.offset) {
                        return bad("sparse area " + std::to_string(i) + " not page aligned inside the region");
                    }
                    areas.push_back({a.offset, a.size});
                }
                sparse = true;
            }
            if (cap->next != 0 && cap->next <= at) {
                return bad("capability chain loops");
            }
            at = cap->next;
        }
    }
    if ((ri->flags & abi::region_flag_mmap) != 0) {
        if (m->fds.size() != 1) {
            return bad("mmappable region came with " + std::to_string(m->fds.size()) + " fds, not 1");
        }
        if (ri->offset % page != 0) {
            return bad("region's mmap offset not page aligned");
        }
        if (!sparse && ri->size > 0) {
            areas.push_back({0, (ri->size + page - 1) / page * page});
        }
        e.info.mappable = std::move(areas);
        e.fd = m->fds.take(0);
    }
    return e;
}

result<region_info> client::get_region_info(region index) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    auto e = query_region(index);
    if (!e) {
        return std::unexpected(e.error());
    }
    if (e->fd >= 0) {
        ::close(e->fd);
    }
    return e->info;
}

result<bar_mapping> client::map_bar(region index, caching mode) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    const auto idx = static_cast<unsigned>(index);
    if (idx >= bar_count) {
        return std::unexpected(fail("map_bar", _name, "region " + std::to_string(idx) + " is not a BAR", EINVAL));
    }
    // One mapping per caching asked for: the server's pages are ordinary memory, so a
    // write-combining request (the UAR's) gets its own mapping of them, apart from the uncached
    // one bring-up made, both really write-back.
    if (auto it = _bars.find({idx, mode}); it != _bars.end()) {
        return it->second;
    }
    auto e = query_region(index);
    if (!e) {
        return std::unexpected(e.error());
    }
    struct fd_closer {
        int fd;
        ~fd_closer() {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    } closer{e->fd};
    if (e->info.size == 0) {
        return std::unexpected(fail("map_bar", _name, "BAR " + std::to_string(idx) + " is not implemented", ENODEV));
    }
    // The whole BAR is reserved inaccessible; the shared areas are mapped over it at their offsets.
    const std::size_t reserved = (e->info.size + page - 1) / page * page;
    void* base = ::mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return std::unexpected(os_error("mmap (reserve a BAR)", _name, errno));
    }
    const int prot = (e->info.readable ? PROT_READ : 0) | (e->info.writable ? PROT_WRITE : 0);
    for (const area& a : e->info.mappable) {
        void* p = ::mmap(static_cast<std::byte*>(base) + a.offset, a.size, prot, MAP_SHARED | MAP_FIXED,
                         e->fd, static_cast<off_t>(e->mmap_offset + a.offset));
        if (p == MAP_FAILED) {
            const int err = errno;
            ::munmap(base, reserved);
            return std::unexpected(os_error("mmap of a BAR area", _name, err));
        }
    }
    // A child of fork() gets none of the BAR: no doorbell of this process's queues in its hands.
    static_cast<void>(::madvise(base, reserved, MADV_DONTFORK));
    bar_mapping b{index, static_cast<std::byte*>(base), e->info.size, e->info.mappable, caching::write_back};
    _bars.emplace(std::pair{idx, mode}, b);
    return b;
}

result<void> client::region_read(region index, std::uint64_t offset, std::span<std::byte> out) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    constexpr std::string_view what = "VFIO_USER_REGION_READ";
    const auto idx = static_cast<std::uint32_t>(index);
    if (idx >= _num_regions || offset + out.size() < offset) {
        return std::unexpected(fail(what, _name, "no such region or range", EINVAL));
    }
    for (std::size_t done = 0; done < out.size();) {
        const auto n = static_cast<std::uint32_t>(std::min(out.size() - done, _xfer));
        const abi::region_access req{offset + done, idx, n};
        auto m = call(command::region_read, bytes_of(req));
        if (!m) {
            return std::unexpected(m.error());
        }
        const auto rep = abi::decode<abi::region_access>(m->payload);
        if (!rep || rep->offset != req.offset || rep->region != idx || rep->count != n ||
            m->payload.size() != 16 + std::size_t{n}) {
            return std::unexpected(fail(what, _name, "reply does not match the read", EPROTO));
        }
        std::memcpy(out.data() + done, m->payload.data() + 16, n);
        done += n;
    }
    return {};
}

result<void> client::region_write(region index, std::uint64_t offset, std::span<const std::byte> in) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    constexpr std::string_view what = "VFIO_USER_REGION_WRITE";
    const auto idx = static_cast<std::uint32_t>(index);
    if (idx >= _num_regions || offset + in.size() < offset) {
        return std::unexpected(fail(what, _name, "no such region or range", EINVAL));
    }
    std::vector<std::byte> req;
    for (std::size_t done = 0; done < in.size();) {
        const auto n = static_cast<std::uint32_t>(std::min(in.size() - done, _xfer));
        const abi::region_access head{offset + done, idx, n};
        req.resize(16 + std::size_t{n});
        abi::encode(std::span<std::byte>(req), 0, head);
        std::memcpy(req.data() + 16, in.data() + done, n);
        auto m = call(command::region_write, req);
        if (!m) {
            return std::unexpected(m.error());
        }
        const auto rep = abi::decode<abi::region_access>(m->payload);
        if (!rep || rep->offset != head.offset || rep->region != idx || rep->count != n) {
            return std::unexpected(fail(what, _name, "reply does not match the write", EPROTO));
        }
        done += n;
    }
    return {};
}

result<void> client::config_read(std::uint32_t offset, std::span<std::byte> out) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    return region_read(region::config, offset, out);
}

result<void> client::config_write(std::uint32_t offset, std::span<const std::byte> in) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    return region_write(region::config, offset, in);
}

// ---- interrupts ---------------------------------------------------------------------------------

result<irq_info> client::get_irq_info(irq_kind kind) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    constexpr std::string_view what = "VFIO_USER_DEVICE_GET_IRQ_INFO";
    const auto idx = static_cast<std::uint32_t>(kind);
    if (idx >= _num_irqs) {
        return irq_info{kind, 0, false, false, false};
    }
    const abi::irq_info req{sizeof(abi::irq_info), 0, idx, 0};
    auto m = call(command::device_get_irq_info, bytes_of(req));
    if (!m) {
        return std::unexpected(m.error());
    }
    const auto rep = abi::decode<abi::irq_info>(m->payload);
    if (!rep || rep->index != idx) {
        return std::unexpected(fail(what, _name, "reply is not irq index " + std::to_string(idx), EPROTO));
    }
    return irq_info{kind, rep->count, (rep->flags & abi::irq_info_eventfd) != 0,
                    (rep->flags & abi::irq_info_maskable) != 0, (rep->flags & abi::irq_info_automasked) != 0};
}

// spec "VFIO_USER_DEVICE_SET_IRQS" with DATA_EVENTFD | ACTION_TRIGGER, in as many messages as the
// server's max_msg_fds requires, each naming its `start` (the spec's "Interrupts").
result<std::vector<int>> client::enable_irqs(irq_kind kind, std::uint32_t count) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    constexpr std::string_view what = "VFIO_USER_DEVICE_SET_IRQS";
    const auto idx = static_cast<std::uint32_t>(kind);
    auto info = get_irq_info(kind);
    if (!info) {
        return std::unexpected(info.error());
    }
    if (count == 0 || count > info->count || !info->eventfd) {
        return std::unexpected(fail(what, _name, "the function offers " + std::to_string(info->count) +
                                                     " eventfd vectors of this kind", EINVAL));
    }
    if (_server.max_msg_fds == 0) {
        return std::unexpected(fail(what, _name, "server takes no fds", ENOTSUP));
    }
    if (!_irq_fds[idx].empty()) {
        if (auto r = disable_irqs(kind); !r) {
            return std::unexpected(r.error());
        }
    }
    std::vector<int> fds;
    auto close_all = [&] {
        for (int fd : fds) {
            ::close(fd);
        }
    };
    for (std::uint32_t i = 0; i < count; ++i) {
        const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) {
            const int err = errno;
            close_all();
            return std::unexpected(os_error("eventfd", _name, err));
        }
        fds.push_back(fd);
    }
    for (std::uint32_t start = 0; start < count;) {
        const std::uint32_t n = std::min(count - start, _server.max_msg_fds);
        const abi::irq_set req{sizeof(abi::irq_set), abi::irq_set_data_eventfd | abi::irq_set_action_trigger,
                               idx, start, n};
        if (auto m = call(command::device_set_irqs, bytes_of(req), std::span<const int>(fds).subspan(start, n)); !m) {
            close_all();
            if (start > 0 && _sock >= 0) {
                const abi::irq_set off{sizeof(abi::irq_set), abi::irq_set_data_none | abi::irq_set_action_trigger,
                                       idx, 0, 0};
                (void)call(command::device_set_irqs, bytes_of(off));
            }
            return std::unexpected(m.error());
        }
        start += n;
    }
    _irq_fds[idx] = fds;
    return fds;
}

// DATA_NONE | ACTION_TRIGGER with start = count = 0 disables the whole index (spec SET_IRQS).
result<void> client::disable_irqs(irq_kind kind) {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    const auto idx = static_cast<std::uint32_t>(kind);
    const abi::irq_set req{sizeof(abi::irq_set), abi::irq_set_data_none | abi::irq_set_action_trigger, idx, 0, 0};
    auto m = call(command::device_set_irqs, bytes_of(req));
    for (int fd : _irq_fds[idx]) {
        ::close(fd);
    }
    _irq_fds[idx].clear();
    if (!m) {
        return std::unexpected(m.error());
    }
    return {};
}

result<void> client::unmask_intx() {
    std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
    const abi::irq_set req{sizeof(abi::irq_set), abi::irq_set_data_none | abi::irq_set_action_unmask,
                           static_cast<std::uint32_t>(irq_kind::intx), 0, 1};
    auto m = call(command::device_set_irqs, bytes_of(req));
    if (!m) {
        return std::unexpected(m.error());
    }
    return {};
}

}  // namespace rig::driver::vfio_user_detail
