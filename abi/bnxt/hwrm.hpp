#pragma once
// HWRM, the bnxt firmware command channel (kernel bnxt_hsi.h; bnxt_hwrm.c __hwrm_send).
//
// A request is a little-endian struct that starts with the 16-byte `hwrm_cmd_hdr` (req_type,
// cmpl_ring, seq_id, target_id, resp_addr) and is written into the BAR0 window; the firmware
// DMA-writes the response, which starts with the 8-byte `hwrm_resp_hdr` and ends, at byte
// resp_len - 1, with `valid` = HWRM_RESP_VALID_KEY, written last (bnxt_hsi.h struct input/output,
// bnxt_hwrm.c __hwrm_send). Requests longer than the window go through `hwrm_short_input`
// (signature 0x4321).
//
// Layouts are those of the Linux 6.12 bnxt_hsi.h (HWRM 1.10.3); only the requests and responses
// on the RoCE bring-up path (bnxt.c bnxt_fw_init_one_p1/p2, bnxt_re main.c) are here, and of
// each only the fields the driver or the model uses. Request defaults: req_type = the command,
// cmpl_ring = target_id = 0xffff (poll the response; address the firmware, bnxt_hsi.h struct
// input/output), as bnxt_en and DPDK send them.
#include <cstdint>
#include <expected>
#include <span>
#include <string_view>

#include "abi/bnxt/layout.hpp"

namespace rig::bnxt::abi {

// ---- constants ----------------------------------------------------------------------------------

inline constexpr std::size_t HWRM_MAX_REQ_LEN = 128;    // the BAR0 request window
inline constexpr std::size_t HWRM_MAX_RESP_LEN = 704;
inline constexpr std::uint8_t HWRM_RESP_VALID_KEY = 1;  // the last byte of every response
inline constexpr std::uint8_t HWRM_VERSION_MAJOR = 1;   // the interface this file follows
inline constexpr std::uint8_t HWRM_VERSION_MINOR = 10;
inline constexpr std::uint8_t HWRM_VERSION_UPDATE = 3;
inline constexpr std::uint16_t SHORT_REQ_SIGNATURE_SHORT_CMD = 0x4321;
// "none" for cmpl_ring / target_id: bnxt_hsi.h spells it (__le32)(-1); 16-bit fields take 0xffff
inline constexpr std::uint32_t HWRM_NA_SIGNATURE = 0xffffffff;

// BAR0 offsets of the channel (bnxt_hsi.h, bnxt_hwrm.c)
inline constexpr std::size_t GRCPF_REG_CHIMP_CHANNEL_OFFSET = 0x000;
inline constexpr std::size_t GRCPF_REG_CHIMP_COMM_TRIGGER = 0x100;
inline constexpr std::size_t GRCPF_REG_KONG_CHANNEL_OFFSET = 0xa00;
inline constexpr std::size_t GRCPF_REG_KONG_COMM_TRIGGER = 0xb00;

// req_type (bnxt_hsi.h `cmd_nums`)
inline constexpr std::uint16_t HWRM_VER_GET = 0x0;
inline constexpr std::uint16_t HWRM_ERROR_RECOVERY_QCFG = 0xc;
inline constexpr std::uint16_t HWRM_FUNC_DRV_IF_CHANGE = 0xd;
inline constexpr std::uint16_t HWRM_FUNC_RESET = 0x11;
inline constexpr std::uint16_t HWRM_FUNC_QCAPS = 0x15;
inline constexpr std::uint16_t HWRM_FUNC_QCFG = 0x16;
inline constexpr std::uint16_t HWRM_FUNC_CFG = 0x17;
inline constexpr std::uint16_t HWRM_FUNC_DRV_UNRGTR = 0x1a;
inline constexpr std::uint16_t HWRM_FUNC_DRV_RGTR = 0x1d;
inline constexpr std::uint16_t HWRM_PORT_MAC_CFG = 0x21;
inline constexpr std::uint16_t HWRM_PORT_PHY_QCFG = 0x27;
inline constexpr std::uint16_t HWRM_PORT_PHY_QCAPS = 0x2a;
inline constexpr std::uint16_t HWRM_QUEUE_QPORTCFG = 0x30;
inline constexpr std::uint16_t HWRM_VNIC_ALLOC = 0x40;
inline constexpr std::uint16_t HWRM_VNIC_FREE = 0x41;
inline constexpr std::uint16_t HWRM_VNIC_CFG = 0x42;
inline constexpr std::uint16_t HWRM_RING_ALLOC = 0x50;
inline constexpr std::uint16_t HWRM_RING_FREE = 0x51;
inline constexpr std::uint16_t HWRM_CFA_L2_FILTER_ALLOC = 0x90;
inline constexpr std::uint16_t HWRM_CFA_L2_FILTER_FREE = 0x91;
inline constexpr std::uint16_t HWRM_STAT_CTX_ALLOC = 0xb0;
inline constexpr std::uint16_t HWRM_STAT_CTX_FREE = 0xb1;
inline constexpr std::uint16_t HWRM_FW_SET_TIME = 0xc8;
inline constexpr std::uint16_t HWRM_FUNC_RESOURCE_QCAPS = 0x190;
inline constexpr std::uint16_t HWRM_FUNC_BACKING_STORE_QCAPS = 0x192;
inline constexpr std::uint16_t HWRM_FUNC_BACKING_STORE_CFG = 0x193;
inline constexpr std::uint16_t HWRM_FUNC_BACKING_STORE_CFG_V2 = 0x1a3;
inline constexpr std::uint16_t HWRM_FUNC_BACKING_STORE_QCAPS_V2 = 0x1a8;

// error_code (bnxt_hsi.h `ret_codes`; bnxt_hwrm.c)
inline constexpr std::uint16_t HWRM_ERR_CODE_SUCCESS = 0x0;
inline constexpr std::uint16_t HWRM_ERR_CODE_FAIL = 0x1;
inline constexpr std::uint16_t HWRM_ERR_CODE_INVALID_PARAMS = 0x2;
inline constexpr std::uint16_t HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED = 0x3;
inline constexpr std::uint16_t HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR = 0x4;
inline constexpr std::uint16_t HWRM_ERR_CODE_INVALID_FLAGS = 0x5;
inline constexpr std::uint16_t HWRM_ERR_CODE_INVALID_ENABLES = 0x6;
inline constexpr std::uint16_t HWRM_ERR_CODE_UNSUPPORTED_TLV = 0x7;
inline constexpr std::uint16_t HWRM_ERR_CODE_NO_BUFFER = 0x8;
inline constexpr std::uint16_t HWRM_ERR_CODE_UNSUPPORTED_OPTION_ERR = 0x9;
inline constexpr std::uint16_t HWRM_ERR_CODE_HOT_RESET_PROGRESS = 0xa;
inline constexpr std::uint16_t HWRM_ERR_CODE_HOT_RESET_FAIL = 0xb;
inline constexpr std::uint16_t HWRM_ERR_CODE_NO_FLOW_COUNTER_DURING_ALLOC = 0xc;
inline constexpr std::uint16_t HWRM_ERR_CODE_KEY_HASH_COLLISION = 0xd;
inline constexpr std::uint16_t HWRM_ERR_CODE_KEY_ALREADY_EXISTS = 0xe;
inline constexpr std::uint16_t HWRM_ERR_CODE_HWRM_ERROR = 0xf;
inline constexpr std::uint16_t HWRM_ERR_CODE_BUSY = 0x10;
inline constexpr std::uint16_t HWRM_ERR_CODE_RESOURCE_LOCKED = 0x11;
inline constexpr std::uint16_t HWRM_ERR_CODE_PF_UNAVAILABLE = 0x12;
inline constexpr std::uint16_t HWRM_ERR_CODE_ENTITY_NOT_PRESENT = 0x13;
inline constexpr std::uint16_t HWRM_ERR_CODE_SECURE_SOC_ERROR = 0x14;
inline constexpr std::uint16_t HWRM_ERR_CODE_TLV_ENCAPSULATED_RESPONSE = 0x8000;
inline constexpr std::uint16_t HWRM_ERR_CODE_UNKNOWN_ERR = 0xfffe;
inline constexpr std::uint16_t HWRM_ERR_CODE_CMD_NOT_SUPPORTED = 0xffff;

// The error code's name without the HWRM_ERR_CODE_ prefix, "" for a code the HSI does not list.
constexpr std::string_view hwrm_err_code_name(std::uint16_t code) noexcept {
    switch (code) {
    case 0x0: return "SUCCESS";
    case 0x1: return "FAIL";
    case 0x2: return "INVALID_PARAMS";
    case 0x3: return "RESOURCE_ACCESS_DENIED";
    case 0x4: return "RESOURCE_ALLOC_ERROR";
    case 0x5: return "INVALID_FLAGS";
    case 0x6: return "INVALID_ENABLES";
    case 0x7: return "UNSUPPORTED_TLV";
    case 0x8: return "NO_BUFFER";
    case 0x9: return "UNSUPPORTED_OPTION_ERR";
    case 0xa: return "HOT_RESET_PROGRESS";
    case 0xb: return "HOT_RESET_FAIL";
    case 0xc: return "NO_FLOW_COUNTER_DURING_ALLOC";
    case 0xd: return "KEY_HASH_COLLISION";
    case 0xe: return "KEY_ALREADY_EXISTS";
    case 0xf: return "HWRM_ERROR";
    case 0x10: return "BUSY";
    case 0x11: return "RESOURCE_LOCKED";
    case 0x12: return "PF_UNAVAILABLE";
    case 0x13: return "ENTITY_NOT_PRESENT";
    case 0x14: return "SECURE_SOC_ERROR";
    case 0x8000: return "TLV_ENCAPSULATED_RESPONSE";
    case 0xfffe: return "UNKNOWN_ERR";
    case 0xffff: return "CMD_NOT_SUPPORTED";
    default: return "";
    }
}

// The request's name without the HWRM_ prefix (bnxt_hsi.h `cmd_nums`), "" for a req_type not
// declared above. Errors and the command trace name requests by it.
constexpr std::string_view hwrm_req_type_name(std::uint16_t req_type) noexcept {
    switch (req_type) {
    case HWRM_VER_GET: return "VER_GET";
    case HWRM_ERROR_RECOVERY_QCFG: return "ERROR_RECOVERY_QCFG";
    case HWRM_FUNC_DRV_IF_CHANGE: return "FUNC_DRV_IF_CHANGE";
    case HWRM_FUNC_RESET: return "FUNC_RESET";
    case HWRM_FUNC_QCAPS: return "FUNC_QCAPS";
    case HWRM_FUNC_QCFG: return "FUNC_QCFG";
    case HWRM_FUNC_CFG: return "FUNC_CFG";
    case HWRM_FUNC_DRV_UNRGTR: return "FUNC_DRV_UNRGTR";
    case HWRM_FUNC_DRV_RGTR: return "FUNC_DRV_RGTR";
    case HWRM_PORT_MAC_CFG: return "PORT_MAC_CFG";
    case HWRM_PORT_PHY_QCFG: return "PORT_PHY_QCFG";
    case HWRM_PORT_PHY_QCAPS: return "PORT_PHY_QCAPS";
    case HWRM_QUEUE_QPORTCFG: return "QUEUE_QPORTCFG";
    case HWRM_FW_SET_TIME: return "FW_SET_TIME";
    case HWRM_VNIC_ALLOC: return "VNIC_ALLOC";
    case HWRM_VNIC_FREE: return "VNIC_FREE";
    case HWRM_VNIC_CFG: return "VNIC_CFG";
    case HWRM_RING_ALLOC: return "RING_ALLOC";
    case HWRM_RING_FREE: return "RING_FREE";
    case HWRM_CFA_L2_FILTER_ALLOC: return "CFA_L2_FILTER_ALLOC";
    case HWRM_CFA_L2_FILTER_FREE: return "CFA_L2_FILTER_FREE";
    case HWRM_STAT_CTX_ALLOC: return "STAT_CTX_ALLOC";
    case HWRM_STAT_CTX_FREE: return "STAT_CTX_FREE";
    case HWRM_FUNC_RESOURCE_QCAPS: return "FUNC_RESOURCE_QCAPS";
    case HWRM_FUNC_BACKING_STORE_QCAPS: return "FUNC_BACKING_STORE_QCAPS";
    case HWRM_FUNC_BACKING_STORE_CFG: return "FUNC_BACKING_STORE_CFG";
    case HWRM_FUNC_BACKING_STORE_CFG_V2: return "FUNC_BACKING_STORE_CFG_V2";
    case HWRM_FUNC_BACKING_STORE_QCAPS_V2: return "FUNC_BACKING_STORE_QCAPS_V2";
    default: return "";
    }
}

// flags and enumerations of the bring-up requests (values as in bnxt_hsi.h)
inline constexpr std::uint32_t VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_SUPPORTED = 0x4;
inline constexpr std::uint32_t VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_REQUIRED = 0x8;
inline constexpr std::uint32_t VER_GET_RESP_DEV_CAPS_CFG_KONG_MB_CHNL_SUPPORTED = 0x10;
inline constexpr std::uint8_t VER_GET_RESP_FLAGS_DEV_NOT_RDY = 0x1;
inline constexpr std::uint8_t VER_GET_RESP_FLAGS_EXT_VER_AVAIL = 0x2;
inline constexpr std::uint8_t VER_GET_RESP_FLAGS_DEV_NOT_RDY_BACKING_STORE = 0x4;
inline constexpr std::uint8_t FUNC_RESET_REQ_FUNC_RESET_LEVEL_RESETALL = 0x0;
inline constexpr std::uint8_t FUNC_RESET_REQ_FUNC_RESET_LEVEL_RESETME = 0x1;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_FLAGS_16BIT_VER_MODE = 0x4;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_FLAGS_HOT_RESET_SUPPORT = 0x10;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_FLAGS_ERROR_RECOVERY_SUPPORT = 0x20;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_ENABLES_OS_TYPE = 0x1;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_ENABLES_VER = 0x2;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_ENABLES_TIMESTAMP = 0x4;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_ENABLES_VF_REQ_FWD = 0x8;
inline constexpr std::uint32_t FUNC_DRV_RGTR_REQ_ENABLES_ASYNC_EVENT_FWD = 0x10;
inline constexpr std::uint16_t FUNC_DRV_RGTR_REQ_OS_TYPE_OTHER = 0x1;
inline constexpr std::uint16_t FUNC_DRV_RGTR_REQ_OS_TYPE_LINUX = 0x24;
inline constexpr std::uint32_t FUNC_QCAPS_RESP_FLAGS_ROCE_V1_SUPPORTED = 0x8;
inline constexpr std::uint32_t FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED = 0x10;
inline constexpr std::uint32_t FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_SUPPORTED = 0x4000000;
inline constexpr std::uint32_t FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_REQUIRED = 0x8000000;
inline constexpr std::uint32_t FUNC_QCAPS_RESP_FLAGS_EXT_DBR_PACING_SUPPORTED = 0x20000000;
inline constexpr std::uint16_t FUNC_QCFG_RESP_FLAGS_ROCE_VNIC_ID_VALID = 0x8000;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_RSSCOS_CTXS = 0x4;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_CMPL_RINGS = 0x8;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_TX_RINGS = 0x10;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_RX_RINGS = 0x20;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_L2_CTXS = 0x40;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_VNICS = 0x80;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_STAT_CTXS = 0x100;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_HW_RING_GRPS = 0x80000;
inline constexpr std::uint32_t FUNC_CFG_REQ_ENABLES_NUM_MSIX = 0x200000;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_FLAGS_MRAV_RESERVATION_SPLIT = 0x2;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_QP = 0x1;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_SRQ = 0x2;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_CQ = 0x4;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_VNIC = 0x8;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_STAT = 0x10;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_TQM_SP = 0x20;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_TQM_RING0 = 0x40;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_MRAV = 0x4000;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_TIM = 0x8000;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_TQM_RING8 = 0x10000;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_REQ_ENABLES_QP_FAST_QPMD = 0x200000;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_QP = 0x0;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_SRQ = 0x1;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_CQ = 0x2;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_VNIC = 0x3;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_STAT = 0x4;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_SP_TQM_RING = 0x5;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_FP_TQM_RING = 0x6;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_MRAV = 0xe;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_TIM = 0xf;
inline constexpr std::uint16_t FUNC_BACKING_STORE_QCAPS_V2_REQ_TYPE_INVALID = 0xffff;
inline constexpr std::uint32_t FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_ENABLE_CTX_KIND_INIT = 0x1;
inline constexpr std::uint32_t FUNC_BACKING_STORE_QCAPS_V2_RESP_FLAGS_TYPE_VALID = 0x2;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_PREBOOT_MODE = 0x1;
inline constexpr std::uint32_t FUNC_BACKING_STORE_CFG_V2_REQ_FLAGS_BS_CFG_ALL_DONE = 0x2;
inline constexpr std::uint32_t RING_ALLOC_REQ_ENABLES_STAT_CTX_ID_VALID = 0x8;
inline constexpr std::uint32_t RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID = 0x80;
inline constexpr std::uint8_t RING_ALLOC_REQ_RING_TYPE_L2_CMPL = 0x0;
inline constexpr std::uint8_t RING_ALLOC_REQ_RING_TYPE_TX = 0x1;
inline constexpr std::uint8_t RING_ALLOC_REQ_RING_TYPE_RX = 0x2;
inline constexpr std::uint8_t RING_ALLOC_REQ_RING_TYPE_ROCE_CMPL = 0x3;  // P4 CREQ/NQ
inline constexpr std::uint8_t RING_ALLOC_REQ_RING_TYPE_NQ = 0x5;         // P5/P7 CREQ and NQs
inline constexpr std::uint8_t RING_ALLOC_REQ_INT_MODE_LEGACY = 0x0;
inline constexpr std::uint8_t RING_ALLOC_REQ_INT_MODE_MSIX = 0x2;
inline constexpr std::uint8_t RING_ALLOC_REQ_INT_MODE_POLL = 0x3;
inline constexpr std::uint8_t STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE = 0x1;
inline constexpr std::uint32_t VNIC_ALLOC_REQ_FLAGS_DEFAULT = 0x1;
inline constexpr std::uint32_t VNIC_CFG_REQ_FLAGS_DEFAULT = 0x1;
inline constexpr std::uint32_t VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE = 0x8;
inline constexpr std::uint32_t VNIC_CFG_REQ_FLAGS_ROCE_ONLY_VNIC_MODE = 0x10;
inline constexpr std::uint32_t VNIC_CFG_REQ_ENABLES_MRU = 0x10;
inline constexpr std::uint32_t VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID = 0x20;
inline constexpr std::uint32_t VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID = 0x40;
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX = 0x1;
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_L2 = 0x10;    // 1 << 4
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_ROCE = 0x20;  // 2 << 4
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR = 0x1;
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK = 0x2;
inline constexpr std::uint32_t CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID = 0x8000;
// The pg_size nibble of the backing-store pg_size_lvl bytes (and of CREATE_QP, INITIALIZE_FW)
inline constexpr std::uint8_t PG_SIZE_4K = 0x0;
inline constexpr std::uint8_t PG_SIZE_8K = 0x1;
inline constexpr std::uint8_t PG_SIZE_64K = 0x2;
inline constexpr std::uint8_t PG_SIZE_2M = 0x3;
inline constexpr std::uint8_t PG_SIZE_8M = 0x4;
inline constexpr std::uint8_t PG_SIZE_1G = 0x5;
// Page-table entries of context memory and rings (roce_hsi.h ptu_pte / ptu_pde): 8-byte DMA
// addresses with these low bits. Context tables set VALID only; rings also mark their last two
// PTEs (bnxt.c bnxt_alloc_ring, BNXT_RMEM_VALID_PTE_FLAG / BNXT_RMEM_RING_PTE_FLAG).
inline constexpr std::uint64_t PTU_PTE_VALID = 0x1;
inline constexpr std::uint64_t PTU_PTE_LAST = 0x2;
inline constexpr std::uint64_t PTU_PTE_NEXT_TO_LAST = 0x4;
inline constexpr std::uint64_t PTU_PDE_VALID = 0x1;

// ---- headers ------------------------------------------------------------------------------------

// The request header's fields as every request list repeats them, with the defaults of bnxt_hwrm.c
// __hwrm_send.
#define RIG_BNXT_HWRM_REQ(W, D, opcode)                            \
    D(req_type, std::uint16_t, 0, opcode)                         \
    D(cmpl_ring, std::uint16_t, 2, 0xffff)                         \
    W(seq_id, std::uint16_t, 4)                                    \
    D(target_id, std::uint16_t, 6, 0xffff)                         \
    W(resp_addr, std::uint64_t, 8)
// The response header, and the valid byte at the end of a response of `size` bytes.
#define RIG_BNXT_HWRM_RESP(W)                                      \
    W(error_code, std::uint16_t, 0)                                \
    W(req_type, std::uint16_t, 2)                                  \
    W(seq_id, std::uint16_t, 4)                                    \
    W(resp_len, std::uint16_t, 6)
#define RIG_BNXT_HWRM_VALID(W, size) W(valid, std::uint8_t, (size) - 1)

#define RIG_BNXT_HWRM_CMD_HDR(W, D, F, A)                          \
    W(req_type, std::uint16_t, 0)                                  \
    W(cmpl_ring, std::uint16_t, 2)                                 \
    W(seq_id, std::uint16_t, 4)                                    \
    W(target_id, std::uint16_t, 6)                                 \
    W(resp_addr, std::uint64_t, 8)
RIG_BNXT_LAYOUT(hwrm_cmd_hdr, 16, RIG_BNXT_HWRM_CMD_HDR);

#define RIG_BNXT_HWRM_RESP_HDR(W, D, F, A) RIG_BNXT_HWRM_RESP(W)
RIG_BNXT_LAYOUT(hwrm_resp_hdr, 8, RIG_BNXT_HWRM_RESP_HDR);

// bnxt_hwrm.c __hwrm_send: sent instead of a request longer than the window; req_addr points at the
// full request in DMA memory.
#define RIG_BNXT_HWRM_SHORT_INPUT(W, D, F, A)                      \
    W(req_type, std::uint16_t, 0)                                  \
    D(signature, std::uint16_t, 2, 0x4321)                         \
    W(target_id, std::uint16_t, 4)                                 \
    W(size, std::uint16_t, 6)                                      \
    W(req_addr, std::uint64_t, 8)
RIG_BNXT_LAYOUT(hwrm_short_input, 16, RIG_BNXT_HWRM_SHORT_INPUT);

#define RIG_BNXT_HWRM_ERR_OUTPUT(W, D, F, A)                       \
    RIG_BNXT_HWRM_RESP(W)                                          \
    W(opaque_0, std::uint32_t, 8)                                  \
    W(opaque_1, std::uint16_t, 12)                                 \
    W(cmd_err, std::uint8_t, 14)                                   \
    RIG_BNXT_HWRM_VALID(W, 16)
RIG_BNXT_LAYOUT(hwrm_err_output, 16, RIG_BNXT_HWRM_ERR_OUTPUT);

// Whether the response at the start of `resp` is complete: resp_len set and the byte at
// resp_len - 1 equal to HWRM_RESP_VALID_KEY (bnxt_hwrm.c __hwrm_send). Read the rest only after
// that, behind a read barrier. A resp_len that does not fit the header or the buffer is an error:
// the firmware wrote something that is not a response.
inline std::expected<bool, decode_error> hwrm_response_complete(std::span<const std::byte> resp) {
    if (resp.size() < hwrm_resp_hdr::layout_size) {
        return std::unexpected(decode_error{decode_error::kind::short_buffer, "hwrm_resp_hdr", 0,
                                            hwrm_resp_hdr::layout_size, resp.size()});
    }
    const std::uint16_t len = rig::abi::load_le<std::uint16_t>(resp.data() + 6);
    if (len == 0) {
        return false;
    }
    if (len < hwrm_resp_hdr::layout_size || len > resp.size()) {
        return std::unexpected(
            decode_error{decode_error::kind::bad_length, "hwrm_resp_hdr.resp_len", len, 0,
                         resp.size()});
    }
    return std::to_integer<std::uint8_t>(resp[len - 1]) == HWRM_RESP_VALID_KEY;
}

}  // namespace rig::bnxt::abi

#include "abi/bnxt/hwrm_cmds.hpp"
