// MODIFY_QP of the bnxt firmware model (roce_hsi.h cmdq_modify_qp): the queue pair state machine of
// IB spec 1.4 §10.3.1 (Figure 130) and its attribute table (§11.2.5.3, Table 93), as the kernel
// checks it before a driver is asked (drivers/infiniband/core/verbs.c ib_modify_qp_is_ok), with
// what the Bono firmware itself insists on, read from what bnxt_re does for it (qplib_fp.c
// __modify_flags_from_init_state, __modify_flags_from_rtr_state): INIT->RTR carries
// SGID_INDEX and PATH_MTU and no SRC_MAC, max_dest_rd_atomic >= 1; RTR->RTS carries none of
// PKEY, DGID, FLOW_LABEL, SGID_INDEX, HOP_LIMIT, TRAFFIC_CLASS, DEST_MAC, PATH_MTU, RQ_PSN,
// MIN_RNR_TIMER, MAX_DEST_RD_ATOMIC, DEST_QP_ID, and max_rd_atomic >= 1.
//
// A modify_mask without STATE modifies the QP in its state (X->X). A refusal completes
// INVALID_PARAMETER with the reason in rcfw_state::last_error and leaves the QP as it was: a
// transition the table does not list, a required attribute missing, an attribute the
// transition does not take, a value out of its range, an SGID index naming no GID. SQD and SQE
// are not modelled (refused). Resizing (SQ_SIZE, RQ_SIZE, SQ_SGE, RQ_SGE, MAX_INLINE_DATA) is
// refused: the queues are CREATE_QP's.
#include <cstring>
#include <string>

#include "abi/bits.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;

namespace {

constexpr std::uint8_t qp_reset = abi::CMDQ_MODIFY_QP_NEW_STATE_RESET, qp_init = abi::CMDQ_MODIFY_QP_NEW_STATE_INIT,
                       qp_rtr = abi::CMDQ_MODIFY_QP_NEW_STATE_RTR, qp_rts = abi::CMDQ_MODIFY_QP_NEW_STATE_RTS,
                       qp_err = abi::CMDQ_MODIFY_QP_NEW_STATE_ERR;

constexpr std::uint32_t state = abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE, access = abi::CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS,
                        pkey = abi::CMDQ_MODIFY_QP_MODIFY_MASK_PKEY, qkey = abi::CMDQ_MODIFY_QP_MODIFY_MASK_QKEY,
                        dgid = abi::CMDQ_MODIFY_QP_MODIFY_MASK_DGID, flow_label = abi::CMDQ_MODIFY_QP_MODIFY_MASK_FLOW_LABEL,
                        sgid_index = abi::CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX,
                        hop_limit = abi::CMDQ_MODIFY_QP_MODIFY_MASK_HOP_LIMIT,
                        traffic_class = abi::CMDQ_MODIFY_QP_MODIFY_MASK_TRAFFIC_CLASS,
                        dest_mac = abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC, path_mtu = abi::CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU,
                        timeout = abi::CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT, retry_cnt = abi::CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT,
                        rnr_retry = abi::CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY, rq_psn = abi::CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN,
                        max_rd_atomic = abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_RD_ATOMIC,
                        min_rnr_timer = abi::CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER,
                        sq_psn = abi::CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN,
                        max_dest_rd_atomic = abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_DEST_RD_ATOMIC,
                        dest_qp_id = abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID, vlan_id = abi::CMDQ_MODIFY_QP_MODIFY_MASK_VLAN_ID;

// The address vector of INIT->RTR (IB_QP_AV as bnxt_re_modify_qp spreads it).
constexpr std::uint32_t av_required = dgid | sgid_index | dest_mac;
constexpr std::uint32_t av_optional = flow_label | hop_limit | traffic_class | vlan_id;

// One row of the table: the attributes a transition needs and those it may take besides.
struct transition {
    std::uint8_t from, to;
    std::uint32_t required, optional;
};

// RC (Table 93's RC column, with the Bono rules above).
constexpr transition rc_table[] = {
    {qp_reset, qp_reset, 0, 0},
    {qp_reset, qp_init, access | pkey, 0},
    {qp_init, qp_init, 0, access | pkey},
    {qp_init, qp_rtr, av_required | path_mtu | dest_qp_id | rq_psn | max_dest_rd_atomic | min_rnr_timer,
     av_optional | access | pkey},
    {qp_rtr, qp_rts, timeout | retry_cnt | rnr_retry | sq_psn | max_rd_atomic, access},
    {qp_rts, qp_rts, 0, access | min_rnr_timer},
};
// UD and GSI: a Q_Key instead of access flags and a path; RTS needs an SQ PSN only. INIT->RTR
// takes SGID_INDEX and PATH_MTU too: bnxt_re adds both for every QP type, QP1 included
// (__modify_flags_from_init_state), and the Bono firmware takes them (Linux's bnxt_re judged so
// in the guest suite).
constexpr transition ud_table[] = {
    {qp_reset, qp_reset, 0, 0},
    {qp_reset, qp_init, pkey | qkey, 0},
    {qp_init, qp_init, 0, pkey | qkey},
    {qp_init, qp_rtr, 0, pkey | qkey | sgid_index | path_mtu},
    {qp_rtr, qp_rts, sq_psn, qkey},
    {qp_rts, qp_rts, 0, qkey},
};

const char* state_name(std::uint8_t s) {
    constexpr const char* names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return s < std::size(names) ? names[s] : "?";
}

// The row for from->to, or nullptr. Every state but RESET goes to RESET and to ERR with no
// attributes (IB §10.3.1); RESET->ERR is not a transition (ib_modify_qp_is_ok's table).
const transition* find_transition(bool rc, std::uint8_t from, std::uint8_t to) {
    static constexpr transition to_reset{0, qp_reset, 0, 0}, to_err{0, qp_err, 0, 0};
    if (from != qp_reset && (to == qp_reset || to == qp_err)) {
        return to == qp_reset ? &to_reset : &to_err;
    }
    for (const transition& t : rc ? std::span<const transition>(rc_table) : std::span<const transition>(ud_table)) {
        if (t.from == from && t.to == to) {
            return &t;
        }
    }
    return nullptr;
}

// The values the masked attributes carry, each within its field's range (IB §9.7, §11.2.5);
// "" when they are, else what is wrong.
std::string out_of_range(const abi::cmdq_modify_qp& in, std::uint32_t mask, bool rc) {
    const auto has = [&](std::uint32_t bit) { return (mask & bit) != 0; };
    if (has(access) && in.access > 0xf) return "access " + rig::abi::hex(in.access);
    if (has(pkey) && in.pkey != 0xffff) return "pkey " + rig::abi::hex(in.pkey) + " (the table holds 0xffff only)";
    if (has(flow_label) && in.flow_label > 0xfffff) return "flow_label " + rig::abi::hex(in.flow_label);
    if (has(path_mtu) && in.path_mtu > abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_4096) return "path_mtu " + std::to_string(in.path_mtu);
    if (has(timeout) && in.timeout > 31) return "timeout " + std::to_string(in.timeout);
    if (has(retry_cnt) && in.retry_cnt > 7) return "retry_cnt " + std::to_string(in.retry_cnt);
    if (has(rnr_retry) && in.rnr_retry > 7) return "rnr_retry " + std::to_string(in.rnr_retry);
    if (has(min_rnr_timer) && in.min_rnr_timer > 31) return "min_rnr_timer " + std::to_string(in.min_rnr_timer);
    if (has(rq_psn) && in.rq_psn > 0xffffff) return "rq_psn " + rig::abi::hex(in.rq_psn);
    if (has(sq_psn) && in.sq_psn > 0xffffff) return "sq_psn " + rig::abi::hex(in.sq_psn);
    if (has(dest_qp_id) && in.dest_qp_id > 0xffffff) return "dest_qp_id " + rig::abi::hex(in.dest_qp_id);
    // ORRQ / IRRQ slots for an RDMA read limit of 1..16 (QUERY_FUNC max_qp_init_rd_atom and
    // max_qp_rd_atom; the Bono firmware wants at least 1): ORD_LIMIT_TO_ORRQ_SLOTS (x + 1) and
    // IRD_LIMIT_TO_IRRQ_SLOTS (2x + 2), qplib_fp.h
    if (rc && has(max_rd_atomic) && (in.max_rd_atomic < 2 || in.max_rd_atomic > 17))
        return "max_rd_atomic " + std::to_string(in.max_rd_atomic) + " (ORRQ slots 2..17)";
    if (rc && has(max_dest_rd_atomic) &&
        (in.max_dest_rd_atomic < 4 || in.max_dest_rd_atomic > 34 || in.max_dest_rd_atomic % 2 != 0))
        return "max_dest_rd_atomic " + std::to_string(in.max_dest_rd_atomic) + " (IRRQ slots 4..34, even)";
    if (has(dgid) && in.network_type == 1) return "network_type 1 (RoCE v1 0, v2 IPv4 2, v2 IPv6 3)";
    return "";
}

// The masked attributes into the QP's record.
void take(roce_qp_attributes& a, const abi::cmdq_modify_qp& in, std::span<const std::byte> cmd, std::uint32_t mask) {
    const auto has = [&](std::uint32_t bit) { return (mask & bit) != 0; };
    if (has(access)) a.access = in.access;
    if (has(pkey)) a.pkey = in.pkey;
    if (has(qkey)) a.qkey = in.qkey;
    if (has(dgid)) a.dgid = in.dgid, a.network_type = in.network_type;
    if (has(flow_label)) a.flow_label = in.flow_label;
    if (has(sgid_index)) a.sgid_index = in.sgid_index;
    if (has(hop_limit)) a.hop_limit = in.hop_limit;
    if (has(traffic_class)) a.traffic_class = in.traffic_class;
    if (has(dest_mac)) a.dest_mac = in.dest_mac;
    if (has(path_mtu)) a.path_mtu = in.path_mtu;
    if (has(timeout)) a.timeout = in.timeout;
    if (has(retry_cnt)) a.retry_cnt = in.retry_cnt;
    if (has(rnr_retry)) a.rnr_retry = in.rnr_retry;
    if (has(min_rnr_timer)) a.min_rnr_timer = in.min_rnr_timer;
    if (has(rq_psn)) a.rq_psn = in.rq_psn;
    if (has(sq_psn)) a.sq_psn = in.sq_psn;
    if (has(max_rd_atomic)) a.max_rd_atomic = in.max_rd_atomic;
    if (has(max_dest_rd_atomic)) a.max_dest_rd_atomic = in.max_dest_rd_atomic;
    if (has(dest_qp_id)) a.dest_qp_id = in.dest_qp_id;
    if (has(vlan_id)) a.vlan = rig::abi::load_le<std::uint16_t>(cmd.data() + 110);
}

}  // namespace

std::uint8_t firmware::rcfw_modify_qp(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_modify_qp>(cmd);
    const auto it = _rcfw.qps.find(in.qp_cid);
    auto bad = [&](const std::string& why) {
        _rcfw.last_error = "MODIFY_QP " + std::to_string(in.qp_cid) + ": " + why;
        log().debug("bnxt rcfw: {}", _rcfw.last_error);
        return abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    };
    if (it == _rcfw.qps.end()) {
        return bad("names no queue pair");
    }
    roce_qp& qp = it->second;
    _changes.note(&object_changes::qps, in.qp_cid);   // a refused modify changes nothing: followed the same
    const bool rc = qp.type == abi::CMDQ_CREATE_QP_TYPE_RC;
    const std::uint32_t mask = in.modify_mask;
    const std::uint8_t to = (mask & state) != 0 ? in.new_state : qp.state;
    const transition* t = find_transition(rc, qp.state, to);
    const std::string step = std::string(state_name(qp.state)) + "->" + state_name(to);
    if (t == nullptr) {
        return bad(step + " is no transition of a" + (rc ? "n RC" : " UD/GSI") + " queue pair");
    }
    const std::uint32_t attributes = mask & ~state;
    if ((attributes & t->required) != t->required) {
        return bad(step + " needs modify_mask bits " + rig::abi::hex(t->required & ~attributes));
    }
    if ((attributes & ~(t->required | t->optional)) != 0) {
        return bad(step + " takes no modify_mask bits " + rig::abi::hex(attributes & ~(t->required | t->optional)));
    }
    if (const std::string why = out_of_range(in, attributes, rc); !why.empty()) {
        return bad(step + ": " + why);
    }
    if ((attributes & sgid_index) != 0 && (in.sgid_index >= _rcfw.gids.size() || !_rcfw.gids[in.sgid_index])) {
        return bad(step + ": sgid_index " + std::to_string(in.sgid_index) + " names no GID (ADD_GID)");
    }
    take(qp.attributes, in, cmd, attributes);
    if (to == qp_reset) {
        qp.attributes = {};   // RESET forgets every attribute (IB §10.3.1)
    }
    qp.state = to;
    abi::creq_modify_qp_resp r;
    r.xid = in.qp_cid;
    const auto b = abi::to_bytes(r);
    std::memcpy(entry.data(), b.data(), entry.size());
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

}  // namespace rig::sim::bnxt
