#pragma once
// The 64-bit doorbell of P5/P7 chips (kernel bnxt_hsi.h `dbc_dbc`; bnxt_re
// qplib_res.h bnxt_qplib_write_db, rdma-core providers/bnxt_re/db.c bnxt_re_ring_db):
// one little-endian 64-bit MMIO write into a BAR2 doorbell page.
//
//   bits  0-23  index   producer (SQ, RQ, SRQ) or consumer (CQ, NQ) index, modulo the ring
//   bit     24  epoch   flips each time that index wraps
//   bits 25-26  toggle  CQ/SRQ arm: the NQ's toggle; CQ_CUTOFF_ACK: the resize toggle
//   bits 32-51  xid     QP number, CQ id, SRQ id, or NQ/CREQ ring id
//   bits 56-57  path    0 RoCE, 1 L2, 2 engine
//   bit     58  valid   RoCE doorbells always set it
//   bits 60-63  type    DBC_DBC_TYPE_*
//
// dbc_dbc (the layout) encodes and decodes every field; doorbell() builds the value RoCE rings
// write, with path RoCE and valid set, and refuses (std::invalid_argument) a field that does not
// fit.
#include <cstdint>
#include <string>

#include "abi/bnxt/layout.hpp"

namespace rig::bnxt::abi {

// type (the field's value; the kernel's DBC_DBC_TYPE_* are these << 28 of the upper word)
inline constexpr std::uint8_t DBC_DBC_TYPE_SQ = 0x0;
inline constexpr std::uint8_t DBC_DBC_TYPE_RQ = 0x1;
inline constexpr std::uint8_t DBC_DBC_TYPE_SRQ = 0x2;
inline constexpr std::uint8_t DBC_DBC_TYPE_SRQ_ARM = 0x3;
inline constexpr std::uint8_t DBC_DBC_TYPE_CQ = 0x4;
inline constexpr std::uint8_t DBC_DBC_TYPE_CQ_ARMSE = 0x5;
inline constexpr std::uint8_t DBC_DBC_TYPE_CQ_ARMALL = 0x6;
inline constexpr std::uint8_t DBC_DBC_TYPE_CQ_ARMENA = 0x7;
inline constexpr std::uint8_t DBC_DBC_TYPE_SRQ_ARMENA = 0x8;
inline constexpr std::uint8_t DBC_DBC_TYPE_CQ_CUTOFF_ACK = 0x9;
inline constexpr std::uint8_t DBC_DBC_TYPE_NQ = 0xa;
inline constexpr std::uint8_t DBC_DBC_TYPE_NQ_ARM = 0xb;
inline constexpr std::uint8_t DBC_DBC_TYPE_NQ_MASK = 0xe;
inline constexpr std::uint8_t DBC_DBC_TYPE_NULL = 0xf;
// path
inline constexpr std::uint8_t DBC_DBC_PATH_ROCE = 0x0;
inline constexpr std::uint8_t DBC_DBC_PATH_L2 = 0x1;
inline constexpr std::uint8_t DBC_DBC_PATH_ENGINE = 0x2;

// Where the privileged doorbell page sits in BAR2 on P5 (bnxt_hsi.h dbc_dbc; qplib_res.h; P7:
// legacy_l2_db_size_kb).
inline constexpr std::size_t DB_PF_OFFSET_P5 = 0x10000;
inline constexpr std::size_t DB_VF_OFFSET_P5 = 0x4000;

#define RIG_BNXT_DBC_DBC(W, D, F, A)                               \
    F(index, std::uint32_t, 0, 0x00ffffff, 0)                      \
    F(epoch, std::uint32_t, 0, 0x01000000, 24)                     \
    F(toggle, std::uint32_t, 0, 0x06000000, 25)                    \
    F(xid, std::uint32_t, 4, 0x000fffff, 0)                        \
    F(path, std::uint32_t, 4, 0x03000000, 24)                      \
    F(valid, std::uint32_t, 4, 0x04000000, 26)                     \
    F(debug_trace, std::uint32_t, 4, 0x08000000, 27)               \
    F(type, std::uint32_t, 4, 0xf0000000, 28)
RIG_BNXT_LAYOUT(dbc_dbc, 8, RIG_BNXT_DBC_DBC);

// The 64-bit value of a doorbell, to be written with one 64-bit store (its bytes are the
// little-endian encoding of dbc_dbc).
inline std::uint64_t doorbell_value(const dbc_dbc& d) {
    const auto b = to_bytes(d);
    return rig::abi::load_le<std::uint64_t>(b.data());
}

inline dbc_dbc doorbell_fields(std::uint64_t value) {
    std::array<std::byte, 8> b{};
    rig::abi::store_le<std::uint64_t>(b.data(), value);
    return *decode<dbc_dbc>(std::span<const std::byte>(b));
}

// The same value as doorbell() (test/unit/bnxt/fast_path_test.cpp), composed from dbc_dbc's
// field descriptors at compile time, for the data path: the caller gives an index below 2^24
// (a ring index), an xid below 2^20 and no toggle (P5).
[[gnu::always_inline]] constexpr std::uint64_t fast_doorbell(std::uint8_t type, std::uint32_t xid, std::uint32_t index,
                                                             bool epoch) noexcept {
    constexpr field_desc f_index = field_of<dbc_dbc>("index"), f_epoch = field_of<dbc_dbc>("epoch"),
                         f_xid = field_of<dbc_dbc>("xid"), f_path = field_of<dbc_dbc>("path"),
                         f_valid = field_of<dbc_dbc>("valid"), f_type = field_of<dbc_dbc>("type");
    return place(f_index, index) | place(f_epoch, epoch ? 1u : 0u) | place(f_xid, xid) |
           place(f_path, DBC_DBC_PATH_ROCE) | place(f_valid, 1) | place(f_type, type);
}

// A RoCE doorbell: path RoCE, valid set. `index` is the producer/consumer index modulo the
// ring (SQ: WQE index in static mode, slot index in variable mode; CQ_ARMENA and CUTOFF_ACK: 0),
// `epoch` the index's wrap parity, `toggle` the NQ or resize toggle (arm types only).
inline std::uint64_t doorbell(std::uint8_t type, std::uint32_t xid, std::uint32_t index,
                              bool epoch = false, std::uint8_t toggle = 0) {
    dbc_dbc d{};
    d.type = type;
    d.xid = xid;
    d.index = index;
    d.epoch = epoch ? 1u : 0u;
    d.toggle = toggle;
    d.path = DBC_DBC_PATH_ROCE;
    d.valid = 1;
    return doorbell_value(d);   // refuses a type, xid, index or toggle wider than its field
}

}  // namespace rig::bnxt::abi
