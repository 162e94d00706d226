#pragma once
// Where the bnxt data path of one queue pair lies: the memory the control plane made
// (qp/bnxt/control.hpp over firmware/bnxt/objects.hpp) and the doorbell words of its DPI page
// (docs/bnxt-data-path.md, "Rig's layout"). The data path (qp/bnxt/data_path.hpp) takes this
// and nothing else.
#include <cstddef>
#include <cstdint>
#include <span>

namespace rig::qp::bnxt {

// Rig's doorbell block of one queue pair: 64 bytes of a DPI page, one word per doorbell
// (docs/bnxt-data-path.md). Offsets in the block.
namespace doorbell_word {
inline constexpr std::size_t sq = 0;
inline constexpr std::size_t rq = 8;
inline constexpr std::size_t send_cq = 16;
inline constexpr std::size_t send_cq_arm = 24;
inline constexpr std::size_t receive_cq = 32;
inline constexpr std::size_t receive_cq_arm = 40;
inline constexpr std::size_t block_bytes = 64;
inline constexpr std::size_t blocks_per_page = 4096 / block_bytes;
// The privileged page's words (at db_offset): the CREQ's NQ_ARM at +0 (firmware/bnxt/rcfw.cpp),
// the RoCE NQ's at +8 (firmware/bnxt/events.cpp), every CQ's CQ_ARMENA at +16, the NQ_ARM of
// every completion group's NQ at +24 (qp/bnxt/group_path.hpp; the xid names the NQ).
inline constexpr std::size_t armena = 16;
inline constexpr std::size_t group_nq_arm = 24;
}  // namespace doorbell_word

struct send_queue_memory {
    std::span<std::byte> ring;        // sq_size x 128-byte static WQEs (8 slots of 16 bytes)
    std::span<std::byte> psn_search;  // sq_size x 16-byte sq_psn_search_ext, right after the ring
    std::byte* doorbell = nullptr;    // the SQ's word (8-byte aligned) in the QP's DPI page
};

struct receive_queue_memory {
    std::span<std::byte> ring;        // rq_size x 128-byte WQEs (rq_sge 6)
    std::byte* doorbell = nullptr;    // the RQ's word
};

struct completion_queue_memory {
    std::span<std::byte> ring;        // cq_size x 32-byte CQEs, zeroed (toggle 0: not yet written)
    std::byte* doorbell = nullptr;    // consumer word (type CQ)
    std::byte* arm_doorbell = nullptr;  // arm word (type CQ_ARMALL)
};

struct data_path_memory {
    send_queue_memory send;
    receive_queue_memory receive;
    completion_queue_memory send_cq;
    completion_queue_memory receive_cq;
    std::uint32_t qpn = 0;           // the QP's id (doorbell xid of SQ and RQ)
    std::uint64_t qp_handle = 0;     // CREATE_QP qp_handle: every CQE of the QP carries it
    std::uint32_t send_cqn = 0;      // CQ ids (doorbell xid of their CQ doorbells)
    std::uint32_t receive_cqn = 0;
};

}  // namespace rig::qp::bnxt
