// The command-queue engine: what the firmware does when the doorbell rings (kernel
// mlx5/core/cmd.c, the driver's side of it). The doorbell write only takes the slots; the firmware
// thread (firmware_loop) runs them. For entry `slot`: read it from client memory, check it, gather
// the input (16 inline bytes, then the input mailbox chain), check the output chain, run the
// command, scatter the output, and hand the entry back: delivery status in status_own bits 7:1,
// ownership 0, that byte written last. Then one CMD EQE names every slot handed back in the pass
// (kernel cmd.c mlx5_cmd_comp_handler) that was issued while an EQ subscribed to the command event
// existed.
//
// Why at issue: nothing the device sees says whether the driver polls. The kernel's polling
// mode (cmd.c cmd_work_handler, CMD_MODE_POLLING or ent->polling) differs from its event mode
// only in who calls mlx5_cmd_comp_handler: the entry it writes is the same. What the device
// does see is whether a command EQ exists, and the kernel creates that EQ by a CREATE_EQ run in
// polling mode (eq.c create_async_eqs, then mlx5_cmd_use_events). A CMD EQE for that very
// CREATE_EQ would land in the new EQ, raise its vector once the kernel arms it, and reach
// mlx5_cmd_comp_handler for an entry the poll already completed: "Command completion arrived
// after timeout (entry idx = 0)" and a reference dropped twice. So the firmware decides when
// it takes the doorbell: a command issued before the EQ existed completes without an event.
//
// Signatures (kernel cmd.c set_signature, calc_block_sig, verify_signature,
// verify_block_sig): the entry handed back is always signed (XOR of its 64 bytes = 0xff), as the
// kernel signs every entry it submits. While CUR cmd_hca_cap.cmdif_checksum is ENABLED (set by
// SET_HCA_CAP; MAX offers it, a reset turns it off) the engine also applies the kernel's verify
// rules to what the driver wrote - the entry, and each input block's ctrl_sig (bytes
// 0x200..0x23e) and sig (all 576) - and refuses a bad one with delivery status SIGNAT_ERR
// without running the command; and it signs every output block it writes (ctrl_sig, then sig).
// Output blocks are not checked: their data is the device's to write.
#include <algorithm>
#include <bit>
#include <string>
#include <utility>

#include "abi/mlx5/ifc/eqe.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/hca_cap.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
namespace cmdq = rig::mlx5::ifc::cmdq;
using ifc::delivery_status;
using entry = ifc::cmd_queue_entry;
using box = ifc::cmd_if_box;

namespace {

struct chain_errors {
    delivery_status align;
    delivery_status length;
};
constexpr chain_errors input_errors{delivery_status::in_ptr_align_err, delivery_status::in_length_err};
constexpr chain_errors output_errors{delivery_status::out_ptr_align_err, delivery_status::out_length_err};

// Walks `blocks` mailbox blocks from `ptr`: each present, 1 KiB aligned, readable, signed when
// `signed_blocks` (ctrl_sig and sig, kernel verify_block_sig), numbered in order and carrying
// the entry's token. Records each block's address; appends the data of the first `data_bytes`
// bytes to *data when given.
delivery_status walk_chain(vfio_user::dma_space& dma, std::uint64_t ptr, std::size_t blocks, std::uint8_t token,
                           chain_errors errors, bool signed_blocks, std::vector<std::uint64_t>& addresses,
                           std::vector<std::byte>* data, std::size_t data_bytes) {
    std::array<std::byte, cmdq::block_bytes> b;
    for (std::size_t i = 0; i < blocks; ++i) {
        if (ptr == 0) {
            return errors.length;  // the chain ends before the length does
        }
        if (ptr % cmdq::block_alignment != 0) {
            return errors.align;
        }
        if (!dma.read(ptr, b)) {
            return delivery_status::fw_err;  // outside the driver's mappings: dma_space reports it
        }
        if (signed_blocks && !cmdq::block_signature_ok(b)) {
            // before its control fields: a block that fails its signature says nothing reliable
            log().info("mlx5: mailbox block {} at IOVA {:#x} fails its signature (ctrl_sig {:#x}, sig {:#x})", i,
                       ptr, std::to_integer<unsigned>(b[cmdq::block_ctrl_signature_byte]),
                       std::to_integer<unsigned>(b[cmdq::block_signature_byte]));
            return delivery_status::signat_err;
        }
        if (abi::get<box::block_number>(b) != i) {
            return delivery_status::bad_blk_num_err;
        }
        if (abi::get<box::token>(b) != token) {
            return delivery_status::tok_err;
        }
        addresses.push_back(ptr);
        if (data != nullptr) {
            const std::size_t take = std::min(cmdq::block_data_bytes, data_bytes - i * cmdq::block_data_bytes);
            data->insert(data->end(), b.begin(), b.begin() + static_cast<std::ptrdiff_t>(take));
        }
        ptr = abi::get(b, cmdq::next_pointer);
    }
    return delivery_status::ok;
}

// The firmware thread's idle back-off while it polls EQ doorbells: it starts short (a doorbell
// is usually followed by another) and grows to about a millisecond, so an idle function costs
// next to nothing on a shared two-core machine (docs/architecture.md, "Threads").
constexpr std::chrono::microseconds min_backoff{20};
constexpr std::chrono::microseconds max_backoff{1000};

// CUR cmdif_checksum ENABLED: signatures are checked on input and made on output (kernel cmd.c
// set_signature).
bool checksums_on(const firmware& fw) {
    return abi::get<ifc::cmd_hca_cap::cmdif_checksum>(fw.general_caps()) ==
           static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::enabled);
}

constexpr std::byte corruption{0x5a};  // what corrupt_next_output_signature XORs into a signature

}  // namespace

void function_model::corrupt_next_output_signature(unsigned block) {
    std::lock_guard g(_lock);
    _corrupt_output = block;
    _corrupt_armed_at = _resets;
}

// On the server's thread, inside the client's doorbell write: take the slots, wake the thread.
void function_model::ring(std::uint32_t vector) {
    if (initializing()) {
        ++_doorbells_ignored;
        log().warn("mlx5: command doorbell {:#x} rung while the firmware initializes: ignored", vector);
        return;
    }
    const std::uint32_t slots = 1u << _options.log_cmdq_size;
    const std::uint32_t outside = slots == 32 ? 0 : vector & ~((1u << slots) - 1);
    if (outside != 0) {
        _doorbells_ignored += static_cast<std::uint64_t>(std::popcount(outside));
        log().warn("mlx5: doorbell for slots {:#x} of a {}-entry queue ignored", outside, slots);
        vector &= ~outside;
    }
    using iseg = ifc::initial_seg;
    const std::uint64_t queue =
        abi::get<iseg::cmdq_phy_addr_63_32>(_iseg) << 32 | abi::get<iseg::cmdq_phy_addr_31_12>(_iseg) << 12;
    if (_server != nullptr && _server->dma().by_message(queue)) {
        // Memory reached only by VFIO_USER_DMA_READ/WRITE: the protocol lets the server send
        // those only while the client waits for a reply, i.e. now, inside the write.
        std::uint32_t done = 0;
        const bool events = command_eq_exists();
        for (unsigned slot = 0; slot < 32; ++slot) {
            if ((vector >> slot & 1) != 0 && !_dead && !_fatal && !_silent) {
                mark_event_slot(slot, events);
                _last[slot] = run_slot(slot);
                if (_last[slot].ran) {
                    done |= 1u << slot;
                    ++_completed;
                }
            }
        }
        handed_back(done);
        return;
    }
    const auto due = clock::now() + _options.command_latency;
    const bool events = command_eq_exists();
    for (unsigned slot = 0; slot < 32; ++slot) {
        if ((vector >> slot & 1) != 0 && (_pending >> slot & 1) == 0) {
            _pending |= 1u << slot;
            _due[slot] = due;
            mark_event_slot(slot, events);
        }
    }
    _kicked = true;
    _wake.notify_one();
}

std::optional<function_model::clock::time_point> function_model::next_due() const {
    if (_pending == 0 || _silent || _fatal || _dead) {
        return std::nullopt;
    }
    std::optional<clock::time_point> first;
    for (unsigned slot = 0; slot < 32; ++slot) {
        if ((_pending >> slot & 1) != 0 && (!first || _due[slot] < *first)) {
            first = _due[slot];
        }
    }
    return first;
}

bool function_model::command_eq_exists() const {
    const auto cmd = static_cast<std::uint8_t>(ifc::event_type::cmd);
    return std::any_of(_fw.eqs().begin(), _fw.eqs().end(), [&](const auto& e) { return e.second.subscribed(cmd); });
}

void function_model::mark_event_slot(unsigned slot, bool events) {
    if (events) {
        _event_slots |= 1u << slot;
    } else {
        _event_slots &= ~(1u << slot);
    }
}

// After a pass that handed entries back: one CMD EQE naming those issued in event mode (kernel
// cmd.c mlx5_cmd_comp_handler; the header comment), and the firmware's own page request once it has
// run enough commands.
void function_model::handed_back(std::uint32_t vector) {
    if (vector == 0) {
        return;
    }
    const std::uint32_t evented = vector & _event_slots;
    _event_slots &= ~vector;
    if (evented != 0) {
        std::array<std::byte, ifc::cmd_inter_comp_event::size_bytes> data{};
        abi::set<ifc::cmd_inter_comp_event::command_completion_vector>(data, evented);
        post_event_locked(static_cast<std::uint8_t>(ifc::event_type::cmd), 0, data);
    }
    if (_options.page_request_after != 0 && !_page_request_sent && _completed >= _options.page_request_after) {
        std::array<std::byte, ifc::pages_req_event::size_bytes> req{};
        abi::set<ifc::pages_req_event::num_pages>(req, static_cast<std::uint32_t>(_options.page_request_pages));
        _page_request_sent = post_event_locked(static_cast<std::uint8_t>(ifc::event_type::page_request), 0, req);
    }
}

std::uint32_t function_model::run_due_commands() {
    const auto now = clock::now();
    std::uint32_t done = 0;
    for (unsigned slot = 0; slot < 32 && !_fatal && !_dead && !_silent; ++slot) {
        if ((_pending >> slot & 1) == 0 || _due[slot] > now) {
            continue;
        }
        _last[slot] = run_slot(slot);
        _pending &= ~(1u << slot);
        if (_last[slot].ran) {
            done |= 1u << slot;
            ++_completed;
        }
    }
    return done;
}

// The firmware thread: runs due commands, posts their CMD EQE, polls the EQ doorbells in the
// UAR pages, and sleeps: until the next command is due, for the back-off while an EQ's doorbells
// lie in a page it must watch (untrapped: the driver writes them to memory), or until kicked
// (doorbell, hook, stop) when there is nothing to do. Only a doorbell found, or an EQE posted to
// such an EQ (_eq_answer_due), resets the back-off: a command or another kick did not tell it
// that the driver writes EQ doorbells, and a wake-up that finds nothing costs the model core its
// CPU when they share one (rig-perf --sim places the model's threads together). With Rig's
// driver, whose EQs lie in trapped pages, each function's thread woke every 100-150 us for the
// first milliseconds after a connect's commands and preempted the core each time (perf sched
// timehist of rig-perf send_bw --sim), none of those wakes finding a doorbell; now it sleeps
// until a command. An event does not need this watch to be prompt: post_to_eq reads the
// doorbells first.
void function_model::firmware_loop() {
    std::unique_lock g(_lock);
    auto backoff = min_backoff;
    while (!_stop) {
        _kicked = false;
        const std::uint32_t done = run_due_commands();
        if (done != 0) {
            handed_back(done);
        }
        strike_planned_fault();
        const bool watching = !_dead && !_fatal && eq_doorbells_in_memory();
        const bool seen = watching && poll_eq_doorbells();
        const auto due = next_due();
        if (!due) {
            _idle.notify_all();
        }
        backoff = seen || std::exchange(_eq_answer_due, false) ? min_backoff : std::min(backoff * 2, max_backoff);
        const auto woken = [this] { return _stop || _kicked; };
        if (watching) {
            const auto until = clock::now() + backoff;
            _wake.wait_until(g, due ? std::min(*due, until) : until, woken);
        } else if (due) {
            _wake.wait_until(g, *due, woken);
        } else {
            _wake.wait(g, woken);
        }
    }
}

bool function_model::wait_idle(std::chrono::milliseconds timeout) const {
    std::unique_lock g(_lock);
    return _idle.wait_for(g, timeout, [this] { return !next_due().has_value(); });
}

completion function_model::run_slot(unsigned slot) {
    using iseg = ifc::initial_seg;
    if (_server == nullptr) {
        log().error("mlx5: doorbell for slot {} but the model is attached to no server", slot);
        return {};
    }
    vfio_user::dma_space& dma = _server->dma();
    const std::uint64_t base =
        abi::get<iseg::cmdq_phy_addr_63_32>(_iseg) << 32 | abi::get<iseg::cmdq_phy_addr_31_12>(_iseg) << 12;
    const std::uint64_t at = base + (std::uint64_t{slot} << _options.log_cmdq_stride);

    std::array<std::byte, cmdq::entry_bytes> e;
    if (!dma.read(at, e)) {
        ++_doorbells_ignored;
        log().error("mlx5: command entry {} at IOVA {:#x} is outside the driver's DMA mappings", slot, at);
        return {};
    }
    if (abi::get<entry::ownership>(e) != cmdq::owner_hw) {
        ++_doorbells_ignored;
        log().warn("mlx5: doorbell for slot {} whose entry the driver still owns: ignored", slot);
        return {};
    }

    // Hands the entry back: out inline bytes (when given), signature, then status_own last.
    const auto finish = [&](delivery_status ds, std::span<const std::byte> out16,
                            bool corrupt_signature = false) -> completion {
        if (!out16.empty()) {
            abi::set_bytes(e, entry::command_output_inline_data, out16);
        }
        abi::set<entry::status>(e, static_cast<std::uint8_t>(ds));
        abi::set<entry::ownership>(e, cmdq::owner_sw);
        e[cmdq::entry_signature_byte] = std::byte{0};
        cmdq::sign_entry(e);
        if (corrupt_signature) {
            e[cmdq::entry_signature_byte] ^= corruption;
        }
        const std::size_t from = entry::command_output_inline_data.byte_offset();
        const std::size_t own = entry::ownership.byte_offset();
        if (!dma.write(at + from, std::span(e).subspan(from, own - from)) ||
            !dma.write(at + own, std::span(e).subspan(own, 1))) {
            log().error("mlx5: command entry {} at IOVA {:#x} cannot be written back", slot, at);
        }
        if (ds != delivery_status::ok) {
            log().info("mlx5: command in slot {} not delivered: {}", slot, ifc::to_string(ds));
        } else {
            log().debug("mlx5: command entry {} handed back", slot);
        }
        return {true, ds};
    };

    // With checksums on, the entry as the driver wrote it (ownership 1) must XOR to 0xff
    // (kernel set_signature signs it so); checked first, as nothing in it can be trusted else.
    const bool checked = checksums_on(_fw);
    if (checked && !cmdq::entry_signature_ok(e)) {
        log().info("mlx5: command entry {} fails its signature ({:#x})", slot,
                   std::to_integer<unsigned>(e[cmdq::entry_signature_byte]));
        return finish(delivery_status::signat_err, {});
    }
    if (abi::get<entry::type>(e) != cmdq::pcie_cmd_if_transport) {
        return finish(delivery_status::cmd_descr_err, {});
    }
    const std::uint8_t token = static_cast<std::uint8_t>(abi::get<entry::token>(e));
    const std::size_t inlen = abi::get<entry::input_length>(e);
    const std::size_t outlen = abi::get<entry::output_length>(e);

    // the input: 16 inline bytes, then the chain
    std::vector<std::byte> in;
    const auto inline_in = abi::bytes_of(std::span<const std::byte>(e), entry::command_input_inline_data);
    in.assign(inline_in.begin(), inline_in.end());
    std::vector<std::uint64_t> in_blocks;
    const std::size_t in_rest = inlen > cmdq::inline_bytes ? inlen - cmdq::inline_bytes : 0;
    delivery_status ds = walk_chain(dma, abi::get(e, cmdq::input_mailbox_pointer), cmdq::blocks_for_length(inlen),
                                    token, input_errors, checked, in_blocks, &in, in_rest);
    if (ds != delivery_status::ok) {
        return finish(ds, {});
    }
    // the output chain must be whole before the command runs
    std::vector<std::uint64_t> out_blocks;
    ds = walk_chain(dma, abi::get(e, cmdq::output_mailbox_pointer), cmdq::blocks_for_length(outlen), token,
                    output_errors, false, out_blocks, nullptr, 0);
    if (ds != delivery_status::ok) {
        return finish(ds, {});
    }

    std::vector<std::byte> out;
    const auto opcode = static_cast<std::uint16_t>(abi::get<ifc::mbox_in::opcode>(in));
    const auto injected = std::find_if(_fail_next.begin(), _fail_next.end(),
                                       [&](const injected_failure& f) { return f.opcode == opcode; });
    if (injected != _fail_next.end()) {
        // fault injection: the command fails as asked, without running
        out.assign(std::max(outlen, cmdq::inline_bytes), std::byte{0});
        abi::set<ifc::mbox_out::status>(out, static_cast<std::uint8_t>(injected->status));
        abi::set<ifc::mbox_out::syndrome>(out, injected->syndrome);
        log().info("mlx5: command {:#x} fails by injection: status {:#x}, syndrome {:#x}", opcode,
                   static_cast<unsigned>(injected->status), injected->syndrome);
        _fail_next.erase(injected);
    } else {
        out = _fw.execute(in, inlen, outlen, &dma);
        if (_datapath) {
            _datapath->command_ran();
        }
        if (const auto held = _fw.take_disabled_with()) {
            report_ledger(ledger_entry::event::disable_hca, held->pages, held->objects);
        }
    }

    // The test hook: which signature of this completion to spoil, if it has that one.
    std::optional<unsigned> corrupt;
    if (_corrupt_output && _corrupt_armed_at != _resets) {
        _corrupt_output.reset();  // a reset since it was armed disarms it
    }
    if (_corrupt_output &&
        (*_corrupt_output == output_entry || *_corrupt_output < out_blocks.size())) {
        corrupt = _corrupt_output;
        _corrupt_output.reset();
        log().info("mlx5: command {:#x}: the {} signature is corrupted on purpose", opcode,
                   *corrupt == output_entry ? std::string("entry") : "output block " + std::to_string(*corrupt));
    }
    // Signed output blocks (the command may just have turned checksums on or off): the block
    // is read back for its control part (next, block number, token), its data replaced, then
    // signed and written whole. Unsigned: only the data is written.
    const bool sign = checksums_on(_fw);
    for (std::size_t i = 0; i < out_blocks.size(); ++i) {
        const std::size_t from = cmdq::inline_bytes + i * cmdq::block_data_bytes;
        const std::size_t n = std::min(cmdq::block_data_bytes, outlen - from);
        const bool spoil = corrupt && *corrupt == i;
        if (!sign && !spoil) {
            if (!dma.write(out_blocks[i], std::span(out).subspan(from, n))) {
                return finish(delivery_status::fw_err, {});
            }
            continue;
        }
        std::array<std::byte, cmdq::block_bytes> b;
        if (!dma.read(out_blocks[i], b)) {
            return finish(delivery_status::fw_err, {});
        }
        std::copy_n(out.begin() + static_cast<std::ptrdiff_t>(from), n, b.begin());
        if (sign) {
            cmdq::sign_block(b);
        }
        if (spoil) {
            b[cmdq::block_signature_byte] ^= corruption;
        }
        if (!dma.write(out_blocks[i], b)) {
            return finish(delivery_status::fw_err, {});
        }
    }
    return finish(delivery_status::ok, std::span(out).first(cmdq::inline_bytes), corrupt && *corrupt == output_entry);
}

}  // namespace rig::sim::mlx5
