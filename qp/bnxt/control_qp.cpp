// bnxt control plane, queue pairs: a doorbell block, a send CQ, a receive CQ and an RC QP
// (roce_hsi.h; bnxt_re qplib_fp.c; docs/bnxt-data-path.md), the data path over their memory, the
// connect steps, QUERY_QP as qp_info, destroy.
#include "qp/bnxt/control.hpp"  // first: see qp/mlx5/data_path.hpp

#include <bit>
#include <string>
#include <utility>

#include "abi/bnxt/rcfw_cmds.hpp"
#include "qp/bnxt/error.hpp"
#include "qp/bnxt/queue_memory.hpp"

namespace rig::qp::bnxt {

namespace babi = ::rig::bnxt::abi;

namespace {

qp_status status_of(std::uint8_t state) noexcept {
    switch (state) {
    case babi::CMDQ_MODIFY_QP_NEW_STATE_RESET: return qp_status::reset;
    case babi::CMDQ_MODIFY_QP_NEW_STATE_INIT: return qp_status::init;
    case babi::CMDQ_MODIFY_QP_NEW_STATE_RTR: return qp_status::rtr;
    case babi::CMDQ_MODIFY_QP_NEW_STATE_RTS: return qp_status::rts;
    case babi::CMDQ_MODIFY_QP_NEW_STATE_SQD: return qp_status::sqd;
    case babi::CMDQ_MODIFY_QP_NEW_STATE_SQE: return qp_status::sqe;
    default: return qp_status::error;
    }
}

qp_info info_of(const fw::qp_state_info& q, std::uint8_t gid_index) {
    qp_info out;
    out.state = status_of(q.state);
    out.remote_qp = q.remote_qpn;
    out.receive_psn = q.rq_psn;
    out.send_psn = q.sq_psn;
    // CMDQ_MODIFY_QP_PATH_MTU_MTU_256 .. _4096: 0 .. 4
    out.path_mtu = q.path_mtu <= babi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096 ? 256u << q.path_mtu : 0;
    out.ack_timeout = q.timeout;
    out.retry_count = q.retry_cnt;
    out.rnr_retry = q.rnr_retry;
    out.gid_index = gid_index;
    for (std::size_t i = 0; i < q.dgid.size(); ++i) {
        out.remote_gid[i] = std::byte{q.dgid[i]};
    }
    for (std::size_t i = 0; i < q.dmac.size(); ++i) {
        out.remote_mac[i] = std::byte{q.dmac[i]};
    }
    out.remote_read = q.access.remote_read;
    out.remote_write = q.access.remote_write;
    return out;
}

// ::ffff:a.b.c.d: a RoCE v2 peer over IPv4 (ib_gid_to_network_type: ipv6_addr_v4mapped).
bool ipv4_mapped(const std::array<std::byte, 16>& gid) noexcept {
    for (std::size_t i = 0; i < 10; ++i) {
        if (gid[i] != std::byte{0}) {
            return false;
        }
    }
    return gid[10] == std::byte{0xff} && gid[11] == std::byte{0xff};
}

qp_objects& objects_of(const detail::qp_state& s) { return static_cast<qp_objects&>(*s.family); }

}  // namespace

// ---- doorbell blocks ----------------------------------------------------------------------------

// The lowest free block whose DPI page is mapped (docs/bnxt-data-path.md "Rig's layout").
std::optional<std::uint32_t> control::take_block() {
    for (std::uint32_t b = 0; b < _max_blocks; ++b) {
        if (b < _blocks.size() && _blocks[b]) {
            continue;
        }
        const std::uint64_t offset = _device->doorbell_offset() + std::uint64_t{dpi_of(b)} * 4096 +
                                     std::uint64_t{b % blocks_per_page} * doorbell_word::block_bytes;
        if (!_bar2.covers(offset, doorbell_word::block_bytes)) {
            return std::nullopt;
        }
        if (b >= _blocks.size()) {
            _blocks.resize(b + 1, false);
        }
        _blocks[b] = true;
        return b;
    }
    return std::nullopt;
}

// Once its QP and CQs are gone (destroyed, or stranded with the firmware failed) the block
// may serve another queue pair.
void control::give_back_block(qp_objects& o) {
    if (o.block && !o.qp.alive() && !o.send_cq.alive() && !o.receive_cq.alive()) {
        _blocks.at(*o.block) = false;
        o.block.reset();
    }
}

std::byte* control::block_address(std::uint32_t block) const noexcept {
    return _bar2.base + _device->doorbell_offset() + std::uint64_t{dpi_of(block)} * 4096 +
           std::uint64_t{block % blocks_per_page} * doorbell_word::block_bytes;
}

// ---- completion queues' handles ---------------------------------------------------------------

std::uint64_t control::next_cq_handle() {
    std::lock_guard g(_handles_lock);
    return ++_next_handle;   // unique in the NIC: the NQ path maps it back to the CQ's id
}

void control::forget_cq(const fw::cq& c) {
    std::lock_guard g(_handles_lock);
    _cq_by_handle.erase(c.handle());
}

result<void> control::make_cqs(qp_objects& o, std::uint32_t entries, std::uint32_t dpi) {
    for (fw::cq* c : {&o.send_cq, &o.receive_cq}) {
        const fw::cq_params p{.entries = entries, .nq_ring = _device->nq_ring_id(), .dpi = dpi, .handle = next_cq_handle()};
        auto made = fw::cq::create(commands(), _fn, stranded_registry(), p, by());
        if (!made) {
            return std::unexpected(refused(made.error()));
        }
        *c = std::move(*made);
        std::lock_guard g(_handles_lock);
        _cq_by_handle[c->handle()] = c->id();
    }
    return {};
}

// ---- queue pairs --------------------------------------------------------------------------------

result<void> control::make_qp(detail::qp_state& s, std::uint8_t log_ring, const detail::group_state* group) {
    s.family = std::make_unique<qp_objects>();
    qp_objects& o = objects_of(s);
    o.block = take_block();
    if (!o.block) {
        return std::unexpected(plain_error(error_kind::os, "no free doorbell block: all " + std::to_string(_max_blocks) +
                                                               " of the mapped DPI pages are in use"));
    }
    const std::uint32_t entries = std::uint32_t{1} << log_ring;
    const std::uint32_t dpi = dpi_of(*o.block);
    // A refused make gives back what it took (release_qp); what a firmware that stopped
    // answering may name is stranded by the objects themselves.
    const auto give_back = [&](error out) -> result<void> {
        static_cast<void>(release_qp(s));
        return std::unexpected(std::move(out));
    };
    if (group == nullptr) {
        if (auto r = make_cqs(o, entries, dpi); !r) {
            return give_back(std::move(r.error()));
        }
    }
    // A group's queue pair names the group's CQ for both rings (scq_cid = rcq_cid).
    const fw::cq& send_cq = group ? static_cast<const group_objects&>(*group->family).cq : o.send_cq;
    const fw::cq& receive_cq = group ? send_cq : o.receive_cq;
    const fw::qp_params qpp{.pd = *_pd,
                            .send_cq = send_cq.id(),
                            .receive_cq = receive_cq.id(),
                            .dpi = dpi,
                            .sq_entries = entries,
                            .rq_entries = entries,
                            .sq_sge = wqe_sges,
                            .rq_sge = wqe_sges,
                            .handle = ++_next_qp_handle};
    auto q = fw::qp::create(commands(), _fn, stranded_registry(), qpp, by());
    if (!q) {
        return give_back(refused(q.error()));
    }
    o.qp = std::move(*q);
    s.number = o.qp.id();
    s.group_key = o.qp.handle();   // a CQE names its queue pair by the handle CREATE_QP gave
    s.send_cq = send_cq.id();
    s.receive_cq = receive_cq.id();
    set_data_path(s, o, send_cq, receive_cq);
    return {};
}

// The data path over the objects' memory and the block's doorbell words. A group's queue pair
// gets the group's CQ as both of its CQs: the group polls it (rig/group.hpp), the queue pair's
// own poll is refused.
void control::set_data_path(detail::qp_state& s, const qp_objects& o, const fw::cq& send_cq, const fw::cq& receive_cq) {
    std::byte* block = block_address(*o.block);
    s.path.emplace<data_path>(data_path_memory{
        .send = {o.qp.send_queue(), o.qp.psn_search(), block + doorbell_word::sq},
        .receive = {o.qp.receive_queue(), block + doorbell_word::rq},
        .send_cq = {send_cq.entries(), block + doorbell_word::send_cq, block + doorbell_word::send_cq_arm},
        .receive_cq = {receive_cq.entries(), block + doorbell_word::receive_cq, block + doorbell_word::receive_cq_arm},
        .qpn = o.qp.id(),
        .qp_handle = o.qp.handle(),
        .send_cqn = send_cq.id(),
        .receive_cqn = receive_cq.id()});
}

result<void> control::to_reset(detail::qp_state& s) {
    if (auto r = objects_of(s).qp.to_reset(commands(), by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    return {};
}

result<void> control::reset_to_init(detail::qp_state& s) {
    if (auto r = objects_of(s).qp.rst2init(commands(), {.remote_read = true, .remote_write = true}, by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    return {};
}

result<void> control::init_to_rtr(detail::qp_state& s, const endpoint& peer, std::uint32_t path_mtu_bytes) {
    fw::qp_rtr_params rtr;
    rtr.remote_qpn = peer.qp;
    rtr.rq_psn = peer.psn;
    // CMDQ_MODIFY_QP_PATH_MTU_MTU_256 .. _4096 are 0 .. 4: log2(bytes) - 8
    rtr.path_mtu = static_cast<std::uint8_t>(std::countr_zero(path_mtu_bytes) - 8);
    for (std::size_t i = 0; i < peer.gid.size(); ++i) {
        rtr.dgid[i] = std::to_integer<std::uint8_t>(peer.gid[i]);
    }
    for (std::size_t i = 0; i < peer.mac.size(); ++i) {
        rtr.dmac[i] = std::to_integer<std::uint8_t>(peer.mac[i]);
    }
    rtr.sgid_index = static_cast<std::uint16_t>(_device->gid_index().value_or(0));
    rtr.ipv4 = ipv4_mapped(peer.gid);
    qp_objects& o = objects_of(s);
    if (auto r = o.qp.init2rtr(commands(), rtr, by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    o.path_mtu_bytes = path_mtu_bytes;
    return {};
}

result<void> control::rtr_to_rts(detail::qp_state& s) {
    fw::qp_rts_params rts;  // ack timeout 14 (67 ms), retry 7, RNR retry 7: the seed's connect
    rts.sq_psn = s.psn;
    qp_objects& o = objects_of(s);
    if (auto r = o.qp.rtr2rts(commands(), rts, by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    // The PSN search entries count from the send PSN in packets of the path MTU.
    std::get<data_path>(s.path).start_sends(s.psn & 0xffffff, o.path_mtu_bytes);
    return {};
}

result<qp_info> control::query(const detail::qp_state& s) {
    auto r = objects_of(s).qp.query(commands(), by());
    if (!r) {
        return std::unexpected(refused(r.error()));
    }
    return info_of(*r, static_cast<std::uint8_t>(r->sgid_index));
}

result<void> control::release_qp(detail::qp_state& s) {
    if (!s.family) {
        return {};
    }
    qp_objects& o = objects_of(s);
    const auto destroy = [&](auto& object) -> result<void> {
        if (auto r = object.destroy(commands(), _fn, stranded_registry(), by()); !r) {
            return std::unexpected(refused(r.error()));
        }
        return {};
    };
    auto r = detail::release_objects(o.qp, {&o.send_cq, &o.receive_cq}, destroy,
                                     [&](const fw::cq& c) { forget_cq(c); });
    if (r || !o.qp.alive()) {
        give_back_block(o);   // the QP is gone: its doorbell block is free again
    }
    return r;
}

}  // namespace rig::qp::bnxt
