// The bnxt completion queue over plain memory: a CQE is new when its toggle bit (byte 24, bit 0)
// matches the consumer's pass (rdma-core bnxt_re_is_cqe_valid, qplib_res.h
// bnxt_qplib_hwq_incr_cons). One barrier covers the CQEs seen new together
// (qp/cqe_run.hpp, up to 8): each still comes out once and in order, a run stops at
// the first CQE the device has not written, and CQEs written later are found, across the wrap.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>

#include "qp/bnxt/completion_queue.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::bnxt::abi;
using rig::qp::bnxt::completion_queue;
using rig::test::aligned_bytes;

namespace {

constexpr std::uint32_t entries = 16;

struct fixture {
    fixture() : ring(entries * abi::cqe_size), doorbells(64), cq({ring.span(), doorbells.data(), doorbells.data() + 8}, 5) {}
    aligned_bytes ring, doorbells;
    completion_queue cq;

    // The device writes CQE number `count` (unmasked): a marker, and the toggle of its pass
    // (1 on the first pass: the ring starts zeroed).
    void device_writes(std::uint32_t count) {
        std::byte* slot = ring.data() + (count % entries) * abi::cqe_size;
        std::memcpy(slot + 8, &count, sizeof count);
        slot[24] = std::byte{static_cast<unsigned char>(((count / entries) & 1) == 0 ? 1 : 0)};
    }
    // The marker of the CQE next() handed back, or -1 for none.
    std::int64_t next() {
        const std::span<const std::byte> c = cq.next();
        if (c.empty()) {
            return -1;
        }
        REQUIRE(c.size() == abi::cqe_size);
        std::uint32_t count = 0;
        std::memcpy(&count, c.data() + 8, sizeof count);
        return count;
    }
};

}  // namespace

TEST_CASE("bnxt completion queue: CQEs seen together come out once, in order, up to the first unwritten one",
          "[unit][bnxt]") {
    fixture f;
    CHECK(f.next() == -1);   // a zeroed ring: nothing new
    std::uint32_t written = 0, taken = 0;
    const auto write = [&](std::uint32_t k) {
        for (std::uint32_t i = 0; i < k; ++i) {
            f.device_writes(written++);
        }
    };
    const auto take_all = [&] {
        for (std::int64_t c; (c = f.next()) >= 0; ++taken) {
            CHECK(c == taken);
        }
        f.cq.done();
        CHECK(taken == written);
        CHECK(f.cq.consumer_index() == taken);
    };
    write(11);   // more than one run of 8
    take_all();
    write(3);    // a run that stops at the unwritten CQE 14
    CHECK(f.next() == 11);
    ++taken;
    write(9);    // written after the run was seen, and across the wrap (CQEs 14..22)
    take_all();

    f.device_writes(24);   // CQE 24 written, CQE 23 not: nothing is taken past the gap
    CHECK(f.next() == -1);
    f.device_writes(23);
    written = 25;
    take_all();
    CHECK(f.next() == -1);   // slot 9 holds CQE 25 - 16 of the last pass: not new
}
