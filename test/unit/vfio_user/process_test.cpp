// vfio-user across two processes: the server runs in the test server executable (a child), and
// peers die for real (SIGKILL).
#include <csignal>
#include <cstring>
#include <poll.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "driver/dma_memory.hpp"
#include "helpers.hpp"

using namespace rig::test;
using namespace rig::driver;

TEST_CASE("vfio-user across processes: BAR mapping, registers, DMA, interrupts, reset", "[vfio_user][process]") {
    child_server s;
    auto f = open_ok(s.where());
    CHECK(f->config_read16(0) == vendor_id);
    CHECK(f->config_read16(2) == device_id);

    auto bar = f->map_bar(region::bar0, caching::uncached);
    REQUIRE(bar);
    REQUIRE(bar->mapped.size() == 2);
    const std::uint32_t v = 0x0badf00d;
    std::memcpy(bar->base + 0x1000, &v, 4);
    CHECK(reg_read(*f, reg::peek) == v);
    reg_write(*f, reg::poke, 0x12345678);
    std::uint32_t seen = 0;
    std::memcpy(&seen, bar->base + 0x1004, 4);
    CHECK(seen == 0x12345678);

    auto mem = dma_memory::allocate(2 * 4096, page_choice::small_only);
    REQUIRE(mem);
    auto a = f->dma_map(*mem, 0, 4096, dma_access::read);
    auto b = f->dma_map(*mem, 4096, 4096, dma_access::write);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(reg_read(*f, reg::windows) == 2);
    auto irqs = f->enable_irqs(irq_kind::msix, 4);
    REQUIRE(irqs);
    for (std::size_t i = 0; i < 4096; ++i) {
        mem->data()[i] = static_cast<std::byte>(i * 13);
    }
    reg_write(*f, reg::dma_src, static_cast<std::uint32_t>(*a));
    reg_write(*f, reg::dma_src + 4, static_cast<std::uint32_t>(*a >> 32));
    reg_write(*f, reg::dma_dst, static_cast<std::uint32_t>(*b));
    reg_write(*f, reg::dma_dst + 4, static_cast<std::uint32_t>(*b >> 32));
    reg_write(*f, reg::dma_len, 4096);
    reg_write(*f, reg::dma_vector, 3);
    reg_write(*f, reg::dma_go, 1);
    CHECK(reg_read(*f, reg::dma_status) == 1);
    CHECK(std::memcmp(mem->data(), mem->data() + 4096, 4096) == 0);
    pollfd p{(*irqs)[3], POLLIN, 0};
    CHECK(::poll(&p, 1, 1000) == 1);

    // refused DMA: reported, memory untouched
    REQUIRE(f->dma_unmap(*b, 4096));
    std::memset(mem->data() + 4096, 0x11, 4096);
    reg_write(*f, reg::dma_go, 1);
    CHECK(reg_read(*f, reg::dma_status) == 2);
    CHECK(reg_read(*f, reg::faults) == 1);
    CHECK(mem->data()[4096] == std::byte{0x11});

    reg_write(*f, reg::scratch, 9);
    REQUIRE(f->reset());
    CHECK(reg_read(*f, reg::scratch) == 0);
    f->release();
    f->release();
}

TEST_CASE("vfio-user: a server killed during a call fails it in bounded time, and all later calls", "[vfio_user][process]") {
    child_server s;
    auto f = open_ok(s.where());
    std::thread killer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        ::kill(s.pid, SIGKILL);
    });
    const auto t0 = steady_clock::now();
    // the device stalls for 10 s: the call is pending when the server dies
    auto r = f->region_write(region::bar0, reg::stall_ms, bytes_of(std::uint32_t{10000}));
    killer.join();
    REQUIRE_FALSE(r);
    CHECK(ms_since(t0) < 2000);
    CHECK_THAT(r.error().message,
               Catch::Contains("VFIO_USER_REGION_WRITE on " + s.where() + ": server closed the connection"));
    s.kill_now();
    const auto t1 = steady_clock::now();
    auto later = f->config_read16(0);
    REQUIRE_FALSE(later);
    CHECK(ms_since(t1) < 50);
    CHECK_THAT(later.error().message, Catch::Contains("server closed the connection"));
    auto mem = dma_memory::allocate(4096, page_choice::small_only);
    REQUIRE(mem);
    CHECK_FALSE(f->dma_map(*mem, 0, 4096, dma_access::read));
    CHECK_FALSE(f->reset());
    f->release();
    f->release();
}

TEST_CASE("vfio-user: a server killed between calls fails the next call at once", "[vfio_user][process]") {
    child_server s;
    auto f = open_ok(s.where());
    auto mem = dma_memory::allocate(4096, page_choice::small_only);
    REQUIRE(mem);
    auto iova = f->dma_map(*mem, 0, 4096, dma_access::read_write);
    REQUIRE(iova);
    s.kill_now();
    const auto t0 = steady_clock::now();
    auto r = f->config_read16(0);
    REQUIRE_FALSE(r);
    CHECK(ms_since(t0) < 2000);
    CHECK_THAT(r.error().message, Catch::Contains("server closed the connection"));
    CHECK_FALSE(f->dma_unmap(*iova, 4096));   // fails, and the window is forgotten
    const auto t1 = steady_clock::now();
    f->release();
    CHECK(ms_since(t1) < 50);
    // and a new open fails cleanly: nobody listens
    auto g = open(s.where());
    CHECK_FALSE(g);
}

TEST_CASE("vfio-user: a client process that dies loses its windows; the next client is served", "[vfio_user][process]") {
    child_server s;
    int up[2];
    REQUIRE(::pipe(up) == 0);
    const pid_t client = ::fork();
    REQUIRE(client >= 0);
    if (client == 0) {
        // the dying client: maps two windows and enables interrupts, reports, then waits to be killed
        ::close(up[0]);
        auto f = open(s.where());
        auto mem = dma_memory::allocate(2 * 4096, page_choice::small_only);
        char report = 'x';
        if (f && mem && (*f)->dma_map(*mem, 0, 4096, dma_access::read) &&
            (*f)->dma_map(*mem, 4096, 4096, dma_access::write) && (*f)->enable_irqs(irq_kind::msix, 4)) {
            std::uint32_t w = 0;
            if ((*f)->region_read(region::bar0, reg::windows, std::as_writable_bytes(std::span<std::uint32_t, 1>(&w, 1)))) {
                report = static_cast<char>('0' + w);
            }
        }
        (void)!::write(up[1], &report, 1);
        ::pause();
        ::_exit(0);
    }
    ::close(up[1]);
    char report = 0;
    pollfd p{up[0], POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    REQUIRE(::read(up[0], &report, 1) == 1);
    ::close(up[0]);
    CHECK(report == '2');
    ::kill(client, SIGKILL);
    int status = 0;
    ::waitpid(client, &status, 0);

    auto f = open_ok(s.where());
    CHECK(reg_read(*f, reg::windows) == 0);
    CHECK(reg_read(*f, reg::served) == 1);
    auto mem = dma_memory::allocate(4096, page_choice::small_only);
    REQUIRE(mem);
    REQUIRE(f->dma_map(*mem, 0, 4096, dma_access::read));
    CHECK(reg_read(*f, reg::windows) == 1);
}
