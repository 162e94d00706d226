// mlx5 control plane, queue pairs: a send CQ, a receive CQ and an RC QP (mlx5_ifc.h;
// the kernel's drivers/infiniband/hw/mlx5/qp.c and cq.c), the data path over their memory, the
// connect steps, QUERY_QP as qp_info, destroy.
#include "qp/mlx5/control.hpp"  // first: see qp/mlx5/data_path.hpp

#include <bit>
#include <string>
#include <utility>

#include "abi/mlx5/doorbell.hpp"
#include "qp/mlx5/error.hpp"

namespace rig::qp::mlx5 {

namespace mabi = ::rig::mlx5::abi;
namespace ifc = ::rig::mlx5::ifc;

namespace {

qp_status status_of(ifc::qpc_state s) noexcept {
    switch (s) {
    case ifc::qpc_state::rst: return qp_status::reset;
    case ifc::qpc_state::init: return qp_status::init;
    case ifc::qpc_state::rtr: return qp_status::rtr;
    case ifc::qpc_state::rts: return qp_status::rts;
    case ifc::qpc_state::sqer: return qp_status::sqe;
    case ifc::qpc_state::sqd: return qp_status::sqd;
    case ifc::qpc_state::err: return qp_status::error;
    case ifc::qpc_state::suspended: break;  // a migration state Rig never asks for
    }
    return qp_status::error;
}

qp_info info_of(const fw::qp_state_info& q) {
    qp_info out;
    out.state = status_of(q.state);
    out.remote_qp = q.remote_qpn;
    out.receive_psn = q.next_rcv_psn;
    out.send_psn = q.next_send_psn;
    const auto mtu = static_cast<unsigned>(q.mtu);  // MLX5_QPC_MTU_* 1..5: 256 << (mtu - 1) bytes
    out.path_mtu = mtu >= 1 && mtu <= 5 ? 128u << mtu : 0;
    out.ack_timeout = q.ack_timeout;
    out.retry_count = q.retry_count;
    out.rnr_retry = q.rnr_retry;
    out.gid_index = q.src_addr_index;
    out.udp_source_port = q.udp_sport;
    for (std::size_t i = 0; i < q.rgid.size(); ++i) {
        out.remote_gid[i] = std::byte{q.rgid[i]};
    }
    for (std::size_t i = 0; i < q.rmac.size(); ++i) {
        out.remote_mac[i] = std::byte{q.rmac[i]};
    }
    out.remote_read = q.access.remote_read;
    out.remote_write = q.access.remote_write;
    return out;
}

qp_objects& objects_of(const detail::qp_state& s) { return static_cast<qp_objects&>(*s.family); }

}  // namespace

result<void> control::make_qp(detail::qp_state& s, std::uint8_t log_ring, const detail::group_state* group) {
    s.family = std::make_unique<qp_objects>();
    qp_objects& o = objects_of(s);
    const fw::cq_params cp{.log_size = log_ring, .uar = *_uar, .eqn = _hca->event_queue()->eqn()};
    // A refused make gives back what it took (release_qp); what a firmware that stopped
    // answering may name is stranded by the objects themselves.
    const auto give_back = [&](const fw::error& e) -> result<void> {
        error out = refused(e);
        static_cast<void>(release_qp(s));
        return std::unexpected(std::move(out));
    };
    if (group == nullptr) {
        auto scq = fw::cq::create(commands(), _fn, stranded_registry(), *_records, cp, by());
        if (!scq) {
            return give_back(scq.error());
        }
        o.send_cq = std::move(*scq);
        auto rcq = fw::cq::create(commands(), _fn, stranded_registry(), *_records, cp, by());
        if (!rcq) {
            return give_back(rcq.error());
        }
        o.receive_cq = std::move(*rcq);
    }
    // A group's queue pair names the group's CQ for both rings (cqn_snd = cqn_rcv).
    const fw::cq& send_cq = group ? static_cast<const group_objects&>(*group->family).cq : o.send_cq;
    const fw::cq& receive_cq = group ? send_cq : o.receive_cq;
    const fw::qp_params qpp{.pd = *_pd,
                            .send_cq = send_cq.cqn(),
                            .receive_cq = receive_cq.cqn(),
                            .uar = *_uar,
                            .log_sq_size = log_ring,
                            .log_rq_size = log_ring,
                            .log_rq_stride = receive_stride_log};
    auto q = fw::qp::create(commands(), _fn, stranded_registry(), *_records, qpp, by());
    if (!q) {
        return give_back(q.error());
    }
    o.qp = std::move(*q);
    s.number = o.qp.qpn();
    s.group_key = s.number;   // a CQE names its queue pair by number
    s.send_cq = send_cq.cqn();
    s.receive_cq = receive_cq.cqn();
    set_data_path(s, o, send_cq, receive_cq);
    return {};
}

std::byte* control::uar_page() const { return _bar0.base + std::uint64_t{*_uar} * mabi::uar_page_size; }

// The data path over the objects' memory. Queue pairs take the four bfregs of the UAR page in
// turn (make_bfregs), so from the fifth one on they share them: the bfreg keeps the half to
// use next and locks when shared (qp/mlx5/bfreg.hpp). A group's queue pair gets the group's CQ
// as both of its CQs: the group polls it (rig/group.hpp), the queue pair's own poll is refused.
void control::set_data_path(detail::qp_state& s, const qp_objects& o, const fw::cq& send_cq, const fw::cq& receive_cq) {
    std::byte* const uar = uar_page();
    bfreg& bf = *_bfregs[_next_bfreg++ % _bfregs.size()];
    bf.add_user();
    const std::span<std::byte> qp_record(o.qp.doorbell_record(), mabi::qp_dbr::size);
    s.path.emplace<data_path>(data_path_memory{
        .send = {o.qp.send_queue(), qp_record, &bf},
        .receive = {o.qp.receive_queue(), std::size_t{16} << o.qp.params().log_rq_stride, qp_record},
        .send_cq = {send_cq.entries(), {send_cq.doorbell_record(), 8}, uar},
        .receive_cq = {receive_cq.entries(), {receive_cq.doorbell_record(), 8}, uar},
        .qpn = o.qp.qpn(),
        .send_cqn = send_cq.cqn(),
        .receive_cqn = receive_cq.cqn()});
}

result<void> control::to_reset(detail::qp_state& s) {
    if (auto r = objects_of(s).qp.to_reset(commands(), by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    return {};
}

result<void> control::reset_to_init(detail::qp_state& s) {
    if (auto r = objects_of(s).qp.rst2init(commands(), 1, 0, {.remote_read = true, .remote_write = true}, by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    return {};
}

result<void> control::init_to_rtr(detail::qp_state& s, const endpoint& peer, std::uint32_t path_mtu_bytes) {
    fw::qp_rtr_params rtr;
    rtr.remote_qpn = peer.qp;
    rtr.next_rcv_psn = peer.psn;
    for (std::size_t i = 0; i < peer.gid.size(); ++i) {
        rtr.rgid[i] = std::to_integer<std::uint8_t>(peer.gid[i]);
    }
    for (std::size_t i = 0; i < peer.mac.size(); ++i) {
        rtr.rmac[i] = std::to_integer<std::uint8_t>(peer.mac[i]);
    }
    rtr.gid_index = 0;
    // qpc.mtu 1..5 is 256 << (mtu - 1) bytes (MLX5_QPC_MTU_*)
    rtr.mtu = static_cast<ifc::qpc_mtu>(std::countr_zero(path_mtu_bytes) - 7);
    if (auto r = objects_of(s).qp.init2rtr(commands(), rtr, by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    return {};
}

result<void> control::rtr_to_rts(detail::qp_state& s) {
    fw::qp_rts_params rts;  // ack timeout 14 (67 ms), retry 7, RNR retry 7: the seed's connect
    rts.next_send_psn = s.psn;
    if (auto r = objects_of(s).qp.rtr2rts(commands(), rts, by()); !r) {
        return std::unexpected(refused(r.error()));
    }
    return {};
}

result<qp_info> control::query(const detail::qp_state& s) {
    auto r = objects_of(s).qp.query(commands(), by());
    if (!r) {
        return std::unexpected(refused(r.error()));
    }
    return info_of(*r);
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
    return detail::release_objects(o.qp, {&o.send_cq, &o.receive_cq}, destroy, [](const fw::cq&) {});
}

}  // namespace rig::qp::mlx5
