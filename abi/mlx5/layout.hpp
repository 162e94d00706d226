#pragma once
// The layout language of mlx5 firmware structures, after include/linux/mlx5/mlx5_ifc.h.
//
// A layout is declared once as a list of its fields, in mlx5_ifc.h's own names, bit offsets and
// widths (reserved gaps are simply not listed), and becomes a struct of typed field descriptors:
//
//   #define RIG_MLX5_ENABLE_HCA_IN(F, S)   (each line continued with a backslash)
//       F(opcode,         0x00, 0x10)
//       F(op_mod,         0x30, 0x10)
//       F(function_id,    0x50, 0x10)
//   RIG_MLX5_LAYOUT(enable_hca_in, 0x80, RIG_MLX5_ENABLE_HCA_IN)
//
//   abi::set<ifc::enable_hca_in::opcode>(buf, 0x104);
//   abi::set<ifc::create_qp_in::qpc(ifc::qpc::st)>(buf, 0x3);   // nested structure
//
// The same list yields `fields`, a table the tests walk to build every field with the vendor's
// own DEVX_SET over the kernel's mlx5_ifc.h and compare the bytes (test/vendor/).
#include "abi/bits.hpp"

namespace rig::mlx5::ifc {}

#define RIG_MLX5_FIELD_DECL(name, off, bits) static constexpr ::rig::abi::field name{off, bits};
#define RIG_MLX5_NESTED_DECL(name, off, type) \
    static constexpr ::rig::abi::nested<::rig::mlx5::ifc::type> name{off};
#define RIG_MLX5_FIELD_ROW(name, off, bits) ::rig::abi::named_field{#name, {off, bits}, {}},
#define RIG_MLX5_NESTED_ROW(name, off, type) \
    ::rig::abi::named_field{#name, {off, ::rig::mlx5::ifc::type::size_bits}, ::rig::mlx5::ifc::type::fields},

// Declares struct `type` in namespace rig::mlx5::ifc (use it inside that namespace).
#define RIG_MLX5_LAYOUT(type, size, LIST)                                                        \
    struct type {                                                                              \
        static constexpr std::string_view name = #type;                                        \
        static constexpr std::uint32_t size_bits = size;                                       \
        static constexpr std::size_t size_bytes = (size) / 8;                                  \
        LIST(RIG_MLX5_FIELD_DECL, RIG_MLX5_NESTED_DECL)                                        \
        static constexpr ::rig::abi::named_field fields[] = {                                  \
            LIST(RIG_MLX5_FIELD_ROW, RIG_MLX5_NESTED_ROW)};                                    \
    };                                                                                         \
    static_assert((size) % 32 == 0, #type ": size is not whole dwords");                       \
    static_assert(::rig::abi::well_formed(type::fields, type::size_bits),                      \
                  #type ": a field is misshapen, outside the layout, or overlaps another");
