// The data path following the firmware's objects: MKEY -> memory region, CQ -> CQ slot, QP
// transitions -> rc_qp, and each QP's and CQ's place in the pass's lists and UAR watches
// (datapath.hpp). A command's changes are followed alone (firmware::take_changes), so that a
// command costs what it touched, not every object of the function; every table is followed
// after a reset, or when the firmware listed too many changes.
#include "sim/mlx5/datapath.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "abi/bits.hpp"
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

// ---- objects --------------------------------------------------------------------------------

void datapath::follow_objects() {
    auto changes = _fn._fw.take_changes();
    _seen_commands = _fn._fw.commands_executed();
    if (_fn._resets != _seen_resets) {  // the firmware's tables are new: nothing followed remains
        _fetch.reset(0);   // while the slots they list still exist
        _attend.reset(0);
        _flush.reset(0);
        for (auto& [qpn, s] : _qps) {
            drop_qp(s);
        }
        _qps.clear();
        _cqs.clear();
        _qp_pages.clear();
        _cq_pages.clear();
        for (const auto& [key, pd] : _mkeys) {
            _memory->deregister(key);
        }
        _mkeys.clear();
        _engine.reset();
        _seen_resets = _fn._resets;
        changes.all = true;
    }
    if (changes.all) {
        follow_all();
        return;
    }
    const std::size_t most = _qps.size() + changes.qps.size();   // room for every QP they may add
    _fetch.make_room(most);
    _attend.make_room(most);
    _flush.make_room(most);
    changes.visit([&](std::uint32_t index) { follow_mkey(index); }, [&](std::uint32_t cqn) { follow_cq(cqn); },
                  [&](std::uint32_t qpn) { follow_qp(qpn); });
}

void datapath::follow_all() {
    _followed.fetch_add(_fn._fw.qps().size() + _fn._fw.cqs().size() + _fn._fw.mkeys().size(),
                        std::memory_order_relaxed);
    follow_mkeys();
    follow_qps();
    for (auto it = _cqs.begin(); it != _cqs.end();) {
        it = _fn._fw.cq(it->first) == nullptr ? _cqs.erase(it) : std::next(it);
    }
    // a slot for every CQ (the data path then adds none), its room read again: a CQ destroyed
    // and made again under the same number since the last pass starts from its new consumer index
    for (auto& [cqn, cq] : _fn._fw.cqs()) {
        follow_cq_slot(_cqs[cqn], cq);
    }
    // the QPs' CQ slots, now that every CQ has one (a QP names CQs that exist: CREATE_QP checks
    // them and DESTROY_CQ refuses one in use)
    for (auto& [qpn, s] : _qps) {
        link_cqs(s);
    }
    index_objects();
}

void datapath::follow_cq_slot(cq_slot& slot, cq_object& cq) {
    slot.cqn = cq.cqn;
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

// One CQ a command made or destroyed (or both, under one number).
void datapath::follow_cq(std::uint32_t cqn) {
    _followed.fetch_add(1, std::memory_order_relaxed);
    auto& table = _fn._fw.cqs();
    const auto it = table.find(cqn);
    const auto slot = _cqs.find(cqn);
    if (slot != _cqs.end()) {
        unlist_cq(slot->second);
    }
    if (it == table.end()) {
        if (slot != _cqs.end()) {
            _cqs.erase(slot);   // no QP names it (DESTROY_CQ refuses a CQ in use)
        }
        return;
    }
    cq_slot& s = _cqs[cqn];
    follow_cq_slot(s, it->second);
    list_cq(s);
}

void datapath::link_cqs(qp_slot& s) {
    const auto snd = _cqs.find(s.q->cqn_snd);
    const auto rcv = _cqs.find(s.q->cqn_rcv);
    s.send_cq = snd != _cqs.end() ? &snd->second : nullptr;
    s.receive_cq = rcv != _cqs.end() ? &rcv->second : nullptr;
}

// One QP a command made, moved or destroyed.
void datapath::follow_qp(std::uint32_t qpn) {
    _followed.fetch_add(1, std::memory_order_relaxed);
    auto& table = _fn._fw.qps();
    const auto it = table.find(qpn);
    if (it == table.end()) {  // DESTROY_QP: moves no byte from now on
        if (const auto slot = _qps.find(qpn); slot != _qps.end()) {
            unlist(slot->second);
            drop_qp(slot->second);
            _qps.erase(slot);
        }
        return;
    }
    qp_slot& s = _qps[qpn];
    s.qpn = qpn;
    s.q = &it->second;
    follow_qp_state(s, it->second);
    link_cqs(s);
    list(s);
}

// ---- the lists and watches ------------------------------------------------------------------

// The lists, made again after every table was followed: every slot with an rc_qp is looked at
// once (a command may have changed what it reports), and the UAR pages are grouped.
void datapath::index_objects() {
    _fetch.reset(_qps.size());
    _attend.reset(_qps.size());
    _flush.reset(_qps.size());
    _qp_pages.clear();
    _cq_pages.clear();
    for (auto& [qpn, s] : _qps) {
        s.watched_on = no_page;
        list(s);
    }
    for (auto& [cqn, slot] : _cqs) {
        slot.listed_on = no_page;
        list_cq(slot);
    }
}

// A QP's place, made again: out of every list and watch, then, with an rc_qp, attended once,
// fetched if asked (sq_look), and watched on its UAR page.
void datapath::list(qp_slot& s) {
    const bool look = s.sq_look;   // asked by the objects just followed
    unlist(s);
    if (!s.rc || s.q == nullptr) {
        return;
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
        s.watched_on = s.q->uar_page;
        _watches_unresolved = true;   // its counter's address found by the next poll, the DMA view pinned
    }
}

void datapath::unlist(qp_slot& s) noexcept {
    _fetch.remove(s);
    _attend.remove(s);
    _flush.remove(s);
    if (s.watched_on == no_page) {
        return;
    }
    const auto page = std::find_if(_qp_pages.begin(), _qp_pages.end(), [&](const auto& u) { return u.page == s.watched_on; });
    if (page != _qp_pages.end()) {
        std::erase_if(page->watches, [&](const send_watch& w) { return w.slot == &s; });
        if (page->watches.empty()) {
            _qp_pages.erase(page);
        }
    }
    s.watched_on = no_page;
}

void datapath::list_cq(cq_slot& slot) {
    if (!uar_in_bar(slot.cq->uar_page)) {
        return;
    }
    auto page = std::find_if(_cq_pages.begin(), _cq_pages.end(), [&](const auto& u) { return u.page == slot.cq->uar_page; });
    if (page == _cq_pages.end()) {
        page = _cq_pages.insert(_cq_pages.end(), {slot.cq->uar_page, {}});
    }
    page->slots.push_back(&slot);
    slot.listed_on = slot.cq->uar_page;
}

void datapath::unlist_cq(cq_slot& slot) noexcept {
    if (slot.listed_on == no_page) {
        return;
    }
    const auto page = std::find_if(_cq_pages.begin(), _cq_pages.end(), [&](const auto& u) { return u.page == slot.listed_on; });
    if (page != _cq_pages.end()) {
        std::erase(page->slots, &slot);
        if (page->slots.empty()) {
            _cq_pages.erase(page);
        }
    }
    slot.listed_on = no_page;
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
    for (auto it = _mkeys.begin(); it != _mkeys.end();) {
        if (_fn._fw.mkey(it->first) == nullptr) {  // DESTROY_MKEY: refused by every later access
            _memory->deregister(it->first);
            it = _mkeys.erase(it);
        } else {
            ++it;
        }
    }
    for (const auto& [index, m] : _fn._fw.mkeys()) {
        if (!_mkeys.contains(m.key)) {
            register_mkey(m);
        }
    }
}

// One MKEY index a command made or destroyed: the keys of that index (index << 8 | mkey_7_0)
// the firmware no longer has go, its current one is registered.
void datapath::follow_mkey(std::uint32_t index) {
    _followed.fetch_add(1, std::memory_order_relaxed);
    const std::uint32_t first = index << 8;
    for (auto it = _mkeys.lower_bound(first); it != _mkeys.end() && it->first <= (first | 0xffu);) {
        if (_fn._fw.mkey(it->first) == nullptr) {
            _memory->deregister(it->first);
            it = _mkeys.erase(it);
        } else {
            ++it;
        }
    }
    const auto& table = _fn._fw.mkeys();
    if (const auto m = table.find(index); m != table.end() && !_mkeys.contains(m->second.key)) {
        register_mkey(m->second);
    }
}

void datapath::register_mkey(const mkey_object& m) {
    roce::region r;
    r.key = m.key;
    r.pd = m.pd;
    r.start = m.start_addr;
    r.length = m.len;
    r.rights = rights_of(m);
    if (m.length64) {
        log().warn("mlx5 data path: MKEY {:#x} spans the whole address space: not supported", m.key);
        return;
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
            unlist(it->second);
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
        follow_qp_state(s, q);
    }
}

// The rc_qp of a QP as its firmware state says: none in RST and INIT, made at RTR, moved to RTS
// with RTR2RTS's send parameters, made again after a reset and reconnect, failed in ERR.
void datapath::follow_qp_state(qp_slot& s, const qp_object& q) {
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
                log().warn("mlx5 data path: QP {:#x} RTR2RTS not followed: {}", q.qpn, e.what());
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
    if (!roce::engine::made_for(_engine, *_port, c.gid) && to_rtr) {
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
