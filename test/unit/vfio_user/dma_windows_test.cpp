// DMA windows at the scale QEMU makes them under a vIOMMU: one VFIO_USER_DMA_MAP per 4 KiB guest
// page, each with its own dup of the guest RAM memfd at its own offset (hw/vfio-user/container.c
// vfio_user_dma_map), unmapped by wide power-of-two spans when the guest switches domains
// (hw/i386/intel_iommu.c vtd_address_space_unmap). The server maps each file once
// (sim/vfio_user/dma_files.hpp) and takes spans as kernel type1's vfio_dma_do_unmap does.
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/vfio_user/dma_space.hpp"

namespace vu = rig::sim::vfio_user;

namespace {

constexpr std::uint64_t page = 4096;
constexpr std::uint64_t iova_base = 0x1'0000'0000;

// a memfd of `bytes`, named so that /proc/self/maps shows its mappings
struct memfd {
    std::string name;
    int fd = -1;
    memfd(std::string n, std::uint64_t bytes) : name(std::move(n)), fd(::memfd_create(name.c_str(), MFD_CLOEXEC)) {
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    }
    ~memfd() { ::close(fd); }
    // mappings of this file in this process, as the kernel counts them against vm.max_map_count
    int mappings() const {
        std::ifstream maps("/proc/self/maps");
        const std::string tag = "/memfd:" + name + " ";
        int n = 0;
        for (std::string line; std::getline(maps, line);) {
            n += (line + " ").find(tag) != std::string::npos ? 1 : 0;
        }
        return n;
    }
    void put(std::uint64_t offset, const std::vector<std::byte>& b) const {
        REQUIRE(::pwrite(fd, b.data(), b.size(), static_cast<off_t>(offset)) == static_cast<ssize_t>(b.size()));
    }
    std::vector<std::byte> get(std::uint64_t offset, std::size_t n) const {
        std::vector<std::byte> b(n);
        REQUIRE(::pread(fd, b.data(), n, static_cast<off_t>(offset)) == static_cast<ssize_t>(n));
        return b;
    }
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
    std::vector<std::byte> b(n);
    for (std::size_t i = 0; i < n; ++i) {
        b[i] = static_cast<std::byte>((i * 31 + seed * 7 + 1) & 0xff);
    }
    return b;
}

// window i's page of the file: scattered, as a guest's pages lie anywhere in its RAM
std::uint64_t file_page_of(std::uint64_t i, std::uint64_t pages) { return (i * 40503) % pages; }

// maps window i as QEMU does: its own fd number (a dup, as SCM_RIGHTS gives one per message)
int map_page(vu::dma_space& dma, const memfd& f, std::uint64_t i, std::uint64_t pages, bool writable = true) {
    const int dup = ::dup(f.fd);
    REQUIRE(dup >= 0);
    const int err = dma.map(iova_base + i * page, page, true, writable, dup, file_page_of(i, pages) * page);
    ::close(dup);
    return err;
}

struct recording_guard final : vu::unmap_guard {
    std::vector<std::pair<const std::byte*, std::size_t>> forgotten;
    int holds = 0;
    void hold() override { ++holds; }
    void forget(std::span<const std::byte> going) noexcept override {
        forgotten.emplace_back(going.data(), going.size());
    }
    void release() noexcept override {}
};

struct recording_observer final : vu::unmap_observer {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> told;
    void unmapped(std::uint64_t iova, std::uint64_t size) override { told.emplace_back(iova, size); }
};

}  // namespace

TEST_CASE("DMA windows: 256 MiB of 4 KiB windows from one memfd are served by one mapping", "[vfio_user][dma]") {
    constexpr std::uint64_t pages = 65536;
    const memfd f("rig-dma-65536", pages * page);
    vu::dma_space dma;
    for (std::uint64_t i = 0; i < pages; ++i) {
        REQUIRE(map_page(dma, f, i, pages) == 0);
    }
    CHECK(dma.window_count() == pages);
    CHECK(dma.file_mappings() == 1);
    CHECK(f.mappings() == 1);

    // bytes through windows land at their own pages of the file, and come back
    for (std::uint64_t i : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{777}, pages - 1}) {
        const auto b = pattern(page, static_cast<unsigned>(i));
        REQUIRE(dma.write(iova_base + i * page, b));
        CHECK(f.get(file_page_of(i, pages) * page, page) == b);
        const auto c = pattern(100, static_cast<unsigned>(i + 1));
        f.put(file_page_of(i, pages) * page + 3000, c);
        std::vector<std::byte> back(100);
        REQUIRE(dma.read(iova_base + i * page + 3000, back));
        CHECK(back == c);
    }
    // an access over three windows: a piece in each one's page of the file
    const auto run = pattern(2 * page + 200, 9);
    REQUIRE(dma.write(iova_base + 10 * page + page - 100, run));
    const auto part = [&](std::size_t from, std::size_t n) {
        return std::vector<std::byte>(run.begin() + static_cast<std::ptrdiff_t>(from),
                                      run.begin() + static_cast<std::ptrdiff_t>(from + n));
    };
    CHECK(f.get(file_page_of(10, pages) * page + page - 100, 100) == part(0, 100));
    CHECK(f.get(file_page_of(11, pages) * page, page) == part(100, page));
    CHECK(f.get(file_page_of(12, pages) * page, 100) == part(100 + page, 100));
    std::vector<std::byte> back(run.size());
    REQUIRE(dma.read(iova_base + 10 * page + page - 100, back));
    CHECK(back == run);
    CHECK(dma.fault_count() == 0);

    // QEMU's unmap of a whole 48-bit space: power-of-two spans, most hold nothing
    REQUIRE(dma.unmap(iova_base, pages * page / 2) == 0);   // half the windows in one span
    CHECK(dma.window_count() == pages / 2);
    CHECK(f.mappings() == 1);
    for (std::uint64_t start = 0, size = std::uint64_t{1} << 47; start < (std::uint64_t{1} << 48); start += size) {
        REQUIRE(dma.unmap(start, size) == 0);
    }
    CHECK(dma.window_count() == 0);
    CHECK(dma.file_mappings() == 0);
    CHECK(f.mappings() == 0);
}

TEST_CASE("DMA windows: a span that cuts a window is refused and nothing goes", "[vfio_user][dma]") {
    const memfd f("rig-dma-cut", 64 * page);
    vu::dma_space dma;
    // two windows of 4 pages, one of 1, with a hole between the second and the third
    const int dup = ::dup(f.fd);
    REQUIRE(dma.map(iova_base, 4 * page, true, true, dup, 0) == 0);
    REQUIRE(dma.map(iova_base + 4 * page, 4 * page, true, true, dup, 8 * page) == 0);
    REQUIRE(dma.map(iova_base + 10 * page, page, true, true, dup, 20 * page) == 0);
    ::close(dup);
    CHECK(dma.file_mappings() == 1);

    CHECK(dma.unmap(iova_base + page, 8 * page) == EINVAL);       // starts inside the first
    CHECK(dma.unmap(iova_base, 6 * page) == EINVAL);              // ends inside the second
    CHECK(dma.unmap(iova_base + 4 * page, 2 * page) == EINVAL);   // a part of the second alone
    CHECK(dma.unmap(iova_base, 0) == EINVAL);                     // empty
    CHECK(dma.unmap(~std::uint64_t{0} - page + 1, 2 * page) == EINVAL);   // wraps
    CHECK(dma.window_count() == 3);
    const auto b = pattern(4 * page, 3);
    CHECK(dma.write(iova_base, b));   // the first window still serves

    CHECK(dma.unmap(iova_base + 20 * page, 8 * page) == 0);   // holds none: no error
    CHECK(dma.window_count() == 3);
    recording_guard* guard = nullptr;
    {
        auto g = std::make_shared<recording_guard>();
        guard = g.get();
        dma.guard_unmaps(g);
    }
    auto observer = std::make_shared<recording_observer>();
    dma.watch_unmaps(observer);
    // the first two and the hole: the guard hears of the host bytes of both (not contiguous in
    // the file: two spans), the observer of each window
    CHECK(dma.unmap(iova_base, 10 * page) == 0);
    CHECK(dma.window_count() == 1);
    CHECK(guard->forgotten.size() == 2);
    CHECK(guard->forgotten[0].second == 4 * page);
    CHECK(guard->forgotten[1].second == 4 * page);
    CHECK(guard->forgotten[1].first - guard->forgotten[0].first == 8 * page);
    REQUIRE(observer->told.size() == 2);
    CHECK(observer->told[0] == std::pair<std::uint64_t, std::uint64_t>{iova_base, 4 * page});
    CHECK(observer->told[1] == std::pair<std::uint64_t, std::uint64_t>{iova_base + 4 * page, 4 * page});
    CHECK(dma.file_mappings() == 1);   // the third window still holds the file
    std::vector<std::byte> gone(16);
    CHECK_FALSE(dma.read(iova_base, gone));
}

TEST_CASE("DMA windows: a window's memory stays mapped until the last window of its file goes", "[vfio_user][dma]") {
    const memfd f("rig-dma-last", 16 * page);
    vu::dma_space dma;
    auto g = std::make_shared<recording_guard>();
    dma.guard_unmaps(g);
    REQUIRE(map_page(dma, f, 0, 16) == 0);
    REQUIRE(map_page(dma, f, 1, 16) == 0);
    const auto b = pattern(page, 5);
    f.put(file_page_of(0, 16) * page, b);
    const std::byte* a = dma.reference(iova_base, page, *g);
    REQUIRE(a != nullptr);
    const std::byte* other = dma.reference(iova_base + page, page, *g);
    REQUIRE(other != nullptr);

    REQUIRE(dma.unmap(iova_base + page, page) == 0);
    REQUIRE(g->forgotten.size() == 1);
    CHECK(g->forgotten[0] == std::pair<const std::byte*, std::size_t>{other, page});   // told of it alone
    CHECK(f.mappings() == 1);
    CHECK(std::memcmp(a, b.data(), page) == 0);   // the first window's bytes, still mapped
    CHECK(dma.reference(iova_base + page, 1, *g) == nullptr);

    REQUIRE(dma.unmap(iova_base, page) == 0);
    CHECK(g->forgotten.size() == 2);
    CHECK(f.mappings() == 0);
    CHECK(dma.file_mappings() == 0);
}

TEST_CASE("DMA windows: read-only windows, gaps and the IOMMU's refusals", "[vfio_user][dma]") {
    const memfd f("rig-dma-ro", 16 * page);
    vu::dma_space dma;
    REQUIRE(map_page(dma, f, 0, 16) == 0);
    REQUIRE(map_page(dma, f, 1, 16, false) == 0);   // read-only: a second mapping, PROT_READ
    REQUIRE(map_page(dma, f, 3, 16) == 0);          // a gap at page 2
    CHECK(dma.file_mappings() == 2);
    CHECK(f.mappings() == 2);
    CHECK(map_page(dma, f, 1, 16) == EEXIST);

    const auto before = f.get(file_page_of(0, 16) * page, page);
    const auto b = pattern(200, 1);
    CHECK_FALSE(dma.write(iova_base + page + 8, b));                 // read-only
    CHECK_FALSE(dma.write(iova_base + page - 100, b));               // runs into the read-only one
    CHECK(f.get(file_page_of(0, 16) * page, page) == before);       // and wrote nothing of its first part
    std::vector<std::byte> r(200);
    CHECK(dma.read(iova_base + page - 100, r));                      // reading across them is allowed
    CHECK_FALSE(dma.read(iova_base + 2 * page - 100, r));            // into the gap
    CHECK_FALSE(dma.read(iova_base + 2 * page, r));                  // in the gap
    CHECK_FALSE(dma.read(iova_base - 100, r));                       // before the first
    CHECK(dma.fault_count() == 5);
    const auto faults = dma.faults();
    CHECK(faults[0].reason == "DMA window not writable by the device");
    CHECK(faults[1].reason == "DMA window not writable by the device");
    CHECK(faults[2].reason == "runs past the end of its DMA window");
    CHECK(faults[3].reason == "no DMA window there");

    auto observer = std::make_shared<recording_observer>();
    dma.watch_unmaps(observer);
    dma.unmap_every_window();   // VFIO_DMA_UNMAP_FLAG_ALL: the observer hears of each
    CHECK(observer->told.size() == 3);
    CHECK(dma.window_count() == 0);
    CHECK(f.mappings() == 0);
}

TEST_CASE("DMA windows: touch changes no byte, skips what the device may not reach, and refuses nothing",
          "[vfio_user][dma]") {
    const memfd f("rig-dma-touch", 16 * page);
    vu::dma_space dma;
    REQUIRE(map_page(dma, f, 0, 16) == 0);
    REQUIRE(map_page(dma, f, 1, 16, false) == 0);   // read-only (PROT_READ: a write there would fault)
    REQUIRE(map_page(dma, f, 3, 16) == 0);          // a gap at page 2
    for (std::uint64_t i : {0u, 1u, 3u}) {
        f.put(file_page_of(i, 16) * page, pattern(page, static_cast<unsigned>(i) + 3));
    }
    // from inside page 0 to past page 3: every page, the gap and past the last window included
    dma.touch(iova_base + 100, 5 * page, true);
    dma.touch(iova_base + 100, 5 * page, false);
    dma.touch(iova_base - page, page, true);   // before the first window
    for (std::uint64_t i : {0u, 1u, 3u}) {
        INFO("page " << i);
        CHECK(f.get(file_page_of(i, 16) * page, page) == pattern(page, static_cast<unsigned>(i) + 3));
    }
    CHECK(dma.fault_count() == 0);   // a touch is no access: nothing is reported
}

TEST_CASE("DMA windows: a file that grew gets a second mapping for windows past its old end", "[vfio_user][dma]") {
    const memfd f("rig-dma-grow", 4 * page);
    vu::dma_space dma;
    const int dup = ::dup(f.fd);
    REQUIRE(dma.map(iova_base, page, true, true, dup, 0) == 0);
    CHECK(dma.map(iova_base + page, page, true, true, dup, 4 * page) == EINVAL);   // past its end
    REQUIRE(::ftruncate(f.fd, static_cast<off_t>(8 * page)) == 0);
    REQUIRE(dma.map(iova_base + page, page, true, true, dup, 4 * page) == 0);
    ::close(dup);
    CHECK(dma.file_mappings() == 2);
    const auto b = pattern(page, 2);
    REQUIRE(dma.write(iova_base + page, b));
    CHECK(f.get(4 * page, page) == b);
    dma.unmap_all();
    CHECK(f.mappings() == 0);
}
