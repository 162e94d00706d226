#pragma once
// The driver's own mlx5 command channel, in polling mode (kernel mlx5/core/cmd.c;
// rdma-core providers/mlx5/mlx5_vfio.c).
//
//   auto q = command_queue::create(fn).value();      // cmdif_rev, queue address, initializing
//   auto out = q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(in, deadline);
//
// It owns the command queue page (4 KiB of DMA memory) and a pool of mailbox blocks (1 KiB
// apart, 576 bytes used), both mapped for the device through the function. A command is
// written into a free slot (inline bytes, input and output mailbox chains, token, signature,
// ownership last), the doorbell rung, and the entry's ownership polled until the device hands
// it back or the deadline passes. A command that misses its deadline leaves its slot and
// mailboxes with the device: they are never reused and stranded() lists them.
//
// Threads: exec may be called from any thread. In polling mode each caller polls its own slot;
// in event mode (use_events, driven by firmware/mlx5/events.hpp) each caller sleeps until the
// event thread reports its slot done in a CMD event (kernel cmd.c mlx5_cmd_comp_handler), and
// looks at its entry itself every millisecond meanwhile (an interrupt into a guest can come tens
// of ms late; a DESTROY found handed back still waits for its event, asking the event thread
// to look now). Either
// way several commands may be outstanding in different slots at once: the queue's lock is held
// while a slot is filled and while its result is read, never while the device runs it. The last
// slot is kept for page-request commands (exec_page_command; rdma-core's slot 31), so that a
// MANAGE_PAGES the firmware is waiting for never queues behind the command that made it ask.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "abi/mlx5/ifc/cmd.hpp"
#include "abi/mlx5/ifc/cmdq.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/command_trace.hpp"
#include "firmware/mlx5/error.hpp"

namespace rig::firmware::mlx5 {

struct command_queue_options {
    // How long setup waits for the firmware to clear `initializing` (kernel FW_INIT_TIMEOUT).
    std::chrono::milliseconds init_timeout{2000};
    // Mailbox blocks allocated (and mapped) at a time; the pool grows by this many.
    std::size_t blocks_per_chunk = 64;
};

// A command the device never handed back: what it still holds. The memory stays allocated and
// mapped for as long as the command_queue lives (and past it: see ~command_queue).
struct stranded_command {
    unsigned slot = 0;
    ifc::opcode opcode{};
    std::uint16_t op_mod = 0;
    std::uint8_t token = 0;
    std::uint64_t entry_iova = 0;                // the slot's 64 bytes
    std::vector<std::uint64_t> mailbox_iovas;    // input blocks, then output blocks
};

// A command's input, zeroed, `bytes` long (the layout's size, or more for a trailing array),
// with the mbox_in header every command starts with: opcode and op_mod.
template <class In>
std::vector<std::byte> command_input(ifc::opcode op, std::uint16_t op_mod = 0, std::size_t bytes = In::size_bytes) {
    std::vector<std::byte> in(bytes);
    ::rig::abi::set<ifc::mbox_in::opcode>(in, static_cast<std::uint16_t>(op));
    ::rig::abi::set<ifc::mbox_in::op_mod>(in, op_mod);
    return in;
}

class command_queue {
public:
    using clock = std::chrono::steady_clock;

    static result<std::unique_ptr<command_queue>> create(driver::function& fn,
                                                         const command_queue_options& options = {});
    ~command_queue();
    command_queue(const command_queue&) = delete;
    command_queue& operator=(const command_queue&) = delete;

    // Runs one command: `in` is the whole command input (at least the 16-byte mbox_in header
    // that every command starts with), `out_bytes` the output length it expects (at least 8).
    // Returns the output, out_bytes long, only when the firmware's status is OK.
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, std::size_t out_bytes,
                                        clock::time_point deadline);

    // Sized from the layouts, like the kernel's mlx5_cmd_exec_inout: `in` is In::size_bytes
    // or longer (trailing arrays), the output Out::size_bytes.
    template <class In, class Out>
    result<std::vector<std::byte>> exec(std::span<const std::byte> in, clock::time_point deadline) {
        if (in.size() < In::size_bytes) {
            error e;
            e.kind = error_kind::bad_input;
            e.message = std::string(In::name) + " of " + std::to_string(in.size()) +
                        " bytes is shorter than its " + std::to_string(In::size_bytes) + "-byte layout";
            return std::unexpected(std::move(e));
        }
        return exec(in, Out::size_bytes, deadline);
    }

    // The same on the slot kept for page-request commands (MANAGE_PAGES answering a
    // PAGE_REQUEST event). One at a time: a caller finding the slot busy gets a transport error.
    result<std::vector<std::byte>> exec_page_command(std::span<const std::byte> in, std::size_t out_bytes,
                                                     clock::time_point deadline);

    std::vector<stranded_command> stranded() const;

    // The command trace (command_trace.hpp): every command executed from now on is handed to
    // `sink`; an empty sink turns the trace off (the default).
    void trace(command_sink sink);

    // ---- event mode and failure (firmware/mlx5/events.hpp drives these) ----
    // Commands submitted after use_events(true) wait for complete() instead of polling; a
    // command waiting on events when use_events(false) is called goes back to polling its slot.
    // A command issued on `event_thread` itself (from an event handler) polls: the thread that
    // would report its completion is the one waiting. `look_now` has the event thread take the
    // EQEs already written without waiting for their interrupt (a DESTROY handed back before
    // its waiter looked calls it before it waits for its CMD event).
    void use_events(bool on, std::thread::id event_thread = {}, std::function<void()> look_now = {});
    bool uses_events() const noexcept { return _events.load(std::memory_order_acquire); }
    // A CMD EQE's command_completion_vector: bit i set = slot i was handed back.
    void complete(std::uint32_t vector);
    // The NIC failed (health, EQ error, function gone): every waiting command returns `why`
    // (kind forced to fatal) at once, leaving its slot stranded (the device may still write it);
    // every later exec is refused with it and sends nothing. The first failure is kept.
    void fail(error why);
    std::optional<error> failure() const;
    unsigned page_slot() const noexcept { return entries() - 1; }

    unsigned entries() const noexcept { return 1u << _log_size; }
    unsigned log_stride() const noexcept { return _log_stride; }
    std::uint64_t queue_iova() const noexcept { return _queue_iova; }
    std::uint16_t cmd_interface_rev() const noexcept { return _cmdif_rev; }

    // ---- signatures (kernel cmd.c set_signature, verify_signature) ----
    // Every command is submitted signed (entry, input and output blocks). With verification on,
    // a completion is accepted only when its entry and each of its output blocks carry good
    // signatures (XOR of the entry = 0xff; of block bytes 0x200..0x23e and of all 576 = 0xff);
    // else bad_output naming the block. Off by default, as the kernel and rdma-core leave
    // cmd_hca_cap.cmdif_checksum; hca's bring-up turns it on when CUR says ENABLED.
    void verify_signatures(bool on) noexcept { _verify_signatures.store(on, std::memory_order_release); }
    bool verifies_signatures() const noexcept { return _verify_signatures.load(std::memory_order_acquire); }

private:
    struct block {
        std::byte* data;
        std::uint64_t iova;
    };
    struct chunk {
        driver::dma_memory memory;
        std::uint64_t iova = 0;
    };

    explicit command_queue(driver::function& fn, const command_queue_options& options);
    result<void> setup();
    result<std::uint32_t> read_dword(std::uint64_t offset);
    result<void> write_dword(std::uint64_t offset, std::uint32_t host_value);
    result<void> grow_pool();
    result<std::vector<block>> take_blocks(std::size_t n);
    std::uint8_t next_token() noexcept;
    result<std::vector<std::byte>> run(std::span<const std::byte> in, std::size_t out_bytes,
                                       clock::time_point deadline, bool page_command);

    driver::function& _fn;
    command_queue_options _options;
    mutable std::mutex _lock;
    std::condition_variable _done;   // a slot completed, the mode changed, or the queue failed
    std::atomic<bool> _events{false};
    std::thread::id _event_thread;   // its commands poll (use_events)
    std::function<void()> _look_now; // use_events'
    std::atomic<bool> _failed{false};
    std::atomic<bool> _verify_signatures{false};
    std::optional<error> _failure;
    std::vector<bool> _slot_busy;
    std::vector<bool> _slot_done;    // event mode: the CMD event named the slot
    // Event mode: the slot was handed back before its CMD event came, and that event is still
    // to come. The slot is not rung again until it has: so at most one CMD EQE per slot waits in
    // the EQ, as in the kernel, whose command waits for its event (cmd.c wait_func) and whose
    // EQ holds one per slot (eq.c MLX5_NUM_CMD_EQE). Without it a starved event thread let the
    // EQEs of reused slots overrun a small EQ.
    std::vector<bool> _slot_event_owed;
    driver::dma_memory _queue;
    std::uint64_t _queue_iova = 0;
    bool _queue_mapped = false;
    std::uint16_t _cmdif_rev = 0;
    unsigned _log_size = 0;
    unsigned _log_stride = 0;
    std::vector<chunk> _chunks;
    std::vector<block> _free_blocks;
    std::vector<bool> _slot_stranded;
    std::vector<stranded_command> _stranded;
    std::uint8_t _token = 0;
    command_sink _trace;  // empty: off
};

}  // namespace rig::firmware::mlx5
