// The data path's pass; its following of the firmware's objects (MKEY -> memory region, QP
// transitions -> rc_qp) is in follow.cpp, doorbells and WQE fetching in doorbells.cpp
// (datapath.hpp).
#include "sim/mlx5/datapath.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/eqe.hpp"
#include "abi/mlx5/ifc/qp.hpp"
#include "abi/mlx5/ifc/resources.hpp"
// after the ifc headers, as in doorbells.cpp: its rig::mlx5::abi would hide rig::abi from them
#include "abi/mlx5/doorbell.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;


roce::qp_config rc_rings(std::uint8_t log_sq_size, std::uint8_t log_rq_size, std::uint8_t log_rq_stride) noexcept {
    roce::qp_config c;
    c.sq_size = 1u << std::min<std::uint8_t>(log_sq_size, 15);
    c.rq_size = 1u << std::min<std::uint8_t>(log_rq_size, 15);
    c.rq_max_sge = static_cast<std::uint8_t>(
        std::min<std::size_t>(std::size_t{1} << std::min<std::uint8_t>(log_rq_stride, 8), roce::max_sge));
    c.sq_payload_bytes = c.sq_size * 64;
    return c;
}

void function_model::attach_wire(roce::wire& w) {
    std::lock_guard g(_lock);
    if (_datapath) {
        throw std::invalid_argument("mlx5 function model: already attached to a wire");
    }
    _datapath = std::make_unique<datapath>(*this, w);
}

datapath::datapath(function_model& fn, roce::wire& w) : _fn(fn) {
    const auto mac = _fn._fw.mac();
    roce::mac_address m{};
    for (std::size_t i = 0; i < m.size(); ++i) {
        m[i] = static_cast<std::byte>(mac[i]);
    }
    _port = w.attach(m);
    _core = &w.core();
    _core->join(*this);  // last: the core may run a pass at once
}

datapath::~datapath() {
    _core->leave(*this);  // no pass runs after this
    for (auto& [qpn, s] : _qps) {
        drop_qp(s);
    }
}

bool datapath::step(roce::clock::time_point now) noexcept {
    return roce::step_when_free(_fn._lock, [this, now] {
        const bool worked = pass(now);
        _passes.fetch_add(1, std::memory_order_relaxed);
        return worked;
    });
}

void datapath::command_ran() {
    _core->stay_busy(roce::model_core::command_window);
    if (_memory && !_fn._dead && !_fn._fatal && _fn._server != nullptr &&
        (_fn._resets != _seen_resets || _fn._fw.commands_executed() != _seen_commands)) {
        follow_objects();
    }
}

bool datapath::pass(roce::clock::time_point now) {
    if (_fn._dead || _fn._fatal || _fn._server == nullptr) {
        return false;  // a failed function moves nothing
    }
    if (!_memory) {
        _dma = &_fn._server->dma();
        _memory = std::make_unique<roce::memory>(*_dma);
        _port->guard_unmaps(*_dma);   // frames may carry payload by reference into it (roce/wire.hpp)
    }
    if (_fn._resets != _seen_resets || _fn._fw.commands_executed() != _seen_commands) {
        follow_objects();
    }
    // The region table and the DMA view, each locked once for the whole pass rather than once
    // per access: map, unmap and (de)registration wait for the pass as for one access. The pin
    // takes them in the order memory::read/write do (roce/memory.hpp "Lock order").
    roce::memory::pin pinned(*_memory, _host_runs);
    bool did = poll_uar_pages();
    did = poll_cq_doorbells() || did;
    did = fetch_looked_at() || did;
    did = flush_receives() || did;
    if (_engine) {
        did = _engine->poll(now) || did;
    } else {
        did = drop_arrivals(now) || did;
    }
    did = attend_slots() || did;
    _owners.publish();   // before the pins go: the CQEs' lines are the pinned view's
    return did;
}

// The slots whose send counter is to be read: a BlueFlame write on their UAR page, a state
// change, or a ring that was full. One whose rc_qp is still full (its entries, or its payload
// store: rc_qp::post_send) stays for the next pass.
bool datapath::fetch_looked_at() {
    bool did = false;
    _fetch.walk([&](qp_slot& s) {
        if (!s.rc || s.q == nullptr) {
            return false;
        }
        did = fetch_sends(s, *s.q) || did;
        return s.sq_behind;
    });
    return did;
}

// The receive counters of the QPs in ERR, every pass: the receives their drivers post complete
// flushed. A QP that works has its counter read only when a message finds no receive
// (receive_wanted), as a card reads a receive queue's doorbell record when a SEND arrives
// (an mlx5 driver posts receives with a doorbell record store and no doorbell write: the
// kernel's drivers/infiniband/hw/mlx5/wr.c mlx5_ib_post_recv, rdma-core's mlx5_post_recv):
// a pass does not read the records of the QPs that only move WRITEs (bench-scale, issue 17).
bool datapath::flush_receives() {
    bool did = false;
    _flush.walk([&](qp_slot& s) {
        if (!s.rc || s.q == nullptr || s.rc->state() != roce::qp_state::error) {
            return false;
        }
        did = fetch_receives(s, *s.q) || did;
        return true;
    });
    return did;
}

// The slots whose rc_qp has completions or failed: CQEs written; a failed QP's state moved to
// ERR. One whose CQ is full stays for the next pass.
bool datapath::attend_slots() {
    bool did = false;
    _attend.walk([&](qp_slot& s) {
        qp_object* q = s.q;
        if (!s.rc || q == nullptr) {
            return false;
        }
        did = drain_completions(s, *q) || did;
        if (s.rc->state() == roce::qp_state::error) {
            _flush.add(s);
        }
        if (s.rc->state() == roce::qp_state::error &&
            (q->state == ifc::qpc_state::rtr || q->state == ifc::qpc_state::rts)) {
            // an entry failed: the card moves the QP to ERR, which QUERY_QP then reports and
            // which only 2RST (or 2ERR) leaves
            q->state = ifc::qpc_state::err;
            abi::set<ifc::qpc::state>(q->qpc, static_cast<std::uint8_t>(ifc::qpc_state::err));
            raise_responder_event(s, q->qpn);
        }
        return s.rc->has_completions();
    });
    return did;
}

void datapath::receive_wanted(qp_slot& s) noexcept {
    if (s.rc && s.q != nullptr) {
        fetch_receives(s, *s.q);
    }
}

// A responder that failed its queue pair raises the affiliated event a card raises there (IB
// spec 11.6.3; mlx5_core maps them to IB_EVENT_QP_ACCESS_ERR, _REQ_ERR, _FATAL): an access
// violation (a bad R_Key, range or right) WQ_ACCESS_ERROR, an invalid request (too long for its
// receive, a bad opcode sequence) WQ_INVAL_REQ_ERROR, a remote operational error WQ_CATAS_ERROR.
// A requester's failure has its error CQE only.
void datapath::raise_responder_event(const qp_slot& s, std::uint32_t qpn) {
    const auto nak = s.rc->responder_failure();
    if (!nak) {
        return;
    }
    using rig::roce::nak_code;
    const ifc::event_type type = *nak == nak_code::remote_access_error ? ifc::event_type::wq_access_error
                                 : *nak == nak_code::invalid_request   ? ifc::event_type::wq_inval_req_error
                                                                       : ifc::event_type::wq_catas_error;
    _fn.post_qp_event_locked(qpn, static_cast<std::uint8_t>(type));
}

// No RC queue pair yet (a function just reset, or before its first QP reaches RTR): a card
// drops what arrives for QPs it does not have (IB 9.6: a packet for no QP is silently dropped).
// Queued frames would otherwise wait, up to the port's limit, and reach the QPs of a later
// engine: frames sent before a reset to QPNs the firmware hands out again after it.
bool datapath::drop_arrivals(roce::clock::time_point now) noexcept {
    std::uint64_t n = 0;
    while (roce::frame* f = _port->receive(now)) {
        _port->release(f);
        ++n;
    }
    _dropped.fetch_add(n, std::memory_order_relaxed);
    return n != 0;
}

}  // namespace rig::sim::mlx5
