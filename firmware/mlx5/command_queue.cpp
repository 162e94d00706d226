#include "firmware/mlx5/command_queue.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <thread>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"
#include "firmware/log.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::mlx5 {

namespace {

namespace cmdq = ifc::cmdq;
using entry_layout = ifc::cmd_queue_entry;
using box_layout = ifc::cmd_if_box;
using iseg = ifc::initial_seg;

// How long a command waits, with every slot kept for a CMD event still owed, before it takes
// those slots back (command_queue.hpp _slot_event_owed). Events come within microseconds when
// the event thread runs; this bounds only a lost one.
constexpr std::chrono::milliseconds owed_event_grace{1000};
// How often a command waiting for its CMD event looks at its entry's ownership byte itself.
constexpr std::chrono::milliseconds event_slice{1};

// The byte offset of the big-endian dword that holds a field of the initialization segment.
constexpr std::uint64_t dword_of(abi::field f) noexcept { return f.off / 32 * 4; }

// "CREATE_QP (0x500)" or "MANAGE_PAGES (0x108) op_mod 0x1"
std::string command_name(ifc::opcode op, std::uint16_t op_mod) {
    std::string s(ifc::to_string(op));
    s += " (" + abi::hex(static_cast<std::uint16_t>(op)) + ")";
    if (op_mod != 0) {
        s += " op_mod " + abi::hex(op_mod);
    }
    return s;
}


}  // namespace

command_queue::command_queue(driver::function& fn, const command_queue_options& options)
    : _fn(fn), _options(options) {}

command_queue::~command_queue() {
    if (!_stranded.empty()) {
        // The device may still write the stranded slot and mailboxes: keep the memory and its
        // mappings alive for the life of the process rather than hand it back to the allocator.
        log().warn("mlx5 command queue on {}: {} command(s) stranded; keeping their memory mapped",
                   _fn.name(), _stranded.size());
        keep_for_process(std::make_shared<std::vector<chunk>>(std::move(_chunks)));
        keep_for_process(std::make_shared<driver::dma_memory>(std::move(_queue)));
        return;
    }
    for (const chunk& c : _chunks) {
        static_cast<void>(_fn.dma_unmap(c.iova, c.memory.size()));
    }
    if (_queue_mapped) {
        static_cast<void>(_fn.dma_unmap(_queue_iova, _queue.size()));
    }
}

result<std::unique_ptr<command_queue>> command_queue::create(driver::function& fn,
                                                             const command_queue_options& options) {
    std::unique_ptr<command_queue> q(new command_queue(fn, options));
    if (auto r = q->setup(); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return q;
}

result<std::uint32_t> command_queue::read_dword(std::uint64_t offset) {
    std::array<std::byte, 4> b{};
    if (auto r = _fn.region_read(driver::region::bar0, offset, b); !r) {
        return std::unexpected(transport_error("mlx5 init segment read at " + abi::hex(offset) + ": " +
                                               r.error().message));
    }
    return abi::load_be<std::uint32_t>(b.data());
}

result<void> command_queue::write_dword(std::uint64_t offset, std::uint32_t host_value) {
    std::array<std::byte, 4> b{};
    abi::store_be<std::uint32_t>(b.data(), host_value);
    if (auto r = _fn.region_write(driver::region::bar0, offset, b); !r) {
        return std::unexpected(transport_error("mlx5 init segment write at " + abi::hex(offset) + ": " +
                                               r.error().message));
    }
    return {};
}

result<void> command_queue::setup() {
    // A copy of the dwords read, decoded with the layout's own fields.
    std::vector<std::byte> image(iseg::size_bytes);
    const auto read_field = [&](abi::field f) -> result<std::uint64_t> {
        auto d = read_dword(dword_of(f));
        if (!d) {
            return std::unexpected(std::move(d.error()));
        }
        abi::store_be<std::uint32_t>(image.data() + dword_of(f), *d);
        return abi::get(image, f);
    };

    auto rev = read_field(iseg::cmd_interface_rev);
    if (!rev) {
        return std::unexpected(std::move(rev.error()));
    }
    _cmdif_rev = static_cast<std::uint16_t>(*rev);
    if (_cmdif_rev != ifc::init_seg::supported_cmd_interface_rev) {
        return std::unexpected(transport_error(
            "mlx5 command interface revision " + std::to_string(_cmdif_rev) + " on " + std::string(_fn.name()) +
            " is not supported (this driver speaks " +
            std::to_string(ifc::init_seg::supported_cmd_interface_rev) + ")"));
    }
    auto log_size = read_field(iseg::log_cmdq_size);
    if (!log_size) {
        return std::unexpected(std::move(log_size.error()));
    }
    auto log_stride = read_field(iseg::log_cmdq_stride);
    if (!log_stride) {
        return std::unexpected(std::move(log_stride.error()));
    }
    _log_size = static_cast<unsigned>(*log_size);
    _log_stride = static_cast<unsigned>(*log_stride);
    if ((1u << _log_size) > cmdq::max_commands || (1u << _log_stride) < cmdq::entry_bytes ||
        (std::size_t{1} << (_log_size + _log_stride)) > driver::dma_memory::small_page) {
        return std::unexpected(transport_error("mlx5 command queue geometry on " + std::string(_fn.name()) +
                                               " is unusable: log_cmdq_size " + std::to_string(_log_size) +
                                               ", log_cmdq_stride " + std::to_string(_log_stride)));
    }
    _slot_stranded.assign(entries(), false);
    _slot_busy.assign(entries(), false);
    _slot_done.assign(entries(), false);
    _slot_event_owed.assign(entries(), false);

    auto mem = driver::dma_memory::allocate(driver::dma_memory::small_page, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(transport_error("mlx5 command queue page: " + mem.error().message));
    }
    _queue = std::move(*mem);
    auto iova = _fn.dma_map(_queue, 0, _queue.size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(transport_error("mlx5 command queue page: " + iova.error().message));
    }
    _queue_iova = *iova;
    _queue_mapped = true;
    if ((_queue_iova & 0xfff) != 0) {
        return std::unexpected(transport_error("mlx5 command queue page mapped at " + abi::hex(_queue_iova) +
                                               ", not 4 KiB aligned"));
    }
    if (auto r = write_dword(dword_of(iseg::cmdq_phy_addr_63_32), ifc::init_seg::cmdq_addr_high(_queue_iova)); !r) {
        return r;
    }
    if (auto r = write_dword(dword_of(iseg::cmdq_phy_addr_31_12), ifc::init_seg::cmdq_addr_low(_queue_iova)); !r) {
        return r;
    }

    // Wait for the firmware to clear `initializing`, with a deadline.
    const auto start = clock::now();
    const auto deadline = start + _options.init_timeout;
    auto pause = std::chrono::microseconds(50);
    for (;;) {
        auto busy = read_field(iseg::initializing);
        if (!busy) {
            return std::unexpected(std::move(busy.error()));
        }
        if (*busy == 0) {
            break;
        }
        const auto now = clock::now();
        if (now >= deadline) {
            return std::unexpected(transport_error(
                "mlx5 firmware did not finish initializing within " +
                std::to_string(_options.init_timeout.count()) + " ms on " + std::string(_fn.name())));
        }
        std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
        pause = std::min(pause * 2, std::chrono::microseconds(10000));
    }
    log().debug("mlx5 command queue on {}: cmdif_rev {}, {} entries, stride {}, at {:#x}", _fn.name(), _cmdif_rev,
                entries(), 1u << _log_stride, _queue_iova);
    return grow_pool();
}

result<void> command_queue::grow_pool() {
    const std::size_t n = std::max<std::size_t>(_options.blocks_per_chunk, 1);
    auto mem = driver::dma_memory::allocate(n * cmdq::block_alignment, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(transport_error("mlx5 mailbox blocks: " + mem.error().message));
    }
    chunk c;
    c.memory = std::move(*mem);
    auto iova = _fn.dma_map(c.memory, 0, c.memory.size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(transport_error("mlx5 mailbox blocks: " + iova.error().message));
    }
    c.iova = *iova;
    if ((c.iova % cmdq::block_alignment) != 0) {
        static_cast<void>(_fn.dma_unmap(c.iova, c.memory.size()));
        return std::unexpected(transport_error("mlx5 mailbox blocks mapped at " + abi::hex(c.iova) +
                                               ", not 1 KiB aligned"));
    }
    const std::size_t count = c.memory.size() / cmdq::block_alignment;
    // Pushed in reverse so that blocks are taken in address order.
    for (std::size_t i = count; i-- > 0;) {
        _free_blocks.push_back(block{c.memory.data() + i * cmdq::block_alignment, c.iova + i * cmdq::block_alignment});
    }
    _chunks.push_back(std::move(c));
    return {};
}

result<std::vector<command_queue::block>> command_queue::take_blocks(std::size_t n) {
    while (_free_blocks.size() < n) {
        if (auto r = grow_pool(); !r) {
            return std::unexpected(std::move(r.error()));
        }
    }
    std::vector<block> out(_free_blocks.end() - static_cast<std::ptrdiff_t>(n), _free_blocks.end());
    std::reverse(out.begin(), out.end());
    _free_blocks.resize(_free_blocks.size() - n);
    return out;
}

std::uint8_t command_queue::next_token() noexcept {
    _token = static_cast<std::uint8_t>(_token + 1);
    if (_token == 0) {
        _token = 1;
    }
    return _token;
}

void command_queue::trace(command_sink sink) {
    std::lock_guard g(_lock);
    _trace = std::move(sink);
}

std::vector<stranded_command> command_queue::stranded() const {
    std::lock_guard g(_lock);
    return _stranded;
}

result<std::vector<std::byte>> command_queue::exec(std::span<const std::byte> in, std::size_t out_bytes,
                                                   clock::time_point deadline) {
    return run(in, out_bytes, deadline, false);
}

result<std::vector<std::byte>> command_queue::exec_page_command(std::span<const std::byte> in,
                                                                std::size_t out_bytes, clock::time_point deadline) {
    return run(in, out_bytes, deadline, true);
}

void command_queue::use_events(bool on, std::thread::id event_thread, std::function<void()> look_now) {
    {
        std::lock_guard g(_lock);
        _event_thread = on ? event_thread : std::thread::id{};
        _look_now = on ? std::move(look_now) : std::function<void()>{};
        _events.store(on, std::memory_order_release);
        if (!on) {
            _slot_event_owed.assign(entries(), false);  // no event is waited for any more
        }
    }
    _done.notify_all();
}

void command_queue::complete(std::uint32_t vector) {
    {
        std::lock_guard g(_lock);
        for (unsigned i = 0; i < _slot_done.size(); ++i) {
            if ((vector >> i) & 1u) {
                if (_slot_event_owed[i]) {
                    _slot_event_owed[i] = false;  // the late event of the slot's last command
                } else {
                    _slot_done[i] = true;
                }
            }
        }
    }
    _done.notify_all();
}

void command_queue::fail(error why) {
    {
        std::lock_guard g(_lock);
        if (_failure) {
            return;
        }
        why.kind = error_kind::fatal;
        log().error("mlx5 command queue on {} failed: {}", _fn.name(), why.message);
        _failure = std::move(why);
        _failed.store(true, std::memory_order_release);
    }
    _done.notify_all();
}

std::optional<error> command_queue::failure() const {
    std::lock_guard g(_lock);
    return _failure;
}

result<std::vector<std::byte>> command_queue::run(std::span<const std::byte> in, std::size_t out_bytes,
                                                  clock::time_point deadline, bool page_command) {
    if (in.size() < ifc::mbox_in::size_bytes) {
        error e;
        e.kind = error_kind::bad_input;
        e.message = "mlx5 command input of " + std::to_string(in.size()) + " bytes is shorter than the " +
                    std::to_string(ifc::mbox_in::size_bytes) + "-byte command header";
        return std::unexpected(std::move(e));
    }
    const auto start = clock::now();
    const auto op = static_cast<ifc::opcode>(abi::get<ifc::mbox_in::opcode>(in));
    const auto op_mod = static_cast<std::uint16_t>(abi::get<ifc::mbox_in::op_mod>(in));
    const std::string what = command_name(op, op_mod);
    const auto fail = [&](error_kind kind, std::string message) {
        error e;
        e.kind = kind;
        e.opcode = op;
        e.op_mod = op_mod;
        e.message = what + ": " + std::move(message);
        return std::unexpected(std::move(e));
    };
    if (out_bytes < 8) {
        return fail(error_kind::bad_input, "an output of " + std::to_string(out_bytes) +
                                               " bytes cannot hold the status and syndrome");
    }
    const auto failed = [&] {
        // A failed NIC: nothing more is sent; the error names the command and the failure.
        return fail(error_kind::fatal, "refused, the NIC failed: " + _failure->message);
    };

    std::unique_lock g(_lock);
    if (_failure) {
        return failed();
    }
    // The slot: the reserved one for page commands, else the lowest free one below it (a queue
    // of a single entry shares it). All user slots busy: wait for one, up to the deadline.
    const unsigned reserved = page_slot();
    unsigned slot = entries();
    if (page_command) {
        if (_slot_stranded[reserved] || _slot_busy[reserved]) {
            return fail(error_kind::transport, "the page-request slot " + std::to_string(reserved) + " is " +
                                                   (_slot_stranded[reserved] ? "stranded with the device" : "busy"));
        }
        slot = reserved;
    } else {
        const unsigned usable = entries() == 1 ? 1 : entries() - 1;
        for (;;) {
            unsigned stranded_count = 0;
            for (unsigned i = 0; i < usable; ++i) {
                stranded_count += _slot_stranded[i] ? 1 : 0;
                if (!_slot_stranded[i] && !_slot_busy[i] && !_slot_event_owed[i]) {
                    slot = i;
                    break;
                }
            }
            if (slot < entries()) {
                break;
            }
            if (stranded_count == usable) {
                return fail(error_kind::transport, "no command slot left: all " + std::to_string(usable) +
                                                       " are stranded with the device");
            }
            // Slots kept only for CMD events still owed come free when those arrive; an event
            // lost for good (the kernel's mlx5_cmd_eq_recover case) must not keep its slot
            // forever: after a grace without any, the owed slots are taken back.
            const bool owed_any = std::find(_slot_event_owed.begin(), _slot_event_owed.end(), true) !=
                                  _slot_event_owed.end();
            const auto until = owed_any ? std::min(deadline, clock::now() + owed_event_grace) : deadline;
            if (_done.wait_until(g, until) == std::cv_status::timeout) {
                if (clock::now() >= deadline) {
                    return fail(error_kind::timeout, "no command slot came free before the deadline");
                }
                if (owed_any) {
                    log().warn("mlx5 command queue on {}: CMD events owed for {} ms did not come; their slots are "
                               "taken back", _fn.name(), owed_event_grace.count());
                    _slot_event_owed.assign(entries(), false);
                }
            }
            if (_failure) {
                return failed();
            }
        }
    }

    const std::size_t nin = cmdq::blocks_for_length(in.size());
    const std::size_t nout = cmdq::blocks_for_length(out_bytes);
    auto blocks = take_blocks(nin + nout);
    if (!blocks) {
        return fail(error_kind::transport, blocks.error().message);
    }
    // With _lock held from here on.
    const auto give_back = [&] {
        for (auto it = blocks->rbegin(); it != blocks->rend(); ++it) {
            _free_blocks.push_back(*it);
        }
    };
    const std::uint8_t token = next_token();
    _slot_busy[slot] = true;
    _slot_done[slot] = false;
    // Issued from the event thread (a handler): no one else would take its CMD event.
    const bool must_poll = _event_thread == std::this_thread::get_id();
    // Rung in event mode by a waiter of events: the device will send this slot a CMD event. (The
    // event thread's own commands and page commands take theirs as they come: they never wait
    // for a slot behind an event only the event thread could deliver.)
    const bool owes_event = _events.load(std::memory_order_acquire) && !must_poll && !page_command;

    // Mailbox chains: data, next pointer, block number, token, then the signatures.
    const auto build_chain = [&](std::size_t first, std::size_t n, std::span<const std::byte> data) {
        for (std::size_t i = 0; i < n; ++i) {
            std::span<std::byte, cmdq::block_bytes> b((*blocks)[first + i].data, cmdq::block_bytes);
            std::fill(b.begin(), b.end(), std::byte{0});
            if (!data.empty()) {
                const std::size_t from = cmdq::inline_bytes + i * cmdq::block_data_bytes;
                const std::size_t len = std::min(cmdq::block_data_bytes, data.size() - from);
                std::memcpy(b.data(), data.data() + from, len);
            }
            abi::set(b, cmdq::next_pointer, i + 1 < n ? (*blocks)[first + i + 1].iova : 0);
            abi::set<box_layout::block_number>(b, i);
            abi::set<box_layout::token>(b, token);
            cmdq::sign_block(b);
        }
    };
    build_chain(0, nin, in);
    build_chain(nin, nout, {});

    // The entry, built aside with the ownership bit set (the signature covers it), then written
    // with its last byte - status and ownership - stored last, after a release fence.
    std::array<std::byte, cmdq::entry_bytes> image{};
    abi::set<entry_layout::type>(image, cmdq::pcie_cmd_if_transport);
    abi::set<entry_layout::input_length>(image, in.size());
    abi::set<entry_layout::output_length>(image, out_bytes);
    abi::set<entry_layout::token>(image, token);
    std::array<std::byte, cmdq::inline_bytes> inline_in{};
    std::memcpy(inline_in.data(), in.data(), std::min(cmdq::inline_bytes, in.size()));
    abi::set_bytes(image, entry_layout::command_input_inline_data, inline_in);
    abi::set(image, cmdq::input_mailbox_pointer, nin > 0 ? (*blocks)[0].iova : 0);
    abi::set(image, cmdq::output_mailbox_pointer, nout > 0 ? (*blocks)[nin].iova : 0);
    abi::set<entry_layout::ownership>(image, cmdq::owner_hw);
    cmdq::sign_entry(image);

    std::byte* const entry = _queue.data() + (std::size_t{slot} << _log_stride);
    constexpr std::size_t own_byte = entry_layout::ownership.byte_offset();
    static_assert(own_byte == cmdq::entry_bytes - 1);
    std::memcpy(entry, image.data(), own_byte);
    ::rig::abi::barrier::to_device();   // the entry before the ownership byte that hands it over
    std::atomic_ref<std::byte>(entry[own_byte]).store(image[own_byte], std::memory_order_release);

    const auto strand = [&] {
        _slot_busy[slot] = false;
        _slot_stranded[slot] = true;
        stranded_command s;
        s.slot = slot;
        s.opcode = op;
        s.op_mod = op_mod;
        s.token = token;
        s.entry_iova = _queue_iova + (std::uint64_t{slot} << _log_stride);
        for (const block& b : *blocks) {
            s.mailbox_iovas.push_back(b.iova);
        }
        _stranded.push_back(std::move(s));
        _done.notify_all();
    };

    // The slot is ours (busy): the doorbell is rung and the device waited for without _lock, so
    // that other threads may fill and ring other slots meanwhile.
    g.unlock();
    if (auto r = write_dword(dword_of(iseg::command_doorbell_vector), 1u << slot); !r) {
        // The device may or may not have seen the doorbell: the slot is not ours any more.
        g.lock();
        strand();
        return fail(error_kind::transport, r.error().message);
    }

    // Wait for the device to hand the entry back: by the CMD event in event mode, else by
    // polling the ownership bit (spin a few microseconds, then sleep with a growing pause).
    const auto owned_by_sw = [&] {
        const auto b = std::atomic_ref<std::byte>(entry[own_byte]).load(std::memory_order_acquire);
        return (std::to_integer<std::uint8_t>(b) & 1) == cmdq::owner_sw;
    };
    const auto timed_out = [&] {
        strand();
        const auto waited = std::chrono::round<std::chrono::milliseconds>(deadline - start);
        log().warn("mlx5 command {} on {} slot {} timed out; slot and {} mailbox block(s) stranded", what,
                   _fn.name(), slot, blocks->size());
        return fail(error_kind::timeout,
                    "did not complete within " + std::to_string(std::max<std::int64_t>(waited.count(), 0)) + " ms");
    };
    const auto spin_until = clock::now() + std::chrono::microseconds(5);
    auto pause = std::chrono::microseconds(1);
    for (;;) {
        if (_failed.load(std::memory_order_acquire)) {
            // The NIC failed while the device held the entry: it may still write it.
            g.lock();
            strand();
            return failed();
        }
        if (_events.load(std::memory_order_acquire) && !must_poll) {
            g.lock();
            // Handed back already (a command rung before the EQ existed, or one the device ran
            // before its waiter got here): done. The CMD event owed by a DESTROY of an object
            // that events name is still waited for (at most owed_event_grace): the event thread
            // dispatches EQEs in order, so once it names this slot every event the device wrote
            // before the completion has reached its handler, as in the kernel, whose waiter
            // sleeps until its CMD event (cmd.c wait_func). Returned at once, a DESTROY_QP let a
            // queue pair made next, with the same number, meet the old one's WQ_CATAS_ERROR
            // (errors_test.cpp, "reported failure ... before its destroy returns"). Every command
            // waiting so cost the guest suite's Rig test 180 -> 519 s (an interrupt into a TCG
            // guest per command). One still not come keeps the slot. The event thread is asked
            // to look now (look_now): the device wrote the CMD EQE just after the entry, and
            // waiting for its interrupt instead cost the guest's mlx5 seed tests 5x bnxt's.
            if (owned_by_sw()) {
                const bool destroys_named = op == ifc::opcode::destroy_qp || op == ifc::opcode::destroy_cq;
                if (owes_event && destroys_named && !_slot_done[slot]) {
                    if (_look_now) {
                        _look_now();
                    }
                    _done.wait_until(g, std::min(deadline, clock::now() + owed_event_grace),
                                     [&] { return _slot_done[slot] || _failure || !_events.load(); });
                }
                _slot_event_owed[slot] = owes_event && _events.load() && !_slot_done[slot];
                break;
            }
            // In slices: an entry handed back while its interrupt is still on its way (tens of
            // ms into a TCG guest) is found by its ownership byte at the next slice, as the bnxt
            // RCFW waiter does (rcfw.cpp wait_for_interrupt), and taken as handed back above.
            _done.wait_until(g, std::min(deadline, clock::now() + event_slice),
                             [&] { return _slot_done[slot] || _failure || !_events.load(); });
            if (_failure) {
                strand();
                return failed();
            }
            if (_slot_done[slot] && owned_by_sw()) {
                break;  // with _lock held
            }
            if (_slot_done[slot]) {
                // A CMD event for a slot the device still owns: not this command's completion
                // (an event left over from an earlier mode switch). Keep waiting.
                _slot_done[slot] = false;
            }
            if (clock::now() >= deadline) {
                if (!owned_by_sw()) {
                    return timed_out();
                }
                // Handed back, its CMD event lost (the kernel's mlx5_cmd_eq_recover case).
                log().warn("mlx5 command {} on {} slot {}: completed without its CMD event", what, _fn.name(), slot);
                break;
            }
            g.unlock();
            continue;  // back to polling after use_events(false), or wait again
        }
        if (owned_by_sw()) {
            g.lock();
            break;
        }
        const auto now = clock::now();
        if (now >= deadline) {
            g.lock();
            return timed_out();
        }
        if (now >= spin_until) {
            std::this_thread::sleep_for(std::min<clock::duration>(pause, deadline - now));
            pause = std::min(pause * 2, std::chrono::microseconds(1000));
        }
    }
    // _lock held again: the slot is free for the next command once its result is copied out.
    // the result's loads from the entry and mailboxes done before the slot may be reused
    ::rig::abi::barrier::from_device();
    _slot_busy[slot] = false;
    _done.notify_all();

    std::array<std::byte, cmdq::entry_bytes> done{};
    std::memcpy(done.data(), entry, done.size());
    // Signatures first, as the kernel's cmd_comp_notifier (verify_signature before the delivery
    // status): a spoiled entry's status byte cannot be trusted either. The output blocks are
    // checked below, and only when the device says it delivered (on a delivery error it wrote
    // none of them).
    const bool verify = verifies_signatures();
    if (verify && !cmdq::entry_signature_ok(done)) {
        give_back();
        std::array<std::byte, cmdq::entry_bytes> zeroed = done;
        zeroed[cmdq::entry_signature_byte] = std::byte{0};
        return fail(error_kind::bad_output,
                    "completion entry signature " +
                        abi::hex(std::to_integer<std::uint8_t>(done[cmdq::entry_signature_byte])) + ", expected " +
                        abi::hex(cmdq::entry_signature(zeroed)));
    }
    const auto delivery =
        static_cast<ifc::delivery_status>(abi::get<entry_layout::status>(std::span<const std::byte>(done)));
    if (delivery != ifc::delivery_status::ok) {
        give_back();
        auto e = fail(error_kind::delivery, "delivery status " + std::string(ifc::to_string(delivery)) + " (" +
                                                abi::hex(static_cast<std::uint8_t>(delivery)) + ")");
        e.error().delivery = delivery;
        return e;
    }
    const auto out_token = static_cast<std::uint8_t>(abi::get<entry_layout::token>(std::span<const std::byte>(done)));
    if (out_token != token) {
        give_back();
        return fail(error_kind::bad_output, "completion token " + abi::hex(out_token) + ", expected " +
                                                abi::hex(token));
    }
    const auto out_len = abi::get<entry_layout::output_length>(std::span<const std::byte>(done));
    if (out_len != out_bytes) {
        give_back();
        return fail(error_kind::bad_output, "completion output length " + std::to_string(out_len) +
                                                ", expected " + std::to_string(out_bytes));
    }

    std::vector<std::byte> out(std::max(out_bytes, cmdq::inline_bytes));
    const auto out_inline = abi::bytes_of(std::span<const std::byte>(done), entry_layout::command_output_inline_data);
    std::memcpy(out.data(), out_inline.data(), cmdq::inline_bytes);
    for (std::size_t i = 0; i < nout; ++i) {
        std::span<const std::byte, cmdq::block_bytes> b((*blocks)[nin + i].data, cmdq::block_bytes);
        if (verify && !cmdq::block_signature_ok(b)) {
            give_back();
            const auto byte_at = [&](std::size_t k) { return std::to_integer<std::uint8_t>(b[k]); };
            const std::uint8_t ctrl = cmdq::block_ctrl_signature(b);
            if (byte_at(cmdq::block_ctrl_signature_byte) != ctrl) {
                return fail(error_kind::bad_output, "output mailbox " + std::to_string(i) + " control signature " +
                                                        abi::hex(byte_at(cmdq::block_ctrl_signature_byte)) +
                                                        ", expected " + abi::hex(ctrl));
            }
            return fail(error_kind::bad_output, "output mailbox " + std::to_string(i) + " signature " +
                                                    abi::hex(byte_at(cmdq::block_signature_byte)) + ", expected " +
                                                    abi::hex(cmdq::block_signature(b)));
        }
        if (abi::get<box_layout::token>(b) != token) {
            give_back();
            return fail(error_kind::bad_output, "output mailbox " + std::to_string(i) + " carries token " +
                                                    abi::hex(abi::get<box_layout::token>(b)) + ", expected " +
                                                    abi::hex(token));
        }
        const std::size_t from = cmdq::inline_bytes + i * cmdq::block_data_bytes;
        std::memcpy(out.data() + from, b.data(), std::min(cmdq::block_data_bytes, out_bytes - from));
    }
    give_back();
    out.resize(out_bytes);

    const auto status = static_cast<ifc::cmd_status>(abi::get<ifc::mbox_out::status>(std::span<const std::byte>(out)));
    const auto syndrome = static_cast<std::uint32_t>(abi::get<ifc::mbox_out::syndrome>(std::span<const std::byte>(out)));
    if (_trace) {
        _trace(command_record{op, ifc::to_string(op), op_mod, static_cast<std::uint8_t>(status), syndrome,
                              std::vector<std::byte>(in.begin(), in.end()), out});
    }
    if (status != ifc::cmd_status::ok) {
        auto e = fail(error_kind::status, std::string(ifc::to_string(status)) + " (" +
                                              abi::hex(static_cast<std::uint8_t>(status)) + "), syndrome " +
                                              abi::hex(syndrome));
        e.error().status = status;
        e.error().syndrome = syndrome;
        log().debug("mlx5 command on {}: {}", _fn.name(), e.error().message);
        return e;
    }
    return out;
}

}  // namespace rig::firmware::mlx5
