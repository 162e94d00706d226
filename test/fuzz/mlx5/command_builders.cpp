// Well-formed commands for the mlx5-command harness (command_builders.hpp): the inputs
// firmware/mlx5 writes (objects.cpp, queue_objects.cpp, hca.cpp), their numbers and sizes
// from the fuzz bytes, object numbers picked among those the model handed out.
#include "test/fuzz/mlx5/command_builders.hpp"

namespace rig::fuzz::mlx5 {

namespace {

std::uint64_t page_address(reader& in) { return pages_at + std::uint64_t{in.u8() % page_count} * 4096; }

// A queue buffer of `bytes` at a page the bytes choose, as 4 KiB pages (log_page_size 0).
template <class In, class Out>
command with_pages(opcode op, std::uint64_t at, std::size_t bytes) {
    const std::size_t pages = std::max<std::size_t>(1, (bytes + 4095) / 4096);
    command c = header<In, Out>(op, 0, pages);
    for (std::size_t i = 0; i < pages; ++i) {
        abi::set(c.in, ifc::pas_entry<In>(i), at + i * 4096);
    }
    return c;
}

command manage_pages(session& s, reader& in) {
    using In = ifc::manage_pages_in;
    const std::uint8_t b = in.u8();
    const std::uint32_t n = 1u + (b & 3);
    command c = header<In, ifc::manage_pages_out>(opcode::manage_pages, static_cast<std::uint16_t>(b >> 2 & 3), n);
    abi::set<In::input_num_entries>(c.in, n);
    for (std::uint32_t i = 0; i < n; ++i) {
        abi::set(c.in, ifc::pas_entry<In>(i), pages_at + std::uint64_t{s.next_page++ % page_count} * 4096);
    }
    return c;
}

command query_hca_cap(reader& in) {
    using ifc::cap_mode;
    using ifc::cap_type;
    const std::uint8_t b = in.u8();
    const std::uint16_t mods[] = {ifc::query_hca_cap_op_mod(cap_type::general_device, cap_mode::cur),
                                  ifc::query_hca_cap_op_mod(cap_type::general_device, cap_mode::max),
                                  ifc::query_hca_cap_op_mod(cap_type::roce, cap_mode::cur),
                                  ifc::query_hca_cap_op_mod(cap_type::roce, cap_mode::max)};
    const std::uint16_t op_mod = (b & 4) != 0 ? b : mods[b & 3];
    return header<ifc::query_hca_cap_in, ifc::query_hca_cap_out>(opcode::query_hca_cap, op_mod);
}

// SET_HCA_CAP as mlx5_core's handle_hca_cap: the CUR page read back, a settable field changed.
command set_hca_cap(session& s, reader& in) {
    const std::uint8_t b = in.u8();
    const bool roce = (b & 1) != 0;
    command c = header<ifc::set_hca_cap_in, ifc::set_hca_cap_out>(
        opcode::set_hca_cap, ifc::set_hca_cap_op_mod(roce ? ifc::cap_type::roce : ifc::cap_type::general_device));
    const std::vector<std::byte>& page = roce ? s.roce_cur : s.general_cur;
    if (page.size() == c.in.size()) {
        std::copy(page.begin() + 16, page.end(), c.in.begin() + 16);  // the capability, past the header
    }
    if (!roce) {
        abi::set(c.in, ifc::set_hca_cap_in::capability(ifc::cmd_hca_cap::cmdif_checksum), b >> 1 & 3);
    }
    return c;
}

command create_mkey(session& s, reader& in) {
    using In = ifc::create_mkey_in;
    constexpr auto mkc = In::memory_key_mkey_entry;
    const std::uint32_t pd = s.pick(session::pd, in);
    const std::uint64_t va = page_address(in);
    const std::uint8_t b = in.u8();
    const std::size_t pages = 1u + (b & 3);
    const std::size_t octwords = (pages + 1) / 2;
    command c = header(opcode::create_mkey, In::size_bytes + 16 * octwords, ifc::create_mkey_out::size_bytes);
    abi::set<In::pg_access>(c.in, 1);
    abi::set<mkc(ifc::mkc::access_mode_1_0)>(c.in, static_cast<std::uint8_t>(ifc::mkc_access_mode::mtt));
    abi::set<mkc(ifc::mkc::lr)>(c.in, 1);
    abi::set<mkc(ifc::mkc::lw)>(c.in, b >> 2 & 1);
    abi::set<mkc(ifc::mkc::rr)>(c.in, b >> 3 & 1);
    abi::set<mkc(ifc::mkc::rw)>(c.in, b >> 4 & 1);
    abi::set<mkc(ifc::mkc::qpn)>(c.in, 0xffffff);
    abi::set<mkc(ifc::mkc::mkey_7_0)>(c.in, in.u8());
    abi::set<mkc(ifc::mkc::pd)>(c.in, pd);
    abi::set<mkc(ifc::mkc::start_addr)>(c.in, va);
    abi::set<mkc(ifc::mkc::len)>(c.in, pages * 4096 - (b >> 5));
    abi::set<mkc(ifc::mkc::translations_octword_size)>(c.in, octwords);
    abi::set<mkc(ifc::mkc::log_page_size)>(c.in, 12);
    abi::set<In::translations_octword_actual_size>(c.in, octwords);
    for (std::size_t i = 0; i < pages; ++i) {
        abi::set(c.in, ifc::pas_entry<In>(i), (va + i * 4096) | ifc::mtt::read_enable | ifc::mtt::write_enable);
    }
    return c;
}

command create_eq(session& s, reader& in) {
    using In = ifc::create_eq_in;
    constexpr auto eqc = In::eq_context_entry;
    const std::uint32_t uar = s.pick(session::uar, in);
    const std::uint8_t b = in.u8();
    const std::uint32_t log_size = 1u + (b & 7);
    command c = with_pages<In, ifc::create_eq_out>(opcode::create_eq, page_address(in), std::size_t{64} << log_size);
    abi::set<eqc(ifc::eqc::log_eq_size)>(c.in, log_size);
    abi::set<eqc(ifc::eqc::uar_page)>(c.in, uar);
    abi::set<eqc(ifc::eqc::intr)>(c.in, in.u8() % 70);
    // the command event (0x0a) and completions, or any bits
    const std::uint64_t mask = (b & 8) != 0 ? in.u64() : (std::uint64_t{1} << 0x0a | 1);
    abi::set(c.in, ifc::event_bitmask_word(0), mask);
    return c;
}

command create_cq(session& s, reader& in) {
    using In = ifc::create_cq_in;
    constexpr auto cqc = In::cq_context;
    const std::uint32_t uar = s.pick(session::uar, in);
    const std::uint32_t eqn = s.pick(session::eq, in);
    const std::uint8_t b = in.u8();
    const std::uint32_t log_size = 1u + (b & 7);
    const std::uint64_t at = page_address(in);
    const std::size_t bytes = std::size_t{64} << log_size;
    command c = with_pages<In, ifc::create_cq_out>(opcode::create_cq, at, bytes);
    abi::set<cqc(ifc::cqc::cqe_sz)>(c.in, (b & 8) != 0 ? b >> 4 & 7 : static_cast<std::uint8_t>(ifc::cqc_cqe_sz::bytes_64));
    abi::set<cqc(ifc::cqc::log_cq_size)>(c.in, log_size);
    abi::set<cqc(ifc::cqc::uar_page)>(c.in, uar);
    abi::set<cqc(ifc::cqc::c_eqn_or_apu_element)>(c.in, eqn);
    abi::set<cqc(ifc::cqc::dbr_addr)>(c.in, at + ((bytes + 4095) / 4096) * 4096);
    return c;
}

command create_qp(session& s, reader& in) {
    using In = ifc::create_qp_in;
    constexpr auto qpc = In::qpc;
    const std::uint32_t pd = s.pick(session::pd, in);
    const std::uint32_t scq = s.pick(session::cq, in);
    const std::uint32_t rcq = s.pick(session::cq, in);
    const std::uint32_t uar = s.pick(session::uar, in);
    const std::uint8_t b = in.u8();
    const std::uint32_t log_sq = 1u + (b & 3), log_rq = 1u + (b >> 2 & 3), log_stride = 1u + (b >> 4 & 1);
    const std::uint64_t at = page_address(in);
    const std::size_t bytes = (std::size_t{16} << log_stride << log_rq) + (std::size_t{64} << log_sq);
    command c = with_pages<In, ifc::create_qp_out>(opcode::create_qp, at, bytes);
    abi::set<qpc(ifc::qpc::st)>(c.in, (b & 0x40) != 0 ? in.u8() : static_cast<std::uint8_t>(ifc::qpc_st::rc));
    abi::set<qpc(ifc::qpc::pm_state)>(c.in, static_cast<std::uint8_t>(ifc::qpc_pm_state::migrated));
    abi::set<qpc(ifc::qpc::pd)>(c.in, pd);
    abi::set<qpc(ifc::qpc::cqn_snd)>(c.in, scq);
    abi::set<qpc(ifc::qpc::cqn_rcv)>(c.in, rcq);
    abi::set<qpc(ifc::qpc::uar_page)>(c.in, uar);
    abi::set<qpc(ifc::qpc::log_sq_size)>(c.in, log_sq);
    abi::set<qpc(ifc::qpc::log_rq_size)>(c.in, log_rq);
    abi::set<qpc(ifc::qpc::log_rq_stride)>(c.in, log_stride);
    abi::set<qpc(ifc::qpc::dbr_addr)>(c.in, at + ((bytes + 4095) / 4096) * 4096);
    return c;
}

// The QP transitions, with the fields firmware/mlx5 qp::rst2init, init2rtr and rtr2rts set.
command modify_qp(session& s, reader& in) {
    constexpr opcode ops[] = {opcode::rst2init_qp, opcode::init2rtr_qp, opcode::rtr2rts_qp, opcode::rts2rts_qp,
                              opcode::init2init_qp, opcode::sqerr2rts_qp, opcode::sqd_rts_qp, opcode::qp_2err,
                              opcode::qp_2rst};
    const std::uint8_t b = in.u8();
    const opcode op = ops[b % std::size(ops)];
    const std::uint32_t qpn = s.pick(session::qp, in);
    using In = ifc::rst2init_qp_in;  // every modify shares its layout
    if (op == opcode::qp_2err || op == opcode::qp_2rst) {
        command c = header<ifc::qp_2err_in, ifc::qp_2err_out>(op);
        abi::set<ifc::qp_2err_in::qpn>(c.in, qpn);
        return c;
    }
    command c = header<In, ifc::rst2init_qp_out>(op);
    abi::set<In::qpn>(c.in, qpn);
    const auto ctx = [](abi::field f) { return In::qpc(f); };
    const auto path = [](abi::field f) { return In::qpc(ifc::qpc::primary_address_path(f)); };
    const std::uint8_t v = in.u8();
    abi::set(c.in, path(ifc::ads::vhca_port_num), (v & 0x80) != 0 ? v & 0xf : 1);
    if (op == opcode::rst2init_qp || op == opcode::init2init_qp) {
        abi::set(c.in, ctx(ifc::qpc::rre), v & 1);
        abi::set(c.in, ctx(ifc::qpc::rwe), v >> 1 & 1);
    } else if (op == opcode::init2rtr_qp) {
        abi::set(c.in, ctx(ifc::qpc::mtu), 1u + v % 5);
        abi::set(c.in, ctx(ifc::qpc::log_msg_max), 31 - (v >> 3 & 1));
        abi::set(c.in, ctx(ifc::qpc::remote_qpn), in.u32() & 0xffffff);
        abi::set(c.in, ctx(ifc::qpc::next_rcv_psn), in.u16());
        abi::set(c.in, ctx(ifc::qpc::log_rra_max), v >> 4 & 7);
        std::array<std::byte, 16> rgid{std::byte{0xfe}, std::byte{0x80}};
        rgid[15] = std::byte{in.u8()};
        abi::set_bytes(c.in, path(ifc::ads::rgid_rip), rgid);
        abi::set(c.in, path(ifc::ads::rmac_47_32), 0x0252);
        abi::set(c.in, path(ifc::ads::rmac_31_0), 0x49470000u | in.u8());
        abi::set(c.in, path(ifc::ads::src_addr_index), in.u8() % 4);
        abi::set(c.in, path(ifc::ads::hop_limit), 64);
        abi::set(c.in, path(ifc::ads::udp_sport), 0xc000u | in.u8());
    } else {
        abi::set(c.in, ctx(ifc::qpc::next_send_psn), in.u16());
        abi::set(c.in, ctx(ifc::qpc::retry_count), v & 7);
        abi::set(c.in, ctx(ifc::qpc::rnr_retry), v >> 3 & 7);
        abi::set(c.in, ctx(ifc::qpc::log_ack_req_freq), 8);
        abi::set(c.in, path(ifc::ads::ack_timeout), 14);
    }
    return c;
}

command set_roce_address(reader& in) {
    using In = ifc::set_roce_address_in;
    command c = header<In, ifc::set_roce_address_out>(opcode::set_roce_address);
    const std::uint8_t b = in.u8();
    abi::set<In::roce_address_index>(c.in, b % 5);
    abi::set<In::vhca_port_num>(c.in, 1);
    std::array<std::byte, 16> gid{std::byte{0xfe}, std::byte{0x80}};
    gid[15] = std::byte{in.u8()};
    abi::set_bytes(c.in, In::roce_address(ifc::roce_addr_layout::source_l3_address), gid);
    abi::set(c.in, In::roce_address(ifc::roce_addr_layout::source_mac_47_32), 0x0252);
    abi::set(c.in, In::roce_address(ifc::roce_addr_layout::source_mac_31_0), 0x49470001);
    abi::set(c.in, In::roce_address(ifc::roce_addr_layout::roce_version),
             (b & 8) != 0 ? ifc::roce_addr::version_1 : ifc::roce_addr::version_2);
    abi::set(c.in, In::roce_address(ifc::roce_addr_layout::roce_l3_type), ifc::roce_addr::l3_type_ipv6);
    return c;
}

// The rest: their fixed input, filled with fuzz bytes after the header.
template <class In, class Out>
command filled(opcode op, reader& in) {
    command c = header<In, Out>(op, in.u16());
    in.fill(std::span(c.in).subspan(8, std::min<std::size_t>(c.in.size() - 8, 64)));
    return c;
}

template <class In, class Out>
command named(opcode op, abi::field number, std::uint32_t n) {
    command c = header<In, Out>(op);
    abi::set(c.in, number, n & ((std::uint64_t{1} << number.bits) - 1));  // a picked number may be wider
    return c;
}

}  // namespace

command built_command(session& s, reader& in) {
    switch (in.u8() % 28) {
    case 0: return header<ifc::nop_in, ifc::nop_out>(opcode::nop);
    case 1: return header<ifc::enable_hca_in, ifc::enable_hca_out>(opcode::enable_hca);
    case 2: return header<ifc::disable_hca_in, ifc::disable_hca_out>(opcode::disable_hca);
    case 3: return header<ifc::query_issi_in, ifc::query_issi_out>(opcode::query_issi);
    case 4: {
        command c = header<ifc::set_issi_in, ifc::set_issi_out>(opcode::set_issi);
        const std::uint8_t v = in.u8();
        abi::set<ifc::set_issi_in::current_issi>(c.in, v < 0x80 ? 1 : v);
        return c;
    }
    case 5: return header<ifc::query_pages_in, ifc::query_pages_out>(opcode::query_pages, 1u + in.u8() % 4);
    case 6: return manage_pages(s, in);
    case 7: return header<ifc::init_hca_in, ifc::init_hca_out>(opcode::init_hca);
    case 8: return header<ifc::teardown_hca_in, ifc::teardown_hca_out>(opcode::teardown_hca, in.u8() % 2);
    case 9: return query_hca_cap(in);
    case 10: return set_hca_cap(s, in);
    case 11: return header<ifc::query_adapter_in, ifc::query_adapter_out>(opcode::query_adapter);
    case 12: return header<ifc::alloc_uar_in, ifc::alloc_uar_out>(opcode::alloc_uar);
    case 13:
        return named<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(opcode::dealloc_uar, ifc::dealloc_uar_in::uar,
                                                                s.pick(session::uar, in));
    case 14: return header<ifc::alloc_pd_in, ifc::alloc_pd_out>(opcode::alloc_pd);
    case 15:
        return named<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(opcode::dealloc_pd, ifc::dealloc_pd_in::pd,
                                                              s.pick(session::pd, in));
    case 16: return create_mkey(s, in);
    case 17:
        return named<ifc::destroy_mkey_in, ifc::destroy_mkey_out>(opcode::destroy_mkey, ifc::destroy_mkey_in::mkey_index,
                                                                  s.pick(session::mkey, in));
    case 18: return create_eq(s, in);
    case 19:
        return named<ifc::destroy_eq_in, ifc::destroy_eq_out>(opcode::destroy_eq, ifc::destroy_eq_in::eq_number,
                                                              s.pick(session::eq, in));
    case 20: return create_cq(s, in);
    case 21:
        return named<ifc::destroy_cq_in, ifc::destroy_cq_out>(opcode::destroy_cq, ifc::destroy_cq_in::cqn,
                                                              s.pick(session::cq, in));
    case 22: return create_qp(s, in);
    case 23:
        return named<ifc::destroy_qp_in, ifc::destroy_qp_out>(opcode::destroy_qp, ifc::destroy_qp_in::qpn,
                                                              s.pick(session::qp, in));
    case 24: return modify_qp(s, in);
    case 25:
        return named<ifc::query_qp_in, ifc::query_qp_out>(opcode::query_qp, ifc::query_qp_in::qpn,
                                                          s.pick(session::qp, in));
    case 26: return set_roce_address(in);
    default:
        switch (in.u8() % 5) {
        case 0: return filled<ifc::query_vport_state_in, ifc::query_vport_state_out>(opcode::query_vport_state, in);
        case 1:
            return filled<ifc::query_nic_vport_context_in, ifc::query_nic_vport_context_out>(
                opcode::query_nic_vport_context, in);
        case 2:
            return filled<ifc::modify_nic_vport_context_in, ifc::modify_nic_vport_context_out>(
                opcode::modify_nic_vport_context, in);
        case 3: return filled<ifc::query_roce_address_in, ifc::query_roce_address_out>(opcode::query_roce_address, in);
        default: return filled<ifc::access_register_in, ifc::access_register_out>(opcode::access_reg, in);
        }
    }
}

}  // namespace rig::fuzz::mlx5
