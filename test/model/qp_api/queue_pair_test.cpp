// queue_pair against the served model: make, connect (another NIC, the same NIC, itself) as
// QUERY_QP reads it back, a connect refused part-way and called again, destroy, firmware silence
// during destroy, and every misuse of the seed (it throws and changes nothing).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <time.h>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace std::chrono_literals;
using rig::test::ok;
using rig::test::served_mlx5;
using rig::test::value;
namespace ifc = rig::mlx5::ifc;

// What QUERY_QP says of `q` connected to `peer`: RTS, the peer's number and PSN, its own PSN,
// and the seed's settings (ack timeout 14 = 67 ms, retry 7, RNR retry 7 = without end).
void check_connected(const rig::queue_pair& q, const rig::endpoint& peer) {
    const auto info = value(q.query());
    CHECK(info.state == rig::qp_status::rts);
    CHECK(info.remote_qp == peer.qp);
    CHECK(info.receive_psn == peer.psn);
    CHECK(info.send_psn == q.local().psn);
    CHECK(info.ack_timeout == 14);
    CHECK(info.retry_count == 7);
    CHECK(info.rnr_retry == 7);
    CHECK(info.remote_gid == peer.gid);
    CHECK(info.remote_mac == peer.mac);
    CHECK(info.gid_index == 0);
    CHECK(info.path_mtu == 4096u);  // the model's port MTU 9000 carries RoCE MTU 4096
    CHECK(info.remote_read);
    CHECK(info.remote_write);
    CHECK(q.connected());
}

}  // namespace

TEST_CASE("queue pair: make gives an unconnected queue pair with a random 24-bit PSN", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    const std::size_t objects = m.fn.objects();
    auto a = value(nic->make_qp());
    auto b = value(nic->make_qp());
    CHECK(m.fn.objects() == objects + 6);  // per queue pair: QP, send CQ, receive CQ
    const rig::endpoint ea = a.local();
    const rig::endpoint eb = b.local();
    CHECK(ea.qp == a.number());
    CHECK(ea.qp != eb.qp);
    CHECK(ea.psn <= 0xffffff);
    CHECK(eb.psn <= 0xffffff);
    CHECK(ea.gid == nic->gid());
    CHECK(ea.mac == nic->mac());
    CHECK_FALSE(a.connected());
    CHECK(value(a.query()).state == rig::qp_status::reset);
    CHECK(a.room(rig::side::send) == 4096);  // 2^12 entries, every slot usable on mlx5
    CHECK(a.room(rig::side::receive) == 4096);
    CHECK_FALSE(a.poll(rig::side::send).has_value());
    // PSNs are drawn at random: 8 queue pairs do not all start at one PSN.
    bool differ = false;
    for (int i = 0; i < 6; ++i) {
        auto q = value(nic->make_qp());
        differ = differ || q.local().psn != ea.psn;
    }
    CHECK(differ);
    ok(nic->close());
    CHECK(m.fn.objects() == 0);
}

TEST_CASE("queue pair: connect to another NIC's, to one of the same NIC, and to itself", "[model][mlx5][api]") {
    served_mlx5 m1(rig::test::quick_model(0));
    served_mlx5 m2(rig::test::quick_model(1));
    auto n1 = m1.open();
    auto n2 = m2.open();
    CHECK(n1->mac() != n2->mac());

    auto a = value(n1->make_qp());
    auto b = value(n2->make_qp());
    ok(a.connect(b.local()));
    ok(b.connect(a.local()));
    check_connected(a, b.local());
    check_connected(b, a.local());

    auto c = value(n1->make_qp());
    auto d = value(n1->make_qp());
    ok(c.connect(d.local()));
    ok(d.connect(c.local()));
    check_connected(c, d.local());
    check_connected(d, c.local());

    auto self = value(n1->make_qp());
    ok(self.connect(self.local()));
    check_connected(self, self.local());

    // Misuse: already connected. Nothing changes.
    CHECK_THROWS_AS(a.connect(b.local()), std::invalid_argument);
    check_connected(a, b.local());
    ok(n1->close());
    ok(n2->close());
    CHECK(m1.fn.objects() == 0);
    CHECK(m2.fn.objects() == 0);
}

TEST_CASE("queue pair: a connect the firmware refused part-way, called again, connects from reset",
          "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    auto a = value(nic->make_qp());
    auto b = value(nic->make_qp());
    m.fn.fail_next(static_cast<std::uint16_t>(ifc::opcode::init2rtr_qp), ifc::cmd_status::bad_param_err, 0x5a5a);
    auto r = a.connect(b.local());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == rig::error_kind::firmware);
    CHECK(r.error().opcode == static_cast<std::uint16_t>(ifc::opcode::init2rtr_qp));
    CHECK(r.error().status == static_cast<std::uint8_t>(ifc::cmd_status::bad_param_err));
    CHECK(r.error().syndrome == 0x5a5au);
    // the same error with its channel and names, for every family (mlx5: the command queue)
    CHECK(r.error().channel == "cmdq");
    CHECK(r.error().opcode_name == "INIT2RTR_QP");
    CHECK(r.error().status_name == "BAD_PARAM_ERR");
    CHECK(r.error().message == "connect (INIT to RTR): INIT2RTR_QP (0x503): BAD_PARAM_ERR (0x3), syndrome 0x5a5a");
    CHECK_FALSE(a.connected());
    CHECK(value(a.query()).state == rig::qp_status::init);  // where the refusal left it
    CHECK_THROWS_AS(a.send(value(nic->allocate(64, rig::access::local)), 0, 1), std::invalid_argument);

    ok(a.connect(b.local()));  // RESET first, then RESET -> INIT -> RTR -> RTS
    check_connected(a, b.local());

    // Refused at the last step: RTR; called again, connected all the same.
    m.fn.fail_next(static_cast<std::uint16_t>(ifc::opcode::rtr2rts_qp), ifc::cmd_status::bad_param_err, 1);
    REQUIRE_FALSE(b.connect(a.local()).has_value());
    CHECK(value(b.query()).state == rig::qp_status::rtr);
    ok(b.connect(a.local()));
    check_connected(b, a.local());
}

TEST_CASE("queue pair: every misuse throws and changes nothing", "[model][mlx5][api]") {
    served_mlx5 m1(rig::test::quick_model(0));
    served_mlx5 m2(rig::test::quick_model(1));
    auto n1 = m1.open();
    auto n2 = m2.open();
    auto r = value(n1->allocate(8192, rig::access::remote));
    auto other = value(n2->allocate(8192, rig::access::remote));
    auto gone = value(n1->allocate(4096, rig::access::remote));
    ok(gone.deregister());
    const rig::remote peer = r.remote(0);

    auto q = value(n1->make_qp());
    const std::array<std::byte, 4> four{};
    // not connected
    CHECK_THROWS_AS(q.send(r, 0, 16), std::invalid_argument);
    CHECK_THROWS_AS(q.receive(r, 0, 16), std::invalid_argument);
    CHECK_THROWS_AS(q.write(r, 0, 16, peer), std::invalid_argument);
    CHECK_THROWS_AS(q.write_inline(four, peer), std::invalid_argument);
    CHECK_THROWS_AS(q.read(peer, r, 0, 16), std::invalid_argument);
    CHECK_THROWS_AS(q.ring(rig::side::send), std::invalid_argument);
    CHECK(q.room(rig::side::send) == 4096);
    CHECK(q.room(rig::side::receive) == 4096);

    // the peer: a queue pair of the other NIC, not posted to by anything here
    auto p = value(n2->make_qp());
    ok(q.connect(p.local()));
    ok(p.connect(q.local()));
    // endpoints with numbers over 24 bits are misuse too
    auto x = value(n1->make_qp());
    rig::endpoint bad = p.local();
    bad.qp = 0x1000000;
    CHECK_THROWS_AS(x.connect(bad), std::invalid_argument);
    bad = p.local();
    bad.psn = 0x1000000;
    CHECK_THROWS_AS(x.connect(bad), std::invalid_argument);
    CHECK(value(x.query()).state == rig::qp_status::reset);

    const auto unchanged = [&] {
        CHECK(q.room(rig::side::send) == 4096);
        CHECK(q.room(rig::side::receive) == 4096);
        CHECK_FALSE(q.poll(rig::side::send).has_value());
        CHECK_FALSE(q.poll(rig::side::receive).has_value());
    };
    const std::size_t big = (std::size_t{1} << 31) + 1;   // one byte over the seed's message
    for (int op = 0; op < 4; ++op) {
        INFO("op " << op);
        const auto post = [&](const rig::region& reg, std::size_t at, std::size_t n) {
            switch (op) {
            case 0: q.send(reg, at, n); break;
            case 1: q.receive(reg, at, n); break;
            case 2: q.write(reg, at, n, peer); break;
            default: q.read(peer, reg, at, n); break;
            }
        };
        CHECK_THROWS_AS(post(other, 0, 16), std::invalid_argument);          // another NIC's region
        CHECK_THROWS_AS(post(gone, 0, 16), std::invalid_argument);           // deregistered
        CHECK_THROWS_AS(post(rig::region(), 0, 16), std::invalid_argument);  // no region
        CHECK_THROWS_AS(post(r, 8192, 1), std::invalid_argument);            // outside the region
        CHECK_THROWS_AS(post(r, 8000, 193), std::invalid_argument);
        CHECK_THROWS_AS(post(r, ~std::size_t{0}, 2), std::invalid_argument);  // wraps
        CHECK_THROWS_AS(post(r, 0, big), std::invalid_argument);             // over 2^31
        unchanged();
    }
    std::array<std::byte, 29> too_long{};
    CHECK_THROWS_AS(q.write_inline(too_long, peer), std::invalid_argument);
    CHECK_THROWS_WITH(q.write_inline(too_long, peer), Catch::Contains("28"));
    CHECK_THROWS_AS(q.wait(rig::side::send, -1us), std::invalid_argument);
    CHECK_THROWS_AS(q.wait(rig::side::send, 10us), std::invalid_argument);  // nothing due
    CHECK_THROWS_AS(q.wait(rig::side::receive, 0us), std::invalid_argument);
    CHECK_THROWS_WITH(q.send(r, 0, big), Catch::Contains("2^31"));
    CHECK_THROWS_WITH(q.send(other, 0, 1), Catch::Contains("NIC"));
    CHECK_THROWS_WITH(gone.remote(0), Catch::Contains("deregistered"));
    unchanged();

    // No room: fill the receive ring (the peer sends nothing, so no entry completes), then one
    // more is refused and the ring is as it was.
    for (int i = 0; i < 4096; ++i) {
        q.post_receive(r, 0, 64);
    }
    q.ring(rig::side::receive);
    CHECK(q.room(rig::side::receive) == 0);
    CHECK_THROWS_AS(q.receive(r, 0, 64), std::invalid_argument);
    CHECK_THROWS_WITH(q.post_receive(r, 0, 64), Catch::Contains("full"));
    CHECK(q.room(rig::side::receive) == 0);
    CHECK(q.room(rig::side::send) == 4096);
    CHECK_FALSE(q.wait(rig::side::receive, 200us).has_value());  // due, no completion: nothing at the bound

    // A long wait sleeps between looks: 300 ms of waiting costs this thread little CPU time.
    timespec c0{}, c1{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_FALSE(q.wait(rig::side::receive, 300ms).has_value());
    CHECK(std::chrono::steady_clock::now() - t0 >= 300ms);
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    const double cpu = double(c1.tv_sec - c0.tv_sec) + double(c1.tv_nsec - c0.tv_nsec) * 1e-9;
    CHECK(cpu < 0.1);
}

TEST_CASE("queue pair: destroy leaves no queue pair in the model; the handle is dead", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    const std::size_t objects = m.fn.objects();
    auto q = value(nic->make_qp());
    auto p = value(nic->make_qp());
    ok(q.connect(p.local()));
    CHECK(m.fn.objects() == objects + 6);
    ok(q.destroy());
    CHECK(m.fn.objects() == objects + 3);
    CHECK(q.destroyed());
    CHECK(nic->queue_pairs() == 1);
    CHECK_THROWS_AS(q.destroy(), std::invalid_argument);
    CHECK_THROWS_AS(q.local(), std::invalid_argument);
    CHECK_THROWS_AS(q.room(rig::side::send), std::invalid_argument);
    CHECK_THROWS_AS(q.poll(rig::side::send), std::invalid_argument);
    CHECK_THROWS_AS(q.connect(p.local()), std::invalid_argument);
    rig::queue_pair moved = std::move(p);
    CHECK(p.destroyed());
    ok(moved.destroy());
    CHECK(m.fn.objects() == objects);
    CHECK(nic->stranded().empty());
}

TEST_CASE("queue pair: firmware silence during destroy: an error, counted destroyed, memory stranded",
          "[model][mlx5][api]") {
    served_mlx5 m;
    rig::nic_options o;
    // The destroy below waits this long, once. It bounds the setup's commands too (open,
    // allocate, make_qp): 2 s, not 200 ms, as errors_test.cpp's took at 74ec1c7, where a setup
    // command outlasted 300 ms on a loaded 2-CPU CI host. The times asserted below are in
    // timeouts, so each still tells one wait from two.
    o.command_timeout = 2s;
    auto nic = m.open(o);
    auto r = value(nic->allocate(4096, rig::access::remote));
    auto q = value(nic->make_qp());
    const std::uint32_t qpn = q.number();
    const std::uint32_t key = r.key();
    m.fn.silence();
    const auto t0 = std::chrono::steady_clock::now();
    auto d = q.destroy();
    // one timeout (DESTROY_QP's), not one per object: nothing is sent after it
    CHECK(std::chrono::steady_clock::now() - t0 < 2 * o.command_timeout);
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().kind == rig::error_kind::firmware);
    CHECK(d.error().opcode == static_cast<std::uint16_t>(ifc::opcode::destroy_qp));
    CHECK(d.error().message.rfind("destroy: ", 0) == 0);
    CHECK(q.destroyed());
    CHECK_THROWS_AS(q.destroy(), std::invalid_argument);
    CHECK_THROWS_AS(q.room(rig::side::receive), std::invalid_argument);

    // The QP's buffer and its CQs' stay allocated and mapped: the firmware may still write them.
    const auto has = [&](const std::string& what) {
        for (const auto& s : nic->stranded()) {
            if (s.what.find(what) != std::string::npos) {
                return true;
            }
        }
        return false;
    };
    CHECK(has("QP " + rig::abi::hex(qpn)));
    CHECK(has("CQ"));

    // close completes locally, without waiting on the firmware again, and keeps the region's
    // memory too (its key may still be used).
    const auto t1 = std::chrono::steady_clock::now();
    auto c = nic->close();
    CHECK(std::chrono::steady_clock::now() - t1 < o.command_timeout);   // waited on no command
    CHECK(nic->closed());
    CHECK(has("region key " + rig::abi::hex(key)));
    CHECK_FALSE(r.registered());
    CHECK(has("command queue page"));
    static_cast<void>(c);
}

TEST_CASE("queue pair: a refused make gives back what it took", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    const std::size_t objects = m.fn.objects();
    const std::size_t windows = m.srv->dma().window_count();
    for (const ifc::opcode op : {ifc::opcode::create_cq, ifc::opcode::create_qp}) {
        INFO(ifc::to_string(op));
        m.fn.fail_next(static_cast<std::uint16_t>(op), ifc::cmd_status::no_res_err, 7);
        auto q = nic->make_qp();
        REQUIRE_FALSE(q.has_value());
        CHECK(q.error().kind == rig::error_kind::firmware);
        CHECK(q.error().opcode == static_cast<std::uint16_t>(op));
        CHECK(q.error().syndrome == 7u);
        CHECK(m.fn.objects() == objects);
        CHECK(m.srv->dma().window_count() == windows);
    }
    CHECK(nic->stranded().empty());
    auto q = value(nic->make_qp());  // and the next make works
    CHECK_FALSE(q.destroyed());
    CHECK(m.fn.objects() == objects + 3);
}

TEST_CASE("queue pair: a destroy the firmware refuses counts as destroyed; close destroys it", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    const std::size_t objects = m.fn.objects();
    auto q = value(nic->make_qp());
    m.fn.fail_next(static_cast<std::uint16_t>(ifc::opcode::destroy_qp), ifc::cmd_status::bad_res_state_err, 3);
    auto d = q.destroy();
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().status == static_cast<std::uint8_t>(ifc::cmd_status::bad_res_state_err));
    CHECK(q.destroyed());
    CHECK_THROWS_AS(q.destroy(), std::invalid_argument);
    CHECK(nic->queue_pairs() == 0);
    CHECK(m.fn.objects() == objects + 3);  // its rings stay allocated until close
    CHECK(nic->stranded().empty());
    ok(nic->close());
    CHECK(m.fn.objects() == 0);
}

TEST_CASE("queue pair: fails when the NIC reports its failure; poll sends no command", "[model][mlx5][api]") {
    served_mlx5 m;
    auto nic = m.open();
    auto r = value(nic->allocate(8192, rig::access::remote));
    auto q = value(nic->make_qp());
    auto other = value(nic->make_qp());
    ok(q.connect(q.local()));
    ok(other.connect(other.local()));
    q.receive(r, 0, 100);
    q.receive(r, 100, 100);
    other.receive(r, 200, 100);
    // COMM_EST is no failure
    REQUIRE(m.fn.post_qp_event(q.number(), static_cast<std::uint8_t>(ifc::event_type::comm_est)));
    CHECK_FALSE(q.wait(rig::side::receive, 100ms).has_value());
    const std::uint64_t commands = m.fn.commands_completed();
    REQUIRE(m.fn.post_qp_event(q.number(), static_cast<std::uint8_t>(ifc::event_type::wq_catas_error)));
    for (int i = 0; i < 2; ++i) {
        auto e = q.wait(rig::side::receive, 2s);
        REQUIRE(e.has_value());
        REQUIRE_FALSE(e->has_value());
        CHECK(e->error().message.find("WQ_CATAS_ERROR") != std::string::npos);
        CHECK(e->error().kind == rig::error_kind::entry);
    }
    // stays failed: a later entry completes with the failure
    q.write(r, 0, 8, r.remote(16));
    auto later = q.poll(rig::side::send);
    REQUIRE(later.has_value());
    CHECK_FALSE(later->has_value());
    CHECK(m.fn.commands_completed() == commands);  // poll and wait sent the firmware nothing
    CHECK_FALSE(other.poll(rig::side::receive).has_value());  // the other queue pair is untouched
}

TEST_CASE("queue pair: fails when the NIC's machine fails; close keeps what the firmware may name",
          "[model][mlx5][api]") {
    served_mlx5 m;
    rig::nic_options o;
    o.health_interval = 50ms;
    // A cap on the wait of a command the dead firmware would not answer (close sends none). It
    // bounds the setup's commands too, the connect included: 2 s, not 500 ms (74ec1c7: a setup
    // command outlasted 300 ms on a loaded 2-CPU CI host).
    o.command_timeout = 2s;
    auto nic = m.open(o);
    auto r = value(nic->allocate(8192, rig::access::remote));
    auto q = value(nic->make_qp());
    ok(q.connect(q.local()));
    q.receive(r, 0, 100);
    m.fn.fatal(0x01);
    auto e = q.wait(rig::side::receive, 3s);
    REQUIRE(e.has_value());
    REQUIRE_FALSE(e->has_value());
    CHECK(e->error().message.find("NIC failed") != std::string::npos);
    static_cast<void>(nic->close());  // completes locally (its result names the dead firmware)
    CHECK(nic->closed());
    CHECK_FALSE(nic->stranded().empty());
    CHECK_FALSE(r.registered());
}

TEST_CASE("queue pair: connect chooses the largest RoCE path MTU the port's Ethernet MTU carries",
          "[model][mlx5][api]") {
    // the kernel's iboe_get_mtu: the MTU less 96 bytes of RoCE headers, rounded down to 256 .. 4096
    for (const auto& [port_mtu, want] : {std::pair{std::uint16_t{9000}, 4096u},
                                        std::pair{std::uint16_t{4200}, 4096u},
                                        std::pair{std::uint16_t{4191}, 2048u},
                                        std::pair{std::uint16_t{1500}, 1024u},
                                        std::pair{std::uint16_t{1119}, 512u}}) {
        INFO("port MTU " << port_mtu);
        auto o = rig::test::quick_model(0);
        o.firmware.port_mtu = port_mtu;
        served_mlx5 m(o);
        auto nic = m.open();
        auto q = value(nic->make_qp());
        ok(q.connect(q.local()));
        CHECK(value(q.query()).path_mtu == want);
        ok(nic->close());
    }
}

TEST_CASE("queue pair: connect at an agreed path MTU up to the NIC's; any other MTU is misuse and changes nothing",
          "[model][mlx5][api]") {
    auto o = rig::test::quick_model(0);
    o.firmware.port_mtu = 1500;  // the NIC's path MTU: 1024
    served_mlx5 m(o);
    auto nic = m.open();
    REQUIRE(nic->path_mtu() == 1024);
    auto q = value(nic->make_qp());
    for (std::uint32_t bad : {0u, 128u, 255u, 1000u, 1536u, 2048u, 4096u, 8192u}) {
        INFO("MTU " << bad);
        CHECK_THROWS_WITH(static_cast<void>(q.connect(q.local(), bad)),
                          Catch::Contains("path MTU " + std::to_string(bad) + " is not one of"));
        CHECK_FALSE(q.connected());
    }
    for (const auto& [bytes, want] : {std::pair{256u, 256u}, std::pair{512u, 512u},
                                     std::pair{1024u, 1024u}}) {
        INFO("MTU " << bytes);
        auto p = value(nic->make_qp());
        ok(p.connect(p.local(), bytes));
        CHECK(value(p.query()).path_mtu == want);
    }
    ok(q.connect(q.local()));  // the refusals left it connectable
    CHECK(value(q.query()).path_mtu == 1024u);
    ok(nic->close());
}
