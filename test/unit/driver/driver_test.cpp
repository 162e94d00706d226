// driver/: DMA memory, IOVA allocation, open()'s refusals, and the control lock's order.
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "driver/dma_memory.hpp"
#include "driver/fifo_mutex.hpp"
#include "driver/function.hpp"
#include "driver/iova.hpp"
#include "test/within.hpp"

using namespace rig::driver;

TEST_CASE("DMA memory is a zeroed, shared memfd mapping of whole pages", "[driver][dma]") {
    auto m = dma_memory::allocate(5000, page_choice::small_only);
    REQUIRE(m.has_value());
    CHECK(m->size() == 8192);
    CHECK(m->page_size() == 4096);
    CHECK(m->fd() >= 0);
    for (std::byte b : m->bytes()) {
        REQUIRE(b == std::byte{0});
    }
    struct stat st{};
    REQUIRE(fstat(m->fd(), &st) == 0);
    CHECK(st.st_size == 8192);
    // the fd and the mapping are the same pages: what a vfio-user server mmaps sees our writes
    std::memset(m->data(), 0x5a, 16);
    unsigned char back[16];
    REQUIRE(pread(m->fd(), back, sizeof back, 0) == 16);
    CHECK(back[0] == 0x5a);
    CHECK(back[15] == 0x5a);
}

TEST_CASE("DMA memory refuses zero bytes and moves ownership", "[driver][dma]") {
    auto none = dma_memory::allocate(0);
    REQUIRE_FALSE(none.has_value());
    CHECK_THAT(none.error().message, Catch::Contains("0 bytes"));
    auto m = dma_memory::allocate(1, page_choice::small_only);
    REQUIRE(m);
    const int fd = m->fd();
    dma_memory other = std::move(*m);
    CHECK(other.fd() == fd);
    CHECK_FALSE(static_cast<bool>(*m));
}

TEST_CASE("DMA memory takes 2 MiB pages when the host has them, else says why", "[driver][dma]") {
    auto huge = dma_memory::allocate(1, page_choice::huge_only);
    if (huge) {
        CHECK(huge->size() == dma_memory::huge_page);
        CHECK(huge->huge());
    } else {
        CHECK_THAT(huge.error().message, Catch::Contains("hugetlb"));
        auto any = dma_memory::allocate(1);   // automatic falls back to small pages
        REQUIRE(any);
        CHECK_FALSE(any->huge());
    }
}

TEST_CASE("IOVAs come from the allowed ranges, aligned, below the limit, never 0", "[driver][iova]") {
    iova_allocator a({{0, 0xffffffff}}, (1u << 28) - 1);   // edu: 28-bit DMA
    const auto x = a.allocate(4096, 4096);
    REQUIRE(x);
    CHECK(*x >= 0x10000);
    CHECK(*x % 4096 == 0);
    const auto y = a.allocate(2 << 20, 2 << 20);
    REQUIRE(y);
    CHECK(*y % (2 << 20) == 0);
    CHECK(*y + (2 << 20) - 1 <= (1u << 28) - 1);
    CHECK_FALSE(a.allocate(1u << 28, 4096));   // more than the window holds
    CHECK_FALSE(a.release(*x, 8192));           // not the size it was given
    CHECK(a.release(*x, 4096));
    CHECK_FALSE(a.release(*x, 4096));           // twice
    CHECK(a.release(*y, 2 << 20));
    CHECK(a.free_bytes() == (1u << 28) - 0x10000);   // all merged back
}

TEST_CASE("IOVA ranges with holes are respected", "[driver][iova]") {
    // the x86 MSI window 0xfee00000..0xfeefffff is reserved by the IOMMU
    iova_allocator a({{0, 0xfedfffff}, {0xfef00000, 0xffffffff}}, 0xffffffff, 0xfed00000);
    const auto x = a.allocate(1 << 20, 1 << 20);
    REQUIRE(x);
    CHECK(*x == 0xfed00000);
    const auto y = a.allocate(1 << 20, 1 << 20);
    REQUIRE(y);
    CHECK(*y == 0xfef00000);
}

TEST_CASE("open refuses what is neither a PCI address nor vfio-user:PATH", "[driver]") {
    auto empty_path = open("vfio-user:");
    REQUIRE_FALSE(empty_path.has_value());
    CHECK_THAT(empty_path.error().message, Catch::Contains("no socket path"));
    for (const char* bad : {"", "eth0", "0000:3b:00", "0000:3b:00.8", "0000:3b:20.0", "3b:00.0"}) {
        INFO(bad);
        auto f = open(bad);
        REQUIRE_FALSE(f.has_value());
        CHECK_THAT(f.error().message, Catch::StartsWith("open") && Catch::Contains("not a PCI address"));
    }
}

// driver/fifo_mutex.hpp: the lock a function's control calls take. Served in the order asked, so
// a thread that unlocks and locks again at once goes behind the threads already waiting.
TEST_CASE("the control lock serves waiting threads in the order they asked", "[driver]") {
    fifo_recursive_mutex m;
    std::mutex order_lock;
    std::vector<std::string> order;
    const auto take = [&](std::string who) {
        m.lock();
        {
            std::scoped_lock g(order_lock);
            order.push_back(std::move(who));
        }
        m.unlock();
    };
    const auto waiting_reaches = [&](std::uint64_t n) {
        return rig::test::within(std::chrono::seconds(5), [&] { return m.waiting() == n; });
    };
    m.lock();
    m.lock();  // recursive: the owner nests
    std::thread b(take, "b");
    REQUIRE(waiting_reaches(1));
    std::thread c(take, "c");
    REQUIRE(waiting_reaches(2));
    m.unlock();
    CHECK(m.waiting() == 2);  // still held once
    m.unlock();
    m.lock();  // at once again: behind b and c
    {
        std::scoped_lock g(order_lock);
        CHECK(order == std::vector<std::string>{"b", "c"});
    }
    CHECK(m.waiting() == 0);
    m.unlock();
    b.join();
    c.join();
}
