#pragma once
// The RoCE objects a driver makes over the RCFW channel once INITIALIZE_FW ran (bnxt_re's
// qplib_fp.c and qplib_sp.c; roce_hsi.h): protection domains (numbers the driver keeps: qplib_res.c
// bnxt_qplib_alloc_pd), completion queues, memory regions and RC queue pairs. The same rooms as
// firmware/mlx5/objects.hpp.
//
//   pd_numbers pds(dev->roce().max_pd);
//   auto c = cq::create(*dev->rcfw(), fn, stranded, {.entries = 256, .nq_ring = dev->creq_ring_id()}, by).value();
//   auto m = mr::create(*dev->rcfw(), fn, stranded, pd, iova, bytes, {.local_write = true}, by).value();
//   auto q = qp::create(*dev->rcfw(), fn, stranded, {.pd = pd, .send_cq = c.id(), .receive_cq = c.id()}, by).value();
//   q.rst2init(ch, access, by); q.init2rtr(ch, rtr, by); q.rtr2rts(ch, rts, by);
//
// Memory follows firmware/mapped_memory.hpp: a create the firmware refused gives everything
// back; a destroy that succeeded frees it; a destroy refused leaves the object usable; a
// timeout or a dead channel strands it (the firmware may still name it). Queue memory is 4 KiB
// pages described as bnxt_qplib describes them (qplib_res.c bnxt_qplib_alloc_init_hwq): one
// page is level 0 (the PBL is the page), up to 512 pages level 1 (a page of PTEs), more level 2
// (a page of PDEs over PTE pages); every entry carries PTU_PTE_VALID.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "abi/bnxt/rcfw_cmds.hpp"
#include "driver/function.hpp"
#include "firmware/bnxt/error.hpp"
#include "firmware/bnxt/rcfw.hpp"
#include "firmware/mapped_memory.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::bnxt {

using deadline = rcfw_channel::clock::time_point;

namespace detail {
// After a failed command: may the firmware still name the object's memory? Not after a status
// (it answered and did nothing) or bad input (nothing was sent); after anything else, it may.
bool firmware_may_hold(const error& e) noexcept;

// Queue memory: `data_bytes` in 4 KiB pages, then the page tables its level needs, one mapping.
struct paged_memory {
    mapped_memory memory;
    std::uint64_t pbl = 0;    // CREATE_CQ / CREATE_QP pbl: the page (level 0) or the top table
    std::uint8_t level = 0;   // 0, 1 or 2
    std::size_t data_bytes = 0;
};
result<paged_memory> paged(driver::function& fn, std::size_t data_bytes, std::string what);
}  // namespace detail

// ---- protection domains: numbers only --------------------------------------------------------
class pd_numbers {
public:
    explicit pd_numbers(std::uint32_t max);  // QUERY_FUNC max_pd
    // The lowest free number; a refusal (status RESOURCES) when all `max` are taken.
    result<std::uint32_t> alloc();
    // Misuse (a number not allocated) throws std::invalid_argument.
    void free(std::uint32_t pd);

private:
    std::vector<bool> _taken;
};

// ---- completion queue ------------------------------------------------------------------------
struct cq_params {
    std::uint32_t entries = 256;   // 32-byte CQEs (cq_base), at most QUERY_FUNC max_cqe
    std::uint16_t nq_ring = 0;     // the NQ ring (HWRM RING_ALLOC) its notifications go to
    std::uint32_t dpi = 0;         // the doorbell page its doorbells use
    std::uint64_t handle = 0;      // cq_handle, echoed in its NQ notifications (0: one unique in the process)
};

class cq {
public:
    static result<cq> create(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, const cq_params& params,
                             deadline by);
    result<void> destroy(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, deadline by);

    cq() = default;
    std::uint32_t id() const noexcept { return _id; }
    std::uint64_t handle() const noexcept { return _params.handle; }   // the one CREATE_CQ gave
    const cq_params& params() const noexcept { return _params; }
    std::span<std::byte> entries() const noexcept { return {_queue.memory.data(), std::size_t{32} * _params.entries}; }
    std::uint64_t iova() const noexcept { return _queue.memory.iova(); }
    bool alive() const noexcept { return _queue.memory.mapped(); }

private:
    std::uint32_t _id = 0;
    cq_params _params;
    detail::paged_memory _queue;
};

// ---- memory region -----------------------------------------------------------------------------
struct mr_access {
    bool local_write = false;
    bool remote_read = false;
    bool remote_write = false;
};

class mr {
public:
    // ALLOCATE_MRW (type MR) and REGISTER_MR over [iova, iova + length) of memory already
    // mapped for the device, 4 KiB pages, its page list in memory of its own (qplib_sp.c
    // bnxt_qplib_alloc_mrw, bnxt_qplib_reg_mr). lkey = rkey = the key ALLOCATE_MRW answered.
    // A refused REGISTER_MR frees the key again. Misuse (length 0, a range that wraps, remote
    // write without local write: IB 10.6.3.1) throws std::invalid_argument.
    static result<mr> create(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, std::uint32_t pd,
                             std::uint64_t iova, std::size_t length, mr_access access, deadline by);
    // DEALLOCATE_KEY, which frees a registered MR too (bnxt_re_dereg_mr sends only it).
    result<void> destroy(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, deadline by);

    mr() = default;
    std::uint32_t lkey() const noexcept { return _key; }
    std::uint32_t rkey() const noexcept { return _key; }
    std::uint8_t level() const noexcept { return _level; }
    bool alive() const noexcept { return _alive; }

private:
    std::uint32_t _key = 0;
    std::uint8_t _level = 0;
    bool _alive = false;
    mapped_memory _page_list;   // level 1 and 2 only
};

// ---- queue pair, RC ------------------------------------------------------------------------------
struct qp_params {
    std::uint32_t pd = 0;
    std::uint32_t send_cq = 0;
    std::uint32_t receive_cq = 0;
    std::uint32_t dpi = 0;
    std::uint32_t sq_entries = 64;   // 128-byte WQEs (static mode: 8 slots of 16 bytes)
    std::uint32_t rq_entries = 64;
    std::uint8_t sq_sge = 1;         // 1..6
    std::uint8_t rq_sge = 1;         // 1..6: a receive WQE is 32 + 16 x rq_sge bytes
    std::uint64_t handle = 0;        // qp_handle, in every CQE of the QP (0: its SQ's address)
};

struct qp_access {
    bool remote_read = false;
    bool remote_write = false;
    bool remote_atomic = false;
};

struct qp_rtr_params {
    std::uint32_t remote_qpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint8_t path_mtu = 3;       // CMDQ_MODIFY_QP_PATH_MTU_*: 0 = 256 .. 4 = 4096 (3: 2048)
    std::array<std::uint8_t, 16> dgid{};
    std::array<std::uint8_t, 6> dmac{};
    std::uint16_t sgid_index = 0;    // ADD_GID's index of our GID (device::gid_index)
    bool ipv4 = true;                // RoCE v2 over IPv4 (an IPv4-mapped dgid) or IPv6
    std::uint8_t hop_limit = 64;
    std::uint8_t traffic_class = 0;
    std::uint8_t min_rnr_timer = 12; // RNR NAK timer code
    std::uint8_t max_dest_rd_atomic = 16;   // RDMA reads as responder, 1..16
};

struct qp_rts_params {
    std::uint32_t sq_psn = 0;
    std::uint8_t timeout = 14;       // 4.096 us x 2^14 = 67 ms (docs/guide.md)
    std::uint8_t retry_cnt = 7;
    std::uint8_t rnr_retry = 7;      // 7: retried without end
    std::uint8_t max_rd_atomic = 16; // RDMA reads as requester, 1..16
};

// QUERY_QP, decoded (the read limits back from slots).
struct qp_state_info {
    std::uint8_t state = 0;          // CMDQ_MODIFY_QP_NEW_STATE_*
    std::uint32_t remote_qpn = 0;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    std::uint8_t path_mtu = 0;
    std::uint8_t timeout = 0, retry_cnt = 0, rnr_retry = 0, min_rnr_timer = 0;
    std::uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;
    std::uint16_t sgid_index = 0;
    std::array<std::uint8_t, 16> dgid{};
    std::array<std::uint8_t, 6> dmac{};
    qp_access access;
};

class qp {
public:
    // CREATE_QP type RC (qplib_fp.c bnxt_qplib_create_qp): the SQ (sq_entries x 128 bytes, then
    // the PSN search area of 16-byte entries, bnxt_qplib_init_psn_ptr), the RQ, and a page each
    // for the IRRQ and ORRQ (16 reads: 34 and 17 slots of 16 bytes). Misuse (zero or too many
    // entries, 0 or more than 6 SGEs) throws std::invalid_argument.
    static result<qp> create(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, const qp_params& params,
                             deadline by);
    // The transitions (IB 10.3.1) as bnxt_qplib_modify_qp sends them, with the masks the
    // firmware wants for each (qplib_fp.c __filter_modify_flags). A refusal leaves the QP as it was.
    result<void> rst2init(rcfw_channel& ch, qp_access access, deadline by);
    result<void> init2rtr(rcfw_channel& ch, const qp_rtr_params& p, deadline by);
    result<void> rtr2rts(rcfw_channel& ch, const qp_rts_params& p, deadline by);
    result<void> to_error(rcfw_channel& ch, deadline by);
    result<void> to_reset(rcfw_channel& ch, deadline by);
    result<qp_state_info> query(rcfw_channel& ch, deadline by) const;
    result<void> destroy(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, deadline by);

    qp() = default;
    std::uint32_t id() const noexcept { return _id; }
    std::uint64_t handle() const noexcept { return _params.handle; }   // the one CREATE_QP gave
    const qp_params& params() const noexcept { return _params; }
    std::span<std::byte> send_queue() const noexcept { return {_sq.memory.data(), std::size_t{128} * _params.sq_entries}; }
    std::span<std::byte> psn_search() const noexcept {
        return {_sq.memory.data() + std::size_t{128} * _params.sq_entries, std::size_t{16} * _params.sq_entries};
    }
    std::span<std::byte> receive_queue() const noexcept { return {_rq.memory.data(), _rq.data_bytes}; }
    bool alive() const noexcept { return _sq.memory.mapped(); }

private:
    result<void> modify(rcfw_channel& ch, const abi::cmdq_modify_qp& cmd, deadline by);
    // Its memory released, or stranded when the firmware may still name it.
    void let_go(driver::function& fn, stranded_memory& stranded, bool firmware_may_hold);
    std::uint32_t _id = 0;
    qp_params _params;
    detail::paged_memory _sq, _rq;
    mapped_memory _rd_queues;   // IRRQ page, ORRQ page
};

}  // namespace rig::firmware::bnxt
