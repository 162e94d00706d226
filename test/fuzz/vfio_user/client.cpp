// Fuzzes the driver's vfio-user client (driver/vfio_user: client.cpp, client_regions.cpp; framing
// by transport/vfio_user/socket.cpp) from a hostile server. The client is the one open_vfio_user
// makes, on one end of a socketpair; a scripted server answers on the other end from a thread of
// its own (the client's calls are synchronous: something must answer while one waits). The
// input is split in two: the first part chooses the client's calls after start() (config and
// region reads and writes, region and IRQ info, map_bar, DMA map and unmap with and without fd,
// enabling, disabling and unmasking interrupts, reset, release), the second how the server
// answers each request: rightly (as our model would), with an error and any errno, with a wrong
// id, command or type, with a field changed (versions, capability JSON, device flags, region
// info with capability chains and sparse areas, IRQ info, read and write echoes, sizes), with
// extra fds, with a lying size, by closing, or after its own DMA_READ/WRITE or unknown command.
//
// Oracle (spec: QEMU docs/interop/vfio-user.rst; client.hpp):
//  - every call returns within its deadline with a value or a named error (std::expected), and
//    throws nothing (the harness makes no misuse);
//  - a call whose reply contradicts its request (an error reply, another id, command or type, a
//    region or IRQ index other than asked, a read or write echo other than sent, a read reply of
//    another size, a refused version, a stream that breaks or closes) fails;
//  - a region's mappable areas, when info is given, are page aligned inside the region;
//  - the client's requests are well formed (known command, argsz, chunks no larger than the
//    server's max_data_xfer_size, no more fds than its max_msg_fds), and it answers the server's
//    DMA_READ/WRITE inside its windows and refuses them outside (EFAULT) or when malformed;
//  - no fd is left behind once the client is gone.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <sys/mman.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

#include "abi/vfio_user/protocol.hpp"
#include "driver/dma_memory.hpp"
#include "driver/log.hpp"
#include "driver/vfio_user/client.hpp"
#include "test/fuzz/reader.hpp"
#include "test/fuzz/scratch_dir.hpp"
#include "test/fuzz/vfio_user/script.hpp"
#include "transport/vfio_user/socket.hpp"

namespace {

namespace abi = rig::vfio_user::abi;
namespace tr = rig::vfio_user::transport;
namespace drv = rig::driver;
using namespace std::chrono_literals;
using abi::command;
using rig::fuzz::one_of;
using rig::fuzz::put;
using rig::fuzz::reader;
using rig::fuzz::require;

constexpr auto call_bound = 2s;        // the hang oracle: a call returns within this
constexpr auto peer_bound = 4s;        // the server waits this long for the client's next request
constexpr std::size_t max_calls = 24;
constexpr std::uint64_t page = 4096;
constexpr std::size_t memory_bytes = 64 * 1024;

// What lives for the whole run: memory the client maps for DMA, a file a region is shared by.
struct world {
    drv::dma_memory memory;
    int region_fd = -1;
    std::size_t fds_at_rest = 0;
    world() {
        rig::driver::log().flush();   // the logger's statics outlive ours (made first, go last)
        auto m = drv::dma_memory::allocate(memory_bytes, drv::page_choice::small_only);
        require(m.has_value(), "dma_memory::allocate");
        memory = std::move(*m);
        region_fd = ::memfd_create("rig-fuzz-bar", MFD_CLOEXEC);
        require(region_fd >= 0 && ::ftruncate(region_fd, 64 * 1024) == 0, "memfd");
        fds_at_rest = rig::fuzz::open_fd_count();
    }
    ~world() { ::close(region_fd); }
};

world& the_world() {
    static world w;
    return w;
}

// A change one time in n, never once the bytes have run out: a script's tail is a right server.
bool rarely(reader& r, unsigned n) { return r.pick(n) == 1; }

// ---- the scripted server ------------------------------------------------------------------------

// A window the client announced and the server accepted.
struct window {
    std::uint64_t iova;
    std::uint64_t size;
    bool reads;
    bool writes;
};

class server_script {
public:
    server_script(int sock, reader r, int region_fd) : _sock(sock), _r(r), _region_fd(region_fd) {}

    // Serves until the client closes (or the script closes first).
    void run() {
        while (!_closed) {
            tr::message q;
            const auto got = tr::receive_message(_sock, q, 2 * 1024 * 1024, 16, tr::clock::now() + peer_bound);
            require(got.status != tr::io::timeout, "the client finishes what it sends");
            if (!got) {
                require(got.status == tr::io::closed, "the client frames its requests");
                return;
            }
            check_request(q);
            answer(q);
        }
    }

    // Set when a reply contradicted its request: the call that sent it must fail.
    std::atomic<bool> contradicted{false};

private:
    void check_request(const tr::message& q);
    void answer(const tr::message& q);
    bool reply_to(const tr::message& q, std::vector<std::byte> payload, std::vector<int> fds, bool agrees);
    std::vector<std::byte> right_payload(const tr::message& q, std::vector<int>& fds, bool& agrees);
    std::vector<std::byte> version_payload(bool& agrees);
    std::vector<std::byte> region_info_payload(const tr::message& q, std::vector<int>& fds, bool& agrees);
    void own_command();
    void send(const abi::header& h, std::span<const std::byte> p, std::span<const int> fds = {}) {
        if (!_closed && !tr::send_message(_sock, h, p, fds, tr::clock::now() + peer_bound)) {
            _closed = true;   // the client gave up on us
        }
    }
    const window* find_window(std::uint64_t address, std::uint64_t count) const;

    int _sock;
    reader _r;
    int _region_fd;
    bool _closed = false;
    abi::caps _told;                 // what our VERSION reply announced
    std::vector<window> _windows;
    // windows whose DMA_UNMAP got no clean answer: the client may hold them still, or (releasing,
    // client::release) have let them go; DMA there may be served or refused
    std::vector<window> _doubtful;
    std::uint16_t _own_id = 0x8000;
};

void server_script::check_request(const tr::message& q) {
    require((q.hdr.flags & abi::flag_type_mask) == abi::flag_type_command && q.hdr.error_no == 0,
            "a request is a command");
    const auto cmd = static_cast<command>(q.hdr.command);
    const auto argsz = abi::decode<std::uint32_t>(q.payload);
    const bool takes_fds = cmd == command::dma_map || cmd == command::device_set_irqs;
    require(q.fds.size() <= (takes_fds ? _told.max_msg_fds : 0),
            "no more fds than the server takes");
    switch (cmd) {
    case command::version: require(q.payload.size() > 4, "VERSION with capabilities"); break;
    case command::device_get_info: require(argsz && *argsz == 16 && q.payload.size() == 16, "GET_INFO"); break;
    case command::device_get_region_info:
        require(argsz && *argsz >= 32 && q.payload.size() == 32 && *argsz <= drv::vfio_user_detail::max_region_info,
                "GET_REGION_INFO: the info, argsz saying how much the reply may hold");
        break;
    case command::device_get_irq_info: require(argsz && *argsz == 16 && q.payload.size() == 16, "GET_IRQ_INFO"); break;
    case command::device_set_irqs: require(argsz && *argsz == 20 && q.payload.size() == 20, "SET_IRQS"); break;
    case command::region_read:
    case command::region_write: {
        const auto a = abi::decode<abi::region_access>(q.payload);
        require(a && a->count > 0 && a->count <= _told.max_data_xfer_size, "REGION access within max_data_xfer_size");
        require(q.payload.size() == 16 + (cmd == command::region_write ? std::size_t{a->count} : 0),
                "REGION access as long as it says");
        break;
    }
    case command::dma_map: {
        const auto m = abi::decode<abi::dma_map>(q.payload);
        require(m && q.payload.size() == 32 && m->argsz == 32 && m->size > 0 && m->size % page == 0 &&
                    m->address % page == 0 && q.fds.size() <= 1,
                "DMA_MAP: whole pages, at most one fd");
        break;
    }
    case command::dma_unmap: require(q.payload.size() == 24 && argsz && *argsz == 24, "DMA_UNMAP"); break;
    case command::device_reset: require(q.payload.empty(), "RESET"); break;
    default: require(false, "the client sends only commands it knows"); break;
    }
}

const window* server_script::find_window(std::uint64_t address, std::uint64_t count) const {
    const window* best = nullptr;   // the last window at or below address, as client::find_window
    for (const window& w : _windows) {
        if (w.iova <= address && (best == nullptr || w.iova > best->iova)) {
            best = &w;
        }
    }
    if (best == nullptr || address - best->iova > best->size || count > best->size - (address - best->iova)) {
        return nullptr;
    }
    return best;
}

// The server's own DMA_READ/WRITE (or an unknown command), and the client's answer checked.
void server_script::own_command() {
    const unsigned kind = _r.pick(4);
    const bool is_read = kind < 2;
    const auto cmd = kind == 3 ? static_cast<command>(_r.u16()) : is_read ? command::dma_read : command::dma_write;
    std::uint64_t address = _r.u64();
    std::uint64_t count = std::uint64_t{1} << _r.pick(13);
    if (!_windows.empty() && !rarely(_r, 4)) {   // mostly inside a window
        const window& w = _windows[_r.u8() % _windows.size()];
        address = w.iova + (address % w.size);
        count = std::min(count, w.size - (address - w.iova));
    }
    if (rarely(_r, 16)) {
        count = _r.u64();
    }
    std::vector<std::byte> p;
    put(p, abi::dma_access{address, count});
    const bool honest = !rarely(_r, 8);
    if (cmd == command::dma_write && count <= 8192) {
        p.resize(16 + count - (honest ? 0 : 1), std::byte{0x6b});
    }
    const bool no_reply = rarely(_r, 8);
    const abi::header h{++_own_id, static_cast<std::uint16_t>(cmd), static_cast<std::uint32_t>(16 + p.size()),
                        abi::flag_type_command | (no_reply ? abi::flag_no_reply : 0), 0};
    send(h, p);
    const window* w = find_window(address, count);
    const bool allowed = (cmd == command::dma_read || cmd == command::dma_write) && count <= drv::vfio_user_detail::our_max_xfer &&
                         (cmd == command::dma_read || p.size() == 16 + count) && w != nullptr &&
                         (cmd == command::dma_read ? w->reads : w->writes);
    if (_closed || no_reply) {
        return;   // an answer to a no-reply command is not looked for
    }
    tr::message a;
    const auto got = tr::receive_message(_sock, a, 2 * 1024 * 1024, 16, tr::clock::now() + peer_bound);
    require(got.status != tr::io::timeout, "the client answers our command");
    if (!got) {
        _closed = true;
        return;
    }
    require((a.hdr.flags & abi::flag_type_mask) == abi::flag_type_reply && a.hdr.msg_id == h.msg_id &&
                a.hdr.command == h.command && a.fds.empty(),
            "the client's answer has our id and command");
    const bool doubtful = std::any_of(_doubtful.begin(), _doubtful.end(), [&](const window& d) {
        return address < d.iova + d.size && d.iova < address + std::max<std::uint64_t>(count, 1);
    });
    if (doubtful) {
        return;
    }
    if (allowed) {
        const auto echo = abi::decode<abi::dma_access>(a.payload);
        require((a.hdr.flags & abi::flag_error) == 0 && echo && echo->address == address && echo->count == count &&
                    a.payload.size() == 16 + (cmd == command::dma_read ? count : 0),
                "DMA inside a window the device may use is served");
    } else {
        require((a.hdr.flags & abi::flag_error) != 0 && a.hdr.error_no != 0 && a.payload.empty(),
                "DMA outside the windows, or malformed, is refused with an errno");
    }
}

// Sends the reply, maybe changed in one way. true: a success reply that agrees with the request.
bool server_script::reply_to(const tr::message& q, std::vector<std::byte> payload, std::vector<int> fds,
                             bool agrees) {
    abi::header h{q.hdr.msg_id, q.hdr.command, 0, abi::flag_type_reply, 0};
    switch (_r.pick(24)) {
    case 1: h.flags |= abi::flag_error; h.error_no = _r.pick(4) == 0 ? 0 : _r.u8(); payload.clear(); agrees = false; break;
    case 2: h.msg_id = static_cast<std::uint16_t>(h.msg_id + 1 + _r.u8()); agrees = false; break;
    case 3: h.command = static_cast<std::uint16_t>(_r.u16() | 0x100); agrees = false; break;
    case 4: h.flags = 2 + _r.pick(14); agrees = false; break;   // neither command nor reply
    case 5:   // longer: only a read's reply has an exact size
        payload.resize(payload.size() + 1 + _r.u8(), std::byte{0x33});
        agrees = agrees && q.hdr.command != static_cast<std::uint16_t>(command::region_read);
        break;
    case 6: fds.assign(9, _region_fd); agrees = false; break;   // more fds than it takes
    case 7: {   // a size that lies, then nothing more
        h.msg_size = _r.pick(2) == 0 ? 8 : 0x10000000;
        const auto b = std::as_bytes(std::span(&h, 1));
        (void)::send(_sock, b.data(), b.size(), MSG_NOSIGNAL);
        [[fallthrough]];
    }
    case 8:   // gone
        contradicted = true;
        ::shutdown(_sock, SHUT_RDWR);
        _closed = true;
        return false;
    default: break;
    }
    if (!agrees) {
        contradicted = true;
    }
    h.msg_size = static_cast<std::uint32_t>(abi::header_size + payload.size());
    send(h, payload, fds);
    return agrees && !_closed;
}


// VERSION's reply: 0.0 and our capabilities, or something else; agrees when the client must take it.
std::vector<std::byte> server_script::version_payload(bool& agrees) {
    std::vector<std::byte> p;
    const abi::version v{rarely(_r, 16) ? _r.u16() : abi::version_major, rarely(_r, 16) ? _r.u16() : abi::version_minor};
    put(p, v);
    agrees = v.major == abi::version_major && v.minor <= abi::version_minor;
    std::string json;
    const unsigned mode = _r.pick(6);
    if (mode == 1) {   // no capabilities: the spec's defaults
        _told = abi::caps{};
        return p;
    }
    if (mode == 2) {
        json = _r.sized_text(200);
    } else {
        json = "{\"capabilities\":{\"max_msg_fds\":" + std::to_string(one_of(_r, {8, 1, 0, 4})) +
               ",\"max_data_xfer_size\":" + std::to_string(one_of(_r, {1048576, 4096, 64, 1, 0})) +
               ",\"max_dma_maps\":" + std::to_string(one_of(_r, {65535, 2, 0})) +
               ",\"pgsizes\":" + std::to_string(one_of(_r, {4096, 0x201000})) +
               (rarely(_r, 2) ? ",\"migration\":{\"pgsize\":4096,\"max_bitmap_size\":8}" : "") +
               (rarely(_r, 8) ? ",\"twin_socket\":{\"supported\":true}" : "") +
               (rarely(_r, 4) ? ",\"write_multiple\":true" : "") + "}" + (rarely(_r, 2) ? ",\"x\":[1,{}]" : "") + "}";
        if (rarely(_r, 8)) {   // one character changed
            json[_r.u8() % json.size()] = static_cast<char>(_r.u8());
        }
    }
    const bool terminated = mode != 3;
    const auto text = std::string_view(json).substr(0, std::min(json.size(), json.find('\0')));
    const auto c = abi::parse_caps(text);
    agrees = agrees && terminated && c && !c->twin_socket && c->max_data_xfer_size != 0;
    _told = c ? *c : abi::caps{};
    const auto b = std::as_bytes(std::span(json.data(), json.size() + (terminated ? 1 : 0)));
    p.insert(p.end(), b.begin(), b.end());
    return p;
}

// GET_REGION_INFO's reply for a device like the model's test device (BAR0 16 KiB with two
// shared areas, BAR2 and config space 4 KiB, the rest absent), its chain maybe bent.
std::vector<std::byte> server_script::region_info_payload(const tr::message& q, std::vector<int>& fds, bool& agrees) {
    const auto asked = *abi::decode<abi::region_info>(q.payload);
    const std::uint32_t index = rarely(_r, 16) ? _r.u32() : asked.index;
    agrees = index == asked.index;
    std::uint64_t size = index == 0 ? 16 * 1024 : index == 2 || index == 7 ? 4096 : 0;
    if (rarely(_r, 16)) {
        size = _r.u64();
    }
    const bool mmap = index == 0 || rarely(_r, 16);
    std::vector<abi::sparse_area> areas;
    if (mmap) {
        areas = {{0x1000, 0x1000}, {0x2000, 0x2000}};
    }
    abi::cap_header cap{abi::cap_sparse_mmap, abi::cap_sparse_mmap_version, 0};
    abi::sparse_mmap sm{static_cast<std::uint32_t>(areas.size()), 0};
    const std::uint32_t full = mmap ? static_cast<std::uint32_t>(32 + 16 + 16 * areas.size()) : 32;
    abi::region_info info{full, abi::region_flag_read | abi::region_flag_write, index, 0, size, 0};
    const bool chain = mmap && asked.argsz >= full;
    if (mmap) {
        info.flags |= abi::region_flag_mmap;
        fds = {_region_fd};
    }
    if (chain) {
        info.flags |= abi::region_flag_caps;
        info.cap_offset = 32;
    }
    switch (_r.pick(12)) {
    case 1: info.argsz = _r.u32(); break;
    case 2: info.cap_offset = _r.pick(2) == 0 ? _r.u32() : _r.u8(); info.flags |= abi::region_flag_caps; break;
    case 3: cap.id = _r.u16(); cap.version = _r.u16(); break;
    case 4: cap.next = _r.pick(2) == 0 ? 32 : _r.u32(); break;   // a loop, or anywhere
    case 5: sm.nr_areas = _r.pick(2) == 0 ? _r.u32() : sm.nr_areas + 1; break;
    case 6: if (!areas.empty()) { areas[_r.u8() % areas.size()] = {_r.u64(), _r.u64()}; } break;
    case 7: fds = _r.pick(2) == 0 ? std::vector<int>{} : std::vector<int>{_region_fd, _region_fd}; break;
    case 8: info.offset = _r.u64(); break;
    case 9: info.flags = _r.u32(); break;
    default: break;
    }
    std::vector<std::byte> p;
    put(p, info);
    if (chain) {
        put(p, cap);
        put(p, sm);
        for (const auto& a : areas) {
            put(p, a);
        }
    }
    return p;
}

// The reply our model would give (agrees), maybe with one field changed (agrees then says whether
// the client may still take it).
std::vector<std::byte> server_script::right_payload(const tr::message& q, std::vector<int>& fds, bool& agrees) {
    std::vector<std::byte> p;
    agrees = true;
    switch (static_cast<command>(q.hdr.command)) {
    case command::version: return version_payload(agrees);
    case command::device_get_info: {
        const abi::device_info di{16, rarely(_r, 8) ? _r.u32() : abi::device_flag_reset | abi::device_flag_pci,
                                  rarely(_r, 8) ? _r.u32() : abi::pci_num_regions,
                                  rarely(_r, 8) ? _r.u32() : abi::pci_num_irqs};
        agrees = (di.flags & abi::device_flag_pci) != 0 && di.num_regions > abi::pci_config_region;
        put(p, di);
        return p;
    }
    case command::device_get_region_info: return region_info_payload(q, fds, agrees);
    case command::device_get_irq_info: {
        const auto asked = *abi::decode<abi::irq_info>(q.payload);
        const std::uint32_t index = rarely(_r, 16) ? _r.u32() : asked.index;
        agrees = index == asked.index;
        const std::uint32_t count = rarely(_r, 8) ? _r.u32() : asked.index == 0 ? 1 : asked.index == 2 ? 4 : 0;
        const std::uint32_t flags = rarely(_r, 8) ? _r.u32()
                                                  : abi::irq_info_eventfd | (asked.index == 0 ? abi::irq_info_maskable |
                                                                                                    abi::irq_info_automasked
                                                                                              : abi::irq_info_noresize);
        put(p, abi::irq_info{16, flags, index, count});
        return p;
    }
    case command::region_read:
    case command::region_write: {
        auto echo = *abi::decode<abi::region_access>(q.payload);
        const bool is_read = q.hdr.command == static_cast<std::uint16_t>(command::region_read);
        const std::uint32_t count = echo.count;
        switch (_r.pick(12)) {
        case 1: echo.offset ^= 1 + _r.u8(); agrees = false; break;
        case 2: echo.region ^= 1 + _r.u8(); agrees = false; break;
        case 3: echo.count ^= 1 + _r.u8(); agrees = false; break;
        case 4: if (is_read) { p.resize(1); agrees = false; } break;   // one data byte short
        default: break;
        }
        put(p, echo);
        if (is_read) {
            p.resize(p.size() + count - (p.size() > 16 ? 2 : 0), std::byte{0xa5});
        }
        return p;
    }
    case command::dma_unmap:
        if (rarely(_r, 2)) {
            p = q.payload;   // the echo the spec allows
        }
        return p;
    default: return p;   // DMA_MAP, SET_IRQS, RESET: nothing
    }
}

void server_script::answer(const tr::message& q) {
    for (unsigned i = 0; i < 3 && rarely(_r, 6) && !_closed; ++i) {
        own_command();   // the server's own commands come first
    }
    if (_closed) {
        return;
    }
    std::vector<int> fds;
    bool agrees = true;
    auto payload = right_payload(q, fds, agrees);
    const bool taken = reply_to(q, std::move(payload), std::move(fds), agrees);
    if (!taken) {
        if (q.hdr.command == static_cast<std::uint16_t>(command::dma_unmap)) {
            const auto u = *abi::decode<abi::dma_unmap>(q.payload);
            for (const window& w : _windows) {
                if (w.iova == u.address) {
                    _doubtful.push_back(w);
                }
            }
            std::erase_if(_windows, [&](const window& w) { return w.iova == u.address; });
        }
        return;
    }
    if (q.hdr.command == static_cast<std::uint16_t>(command::dma_map)) {
        const auto m = *abi::decode<abi::dma_map>(q.payload);
        _windows.push_back({m.address, m.size, (m.flags & abi::dma_flag_read) != 0, (m.flags & abi::dma_flag_write) != 0});
    } else if (q.hdr.command == static_cast<std::uint16_t>(command::dma_unmap)) {
        const auto u = *abi::decode<abi::dma_unmap>(q.payload);
        std::erase_if(_windows, [&](const window& w) { return w.iova == u.address; });
    }
}

// ---- the driver's side --------------------------------------------------------------------------

// What every call's result must be: in time, a named error, and an error when a reply contradicted.
template <class R>
void check_call(const R& result, tr::clock::time_point began, const server_script& peer) {
    require(tr::clock::now() - began < call_bound, "a call returns within its deadline");
    if (!result) {
        require(!result.error().message.empty(), "an error names what is wrong");
    } else {
        require(!peer.contradicted, "a reply that contradicts its request is never taken");
    }
}

void check_areas(std::uint64_t size, const std::vector<drv::area>& areas) {
    for (const drv::area& a : areas) {
        require(a.size > 0 && a.offset % page == 0 && a.size % page == 0 && a.offset <= ((size + page - 1) / page) * page &&
                    a.size <= ((size + page - 1) / page) * page - a.offset,
                "a mappable area lies page aligned inside its region");
    }
}

std::uint64_t offset_in(reader& r) {
    switch (r.pick(3)) {
    case 0: return r.u8() & ~3u;
    case 1: return r.u16();
    default: return r.u64();
    }
}

// One call chosen by the bytes, checked.
void one_call(drv::vfio_user_detail::client& c, reader& r, server_script& peer, world& w,
              std::vector<std::pair<std::uint64_t, std::size_t>>& mapped) {
    peer.contradicted = false;
    const auto began = tr::clock::now();
    std::array<std::byte, 64> buf{};
    const std::size_t len = std::size_t{1} << r.pick(7);
    const auto index = static_cast<drv::region>(r.pick(8));
    switch (r.pick(14)) {
    case 0: check_call(c.config_read(r.u16() & 0xfff, std::span(buf).first(len)), began, peer); break;
    case 1: check_call(c.config_write(r.u16() & 0xfff, std::span(buf).first(len)), began, peer); break;
    case 2: {
        const auto info = c.get_region_info(index);
        check_call(info, began, peer);
        if (info) {
            check_areas(info->size, info->mappable);
        }
        break;
    }
    case 3: check_call(c.region_read(index, offset_in(r), std::span(buf).first(len)), began, peer); break;
    case 4: check_call(c.region_write(index, offset_in(r), std::span(buf).first(len)), began, peer); break;
    case 5: {
        const auto bar = c.map_bar(index, static_cast<drv::caching>(r.pick(3)));
        check_call(bar, began, peer);
        if (bar) {
            check_areas(bar->size, bar->mapped);
        }
        break;
    }
    case 6: {
        const std::size_t offset = page * r.pick(16);
        const std::size_t bytes = page * (1 + r.pick(4));
        const auto iova = c.dma_map(w.memory, offset, bytes, static_cast<drv::dma_access>(1 + r.pick(3)));
        check_call(iova, began, peer);
        if (iova) {
            mapped.emplace_back(*iova, bytes);
        }
        break;
    }
    case 7: {
        auto which = mapped.empty() || rarely(r, 4) ? std::pair{r.u64(), std::size_t{page}}
                                                    : mapped[r.u8() % mapped.size()];
        const auto done = c.dma_unmap(which.first, which.second);
        check_call(done, began, peer);
        std::erase(mapped, which);
        break;
    }
    case 8: check_call(c.get_irq_info(static_cast<drv::irq_kind>(r.pick(3))), began, peer); break;
    case 9: {
        const auto kind = static_cast<drv::irq_kind>(r.pick(3));
        check_call(c.enable_irqs(kind, 1 + r.pick(8)), began, peer);
        break;
    }
    case 10: check_call(c.disable_irqs(static_cast<drv::irq_kind>(r.pick(3))), began, peer); break;
    case 11: check_call(c.unmask_intx(), began, peer); break;
    case 12: check_call(c.reset(), began, peer); break;
    default: check_call(c.set_bus_master(r.pick(2) == 0), began, peer); break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    world& w = the_world();
    if (size == 0) {
        return 0;
    }
    // the first byte splits the rest: the driver's calls, then the server's answers
    const std::size_t split = 1 + (size - 1) * data[0] / 256;
    reader calls(data + 1, split - 1);
    int sv[2];
    require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
    server_script peer(sv[1], reader(data + split, size - split), w.region_fd);
    std::thread server([&peer] { peer.run(); });
    {
        drv::open_options o;
        o.vfio_user_timeout = 1000ms;
        o.vfio_user_dma_by_message = rarely(calls, 4);
        drv::vfio_user_detail::client c("vfio-user:fuzz", sv[0], o);   // takes sv[0]
        peer.contradicted = false;
        const auto began = tr::clock::now();
        const auto started = c.start();
        check_call(started, began, peer);
        std::vector<std::pair<std::uint64_t, std::size_t>> mapped;
        for (std::size_t n = 0; started && n < max_calls && !calls.empty(); ++n) {
            one_call(c, calls, peer, w, mapped);
        }
        const auto releasing = tr::clock::now();
        c.release();
        require(tr::clock::now() - releasing < 4 * call_bound, "release returns in time");
    }
    server.join();
    ::close(sv[1]);
    require(rig::fuzz::open_fd_count() == w.fds_at_rest, "no fd left behind");
    return 0;
}
