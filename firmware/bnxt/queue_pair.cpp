// RC queue pairs over the RCFW channel (objects.hpp; roce_hsi.h cmdq_create_qp ...): CREATE_QP,
// MODIFY_QP per transition, QUERY_QP, DESTROY_QP, as qplib_fp.c bnxt_qplib_create_qp,
// bnxt_qplib_modify_qp, bnxt_qplib_query_qp and bnxt_qplib_destroy_qp send them.
#include <stdexcept>
#include <string>
#include <utility>

#include "firmware/bnxt/objects.hpp"

namespace rig::firmware::bnxt {

namespace {

constexpr std::size_t sq_wqe_bytes = 128;     // static WQE mode: 8 slots of 16 bytes (roce_hsi.h)
constexpr std::size_t psn_entry_bytes = 16;   // roce_hsi.h sq_psn_search_ext (P5)
constexpr std::uint8_t max_sge = 6;
constexpr std::uint32_t max_wqes = 0xffff;    // QUERY_FUNC max_qp_wr

void check(const qp_params& p) {
    if (p.sq_entries == 0 || p.sq_entries > max_wqes || p.rq_entries == 0 || p.rq_entries > max_wqes ||
        p.sq_sge == 0 || p.sq_sge > max_sge || p.rq_sge == 0 || p.rq_sge > max_sge) {
        throw std::invalid_argument("bnxt qp::create: sq_entries " + std::to_string(p.sq_entries) + ", rq_entries " +
                                    std::to_string(p.rq_entries) + " (1..65535), sq_sge " + std::to_string(p.sq_sge) +
                                    ", rq_sge " + std::to_string(p.rq_sge) + " (1..6)");
    }
}

// ORD_LIMIT_TO_ORRQ_SLOTS, IRD_LIMIT_TO_IRRQ_SLOTS (qplib_fp.h) and back.
std::uint8_t orrq_slots(std::uint8_t reads) { return static_cast<std::uint8_t>(reads + 1); }
std::uint8_t irrq_slots(std::uint8_t reads) { return static_cast<std::uint8_t>(2 * reads + 2); }

void check_reads(const char* what, std::uint8_t reads) {
    if (reads < 1 || reads > 16) {
        throw std::invalid_argument(std::string("bnxt qp: ") + what + " " + std::to_string(reads) +
                                    " (1..16, QUERY_FUNC max_qp_rd_atom)");
    }
}

abi::cmdq_modify_qp modify_to(std::uint32_t id, std::uint8_t state, std::uint32_t mask) {
    abi::cmdq_modify_qp in;
    in.qp_cid = id;
    in.modify_mask = mask | abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE;
    in.new_state = state;
    return in;
}

}  // namespace

result<qp> qp::create(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, const qp_params& params,
                      deadline by) {
    check(params);
    qp q;
    q._params = params;
    auto sq = detail::paged(fn, params.sq_entries * (sq_wqe_bytes + psn_entry_bytes), "QP send queue");
    auto rq = detail::paged(fn, params.rq_entries * (32 + std::size_t{16} * params.rq_sge), "QP receive queue");
    auto rd = mapped_memory::create(fn, 2 * 4096, "QP IRRQ and ORRQ");
    if (!sq || !rq || !rd) {
        if (sq) sq->memory.release(fn);
        if (rq) rq->memory.release(fn);
        if (rd) rd->release(fn);
        return std::unexpected(!sq ? std::move(sq.error()) : !rq ? std::move(rq.error())
                                                                 : plain_error(error_kind::transport, rd.error()));
    }
    q._sq = std::move(*sq);
    q._rq = std::move(*rq);
    q._rd_queues = std::move(*rd);
    abi::cmdq_create_qp in;
    if (q._params.handle == 0) {
        q._params.handle = reinterpret_cast<std::uintptr_t>(q._sq.memory.data());
    }
    in.qp_handle = q._params.handle;
    in.type = abi::CMDQ_CREATE_QP_TYPE_RC;
    in.sq_lvl = q._sq.level;
    in.rq_lvl = q._rq.level;
    in.dpi = params.dpi;
    in.sq_size = params.sq_entries;
    in.rq_size = params.rq_entries;
    in.sq_sge = params.sq_sge;
    in.rq_sge = params.rq_sge;
    in.scq_cid = params.send_cq;
    in.rcq_cid = params.receive_cq;
    in.pd_id = params.pd;
    in.sq_pbl = q._sq.pbl;
    in.rq_pbl = q._rq.pbl;
    in.irrq_addr = q._rd_queues.iova();
    in.orrq_addr = q._rd_queues.iova() + 4096;
    auto out = ch.send<abi::creq_create_qp_resp>(in, 0, by);
    if (!out) {
        q.let_go(fn, stranded, detail::firmware_may_hold(out.error()));
        return std::unexpected(std::move(out.error()));
    }
    q._id = out->xid;
    q._sq.memory.name("QP " + std::to_string(q._id) + " send queue");
    q._rq.memory.name("QP " + std::to_string(q._id) + " receive queue");
    q._rd_queues.name("QP " + std::to_string(q._id) + " IRRQ and ORRQ");
    return q;
}

result<void> qp::modify(rcfw_channel& ch, const abi::cmdq_modify_qp& cmd, deadline by) {
    if (!alive()) {
        throw std::invalid_argument("bnxt qp: the QP is not alive");
    }
    auto in = cmd;
    // bnxt_qplib_modify_qp sends the queue sizes with every MODIFY_QP, masked or not
    in.sq_size = _params.sq_entries;
    in.rq_size = _params.rq_entries;
    in.sq_sge = _params.sq_sge;
    in.rq_sge = _params.rq_sge;
    auto out = ch.send<abi::creq_modify_qp_resp>(in, 0, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

result<void> qp::rst2init(rcfw_channel& ch, qp_access access, deadline by) {
    auto in = modify_to(_id, abi::CMDQ_MODIFY_QP_NEW_STATE_INIT,
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS | abi::CMDQ_MODIFY_QP_MODIFY_MASK_PKEY);
    in.access = static_cast<std::uint8_t>(abi::CMDQ_MODIFY_QP_ACCESS_LOCAL_WRITE |
                                          (access.remote_write ? abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE : 0) |
                                          (access.remote_read ? abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_READ : 0) |
                                          (access.remote_atomic ? abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_ATOMIC : 0));
    in.pkey = 0xffff;   // IB_DEFAULT_PKEY_FULL, the table's one entry
    return modify(ch, in, by);
}

// INIT->RTR with the address vector, PATH_MTU and SGID_INDEX always, no SRC_MAC
// (__modify_flags_from_init_state).
result<void> qp::init2rtr(rcfw_channel& ch, const qp_rtr_params& p, deadline by) {
    check_reads("max_dest_rd_atomic", p.max_dest_rd_atomic);
    if (p.path_mtu > abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096) {
        throw std::invalid_argument("bnxt qp::init2rtr: path_mtu " + std::to_string(p.path_mtu) + " (0..4)");
    }
    auto in = modify_to(_id, abi::CMDQ_MODIFY_QP_NEW_STATE_RTR,
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_DGID | abi::CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC | abi::CMDQ_MODIFY_QP_MODIFY_MASK_HOP_LIMIT |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_TRAFFIC_CLASS | abi::CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID | abi::CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_DEST_RD_ATOMIC |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER);
    in.network_type = p.ipv4 ? abi::CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4 : abi::CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV6;
    in.dgid = p.dgid;
    in.sgid_index = p.sgid_index;
    in.dest_mac = p.dmac;
    in.hop_limit = p.hop_limit;
    in.traffic_class = p.traffic_class;
    in.path_mtu = p.path_mtu;
    in.dest_qp_id = p.remote_qpn & 0xffffff;
    in.rq_psn = p.rq_psn & 0xffffff;
    in.max_dest_rd_atomic = irrq_slots(p.max_dest_rd_atomic);
    in.min_rnr_timer = p.min_rnr_timer;
    return modify(ch, in, by);
}

// RTR->RTS with none of the path attributes (__modify_flags_from_rtr_state).
result<void> qp::rtr2rts(rcfw_channel& ch, const qp_rts_params& p, deadline by) {
    check_reads("max_rd_atomic", p.max_rd_atomic);
    auto in = modify_to(_id, abi::CMDQ_MODIFY_QP_NEW_STATE_RTS,
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT | abi::CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY | abi::CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN |
                            abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_RD_ATOMIC);
    in.timeout = p.timeout;
    in.retry_cnt = p.retry_cnt;
    in.rnr_retry = p.rnr_retry;
    in.sq_psn = p.sq_psn & 0xffffff;
    in.max_rd_atomic = orrq_slots(p.max_rd_atomic);
    return modify(ch, in, by);
}

result<void> qp::to_error(rcfw_channel& ch, deadline by) {
    return modify(ch, modify_to(_id, abi::CMDQ_MODIFY_QP_NEW_STATE_ERR, 0), by);
}

result<void> qp::to_reset(rcfw_channel& ch, deadline by) {
    return modify(ch, modify_to(_id, abi::CMDQ_MODIFY_QP_NEW_STATE_RESET, 0), by);
}

result<qp_state_info> qp::query(rcfw_channel& ch, deadline by) const {
    abi::cmdq_query_qp in;
    in.qp_cid = _id;
    std::vector<std::byte> side;
    constexpr std::size_t side_bytes = (abi::creq_query_qp_resp_sb::layout_size + 15) / 16 * 16;
    auto out = ch.send<abi::creq_query_qp_resp>(in, side_bytes, by, &side);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    const auto sb = abi::decode<abi::creq_query_qp_resp_sb>(std::span<const std::byte>(side));
    if (!sb) {
        return std::unexpected(plain_error(error_kind::bad_output, "QUERY_QP side buffer: " + sb.error().message()));
    }
    qp_state_info s;
    s.state = sb->state;
    s.remote_qpn = sb->dest_qp_id;
    s.rq_psn = sb->rq_psn;
    s.sq_psn = sb->sq_psn;
    s.path_mtu = static_cast<std::uint8_t>(sb->path_mtu);
    s.timeout = sb->timeout;
    s.retry_cnt = sb->retry_cnt;
    s.rnr_retry = sb->rnr_retry;
    s.min_rnr_timer = sb->min_rnr_timer;
    s.max_rd_atomic = static_cast<std::uint8_t>(sb->max_rd_atomic - 1);              // ORRQ_SLOTS_TO_ORD_LIMIT
    s.max_dest_rd_atomic = static_cast<std::uint8_t>((sb->max_dest_rd_atomic >> 1) - 1);   // IRRQ_SLOTS_TO_IRD_LIMIT
    s.sgid_index = sb->sgid_index;
    s.dgid = sb->dgid;
    s.dmac = sb->dest_mac;
    s.access = {.remote_read = (sb->access & abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_READ) != 0,
                .remote_write = (sb->access & abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE) != 0,
                .remote_atomic = (sb->access & abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_ATOMIC) != 0};
    return s;
}

result<void> qp::destroy(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, deadline by) {
    if (!alive()) {
        throw std::invalid_argument("bnxt qp::destroy: the QP is not alive");
    }
    abi::cmdq_destroy_qp in;
    in.qp_cid = _id;
    auto out = ch.send<abi::creq_destroy_qp_resp>(in, 0, by);
    if (!out) {
        if (detail::firmware_may_hold(out.error())) {
            let_go(fn, stranded, true);   // gone for us; the memory never comes back
        }
        return std::unexpected(std::move(out.error()));   // refused: the QP stays as it was
    }
    let_go(fn, stranded, false);
    return {};
}

void qp::let_go(driver::function& fn, stranded_memory& stranded, bool firmware_may_hold) {
    for (mapped_memory* m : {&_sq.memory, &_rq.memory, &_rd_queues}) {
        m->let_go(fn, stranded, firmware_may_hold);
    }
}

}  // namespace rig::firmware::bnxt
