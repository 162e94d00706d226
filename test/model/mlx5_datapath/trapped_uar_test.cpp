// A CQ whose arm doorbell is on the model's trapped UAR page (the first UAR: the event queue's,
// function_model.hpp): the store arrives as a REGION_WRITE, is put into the page's memory as a
// mapped store would be, and the data path arms the CQ from there. A driver rings it as on any
// page it cannot map (firmware/mlx5 events.cpp rings its EQ so).
#include "test/model/mlx5_datapath/sides.hpp"

using namespace rig::test::mlx5_datapath;

TEST_CASE("mlx5 data path: a CQ armed through its doorbell on the trapped UAR page raises its event",
          "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w);
    const std::uint32_t trapped = a.h->uar();  // the hca's first UAR, its EQ's
    REQUIRE(a.m.fn.data_path() != nullptr);
    fw::cq cq = value(fw::cq::create(a.q(), *a.m.f, a.h->stranded_registry(), *a.records,
                                     {.log_size = 8, .uar = trapped, .eqn = a.h->event_queue()->eqn()}, soon()));
    // rdma-core's arm sequence into a page of our own, then its 64-bit store sent to the card
    std::array<std::byte, 4096> page{};
    qpm::completion_queue cqq({cq.entries(), {cq.doorbell_record(), 8}, page.data()}, cq.cqn());
    {
        queue_pair qa(a, cq.cqn());
        connect(a, qa, a, qa, 0x321, 0x321);
        cqq.arm();
        REQUIRE(a.m.f->region_write(drv::region::bar0, std::uint64_t{trapped} * 4096 + abi::uar::cq_doorbell,
                                    std::span(page).subspan(abi::uar::cq_doorbell, 8))
                    .has_value());
        fill(a.at(0), 64, 3);
        qa.sq->post(abi::write_op{a.local(0, 64), a.remote(4096)}, true);
        qa.sq->ring();
        const auto until = clk::now() + 3s;
        while (a.comp_events.load() == 0 && clk::now() < until) {
            std::this_thread::sleep_for(1ms);
        }
        CHECK(a.comp_events.load() == 1);
        CHECK(std::memcmp(a.at(0), a.at(4096), 64) == 0);
    }  // the QP goes before its CQ
    (void)cq.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon());
}
