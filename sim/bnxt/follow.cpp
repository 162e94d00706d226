// The bnxt data path following the firmware's objects: registered MR keys -> memory regions, CQs
// -> CQ slots, RC QPs in RTR/RTS -> rc_qp, and each QP's place in the pass's lists and each QP's
// and CQ's doorbell page (datapath.hpp). A command's changes are followed alone
// (firmware::take_changes, sim/object_changes.hpp), so that a command costs what it touched, not
// every object of the function; every table is followed after a reset or a new RoCE channel.
#include "sim/bnxt/datapath.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "abi/bnxt/rcfw_cmds.hpp"
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

bool connected(std::uint8_t state) noexcept {
    return state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTR || state == abi::CMDQ_MODIFY_QP_NEW_STATE_RTS;
}


}  // namespace

// ---- objects --------------------------------------------------------------------------------

void datapath::follow_objects() {
    auto changes = _fn._fw.take_changes();
    if (_fn._resets != _seen_resets) {  // the firmware's tables are new: nothing followed remains
        _fetch.reset(0);   // while the slots they list still exist
        _attend.reset(0);
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
        changes.all = true;
    }
    _seen_commands = _fn._fw.commands_executed();
    _seen_roce = _fn._fw.roce_changes();
    if (changes.all) {
        follow_all();
        return;
    }
    const std::size_t most = _qps.size() + changes.qps.size();   // room for every QP they may add
    _fetch.make_room(most);
    _attend.make_room(most);
    changes.visit([&](std::uint32_t key) { follow_key(key); }, [&](std::uint32_t id) { follow_cq(id); },
                  [&](std::uint32_t id) { follow_qp(id); });
    list_pages();
}

void datapath::follow_all() {
    _followed.fetch_add(_fn._fw.rcfw().qps.size() + _fn._fw.rcfw().cqs.size() + _fn._fw.rcfw().keys.size(),
                        std::memory_order_relaxed);
    follow_keys();
    follow_cqs();
    follow_qps();
    // the doorbell pages: the privileged one and every page a QP or CQ names
    _page_users.clear();
    for (auto& [id, c] : _cqs) {
        c.counted_dpi = no_page;
        count_page(c.counted_dpi, c.cq->dpi);
    }
    for (auto& [id, s] : _qps) {
        s.counted_dpi = no_page;
        count_page(s.counted_dpi, s.q->dpi);
    }
    list_pages();
    index_objects();
}

// ---- the doorbell pages and the lists --------------------------------------------------------

void datapath::count_page(std::uint32_t& counted, std::uint32_t dpi) {
    if (counted == dpi) {
        return;
    }
    uncount_page(counted);
    ++_page_users[dpi];
    counted = dpi;
}

void datapath::uncount_page(std::uint32_t& counted) noexcept {
    if (counted == no_page) {
        return;
    }
    if (const auto it = _page_users.find(counted); it != _page_users.end() && --it->second == 0) {
        _page_users.erase(it);
    }
    counted = no_page;
}

// The pages polled: the privileged one (0) and every page a QP or CQ names, in order.
void datapath::list_pages() {
    _pages.assign(1, 0);
    for (const auto& [dpi, users] : _page_users) {
        if (dpi != 0) {
            _pages.push_back(dpi);
        }
    }
}

// The lists, made again after every table was followed: every slot with an rc_qp is looked at
// once (a command may have changed what it reports), and fetched from if behind its producers.
void datapath::index_objects() {
    _fetch.reset(_qps.size());
    _attend.reset(_qps.size());
    for (auto& [id, s] : _qps) {
        list(s);
    }
}

// A QP's place in the lists, made again (index_objects, or after a command changed it).
void datapath::list(qp_slot& s) {
    _fetch.remove(s);
    _attend.remove(s);
    if (s.sq_taken != s.sq_produced || s.rq_taken != s.rq_produced) {
        _fetch.add(s);
    }
    if (s.rc) {
        _attend.add(s);
    }
}

// ---- keys, CQs, QPs ---------------------------------------------------------------------------

// Registered MR keys (REGISTER_MR; qplib_sp.c bnxt_qplib_reg_mr): lkey = rkey = the key,
// bnxt_re_reg_user_mr). A key registered again, or deregistered, is followed.
void datapath::follow_keys() {
    for (auto it = _keys.begin(); it != _keys.end();) {
        it = forget_key_if_changed(it);
    }
    for (const auto& [key, k] : _fn._fw.rcfw().keys) {
        if (k.registered && !_keys.contains(key)) {
            register_key(key, k);
        }
    }
}

void datapath::follow_key(std::uint32_t key) {
    _followed.fetch_add(1, std::memory_order_relaxed);
    if (const auto it = _keys.find(key); it != _keys.end()) {
        forget_key_if_changed(it);
    }
    const auto& keys = _fn._fw.rcfw().keys;
    if (const auto k = keys.find(key); k != keys.end() && k->second.registered && !_keys.contains(key)) {
        register_key(key, k->second);
    }
}

datapath::key_state datapath::state_of(const roce_key& k) noexcept {
    return key_state{k.pd, k.va, k.bytes, k.access, k.memory.pages.empty() ? 0 : k.memory.pages[0],
                     k.memory.pages.size()};
}

// A key the firmware no longer has registered as it was goes from the regions: refused by every
// later access.
std::map<std::uint32_t, datapath::key_state>::iterator datapath::forget_key_if_changed(
    std::map<std::uint32_t, key_state>::iterator it) {
    const auto& keys = _fn._fw.rcfw().keys;
    const auto k = keys.find(it->first);
    if (k == keys.end() || !k->second.registered || state_of(k->second) != it->second) {
        _memory->deregister(it->first);
        return _keys.erase(it);
    }
    return std::next(it);
}

void datapath::register_key(std::uint32_t key, const roce_key& k) {
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
        follow_cq_slot(_cqs[id], id, cq);
    }
}

void datapath::follow_cq_slot(cq_slot& c, std::uint32_t id, const roce_cq& cq) {
    const std::uint64_t page = cq.memory.pages.empty() ? 0 : cq.memory.pages[0];
    // Compared with what the slot kept, never through c.cq: a CQ destroyed and made again
    // under the same id between two passes leaves c.cq naming the freed one (AddressSanitizer
    // caught the read, issue 20)
    if (c.cq == nullptr || c.page != page || c.entries != cq.entries) {
        const std::uint32_t counted = c.counted_dpi;
        c = cq_slot{};   // a new CQ (or one made again): its rings start at 0
        c.counted_dpi = counted;
        touch(cq.memory, true);
    }
    c.id = id;
    c.cq = &cq;
    c.page = page;
    c.entries = cq.entries;
}

// One CQ a command made or destroyed (or both, under one id).
void datapath::follow_cq(std::uint32_t id) {
    _followed.fetch_add(1, std::memory_order_relaxed);
    const auto& cqs = _fn._fw.rcfw().cqs;
    const auto cq = cqs.find(id);
    if (cq == cqs.end()) {
        if (const auto slot = _cqs.find(id); slot != _cqs.end()) {
            uncount_page(slot->second.counted_dpi);
            _cqs.erase(slot);   // no QP names it (DESTROY_CQ refuses a CQ a queue pair names)
        }
        return;
    }
    cq_slot& c = _cqs[id];
    follow_cq_slot(c, id, cq->second);
    count_page(c.counted_dpi, cq->second.dpi);
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
            _fetch.remove(it->second);
            _attend.remove(it->second);
            drop_qp(it->second, true);
            it = _qps.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [id, q] : qps) {
        follow_qp_state(_qps[id], id, q);
    }
}

// One QP a command made, moved or destroyed.
void datapath::follow_qp(std::uint32_t id) {
    _followed.fetch_add(1, std::memory_order_relaxed);
    const auto& qps = _fn._fw.rcfw().qps;
    const auto q = qps.find(id);
    if (q == qps.end()) {  // DESTROY_QP: moves no byte from now on
        if (const auto slot = _qps.find(id); slot != _qps.end()) {
            _fetch.remove(slot->second);
            _attend.remove(slot->second);
            uncount_page(slot->second.counted_dpi);
            drop_qp(slot->second, true);
            _qps.erase(slot);
        }
        return;
    }
    qp_slot& s = _qps[id];
    follow_qp_state(s, id, q->second);
    count_page(s.counted_dpi, q->second.dpi);
    list(s);
}

// The rc_qp of a QP as its firmware state says: none in RESET, made at RTR, moved to RTS, made
// again after a reset and reconnect, failed in ERR.
void datapath::follow_qp_state(qp_slot& s, std::uint32_t id, const roce_qp& q) {
    s.id = id;
    s.q = &q;
    s.send_cq = _cqs.contains(q.send_cq) ? &_cqs[q.send_cq] : nullptr;
    s.receive_cq = _cqs.contains(q.receive_cq) ? &_cqs[q.receive_cq] : nullptr;
    if (q.type != abi::CMDQ_CREATE_QP_TYPE_RC) {
        return;   // UD and GSI QPs: doorbells taken, nothing run
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
    if (!roce::engine::made_for(_engine, *_port, c.gid)) {
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
