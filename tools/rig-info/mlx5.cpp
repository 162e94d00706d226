// rig-info on mlx5 (ConnectX): firmware/mlx5's hca brought up, its facts printed, torn down.
#include <string>
#include <vector>

#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/vport.hpp"
#include "firmware/mlx5/command_trace.hpp"
#include "firmware/mlx5/hca.hpp"
#include "rig/info.hpp"
#include "qp/mlx5/error.hpp"
#include "tools/rig-info/report.hpp"
#include "tools/rig-info/text.hpp"

namespace rig::info {

namespace {

namespace fw = rig::firmware::mlx5;

void print_caps(const fw::hca_caps& c) {
    line("queue pairs", pow2(c.log_max_qp) + ", " + pow2(c.log_max_qp_sz) + " entries each");
    line("completion queues", pow2(c.log_max_cq) + ", " + pow2(c.log_max_cq_sz) + " entries each");
    line("event queues", pow2(c.log_max_eq) + ", " + pow2(c.log_max_eq_sz) + " entries each");
    line("memory keys", pow2(c.log_max_mkey));
    line("protection domains", pow2(c.log_max_pd));
    line("max message", pow2(c.log_max_msg) + " bytes");
    line("RDMA READs in flight", std::to_string(1u << c.log_max_ra_req_qp) + " as requester, " +
                                     std::to_string(1u << c.log_max_ra_res_qp) + " as responder");
    line("GID table", std::to_string(c.gid_table_size) + " entries");
    line("RoCE versions", std::string((c.roce_version & 1) != 0 ? "v1 " : "") + ((c.roce_version & 4) != 0 ? "v2" : ""));
    line("RoCE UDP port", std::to_string(c.r_roce_dest_udp_port) + ", source ports " +
                              (c.sw_r_roce_src_udp_port ? "chosen by software"
                                                        : std::to_string(c.r_roce_min_src_udp_port) + ".." +
                                                              std::to_string(c.r_roce_max_src_udp_port)));
    line("max WQE", std::to_string(c.max_wqe_sz_sq) + " bytes send, " + std::to_string(c.max_wqe_sz_rq) + " receive");
    line("CQE version", std::to_string(c.cqe_version));
    line("teardown", std::string("graceful") + (c.force_teardown ? ", force" : "") + (c.fast_teardown ? ", fast" : ""));
}

void print_lines(const std::vector<std::string>& lines) {
    for (const std::string& l : lines) {
        std::puts(l.c_str());
    }
}

}  // namespace

int report_mlx5(driver::function& fn, const request& rq) {
    std::vector<std::string> trace;
    fw::hca_options options;
    if (rq.commands) {
        // the API's record (rig::command_record): every family's lines have the same keys
        options.trace = [&](const fw::command_record& r) { trace.push_back(rig::to_json(rig::qp::mlx5::to_record(r))); };
    }
    auto nic = fw::hca::bring_up(fn, options);
    if (!nic) {
        print_lines(trace);
        return fail(rq.device + ": " + nic.error().message);
    }
    const fw::hca& h = **nic;
    const fw::hca_caps& c = h.caps();
    line("device", rq.device);
    line("firmware", h.version().text());
    line("port 1", std::string(h.port_up() ? "up" : "down") +
                       (c.port_type == static_cast<std::uint8_t>(rig::mlx5::ifc::port_type::ethernet) ? ", Ethernet"
                                                                                                    : ", InfiniBand") +
                       ", RoCE enabled");
    line("mac", mac_text(h.mac()));
    for (const fw::gid_entry& g : h.gids()) {
        line("gid " + std::to_string(g.index),
             gid_text(g.gid) + (g.roce_version == rig::mlx5::ifc::roce_addr::version_2 ? " RoCE v2" : " RoCE v1") +
                 (g.l3_type == rig::mlx5::ifc::roce_addr::l3_type_ipv6 ? " IPv6" : " IPv4"));
    }
    print_caps(c);

    auto down = (*nic)->teardown();
    if (rq.commands) {
        print_lines(trace);
    }
    if (!down) {
        return fail(rq.device + ": " + down.error().message);
    }
    return 0;
}

}  // namespace rig::info
