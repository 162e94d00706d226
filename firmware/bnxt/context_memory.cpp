#include "firmware/bnxt/context_memory.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "abi/bits.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::bnxt {

namespace {

using cfg_t = abi::hwrm_func_backing_store_cfg_input;

// bnxt_setup_ctxm_pg_tbls: rounded up to the entry multiple, clamped to [min, max].
std::uint32_t sized(std::uint64_t entries, std::uint32_t min, std::uint32_t max, std::uint32_t multiple = 1) {
    if (multiple > 1) {
        entries = (entries + multiple - 1) / multiple * multiple;
    }
    return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(entries, min, std::max(min, max)));
}

std::uint32_t less(std::uint32_t a, std::uint64_t b) { return a > b ? static_cast<std::uint32_t>(a - b) : 0; }

// One TQM ring's fields of FUNC_BACKING_STORE_CFG (ring 0..7), by index.
struct tqm_fields {
    std::uint8_t cfg_t::*lvl;
    std::uint8_t cfg_t::*pg_size;
    std::uint64_t cfg_t::*page_dir;
    std::uint32_t cfg_t::*num_entries;
};
#define RIG_TQM(i) tqm_fields{&cfg_t::tqm_ring##i##_lvl, &cfg_t::tqm_ring##i##_pg_size, \
                              &cfg_t::tqm_ring##i##_page_dir, &cfg_t::tqm_ring##i##_num_entries}
constexpr std::array<tqm_fields, 8> tqm_rings = {RIG_TQM(0), RIG_TQM(1), RIG_TQM(2), RIG_TQM(3),
                                                 RIG_TQM(4), RIG_TQM(5), RIG_TQM(6), RIG_TQM(7)};
#undef RIG_TQM

}  // namespace

context_memory::~context_memory() {
    if (_stranded) {
        return;
    }
    for (const allocation& a : _allocations) {
        static_cast<void>(_fn.dma_unmap(a.iova, a.memory.size()));
    }
}

std::size_t context_memory::bytes() const noexcept {
    std::size_t n = 0;
    for (const allocation& a : _allocations) {
        n += a.memory.size();
    }
    return n;
}

void context_memory::strand(stranded_memory& registry, const std::string& why) {
    if (_stranded) {
        return;
    }
    _stranded = true;
    log().warn("bnxt context memory on {}: {}; {} bytes stranded", _fn.name(), why, bytes());
    for (allocation& a : _allocations) {
        const std::size_t n = a.memory.size();
        registry.keep(std::move(a.what), a.iova, n, std::move(a.memory));
    }
    _allocations.clear();
}

result<context_memory::allocation> context_memory::map(std::size_t bytes, std::string what) {
    auto mem = driver::dma_memory::allocate(bytes, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(plain_error(error_kind::transport, what + ": " + mem.error().message));
    }
    std::memset(mem->data(), 0, mem->size());
    auto iova = _fn.dma_map(*mem, 0, mem->size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(plain_error(error_kind::transport, what + ": " + iova.error().message));
    }
    return allocation{std::move(*mem), *iova, std::move(what)};
}

result<context_block> context_memory::add(std::string type, std::uint32_t entries, std::uint16_t entry_size,
                                          std::uint8_t level, int init_value, std::uint8_t init_offset) {
    context_block b;
    b.type = std::move(type);
    b.entries = entries;
    b.entry_size = entry_size;
    if (entries == 0 || entry_size == 0) {
        return std::unexpected(plain_error(error_kind::bad_output, "context memory " + b.type + ": QCAPS gives " +
                                                                       std::to_string(entries) + " entries of " +
                                                                       std::to_string(entry_size) + " bytes"));
    }
    const std::size_t bytes = std::size_t{entries} * entry_size;
    b.data_pages = (bytes + page - 1) / page;
    if (b.data_pages > ptes_per_page * ptes_per_page) {
        return std::unexpected(plain_error(error_kind::bad_output, "context memory " + b.type + ": " +
                                                                       std::to_string(bytes) + " bytes exceed two levels of 4 KiB pages"));
    }
    // bnxt_alloc_ctx_pg_tbls: more pages than one table holds forces level 2.
    b.level = b.data_pages > ptes_per_page ? 2 : std::max<std::uint8_t>(level, 1);
    auto data = map(b.data_pages * page, b.type + " context pages");
    if (!data) {
        return std::unexpected(std::move(data.error()));
    }
    // The initializer, page by page as bnxt_init_ctx_mem fills each page it allocates.
    if (init_value > 0 && std::size_t{init_offset} * 4 < entry_size) {
        for (std::size_t p = 0; p < b.data_pages; ++p) {
            std::byte* pg = data->memory.data() + p * page;
            for (std::size_t e = 0; e + std::size_t{init_offset} * 4 < page; e += entry_size) {
                pg[e + std::size_t{init_offset} * 4] = std::byte{static_cast<std::uint8_t>(init_value)};
            }
        }
        b.initialized = true;
    }
    const std::size_t ptes_pages = (b.data_pages + ptes_per_page - 1) / ptes_per_page;
    b.table_pages = b.level == 2 ? 1 + ptes_pages : 1;
    auto tables = map(b.table_pages * page, b.type + " context page tables");
    if (!tables) {
        _allocations.push_back(std::move(*data));
        return std::unexpected(std::move(tables.error()));
    }
    // PTEs: the level-1 table (level 1) or the tables after the directory page (level 2).
    std::byte* ptes = tables->memory.data() + (b.level == 2 ? page : 0);
    for (std::size_t p = 0; p < b.data_pages; ++p) {
        ::rig::abi::store_le<std::uint64_t>(ptes + 8 * p, (data->iova + p * page) | abi::PTU_PTE_VALID);
    }
    if (b.level == 2) {
        for (std::size_t t = 0; t < ptes_pages; ++t) {
            ::rig::abi::store_le<std::uint64_t>(tables->memory.data() + 8 * t,
                                                (tables->iova + (1 + t) * page) | abi::PTU_PDE_VALID);
        }
    }
    b.page_dir = tables->iova;
    _allocations.push_back(std::move(*data));
    _allocations.push_back(std::move(*tables));
    _blocks.push_back(b);
    return b;
}

result<std::unique_ptr<context_memory>> context_memory::allocate(
    driver::function& fn, const abi::hwrm_func_backing_store_qcaps_output& q, bool roce) {
    std::unique_ptr<context_memory> m(new context_memory(fn));
    cfg_t& c = m->_cfg;
    // QCAPS ctx_init_mask bit per type (QP 0, SRQ 1, CQ 2, VNIC 3, STAT 4, MRAV 5) says the type
    // takes the initializer at its init_offset (bnxt_hwrm_func_backing_store_qcaps).
    const auto init = [&](unsigned bit) { return (q.ctx_init_mask >> bit & 1) != 0 ? int{q.ctx_kind_initializer} : -1; };
    const std::uint8_t lvl = roce ? 2 : 1;  // bnxt_alloc_ctx_mem: pg_lvl 2 with RoCE
    const std::uint32_t l2 = q.qp_max_l2_entries, qp1 = q.qp_min_qp1_entries;
    std::uint32_t extra = roce ? std::min<std::uint32_t>(65536, less(q.qp_max_entries, std::uint64_t{l2} + qp1)) : 0;
    extra += roce ? q.fast_qpmd_qp_num_entries : 0;
    const std::uint32_t extra_srq = roce ? std::min<std::uint32_t>(8192, less(q.srq_max_entries, q.srq_max_l2_entries)) : 0;
    std::uint32_t enables = abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_QP | abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_SRQ |
                            abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_CQ | abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_VNIC |
                            abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_STAT;
    const auto fail = [](error e) { return std::unexpected(std::move(e)); };

    auto qp = m->add("QP", sized(std::uint64_t{l2} + qp1 + extra, 0, q.qp_max_entries), q.qp_entry_size, lvl,
                     init(0), q.qp_init_offset);
    if (!qp) return fail(std::move(qp.error()));
    c.qpc_lvl = qp->level;
    c.qpc_pg_size = abi::PG_SIZE_4K;
    c.qpc_page_dir = qp->page_dir;
    c.qp_num_entries = qp->entries;
    c.qp_num_qp1_entries = static_cast<std::uint16_t>(qp1);
    c.qp_num_l2_entries = static_cast<std::uint16_t>(l2);
    c.qp_entry_size = q.qp_entry_size;
    if (roce && q.fast_qpmd_qp_num_entries != 0) {
        enables |= abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_QP_FAST_QPMD;
        c.qp_num_fast_qpmd_entries = q.fast_qpmd_qp_num_entries;
    }
    auto srq = m->add("SRQ", sized(std::uint64_t{q.srq_max_l2_entries} + extra_srq, 0, q.srq_max_entries),
                      q.srq_entry_size, lvl, init(1), q.srq_init_offset);
    if (!srq) return fail(std::move(srq.error()));
    c.srq_lvl = srq->level;
    c.srq_page_dir = srq->page_dir;
    c.srq_num_entries = srq->entries;
    c.srq_num_l2_entries = q.srq_max_l2_entries;
    c.srq_entry_size = q.srq_entry_size;
    auto cq = m->add("CQ", sized(std::uint64_t{q.cq_max_l2_entries} + 2ull * extra, 0, q.cq_max_entries),
                     q.cq_entry_size, lvl, init(2), q.cq_init_offset);
    if (!cq) return fail(std::move(cq.error()));
    c.cq_lvl = cq->level;
    c.cq_page_dir = cq->page_dir;
    c.cq_num_entries = cq->entries;
    c.cq_num_l2_entries = q.cq_max_l2_entries;
    c.cq_entry_size = q.cq_entry_size;
    const std::uint32_t vnics = std::uint32_t{q.vnic_max_vnic_entries} + q.vnic_max_ring_table_entries;
    auto vnic = m->add("VNIC", vnics, q.vnic_entry_size, 1, init(3), q.vnic_init_offset);
    if (!vnic) return fail(std::move(vnic.error()));
    c.vnic_lvl = vnic->level;
    c.vnic_page_dir = vnic->page_dir;
    c.vnic_num_vnic_entries = q.vnic_max_vnic_entries;
    c.vnic_num_ring_table_entries = q.vnic_max_ring_table_entries;
    c.vnic_entry_size = q.vnic_entry_size;
    auto stat = m->add("STAT", q.stat_max_entries, q.stat_entry_size, 1, init(4), q.stat_init_offset);
    if (!stat) return fail(std::move(stat.error()));
    c.stat_lvl = stat->level;
    c.stat_page_dir = stat->page_dir;
    c.stat_num_entries = stat->entries;
    c.stat_entry_size = q.stat_entry_size;
    if (roce) {
        // bnxt_alloc_ctx_mem: "128K extra is needed to accommodate static AH context allocation"
        const std::uint32_t num_mr = std::min<std::uint32_t>(q.mrav_max_entries / 2, 256 * 1024);
        const std::uint32_t num_ah = std::min<std::uint32_t>(num_mr, 128 * 1024);
        auto mrav = m->add("MRAV", sized(std::uint64_t{num_mr} + num_ah, 0, q.mrav_max_entries), q.mrav_entry_size, 2,
                           init(5), q.mrav_init_offset);
        if (!mrav) return fail(std::move(mrav.error()));
        c.mrav_lvl = mrav->level;
        c.mrav_page_dir = mrav->page_dir;
        c.mrav_num_entries = mrav->entries;
        if (q.mrav_num_entries_units != 0) {
            const std::uint32_t units = q.mrav_num_entries_units;
            c.mrav_num_entries = ((mrav->entries - num_ah) / units) << 16 | (num_ah / units);
            c.flags |= abi::FUNC_BACKING_STORE_CFG_REQ_FLAGS_MRAV_RESERVATION_SPLIT;
        }
        c.mrav_entry_size = q.mrav_entry_size;
        enables |= abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_MRAV;
        auto tim = m->add("TIM", sized(std::uint64_t{l2} + qp1 + extra, 0, q.tim_max_entries), q.tim_entry_size, 1,
                          -1, 0);
        if (!tim) return fail(std::move(tim.error()));
        c.tim_lvl = tim->level;
        c.tim_page_dir = tim->page_dir;
        c.tim_num_entries = tim->entries;
        c.tim_entry_size = q.tim_entry_size;
        enables |= abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_TIM;
    }
    // TQM: the slow-path ring and one fast-path ring per CoS queue (tqm_fp_rings_count; a
    // firmware saying 0 gets one here, bnxt_en takes QUEUE_QPORTCFG's count), at most 8.
    const std::uint32_t tmin = q.tqm_min_entries_per_ring, tmax = q.tqm_max_entries_per_ring;
    const std::uint32_t tmul = std::max<std::uint32_t>(q.tqm_entries_multiple, 1);
    const std::uint64_t fp_entries = std::uint64_t{l2} + 2ull * (extra + qp1);
    auto sp = m->add("TQM_SP", sized(q.vnic_max_vnic_entries + fp_entries + tmin, tmin, tmax, tmul), q.tqm_entry_size,
                     2, -1, 0);
    if (!sp) return fail(std::move(sp.error()));
    c.tqm_sp_lvl = sp->level;
    c.tqm_sp_page_dir = sp->page_dir;
    c.tqm_sp_num_entries = sp->entries;
    c.tqm_entry_size = q.tqm_entry_size;
    enables |= abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_TQM_SP;
    const unsigned rings = std::clamp<unsigned>(q.tqm_fp_rings_count, 1, 8);
    for (unsigned i = 0; i < rings; ++i) {
        auto r = m->add("TQM_RING" + std::to_string(i), sized(fp_entries, tmin, tmax, tmul), q.tqm_entry_size, 2, -1, 0);
        if (!r) return fail(std::move(r.error()));
        c.*tqm_rings[i].lvl = r->level;
        c.*tqm_rings[i].page_dir = r->page_dir;
        c.*tqm_rings[i].num_entries = r->entries;
        enables |= abi::FUNC_BACKING_STORE_CFG_REQ_ENABLES_TQM_RING0 << i;
    }
    c.enables = enables;
    return m;
}

}  // namespace rig::firmware::bnxt
