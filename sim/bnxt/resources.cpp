// The bnxt firmware model's resources: FUNC_RESOURCE_QCAPS and the FUNC_CFG reservations,
// rings (RING_ALLOC/FREE: NQs for the CREQ and the RoCE NQs, and the L2 rings bnxt_en makes),
// statistics contexts, VNICs, L2 filters (the port is port.cpp). bnxt_hsi.h; bnxt_re main.c
// bnxt_re_net_ring_alloc, bnxt.c bnxt_hwrm_ring_alloc_send, __bnxt_hwrm_reserve_pf_rings,
// bnxt_hwrm_vnic_cfg.
#include <algorithm>
#include <bit>

#include "abi/bits.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;
using rig::abi::hex;
using rig::abi::load_le;

namespace {
constexpr std::size_t ring_entry_bytes = 16;   // TX/RX BDs, completions, NQ entries (bnxt_hsi.h)
}  // namespace

std::optional<std::uint64_t> ring::entry_address(std::uint32_t i) const {
    const std::uint64_t off = std::uint64_t{i} * ring_entry_bytes;
    if (depth == 0) {
        return pages.empty() ? std::nullopt : std::optional(pages[0] + off);
    }
    const std::uint64_t page = std::uint64_t{1} << page_size;
    if (off / page >= pages.size()) {
        return std::nullopt;
    }
    return pages[off / page] + off % page;
}

std::uint32_t firmware::limit(std::uint32_t max, std::optional<std::uint32_t> reserved) const noexcept {
    return reserved ? std::min(max, *reserved) : max;
}

std::size_t firmware::rings_of(std::uint8_t type) const {
    return static_cast<std::size_t>(
        std::count_if(_rings.begin(), _rings.end(), [&](const auto& r) { return r.second.type == type; }));
}

void firmware::func_resource_qcaps(call& c) {
    const auto in = c.input<abi::hwrm_func_resource_qcaps_input>();
    if (c.refuse_other_fid(in.fid, _o.fid)) {
        return;
    }
    abi::hwrm_func_resource_qcaps_output r;
    r.max_msix = _o.max_msix;
    put_function_maxima(r, _o);
    r.min_msix = 1;
    c.reply(r);
}

// Reservations (P5 "new resource manager"): counts up to the QCAPS maxima, never below what is
// already allocated; async_event_cr names an existing completion ring or NQ.
void firmware::func_cfg(call& c) {
    const auto in = c.input<abi::hwrm_func_cfg_input>();
    if (c.refuse_other_fid(in.fid, _o.fid)) {
        return;
    }
    constexpr std::uint32_t admin_mtu = 0x1, mru = 0x2;   // FUNC_CFG_REQ_ENABLES_ADMIN_MTU / MRU
    constexpr std::uint32_t known =
        admin_mtu | mru | abi::FUNC_CFG_REQ_ENABLES_NUM_RSSCOS_CTXS |
        abi::FUNC_CFG_REQ_ENABLES_NUM_CMPL_RINGS | abi::FUNC_CFG_REQ_ENABLES_NUM_TX_RINGS |
        abi::FUNC_CFG_REQ_ENABLES_NUM_RX_RINGS | abi::FUNC_CFG_REQ_ENABLES_NUM_L2_CTXS |
        abi::FUNC_CFG_REQ_ENABLES_NUM_VNICS | abi::FUNC_CFG_REQ_ENABLES_NUM_STAT_CTXS |
        abi::FUNC_CFG_REQ_ENABLES_NUM_MSIX | abi::FUNC_CFG_REQ_ENABLES_ASYNC_EVENT_CR |
        abi::FUNC_CFG_REQ_ENABLES_CACHE_LINESIZE;
    if ((in.enables & ~known) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_ENABLES, cmd_err::unknown_enables,
               "enables " + hex(in.enables & ~known) + " not implemented");
        return;
    }
    reservations next = _reserved;
    struct item {
        std::uint32_t bit;
        std::uint32_t value, max;
        std::size_t in_use;
        std::optional<std::uint32_t>* slot;
        const char* name;
    };
    const std::size_t nqs = rings_of(abi::RING_ALLOC_REQ_RING_TYPE_NQ);
    const item items[] = {
        {abi::FUNC_CFG_REQ_ENABLES_NUM_RSSCOS_CTXS, in.num_rsscos_ctxs, _o.max_rsscos_ctx, 0, &next.rsscos_ctxs, "num_rsscos_ctxs"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_CMPL_RINGS, in.num_cmpl_rings, _o.max_cmpl_rings,
         rings_of(abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL), &next.cmpl_rings, "num_cmpl_rings"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_TX_RINGS, in.num_tx_rings, _o.max_tx_rings,
         rings_of(abi::RING_ALLOC_REQ_RING_TYPE_TX), &next.tx_rings, "num_tx_rings"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_RX_RINGS, in.num_rx_rings, _o.max_rx_rings,
         rings_of(abi::RING_ALLOC_REQ_RING_TYPE_RX), &next.rx_rings, "num_rx_rings"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_L2_CTXS, in.num_l2_ctxs, _o.max_l2_ctxs, _filters.size(), &next.l2_ctxs, "num_l2_ctxs"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_VNICS, in.num_vnics, _o.max_vnics, _vnics.size(), &next.vnics, "num_vnics"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_STAT_CTXS, in.num_stat_ctxs, _o.max_stat_ctx, _stats.size(), &next.stat_ctxs, "num_stat_ctxs"},
        {abi::FUNC_CFG_REQ_ENABLES_NUM_MSIX, in.num_msix, _o.max_msix, nqs, &next.msix, "num_msix"},
    };
    for (const item& i : items) {
        if ((in.enables & i.bit) == 0) {
            continue;
        }
        if (i.value > i.max || i.value < i.in_use) {
            c.fail(abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR, cmd_err::no_resources,
                   std::string(i.name) + " " + std::to_string(i.value) + ": the maximum is " +
                       std::to_string(i.max) + ", " + std::to_string(i.in_use) + " in use");
            return;
        }
        *i.slot = i.value;
    }
    if (in.enables & abi::FUNC_CFG_REQ_ENABLES_ASYNC_EVENT_CR) {
        const auto r = _rings.find(in.async_event_cr);
        if (r == _rings.end() || (r->second.type != abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL &&
                                  r->second.type != abi::RING_ALLOC_REQ_RING_TYPE_NQ)) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
                   "async_event_cr " + hex(in.async_event_cr) + " is no completion ring");
            return;
        }
    }
    if ((in.enables & admin_mtu) && (in.admin_mtu == 0 || in.admin_mtu > _o.mtu)) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "admin_mtu " + std::to_string(in.admin_mtu) + " (max " + std::to_string(_o.mtu) + ")");
        return;
    }
    // the host's cache line, which the function pads its DMA writes to (bnxt.c
    // bnxt_hwrm_set_cache_line_size): 64 (0) or 128 (1) bytes
    const bool cache_line = (in.enables & abi::FUNC_CFG_REQ_ENABLES_CACHE_LINESIZE) != 0;
    if (cache_line && (in.options & abi::FUNC_CFG_REQ_OPTIONS_CACHE_LINESIZE_MASK) > abi::FUNC_CFG_REQ_OPTIONS_CACHE_LINESIZE_SIZE_128) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "options " + hex(in.options) + ": the cache line size is 64 (0) or 128 (1) bytes");
        return;
    }
    if (cache_line) {
        _cache_line = (in.options & abi::FUNC_CFG_REQ_OPTIONS_CACHE_LINESIZE_MASK) != 0 ? 128 : 64;
    }
    _reserved = next;
    if (in.enables & abi::FUNC_CFG_REQ_ENABLES_ASYNC_EVENT_CR) {
        _async_cr = in.async_event_cr;
    }
    if (in.enables & admin_mtu) {
        _mtu = in.admin_mtu;
    }
    if (in.enables & mru) {
        _mru = in.mru;
    }
    c.reply(abi::hwrm_func_reset_output{});
}

// ---- rings --------------------------------------------------------------------------------------

// The ring's pages: depth 0 is one contiguous area at page_tbl_addr (bnxt_re then writes
// page_size 4, which the firmware cannot take as a page size: it is not read at depth 0);
// depth 1 a page of PTEs, depth 2 a page of PDEs, each entry with its valid bit.
bool firmware::read_ring_pages(call& c, ring& r) {
    if (r.depth == 0) {
        r.pages = {r.page_tbl_addr};
        return true;
    }
    if (r.page_size < 12 || r.page_size > 30 || r.depth > 2) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "page_size 2^" + std::to_string(r.page_size) + " with depth " + std::to_string(r.depth));
        return false;
    }
    const std::uint64_t page = std::uint64_t{1} << r.page_size;
    const std::uint64_t count = (std::uint64_t{r.length} * ring_entry_bytes + page - 1) / page;
    std::vector<std::uint64_t> tables;
    return walk_pages(c, r.page_tbl_addr, r.depth, page, count, r.pages, tables);
}

// How many rings of `type` the function may hold (QCAPS maximum or FUNC_CFG reservation; NQs
// count against MSI-X); nullopt: no ring type of a P5 function.
std::optional<std::uint32_t> firmware::ring_limit(std::uint8_t type) const noexcept {
    switch (type) {
    case abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL: return limit(_o.max_cmpl_rings, _reserved.cmpl_rings);
    case abi::RING_ALLOC_REQ_RING_TYPE_TX: return limit(_o.max_tx_rings, _reserved.tx_rings);
    case abi::RING_ALLOC_REQ_RING_TYPE_RX:
    case abi::RING_ALLOC_REQ_RING_TYPE_RX_AGG: return limit(_o.max_rx_rings, _reserved.rx_rings);
    case abi::RING_ALLOC_REQ_RING_TYPE_NQ: return limit(_o.max_msix, _reserved.msix);
    default: return std::nullopt;   // ROCE_CMPL (3) is the P4 CREQ/NQ (bnxt_re bnxt_re_get_rtype)
    }
}

// The rings and statistics context a new ring names: a completion ring's NQ, a TX/RX ring's
// completion ring, its stat context, each existing and of its kind.
bool firmware::ring_references_valid(call& c, const abi::hwrm_ring_alloc_input& in, ring& r) {
    auto refuse = [&](const std::string& what) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object, what);
        return false;
    };
    auto is = [&](std::uint16_t id, std::uint8_t type) {
        const auto it = _rings.find(id);
        return it != _rings.end() && it->second.type == type;
    };
    if (r.type == abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL && (in.enables & abi::RING_ALLOC_REQ_ENABLES_NQ_RING_ID_VALID)) {
        if (!is(in.nq_ring_id, abi::RING_ALLOC_REQ_RING_TYPE_NQ)) {
            return refuse("nq_ring_id " + hex(in.nq_ring_id) + " is no NQ");
        }
        r.nq_ring_id = in.nq_ring_id;
    }
    if (r.type == abi::RING_ALLOC_REQ_RING_TYPE_TX || r.type == abi::RING_ALLOC_REQ_RING_TYPE_RX ||
        r.type == abi::RING_ALLOC_REQ_RING_TYPE_RX_AGG) {
        if (in.cmpl_ring_id != 0xffff && !is(in.cmpl_ring_id, abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL)) {
            return refuse("cmpl_ring_id " + hex(in.cmpl_ring_id) + " is no completion ring");
        }
        r.cmpl_ring_id = in.cmpl_ring_id;
    }
    if (in.enables & abi::RING_ALLOC_REQ_ENABLES_STAT_CTX_ID_VALID) {
        if (!_stats.contains(in.stat_ctx_id)) {
            return refuse("stat_ctx_id " + hex(in.stat_ctx_id) + " names no statistics context");
        }
        r.stat_ctx_id = in.stat_ctx_id;
    }
    return true;
}

void firmware::ring_alloc(call& c) {
    const auto in = c.input<abi::hwrm_ring_alloc_input>();
    ring r;
    r.type = in.ring_type;
    r.length = in.length;
    r.page_tbl_addr = in.page_tbl_addr;
    r.page_size = in.page_size;
    r.depth = in.page_tbl_depth;
    r.logical_id = in.logical_id;
    r.int_mode = in.int_mode;
    r.cq_handle = in.cq_handle;
    auto bad = [&](const std::string& what) { c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field, what); };
    const auto max = ring_limit(r.type);
    const bool nq = r.type == abi::RING_ALLOC_REQ_RING_TYPE_NQ;
    if (!max) {
        return bad("ring_type " + std::to_string(r.type) + " is no ring type of a P5 function");
    }
    if (r.length < 2 || !std::has_single_bit(r.length) || r.length > _o.max_ring_entries) {
        return bad("length " + std::to_string(r.length) + " is not a power of two in [2, " +
                   std::to_string(_o.max_ring_entries) + "]");
    }
    if (r.page_tbl_addr == 0) {
        return bad("page_tbl_addr 0");
    }
    if (r.int_mode != abi::RING_ALLOC_REQ_INT_MODE_MSIX && r.int_mode != abi::RING_ALLOC_REQ_INT_MODE_POLL &&
        !(!nq && r.int_mode == abi::RING_ALLOC_REQ_INT_MODE_LEGACY)) {
        return bad("int_mode " + std::to_string(r.int_mode) + " (a function model has MSI-X or polling)");
    }
    if (nq && r.int_mode == abi::RING_ALLOC_REQ_INT_MODE_MSIX && r.logical_id >= _o.max_msix) {
        return bad("logical_id " + std::to_string(r.logical_id) + ": the function has " +
                   std::to_string(_o.max_msix) + " MSI-X vectors");
    }
    if (!ring_references_valid(c, in, r)) {
        return;
    }
    if (rings_of(r.type) >= *max) {
        c.fail(abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR, cmd_err::no_resources,
               "ring_type " + std::to_string(r.type) + ": " + std::to_string(*max) +
                   " allowed (QCAPS maximum or FUNC_CFG reservation), all in use");
        return;
    }
    if (!read_ring_pages(c, r)) {
        return;
    }
    std::uint16_t id = 0;
    while (_rings.contains(id)) {
        ++id;
    }
    _rings.emplace(id, std::move(r));
    abi::hwrm_ring_alloc_output out;
    out.ring_id = id;
    out.logical_ring_id = in.logical_id;
    c.reply(out);
}

void firmware::ring_free(call& c) {
    const auto in = c.input<abi::hwrm_ring_free_input>();
    const auto it = _rings.find(in.ring_id);
    if (it == _rings.end() || it->second.type != in.ring_type) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "ring_id " + hex(in.ring_id) + " of type " + std::to_string(in.ring_type) +
                   " names no ring");
        return;
    }
    for (const auto& [id, r] : _rings) {
        if (id != in.ring_id && (r.cmpl_ring_id == in.ring_id || r.nq_ring_id == in.ring_id)) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::in_use,
                   "ring " + hex(in.ring_id) + " is still the completion ring or NQ of ring " + hex(id));
            return;
        }
    }
    if (_async_cr == in.ring_id) {
        _async_cr.reset();
    }
    if (_rcfw.creq_ring == in.ring_id) {
        _rcfw = {};   // the RoCE channel's CREQ goes: the channel stops (bnxt_re frees it last)
    }
    _rings.erase(it);
    c.reply(abi::hwrm_func_reset_output{});
}

// ---- statistics contexts, VNICs, filters ------------------------------------------------------------

void firmware::stat_ctx_alloc(call& c) {
    const auto in = c.input<abi::hwrm_stat_ctx_alloc_input>();
    const std::uint32_t max = limit(_o.max_stat_ctx, _reserved.stat_ctxs);
    if (_stats.size() >= max) {
        c.fail(abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR, cmd_err::no_resources,
               std::to_string(max) + " statistics contexts allowed, all in use");
        return;
    }
    std::uint32_t id = 0;
    while (_stats.contains(id)) {
        ++id;
    }
    _stats.emplace(id, stat_ctx{in.stats_dma_addr, in.update_period_ms,
                                (in.stat_ctx_flags & abi::STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE) != 0});
    abi::hwrm_stat_ctx_alloc_output out;
    out.stat_ctx_id = id;
    c.reply(out);
}

void firmware::stat_ctx_free(call& c) {
    const auto in = c.input<abi::hwrm_stat_ctx_free_input>();
    if (_stats.erase(in.stat_ctx_id) == 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "stat_ctx_id " + hex(in.stat_ctx_id) + " names no statistics context");
        return;
    }
    // STAT_CTX_FREE's response (bnxt_hsi.h) carries stat_ctx_id at 8: the same 16-byte shape
    abi::hwrm_stat_ctx_alloc_output out;
    out.stat_ctx_id = in.stat_ctx_id;
    c.reply(out);
}

void firmware::vnic_alloc(call& c) {
    const auto in = c.input<abi::hwrm_vnic_alloc_input>();
    if ((in.flags & ~abi::VNIC_ALLOC_REQ_FLAGS_DEFAULT) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_FLAGS, cmd_err::bad_field,
               "flags " + hex(in.flags) + " not implemented");
        return;
    }
    const std::uint32_t max = limit(_o.max_vnics, _reserved.vnics);
    if (_vnics.size() >= max) {
        c.fail(abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR, cmd_err::no_resources,
               std::to_string(max) + " VNICs allowed, all in use");
        return;
    }
    std::uint32_t id = 0;
    while (_vnics.contains(id)) {
        ++id;
    }
    _vnics.emplace(id, vnic{});
    abi::hwrm_vnic_alloc_output out;
    out.vnic_id = id;
    c.reply(out);
}

void firmware::vnic_free(call& c) {
    const auto in = c.input<abi::hwrm_vnic_free_input>();
    if (!_vnics.contains(in.vnic_id)) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "vnic_id " + hex(in.vnic_id) + " names no VNIC");
        return;
    }
    for (const auto& [id, f] : _filters) {
        if (f.vnic == in.vnic_id) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::in_use,
                   "VNIC " + hex(in.vnic_id) + " is still the destination of L2 filter " + hex(id));
            return;
        }
    }
    _vnics.erase(in.vnic_id);
    c.reply(abi::hwrm_func_reset_output{});
}

void firmware::vnic_cfg(call& c) {
    const auto in = c.input<abi::hwrm_vnic_cfg_input>();
    const auto it = _vnics.find(in.vnic_id);
    if (it == _vnics.end()) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "vnic_id " + hex(in.vnic_id) + " names no VNIC");
        return;
    }
    constexpr std::uint32_t known_flags = 0x7f;   // DEFAULT .. ROCE_MIRRORING_CAPABLE
    if ((in.flags & ~known_flags) != 0 ||
        ((in.flags & abi::VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE) &&
         (in.flags & abi::VNIC_CFG_REQ_FLAGS_ROCE_ONLY_VNIC_MODE))) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_FLAGS, cmd_err::bad_field,
               "flags " + hex(in.flags) + " (ROCE_DUAL and ROCE_ONLY exclude each other)");
        return;
    }
    constexpr std::uint32_t known_enables = abi::VNIC_CFG_REQ_ENABLES_MRU |
                                            abi::VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID |
                                            abi::VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID;
    if ((in.enables & ~known_enables) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_ENABLES, cmd_err::unknown_enables,
               "enables " + hex(in.enables & ~known_enables) +
                   " not implemented (ring groups, RSS/COS/LB rules: a P5 VNIC names its rings)");
        return;
    }
    auto ring_of = [&](std::uint16_t id, std::uint8_t type) {
        const auto r = _rings.find(id);
        return r != _rings.end() && r->second.type == type;
    };
    if ((in.enables & abi::VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID) &&
        !ring_of(in.default_rx_ring_id, abi::RING_ALLOC_REQ_RING_TYPE_RX)) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "default_rx_ring_id " + hex(in.default_rx_ring_id) + " is no RX ring");
        return;
    }
    if ((in.enables & abi::VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID) &&
        !ring_of(in.default_cmpl_ring_id, abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL)) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "default_cmpl_ring_id " + hex(in.default_cmpl_ring_id) + " is no completion ring");
        return;
    }
    vnic& v = it->second;
    v.flags = in.flags;
    v.configured = true;
    if (in.enables & abi::VNIC_CFG_REQ_ENABLES_DEFAULT_RX_RING_ID) {
        v.default_rx_ring = in.default_rx_ring_id;
    }
    if (in.enables & abi::VNIC_CFG_REQ_ENABLES_DEFAULT_CMPL_RING_ID) {
        v.default_cmpl_ring = in.default_cmpl_ring_id;
    }
    if (in.enables & abi::VNIC_CFG_REQ_ENABLES_MRU) {
        v.mru = in.mru;
    }
    c.reply(abi::hwrm_func_reset_output{});
}

void firmware::cfa_l2_filter_alloc(call& c) {
    const auto in = c.input<abi::hwrm_cfa_l2_filter_alloc_input>();
    const std::uint32_t traffic = (in.flags & abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_MASK) >> 4;
    if ((in.flags & abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX) == 0 || traffic > 2) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_FLAGS, cmd_err::bad_field,
               "flags " + hex(in.flags) + ": the model filters the receive path, TRAFFIC 0-2");
        return;
    }
    constexpr std::uint32_t known = abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR |
                                    abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
                                    abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID;
    if ((in.enables & ~known) != 0 || (in.enables & abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR) == 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_ENABLES, cmd_err::unknown_enables,
               "enables " + hex(in.enables) + ": L2_ADDR needed; VLAN, source and mirror filters not implemented");
        return;
    }
    if (!_vnics.contains(in.dst_id)) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "dst_id " + hex(in.dst_id) + " names no VNIC");
        return;
    }
    const std::uint32_t max = limit(_o.max_l2_ctxs, _reserved.l2_ctxs);
    if (_filters.size() >= max) {
        c.fail(abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR, cmd_err::no_resources,
               std::to_string(max) + " L2 filters allowed, all in use");
        return;
    }
    l2_filter f;
    f.mac = in.l2_addr;
    f.mask = (in.enables & abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK)
                 ? in.l2_addr_mask
                 : std::array<std::uint8_t, 6>{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    f.vnic = in.dst_id;
    f.traffic = static_cast<std::uint8_t>(traffic);
    // Filter ids are 64-bit handles; the model's carry a tag so that a small integer is no id.
    const std::uint64_t id = 0x4c32000000000000ull | _next_filter++;
    _filters.emplace(id, f);
    abi::hwrm_cfa_l2_filter_alloc_output out;
    out.l2_filter_id = id;
    c.reply(out);
}

void firmware::cfa_l2_filter_free(call& c) {
    const auto in = c.input<abi::hwrm_cfa_l2_filter_free_input>();
    if (_filters.erase(in.l2_filter_id) == 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "l2_filter_id " + hex(in.l2_filter_id) + " names no filter");
        return;
    }
    c.reply(abi::hwrm_func_reset_output{});
}

bool firmware::roce_receive_ready() const noexcept {
    for (const auto& [id, f] : _filters) {
        const auto v = _vnics.find(f.vnic);
        if (f.traffic == 2 && f.mac == _o.mac && v != _vnics.end() && v->second.configured &&
            (v->second.flags & (abi::VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE |
                                abi::VNIC_CFG_REQ_FLAGS_ROCE_ONLY_VNIC_MODE)) != 0) {
            return true;
        }
    }
    return false;
}

}  // namespace rig::sim::bnxt
