#pragma once
// The command queue: its 64-byte entries, the 576-byte mailbox blocks that carry the rest of a
// command's input and output, their delivery statuses and signatures.
//
// Layouts: mlx5_ifc.h cmd_queue_entry and cmd_if_box. The kernel's other description of the
// same bytes (device.h struct mlx5_cmd_layout / mlx5_cmd_prot_block) uses
// other names (inlen, in_ptr, status_own, ...); mlx5_ifc.h's names are the ones used here.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "abi/mlx5/layout.hpp"

namespace rig::mlx5::ifc {

// mlx5_ifc.h cmd_queue_entry (kernel cmd.c): one slot of the command queue.
//  - the first 16 bytes of the input and output travel inline; the rest in mailbox blocks;
//  - the mailbox pointers keep bits 63:9 only: the first block must be 512-byte aligned
//    (the kernel allocates blocks 1 KiB aligned, and cmd_if_box.next_pointer keeps bits 63:10);
//  - status (7 bits) is the delivery status, ownership 1 = owned by the device.
#define RIG_MLX5_CMD_QUEUE_ENTRY(F, S)            \
    F(type,                         0x0,   0x8)   \
    F(input_length,                 0x20,  0x20)  \
    F(input_mailbox_pointer_63_32,  0x40,  0x20)  \
    F(input_mailbox_pointer_31_9,   0x60,  0x17)  \
    F(command_input_inline_data,    0x80,  0x80)  \
    F(command_output_inline_data,   0x100, 0x80)  \
    F(output_mailbox_pointer_63_32, 0x180, 0x20)  \
    F(output_mailbox_pointer_31_9,  0x1a0, 0x17)  \
    F(output_length,                0x1c0, 0x20)  \
    F(token,                        0x1e0, 0x8)   \
    F(signature,                    0x1e8, 0x8)   \
    F(status,                       0x1f8, 0x7)   \
    F(ownership,                    0x1ff, 0x1)
RIG_MLX5_LAYOUT(cmd_queue_entry, 0x200, RIG_MLX5_CMD_QUEUE_ENTRY)

// mlx5_ifc.h cmd_if_box (kernel cmd.c alloc_cmd_box): 512 data bytes, then the chain's control
// part.
#define RIG_MLX5_CMD_IF_BOX(F, S)          \
    F(mailbox_data,       0x0,    0x1000)  \
    F(next_pointer_63_32, 0x1180, 0x20)    \
    F(next_pointer_31_10, 0x11a0, 0x16)    \
    F(block_number,       0x11c0, 0x20)    \
    F(token,              0x11e8, 0x8)     \
    F(ctrl_signature,     0x11f0, 0x8)     \
    F(signature,          0x11f8, 0x8)
RIG_MLX5_LAYOUT(cmd_if_box, 0x1200, RIG_MLX5_CMD_IF_BOX)

// The pointers as the kernel writes them: one big-endian 64-bit word whose low bits are zero
// (device.h in_ptr/out_ptr/next). They cover the _63_32 and _31_9 (_31_10) fields above.
namespace cmdq {
inline constexpr ::rig::abi::field input_mailbox_pointer{0x40, 64};
inline constexpr ::rig::abi::field output_mailbox_pointer{0x180, 64};
inline constexpr ::rig::abi::field next_pointer{0x1180, 64};

inline constexpr std::uint8_t pcie_cmd_if_transport = 0x7;  // cmd_queue_entry.type
inline constexpr std::uint8_t owner_hw = 1;                 // ownership: the device owns it
inline constexpr std::uint8_t owner_sw = 0;
inline constexpr std::size_t entry_bytes = cmd_queue_entry::size_bytes;  // 64
inline constexpr std::size_t inline_bytes = 16;                          // per direction
inline constexpr std::size_t block_bytes = cmd_if_box::size_bytes;        // 576
inline constexpr std::size_t block_data_bytes = 512;
inline constexpr std::size_t block_alignment = 1024;  // kernel cmd.c mlx5_cmd_init
inline constexpr std::uint32_t max_commands = 32;     // 1 << log_cmdq_size, at most

// The mailbox blocks a message of `length` bytes needs beyond its 16 inline bytes
// (kernel cmd.c mlx5_calc_cmd_blocks): QUERY_HCA_CAP's 0x1010-byte output takes 8.
constexpr std::size_t blocks_for_length(std::size_t length) noexcept {
    return length <= inline_bytes ? 0 : (length - inline_bytes + block_data_bytes - 1) / block_data_bytes;
}
}  // namespace cmdq

// ---- delivery status (cmd_queue_entry.status; kernel cmd.c deliv_status_to_err) ------
// Whether the device could read the command at all; the command's own result is mbox_out.status.
#define RIG_MLX5_DELIVERY_STATUSES(X)                     \
    X(ok,                  OK,                  0x00)     \
    X(signat_err,          SIGNAT_ERR,          0x01)     \
    X(tok_err,             TOK_ERR,             0x02)     \
    X(bad_blk_num_err,     BAD_BLK_NUM_ERR,     0x03)     \
    X(out_ptr_align_err,   OUT_PTR_ALIGN_ERR,   0x04)     \
    X(in_ptr_align_err,    IN_PTR_ALIGN_ERR,    0x05)     \
    X(fw_err,              FW_ERR,              0x06)     \
    X(in_length_err,       IN_LENGTH_ERR,       0x07)     \
    X(out_length_err,      OUT_LENGTH_ERR,      0x08)     \
    X(res_fld_not_clr_err, RES_FLD_NOT_CLR_ERR, 0x09)     \
    X(cmd_descr_err,       CMD_DESCR_ERR,       0x10)

enum class delivery_status : std::uint8_t {
#define RIG_MLX5_DELIVERY_ENUM(name, kname, value) name = value,
    RIG_MLX5_DELIVERY_STATUSES(RIG_MLX5_DELIVERY_ENUM)
#undef RIG_MLX5_DELIVERY_ENUM
};

inline constexpr delivery_status all_delivery_statuses[] = {
#define RIG_MLX5_DELIVERY_LIST(name, kname, value) delivery_status::name,
    RIG_MLX5_DELIVERY_STATUSES(RIG_MLX5_DELIVERY_LIST)
#undef RIG_MLX5_DELIVERY_LIST
};

// "SIGNAT_ERR" etc. (kernel MLX5_CMD_DELIVERY_STAT_*_ERR names), or "unknown delivery status".
constexpr std::string_view to_string(delivery_status s) noexcept {
    switch (s) {
#define RIG_MLX5_DELIVERY_CASE(name, kname, value) \
    case delivery_status::name:                    \
        return #kname;
        RIG_MLX5_DELIVERY_STATUSES(RIG_MLX5_DELIVERY_CASE)
#undef RIG_MLX5_DELIVERY_CASE
    }
    return "unknown delivery status";
}

// ---- signatures (kernel cmd.c set_signature / calc_block_sig) -----------------------------
// A signature byte makes the XOR of the bytes it covers, itself included, equal 0xff. They are
// checked by the device only while cmd_hca_cap.cmdif_checksum asks for it; the kernel signs
// every entry anyway, blocks only with checksums on.
namespace cmdq {
namespace detail {
constexpr std::uint8_t xor8(std::span<const std::byte> b, std::size_t from, std::size_t to) noexcept {
    std::uint8_t x = 0;
    for (std::size_t i = from; i < to; ++i) {
        x = static_cast<std::uint8_t>(x ^ std::to_integer<std::uint8_t>(b[i]));
    }
    return x;
}
}  // namespace detail

inline constexpr std::size_t entry_signature_byte = 0x3d;  // cmd_queue_entry.signature
inline constexpr std::size_t block_ctrl_start = 0x200;     // first byte the ctrl signature covers
inline constexpr std::size_t block_ctrl_signature_byte = 0x23e;
inline constexpr std::size_t block_signature_byte = 0x23f;

// The entry signature: ~XOR of the 64 entry bytes, the signature byte counted as 0.
constexpr std::uint8_t entry_signature(std::span<const std::byte, 64> entry) noexcept {
    return static_cast<std::uint8_t>(~(detail::xor8(entry, 0, entry_signature_byte) ^
                                       detail::xor8(entry, entry_signature_byte + 1, 64)));
}
inline void sign_entry(std::span<std::byte, 64> entry) noexcept {
    entry[entry_signature_byte] = std::byte{entry_signature(entry)};
}
constexpr bool entry_signature_ok(std::span<const std::byte, 64> entry) noexcept {
    return detail::xor8(entry, 0, 64) == 0xff;
}

// The block's control signature covers bytes 0x200..0x23d (reserved, next, block number,
// token); its signature covers bytes 0x000..0x23e, the control signature included, so sign
// the control part first.
constexpr std::uint8_t block_ctrl_signature(std::span<const std::byte, 576> block) noexcept {
    return static_cast<std::uint8_t>(~detail::xor8(block, block_ctrl_start, block_ctrl_signature_byte));
}
constexpr std::uint8_t block_signature(std::span<const std::byte, 576> block) noexcept {
    return static_cast<std::uint8_t>(~detail::xor8(block, 0, block_signature_byte));
}
inline void sign_block(std::span<std::byte, 576> block) noexcept {
    block[block_ctrl_signature_byte] = std::byte{block_ctrl_signature(block)};
    block[block_signature_byte] = std::byte{block_signature(block)};
}
// kernel cmd.c verify_block_sig
constexpr bool block_signature_ok(std::span<const std::byte, 576> block) noexcept {
    return detail::xor8(block, block_ctrl_start, block_signature_byte) == 0xff &&
           detail::xor8(block, 0, 576) == 0xff;
}
}  // namespace cmdq

}  // namespace rig::mlx5::ifc
