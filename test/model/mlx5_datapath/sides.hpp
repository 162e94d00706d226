#pragma once
// What the mlx5 data-path tests share: a served function brought up by the driver with a PD, a
// UAR, a CQ and a registered region (function_side), an RC queue pair over it with qp/mlx5's
// rings (queue_pair), and connect(). Two served functions on one wire, entries posted and rung
// through the mapped UAR page, CQEs polled with qp/mlx5's completion queue.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "firmware/mlx5/hca.hpp"
#include "firmware/mlx5/objects.hpp"
#include "qp/mlx5/bfreg.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "qp/mlx5/receive_queue.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/roce/wire.hpp"
#include "test/model/served_model.hpp"

namespace rig::test::mlx5_datapath {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace abi = rig::mlx5::abi;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
namespace qpm = rig::qp::mlx5;
namespace model = rig::sim::mlx5;
using clk = std::chrono::steady_clock;

inline clk::time_point soon() { return clk::now() + 5s; }

template <class T>
inline T value(fw::result<T> r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
    return std::move(*r);
}
inline void ok(const fw::result<void>& r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
}

inline model::function_options options() {
    model::function_options o;
    o.init_time = 1ms;
    return o;
}

inline constexpr std::size_t region_bytes = 64 * 1024;

// One function of the card: served, on the wire, brought up, with a PD, a UAR for its queues,
// one CQ (both rings of its QPs complete there) and one registered 64 KiB region.
struct function_side {
    rig::test::served_model m;
    std::unique_ptr<fw::hca> h;
    std::unique_ptr<fw::doorbell_records> records;  // after h: gone before it
    std::atomic<int> comp_events{0};
    std::uint32_t pd = 0, uar = 0;
    std::byte* uar_page = nullptr;
    drv::dma_memory memory;
    std::uint64_t iova = 0;
    fw::mkey key;
    fw::cq cq;
    std::unique_ptr<qpm::completion_queue> cqq;

    explicit function_side(rig::sim::roce::wire& w, model::function_options model_options = options())
        : m(model_options) {
        m.fn.attach_wire(w);
        fw::hca_options o;
        o.completion = [this](std::uint32_t) { ++comp_events; };
        h = value(fw::hca::bring_up(*m.f, o));
        records = std::make_unique<fw::doorbell_records>(*m.f, h->stranded_registry());
        uar = value(fw::alloc_uar(q(), soon()));
        pd = value(fw::alloc_pd(q(), soon()));
        auto bar = m.f->map_bar(drv::region::bar0, drv::caching::uncached);
        REQUIRE(bar.has_value());
        uar_page = bar->base + std::uint64_t{uar} * 4096;
        auto mem = drv::dma_memory::allocate(region_bytes, drv::page_choice::small_only);
        REQUIRE(mem.has_value());
        memory = std::move(*mem);
        auto mapped = m.f->dma_map(memory, 0, memory.size(), drv::dma_access::read_write);
        REQUIRE(mapped.has_value());
        iova = *mapped;
        key = value(fw::create_mkey(q(), pd, iova, region_bytes,
                                    {.local_write = true, .remote_read = true, .remote_write = true}, soon()));
        cq = value(fw::cq::create(q(), *m.f, h->stranded_registry(), *records,
                                  {.log_size = 8, .uar = uar, .eqn = h->event_queue()->eqn()}, soon()));
        cqq = std::make_unique<qpm::completion_queue>(
            qpm::completion_queue_memory{cq.entries(), {cq.doorbell_record(), 8}, uar_page}, cq.cqn());
    }
    // Gives back what it made, in the kernel's order, then tears the function down.
    ~function_side() {
        cqq.reset();
        if (cq.alive()) {
            (void)cq.destroy(q(), *m.f, h->stranded_registry(), soon());
        }
        if (key.alive()) {
            (void)key.destroy(q(), soon());
        }
        (void)fw::dealloc_pd(q(), pd, soon());
        (void)fw::dealloc_uar(q(), uar, soon());
        (void)h->teardown();
    }
    function_side(const function_side&) = delete;
    function_side& operator=(const function_side&) = delete;
    fw::command_queue& q() { return h->commands(); }
    std::array<std::uint8_t, 16> gid() const { return h->gids().at(0).gid; }
    std::byte* at(std::size_t offset) const { return memory.data() + offset; }
    abi::local local(std::size_t offset, std::size_t bytes) const {
        return {static_cast<std::int64_t>(iova + offset), static_cast<std::int64_t>(bytes), key.lkey()};
    }
    abi::remote remote(std::size_t offset) const {
        return {static_cast<std::int64_t>(iova + offset), key.rkey()};
    }
    // Polls until n CQEs have come (or `limit` passes).
    std::vector<abi::completion> wait(std::size_t n, std::chrono::milliseconds limit = 5000ms) {
        std::vector<abi::completion> out;
        const auto until = clk::now() + limit;
        while (out.size() < n && clk::now() < until) {
            abi::completion c;
            if (cqq->poll(c)) {
                cqq->done();
                out.push_back(c);
            } else {
                std::this_thread::sleep_for(50us);
            }
        }
        return out;
    }
};

struct queue_pair {
    function_side& side;
    std::unique_ptr<qpm::bfreg> own_bfreg;   // bfreg 0 of the side's UAR, 8-byte doorbells
    qpm::bfreg* doorbell = nullptr;          // own_bfreg, or the caller's (shared, copying)
    fw::qp qp;
    std::unique_ptr<qpm::send_queue> sq;
    std::unique_ptr<qpm::receive_queue> rq;

    ~queue_pair() {
        if (qp.alive()) {
            (void)qp.destroy(side.q(), *side.m.f, side.h->stranded_registry(), soon());
        }
    }
    queue_pair(const queue_pair&) = delete;
    queue_pair& operator=(const queue_pair&) = delete;
    // Both rings complete on `cqn`; 0: the side's own CQ (CQ numbers start at 1). It rings
    // through `bf` (which must outlive it), else through bfreg 0 of its own, copying nothing.
    explicit queue_pair(function_side& s, std::uint32_t cqn = 0, qpm::bfreg* bf = nullptr) : side(s) {
        const std::uint32_t c = cqn != 0 ? cqn : s.cq.cqn();
        if (bf == nullptr) {
            own_bfreg = std::make_unique<qpm::bfreg>(s.uar_page + abi::bfreg_offset(0, 9), abi::bfreg_half(9));
            bf = own_bfreg.get();
        }
        doorbell = bf;
        doorbell->add_user();
        qp = value(fw::qp::create(s.q(), *s.m.f, s.h->stranded_registry(), *s.records,
                                  {.pd = s.pd, .send_cq = c, .receive_cq = c, .uar = s.uar}, soon()));
        sq = std::make_unique<qpm::send_queue>(
            qpm::send_queue_memory{qp.send_queue(), {qp.doorbell_record(), 8}, doorbell}, qp.qpn());
        rq = std::make_unique<qpm::receive_queue>(
            qpm::receive_queue_memory{qp.receive_queue(), std::size_t{16} << qp.params().log_rq_stride,
                                      {qp.doorbell_record(), 8}});
    }
    // Routes a CQE of this QP to its ring, as a queue pair's poll does.
    void complete(const abi::completion& c) {
        if (qpm::is_send_side(c.opcode)) {
            sq->complete(c);
        } else {
            rq->complete(c);
        }
    }
};

// RESET -> INIT -> RTR -> RTS towards `peer` of `ps`.
inline void connect(function_side& s, queue_pair& a, function_side& ps, queue_pair& peer, std::uint32_t send_psn,
             std::uint32_t peer_psn) {
    ok(a.qp.rst2init(s.q(), 1, 0, {.remote_read = true, .remote_write = true}, soon()));
    fw::qp_rtr_params r;
    r.remote_qpn = peer.qp.qpn();
    r.next_rcv_psn = peer_psn;
    r.rgid = ps.gid();
    r.rmac = ps.h->mac();
    r.gid_index = 0;
    r.min_rnr_nak = 1;
    ok(a.qp.init2rtr(s.q(), r, soon()));
    fw::qp_rts_params t;
    t.next_send_psn = send_psn;
    ok(a.qp.rtr2rts(s.q(), t, soon()));
}

inline void fill(std::byte* p, std::size_t n, std::uint8_t seed) {
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<std::byte>(static_cast<std::uint8_t>(seed + i * 7));
    }
}

// Two functions on one wire, a queue pair on each, connected both ways: a sends from PSN a_psn,
// b from b_psn.
struct connected_sides {
    rig::sim::roce::wire w;
    function_side a{w}, b{w};
    queue_pair qa{a}, qb{b};
    connected_sides(std::uint32_t a_psn, std::uint32_t b_psn) {
        connect(a, qa, b, qb, a_psn, b_psn);
        connect(b, qb, a, qa, b_psn, a_psn);
    }
};

}  // namespace rig::test::mlx5_datapath
