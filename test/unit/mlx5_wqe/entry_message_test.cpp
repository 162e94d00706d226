// Messages of exactly 2^31 bytes (docs/guide.md: "a message is at most 2^31 bytes"):
// abi/mlx5/entry.hpp's typed writers and write_receive describe one as two data segments of
// 2^30 bytes (entry.hpp header comment), compared here byte for byte with the entry rdma-core's
// helpers build for that two-element gather/scatter list (two mlx5dv_set_data_seg calls).
#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/entry.hpp"
#include "oracle.hpp"

namespace abi = rig::mlx5::abi;

namespace {

constexpr std::int64_t two31 = std::int64_t{1} << 31;
constexpr std::int64_t two30 = std::int64_t{1} << 30;

// The list rdma-core would be given for `l`: two halves at 2^31, else the element itself.
std::string gather_list(const abi::local& l) {
    std::ostringstream o;
    if (l.bytes == two31) {
        // the second half's address summed in 64 unsigned bits, as the writer does
        const auto second = static_cast<std::uint64_t>(l.address) + static_cast<std::uint64_t>(two30);
        o << "2 " << l.address << ' ' << two30 << ' ' << l.key << ' ' << second << ' '
          << two30 << ' ' << l.key;
    } else {
        o << "1 " << l.address << ' ' << l.bytes << ' ' << l.key;
    }
    return o.str();
}

// A ring of two blocks whose first must stay untouched; returns the second's bytes in hex.
template <class Op>
std::string typed(const Op& op, std::int64_t qp, std::int64_t index, bool signal) {
    std::array<std::byte, 128> ring;
    ring.fill(std::byte{0xa5});
    abi::write(ring, 64, qp, index, op, signal);
    for (std::size_t k = 0; k < 64; ++k) {
        REQUIRE(ring[k] == std::byte{0xa5});
    }
    return rig::test::to_hex(ring.data() + 64, 64);
}

}  // namespace

TEST_CASE("mlx5 typed writers: a 2^31-byte WRITE, READ and SEND are two 2^30-byte data segments, as "
          "rdma-core builds that gather list",
          "[mlx5][entry][vendor]") {
    std::mt19937_64 rng{31};
    std::ostringstream req;
    std::vector<std::string> ours;
    const std::array<std::int64_t, 6> addresses{0, 1, 0x7f0000200000, 0xffffffff,
                                                INT64_MAX - two30, INT64_MAX};
    const std::array<std::int64_t, 5> lengths{two31, two31, two31 - 1, 1, 0};
    for (int i = 0; i < 600; ++i) {
        const auto qp = static_cast<std::int64_t>(rng() & 0xffffff);
        const auto index = static_cast<std::int64_t>(rng() & 0x3ffff);
        const bool signal = rng() % 2 == 0;
        // INT64_MAX as a 2^31 element's address: its second half's address still fits 64 bits
        const abi::local l{addresses[rng() % addresses.size()], lengths[rng() % lengths.size()],
                           static_cast<std::int64_t>(rng() & 0xffffffff)};
        const abi::remote r{addresses[rng() % addresses.size()], static_cast<std::int64_t>(rng() & 0xffffffff)};
        switch (i % 3) {
        case 0:
            ours.push_back(typed(abi::write_op{l, r}, qp, index, signal));
            req << "G W " << qp << ' ' << index << ' ' << signal << ' ' << r.address << ' ' << r.key;
            break;
        case 1:
            ours.push_back(typed(abi::read_op{r, l}, qp, index, signal));
            req << "G R " << qp << ' ' << index << ' ' << signal << ' ' << r.address << ' ' << r.key;
            break;
        default:
            ours.push_back(typed(abi::send_op{l}, qp, index, signal));
            req << "G S " << qp << ' ' << index << ' ' << signal;
            break;
        }
        req << ' ' << gather_list(l) << '\n';
    }
    const auto theirs = rig::test::run_mlx5dv_oracle(req.str());
    REQUIRE(theirs.size() == ours.size());
    const std::string requests = req.str();
    std::istringstream lines(requests);
    for (std::size_t i = 0; i < ours.size(); ++i) {
        std::string line;
        std::getline(lines, line);
        INFO("entry " << i << ": " << line);
        REQUIRE(ours[i] == theirs[i]);
    }
}

TEST_CASE("mlx5 typed writers: the bytes of a 2^31-byte WRITE and SEND (ds 4 and 3, no zero word)",
          "[mlx5][entry]") {
    const abi::local l{0x7f0000200000, two31, 0x1234};
    CHECK(typed(abi::write_op{l, {0x7f0000001000, 0xabcdef}}, 0x123, 1, true) ==
          "0000010800012304000000080000000000007f0000001000"
          "00abcdef00000000"
          "400000000000123400007f0000200000"
          "400000000000123400007f0040200000");
    CHECK(typed(abi::send_op{l}, 0x123, 2, false) ==
          "0000020a000123030000000000000000"
          "400000000000123400007f0000200000"
          "400000000000123400007f0040200000"
          "00000000000000000000000000000000");
}

TEST_CASE("mlx5 typed writers refuse over 2^31 bytes naming the message limit; the generic writer keeps "
          "the seed's [0, 2^31-1]; a refusal touches nothing",
          "[mlx5][entry][refusal]") {
    std::array<std::byte, 64> b;
    b.fill(std::byte{0x77});
    const abi::remote r{0x1000, 1};
    const auto untouched = [&] {
        for (const std::byte x : b) {
            REQUIRE(x == std::byte{0x77});
        }
    };
    for (const std::int64_t n : {two31 + 1, std::int64_t{1} << 32, std::int64_t{-1}}) {
        INFO("n " << n);
        const abi::local l{0x2000, n, 2};
        const std::string named = "message length " + std::to_string(n);
        CHECK_THROWS_WITH(abi::write(b, 0, 1, 0, abi::write_op{l, r}, true),
                          Catch::Contains(named) && Catch::Contains("[0, 2^31]"));
        CHECK_THROWS_WITH(abi::write(b, 0, 1, 0, abi::read_op{r, l}, true), Catch::Contains(named));
        CHECK_THROWS_WITH(abi::write(b, 0, 1, 0, abi::send_op{l}, true), Catch::Contains(named));
        untouched();
    }
    // the seed's generic writer: 2^31 is a length outside [0, 2^31-1], after the place checks
    const abi::local big{0x2000, two31, 2};
    for (const abi::op& op : {abi::op{abi::write_op{big, r}}, abi::op{abi::read_op{r, big}},
                              abi::op{abi::send_op{big}}}) {
        CHECK_THROWS_AS(abi::write(b, 0, 1, 0, abi::entry{op, true}), std::invalid_argument);
        CHECK_THROWS_WITH(abi::write(b, 0, 1, 0, abi::entry{op, true}),
                          Catch::Contains("length 2147483648") && Catch::Contains("[0, 2^31-1]") &&
                              !Catch::Contains("message"));
        CHECK_THROWS_WITH(abi::write(b, 8, 1, 0, abi::entry{op, true}), Catch::Contains("byte 8"));
        CHECK_THROWS_WITH(abi::write(b, 0, -1, 0, abi::entry{op, true}), Catch::Contains("qp -1"));
        untouched();
    }
    // a bad key beside a 2^31 length names the key, not the length
    CHECK_THROWS_WITH(abi::write(b, 0, 1, 0, abi::send_op{{0x2000, two31, -5}}, true),
                      Catch::Contains("key -5"));
    untouched();
}

TEST_CASE("mlx5 receive entries of 32 bytes: one segment and the MLX5_INVALID_LKEY terminator, or two "
          "2^30-byte segments for 2^31, as rdma-core builds them",
          "[mlx5][entry][vendor]") {
    std::mt19937_64 rng{32};
    std::ostringstream req;
    std::vector<std::string> ours;
    const std::array<std::int64_t, 6> lengths{two31, two31 - 1, 1, 0, 4096, two31};
    for (int i = 0; i < 300; ++i) {
        const std::size_t stride = i % 5 == 4 ? 64 : 32;
        const abi::local l{static_cast<std::int64_t>(rng() >> 2), lengths[rng() % lengths.size()],
                           static_cast<std::int64_t>(rng() & 0xffffffff)};
        std::vector<std::byte> b(stride * 2, std::byte{0x5a});
        abi::write_receive(b, stride, stride, std::span<const abi::local>(&l, 1));
        for (std::size_t k = 0; k < stride; ++k) {
            REQUIRE(b[k] == std::byte{0x5a});
        }
        ours.push_back(rig::test::to_hex(b.data() + stride, stride));
        req << "V " << stride << ' ' << gather_list(l) << '\n';
    }
    const auto theirs = rig::test::run_mlx5dv_oracle(req.str());
    REQUIRE(theirs.size() == ours.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        INFO("receive entry " << i);
        REQUIRE(ours[i] == theirs[i]);
    }
    // the bytes: one element, then the terminator (byte_count 0, lkey 0x100, addr 0)
    std::array<std::byte, 32> b{};
    const abi::local one{0x7f0000200000, 4096, 0x1234};
    abi::write_receive(b, 0, 32, std::span<const abi::local>(&one, 1));
    CHECK(rig::test::to_hex(b.data(), 32) ==
          "000010000000123400007f0000200000"
          "00000000000001000000000000000000");
    const abi::local whole{0x7f0000200000, two31, 0x1234};
    abi::write_receive(b, 0, 32, std::span<const abi::local>(&whole, 1));
    CHECK(rig::test::to_hex(b.data(), 32) ==
          "400000000000123400007f0000200000"
          "400000000000123400007f0040200000");
}

TEST_CASE("mlx5 receive entries: 2^31 takes two segments, refused by a 16-byte slot; over 2^31 refused; "
          "a refusal touches nothing",
          "[mlx5][entry][refusal]") {
    std::array<std::byte, 64> b;
    b.fill(std::byte{0x33});
    const abi::local whole{0x1000, two31, 1};
    CHECK_THROWS_WITH(abi::write_receive(b, 0, 16, std::span<const abi::local>(&whole, 1)),
                      Catch::Contains("scatter entries 2"));
    const std::array<abi::local, 2> three{whole, abi::local{0x1000, 1, 1}};
    CHECK_THROWS_WITH(abi::write_receive(b, 0, 32, three), Catch::Contains("scatter entries 3"));
    const abi::local over{0x1000, two31 + 1, 1};
    CHECK_THROWS_WITH(abi::write_receive(b, 0, 32, std::span<const abi::local>(&over, 1)),
                      Catch::Contains("message length 2147483649"));
    for (const std::byte x : b) {
        REQUIRE(x == std::byte{0x33});
    }
}
