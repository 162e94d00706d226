// Messages of exactly 2^31 bytes on the mlx5 queues (docs/guide.md: "a message is
// at most 2^31 bytes"): the send queue takes a 2^31-byte WRITE, READ and SEND as one entry of two
// data segments, the receive queue a 2^31-byte receive in a 32-byte slot (make_qp's stride), and
// their results carry 2^31. Over plain memory: the API-level test (test/model/qp_api/seed_test.cpp)
// cannot make a 2^31-byte region cheaply, DMA memory being populated when mapped.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <span>
#include <stdexcept>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/entry.hpp"
#include "qp/mlx5/receive_queue.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "test/unit/oracle.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::mlx5::abi;
using rig::qp::entry_result;
using rig::test::aligned_bytes;

namespace {

constexpr std::int64_t two31 = std::int64_t{1} << 31;

abi::completion cqe(abi::cqe_opcode op, std::uint16_t counter, std::uint32_t bytes) {
    abi::completion c{};
    c.opcode = op;
    c.qpn = 9;
    c.wqe_counter = counter;
    c.byte_count = bytes;
    return c;
}

}  // namespace

TEST_CASE("send queue: a 2^31-byte WRITE, READ and SEND are one entry each, two data segments, and "
          "complete with 2^31; 2^31 + 1 is refused and changes nothing") {
    aligned_bytes ring(64 * 64), record(8), uar(4096);
    rig::qp::mlx5::bfreg reg(uar.data() + 0x800, 256);
    rig::qp::mlx5::send_queue sq({ring.span(), record.span(), &reg}, 9);
    const abi::local l{0x7f0000200000, two31, 0x1234};
    const abi::remote r{0x7f0000001000, 0xabcdef};
    sq.post(abi::write_op{l, r}, true);
    sq.post(abi::read_op{r, l}, true);
    sq.post(abi::send_op{l}, true);
    sq.ring();
    CHECK(sq.posted() == 3);
    CHECK(rig::abi::load_be<std::uint32_t>(record.data() + 4) == 3);
    // each entry as abi's typed writer makes it: ds 4 (WRITE, READ) and 3 (SEND)
    std::array<std::byte, 64> expect{};
    abi::write(expect, 0, 9, 0, abi::write_op{l, r}, true);
    CHECK(std::memcmp(ring.data(), expect.data(), 64) == 0);
    CHECK((rig::abi::load_be<std::uint32_t>(ring.data() + 4) & 0x3f) == 4);
    abi::write(expect, 0, 9, 1, abi::read_op{r, l}, true);
    CHECK(std::memcmp(ring.data() + 64, expect.data(), 64) == 0);
    abi::write(expect, 0, 9, 2, abi::send_op{l}, true);
    CHECK(std::memcmp(ring.data() + 128, expect.data(), 64) == 0);
    CHECK((rig::abi::load_be<std::uint32_t>(ring.data() + 128 + 4) & 0x3f) == 3);
    // the two halves: 2^30 bytes at the address, 2^30 at address + 2^30
    CHECK(rig::abi::load_be<std::uint32_t>(ring.data() + 32) == 0x40000000u);
    CHECK(rig::abi::load_be<std::uint64_t>(ring.data() + 40) == 0x7f0000200000u);
    CHECK(rig::abi::load_be<std::uint32_t>(ring.data() + 48) == 0x40000000u);
    CHECK(rig::abi::load_be<std::uint64_t>(ring.data() + 56) == 0x7f0040200000u);

    const std::vector<std::byte> before(ring.data(), ring.data() + 64 * 64);
    const std::uint32_t room = sq.room();
    CHECK_THROWS_WITH(sq.post(abi::write_op{{l.address, two31 + 1, l.key}, r}, true),
                      Catch::Contains("message length 2147483649"));
    CHECK_THROWS_AS(sq.post(abi::send_op{{l.address, two31 + 1, l.key}}, true), std::invalid_argument);
    CHECK(sq.room() == room);
    CHECK(sq.posted() == 3);
    CHECK(std::memcmp(ring.data(), before.data(), before.size()) == 0);

    sq.complete(cqe(abi::cqe_opcode::req, 2, 0));   // signaled: every entry through 2
    for (int i = 0; i < 3; ++i) {
        CHECK(sq.poll() == entry_result{static_cast<std::uint32_t>(two31)});
    }
}

TEST_CASE("receive queue: a 2^31-byte receive fills a 32-byte slot with two data segments and takes "
          "a 2^31-byte message; a 16-byte slot refuses it and changes nothing") {
    aligned_bytes rq_ring(16 * 32), record(8);
    rig::qp::mlx5::receive_queue rq({rq_ring.span(), 32, record.span()});
    const abi::local whole{0x7f0000200000, two31, 5};
    rq.post(whole);
    rq.post(abi::local{0x4000, 0x100, 5});
    rq.ring();
    CHECK(rig::abi::load_be<std::uint32_t>(record.data()) == 2);
    CHECK(rig::test::to_hex(rq_ring.data(), 64) ==
          "400000000000000500007f0000200000"
          "400000000000000500007f0040200000"
          "00000100000000050000000000004000"
          "00000000000001000000000000000000");
    rq.complete(cqe(abi::cqe_opcode::resp_send, 0, static_cast<std::uint32_t>(two31)));
    CHECK(rq.poll() == entry_result{static_cast<std::uint32_t>(two31)});

    aligned_bytes narrow_ring(16 * 16, std::byte{0x5a}), narrow_record(8);
    rig::qp::mlx5::receive_queue narrow({narrow_ring.span(), 16, narrow_record.span()});
    CHECK_THROWS_WITH(narrow.post(whole), Catch::Contains("scatter entries 2"));
    CHECK(narrow.posted() == 0);
    CHECK(narrow.room() == 16);
    for (std::size_t k = 0; k < 16 * 16; ++k) {
        REQUIRE(narrow_ring.data()[k] == std::byte{0x5a});
    }
}
