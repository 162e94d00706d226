// The mlx5 completion queue over synthesized CQEs: owner parity across wraps, error CQEs with
// every syndrome, the consumer index record, arming (rdma-core providers/mlx5/cq.c; kernel cq.h
// mlx5_cq_arm).
#include <catch2/catch.hpp>

#include <array>
#include <cstring>

#include "abi/bits.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::mlx5::abi;
using rig::qp::mlx5::completion_queue;
using rig::test::aligned_bytes;

namespace {

constexpr std::uint32_t cqn = 0x2a5;

struct fixture {
    explicit fixture(std::size_t n) : ring(n * abi::cqe_size), record(8), uar(abi::uar_page_size),
                                      cq({ring.span(), record.span(), uar.data()}, cqn) {
        // software initialises every CQE to opcode INVALID, owner 1 (rdma-core / kernel init)
        for (std::size_t i = 0; i < n; ++i) {
            ring.data()[i * 64 + abi::cqe_offset::op_own] = std::byte{0xf1};
        }
    }
    aligned_bytes ring, record, uar;
    completion_queue cq;

    // The device writes CQE number `count` (unmasked) with the owner bit of its pass.
    void device_writes(std::uint32_t count, abi::completion x) {
        const std::uint32_t n = cq.size();
        x.owner = ((count / n) & 1) != 0;
        std::span<std::byte, 64> slot(ring.data() + (count % n) * 64, 64);
        abi::encode(slot, x);
    }
    std::uint32_t set_ci() const {
        return rig::abi::load_be<std::uint32_t>(record.data() + abi::cq_dbr::set_ci);
    }
    std::uint32_t arm_word() const {
        return rig::abi::load_be<std::uint32_t>(record.data() + abi::cq_dbr::arm);
    }
    std::uint64_t arm_doorbell() const {
        return rig::abi::load_be<std::uint64_t>(uar.data() + abi::uar::cq_doorbell);
    }
};

abi::completion req(std::uint32_t qpn, std::uint16_t counter) {
    abi::completion x{};
    x.opcode = abi::cqe_opcode::req;
    x.qpn = qpn;
    x.send_opcode = 0x08;
    x.wqe_counter = counter;
    x.byte_count = 64;
    return x;
}

}  // namespace

TEST_CASE("completion queue: nothing to poll in a fresh ring, record untouched") {
    fixture f(8);
    CHECK_FALSE(f.cq.poll().has_value());
    CHECK(f.cq.consumer_index() == 0);
    CHECK(f.set_ci() == 0);
}

TEST_CASE("completion queue: owner parity across three passes of an 8-entry ring, the record written at done()") {
    fixture f(8);
    for (std::uint32_t n = 0; n < 24; ++n) {
        f.device_writes(n, req(0x100 + n, static_cast<std::uint16_t>(n)));
        const auto c = f.cq.poll();
        REQUIRE(c.has_value());
        CHECK(c->qpn == 0x100 + n);
        CHECK(c->wqe_counter == n);
        CHECK(c->opcode == abi::cqe_opcode::req);
        CHECK(c->owner == (((n / 8) & 1) != 0));
        CHECK(f.set_ci() == n);       // the record moves once per drain, at done()
        f.cq.done();
        CHECK(f.set_ci() == n + 1);
        f.cq.done();                  // nothing taken since: no store
        CHECK(f.set_ci() == n + 1);
        // the slot still holds this pass's CQE: with the next pass's parity it is the device's
        CHECK_FALSE(f.cq.poll().has_value());
    }
    CHECK(f.cq.consumer_index() == 24);
}

TEST_CASE("completion queue: a CQE with last pass's owner bit is not taken") {
    fixture f(4);
    for (std::uint32_t n = 0; n < 4; ++n) {
        f.device_writes(n, req(7, static_cast<std::uint16_t>(n)));
    }
    for (int i = 0; i < 4; ++i) {
        REQUIRE(f.cq.poll().has_value());
    }
    // slot 0 holds CQE 0 (owner 0); CQE 4 needs owner 1
    CHECK_FALSE(f.cq.poll().has_value());
    f.device_writes(4, req(7, 4));
    const auto c = f.cq.poll();
    REQUIRE(c.has_value());
    CHECK(c->wqe_counter == 4);
}

// One barrier covers the CQEs seen software's together (qp/cqe_run.hpp, up to 8):
// every CQE still comes out once and in order, a run stops at the first CQE the device has not
// written (one written behind it is not taken early), and CQEs written after a run was seen are
// found by the next poll, across the ring's wrap.
TEST_CASE("completion queue: CQEs seen together come out once, in order, up to the first unwritten one") {
    fixture f(16);
    std::uint32_t written = 0, taken = 0;
    const auto write = [&](std::uint32_t k) {
        for (std::uint32_t i = 0; i < k; ++i, ++written) {
            f.device_writes(written, req(0x100, static_cast<std::uint16_t>(written)));
        }
    };
    const auto take_all = [&] {
        while (const auto c = f.cq.poll()) {
            CHECK(c->wqe_counter == static_cast<std::uint16_t>(taken));
            CHECK(c->owner == (((taken / 16) & 1) != 0));
            ++taken;
        }
        f.cq.done();
        CHECK(taken == written);
        CHECK(f.set_ci() == taken);
    };
    write(11);   // more than one run of 8
    take_all();
    write(3);    // a run that stops at the unwritten CQE 14
    REQUIRE(f.cq.poll().has_value());
    ++taken;
    write(9);    // written after the run was seen, and across the wrap (CQEs 14..22)
    take_all();
    CHECK(f.cq.consumer_index() == 23);

    // CQE 24 written but not CQE 23: nothing is taken past the gap
    f.device_writes(24, req(0x100, 24));
    CHECK_FALSE(f.cq.poll().has_value());
    f.device_writes(23, req(0x100, 23));
    written = 25;
    take_all();
}

TEST_CASE("completion queue: error CQEs decode each syndrome to its named error") {
    struct named { std::uint8_t syndrome; abi::cqe_error e; };
    const std::array<named, 14> all{{
        {0x01, abi::cqe_error::local_length}, {0x02, abi::cqe_error::local_qp_op},
        {0x04, abi::cqe_error::local_protection}, {0x05, abi::cqe_error::flushed},
        {0x06, abi::cqe_error::mw_bind}, {0x10, abi::cqe_error::bad_response},
        {0x11, abi::cqe_error::local_access}, {0x12, abi::cqe_error::remote_invalid_request},
        {0x13, abi::cqe_error::remote_access}, {0x14, abi::cqe_error::remote_operation},
        {0x15, abi::cqe_error::transport_retry_exceeded}, {0x16, abi::cqe_error::rnr_retry_exceeded},
        {0x22, abi::cqe_error::remote_aborted}, {0x7e, abi::cqe_error::unknown},
    }};
    fixture f(16);
    std::uint32_t n = 0;
    for (const named& s : all) {
        abi::completion x{};
        x.opcode = n % 2 == 0 ? abi::cqe_opcode::req_err : abi::cqe_opcode::resp_err;
        x.qpn = 0x55;
        x.wqe_counter = static_cast<std::uint16_t>(n);
        x.syndrome = s.syndrome;
        x.vendor_syndrome = 0x93;
        f.device_writes(n, x);
        const auto c = f.cq.poll();
        REQUIRE(c.has_value());
        CHECK(c->opcode == x.opcode);
        CHECK(c->error == s.e);
        CHECK(c->syndrome == s.syndrome);
        CHECK(c->vendor_syndrome == 0x93);
        CHECK(c->byte_count == 0);
        const rig::qp::entry_error e = rig::qp::mlx5::error_of(*c);
        CHECK(e.what == abi::to_string(s.e));
        CHECK(e.syndrome == s.syndrome);
        CHECK(e.vendor == 0x93);
        CHECK_FALSE(e.flushed);
        ++n;
    }
    CHECK(f.set_ci() == 0);   // nothing given back until done()
    f.cq.done();
    CHECK(f.set_ci() == n);
}

TEST_CASE("completion queue: a CQE opcode no table names comes back raw, with its QPN") {
    fixture f(4);
    std::span<std::byte, 64> slot(f.ring.data(), 64);
    abi::encode(slot, req(0x321, 9));
    f.ring.data()[abi::cqe_offset::op_own] = std::byte{0x80};   // opcode 8, owner 0
    const auto c = f.cq.poll();
    REQUIRE(c.has_value());
    CHECK(static_cast<unsigned>(c->opcode) == 8);
    CHECK(c->qpn == 0x321);
    CHECK(c->wqe_counter == 9);
    CHECK(c->error == abi::cqe_error::unknown);
}

TEST_CASE("completion queue: arm writes the record word, then cqn and word to UAR+0x20") {
    fixture f(8);
    for (std::uint32_t n = 0; n < 5; ++n) {
        f.device_writes(n, req(1, static_cast<std::uint16_t>(n)));
        REQUIRE(f.cq.poll().has_value());
    }
    f.cq.arm();
    CHECK(f.arm_word() == ((0u << 28) | 0u | 5u));
    CHECK(f.arm_doorbell() == ((std::uint64_t{5} << 32) | cqn));
    // bytes as the NIC receives them: first dword the arm word, second the cqn, big-endian
    const std::array<std::byte, 8> expect{std::byte{0}, std::byte{0}, std::byte{0}, std::byte{5},
                                          std::byte{0}, std::byte{0}, std::byte{0x02}, std::byte{0xa5}};
    CHECK(std::memcmp(f.uar.data() + 0x20, expect.data(), 8) == 0);

    // after an event the sequence number moves on; solicited-only sets cmd bit 24; wraps at 4
    f.cq.event();
    f.cq.arm(true);
    CHECK(f.arm_word() == ((1u << 28) | (1u << 24) | 5u));
    CHECK(f.arm_doorbell() == ((std::uint64_t{(1u << 28) | (1u << 24) | 5u} << 32) | cqn));
    for (int i = 0; i < 3; ++i) {
        f.cq.event();
    }
    CHECK(f.cq.arm_sequence() == 0);
    f.cq.arm();
    CHECK(f.arm_word() == 5u);
    // the set_ci word is not touched by arming
    CHECK(f.set_ci() == 5);
}

TEST_CASE("completion queue: memory that does not fit is refused at construction") {
    aligned_bytes ring(6 * 64), record(8), uar(4096);
    CHECK_THROWS_AS(completion_queue({ring.span(), record.span(), uar.data()}, 1),
                    std::invalid_argument);
    aligned_bytes ring8(8 * 64);
    CHECK_THROWS_AS(completion_queue({ring8.span(), record.span(), nullptr}, 1),
                    std::invalid_argument);
    CHECK_THROWS_AS(completion_queue({ring8.span(), record.span(), uar.data()}, 1u << 24),
                    std::invalid_argument);
}
