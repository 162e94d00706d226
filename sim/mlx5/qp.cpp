// The firmware's queue-pair commands (firmware.hpp): CREATE_QP, DESTROY_QP, the modify
// commands RST2INIT .. RTS2RTS, 2ERR, 2RST, and QUERY_QP, for RC over RoCE (mlx5_ifc.h;
// the kernel's drivers/infiniband/hw/mlx5/qp.c).
//
// The state machine is the kernel's optab (drivers/infiniband/hw/mlx5/qp.c): RST->INIT, INIT->INIT,
// INIT->RTR, RTR->RTS, RTS->RTS, SQER->RTS, SQD->RTS, and from every state ->ERR and ->RST. Any
// other modify gets BAD_QP_STATE_ERR. A transition copies into the stored context the fields it
// takes (mandatory ones always, optional ones when their opt_param_mask bit is set; a bit the
// transition does not take is BAD_PARAM_ERR), after checking them: a required field that is
// absent (0 where 0 means nothing) or outside the capabilities is BAD_PARAM_ERR, and the QP is
// left as it was.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "abi/mlx5/ifc/qp.hpp"
#include "sim/mlx5/call.hpp"

namespace rig::sim::mlx5 {

namespace {

namespace optpar = ifc::qp_optpar;
using ifc::qpc_state;

// A field of the qpc inside a modify command (rst2init_qp_in and its siblings share the layout).
constexpr abi::field in_qpc(abi::field f) noexcept { return ifc::rst2init_qp_in::qpc(f); }
constexpr abi::field in_path(abi::field f) noexcept {
    return ifc::rst2init_qp_in::qpc(ifc::qpc::primary_address_path(f));
}
constexpr abi::field path(abi::field f) noexcept { return ifc::qpc::primary_address_path(f); }

bool all_zero(std::span<const std::byte> b) {
    return std::ranges::all_of(b, [](std::byte x) { return x == std::byte{0}; });
}

// The transition a modify opcode asks for: the state it needs and the state it leaves.
struct transition {
    bool any_state;   // 2ERR, 2RST
    qpc_state from;
    qpc_state to;
    // opt_param_mask bits it takes: the kernel's opt_mask table (kernel hw/mlx5/qp.c) less
    // ALT_ADDR_PATH (alternate paths are not modelled, so asking for one is BAD_PARAM_ERR)
    std::uint32_t optional;
};

constexpr std::uint32_t rts_optional = optpar::rre | optpar::rae | optpar::rwe | optpar::rnr_timeout |
                                       optpar::pm_state | optpar::offload_type;

std::optional<transition> transition_of(ifc::opcode op) {
    using o = ifc::opcode;
    switch (op) {
    case o::rst2init_qp: return transition{false, qpc_state::rst, qpc_state::init, 0};
    case o::init2init_qp:
        return transition{false, qpc_state::init, qpc_state::init,
                          optpar::rre | optpar::rae | optpar::rwe | optpar::pkey_index | optpar::pri_port};
    case o::init2rtr_qp:
        return transition{false, qpc_state::init, qpc_state::rtr,
                          optpar::rre | optpar::rae | optpar::rwe | optpar::pkey_index};
    case o::rtr2rts_qp: return transition{false, qpc_state::rtr, qpc_state::rts, rts_optional};
    case o::rts2rts_qp: return transition{false, qpc_state::rts, qpc_state::rts, rts_optional};
    case o::sqerr2rts_qp: return transition{false, qpc_state::sqer, qpc_state::rts, rts_optional};
    case o::sqd_rts_qp: return transition{false, qpc_state::sqd, qpc_state::rts, rts_optional};
    case o::qp_2err: return transition{true, qpc_state::rst, qpc_state::err, 0};
    case o::qp_2rst: return transition{true, qpc_state::rst, qpc_state::rst, 0};
    default: return std::nullopt;
    }
}

void copy_field(std::span<std::byte> qpc, std::span<const std::byte> in, abi::field f) {
    abi::set(qpc, f, abi::get(in, in_qpc(f)));
}

}  // namespace

// ---- CREATE_QP (mlx5_ifc.h; kernel hw/mlx5/qp.c) ------------------------------------------------

void firmware::create_qp(call& c) {
    using In = ifc::create_qp_in;
    if (!c.sizes<In, ifc::create_qp_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    constexpr auto ctx = In::qpc;
    qp_object q;
    q.pd = static_cast<std::uint32_t>(c.get(ctx(ifc::qpc::pd)));
    q.cqn_snd = static_cast<std::uint32_t>(c.get(ctx(ifc::qpc::cqn_snd)));
    q.cqn_rcv = static_cast<std::uint32_t>(c.get(ctx(ifc::qpc::cqn_rcv)));
    q.uar_page = static_cast<std::uint32_t>(c.get(ctx(ifc::qpc::uar_page)));
    q.log_sq_size = static_cast<std::uint8_t>(c.get(ctx(ifc::qpc::log_sq_size)));
    q.log_rq_size = static_cast<std::uint8_t>(c.get(ctx(ifc::qpc::log_rq_size)));
    q.log_rq_stride = static_cast<std::uint8_t>(c.get(ctx(ifc::qpc::log_rq_stride)));
    q.dbr_addr = c.get(ctx(ifc::qpc::dbr_addr));
    q.log_page_size = static_cast<std::uint8_t>(c.get(ctx(ifc::qpc::log_page_size)));
    q.page_offset = static_cast<std::uint32_t>(c.get(ctx(ifc::qpc::page_offset)));
    const bool no_sq = c.get(ctx(ifc::qpc::no_sq)) != 0;
    // Modelled: RC QPs with a regular RQ and their own buffer (no SRQ, no UMEM, no qpc
    // extension, no firmware-chosen QPN). Other service types are BAD_PARAM_ERR.
    if (c.get(ctx(ifc::qpc::st)) != static_cast<std::uint8_t>(ifc::qpc_st::rc) ||
        c.get(ctx(ifc::qpc::rq_type)) != 0 || c.get(In::input_qpn) != 0 || c.get(In::qpc_ext) != 0 ||
        c.get(In::wq_umem_valid) != 0 || c.get(ctx(ifc::qpc::dbr_umem_valid)) != 0 ||
        c.get(ctx(ifc::qpc::state)) != static_cast<std::uint8_t>(qpc_state::rst)) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    if (q.log_sq_size > _options.log_max_qp_sz || q.log_rq_size > _options.log_max_qp_sz ||
        q.log_rq_stride > _options.log_rq_stride_max) {
        c.fail(cmd_status::bad_param_err, failure::bad_size);
        return;
    }
    if (!_pds.contains(q.pd) || !_cqs.contains(q.cqn_snd) || !_cqs.contains(q.cqn_rcv) ||
        !_uars.contains(q.uar_page)) {
        c.fail(cmd_status::bad_param_err, failure::bad_reference);
        return;
    }
    std::array<std::byte, 8> probe;
    if (q.dbr_addr % 8 != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    if (c.dma == nullptr || !c.dma->read(q.dbr_addr, probe)) {
        c.fail(cmd_status::bad_param_err, failure::page_not_mapped);
        return;
    }
    // One buffer: the RQ at 0, the SQ after it (kernel hw/mlx5/qp.c: qp->sq.offset = rq.wqe_cnt <<
    // rq.wqe_shift).
    const std::size_t bytes = q.rq_bytes() + (no_sq ? 0 : q.sq_bytes());
    if (!queue_pages(c, q.log_page_size, q.page_offset, bytes, &ifc::pas_entry<In>, q.pas)) {
        return;
    }
    if (no_sq) {
        q.log_sq_size = 0;
    }
    const auto qpn = detail::free_number(_qps, _next_qp, 0x100, 0xffffff - 0x100);
    if (!qpn) {
        c.fail(cmd_status::no_res_err, failure::no_resources);
        return;
    }
    q.qpn = *qpn;
    q.state = qpc_state::rst;
    const auto given = abi::bytes_of(c.in, ctx.whole());
    std::copy(given.begin(), given.end(), q.qpc.begin());
    q.qpc_at_create = q.qpc;
    _qps.emplace(*qpn, std::move(q));
    _changes.note(&object_changes::qps, *qpn);
    c.set(ifc::create_qp_out::qpn, *qpn);
}

void firmware::destroy_qp(call& c) {
    destroy_named<ifc::destroy_qp_in, ifc::destroy_qp_out>(c, ifc::destroy_qp_in::qpn, _qps,
                                                           [](std::uint32_t) { return false; });
    if (!c.failed) {
        _changes.note(&object_changes::qps, static_cast<std::uint32_t>(c.get(ifc::destroy_qp_in::qpn)));
    }
}

const qp_object* firmware::qp(std::uint32_t qpn) const {
    const auto it = _qps.find(qpn);
    return it != _qps.end() ? &it->second : nullptr;
}

// ---- the transitions (kernel hw/mlx5/qp.c) ------------------------------------------------------

void firmware::modify_qp(call& c) {
    const auto op = static_cast<ifc::opcode>(c.opcode);
    const bool header_only = op == ifc::opcode::qp_2err || op == ifc::opcode::qp_2rst;
    if (header_only ? !c.sizes<ifc::qp_2err_in, ifc::qp_2err_out>()
                    : !c.sizes<ifc::rst2init_qp_in, ifc::rst2init_qp_out>()) {
        return;
    }
    if (!in_state(c, hca_state::initialized)) {
        return;
    }
    const auto t = transition_of(op);
    const auto qpn = static_cast<std::uint32_t>(c.get(ifc::qp_2err_in::qpn));  // same place in every modify
    const auto it = _qps.find(qpn);
    if (!t || it == _qps.end()) {
        c.fail(cmd_status::bad_res_state_err, failure::unknown_object);
        return;
    }
    qp_object& q = it->second;
    _changes.note(&object_changes::qps, qpn);   // a refused transition changes nothing: followed the same
    if (!t->any_state && q.state != t->from) {
        c.fail(cmd_status::bad_qp_state_err, failure::bad_transition);
        return;
    }
    if (op == ifc::opcode::qp_2rst) {
        q.qpc = q.qpc_at_create;  // back to the context CREATE_QP gave
        q.state = qpc_state::rst;
        return;
    }
    if (op == ifc::opcode::qp_2err) {
        q.state = qpc_state::err;
        abi::set<ifc::qpc::state>(q.qpc, static_cast<std::uint8_t>(qpc_state::err));
        return;
    }
    const std::uint32_t mask = static_cast<std::uint32_t>(c.get(ifc::rst2init_qp_in::opt_param_mask));
    if ((mask & ~t->optional) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    // Check everything first, then copy: a refused transition leaves the QP as it was.
    std::array<std::byte, ifc::qpc::size_bytes> next = q.qpc;
    const auto in = c.in;
    const auto get = [&](abi::field f) { return c.get(in_qpc(f)); };
    const auto get_path = [&](abi::field f) { return c.get(in_path(f)); };
    const auto missing = [&] { c.fail(cmd_status::bad_param_err, failure::missing_field); };
    switch (op) {
    case ifc::opcode::rst2init_qp:
        // One physical port (vhca_port_num 1) and, on RoCE, a one-entry P_Key table.
        if (get_path(ifc::ads::vhca_port_num) != 1 || get_path(ifc::ads::pkey_index) != 0) {
            missing();
            return;
        }
        for (abi::field f : {ifc::qpc::rre, ifc::qpc::rwe, ifc::qpc::rae, ifc::qpc::atomic_mode,
                             ifc::qpc::counter_set_id}) {
            copy_field(next, in, f);
        }
        copy_field(next, in, path(ifc::ads::vhca_port_num));
        copy_field(next, in, path(ifc::ads::pkey_index));
        break;
    case ifc::opcode::init2init_qp:
        break;  // only the optional fields below
    case ifc::opcode::init2rtr_qp: {
        // RoCE RC: a path MTU of 256..4096, the peer's QPN (never QP0/QP1), its GID and MAC,
        // a source GID that the GID table holds (SET_ROCE_ADDRESS), a RoCEv2 UDP source port
        // in the dynamic range (r_roce_min_src_udp_port 0xc000), and responder resources
        // within log_max_ra_res_qp.
        const auto mtu = get(ifc::qpc::mtu);
        const auto port = get_path(ifc::ads::vhca_port_num);
        const auto rgid = abi::bytes_of(in, in_path(ifc::ads::rgid_rip));
        if (mtu < static_cast<std::uint8_t>(ifc::qpc_mtu::bytes_256) ||
            mtu > static_cast<std::uint8_t>(ifc::qpc_mtu::bytes_4k) || get(ifc::qpc::remote_qpn) < 2 ||
            all_zero(rgid) || (get_path(ifc::ads::rmac_47_32) == 0 && get_path(ifc::ads::rmac_31_0) == 0) ||
            gid(static_cast<std::uint32_t>(get_path(ifc::ads::src_addr_index))) == nullptr ||
            get_path(ifc::ads::udp_sport) < 0xc000 || get(ifc::qpc::log_rra_max) > _options.log_max_ra_res_qp ||
            get(ifc::qpc::log_msg_max) > _options.log_max_msg || (port != 0 && port != 1)) {
            missing();
            return;
        }
        for (abi::field f : {ifc::qpc::mtu, ifc::qpc::log_msg_max, ifc::qpc::remote_qpn, ifc::qpc::next_rcv_psn,
                             ifc::qpc::min_rnr_nak, ifc::qpc::log_rra_max}) {
            copy_field(next, in, f);
        }
        // The primary path, keeping the port and P_Key index RST2INIT set (unless the
        // path names them again).
        const auto keep_port = abi::get(next, path(ifc::ads::vhca_port_num));
        const auto keep_pkey = abi::get(next, path(ifc::ads::pkey_index));
        abi::set_bytes(next, ifc::qpc::primary_address_path.whole(),
                       abi::bytes_of(in, ifc::rst2init_qp_in::qpc(ifc::qpc::primary_address_path.whole())));
        if (port == 0) {
            abi::set(next, path(ifc::ads::vhca_port_num), keep_port);
        }
        if ((mask & optpar::pkey_index) == 0) {
            abi::set(next, path(ifc::ads::pkey_index), keep_pkey);
        }
        abi::set(next, path(ifc::ads::ack_timeout), 0);  // set by RTR2RTS
        break;
    }
    case ifc::opcode::rtr2rts_qp:
        // Every value of retry_count, rnr_retry (7: without end), ack_timeout (0: no timer) and
        // next_send_psn is meaningful; requester reads are bounded by log_max_ra_req_qp.
        if (get(ifc::qpc::log_sra_max) > _options.log_max_ra_req_qp) {
            missing();
            return;
        }
        for (abi::field f : {ifc::qpc::next_send_psn, ifc::qpc::retry_count, ifc::qpc::rnr_retry,
                             ifc::qpc::log_sra_max, ifc::qpc::log_ack_req_freq}) {
            copy_field(next, in, f);
        }
        copy_field(next, in, path(ifc::ads::ack_timeout));
        break;
    default:
        break;  // RTS2RTS, SQERR2RTS, SQD_RTS: only the optional fields below
    }
    if ((mask & optpar::pkey_index) != 0) {
        if (get_path(ifc::ads::pkey_index) != 0) {
            missing();
            return;
        }
        copy_field(next, in, path(ifc::ads::pkey_index));
    }
    const std::pair<std::uint32_t, abi::field> optional[] = {
        {optpar::rre, ifc::qpc::rre},           {optpar::rwe, ifc::qpc::rwe},
        {optpar::rae, ifc::qpc::rae},           {optpar::rnr_timeout, ifc::qpc::min_rnr_nak},
        {optpar::pm_state, ifc::qpc::pm_state}, {optpar::offload_type, ifc::qpc::offload_type},
        {optpar::pri_port, path(ifc::ads::vhca_port_num)},
    };
    for (const auto& [bit, f] : optional) {
        if ((mask & bit) != 0) {
            copy_field(next, in, f);
        }
    }
    q.qpc = next;
    q.state = t->to;
    abi::set<ifc::qpc::state>(q.qpc, static_cast<std::uint8_t>(t->to));
}

// ---- QUERY_QP -------------------------------------------------------------------------------

void firmware::query_qp(call& c) {
    using Out = ifc::query_qp_out;
    if (!c.sizes<ifc::query_qp_in, Out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    const auto it = _qps.find(static_cast<std::uint32_t>(c.get(ifc::query_qp_in::qpn)));
    if (it == _qps.end()) {
        c.fail(cmd_status::bad_res_state_err, failure::unknown_object);
        return;
    }
    if (c.get(ifc::query_qp_in::qpc_ext) != 0) {  // no qpc extension is advertised
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    const qp_object& q = it->second;
    abi::set_bytes(c.out, Out::qpc.whole(), q.qpc);
    abi::set<Out::qpc(ifc::qpc::state)>(c.out, static_cast<std::uint8_t>(q.state));
    // The page list follows the context, as far as the output holds it.
    for (std::size_t i = 0; i < q.pas.size() && ifc::query_qp_out_pas(i).end() <= c.out.size() * 8; ++i) {
        c.set(ifc::query_qp_out_pas(i), q.pas[i]);
    }
}

}  // namespace rig::sim::mlx5
