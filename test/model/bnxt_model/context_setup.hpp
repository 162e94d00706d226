#pragma once
// Context memory for the bnxt model's tests, as bnxt_en makes it with RoCE on (bnxt.c
// bnxt_alloc_ctx_mem, bnxt_hwrm_func_backing_store_cfg), in its own DMA mapping.
#include <optional>
#include <tuple>
#include <utility>

#include "hwrm_client.hpp"

namespace rig::test::bnxt {

// Context memory in its own DMA mapping (so a test can unmap it alone), laid out as bnxt_en
// lays it: 4 KiB pages, a PTE page (level 1) or a PDE page over PTE pages (level 2), every
// entry with PTU_PTE_VALID, every entry's initializer byte written.
struct context_memory {
    static constexpr std::size_t bytes = 32u << 20;
    served_bnxt& m;
    drv::dma_memory mem;
    std::uint64_t iova = 0;
    std::size_t used = 0;
    std::uint8_t init = 0xff;

    explicit context_memory(served_bnxt& s) : m(s) {
        auto a = drv::dma_memory::allocate(bytes, drv::page_choice::small_only);
        REQUIRE(a.has_value());
        mem = std::move(*a);
        auto mapped = m.f->dma_map(mem, 0, mem.size(), drv::dma_access::read_write);
        REQUIRE(mapped.has_value());
        iova = *mapped;
    }
    std::uint64_t page() {
        REQUIRE(used + 4096 <= bytes);
        const std::uint64_t at = iova + used;
        std::memset(mem.data() + used, 0, 4096);
        used += 4096;
        return at;
    }
    std::byte* host(std::uint64_t at) { return mem.data() + (at - iova); }
    // The pages of `entries` entries of `size` bytes; the page_dir and level for them.
    std::pair<std::uint64_t, std::uint8_t> area(std::uint32_t entries, std::uint16_t size,
                                                std::optional<unsigned> init_offset, bool force_level2 = false) {
        const std::size_t n = (std::size_t{entries} * size + 4095) / 4096;
        std::vector<std::uint64_t> pages;
        for (std::size_t i = 0; i < n; ++i) {
            pages.push_back(page());
            for (std::size_t e = 0; init_offset && e < 4096 / size; ++e) {
                host(pages.back())[e * size + *init_offset] = std::byte{init};
            }
        }
        if (n == 1 && !force_level2) {
            return {pages[0], 0};
        }
        auto table = [&](const std::vector<std::uint64_t>& entries_of) {
            const std::uint64_t t = page();
            for (std::size_t i = 0; i < entries_of.size(); ++i) {
                rig::abi::store_le<std::uint64_t>(host(t) + 8 * i, entries_of[i] | 0x1);
            }
            return t;
        };
        if (n <= 512 && !force_level2) {
            return {table(pages), 1};
        }
        std::vector<std::uint64_t> ptes;
        for (std::size_t i = 0; i < n; i += 512) {
            ptes.push_back(table(std::vector<std::uint64_t>(pages.begin() + i, pages.begin() + std::min(n, i + 512))));
        }
        return {table(ptes), 2};
    }
};

// FUNC_BACKING_STORE_CFG as bnxt_en fills it with RoCE on, from QCAPS `q`.
inline abi::hwrm_func_backing_store_cfg_input roce_request(context_memory& cm,
                                                     const abi::hwrm_func_backing_store_qcaps_output& q) {
    abi::hwrm_func_backing_store_cfg_input r;
    const std::uint32_t qp1 = q.qp_min_qp1_entries, qp_l2 = q.qp_max_l2_entries;
    const std::uint32_t extra = std::min<std::uint32_t>(65536, q.qp_max_entries - qp_l2 - qp1);
    r.enables = 0x1 | 0x2 | 0x4 | 0x8 | 0x10 | 0x20 | 0x4000 | 0x8000;
    for (unsigned i = 0; i < q.tqm_fp_rings_count; ++i) {
        r.enables |= 0x40u << i;
    }
    r.qp_num_entries = qp_l2 + qp1 + extra;
    r.qp_num_qp1_entries = static_cast<std::uint16_t>(qp1);
    r.qp_num_l2_entries = static_cast<std::uint16_t>(qp_l2);
    r.qp_entry_size = q.qp_entry_size;
    std::tie(r.qpc_page_dir, r.qpc_lvl) = cm.area(r.qp_num_entries, q.qp_entry_size, q.qp_init_offset * 4u, true);
    r.srq_num_l2_entries = q.srq_max_l2_entries;
    r.srq_num_entries = q.srq_max_l2_entries + std::min<std::uint32_t>(8192, q.srq_max_entries - q.srq_max_l2_entries);
    r.srq_entry_size = q.srq_entry_size;
    std::tie(r.srq_page_dir, r.srq_lvl) = cm.area(r.srq_num_entries, q.srq_entry_size, q.srq_init_offset * 4u);
    r.cq_num_l2_entries = q.cq_max_l2_entries;
    r.cq_num_entries = q.cq_max_l2_entries + 2 * extra;
    r.cq_entry_size = q.cq_entry_size;
    std::tie(r.cq_page_dir, r.cq_lvl) = cm.area(r.cq_num_entries, q.cq_entry_size, q.cq_init_offset * 4u);
    r.vnic_num_vnic_entries = q.vnic_max_vnic_entries;
    r.vnic_num_ring_table_entries = q.vnic_max_ring_table_entries;
    r.vnic_entry_size = q.vnic_entry_size;
    std::tie(r.vnic_page_dir, r.vnic_lvl) =
        cm.area(q.vnic_max_vnic_entries + q.vnic_max_ring_table_entries, q.vnic_entry_size, q.vnic_init_offset * 4u);
    r.stat_num_entries = q.stat_max_entries;
    r.stat_entry_size = q.stat_entry_size;
    std::tie(r.stat_page_dir, r.stat_lvl) = cm.area(q.stat_max_entries, q.stat_entry_size, q.stat_init_offset * 4u);
    const std::uint32_t tqm = std::min(q.tqm_max_entries_per_ring, std::max(q.tqm_min_entries_per_ring, 2 * (extra + qp1) + qp_l2));
    r.tqm_entry_size = q.tqm_entry_size;
    r.tqm_sp_num_entries = tqm;
    std::tie(r.tqm_sp_page_dir, r.tqm_sp_lvl) = cm.area(tqm, q.tqm_entry_size, std::nullopt);
    std::uint64_t* dirs[] = {&r.tqm_ring0_page_dir, &r.tqm_ring1_page_dir, &r.tqm_ring2_page_dir, &r.tqm_ring3_page_dir,
                             &r.tqm_ring4_page_dir, &r.tqm_ring5_page_dir, &r.tqm_ring6_page_dir, &r.tqm_ring7_page_dir};
    std::uint8_t* lvls[] = {&r.tqm_ring0_lvl, &r.tqm_ring1_lvl, &r.tqm_ring2_lvl, &r.tqm_ring3_lvl,
                            &r.tqm_ring4_lvl, &r.tqm_ring5_lvl, &r.tqm_ring6_lvl, &r.tqm_ring7_lvl};
    std::uint32_t* nums[] = {&r.tqm_ring0_num_entries, &r.tqm_ring1_num_entries, &r.tqm_ring2_num_entries,
                             &r.tqm_ring3_num_entries, &r.tqm_ring4_num_entries, &r.tqm_ring5_num_entries,
                             &r.tqm_ring6_num_entries, &r.tqm_ring7_num_entries};
    for (unsigned i = 0; i < q.tqm_fp_rings_count; ++i) {
        *nums[i] = tqm;
        std::tie(*dirs[i], *lvls[i]) = cm.area(tqm, q.tqm_entry_size, std::nullopt);
    }
    const std::uint32_t num_mr = std::min<std::uint32_t>(q.mrav_max_entries / 2, 256 * 1024);
    r.mrav_num_entries = num_mr + std::min<std::uint32_t>(num_mr, 128 * 1024);
    r.mrav_entry_size = q.mrav_entry_size;
    std::tie(r.mrav_page_dir, r.mrav_lvl) = cm.area(r.mrav_num_entries, q.mrav_entry_size, q.mrav_init_offset * 4u);
    r.tim_num_entries = qp_l2 + qp1 + extra;
    r.tim_entry_size = q.tim_entry_size;
    std::tie(r.tim_page_dir, r.tim_lvl) = cm.area(r.tim_num_entries, q.tim_entry_size, std::nullopt);
    return r;
}

inline abi::hwrm_func_backing_store_qcaps_output qcaps(served_bnxt& m) {
    return m.send(abi::hwrm_func_backing_store_qcaps_input{}).as<abi::hwrm_func_backing_store_qcaps_output>();
}

}  // namespace rig::test::bnxt
