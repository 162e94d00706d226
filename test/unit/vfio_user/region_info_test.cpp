// REGION_INFO as the two kinds of client ask for it. QEMU's vfio-user client
// (hw/vfio-user/device.c vfio_user_device_io_get_region_info) refuses a reply whose CAPS flag is
// set with a cap_offset outside [sizeof(vfio_region_info), argsz]; its caller (hw/vfio/device.c
// vfio_device_get_region_info) then asks again when the reply's argsz is larger than it asked for.
// Rig's own client (driver/vfio_user/client_regions.cpp) asks again on argsz alone.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace rig::test;
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
