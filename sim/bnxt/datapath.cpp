// The bnxt data path's pass; its following of the firmware's objects (registered MR keys ->
// memory regions, RC QPs in RTR/RTS -> rc_qp) is in follow.cpp, doorbells and WQE fetching in
// doorbells.cpp, completions in cqe.cpp (datapath.hpp, docs/bnxt-data-path.md).
#include "sim/bnxt/datapath.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "abi/bnxt/rcfw_cmds.hpp"
#include "abi/bnxt/wqe.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace {

namespace abi = ::rig::bnxt::abi;

// The rc_qp's ring for a bnxt ring of `entries` WQEs: a power of two (the engine's rule), at
// most 2^15; a smaller one only makes the fetch wait for room.
std::uint32_t engine_ring(std::uint32_t entries) noexcept {
    return std::bit_ceil(std::clamp<std::uint32_t>(entries, 1, 1u << 15));
}

}  // namespace

roce::qp_config rc_rings(std::uint32_t sq_entries, std::uint32_t rq_entries, std::uint8_t rq_sge) noexcept {
    roce::qp_config c;
    c.sq_size = engine_ring(sq_entries);
    c.rq_size = engine_ring(rq_entries);
    c.rq_max_sge = static_cast<std::uint8_t>(
        std::clamp<std::size_t>(std::min<std::size_t>(rq_sge, abi::static_max_sge), 1, roce::max_sge));
    const std::size_t per_wqe = std::max(abi::static_max_sge * sizeof(roce::sge), abi::static_max_inline);
    c.sq_payload_bytes = static_cast<std::uint32_t>(std::min(sq_entries, c.sq_size) * per_wqe);
    return c;
}

void function_model::attach_wire(roce::wire& w) {
    std::lock_guard g(_lock);
    if (_datapath) {
        throw std::invalid_argument("bnxt function model: already attached to a wire");
    }
    _datapath = std::make_unique<datapath>(*this, w);
}

datapath::datapath(function_model& fn, roce::wire& w) : _fn(fn) {
    const auto mac = _fn._fw.options().mac;
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
    for (auto& [id, s] : _qps) {
        drop_qp(s, true);
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
    if (_memory && !_fn._dead && _fn._server != nullptr &&
        (_fn._resets != _seen_resets || _fn._fw.commands_executed() != _seen_commands ||
         _fn._fw.roce_changes() != _seen_roce)) {
        follow_objects();
    }
}

bool datapath::pass(roce::clock::time_point now) {
    if (_fn._dead || _fn._server == nullptr) {
        return false;  // a failed function moves nothing
    }
    if (!_memory) {
        _dma = &_fn._server->dma();
        _memory = std::make_unique<roce::memory>(*_dma);
        _port->guard_unmaps(*_dma);   // frames may carry payload by reference into it (roce/wire.hpp)
    }
    if (_fn._resets != _seen_resets || _fn._fw.commands_executed() != _seen_commands ||
        _fn._fw.roce_changes() != _seen_roce) {
        follow_objects();
    }
    // The region table and the DMA view, each locked once for the whole pass, in the order
    // memory::read/write take them (roce/memory.hpp "Lock order").
    roce::memory::pin pinned(*_memory, _host_runs);
    follow_link();
    bool did = poll_doorbells();
    did = fetch_produced() || did;
    did = (_engine ? _engine->poll(now) : drop_arrivals(now)) || did;
    did = attend_slots() || did;
    _toggles.publish();   // before the pins go: the CQEs' lines are the pinned view's
    return did;
}

// The slots whose producers moved past what the model took: their WQEs fetched while the rc_qp
// has room. One still behind its producer (its rc_qp full) stays for the next pass.
bool datapath::fetch_produced() {
    bool did = false;
    _fetch.walk([&](qp_slot& s) {
        if (!s.rc || s.q == nullptr) {
            return false;
        }
        did = fetch_receives(s, *s.q) || did;
        did = fetch_sends(s, *s.q) || did;
        return s.sq_taken != s.sq_produced || s.rq_taken != s.rq_produced;
    });
    return did;
}

// The slots whose rc_qp has completions or failed: CQEs written, and a failed QP reported once
// its completions are out (the reasons come from the first errors). One whose CQ is full, or
// whose report waits for room, stays for the next pass.
bool datapath::attend_slots() {
    bool did = false;
    _attend.walk([&](qp_slot& s) {
        if (!s.rc || s.q == nullptr) {
            return false;
        }
        did = drain_completions(s) || did;
        const bool drained = (s.send_cq == nullptr || room(*s.send_cq) > 0) &&
                             (s.receive_cq == nullptr || room(*s.receive_cq) > 0);
        const bool failed = s.rc->state() == roce::qp_state::error;
        if (failed && !s.reported && drained) {
            report_error(s);
        }
        return s.rc->has_completions() || (failed && !s.reported);
    });
    return did;
}

// No RC queue pair yet: a card drops what arrives for QPs it does not have (IB 9.6).
bool datapath::drop_arrivals(roce::clock::time_point now) noexcept {
    std::uint64_t n = 0;
    while (roce::frame* f = _port->receive(now)) {
        _port->release(f);
        ++n;
    }
    _dropped.fetch_add(n, std::memory_order_relaxed);
    return n != 0;
}

// ---- objects --------------------------------------------------------------------------------

// The cable: the wire's port going down or up (rig-nicsim --link-down-after-ms, SIGUSR1) is the
// PHY's, so the firmware says it as a card's does: PORT_PHY_QCFG's link and a
// LINK_STATUS_CHANGE async event when the driver asked for one (port.cpp).
void datapath::follow_link() {
    const bool up = _port->link_up();
    if (up == _link_seen) {
        return;
    }
    _link_seen = up;
    if (const auto d = _fn._fw.set_link(up, _dma); d.vector) {
        raise(*d.vector);
    }
}

}  // namespace rig::sim::bnxt
