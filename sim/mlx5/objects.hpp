#pragma once
// The resource objects the firmware model keeps (mlx5_ifc.h's commands): UARs, protection
// domains, memory keys, event queues, completion queues and queue pairs, as the commands
// created them. The data path (transport engine, event engine) reads them through the
// firmware's accessors (firmware.hpp); only the firmware's command code changes them, except
// the producer/consumer fields marked for the engines.
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "abi/mlx5/ifc/qp.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;

// ---- memory keys (rdma-core mlx5_vfio.c mlx5_vfio_reg_mr, mlx5_ifc.h) ---------------------------
// The rights an access needs, as bits: mkc lr/lw/rr/rw/a.
namespace mkey_right {
inline constexpr std::uint8_t local_read = 1u << 0;
inline constexpr std::uint8_t local_write = 1u << 1;
inline constexpr std::uint8_t remote_read = 1u << 2;
inline constexpr std::uint8_t remote_write = 1u << 3;
inline constexpr std::uint8_t atomic = 1u << 4;
}  // namespace mkey_right

struct mkey_object {
    std::uint32_t index = 0;  // mkey_index of CREATE_MKEY's output
    std::uint32_t key = 0;    // index << 8 | mkey_7_0: the lkey/rkey a WQE names
    std::uint32_t pd = 0;
    std::uint8_t access_mode = 0;  // ifc::mkc_access_mode: pa or mtt
    std::uint8_t rights = 0;       // mkey_right bits
    std::uint64_t start_addr = 0;  // the region's first virtual address (IOVA in the keys' space)
    std::uint64_t len = 0;
    bool length64 = false;        // the region spans the whole 64-bit space (PA mode)
    std::uint8_t log_page_size = 0;  // absolute page shift of the MTT entries (mkc)
    std::vector<std::uint64_t> mtt;  // page addresses as given, with MTT rd_en/wr_en low bits
};

// One piece of a translated access: device memory (an IOVA of the DMA space) and its length.
struct dma_segment {
    std::uint64_t iova = 0;
    std::size_t len = 0;
};

// ---- event and completion queues (mlx5_ifc.h; kernel eq.c, cq.c) --------------------------------
struct eq_object {
    std::uint32_t eqn = 0;
    std::uint8_t log_eq_size = 0;   // 2^log_eq_size EQEs of 64 bytes
    std::uint32_t uar_page = 0;     // the UAR whose EQ doorbell (0x40/0x48) arms and updates it
    std::uint16_t intr = 0;         // the MSI-X vector it signals
    std::array<std::uint64_t, 4> event_bitmask{};  // word 0 bit t = event type t (as CREATE_EQ)
    std::uint8_t log_page_size = 0;  // relative to 4 KiB
    std::uint32_t page_offset = 0;
    std::vector<std::uint64_t> pas;  // the EQE buffer's pages
    // Kept by the event engine: the consumer index the driver last wrote to the doorbell, the
    // producer index of the next EQE, and whether an EQE may raise the vector.
    std::uint32_t consumer_index = 0;
    std::uint32_t producer_index = 0;
    bool armed = false;

    bool subscribed(std::uint8_t event_type) const noexcept {
        return (event_bitmask[event_type / 64] >> (event_type % 64) & 1) != 0;
    }
};

struct cq_object {
    std::uint32_t cqn = 0;
    std::uint8_t log_cq_size = 0;  // 2^log_cq_size CQEs of 64 bytes
    std::uint32_t uar_page = 0;
    std::uint32_t eqn = 0;         // c_eqn: where its completion events go
    std::uint64_t dbr_addr = 0;    // doorbell record: consumer index (DW0), arm (DW1)
    std::uint8_t log_page_size = 0;  // relative to 4 KiB
    std::uint32_t page_offset = 0;
    std::vector<std::uint64_t> pas;
    // Kept by the data path: index of the next CQE to write.
    std::uint32_t producer_index = 0;
};

// ---- queue pairs (mlx5_ifc.h; kernel hw/mlx5/qp.c) ----------------------------------------------
struct qp_object {
    std::uint32_t qpn = 0;
    ifc::qpc_state state = ifc::qpc_state::rst;
    // The context as created and modified: every field a transition wrote, `state` kept in step.
    // QUERY_QP returns it; the data path reads the fields it needs with abi::get<ifc::qpc::...>.
    std::array<std::byte, ifc::qpc::size_bytes> qpc{};
    std::array<std::byte, ifc::qpc::size_bytes> qpc_at_create{};  // what 2RST returns to
    // Decoded at CREATE_QP, fixed for the QP's life.
    std::uint32_t pd = 0;
    std::uint32_t cqn_snd = 0;
    std::uint32_t cqn_rcv = 0;
    std::uint32_t uar_page = 0;
    std::uint8_t log_sq_size = 0;    // 2^n send WQE basic blocks of 64 bytes
    std::uint8_t log_rq_size = 0;    // 2^n receive WQEs
    std::uint8_t log_rq_stride = 0;  // a receive WQE is 16 << log_rq_stride bytes
    std::uint64_t dbr_addr = 0;      // DW0 receive counter, DW1 send counter
    std::uint8_t log_page_size = 0;  // relative to 4 KiB
    std::uint32_t page_offset = 0;
    std::vector<std::uint64_t> pas;  // RQ first, then SQ, in one buffer

    std::size_t rq_bytes() const noexcept {
        return std::size_t{1} << log_rq_size << (log_rq_stride + 4);
    }
    std::size_t sq_bytes() const noexcept { return std::size_t{64} << log_sq_size; }
};

// ---- queue buffers (mlx5_ifc.h; kernel cq.c, hw/mlx5/qp.c) --------------------------------------
// Where byte `offset` of an EQ, CQ or QP buffer lies in device memory. The buffer is given by a
// page list (CREATE_EQ/CQ/QP pas): pages of 4 KiB << log_page_size, the buffer starting
// page_offset bytes into the first. Pages are a power of two, so a shift and a mask find the
// page, not a division per entry. nullopt: the pages do not reach that far.
struct buffer_place {
    std::uint64_t iova = 0;
    std::uint64_t left_in_page = 0;  // bytes from iova to the end of its page
};
inline std::optional<buffer_place> place_in_buffer(std::span<const std::uint64_t> pas, std::uint8_t log_page_size,
                                                   std::uint32_t page_offset, std::uint64_t offset) noexcept {
    const unsigned page_shift = 12u + log_page_size;
    const std::uint64_t at = offset + page_offset;
    const auto index = static_cast<std::size_t>(at >> page_shift);
    if (index >= pas.size()) {
        return std::nullopt;
    }
    const std::uint64_t in_page = at & ((std::uint64_t{1} << page_shift) - 1);
    return buffer_place{pas[index] + in_page, (std::uint64_t{1} << page_shift) - in_page};
}

namespace detail {
// The next free number in [first, first + count), searching from `next` and wrapping, as
// firmware hands out numbers round-robin (a stale number then names nothing for a while).
template <class Used>
std::optional<std::uint32_t> free_number(const Used& used, std::uint32_t& next, std::uint32_t first,
                                         std::uint32_t count) {
    std::uint32_t n = next < first || next - first >= count ? first : next;
    for (std::uint32_t tried = 0; tried < count; ++tried) {
        const std::uint32_t after = n - first + 1 >= count ? first : n + 1;
        if (!used.contains(n)) {
            next = after;
            return n;
        }
        n = after;
    }
    return std::nullopt;
}
}  // namespace detail

}  // namespace rig::sim::mlx5
