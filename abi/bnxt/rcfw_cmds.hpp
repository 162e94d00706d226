#pragma once
// The CMDQ commands a RoCE-only driver sends and their CREQ completions (bnxt_re's
// qplib_rcfw.c and qplib_fp.c send them), laid out as Linux 6.12 roce_hsi.h lays them out. Command
// defaults: opcode, and cmd_size = the command's slot count; the caller sets flags, cookie, and
// resp_addr for the commands with a side buffer (QUERY_FUNC, QUERY_QP). Fields not listed are
// written as zero.
#include "abi/bnxt/rcfw.hpp"

namespace rig::bnxt::abi {

// flags and enumerations of the commands below (values as in roce_hsi.h; a value of a
// sub-field we declare on its own, e.g. new_state, is the field's value, not shifted)
inline constexpr std::uint16_t CMDQ_INITIALIZE_FW_FLAGS_MRAV_RESERVATION_SPLIT = 0x1;
inline constexpr std::uint16_t CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED = 0x2;
inline constexpr std::uint16_t CMDQ_SET_FUNC_RESOURCES_FLAGS_MRAV_RESERVATION_SPLIT = 0x1;
inline constexpr std::uint16_t CREQ_QUERY_FUNC_RESP_SB_MR_REGISTER_ALLOC = 0x20;
inline constexpr std::uint16_t CREQ_QUERY_FUNC_RESP_SB_HW_REQUESTER_RETX_ENABLED = 0x200;
inline constexpr std::uint16_t CREQ_QUERY_FUNC_RESP_SB_HW_RESPONDER_RETX_ENABLED = 0x400;
inline constexpr std::uint8_t CREQ_QUERY_FUNC_RESP_SB_FIXED_SIZE_WQE_DISABLED = 0x40;
inline constexpr std::uint32_t CMDQ_CREATE_QP_QP_FLAGS_SRQ_USED = 0x1;
inline constexpr std::uint32_t CMDQ_CREATE_QP_QP_FLAGS_FORCE_COMPLETION = 0x2;
inline constexpr std::uint32_t CMDQ_CREATE_QP_QP_FLAGS_RESERVED_LKEY_ENABLE = 0x4;
inline constexpr std::uint32_t CMDQ_CREATE_QP_QP_FLAGS_FR_PMR_ENABLED = 0x8;
inline constexpr std::uint32_t CMDQ_CREATE_QP_QP_FLAGS_VARIABLE_SIZED_WQE_ENABLED = 0x10;
inline constexpr std::uint8_t CMDQ_CREATE_QP_TYPE_RC = 0x2;
inline constexpr std::uint8_t CMDQ_CREATE_QP_TYPE_UD = 0x4;
inline constexpr std::uint8_t CMDQ_CREATE_QP_TYPE_GSI = 0x7;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_STATE = 0x1;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_EN_SQD_ASYNC_NOTIFY = 0x2;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS = 0x4;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_PKEY = 0x8;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_QKEY = 0x10;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_DGID = 0x20;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_FLOW_LABEL = 0x40;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX = 0x80;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_HOP_LIMIT = 0x100;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_TRAFFIC_CLASS = 0x200;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC = 0x400;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU = 0x1000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT = 0x2000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT = 0x4000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY = 0x8000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN = 0x10000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_MAX_RD_ATOMIC = 0x20000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER = 0x40000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN = 0x80000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_MAX_DEST_RD_ATOMIC = 0x100000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_SQ_SIZE = 0x200000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_RQ_SIZE = 0x400000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_SQ_SGE = 0x800000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_RQ_SGE = 0x1000000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_MAX_INLINE_DATA = 0x2000000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID = 0x4000000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_SRC_MAC = 0x8000000;
inline constexpr std::uint32_t CMDQ_MODIFY_QP_MODIFY_MASK_VLAN_ID = 0x10000000;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_RESET = 0x0;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_INIT = 0x1;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_RTR = 0x2;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_RTS = 0x3;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_SQD = 0x4;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_SQE = 0x5;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NEW_STATE_ERR = 0x6;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV1 = 0x0;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4 = 0x2;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV6 = 0x3;
// QP access bits; note REMOTE_WRITE/REMOTE_READ are swapped against the MR bits (roce_hsi.h
// cmdq_*).
inline constexpr std::uint8_t CMDQ_MODIFY_QP_ACCESS_LOCAL_WRITE = 0x1;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE = 0x2;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_ACCESS_REMOTE_READ = 0x4;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_ACCESS_REMOTE_ATOMIC = 0x8;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_PATH_MTU_MTU_256 = 0x0;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_PATH_MTU_MTU_512 = 0x1;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_PATH_MTU_MTU_1024 = 0x2;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_PATH_MTU_MTU_2048 = 0x3;
inline constexpr std::uint8_t CMDQ_MODIFY_QP_PATH_MTU_MTU_4096 = 0x4;
inline constexpr std::uint16_t CMDQ_CREATE_CQ_FLAGS_DISABLE_CQ_OVERFLOW_DETECTION = 0x1;
inline constexpr std::uint8_t CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR = 0x0;
inline constexpr std::uint8_t CMDQ_ALLOCATE_MRW_MRW_FLAGS_PMR = 0x1;
inline constexpr std::uint8_t CMDQ_ALLOCATE_MRW_MRW_FLAGS_MW_TYPE1 = 0x2;
inline constexpr std::uint8_t CMDQ_ALLOCATE_MRW_MRW_FLAGS_MW_TYPE2A = 0x3;
inline constexpr std::uint8_t CMDQ_ALLOCATE_MRW_MRW_FLAGS_MW_TYPE2B = 0x4;
inline constexpr std::uint8_t CMDQ_ALLOCATE_MRW_ACCESS_CONSUMER_OWNED_KEY = 0x20;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_LOG2_PG_SIZE_PG_1G = 0x1e;
inline constexpr std::uint16_t CMDQ_REGISTER_MR_FLAGS_ALLOC_MR = 0x1;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE = 0x1;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_ACCESS_REMOTE_READ = 0x2;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE = 0x4;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_ACCESS_REMOTE_ATOMIC = 0x8;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_ACCESS_MW_BIND = 0x10;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_ACCESS_ZERO_BASED = 0x20;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_LOG2_PG_SIZE_PG_4K = 0xc;
inline constexpr std::uint8_t CMDQ_REGISTER_MR_LOG2_PG_SIZE_PG_2M = 0x15;
inline constexpr std::uint8_t CMDQ_ADD_GID_VLAN_TPID_TPID_8100 = 0x1;

// ---- common parts -------------------------------------------------------------------------------

#define RIG_BNXT_CMDQ_HDR(W, D, op, bytes, resp)                   \
    D(opcode, std::uint8_t, 0, op)                                 \
    D(cmd_size, std::uint8_t, 1, ((bytes) + 15) / 16)              \
    W(flags, std::uint16_t, 2)                                     \
    W(cookie, std::uint16_t, 4)                                    \
    D(resp_size, std::uint8_t, 6, resp)                            \
    W(resp_addr, std::uint64_t, 8)
// The first ten bytes of a command completion (creq_qp_event's fields).
#define RIG_BNXT_CREQ_RESP(W, F)                                   \
    F(type, std::uint8_t, 0, 0x3f, 0)                              \
    W(status, std::uint8_t, 1)                                     \
    W(cookie, std::uint16_t, 2)                                    \
    F(v, std::uint8_t, 8, 0x01, 0)                                 \
    W(event, std::uint8_t, 9)
// A completion that returns an object id in `xid` and nothing else.
#define RIG_BNXT_CREQ_XID_RESP(W, D, F, A) RIG_BNXT_CREQ_RESP(W, F) W(xid, std::uint32_t, 4)
// The header of a side buffer (the kernel's creq_resp_sb_hdr fields, repeated per *_resp_sb).
#define RIG_BNXT_CREQ_SB_HDR(W)                                    \
    W(opcode, std::uint8_t, 0)                                     \
    W(status, std::uint8_t, 1)                                     \
    W(cookie, std::uint16_t, 2)                                    \
    W(flags, std::uint16_t, 4)                                     \
    W(resp_size, std::uint8_t, 6)

// ---- firmware: QUERY_VERSION, INITIALIZE_FW, DEINITIALIZE_FW, QUERY_FUNC, SET_FUNC_RESOURCES ----

#define RIG_BNXT_CMDQ_QUERY_VERSION(W, D, F, A)                    \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_QUERY_VERSION, 16, 0)
RIG_BNXT_LAYOUT(cmdq_query_version, 16, RIG_BNXT_CMDQ_QUERY_VERSION);

#define RIG_BNXT_CREQ_QUERY_VERSION_RESP(W, D, F, A)               \
    RIG_BNXT_CREQ_RESP(W, F)                                       \
    W(fw_maj, std::uint8_t, 4)                                     \
    W(fw_minor, std::uint8_t, 5)                                   \
    W(fw_bld, std::uint8_t, 6)                                     \
    W(fw_rsvd, std::uint8_t, 7)                                    \
    W(intf_maj, std::uint8_t, 12)                                  \
    W(intf_minor, std::uint8_t, 13)                                \
    W(intf_bld, std::uint8_t, 14)                                  \
    W(intf_rsvd, std::uint8_t, 15)
RIG_BNXT_LAYOUT(creq_query_version_resp, 16, RIG_BNXT_CREQ_QUERY_VERSION_RESP);

// One context table of INITIALIZE_FW: used on P4 only; P5/P7 get context memory through the
// HWRM backing store and leave these zero (qplib_rcfw.c bnxt_qplib_init_rcfw: "Gen P5 devices
// doesn't require this allocation").
#define RIG_BNXT_INIT_FW_TBL(W, F, t, lvl_off, dir_off)            \
    F(t##_lvl, std::uint8_t, lvl_off, 0x0f, 0)                     \
    F(t##_pg_size, std::uint8_t, lvl_off, 0xf0, 4)                 \
    W(t##_page_dir, std::uint64_t, dir_off)

#define RIG_BNXT_CMDQ_INITIALIZE_FW(W, D, F, A)                    \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_INITIALIZE_FW, 112, 0) \
    RIG_BNXT_INIT_FW_TBL(W, F, qpc, 16, 24)                        \
    RIG_BNXT_INIT_FW_TBL(W, F, mrw, 17, 32)                        \
    RIG_BNXT_INIT_FW_TBL(W, F, srq, 18, 40)                        \
    RIG_BNXT_INIT_FW_TBL(W, F, cq, 19, 48)                         \
    RIG_BNXT_INIT_FW_TBL(W, F, tqm, 20, 56)                        \
    RIG_BNXT_INIT_FW_TBL(W, F, tim, 21, 64)                        \
    F(log2_dbr_pg_size, std::uint16_t, 22, 0x000f, 0)              \
    W(number_of_qp, std::uint32_t, 72)                             \
    W(number_of_mrw, std::uint32_t, 76)                            \
    W(number_of_srq, std::uint32_t, 80)                            \
    W(number_of_cq, std::uint32_t, 84)                             \
    W(max_qp_per_vf, std::uint32_t, 88)                            \
    W(max_mrw_per_vf, std::uint32_t, 92)                           \
    W(max_srq_per_vf, std::uint32_t, 96)                           \
    W(max_cq_per_vf, std::uint32_t, 100)                           \
    W(max_gid_per_vf, std::uint32_t, 104)                          \
    W(stat_ctx_id, std::uint32_t, 108)
RIG_BNXT_LAYOUT(cmdq_initialize_fw, 112, RIG_BNXT_CMDQ_INITIALIZE_FW);

#define RIG_BNXT_CREQ_INITIALIZE_FW_RESP(W, D, F, A) RIG_BNXT_CREQ_RESP(W, F)
RIG_BNXT_LAYOUT(creq_initialize_fw_resp, 16, RIG_BNXT_CREQ_INITIALIZE_FW_RESP);

#define RIG_BNXT_CMDQ_DEINITIALIZE_FW(W, D, F, A)                  \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_DEINITIALIZE_FW, 16, 0)
RIG_BNXT_LAYOUT(cmdq_deinitialize_fw, 16, RIG_BNXT_CMDQ_DEINITIALIZE_FW);

#define RIG_BNXT_CREQ_DEINITIALIZE_FW_RESP(W, D, F, A) RIG_BNXT_CREQ_RESP(W, F)
RIG_BNXT_LAYOUT(creq_deinitialize_fw_resp, 16, RIG_BNXT_CREQ_DEINITIALIZE_FW_RESP);

// QUERY_FUNC answers in a 160-byte side buffer: resp_size 10 (16-byte units).
#define RIG_BNXT_CMDQ_QUERY_FUNC(W, D, F, A)                       \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_QUERY_FUNC, 16, 160 / 16)
RIG_BNXT_LAYOUT(cmdq_query_func, 16, RIG_BNXT_CMDQ_QUERY_FUNC);

#define RIG_BNXT_CREQ_QUERY_FUNC_RESP(W, D, F, A)                  \
    RIG_BNXT_CREQ_RESP(W, F)                                       \
    W(size, std::uint32_t, 4)
RIG_BNXT_LAYOUT(creq_query_func_resp, 16, RIG_BNXT_CREQ_QUERY_FUNC_RESP);

#define RIG_BNXT_CREQ_QUERY_FUNC_RESP_SB(W, D, F, A)               \
    RIG_BNXT_CREQ_SB_HDR(W)                                        \
    W(max_mr_size, std::uint64_t, 8)                               \
    W(max_qp, std::uint32_t, 16)                                   \
    W(max_qp_wr, std::uint16_t, 20)                                \
    W(dev_cap_flags, std::uint16_t, 22)                            \
    W(max_cq, std::uint32_t, 24)                                   \
    W(max_cqe, std::uint32_t, 28)                                  \
    W(max_pd, std::uint32_t, 32)                                   \
    W(max_sge, std::uint8_t, 36)                                   \
    W(max_srq_sge, std::uint8_t, 37)                               \
    W(max_qp_rd_atom, std::uint8_t, 38)                            \
    W(max_qp_init_rd_atom, std::uint8_t, 39)                       \
    W(max_mr, std::uint32_t, 40)                                   \
    W(max_mw, std::uint32_t, 44)                                   \
    W(max_raw_eth_qp, std::uint32_t, 48)                           \
    W(max_ah, std::uint32_t, 52)                                   \
    W(max_fmr, std::uint32_t, 56)                                  \
    W(max_srq_wr, std::uint32_t, 60)                               \
    W(max_pkeys, std::uint32_t, 64)                                \
    W(max_inline_data, std::uint32_t, 68)                          \
    W(max_map_per_fmr, std::uint8_t, 72)                           \
    W(l2_db_space_size, std::uint8_t, 73)                          \
    W(max_srq, std::uint16_t, 74)                                  \
    W(max_gid, std::uint32_t, 76)                                  \
    A(tqm_alloc_reqs, 80, 48)                                      \
    W(max_dpi, std::uint32_t, 128)                                 \
    W(max_sge_var_wqe, std::uint8_t, 132)                          \
    W(dev_cap_ext_flags, std::uint8_t, 133)                        \
    W(max_inline_data_var_wqe, std::uint16_t, 134)                 \
    W(start_qid, std::uint32_t, 136)                               \
    W(max_msn_table_size, std::uint8_t, 140)                       \
    F(req_retransmission_support, std::uint16_t, 142, 0x0030, 4)   \
    W(max_xp_qp_size, std::uint16_t, 144)                          \
    W(create_qp_batch_size, std::uint16_t, 146)                    \
    W(destroy_qp_batch_size, std::uint16_t, 148)
RIG_BNXT_LAYOUT(creq_query_func_resp_sb, 160, RIG_BNXT_CREQ_QUERY_FUNC_RESP_SB);

#define RIG_BNXT_CMDQ_SET_FUNC_RESOURCES(W, D, F, A)               \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_SET_FUNC_RESOURCES, 56, 0) \
    W(number_of_qp, std::uint32_t, 16)                             \
    W(number_of_mrw, std::uint32_t, 20)                            \
    W(number_of_srq, std::uint32_t, 24)                            \
    W(number_of_cq, std::uint32_t, 28)                             \
    W(max_qp_per_vf, std::uint32_t, 32)                            \
    W(max_mrw_per_vf, std::uint32_t, 36)                           \
    W(max_srq_per_vf, std::uint32_t, 40)                           \
    W(max_cq_per_vf, std::uint32_t, 44)                            \
    W(max_gid_per_vf, std::uint32_t, 48)                           \
    W(stat_ctx_id, std::uint32_t, 52)
RIG_BNXT_LAYOUT(cmdq_set_func_resources, 56, RIG_BNXT_CMDQ_SET_FUNC_RESOURCES);

// ---- queue pairs --------------------------------------------------------------------------------

#define RIG_BNXT_CMDQ_CREATE_QP(W, D, F, A)                        \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_CREATE_QP, 104, 0)    \
    W(qp_handle, std::uint64_t, 16)                                \
    W(qp_flags, std::uint32_t, 24)                                 \
    W(type, std::uint8_t, 28)                                      \
    F(sq_lvl, std::uint8_t, 29, 0x0f, 0)                           \
    F(sq_pg_size, std::uint8_t, 29, 0xf0, 4)                       \
    F(rq_lvl, std::uint8_t, 30, 0x0f, 0)                           \
    F(rq_pg_size, std::uint8_t, 30, 0xf0, 4)                       \
    W(dpi, std::uint32_t, 32)                                      \
    W(sq_size, std::uint32_t, 36)                                  \
    W(rq_size, std::uint32_t, 40)                                  \
    F(sq_sge, std::uint16_t, 44, 0x000f, 0)                        \
    F(sq_fwo, std::uint16_t, 44, 0xfff0, 4)                        \
    F(rq_sge, std::uint16_t, 46, 0x000f, 0)                        \
    F(rq_fwo, std::uint16_t, 46, 0xfff0, 4)                        \
    W(scq_cid, std::uint32_t, 48)                                  \
    W(rcq_cid, std::uint32_t, 52)                                  \
    W(srq_cid, std::uint32_t, 56)                                  \
    W(pd_id, std::uint32_t, 60)                                    \
    W(sq_pbl, std::uint64_t, 64)                                   \
    W(rq_pbl, std::uint64_t, 72)                                   \
    W(irrq_addr, std::uint64_t, 80)                                \
    W(orrq_addr, std::uint64_t, 88)                                \
    W(request_xid, std::uint32_t, 96)                              \
    W(steering_tag, std::uint16_t, 100)
RIG_BNXT_LAYOUT(cmdq_create_qp, 104, RIG_BNXT_CMDQ_CREATE_QP);

#define RIG_BNXT_CREQ_CREATE_QP_RESP(W, D, F, A)                   \
    RIG_BNXT_CREQ_XID_RESP(W, D, F, A)                             \
    W(optimized_transmit_enabled, std::uint8_t, 10)
RIG_BNXT_LAYOUT(creq_create_qp_resp, 16, RIG_BNXT_CREQ_CREATE_QP_RESP);

#define RIG_BNXT_CMDQ_DESTROY_QP(W, D, F, A)                       \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_DESTROY_QP, 24, 0)    \
    W(qp_cid, std::uint32_t, 16)
RIG_BNXT_LAYOUT(cmdq_destroy_qp, 24, RIG_BNXT_CMDQ_DESTROY_QP);
RIG_BNXT_LAYOUT(creq_destroy_qp_resp, 16, RIG_BNXT_CREQ_XID_RESP);

// MODIFY_QP: qp_type sits in the header's byte 7; dgid and dest_mac/src_mac are the wire bytes
// as they are (the driver memcpy's them), unlike ADD_GID.
#define RIG_BNXT_CMDQ_MODIFY_QP(W, D, F, A)                        \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_MODIFY_QP, 144, 0)    \
    W(qp_type, std::uint8_t, 7)                                    \
    W(modify_mask, std::uint32_t, 16)                              \
    W(qp_cid, std::uint32_t, 20)                                   \
    F(new_state, std::uint8_t, 24, 0x0f, 0)                        \
    F(en_sqd_async_notify, std::uint8_t, 24, 0x10, 4)              \
    F(network_type, std::uint8_t, 24, 0xc0, 6)                     \
    W(access, std::uint8_t, 25)                                    \
    W(pkey, std::uint16_t, 26)                                     \
    W(qkey, std::uint32_t, 28)                                     \
    A(dgid, 32, 16)                                                \
    W(flow_label, std::uint32_t, 48)                               \
    W(sgid_index, std::uint16_t, 52)                               \
    W(hop_limit, std::uint8_t, 54)                                 \
    W(traffic_class, std::uint8_t, 55)                             \
    A(dest_mac, 56, 6)                                             \
    F(tos_ecn, std::uint8_t, 62, 0x03, 0)                          \
    F(tos_dscp, std::uint8_t, 62, 0xfc, 2)                         \
    F(pingpong_push_enable, std::uint8_t, 63, 0x01, 0)             \
    F(path_mtu, std::uint8_t, 63, 0xf0, 4)                         \
    W(timeout, std::uint8_t, 64)                                   \
    W(retry_cnt, std::uint8_t, 65)                                 \
    W(rnr_retry, std::uint8_t, 66)                                 \
    W(min_rnr_timer, std::uint8_t, 67)                             \
    W(rq_psn, std::uint32_t, 68)                                   \
    W(sq_psn, std::uint32_t, 72)                                   \
    W(max_rd_atomic, std::uint8_t, 76)                             \
    W(max_dest_rd_atomic, std::uint8_t, 77)                        \
    F(enable_cc, std::uint16_t, 78, 0x0001, 0)                     \
    W(sq_size, std::uint32_t, 80)                                  \
    W(rq_size, std::uint32_t, 84)                                  \
    W(sq_sge, std::uint16_t, 88)                                   \
    W(rq_sge, std::uint16_t, 90)                                   \
    W(max_inline_data, std::uint32_t, 92)                          \
    W(dest_qp_id, std::uint32_t, 96)                               \
    W(pingpong_push_dpi, std::uint32_t, 100)                       \
    A(src_mac, 104, 6)                                             \
    F(vlan_id, std::uint16_t, 110, 0x0fff, 0)                      \
    F(vlan_dei, std::uint16_t, 110, 0x1000, 12)                    \
    F(vlan_pcp, std::uint16_t, 110, 0xe000, 13)                    \
    W(irrq_addr, std::uint64_t, 112)                               \
    W(orrq_addr, std::uint64_t, 120)                               \
    W(ext_modify_mask, std::uint32_t, 128)                         \
    W(ext_stats_ctx_id, std::uint32_t, 132)                        \
    W(schq_id, std::uint16_t, 136)
RIG_BNXT_LAYOUT(cmdq_modify_qp, 144, RIG_BNXT_CMDQ_MODIFY_QP);

#define RIG_BNXT_CREQ_MODIFY_QP_RESP(W, D, F, A)                   \
    RIG_BNXT_CREQ_XID_RESP(W, D, F, A)                             \
    F(pingpong_push_enabled, std::uint8_t, 10, 0x01, 0)            \
    F(pingpong_push_index, std::uint8_t, 10, 0x0e, 1)              \
    F(pingpong_push_state, std::uint8_t, 10, 0x10, 4)              \
    W(lag_src_mac, std::uint32_t, 12)
RIG_BNXT_LAYOUT(creq_modify_qp_resp, 16, RIG_BNXT_CREQ_MODIFY_QP_RESP);

// QUERY_QP answers in a 104-byte side buffer: resp_size 7 (rounded up to 16-byte units).
#define RIG_BNXT_CMDQ_QUERY_QP(W, D, F, A)                         \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_QUERY_QP, 24, (104 + 15) / 16) \
    W(qp_cid, std::uint32_t, 16)
RIG_BNXT_LAYOUT(cmdq_query_qp, 24, RIG_BNXT_CMDQ_QUERY_QP);

#define RIG_BNXT_CREQ_QUERY_QP_RESP(W, D, F, A)                    \
    RIG_BNXT_CREQ_RESP(W, F)                                       \
    W(size, std::uint32_t, 4)
RIG_BNXT_LAYOUT(creq_query_qp_resp, 16, RIG_BNXT_CREQ_QUERY_QP_RESP);

#define RIG_BNXT_CREQ_QUERY_QP_RESP_SB(W, D, F, A)                 \
    RIG_BNXT_CREQ_SB_HDR(W)                                        \
    W(xid, std::uint32_t, 8)                                       \
    F(state, std::uint8_t, 12, 0x0f, 0)                            \
    F(en_sqd_async_notify, std::uint8_t, 12, 0x10, 4)              \
    W(access, std::uint8_t, 13)                                    \
    W(pkey, std::uint16_t, 14)                                     \
    W(qkey, std::uint32_t, 16)                                     \
    A(dgid, 24, 16)                                                \
    W(flow_label, std::uint32_t, 40)                               \
    W(sgid_index, std::uint16_t, 44)                               \
    W(hop_limit, std::uint8_t, 46)                                 \
    W(traffic_class, std::uint8_t, 47)                             \
    A(dest_mac, 48, 6)                                             \
    F(dest_vlan_id, std::uint16_t, 54, 0x0fff, 0)                  \
    F(path_mtu, std::uint16_t, 54, 0xf000, 12)                     \
    W(timeout, std::uint8_t, 56)                                   \
    W(retry_cnt, std::uint8_t, 57)                                 \
    W(rnr_retry, std::uint8_t, 58)                                 \
    W(min_rnr_timer, std::uint8_t, 59)                             \
    W(rq_psn, std::uint32_t, 60)                                   \
    W(sq_psn, std::uint32_t, 64)                                   \
    W(max_rd_atomic, std::uint8_t, 68)                             \
    W(max_dest_rd_atomic, std::uint8_t, 69)                        \
    F(tos_ecn, std::uint8_t, 70, 0x03, 0)                          \
    F(tos_dscp, std::uint8_t, 70, 0xfc, 2)                         \
    F(enable_cc, std::uint8_t, 71, 0x01, 0)                        \
    W(sq_size, std::uint32_t, 72)                                  \
    W(rq_size, std::uint32_t, 76)                                  \
    W(sq_sge, std::uint16_t, 80)                                   \
    W(rq_sge, std::uint16_t, 82)                                   \
    W(max_inline_data, std::uint32_t, 84)                          \
    W(dest_qp_id, std::uint32_t, 88)                               \
    W(port_id, std::uint16_t, 92)                                  \
    W(stat_collection_id, std::uint8_t, 95)                        \
    A(src_mac, 96, 6)                                              \
    F(vlan_id, std::uint16_t, 102, 0x0fff, 0)                      \
    F(vlan_dei, std::uint16_t, 102, 0x1000, 12)                    \
    F(vlan_pcp, std::uint16_t, 102, 0xe000, 13)
RIG_BNXT_LAYOUT(creq_query_qp_resp_sb, 104, RIG_BNXT_CREQ_QUERY_QP_RESP_SB);

// ---- completion queues --------------------------------------------------------------------------

// pg_size_lvl here is a 32-bit word with a 2-bit level and a 3-bit page size (not the nibbles
// of CREATE_QP); cnq_id names the NQ ring the CQ notifies.
#define RIG_BNXT_CMDQ_CREATE_CQ(W, D, F, A)                        \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_CREATE_CQ, 56, 0)     \
    W(cq_handle, std::uint64_t, 16)                                \
    F(lvl, std::uint32_t, 24, 0x00000003, 0)                       \
    F(pg_size, std::uint32_t, 24, 0x0000001c, 2)                   \
    F(cnq_id, std::uint32_t, 28, 0x00000fff, 0)                    \
    F(cq_fco, std::uint32_t, 28, 0xfffff000, 12)                   \
    W(dpi, std::uint32_t, 32)                                      \
    W(cq_size, std::uint32_t, 36)                                  \
    W(pbl, std::uint64_t, 40)                                      \
    W(steering_tag, std::uint16_t, 48)
RIG_BNXT_LAYOUT(cmdq_create_cq, 56, RIG_BNXT_CMDQ_CREATE_CQ);
RIG_BNXT_LAYOUT(creq_create_cq_resp, 16, RIG_BNXT_CREQ_XID_RESP);

#define RIG_BNXT_CMDQ_DESTROY_CQ(W, D, F, A)                       \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_DESTROY_CQ, 24, 0)    \
    W(cq_cid, std::uint32_t, 16)
RIG_BNXT_LAYOUT(cmdq_destroy_cq, 24, RIG_BNXT_CMDQ_DESTROY_CQ);

#define RIG_BNXT_CREQ_DESTROY_CQ_RESP(W, D, F, A)                  \
    RIG_BNXT_CREQ_XID_RESP(W, D, F, A)                             \
    F(cq_arm_lvl, std::uint16_t, 10, 0x0003, 0)                    \
    W(total_cnq_events, std::uint16_t, 12)
RIG_BNXT_LAYOUT(creq_destroy_cq_resp, 16, RIG_BNXT_CREQ_DESTROY_CQ_RESP);

// ---- memory regions: ALLOCATE_MRW + REGISTER_MR, DEREGISTER_MR, DEALLOCATE_KEY ------------------

#define RIG_BNXT_CMDQ_ALLOCATE_MRW(W, D, F, A)                     \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_ALLOCATE_MRW, 32, 0)  \
    W(mrw_handle, std::uint64_t, 16)                               \
    F(mrw_flags, std::uint8_t, 24, 0x0f, 0)                        \
    F(steering_tag_valid, std::uint8_t, 24, 0x10, 4)               \
    W(access, std::uint8_t, 25)                                    \
    W(steering_tag, std::uint16_t, 26)                             \
    W(pd_id, std::uint32_t, 28)
RIG_BNXT_LAYOUT(cmdq_allocate_mrw, 32, RIG_BNXT_CMDQ_ALLOCATE_MRW);
RIG_BNXT_LAYOUT(creq_allocate_mrw_resp, 16, RIG_BNXT_CREQ_XID_RESP);

#define RIG_BNXT_CMDQ_DEALLOCATE_KEY(W, D, F, A)                   \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_DEALLOCATE_KEY, 24, 0) \
    F(mrw_flags, std::uint8_t, 16, 0x0f, 0)                        \
    W(key, std::uint32_t, 20)
RIG_BNXT_LAYOUT(cmdq_deallocate_key, 24, RIG_BNXT_CMDQ_DEALLOCATE_KEY);

#define RIG_BNXT_CREQ_DEALLOCATE_KEY_RESP(W, D, F, A)              \
    RIG_BNXT_CREQ_XID_RESP(W, D, F, A)                             \
    W(bound_window_info, std::uint32_t, 12)
RIG_BNXT_LAYOUT(creq_deallocate_key_resp, 16, RIG_BNXT_CREQ_DEALLOCATE_KEY_RESP);

// REGISTER_MR access bits are the MR encoding (REMOTE_READ 0x2, REMOTE_WRITE 0x4), roce_hsi.h
// cmdq_*.
#define RIG_BNXT_CMDQ_REGISTER_MR(W, D, F, A)                      \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_REGISTER_MR, 56, 0)   \
    F(lvl, std::uint8_t, 16, 0x03, 0)                              \
    F(log2_pg_size, std::uint8_t, 16, 0x7c, 2)                     \
    W(access, std::uint8_t, 17)                                    \
    F(log2_pbl_pg_size, std::uint16_t, 18, 0x001f, 0)              \
    W(key, std::uint32_t, 20)                                      \
    W(pbl, std::uint64_t, 24)                                      \
    W(va, std::uint64_t, 32)                                       \
    W(mr_size, std::uint64_t, 40)                                  \
    W(steering_tag, std::uint16_t, 48)
RIG_BNXT_LAYOUT(cmdq_register_mr, 56, RIG_BNXT_CMDQ_REGISTER_MR);
RIG_BNXT_LAYOUT(creq_register_mr_resp, 16, RIG_BNXT_CREQ_XID_RESP);

#define RIG_BNXT_CMDQ_DEREGISTER_MR(W, D, F, A)                    \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_DEREGISTER_MR, 24, 0) \
    W(lkey, std::uint32_t, 16)
RIG_BNXT_LAYOUT(cmdq_deregister_mr, 24, RIG_BNXT_CMDQ_DEREGISTER_MR);

#define RIG_BNXT_CREQ_DEREGISTER_MR_RESP(W, D, F, A)               \
    RIG_BNXT_CREQ_XID_RESP(W, D, F, A)                             \
    W(bound_windows, std::uint32_t, 12)
RIG_BNXT_LAYOUT(creq_deregister_mr_resp, 16, RIG_BNXT_CREQ_DEREGISTER_MR_RESP);

// ---- GIDs: ADD_GID, DELETE_GID, MODIFY_GID ------------------------------------------------------

// ADD_GID/MODIFY_GID take the GID and MAC in the driver's odd byte orders (qplib_sp.c
// bnxt_qplib_add_sgid): fill `gid`
// with add_gid_gid() and `src_mac` with add_gid_src_mac().
#define RIG_BNXT_CMDQ_ADD_GID(W, D, F, A)                          \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_ADD_GID, 48, 0)       \
    A(gid, 16, 16)                                                 \
    A(src_mac, 32, 6)                                              \
    F(vlan_id, std::uint16_t, 38, 0x0fff, 0)                       \
    F(tpid, std::uint16_t, 38, 0x7000, 12)                         \
    F(vlan_en, std::uint16_t, 38, 0x8000, 15)                      \
    W(ipid, std::uint16_t, 40)                                     \
    F(stats_ctx_id, std::uint16_t, 42, 0x7fff, 0)                  \
    F(stats_ctx_valid, std::uint16_t, 42, 0x8000, 15)
RIG_BNXT_LAYOUT(cmdq_add_gid, 48, RIG_BNXT_CMDQ_ADD_GID);
RIG_BNXT_LAYOUT(creq_add_gid_resp, 16, RIG_BNXT_CREQ_XID_RESP);

#define RIG_BNXT_CMDQ_DELETE_GID(W, D, F, A)                       \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_DELETE_GID, 24, 0)    \
    W(gid_index, std::uint16_t, 16)
RIG_BNXT_LAYOUT(cmdq_delete_gid, 24, RIG_BNXT_CMDQ_DELETE_GID);
RIG_BNXT_LAYOUT(creq_delete_gid_resp, 16, RIG_BNXT_CREQ_XID_RESP);

#define RIG_BNXT_CMDQ_MODIFY_GID(W, D, F, A)                       \
    RIG_BNXT_CMDQ_HDR(W, D, CMDQ_BASE_OPCODE_MODIFY_GID, 48, 0)    \
    A(gid, 16, 16)                                                 \
    A(src_mac, 32, 6)                                              \
    F(vlan_id, std::uint16_t, 38, 0x0fff, 0)                       \
    F(tpid, std::uint16_t, 38, 0x7000, 12)                         \
    F(vlan_en, std::uint16_t, 38, 0x8000, 15)                      \
    W(ipid, std::uint16_t, 40)                                     \
    W(gid_index, std::uint16_t, 42)                                \
    F(stats_ctx_id, std::uint16_t, 44, 0x7fff, 0)                  \
    F(stats_ctx_valid, std::uint16_t, 44, 0x8000, 15)
RIG_BNXT_LAYOUT(cmdq_modify_gid, 48, RIG_BNXT_CMDQ_MODIFY_GID);

// The 16 GID bytes (wire order) as ADD_GID carries them: the driver stores
// gid[i] = cpu_to_be32(word 3 - i) in little-endian __le32 slots, which reverses all 16 bytes
// (qplib_sp.c bnxt_qplib_add_sgid).
constexpr std::array<std::uint8_t, 16> add_gid_gid(const std::array<std::uint8_t, 16>& wire) {
    std::array<std::uint8_t, 16> out{};
    for (std::size_t i = 0; i < 16; ++i) {
        out[i] = wire[15 - i];
    }
    return out;
}
// The 6 MAC bytes (wire order) as ADD_GID carries them: src_mac[i] = cpu_to_be16(mac pair i)
// in __le16 slots, which swaps the bytes of each pair.
constexpr std::array<std::uint8_t, 6> add_gid_src_mac(const std::array<std::uint8_t, 6>& wire) {
    return {wire[1], wire[0], wire[3], wire[2], wire[5], wire[4]};
}

}  // namespace rig::bnxt::abi
