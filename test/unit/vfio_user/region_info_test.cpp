// REGION_INFO and VERSION as the two kinds of client take them. QEMU's vfio-user client
// (hw/vfio-user/device.c vfio_user_device_io_get_region_info) refuses a reply whose CAPS flag is
// set with a cap_offset outside [sizeof(vfio_region_info), argsz]; its caller (hw/vfio/device.c
// vfio_device_get_region_info) then asks again when the reply's argsz is larger than it asked for.
// Rig's own client (driver/vfio_user/client_regions.cpp) asks again on argsz alone.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace rig::test;
namespace sim = rig::sim;
namespace abi = rig::vfio_user::abi;
using abi::command;

namespace {

constexpr std::uint16_t get_region_info = static_cast<std::uint16_t>(command::device_get_region_info);
// BAR0 of the test device: two shared areas, so the chain is a header, a sparse_mmap and two areas
constexpr std::uint32_t chain_bytes = sizeof(abi::cap_header) + sizeof(abi::sparse_mmap) + 2 * sizeof(abi::sparse_area);
constexpr std::uint32_t full_argsz = sizeof(abi::region_info) + chain_bytes;

raw_message ask(raw_conn& c, std::uint32_t argsz) {
    c.send(get_region_info, bytes_of(abi::region_info{argsz, 0, 0, 0, 0, 0}));
    auto r = c.receive();
    REQUIRE(r);
    REQUIRE_FALSE(r->is_error());
    return std::move(*r);
}

// what QEMU's vfio_user_device_io_get_region_info accepts, after it copied the reply over its
// request (so argsz is the reply's)
bool qemu_accepts(const abi::region_info& info) {
    return (info.flags & abi::region_flag_caps) == 0 ||
           (info.cap_offset >= sizeof(abi::region_info) && info.cap_offset <= info.argsz);
}

}  // namespace

TEST_CASE("vfio-user server: REGION_INFO with a small argsz, then the full one", "[vfio_user][region_info]") {
    local_server s;
    raw_conn c(socket_in(s.dir));
    c.handshake();

    // first pass, argsz 32 (both clients start there): the size needed, no CAPS, no chain
    const raw_message small = ask(c, sizeof(abi::region_info));
    REQUIRE(small.payload.size() == sizeof(abi::region_info));
    const auto a = abi::decode<abi::region_info>(small.payload);
    REQUIRE(a);
    CHECK(a->argsz == full_argsz);
    CHECK(a->index == 0);
    CHECK(a->size == bar0_size);
    CHECK((a->flags & abi::region_flag_caps) == 0);
    CHECK((a->flags & abi::region_flag_mmap) != 0);
    CHECK(a->cap_offset == 0);
    CHECK(qemu_accepts(*a));
    CHECK(small.fds.size() == 1);

    // one byte short of the chain: still no CAPS
    const raw_message short_one = ask(c, full_argsz - 1);
    const auto b = abi::decode<abi::region_info>(short_one.payload);
    REQUIRE(b);
    CHECK(short_one.payload.size() == sizeof(abi::region_info));
    CHECK(b->argsz == full_argsz);
    CHECK((b->flags & abi::region_flag_caps) == 0);

    // second pass with the argsz it was told: CAPS, the chain right after the structure
    const raw_message full = ask(c, a->argsz);
    REQUIRE(full.payload.size() == full_argsz);
    const auto f = abi::decode<abi::region_info>(full.payload);
    REQUIRE(f);
    CHECK(f->argsz == full_argsz);
    CHECK((f->flags & (abi::region_flag_caps | abi::region_flag_mmap | abi::region_flag_read)) ==
          (abi::region_flag_caps | abi::region_flag_mmap | abi::region_flag_read));
    CHECK(f->cap_offset == sizeof(abi::region_info));
    CHECK(qemu_accepts(*f));
    CHECK(full.fds.size() == 1);
    const auto cap = abi::decode<abi::cap_header>(full.payload, f->cap_offset);
    REQUIRE(cap);
    CHECK(cap->id == abi::cap_sparse_mmap);
    CHECK(cap->version == abi::cap_sparse_mmap_version);
    CHECK(cap->next == 0);
    const auto sm = abi::decode<abi::sparse_mmap>(full.payload, f->cap_offset + sizeof(abi::cap_header));
    REQUIRE(sm);
    REQUIRE(sm->nr_areas == 2);
    const std::size_t first = f->cap_offset + sizeof(abi::cap_header) + sizeof(abi::sparse_mmap);
    const auto s0 = abi::decode<abi::sparse_area>(full.payload, first);
    const auto s1 = abi::decode<abi::sparse_area>(full.payload, first + sizeof(abi::sparse_area));
    REQUIRE(s0);
    REQUIRE(s1);
    CHECK((s0->offset == 0x1000 && s0->size == 0x1000));
    CHECK((s1->offset == 0x2000 && s1->size == 0x2000));

    // a larger argsz than needed: the same reply, argsz still the size needed
    const raw_message roomy = ask(c, 4096);
    CHECK(roomy.payload == full.payload);
}

TEST_CASE("vfio-user server: a region without a chain has no CAPS at any argsz", "[vfio_user][region_info]") {
    local_server s;
    raw_conn c(socket_in(s.dir));
    c.handshake();
    for (std::uint32_t argsz : {32u, 200u}) {
        c.send(get_region_info, bytes_of(abi::region_info{argsz, 0, 7, 0, 0, 0}));   // config space
        auto r = c.receive();
        REQUIRE(r);
        REQUIRE_FALSE(r->is_error());
        const auto info = abi::decode<abi::region_info>(r->payload);
        REQUIRE(info);
        CHECK(r->payload.size() == sizeof(abi::region_info));
        CHECK(info->argsz == sizeof(abi::region_info));
        CHECK((info->flags & abi::region_flag_caps) == 0);
        CHECK(info->cap_offset == 0);
        CHECK(r->fds.empty());
    }
}

// QEMU's client parses the server's VERSION capabilities and refuses a max_dma_maps above the
// spec's default 65535 ("max_dma_maps too large", hw/vfio-user/proxy.c check_max_dma), whatever
// the server's own window limit (server_options::max_dma_maps, 1M by default).
TEST_CASE("vfio-user server: VERSION offers at most 65535 DMA windows, as QEMU's client takes", "[vfio_user][version]") {
    for (std::uint32_t limit : {std::uint32_t{1} << 20, std::uint32_t{100}}) {
        sim::vfio_user::server_options o;
        o.max_dma_maps = limit;
        local_server s(o);
        raw_conn c(socket_in(s.dir));
        const char json[] = R"({"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576}})";
        std::vector<std::byte> p(sizeof(abi::version) + sizeof json);
        const abi::version v{0, 0};
        std::memcpy(p.data(), &v, sizeof v);
        std::memcpy(p.data() + sizeof v, json, sizeof json);
        c.send(static_cast<std::uint16_t>(command::version), p);
        auto r = c.receive();
        REQUIRE(r);
        REQUIRE_FALSE(r->is_error());
        REQUIRE(r->payload.size() > sizeof(abi::version));
        const std::string text(reinterpret_cast<const char*>(r->payload.data()) + sizeof(abi::version),
                               r->payload.size() - sizeof(abi::version));
        const auto caps = abi::parse_caps(text.c_str());
        REQUIRE(caps);
        CHECK(caps->max_dma_maps == std::min<std::uint32_t>(limit, 65535));
    }
}
