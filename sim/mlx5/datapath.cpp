// The data path's pass and its following of the firmware's objects (MKEY -> memory region,
// QP transitions -> rc_qp); doorbells and WQE fetching are in doorbells.cpp (datapath.hpp).
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

namespace {

namespace ifc = rig::mlx5::ifc;

std::uint64_t path_field(const qp_object& q, abi::field f) {
    return abi::get(std::span<const std::byte>(q.qpc), ifc::qpc::primary_address_path(f));
}
std::uint64_t qpc_field(const qp_object& q, abi::field f) {
    return abi::get(std::span<const std::byte>(q.qpc), f);
}

std::uint8_t rights_of(const mkey_object& m) noexcept {
    std::uint8_t r = 0;
    if ((m.rights & mkey_right::local_write) != 0) {
        r |= roce::access_local_write;
    }
    if ((m.rights & mkey_right::remote_read) != 0) {
        r |= roce::access_remote_read;
    }
    if ((m.rights & mkey_right::remote_write) != 0) {
        r |= roce::access_remote_write;
    }
    return r;
}

rig::roce::gid gid_bytes(const std::array<std::uint8_t, 16>& g) noexcept {
    rig::roce::gid out{};
    for (std::size_t i = 0; i < g.size(); ++i) {
        out[i] = static_cast<std::byte>(g[i]);
    }
    return out;
}

}  // namespace

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
    // The DMA view and the region table, each locked once for the whole pass rather than once
    // per access: map, unmap and (de)registration wait for the pass as for one access.
    // The table first: every thread takes them in the order memory::read/write do (the table,
    // then the DMA view for the copy), so none waits for the table while holding the view
    // (roce/memory.hpp "Lock order").
    roce::memory::pin regions_pinned(*_memory);
    vfio_user::dma_space::pin dma_pinned(*_dma);
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

// The lists, made again after the objects were followed: every slot with an rc_qp is looked at
// once (a command may have changed what it reports), and the UAR pages are grouped.
void datapath::index_objects() {
    _fetch.reset(_qps.size());
    _attend.reset(_qps.size());
    _flush.reset(_qps.size());
    _qp_pages.clear();
    _cq_pages.clear();
    for (auto& [qpn, s] : _qps) {
        const bool look = s.sq_look;   // asked by the objects just followed
        s.sq_look = s.attended = s.flushing = false;
        if (!s.rc || s.q == nullptr) {
            continue;
        }
        _attend.add(s);
        if (look) {
            _fetch.add(s);
        }
        if (uar_in_bar(s.q->uar_page)) {
            auto page = std::find_if(_qp_pages.begin(), _qp_pages.end(), [&](const auto& u) { return u.page == s.q->uar_page; });
            if (page == _qp_pages.end()) {
                page = _qp_pages.insert(_qp_pages.end(), {s.q->uar_page, {}});
            }
            page->watches.push_back({&s, nullptr, ~0u, s.qpn});
        }
    }
    _watch_removals = ~std::uint64_t{0};   // found by the next poll, with the DMA view pinned
    for (auto& [cqn, slot] : _cqs) {
        if (!uar_in_bar(slot.cq->uar_page)) {
            continue;
        }
        auto page = std::find_if(_cq_pages.begin(), _cq_pages.end(), [&](const auto& u) { return u.page == slot.cq->uar_page; });
        if (page == _cq_pages.end()) {
            page = _cq_pages.insert(_cq_pages.end(), {slot.cq->uar_page, {}});
        }
        page->slots.push_back(&slot);
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

datapath::connection datapath::connection_of(const qp_object& q) {
    connection c;
    c.remote_qpn = static_cast<std::uint32_t>(qpc_field(q, ifc::qpc::remote_qpn));
    c.rcv_psn = static_cast<std::uint32_t>(qpc_field(q, ifc::qpc::next_rcv_psn));
    c.send_psn = static_cast<std::uint32_t>(qpc_field(q, ifc::qpc::next_send_psn));
    c.rmac = path_field(q, ifc::ads::rmac_47_32) << 32 | path_field(q, ifc::ads::rmac_31_0);
    const auto rgid = abi::bytes_of(std::span<const std::byte>(q.qpc), ifc::qpc::primary_address_path(ifc::ads::rgid_rip));
    std::copy(rgid.begin(), rgid.end(), c.rgid.begin());
    c.mtu = static_cast<std::uint8_t>(qpc_field(q, ifc::qpc::mtu));
    return c;
}

// ---- objects --------------------------------------------------------------------------------

void datapath::follow_objects() {
    if (_fn._resets != _seen_resets) {  // the firmware's tables are new: nothing followed remains
        for (auto& [qpn, s] : _qps) {
            drop_qp(s);
        }
        _qps.clear();
        _cqs.clear();
        for (const auto& [key, pd] : _mkeys) {
            _memory->deregister(key);
        }
        _mkeys.clear();
        _engine.reset();
        _seen_resets = _fn._resets;
    }
    _seen_commands = _fn._fw.commands_executed();
    follow_mkeys();
    follow_qps();
    for (auto it = _cqs.begin(); it != _cqs.end();) {
        it = _fn._fw.cq(it->first) == nullptr ? _cqs.erase(it) : std::next(it);
    }
    // a slot for every CQ (the data path then adds none), its room read again: a CQ destroyed
    // and made again under the same number since the last pass starts from its new consumer index
    for (auto& [cqn, cq] : _fn._fw.cqs()) {
        cq_slot& slot = _cqs[cqn];
        slot.cqn = cqn;
        slot.cq = &cq;
        slot.room = 0;
        if (slot.dbr_addr != cq.dbr_addr) {  // a new CQ (or one made again): arms count from now
            slot.dbr_addr = cq.dbr_addr;
            touch(cq.pas, cq.log_page_size, cq.page_offset, std::size_t{64} << cq.log_cq_size, true);
            std::array<std::byte, 4> word{};
            slot.arm_word = _dma != nullptr && _dma->read(cq.dbr_addr + rig::mlx5::abi::cq_dbr::arm, word)
                                ? abi::load_be<std::uint32_t>(word.data())
                                : 0;
        }
    }
    // the QPs' CQ slots, now that every CQ has one (a QP names CQs that exist: CREATE_QP checks
    // them and DESTROY_CQ refuses one in use)
    for (auto& [qpn, s] : _qps) {
        const auto snd = _cqs.find(s.q->cqn_snd);
        const auto rcv = _cqs.find(s.q->cqn_rcv);
        s.send_cq = snd != _cqs.end() ? &snd->second : nullptr;
        s.receive_cq = rcv != _cqs.end() ? &rcv->second : nullptr;
    }
    index_objects();
}

// Each page of a queue or CQ buffer the data path will read (or write), touched once now, on
// the firmware's side of the object's making, rather than by its first entries (dma_space::touch).
void datapath::touch(std::span<const std::uint64_t> pas, std::uint8_t log_page_size, std::uint32_t page_offset,
                            std::size_t bytes, bool for_write) noexcept {
    if (_dma == nullptr) {
        return;
    }
    for (std::uint64_t at = 0; at < bytes;) {
        const auto place = place_in_buffer(pas, log_page_size, page_offset, at);
        if (!place) {
            return;
        }
        const std::uint64_t n = std::min<std::uint64_t>(place->left_in_page, bytes - at);
        _dma->touch(place->iova, n, for_write);
        at += n;
    }
}

void datapath::follow_mkeys() {
    const auto& table = _fn._fw.mkeys();
    for (auto it = _mkeys.begin(); it != _mkeys.end();) {
        if (_fn._fw.mkey(it->first) == nullptr) {  // DESTROY_MKEY: refused by every later access
            _memory->deregister(it->first);
            it = _mkeys.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [index, m] : table) {
        if (_mkeys.contains(m.key)) {
            continue;
        }
        roce::region r;
        r.key = m.key;
        r.pd = m.pd;
        r.start = m.start_addr;
        r.length = m.len;
        r.rights = rights_of(m);
        if (m.length64) {
            log().warn("mlx5 data path: MKEY {:#x} spans the whole address space: not supported", m.key);
            continue;
        }
        if (m.access_mode == static_cast<std::uint8_t>(ifc::mkc_access_mode::pa)) {
            r.base_iova = m.start_addr;
        } else {
            // MTT entries are page addresses with the rd_en/wr_en bits low (objects.cpp
            // mkey_translate); the region's first byte lies start_addr's offset into page 0.
            const std::uint64_t page = std::uint64_t{1} << m.log_page_size;
            r.page_shift = m.log_page_size;
            r.page_offset = m.start_addr & (page - 1);
            r.pages.reserve(m.mtt.size());
            for (const std::uint64_t e : m.mtt) {
                r.pages.push_back(e & ~std::uint64_t{3} & ~(page - 1));
            }
        }
        try {
            _memory->register_region(std::move(r));
            _mkeys.emplace(m.key, m.pd);
        } catch (const std::invalid_argument& e) {
            log().warn("mlx5 data path: MKEY {:#x} not usable: {}", m.key, e.what());
        }
    }
}

void datapath::drop_qp(qp_slot& s) noexcept {
    if (s.rc) {
        if (_engine) {
            _engine->remove(*s.rc);
        }
        s.rc.reset();
    }
    s.sq_taken = s.rq_taken = 0;  // 2RST: the driver's rings start again at 0
    s.sq_look = false;
}

void datapath::follow_qps() {
    auto& table = _fn._fw.qps();
    for (auto it = _qps.begin(); it != _qps.end();) {
        if (!table.contains(it->first)) {  // DESTROY_QP: moves no byte from now on
            drop_qp(it->second);
            it = _qps.erase(it);
        } else {
            ++it;
        }
    }
    for (auto& [qpn, q] : table) {
        qp_slot& s = _qps[qpn];
        s.qpn = qpn;
        s.q = &q;
        switch (q.state) {
        case ifc::qpc_state::rst:
        case ifc::qpc_state::init:
            drop_qp(s);  // INIT neither sends nor receives; the rc_qp is made at RTR
            break;
        case ifc::qpc_state::rtr:
        case ifc::qpc_state::rts: {
            const connection now = connection_of(q);
            if (s.rc && (s.rc->state() == roce::qp_state::error || !now.same_path(s.conn) ||
                         (s.rc->state() == roce::qp_state::rts && now.send_psn != s.conn.send_psn))) {
                drop_qp(s);  // reset and connected again since the last pass
            }
            if (!s.rc && !configure(s, q)) {
                break;
            }
            if (q.state == ifc::qpc_state::rts && s.rc->state() == roce::qp_state::rtr) {
                roce::send_params p;
                p.sq_psn = static_cast<std::uint32_t>(qpc_field(q, ifc::qpc::next_send_psn));
                p.timeout = static_cast<std::uint8_t>(path_field(q, ifc::ads::ack_timeout));
                p.retry_count = static_cast<std::uint8_t>(qpc_field(q, ifc::qpc::retry_count));
                p.rnr_retry = static_cast<std::uint8_t>(qpc_field(q, ifc::qpc::rnr_retry));
                p.max_rd_atomic = static_cast<std::uint8_t>(1u << qpc_field(q, ifc::qpc::log_sra_max));
                try {
                    s.rc->to_rts(p);
                    _core->stay_busy(roce::model_core::connect_window);   // its traffic follows
                } catch (const std::invalid_argument& e) {
                    log().warn("mlx5 data path: QP {:#x} RTR2RTS not followed: {}", qpn, e.what());
                    s.rc->to_error();
                }
                s.conn.send_psn = p.sq_psn;
                s.sq_look = true;  // entries posted before RTS
            }
            break;
        }
        default:  // ERR, SQER, SQD: what is pending and what comes completes flushed
            if (!s.rc) {
                configure(s, q);
            }
            if (s.rc && s.rc->state() != roce::qp_state::error) {
                s.rc->to_error();
            }
            s.sq_look = true;
            break;
        }
    }
}

// Makes the rc_qp of a QP from its stored qpc: RST2INIT's rights, INIT2RTR's path. A QP that
// reaches ERR from INIT gets one too, so that its entries complete flushed.
bool datapath::configure(qp_slot& s, const qp_object& q) {
    roce::qp_config c = rc_rings(q.log_sq_size, q.log_rq_size, q.log_rq_stride);   // the rings; the rest below
    c.qpn = q.qpn;
    c.pd = q.pd;
    const auto mac = _fn._fw.mac();
    for (std::size_t i = 0; i < c.mac.size(); ++i) {
        c.mac[i] = static_cast<std::byte>(mac[i]);
    }
    if (const roce_addr* a = _fn._fw.gid(static_cast<std::uint32_t>(path_field(q, ifc::ads::src_addr_index)))) {
        c.gid = gid_bytes(a->gid);
    }
    c.udp_sport = static_cast<std::uint16_t>(path_field(q, ifc::ads::udp_sport));
    if (c.udp_sport == 0) {
        c.udp_sport = 0xc000;
    }
    const bool to_rtr = q.state == ifc::qpc_state::rtr || q.state == ifc::qpc_state::rts;
    try {
        s.rc = std::make_unique<roce::rc_qp>(*_memory, *_port, c);
        std::uint8_t rights = 0;
        if (qpc_field(q, ifc::qpc::rre) != 0) {
            rights |= roce::access_remote_read;
        }
        if (qpc_field(q, ifc::qpc::rwe) != 0) {
            rights |= roce::access_remote_write;
        }
        s.rc->to_init(rights);
        if (to_rtr) {
            roce::path p;
            p.dest_qpn = static_cast<std::uint32_t>(qpc_field(q, ifc::qpc::remote_qpn));
            const std::uint64_t rmac = path_field(q, ifc::ads::rmac_47_32) << 32 | path_field(q, ifc::ads::rmac_31_0);
            for (std::size_t i = 0; i < p.dest_mac.size(); ++i) {
                p.dest_mac[i] = static_cast<std::byte>(rmac >> (8 * (5 - i)));
            }
            const auto rgid = abi::bytes_of(std::span<const std::byte>(q.qpc),
                                            ifc::qpc::primary_address_path(ifc::ads::rgid_rip));
            std::copy(rgid.begin(), rgid.end(), p.dest_gid.begin());
            p.mtu = 128u << qpc_field(q, ifc::qpc::mtu);  // MLX5_QPC_MTU_256_BYTES = 1 ... 4K = 5
            p.rq_psn = static_cast<std::uint32_t>(qpc_field(q, ifc::qpc::next_rcv_psn));
            p.min_rnr_timer = static_cast<std::uint8_t>(qpc_field(q, ifc::qpc::min_rnr_nak));
            p.max_dest_rd_atomic = static_cast<std::uint8_t>(1u << qpc_field(q, ifc::qpc::log_rra_max));
            s.rc->to_rtr(p);
        }
    } catch (const std::invalid_argument& e) {
        log().warn("mlx5 data path: QP {:#x} cannot be configured: {}", q.qpn, e.what());
        s.rc.reset();
        return false;
    }
    if (!_engine) {
        _engine = std::make_unique<roce::engine>(*_port, c.gid);
        _engine_gid = c.gid;
    } else if (to_rtr && c.gid != _engine_gid) {
        log().warn("mlx5 data path: QP {:#x} uses another GID than the function's first QP: its frames "
                   "are not received", q.qpn);
    }
    touch(q.pas, q.log_page_size, q.page_offset, q.rq_bytes() + q.sq_bytes(), false);
    s.host.dp = this;
    s.host.slot = &s;
    s.rc->set_host(&s.host);
    _engine->add(*s.rc);
    s.conn = connection_of(q);
    s.opcodes.assign(std::size_t{1} << q.log_sq_size, 0);
    s.sq_look = true;
    return true;
}

}  // namespace rig::sim::mlx5
