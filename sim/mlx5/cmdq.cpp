// The command-queue engine: what the firmware does when the doorbell rings (reference mlx5.md
// §2.3-2.7). For entry `slot`: read it from client memory, check it, gather the input (16 inline
// bytes, then the input mailbox chain), check the output chain, run the command, scatter the
// output, and hand the entry back: delivery status in status_own bits 7:1, ownership 0, that
// byte written last. The entry signature is computed and written (XOR of the 64 bytes = 0xff);
// the signatures of the entry and of the blocks the driver wrote are not checked
// (cmd_hca_cap.cmdif_checksum off, §2.5), and output blocks are not signed.
#include <algorithm>

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

// Walks `blocks` mailbox blocks from `ptr`: each present, 1 KiB aligned, readable, numbered in
// order and carrying the entry's token. Records each block's address; appends the data of the
// first `data_bytes` bytes to *data when given.
delivery_status walk_chain(vfio_user::dma_space& dma, std::uint64_t ptr, std::size_t blocks, std::uint8_t token,
                           chain_errors errors, std::vector<std::uint64_t>& addresses,
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

}  // namespace

void function_model::ring(std::uint32_t vector) {
    if (initializing()) {
        ++_doorbells_ignored;
        log().warn("mlx5: command doorbell {:#x} rung while the firmware initializes: ignored", vector);
        return;
    }
    const std::uint32_t slots = 1u << _options.log_cmdq_size;
    for (unsigned slot = 0; slot < 32; ++slot) {
        if ((vector >> slot & 1) == 0) {
            continue;
        }
        if (slot >= slots) {
            ++_doorbells_ignored;
            log().warn("mlx5: doorbell for slot {} of a {}-entry queue ignored", slot, slots);
            continue;
        }
        _last[slot] = run_slot(slot);
    }
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
    const auto finish = [&](delivery_status ds, std::span<const std::byte> out16) -> completion {
        if (!out16.empty()) {
            abi::set_bytes(e, entry::command_output_inline_data, out16);
        }
        abi::set<entry::status>(e, static_cast<std::uint8_t>(ds));
        abi::set<entry::ownership>(e, cmdq::owner_sw);
        e[cmdq::entry_signature_byte] = std::byte{0};
        cmdq::sign_entry(e);
        const std::size_t from = entry::command_output_inline_data.byte_offset();
        const std::size_t own = entry::ownership.byte_offset();
        if (!dma.write(at + from, std::span(e).subspan(from, own - from)) ||
            !dma.write(at + own, std::span(e).subspan(own, 1))) {
            log().error("mlx5: command entry {} at IOVA {:#x} cannot be written back", slot, at);
        }
        if (ds != delivery_status::ok) {
            log().info("mlx5: command in slot {} not delivered: {}", slot, ifc::to_string(ds));
        }
        return {true, ds};
    };

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
                                    token, input_errors, in_blocks, &in, in_rest);
    if (ds != delivery_status::ok) {
        return finish(ds, {});
    }
    // the output chain must be whole before the command runs
    std::vector<std::uint64_t> out_blocks;
    ds = walk_chain(dma, abi::get(e, cmdq::output_mailbox_pointer), cmdq::blocks_for_length(outlen), token,
                    output_errors, out_blocks, nullptr, 0);
    if (ds != delivery_status::ok) {
        return finish(ds, {});
    }

    const std::vector<std::byte> out = _fw.execute(in, inlen, outlen, &dma);

    for (std::size_t i = 0; i < out_blocks.size(); ++i) {
        const std::size_t from = cmdq::inline_bytes + i * cmdq::block_data_bytes;
        const std::size_t n = std::min(cmdq::block_data_bytes, outlen - from);
        if (!dma.write(out_blocks[i], std::span(out).subspan(from, n))) {
            return finish(delivery_status::fw_err, {});
        }
    }
    return finish(delivery_status::ok, std::span(out).first(cmdq::inline_bytes));
}

}  // namespace rig::sim::mlx5
