// The mlx5 model's data path (sim/mlx5/datapath.hpp) end to end: two served functions on one
// wire, brought up by the driver (firmware/mlx5/hca), objects made with firmware/mlx5/objects,
// entries posted and rung with qp/mlx5's send and receive queues over the mapped UAR page, CQEs
// polled with qp/mlx5's completion queue. Bytes, CQE fields and syndromes are checked.
#include "test/model/mlx5_datapath/sides.hpp"

using namespace rig::test::mlx5_datapath;

TEST_CASE("mlx5 data path: WRITE, inline WRITE, SEND/RECV and READ between two functions", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0x100, 0x200);
    connect(b, qb, a, qa, 0x200, 0x100);

    SECTION("RDMA WRITE of 5000 bytes: the peer's memory holds them, one REQ CQE") {
        fill(a.at(0), 5000, 3);
        const auto n = qa.sq->post(abi::write_op{a.local(0, 5000), b.remote(8192)}, true);
        qa.sq->ring();
        const auto c = a.wait(1);
        REQUIRE(c.size() == 1);
        INFO("syndrome " << int(c[0].syndrome));
        CHECK(c[0].opcode == abi::cqe_opcode::req);
        CHECK(c[0].qpn == qa.qp.qpn());
        CHECK(c[0].wqe_counter == n);
        CHECK(c[0].send_opcode == static_cast<std::uint8_t>(abi::send_opcode::rdma_write));
        qa.complete(c[0]);
        const auto r = qa.sq->poll();
        REQUIRE(r.has_value());
        REQUIRE(r->has_value());
        CHECK(**r == 5000);
        CHECK(std::memcmp(a.at(0), b.at(8192), 5000) == 0);
        REQUIRE(a.m.fn.data_path() != nullptr);
        CHECK(a.m.fn.data_path()->wqes_fetched() == 1);
        CHECK(a.m.fn.data_path()->cqes_written() == 1);
        CHECK(b.m.fn.data_path()->cqes_written() == 0);
        CHECK(b.wait(1, 50ms).empty());  // a WRITE consumes no receive: the peer's CQ stays empty
    }
    SECTION("inline WRITE, unsignaled WRITEs covered by the next signaled one") {
        const std::string text = "inline bytes travel in the WQE";
        qa.sq->post(abi::write_inline_op{std::string_view(text).substr(0, 28), b.remote(100)}, true);
        fill(a.at(1000), 300, 9);
        qa.sq->post(abi::write_op{a.local(1000, 100), b.remote(2000)}, false);
        qa.sq->post(abi::write_op{a.local(1100, 200), b.remote(2100)}, true);
        qa.sq->ring();
        const auto c = a.wait(2);
        REQUIRE(c.size() == 2);
        CHECK(c[0].wqe_counter == 0);
        CHECK(c[1].wqe_counter == 2);  // the unsignaled entry 1 completes with it
        for (const auto& x : c) {
            CHECK(x.opcode == abi::cqe_opcode::req);
            qa.complete(x);
        }
        for (std::uint32_t bytes : {28u, 100u, 200u}) {
            const auto r = qa.sq->poll();
            REQUIRE(r.has_value());
            REQUIRE(r->has_value());
            CHECK(**r == bytes);
        }
        CHECK(std::memcmp(b.at(100), text.data(), 28) == 0);
        CHECK(std::memcmp(b.at(2000), a.at(1000), 300) == 0);
    }
    SECTION("SEND lands in the posted receive: RESP_SEND with the length, REQ on the sender") {
        b.at(30000)[0] = std::byte{0};
        qb.rq->post(b.local(30000, 4096));
        qb.rq->ring();
        fill(a.at(500), 3000, 77);
        qa.sq->post(abi::send_op{a.local(500, 3000)}, true);
        qa.sq->ring();
        const auto rc = b.wait(1);
        REQUIRE(rc.size() == 1);
        CHECK(rc[0].opcode == abi::cqe_opcode::resp_send);
        CHECK(rc[0].byte_count == 3000);
        CHECK(rc[0].wqe_counter == 0);
        CHECK(rc[0].qpn == qb.qp.qpn());
        qb.complete(rc[0]);
        const auto rr = qb.rq->poll();
        REQUIRE(rr.has_value());
        REQUIRE(rr->has_value());
        CHECK(**rr == 3000);
        CHECK(std::memcmp(b.at(30000), a.at(500), 3000) == 0);
        const auto sc = a.wait(1);
        REQUIRE(sc.size() == 1);
        CHECK(sc[0].opcode == abi::cqe_opcode::req);
        CHECK(sc[0].send_opcode == static_cast<std::uint8_t>(abi::send_opcode::send));
    }
    SECTION("RDMA READ of 6000 bytes from the peer") {
        fill(b.at(40000), 6000, 21);
        std::memset(a.at(10000), 0, 6000);
        qa.sq->post(abi::read_op{b.remote(40000), a.local(10000, 6000)}, true);
        qa.sq->ring();
        const auto c = a.wait(1);
        REQUIRE(c.size() == 1);
        CHECK(c[0].opcode == abi::cqe_opcode::req);
        CHECK(c[0].send_opcode == static_cast<std::uint8_t>(abi::send_opcode::rdma_read));
        CHECK(c[0].byte_count == 6000);
        CHECK(std::memcmp(a.at(10000), b.at(40000), 6000) == 0);
    }
}

TEST_CASE("mlx5 data path: a bad rkey completes REMOTE_ACCESS, the rest flushes", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0x10, 0x20);
    connect(b, qb, a, qa, 0x20, 0x10);

    fill(a.at(0), 64, 1);
    std::memset(b.at(0), 0, 4096);
    qa.sq->post(abi::write_op{a.local(0, 64), b.remote(0)}, true);
    qa.sq->post(abi::write_op{a.local(0, 64), {static_cast<std::int64_t>(b.iova), b.key.rkey() ^ 0x55}}, true);
    qa.sq->post(abi::write_op{a.local(0, 64), b.remote(1024)}, true);
    qa.sq->post(abi::write_op{a.local(0, 64), b.remote(2048)}, true);
    qa.sq->ring();
    const auto c = a.wait(4);
    REQUIRE(c.size() == 4);
    CHECK(c[0].opcode == abi::cqe_opcode::req);
    CHECK(c[1].opcode == abi::cqe_opcode::req_err);
    CHECK(c[1].error == abi::cqe_error::remote_access);
    CHECK(c[1].syndrome == 0x13);
    CHECK(c[1].wqe_counter == 1);
    for (std::size_t i = 2; i < 4; ++i) {
        CHECK(c[i].opcode == abi::cqe_opcode::req_err);
        CHECK(c[i].syndrome == 0x05);  // WR_FLUSH_ERR
        CHECK(c[i].wqe_counter == i);
    }
    for (const auto& x : c) {
        qa.complete(x);
    }
    CHECK(qa.sq->poll()->has_value());
    const auto failed = qa.sq->poll();
    REQUIRE(failed.has_value());
    REQUIRE_FALSE(failed->has_value());
    CHECK(failed->error().syndrome == 0x13);
    CHECK(std::memcmp(b.at(0), a.at(0), 64) == 0);
    CHECK(b.at(1024)[0] == std::byte{0});  // the flushed entries moved nothing
    CHECK(b.at(2048)[0] == std::byte{0});
    // the failure moved the QP to ERR, as QUERY_QP reports; later entries flush too
    CHECK(value(qa.qp.query(a.q(), soon())).state == ifc::qpc_state::err);
    qa.sq->post(abi::write_op{a.local(0, 64), b.remote(3072)}, true);
    qa.sq->ring();
    const auto later = a.wait(1);
    REQUIRE(later.size() == 1);
    CHECK(later[0].syndrome == 0x05);
}

TEST_CASE("mlx5 data path: a malformed WQE completes with a local QP operation error", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 1, 2);
    connect(b, qb, a, qa, 2, 1);
    std::memset(b.at(0), 0, 64);
    fill(a.at(0), 64, 8);
    const auto n = qa.sq->post(abi::write_op{a.local(0, 64), b.remote(0)}, true);
    std::byte* e = qa.qp.send_queue().data();
    std::uint8_t opcode = static_cast<std::uint8_t>(abi::send_opcode::rdma_write);
    SECTION("an opcode the card does not have") {
        e[3] = std::byte{0x3f};  // ctrl opcode byte
        opcode = 0x3f;
    }
    SECTION("ds 0") {
        e[7] &= std::byte{0xc0};  // qpn_ds: ds in the low 6 bits
    }
    SECTION("ds beyond the entries the doorbell record posted") {
        e[7] = std::byte{0x3f};   // 63 x 16 bytes: 16 blocks, one posted
    }
    SECTION("a data segment with lkey 0") {
        std::memset(e + 32 + 4, 0, 4);
    }
    qa.sq->ring();
    const auto c = a.wait(1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].opcode == abi::cqe_opcode::req_err);
    CHECK(c[0].error == abi::cqe_error::local_qp_op);
    CHECK(c[0].wqe_counter == n);
    CHECK(c[0].send_opcode == opcode);
    CHECK(b.at(0)[0] == std::byte{0});  // nothing moved
}

TEST_CASE("mlx5 data path: WQEs as abi writes them parse into the engine's requests", "[model][mlx5]") {
    std::array<std::byte, 1024> ring{};
    abi::write(ring, 0, 0x123, 5, abi::write_inline_op{"hello", {0x1000, 0x4242}}, true);
    auto p = model::parse_send_wqe(ring, 5, 0x123, 1);
    CHECK_FALSE(p.malformed);
    CHECK(p.blocks == 1);
    CHECK(p.request.op == rig::sim::roce::work_op::write);
    CHECK(p.request.is_inline);
    CHECK(p.request.inline_bytes == 5);
    CHECK(std::memcmp(p.request.inline_data.data(), "hello", 5) == 0);
    CHECK(p.request.remote_va == 0x1000);
    CHECK(p.request.rkey == 0x4242);
    CHECK(p.request.signaled);

    abi::write(ring, 0, 0x123, 6, abi::read_op{{0x2000, 0x77}, {0x3000, 900, 0x88}}, false);
    p = model::parse_send_wqe(ring, 6, 0x123, 4);
    CHECK_FALSE(p.malformed);
    CHECK(p.request.op == rig::sim::roce::work_op::read);
    CHECK_FALSE(p.request.signaled);
    REQUIRE(p.request.sge_count == 1);
    CHECK(p.request.sg[0].key == 0x88);
    CHECK(p.request.sg[0].va == 0x3000);
    CHECK(p.request.sg[0].length == 900);
    CHECK(p.request.remote_va == 0x2000);
    CHECK(p.request.rkey == 0x77);
    CHECK(model::parse_send_wqe(ring, 7, 0x123, 1).malformed);  // the index is not this entry's
    CHECK(model::parse_send_wqe(ring, 6, 0x124, 1).malformed);  // nor the QPN

    abi::write(ring, 0, 0x123, 8, abi::send_op{{0x5000, 0, 0x99}}, true);  // zero length: no data segment
    p = model::parse_send_wqe(ring, 8, 0x123, 1);
    CHECK_FALSE(p.malformed);
    CHECK(p.request.op == rig::sim::roce::work_op::send);
    CHECK(p.request.sge_count == 0);

    std::array<std::byte, 64> rq{};
    const std::array<abi::local, 2> scatter{abi::local{0x100, 10, 1}, abi::local{0x200, 20, 2}};
    abi::write_receive(rq, 0, 64, scatter);
    rig::sim::roce::receive_request r;
    REQUIRE(model::parse_receive_wqe(rq, 3, r));
    CHECK(r.index == 3);
    REQUIRE(r.sge_count == 2);  // the third segment is the MLX5_INVALID_LKEY end mark
    CHECK(r.sg[1].key == 2);
    CHECK(r.sg[1].va == 0x200);
    CHECK(r.sg[1].length == 20);
}

TEST_CASE("mlx5 data path: one QP connected to itself; an armed CQ raises one COMP event", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w);
    queue_pair qa(a);
    connect(a, qa, a, qa, 0x777, 0x777);
    a.cqq->arm();
    fill(a.at(0), 2000, 5);
    qa.sq->post(abi::write_op{a.local(0, 2000), a.remote(20000)}, true);
    qa.sq->ring();
    const auto c = a.wait(1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].opcode == abi::cqe_opcode::req);
    CHECK(std::memcmp(a.at(0), a.at(20000), 2000) == 0);
    const auto until = clk::now() + 2s;
    while (a.comp_events.load() == 0 && clk::now() < until) {
        std::this_thread::sleep_for(1ms);
    }
    CHECK(a.comp_events.load() == 1);
    // disarmed: the next completion raises nothing until the driver arms again
    qa.sq->post(abi::write_op{a.local(0, 16), a.remote(30000)}, true);
    qa.sq->ring();
    REQUIRE(a.wait(1).size() == 1);
    std::this_thread::sleep_for(20ms);
    CHECK(a.comp_events.load() == 1);
}

TEST_CASE("mlx5 data path: after DESTROY_QP the QP moves no byte", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 5, 6);
    connect(b, qb, a, qa, 6, 5);
    ok(qb.qp.destroy(b.q(), *b.m.f, b.h->stranded_registry(), soon()));
    std::memset(b.at(0), 0, 256);
    fill(a.at(0), 256, 11);
    qa.sq->post(abi::write_op{a.local(0, 256), b.remote(0)}, true);
    qa.sq->ring();
    std::this_thread::sleep_for(100ms);
    CHECK(b.at(0)[0] == std::byte{0});
    CHECK(std::memcmp(b.at(0), std::array<std::byte, 256>{}.data(), 256) == 0);
}

TEST_CASE("mlx5 data path: a SEND before its receive is retried (RNR) until the receive comes", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0x1000, 0x2000);
    connect(b, qb, a, qa, 0x2000, 0x1000);
    fill(a.at(0), 700, 42);
    qa.sq->post(abi::send_op{a.local(0, 700)}, true);
    qa.sq->ring();
    CHECK(a.wait(1, 200ms).empty());  // no receive: RNR NAKs, retried without end, no completion
    qb.rq->post(b.local(100, 1024));
    qb.rq->ring();
    const auto rc = b.wait(1);
    REQUIRE(rc.size() == 1);
    CHECK(rc[0].opcode == abi::cqe_opcode::resp_send);
    CHECK(rc[0].byte_count == 700);
    CHECK(std::memcmp(b.at(100), a.at(0), 700) == 0);
    const auto sc = a.wait(1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].opcode == abi::cqe_opcode::req);
}

TEST_CASE("mlx5 data path: a SEND longer than its receive fails both sides", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 7, 9);
    connect(b, qb, a, qa, 9, 7);
    qb.rq->post(b.local(0, 100));
    qb.rq->post(b.local(200, 100));
    qb.rq->ring();
    qa.sq->post(abi::send_op{a.local(0, 500)}, true);
    qa.sq->ring();
    const auto rc = b.wait(2);
    REQUIRE(rc.size() == 2);
    CHECK(rc[0].opcode == abi::cqe_opcode::resp_err);
    CHECK(rc[0].syndrome == 0x01);  // local length
    CHECK(rc[0].wqe_counter == 0);
    CHECK(rc[1].opcode == abi::cqe_opcode::resp_err);
    CHECK(rc[1].syndrome == 0x05);  // flushed
    CHECK(rc[1].wqe_counter == 1);
    const auto sc = a.wait(1);
    REQUIRE(sc.size() == 1);
    CHECK(sc[0].opcode == abi::cqe_opcode::req_err);
    CHECK(sc[0].syndrome == 0x12);  // remote invalid request
}

TEST_CASE("mlx5 data path: 2ERR flushes posted receives; 2RST and a new connection run again", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0x50, 0x60);
    connect(b, qb, a, qa, 0x60, 0x50);
    qb.rq->post(b.local(0, 64));
    qb.rq->post(b.local(64, 64));
    qb.rq->ring();
    std::this_thread::sleep_for(20ms);  // the model has taken them
    ok(qb.qp.to_error(b.q(), soon()));
    const auto rc = b.wait(2);
    REQUIRE(rc.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
        CHECK(rc[i].opcode == abi::cqe_opcode::resp_err);
        CHECK(rc[i].syndrome == 0x05);
        CHECK(rc[i].wqe_counter == i);
    }
}

TEST_CASE("mlx5 data path: 300 WRITEs through a 64-entry send ring and a 256-entry CQ", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0xfffff0, 0x10);  // the PSN wraps too
    connect(b, qb, a, qa, 0x10, 0xfffff0);
    fill(a.at(0), 64 * 1024, 13);
    std::size_t done = 0;
    std::uint64_t next = 0;
    while (done < 300) {
        while (next < 300 && qa.sq->room() > 0) {
            const std::size_t at = (next * 192) % (60 * 1024);
            qa.sq->post(abi::write_op{a.local(at, 192), b.remote(at)}, true);
            ++next;
        }
        qa.sq->ring();
        const auto c = a.wait(1);
        REQUIRE(c.size() == 1);
        CHECK(c[0].opcode == abi::cqe_opcode::req);
        CHECK(c[0].wqe_counter == (done & 0xffff));
        qa.complete(c[0]);
        const auto r = qa.sq->poll();
        REQUIRE(r.has_value());
        REQUIRE(r->has_value());
        ++done;
    }
    CHECK(std::memcmp(a.at(0), b.at(0), 300 * 192) == 0);
    CHECK(b.at(300 * 192)[0] == std::byte{0});  // nothing beyond what was written
}

TEST_CASE("mlx5 data path: a failed QP taken to reset and connected again runs again", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0x30, 0x40);
    connect(b, qb, a, qa, 0x40, 0x30);
    qa.sq->post(abi::write_op{a.local(0, 64), {static_cast<std::int64_t>(b.iova), b.key.rkey() + 0x100}}, true);
    qa.sq->ring();
    const auto c = a.wait(1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].syndrome == 0x13);
    CHECK(value(qa.qp.query(a.q(), soon())).state == ifc::qpc_state::err);
    // both sides back to reset and connected again at new PSNs, the driver's rings anew
    ok(qa.qp.to_reset(a.q(), soon()));
    ok(qb.qp.to_reset(b.q(), soon()));
    qa.sq = std::make_unique<qpm::send_queue>(
        qpm::send_queue_memory{qa.qp.send_queue(), {qa.qp.doorbell_record(), 8}, qa.doorbell},
        qa.qp.qpn());
    std::memset(qa.qp.doorbell_record(), 0, 8);  // rdma-core clears the record at 2RST
    connect(a, qa, b, qb, 0x500, 0x600);
    connect(b, qb, a, qa, 0x600, 0x500);
    fill(a.at(0), 1500, 99);
    qa.sq->post(abi::write_op{a.local(0, 1500), b.remote(4096)}, true);
    qa.sq->ring();
    const auto d = a.wait(1);
    REQUIRE(d.size() == 1);
    CHECK(d[0].opcode == abi::cqe_opcode::req);
    CHECK(d[0].wqe_counter == 0);
    CHECK(std::memcmp(b.at(4096), a.at(0), 1500) == 0);
}

TEST_CASE("mlx5 data path: after DESTROY_MKEY its rkey is refused", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 3, 4);
    connect(b, qb, a, qa, 4, 3);
    const auto target = b.remote(0);
    ok(b.key.destroy(b.q(), soon()));
    std::memset(b.at(0), 0, 128);
    fill(a.at(0), 128, 6);
    qa.sq->post(abi::write_op{a.local(0, 128), target}, true);
    qa.sq->ring();
    const auto c = a.wait(1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].opcode == abi::cqe_opcode::req_err);
    CHECK(c[0].syndrome == 0x13);  // remote access
    CHECK(b.at(0)[0] == std::byte{0});
}

TEST_CASE("mlx5 data path: frames for a function without RC queue pairs are dropped, not kept for later ones",
          "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side f(w);  // up, with a PD, CQ and region, but no QP: no RC engine yet
    REQUIRE(f.m.fn.data_path() != nullptr);
    auto raw = w.attach({std::byte{0x02}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0xee}, std::byte{0x01}});
    const auto mac = f.m.fn.mac();
    constexpr int frames = 10;
    for (int i = 0; i < frames; ++i) {
        rig::sim::roce::frame* fr = raw->allocate();
        REQUIRE(fr != nullptr);
        std::memset(fr->bytes.data(), 0x5a, 128);
        std::memcpy(fr->bytes.data(), mac.data(), mac.size());  // to the function's MAC
        fr->size = 128;
        raw->transmit(fr, clk::now());
    }
    CHECK(w.counters().delivered == frames);
    const auto end = clk::now() + 5s;
    while (f.m.fn.data_path()->frames_dropped() < frames && clk::now() < end) {
        std::this_thread::sleep_for(1ms);
    }
    CHECK(f.m.fn.data_path()->frames_dropped() == frames);
}

TEST_CASE("mlx5 data path: two CQs of one UAR armed between two passes both raise their event (the arm record "
          "counts, not only the last doorbell store)",
          "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w);
    // a second CQ on the same UAR page: its arm doorbell shares UAR + 0x20 with a.cq's
    fw::cq cq2 = value(fw::cq::create(a.q(), *a.m.f, a.h->stranded_registry(), *a.records,
                                      {.log_size = 8, .uar = a.uar, .eqn = a.h->event_queue()->eqn()}, soon()));
    qpm::completion_queue cqq2(qpm::completion_queue_memory{cq2.entries(), {cq2.doorbell_record(), 8}, a.uar_page},
                               cq2.cqn());
    queue_pair qa(a);
    connect(a, qa, a, qa, 0x123, 0x123);
    // first round as usual: arm, complete, one event; the driver moves its sequence number on
    a.cqq->arm();
    qa.sq->post(abi::write_op{a.local(0, 64), a.remote(20000)}, true);
    qa.sq->ring();
    REQUIRE(a.wait(1).size() == 1);
    const auto until = clk::now() + 2s;
    while (a.comp_events.load() == 0 && clk::now() < until) {
        std::this_thread::sleep_for(1ms);
    }
    REQUIRE(a.comp_events.load() == 1);
    a.cqq->event();
    // a.cq armed by its record word only, as when cq2's doorbell store overwrote a.cq's before
    // the model's next look; then cq2 armed in full (record and store)
    const std::uint32_t word = abi::cq_arm_word(a.cqq->arm_sequence(), abi::cq_arm_next, a.cqq->consumer_index());
    rig::abi::store_be<std::uint32_t>(a.cq.doorbell_record() + abi::cq_dbr::arm, word);
    cqq2.arm();
    std::this_thread::sleep_for(20ms);  // the model's passes see cq2's store and both records
    CHECK(a.comp_events.load() == 1);   // armed, nothing completed yet
    qa.sq->post(abi::write_op{a.local(0, 64), a.remote(30000)}, true);
    qa.sq->ring();
    REQUIRE(a.wait(1).size() == 1);
    const auto until2 = clk::now() + 2s;
    while (a.comp_events.load() < 2 && clk::now() < until2) {
        std::this_thread::sleep_for(1ms);
    }
    CHECK(a.comp_events.load() == 2);  // a.cq's event, from the arm its record carried
    (void)cq2.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon());
}

// The model core runs every function of the wire; a function whose lock another thread holds
// (its firmware thread running a command) is passed over, not waited for (roce::step_when_free).
TEST_CASE("mlx5 data path: while a third function's lock is held, as its firmware thread holds it for a command, two "
          "functions on the same model core move a WRITE; the third's passes start again once it is free",
          "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w), c(w);
    queue_pair qa(a), qb(b);
    connect(a, qa, b, qb, 0x100, 0x200);
    connect(b, qb, a, qa, 0x200, 0x100);
    const auto* c_path = c.m.fn.data_path();
    REQUIRE(c_path != nullptr);
    {
        const auto held = c.m.fn.hold_lock();
        const std::uint64_t c_passes = c_path->passes();
        fill(a.at(0), 4096, 5);
        std::memset(b.at(8192), 0, 4096);
        qa.sq->post(abi::write_op{a.local(0, 4096), b.remote(8192)}, true);
        qa.sq->ring();
        const auto done = a.wait(1);
        REQUIRE(done.size() == 1);
        INFO("syndrome " << int(done[0].syndrome));
        CHECK(done[0].opcode == abi::cqe_opcode::req);
        CHECK(std::memcmp(a.at(0), b.at(8192), 4096) == 0);
        CHECK(c_path->passes() == c_passes);   // no pass of c ran without its lock
    }
    const std::uint64_t after = c_path->passes();
    const auto until = clk::now() + 5s;
    while (c_path->passes() == after && clk::now() < until) {
        std::this_thread::sleep_for(100us);
    }
    CHECK(c_path->passes() > after);
}

// The model writes a run of CQEs body first and their owner bytes after, in order
// (sim/vfio_user/polled_bytes.hpp): a reader spinning on the CQ's lines meanwhile, as a driver
// does, never sees a CQE valid before the one ahead of it, nor a valid one whose body is not its
// own. (Publishing the owner bytes in reverse made this fail with 100-200 such sightings.)
TEST_CASE("mlx5 data path: CQEs become valid in order, each with its own body, under a reader spinning on the CQ",
          "[model][mlx5]") {
    connected_sides sides(0x100, 0x200);
    auto& [w, a, b, qa, qb] = sides;
    constexpr std::uint32_t total = 200;   // within the 256-entry CQ's first pass: owner 0
    const std::span<const std::byte> cqes = a.cq.entries();
    const auto op_own = [&](std::uint32_t k) {
        return std::atomic_ref<const std::byte>(cqes[std::size_t{k} * 64 + abi::cqe_offset::op_own])
            .load(std::memory_order_acquire);
    };
    const auto valid = [&](std::byte v) {   // opcode not INVALID, owner 0
        return (std::to_integer<unsigned>(v) >> 4) != 0xf && (v & std::byte{1}) == std::byte{0};
    };
    std::atomic<std::uint32_t> seen{0}, ahead_first{0}, wrong_body{0};
    std::jthread reader([&](std::stop_token stop) {
        for (std::uint32_t k = 0; k < total && !stop.stop_requested();) {
            // the CQEs of k's run after it first, then k's: one of them was valid before k
            bool later_valid = false;
            for (std::uint32_t j = std::min(k + 63, total - 1); j > k && !later_valid; --j) {
                later_valid = valid(op_own(j));
            }
            if (!valid(op_own(k))) {
                ahead_first += later_valid ? 1 : 0;
                continue;
            }
            const std::byte* e = cqes.data() + std::size_t{k} * 64;
            const unsigned counter = (std::to_integer<unsigned>(e[abi::cqe_offset::wqe_counter]) << 8) |
                                     std::to_integer<unsigned>(e[abi::cqe_offset::wqe_counter + 1]);
            if (counter != k || (std::to_integer<unsigned>(e[abi::cqe_offset::op_own]) >> 4) !=
                                    static_cast<unsigned>(abi::cqe_opcode::req)) {
                ++wrong_body;
            }
            seen = ++k;
        }
    });
    // as many as the send ring holds per doorbell: the model completes them in runs
    for (std::uint32_t posted = 0; posted < total;) {
        std::uint32_t batch = 0;
        for (; posted < total && qa.sq->room() > 0; ++posted, ++batch) {
            const std::size_t at = posted * 64 % region_bytes;
            qa.sq->post(abi::write_op{a.local(at, 64), b.remote(at)}, true);
        }
        qa.sq->ring();
        const auto c = a.wait(batch);
        REQUIRE(c.size() == batch);
        for (const auto& x : c) {
            qa.complete(x);
            REQUIRE(qa.sq->poll().has_value());
        }
    }
    const auto until = clk::now() + 5s;
    while (seen < total && clk::now() < until) {
        std::this_thread::sleep_for(1ms);
    }
    reader.request_stop();
    CHECK(seen == total);
    CHECK(ahead_first == 0);
    CHECK(wrong_body == 0);
}
