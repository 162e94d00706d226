#include "firmware/mlx5/capabilities.hpp"

#include <cstring>
#include <string>
#include <span>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/hca_cap.hpp"

namespace rig::firmware::mlx5 {

namespace {

using cap = ifc::cmd_hca_cap;
using rcap = ifc::roce_cap;

constexpr std::size_t cap_page_at = ifc::query_hca_cap_out::capability.whole().byte_offset();
constexpr std::size_t cap_union_bytes = ifc::hca_cap_union::size_bytes;


}  // namespace

result<hca_caps> negotiate_capabilities(command_queue& q, bool init_link_down, command_queue::clock::time_point by,
                                        bool checksums) {
    using QIn = ifc::query_hca_cap_in;
    using QOut = ifc::query_hca_cap_out;
    using SIn = ifc::set_hca_cap_in;
    const auto query = [&](ifc::cap_type t, ifc::cap_mode m) -> result<std::vector<std::byte>> {
        auto in = command_input<QIn>(ifc::opcode::query_hca_cap, ifc::query_hca_cap_op_mod(t, m));
        auto out = q.exec<QIn, QOut>(in, by);
        if (!out) {
            return std::unexpected(std::move(out.error()));
        }
        return std::vector<std::byte>(out->begin() + cap_page_at, out->begin() + cap_page_at + cap_union_bytes);
    };
    const auto set = [&](ifc::cap_type t, std::span<const std::byte> page) -> result<void> {
        auto in = command_input<SIn>(ifc::opcode::set_hca_cap, ifc::set_hca_cap_op_mod(t));
        std::memcpy(in.data() + cap_page_at, page.data(), cap_union_bytes);
        auto out = q.exec<SIn, ifc::set_hca_cap_out>(in, by);
        if (!out) {
            return std::unexpected(std::move(out.error()));
        }
        return {};
    };
    using enum ifc::cap_type;
    auto max = query(general_device, ifc::cap_mode::max);
    if (!max) {
        return std::unexpected(std::move(max.error()));
    }
    auto cur = query(general_device, ifc::cap_mode::cur);
    if (!cur) {
        return std::unexpected(std::move(cur.error()));
    }
    if (abi::get<cap::port_type>(*cur) != static_cast<std::uint8_t>(ifc::port_type::ethernet) ||
        abi::get<cap::roce>(*cur) == 0) {
        return std::unexpected(plain_error(error_kind::bad_output,
                                           "the NIC's port is not Ethernet with RoCE (port_type " +
                                               std::to_string(abi::get<cap::port_type>(*cur)) + ", roce " +
                                               std::to_string(abi::get<cap::roce>(*cur)) + ")"));
    }
    // What rdma-core's set_hca_cap writes back (providers/mlx5/mlx5_vfio.c): checksums off, 4 KiB
    // UAR pages, named mkeys and a link kept down only when the NIC offers them. Checksums on only
    // when asked, and only on a NIC that offers them (MAX ENABLED, mlx5_ifc.h).
    constexpr auto checksum_enabled = static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::enabled);
    if (checksums && abi::get<cap::cmdif_checksum>(*max) != checksum_enabled) {
        return std::unexpected(plain_error(error_kind::bad_output,
                                           "command checksums asked for, but the NIC does not offer them "
                                           "(MAX cmdif_checksum " +
                                               std::to_string(abi::get<cap::cmdif_checksum>(*max)) + ")"));
    }
    std::vector<std::byte> want = *cur;
    abi::set<cap::cmdif_checksum>(
        want, checksums ? checksum_enabled : static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::disabled));
    abi::set<cap::log_uar_page_sz>(want, 0);
    if (abi::get<cap::mkey_by_name>(*max) != 0) {
        abi::set<cap::mkey_by_name>(want, 1);
    }
    if (init_link_down && abi::get<cap::disable_link_up>(*max) != 0) {
        abi::set<cap::disable_link_up>(want, 1);
    }
    if (auto r = set(general_device, want); !r) {
        return std::unexpected(std::move(r.error()));
    }
    // RoCE caps (step 13): let software choose the RoCEv2 UDP source port
    auto rmax = query(roce, ifc::cap_mode::max);
    if (!rmax) {
        return std::unexpected(std::move(rmax.error()));
    }
    auto rcur = query(roce, ifc::cap_mode::cur);
    if (!rcur) {
        return std::unexpected(std::move(rcur.error()));
    }
    if (abi::get<rcap::sw_r_roce_src_udp_port>(*rcur) == 0 && abi::get<rcap::sw_r_roce_src_udp_port>(*rmax) != 0) {
        std::vector<std::byte> rwant = *rcur;
        abi::set<rcap::sw_r_roce_src_udp_port>(rwant, 1);
        if (auto r = set(roce, rwant); !r) {
            return std::unexpected(std::move(r.error()));
        }
    }
    // what the NIC now says
    cur = query(general_device, ifc::cap_mode::cur);
    if (!cur) {
        return std::unexpected(std::move(cur.error()));
    }
    rcur = query(roce, ifc::cap_mode::cur);
    if (!rcur) {
        return std::unexpected(std::move(rcur.error()));
    }
    const auto g = [&](abi::field f) { return abi::get(std::span<const std::byte>(*cur), f); };
    const auto r = [&](abi::field f) { return abi::get(std::span<const std::byte>(*rcur), f); };
    const auto u8 = [](std::uint64_t v) { return static_cast<std::uint8_t>(v); };
    const auto u16 = [](std::uint64_t v) { return static_cast<std::uint16_t>(v); };
    hca_caps c;
    c.port_type = u8(g(cap::port_type));
    c.roce = g(cap::roce) != 0;
    c.num_ports = u8(g(cap::num_ports));
    c.log_max_qp = u8(g(cap::log_max_qp));
    c.log_max_qp_sz = u8(g(cap::log_max_qp_sz));
    c.log_max_cq = u8(g(cap::log_max_cq));
    c.log_max_cq_sz = u8(g(cap::log_max_cq_sz));
    c.log_max_eq = u8(g(cap::log_max_eq));
    c.log_max_eq_sz = u8(g(cap::log_max_eq_sz));
    c.log_max_mkey = u8(g(cap::log_max_mkey));
    c.log_max_pd = u8(g(cap::log_max_pd));
    c.log_max_msg = u8(g(cap::log_max_msg));
    c.log_max_ra_req_qp = u8(g(cap::log_max_ra_req_qp));
    c.log_max_ra_res_qp = u8(g(cap::log_max_ra_res_qp));
    c.gid_table_size = u16(g(cap::gid_table_size));
    c.cqe_version = u8(g(cap::cqe_version));
    c.uar_sz = u8(g(cap::uar_sz));
    c.log_bf_reg_size = u8(g(cap::log_bf_reg_size));
    c.bf = g(cap::bf) != 0;
    c.max_wqe_sz_sq = u16(g(cap::max_wqe_sz_sq));
    c.max_wqe_sz_rq = u16(g(cap::max_wqe_sz_rq));
    c.force_teardown = g(cap::force_teardown) != 0;
    c.fast_teardown = g(cap::fast_teardown) != 0;
    c.cmdif_checksum = g(cap::cmdif_checksum) == checksum_enabled;
    c.roce_version = u8(r(rcap::roce_version));
    c.l3_type = u8(r(rcap::l3_type));
    c.r_roce_dest_udp_port = u16(r(rcap::r_roce_dest_udp_port));
    c.r_roce_min_src_udp_port = u16(r(rcap::r_roce_min_src_udp_port));
    c.r_roce_max_src_udp_port = u16(r(rcap::r_roce_max_src_udp_port));
    c.sw_r_roce_src_udp_port = r(rcap::sw_r_roce_src_udp_port) != 0;
    c.roce_address_table_size = u16(r(rcap::roce_address_table_size));
    return c;
}

}  // namespace rig::firmware::mlx5
