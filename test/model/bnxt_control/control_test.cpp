// The bnxt control plane behind rig::nic (qp/bnxt/control.hpp) against the bnxt function model
// served over vfio-user in this process, opened by name as a program opens it: the port's facts,
// regions as MRs, queue pairs with their doorbell block's DPI and the NQ, connect to RTS as
// QUERY_QP reports it, destroy and close with the model left empty; firmware refusals as the
// API's errors that change nothing; a QP error notification and a dead function through the
// NIC's hooks; a silent firmware that strands what it may still name.
#include <catch2/catch.hpp>

#include "abi/bits.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abi/bnxt/rcfw.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "rig/nic.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/temp_dir.hpp"
#include "test/within.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
using clk = std::chrono::steady_clock;

namespace {

// The model served on a socket of its own; the NIC opens it by name. Teardown in reverse: the
// NIC (declared after this) first, then the server, then the model.
struct served_bnxt_nic {
    rig::test::temp_dir dir{"rig-bnxt-control"};
    rig::sim::bnxt::function_model fn;
    std::unique_ptr<rig::sim::vfio_user::server> srv;

    explicit served_bnxt_nic(rig::sim::bnxt::function_options o = {}) : fn(o) {
        auto s = rig::sim::vfio_user::server::create(dir.file("bnxt.sock"), fn);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        fn.attach(*srv);
        srv->start();
    }
    std::string where() const { return "vfio-user:" + dir.file("bnxt.sock"); }
    std::unique_ptr<rig::nic> open(const rig::nic_options& o = {}) {
        auto n = rig::nic::open(where(), o);
        if (!n) {
            FAIL(n.error().message);
        }
        return std::move(*n);
    }
    template <class F>
    auto firmware(F&& f) {
        return fn.with_firmware(std::forward<F>(f));
    }
};

rig::nic_options quick() {
    rig::nic_options o;
    o.command_timeout = 2000ms;
    o.health_interval = 50ms;
    o.log_ring_entries = 8;
    return o;
}

using rig::test::within;

}  // namespace

TEST_CASE("bnxt nic: open brings the function up; MAC, link-local GID, path MTU; close leaves the model empty", "[model][bnxt][control]") {
    served_bnxt_nic m;
    auto n = m.open(quick());
    const auto mac = m.firmware([](const rig::sim::bnxt::firmware& f) { return f.options().mac; });
    CHECK(n->mac() == ::rig::abi::byte_array(mac));
    const std::array<std::uint8_t, 16> gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 2),
                                              mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]};
    CHECK(n->gid() == ::rig::abi::byte_array(gid));
    CHECK(n->path_mtu() == 4096);   // the model's port MTU 9000, less the RoCE headers
    CHECK(m.fn.rings() == 2);       // the CREQ and the NQ
    REQUIRE(n->close().has_value());
    CHECK(n->stranded().empty());
    CHECK(m.fn.rings() == 0);
    CHECK(m.fn.context_pages() == 0);
    CHECK(m.fn.context_violations().empty());
}

TEST_CASE("bnxt nic: a 1500-byte port connects at 1024 (iboe_get_mtu)", "[model][bnxt][control]") {
    rig::sim::bnxt::function_options o;
    o.firmware.mtu = 1500;
    served_bnxt_nic m(o);
    auto n = m.open(quick());
    CHECK(n->path_mtu() == 1024);
}

TEST_CASE("bnxt nic: regions as MRs; two queue pairs connected to RTS as QUERY_QP says; destroyed; closed", "[model][bnxt][control]") {
    served_bnxt_nic m;
    auto n = m.open(quick());
    auto r = n->allocate(3 * 4096 + 100, rig::access::remote);
    REQUIRE(r.has_value());
    m.firmware([&](const rig::sim::bnxt::firmware& f) { CHECK(f.rcfw().keys.count(r->remote(0).key) == 1); });
    auto a = n->make_qp();
    auto b = n->make_qp();
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    // Each QP and its CQs: the DPI of its doorbell block (the first user DPI: (128 - 64) KiB /
    // 4 KiB = 16), 2^8 entries, 6 SGEs; the CQs notify the NIC's NQ.
    m.firmware([&](const rig::sim::bnxt::firmware& f) {
        for (const std::uint32_t qpn : {a->number(), b->number()}) {
            REQUIRE(f.rcfw().qps.count(qpn) == 1);
            const auto& q = f.rcfw().qps.at(qpn);
            CHECK(q.type == abi::CMDQ_CREATE_QP_TYPE_RC);
            CHECK(q.dpi == 16);
            CHECK(q.sq_entries == 256);
            CHECK(q.rq_entries == 256);
            CHECK(q.sq_sge == 6);
            CHECK(q.rq_sge == 6);
            for (const std::uint32_t cq : {q.send_cq, q.receive_cq}) {
                REQUIRE(f.rcfw().cqs.count(cq) == 1);
                CHECK(f.rcfw().cqs.at(cq).dpi == 16);
                CHECK(f.rings().count(f.rcfw().cqs.at(cq).nq) == 1);
                CHECK(f.rings().at(f.rcfw().cqs.at(cq).nq).logical_id == 1);   // the NQ, not the CREQ
            }
            CHECK(q.send_cq != q.receive_cq);
        }
        CHECK(f.rcfw().qps.at(a->number()).handle != f.rcfw().qps.at(b->number()).handle);
    });
    const rig::endpoint ea = a->local();
    const rig::endpoint eb = b->local();
    REQUIRE(a->connect(eb).has_value());
    REQUIRE(b->connect(ea).has_value());
    auto info = a->query();
    REQUIRE(info.has_value());
    CHECK(info->state == rig::qp_status::rts);
    CHECK(info->remote_qp == b->number());
    CHECK(info->receive_psn == eb.psn);
    CHECK(info->send_psn == ea.psn);
    CHECK(info->path_mtu == 4096);
    CHECK(info->ack_timeout == 14);
    CHECK(info->retry_count == 7);
    CHECK(info->rnr_retry == 7);
    CHECK(info->gid_index == 0);
    CHECK(info->remote_gid == n->gid());
    CHECK(info->remote_mac == n->mac());
    CHECK(info->remote_read);
    CHECK(info->remote_write);
    m.firmware([&](const rig::sim::bnxt::firmware& f) {
        // An IPv6 link-local peer: RoCE v2 over IPv6
        CHECK(f.rcfw().qps.at(a->number()).state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS);
    });
    // A third queue pair after the first is destroyed: its block is taken again (same DPI), and
    // a connect at a smaller MTU is what QUERY_QP reports.
    REQUIRE(a->destroy().has_value());
    auto c = n->make_qp();
    REQUIRE(c.has_value());
    REQUIRE(c->connect(eb, 1024).has_value());
    auto ci = c->query();
    REQUIRE(ci.has_value());
    CHECK(ci->path_mtu == 1024);
    REQUIRE(b->destroy().has_value());
    REQUIRE(c->destroy().has_value());
    REQUIRE(r->deregister().has_value());
    m.firmware([](const rig::sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.empty());
        CHECK(f.rcfw().cqs.empty());
        CHECK(f.rcfw().keys.empty());
    });
    REQUIRE(n->close().has_value());
    CHECK(n->stranded().empty());
    CHECK(m.fn.rings() == 0);
    CHECK(m.fn.context_violations().empty());
}

TEST_CASE("bnxt nic: firmware refusals are the API's errors, named, and change nothing", "[model][bnxt][control]") {
    served_bnxt_nic m;
    auto n = m.open(quick());
    SECTION("CREATE_QP refused: the CQs it made are given back") {
        m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_CREATE_QP, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
        auto q = n->make_qp();
        REQUIRE_FALSE(q.has_value());
        const rig::error& e = q.error();
        CHECK(e.kind == rig::error_kind::firmware);
        CHECK(e.channel == "rcfw");
        CHECK(e.opcode == abi::CMDQ_BASE_OPCODE_CREATE_QP);
        CHECK(e.opcode_name == "CREATE_QP");
        CHECK(e.status == abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
        CHECK(e.status_name == "INVALID_PARAMETER");
        CHECK(e.message == "make_qp: CREATE_QP (0x1): INVALID_PARAMETER (0x5)");
        CHECK(n->queue_pairs() == 0);
        m.firmware([](const rig::sim::bnxt::firmware& f) {
            CHECK(f.rcfw().qps.empty());
            CHECK(f.rcfw().cqs.empty());
        });
        REQUIRE(n->make_qp().has_value());   // and the next one is made
    }
    SECTION("CREATE_CQ refused") {
        m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_CREATE_CQ, abi::CREQ_QP_EVENT_STATUS_RESOURCES);
        auto q = n->make_qp();
        REQUIRE_FALSE(q.has_value());
        CHECK(q.error().message == "make_qp: CREATE_CQ (0x9): RESOURCES (0x2)");
        m.firmware([](const rig::sim::bnxt::firmware& f) { CHECK(f.rcfw().cqs.empty()); });
    }
    SECTION("REGISTER_MR refused: no region, its key given back") {
        m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_REGISTER_MR, abi::CREQ_QP_EVENT_STATUS_FAIL);
        auto r = n->allocate(4096, rig::access::remote);
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().opcode_name == "REGISTER_MR");
        CHECK(n->regions() == 0);
        m.firmware([](const rig::sim::bnxt::firmware& f) { CHECK(f.rcfw().keys.empty()); });
    }
    SECTION("MODIFY_QP refused part-way: the connect names its step; called again, it connects") {
        auto a = n->make_qp();
        REQUIRE(a.has_value());
        m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_MODIFY_QP, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER);
        auto c = a->connect(a->local());
        REQUIRE_FALSE(c.has_value());
        CHECK(c.error().message == "connect (RESET to INIT): MODIFY_QP (0x3): INVALID_PARAMETER (0x5)");
        CHECK_FALSE(a->connected());
        auto i = a->query();
        REQUIRE(i.has_value());
        CHECK(i->state == rig::qp_status::reset);
        REQUIRE(a->connect(a->local()).has_value());   // itself: a loopback queue pair
        CHECK(a->query()->state == rig::qp_status::rts);
    }
    SECTION("DESTROY_QP refused: counted as destroyed, kept until close") {
        auto a = n->make_qp();
        REQUIRE(a.has_value());
        m.fn.fail_next_rcfw(abi::CMDQ_BASE_OPCODE_DESTROY_QP, abi::CREQ_QP_EVENT_STATUS_FAIL);
        auto d = a->destroy();
        REQUIRE_FALSE(d.has_value());
        CHECK(d.error().message == "destroy: DESTROY_QP (0x2): FAIL (0x1)");
        CHECK(n->queue_pairs() == 0);
        m.firmware([](const rig::sim::bnxt::firmware& f) {
            CHECK(f.rcfw().qps.size() == 1);
            CHECK(f.rcfw().cqs.size() == 2);
        });
    }
    REQUIRE(n->close().has_value());
    CHECK(n->stranded().empty());
    m.firmware([](const rig::sim::bnxt::firmware& f) {
        CHECK(f.rcfw().qps.empty());
        CHECK(f.rcfw().cqs.empty());
        CHECK(f.rcfw().keys.empty());
    });
}

TEST_CASE("bnxt nic: a QP error notification reaches the NIC's qp_event hook as the queue pair's failure", "[model][bnxt][control]") {
    served_bnxt_nic m;
    std::mutex lock;
    std::vector<std::pair<std::uint32_t, std::string>> events;
    auto o = quick();
    o.qp_event = [&](std::uint32_t qp, std::string_view event, bool failure) {
        std::lock_guard g(lock);
        events.emplace_back(qp, std::string(event) + (failure ? " failure" : ""));
    };
    auto n = m.open(o);
    auto a = n->make_qp();
    REQUIRE(a.has_value());
    REQUIRE(a->connect(a->local()).has_value());
    REQUIRE(m.fn.qp_error(a->number(), abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RNR_TIMEOUT_RETRY_LIMIT,
                          0, 0, 0));
    CHECK(within(1000ms, [&] {
        std::lock_guard g(lock);
        return events.size() == 1;
    }));
    std::lock_guard g(lock);
    REQUIRE(events.size() == 1);
    CHECK(events[0].first == a->number());
    CHECK(events[0].second == "QP_ERROR_NOTIFICATION failure");
    CHECK(a->query()->state == rig::qp_status::error);
}

// The hook runs on the NIC's event thread, which took the event from the CREQ: it is handed over
// with the RoCE channel unlocked, so a hook that calls back into the NIC (QUERY_QP through that
// channel) is served, not deadlocked on the lock its own thread holds (ThreadSanitizer found the
// cycle: firmware/bnxt/rcfw.hpp).
TEST_CASE("bnxt nic: a qp_event hook may call back into the NIC: it queries the failed queue pair", "[model][bnxt][control]") {
    served_bnxt_nic m;
    std::atomic<rig::queue_pair*> failed{nullptr};
    std::atomic<int> state_seen{-1};
    auto o = quick();
    o.qp_event = [&](std::uint32_t, std::string_view, bool) {
        auto info = failed.load()->query();
        state_seen = info ? static_cast<int>(info->state) : -2;
    };
    auto n = m.open(o);
    auto a = n->make_qp();
    REQUIRE(a.has_value());
    REQUIRE(a->connect(a->local()).has_value());
    failed = &*a;
    REQUIRE(m.fn.qp_error(a->number(), abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_RNR_TIMEOUT_RETRY_LIMIT,
                          0, 0, 0));
    REQUIRE(within(2000ms, [&] { return state_seen.load() != -1; }));
    CHECK(state_seen.load() == static_cast<int>(rig::qp_status::error));
    // and the NIC still runs commands from this thread
    CHECK(a->query().has_value());
}

TEST_CASE("bnxt nic: a dead function reaches the fatal hook; close completes and strands what the firmware may name", "[model][bnxt][control]") {
    served_bnxt_nic m;
    std::atomic<int> fatals{0};
    auto o = quick();
    o.fatal = [&](const rig::error& e) {
        CHECK(e.kind == rig::error_kind::firmware);
        ++fatals;
    };
    auto n = m.open(o);
    auto r = n->allocate(4096, rig::access::remote);
    REQUIRE(r.has_value());
    auto a = n->make_qp();
    REQUIRE(a.has_value());
    m.fn.die();
    CHECK(within(2000ms, [&] { return fatals.load() == 1; }));
    const auto start = clk::now();
    static_cast<void>(n->close());
    CHECK(clk::now() - start < 1s);   // nothing more was sent
    CHECK_FALSE(n->stranded().empty());
    CHECK(fatals.load() == 1);
}

TEST_CASE("bnxt nic: a silent firmware: make_qp times out, nothing more is sent, close strands", "[model][bnxt][control]") {
    // quick()'s 2 s command timeout, not 300 ms: it bounds the setup's commands too (REGISTER_MR),
    // and a setup command outlasted 300 ms on a loaded 2-CPU CI host (74ec1c7). make_qp waits it
    // once. close waits once too, on its first HWRM request, as long as the lesser of it and the
    // firmware's own request timeout (VER_GET def_req_timeout: the model's 500 ms, 5 s under TSan):
    // at least 2 s here too, so that "one wait, not one per teardown step" has a wait's slack.
    rig::sim::bnxt::function_options fo;
    fo.firmware.def_req_timeout_ms = std::max<std::uint16_t>(fo.firmware.def_req_timeout_ms, 2000);
    served_bnxt_nic m(fo);
    auto o = quick();
    o.use_events = false;   // no health watch: the timeout alone stops the channel
    const auto one_wait = std::min(o.command_timeout, std::chrono::milliseconds(fo.firmware.def_req_timeout_ms));
    auto n = m.open(o);
    auto r = n->allocate(4096, rig::access::remote);
    REQUIRE(r.has_value());
    m.fn.silence();
    auto q = n->make_qp();
    REQUIRE_FALSE(q.has_value());
    CHECK(q.error().kind == rig::error_kind::firmware);
    CHECK(q.error().message.starts_with("make_qp: CREATE_CQ (0x9): "));
    const auto start = clk::now();
    auto again = n->make_qp();   // refused at once: the channel stopped
    REQUIRE_FALSE(again.has_value());
    CHECK(clk::now() - start < 100ms);
    const auto closing = clk::now();
    static_cast<void>(n->close());
    CHECK(clk::now() - closing < 2 * one_wait);   // its first request found the firmware silent: no more waits
    const auto stranded = n->stranded();
    CHECK_FALSE(stranded.empty());
    bool region_kept = false;
    for (const auto& s : stranded) {
        region_kept = region_kept || s.what.starts_with("region key ");
    }
    CHECK(region_kept);   // the region's memory: its key may still name it
}

// The firmware's reset notice (RESET_NOTIFY on the NQ, firmware/bnxt step ASYNC_CR) is the NIC's
// failure in the notice's words, within its deadline (an event, not the health look); a queue
// pair with an entry due fails; close sends nothing and strands what the firmware was given.
TEST_CASE("bnxt nic: a firmware reset notice fails the NIC with a named error and its queue pairs", "[model][bnxt][control]") {
    served_bnxt_nic m;
    std::mutex lock;
    std::vector<std::string> fatals;
    std::vector<bool> links;
    auto o = quick();
    o.health_interval = 2000ms;
    o.fatal = [&](const rig::error& e) {
        std::lock_guard g(lock);
        fatals.push_back(e.message);
    };
    o.port_change = [&](bool up) {
        std::lock_guard g(lock);
        links.push_back(up);
    };
    auto n = m.open(o);
    auto r = n->allocate(4096, rig::access::remote);
    REQUIRE(r.has_value());
    auto a = n->make_qp();
    REQUIRE(a.has_value());
    REQUIRE(a->connect(a->local()).has_value());
    a->receive(*r, 0, 64);
    // the port's link first: LINK_STATUS_CHANGE reaches port_change
    REQUIRE(m.fn.set_link(false));
    CHECK(within(1000ms, [&] {
        std::lock_guard g(lock);
        return links == std::vector<bool>{false};
    }));
    const auto sent = clk::now();
    REQUIRE(m.fn.reset_notice(2));
    CHECK(within(500ms, [&] {
        std::lock_guard g(lock);
        return fatals.size() == 1;
    }));
    CHECK(clk::now() - sent < 500ms);
    {
        std::lock_guard g(lock);
        REQUIRE(fatals.size() == 1);
        CHECK(fatals[0].find("firmware reset notice (RESET_NOTIFY): reason FW_EXCEPTION_FATAL (0x2)") !=
              std::string::npos);
    }
    // the receive due fails with the NIC's failure
    std::optional<rig::result<std::uint32_t>> got;
    CHECK(within(1000ms, [&] { return (got = a->poll(rig::side::receive)).has_value(); }));
    REQUIRE(got.has_value());
    CHECK_FALSE(got->has_value());
    const auto start = clk::now();
    static_cast<void>(n->close());
    CHECK(clk::now() - start < 1s);   // nothing more was sent
    CHECK_FALSE(n->stranded().empty());
}
