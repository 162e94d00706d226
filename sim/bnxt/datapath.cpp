// The bnxt data path's pass and its following of the firmware's objects (registered MR keys ->
// memory regions, RC QPs in RTR/RTS -> rc_qp); doorbells and WQE fetching are in doorbells.cpp,
// completions in cqe.cpp (datapath.hpp, docs/bnxt-data-path.md).
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

// REGISTER_MR's access (roce_hsi.h CMDQ_REGISTER_MR_ACCESS_*) as the region's rights.
std::uint8_t rights_of_key(std::uint8_t access) noexcept {
    std::uint8_t r = 0;
    if ((access & abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE) != 0) r |= roce::access_local_write;
    if ((access & abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_READ) != 0) r |= roce::access_remote_read;
    if ((access & abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE) != 0) r |= roce::access_remote_write;
    return r;
}

// MODIFY_QP's access (CMDQ_MODIFY_QP_ACCESS_*) as the remote operations the responder takes.
std::uint8_t rights_of_qp(std::uint8_t access) noexcept {
    std::uint8_t r = 0;
    if ((access & abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_READ) != 0) r |= roce::access_remote_read;
    if ((access & abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE) != 0) r |= roce::access_remote_write;
    return r;
}

// The rc_qp's ring for a bnxt ring of `entries` WQEs: a power of two (the engine's rule), at
// most 2^15; a smaller one only makes the fetch wait for room.
std::uint32_t engine_ring(std::uint32_t entries) noexcept {
    return std::bit_ceil(std::clamp<std::uint32_t>(entries, 1, 1u << 15));
}

bool connected(std::uint8_t state) noexcept {
    return state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTR || state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS;
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
    // the DMA view and the region table, each locked once for the whole pass
    // The table first: every thread takes them in the order memory::read/write do (the table,
    // then the DMA view for the copy), so none waits for the table while holding the view
    // (roce/memory.hpp "Lock order").
    roce::memory::pin regions_pinned(*_memory);
    vfio_user::dma_space::pin dma_pinned(*_dma);
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

// The lists, made again after the objects were followed: every slot with an rc_qp is looked at
// once (a command may have changed what it reports), and fetched from if behind its producers.
void datapath::index_objects() {
    _fetch.reset(_qps.size());
    _attend.reset(_qps.size());
    for (auto& [id, s] : _qps) {
        s.fetching = s.attended = false;
        if (s.sq_taken != s.sq_produced || s.rq_taken != s.rq_produced) {
            _fetch.add(s);
        }
        if (s.rc) {
            _attend.add(s);
        }
    }
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

void datapath::follow_objects() {
    if (_fn._resets != _seen_resets) {  // the firmware's tables are new: nothing followed remains
        for (auto& [id, s] : _qps) {
            drop_qp(s, true);
        }
        _qps.clear();
        _cqs.clear();
        for (const auto& [key, k] : _keys) {
            _memory->deregister(key);
        }
        _keys.clear();
        _engine.reset();
        _seen_resets = _fn._resets;
    }
    _seen_commands = _fn._fw.commands_executed();
    _seen_roce = _fn._fw.roce_changes();
    follow_keys();
    follow_cqs();
    follow_qps();
    // the doorbell pages: the privileged one and every page a QP or CQ names
    _pages.assign(1, 0);
    for (const auto& [id, c] : _cqs) {
        _pages.push_back(c.cq->dpi);
    }
    for (const auto& [id, s] : _qps) {
        _pages.push_back(s.q->dpi);
    }
    std::ranges::sort(_pages);
    _pages.erase(std::unique(_pages.begin(), _pages.end()), _pages.end());
    index_objects();
}

// Registered MR keys (REGISTER_MR; qplib_sp.c bnxt_qplib_reg_mr): lkey = rkey = the key,
// bnxt_re_reg_user_mr). A key registered again, or deregistered, is followed.
void datapath::follow_keys() {
    const auto& keys = _fn._fw.rcfw().keys;
    const auto state_of = [](const roce_key& k) {
        return key_state{k.pd, k.va, k.bytes, k.access, k.memory.pages.empty() ? 0 : k.memory.pages[0],
                         k.memory.pages.size()};
    };
    for (auto it = _keys.begin(); it != _keys.end();) {
        const auto k = keys.find(it->first);
        if (k == keys.end() || !k->second.registered || state_of(k->second) != it->second) {
            _memory->deregister(it->first);   // refused by every later access
            it = _keys.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [key, k] : keys) {
        if (!k.registered || _keys.contains(key)) {
            continue;
        }
        roce::region r;
        r.key = key;
        r.pd = k.pd;
        r.rights = rights_of_key(k.access);
        if (k.memory.pages.empty()) {   // the DMA MR (bnxt_re_get_dma_mr): va = IOVA
            r.start = 0;
            r.length = ~std::uint64_t{0};
        } else {
            const bool zero_based = (k.access & abi::CMDQ_REGISTER_MR_ACCESS_ZERO_BASED) != 0;
            r.start = zero_based ? 0 : k.va;
            r.length = k.bytes;
            r.page_shift = static_cast<std::uint8_t>(std::countr_zero(k.memory.page_bytes));
            r.page_offset = zero_based ? 0 : k.va & (k.memory.page_bytes - 1);
            r.pages = k.memory.pages;
        }
        try {
            _memory->register_region(std::move(r));
            _keys.emplace(key, state_of(k));
        } catch (const std::invalid_argument& e) {
            log().warn("bnxt data path: key {:#x} not usable: {}", key, e.what());
        }
    }
}

// Each page of a queue or CQ the data path will read (or write), touched once now, as the object
// is followed, rather than by its first entries (vfio_user::dma_space::touch).
void datapath::touch(const queue_memory& m, bool for_write) noexcept {
    if (_dma == nullptr) {
        return;
    }
    for (const std::uint64_t page : m.pages) {
        _dma->touch(page, m.page_bytes, for_write);
    }
}

// A slot for every CQ, its positions kept while it is the same CQ (same first page).
void datapath::follow_cqs() {
    const auto& cqs = _fn._fw.rcfw().cqs;
    std::erase_if(_cqs, [&](const auto& c) { return !cqs.contains(c.first); });
    for (const auto& [id, cq] : cqs) {
        cq_slot& c = _cqs[id];
        const std::uint64_t page = cq.memory.pages.empty() ? 0 : cq.memory.pages[0];
        // Compared with what the slot kept, never through c.cq: a CQ destroyed and made again
        // under the same id between two passes leaves c.cq naming the freed one (AddressSanitizer
        // caught the read, issue 20)
        if (c.cq == nullptr || c.page != page || c.entries != cq.entries) {
            c = cq_slot{};   // a new CQ (or one made again): its rings start at 0
            touch(cq.memory, true);
        }
        c.id = id;
        c.cq = &cq;
        c.page = page;
        c.entries = cq.entries;
    }
}

void datapath::drop_qp(qp_slot& s, bool rings_too) noexcept {
    if (s.rc) {
        if (_engine) {
            _engine->remove(*s.rc);
        }
        s.rc.reset();
    }
    if (rings_too) {   // RESET: the driver's rings start again at 0
        s.sq_taken = s.sq_produced = s.rq_taken = s.rq_produced = 0;
    }
    s.reported = false;
    s.retransmit_lost = false;
    s.send_error = s.receive_error = roce::completion_status::success;
}

void datapath::follow_qps() {
    const auto& qps = _fn._fw.rcfw().qps;
    for (auto it = _qps.begin(); it != _qps.end();) {
        if (!qps.contains(it->first)) {  // DESTROY_QP: moves no byte from now on
            drop_qp(it->second, true);
            it = _qps.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [id, q] : qps) {
        qp_slot& s = _qps[id];
        s.id = id;
        s.q = &q;
        s.send_cq = _cqs.contains(q.send_cq) ? &_cqs[q.send_cq] : nullptr;
        s.receive_cq = _cqs.contains(q.receive_cq) ? &_cqs[q.receive_cq] : nullptr;
        if (q.type != abi::CMDQ_CREATE_QP_TYPE_RC) {
            continue;   // UD and GSI QPs: doorbells taken, nothing run
        }
        if (q.state == abi::CMDQ_MODIFY_QP_NEW_STATE_RESET) {
            drop_qp(s, true);
        } else if (q.state == abi::CMDQ_MODIFY_QP_NEW_STATE_INIT) {
            if (s.rc) {
                drop_qp(s, true);   // through RESET since the last pass
            }
        } else if (connected(q.state)) {
            const connection now = connection_of(q);
            if (s.rc && (!now.same_path(s.conn) ||
                         (s.rc->state() == roce::qp_state::rts && now.sq_psn != s.conn.sq_psn))) {
                drop_qp(s, true);   // reset and connected again since the last pass
            }
            if ((s.rc || configure(s, q)) && q.state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS &&
                s.rc->state() == roce::qp_state::rtr) {
                to_rts(s, q);
            }
        } else if (s.rc && s.rc->state() != roce::qp_state::error) {
            s.rc->to_error();   // MODIFY_QP to ERR: what is pending completes flushed
        }
    }
}

datapath::connection datapath::connection_of(const roce_qp& q) {
    const roce_qp_attributes& a = q.attributes;
    return connection{a.dest_qp_id, a.rq_psn, a.sq_psn, a.dest_mac, a.dgid, a.path_mtu, q.sq.pages.empty() ? 0 : q.sq.pages[0]};
}

// Makes the rc_qp of an RC QP in RTR or RTS from MODIFY_QP's attributes: RESET->INIT's access,
// INIT->RTR's path (qplib_fp.c bnxt_qplib_modify_qp names them).
bool datapath::configure(qp_slot& s, const roce_qp& q) {
    const roce_qp_attributes& a = q.attributes;
    roce::qp_config c = rc_rings(q.sq_entries, q.rq_entries, q.rq_sge);   // the rings; the rest below
    c.qpn = s.id;
    c.pd = q.pd;
    const auto mac = _fn._fw.options().mac;
    for (std::size_t i = 0; i < c.mac.size(); ++i) {
        c.mac[i] = static_cast<std::byte>(mac[i]);
    }
    const auto& gids = _fn._fw.rcfw().gids;
    if (a.sgid_index < gids.size() && gids[a.sgid_index]) {
        for (std::size_t i = 0; i < c.gid.size(); ++i) {
            c.gid[i] = static_cast<std::byte>(gids[a.sgid_index]->gid[i]);
        }
    }
    try {
        s.rc = std::make_unique<roce::rc_qp>(*_memory, *_port, c);
        s.psn.dp = this;
        s.psn.slot = &s;   // a std::map node: stays where it is while the QP lives
        s.rc->set_retransmit_locator(&s.psn);
        s.host.dp = this;
        s.host.slot = &s;
        s.rc->set_host(&s.host);
        s.rc->to_init(rights_of_qp(a.access));
        roce::path p;
        p.dest_qpn = a.dest_qp_id;
        for (std::size_t i = 0; i < p.dest_mac.size(); ++i) {
            p.dest_mac[i] = static_cast<std::byte>(a.dest_mac[i]);
        }
        for (std::size_t i = 0; i < p.dest_gid.size(); ++i) {
            p.dest_gid[i] = static_cast<std::byte>(a.dgid[i]);
        }
        p.mtu = 256u << std::min<std::uint8_t>(a.path_mtu, abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096);
        p.rq_psn = a.rq_psn;
        p.min_rnr_timer = a.min_rnr_timer;
        // IRRQ slots = 2 x the read limit + 2 (qplib_fp.h IRD_LIMIT_TO_IRRQ_SLOTS)
        p.max_dest_rd_atomic = static_cast<std::uint8_t>(std::clamp((a.max_dest_rd_atomic - 2) / 2, 1, 32));
        s.rc->to_rtr(p);
    } catch (const std::invalid_argument& e) {
        log().warn("bnxt data path: QP {} cannot be configured: {}", s.id, e.what());
        s.rc.reset();
        return false;
    }
    if (!_engine) {
        _engine = std::make_unique<roce::engine>(*_port, c.gid);
        _engine_gid = c.gid;
    } else if (c.gid != _engine_gid) {
        log().warn("bnxt data path: QP {} uses another GID than the function's first QP: its frames are not "
                   "received", s.id);
    }
    _engine->add(*s.rc);
    touch(q.sq, false);
    touch(q.rq, false);
    s.conn = connection_of(q);
    s.reported = false;
    s.wr_ids.assign(q.rq_entries, 0);
    return true;
}

void datapath::to_rts(qp_slot& s, const roce_qp& q) {
    const roce_qp_attributes& a = q.attributes;
    roce::send_params p;
    p.sq_psn = a.sq_psn;
    p.timeout = a.timeout;
    p.retry_count = a.retry_cnt;
    p.rnr_retry = a.rnr_retry;
    // ORRQ slots = the read limit + 1 (qplib_fp.h ORD_LIMIT_TO_ORRQ_SLOTS)
    p.max_rd_atomic = static_cast<std::uint8_t>(std::clamp(a.max_rd_atomic - 1, 1, 32));
    try {
        s.rc->to_rts(p);
        _core->stay_busy(roce::model_core::connect_window);   // its traffic follows
    } catch (const std::invalid_argument& e) {
        log().warn("bnxt data path: QP {} RTR->RTS not followed: {}", s.id, e.what());
        s.rc->to_error();
    }
    s.conn = connection_of(q);
}

}  // namespace rig::sim::bnxt
