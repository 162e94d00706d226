// Context memory ("backing store", bnxt.c bnxt_alloc_ctx_mem): FUNC_BACKING_STORE_QCAPS and _CFG.
// On P5 the host gives the chip all its context memory; the model checks what a card's
// firmware would need of it (counts within QCAPS, levels, page sizes, entry sizes, a page
// directory whose entries are valid), keeps the pages in a ledger watching the DMA space, and
// checks the initializer bnxt_en writes (bnxt.c bnxt_init_ctx_mem, bnxt_hwrm_set_pg_attr,
// bnxt_hwrm_func_backing_store_cfg; bnxt_hsi.h).
#include <algorithm>

#include "abi/bits.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;
using rig::abi::hex;
using rig::abi::load_le;

namespace {

constexpr std::uint64_t pte_valid = 0x1;   // PTU_PTE_VALID / PTU_PDE_VALID (roce_hsi.h)

// One context type of a FUNC_BACKING_STORE_CFG request, against its QCAPS limits.
struct ctx_spec {
    std::string name;
    std::uint32_t enable;
    std::uint8_t level, pg_size;
    std::uint64_t page_dir;
    std::uint32_t entries;
    std::uint16_t entry_size_given;   // 0: not sent (older HSI): QCAPS's
    std::uint16_t entry_size;         // QCAPS
    std::uint32_t min_entries, max_entries;
    std::uint32_t multiple;
    std::optional<std::uint8_t> init_offset;   // bytes; nullopt: no initializer
};

}  // namespace

std::uint64_t page_bytes_of(std::uint8_t pg_size) {
    constexpr std::uint64_t sizes[] = {4096, 8192, 65536, 2u << 20, 8u << 20, 1u << 30};
    return pg_size < std::size(sizes) ? sizes[pg_size] : 0;
}

void context_ledger::report(std::uint64_t iova, std::string what) {
    violations.push_back({iova, std::move(what)});
}

void context_ledger::unmapped(std::uint64_t iova, std::uint64_t size) {
    std::lock_guard g(lock);
    std::size_t n = 0;
    for (const auto& [at, p] : pages) {
        if (at < iova + size && iova < at + p.bytes) {
            report(at, p.type + " context page unmapped by the driver while owned by the firmware");
            ++n;
        }
    }
    if (n > 0) {
        log().error("bnxt: {} context page(s) unmapped by the driver while owned by the firmware, "
                    "the first at {:#x} (DMA window [{:#x}, +{:#x}))",
                    n, violations[violations.size() - n].iova, iova, size);
    }
}

std::size_t firmware::context_pages() const {
    std::lock_guard g(_ledger->lock);
    return _ledger->pages.size();
}

std::vector<context_violation> firmware::context_violations() const {
    std::lock_guard g(_ledger->lock);
    return _ledger->violations;
}

void firmware::drop_context() {
    _ctx.clear();
    std::lock_guard g(_ledger->lock);
    _ledger->pages.clear();
}

bool walk_pages(firmware::call& c, std::uint64_t dir, std::uint8_t level, std::uint64_t page,
                std::uint64_t count, std::vector<std::uint64_t>& pages, std::vector<std::uint64_t>& tables,
                std::uint64_t table_page) {
    if (table_page == 0) {
        table_page = page;
    }
    const std::uint64_t per_table = table_page / 8;
    // A table's entries: data pages (aligned to `page`) at the last level, tables above it.
    auto read_table = [&](std::uint64_t at, std::uint64_t n, std::vector<std::uint64_t>& out, std::uint64_t align) {
        std::vector<std::byte> t(n * 8);
        if ((at & (table_page - 1)) != 0 || c.dma == nullptr || !c.dma->read(at, t)) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_page_table,
                   "page table at " + hex(at) + " unaligned or not readable");
            return false;
        }
        tables.push_back(at);
        for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t e = load_le<std::uint64_t>(t.data() + 8 * i);
            if ((e & pte_valid) == 0) {
                c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_page_table,
                       "entry " + std::to_string(i) + " of the table at " + hex(at) + " (" + hex(e) +
                           ") not valid");
                return false;
            }
            out.push_back(e & ~(align - 1));
        }
        return true;
    };
    switch (level) {
    case 0:
        if (count > 1 || (dir & (page - 1)) != 0) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_page_table,
                   std::to_string(count) + " pages at level 0 (one page, aligned, at " + hex(dir) + ")");
            return false;
        }
        pages.push_back(dir);
        return true;
    case 1:
        if (count > per_table) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::too_large,
                   std::to_string(count) + " pages do not fit one level-1 table");
            return false;
        }
        return read_table(dir, count, pages, page);
    case 2: {
        const std::uint64_t n_tables = (count + per_table - 1) / per_table;
        if (n_tables > per_table) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::too_large,
                   std::to_string(count) + " pages do not fit a level-2 directory");
            return false;
        }
        std::vector<std::uint64_t> ptes;
        if (!read_table(dir, n_tables, ptes, table_page)) {
            return false;
        }
        for (std::size_t t = 0; t < ptes.size(); ++t) {
            if (!read_table(ptes[t], std::min(per_table, count - t * per_table), pages, page)) {
                return false;
            }
        }
        return true;
    }
    default:
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "level " + std::to_string(level) + " (0, 1 or 2)");
        return false;
    }
}

void firmware::backing_store_qcaps(call& c) {
    abi::hwrm_func_backing_store_qcaps_output r;
    r.qp_max_entries = _o.qp_max_entries;
    r.qp_min_qp1_entries = _o.qp_min_qp1_entries;
    r.qp_max_l2_entries = _o.qp_max_l2_entries;
    r.qp_entry_size = _o.qp_entry_size;
    r.srq_max_l2_entries = _o.srq_max_l2_entries;
    r.srq_max_entries = _o.srq_max_entries;
    r.srq_entry_size = _o.srq_entry_size;
    r.cq_max_l2_entries = _o.cq_max_l2_entries;
    r.cq_max_entries = _o.cq_max_entries;
    r.cq_entry_size = _o.cq_entry_size;
    r.vnic_max_vnic_entries = _o.vnic_max_vnic_entries;
    r.vnic_max_ring_table_entries = _o.vnic_max_ring_table_entries;
    r.vnic_entry_size = _o.vnic_entry_size;
    r.stat_max_entries = _o.stat_max_entries;
    r.stat_entry_size = _o.stat_entry_size;
    r.tqm_entry_size = _o.tqm_entry_size;
    r.tqm_min_entries_per_ring = _o.tqm_min_entries_per_ring;
    r.tqm_max_entries_per_ring = _o.tqm_max_entries_per_ring;
    r.mrav_max_entries = _o.mrav_max_entries;
    r.mrav_entry_size = _o.mrav_entry_size;
    r.tim_entry_size = _o.tim_entry_size;
    r.tim_max_entries = _o.tim_max_entries;
    r.mrav_num_entries_units = _o.mrav_num_entries_units;
    r.tqm_entries_multiple = _o.tqm_entries_multiple;
    r.ctx_kind_initializer = _o.ctx_kind_initializer;
    r.ctx_init_mask = _o.ctx_init_mask;
    r.qp_init_offset = _o.qp_init_offset;
    r.srq_init_offset = _o.srq_init_offset;
    r.cq_init_offset = _o.cq_init_offset;
    r.vnic_init_offset = _o.vnic_init_offset;
    r.stat_init_offset = _o.stat_init_offset;
    r.mrav_init_offset = _o.mrav_init_offset;
    r.tqm_fp_rings_count = _o.tqm_fp_rings_count;
    c.reply(r);
}

namespace {

// The request's types as specs (enabled or not); `o` gives the limits.
std::vector<ctx_spec> specs_of(const abi::hwrm_func_backing_store_cfg_input& in,
                               const firmware_options& o) {
    auto init = [&](std::uint16_t bit, std::uint8_t off) -> std::optional<std::uint8_t> {
        if (o.ctx_kind_initializer == 0 || (o.ctx_init_mask & bit) == 0) {
            return std::nullopt;
        }
        return static_cast<std::uint8_t>(off * 4);
    };
    std::uint32_t mrav = in.mrav_num_entries;
    if ((in.flags & abi::FUNC_BACKING_STORE_CFG_REQ_FLAGS_MRAV_RESERVATION_SPLIT) &&
        o.mrav_num_entries_units != 0) {
        mrav = ((mrav >> 16) + (mrav & 0xffff)) * o.mrav_num_entries_units;
    }
    const std::uint32_t qp_min = std::uint32_t{in.qp_num_qp1_entries} + in.qp_num_l2_entries;
    std::vector<ctx_spec> s = {
        {"QP", 0x1, in.qpc_lvl, in.qpc_pg_size, in.qpc_page_dir, in.qp_num_entries,
         in.qp_entry_size, o.qp_entry_size, std::max<std::uint32_t>(qp_min, 1), o.qp_max_entries, 1,
         init(0x1, o.qp_init_offset)},
        {"SRQ", 0x2, in.srq_lvl, in.srq_pg_size, in.srq_page_dir, in.srq_num_entries,
         in.srq_entry_size, o.srq_entry_size, std::max<std::uint32_t>(in.srq_num_l2_entries, 1),
         o.srq_max_entries, 1, init(0x2, o.srq_init_offset)},
        {"CQ", 0x4, in.cq_lvl, in.cq_pg_size, in.cq_page_dir, in.cq_num_entries, in.cq_entry_size,
         o.cq_entry_size, std::max<std::uint32_t>(in.cq_num_l2_entries, 1), o.cq_max_entries, 1,
         init(0x4, o.cq_init_offset)},
        {"VNIC", 0x8, in.vnic_lvl, in.vnic_pg_size, in.vnic_page_dir,
         std::uint32_t{in.vnic_num_vnic_entries} + in.vnic_num_ring_table_entries,
         in.vnic_entry_size, o.vnic_entry_size, 1,
         std::uint32_t{o.vnic_max_vnic_entries} + o.vnic_max_ring_table_entries, 1,
         init(0x8, o.vnic_init_offset)},
        {"STAT", 0x10, in.stat_lvl, in.stat_pg_size, in.stat_page_dir, in.stat_num_entries,
         in.stat_entry_size, o.stat_entry_size, 1, o.stat_max_entries, 1,
         init(0x10, o.stat_init_offset)},
        {"TQM_SP", 0x20, in.tqm_sp_lvl, in.tqm_sp_pg_size, in.tqm_sp_page_dir,
         in.tqm_sp_num_entries, in.tqm_entry_size, o.tqm_entry_size, o.tqm_min_entries_per_ring,
         o.tqm_max_entries_per_ring, o.tqm_entries_multiple, std::nullopt},
        {"MRAV", 0x4000, in.mrav_lvl, in.mrav_pg_size, in.mrav_page_dir, mrav, in.mrav_entry_size,
         o.mrav_entry_size, 1, o.mrav_max_entries, 1, init(0x20, o.mrav_init_offset)},
        {"TIM", 0x8000, in.tim_lvl, in.tim_pg_size, in.tim_page_dir, in.tim_num_entries,
         in.tim_entry_size, o.tim_entry_size, 1, o.tim_max_entries, 1, std::nullopt},
    };
    const std::uint8_t lvl[] = {in.tqm_ring0_lvl, in.tqm_ring1_lvl, in.tqm_ring2_lvl, in.tqm_ring3_lvl,
                                in.tqm_ring4_lvl, in.tqm_ring5_lvl, in.tqm_ring6_lvl, in.tqm_ring7_lvl};
    const std::uint8_t pg[] = {in.tqm_ring0_pg_size, in.tqm_ring1_pg_size, in.tqm_ring2_pg_size,
                               in.tqm_ring3_pg_size, in.tqm_ring4_pg_size, in.tqm_ring5_pg_size,
                               in.tqm_ring6_pg_size, in.tqm_ring7_pg_size};
    const std::uint64_t dir[] = {in.tqm_ring0_page_dir, in.tqm_ring1_page_dir, in.tqm_ring2_page_dir,
                                 in.tqm_ring3_page_dir, in.tqm_ring4_page_dir, in.tqm_ring5_page_dir,
                                 in.tqm_ring6_page_dir, in.tqm_ring7_page_dir};
    const std::uint32_t num[] = {in.tqm_ring0_num_entries, in.tqm_ring1_num_entries,
                                 in.tqm_ring2_num_entries, in.tqm_ring3_num_entries,
                                 in.tqm_ring4_num_entries, in.tqm_ring5_num_entries,
                                 in.tqm_ring6_num_entries, in.tqm_ring7_num_entries};
    for (unsigned i = 0; i < 8 && i < o.tqm_fp_rings_count; ++i) {
        s.push_back({"TQM_RING" + std::to_string(i), 0x40u << i, lvl[i], pg[i], dir[i], num[i],
                     in.tqm_entry_size, o.tqm_entry_size, o.tqm_min_entries_per_ring,
                     o.tqm_max_entries_per_ring, o.tqm_entries_multiple, std::nullopt});
    }
    return s;
}

// One enabled type against QCAPS, its page directory walked: the area, or nothing (c failed).
std::optional<context_area> checked_area(firmware::call& c, const ctx_spec& s,
                                         std::uint16_t qp1_l2_entries) {
    auto refuse = [&](cmd_err e, const std::string& what) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, e, s.name + ": " + what);
        return std::nullopt;
    };
    const std::uint64_t page = page_bytes_of(s.pg_size);
    if (page == 0 || s.level > 2) {
        return refuse(cmd_err::bad_field, "pg_size " + std::to_string(s.pg_size) + ", level " +
                                              std::to_string(s.level));
    }
    if (s.entry_size_given != 0 && s.entry_size_given != s.entry_size) {
        return refuse(cmd_err::bad_entry_size, "entry size " + std::to_string(s.entry_size_given) +
                                                   ", QCAPS says " + std::to_string(s.entry_size));
    }
    if (s.entries < s.min_entries) {
        return refuse(cmd_err::too_small, std::to_string(s.entries) + " entries, at least " +
                                              std::to_string(s.min_entries) + " needed");
    }
    if (s.entries > s.max_entries || (s.multiple > 1 && s.entries % s.multiple != 0)) {
        return refuse(cmd_err::too_large, std::to_string(s.entries) + " entries, QCAPS allows " +
                                              std::to_string(s.max_entries) + " (multiple of " +
                                              std::to_string(s.multiple) + ")");
    }
    context_area a;
    a.entries = s.entries;
    a.entry_size = s.entry_size;
    a.page_bytes = page;
    a.level = s.level;
    if (s.name == "QP") {
        a.l2_entries = qp1_l2_entries;
    }
    const std::uint64_t count = (std::uint64_t{s.entries} * s.entry_size + page - 1) / page;
    if (!walk_pages(c, s.page_dir, s.level, page, count, a.pages, a.table_pages)) {
        c.why = s.name + ": " + c.why;
        return std::nullopt;
    }
    return a;
}

// Every data page must be mapped (else the call fails); the initializer must be in every entry
// of the types that have one: reported in the ledger, not refused (a card would take the memory
// and misread the contexts later).
bool check_data_pages(firmware::call& c, const ctx_spec& s, const context_area& a,
                      std::uint8_t initializer, context_ledger& ledger) {
    std::vector<std::byte> buf(a.page_bytes);
    const std::uint64_t per_page = a.page_bytes / a.entry_size;
    bool reported = false;
    for (std::size_t p = 0; p < a.pages.size(); ++p) {
        const std::span<std::byte> want = s.init_offset ? std::span<std::byte>(buf) : std::span<std::byte>(buf).first(1);
        if (!c.dma->read(a.pages[p], want)) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_page_table,
                   s.name + ": page " + std::to_string(p) + " at " + hex(a.pages[p]) + " not mapped for the device");
            return false;
        }
        for (std::uint64_t e = 0; s.init_offset && !reported && e < per_page && p * per_page + e < a.entries; ++e) {
            const std::uint8_t v = std::to_integer<std::uint8_t>(buf[e * a.entry_size + *s.init_offset]);
            if (v != initializer) {
                std::lock_guard g(ledger.lock);
                ledger.report(a.pages[p] + e * a.entry_size + *s.init_offset,
                              s.name + " context entry " + std::to_string(p * per_page + e) +
                                  " not initialized (byte " + std::to_string(*s.init_offset) + " is " + hex(v) +
                                  ", QCAPS ctx_kind_initializer " + hex(initializer) + ")");
                log().error("bnxt: {}", ledger.violations.back().what);
                reported = true;
            }
        }
    }
    return true;
}

}  // namespace

// All enabled types are checked and walked before any is taken: a refused request changes
// nothing. A type given again replaces its earlier memory.
void firmware::backing_store_cfg(call& c) {
    const auto in = c.input<abi::hwrm_func_backing_store_cfg_input>();
    const std::vector<ctx_spec> specs = specs_of(in, _o);
    std::uint32_t known = 0;
    for (const ctx_spec& s : specs) {
        known |= s.enable;
    }
    if ((in.enables & ~known) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_ENABLES, cmd_err::unknown_enables,
               "enables " + hex(in.enables & ~known) +
                   " not implemented (TQM rings past tqm_fp_rings_count, TKC/RKC, fast QPMD)");
        return;
    }
    if ((in.flags & ~abi::FUNC_BACKING_STORE_CFG_REQ_FLAGS_MRAV_RESERVATION_SPLIT) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_FLAGS, cmd_err::bad_field, "flags " + hex(in.flags));
        return;
    }
    if ((in.enables & 0x1) && in.qp_num_qp1_entries < _o.qp_min_qp1_entries) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::too_small,
               "QP: qp_num_qp1_entries " + std::to_string(in.qp_num_qp1_entries) + ", QCAPS asks " +
                   std::to_string(_o.qp_min_qp1_entries));
        return;
    }
    if (c.dma == nullptr) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_page_table, "no memory is mapped");
        return;
    }
    const auto qp1_l2 = static_cast<std::uint16_t>(in.qp_num_qp1_entries + in.qp_num_l2_entries);
    std::map<std::string, context_area> next;
    for (const ctx_spec& s : specs) {
        if ((in.enables & s.enable) == 0) {
            continue;
        }
        auto a = checked_area(c, s, qp1_l2);
        if (!a || !check_data_pages(c, s, *a, _o.ctx_kind_initializer, *_ledger)) {
            return;
        }
        next.emplace(s.name, std::move(*a));
    }
    {
        std::lock_guard g(_ledger->lock);
        for (auto& [name, a] : next) {
            std::erase_if(_ledger->pages, [&](const auto& p) { return p.second.type == name; });
            for (std::uint64_t p : a.pages) {
                _ledger->pages[p] = {a.page_bytes, name};
            }
            for (std::uint64_t p : a.table_pages) {
                _ledger->pages[p] = {a.page_bytes, name};
            }
            _ctx[name] = std::move(a);
        }
    }
    c.dma->watch_unmaps(_ledger);
    c.reply(abi::hwrm_func_reset_output{});
}

bool firmware::roce_backing_store() const noexcept {
    const auto qp = _ctx.find("QP");
    if (qp == _ctx.end() || !_ctx.contains("SRQ") || !_ctx.contains("CQ") ||
        !_ctx.contains("MRAV") || !_ctx.contains("TIM")) {
        return false;
    }
    return qp->second.entries > qp->second.l2_entries;
}

}  // namespace rig::sim::bnxt
