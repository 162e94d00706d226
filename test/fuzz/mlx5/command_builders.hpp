#pragma once
// The mlx5-command harness's driver side (command.cpp): commands built from fuzz bytes, laid
// into the queue entry and mailbox chains as the kernel lays them (cmd.c mlx5_alloc_cmd_msg,
// set_signature), with one mutation a hostile driver makes, and run by one doorbell.
// Well-formed inputs follow firmware/mlx5 (queue_objects.cpp, objects.cpp): the same fields, so
// the model's object commands succeed unless the fuzz bytes say otherwise.
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "abi/mlx5/ifc.hpp"
#include "sim/mlx5/firmware.hpp"
#include "test/fuzz/mlx5/command_rig.hpp"
#include "test/fuzz/reader.hpp"

namespace rig::fuzz::mlx5 {

using ifc::opcode;

struct command {
    std::uint16_t opcode = 0;
    std::uint16_t op_mod = 0;
    std::vector<std::byte> in;  // at least 16 bytes (the inline part); inlen may say less
    std::size_t inlen = 0;
    std::size_t outlen = 0;
};

struct mutation {
    enum kind_t : std::uint8_t { none, block_token, block_number, next_pointer, head_pointer, length, type, entry_token };
    kind_t kind = none;
    bool output = false;            // the output chain (else the input chain)
    bool entry_signature = false;   // the entry's signature spoilt
    bool block_signature = false;   // an input block's signature spoilt
    bool not_owned = false;         // ownership left to software
    std::uint32_t block = 0;        // which block of the chain
    std::uint8_t value8 = 0;
    std::uint32_t value32 = 0;
    std::uint8_t pointer = 0;       // pointer_choice
    std::uint64_t raw_pointer = 0;
};

struct chain_shape {
    std::uint32_t in_blocks = 0;   // blocks laid for each chain
    std::uint32_t out_blocks = 0;
};

struct outcome {
    bool device_failed = false;  // fatal or dead before the doorbell: nothing runs
    bool ran = false;
    bool owned = true;
    bool signed_ok = false;
    bool entry_unchanged = false;
    ifc::delivery_status delivery = ifc::delivery_status::ok;
    ifc::cmd_status status = ifc::cmd_status::ok;
    std::uint32_t syndrome = 0;
    std::vector<std::byte> out;  // inline output and the output chain's data, when delivered
};

inline bool known_status(ifc::cmd_status s) {
    return std::ranges::find(ifc::all_cmd_statuses, s) != std::end(ifc::all_cmd_statuses);
}

// The opcodes firmware::execute runs (sim/mlx5/commands.cpp); any other is BAD_OP_ERR.
inline constexpr opcode implemented_opcodes[] = {
    opcode::nop, opcode::enable_hca, opcode::disable_hca, opcode::query_issi, opcode::set_issi,
    opcode::query_pages, opcode::manage_pages, opcode::init_hca, opcode::teardown_hca, opcode::query_adapter,
    opcode::query_hca_cap, opcode::set_hca_cap, opcode::access_reg, opcode::query_vport_state,
    opcode::query_nic_vport_context, opcode::modify_nic_vport_context, opcode::set_roce_address,
    opcode::query_roce_address, opcode::alloc_uar, opcode::dealloc_uar, opcode::alloc_pd, opcode::dealloc_pd,
    opcode::create_mkey, opcode::destroy_mkey, opcode::create_eq, opcode::destroy_eq, opcode::create_cq,
    opcode::destroy_cq, opcode::create_qp, opcode::destroy_qp, opcode::rst2init_qp, opcode::init2init_qp,
    opcode::init2rtr_qp, opcode::rtr2rts_qp, opcode::rts2rts_qp, opcode::sqerr2rts_qp, opcode::sqd_rts_qp,
    opcode::qp_2err, opcode::qp_2rst, opcode::query_qp,
};
inline bool implemented(std::uint16_t op) {
    return std::ranges::find(implemented_opcodes, static_cast<opcode>(op)) != std::end(implemented_opcodes);
}

inline std::uint64_t box_address(std::size_t i) { return boxes_at + i * cmdq::block_alignment; }
inline constexpr std::size_t output_box_first = box_count / 2;
inline constexpr std::size_t chain_blocks_max = box_count / 2;

// What the harness knows of the function: the object numbers the model handed out (stale ones
// kept: a destroyed number is good abuse), the last CUR capability pages, the checksum mode.
struct session {
    enum kind_t : std::size_t { uar, pd, mkey, eq, cq, qp, kinds };

    explicit session(command_rig& r) : rig(r) {}

    command_rig& rig;
    std::uint8_t token = 0;
    bool checksums = false;
    std::array<std::vector<std::uint32_t>, kinds> objects;
    std::vector<std::byte> general_cur, roce_cur;  // capability pages as QUERY_HCA_CAP CUR gave them
    std::uint32_t next_page = 0;

    void reset() {
        rig.fresh();
        token = 0;
        checksums = false;
        for (auto& o : objects) {
            o.clear();
        }
        general_cur.clear();
        roce_cur.clear();
        next_page = 0;
    }
    std::uint32_t pick(kind_t k, reader& in) const {
        const std::uint8_t sel = in.u8();
        if (sel == 0xff || objects[k].empty()) {
            return sel == 0xff ? in.u32() & 0xffffff : sel;
        }
        return objects[k][sel % objects[k].size()];
    }
    outcome simple(opcode op, std::size_t inlen, std::size_t outlen, std::uint16_t op_mod = 0);
    void bring_up();
    void learn(const command& c, const outcome& r);
};

inline command header(opcode op, std::size_t inlen, std::size_t outlen, std::uint16_t op_mod = 0) {
    command c{static_cast<std::uint16_t>(op), op_mod, std::vector<std::byte>(std::max<std::size_t>(inlen, 16)), inlen,
              outlen};
    abi::set<ifc::mbox_in::opcode>(c.in, c.opcode);
    abi::set<ifc::mbox_in::op_mod>(c.in, op_mod);
    return c;
}
template <class In, class Out>
command header(opcode op, std::uint16_t op_mod = 0, std::size_t pas = 0) {
    return header(op, ifc::length_with_pas<In>(pas), Out::size_bytes, op_mod);
}

// ---- laying a command out and ringing for it ----

inline std::uint64_t pointer_choice(const mutation& m, std::uint64_t self) {
    switch (m.pointer % 8) {
    case 0: return 0;
    case 1: return boxes_at + 0x200;                // 512-byte aligned only
    case 2: return 0x30000000;                      // no window there
    case 3: return readonly_base;                   // readable, not writable
    case 4: return self;                            // a loop
    case 5: return box_address(m.raw_pointer % box_count);
    case 6: return pages_at;                        // aligned, mapped, holding anything
    default: return m.raw_pointer;
    }
}

// Writes the chain of `blocks` blocks at boxes first.. with `data` (may be empty), numbered and
// tokened as the kernel does; returns the head pointer (0 for none).
inline std::uint64_t lay_chain(command_rig& rig, std::size_t first, std::size_t blocks, std::span<const std::byte> data,
                               std::uint8_t token, std::byte fill) {
    for (std::size_t i = 0; i < blocks; ++i) {
        auto b = rig.at(box_address(first + i), cmdq::block_bytes);
        std::fill(b.begin(), b.end(), std::byte{0});
        std::fill_n(b.begin(), cmdq::block_data_bytes, fill);
        const std::size_t from = i * cmdq::block_data_bytes;
        if (from < data.size()) {
            std::memcpy(b.data(), data.data() + from, std::min(cmdq::block_data_bytes, data.size() - from));
        }
        abi::set<ifc::cmd_if_box::block_number>(b, i);
        abi::set<ifc::cmd_if_box::token>(b, token);
        abi::set(b, cmdq::next_pointer, i + 1 < blocks ? box_address(first + i + 1) : 0);
    }
    return blocks == 0 ? 0 : box_address(first);
}

inline void mutate_chain(command_rig& rig, const mutation& m, std::size_t first, std::size_t blocks,
                         std::span<std::byte> e) {
    const auto head = m.output ? cmdq::output_mailbox_pointer : cmdq::input_mailbox_pointer;
    if (m.kind == mutation::head_pointer) {
        abi::set(e, head, pointer_choice(m, abi::get(e, head)));
        return;
    }
    if (blocks == 0 || (m.kind != mutation::block_token && m.kind != mutation::block_number &&
                        m.kind != mutation::next_pointer)) {
        return;
    }
    const std::uint64_t at = box_address(first + m.block % blocks);
    auto b = rig.at(at, cmdq::block_bytes);
    if (m.kind == mutation::block_token) {
        abi::set<ifc::cmd_if_box::token>(b, abi::get<ifc::cmd_if_box::token>(b) ^ (m.value8 | 1u));
    } else if (m.kind == mutation::block_number) {
        abi::set<ifc::cmd_if_box::block_number>(b, m.value32);
    } else {
        abi::set(b, cmdq::next_pointer, pointer_choice(m, at));
    }
}

// The output blocks the model may write: the chain as it lies, walked as the PRM walks it.
inline std::vector<std::uint64_t> walk_output(command_rig& rig, std::uint64_t ptr, std::size_t outlen) {
    std::vector<std::uint64_t> blocks;
    const std::size_t n = std::min<std::size_t>(cmdq::blocks_for_length(outlen), 2 * box_count);
    for (std::size_t i = 0; i < n && ptr != 0 && ptr % cmdq::block_alignment == 0; ++i) {
        const bool rw = ptr >= window_base && ptr - window_base + cmdq::block_bytes <= window_bytes;
        const bool ro = ptr >= readonly_base && ptr - readonly_base + cmdq::block_bytes <= readonly_bytes;
        if (!rw && !ro) {
            break;
        }
        blocks.push_back(ptr);
        ptr = abi::get(rig.at(ptr, cmdq::block_bytes), cmdq::next_pointer);
    }
    return blocks;
}

inline outcome submit(session& s, const command& c, const mutation& m, unsigned slot, chain_shape& shape) {
    command_rig& rig = s.rig;
    const std::uint8_t token = ++s.token == 0 ? ++s.token : s.token;
    shape.in_blocks = static_cast<std::uint32_t>(std::min(cmdq::blocks_for_length(c.inlen), chain_blocks_max));
    shape.out_blocks = static_cast<std::uint32_t>(std::min(cmdq::blocks_for_length(c.outlen), chain_blocks_max));
    const std::span<const std::byte> rest =
        std::span<const std::byte>(c.in).subspan(std::min<std::size_t>(16, c.in.size()));
    const std::uint64_t in_head = lay_chain(rig, 0, shape.in_blocks, rest, token, std::byte{0});
    const std::uint64_t out_head = lay_chain(rig, output_box_first, shape.out_blocks, {}, token, std::byte{0xee});

    auto e = rig.entry(slot);
    std::fill(e.begin(), e.end(), std::byte{0});
    abi::set<ifc::cmd_queue_entry::type>(e, m.kind == mutation::type ? m.value8 : cmdq::pcie_cmd_if_transport);
    abi::set<ifc::cmd_queue_entry::input_length>(e, m.kind == mutation::length && !m.output ? m.value32 : c.inlen);
    abi::set<ifc::cmd_queue_entry::output_length>(e, m.kind == mutation::length && m.output ? m.value32 : c.outlen);
    abi::set<ifc::cmd_queue_entry::token>(e, m.kind == mutation::entry_token ? m.value8 : token);
    abi::set_bytes(e, ifc::cmd_queue_entry::command_input_inline_data, std::span(c.in).first(16));
    abi::set(e, cmdq::input_mailbox_pointer, in_head);
    abi::set(e, cmdq::output_mailbox_pointer, out_head);
    mutate_chain(rig, m, m.output ? output_box_first : 0, m.output ? shape.out_blocks : shape.in_blocks, e);
    for (std::size_t i = 0; i < shape.in_blocks; ++i) {
        auto b = rig.at(box_address(i), cmdq::block_bytes).first<cmdq::block_bytes>();
        cmdq::sign_block(b);
        if (m.block_signature && i == m.block % shape.in_blocks) {
            b[cmdq::block_signature_byte] ^= std::byte{0x5a};
        }
    }
    abi::set<ifc::cmd_queue_entry::ownership>(e, m.not_owned ? cmdq::owner_sw : cmdq::owner_hw);
    cmdq::sign_entry(e);
    if (m.entry_signature) {
        e[cmdq::entry_signature_byte] ^= std::byte{0x5a};
    }
    std::array<std::byte, cmdq::entry_bytes> before;
    std::ranges::copy(e, before.begin());

    const std::size_t outlen = abi::get<ifc::cmd_queue_entry::output_length>(e);
    outcome r;
    r.device_failed = rig.fn.failed();
    const std::uint64_t completed = rig.fn.commands_completed();
    rig.ring(1u << slot, {slot, walk_output(rig, abi::get(e, cmdq::output_mailbox_pointer), outlen)});

    r.ran = rig.fn.commands_completed() == completed + 1 && rig.fn.last_completion(slot).ran;
    r.owned = abi::get<ifc::cmd_queue_entry::ownership>(e) != 0;
    r.signed_ok = cmdq::entry_signature_ok(e);
    r.entry_unchanged = std::ranges::equal(e, before);
    r.delivery = static_cast<ifc::delivery_status>(abi::get<ifc::cmd_queue_entry::status>(e));
    if (!r.ran || r.delivery != ifc::delivery_status::ok) {
        return r;
    }
    const auto inline_out = abi::bytes_of(std::span<const std::byte>(e), ifc::cmd_queue_entry::command_output_inline_data);
    r.out.assign(inline_out.begin(), inline_out.end());
    r.status = static_cast<ifc::cmd_status>(abi::get<ifc::mbox_out::status>(r.out));
    r.syndrome = static_cast<std::uint32_t>(abi::get<ifc::mbox_out::syndrome>(r.out));
    if (m.kind == mutation::none && outlen == c.outlen) {
        for (std::size_t i = 0; i < shape.out_blocks; ++i) {
            const auto b = rig.at(box_address(output_box_first + i), cmdq::block_data_bytes);
            r.out.insert(r.out.end(), b.begin(), b.end());
        }
    }
    return r;
}

inline outcome session::simple(opcode op, std::size_t inlen, std::size_t outlen, std::uint16_t op_mod) {
    chain_shape shape;
    const command c = header(op, inlen, outlen, op_mod);
    outcome r = submit(*this, c, mutation{}, 0, shape);
    if (r.ran && r.delivery == ifc::delivery_status::ok && r.status == ifc::cmd_status::ok) {
        learn(c, r);
    }
    return r;
}

// ENABLE_HCA, the boot and init pages, INIT_HCA: what mlx5_function_setup does, in short.
inline void session::bring_up() {
    simple(opcode::enable_hca, ifc::enable_hca_in::size_bytes, ifc::enable_hca_out::size_bytes);
    for (const auto kind : {ifc::query_pages_op_mod::boot_pages, ifc::query_pages_op_mod::init_pages}) {
        const outcome q = simple(opcode::query_pages, ifc::query_pages_in::size_bytes, ifc::query_pages_out::size_bytes,
                                 static_cast<std::uint16_t>(kind));
        if (q.out.size() < ifc::query_pages_out::size_bytes) {
            return;
        }
        const auto n = std::min<std::uint32_t>(static_cast<std::uint32_t>(abi::get<ifc::query_pages_out::num_pages>(q.out)), 8);
        using In = ifc::manage_pages_in;
        command c = header<In, ifc::manage_pages_out>(opcode::manage_pages,
                                                      static_cast<std::uint16_t>(ifc::manage_pages_op_mod::allocation_success), n);
        abi::set<In::input_num_entries>(c.in, n);
        for (std::uint32_t i = 0; i < n; ++i) {
            abi::set(c.in, ifc::pas_entry<In>(i), pages_at + std::uint64_t{next_page++ % page_count} * 4096);
        }
        chain_shape shape;
        submit(*this, c, mutation{}, 0, shape);
    }
    simple(opcode::init_hca, ifc::init_hca_in::size_bytes, ifc::init_hca_out::size_bytes);
}

// ---- what a successful command taught the harness ----
inline void session::learn(const command& c, const outcome& r) {
    const auto number = [&](abi::field f) { return static_cast<std::uint32_t>(abi::get(r.out, f)); };
    const auto forget = [&](kind_t k, abi::field f) { std::erase(objects[k], static_cast<std::uint32_t>(abi::get(c.in, f))); };
    switch (static_cast<opcode>(c.opcode)) {
    case opcode::alloc_uar: objects[uar].push_back(number(ifc::alloc_uar_out::uar)); break;
    case opcode::alloc_pd: objects[pd].push_back(number(ifc::alloc_pd_out::pd)); break;
    case opcode::create_mkey: objects[mkey].push_back(number(ifc::create_mkey_out::mkey_index)); break;
    case opcode::create_eq: objects[eq].push_back(number(ifc::create_eq_out::eq_number)); break;
    case opcode::create_cq: objects[cq].push_back(number(ifc::create_cq_out::cqn)); break;
    case opcode::create_qp: objects[qp].push_back(number(ifc::create_qp_out::qpn)); break;
    case opcode::dealloc_uar: forget(uar, ifc::dealloc_uar_in::uar); break;
    case opcode::dealloc_pd: forget(pd, ifc::dealloc_pd_in::pd); break;
    case opcode::destroy_mkey: forget(mkey, ifc::destroy_mkey_in::mkey_index); break;
    case opcode::destroy_eq: forget(eq, ifc::destroy_eq_in::eq_number); break;
    case opcode::destroy_cq: forget(cq, ifc::destroy_cq_in::cqn); break;
    case opcode::destroy_qp: forget(qp, ifc::destroy_qp_in::qpn); break;
    case opcode::enable_hca: checksums = false; break;  // a freshly enabled function has the default caps
    case opcode::set_hca_cap:
        if (c.op_mod == ifc::set_hca_cap_op_mod(ifc::cap_type::general_device) &&
            c.in.size() >= ifc::set_hca_cap_in::size_bytes) {
            checksums = abi::get(c.in, ifc::set_hca_cap_in::capability(ifc::cmd_hca_cap::cmdif_checksum)) ==
                        static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::enabled);
        }
        break;
    case opcode::query_hca_cap:
        if (r.out.size() >= ifc::query_hca_cap_out::size_bytes) {
            if (c.op_mod == ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::cur)) {
                general_cur = r.out;
            } else if (c.op_mod == ifc::query_hca_cap_op_mod(ifc::cap_type::roce, ifc::cap_mode::cur)) {
                roce_cur = r.out;
            }
        }
        break;
    default: break;
    }
}

// ---- reading commands and mutations from the fuzz bytes ----

inline mutation read_mutation(reader& in) {
    mutation m;
    const std::uint8_t b = in.u8();
    m.kind = static_cast<mutation::kind_t>(b & 7);
    m.output = (b & 0x08) != 0;
    m.entry_signature = (b & 0x10) != 0;
    m.block_signature = (b & 0x20) != 0;
    m.not_owned = (b & 0x40) != 0;
    if (m.kind != mutation::none || m.block_signature) {
        m.block = in.u8();
        m.value8 = in.u8();
        m.value32 = m.kind == mutation::length || m.kind == mutation::block_number ? in.u32() : m.value8;
        if (m.kind == mutation::next_pointer || m.kind == mutation::head_pointer) {
            m.pointer = in.u8();
            m.raw_pointer = m.pointer % 8 >= 5 ? in.u64() : 0;
        }
    }
    return m;
}

// Up to three bytes of the input XORed: a field the builder set right, set wrong.
inline void apply_pokes(command& c, reader& in) {
    const unsigned pokes = in.u8() >> 6;
    for (unsigned i = 0; i < pokes; ++i) {
        const std::size_t at = in.u16() % c.in.size();
        c.in[at] ^= static_cast<std::byte>(in.u8() | 1u);
    }
    c.opcode = static_cast<std::uint16_t>(abi::get<ifc::mbox_in::opcode>(c.in));
    c.op_mod = static_cast<std::uint16_t>(abi::get<ifc::mbox_in::op_mod>(c.in));
}

inline command raw_command(reader& in) {
    const std::uint8_t sel = in.u8();
    const std::uint16_t op = sel < 0xc0 ? static_cast<std::uint16_t>(implemented_opcodes[sel % std::size(implemented_opcodes)])
                                        : in.u16();
    const std::uint16_t op_mod = in.u16();
    const std::size_t inlen = in.u16() % 0x1200;
    const std::size_t outlen = in.u16() % 0x2100;
    command c = header(static_cast<opcode>(op), inlen, outlen, op_mod);
    in.fill(std::span(c.in).subspan(8));  // after opcode and op_mod: uid, fields, contexts
    return c;
}

command built_command(session& s, reader& in);  // command_builders.cpp

}  // namespace rig::fuzz::mlx5
