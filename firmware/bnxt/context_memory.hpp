#pragma once
// Context memory ("backing store", bnxt_en's bnxt.c bnxt_alloc_ctx_mem): on P5 the host supplies
// the chip's context tables (QP, SRQ, CQ, VNIC, STAT, TQM rings, MRAV, TIM) through
// FUNC_BACKING_STORE_CFG, sized for RoCE as bnxt_en sizes them when the function can do RoCE
// (Linux bnxt.c bnxt_alloc_ctx_mem, bnxt_setup_ctxm_pg_tbls, bnxt_alloc_ctx_pg_tbls):
//
//   QP    l2 + qp1 + extra, extra = min(65536, max - l2 - qp1)     level 2
//   SRQ   l2 + min(8192, max - l2)                                  level 2
//   CQ    l2 + 2 * extra                                            level 2
//   VNIC  vnic + ring table entries; STAT max                       level 1
//   MRAV  num_mr = min(max / 2, 256 K) + num_ah = min(num_mr, 128 K) level 2
//   TIM   l2 + qp1 + extra                                          level 1
//   TQM   SP: vnic + l2 + 2 * (extra + qp1) + min; each FP ring: l2 + 2 * (extra + qp1); level 2
// each rounded to entry_multiple and clamped to [min, max]. Pages are 4 KiB; level 1 is one page
// of PTEs, level 2 a page of PDEs over pages of PTEs (512 each); every entry is the page's DMA
// address | PTU_PTE_VALID. A type whose QCAPS ctx_init_mask bit is set gets its initializer
// (ctx_kind_initializer at byte init_offset * 4 of every entry: bnxt_init_ctx_mem).
//
// The memory is mapped for the device as long as this object lives; once the firmware may
// still own it (it was configured and the firmware stopped answering, or was never told to let
// go) strand() hands every page to the stranded registry instead of unmapping it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/bnxt/hwrm.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/bnxt/error.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::bnxt {

// One context type's memory as FUNC_BACKING_STORE_CFG names it.
struct context_block {
    std::string type;             // "QP", "TQM_RING3", ...
    std::uint32_t entries = 0;
    std::uint16_t entry_size = 0;
    std::uint8_t level = 0;       // 1 or 2 (a single page would be level 0; bnxt_en never asks for it here)
    std::uint64_t page_dir = 0;   // the IOVA of the top page table
    std::size_t data_pages = 0;
    std::size_t table_pages = 0;
    bool initialized = false;     // filled with the initializer
};

class context_memory {
public:
    static constexpr std::size_t page = driver::dma_memory::small_page;
    static constexpr std::size_t ptes_per_page = page / 8;

    // Sizes, allocates, initializes and maps every type for RoCE (`roce`) or for L2 only.
    static result<std::unique_ptr<context_memory>> allocate(driver::function& fn,
                                                            const abi::hwrm_func_backing_store_qcaps_output& caps,
                                                            bool roce);
    ~context_memory();
    context_memory(const context_memory&) = delete;
    context_memory& operator=(const context_memory&) = delete;

    // The FUNC_BACKING_STORE_CFG request that gives all of it (enables, levels, page sizes,
    // directories, counts, entry sizes), as bnxt_hwrm_func_backing_store_cfg fills it.
    abi::hwrm_func_backing_store_cfg_input cfg_request() const { return _cfg; }
    const std::vector<context_block>& blocks() const noexcept { return _blocks; }
    std::size_t bytes() const noexcept;

    // The firmware may still use it: every allocation goes to `registry`, mapped, never freed.
    void strand(stranded_memory& registry, const std::string& why);

private:
    struct allocation {
        driver::dma_memory memory;
        std::uint64_t iova = 0;
        std::string what;
    };
    explicit context_memory(driver::function& fn) : _fn(fn) {}
    result<allocation> map(std::size_t bytes, std::string what);
    // Allocates one type; returns its block (page_dir, level) and records it.
    result<context_block> add(std::string type, std::uint32_t entries, std::uint16_t entry_size,
                              std::uint8_t level, int init_value, std::uint8_t init_offset);

    driver::function& _fn;
    std::vector<allocation> _allocations;
    std::vector<context_block> _blocks;
    abi::hwrm_func_backing_store_cfg_input _cfg;
    bool _stranded = false;
};

}  // namespace rig::firmware::bnxt
