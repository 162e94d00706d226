#pragma once
// The firmware objects a driver creates after INIT_HCA (mlx5_ifc.h; the kernel's
// mlx5/core uar.c, pd.c, eq.c, cq.c and drivers/infiniband/hw/mlx5 mr.c, qp.c): UARs and
// protection domains (numbers only), and the objects that own memory the device reads and
// writes: event queues, completion queues, queue pairs and memory keys.
//
//   auto uar = alloc_uar(q, deadline).value();
//   auto e = eq::create(q, fn, stranded, {.log_size = 7, .uar = uar, .vector = 0}, deadline).value();
//   ...
//   e.destroy(q, fn, stranded, deadline);
//
// Memory: each memory-owning object allocates driver::dma_memory, maps it for the device with
// function::dma_map and hands the firmware its IOVAs. Its fate follows what the firmware can
// still do with it:
//  - create refused by the firmware (status, delivery): everything taken is given back;
//  - destroy succeeded: unmapped and freed;
//  - destroy refused by the firmware: nothing changes, the object stays usable;
//  - timeout or fatal (create or destroy), or a transport failure: the firmware may still
//    name the memory, so it goes to `stranded` and is never freed; the object is gone.
// An object dropped without destroy() keeps its memory mapped for the life of the process (the
// device may still write it) and logs a warning.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "abi/mlx5/ifc/qp.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mapped_memory.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/doorbell_records.hpp"
#include "firmware/mlx5/error.hpp"
#include "firmware/mlx5/stranded.hpp"

namespace rig::firmware::mlx5 {

using deadline = command_queue::clock::time_point;

namespace detail {
// After a failed command: may the firmware still name the object's memory? Not after a
// status or delivery error (it answered and did nothing) or bad input (nothing was sent);
// after a timeout, a fatal error, a transport failure or a bad output, it may.
bool firmware_may_hold(const error& e) noexcept;
}  // namespace detail

// ---- numbers only (mlx5_ifc.h) -----------------------------------------------------------------
// UAR n is BAR0 page n (4 KiB with log_uar_page_sz = 0: kernel uar.c uar2pfn).
result<std::uint32_t> alloc_uar(command_queue& q, deadline by);
result<void> dealloc_uar(command_queue& q, std::uint32_t uar, deadline by);
result<std::uint32_t> alloc_pd(command_queue& q, deadline by);
result<void> dealloc_pd(command_queue& q, std::uint32_t pd, deadline by);

// ---- DMA memory mapped for the device: firmware/mapped_memory.hpp ----------------------
using firmware::mapped_memory;

// ---- event queue (mlx5_ifc.h; kernel eq.c) ------------------------------------------------------
struct eq_params {
    std::uint8_t log_size = 7;  // 2^log_size EQEs of 64 bytes
    std::uint32_t uar = 0;      // the UAR whose EQ doorbells (0x40, 0x48) serve it
    std::uint16_t vector = 0;   // MSI-X vector
    std::array<std::uint64_t, 4> event_bitmask{};  // word 0 bit t = event type t
};

class eq {
public:
    // The buffer is one power-of-two allocation described by a single PAS entry (rdma-core's
    // mlx5_vfio devx_create_eq), every EQE's owner byte set to 1 (MLX5_EQE_OWNER_INIT_VAL).
    static result<eq> create(command_queue& q, driver::function& fn, stranded_memory& stranded,
                             const eq_params& params, deadline by);
    result<void> destroy(command_queue& q, driver::function& fn, stranded_memory& stranded, deadline by);

    eq() = default;
    std::uint32_t eqn() const noexcept { return _eqn; }
    const eq_params& params() const noexcept { return _params; }
    std::span<std::byte> entries() const noexcept { return {_memory.data(), std::size_t{64} << _params.log_size}; }
    std::uint64_t iova() const noexcept { return _memory.iova(); }
    bool alive() const noexcept { return _memory.mapped(); }

private:
    std::uint32_t _eqn = 0;
    eq_params _params;
    mapped_memory _memory;
};

// ---- completion queue (mlx5_ifc.h; kernel cq.c; rdma-core cq.c) ---------------------------------
struct cq_params {
    std::uint8_t log_size = 8;  // 2^log_size CQEs of 64 bytes
    std::uint32_t uar = 0;      // the UAR of its arm doorbell (UAR + 0x20)
    std::uint32_t eqn = 0;      // where its completion events go
};

class cq {
public:
    // The CQE buffer (page-rounded), every CQE's op_own = 0xf0 (opcode INVALID, owner 0: kernel
    // hw/mlx5/cq.c init_cq_frag_buf), and an 8-byte doorbell record from `records`, which
    // outlives the CQ (doorbell_records.hpp).
    static result<cq> create(command_queue& q, driver::function& fn, stranded_memory& stranded,
                             doorbell_records& records, const cq_params& params, deadline by);
    result<void> destroy(command_queue& q, driver::function& fn, stranded_memory& stranded, deadline by);

    cq() = default;
    std::uint32_t cqn() const noexcept { return _cqn; }
    const cq_params& params() const noexcept { return _params; }
    std::span<std::byte> entries() const noexcept { return {_memory.data(), buffer_bytes()}; }
    std::byte* doorbell_record() const noexcept { return _record.data; }
    std::uint64_t doorbell_record_iova() const noexcept { return _record.iova; }
    std::uint64_t iova() const noexcept { return _memory.iova(); }
    bool alive() const noexcept { return _memory.mapped(); }

private:
    std::size_t buffer_bytes() const noexcept { return std::size_t{64} << _params.log_size; }
    std::uint32_t _cqn = 0;
    cq_params _params;
    mapped_memory _memory;
    doorbell_records* _records = nullptr;
    doorbell_records::record _record;
};

// ---- queue pair, RC (mlx5_ifc.h; kernel hw/mlx5/qp.c) -------------------------------------------
struct qp_params {
    std::uint32_t pd = 0;
    std::uint32_t send_cq = 0;
    std::uint32_t receive_cq = 0;
    std::uint32_t uar = 0;           // the UAR whose doorbell register rings its SQ
    std::uint8_t log_sq_size = 6;    // 2^n 64-byte WQE basic blocks
    std::uint8_t log_rq_size = 6;    // 2^n receive WQEs
    std::uint8_t log_rq_stride = 0;  // receive WQE = 16 << n bytes (one data segment: 0)
};

struct qp_access {
    bool remote_read = false;
    bool remote_write = false;
    bool remote_atomic = false;
};

struct qp_rtr_params {
    std::uint32_t remote_qpn = 0;
    std::uint32_t next_rcv_psn = 0;
    ifc::qpc_mtu mtu = ifc::qpc_mtu::bytes_1k;
    std::array<std::uint8_t, 16> rgid{};
    std::array<std::uint8_t, 6> rmac{};
    std::uint8_t gid_index = 0;      // our GID (SET_ROCE_ADDRESS index): src_addr_index
    std::uint16_t udp_sport = 0xc000;
    std::uint8_t port = 1;
    std::uint8_t hop_limit = 64;
    std::uint8_t log_msg_max = 31;   // messages up to 2^31 bytes (docs/guide.md)
    std::uint8_t min_rnr_nak = 12;   // RNR NAK timer code (rdma-core tests/base.py MIN_RNR_TIMER)
    std::uint8_t log_rra_max = 4;    // 16 RDMA reads in flight as responder
};

struct qp_rts_params {
    std::uint32_t next_send_psn = 0;
    std::uint8_t ack_timeout = 14;  // 4.096 us * 2^14 = 67 ms (docs/guide.md)
    std::uint8_t retry_count = 7;
    std::uint8_t rnr_retry = 7;     // 7: retried without end
    std::uint8_t log_sra_max = 4;   // 16 RDMA reads in flight as requester
    std::uint8_t port = 1;
};

// QUERY_QP, decoded.
struct qp_state_info {
    ifc::qpc_state state = ifc::qpc_state::rst;
    std::uint32_t remote_qpn = 0;
    std::uint32_t next_rcv_psn = 0;
    std::uint32_t next_send_psn = 0;
    ifc::qpc_mtu mtu{};
    std::uint8_t ack_timeout = 0;
    std::uint8_t retry_count = 0;
    std::uint8_t rnr_retry = 0;
    std::uint8_t src_addr_index = 0;
    std::uint16_t udp_sport = 0;
    std::array<std::uint8_t, 16> rgid{};
    std::array<std::uint8_t, 6> rmac{};
    qp_access access;
};

class qp {
public:
    // One buffer: the RQ at offset 0, the SQ after it (kernel hw/mlx5/qp.c qp->sq.offset),
    // page-rounded; and an 8-byte doorbell record (DW0 receive, DW1 send) from `records`, which
    // outlives the QP (doorbell_records.hpp).
    static result<qp> create(command_queue& q, driver::function& fn, stranded_memory& stranded,
                             doorbell_records& records, const qp_params& params, deadline by);
    result<void> rst2init(command_queue& q, std::uint8_t port, std::uint16_t pkey_index, qp_access access,
                          deadline by);
    result<void> init2rtr(command_queue& q, const qp_rtr_params& p, deadline by);
    result<void> rtr2rts(command_queue& q, const qp_rts_params& p, deadline by);
    result<void> to_error(command_queue& q, deadline by);
    result<void> to_reset(command_queue& q, deadline by);
    result<qp_state_info> query(command_queue& q, deadline by) const;
    result<void> destroy(command_queue& q, driver::function& fn, stranded_memory& stranded, deadline by);

    qp() = default;
    std::uint32_t qpn() const noexcept { return _qpn; }
    const qp_params& params() const noexcept { return _params; }
    std::span<std::byte> receive_queue() const noexcept { return {_memory.data(), rq_bytes()}; }
    std::span<std::byte> send_queue() const noexcept { return {_memory.data() + rq_bytes(), sq_bytes()}; }
    std::byte* doorbell_record() const noexcept { return _record.data; }
    std::uint64_t doorbell_record_iova() const noexcept { return _record.iova; }
    std::uint64_t iova() const noexcept { return _memory.iova(); }
    bool alive() const noexcept { return _memory.mapped(); }

private:
    std::size_t rq_bytes() const noexcept {
        return std::size_t{1} << _params.log_rq_size << (_params.log_rq_stride + 4);
    }
    std::size_t sq_bytes() const noexcept { return std::size_t{64} << _params.log_sq_size; }
    std::uint32_t _qpn = 0;
    qp_params _params;
    mapped_memory _memory;
    doorbell_records* _records = nullptr;
    doorbell_records::record _record;
};

// ---- memory key for a registered region (rdma-core mlx5_vfio.c mlx5_vfio_reg_mr) ----------------
struct mkey_access {
    bool local_write = false;
    bool remote_read = false;
    bool remote_write = false;
};

class mkey {
public:
    // An MTT key over [iova, iova + length) of memory already mapped for the device: one MTT
    // entry per 4 KiB page, each `page | read | write` as rdma-core's mlx5_vfio reg_mr,
    // pg_access = 1, lr = 1, qpn = 0xffffff. The key's low byte (mkey_7_0) is a per-process
    // counter. Misuse (length 0, a range that wraps) throws std::invalid_argument.
    static result<mkey> create(command_queue& q, std::uint32_t pd, std::uint64_t iova, std::size_t length,
                               mkey_access access, deadline by);
    result<void> destroy(command_queue& q, deadline by);

    mkey() = default;
    std::uint32_t index() const noexcept { return _index; }
    std::uint32_t lkey() const noexcept { return _key; }
    std::uint32_t rkey() const noexcept { return _key; }
    bool alive() const noexcept { return _alive; }

private:
    std::uint32_t _index = 0;
    std::uint32_t _key = 0;
    bool _alive = false;
};

// CREATE_MKEY as a free function (the form the issue names).
inline result<mkey> create_mkey(command_queue& q, std::uint32_t pd, std::uint64_t iova, std::size_t length,
                                mkey_access access, deadline by) {
    return mkey::create(q, pd, iova, length, access, by);
}

}  // namespace rig::firmware::mlx5
