#pragma once
// The RoCE objects the bnxt firmware model keeps for the RoCE command channel (roce_hsi.h
// cmdq_*): completion queues (CREATE_CQ), memory keys (ALLOCATE_MRW, REGISTER_MR) and queue pairs
// (CREATE_QP, MODIFY_QP). A PD is no firmware object on bnxt: the driver numbers PDs itself
// (qplib_res.c bnxt_qplib_alloc_pd) and the firmware only keeps the number.
//
// Ids are context entries: each object takes one entry of its context type's backing store
// (FUNC_BACKING_STORE_CFG, bnxt.c bnxt_alloc_ctx_mem) beyond the L2 entries, the model writes its
// context record there, and the id names the entry:
//   CQ id    = the CQ context entry (cq_max_l2_entries and up)
//   QP id    = 1 for the GSI QP (bnxt_re's qp table keeps id 1 apart: qplib_fp.h
//              map_qp_id_to_tbl_indx), RC and UD from 2; entry = qp L2 entries + id - 1
//   key      = the MRAV context entry, from 1 (0 is never handed out)
// The record is the model's (a card's context layout is firmware-private): the object's kind
// and handle, so a driver that hands the same pages to two owners, or unmaps them, is seen.
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

namespace rig::sim::bnxt {

// A queue's memory: its pages in order, each page_bytes (CREATE_QP/CREATE_CQ pg_size, or
// REGISTER_MR log2_pg_size: a power of two, which the commands refuse otherwise).
struct queue_memory {
    std::uint64_t page_bytes = 0;
    std::vector<std::uint64_t> pages{};
    // The IOVA of byte `offset` of the queue (nothing past its pages, or no pages: 0). A shift
    // and a mask: a 64-bit division per WQE and CQE cost tens of cycles (perf annotate).
    std::uint64_t address(std::uint64_t offset) const noexcept {
        if (page_bytes == 0) {
            return 0;
        }
        const std::uint64_t p = offset >> std::countr_zero(page_bytes);
        return p < pages.size() ? pages[p] + in_page(offset) : 0;
    }
    std::uint64_t in_page(std::uint64_t offset) const noexcept { return offset & (page_bytes - 1); }
    std::uint64_t bytes() const noexcept { return page_bytes * pages.size(); }
};

// A position in a ring of `entries` slots counted modulo twice the ring (a producer's index
// and epoch, docs/bnxt-data-path.md "Queues"): its slot, and the position after it. A compare
// each: the rings need not be powers of two, and a division per WQE cost tens of cycles.
constexpr std::uint32_t slot_of(std::uint32_t pos, std::uint32_t entries) noexcept {
    return pos < entries ? pos : pos - entries;
}
constexpr std::uint32_t position_after(std::uint32_t pos, std::uint32_t entries) noexcept {
    return pos + 1 == 2 * entries ? 0 : pos + 1;
}
// How far position `to` lies after `from` (both positions: below 2 x entries).
constexpr std::uint32_t positions_between(std::uint32_t from, std::uint32_t to, std::uint32_t entries) noexcept {
    return slot_of(to + 2 * entries - from, 2 * entries);
}

struct roce_cq {
    std::uint64_t handle = 0;      // cq_handle: comes back in the CQ's NQ entries
    std::uint32_t entries = 0;     // cq_size: 32-byte CQEs
    std::uint16_t nq = 0;          // cnq_id: the NQ ring (RING_ALLOC) it notifies
    std::uint32_t dpi = 0;
    queue_memory memory{};
    std::uint32_t queue_pairs = 0; // queue pairs that name it (a named CQ is not destroyed)
};

struct roce_key {
    std::uint8_t kind = 0;         // ALLOCATE_MRW mrw_flags: MR, PMR, MW_TYPE1, MW_TYPE2A/B
    std::uint32_t pd = 0;
    std::uint64_t handle = 0;
    bool registered = false;       // REGISTER_MR took it (MR and PMR only)
    std::uint8_t access = 0;       // REGISTER_MR access (the MR encoding, roce_hsi.h cmdq_*)
    std::uint64_t va = 0;
    std::uint64_t bytes = 0;
    queue_memory memory{};         // the registered pages (log2_pg_size)
};

// MODIFY_QP's attributes, as the last transition left them (QUERY_QP answers them).
struct roce_qp_attributes {
    std::uint8_t access = 0;       // QP access bits (LOCAL_WRITE 0x1, REMOTE_WRITE 0x2, REMOTE_READ 0x4)
    std::uint16_t pkey = 0;
    std::uint32_t qkey = 0;
    std::array<std::uint8_t, 16> dgid{};   // wire order
    std::uint32_t flow_label = 0;
    std::uint16_t sgid_index = 0;  // the firmware's GID index (ADD_GID's xid)
    std::uint8_t hop_limit = 0, traffic_class = 0;
    std::array<std::uint8_t, 6> dest_mac{};
    std::array<std::uint8_t, 6> src_mac{};
    std::uint8_t path_mtu = 0;     // CMDQ_MODIFY_QP_PATH_MTU_* (0 = 256 .. 4 = 4096)
    std::uint8_t network_type = 0;
    std::uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
    std::uint32_t rq_psn = 0, sq_psn = 0;
    std::uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;   // ORRQ / IRRQ slots (limit + 1, 2 x limit + 2)
    std::uint32_t dest_qp_id = 0;
    std::uint16_t vlan = 0;        // id, DEI, PCP as MODIFY_QP carries them
};

struct roce_qp {
    std::uint8_t type = 0;         // CMDQ_CREATE_QP_TYPE_RC / UD / GSI
    std::uint64_t handle = 0;      // qp_handle: comes back in every CQE of this QP
    std::uint32_t flags = 0;       // qp_flags
    std::uint8_t state = 0;        // CMDQ_MODIFY_QP_NEW_STATE_* (RESET at CREATE_QP)
    std::uint32_t pd = 0, dpi = 0;
    std::uint32_t sq_entries = 0, rq_entries = 0;   // WQEs (static mode)
    std::uint8_t sq_sge = 0, rq_sge = 0;
    std::uint32_t send_cq = 0, receive_cq = 0;
    queue_memory sq{};             // sq_entries x 128-byte WQEs, then (RC) the PSN search area
    queue_memory rq{};             // rq_entries x (32 + 16 x rq_sge)-byte WQEs
    std::uint64_t irrq = 0, orrq = 0;
    roce_qp_attributes attributes{};
};

}  // namespace rig::sim::bnxt
