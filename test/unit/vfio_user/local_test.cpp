// vfio-user: our client against our server, both in this process (the server on its thread).
#include <cstring>
#include <filesystem>
#include <poll.h>
#include <cstdio>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "driver/dma_memory.hpp"
#include "helpers.hpp"

using namespace rig::test;
using namespace rig::driver;
namespace vu = rig::sim::vfio_user;

namespace {

// true when the eventfd fires within `ms`; consumes the count
bool fired(int efd, int ms = 1000) {
    pollfd p{efd, POLLIN, 0};
    if (::poll(&p, 1, ms) != 1) {
        return false;
    }
    std::uint64_t n = 0;
    return ::read(efd, &n, sizeof n) == sizeof n && n >= 1;
}

std::size_t open_fds() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        ++n;
    }
    return n;
}

void fill(std::byte* p, std::size_t n, unsigned seed) {
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<std::byte>((i * 7 + seed) & 0xff);
    }
}

// the device copies `len` bytes from IOVA src to IOVA dst; returns its status register
std::uint32_t device_copy(function& f, std::uint64_t src, std::uint64_t dst, std::uint32_t len, std::uint32_t vector = 0) {
    reg_write(f, reg::dma_src, static_cast<std::uint32_t>(src));
    reg_write(f, reg::dma_src + 4, static_cast<std::uint32_t>(src >> 32));
    reg_write(f, reg::dma_dst, static_cast<std::uint32_t>(dst));
    reg_write(f, reg::dma_dst + 4, static_cast<std::uint32_t>(dst >> 32));
    reg_write(f, reg::dma_len, len);
    reg_write(f, reg::dma_vector, vector);
    reg_write(f, reg::dma_go, 1);
    return reg_read(f, reg::dma_status);
}

}  // namespace

TEST_CASE("vfio-user: open negotiates; the socket is 0600; config space by message", "[vfio_user]") {
    local_server s;
    struct stat st{};
    REQUIRE(::stat(socket_in(s.dir).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);

    auto f = open_ok(s.where());
    CHECK(f->name() == s.where());
    CHECK(f->config_read16(0) == vendor_id);
    CHECK(f->config_read16(2) == device_id);
    CHECK(f->config_read32(8) == 0x02000001u);
    REQUIRE(f->set_bus_master(true));
    CHECK(f->config_read16(4) == 0x4);
    REQUIRE(f->config_write16(0x40, 0x1357));
    CHECK(f->config_read16(0x40) == 0x1357);
    // read-only config bytes stay as they are
    REQUIRE(f->config_write16(0, 0xffff));
    CHECK(f->config_read16(0) == vendor_id);
    // outside the 4 KiB config space: the server refuses, the connection lives on
    std::byte b[4];
    auto out = f->config_read(4094, b);
    REQUIRE_FALSE(out);
    CHECK(out.error().os_errno == EINVAL);
    CHECK(f->config_read16(0) == vendor_id);
}

TEST_CASE("vfio-user: region info with sparse areas, trapped-only and absent regions", "[vfio_user]") {
    local_server s;
    auto f = open_ok(s.where());
    auto bar0 = f->get_region_info(region::bar0);
    REQUIRE(bar0);
    CHECK(bar0->size == bar0_size);
    CHECK(bar0->readable);
    CHECK(bar0->writable);
    REQUIRE(bar0->mappable.size() == 2);
    CHECK(bar0->mappable[0].offset == 0x1000);
    CHECK(bar0->mappable[0].size == 0x1000);
    CHECK(bar0->mappable[1].offset == 0x2000);
    CHECK(bar0->mappable[1].size == 0x2000);
    auto bar2 = f->get_region_info(region::bar2);
    REQUIRE(bar2);
    CHECK(bar2->size == 4096);
    CHECK(bar2->mappable.empty());
    auto bar1 = f->get_region_info(region::bar1);
    REQUIRE(bar1);
    CHECK(bar1->size == 0);
    auto cfg = f->get_region_info(region::config);
    REQUIRE(cfg);
    CHECK(cfg->size == 4096);
    CHECK(cfg->mappable.empty());
    CHECK_FALSE(f->get_region_info(static_cast<region>(12)));
    CHECK_FALSE(f->map_bar(region::bar1, caching::uncached));
    CHECK_FALSE(f->map_bar(region::config, caching::uncached));
}

TEST_CASE("vfio-user: a mapped BAR shares pages both ways; registers stay trapped", "[vfio_user]") {
    local_server s;
    auto f = open_ok(s.where());
    auto m = f->map_bar(region::bar0, caching::uncached);
    REQUIRE(m);
    CHECK(m->size == bar0_size);
    CHECK(m->covers(0x1000, 4));
    CHECK(m->covers(0x3ffc, 4));
    CHECK_FALSE(m->covers(0, 4));          // the register page is not mapped
    CHECK_FALSE(m->covers(0x3ffc, 8));     // nor past the end
    // client -> device: a store through the mapping, read back by the device (no message sent)
    const std::uint32_t doorbell = 0xfeedc0de;
    std::memcpy(m->base + 0x1000, &doorbell, 4);
    CHECK(reg_read(*f, reg::peek) == doorbell);
    std::uint32_t seen = 0;
    std::memcpy(&seen, s.dev.bar0() + 0x1000, 4);
    CHECK(seen == doorbell);
    // device -> client
    reg_write(*f, reg::poke, 0x600dcafe);
    std::memcpy(&seen, m->base + 0x1004, 4);
    CHECK(seen == 0x600dcafe);
    // shared pages are also reachable by message (spec "Read and Write Operations")
    std::uint32_t by_msg = 0;
    REQUIRE(f->region_read(region::bar0, 0x1000, std::as_writable_bytes(std::span<std::uint32_t, 1>(&by_msg, 1))));
    CHECK(by_msg == doorbell);
    // trapped registers
    CHECK(reg_read(*f, reg::id) == reg::id_value);
    reg_write(*f, reg::scratch, 0xa5a5a5a5);
    CHECK(reg_read(*f, reg::scratch) == 0xa5a5a5a5);
    CHECK(s.dev.scratch() == 0xa5a5a5a5);
    // the same BAR and caching again: the same mapping
    auto again = f->map_bar(region::bar0, caching::uncached);
    REQUIRE(again);
    CHECK(again->base == m->base);
    // a BAR with no shared pages: reserved, nothing mapped
    auto b2 = f->map_bar(region::bar2, caching::uncached);
    REQUIRE(b2);
    CHECK(b2->mapped.empty());
    std::byte x[3];
    REQUIRE(f->region_read(region::bar2, 5, x));
    CHECK(x[2] == std::byte{0xab});
}

TEST_CASE("vfio-user: device DMA both ways through fds; MSI-X by eventfd", "[vfio_user]") {
    local_server s;
    auto f = open_ok(s.where());
    auto mem = dma_memory::allocate(4 * 4096, page_choice::small_only);
    REQUIRE(mem);
    auto src = f->dma_map(*mem, 0, 4096, dma_access::read);
    auto dst = f->dma_map(*mem, 4096, 2 * 4096, dma_access::write);
    REQUIRE(src);
    REQUIRE(dst);
    CHECK(*src != *dst);
    CHECK(s.srv->dma().window_count() == 2);
    auto irqs = f->enable_irqs(irq_kind::msix, 4);
    REQUIRE(irqs);
    REQUIRE(irqs->size() == 4);

    fill(mem->data(), 4096, 3);
    REQUIRE(device_copy(*f, *src, *dst + 100, 3000, 2) == 1);
    CHECK(std::memcmp(mem->data(), mem->data() + 4096 + 100, 3000) == 0);
    CHECK(mem->data()[4096 + 99] == std::byte{0});
    CHECK(mem->data()[4096 + 3100] == std::byte{0});
    CHECK(fired((*irqs)[2]));
    CHECK_FALSE(fired((*irqs)[1], 0));
    CHECK(s.srv->dma().fault_count() == 0);

    REQUIRE(f->dma_unmap(*src, 4096));
    REQUIRE(f->dma_unmap(*dst, 2 * 4096));
    CHECK(s.srv->dma().window_count() == 0);
    CHECK_FALSE(f->dma_unmap(*dst, 2 * 4096));   // not mapped any more
}

TEST_CASE("vfio-user: DMA outside mapped memory is refused, reported, never performed", "[vfio_user]") {
    local_server s;
    auto f = open_ok(s.where());
    auto mem = dma_memory::allocate(3 * 4096, page_choice::small_only);
    REQUIRE(mem);
    auto ro = f->dma_map(*mem, 0, 4096, dma_access::read);
    auto rw = f->dma_map(*mem, 4096, 4096, dma_access::read_write);
    REQUIRE(ro);
    REQUIRE(rw);
    fill(mem->data(), 2 * 4096, 9);
    std::vector<std::byte> before(mem->data(), mem->data() + 2 * 4096);

    // to an IOVA nobody mapped
    CHECK(device_copy(*f, *ro, 0x7000'0000'0000, 64) == 2);
    // into a window the device may only read
    CHECK(device_copy(*f, *rw, *ro, 64) == 2);
    // running past the end of a window
    CHECK(device_copy(*f, *ro, *rw + 4000, 200) == 2);
    CHECK(std::memcmp(before.data(), mem->data(), before.size()) == 0);
    CHECK(s.srv->dma().fault_count() == 3);
    CHECK(reg_read(*f, reg::faults) == 3);
    const auto faults = s.srv->dma().faults();
    REQUIRE(faults.size() == 3);
    CHECK(faults[0].iova == 0x7000'0000'0000);
    CHECK(faults[0].write);
    CHECK(faults[1].iova == *ro);
    CHECK_THAT(faults[1].reason, Catch::Contains("not writable"));
    CHECK_THAT(faults[2].reason, Catch::Contains("past the end"));

    // after unmap the window is gone for the device too
    CHECK(device_copy(*f, *ro, *rw, 64) == 1);
    REQUIRE(f->dma_unmap(*rw, 4096));
    fill(mem->data() + 4096, 4096, 1);
    std::vector<std::byte> after(mem->data() + 4096, mem->data() + 2 * 4096);
    CHECK(device_copy(*f, *ro, *rw, 64) == 2);
    CHECK(std::memcmp(after.data(), mem->data() + 4096, 4096) == 0);
    CHECK(s.srv->dma().fault_count() == 4);
}

TEST_CASE("vfio-user: DMA to memory announced without fd goes by DMA_READ/DMA_WRITE", "[vfio_user]") {
    local_server s;
    open_options o;
    o.vfio_user_dma_by_message = true;
    auto f = open_ok(s.where(), o);
    auto mem = dma_memory::allocate(3 * 4096, page_choice::small_only);
    REQUIRE(mem);
    auto src = f->dma_map(*mem, 0, 4096, dma_access::read);
    auto dst = f->dma_map(*mem, 4096, 2 * 4096, dma_access::write);
    REQUIRE(src);
    REQUIRE(dst);
    fill(mem->data(), 4096, 5);
    REQUIRE(device_copy(*f, *src, *dst + 8, 4000) == 1);
    CHECK(std::memcmp(mem->data(), mem->data() + 4096 + 8, 4000) == 0);
    // the client answers only inside its windows, with their permissions
    CHECK(device_copy(*f, *dst, *src, 16) == 2);
    CHECK(s.srv->dma().fault_count() == 1);
    // outside a client request the server cannot ask: refused, not hung
    std::byte b[8];
    CHECK_FALSE(s.srv->dma().read(*src, b));
    CHECK_THAT(s.srv->dma().faults().back().reason, Catch::Contains("outside a client request"));
}

TEST_CASE("vfio-user: interrupts by eventfd, split by max_msg_fds; INTx automask", "[vfio_user]") {
    vu::server_options so;
    so.max_msg_fds = 3;   // 4 MSI-X vectors take two SET_IRQS messages
    local_server s(so);
    auto f = open_ok(s.where());
    auto msix_info = f->get_irq_info(irq_kind::msix);
    REQUIRE(msix_info);
    CHECK(msix_info->count == 4);
    CHECK(msix_info->eventfd);
    auto intx_info = f->get_irq_info(irq_kind::intx);
    REQUIRE(intx_info);
    CHECK(intx_info->count == 1);
    CHECK(intx_info->automasked);
    auto msi_info = f->get_irq_info(irq_kind::msi);
    REQUIRE(msi_info);
    CHECK(msi_info->count == 0);
    CHECK_FALSE(f->enable_irqs(irq_kind::msi, 1));
    CHECK_FALSE(f->enable_irqs(irq_kind::msix, 5));

    auto v = f->enable_irqs(irq_kind::msix, 4);
    REQUIRE(v);
    for (std::uint32_t i = 0; i < 4; ++i) {
        reg_write(*f, reg::raise_msix, i);
        CHECK(fired((*v)[i]));
    }
    auto x = f->enable_irqs(irq_kind::intx, 1);
    REQUIRE(x);
    reg_write(*f, reg::raise_intx, 1);
    CHECK(fired((*x)[0]));
    reg_write(*f, reg::raise_intx, 1);   // masked until unmasked: held
    CHECK_FALSE(fired((*x)[0], 50));
    REQUIRE(f->unmask_intx());
    CHECK(fired((*x)[0]));

    REQUIRE(f->disable_irqs(irq_kind::msix));
    CHECK_FALSE(s.srv->trigger(vu::irq::msix, 0));
    CHECK_FALSE(s.srv->trigger(vu::irq::msix, 9));
}

TEST_CASE("vfio-user: reset clears the device's registers", "[vfio_user]") {
    local_server s;
    auto f = open_ok(s.where());
    reg_write(*f, reg::scratch, 77);
    REQUIRE(f->set_bus_master(true));
    REQUIRE(f->reset());
    CHECK(reg_read(*f, reg::scratch) == 0);
    CHECK(f->config_read16(4) == 0);
    CHECK(reg_read(*f, reg::id) == reg::id_value);
}

TEST_CASE("vfio-user: release undoes everything, twice is nothing, later calls fail", "[vfio_user]") {
    local_server s;
    auto mem = dma_memory::allocate(4096, page_choice::small_only);
    REQUIRE(mem);
    const std::size_t fds_before = open_fds();
    auto f = open_ok(s.where());
    REQUIRE(f->dma_map(*mem, 0, 4096, dma_access::read_write));
    REQUIRE(f->enable_irqs(irq_kind::msix, 2));
    REQUIRE(f->map_bar(region::bar0, caching::uncached));
    REQUIRE(f->set_bus_master(true));
    f->release();
    f->release();
    REQUIRE(s.wait_served(1));
    CHECK(open_fds() == fds_before);   // socket, eventfds, region fds: client's and server's
    CHECK(s.srv->dma().window_count() == 0);
    CHECK_FALSE(s.srv->trigger(vu::irq::msix, 0));
    auto r = f->config_read16(0);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("VFIO_USER_REGION_READ"));
    // the device saw bus mastering turned off before the client went
    auto g = open_ok(s.where());
    CHECK(g->config_read16(4) == 0);
}

TEST_CASE("vfio-user: clients one after another; a vanished client's state is dropped", "[vfio_user]") {
    local_server s;
    {
        auto f = open_ok(s.where());
        reg_write(*f, reg::scratch, 42);
    }
    REQUIRE(s.wait_served(1));
    {
        // a client that maps memory and enables interrupts, then vanishes without a word
        raw_conn c(socket_in(s.dir));
        c.handshake();
        auto mem = dma_memory::allocate(8192, page_choice::small_only);
        REQUIRE(mem);
        const rig::vfio_user::abi::dma_map m{32, 3, 0, 0x10000, 8192};
        const int fd = mem->fd();
        c.send(2, bytes_of(m), std::span<const int>(&fd, 1));
        auto r = c.receive();
        REQUIRE(r);
        CHECK_FALSE(r->is_error());
        CHECK(s.srv->dma().window_count() == 1);
    }
    REQUIRE(s.wait_served(2));
    CHECK(s.srv->dma().window_count() == 0);
    // the device's own state survives its clients (spec "Socket Disconnection Behavior")
    auto g = open_ok(s.where());
    CHECK(reg_read(*g, reg::scratch) == 42);
    CHECK(reg_read(*g, reg::served) == 2);
}

TEST_CASE("vfio-user: a call past its timeout ends the connection; later calls fail at once", "[vfio_user]") {
    local_server s;
    open_options o;
    o.vfio_user_timeout = std::chrono::milliseconds(200);
    auto f = open_ok(s.where(), o);
    const auto t0 = steady_clock::now();
    auto r = f->region_write(region::bar0, reg::stall_ms, bytes_of(std::uint32_t{600}));
    REQUIRE_FALSE(r);
    CHECK(ms_since(t0) < 500);
    CHECK_THAT(r.error().message, Catch::Contains("no reply within 200 ms"));
    const auto t1 = steady_clock::now();
    auto again = f->config_read16(0);
    REQUIRE_FALSE(again);
    CHECK(ms_since(t1) < 50);
    CHECK_THAT(again.error().message, Catch::Contains("no reply within"));
    // the server finishes the stalled write, sees the client gone and serves the next one
    auto g = open_ok(s.where());
    CHECK(g->config_read16(0) == vendor_id);
}

TEST_CASE("vfio-user server: a stale socket is replaced; a live one or another file is not", "[vfio_user]") {
    temp_dir d;
    test_device dev;
    {
        auto first = vu::server::create(socket_in(d), dev);
        REQUIRE(first);
        auto second = vu::server::create(socket_in(d), dev);   // the first still listens
        REQUIRE_FALSE(second);
        CHECK_THAT(second.error(), Catch::Contains("already listens"));
    }
    // a socket file nobody listens on (a server that died)
    const int stale = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, socket_in(d).c_str(), sizeof a.sun_path - 1);
    REQUIRE(::bind(stale, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    ::close(stale);
    {
        auto replaced = vu::server::create(socket_in(d), dev);
        REQUIRE(replaced);
        dev.attach(**replaced);
        (*replaced)->start();
        auto f = open_ok("vfio-user:" + socket_in(d));
        CHECK(f->config_read16(0) == vendor_id);
    }
    const std::string file = d.path + "/not-a-socket";
    std::FILE* fp = std::fopen(file.c_str(), "w");
    REQUIRE(fp);
    std::fclose(fp);
    auto refused = vu::server::create(file, dev);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error(), Catch::Contains("not a socket"));
}
