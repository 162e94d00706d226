#pragma once
// One HWRM request as the bnxt firmware model executes it (firmware.hpp): the request bytes,
// zero-padded so that any command's layout decodes from them, and the response or refusal the
// command's handler leaves.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "sim/bnxt/firmware.hpp"

namespace rig::sim::bnxt {

struct firmware::call {
    static constexpr std::size_t padded_bytes = 512;   // the longest request is 336 bytes
    std::vector<std::byte> req = std::vector<std::byte>(padded_bytes);
    bool via_short = false;        // fetched by DMA from a short command's req_addr
    std::size_t req_len = 0;       // bytes the driver gave (window length or short size)
    std::uint16_t req_type = 0;
    std::uint16_t seq_id = 0;
    std::uint64_t resp_addr = 0;
    vfio_user::dma_space* dma = nullptr;
    std::vector<std::byte> resp;   // the response a handler made (header filled by respond())
    std::uint16_t error = 0;       // HWRM error code; 0 with resp set: success
    cmd_err err = cmd_err::none;
    std::string why;               // the refusal, for the log

    template <class In>
    In input() const {
        return *::rig::bnxt::abi::decode<In>(std::span<const std::byte>(req));
    }
    template <class Out>
    void reply(const Out& out) {
        const auto b = ::rig::bnxt::abi::to_bytes(out);
        resp.assign(b.begin(), b.end());
    }
    // Refuses the request: an hwrm_err_output with `code` and cmd_err `e`.
    void fail(std::uint16_t code, cmd_err e, std::string reason) {
        error = code;
        err = e;
        why = std::move(reason);
        resp.clear();
    }
    bool failed() const noexcept { return error != 0; }
    // A request's fid must name this function: 0xffff (self) or its own fid; another is refused
    // INVALID_PARAMS, unknown_object (the model has no VFs). True when it refused.
    bool refuse_other_fid(std::uint16_t fid, std::uint16_t own) {
        if (fid == 0xffff || fid == own) {
            return false;
        }
        fail(::rig::bnxt::abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
             "fid " + ::rig::abi::hex(fid) + " is no function of this PF");
        return true;
    }
};

// The data pages of `count` pages of `page` bytes at level 0/1/2 under `dir` (context memory,
// rings, the CMDQ; bnxt.c bnxt_alloc_ctx_pg_tbls): level 0 is `dir` itself, level 1 a page of PTEs,
// level 2 a page of PDEs over PTE pages, every entry with PTU_PTE_VALID. The table pages go to
// `tables`. false, with the call failed (INVALID_PARAMS), when an entry is not valid, a table is
// unaligned or unreadable, or the pages do not fit the level. `table_page` is the size of the
// table pages (0: `page`); an MR's tables are PAGE_SIZE under data pages of any size
// (qplib_sp.c bnxt_qplib_reg_mr: log2_pbl_pg_size).
bool walk_pages(firmware::call& c, std::uint64_t dir, std::uint8_t level, std::uint64_t page,
                std::uint64_t count, std::vector<std::uint64_t>& pages, std::vector<std::uint64_t>& tables,
                std::uint64_t table_page = 0);

// The pg_size code of context memory, CREATE_QP and CREATE_CQ (bnxt.c bnxt_alloc_ctx_mem,
// roce_hsi.h cmdq_*): 0 4K, 1 8K, 2 64K, 3 2M, 4 8M, 5 1G; 0 bytes for any other code.
std::uint64_t page_bytes_of(std::uint8_t pg_size);

// The function's maxima FUNC_QCAPS and FUNC_RESOURCE_QCAPS both report (same field names in
// hwrm_func_qcaps_output and hwrm_func_resource_qcaps_output).
template <class Out>
void put_function_maxima(Out& r, const firmware_options& o) {
    r.max_rsscos_ctx = o.max_rsscos_ctx;
    r.max_cmpl_rings = o.max_cmpl_rings;
    r.max_tx_rings = o.max_tx_rings;
    r.max_rx_rings = o.max_rx_rings;
    r.max_l2_ctxs = o.max_l2_ctxs;
    r.max_vnics = o.max_vnics;
    r.max_stat_ctx = o.max_stat_ctx;
    r.max_hw_ring_grps = o.max_hw_ring_grps;
}

}  // namespace rig::sim::bnxt
