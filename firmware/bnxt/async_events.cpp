// Bring-up step ASYNC_CR (device.hpp): the firmware's async events to the NQ. Linux 6.12 bnxt.c:
// on P5 bnxt_hwrm_ring_alloc allocates the NQs (HWRM_RING_ALLOC_NQ) and names the first one
// async_event_cr (bnxt_hwrm_set_async_event_cr: FUNC_CFG, fid 0xffff, enables ASYNC_EVENT_CR);
// bnxt_poll_p5 then takes the NQ entries that are no CQ notification as HWRM completions
// (bnxt_hwrm_handler -> bnxt_async_event_process). Rig's one NQ is both bnxt_en's first NQ and
// bnxt_re's RoCE NQ; the event thread tells the entries apart by type (events.cpp).
#include "firmware/bnxt/device.hpp"

#include <string>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm_cmds.hpp"
#include "firmware/bnxt/events.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::bnxt {

result<void> device::async_cr(clock::time_point by) {
    abi::hwrm_func_cfg_input in;
    in.fid = 0xffff;
    in.enables = abi::FUNC_CFG_REQ_ENABLES_ASYNC_EVENT_CR;
    in.async_event_cr = *_nq_id;
    auto r = _hwrm->send<abi::hwrm_func_reset_output>(in, by);
    if (!r) {
        return std::unexpected(std::move(r.error()));
    }
    _async_cr = *_nq_id;
    return {};
}

}  // namespace rig::firmware::bnxt

namespace rig::firmware::bnxt {

namespace {

// The NIC's failure in the reset notice's own words (bnxt.c bnxt_async_event_process: "Fatal
// firmware reset event, data1: ..., min wait ... ms"): the reason by its bnxt_hsi.h name, the
// driver's action, the firmware's status code and the waits.
error reset_notice_error(const abi::hwrm_async_event_cmpl& e) {
    const std::uint32_t action = e.event_data1 & abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_MASK;
    const std::uint32_t reason = (e.event_data1 & abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_MASK) >>
                                 abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_SFT;
    error err = plain_error(
        error_kind::fatal,
        std::string("firmware reset notice (RESET_NOTIFY): reason ") + abi::reset_notify_reason_name(e.event_data1) +
            " (" + ::rig::abi::hex(reason) + "), driver action " +
            (action == abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_DRIVER_IFDOWN       ? "IFDOWN"
             : action == abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_DRIVER_ACTION_DRIVER_STOP_TX_QUEUE ? "STOP_TX_QUEUE"
                                                                                                           : ::rig::abi::hex(action)) +
            ", firmware status " +
            ::rig::abi::hex(e.event_data2 & abi::ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA2_FW_STATUS_CODE_MASK) +
            ", min wait " + std::to_string(100u * e.timestamp_lo) + " ms, max wait " +
            std::to_string(100u * e.timestamp_hi) + " ms");
    err.req_type = abi::ASYNC_EVENT_CMPL_EVENT_ID_RESET_NOTIFY;   // the event, where a request would be
    err.error_code = static_cast<std::uint16_t>(reason);
    return err;
}

}  // namespace

// An HWRM async event on the NQ (the event thread): the link to the port's state, a reset notice
// as the NIC's failure (both channels failed: nothing more is sent; what the firmware was given
// stays its own until teardown strands it). Other ids (not asked for) are logged.
void events::on_async_event(std::span<const std::byte, 16> entry) {
    const auto e = abi::decode<abi::hwrm_async_event_cmpl>(std::span<const std::byte>(entry));
    if (!e) {
        return;
    }
    switch (e->event_id) {
    case abi::ASYNC_EVENT_CMPL_EVENT_ID_LINK_STATUS_CHANGE: {
        const bool up = (e->event_data1 & abi::ASYNC_EVENT_CMPL_LINK_STATUS_CHANGE_EVENT_DATA1_LINK_CHANGE_UP) != 0;
        _link.store(up ? 1 : 0, std::memory_order_release);
        log().info("bnxt events on {}: link {}", _fn.name(), up ? "up" : "down");
        if (_handlers.port_change) {
            _handlers.port_change(up);
        }
        return;
    }
    case abi::ASYNC_EVENT_CMPL_EVENT_ID_RESET_NOTIFY: declare_fatal(reset_notice_error(*e)); return;
    default:
        log().info("bnxt events on {}: async event {:#x} (data1 {:#x}) not handled", _fn.name(), e->event_id,
                   e->event_data1);
        return;
    }
}

}  // namespace rig::firmware::bnxt
