#pragma once
// Queue pairs: the address path (ads), the QP context (qpc), CREATE/DESTROY_QP, the state
// transitions RST2INIT, INIT2RTR, RTR2RTS, RTS2RTS, 2ERR, 2RST, and QUERY_QP. Layouts after
// mlx5_ifc.h; their use as the kernel's drivers/infiniband/hw/mlx5/qp.c makes it.
//
// qpc and ads list every named field of the kernel's structs, not only the RC-over-RoCE ones:
// the device model must see whatever a driver writes. The fields a RoCE RC driver sets: st,
// pm_state, pd, cqn_snd, cqn_rcv, uar_page, log_page_size, page_offset, dbr_addr, ts_format, rq_type,
// log_rq_size, log_rq_stride, log_sq_size, no_sq (CREATE_QP); rre, rwe, rae, primary path
// vhca_port_num/pkey_index (RST2INIT); mtu, log_msg_max, remote_qpn, next_rcv_psn, min_rnr_nak,
// log_rra_max, primary path rgid_rip, rmac_47_32/31_0, src_addr_index, hop_limit, tclass,
// flow_label, udp_sport, dscp, eth_prio, stat_rate (INIT2RTR); next_send_psn, retry_count,
// rnr_retry, log_sra_max, log_ack_req_freq, primary path ack_timeout (RTR2RTS); and reads
// state (QUERY_QP).
#include <cstdint>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// mlx5_ifc.h ads, the address path (44 bytes). For RoCE: rgid_rip = the peer's GID (16 bytes),
// rmac_47_32/rmac_31_0 = its MAC, src_addr_index = our GID table index (SET_ROCE_ADDRESS),
// udp_sport = the RoCEv2 UDP source port, ack_timeout = 4.096 us * 2^n.
#define RIG_MLX5_ADS(F, S)          \
    F(fl,             0x0,   0x1)   \
    F(free_ar,        0x1,   0x1)   \
    F(pkey_index,     0x10,  0x10)  \
    F(plane_index,    0x20,  0x8)   \
    F(grh,            0x28,  0x1)   \
    F(mlid,           0x29,  0x7)   \
    F(rlid,           0x30,  0x10)  \
    F(ack_timeout,    0x40,  0x5)   \
    F(src_addr_index, 0x48,  0x8)   \
    F(stat_rate,      0x54,  0x4)   \
    F(hop_limit,      0x58,  0x8)   \
    F(tclass,         0x64,  0x8)   \
    F(flow_label,     0x6c,  0x14)  \
    F(rgid_rip,       0x80,  0x80)  \
    F(f_dscp,         0x104, 0x1)   \
    F(f_ecn,          0x105, 0x1)   \
    F(f_eth_prio,     0x107, 0x1)   \
    F(ecn,            0x108, 0x2)   \
    F(dscp,           0x10a, 0x6)   \
    F(udp_sport,      0x110, 0x10)  \
    F(dei_cfi,        0x120, 0x1)   \
    F(eth_prio,       0x121, 0x3)   \
    F(sl,             0x124, 0x4)   \
    F(vhca_port_num,  0x128, 0x8)   \
    F(rmac_47_32,     0x130, 0x10)  \
    F(rmac_31_0,      0x140, 0x20)
RIG_MLX5_LAYOUT(ads, 0x160, RIG_MLX5_ADS)

// mlx5_ifc.h qpc (232 bytes). log_page_size is relative to 4 KiB; log_rq_stride is
// log2(RQ WQE bytes) - 4; log_sq_size counts 64-byte WQE basic blocks.
#define RIG_MLX5_QPC(F, S)                       \
    F(state,                       0x0,   0x4)   \
    F(lag_tx_port_affinity,        0x4,   0x4)   \
    F(st,                          0x8,   0x8)   \
    F(isolate_vl_tc,               0x12,  0x1)   \
    F(pm_state,                    0x13,  0x2)   \
    F(req_e2e_credit_mode,         0x16,  0x2)   \
    F(offload_type,                0x18,  0x4)   \
    F(end_padding_mode,            0x1c,  0x2)   \
    F(wq_signature,                0x20,  0x1)   \
    F(block_lb_mc,                 0x21,  0x1)   \
    F(atomic_like_write_en,        0x22,  0x1)   \
    F(latency_sensitive,           0x23,  0x1)   \
    F(drain_sigerr,                0x25,  0x1)   \
    F(pd,                          0x28,  0x18)  \
    F(mtu,                         0x40,  0x3)   \
    F(log_msg_max,                 0x43,  0x5)   \
    F(log_rq_size,                 0x49,  0x4)   \
    F(log_rq_stride,               0x4d,  0x3)   \
    F(no_sq,                       0x50,  0x1)   \
    F(log_sq_size,                 0x51,  0x4)   \
    F(retry_mode,                  0x56,  0x2)   \
    F(ts_format,                   0x58,  0x2)   \
    F(rlky,                        0x5b,  0x1)   \
    F(ulp_stateless_offload_mode,  0x5c,  0x4)   \
    F(counter_set_id,              0x60,  0x8)   \
    F(uar_page,                    0x68,  0x18)  \
    F(user_index,                  0x88,  0x18)  \
    F(log_page_size,               0xa3,  0x5)   \
    F(remote_qpn,                  0xa8,  0x18)  \
    S(primary_address_path,        0xc0,  ads)   \
    S(secondary_address_path,      0x220, ads)   \
    F(log_ack_req_freq,            0x380, 0x4)   \
    F(log_sra_max,                 0x388, 0x3)   \
    F(retry_count,                 0x38d, 0x3)   \
    F(rnr_retry,                   0x390, 0x3)   \
    F(fre,                         0x394, 0x1)   \
    F(cur_rnr_retry,               0x395, 0x3)   \
    F(cur_retry_count,             0x398, 0x3)   \
    F(next_send_psn,               0x3c8, 0x18)  \
    F(log_num_dci_stream_channels, 0x3e3, 0x5)   \
    F(cqn_snd,                     0x3e8, 0x18)  \
    F(log_num_dci_errored_streams, 0x403, 0x5)   \
    F(deth_sqpn,                   0x408, 0x18)  \
    F(last_acked_psn,              0x448, 0x18)  \
    F(ssn,                         0x468, 0x18)  \
    F(log_rra_max,                 0x488, 0x3)   \
    F(atomic_mode,                 0x48c, 0x4)   \
    F(rre,                         0x490, 0x1)   \
    F(rwe,                         0x491, 0x1)   \
    F(rae,                         0x492, 0x1)   \
    F(page_offset,                 0x494, 0x6)   \
    F(cd_slave_receive,            0x49d, 0x1)   \
    F(cd_slave_send,               0x49e, 0x1)   \
    F(cd_master,                   0x49f, 0x1)   \
    F(min_rnr_nak,                 0x4a3, 0x5)   \
    F(next_rcv_psn,                0x4a8, 0x18)  \
    F(xrcd,                        0x4c8, 0x18)  \
    F(cqn_rcv,                     0x4e8, 0x18)  \
    F(dbr_addr,                    0x500, 0x40)  \
    F(q_key,                       0x540, 0x20)  \
    F(rq_type,                     0x565, 0x3)   \
    F(srqn_rmpn_xrqn,              0x568, 0x18)  \
    F(rmsn,                        0x588, 0x18)  \
    F(hw_sq_wqebb_counter,         0x5a0, 0x10)  \
    F(sw_sq_wqebb_counter,         0x5b0, 0x10)  \
    F(hw_rq_counter,               0x5c0, 0x20)  \
    F(sw_rq_counter,               0x5e0, 0x20)  \
    F(cgs,                         0x62f, 0x1)   \
    F(cs_req,                      0x630, 0x8)   \
    F(cs_res,                      0x638, 0x8)   \
    F(dc_access_key,               0x640, 0x40)  \
    F(dbr_umem_valid,              0x683, 0x1)
RIG_MLX5_LAYOUT(qpc, 0x740, RIG_MLX5_QPC)

enum class qpc_st : std::uint8_t {  // MLX5_QPC_ST_*
    rc = 0x0,
    uc = 0x1,
    ud = 0x2,
    xrc = 0x3,
    dci = 0x5,
    qp0 = 0x7,
    qp1 = 0x8,
    raw_datagram = 0x9,
    reg_umr = 0xc,
};
enum class qpc_state : std::uint8_t {  // MLX5_QPC_STATE_*
    rst = 0x0,
    init = 0x1,
    rtr = 0x2,
    rts = 0x3,
    sqer = 0x4,
    err = 0x6,
    sqd = 0x7,
    suspended = 0x9,
};
enum class qpc_pm_state : std::uint8_t {  // MLX5_QPC_PM_STATE_*
    armed = 0x0,
    rearm = 0x1,
    reserved = 0x2,
    migrated = 0x3,
};
enum class qpc_mtu : std::uint8_t {  // MLX5_QPC_MTU_*
    bytes_256 = 0x1,
    bytes_512 = 0x2,
    bytes_1k = 0x3,
    bytes_2k = 0x4,
    bytes_4k = 0x5,
    raw_ethernet_qp = 0x7,
};
enum class qpc_atomic_mode : std::uint8_t {  // MLX5_QPC_ATOMIC_MODE_*
    ib_spec = 0x1,
    only_8b = 0x2,
    up_to_8b = 0x3,
    up_to_16b = 0x4,
    up_to_32b = 0x5,
    up_to_64b = 0x6,
    up_to_128b = 0x7,
    up_to_256b = 0x8,
};
// opt_param_mask bits of the modify commands (kernel include/linux/mlx5/qp.h enum mlx5_qp_optpar;
// not in mlx5_ifc.h). Mandatory fields of a transition need no bit.
namespace qp_optpar {
inline constexpr std::uint32_t alt_addr_path = 1u << 0;
inline constexpr std::uint32_t rre = 1u << 1;
inline constexpr std::uint32_t rae = 1u << 2;
inline constexpr std::uint32_t rwe = 1u << 3;
inline constexpr std::uint32_t pkey_index = 1u << 4;
inline constexpr std::uint32_t q_key = 1u << 5;
inline constexpr std::uint32_t rnr_timeout = 1u << 6;
inline constexpr std::uint32_t primary_addr_path = 1u << 7;
inline constexpr std::uint32_t sra_max = 1u << 8;
inline constexpr std::uint32_t rra_max = 1u << 9;
inline constexpr std::uint32_t pm_state = 1u << 10;
inline constexpr std::uint32_t retry_count = 1u << 12;
inline constexpr std::uint32_t rnr_retry = 1u << 13;
inline constexpr std::uint32_t ack_timeout = 1u << 14;
inline constexpr std::uint32_t pri_port = 1u << 16;
inline constexpr std::uint32_t srqn = 1u << 18;
inline constexpr std::uint32_t cqn_rcv = 1u << 19;
inline constexpr std::uint32_t dc_hs = 1u << 20;
inline constexpr std::uint32_t dc_key = 1u << 21;
inline constexpr std::uint32_t offload_type = 1u << 24;
}  // namespace qp_optpar

// CREATE_QP (0x500): the pages of the work-queue buffer (RQ at offset 0, SQ after it) follow
// the fixed part: pas_entry<create_qp_in>(i).
#define RIG_MLX5_CREATE_QP_IN(F, S)  \
    F(opcode,         0x0,   0x10)   \
    F(uid,            0x10,  0x10)   \
    F(op_mod,         0x30,  0x10)   \
    F(qpc_ext,        0x40,  0x1)    \
    F(input_qpn,      0x48,  0x18)   \
    F(opt_param_mask, 0x80,  0x20)   \
    F(ece,            0xa0,  0x20)   \
    S(qpc,            0xc0,  qpc)    \
    F(wq_umem_offset, 0x800, 0x40)   \
    F(wq_umem_id,     0x840, 0x20)   \
    F(wq_umem_valid,  0x860, 0x1)
RIG_MLX5_LAYOUT(create_qp_in, 0x880, RIG_MLX5_CREATE_QP_IN)

#define RIG_MLX5_CREATE_QP_OUT(F, S)  \
    F(status,   0x0,  0x8)            \
    F(syndrome, 0x20, 0x20)           \
    F(qpn,      0x48, 0x18)           \
    F(ece,      0x60, 0x20)
RIG_MLX5_LAYOUT(create_qp_out, 0x80, RIG_MLX5_CREATE_QP_OUT)

// DESTROY_QP (0x501).
#define RIG_MLX5_DESTROY_QP_IN(F, S)  \
    F(opcode, 0x0,  0x10)             \
    F(uid,    0x10, 0x10)             \
    F(op_mod, 0x30, 0x10)             \
    F(qpn,    0x48, 0x18)
RIG_MLX5_LAYOUT(destroy_qp_in, 0x80, RIG_MLX5_DESTROY_QP_IN)

#define RIG_MLX5_DESTROY_QP_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(destroy_qp_out, 0x80, RIG_MLX5_DESTROY_QP_OUT)

// The transitions. Each is 0x110 bytes in, with the fields of its step set in qpc.
#define RIG_MLX5_RST2INIT_QP_IN(F, S)  \
    F(opcode,         0x0,  0x10)      \
    F(uid,            0x10, 0x10)      \
    F(op_mod,         0x30, 0x10)      \
    F(qpn,            0x48, 0x18)      \
    F(opt_param_mask, 0x80, 0x20)      \
    F(ece,            0xa0, 0x20)      \
    S(qpc,            0xc0, qpc)
RIG_MLX5_LAYOUT(rst2init_qp_in, 0x880, RIG_MLX5_RST2INIT_QP_IN)

#define RIG_MLX5_RST2INIT_QP_OUT(F, S)  \
    F(status,   0x0,  0x8)              \
    F(syndrome, 0x20, 0x20)             \
    F(ece,      0x60, 0x20)
RIG_MLX5_LAYOUT(rst2init_qp_out, 0x80, RIG_MLX5_RST2INIT_QP_OUT)

#define RIG_MLX5_INIT2RTR_QP_IN(F, S)  \
    F(opcode,         0x0,  0x10)      \
    F(uid,            0x10, 0x10)      \
    F(op_mod,         0x30, 0x10)      \
    F(qpn,            0x48, 0x18)      \
    F(opt_param_mask, 0x80, 0x20)      \
    F(ece,            0xa0, 0x20)      \
    S(qpc,            0xc0, qpc)
RIG_MLX5_LAYOUT(init2rtr_qp_in, 0x880, RIG_MLX5_INIT2RTR_QP_IN)

#define RIG_MLX5_INIT2RTR_QP_OUT(F, S)  \
    F(status,   0x0,  0x8)              \
    F(syndrome, 0x20, 0x20)             \
    F(ece,      0x60, 0x20)
RIG_MLX5_LAYOUT(init2rtr_qp_out, 0x80, RIG_MLX5_INIT2RTR_QP_OUT)

#define RIG_MLX5_RTR2RTS_QP_IN(F, S)  \
    F(opcode,         0x0,  0x10)     \
    F(uid,            0x10, 0x10)     \
    F(op_mod,         0x30, 0x10)     \
    F(qpn,            0x48, 0x18)     \
    F(opt_param_mask, 0x80, 0x20)     \
    F(ece,            0xa0, 0x20)     \
    S(qpc,            0xc0, qpc)
RIG_MLX5_LAYOUT(rtr2rts_qp_in, 0x880, RIG_MLX5_RTR2RTS_QP_IN)

#define RIG_MLX5_RTR2RTS_QP_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)            \
    F(ece,      0x60, 0x20)
RIG_MLX5_LAYOUT(rtr2rts_qp_out, 0x80, RIG_MLX5_RTR2RTS_QP_OUT)

#define RIG_MLX5_RTS2RTS_QP_IN(F, S)  \
    F(opcode,         0x0,  0x10)     \
    F(uid,            0x10, 0x10)     \
    F(op_mod,         0x30, 0x10)     \
    F(qpn,            0x48, 0x18)     \
    F(opt_param_mask, 0x80, 0x20)     \
    F(ece,            0xa0, 0x20)     \
    S(qpc,            0xc0, qpc)
RIG_MLX5_LAYOUT(rts2rts_qp_in, 0x880, RIG_MLX5_RTS2RTS_QP_IN)

#define RIG_MLX5_RTS2RTS_QP_OUT(F, S)  \
    F(status,   0x0,  0x8)             \
    F(syndrome, 0x20, 0x20)            \
    F(ece,      0x60, 0x20)
RIG_MLX5_LAYOUT(rts2rts_qp_out, 0x80, RIG_MLX5_RTS2RTS_QP_OUT)

// 2ERR_QP (0x507) and 2RST_QP (0x50a): header and qpn only. mlx5_ifc.h calls them qp_2err_*
// and qp_2rst_*, so the names are valid C++ as they are.
#define RIG_MLX5_QP_2ERR_IN(F, S)  \
    F(opcode, 0x0,  0x10)          \
    F(uid,    0x10, 0x10)          \
    F(op_mod, 0x30, 0x10)          \
    F(qpn,    0x48, 0x18)
RIG_MLX5_LAYOUT(qp_2err_in, 0x80, RIG_MLX5_QP_2ERR_IN)

#define RIG_MLX5_QP_2ERR_OUT(F, S)  \
    F(status,   0x0,  0x8)          \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(qp_2err_out, 0x80, RIG_MLX5_QP_2ERR_OUT)

#define RIG_MLX5_QP_2RST_IN(F, S)  \
    F(opcode, 0x0,  0x10)          \
    F(uid,    0x10, 0x10)          \
    F(op_mod, 0x30, 0x10)          \
    F(qpn,    0x48, 0x18)
RIG_MLX5_LAYOUT(qp_2rst_in, 0x80, RIG_MLX5_QP_2RST_IN)

#define RIG_MLX5_QP_2RST_OUT(F, S)  \
    F(status,   0x0,  0x8)          \
    F(syndrome, 0x20, 0x20)
RIG_MLX5_LAYOUT(qp_2rst_out, 0x80, RIG_MLX5_QP_2RST_OUT)

// QUERY_QP (0x50b). After qpc comes the C union qp_pas_or_qpc_ext_and_pas: with qpc_ext = 0 it
// is the QP's page list (query_qp_out_pas(i), starting at byte 0x110), with qpc_ext = 1 a
// 192-byte qpc extension and then the pages. It is described as the byte string it is.
#define RIG_MLX5_QUERY_QP_IN(F, S)  \
    F(opcode,  0x0,  0x10)          \
    F(op_mod,  0x30, 0x10)          \
    F(qpc_ext, 0x40, 0x1)           \
    F(qpn,     0x48, 0x18)
RIG_MLX5_LAYOUT(query_qp_in, 0x80, RIG_MLX5_QUERY_QP_IN)

#define RIG_MLX5_QUERY_QP_OUT(F, S)             \
    F(status,                    0x0,   0x8)    \
    F(syndrome,                  0x20,  0x20)   \
    F(opt_param_mask,            0x80,  0x20)   \
    F(ece,                       0xa0,  0x20)   \
    S(qpc,                       0xc0,  qpc)    \
    F(qp_pas_or_qpc_ext_and_pas, 0x880, 0x600)
RIG_MLX5_LAYOUT(query_qp_out, 0xe80, RIG_MLX5_QUERY_QP_OUT)

constexpr ::rig::abi::field query_qp_out_pas(std::size_t i) noexcept {
    return flex_entry(query_qp_out::qp_pas_or_qpc_ext_and_pas.off, 64, i);
}

}  // namespace rig::mlx5::ifc
