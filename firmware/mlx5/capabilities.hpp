#pragma once
// The capabilities step of bring-up (rdma-core mlx5_vfio.c set_hca_cap and
// handle_hca_cap_roce; the kernel's main.c handle_hca_cap): what the
// NIC can do, and the few settings a driver writes back before INIT_HCA.
//
// negotiate_capabilities queries the general and RoCE capability pages (MAX, then CUR), refuses
// a port that is not Ethernet with RoCE, writes back with SET_HCA_CAP what rdma-core's
// set_hca_cap writes (cmdif_checksum 0, log_uar_page_sz 0 for 4 KiB host pages, mkey_by_name
// when MAX offers it, disable_link_up when asked and offered; RoCE sw_r_roce_src_udp_port when
// offered), and decodes the CUR pages as the NIC then reports them. With `checksums` it writes
// cmdif_checksum ENABLED instead (command signatures checked by the device, kernel cmd.c
// set_signature), and refuses a NIC whose MAX does not offer it.
#include <cstdint>

#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/error.hpp"

namespace rig::firmware::mlx5 {

// The capabilities that matter to a RoCE RC driver, as the NIC reports them after SET_HCA_CAP.
struct hca_caps {
    std::uint8_t port_type = 0;  // ifc::port_type: 1 Ethernet
    bool roce = false;
    std::uint8_t num_ports = 0;
    std::uint8_t log_max_qp = 0, log_max_qp_sz = 0;
    std::uint8_t log_max_cq = 0, log_max_cq_sz = 0;
    std::uint8_t log_max_eq = 0, log_max_eq_sz = 0;
    std::uint8_t log_max_mkey = 0, log_max_pd = 0;
    std::uint8_t log_max_msg = 0;
    std::uint8_t log_max_ra_req_qp = 0, log_max_ra_res_qp = 0;
    std::uint16_t gid_table_size = 0;
    std::uint8_t cqe_version = 0;
    std::uint8_t uar_sz = 0, log_bf_reg_size = 0;
    bool bf = false;  // BlueFlame registers (the kernel's mlx5_wc_support_get requires it)
    std::uint16_t max_wqe_sz_sq = 0, max_wqe_sz_rq = 0;
    bool force_teardown = false, fast_teardown = false;
    bool cmdif_checksum = false;  // CUR cmdif_checksum ENABLED: command signatures are checked
    // RoCE caps (cap type 4)
    std::uint8_t roce_version = 0;  // bit mask: bit 2 RoCE v2
    std::uint8_t l3_type = 0;       // bit mask: bit 1 IPv4, bit 2 IPv6
    std::uint16_t r_roce_dest_udp_port = 0;
    std::uint16_t r_roce_min_src_udp_port = 0, r_roce_max_src_udp_port = 0;
    bool sw_r_roce_src_udp_port = false;
    std::uint16_t roce_address_table_size = 0;
};

result<hca_caps> negotiate_capabilities(command_queue& q, bool init_link_down, command_queue::clock::time_point by,
                                        bool checksums = false);

}  // namespace rig::firmware::mlx5
