// The HWRM channel of the bnxt firmware model: fetching a request from the window or by DMA
// (short commands), the command table, the response DMA-written with its valid byte last, and
// the function-level commands VER_GET, FUNC_RESET, FUNC_QCAPS, FUNC_QCFG, FUNC_DRV_RGTR/UNRGTR.
// bnxt_hsi.h; the kernel's bnxt_hwrm.c __hwrm_send (what a driver
// writes and polls), bnxt.c bnxt_hwrm_ver_get / bnxt_hwrm_func_qcaps / bnxt_hwrm_func_qcfg.
#include <algorithm>
#include <cstring>

#include "abi/bits.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;
using rig::abi::hex;
using rig::abi::load_le;

namespace {

// The commands the model implements, with their request length (the layout's size).
struct command {
    std::uint16_t req_type;
    std::size_t in_size;
    void (firmware::*run)(firmware::call&);
};

}  // namespace

firmware::firmware(firmware_options options) : _o(std::move(options)) {
    if (_o.short_cmd_required) {
        _o.short_cmd_supported = true;
    }
    if (_o.max_req_win_len < 16 || _o.max_req_win_len > 128 || _o.max_req_win_len % 4 != 0) {
        throw std::invalid_argument("bnxt firmware: max_req_win_len " +
                                    std::to_string(_o.max_req_win_len) +
                                    " is not a multiple of 4 in [16, 128] (the BAR0 window)");
    }
    reset();
}

void firmware::reset() {
    drop_objects();
    drop_context();
    _registered = false;
    _async_fwd = {};
    _async_cr.reset();
    _reserved = {};
    _rcfw = {};
    _changes.note_all();   // the RoCE objects went: the data path follows every table
    _mtu = _o.mtu;
    _cache_line = 64;
    _clock_set.reset();
    _mru = _o.mtu;
    _ready_at = clock::now() + _o.not_ready_time;
}

void firmware::drop_objects() {
    _rings.clear();
    _stats.clear();
    _vnics.clear();
    _filters.clear();
}

// ---- one request ----------------------------------------------------------------------------

outcome firmware::run(std::span<const std::byte> window, vfio_user::dma_space* dma,
                      std::optional<injected_failure> inject) {
    outcome o;
    call c;
    c.dma = dma;
    if (!fetch(window, dma, c, o)) {
        log().warn("bnxt hwrm: request {:#x} seq {:#x}: {}", o.req_type, o.seq_id, o.fault);
        return o;
    }
    if (inject && !c.failed()) {
        c.error = inject->error_code;
        c.err = static_cast<cmd_err>(inject->cmd_err);
        c.why = "injected failure";
    }
    if (!c.failed()) {
        dispatch(c);
    }
    respond(c, o);
    ++_executed;
    return o;
}

// The request into c.req (window or short command); false when no response can be written
// (the full request unreadable: there is no resp_addr to answer to).
bool firmware::fetch(std::span<const std::byte> window, vfio_user::dma_space* dma, call& c,
                     outcome& o) {
    const std::size_t win = std::min<std::size_t>(window.size(), _o.max_req_win_len);
    if (win < 16) {
        o.fault = "window shorter than the 16-byte header";
        return false;
    }
    const std::uint16_t signature = load_le<std::uint16_t>(window.data() + 2);
    o.req_type = load_le<std::uint16_t>(window.data());
    if (signature == abi::SHORT_REQ_SIGNATURE_SHORT_CMD) {
        o.short_command = true;
        c.via_short = true;
        const auto s = *abi::decode<abi::hwrm_short_input>(window);
        std::array<std::byte, 16> head{};
        if (dma == nullptr || !dma->read(s.req_addr, head)) {
            o.fault = "short command: full request at req_addr " + hex(s.req_addr) +
                      " not readable (DMA refused)";
            return false;
        }
        std::memcpy(c.req.data(), head.data(), head.size());
        c.req_type = load_le<std::uint16_t>(head.data());
        c.seq_id = load_le<std::uint16_t>(head.data() + 4);
        c.resp_addr = load_le<std::uint64_t>(head.data() + 8);
        if (!_o.short_cmd_supported) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::short_unsupported,
                   "short command, but VER_GET offers none");
            return true;
        }
        if (s.size < 16 || s.size > _o.max_ext_req_len || c.req_type != s.req_type) {
            c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_length,
                   "short command of size " + std::to_string(s.size) + " (16.." +
                       std::to_string(_o.max_ext_req_len) + ") for req_type " + hex(s.req_type) +
                       ", full request's " + hex(c.req_type));
            return true;
        }
        const std::size_t n = std::min<std::size_t>(s.size, call::padded_bytes);
        if (!dma->read(s.req_addr, std::span<std::byte>(c.req.data(), n))) {
            o.fault = "short command: " + std::to_string(s.size) + "-byte request at req_addr " +
                      hex(s.req_addr) + " not readable (DMA refused)";
            return false;
        }
        c.req_len = s.size;
        return true;
    }
    std::memcpy(c.req.data(), window.data(), win);
    c.req_len = win;
    c.req_type = o.req_type;
    c.seq_id = load_le<std::uint16_t>(window.data() + 4);
    c.resp_addr = load_le<std::uint64_t>(window.data() + 8);
    if (_o.short_cmd_required && c.req_type != abi::HWRM_VER_GET) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::short_required,
               "a window request, but VER_GET requires short commands");
    }
    return true;
}

void firmware::dispatch(call& c) {
    static constexpr command table[] = {
        {abi::HWRM_VER_GET, abi::hwrm_ver_get_input::layout_size, &firmware::ver_get},
        {abi::HWRM_FUNC_RESET, abi::hwrm_func_reset_input::layout_size, &firmware::func_reset},
        {abi::HWRM_FUNC_QCAPS, abi::hwrm_func_qcaps_input::layout_size, &firmware::func_qcaps},
        {abi::HWRM_FUNC_QCFG, abi::hwrm_func_qcfg_input::layout_size, &firmware::func_qcfg},
        {abi::HWRM_FUNC_CFG, abi::hwrm_func_cfg_input::layout_size, &firmware::func_cfg},
        {abi::HWRM_FUNC_DRV_RGTR, abi::hwrm_func_drv_rgtr_input::layout_size,
         &firmware::func_drv_rgtr},
        {abi::HWRM_FUNC_DRV_UNRGTR, abi::hwrm_func_drv_unrgtr_input::layout_size,
         &firmware::func_drv_unrgtr},
        {abi::HWRM_FUNC_RESOURCE_QCAPS, abi::hwrm_func_resource_qcaps_input::layout_size,
         &firmware::func_resource_qcaps},
        // The kernel sends a 256-byte "legacy" FUNC_BACKING_STORE_CFG when max_ext_req_len is
        // smaller than the struct (bnxt.c bnxt_hwrm_func_backing_store_cfg): the shortest the
        // model takes is the legacy one.
        {abi::HWRM_FUNC_BACKING_STORE_QCAPS,
         abi::hwrm_func_backing_store_qcaps_input::layout_size, &firmware::backing_store_qcaps},
        {abi::HWRM_FUNC_BACKING_STORE_CFG, 256, &firmware::backing_store_cfg},
        {abi::HWRM_RING_ALLOC, abi::hwrm_ring_alloc_input::layout_size, &firmware::ring_alloc},
        {abi::HWRM_RING_FREE, abi::hwrm_ring_free_input::layout_size, &firmware::ring_free},
        {abi::HWRM_STAT_CTX_ALLOC, abi::hwrm_stat_ctx_alloc_input::layout_size,
         &firmware::stat_ctx_alloc},
        {abi::HWRM_STAT_CTX_FREE, abi::hwrm_stat_ctx_free_input::layout_size,
         &firmware::stat_ctx_free},
        {abi::HWRM_VNIC_ALLOC, abi::hwrm_vnic_alloc_input::layout_size, &firmware::vnic_alloc},
        {abi::HWRM_VNIC_FREE, abi::hwrm_vnic_free_input::layout_size, &firmware::vnic_free},
        {abi::HWRM_VNIC_CFG, abi::hwrm_vnic_cfg_input::layout_size, &firmware::vnic_cfg},
        {abi::HWRM_CFA_L2_FILTER_ALLOC, abi::hwrm_cfa_l2_filter_alloc_input::layout_size,
         &firmware::cfa_l2_filter_alloc},
        {abi::HWRM_CFA_L2_FILTER_FREE, abi::hwrm_cfa_l2_filter_free_input::layout_size,
         &firmware::cfa_l2_filter_free},
        {abi::HWRM_PORT_PHY_QCFG, abi::hwrm_port_phy_qcfg_input::layout_size,
         &firmware::port_phy_qcfg},
        {abi::HWRM_PORT_PHY_QCAPS, abi::hwrm_port_phy_qcaps_input::layout_size,
         &firmware::port_phy_qcaps},
        {abi::HWRM_QUEUE_QPORTCFG, abi::hwrm_queue_qportcfg_input::layout_size,
         &firmware::queue_qportcfg},
        {abi::HWRM_FW_SET_TIME, abi::hwrm_fw_set_time_input::layout_size, &firmware::fw_set_time},
    };
    // the names in the log and the refusals are abi/bnxt's (hwrm_req_type_name), one list
    static_assert(std::ranges::all_of(table, [](const command& k) { return !abi::hwrm_req_type_name(k.req_type).empty(); }),
                  "every request the model runs has its name in abi/bnxt/hwrm.hpp");
    const command* cmd = nullptr;
    for (const command& k : table) {
        if (k.req_type == c.req_type) {
            cmd = &k;
        }
    }
    if (cmd == nullptr) {
        c.fail(abi::HWRM_ERR_CODE_CMD_NOT_SUPPORTED, cmd_err::none, "not implemented");
        log().debug("bnxt hwrm: {} ({:#x}) seq {:#x}: CMD_NOT_SUPPORTED", abi::hwrm_req_type_name(c.req_type),
                    c.req_type, c.seq_id);
        return;
    }
    if (!ready() && c.req_type != abi::HWRM_VER_GET) {
        c.fail(abi::HWRM_ERR_CODE_BUSY, cmd_err::not_ready, "device not ready (DEV_NOT_RDY)");
        return;
    }
    // A window holds max_req_win_len bytes: a longer command must come as a short command.
    if (!c.via_short && cmd->in_size > _o.max_req_win_len) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::longer_than_window,
               std::string(abi::hwrm_req_type_name(cmd->req_type)) + " is " + std::to_string(cmd->in_size) +
                   " bytes, the window " + std::to_string(_o.max_req_win_len));
        return;
    }
    (this->*(cmd->run))(c);
    if (c.failed()) {
        log().info("bnxt hwrm: {} ({:#x}) seq {:#x}: {} ({:#x}), cmd_err {:#x}: {}", abi::hwrm_req_type_name(cmd->req_type),
                   c.req_type, c.seq_id, abi::hwrm_err_code_name(c.error), c.error,
                   static_cast<unsigned>(c.err), c.why);
    } else {
        log().debug("bnxt hwrm: {} ({:#x}) seq {:#x}: ok", abi::hwrm_req_type_name(cmd->req_type), c.req_type, c.seq_id);   // the trace
    }
}

// The response (or hwrm_err_output) DMA-written to resp_addr: header, then the valid byte last.
void firmware::respond(call& c, outcome& o) {
    o.req_type = c.req_type;
    o.seq_id = c.seq_id;
    o.resp_addr = c.resp_addr;
    if (c.failed() || c.resp.empty()) {
        if (!c.failed()) {
            c.fail(abi::HWRM_ERR_CODE_UNKNOWN_ERR, cmd_err::none, "no response made");
        }
        abi::hwrm_err_output e;
        e.cmd_err = static_cast<std::uint8_t>(c.err);
        c.reply(e);
    }
    std::byte* p = c.resp.data();
    rig::abi::store_le<std::uint16_t>(p + 0, c.error);
    rig::abi::store_le<std::uint16_t>(p + 2, c.req_type);
    rig::abi::store_le<std::uint16_t>(p + 4, c.seq_id);
    rig::abi::store_le<std::uint16_t>(p + 6, static_cast<std::uint16_t>(c.resp.size()));
    c.resp.back() = std::byte{abi::HWRM_RESP_VALID_KEY};
    o.error_code = c.error;
    o.cmd_err = static_cast<std::uint8_t>(c.err);
    if (c.dma == nullptr || !c.dma->write_last_byte_last(c.resp_addr, c.resp)) {
        o.fault = "response of " + std::to_string(c.resp.size()) + " bytes to resp_addr " +
                  hex(c.resp_addr) + " refused by the IOMMU (not mapped for device writes)";
        log().warn("bnxt hwrm: req_type {:#x} seq {:#x}: {}", c.req_type, c.seq_id, o.fault);
        return;
    }
    o.responded = true;
}

// ---- function-level commands -------------------------------------------------------------------

void firmware::ver_get(call& c) {
    abi::hwrm_ver_get_output r;
    r.hwrm_intf_maj_8b = _o.hwrm_intf_maj;
    r.hwrm_intf_min_8b = _o.hwrm_intf_min;
    r.hwrm_intf_upd_8b = _o.hwrm_intf_upd;
    r.hwrm_fw_maj_8b = _o.hwrm_fw_maj;
    r.hwrm_fw_min_8b = _o.hwrm_fw_min;
    r.hwrm_fw_bld_8b = _o.hwrm_fw_bld;
    r.roce_fw_maj_8b = _o.roce_fw_maj;
    r.roce_fw_min_8b = _o.roce_fw_min;
    r.roce_fw_bld_8b = _o.roce_fw_bld;
    r.dev_caps_cfg = (_o.short_cmd_supported ? abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_SUPPORTED : 0) |
                     (_o.short_cmd_required ? abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_REQUIRED : 0);
    constexpr char name[] = "rig-model";
    std::copy(name, name + sizeof name - 1, r.hwrm_fw_name.begin());
    std::copy(name, name + sizeof name - 1, r.roce_fw_name.begin());
    r.chip_num = _o.chip_num;
    r.chip_rev = _o.chip_rev;
    r.chip_metal = _o.chip_metal;
    r.max_req_win_len = _o.max_req_win_len;
    r.max_resp_len = _o.max_resp_len;
    r.def_req_timeout = _o.def_req_timeout_ms;
    r.flags = abi::VER_GET_RESP_FLAGS_EXT_VER_AVAIL |
              (ready() ? 0 : abi::VER_GET_RESP_FLAGS_DEV_NOT_RDY);
    r.always_1 = 1;
    r.hwrm_intf_major = _o.hwrm_intf_maj;
    r.hwrm_intf_minor = _o.hwrm_intf_min;
    r.hwrm_intf_build = _o.hwrm_intf_upd;
    r.roce_fw_major = _o.roce_fw_maj;
    r.roce_fw_minor = _o.roce_fw_min;
    r.roce_fw_build = _o.roce_fw_bld;
    r.max_ext_req_len = _o.max_ext_req_len;
    r.max_req_timeout = _o.max_req_timeout_s;
    c.reply(r);
}

// FUNC_RESET of this function (RESETALL or RESETME, no VF): every ring, context, VNIC and filter
// goes, the registration and reservations too, and the context memory is given back
// (judgement, docs/hardware.md: bnxt_en sends it before configuring anything, bnxt.c
// bnxt_fw_init_one_p1/p2).
void firmware::func_reset(call& c) {
    const auto in = c.input<abi::hwrm_func_reset_input>();
    if (in.enables != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "enables " + hex(in.enables) + ": the function has no VFs");
        return;
    }
    if (in.func_reset_level > abi::FUNC_RESET_REQ_FUNC_RESET_LEVEL_RESETME) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "func_reset_level " + std::to_string(in.func_reset_level) +
                   " names VFs; the function has none");
        return;
    }
    drop_objects();
    drop_context();
    _registered = false;
    _async_fwd = {};
    _async_cr.reset();
    _reserved = {};
    _rcfw = {};
    _changes.note_all();   // the RoCE objects went: the data path follows every table
    c.reply(abi::hwrm_func_reset_output{});
}

void firmware::func_qcaps(call& c) {
    const auto in = c.input<abi::hwrm_func_qcaps_input>();
    if (c.refuse_other_fid(in.fid, _o.fid)) {
        return;
    }
    abi::hwrm_func_qcaps_output r;
    r.fid = _o.fid;
    r.port_id = 0;
    r.flags = _o.roce ? (abi::FUNC_QCAPS_RESP_FLAGS_ROCE_V1_SUPPORTED |
                         abi::FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED)
                      : 0;
    r.mac_address = _o.mac;
    put_function_maxima(r, _o);
    c.reply(r);
}

void firmware::func_qcfg(call& c) {
    const auto in = c.input<abi::hwrm_func_qcfg_input>();
    if (c.refuse_other_fid(in.fid, _o.fid)) {
        return;
    }
    abi::hwrm_func_qcfg_output r;
    r.fid = _o.fid;
    r.mac_address = _o.mac;
    r.alloc_rsscos_ctx = static_cast<std::uint16_t>(_reserved.rsscos_ctxs.value_or(0));
    r.alloc_cmpl_rings = static_cast<std::uint16_t>(_reserved.cmpl_rings.value_or(0));
    r.alloc_tx_rings = static_cast<std::uint16_t>(_reserved.tx_rings.value_or(0));
    r.alloc_rx_rings = static_cast<std::uint16_t>(_reserved.rx_rings.value_or(0));
    r.alloc_l2_ctx = static_cast<std::uint16_t>(_reserved.l2_ctxs.value_or(0));
    r.alloc_vnics = static_cast<std::uint16_t>(_reserved.vnics.value_or(0));
    r.alloc_stat_ctx = static_cast<std::uint16_t>(_reserved.stat_ctxs.value_or(0));
    r.alloc_msix = static_cast<std::uint16_t>(_reserved.msix.value_or(0));
    r.admin_mtu = _mtu;
    r.mru = _mru;
    r.max_mtu_configured = _o.mtu;
    r.dflt_vnic_id = 0xffff;
    r.l2_doorbell_bar_size_kb = _o.l2_doorbell_bar_size_kb;
    r.legacy_l2_db_size_kb = _o.legacy_l2_db_size_kb;
    r.db_page_size = 0;   // 4 KiB doorbell pages
    c.reply(r);
}

// Registration: the async event bitmap (ids 0..255) the driver wants forwarded.
void firmware::func_drv_rgtr(call& c) {
    const auto in = c.input<abi::hwrm_func_drv_rgtr_input>();
    constexpr std::uint32_t known = abi::FUNC_DRV_RGTR_REQ_ENABLES_OS_TYPE |
                                    abi::FUNC_DRV_RGTR_REQ_ENABLES_VER |
                                    abi::FUNC_DRV_RGTR_REQ_ENABLES_TIMESTAMP |
                                    abi::FUNC_DRV_RGTR_REQ_ENABLES_VF_REQ_FWD |
                                    abi::FUNC_DRV_RGTR_REQ_ENABLES_ASYNC_EVENT_FWD;
    if ((in.enables & ~known) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_ENABLES, cmd_err::unknown_enables,
               "enables " + hex(in.enables & ~known) + " not implemented");
        return;
    }
    if (in.enables & abi::FUNC_DRV_RGTR_REQ_ENABLES_ASYNC_EVENT_FWD) {
        for (std::size_t i = 0; i < _async_fwd.size(); ++i) {
            _async_fwd[i] = load_le<std::uint32_t>(
                reinterpret_cast<const std::byte*>(in.async_event_fwd.data()) + 4 * i);
        }
    }
    _registered = true;
    c.reply(abi::hwrm_func_drv_rgtr_output{});
}

void firmware::func_drv_unrgtr(call& c) {
    _registered = false;
    _async_fwd = {};
    c.reply(abi::hwrm_func_reset_output{});
}

}  // namespace rig::sim::bnxt
