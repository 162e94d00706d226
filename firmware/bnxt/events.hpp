#pragma once
// The RoCE events of a bnxt function (docs/bnxt-data-path.md "Completion events"; bnxt_re
// qplib_fp.c bnxt_qplib_service_nq, qplib_rcfw.c bnxt_qplib_service_creq): one thread that
// sleeps on the NQ's MSI-X eventfd, the CREQ's and its own stop eventfd, in slices of the health
// interval.
//
//   NQ     entries are new while their v bit equals the pass's phase (1 on the first pass, flipped
//          at each wrap: NQE_CMP_VALID); each CQ_NOTIFICATION (nq_cn type 0x30) gives its
//          cq_handle (low | high << 32) to handlers.completion; an HWRM async event (type 0x2e,
//          the NQ is the async event ring: device.hpp ASYNC_CR) is the firmware's
//          (async_events.cpp): LINK_STATUS_CHANGE gives the link to handlers.port_change,
//          RESET_NOTIFY is the NIC's failure (fatal, below, with the notice's words: the firmware
//          is resetting and will answer nothing it was asked before). Then the NQ is re-armed: one
//          64-bit NQ_ARM doorbell (xid the NQ's ring id, index = consumer mod entries, epoch =
//          pass parity; bnxt_qplib_ring_nq_db) at word 1 (+8) of the privileged doorbell page
//          (word 0 is the CREQ's), a store into mapped BAR2, else a region write.
//   CREQ   its interrupt makes the thread poll the RCFW channel (rcfw_channel::service): command
//          completions to their waiters, QP_ERROR_NOTIFICATION to handlers.qp_error (the device
//          installs that handler on the channel, device.cpp).
//   health each interval, and at every wake: a channel that failed (HWRM or RCFW stopped
//          answering) or a function that reads all ones (vendor ID 0xffff: the card is gone)
//          is fatal: both channels are failed (nothing more is sent), handlers.fatal is called
//          once, and the thread takes no more events.
//
// Threads: start and stop from the device's thread; handlers run on the event thread and must
// not send commands (they may call into the NIC's own structures).
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>

#include "driver/function.hpp"
#include "firmware/bnxt/error.hpp"
#include "firmware/bnxt/hwrm.hpp"
#include "firmware/bnxt/rcfw.hpp"

namespace rig::firmware::bnxt {

struct event_handlers {
    // CQ_NOTIFICATION: the cq_handle CREATE_CQ gave the CQ.
    std::function<void(std::uint64_t cq_handle)> completion;
    // CREQ QP_ERROR_NOTIFICATION: the QP (xid) and the requester's and responder's error
    // reasons (CREQ_QP_ERROR_NOTIFICATION_{REQ,RES}_ERR_STATE_REASON_*). Called with the RCFW
    // channel locked, from whichever thread polled the CREQ (the event thread, or a command's
    // waiter in polling mode).
    std::function<void(std::uint32_t qpn, std::uint8_t req_reason, std::uint8_t res_reason)> qp_error;
    // The firmware stopped answering, the function is gone, or the firmware announced its reset
    // (RESET_NOTIFY). Called once.
    std::function<void(const error&)> fatal;
    // LINK_STATUS_CHANGE: the port's link went up or down (event_data1 bit 0).
    std::function<void(bool up)> port_change;
};

// The NQ the device allocated (device.hpp, step NQ).
struct nq_ring {
    std::uint16_t ring_id = 0;
    std::byte* memory = nullptr;   // entries x 16 bytes
    std::uint32_t entries = 0;     // a power of two
    std::uint64_t doorbell_offset = 0x10000;   // the privileged page in BAR2 (the arm goes to +8)
    int eventfd = -1;              // the NQ's MSI-X vector
};

struct event_counts {
    std::uint64_t interrupts = 0;      // NQ eventfd wake-ups with a count
    std::uint64_t notifications = 0;   // CQ_NOTIFICATION entries
    std::uint64_t other_entries = 0;   // NQ entries of another type (SRQ events...), skipped
    std::uint64_t arms = 0;            // NQ_ARM doorbells
    std::uint64_t health_checks = 0;
    std::uint64_t async_events = 0;    // HWRM async events on the NQ (any id)
};

class events {
public:
    using clock = std::chrono::steady_clock;

    // Arms the NQ and starts the thread. `creq_eventfd` -1: no CREQ interrupt to take.
    static result<std::unique_ptr<events>> start(driver::function& fn, hwrm_channel& hwrm, rcfw_channel& rcfw,
                                                 const nq_ring& nq, int creq_eventfd, event_handlers handlers,
                                                 std::chrono::milliseconds health_interval);
    ~events();  // stop()
    events(const events&) = delete;
    events& operator=(const events&) = delete;

    // Ends the thread (idempotent). Handlers are not called after it returns.
    void stop();
    bool failed() const noexcept { return _fatal.load(std::memory_order_acquire); }
    event_counts counts() const;
    // The link as the last LINK_STATUS_CHANGE said it; none before the first.
    std::optional<bool> link_up() const noexcept;

private:
    events(driver::function& fn, hwrm_channel& hwrm, rcfw_channel& rcfw, const nq_ring& nq, int creq_eventfd,
           event_handlers handlers, std::chrono::milliseconds health_interval);
    void run();
    static bool take(int fd);            // reads the eventfd's count: true when it fired
    void service_nq();
    void arm_nq();
    void on_async_event(std::span<const std::byte, 16> entry);   // async_events.cpp
    bool healthy();                      // false: fatal was declared
    void declare_fatal(error e);

    driver::function& _fn;
    hwrm_channel& _hwrm;
    rcfw_channel& _rcfw;
    nq_ring _nq;
    int _creq_fd;
    event_handlers _handlers;
    std::chrono::milliseconds _health_interval;
    std::byte* _doorbell = nullptr;      // the NQ's word in mapped BAR2; null: region writes
    bool _doorbell_warned = false;
    std::uint64_t _cons = 0;             // NQ entries consumed (free-running)
    int _wake_fd = -1;
    std::atomic<bool> _stopping{false};
    std::atomic<bool> _fatal{false};
    std::array<std::atomic<std::uint64_t>, 6> _counts{};
    std::atomic<int> _link{-1};          // -1 unknown, 0 down, 1 up
    std::thread _thread;                 // last: started once everything above exists
};

}  // namespace rig::firmware::bnxt
