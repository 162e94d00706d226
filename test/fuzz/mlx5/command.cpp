// Fuzzes the mlx5 model's command engine and firmware (sim/mlx5/cmdq.cpp run_slot and
// walk_chain, commands.cpp, caps.cpp, objects.cpp, qp.cpp) from the command doorbell
// (function_model::write of BAR0 0x18), with command entries and mailbox chains as a hostile
// driver writes them into its DMA memory (command_rig.hpp: an in-process buffer the model
// reaches through dma_space, each command run inside the doorbell write).
// Input: records of (op, fields). A command is a well-formed one the harness builds (the
// driver's layouts, object numbers picked from those the model returned, so bring-up, PD, UAR,
// MKEY, EQ, CQ, QP and their abuse - double destroy, illegal QP transitions - are a few bytes
// away) or a raw one (any opcode, op_mod, lengths and bytes); then pokes into its input, and
// one chain mutation: a block's token, block number or next pointer, a head pointer (0,
// unaligned, unmapped, read-only, the block itself), lying lengths, a bad type, a bad
// signature, an entry not handed to the device. Other records ring odd doorbell vectors or
// reset the function.
// Oracle: an entry handed to the device comes back - ownership to software, signed, a delivery
// status the PRM names, the one the mutation calls for (TOK_ERR, BAD_BLK_NUM_ERR, CMD_DESCR_ERR,
// SIGNAT_ERR with checksums on, OK for a clean one); a delivered command has a PRM command
// status, with a syndrome exactly when it failed, BAD_OP_ERR for an opcode the model does not
// implement; an entry not handed over is left alone; the model reads only the driver's windows
// and writes only the entry it runs, its output chain and queue memory (never the input chain or
// another entry). At the end a NOP still works (unless the firmware went fatal) and, after a
// function reset, ENABLE_HCA and QUERY_HCA_CAP do.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "test/fuzz/mlx5/command_builders.hpp"

namespace {

using namespace rig::fuzz::mlx5;
using rig::fuzz::reader;
using rig::fuzz::require;
using ifc::cmd_status;
using ifc::delivery_status;

command_rig& the_rig() {
    static command_rig rig;
    return rig;
}

bool known(delivery_status d) {
    return std::ranges::find(ifc::all_delivery_statuses, d) != std::end(ifc::all_delivery_statuses);
}

// The delivery status a lone mutation calls for, when the PRM's order of checks decides it.
std::optional<delivery_status> expected_delivery(const mutation& m, bool checksums, const chain_shape& shape) {
    if (m.entry_signature && checksums) {
        return delivery_status::signat_err;
    }
    if (m.block_signature && checksums && shape.in_blocks > 0) {
        return std::nullopt;  // depends on which block comes first
    }
    if (m.entry_signature) {
        return std::nullopt;
    }
    switch (m.kind) {
    case mutation::none: return m.block_signature ? std::nullopt : std::optional(delivery_status::ok);
    case mutation::type: return m.value8 == cmdq::pcie_cmd_if_transport ? delivery_status::ok : delivery_status::cmd_descr_err;
    case mutation::block_token:
        return m.block < (m.output ? shape.out_blocks : shape.in_blocks) ? std::optional(delivery_status::tok_err)
                                                                         : std::nullopt;
    case mutation::block_number:
        return m.block < (m.output ? shape.out_blocks : shape.in_blocks) && m.value32 != m.block
                   ? std::optional(delivery_status::bad_blk_num_err)
                   : std::nullopt;
    default: return std::nullopt;
    }
}

void check_outcome(const command& c, const mutation& m, const chain_shape& shape, const outcome& r, bool checksums) {
    if (m.not_owned || r.device_failed) {
        require(!r.ran && r.entry_unchanged, "an entry not handed over, or rung at a failed function, is left alone");
        return;
    }
    require(r.ran, "an entry handed to the device is run");
    require(!r.owned, "the entry is handed back to software");
    require(r.signed_ok, "the entry handed back is signed");
    require(known(r.delivery), "the delivery status is one the PRM names");
    if (const auto want = expected_delivery(m, checksums, shape); want && !(m.block_signature && checksums)) {
        if (r.delivery != *want) {
            std::fprintf(stderr, "opcode %#x mutation %u (output %d, block %u of %u/%u, value %#x): delivery %#x, want %#x\n",
                         c.opcode, static_cast<unsigned>(m.kind), m.output, m.block, shape.in_blocks, shape.out_blocks,
                         m.value32, static_cast<unsigned>(r.delivery), static_cast<unsigned>(*want));
        }
        require(r.delivery == *want, "the delivery status the mutation calls for");
    }
    if (r.delivery != delivery_status::ok) {
        return;
    }
    require(known_status(r.status), "a delivered command has a PRM command status");
    require((r.status == cmd_status::ok) == (r.syndrome == 0), "a syndrome exactly when the command failed");
    if (!implemented(c.opcode)) {
        require(r.status == cmd_status::bad_op_err &&
                    r.syndrome == rig::sim::mlx5::syndrome_of(c.opcode, rig::sim::mlx5::failure::bad_opcode),
                "an opcode the model does not implement fails BAD_OP_ERR");
    }
}

void run_command(session& s, reader& in, bool raw) {
    command c = raw ? raw_command(in) : built_command(s, in);
    apply_pokes(c, in);
    const mutation m = read_mutation(in);
    const unsigned slot = in.u8() % cmdq::max_commands;
    const bool checksums = s.checksums;
    chain_shape shape;
    const outcome r = submit(s, c, m, slot, shape);
    check_outcome(c, m, shape, r, checksums);
    if (r.ran && r.delivery == delivery_status::ok && r.status == cmd_status::ok) {
        s.learn(c, r);
    }
}

// A doorbell for slots whose entries were left as they are: stale, handed back, or never made.
void ring_odd(session& s, reader& in) {
    const std::uint32_t vector = in.u32();
    std::array<bool, cmdq::max_commands> owned{};
    for (unsigned i = 0; i < cmdq::max_commands; ++i) {
        owned[i] = (std::to_integer<unsigned>(s.rig.entry(i)[63]) & 1) != 0;
    }
    // Writes of the model go to the entries rung (checked per slot by the rules of the lowest).
    access_rules rules;
    rules.slot = vector == 0 ? 0 : static_cast<unsigned>(std::countr_zero(vector));
    const bool one = std::has_single_bit(vector);
    if (!one) {
        return;  // several slots at once: the write rules are per slot; ring them one by one
    }
    const bool failed = s.rig.fn.failed();
    const std::uint64_t completed = s.rig.fn.commands_completed();
    s.rig.ring(vector, rules);
    const bool ran = s.rig.fn.commands_completed() != completed;
    if (!owned[rules.slot] || failed) {
        require(!ran, "a slot the driver still owns, or rung at a failed function, is not run");
    } else {
        require(ran && (std::to_integer<unsigned>(s.rig.entry(rules.slot)[63]) & 1) == 0, "a rung entry is handed back");
    }
}

void final_checks(session& s) {
    if (!s.rig.fn.failed()) {
        const outcome nop = s.simple(ifc::opcode::nop, ifc::nop_in::size_bytes, ifc::nop_out::size_bytes);
        require(nop.delivery == delivery_status::ok && nop.status == cmd_status::ok,
                "a well-formed NOP still works after the fuzzed commands");
    }
    s.reset();
    const outcome enable =
        s.simple(ifc::opcode::enable_hca, ifc::enable_hca_in::size_bytes, ifc::enable_hca_out::size_bytes);
    require(enable.delivery == delivery_status::ok && enable.status == cmd_status::ok,
            "ENABLE_HCA works after a function reset");
    const outcome caps = s.simple(ifc::opcode::query_hca_cap, ifc::query_hca_cap_in::size_bytes,
                                  ifc::query_hca_cap_out::size_bytes,
                                  ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::max));
    require(caps.delivery == delivery_status::ok && caps.status == cmd_status::ok,
            "QUERY_HCA_CAP works after a function reset");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    session s(the_rig());
    s.reset();
    reader in(data, size);
    for (unsigned n = 0; n < 64 && !in.empty(); ++n) {
        const std::uint8_t op = in.u8();
        switch (op % 8) {
        case 0:
        case 1:
        case 2:
        case 3: run_command(s, in, false); break;
        case 4:
        case 5: run_command(s, in, true); break;
        case 6: ring_odd(s, in); break;
        default:
            if (op & 0x80) {
                s.reset();
            } else {
                s.bring_up();
            }
        }
    }
    final_checks(s);
    return 0;
}
