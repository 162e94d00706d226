// What only bnxt has, through the public API on the bnxt model (docs/bnxt-data-path.md): the
// NIC's own RQ flush CQEs (HW_FLUSH_ERR) skipped by the driver's software flush, requester CQE
// aggregation on and off, and a ring of 4096 slots that holds 4095 entries on both rings.
#include <chrono>
#include <cstdint>
#include <cstring>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "sim/roce/wire.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::side;
using rig::test::expect_done;
using rig::test::expect_failed;
using rig::test::ok;
using rig::test::served_function;
using rig::test::value;

// Two bnxt functions with `o`'s data-path options, a NIC on each, a region and a connected
// queue pair on each.
struct two_bnxt {
    rig::sim::roce::wire w;
    served_function m1, m2;
    std::unique_ptr<rig::nic> n1, n2;
    rig::region r1, r2;
    rig::queue_pair a, b;
    explicit two_bnxt(void (*set)(rig::sim::bnxt::function_options&))
        : m1(options(0, set), &w), m2(options(1, set), &w), n1(m1.open()), n2(m2.open()),
          r1(value(n1->allocate(64 * 1024, rig::access::remote))), r2(value(n2->allocate(64 * 1024, rig::access::remote))),
          a(value(n1->make_qp())), b(value(n2->make_qp())) {
        ok(a.connect(b.local()));
        ok(b.connect(a.local()));
    }
    static rig::sim::bnxt::function_options options(std::uint16_t k, void (*set)(rig::sim::bnxt::function_options&)) {
        auto o = rig::test::quick_bnxt_model(k);
        set(o);
        return o;
    }
};

}  // namespace

TEST_CASE("bnxt: the NIC's HW_FLUSH_ERR CQEs for receives left on a failed queue pair are skipped; the "
          "software flush gives them the failure's error",
          "[model][bnxt][api]") {
    two_bnxt t([](rig::sim::bnxt::function_options& o) { o.hw_flush_cqes = true; });
    t.b.receive(t.r2, 0, 10);       // too small for a's send: fails itself
    t.b.receive(t.r2, 100, 1000);   // left on the failed QP: the NIC writes HW_FLUSH_ERR for them
    t.b.receive(t.r2, 2000, 1000);
    const std::uint64_t b_cqes = t.m2.cqes_written();
    t.a.send(t.r1, 0, 100);
    const rig::error own = expect_failed(t.b, side::receive);
    CHECK_FALSE(own.flushed);
    CHECK(own.syndrome == 0x02);   // CQ_RES_RC_STATUS_LOCAL_LENGTH_ERR
    // the NIC wrote its flush CQEs (one each), which the driver did not take as results
    rig::test::await_cqes(t.m2, b_cqes + 3);
    for (int i = 0; i < 2; ++i) {
        const rig::error e = expect_failed(t.b, side::receive);
        INFO(e.message);
        CHECK(e.flushed);
        CHECK_THAT(e.message, Catch::Contains("LOCAL_LENGTH_ERR") && !Catch::Contains("does not take"));
    }
    const rig::error sender = expect_failed(t.a, side::send);
    CHECK_FALSE(sender.flushed);
    CHECK(sender.syndrome == 0x06);   // CQ_REQ_STATUS_REMOTE_INVALID_REQUEST_ERR
    CHECK(value(t.b.query()).state == rig::qp_status::error);
}

TEST_CASE("bnxt: with requester CQE aggregation off (a CQE per WQE) the results are the same; with it on "
          "one CQE completes a whole doorbell batch",
          "[model][bnxt][api]") {
    for (const bool aggregate : {false, true}) {
        INFO("aggregation " << aggregate);
        two_bnxt t(aggregate ? +[](rig::sim::bnxt::function_options& o) { o.aggregate_requester_cqes = true; }
                             : +[](rig::sim::bnxt::function_options& o) { o.aggregate_requester_cqes = false; });
        const std::uint64_t cqes = t.m1.cqes_written();
        for (std::uint32_t i = 0; i < 20; ++i) {
            rig::test::fill_pattern(t.r1.data() + 256 * i, 256, i);
            t.a.post_write(t.r1, 256 * i, 100 + i, t.r2.remote(256 * i));
        }
        t.a.ring(side::send);
        for (std::uint32_t i = 0; i < 20; ++i) {
            expect_done(t.a, side::send, 100 + i);
            CHECK(rig::test::pattern_mismatch(t.r2.data() + 256 * i, 100 + i, i) == 100 + i);
        }
        CHECK(t.m1.cqes_written() - cqes == (aggregate ? 1u : 20u));
        CHECK(t.a.room(side::send) == 4095);
    }
}
