#include "firmware/bnxt/device.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "abi/bits.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/ids.hpp"
#include "abi/pci_ids.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::bnxt {

namespace {

error with_prefix(error e, const std::string& prefix) {
    e.message = prefix + e.message;
    return e;
}


constexpr std::size_t page = driver::dma_memory::small_page;
constexpr std::size_t stats_bytes = 160;  // bnxt_hsi.h struct ctx_hw_stats (bnxt_re's hw_stats_size)

}  // namespace

std::string_view to_string(bring_up_step s) noexcept {
    switch (s) {
    case bring_up_step::ver_get: return "VER_GET";
    case bring_up_step::func_reset: return "FUNC_RESET";
    case bring_up_step::func_qcaps: return "FUNC_QCAPS";
    case bring_up_step::drv_rgtr: return "FUNC_DRV_RGTR";
    case bring_up_step::backing_store: return "BACKING_STORE";
    case bring_up_step::resource_qcaps: return "FUNC_RESOURCE_QCAPS";
    case bring_up_step::func_qcfg: return "FUNC_QCFG";
    case bring_up_step::func_cfg: return "FUNC_CFG";
    case bring_up_step::stat_ctx: return "STAT_CTX";
    case bring_up_step::vnic: return "VNIC";
    case bring_up_step::l2_filter: return "L2_FILTER";
    case bring_up_step::creq: return "CREQ";
    case bring_up_step::rcfw: return "RCFW";
    case bring_up_step::query_func: return "QUERY_FUNC";
    case bring_up_step::initialize_fw: return "INITIALIZE_FW";
    case bring_up_step::nq: return "NQ";
    case bring_up_step::async_cr: return "ASYNC_CR";
    case bring_up_step::add_gid: return "ADD_GID";
    case bring_up_step::ready: return "READY";
    }
    return "UNKNOWN";
}

std::string_view to_string(teardown_step s) noexcept {
    switch (s) {
    case teardown_step::delete_gid: return "DELETE_GID";
    case teardown_step::nq: return "RING_FREE (NQ)";
    case teardown_step::deinitialize_fw: return "DEINITIALIZE_FW";
    case teardown_step::creq: return "RING_FREE";
    case teardown_step::l2_filter: return "CFA_L2_FILTER_FREE";
    case teardown_step::vnic: return "VNIC_FREE";
    case teardown_step::stat_ctx: return "STAT_CTX_FREE";
    case teardown_step::drv_unrgtr: return "FUNC_DRV_UNRGTR";
    case teardown_step::func_reset: return "FUNC_RESET";
    case teardown_step::done: return "DONE";
    }
    return "UNKNOWN";
}

std::string firmware_versions::text(const std::array<std::uint8_t, 3>& v) const {
    return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

device::device(driver::function& fn, const device_options& options)
    : _fn(fn), _options(options), _stranded(std::make_unique<stranded_memory>()) {}

device::~device() {
    if (!_torn_down) {
        if (auto r = teardown(); !r) {
            log().warn("bnxt on {}: teardown at destruction: {}", _fn.name(), r.error().message);
        }
    }
}

result<std::unique_ptr<device>> device::bring_up(driver::function& fn, const device_options& options) {
    const auto pow2_from_256 = [](std::uint32_t n) { return n >= 256 && (n & (n - 1)) == 0; };
    if (!pow2_from_256(options.creq_entries) || !pow2_from_256(options.nq_entries) || options.nq_entries > 65536 ||
        options.nq_msix == options.creq_msix) {
        throw std::invalid_argument("bnxt device: creq_entries " + std::to_string(options.creq_entries) +
                                    " or nq_entries " + std::to_string(options.nq_entries) +
                                    " is not a power of two of at least 256 (the NQ at most 65536), or the NQ's "
                                    "MSI-X vector is the CREQ's");
    }
    std::unique_ptr<device> d(new device(fn, options));
    if (auto r = d->run_steps(); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return d;
}

std::optional<error> device::failure() const { return _hwrm ? _hwrm->failure() : std::nullopt; }

bool device::dead() const { return failure().has_value(); }

hwrm_channel& device::hwrm() {
    if (_torn_down || !_hwrm) {
        throw std::invalid_argument("bnxt device on " + std::string(_fn.name()) + ": hwrm() after teardown");
    }
    return *_hwrm;
}

result<void> device::run_steps() {
    auto ch = hwrm_channel::create(_fn, *_stranded, _options.hwrm);
    if (!ch) {
        return std::unexpected(with_prefix(std::move(ch.error()), "bring-up step VER_GET: "));
    }
    _hwrm = std::move(*ch);
    if (_options.trace) {
        _hwrm->trace(_options.trace);
    }
    // PF or VF decides the doorbell offset (bnxt_en BNXT_PF): from the function's PCI IDs.
    auto vendor = _fn.config_read16(0x00);
    auto devid = _fn.config_read16(0x02);
    if (vendor && devid) {
        const auto* id = ::rig::abi::pci::find(*vendor, *devid);
        _vf = id != nullptr && id->vf;
    }
    const auto& t = _options.timeouts;
    const ms limits[] = {t.ready, t.func_reset, t.func_qcaps, t.drv_rgtr, t.backing_store, t.resource_qcaps,
                         t.func_qcfg, t.func_cfg, t.stat_ctx, t.vnic, t.l2_filter, t.creq,
                         t.rcfw, t.query_func, t.initialize_fw, t.nq, t.async_cr, t.add_gid};
    for (auto s = bring_up_step::ver_get; s != bring_up_step::ready;
         s = static_cast<bring_up_step>(static_cast<int>(s) + 1)) {
        _reached = s;
        if (auto r = step(s, clock::now() + limits[static_cast<int>(s)]); !r) {
            error e = with_prefix(std::move(r.error()), "bring-up step " + std::string(to_string(s)) + ": ");
            log().debug("bnxt on {}: {}", _fn.name(), e.message);  // the caller reports it
            if (auto u = undo(); !u) {
                log().warn("bnxt on {}: undoing the bring-up: {}", _fn.name(), u.error().message);
            }
            _torn_down = true;
            return std::unexpected(std::move(e));
        }
    }
    _reached = bring_up_step::ready;
    if (auto r = start_events(); !r) {
        error e = with_prefix(std::move(r.error()), "bring-up step READY: ");
        if (auto u = undo(); !u) {
            log().warn("bnxt on {}: undoing the bring-up: {}", _fn.name(), u.error().message);
        }
        _torn_down = true;
        return std::unexpected(std::move(e));
    }
    log().info("bnxt on {}: up, HWRM {} firmware {}", _fn.name(), _versions.text(_versions.hwrm_interface),
               _versions.text(_versions.hwrm_firmware));
    return {};
}

result<void> device::step(bring_up_step s, clock::time_point by) {
    switch (s) {
    case bring_up_step::ver_get: return ver_get(by);
    case bring_up_step::func_reset: {
        abi::hwrm_func_reset_input in;  // enables 0: RESETALL of this function (bnxt_hwrm_func_reset)
        auto r = _hwrm->send<abi::hwrm_func_reset_output>(in, by);
        return r ? result<void>{} : std::unexpected(std::move(r.error()));
    }
    case bring_up_step::func_qcaps: return func_qcaps(by);
    case bring_up_step::drv_rgtr: return drv_rgtr(by);
    case bring_up_step::backing_store: return backing_store(by);
    case bring_up_step::resource_qcaps: {
        auto r = _hwrm->send<abi::hwrm_func_resource_qcaps_output>(abi::hwrm_func_resource_qcaps_input{}, by);
        if (!r && r.error().kind != error_kind::status) {
            return std::unexpected(std::move(r.error()));
        }
        _new_resource_manager = r.has_value();
        return {};
    }
    case bring_up_step::func_qcfg: return func_qcfg(by);
    case bring_up_step::func_cfg: return _new_resource_manager ? func_cfg(by) : result<void>{};
    case bring_up_step::stat_ctx: return stat_ctx(by);
    case bring_up_step::vnic: return vnic(by);
    case bring_up_step::l2_filter: return l2_filter(by);
    case bring_up_step::creq: return creq(by);
    case bring_up_step::rcfw:
    case bring_up_step::query_func:
    case bring_up_step::initialize_fw:
    case bring_up_step::nq:
    case bring_up_step::add_gid: return _options.roce_channel ? roce_step(s, by) : result<void>{};
    case bring_up_step::async_cr:
        return _options.roce_channel && _options.rcfw_events && !_vf ? async_cr(by) : result<void>{};
    case bring_up_step::ready: return {};
    }
    return {};
}

result<void> device::ver_get(clock::time_point by) {
    // DEV_NOT_RDY: the firmware answers VER_GET but is not ready for anything else yet (after
    // a reset); ask again until it clears or the ready deadline passes.
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
        auto v = _hwrm->ver_get(by);
        if (!v) {
            return std::unexpected(std::move(v.error()));
        }
        if ((v->flags & abi::VER_GET_RESP_FLAGS_DEV_NOT_RDY) == 0) {
            _versions.hwrm_interface = {v->hwrm_intf_maj_8b, v->hwrm_intf_min_8b, v->hwrm_intf_upd_8b};
            _versions.hwrm_firmware = {v->hwrm_fw_maj_8b, v->hwrm_fw_min_8b, v->hwrm_fw_bld_8b};
            _versions.roce_firmware = {v->roce_fw_maj_8b, v->roce_fw_min_8b, v->roce_fw_bld_8b};
            _chip_num = v->chip_num;
            if (abi::generation_of(_chip_num) != abi::generation::p5) {
                return std::unexpected(plain_error(error_kind::bad_output,
                                                   "chip " + ::rig::abi::hex(_chip_num) +
                                                       " is not a P5 (BCM5750x): only P5 is driven"));
            }
            return {};
        }
        const auto now = clock::now();
        if (now >= by) {
            return std::unexpected(plain_error(error_kind::timeout,
                                               "VER_GET (0x0): the firmware still reports DEV_NOT_RDY after " +
                                                   std::to_string(_options.timeouts.ready.count()) + " ms"));
        }
        std::this_thread::sleep_for(std::min<clock::duration>(pause, by - now));
        pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
}

result<void> device::func_qcaps(clock::time_point by) {
    auto q = _hwrm->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, by);
    if (!q) {
        return std::unexpected(std::move(q.error()));
    }
    if ((q->flags & abi::FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED) == 0) {
        return std::unexpected(plain_error(error_kind::bad_output, "the function does not support RoCE v2 (FUNC_QCAPS flags " +
                                                                       ::rig::abi::hex(q->flags) + ")"));
    }
    if ((q->flags_ext & abi::FUNC_QCAPS_RESP_FLAGS_EXT_BS_V2_REQUIRED) != 0) {
        return std::unexpected(plain_error(error_kind::bad_output,
                                           "the firmware requires FUNC_BACKING_STORE_CFG_V2 (flags_ext " +
                                               ::rig::abi::hex(q->flags_ext) + "), which Rig does not speak"));
    }
    _fid = q->fid;
    _mac = q->mac_address;
    return {};
}

result<void> device::drv_rgtr(clock::time_point by) {
    abi::hwrm_func_drv_rgtr_input in;
    in.enables = abi::FUNC_DRV_RGTR_REQ_ENABLES_OS_TYPE | abi::FUNC_DRV_RGTR_REQ_ENABLES_VER;
    in.os_type = abi::FUNC_DRV_RGTR_REQ_OS_TYPE_LINUX;  // the host's OS, as bnxt_en says
    in.ver_maj_8b = 0;  // Rig 0.1.0
    in.ver_min_8b = 1;
    in.ver_upd_8b = 0;
    in.ver_min = 1;
    if (_options.rcfw_events && _options.roce_channel) {
        // the async events the event thread takes (bnxt_hwrm_func_drv_rgtr: a bitmap of event
        // ids as 8 little-endian 32-bit words; bnxt_async_events_arr has both)
        for (const std::uint16_t id : {abi::ASYNC_EVENT_CMPL_EVENT_ID_LINK_STATUS_CHANGE,
                                       abi::ASYNC_EVENT_CMPL_EVENT_ID_RESET_NOTIFY}) {
            in.async_event_fwd[id / 8] |= static_cast<std::uint8_t>(1u << (id % 8));
        }
        in.enables |= abi::FUNC_DRV_RGTR_REQ_ENABLES_ASYNC_EVENT_FWD;
    }
    auto r = _hwrm->send<abi::hwrm_func_drv_rgtr_output>(in, by);
    if (!r) {
        return std::unexpected(std::move(r.error()));
    }
    _registered = true;
    return {};
}

result<void> device::backing_store(clock::time_point by) {
    auto q = _hwrm->send<abi::hwrm_func_backing_store_qcaps_output>(abi::hwrm_func_backing_store_qcaps_input{}, by);
    if (!q) {
        return std::unexpected(std::move(q.error()));
    }
    auto m = context_memory::allocate(_fn, *q, true);
    if (!m) {
        return std::unexpected(std::move(m.error()));
    }
    _ctx = std::move(*m);
    // Once sent, the firmware may own the pages even if it refuses or never answers.
    _backing_store_given = true;
    auto r = _hwrm->send<abi::hwrm_func_reset_output>(_ctx->cfg_request(), by);
    if (!r) {
        if (r.error().kind == error_kind::status) {
            _backing_store_given = false;  // refused: the firmware took nothing
        }
        return std::unexpected(std::move(r.error()));
    }
    return {};
}

result<void> device::func_qcfg(clock::time_point by) {
    auto q = _hwrm->send<abi::hwrm_func_qcfg_output>(abi::hwrm_func_qcfg_input{}, by);
    if (!q) {
        return std::unexpected(std::move(q.error()));
    }
    // bnxt.c bnxt_hwrm_func_qcfg: on P5 the doorbells start at 0x10000 (PF) / 0x4000 (VF)
    // whatever legacy_l2_db_size_kb says; the area is l2_doorbell_bar_size_kb, page aligned.
    _db_offset = _vf ? abi::DB_VF_OFFSET_P5 : abi::DB_PF_OFFSET_P5;
    _db_size = (std::uint64_t{q->l2_doorbell_bar_size_kb} * 1024 + page - 1) / page * page;
    if (auto bar2 = _fn.get_region_info(driver::region::bar2);
        bar2 && bar2->size != 0 && (_db_size == 0 || _db_size > bar2->size || _db_size <= _db_offset)) {
        _db_size = bar2->size;   // bnxt_hwrm_func_qcfg: then the L2 driver maps the whole BAR
    }
    _mtu = q->admin_mtu != 0 ? q->admin_mtu : q->max_mtu_configured;
    return {};
}

result<void> device::func_cfg(clock::time_point by) {
    // The RoCE share bnxt_en adds to its reservation (bnxt_get_ulp_msix_num, _stat_ctxs): the
    // CREQ and one NQ (and the completion vectors asked for), one statistics context, one VNIC.
    abi::hwrm_func_cfg_input in;
    in.enables = abi::FUNC_CFG_REQ_ENABLES_NUM_MSIX | abi::FUNC_CFG_REQ_ENABLES_NUM_STAT_CTXS |
                 abi::FUNC_CFG_REQ_ENABLES_NUM_VNICS;
    in.num_msix = static_cast<std::uint16_t>(2 + _options.completion_vectors);
    in.num_stat_ctxs = 1;
    in.num_vnics = 1;
    auto r = _hwrm->send<abi::hwrm_func_reset_output>(in, by);
    return r ? result<void>{} : std::unexpected(std::move(r.error()));
}

result<driver::dma_memory> device::mapped(std::size_t bytes, std::uint64_t& iova, const char* what) {
    auto mem = driver::dma_memory::allocate(bytes, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(plain_error(error_kind::transport, std::string(what) + ": " + mem.error().message));
    }
    std::memset(mem->data(), 0, mem->size());
    auto i = _fn.dma_map(*mem, 0, mem->size(), driver::dma_access::read_write);
    if (!i) {
        return std::unexpected(plain_error(error_kind::transport, std::string(what) + ": " + i.error().message));
    }
    iova = *i;
    return std::move(*mem);
}

result<void> device::stat_ctx(clock::time_point by) {
    auto mem = mapped(page, _stats_iova, "statistics buffer");
    if (!mem) {
        return std::unexpected(std::move(mem.error()));
    }
    _stats = std::move(*mem);
    // bnxt_re_net_stats_ctx_alloc: RoCE flag, 1 s period, the buffer the firmware DMAs into.
    abi::hwrm_stat_ctx_alloc_input in;
    in.stats_dma_addr = _stats_iova;
    in.update_period_ms = 1000;
    in.stat_ctx_flags = abi::STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE;
    in.stats_dma_length = stats_bytes;
    auto r = _hwrm->send<abi::hwrm_stat_ctx_alloc_output>(in, by);
    if (!r) {
        if (r.error().kind != error_kind::status) {  // unanswered: the firmware may DMA into it
            {
            const std::size_t bytes = _stats.size();
            _stranded->keep("statistics buffer (STAT_CTX_ALLOC unanswered)", _stats_iova, bytes, std::move(_stats));
        }
        }
        return std::unexpected(std::move(r.error()));
    }
    _stat_ctx = r->stat_ctx_id;
    return {};
}

result<void> device::vnic(clock::time_point by) {
    abi::hwrm_vnic_alloc_input in;
    in.flags = abi::VNIC_ALLOC_REQ_FLAGS_DEFAULT;
    auto a = _hwrm->send<abi::hwrm_vnic_alloc_output>(in, by);
    if (!a) {
        return std::unexpected(std::move(a.error()));
    }
    _vnic = a->vnic_id;
    // bnxt_hwrm_vnic_cfg with the RoCE ULP registered: ROCE_DUAL_VNIC_MODE on the default VNIC;
    // its MRU the port MTU plus the Ethernet and VLAN headers (bnxt_en: mtu + ETH_HLEN + VLAN_HLEN).
    abi::hwrm_vnic_cfg_input c;
    c.flags = abi::VNIC_CFG_REQ_FLAGS_DEFAULT | abi::VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE;
    c.enables = abi::VNIC_CFG_REQ_ENABLES_MRU;
    c.vnic_id = static_cast<std::uint16_t>(*_vnic);
    c.mru = static_cast<std::uint16_t>((_mtu != 0 ? _mtu : 1500) + 14 + 4);
    auto r = _hwrm->send<abi::hwrm_func_reset_output>(c, by);
    return r ? result<void>{} : std::unexpected(std::move(r.error()));
}

result<void> device::l2_filter(clock::time_point by) {
    abi::hwrm_cfa_l2_filter_alloc_input in;
    in.flags = abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX | abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_ROCE;
    in.enables = abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
                 abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID;
    in.l2_addr = _mac;
    in.l2_addr_mask = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    in.dst_id = static_cast<std::uint16_t>(*_vnic);
    auto r = _hwrm->send<abi::hwrm_cfa_l2_filter_alloc_output>(in, by);
    if (!r) {
        return std::unexpected(std::move(r.error()));
    }
    _l2_filter = r->l2_filter_id;
    return {};
}

result<void> device::creq(clock::time_point by) {
    auto id = alloc_ring(_options.creq_entries, _options.creq_msix, _creq, _creq_iova, "CREQ", by);
    if (!id) {
        return std::unexpected(std::move(id.error()));
    }
    _creq_id = *id;
    return {};
}

// The RoCE NQ (bnxt_re_alloc_res -> bnxt_re_net_ring_alloc for each NQ, after INITIALIZE_FW).
result<void> device::nq(clock::time_point by) {
    auto id = alloc_ring(_options.nq_entries, _options.nq_msix, _nq, _nq_iova, "NQ", by);
    if (!id) {
        return std::unexpected(std::move(id.error()));
    }
    _nq_id = *id;
    return {};
}

// An NQ-type ring (the CREQ, a RoCE NQ: bnxt_re_net_ring_alloc): `entries` 16-byte entries,
// more than a page by a PBL of one level, its PTEs the pages' addresses | PTU_PTE_VALID; MSI-X
// vector `msix` (logical_id). Unanswered: its pages are stranded (the ring may exist).
result<std::uint16_t> device::alloc_ring(std::uint32_t entries, std::uint16_t msix, driver::dma_memory& memory,
                                         std::uint64_t& iova, const char* what, clock::time_point by) {
    const std::size_t ring_pages = (std::size_t{entries} * 16 + page - 1) / page;
    const std::size_t pbl = ring_pages > 1 ? 1 : 0;
    if (ring_pages > page / 8) {
        return std::unexpected(plain_error(error_kind::bad_input, std::string("a ") + what + " of " +
                                                                      std::to_string(entries) +
                                                                      " entries needs more than one PBL page"));
    }
    auto mem = mapped((ring_pages + pbl) * page, iova, (std::string(what) + " ring").c_str());
    if (!mem) {
        return std::unexpected(std::move(mem.error()));
    }
    memory = std::move(*mem);
    abi::hwrm_ring_alloc_input in;
    in.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
    in.int_mode = abi::RING_ALLOC_REQ_INT_MODE_MSIX;
    in.length = entries;
    in.logical_id = msix;
    if (pbl != 0) {
        std::byte* ptes = memory.data() + ring_pages * page;
        for (std::size_t p = 0; p < ring_pages; ++p) {
            ::rig::abi::store_le<std::uint64_t>(ptes + 8 * p, (iova + p * page) | abi::PTU_PTE_VALID);
        }
        in.page_tbl_addr = iova + ring_pages * page;
        in.page_size = 12;  // BNXT_PAGE_SHIFT
        in.page_tbl_depth = 1;
    } else {
        in.page_tbl_addr = iova;
    }
    auto r = _hwrm->send<abi::hwrm_ring_alloc_output>(in, by);
    if (!r) {
        if (r.error().kind != error_kind::status) {  // unanswered: the ring may exist
            const std::size_t bytes = memory.size();
            _stranded->keep(std::string(what) + " ring pages (RING_ALLOC unanswered)", iova, bytes, std::move(memory));
        }
        return std::unexpected(std::move(r.error()));
    }
    return r->ring_id;
}

// The GID Linux puts first in a RoCE port's table: fe80::/64 with the modified EUI-64 of the
// MAC (U/L bit flipped, ff:fe in the middle; RFC 4291 appendix A, addrconf_ifid_eui48).
static std::array<std::uint8_t, 16> link_local_gid(const std::array<std::uint8_t, 6>& mac) noexcept {
    return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe,
            mac[3], mac[4], mac[5]};
}

result<void> device::roce_step(bring_up_step s, clock::time_point by) {
    switch (s) {
    case bring_up_step::rcfw: {
        int eventfd = -1;
        if (_options.rcfw_events) {
            // MSI-X up to the CREQ's and the NQ's vectors; the CREQ's eventfd wakes the channel's
            // waiters until the event thread takes it over (READY)
            const std::uint32_t vectors =
                std::uint32_t{std::max(_options.creq_msix, _options.nq_msix)} + 1 + _options.completion_vectors;
            auto fds = _fn.enable_irqs(driver::irq_kind::msix, vectors);
            if (!fds || fds->size() < vectors) {
                return std::unexpected(plain_error(error_kind::transport, "MSI-X for the CREQ and the NQ: " +
                                                                              (fds ? std::string("too few vectors")
                                                                                   : fds.error().message)));
            }
            _irqs_enabled = true;
            _irq_fds = *fds;
            eventfd = _irq_fds.at(_options.creq_msix);
        }
        auto ch = rcfw_channel::create(_fn, *_stranded,
                                       {*_creq_id, _creq.data(), _options.creq_entries, _db_offset, eventfd},
                                       _options.rcfw);
        if (!ch) {
            return std::unexpected(std::move(ch.error()));
        }
        _rcfw = std::move(*ch);
        if (_options.trace) {
            _rcfw->trace(_options.trace);
        }
        _rcfw->on_async([this](std::span<const std::byte, 16> e) { on_creq_async(e); });
        return {};
    }
    case bring_up_step::query_func: {
        std::vector<std::byte> side;
        auto r = _rcfw->send<abi::creq_query_func_resp>(abi::cmdq_query_func{}, abi::creq_query_func_resp_sb::layout_size,
                                                        by, &side);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        auto sb = abi::decode<abi::creq_query_func_resp_sb>(side);
        if (!sb) {
            return std::unexpected(plain_error(error_kind::bad_output, sb.error().message()));
        }
        // bnxt_qplib_get_dev_attr: max_qp + 1 (QP1), max_qp_wr - 1
        _roce.max_qp = sb->max_qp + 1;
        _roce.max_qp_wr = sb->max_qp_wr != 0 ? sb->max_qp_wr - 1u : 0u;
        _roce.max_cq = sb->max_cq;
        _roce.max_cqe = std::min<std::uint32_t>(sb->max_cqe, 0xfffff);
        _roce.max_mr = sb->max_mr;
        _roce.max_pd = sb->max_pd;
        _roce.max_gid = sb->max_gid;
        _roce.max_sge = sb->max_sge;
        _roce.dev_cap_flags = sb->dev_cap_flags;
        _roce.max_mr_size = sb->max_mr_size;
        _roce.max_dpi = sb->max_dpi;
        return {};
    }
    case bring_up_step::initialize_fw: {
        // bnxt_qplib_init_rcfw on a P5 PF: no context tables (the backing store has them), the
        // doorbell page size as log2 - 12, the RoCE statistics context; VF limits left 0.
        abi::cmdq_initialize_fw in;
        in.log2_dbr_pg_size = 0;  // 4 KiB pages
        in.stat_ctx_id = *_stat_ctx;
        if ((_roce.dev_cap_flags & abi::CREQ_QUERY_FUNC_RESP_SB_HW_REQUESTER_RETX_ENABLED) != 0) {
            in.flags |= abi::CMDQ_INITIALIZE_FW_FLAGS_HW_REQUESTER_RETX_SUPPORTED;
        }
        auto r = _rcfw->send<abi::creq_initialize_fw_resp>(in, 0, by);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        _fw_initialized = true;
        return {};
    }
    case bring_up_step::nq: return nq(by);
    case bring_up_step::add_gid: {
        // bnxt_qplib_add_sgid: the GID's 16 bytes reversed, the MAC's pairs swapped, no VLAN.
        _gid = link_local_gid(_mac);
        abi::cmdq_add_gid in;
        in.gid = abi::add_gid_gid(_gid);
        in.src_mac = abi::add_gid_src_mac(_mac);
        auto r = _rcfw->send<abi::creq_add_gid_resp>(in, 0, by);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        _gid_index = r->xid;
        return {};
    }
    default: return {};
    }
}

// READY with rcfw_events: the event thread over the NQ and the CREQ's vectors.
result<void> device::start_events() {
    if (!_options.rcfw_events || !_options.roce_channel) {
        return {};
    }
    const nq_ring ring{*_nq_id, _nq.data(), _options.nq_entries, _db_offset, _irq_fds.at(_options.nq_msix)};
    auto ev = bnxt::events::start(_fn, *_hwrm, *_rcfw, ring, _irq_fds.at(_options.creq_msix), _options.events,
                                  _options.health_interval);
    if (!ev) {
        return std::unexpected(std::move(ev.error()));
    }
    _events = std::move(*ev);
    return {};
}

// An asynchronous CREQ entry (the channel locked): a QP's failure to events.qp_error
// (bnxt_qplib_process_qp_event: QP_ERROR_NOTIFICATION marks the QP in error); others logged.
void device::on_creq_async(std::span<const std::byte, 16> entry) {
    auto e = abi::decode_creq(entry);
    if (e) {
        if (const auto* n = std::get_if<abi::creq_qp_error_notification>(&*e)) {
            log().debug("bnxt on {}: QP {:#x} error: requester reason {:#x}, responder reason {:#x}", _fn.name(),
                        n->xid, n->req_err_state_reason, n->res_err_state_reason);
            if (_options.events.qp_error) {
                _options.events.qp_error(n->xid, n->req_err_state_reason, n->res_err_state_reason);
            }
            return;
        }
    }
    log().info("bnxt on {}: CREQ entry type {:#x} event {:#x} (not a completion) ignored", _fn.name(),
               std::to_integer<unsigned>(entry[0]) & 0x3f, std::to_integer<unsigned>(entry[9]));
}

result<void> device::teardown() {
    if (_torn_down) {
        if (_teardown_error) {
            return std::unexpected(*_teardown_error);
        }
        return {};
    }
    auto r = undo();
    _torn_down = true;
    if (!r) {
        _teardown_error = r.error();
    }
    return r;
}

result<void> device::undo() {
    std::optional<error> first;
    if (_events) {
        _events->stop();   // no handler runs after this: the RoCE objects may go
        _events.reset();
    }
    undo_roce(first);
    if (_irqs_enabled) {   // event mode's vectors, after the channel and the thread that waited on them
        static_cast<void>(_fn.disable_irqs(driver::irq_kind::msix));
        _irqs_enabled = false;
        _irq_fds.clear();
    }
    const auto send = [&](teardown_step s, auto in, bool& done) {
        if (dead()) {
            return;
        }
        auto r = _hwrm->send<abi::hwrm_func_reset_output>(in, clock::now() + _options.timeouts.teardown_step);
        if (r) {
            done = true;
            return;
        }
        error e = with_prefix(std::move(r.error()), "teardown step " + std::string(to_string(s)) + ": ");
        log().debug("bnxt on {}: {}", _fn.name(), e.message);
        if (!first) {
            first = std::move(e);
        }
    };
    free_ring(teardown_step::creq, _creq_id, _creq, _creq_iova, "CREQ", first);
    bool filter_freed = true;
    if (_l2_filter) {
        filter_freed = false;
        abi::hwrm_cfa_l2_filter_free_input in;
        in.l2_filter_id = *_l2_filter;
        send(teardown_step::l2_filter, in, filter_freed);
    }
    bool vnic_freed = true;
    if (_vnic) {
        vnic_freed = false;
        abi::hwrm_vnic_free_input in;
        in.vnic_id = *_vnic;
        send(teardown_step::vnic, in, vnic_freed);
    }
    bool stat_freed = !_stat_ctx.has_value();
    if (_stat_ctx) {
        abi::hwrm_stat_ctx_free_input in;
        in.stat_ctx_id = *_stat_ctx;
        send(teardown_step::stat_ctx, in, stat_freed);
    }
    bool unregistered = !_registered;
    if (_registered) {
        abi::hwrm_func_drv_unrgtr_input in;
        send(teardown_step::drv_unrgtr, in, unregistered);
    }
    bool released = !_backing_store_given;
    if (_backing_store_given) {
        abi::hwrm_func_reset_input in;
        send(teardown_step::func_reset, in, released);
    }
    // Memory the firmware may still write (it never let go, or stopped answering) is stranded.
    const std::string why = dead() ? "the firmware stopped answering" : "the firmware did not release it";
    if (_stats) {
        if (!stat_freed) {
            {
            const std::size_t bytes = _stats.size();
            _stranded->keep("statistics buffer", _stats_iova, bytes, std::move(_stats));
        }
        } else {
            static_cast<void>(_fn.dma_unmap(_stats_iova, _stats.size()));
            _stats = {};
        }
    }
    if (_ctx) {
        if (!released) {
            _ctx->strand(*_stranded, why);
        }
        _ctx.reset();
    }
    _l2_filter.reset();
    _vnic.reset();
    _stat_ctx.reset();
    _registered = false;
    _backing_store_given = false;
    static_cast<void>(unregistered);
    static_cast<void>(filter_freed);
    static_cast<void>(vnic_freed);
    if (first) {
        return std::unexpected(std::move(*first));
    }
    return {};
}

// bnxt_re's side, in bnxt_re_dev_uninit's order: its GIDs deleted (ib_core's GID table cleanup
// calls bnxt_re_del_gid), the NQ freed (bnxt_re_free_res), DEINITIALIZE_FW, then the channel
// goes (bnxt_qplib_disable_rcfw_channel).
void device::undo_roce(std::optional<error>& first) {
    const auto keep = [&](error e, teardown_step s) {
        if (!first) {
            first = with_prefix(std::move(e), "teardown step " + std::string(to_string(s)) + ": ");
        }
    };
    if (_rcfw && _gid_index && !_rcfw->failure()) {
        abi::cmdq_delete_gid del;
        del.gid_index = static_cast<std::uint16_t>(*_gid_index);
        if (auto r = _rcfw->send<abi::creq_delete_gid_resp>(del, 0, clock::now() + _options.timeouts.teardown_step); !r) {
            keep(std::move(r.error()), teardown_step::delete_gid);
        }
    }
    _gid_index.reset();
    free_ring(teardown_step::nq, _nq_id, _nq, _nq_iova, "NQ", first);   // and the async event ring with it
    _async_cr.reset();
    if (!_rcfw) {
        return;
    }
    bool deinitialized = !_fw_initialized;
    if (_fw_initialized && !_rcfw->failure()) {
        auto r = _rcfw->send<abi::creq_deinitialize_fw_resp>(abi::cmdq_deinitialize_fw{}, 0,
                                                             clock::now() + _options.timeouts.teardown_step);
        deinitialized = r.has_value();
        if (!r) {
            keep(std::move(r.error()), teardown_step::deinitialize_fw);
        }
    }
    if (!deinitialized) {
        _rcfw->strand("the RoCE firmware was not deinitialized");
    }
    _rcfw.reset();
    _fw_initialized = false;
}

// RING_FREE of an NQ-type ring (when the firmware answers), then its pages: unmapped once freed
// (or never allocated), stranded when the firmware may still write them.
void device::free_ring(teardown_step s, std::optional<std::uint16_t>& id, driver::dma_memory& memory,
                       std::uint64_t iova, const std::string& what, std::optional<error>& first) {
    bool freed = !id.has_value();
    if (id && !dead()) {
        auto r = ring_free(*id, clock::now() + _options.timeouts.teardown_step);
        freed = r.has_value();
        if (!r && !first) {
            first = with_prefix(std::move(r.error()), "teardown step " + std::string(to_string(s)) + ": ");
        }
    }
    if (memory) {
        if (!freed) {
            const std::size_t bytes = memory.size();
            _stranded->keep(what + " ring " + std::to_string(*id) + " pages", iova, bytes, std::move(memory));
        } else {
            static_cast<void>(_fn.dma_unmap(iova, memory.size()));
            memory = {};
        }
    }
    id.reset();
}

result<void> device::ring_free(std::uint16_t id, clock::time_point by) {
    abi::hwrm_ring_free_input in;
    in.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
    in.ring_id = id;
    auto r = _hwrm->send<abi::hwrm_func_reset_output>(in, by);
    return r ? result<void>{} : std::unexpected(std::move(r.error()));
}

// ---- NQs of their own (a completion group's) ----------------------------------------------------

result<device::notification_queue> device::make_nq(std::uint32_t entries, std::uint16_t msix, clock::time_point by) {
    if (entries < 256 || entries > 65536 || (entries & (entries - 1)) != 0) {
        throw std::invalid_argument("bnxt device: an NQ of " + std::to_string(entries) +
                                    " entries (a power of two, 256..65536)");
    }
    if (dead()) {
        return std::unexpected(plain_error(error_kind::fatal, "the firmware stopped answering"));
    }
    notification_queue q;
    q.entries = entries;
    q.msix = msix;
    auto id = alloc_ring(entries, msix, q.memory, q.iova, "group NQ", by);
    if (!id) {
        if (q.memory && id.error().kind == error_kind::status) {   // refused: the ring does not exist
            static_cast<void>(_fn.dma_unmap(q.iova, q.memory.size()));
        }
        return std::unexpected(std::move(id.error()));
    }
    q.id = *id;
    return q;
}

result<void> device::free_nq(notification_queue& q, clock::time_point by) {
    if (!q.alive()) {
        return {};
    }
    if (!dead()) {
        auto r = ring_free(q.id, by);
        if (!r && r.error().kind == error_kind::status) {
            return r;   // the firmware answered no: the ring and its pages stay
        }
        if (r) {
            static_cast<void>(_fn.dma_unmap(q.iova, q.memory.size()));
            q.memory = {};
            return {};
        }
    }
    const std::size_t bytes = q.memory.size();
    _stranded->keep("group NQ ring " + std::to_string(q.id) + " pages", q.iova, bytes, std::move(q.memory));
    return dead() ? result<void>{} : std::unexpected(plain_error(error_kind::fatal, "RING_FREE unanswered"));
}

}  // namespace rig::firmware::bnxt
