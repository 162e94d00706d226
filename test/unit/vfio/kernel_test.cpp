// The kernel VFIO back end without a kernel: uapi numbers and sizes, capability-chain parsing
// on hand-built bytes (malformed chains included), the path choice and its refusals, open()'s
// errors on fixture trees, and the DMA-limit messages. The real ioctls run in test/vm/.
#include <catch2/catch.hpp>

#include <linux/vfio.h>

#include <cstring>

#include "driver/function.hpp"
#include "driver/vfio/caps.hpp"
#include "driver/vfio/iommu.hpp"
#include "driver/vfio/limits.hpp"
#include "driver/vfio/uapi.hpp"
#include "test/unit/vfio/fixture.hpp"

using namespace rig::driver;
using namespace rig::driver::vfio;
using rig::test::sysfs_fixture;

TEST_CASE("iommufd and cdev uapi: sizes and ioctl numbers from the kernel's headers", "[vfio][uapi]") {
    // include/uapi/linux/vfio.h and iommufd.h: all are _IO(';', n)
    CHECK(VFIO_GET_API_VERSION == 0x3b64);
    CHECK(uapi::device_bind_iommufd == _IO(';', 100 + 18));
    CHECK(uapi::device_bind_iommufd == 0x3b76);
    CHECK(uapi::device_attach_iommufd_pt == _IO(';', 100 + 19));
    CHECK(uapi::device_detach_iommufd_pt == _IO(';', 100 + 20));
    CHECK(uapi::iommu_destroy_ioctl == _IO(';', 0x80));
    CHECK(uapi::iommu_ioas_alloc_ioctl == _IO(';', 0x81));
    CHECK(uapi::iommu_ioas_iova_ranges_ioctl == _IO(';', 0x84));
    CHECK(uapi::iommu_ioas_map_ioctl == _IO(';', 0x85));
    CHECK(uapi::iommu_ioas_map_ioctl == 0x3b85);
    CHECK(uapi::iommu_ioas_unmap_ioctl == _IO(';', 0x86));
    CHECK(sizeof(uapi::vfio_device_bind_iommufd) == 16);
    CHECK(sizeof(uapi::vfio_device_attach_iommufd_pt) == 12);
    CHECK(sizeof(uapi::iommu_ioas_alloc) == 12);
    CHECK(sizeof(uapi::iommu_ioas_iova_ranges) == 32);
    CHECK(sizeof(uapi::iommu_ioas_map) == 40);
    CHECK(sizeof(uapi::iommu_ioas_unmap) == 24);
    CHECK(uapi::ioas_map_fixed_iova == 1);
    CHECK(uapi::ioas_map_writeable == 2);
    CHECK(uapi::ioas_map_readable == 4);
    // the legacy structs, as compiled here (<linux/vfio.h>)
    CHECK(sizeof(vfio_region_info) == 32);
    CHECK(sizeof(vfio_irq_info) == 16);
    CHECK(sizeof(vfio_irq_set) == 20);
    CHECK(sizeof(vfio_iommu_type1_dma_map) == 32);
    CHECK(sizeof(vfio_iommu_type1_dma_unmap) == 24);
    CHECK(sizeof(vfio_group_status) == 8);
}

namespace {

// A hand-built ioctl answer.
struct bytes {
    std::vector<std::byte> b;
    explicit bytes(std::size_t n) : b(n) {}
    template <class T>
    void put(std::size_t at, T v) {
        REQUIRE(at + sizeof v <= b.size());
        std::memcpy(b.data() + at, &v, sizeof v);
    }
    void cap(std::size_t at, std::uint16_t id, std::uint16_t version, std::uint32_t next) {
        put<std::uint16_t>(at, id);
        put<std::uint16_t>(at + 2, version);
        put<std::uint32_t>(at + 4, next);
    }
    std::span<const std::byte> span() const { return b; }
};

constexpr std::uint32_t mmap_flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE |
                                     VFIO_REGION_INFO_FLAG_MMAP;

bytes region_answer(std::size_t total, std::uint32_t flags, std::uint64_t size, std::uint32_t cap_offset) {
    bytes r(total);
    r.put<std::uint32_t>(0, static_cast<std::uint32_t>(total));   // argsz
    r.put<std::uint32_t>(4, flags);
    r.put<std::uint32_t>(8, 0);                                    // index
    r.put<std::uint32_t>(12, cap_offset);
    r.put<std::uint64_t>(16, size);
    r.put<std::uint64_t>(24, 0x10000000000ull);                    // fd offset
    return r;
}

// A sparse-mmap capability at `at` with the given areas.
void sparse(bytes& r, std::size_t at, std::uint32_t next, std::vector<area> areas) {
    r.cap(at, VFIO_REGION_INFO_CAP_SPARSE_MMAP, 1, next);
    r.put<std::uint32_t>(at + 8, static_cast<std::uint32_t>(areas.size()));
    for (std::size_t i = 0; i < areas.size(); ++i) {
        r.put<std::uint64_t>(at + 16 + 16 * i, areas[i].offset);
        r.put<std::uint64_t>(at + 24 + 16 * i, areas[i].size);
    }
}

}  // namespace

TEST_CASE("region info: the sparse-mmap areas are the mappable ones", "[vfio][caps]") {
    // BAR0 of 1 MiB: doorbell page at 0x2000 and 64 KiB from 0x80000 mappable; the MSI-X table
    // between them is not
    bytes r = region_answer(32 + 16 + 32, mmap_flags | VFIO_REGION_INFO_FLAG_CAPS, 0x100000, 32);
    sparse(r, 32, 0, {{0x2000, 0x1000}, {0x80000, 0x10000}});
    auto info = parse_region_info(r.span(), region::bar0, "0000:3b:00.0");
    REQUIRE(info);
    CHECK(info->size == 0x100000);
    CHECK(info->readable);
    CHECK(info->writable);
    REQUIRE(info->mappable.size() == 2);
    CHECK(info->mappable[0].offset == 0x2000);
    CHECK(info->mappable[0].size == 0x1000);
    CHECK(info->mappable[1].offset == 0x80000);
}

TEST_CASE("region info: a chain with another capability first still finds sparse mmap", "[vfio][caps]") {
    // VFIO_REGION_INFO_CAP_TYPE (id 2, 16 bytes), then sparse mmap
    bytes r = region_answer(32 + 16 + 16 + 16, mmap_flags | VFIO_REGION_INFO_FLAG_CAPS, 0x4000, 32);
    r.cap(32, VFIO_REGION_INFO_CAP_TYPE, 1, 48);
    sparse(r, 48, 0, {{0x1000, 0x1000}});
    auto info = parse_region_info(r.span(), region::bar2, "x");
    REQUIRE(info);
    REQUIRE(info->mappable.size() == 1);
    CHECK(info->mappable[0].offset == 0x1000);
}

TEST_CASE("region info: without the sparse capability the whole region maps; without MMAP none", "[vfio][caps]") {
    auto whole = parse_region_info(region_answer(32, mmap_flags, 0x1000, 0).span(), region::bar0, "x");
    REQUIRE(whole);
    REQUIRE(whole->mappable.size() == 1);
    CHECK(whole->mappable[0].size == 0x1000);

    auto config = parse_region_info(
        region_answer(32, VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE, 256, 0).span(), region::config, "x");
    REQUIRE(config);
    CHECK(config->mappable.empty());
    CHECK(config->size == 256);

    // CAPS set but cap_offset 0: what the kernel answers to a first pass that was too small;
    // no capability can be read, so the whole region
    auto first_pass = parse_region_info(region_answer(32, mmap_flags | VFIO_REGION_INFO_FLAG_CAPS, 0x1000, 0).span(),
                                        region::bar0, "x");
    REQUIRE(first_pass);
    CHECK(first_pass->mappable.size() == 1);

    // a sparse capability with no areas: nothing may be mapped
    bytes none = region_answer(32 + 16, mmap_flags | VFIO_REGION_INFO_FLAG_CAPS, 0x1000, 32);
    sparse(none, 32, 0, {});
    auto empty = parse_region_info(none.span(), region::bar0, "x");
    REQUIRE(empty);
    CHECK(empty->mappable.empty());
}

TEST_CASE("region info: malformed capability chains are errors, not crashes", "[vfio][caps]") {
    const std::uint32_t flags = mmap_flags | VFIO_REGION_INFO_FLAG_CAPS;
    SECTION("first capability outside the answer") {
        auto r = parse_region_info(region_answer(48, flags, 0x1000, 4096).span(), region::bar0, "0000:3b:00.0");
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::StartsWith("VFIO_DEVICE_GET_REGION_INFO on 0000:3b:00.0") &&
                                          Catch::Contains("outside the 48-byte answer"));
    }
    SECTION("capability inside the fixed struct") {
        auto r = parse_region_info(region_answer(48, flags, 0x1000, 8).span(), region::bar0, "x");
        REQUIRE_FALSE(r);
    }
    SECTION("header cut off at the end") {
        auto r = parse_region_info(region_answer(36, flags, 0x1000, 32).span(), region::bar0, "x");
        REQUIRE_FALSE(r);
    }
    SECTION("next points outside") {
        bytes b = region_answer(32 + 16, flags, 0x1000, 32);
        b.cap(32, VFIO_REGION_INFO_CAP_TYPE, 1, 0xfffffff0);
        auto r = parse_region_info(b.span(), region::bar0, "x");
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("outside"));
    }
    SECTION("next points to itself") {
        bytes b = region_answer(32 + 16, flags, 0x1000, 32);
        b.cap(32, VFIO_REGION_INFO_CAP_TYPE, 1, 32);
        auto r = parse_region_info(b.span(), region::bar0, "x");
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("loops"));
    }
    SECTION("two capabilities point at each other") {
        bytes b = region_answer(32 + 16 + 16, flags, 0x1000, 32);
        b.cap(32, VFIO_REGION_INFO_CAP_TYPE, 1, 48);
        b.cap(48, VFIO_REGION_INFO_CAP_MSIX_MAPPABLE, 1, 32);
        auto r = parse_region_info(b.span(), region::bar0, "x");
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("loops"));
    }
    SECTION("more areas claimed than the answer holds") {
        bytes b = region_answer(32 + 16 + 16, flags, 0x100000, 32);
        sparse(b, 32, 0, {{0, 0x1000}});
        b.put<std::uint32_t>(40, 1000000);
        auto r = parse_region_info(b.span(), region::bar0, "x");
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("1000000 areas"));
    }
    SECTION("an area beyond the region") {
        bytes b = region_answer(32 + 16 + 16, flags, 0x4000, 32);
        sparse(b, 32, 0, {{0x3000, 0x2000}});
        auto r = parse_region_info(b.span(), region::bar0, "x");
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("outside the 0x4000-byte region"));
    }
    SECTION("an area whose end overflows") {
        bytes b = region_answer(32 + 16 + 16, flags, 0x4000, 32);
        sparse(b, 32, 0, {{0x1000, ~std::uint64_t{0}}});
        REQUIRE_FALSE(parse_region_info(b.span(), region::bar0, "x"));
    }
    SECTION("an unknown sparse-mmap version") {
        bytes b = region_answer(32 + 16, flags, 0x4000, 32);
        sparse(b, 32, 0, {});
        b.put<std::uint16_t>(34, 2);
        REQUIRE_FALSE(parse_region_info(b.span(), region::bar0, "x"));
    }
    SECTION("shorter than the struct") {
        bytes b(20);
        REQUIRE_FALSE(parse_region_info(b.span(), region::bar0, "x"));
    }
}

TEST_CASE("type1 IOMMU info: page sizes, IOVA ranges and DMA mappings available", "[vfio][caps]") {
    // vfio_iommu_type1_info (24) + IOVA range cap (16 + 2 x 16) + DMA avail cap (12, padded 16)
    bytes b(24 + 48 + 16);
    b.put<std::uint32_t>(0, 24 + 48 + 16);
    b.put<std::uint32_t>(4, VFIO_IOMMU_INFO_PGSIZES | VFIO_IOMMU_INFO_CAPS);
    b.put<std::uint64_t>(8, 0x40201000);
    b.put<std::uint32_t>(16, 24);
    b.cap(24, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE, 1, 72);
    b.put<std::uint32_t>(32, 2);
    b.put<std::uint64_t>(40, 0);
    b.put<std::uint64_t>(48, 0xfedfffff);
    b.put<std::uint64_t>(56, 0xfef00000);
    b.put<std::uint64_t>(64, 0x7fffffffffff);
    b.cap(72, VFIO_IOMMU_TYPE1_INFO_DMA_AVAIL, 1, 0);
    b.put<std::uint32_t>(80, 65530);
    auto info = parse_type1_info(b.span(), "0000:00:04.0");
    REQUIRE(info);
    CHECK(info->iova_pgsizes == 0x40201000);
    REQUIRE(info->iova_ranges.size() == 2);
    CHECK(info->iova_ranges[0].last == 0xfedfffff);
    CHECK(info->iova_ranges[1].first == 0xfef00000);
    CHECK(info->has_dma_avail);
    CHECK(info->dma_avail == 65530);

    b.put<std::uint32_t>(32, 100);   // more ranges than bytes
    REQUIRE_FALSE(parse_type1_info(b.span(), "x"));
}

TEST_CASE("DMA map errors name the limit that was hit and how to raise it", "[vfio][limits]") {
    map_attempt a;
    a.type1 = true;
    a.bytes = 2 << 20;
    a.mapped_bytes = 4 << 20;
    a.mappings = 65535;
    a.limits.dma_entry_limit = 65535;
    a.limits.memlock_bytes = 65536;

    const error nospc = map_error("VFIO_IOMMU_MAP_DMA", "0000:3b:00.0", ENOSPC, a);
    CHECK(nospc.os_errno == ENOSPC);
    CHECK_THAT(nospc.message, Catch::StartsWith("VFIO_IOMMU_MAP_DMA on 0000:3b:00.0: No space left on device") &&
                                  Catch::Contains("dma_entry_limit = 65535") &&
                                  Catch::Contains("/sys/module/vfio_iommu_type1/parameters/dma_entry_limit"));

    const error nomem = map_error("VFIO_IOMMU_MAP_DMA", "0000:3b:00.0", ENOMEM, a);
    CHECK_THAT(nomem.message, Catch::StartsWith("VFIO_IOMMU_MAP_DMA on 0000:3b:00.0: Cannot allocate memory") &&
                                  Catch::Contains("RLIMIT_MEMLOCK of 65536 bytes") &&
                                  Catch::Contains("2097152 more bytes") && Catch::Contains("ulimit -l"));

    a.limits.memlock_bytes.reset();
    const error unlimited = map_error("IOMMU_IOAS_MAP", "0000:3b:00.0", ENOMEM, a);
    CHECK_THAT(unlimited.message, Catch::Contains("RLIMIT_MEMLOCK is unlimited"));

    const error other = map_error("IOMMU_IOAS_MAP", "0000:3b:00.0", EFAULT, a);
    CHECK(other.message == std::string("IOMMU_IOAS_MAP on 0000:3b:00.0: ") + std::strerror(EFAULT));
}

TEST_CASE("the DMA limits are read from sysfs and getrlimit", "[vfio][limits]") {
    sysfs_fixture fx;
    sysfs_fixture::put(fx.sys() / "module/vfio_iommu_type1/parameters/dma_entry_limit", "65535\n");
    CHECK(read_map_limits(fx.sys().string()).dma_entry_limit == 65535u);
    CHECK_FALSE(read_map_limits((fx.root() / "none").string()).dma_entry_limit.has_value());
}

// ---- which path, and the refusals ----

namespace {
pci_function edu() {
    pci_function f;
    f.bdf = "0000:00:04.0";
    f.iommu_group = 5;
    f.driver = "vfio-pci";
    f.vfio_cdev = "vfio0";
    return f;
}
}  // namespace

TEST_CASE("automatic picks iommufd where the kernel has it, else the group", "[vfio][path]") {
    const open_options o;
    CHECK(choose_path(iommu_mode::automatic, {true, true, true, false}, edu(), o) == path::iommufd);
    CHECK(choose_path(iommu_mode::automatic, {false, false, true, false}, edu(), o) == path::group_type1v2);
    CHECK(choose_path(iommu_mode::automatic, {true, false, true, false}, edu(), o) == path::group_type1v2);
    CHECK(choose_path(iommu_mode::group_type1v2, {true, true, true, false}, edu(), o) == path::group_type1v2);
    CHECK(choose_path(iommu_mode::iommufd, {true, true, true, false}, edu(), o) == path::iommufd);

    auto none = choose_path(iommu_mode::automatic, {}, edu(), o);
    REQUIRE_FALSE(none);
    CHECK_THAT(none.error().message, Catch::StartsWith("open on 0000:00:04.0") && Catch::Contains("/dev/vfio/5"));

    auto no_iommufd = choose_path(iommu_mode::iommufd, {false, true, true, false}, edu(), o);
    REQUIRE_FALSE(no_iommufd);
    CHECK_THAT(no_iommufd.error().message, Catch::Contains("/dev/iommu is missing"));
    auto no_cdev = choose_path(iommu_mode::iommufd, {true, false, true, false}, edu(), o);
    REQUIRE_FALSE(no_cdev);
    CHECK_THAT(no_cdev.error().message, Catch::Contains("no VFIO device cdev"));
}

TEST_CASE("no-IOMMU mode is refused unless asked for by name", "[vfio][path]") {
    const open_options o;
    const path_facts only_noiommu{false, false, false, true};
    for (iommu_mode m : {iommu_mode::automatic, iommu_mode::group_type1v2}) {
        auto r = choose_path(m, only_noiommu, edu(), o);
        REQUIRE_FALSE(r);
        CHECK(r.error().os_errno == EPERM);
        CHECK_THAT(r.error().message,
                   Catch::StartsWith("open on 0000:00:04.0: only a no-IOMMU VFIO group exists (/dev/vfio/noiommu-5)") &&
                       Catch::Contains("no isolation") && Catch::Contains("iommu_mode::unsafe_noiommu"));
    }
    CHECK(choose_path(iommu_mode::unsafe_noiommu, only_noiommu, edu(), o) == path::noiommu);

    auto absent = choose_path(iommu_mode::unsafe_noiommu, {false, false, false, false}, edu(), o);
    REQUIRE_FALSE(absent);
    CHECK_THAT(absent.error().message, Catch::Contains("enable_unsafe_noiommu_mode"));
    auto real = choose_path(iommu_mode::unsafe_noiommu, {false, false, true, false}, edu(), o);
    REQUIRE_FALSE(real);
    CHECK_THAT(real.error().message, Catch::Contains("real IOMMU group"));
}

// ---- open() on fixture trees ----

namespace {
struct host {
    sysfs_fixture fx;
    open_options options;
    host() {
        fx.add_function({"0000:00:04.0", "0x1234", "0x11e8", "0x00ff00", "vfio-pci", 5, {}, ""});
        fx.add_function({"0000:00:05.0", "0x1234", "0x11e8", "0x00ff00", "vfio-pci", std::nullopt, {}, ""});
        fx.add_function({"0000:3b:00.0", "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {}, ""});
        options.sysfs_root = fx.sys().string();
        options.dev_root = fx.dev().string();
    }
};
}  // namespace

TEST_CASE("open of a function with no IOMMU group says so, naming it", "[vfio][open]") {
    host h;
    auto f = open("0000:00:05.0", h.options);
    REQUIRE_FALSE(f);
    CHECK_THAT(f.error().message, Catch::StartsWith("open on 0000:00:05.0: no IOMMU group (") &&
                                      Catch::Contains("0000:00:05.0/iommu_group is missing") &&
                                      Catch::Contains("intel_iommu=on"));
}

TEST_CASE("open of a missing function, or one not on vfio-pci, says what to do", "[vfio][open]") {
    host h;
    auto missing = open("0000:af:00.0", h.options);
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::StartsWith("open on 0000:af:00.0: no such PCI function"));

    auto native = open("0000:3b:00.0", h.options);
    REQUIRE_FALSE(native);
    CHECK_THAT(native.error().message, Catch::StartsWith("open on 0000:3b:00.0: bound to mlx5_core, not vfio-pci") &&
                                           Catch::Contains("rig-devbind --bind vfio-pci 0000:3b:00.0"));
}

TEST_CASE("open refuses a no-IOMMU group unless asked, and then reaches the container", "[vfio][open]") {
    host h;
    sysfs_fixture::put(h.fx.dev() / "vfio/noiommu-5", "");
    sysfs_fixture::put(h.fx.dev() / "vfio/vfio", "");   // a plain file: every ioctl fails ENOTTY
    auto refused = open("0000:00:04.0", h.options);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("only a no-IOMMU VFIO group exists"));

    h.options.iommu = iommu_mode::unsafe_noiommu;
    auto asked = open("0000:00:04.0", h.options);
    REQUIRE_FALSE(asked);
    CHECK(asked.error().message == "VFIO_GET_API_VERSION on 0000:00:04.0: " + std::string(std::strerror(ENOTTY)));
}

TEST_CASE("open's ioctl failures name the ioctl, the function and the OS's reason", "[vfio][open]") {
    host h;
    sysfs_fixture::put(h.fx.dev() / "vfio/5", "");
    SECTION("group path: the container is missing") {
        auto r = open("0000:00:04.0", h.options);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::StartsWith("open " + h.fx.dev().string() + "/vfio/vfio on 0000:00:04.0: No such file"));
    }
    SECTION("group path: the container is not VFIO's") {
        sysfs_fixture::put(h.fx.dev() / "vfio/vfio", "");
        auto r = open("0000:00:04.0", h.options);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::StartsWith("VFIO_GET_API_VERSION on 0000:00:04.0: "));
    }
    SECTION("iommufd path") {
        std::filesystem::create_directories(h.fx.device_dir("0000:00:04.0") / "vfio-dev/vfio0");
        sysfs_fixture::put(h.fx.dev() / "vfio/devices/vfio0", "");
        sysfs_fixture::put(h.fx.dev() / "iommu", "");
        h.options.iommu = iommu_mode::iommufd;
        auto r = open("0000:00:04.0", h.options);
        REQUIRE_FALSE(r);
        CHECK(r.error().message == "VFIO_DEVICE_BIND_IOMMUFD on 0000:00:04.0: " + std::string(std::strerror(ENOTTY)));
        CHECK(r.error().os_errno == ENOTTY);
    }
}
