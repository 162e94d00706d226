// Every refusal of the mlx5 entry encoder (abi/mlx5/entry.hpp): std::invalid_argument naming the
// bad value, and not one byte of the buffer changed.
#include <array>
#include <string>

#include <catch2/catch.hpp>

#include "abi/mlx5/entry.hpp"

namespace abi = rig::mlx5::abi;

namespace {

constexpr abi::local good_local{0x1000, 64, 0x77};
constexpr abi::remote good_remote{0x2000, 0x88};

// Writes e into a patterned 256-byte ring and checks the refusal and the untouched ring.
void refused(std::size_t at, std::int64_t qp, std::int64_t index, const abi::entry& e,
             const std::string& names, std::size_t ring_size = 256) {
    std::vector<std::byte> ring(ring_size);
    for (std::size_t i = 0; i < ring.size(); ++i) {
        ring[i] = static_cast<std::byte>(i * 7 + 3);
    }
    const std::vector<std::byte> before = ring;
    try {
        abi::write(ring, at, qp, index, e);
        FAIL("write accepted what it must refuse: " << names);
    } catch (const std::invalid_argument& x) {
        INFO(x.what());
        CHECK(std::string(x.what()).find(names) != std::string::npos);
    }
    CHECK(ring == before);
}

}  // namespace

TEST_CASE("refused: the bytes are not in b", "[mlx5][entry][refusal]") {
    const abi::entry e{abi::write_op{good_local, good_remote}, true};
    refused(256, 1, 0, e, "byte 256 of a 256-byte buffer");
    refused(224, 1, 0, e, "byte 224");                  // not a multiple of 64, and short
    refused(SIZE_MAX - 63, 1, 0, e, "of a 256-byte buffer");   // at + 64 overflows
    refused(0, 1, 0, e, "byte 0 of a 32-byte buffer", 32);
}

TEST_CASE("refused: at is not a multiple of the block size", "[mlx5][entry][refusal]") {
    const abi::entry e{abi::send_op{good_local}, false};
    refused(1, 1, 0, e, "byte 1");
    refused(32, 1, 0, e, "byte 32");
    refused(63, 1, 0, e, "byte 63");
}

TEST_CASE("refused: qp outside [0, 2^24-1]", "[mlx5][entry][refusal]") {
    const abi::entry e{abi::send_op{good_local}, false};
    refused(0, -1, 0, e, "qp -1");
    refused(0, 1 << 24, 0, e, "qp 16777216");
    refused(0, INT64_MIN, 0, e, "qp -9223372036854775808");
}

TEST_CASE("refused: a negative index", "[mlx5][entry][refusal]") {
    const abi::entry e{abi::send_op{good_local}, false};
    refused(0, 1, -1, e, "index -1");
    refused(0, 1, INT64_MIN, e, "index -9223372036854775808");
}

TEST_CASE("refused: a length outside [0, 2^31-1]", "[mlx5][entry][refusal]") {
    const std::int64_t two31 = std::int64_t{1} << 31;
    refused(0, 1, 0, {abi::write_op{{0, two31, 1}, good_remote}, true}, "length 2147483648");
    refused(0, 1, 0, {abi::read_op{good_remote, {0, -1, 1}}, true}, "length -1");
    refused(0, 1, 0, {abi::send_op{{0, INT64_MAX, 1}}, true}, "length 9223372036854775807");
}

TEST_CASE("refused: a key outside [0, 2^32-1]", "[mlx5][entry][refusal]") {
    const std::int64_t two32 = std::int64_t{1} << 32;
    refused(0, 1, 0, {abi::write_op{{0, 1, two32}, good_remote}, true}, "key 4294967296");
    refused(0, 1, 0, {abi::write_op{good_local, {0, -1}}, true}, "key -1");
    refused(0, 1, 0, {abi::read_op{{0, two32}, good_local}, true}, "key 4294967296");
    refused(0, 1, 0, {abi::read_op{good_remote, {0, 1, -5}}, true}, "key -5");
    refused(0, 1, 0, {abi::send_op{{0, 1, two32 + 1}}, true}, "key 4294967297");
    refused(0, 1, 0, {abi::write_inline_op{"abc", {0, two32}}, true}, "key 4294967296");
}

TEST_CASE("refused: a negative address", "[mlx5][entry][refusal]") {
    refused(0, 1, 0, {abi::write_op{{-1, 1, 1}, good_remote}, true}, "address -1");
    refused(0, 1, 0, {abi::write_op{good_local, {-4096, 1}}, true}, "address -4096");
    refused(0, 1, 0, {abi::read_op{{INT64_MIN, 1}, good_local}, true}, "address -9223372036854775808");
    refused(0, 1, 0, {abi::send_op{{-2, 1, 1}}, true}, "address -2");
    refused(0, 1, 0, {abi::write_inline_op{"", {-1, 1}}, true}, "address -1");
}

TEST_CASE("refused: more than 28 inline bytes", "[mlx5][entry][refusal]") {
    const std::string big(29, 'x');
    refused(0, 1, 0, {abi::write_inline_op{big, good_remote}, true}, "29 inline bytes");
    const std::string huge(4096, 'y');
    refused(0, 1, 0, {abi::write_inline_op{huge, good_remote}, true}, "4096 inline bytes");
}

TEST_CASE("accepted: every edge of every range", "[mlx5][entry]") {
    std::array<std::byte, 64> b{};
    const std::int64_t max_addr = INT64_MAX;
    CHECK_NOTHROW(abi::write(b, 0, abi::max_qp, INT64_MAX,
                             {abi::write_op{{max_addr, abi::max_length, abi::max_key},
                                            {max_addr, abi::max_key}},
                              true}));
    CHECK_NOTHROW(abi::write(b, 0, 0, 0, {abi::send_op{{0, 0, 0}}, false}));
    CHECK_NOTHROW(abi::write(b, 0, 0, 0, {abi::write_inline_op{std::string(28, 'z'), {0, 0}}, false}));
}

TEST_CASE("the index's low 16 bits go into the control segment", "[mlx5][entry]") {
    std::array<std::byte, 64> a{}, b{};
    abi::write(a, 0, 5, 0x12345, {abi::send_op{good_local}, true});
    abi::write(b, 0, 5, 0x2345, {abi::send_op{good_local}, true});
    CHECK(a == b);
    // opmod_idx_opcode = be32(0x2345 << 8 | 0x0a)
    CHECK(a[0] == std::byte{0x00});
    CHECK(a[1] == std::byte{0x23});
    CHECK(a[2] == std::byte{0x45});
    CHECK(a[3] == std::byte{0x0a});
}

TEST_CASE("receive entries refuse what does not fit and touch nothing", "[mlx5][entry][refusal]") {
    std::array<std::byte, 64> b;
    b.fill(std::byte{0x11});
    const auto before = b;
    const std::array<abi::local, 2> two{good_local, good_local};
    CHECK_THROWS_WITH(abi::write_receive(b, 0, 16, two), Catch::Contains("scatter entries 2"));
    CHECK_THROWS_WITH(abi::write_receive(b, 0, 24, two), Catch::Contains("receive stride 24"));
    CHECK_THROWS_WITH(abi::write_receive(b, 16, 32, two), Catch::Contains("byte 16"));
    const std::array<abi::local, 1> bad{abi::local{0, 1, -1}};
    CHECK_THROWS_WITH(abi::write_receive(b, 0, 32, bad), Catch::Contains("key -1"));
    CHECK(b == before);
}
