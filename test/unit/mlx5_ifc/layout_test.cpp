// Unit tests of the mlx5 firmware layouts through our own set()/get(): every field of every
// layout round-trips and touches no other bit, and misuse throws without writing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "abi/mlx5/ifc.hpp"
#include "walk.hpp"

namespace abi = rig::abi;
namespace ifc = rig::mlx5::ifc;
using namespace rig::test::mlx5_ifc;

namespace {

bool bit_in(const abi::field& f, std::size_t bit) { return bit >= f.off && bit < f.end(); }

bool bit_at(const std::vector<std::byte>& b, std::size_t bit) {
    return (std::to_integer<unsigned>(b[bit / 8]) >> (7 - bit % 8)) & 1u;
}

}  // namespace

TEST_CASE("mlx5_ifc: all_layouts names each layout once, in whole dwords", "[mlx5_ifc]") {
    std::set<std::string_view> names;
    for (const auto& l : ifc::all_layouts) {
        INFO(l.name);
        CHECK(names.insert(l.name).second);
        CHECK(l.size_bits % 32 == 0);
        CHECK(abi::well_formed(l.fields, l.size_bits));
    }
    CHECK(names.size() == std::size(ifc::all_layouts));
}

TEST_CASE("mlx5_ifc: get after set returns the value on every field, and touches nothing else", "[mlx5_ifc]") {
    std::size_t leaves = 0;
    for (const auto& l : ifc::all_layouts) {
        for (const entry& e : entries(l)) {
            if (e.nested) {
                continue;
            }
            const std::string what = cat(l.name, ".", e.path);
            // Start from all ones and all zeros, so that a stray write shows either way.
            for (const std::byte fill : {std::byte{0x00}, std::byte{0xff}}) {
                std::vector<std::byte> buf(l.size_bits / 8, fill);
                const std::vector<std::byte> before = buf;
                switch (shape_of(e.f)) {
                case shape::word:
                case shape::qword: {
                    const std::uint64_t v = pattern_value(l.name, e.path, e.f.bits);
                    abi::set(buf, e.f, v);
                    if (abi::get(buf, e.f) != v) {
                        FAIL_CHECK(cat(what, ": get returned ", hex(abi::get(buf, e.f)), " after set ", hex(v)));
                    }
                    abi::set(buf, e.f, 0);
                    if (abi::get(buf, e.f) != 0) {
                        FAIL_CHECK(what + ": get is not 0 after set 0");
                    }
                    abi::set(buf, e.f, v);
                    break;
                }
                case shape::bytes: {
                    const auto v = pattern_bytes(l.name, e.path, e.f.bits / 8);
                    abi::set_bytes(buf, e.f, v);
                    const auto got = abi::bytes_of(std::span<const std::byte>(buf), e.f);
                    if (!std::equal(got.begin(), got.end(), v.begin(), v.end())) {
                        FAIL_CHECK(what + ": bytes_of differs from what set_bytes wrote");
                    }
                    break;
                }
                }
                for (std::size_t bit = 0; bit < l.size_bits; ++bit) {
                    if (!bit_in(e.f, bit) && bit_at(buf, bit) != bit_at(before, bit)) {
                        FAIL_CHECK(cat(what, ": writing it changed bit ", hex(bit), ", outside the field"));
                        break;
                    }
                }
            }
            ++leaves;
        }
    }
    CHECK(leaves > 1000);
}

TEST_CASE("mlx5_ifc: misuse throws std::invalid_argument and leaves the buffer unchanged", "[mlx5_ifc]") {
    SECTION("a value wider than the field, on every word field") {
        for (const auto& l : ifc::all_layouts) {
            for (const entry& e : entries(l)) {
                if (e.nested || shape_of(e.f) != shape::word) {
                    continue;
                }
                std::vector<std::byte> buf(l.size_bits / 8, std::byte{0xa5});
                const auto before = buf;
                const std::uint64_t too_wide = 1ull << e.f.bits;
                INFO(cat(l.name, ".", e.path));
                CHECK_THROWS_AS(abi::set(buf, e.f, too_wide), std::invalid_argument);
                CHECK(buf == before);
            }
        }
    }
    SECTION("a field outside the buffer") {
        // A buffer one dword short of the layout: its last field lies (partly) outside.
        std::vector<std::byte> buf(ifc::create_qp_in::size_bytes - 4, std::byte{0x11});
        const auto before = buf;
        CHECK_THROWS_AS(abi::set(buf, ifc::create_qp_in::wq_umem_valid, 1), std::invalid_argument);
        CHECK_THROWS_AS(abi::get(buf, ifc::create_qp_in::wq_umem_valid), std::invalid_argument);
        CHECK_THROWS_AS(abi::set(buf, ifc::pas_entry<ifc::create_qp_in>(0), 0x1000), std::invalid_argument);
        const std::array<std::byte, 16> gid{};
        std::vector<std::byte> small(ifc::ads::size_bytes - 16, std::byte{0x22});
        const auto small_before = small;
        CHECK_THROWS_AS(abi::set_bytes(small, ifc::ads::rgid_rip, gid), std::invalid_argument);
        CHECK(small == small_before);
        CHECK(buf == before);
    }
    SECTION("a byte string through set(), and bytes of the wrong length") {
        std::vector<std::byte> buf(ifc::ads::size_bytes, std::byte{0x33});
        const auto before = buf;
        CHECK_THROWS_AS(abi::set(buf, ifc::ads::rgid_rip, 1), std::invalid_argument);
        const std::array<std::byte, 15> short_gid{};
        CHECK_THROWS_AS(abi::set_bytes(buf, ifc::ads::rgid_rip, short_gid), std::invalid_argument);
        CHECK(buf == before);
    }
    SECTION("a 64-bit field is accepted whole") {
        std::vector<std::byte> buf(ifc::create_qp_in::size_bytes);
        constexpr auto dbr = ifc::create_qp_in::qpc(ifc::qpc::dbr_addr);
        abi::set<dbr>(buf, 0x0123456789abcdefull);
        CHECK(abi::get<dbr>(buf) == 0x0123456789abcdefull);
        CHECK(std::to_integer<int>(buf[dbr.off / 8]) == 0x01);
    }
}

TEST_CASE("mlx5_ifc: flexible-array helpers and command lengths", "[mlx5_ifc]") {
    STATIC_REQUIRE(ifc::pas_entry<ifc::create_qp_in>(0).off == 0x880);
    STATIC_REQUIRE(ifc::pas_entry<ifc::create_qp_in>(3).off == 0x880 + 3 * 64);
    STATIC_REQUIRE(ifc::pas_entry<ifc::manage_pages_in>(1).off == 0xc0);
    STATIC_REQUIRE(ifc::length_with_pas<ifc::create_eq_in>(2) == 0x110 + 16);
    STATIC_REQUIRE(ifc::query_qp_out_pas(0).off == 0x880);
    STATIC_REQUIRE(ifc::event_bitmask_word(0).off == 0x2c0);
    STATIC_REQUIRE(ifc::event_bitmask_word(3).end() == ifc::create_eq_in::event_bitmask.end());
    STATIC_REQUIRE(ifc::eqe_page_request(ifc::pages_req_event::num_pages).off == 0x120);

    // A MANAGE_PAGES input with two pages: the pages land after the 16-byte header, big-endian.
    std::vector<std::byte> in(ifc::length_with_pas<ifc::manage_pages_in>(2));
    abi::set(in, ifc::pas_entry<ifc::manage_pages_in>(1), 0x0000'0001'2345'6000ull);
    CHECK(std::to_integer<int>(in[0x18 + 3]) == 0x01);
    CHECK(std::to_integer<int>(in[0x18 + 6]) == 0x60);
}
