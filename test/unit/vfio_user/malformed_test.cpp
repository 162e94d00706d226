// vfio-user robustness: raw bytes into our server, and a scripted bad server against our client.
// Either side answers a bad but well-framed message with an error reply, closes a connection
// whose framing is broken, and never crashes or hangs.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace rig::test;
using namespace rig::driver;
namespace abi = rig::vfio_user::abi;
namespace vu = rig::sim::vfio_user;
using abi::command;

namespace {

constexpr std::uint16_t cmd(command c) { return static_cast<std::uint16_t>(c); }

// the error a reply carries, or -1 for a good reply, or -2 for no reply at all
int error_of(raw_conn& c) {
    auto r = c.receive();
    if (!r) {
        return -2;
    }
    return r->is_error() ? static_cast<int>(r->hdr.error_no) : -1;
}

vu::server_options fast() {
    vu::server_options o;
    o.io_timeout = std::chrono::milliseconds(300);
    return o;
}

// the server still serves a well-behaved client
void still_serving(const local_server& s) {
    auto f = open_ok(s.where());
    CHECK(f->config_read16(0) == vendor_id);
}

}  // namespace

TEST_CASE("vfio-user server: broken framing closes the connection, and only that one", "[vfio_user][malformed]") {
    local_server s(fast());
    SECTION("a truncated header, then the client goes") {
        raw_conn c(socket_in(s.dir));
        const std::byte half[8] = {};
        c.send_bytes(half);
    }
    SECTION("msg_size below the header") {
        raw_conn c(socket_in(s.dir));
        c.send(cmd(command::version), {}, {}, 8);
        CHECK(c.closed_by_peer());
    }
    SECTION("msg_size of 4 GiB") {
        raw_conn c(socket_in(s.dir));
        c.send(cmd(command::version), {}, {}, 0xfffffff0u);
        CHECK(c.closed_by_peer());
    }
    SECTION("a body that never comes") {
        raw_conn c(socket_in(s.dir));
        c.send(cmd(command::version), {}, {}, 100);
        const auto t0 = steady_clock::now();
        CHECK(c.closed_by_peer(2000ms));
        CHECK(ms_since(t0) < 1000);
    }
    SECTION("a command before VERSION") {
        raw_conn c(socket_in(s.dir));
        c.send(cmd(command::device_get_info), bytes_of(abi::device_info{16, 0, 0, 0}));
        CHECK(error_of(c) == EINVAL);
        CHECK(c.closed_by_peer());
    }
    SECTION("an unsupported major version") {
        raw_conn c(socket_in(s.dir));
        c.send(cmd(command::version), bytes_of(abi::version{1, 0}));
        CHECK(error_of(c) == ENOTSUP);
        CHECK(c.closed_by_peer());
    }
    SECTION("malformed capabilities") {
        raw_conn c(socket_in(s.dir));
        const char text[] = "{\"capabilities\":{\"max_msg_fds\":\"many\"}}";
        std::vector<std::byte> p(4 + sizeof text);
        std::memcpy(p.data() + 4, text, sizeof text);
        c.send(cmd(command::version), p);
        CHECK(error_of(c) == EINVAL);
        CHECK(c.closed_by_peer());
    }
    SECTION("capabilities without their NUL") {
        raw_conn c(socket_in(s.dir));
        const char text[] = "{}";
        std::vector<std::byte> p(4 + 2);
        std::memcpy(p.data() + 4, text, 2);
        c.send(cmd(command::version), p);
        CHECK(error_of(c) == EINVAL);
        CHECK(c.closed_by_peer());
    }
    SECTION("a reply nobody asked for") {
        raw_conn c(socket_in(s.dir));
        c.handshake();
        c.send(cmd(command::dma_read), {}, {}, {}, abi::flag_type_reply);
        CHECK(c.closed_by_peer());
    }
    REQUIRE(s.wait_served(1));
    still_serving(s);
}

TEST_CASE("vfio-user server: short, bad and unknown commands get error replies", "[vfio_user][malformed]") {
    local_server s(fast());
    {
        raw_conn c(socket_in(s.dir));
        c.handshake();
        // every command's payload two bytes long: too short for any of them
        const std::byte two[2] = {};
        for (command k : {command::dma_map, command::dma_unmap, command::device_get_info,
                          command::device_get_region_info, command::device_get_irq_info, command::device_set_irqs,
                          command::region_read, command::region_write}) {
            INFO(abi::command_name(cmd(k)));
            c.send(cmd(k), two);
            CHECK(error_of(c) == EINVAL);
        }
        c.send(99, {});
        CHECK(error_of(c) == ENOSYS);
        c.send(cmd(command::device_get_region_io_fds), bytes_of(abi::irq_info{16, 0, 0, 0}));
        CHECK(error_of(c) == ENOSYS);
        c.send(cmd(command::version), bytes_of(abi::version{0, 0}));   // a second VERSION
        CHECK(error_of(c) == EINVAL);

        // argsz smaller than the structure, indexes out of range
        c.send(cmd(command::device_get_info), bytes_of(abi::device_info{8, 0, 0, 0}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::device_get_region_info), bytes_of(abi::region_info{32, 0, 42, 0, 0, 0}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::device_get_irq_info), bytes_of(abi::irq_info{16, 0, 5, 0}));
        CHECK(error_of(c) == EINVAL);

        // region accesses outside the region, too big, inconsistent
        c.send(cmd(command::region_read), bytes_of(abi::region_access{bar0_size - 2, 0, 4}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::region_read), bytes_of(abi::region_access{~std::uint64_t{0} - 1, 0, 4}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::region_read), bytes_of(abi::region_access{0, 0, (1u << 20) + 1}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::region_read), bytes_of(abi::region_access{0, 1, 4}));   // BAR1 absent
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::region_read), bytes_of(abi::region_access{0, 9, 4}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::region_write), bytes_of(abi::region_access{0, 0, 8}));   // says 8, carries 0
        CHECK(error_of(c) == EINVAL);

        // SET_IRQS: range past the vectors (and wrapping), two data kinds, eventfds for no vector
        c.send(cmd(command::device_set_irqs),
               bytes_of(abi::irq_set{20, abi::irq_set_data_none | abi::irq_set_action_trigger, 2, 0xffffffffu, 2}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::device_set_irqs),
               bytes_of(abi::irq_set{20, abi::irq_set_data_none | abi::irq_set_data_bool | abi::irq_set_action_trigger, 2, 0, 1}));
        CHECK(error_of(c) == EINVAL);
        const int efd = ::eventfd(0, EFD_CLOEXEC);
        const int two_fds[2] = {efd, efd};
        c.send(cmd(command::device_set_irqs),
               bytes_of(abi::irq_set{20, abi::irq_set_data_eventfd | abi::irq_set_action_trigger, 2, 0, 1}), two_fds);
        CHECK(error_of(c) == EINVAL);
        // an fd with a command that takes none
        c.send(cmd(command::device_get_info), bytes_of(abi::device_info{16, 0, 0, 0}), std::span<const int>(&efd, 1));
        CHECK(error_of(c) == EINVAL);

        // DMA_MAP: an fd that cannot back memory, a window past the end of its file, two fds,
        // unknown flags, overlap, unmapping what was never mapped
        const abi::dma_map m{32, 3, 0, 0x100000, 8192};
        c.send(cmd(command::dma_map), bytes_of(m), std::span<const int>(&efd, 1));
        CHECK(error_of(c) == EINVAL);
        const int mfd = ::memfd_create("t", MFD_CLOEXEC);
        REQUIRE(::ftruncate(mfd, 8192) == 0);
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 3, 4096, 0x100000, 8192}), std::span<const int>(&mfd, 1));
        CHECK(error_of(c) == EINVAL);
        const int fds2[2] = {mfd, mfd};
        c.send(cmd(command::dma_map), bytes_of(m), fds2);
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 0x10, 0, 0x100000, 8192}), std::span<const int>(&mfd, 1));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 3, 0, ~std::uint64_t{0} - 4095, 8192}),
               std::span<const int>(&mfd, 1));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::dma_map), bytes_of(m), std::span<const int>(&mfd, 1));
        CHECK(error_of(c) == -1);
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 3, 0, 0x101000, 4096}), std::span<const int>(&mfd, 1));
        CHECK(error_of(c) == EEXIST);
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 3, 0, 0xff000, 8192}));   // no fd: overlaps too
        CHECK(error_of(c) == EEXIST);
        // as kernel type1 (v2): a span that holds no window is no error, one that cuts a window is
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, 0, 0x200000, 4096}));
        CHECK(error_of(c) == -1);
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, 0, 0x100000, 4096}));   // not the whole window
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, 0, 0x100000, 0}));
        CHECK(error_of(c) == EINVAL);
        // VFIO_DMA_UNMAP_FLAG_ALL wants address and size 0; other flags are unknown
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, abi::dma_unmap_flag_all, 0x100000, 8192}));
        CHECK(error_of(c) == EINVAL);
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, 1, 0x100000, 8192}));   // GET_DIRTY_BITMAP
        CHECK(error_of(c) == EINVAL);
        CHECK(s.srv->dma().window_count() == 1);
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, 0, 0x100000, 8192}));
        auto un = c.receive();
        REQUIRE(un);
        CHECK_FALSE(un->is_error());
        CHECK(un->payload.size() == 24);
        CHECK(s.srv->dma().window_count() == 0);
        // two windows of the file (fd numbers differ per message), then FLAG_ALL drops both
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 3, 0, 0x100000, 4096}), std::span<const int>(&mfd, 1));
        CHECK(error_of(c) == -1);
        const int again = ::dup(mfd);
        c.send(cmd(command::dma_map), bytes_of(abi::dma_map{32, 3, 4096, 0x300000, 4096}), std::span<const int>(&again, 1));
        CHECK(error_of(c) == -1);
        ::close(again);
        CHECK(s.srv->dma().window_count() == 2);
        CHECK(s.srv->dma().file_mappings() == 1);
        c.send(cmd(command::dma_unmap), bytes_of(abi::dma_unmap{24, abi::dma_unmap_flag_all, 0, 0}));
        CHECK(error_of(c) == -1);
        CHECK(s.srv->dma().window_count() == 0);
        CHECK(s.srv->dma().file_mappings() == 0);
        ::close(mfd);
        ::close(efd);

        // No_reply is honoured: the next answer is for the next command
        c.send(cmd(command::device_reset), {}, {}, {}, abi::flag_no_reply, 1);
        c.send(cmd(command::device_get_info), bytes_of(abi::device_info{16, 0, 0, 0}), {}, {}, 0, 2);
        auto gi = c.receive();
        REQUIRE(gi);
        CHECK(gi->hdr.msg_id == 2);
        CHECK_FALSE(gi->is_error());
    }
    REQUIRE(s.wait_served(1));
    still_serving(s);
}

namespace {

// A server that follows a script: accepts one client and hands it to `script`.
struct fake_server {
    temp_dir dir;
    int listen_fd = -1;
    std::thread thread;
    std::atomic<bool> done{false};

    explicit fake_server(std::function<void(raw_conn&)> script) {
        listen_fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, socket_in(dir).c_str(), sizeof a.sun_path - 1);
        REQUIRE(::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(::listen(listen_fd, 1) == 0);
        thread = std::thread([this, script] {
            const int c = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (c >= 0) {
                raw_conn conn(c);
                script(conn);
            }
            done = true;
        });
    }
    ~fake_server() {
        ::shutdown(listen_fd, SHUT_RDWR);
        if (thread.joinable()) {
            thread.join();
        }
        ::close(listen_fd);
    }
    std::string where() const { return "vfio-user:" + socket_in(dir); }
};

void answer_version(raw_conn& c, std::string_view json = "{}") {
    auto m = c.receive();
    REQUIRE(m);
    std::vector<std::byte> p(4 + json.size() + 1);
    std::memcpy(p.data() + 4, json.data(), json.size());
    c.send_reply(*m, p);
}

void answer_info(raw_conn& c) {
    auto m = c.receive();
    REQUIRE(m);
    c.send_reply(*m, bytes_of(abi::device_info{16, abi::device_flag_pci | abi::device_flag_reset, 9, 5}));
}

open_options quick() {
    open_options o;
    o.vfio_user_timeout = std::chrono::milliseconds(300);
    return o;
}

// open against a server following `script`; the error message, or "" when it opened
std::string open_error(const std::function<void(raw_conn&)>& script) {
    fake_server fs(script);
    auto f = open(fs.where(), quick());
    return f ? std::string() : f.error().message;
}

// a region info reply of `bytes` for region 0, MMAP|CAPS, with one fd
void answer_region(raw_conn& c, std::vector<std::byte> bytes) {
    for (int i = 0; i < 2; ++i) {   // the client may ask twice (argsz)
        auto m = c.receive(500ms);
        if (!m) {
            return;
        }
        const int fd = ::memfd_create("bar", MFD_CLOEXEC);
        REQUIRE(::ftruncate(fd, 16384) == 0);
        c.send_reply(*m, bytes, std::span<const int>(&fd, 1));
        ::close(fd);
    }
}

std::vector<std::byte> region_reply(std::uint32_t cap_offset, std::uint32_t nr_areas, std::uint32_t next,
                                    std::size_t total) {
    std::vector<std::byte> b(total);
    abi::encode(std::span<std::byte>(b), 0,
                abi::region_info{static_cast<std::uint32_t>(total),
                                 abi::region_flag_read | abi::region_flag_mmap | abi::region_flag_caps, 0, cap_offset,
                                 16384, 0});
    if (total >= 48) {
        abi::encode(std::span<std::byte>(b), 32, abi::cap_header{abi::cap_sparse_mmap, 1, next});
        abi::encode(std::span<std::byte>(b), 40, abi::sparse_mmap{nr_areas, 0});
    }
    if (total >= 64) {
        abi::encode(std::span<std::byte>(b), 48, abi::sparse_area{0x1000, 0x1000});
    }
    return b;
}

std::string region_error(std::vector<std::byte> reply) {
    fake_server fs([&](raw_conn& c) {
        answer_version(c);
        answer_info(c);
        answer_region(c, reply);
        c.closed_by_peer(1000ms);
    });
    auto f = open(fs.where(), quick());
    REQUIRE(f);
    auto r = (*f)->get_region_info(region::bar0);
    return r ? std::string() : r.error().message;
}

}  // namespace

TEST_CASE("vfio-user client: bad VERSION replies fail open, quickly", "[vfio_user][malformed]") {
    const auto t0 = steady_clock::now();
    CHECK_THAT(open_error([](raw_conn&) {}), Catch::Contains("VFIO_USER_VERSION") &&
                                                 Catch::Contains("server closed the connection"));
    CHECK_THAT(open_error([](raw_conn& c) { c.closed_by_peer(1000ms); }), Catch::Contains("no reply within 300 ms"));
    CHECK_THAT(open_error([](raw_conn& c) {
                   auto m = c.receive();
                   REQUIRE(m);
                   c.send_reply(*m, bytes_of(abi::version{1, 0}));
               }),
               Catch::Contains("server answered version 1.0"));
    CHECK_THAT(open_error([](raw_conn& c) { answer_version(c, "{\"capabilities\":"); }),
               Catch::Contains("malformed capabilities"));
    CHECK_THAT(open_error([](raw_conn& c) {
                   auto m = c.receive();
                   REQUIRE(m);
                   c.send(m->hdr.command, {}, {}, 8, abi::flag_type_reply, m->hdr.msg_id);   // msg_size 8
               }),
               Catch::Contains("malformed message"));
    CHECK_THAT(open_error([](raw_conn& c) {
                   auto m = c.receive();
                   REQUIRE(m);
                   c.send(m->hdr.command, {}, {}, 0x7fffffff, abi::flag_type_reply, m->hdr.msg_id);
               }),
               Catch::Contains("malformed message"));
    CHECK_THAT(open_error([](raw_conn& c) {
                   auto m = c.receive();
                   REQUIRE(m);
                   c.send(m->hdr.command, bytes_of(abi::version{0, 0}), {}, {}, abi::flag_type_reply,
                          static_cast<std::uint16_t>(m->hdr.msg_id + 1));
               }),
               Catch::Contains("reply out of order"));
    CHECK_THAT(open_error([](raw_conn& c) {
                   auto m = c.receive();
                   REQUIRE(m);
                   c.send_reply(*m, std::span<const std::byte>(bytes_of(abi::version{0, 0})).first(2));
               }),
               Catch::Contains("shorter than its 4-byte version"));
    CHECK_THAT(open_error([](raw_conn& c) {
                   answer_version(c);
                   auto m = c.receive();
                   REQUIRE(m);
                   c.send_reply(*m, bytes_of(abi::device_info{16, 0, 2, 0}));   // not PCI
               }),
               Catch::Contains("not a PCI device"));
    CHECK(ms_since(t0) < 3000);
}

TEST_CASE("vfio-user client: a malformed region capability chain is an error, not a crash", "[vfio_user][malformed]") {
    CHECK_THAT(region_error(region_reply(4000, 1, 0, 64)), Catch::Contains("capability chain leaves the reply"));
    CHECK_THAT(region_error(region_reply(8, 1, 0, 64)), Catch::Contains("capability chain leaves the reply"));
    CHECK_THAT(region_error(region_reply(32, 1, 32, 64)), Catch::Contains("capability chain loops"));
    CHECK_THAT(region_error(region_reply(32, 1000000, 0, 64)), Catch::Contains("sparse mmap capability truncated"));
    auto beyond = region_reply(32, 1, 0, 64);
    abi::encode(std::span<std::byte>(beyond), 48, abi::sparse_area{0x3000, 0x2000});   // past 16 KiB
    CHECK_THAT(region_error(beyond), Catch::Contains("not page aligned inside the region"));
    CHECK(region_error(region_reply(32, 1, 0, 64)).empty());
}

TEST_CASE("vfio-user client: a server DMA request outside the client's windows is refused", "[vfio_user][malformed]") {
    // the client answers DMA_READ/WRITE while it waits; outside its windows it refuses with EFAULT
    int refused = 0;
    fake_server fs([&](raw_conn& c) {
        answer_version(c);
        answer_info(c);
        auto m = c.receive();   // the client's config read
        REQUIRE(m);
        c.send(cmd(command::dma_read), bytes_of(abi::dma_access{0x10000, 64}), {}, {}, 0, 500);
        auto r = c.receive();
        REQUIRE(r);
        if (r->is_error() && r->hdr.error_no == EFAULT && r->hdr.msg_id == 500) {
            ++refused;
        }
        c.send(cmd(command::dma_write), bytes_of(abi::dma_access{0, 1u << 30}), {}, {}, 0, 501);   // count lies
        auto w = c.receive();
        REQUIRE(w);
        if (w->is_error() && w->hdr.error_no == EINVAL) {
            ++refused;
        }
        std::vector<std::byte> p(16 + 2);
        abi::encode(std::span<std::byte>(p), 0, abi::region_access{0, 7, 2});
        p[16] = std::byte{0x34};
        p[17] = std::byte{0x12};
        c.send_reply(*m, p);
        c.closed_by_peer(1000ms);
    });
    auto f = open(fs.where(), quick());
    REQUIRE(f);
    CHECK((*f)->config_read16(0) == 0x1234);
    (*f)->release();
    fs.thread.join();
    CHECK(refused == 2);
}

TEST_CASE("vfio-user client: no fd goes to a server that takes none", "[vfio_user][malformed]") {
    // found by test/fuzz/vfio_user/client.cpp (corpus vfio-user-client/crash-dma-map-fd-to-no-fds):
    // DMA_MAP carried the memory's fd although VERSION said max_msg_fds 0
    std::atomic<int> fds_seen{-1};
    fake_server fs([&](raw_conn& c) {
        answer_version(c, "{\"capabilities\":{\"max_msg_fds\":0}}");
        answer_info(c);
        if (auto m = c.receive(500ms)) {   // a DMA_MAP by message, if any
            fds_seen = static_cast<int>(m->fds.size());
            c.send_reply(*m, {});
        }
        c.closed_by_peer(1000ms);
    });
    auto memory = dma_memory::allocate(4096, page_choice::small_only);
    REQUIRE(memory);
    {
        auto f = open(fs.where(), quick());
        REQUIRE(f);
        auto by_fd = (*f)->dma_map(*memory, 0, 4096, dma_access::read_write);
        REQUIRE_FALSE(by_fd);
        CHECK(by_fd.error().os_errno == ENOTSUP);
        CHECK_THAT(by_fd.error().message, Catch::Contains("max_msg_fds 0"));
    }
    {
        open_options o = quick();
        o.vfio_user_dma_by_message = true;
        fake_server again([&](raw_conn& c) {
            answer_version(c, "{\"capabilities\":{\"max_msg_fds\":0}}");
            answer_info(c);
            if (auto m = c.receive(500ms)) {
                fds_seen = static_cast<int>(m->fds.size());
                c.send_reply(*m, {});
            }
            c.closed_by_peer(1000ms);
        });
        auto f = open(again.where(), o);
        REQUIRE(f);
        CHECK((*f)->dma_map(*memory, 0, 4096, dma_access::read_write));
        CHECK(fds_seen == 0);
        (*f)->release();
    }
}
