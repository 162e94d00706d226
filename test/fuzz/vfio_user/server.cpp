// Fuzzes the model's vfio-user server (sim/vfio_user: server.cpp, session.cpp, dma_space.cpp,
// dma_files.cpp; framing by transport/vfio_user/socket.cpp) from a hostile client. The server runs
// as rig-nicsim runs it: server::create and start(), its own thread, serving the test device of
// test/unit/vfio_user (test_device.hpp). Each input is one connection: the bytes choose a sequence
// of messages (VERSION with capability JSON, DEVICE_GET_INFO, GET_REGION_INFO, GET_IRQ_INFO,
// SET_IRQS with and without eventfds, REGION_READ/WRITE, DMA_MAP/UNMAP with a memfd, a read-only
// fd, a pipe or none, RESET, unknown commands, stray fds, flags, and lying sizes) and how this
// client answers the server's own DMA_READ/WRITE for windows without fd. The client waits for
// each reply, as QEMU's does, until a lying size has broken the framing; then it sends the rest
// and reads until the server closes.
//
// Oracle (spec: QEMU docs/interop/vfio-user.rst; server.hpp "Robustness"):
//  - every command that wants a reply gets one within a bound, with its id and command, or the
//    server closes the connection, and only after something that may close it (a VERSION it
//    refuses, a command before VERSION, a message that is no command, a broken framing, a bad
//    answer to its DMA_READ/WRITE);
//  - an error reply is the bare header with an errno; a command before VERSION gets EINVAL;
//  - a success reply has the shape of its command and echoes the request (region, offset, count,
//    index); a REGION_READ/WRITE outside the test device's regions is refused, never served;
//  - the server's own messages are well formed DMA_READ/WRITE commands;
//  - after the connection: no DMA window or file mapping is left, no fd of ours grew, and a
//    fresh client's VERSION is served (the server stays able to serve).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "abi/vfio_user/protocol.hpp"
#include "sim/vfio_user/log.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/fuzz/reader.hpp"
#include "test/fuzz/scratch_dir.hpp"
#include "test/fuzz/vfio_user/script.hpp"
#include "test/unit/vfio_user/test_device.hpp"
#include "transport/vfio_user/socket.hpp"

namespace {

namespace abi = rig::vfio_user::abi;
namespace vu = rig::sim::vfio_user;
namespace tr = rig::vfio_user::transport;
namespace reg = rig::test::reg;
using namespace std::chrono_literals;
using rig::fuzz::one_of;
using rig::fuzz::put;
using rig::fuzz::reader;
using rig::fuzz::require;
using abi::command;

constexpr auto reply_bound = 3s;                 // the hang oracle: a reply or a close within this
constexpr std::size_t max_messages = 48;
constexpr std::size_t max_stream_bytes = 96 * 1024;   // below a socket's send buffer: a pipelined
                                                      // script never blocks its own sender
constexpr std::uint32_t xfer = 64 * 1024;        // the server's max_data_xfer_size
constexpr std::uint32_t dma_len_cap = 256;       // the test device's DMA copies, kept short
constexpr std::size_t memfd_bytes = 64 * 1024;

// The test device with what a fuzzer must not reach kept out (a stall register that sleeps up to
// 10 s, a DMA length that allocates up to 4 GiB), fresh for every client: each input is independent.
class fuzz_device final : public vu::device {
public:
    void attach(vu::server& s) { _inner.attach(s); }
    vu::region_desc region(unsigned index) override { return _inner.region(index); }
    std::uint32_t irq_count(vu::irq kind) override { return _inner.irq_count(kind); }
    bool read(unsigned region, std::uint64_t offset, std::span<std::byte> out) override {
        return _inner.read(region, offset, out);
    }
    bool write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) override {
        if (region == 0 && in.size() == 4 && offset == reg::stall_ms) {
            return true;
        }
        if (region == 0 && in.size() == 4 && offset == reg::dma_go) {
            std::uint32_t len = 0;
            _inner.read(0, reg::dma_len, std::as_writable_bytes(std::span(&len, 1)));
            len = std::min(len, dma_len_cap);
            _inner.write(0, reg::dma_len, std::as_bytes(std::span(&len, 1)));
        }
        return _inner.write(region, offset, in);
    }
    void reset() override { _inner.reset(); }
    void connected() override {
        _inner.reset();
        std::memset(_inner.bar0(), 0, rig::test::bar0_size);
    }

private:
    rig::test::test_device _inner;
};

// Region sizes of the test device (test_device.hpp): an access beyond them must be refused.
std::uint64_t region_size(std::uint32_t index) {
    return index == 0 ? rig::test::bar0_size : index == 2 || index == vu::config_region ? 4096 : 0;
}

// What lives for the whole run: the server on its thread, and the fds a client passes.
struct world {
    rig::fuzz::scratch_dir dir;
    std::string path = dir.file("dev.sock");
    fuzz_device dev;
    std::unique_ptr<vu::server> srv;
    int memfd = -1;      // a DMA window's file
    int ro_fd = -1;      // the same file, read-only: a device-writable window is refused
    int event_fd = -1;   // an interrupt's eventfd
    int pipe_fds[2] = {-1, -1};   // no regular file: refused as a window
    std::size_t fds_at_rest = 0;

    world() {
        // the model's logger before the server: statics go in reverse, so it outlives the
        // server's thread, which logs until stop() joins it
        rig::sim::log().flush();
        vu::server_options o;
        o.max_msg_fds = 4;
        o.max_data_xfer_size = xfer;
        o.max_dma_maps = 16;
        o.io_timeout = 1000ms;
        auto s = vu::server::create(path, dev, o);
        require(s.has_value(), "server::create");
        srv = std::move(*s);
        dev.attach(*srv);
        srv->start();
        memfd = ::memfd_create("rig-fuzz-dma", MFD_CLOEXEC);
        require(memfd >= 0 && ::ftruncate(memfd, memfd_bytes) == 0, "memfd");
        ro_fd = ::open(("/proc/self/fd/" + std::to_string(memfd)).c_str(), O_RDONLY | O_CLOEXEC);
        event_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        require(ro_fd >= 0 && event_fd >= 0 && ::pipe2(pipe_fds, O_CLOEXEC) == 0, "fds");
    }
    ~world() {
        srv.reset();
        for (int fd : {memfd, ro_fd, event_fd, pipe_fds[0], pipe_fds[1]}) {
            ::close(fd);
        }
    }
};

world& the_world() {
    static world w;
    return w;
}

// The hostile client's end of one connection.
class connection {
public:
    explicit connection(const std::string& path) {
        _fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, path.data(), path.size());
        require(_fd >= 0 && ::connect(_fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0,
                "connect to the server");
    }
    ~connection() { ::close(_fd); }
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    // false: the server has closed the connection
    bool send(const abi::header& h, std::span<const std::byte> payload, std::span<const int> fds = {}) {
        const auto r = tr::send_message(_fd, h, payload, fds, tr::clock::now() + reply_bound);
        require(r.status != tr::io::timeout, "the server takes what we send within the bound");
        return bool(r);
    }
    // the next message; nothing when the server closed the connection (a hang is a failure)
    std::optional<tr::message> receive() {
        tr::message m;
        const auto r = tr::receive_message(_fd, m, 2 * std::size_t{xfer}, 8, tr::clock::now() + reply_bound);
        require(r.status != tr::io::timeout, "a reply or a close within the bound (no hang)");
        require(r.status != tr::io::malformed, "the server frames its messages");
        if (!r) {
            return std::nullopt;
        }
        return m;
    }
    void stop_sending() { ::shutdown(_fd, SHUT_WR); }
    // Reads until the server closes, answering nothing (the server then reads our EOF).
    void drain() {
        while (auto m = receive()) {
            const std::uint32_t type = m->hdr.flags & abi::flag_type_mask;
            require(type == abi::flag_type_reply || type == abi::flag_type_command, "a reply or a command");
        }
    }

private:
    int _fd = -1;
};

enum class known { no, yes, unknown };

struct request {
    abi::header hdr{};
    std::vector<std::byte> payload;
    std::vector<int> fds;       // borrowed from the world
    std::uint8_t inband = 0;    // how we answer the server's DMA_READ/WRITE meanwhile
};

// VERSION's payload: the version, then (maybe) capability JSON: ours with chosen values, or text.
void version_payload(reader& r, request& q) {
    const std::uint16_t major = r.pick(8) == 0 ? r.u16() : abi::version_major;
    const std::uint16_t minor = r.pick(4) == 0 ? r.u16() : abi::version_minor;
    put(q.payload, abi::version{major, minor});
    std::string json;
    switch (r.pick(4)) {
    case 0: return;   // no capabilities: the spec's defaults
    case 1:
    case 2: {
        json = "{\"capabilities\":{\"max_msg_fds\":" + std::to_string(one_of(r, {1, 4, 8, 0})) +
               ",\"max_data_xfer_size\":" + std::to_string(one_of(r, {1048576, 4096, 64, 0})) +
               ",\"max_dma_maps\":" + std::to_string(one_of(r, {65535, 1, 0})) +
               ",\"pgsizes\":" + std::to_string(one_of(r, {4096, 0x1000 | 0x200000})) +
               (r.pick(2) == 0 ? ",\"migration\":{\"pgsize\":4096,\"max_bitmap_size\":8}" : "") +
               (r.pick(4) == 0 ? ",\"twin_socket\":{\"supported\":true,\"fd_index\":0}" : "") +
               (r.pick(4) == 0 ? ",\"write_multiple\":true" : "") + "}}";
        if (r.pick(4) == 0 && !json.empty()) {   // one character changed
            json[r.u8() % json.size()] = static_cast<char>(r.u8());
        }
        break;
    }
    default: json = r.sized_text(200); break;
    }
    const bool terminated = r.pick(8) != 0;
    const auto b = std::as_bytes(std::span(json.data(), json.size() + (terminated ? 1 : 0)));
    q.payload.insert(q.payload.end(), b.begin(), b.end());
}

// SET_IRQS: data and action bits mostly one each, a range, bools, eventfds.
void set_irqs_payload(reader& r, request& q, const world& w) {
    const std::uint32_t data = r.pick(8) == 0 ? r.u32() & abi::irq_set_data_mask : 1u << r.pick(3);
    const std::uint32_t action = r.pick(8) == 0 ? r.u32() & abi::irq_set_action_mask_bits : 8u << r.pick(3);
    const std::uint32_t extra = r.pick(16) == 0 ? r.u32() : 0;
    const abi::irq_set s{one_of(r, {sizeof(abi::irq_set)}), data | action | extra, r.u8() % 6u,
                         one_of(r, {0, 1, 3}), one_of(r, {1, 0, 2, 4})};
    put(q.payload, s);
    for (unsigned i = r.pick(4); i-- > 0;) {
        q.payload.push_back(std::byte{r.u8()});
    }
    for (unsigned i = r.pick(4) == 0 ? r.pick(6) : 0; i-- > 0;) {
        q.fds.push_back(w.event_fd);
    }
}

// REGION_READ/WRITE: mostly inside the device's registers and shared pages, sometimes anywhere.
void region_access_payload(reader& r, request& q, bool write) {
    static constexpr std::uint32_t regions[] = {0, 2, vu::config_region, 1, 9};
    const std::uint32_t index = r.pick(8) == 0 ? r.u32() : regions[r.pick(std::size(regions))];
    std::uint64_t offset = 0;
    switch (r.pick(4)) {
    case 0: offset = r.u8() & ~3u; break;                          // a register
    case 1: offset = 0x1000 + (std::uint64_t{r.u16()} & 0x3ffc); break;   // BAR0's shared pages
    case 2: offset = r.u16(); break;
    default: offset = r.u64(); break;
    }
    std::uint32_t count = r.pick(4) == 0 ? r.u32() : std::uint32_t{1} << r.pick(8);
    if (write && offset == reg::dma_go && index == 0 && r.pick(2) == 0) {
        count = 4;
    }
    put(q.payload, abi::region_access{offset, index, count});
    if (write) {
        const std::size_t n = r.pick(8) == 0 ? r.u8() : std::min<std::size_t>(count, 4096);
        for (std::size_t i = 0; i < n; ++i) {
            q.payload.push_back(std::byte{static_cast<std::uint8_t>(i < 8 ? r.u8() : i)});
        }
    } else if (r.pick(16) == 0) {
        q.payload.push_back(std::byte{0});   // a read with data: its size is wrong
    }
    q.inband = r.u8();
}

// DMA_MAP: a window inside the memfd, or anywhere; with the memfd, the read-only fd, a pipe, two, or none.
void dma_map_payload(reader& r, request& q, const world& w) {
    const std::uint32_t flags = r.pick(8) == 0 ? r.u32() : 1 + r.pick(3);
    const std::uint64_t page = 4096;
    const std::uint64_t offset = r.pick(4) == 0 ? r.u64() : page * r.pick(16);
    const std::uint64_t address = r.pick(4) == 0 ? r.u64() : 0x100000 + page * r.pick(32);
    const std::uint64_t size = r.pick(4) == 0 ? r.u64() : page * (1 + r.pick(8));
    put(q.payload, abi::dma_map{one_of(r, {sizeof(abi::dma_map), 0}), flags, offset, address, size});
    switch (r.pick(6)) {
    case 0: case 1: q.fds = {w.memfd}; break;
    case 2: q.fds = {w.ro_fd}; break;
    case 3: q.fds = {w.pipe_fds[0]}; break;
    case 4: q.fds = {w.memfd, w.memfd}; break;
    default: break;   // by message
    }
    if (r.pick(16) == 0) {
        q.fds.assign(6, w.memfd);   // more than the server takes
    }
}

void dma_unmap_payload(reader& r, request& q) {
    const std::uint32_t flags = r.pick(4) == 0 ? one_of(r, {abi::dma_unmap_flag_all, 1}) : 0;
    const bool anywhere = r.pick(4) == 0;
    const std::uint64_t address = anywhere ? r.u64() : 0x100000 + 4096 * std::uint64_t{r.pick(32)};
    const std::uint64_t size = anywhere ? r.u64() : 4096 * std::uint64_t{r.pick(12)};
    put(q.payload, abi::dma_unmap{one_of(r, {sizeof(abi::dma_unmap), 8}), flags, address, size});
}

// One message of the script: the payload of a command, then the header, which may lie.
request next_request(reader& r, const world& w, std::uint16_t id) {
    request q;
    command cmd{};
    switch (r.pick(12)) {
    case 0: cmd = command::version; version_payload(r, q); break;
    case 1: cmd = command::device_get_info; put(q.payload, abi::device_info{one_of(r, {16, 8}), 0, 0, 0}); break;
    case 2:
        cmd = command::device_get_region_info;
        put(q.payload, abi::region_info{one_of(r, {32, 128, 16}), 0, r.u8() % 10u, 0, 0, 0});
        break;
    case 3: cmd = command::device_get_irq_info; put(q.payload, abi::irq_info{one_of(r, {16, 4}), 0, r.u8() % 6u, 0}); break;
    case 4: cmd = command::device_set_irqs; set_irqs_payload(r, q, w); break;
    case 5: cmd = command::region_read; region_access_payload(r, q, false); break;
    case 6: case 7: cmd = command::region_write; region_access_payload(r, q, true); break;
    case 8: cmd = command::dma_map; dma_map_payload(r, q, w); break;
    case 9: cmd = command::dma_unmap; dma_unmap_payload(r, q); break;
    case 10: cmd = command::device_reset; break;
    default: cmd = static_cast<command>(r.u16()); q.payload = r.sized_bytes(64); break;
    }
    if (r.pick(16) == 0 && q.payload.size() > 0) {
        q.payload.resize(r.u8() % q.payload.size());   // too short for its command
    }
    if (r.pick(32) == 0) {
        q.fds.push_back(w.event_fd);   // an fd nobody asked for
    }
    std::uint32_t flags = abi::flag_type_command;
    if (r.pick(16) == 0) {
        flags = r.pick(2) == 0 ? abi::flag_no_reply : r.u32();
    }
    std::uint32_t size = static_cast<std::uint32_t>(abi::header_size + q.payload.size());
    if (r.pick(32) == 0) {
        size = r.pick(2) == 0 ? r.u32() : size + r.u8() - 128;   // a lie: the framing breaks
    }
    q.hdr = abi::header{id, static_cast<std::uint16_t>(cmd), size, flags, r.pick(16) == 0 ? r.u32() : 0};
    return q;
}

// Our answer to the server's DMA_READ/WRITE: mostly right, sometimes wrong in one way.
// Returns whether it was right (a wrong one may make the server close).
bool answer(connection& c, const tr::message& m, std::uint8_t mode) {
    const bool is_read = m.hdr.command == static_cast<std::uint16_t>(command::dma_read);
    require(is_read || m.hdr.command == static_cast<std::uint16_t>(command::dma_write),
            "the server's only commands are DMA_READ/WRITE");
    const auto head = abi::decode<abi::dma_access>(m.payload);
    require(head && head->count > 0 && head->count <= xfer, "DMA_READ/WRITE names a sane range");
    require(m.payload.size() == 16 + (is_read ? 0 : head->count), "DMA_READ/WRITE is as long as it says");
    abi::header h{m.hdr.msg_id, m.hdr.command, abi::header_size, abi::flag_type_reply, 0};
    std::vector<std::byte> out;
    put(out, *head);
    if (is_read) {
        out.resize(16 + head->count, std::byte{0x5a});
    }
    const unsigned how = mode % 8;
    switch (how) {
    case 4: h.flags |= abi::flag_error; h.error_no = EFAULT; out.clear(); break;
    case 5: ++h.msg_id; break;
    case 6: out.resize(out.size() - 1 - (is_read ? 0 : 4)); break;
    case 7: h.flags = abi::flag_type_command; break;
    default: break;
    }
    h.msg_size = static_cast<std::uint32_t>(abi::header_size + out.size());
    c.send(h, out);
    return how < 4;
}

struct script_state {
    known negotiated = known::no;
    bool may_close = false;   // something happened after which the server may close
    bool framing_lost = false;
};

void check_region_info(const request& q, const tr::message& m) {
    const auto ri = abi::decode<abi::region_info>(m.payload);
    const auto asked = abi::decode<abi::region_info>(q.payload);
    require(ri && asked && ri->index == asked->index, "GET_REGION_INFO answers the region asked");
    require(m.payload.size() == sizeof(abi::region_info) || m.payload.size() == ri->argsz,
            "GET_REGION_INFO: the info alone, or with the whole chain argsz announces");
    require(ri->argsz <= asked->argsz || m.payload.size() == sizeof(abi::region_info),
            "GET_REGION_INFO: a chain only when argsz left room for it");
    require((ri->flags & abi::region_flag_mmap) != 0 ? m.fds.size() == 1 : m.fds.empty(),
            "GET_REGION_INFO: one fd exactly with a mappable region");
    if ((ri->flags & abi::region_flag_caps) != 0) {
        const auto cap = abi::decode<abi::cap_header>(m.payload, ri->cap_offset);
        require(ri->cap_offset >= sizeof(abi::region_info) && cap, "the capability chain lies inside the reply");
    }
    require(ri->size == region_size(ri->index), "GET_REGION_INFO: the device's size");
}

// A success reply: the shape of its command, echoing the request.
void check_success(const request& q, const tr::message& m, script_state& st) {
    const auto cmd = static_cast<command>(q.hdr.command);
    if (cmd != command::version && st.negotiated == known::unknown) {
        st.negotiated = known::yes;   // a VERSION without reply was taken
    }
    require(cmd == command::version || st.negotiated != known::no, "nothing is served before VERSION");
    const auto access = abi::decode<abi::region_access>(q.payload);
    switch (cmd) {
    case command::version: {
        require(st.negotiated != known::yes, "a second VERSION is refused");
        const auto v = abi::decode<abi::version>(m.payload);
        require(v && v->major == abi::version_major && v->minor == abi::version_minor, "VERSION reply: 0.0");
        const auto rest = std::span<const std::byte>(m.payload).subspan(4);
        const auto nul = std::find(rest.begin(), rest.end(), std::byte{0});
        require(nul != rest.end() && nul + 1 == rest.end() &&
                    abi::parse_caps({reinterpret_cast<const char*>(rest.data()),
                                     static_cast<std::size_t>(nul - rest.begin())}).has_value(),
                "VERSION reply: capability JSON we parse, NUL-terminated");
        st.negotiated = known::yes;
        break;
    }
    case command::device_get_info: {
        const auto di = abi::decode<abi::device_info>(m.payload);
        require(m.payload.size() == 16 && di && di->num_regions == vu::region_count, "DEVICE_GET_INFO reply");
        break;
    }
    case command::device_get_region_info: check_region_info(q, m); break;
    case command::device_get_irq_info: {
        const auto ii = abi::decode<abi::irq_info>(m.payload);
        const auto asked = abi::decode<abi::irq_info>(q.payload);
        require(m.payload.size() == 16 && ii && asked && ii->index == asked->index, "GET_IRQ_INFO echoes");
        break;
    }
    case command::region_read: {
        const auto rep = abi::decode<abi::region_access>(m.payload);
        require(access && rep && rep->offset == access->offset && rep->region == access->region &&
                    rep->count == access->count && m.payload.size() == 16 + std::size_t{access->count},
                "REGION_READ reply echoes the read and carries its bytes");
        require(access->offset + access->count <= region_size(access->region) && access->offset < (1ull << 32),
                "REGION_READ served only inside the region");
        break;
    }
    case command::region_write: {
        const auto rep = abi::decode<abi::region_access>(m.payload);
        require(access && m.payload.size() == 16 && rep && rep->offset == access->offset &&
                    rep->count == access->count && q.payload.size() == 16 + std::size_t{access->count},
                "REGION_WRITE reply echoes a write as long as it said");
        require(access->offset + access->count <= region_size(access->region) && access->offset < (1ull << 32),
                "REGION_WRITE served only inside the region");
        break;
    }
    case command::dma_unmap: require(m.payload.empty() || m.payload.size() == 24, "DMA_UNMAP reply"); break;
    case command::dma_map:
    case command::device_set_irqs:
    case command::device_reset: require(m.payload.empty(), "an empty reply"); break;
    default: require(false, "an unknown command is refused"); break;
    }
    require(cmd == command::device_get_region_info || m.fds.empty(), "no fds but a region's");
}

// Sends `q` and, while the framing holds, waits for its reply (answering the server's DMA
// meanwhile) and checks it. false: the connection is over.
bool exchange(connection& c, const request& q, script_state& st) {
    if (!c.send(q.hdr, q.payload, q.fds)) {
        require(st.may_close, "the server closed the connection without a reason");
        return false;
    }
    const bool is_command = (q.hdr.flags & abi::flag_type_mask) == abi::flag_type_command;
    const bool is_version = q.hdr.command == static_cast<std::uint16_t>(command::version);
    // what the server may answer by closing: no command, a VERSION it refuses, a command before VERSION
    const bool may_end_it = !is_command || (is_version ? st.negotiated != known::yes : st.negotiated == known::no);
    if (q.hdr.msg_size != abi::header_size + q.payload.size()) {
        st.framing_lost = st.may_close = true;
    }
    if (st.framing_lost) {
        return true;
    }
    if (!is_command || (q.hdr.flags & abi::flag_no_reply) != 0) {
        // a REGION_WRITE may start the device's DMA: the server's DMA_READ/WRITE then crosses our
        // next command, which it takes for a wrong answer (session::in_band) and closes
        const bool may_dma = q.hdr.command == static_cast<std::uint16_t>(command::region_write);
        st.may_close = st.may_close || may_end_it || may_dma;
        if (is_version && is_command && st.negotiated == known::no) {
            st.negotiated = known::unknown;
        }
        return true;
    }
    for (;;) {
        const auto m = c.receive();
        if (!m) {
            require(st.may_close, "every command is answered, or the connection closed for a reason");
            return false;
        }
        if ((m->hdr.flags & abi::flag_type_mask) == abi::flag_type_command) {
            if (!answer(c, *m, q.inband)) {
                st.may_close = true;
            }
            continue;
        }
        require((m->hdr.flags & abi::flag_type_mask) == abi::flag_type_reply && m->hdr.msg_id == q.hdr.msg_id &&
                    m->hdr.command == q.hdr.command,
                "the reply has the request's id and command");
        if ((m->hdr.flags & abi::flag_error) != 0) {
            require(m->payload.empty() && m->fds.empty() && m->hdr.error_no != 0,
                    "an error reply is the header with an errno");
            require(is_version || st.negotiated != known::no || m->hdr.error_no == EINVAL,
                    "a command before VERSION gets EINVAL");
            st.may_close = st.may_close || may_end_it;
            return true;
        }
        check_success(q, *m, st);
        return true;
    }
}

// A well-behaved client's VERSION on a fresh connection is served.
void check_still_serving(world& w) {
    connection c(w.path);
    request q;
    q.hdr = abi::header{1, static_cast<std::uint16_t>(command::version), 0, abi::flag_type_command, 0};
    put(q.payload, abi::version{abi::version_major, abi::version_minor});
    const std::string_view json = "{\"capabilities\":{\"max_msg_fds\":1}}";
    const auto b = std::as_bytes(std::span(json.data(), json.size() + 1));
    q.payload.insert(q.payload.end(), b.begin(), b.end());
    q.hdr.msg_size = static_cast<std::uint32_t>(abi::header_size + q.payload.size());
    require(c.send(q.hdr, q.payload), "a fresh client can send VERSION");
    const auto m = c.receive();
    require(m && (m->hdr.flags & abi::flag_error) == 0 && m->hdr.msg_id == 1, "a fresh client's VERSION is served");
    c.stop_sending();
    c.drain();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    world& w = the_world();
    if (w.fds_at_rest == 0) {
        w.fds_at_rest = rig::fuzz::open_fd_count();
    }
    reader r(data, size);
    {
        connection c(w.path);
        script_state st;
        std::size_t sent = 0;
        bool open = true;
        for (std::uint16_t id = 1; open && !r.empty() && id <= max_messages; ++id) {
            const request q = next_request(r, w, id);
            sent += abi::header_size + q.payload.size();
            if (sent > max_stream_bytes) {
                break;
            }
            open = exchange(c, q, st);
        }
        c.stop_sending();
        if (open) {
            c.drain();
        }
    }
    // the server closed its end after dropping the client's windows and eventfds (server::serve)
    require(w.srv->dma().window_count() == 0 && w.srv->dma().file_mappings() == 0,
            "a client's DMA windows go with it");
    check_still_serving(w);
    require(rig::fuzz::open_fd_count() == w.fds_at_rest, "no fd left behind");
    return 0;
}
