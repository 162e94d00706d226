// rig-info: brings a ConnectX function up with Rig's own driver, prints what it is, and takes
// it down again.
//
//   rig-info 0000:3b:00.0                  (kernel VFIO: the function bound to vfio-pci)
//   rig-info vfio-user:/run/rig/mlx5-0.sock (the device model, rig-nicsim)
//   rig-info --commands DEVICE             (also every command executed, one JSON object a line)
//
// Exit status 0 when the function came up and went down cleanly; otherwise one line on stderr
// saying why, and 1 (2 for a bad command line).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/vport.hpp"
#include "driver/function.hpp"
#include "firmware/log.hpp"
#include "firmware/mlx5/command_trace.hpp"
#include "firmware/mlx5/hca.hpp"

namespace {

namespace fw = rig::firmware::mlx5;

constexpr std::string_view usage =
    "usage: rig-info [--commands] DEVICE\n"
    "Brings an mlx5 (ConnectX) function up with Rig's driver, prints its firmware version,\n"
    "the capabilities that matter to RoCE RC, the port state, MAC and GIDs, then tears it down.\n"
    "  DEVICE       0000:bb:dd.f (bound to vfio-pci) or vfio-user:PATH (rig-nicsim's socket)\n"
    "  --commands   also print every firmware command the driver executed, one JSON object per\n"
    "               line: {\"opcode\": 260, \"name\": \"ENABLE_HCA\", \"op_mod\": 0, \"status\": 0,\n"
    "               \"syndrome\": 0, \"in\": \"<hex>\", \"out\": \"<hex>\"}\n"
    "  --help       this text\n";

std::string mac_text(const std::array<std::uint8_t, 6>& m) {
    std::string s;
    static constexpr char digits[] = "0123456789abcdef";
    for (std::size_t i = 0; i < m.size(); ++i) {
        if (i != 0) {
            s += ':';
        }
        s += digits[m[i] >> 4];
        s += digits[m[i] & 0xf];
    }
    return s;
}

// An IPv6-style GID: eight groups of four hex digits.
std::string gid_text(const std::array<std::uint8_t, 16>& g) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (i != 0 && i % 2 == 0) {
            s += ':';
        }
        s += digits[g[i] >> 4];
        s += digits[g[i] & 0xf];
    }
    return s;
}

std::string pow2(unsigned log) { return std::to_string(1ull << log) + " (2^" + std::to_string(log) + ")"; }

void line(const std::string& key, const std::string& value) {
    std::printf("%-26s %s\n", key.c_str(), value.c_str());
}

int fail(const std::string& why) {
    std::fprintf(stderr, "rig-info: %s\n", why.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    bool commands = false;
    std::string device;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--help" || a == "-h") {
            std::fputs(usage.data(), stdout);
            return 0;
        }
        if (a == "--commands") {
            commands = true;
        } else if (a.starts_with("-")) {
            std::fprintf(stderr, "rig-info: unknown option %s\n%s", argv[i], usage.data());
            return 2;
        } else if (device.empty()) {
            device = a;
        } else {
            std::fprintf(stderr, "rig-info: one DEVICE only (%s and %s)\n", device.c_str(), argv[i]);
            return 2;
        }
    }
    if (device.empty()) {
        std::fprintf(stderr, "rig-info: no DEVICE given\n%s", usage.data());
        return 2;
    }

    // One line on failure: the layers' own warnings only when asked for (SPDLOG_LEVEL=fw=warn)
    if (std::getenv("SPDLOG_LEVEL") == nullptr) {
        rig::firmware::log().set_level(spdlog::level::err);
    }
    auto fn = rig::driver::open(device);
    if (!fn) {
        return fail(fn.error().message);
    }
    std::vector<std::string> trace;
    fw::hca_options options;
    if (commands) {
        options.trace = [&](const fw::command_record& r) { trace.push_back(fw::to_json(r)); };
    }
    auto nic = fw::hca::bring_up(**fn, options);
    if (!nic) {
        for (const std::string& l : trace) {
            std::puts(l.c_str());
        }
        return fail(device + ": " + nic.error().message);
    }
    const fw::hca& h = **nic;
    const fw::hca_caps& c = h.caps();
    line("device", device);
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

    auto down = (*nic)->teardown();
    if (commands) {
        for (const std::string& l : trace) {
            std::puts(l.c_str());
        }
    }
    if (!down) {
        return fail(device + ": " + down.error().message);
    }
    return 0;
}
