// The application's own memory (issue 18, nic::register_memory(app_memory)): a memfd mapping the
// application made and keeps, registered with its descriptor (a vfio-user server maps client
// memory by fd), moves bytes both ways; deregistered and with the NIC closed it is still the
// application's, mapped and intact. Heap memory on vfio-user is refused by name, changing nothing;
// memory that is not whole pages is misuse.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using rig::test::ok;
using rig::test::value;

// A memfd of `bytes`, mapped shared: the application's, unmapped and closed at the end.
struct app_memfd {
    int fd = -1;
    std::byte* data = nullptr;
    std::size_t bytes = 0;
    explicit app_memfd(std::size_t n) : bytes(n) {
        fd = ::memfd_create("app-memory", MFD_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(n)) == 0);
        void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(p != MAP_FAILED);
        data = static_cast<std::byte*>(p);
    }
    ~app_memfd() {
        ::munmap(data, bytes);
        ::close(fd);
    }
};

}  // namespace

TEST_CASE("application memory: a memfd the application keeps moves bytes both ways and outlives its "
          "registration and the NIC", "[model][app-memory]") {
    app_memfd app(64 * 1024);
    {
        rig::test::two_served_nics t(64 * 1024);
        // The second half of the file: the registration names its offset in the file.
        rig::region mine = value(t.n1->register_memory(
            rig::app_memory{{app.data + 32 * 1024, 32 * 1024}, app.fd, 32 * 1024}, rig::access::remote));
        CHECK(mine.data() == app.data + 32 * 1024);
        CHECK(mine.size() == 32 * 1024u);
        // The peer writes into the application's memory, then this side sends from it.
        std::memset(t.r2.data(), 0x5a, 4096);
        t.b.write(t.r2, 0, 4096, mine.remote(8192));
        rig::test::expect_done(t.b, rig::side::send, 4096);
        CHECK(std::memcmp(app.data + 32 * 1024 + 8192, t.r2.data(), 4096) == 0);
        std::memset(app.data + 32 * 1024, 0xc3, 1000);
        t.a.write(mine, 0, 1000, t.r2.remote(20000));
        rig::test::expect_done(t.a, rig::side::send, 1000);
        CHECK(std::memcmp(t.r2.data() + 20000, app.data + 32 * 1024, 1000) == 0);
        ok(mine.deregister());
        CHECK_FALSE(mine.registered());
        ok(t.n1->close());
    }
    // Still the application's: mapped, its bytes as the NIC left them, the descriptor open.
    CHECK(std::to_integer<int>(app.data[32 * 1024 + 8192]) == 0x5a);
    CHECK(std::to_integer<int>(app.data[32 * 1024]) == 0xc3);
    app.data[0] = std::byte{1};
    CHECK(::fcntl(app.fd, F_GETFD) >= 0);
}

TEST_CASE("application memory: heap memory on vfio-user is refused by name, misuse is refused, nothing "
          "changes", "[model][app-memory]") {
    rig::test::two_served_nics t(4096);
    const std::size_t before = t.n1->regions();
    std::unique_ptr<std::byte, decltype(&std::free)> heap(static_cast<std::byte*>(std::aligned_alloc(4096, 16384)),
                                                          &std::free);
    REQUIRE(heap);
    auto r = t.n1->register_memory(rig::app_memory{{heap.get(), 16384}}, rig::access::remote);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == rig::error_kind::os);
    CHECK(r.error().message.find("memory without a file descriptor") != std::string::npos);
    CHECK(r.error().message.find("vfio_user_dma_by_message") != std::string::npos);
    CHECK(t.n1->regions() == before);
    CHECK_THROWS_WITH(t.n1->register_memory(rig::app_memory{{heap.get() + 100, 4096}}, rig::access::local),
                      Catch::Contains("not whole 4 KiB pages"));
    CHECK_THROWS_WITH(t.n1->register_memory(rig::app_memory{{heap.get(), 4000}}, rig::access::local),
                      Catch::Contains("not whole 4 KiB pages"));
    CHECK_THROWS_WITH(t.n1->register_memory(rig::app_memory{}, rig::access::local), Catch::Contains("empty memory"));
    CHECK(t.n1->regions() == before);
}
