// The application's own memory on whichever NICs the run has ([any-nic]: the models, or
// RIG_TEST_NICS's functions, as the guest's seed step runs on kernel VFIO): on kernel VFIO heap
// memory (aligned_alloc, no descriptor: VFIO_IOMMU_MAP_DMA takes any address) and hugetlbfs pages
// (memfd_create(MFD_HUGETLB)); on vfio-user a memfd (the server maps memory by its descriptor).
// Each is registered, written by the peer, sent from, deregistered, and stays the application's.
// RIG_TEST_HUGETLB=1: the hugetlbfs block must be allocated (the guest reserves pages); else a
// machine with no free huge page skips it with a warning.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using rig::test::ok;
using rig::test::value;

constexpr std::size_t huge_page = 2u << 20;

// One block of application memory of some kind, released at the end.
struct app_block {
    std::string kind;
    std::byte* data = nullptr;
    std::size_t bytes = 0;
    int fd = -1;
    bool mapped = false;   // munmap at the end (else free)

    app_block(const app_block&) = delete;
    app_block(std::string k, std::byte* d, std::size_t n, int f, bool m) : kind(std::move(k)), data(d), bytes(n), fd(f), mapped(m) {}
    ~app_block() {
        if (mapped) {
            ::munmap(data, bytes);
        } else {
            std::free(data);
        }
        if (fd >= 0) {
            ::close(fd);
        }
    }
};

std::unique_ptr<app_block> file_block(const char* kind, unsigned flags, std::size_t bytes) {
    const int fd = ::memfd_create(kind, MFD_CLOEXEC | flags);
    if (fd < 0) {
        return nullptr;
    }
    void* p = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                  ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
        ::close(fd);
        return nullptr;
    }
    return std::make_unique<app_block>(kind, static_cast<std::byte*>(p), bytes, fd, true);
}

}  // namespace

TEST_CASE("application memory on any NIC: heap and hugetlbfs pages on kernel VFIO, a memfd on vfio-user, move bytes "
          "both ways and stay the application's",
          "[model][api][app-memory][any-nic]") {
    rig::test::two_served_nics t(1 << 16);
    const bool vfio_user = t.n1->name().starts_with("vfio-user:");
    std::vector<std::unique_ptr<app_block>> blocks;
    if (vfio_user) {
        blocks.push_back(file_block("app-memfd", 0, 1 << 16));
        REQUIRE(blocks.back());
    } else {
        auto* heap = static_cast<std::byte*>(std::aligned_alloc(4096, 1 << 16));
        REQUIRE(heap != nullptr);
        blocks.push_back(std::make_unique<app_block>("heap", heap, 1 << 16, -1, false));
        auto huge = file_block("app-hugetlbfs", MFD_HUGETLB, huge_page);
        const char* must = std::getenv("RIG_TEST_HUGETLB");
        if (huge) {
            blocks.push_back(std::move(huge));
        } else if (must != nullptr && std::string(must) == "1") {
            FAIL("no hugetlbfs page to allocate (RIG_TEST_HUGETLB=1)");
        } else {
            WARN("no free huge page: the hugetlbfs block is skipped (echo N > /proc/sys/vm/nr_hugepages)");
        }
    }
    for (const auto& b : blocks) {
        INFO(b->kind << " on " << t.n1->name());
        // on kernel VFIO the descriptor plays no part; a vfio-user server maps memory by it
        rig::region mine = value(t.n1->register_memory(
            rig::app_memory{{b->data, b->bytes}, b->fd, 0}, rig::access::remote));
        CHECK(mine.data() == b->data);
        // the peer writes into it at its far end, then this side writes from it
        std::memset(t.r2.data(), 0x6b, 4096);
        t.b.write(t.r2, 0, 4096, mine.remote(b->bytes - 4096));
        rig::test::expect_done(t.b, rig::side::send, 4096);
        CHECK(std::memcmp(b->data + b->bytes - 4096, t.r2.data(), 4096) == 0);
        for (std::size_t i = 0; i < 3000; ++i) {
            b->data[i] = std::byte(static_cast<std::uint8_t>(i * 31 + 7));
        }
        t.a.write(mine, 0, 3000, t.r2.remote(8192));
        rig::test::expect_done(t.a, rig::side::send, 3000);
        CHECK(std::memcmp(t.r2.data() + 8192, b->data, 3000) == 0);
        ok(mine.deregister());
        // still the application's: mapped, as the NIC left it
        CHECK(std::to_integer<int>(b->data[b->bytes - 1]) == 0x6b);
        b->data[0] = std::byte{1};
    }
}
