#pragma once
// The RoCE firmware channel (RCFW: the CMDQ the driver fills, the CREQ the firmware answers
// on; roce_hsi.h; Linux bnxt_re qplib_rcfw.c bnxt_qplib_enable_rcfw_channel,
// __send_message, bnxt_qplib_service_creq), in polling mode.
//
//   auto ch = rcfw_channel::create(fn, stranded, {dev->creq_ring_id(), dev->creq_memory(),
//                                  dev->creq_entries(), dev->doorbell_offset()}).value();
//   auto v = ch->send<abi::creq_query_version_resp>(abi::cmdq_query_version{}, 0, deadline);
//
// create() maps the CMDQ (cmdq_slots 16-byte slots, behind a one-level PBL of PTU_PTE_VALID
// entries) and writes cmdq_init (PBL, level, size, the CREQ's ring id, producer 0) to the
// mailbox at BAR0 0x600. A command occupies ceil(bytes / 16) consecutive slots (wrapping); its
// cookie is the channel's sequence number & 0x7fff (qplib's RCFW_MAX_COOKIE_VALUE); the new
// producer (slots written so far, bit 31 on the first write after init: FIRMWARE_FIRST_FLAG) goes
// to 0x60C, then 1 to the trigger 0x700. Commands needing more than the free slots (one always
// kept free) wait for room. The CREQ is polled by whichever caller waits: QP_EVENT entries are
// new while their v bit equals the pass's phase (1 on the first pass), read behind a read
// barrier, and matched to their command by cookie, so several commands may be outstanding and
// complete in any order; the consumer index is acknowledged with an NQ doorbell (path RoCE,
// the CREQ's ring id, epoch = pass parity) in BAR2 at the function's doorbell offset: a 64-bit
// store into BAR2 mapped where the back end maps it, else a region write.
//
// In event mode (rcfw_creq::eventfd) the CREQ is armed at setup and after each poll that consumed
// entries; a waiter sleeps on the vector's eventfd (in slices of 1 ms, so that several waiters
// share one interrupt) and polls the CREQ when it fires.
//
// Asynchronous CREQ entries (QP_ERROR_NOTIFICATION, CQ_ERROR_NOTIFICATION, FUNC_EVENT: not
// completions) go to the async handler (on_async) in CREQ order (bnxt_qplib_service_creq ->
// bnxt_qplib_process_qp_event / func_event), but never with the channel locked: the handler
// reaches the user's callbacks, which may call back into the NIC and so into exec(), whose caller
// may hold the NIC's lock (ThreadSanitizer found that cycle). The thread that polled an entry sets
// it aside; the serving thread, or with none the command's own thread once its command is done,
// hands it over unlocked. With a service thread (serve(): the device's event thread takes the
// CREQ's interrupts and calls service()), waiters sleep on the channel's condition variable
// instead of the eventfd.
//
// A command that misses its deadline (20 s by default: RCFW_CMD_WAIT_TIME_MS) stops the
// channel (upstream's FIRMWARE_TIMED_OUT): the CMDQ and the side buffers are stranded, every
// later command is refused without touching the device.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "abi/bnxt/rcfw.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/bnxt/command_trace.hpp"
#include "firmware/bnxt/error.hpp"
#include "firmware/bnxt/hwrm.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::bnxt {

struct rcfw_options {
    std::uint32_t cmdq_slots = 8192;  // BNXT_QPLIB_CMDQE_MAX_CNT; a power of two, at most 8192
    ms timeout{20000};                // RCFW_CMD_WAIT_TIME_MS, per command
};

// The CREQ the device allocated by HWRM RING_ALLOC (device.hpp, step CREQ).
struct rcfw_creq {
    std::uint16_t ring_id = 0;
    std::byte* memory = nullptr;  // entries * 16 bytes, host view of the ring's pages
    std::uint32_t entries = 0;    // a power of two
    std::uint64_t doorbell_offset = 0x10000;  // the privileged doorbell page in BAR2
    // Event mode: the eventfd of the CREQ's MSI-X vector (RING_ALLOC logical_id), which the
    // device enabled. The channel arms the CREQ (NQ_ARM doorbells: bnxt_qplib_rcfw_start_irq,
    // bnxt_qplib_service_creq) and a waiter sleeps on the eventfd between polls of the CREQ.
    // -1: polling mode, the CREQ acknowledged without arming.
    int eventfd = -1;
};

// An asynchronous CREQ entry (16 bytes: abi::decode_creq), called with the channel locked: it
// must not send commands.
using creq_async_handler = std::function<void(std::span<const std::byte, 16> entry)>;

struct rcfw_reply {
    std::array<std::byte, 16> entry{};  // the CREQ QP_EVENT (decode the command's creq_*_resp)
    std::vector<std::byte> side;        // the side buffer, side_bytes long
};

class rcfw_channel {
public:
    using clock = std::chrono::steady_clock;

    static result<std::unique_ptr<rcfw_channel>> create(driver::function& fn, stranded_memory& stranded,
                                                        const rcfw_creq& creq, const rcfw_options& options = {});
    ~rcfw_channel();
    rcfw_channel(const rcfw_channel&) = delete;
    rcfw_channel& operator=(const rcfw_channel&) = delete;

    // Sends one command (`cmd`: the whole command, its opcode set; cmd_size, cookie, resp_size
    // and resp_addr are the channel's) with a side buffer of `side_bytes` (a multiple of 16, 0
    // for none) and waits for its completion. The reply only when the CREQ status is SUCCESS.
    result<rcfw_reply> exec(std::span<const std::byte> cmd, std::size_t side_bytes, clock::time_point by);

    template <class Resp, class Cmd>
    result<Resp> send(const Cmd& cmd, std::size_t side_bytes, clock::time_point by, std::vector<std::byte>* side = nullptr) {
        auto r = exec(abi::to_bytes(cmd), side_bytes, by);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        if (side != nullptr) {
            *side = std::move(r->side);
        }
        auto d = abi::decode<Resp>(std::span<const std::byte>(r->entry));
        if (!d) {
            return std::unexpected(plain_error(error_kind::bad_output, d.error().message()));
        }
        return *d;
    }

    std::optional<error> failure() const;
    // The owner declared the firmware gone (the function died): waiting commands return `why`
    // (kind fatal), nothing more is sent; the CMDQ is stranded.
    void fail(error why);
    void trace(command_sink sink);
    // The handler of asynchronous CREQ entries (empty: logged and dropped).
    void on_async(creq_async_handler handler);
    // Event mode: from now on another thread takes the CREQ's interrupts and calls service().
    void serve();
    // Polls the CREQ once (completions to their waiters, asynchronous entries to the handler);
    // `interrupt`: the serving thread took a firing of the CREQ's vector (counted in interrupts()).
    void service(bool interrupt);
    std::uint64_t cmdq_iova() const noexcept { return _cmdq_iova; }
    // The RoCE firmware may still read the CMDQ (it was never told to stop): hand it to the
    // stranded registry instead of unmapping it at destruction.
    void strand(const std::string& why);
    std::uint64_t cmdq_pbl_iova() const noexcept { return _pbl_iova; }
    bool event_mode() const noexcept { return _creq.eventfd >= 0; }
    std::uint64_t interrupts() const noexcept { return _interrupts; }  // eventfd wake-ups with a count

private:
    struct pending {
        bool done = false;
        std::array<std::byte, 16> entry{};
        std::uint32_t slots = 0;
        std::uint64_t async_before = 0;   // _async_set_aside when its completion was polled
    };
    rcfw_channel(driver::function& fn, stranded_memory& stranded, const rcfw_creq& creq, const rcfw_options& o);
    result<void> setup();
    result<void> write32(std::uint64_t offset, std::uint32_t v);
    void poll_creq();  // with _lock held
    // Without _lock: the asynchronous entries poll_creq set aside, to the handler in CREQ order.
    // One thread at a time; a thread finding another at it leaves its entries to that one.
    void deliver_async();
    // With _lock held (g): until every asynchronous entry polled before a completion has been
    // handed over (`before`: its pending::async_before), or `deadline`.
    void wait_handed_over(std::unique_lock<std::mutex>& g, std::uint64_t before, clock::time_point deadline);
    result<rcfw_reply> run(std::span<const std::byte> cmd, std::size_t side_bytes, clock::time_point by);
    void ring_creq_doorbell();  // with _lock held: NQ (polling) or NQ_ARM (event mode) at _cons
    void wait_for_interrupt(std::chrono::microseconds slice);  // without _lock

    driver::function& _fn;
    stranded_memory& _stranded;
    rcfw_creq _creq;
    rcfw_options _options;
    mutable std::mutex _lock;
    std::condition_variable _room;  // slots freed or a completion arrived
    driver::dma_memory _cmdq;       // slots, then the PBL page
    std::uint64_t _cmdq_iova = 0;
    std::uint64_t _pbl_iova = 0;
    bool _stranded_cmdq = false;
    std::uint32_t _prod = 0;        // slots written since init (free-running)
    std::uint32_t _in_flight = 0;   // slots of commands not completed
    bool _first = true;
    std::uint16_t _seq = 0;
    std::uint64_t _cons = 0;        // CREQ entries consumed (free-running)
    std::byte* _doorbell = nullptr; // the CREQ doorbell in mapped BAR2; null: by region_write
    bool _doorbell_warned = false;
    std::atomic<std::uint64_t> _interrupts{0};
    std::map<std::uint16_t, pending> _pending;
    std::optional<error> _failure;
    command_sink _trace;
    creq_async_handler _async;
    std::vector<std::array<std::byte, 16>> _async_due;  // polled, not yet handed over (under _lock)
    std::mutex _delivering;                             // held while handing over
    std::atomic<std::thread::id> _handing{};            // the thread that holds _delivering
    std::uint64_t _async_set_aside = 0;   // asynchronous entries polled (free-running, under _lock)
    std::uint64_t _async_handed = 0;      // of those, handed over (under _lock)
    std::condition_variable _handed;      // _async_handed moved
    bool _served = false;           // serve(): waiters sleep on _room, not on the eventfd
};

}  // namespace rig::firmware::bnxt
