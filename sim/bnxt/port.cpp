// The bnxt firmware model's port: the PHY (PORT_PHY_QCFG, PORT_PHY_QCAPS), the link-change async event, the CoS
// queues (QUEUE_QPORTCFG) and the firmware clock (FW_SET_TIME). bnxt_hsi.h; bnxt.c
// bnxt_update_link, bnxt_hwrm_phy_qcaps, bnxt_hwrm_queue_qportcfg, bnxt_hwrm_fw_set_time.
#include <algorithm>
#include <array>

#include "abi/bits.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;

void firmware::port_phy_qcfg(call& c) {
    const auto in = c.input<abi::hwrm_port_phy_qcfg_input>();
    if (in.port_id != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "port_id " + std::to_string(in.port_id) + ": the function has port 0");
        return;
    }
    abi::hwrm_port_phy_qcfg_output r;
    r.link = _o.link_up ? abi::PORT_PHY_QCFG_RESP_LINK_LINK : abi::PORT_PHY_QCFG_RESP_LINK_NO_LINK;
    r.link_speed = _o.link_up ? _o.link_speed : 0;
    r.duplex_cfg = 1;   // full
    r.duplex_state = abi::PORT_PHY_QCFG_RESP_DUPLEX_STATE_FULL;
    r.support_speeds = abi::PORT_PHY_QCFG_RESP_SUPPORT_SPEEDS_100GB;
    r.force_link_speed = _o.link_speed;
    r.phy_type = 0xf;     // 100G_BASECR4
    r.media_type = 2;     // DAC
    r.active_lanes = _o.link_up ? 4 : 0;
    c.reply(r);
}

firmware::event_delivery firmware::set_link(bool up, vfio_user::dma_space* dma) {
    _o.link_up = up;
    abi::hwrm_async_event_cmpl e;
    e.event_id = abi::ASYNC_EVENT_CMPL_EVENT_ID_LINK_STATUS_CHANGE;
    e.event_data1 = up ? abi::ASYNC_EVENT_CMPL_LINK_STATUS_CHANGE_EVENT_DATA1_LINK_CHANGE_UP : 0;
    return async_event(e, dma);
}

// The reset notice real Thor firmware sends before it resets (bnxt.c bnxt_async_event_process
// RESET_NOTIFY: reason in data1 bits 8-15, min/max wait in timestamp_lo/hi deciseconds).
firmware::event_delivery firmware::reset_notify(std::uint8_t reason, std::uint16_t min_wait_ds,
                                                std::uint16_t max_wait_ds, vfio_user::dma_space* dma) {
    const std::uint32_t fatal = abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_FW_EXCEPTION_FATAL >>
                                abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_SFT;
    abi::hwrm_async_event_cmpl e;
    e.event_id = abi::ASYNC_EVENT_CMPL_EVENT_ID_RESET_NOTIFY;
    e.event_data1 = (reason == fatal ? abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_DRIVER_IFDOWN
                                     : abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_DRIVER_STOP_TX_QUEUE) |
                    (std::uint32_t{reason} << abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_SFT) |
                    (std::uint32_t{min_wait_ds} << abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DELAY_IN_100MS_TICKS_SFT);
    e.timestamp_lo = static_cast<std::uint8_t>(std::min<std::uint16_t>(min_wait_ds, 0xff));
    e.timestamp_hi = max_wait_ds;
    return async_event(e, dma);
}

firmware::event_delivery firmware::async_event(abi::hwrm_async_event_cmpl e, vfio_user::dma_space* dma) {
    const std::uint16_t id = e.event_id;
    if (!_async_cr || !_registered || id >= 256 || (_async_fwd[id / 32] & (1u << (id % 32))) == 0 || dma == nullptr) {
        return {};
    }
    e.type = abi::ASYNC_EVENT_CMPL_TYPE_HWRM_ASYNC_EVENT;
    auto bytes = abi::to_bytes(e);
    ring& r = _rings.at(*_async_cr);
    if (r.type == abi::RING_ALLOC_REQ_RING_TYPE_NQ) {   // the NQ's next entry, its phase by pass
        if (!nq_post(*_async_cr, bytes, dma)) {
            return {};
        }
        return {true, announce(*_async_cr)};
    }
    const auto at = r.entry_address(r.producer & (r.length - 1));
    bytes[8] = std::byte{static_cast<std::uint8_t>(((r.producer / r.length) & 1) == 0 ? 1 : 0)};   // the phase
    // the phase bit (byte 8) after the rest: a driver polls it (bnxt.c bnxt_has_work / CMP_VALID)
    const std::span<const std::byte> b(bytes.data(), bytes.size());
    if (!at || !dma->write(*at, b.first(8)) || !dma->write(*at + 9, b.subspan(9)) ||
        !dma->write_last_byte_last(*at + 8, b.subspan(8, 1))) {
        log().warn("bnxt: async event {:#x} to ring {} refused by the IOMMU", id, *_async_cr);
        return {};
    }
    ++r.producer;
    return {true, std::nullopt};
}

// PORT_PHY_QCAPS: one port, 100G by autonegotiation or forced, no EEE, no PAM4 (a 100G DAC, as
// PORT_PHY_QCFG says).
void firmware::port_phy_qcaps(call& c) {
    const auto in = c.input<abi::hwrm_port_phy_qcaps_input>();
    if (in.port_id != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::unknown_object,
               "port_id " + std::to_string(in.port_id) + ": the function has port 0");
        return;
    }
    abi::hwrm_port_phy_qcaps_output r;
    r.port_cnt = abi::PORT_PHY_QCAPS_RESP_PORT_CNT_1;
    r.supported_speeds_force_mode = abi::PORT_PHY_QCAPS_RESP_SUPPORTED_SPEEDS_FORCE_MODE_100GB;
    r.supported_speeds_auto_mode = abi::PORT_PHY_QCAPS_RESP_SUPPORTED_SPEEDS_AUTO_MODE_100GB;
    c.reply(r);
}

// The port's CoS queues, the same on both paths (the model's judgement, docs/hardware.md): a
// Thor's usual RoCE layout, queue 0 lossy for L2 traffic, queue 1 lossless for RoCE, queue 2
// lossy for RoCE congestion notification packets (CNP); one lossless queue; nothing
// configurable (no QUEUE_CFG, PFCENABLE, PRI2COS or COS2BW: those commands are not offered).
void firmware::queue_qportcfg(call& c) {
    const auto in = c.input<abi::hwrm_queue_qportcfg_input>();
    if (in.port_id != 0 || (in.flags & ~abi::QUEUE_QPORTCFG_REQ_FLAGS_PATH_RX) != 0) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "port_id " + std::to_string(in.port_id) + ", flags " + rig::abi::hex(in.flags) +
                   ": the function has port 0, flags only PATH (bit 0)");
        return;
    }
    abi::hwrm_queue_qportcfg_output r;
    r.max_configurable_queues = 3;
    r.max_configurable_lossless_queues = 1;
    r.queue_id0 = 0;
    r.queue_id0_service_profile = abi::QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSY;
    r.queue_id1 = 1;
    r.queue_id1_service_profile = abi::QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSLESS_ROCE;
    r.queue_id2 = 2;
    r.queue_id2_service_profile = abi::QUEUE_QPORTCFG_RESP_QUEUE_ID0_SERVICE_PROFILE_LOSSY_ROCE_CNP;
    for (std::uint8_t* unused : {&r.queue_id3, &r.queue_id4, &r.queue_id5, &r.queue_id6, &r.queue_id7}) {
        *unused = 0xff;   // no queue
    }
    for (std::uint8_t* unused : {&r.queue_id3_service_profile, &r.queue_id4_service_profile,
                                 &r.queue_id5_service_profile, &r.queue_id6_service_profile,
                                 &r.queue_id7_service_profile}) {
        *unused = 0xff;   // SERVICE_PROFILE_UNKNOWN
    }
    c.reply(r);
}

// FW_SET_TIME: the firmware keeps the host's clock for its logs; the model checks the date is a
// date (month 1..12, day 1..31, hour < 24, minute and second < 60, millisecond < 1000, UTC) and
// keeps it.
void firmware::fw_set_time(call& c) {
    const auto in = c.input<abi::hwrm_fw_set_time_input>();
    if (in.month < 1 || in.month > 12 || in.day < 1 || in.day > 31 || in.hour > 23 || in.minute > 59 ||
        in.second > 59 || in.millisecond > 999 || in.zone != abi::FW_SET_TIME_REQ_ZONE_UTC) {
        c.fail(abi::HWRM_ERR_CODE_INVALID_PARAMS, cmd_err::bad_field,
               "FW_SET_TIME " + std::to_string(in.year) + "-" + std::to_string(in.month) + "-" +
                   std::to_string(in.day) + " " + std::to_string(in.hour) + ":" + std::to_string(in.minute) + ":" +
                   std::to_string(in.second) + " zone " + std::to_string(in.zone) + " is no UTC time");
        return;
    }
    _clock_set = in;
    c.reply(abi::hwrm_func_reset_output{});   // the plain success response
}

}  // namespace rig::sim::bnxt
