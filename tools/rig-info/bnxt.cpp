// rig-info on bnxt (Thor, BCM5750x): firmware/bnxt's device brought up through HWRM and, when
// the firmware answers it, the RoCE command channel (RCFW); its facts printed; torn down.
//
// Facts the device object does not keep (VER_GET's chip revision and short-command bits,
// FUNC_QCAPS's flags, QUERY_FUNC's raw limits) are decoded from the command trace, which is
// always on here: it holds every answer the firmware gave, whole (command_trace.hpp).
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "abi/bnxt/hwrm_cmds.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "firmware/bnxt/device.hpp"
#include "rig/info.hpp"
#include "qp/bnxt/error.hpp"
#include "tools/rig-info/report.hpp"
#include "tools/rig-info/text.hpp"

namespace rig::info {

namespace {

namespace fw = rig::firmware::bnxt;
namespace abi = rig::bnxt::abi;
using rig::abi::hex;

using records = std::vector<fw::command_record>;

// The last successful answer to `opcode` on `channel`, decoded as Out from byte `skip` on (an
// RCFW record's out is the 16-byte CREQ entry, then the side buffer).
template <class Out>
std::optional<Out> answer(const records& trace, std::string_view channel, std::uint16_t opcode, std::size_t skip = 0) {
    for (auto r = trace.rbegin(); r != trace.rend(); ++r) {
        if (r->channel == channel && r->opcode == opcode && r->status == 0 && r->out.size() > skip) {
            auto out = abi::decode<Out>(std::span(r->out).subspan(skip));
            return out ? std::optional<Out>(*out) : std::nullopt;
        }
    }
    return std::nullopt;
}

// The chip's name: abi/pci_ids.hpp's entry whose PF device ID is the chip number (Thor's
// chip_num is its PF device ID: VER_GET 0x1750 on a BCM57508), else the function's own.
std::string_view chip_name(std::uint16_t chip_num, const rig::abi::pci::device_id& fn_id) {
    for (const auto& d : rig::abi::pci::devices) {
        if (d.family == rig::abi::pci::family::bnxt && !d.vf && d.device == chip_num) {
            return d.name;
        }
    }
    return fn_id.name;
}

// Was the failure in one of the RoCE channel's steps (RCFW .. ADD_GID)?
bool roce_step_failed(const fw::error& e) {
    using s = fw::bring_up_step;
    for (s step : {s::rcfw, s::query_func, s::initialize_fw, s::add_gid}) {
        if (e.message.starts_with("bring-up step " + std::string(fw::to_string(step)) + ":")) {
            return true;
        }
    }
    return false;
}

void print_firmware(const fw::device& d, const records& trace, const rig::abi::pci::device_id& id) {
    const fw::firmware_versions& v = d.versions();
    line("HWRM interface", v.text(v.hwrm_interface));
    line("HWRM firmware", v.text(v.hwrm_firmware));
    line("RoCE firmware", v.text(v.roce_firmware));
    const auto ver = answer<abi::hwrm_ver_get_output>(trace, "hwrm", abi::HWRM_VER_GET);
    std::string chip = hex(d.chip_num()) + " " + std::string(chip_name(d.chip_num(), id));
    if (ver) {
        chip += ", rev " + std::to_string(ver->chip_rev) + " metal " + std::to_string(ver->chip_metal);
        const bool supported = (ver->dev_caps_cfg & abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_SUPPORTED) != 0;
        const bool required = (ver->dev_caps_cfg & abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_REQUIRED) != 0;
        line("chip", chip);
        line("short commands", required && supported ? "required (hwrm_short_input)"
                               : supported           ? "supported, not required"
                                                     : "not supported");
        line("HWRM window", std::to_string(ver->max_req_win_len) + " bytes request, " +
                                std::to_string(ver->max_resp_len) + " response, " +
                                std::to_string(ver->def_req_timeout) + " ms timeout");
    } else {
        line("chip", chip);
    }
}

void print_function(fw::device& d, const records& trace) {
    const auto caps = answer<abi::hwrm_func_qcaps_output>(trace, "hwrm", abi::HWRM_FUNC_QCAPS);
    std::string roce = "v2";  // bring-up refuses a function without ROCE_V2_SUPPORTED
    if (caps && (caps->flags & abi::FUNC_QCAPS_RESP_FLAGS_ROCE_V1_SUPPORTED) != 0) {
        roce = "v1 v2";
    }
    line("function", "fid " + std::to_string(d.fid()) + (caps ? ", port " + std::to_string(caps->port_id) : ""));
    line("RoCE versions", roce);
    line("mac", mac_text(d.mac()));
    // PORT_PHY_QCFG, as bnxt_update_link reads it: link_speed in units of 100 Mb/s
    auto phy = d.hwrm().send<abi::hwrm_port_phy_qcfg_output>(abi::hwrm_port_phy_qcfg_input{},
                                                             fw::device::clock::now() + std::chrono::seconds(5));
    if (phy) {
        const bool up = phy->link == abi::PORT_PHY_QCFG_RESP_LINK_LINK;
        line("port", std::string(up ? "up" : "down") +
                         (up ? ", " + std::to_string(phy->link_speed / 10) + " Gb/s" : std::string()) +
                         ", MTU " + std::to_string(d.port_mtu()));
    } else {
        line("port", "unknown (" + phy.error().message + "), MTU " + std::to_string(d.port_mtu()));
    }
    line("doorbells", "BAR2 " + hex(d.doorbell_offset()) + ", " + hex(d.doorbell_size()) + " bytes");
    line("resource manager", d.resource_manager() ? "new (FUNC_CFG reservations)" : "old (no reservations)");
    if (const fw::context_memory* m = d.contexts(); m != nullptr) {
        line("context memory", std::to_string(m->bytes() / 1024) + " KiB in " + std::to_string(m->blocks().size()) +
                                   " types (FUNC_BACKING_STORE_CFG)");
        for (const fw::context_block& b : m->blocks()) {
            line("  " + b.type, std::to_string(b.entries) + " x " + std::to_string(b.entry_size) + " bytes, level " +
                                    std::to_string(b.level) + (b.initialized ? ", initialized" : ""));
        }
    }
}

// QUERY_FUNC's limits as the firmware gave them (raw: bnxt_qplib_get_dev_attr adds QP1 to
// max_qp and keeps one WQE back of max_qp_wr).
void print_roce(const fw::device& d, const records& trace, const std::optional<fw::error>& roce_refused) {
    const auto sb = answer<abi::creq_query_func_resp_sb>(trace, "rcfw", abi::CMDQ_BASE_OPCODE_QUERY_FUNC, 16);
    if (sb) {
        line("queue pairs", std::to_string(sb->max_qp) + ", " + std::to_string(sb->max_qp_wr) + " WQEs each, " +
                                std::to_string(sb->max_sge) + " SGEs");
        line("completion queues", std::to_string(sb->max_cq) + ", " + std::to_string(sb->max_cqe) + " entries each");
        line("memory regions", std::to_string(sb->max_mr) + ", up to " + std::to_string(sb->max_mr_size) + " bytes");
        line("protection domains", std::to_string(sb->max_pd));
        line("RDMA READs in flight", std::to_string(sb->max_qp_init_rd_atom) + " as requester, " +
                                         std::to_string(sb->max_qp_rd_atom) + " as responder");
        line("GID table", std::to_string(sb->max_gid) + " entries");
        line("requester retransmits", (sb->dev_cap_flags & abi::CREQ_QUERY_FUNC_RESP_SB_HW_REQUESTER_RETX_ENABLED) != 0
                                          ? "in hardware"
                                          : "by firmware");
    } else {
        line("RoCE limits", "unknown (QUERY_FUNC not answered)");
    }
    if (d.gid_index()) {
        line("gid " + std::to_string(*d.gid_index()), gid_text(d.gid()) + " RoCE v2 IPv6");
    }
    if (roce_refused) {
        line("RoCE channel", "not brought up: " + roce_refused->message + "; shown as far as HWRM and QUERY_FUNC go");
    }
}

void print_json(const records& trace) {
    for (const fw::command_record& r : trace) {
        std::puts(rig::to_json(qp::bnxt::to_record(r)).c_str());
    }
}

}  // namespace

int report_bnxt(driver::function& fn, const rig::abi::pci::device_id& id, const request& rq) {
    records trace;
    fw::device_options options;
    options.trace = [&](const fw::command_record& r) { trace.push_back(r); };
    options.roce_channel = true;
    auto d = fw::device::bring_up(fn, options);
    std::optional<fw::error> roce_refused;
    if (!d && roce_step_failed(d.error())) {
        // The RoCE channel refused (a firmware or model without it): the undo left the function
        // as it found it, so bring it up again on HWRM alone and say what was missing.
        roce_refused = d.error();
        options.roce_channel = false;
        d = fw::device::bring_up(fn, options);
    }
    if (!d) {
        if (rq.commands) {
            print_json(trace);
        }
        return fail(rq.device + ": " + d.error().message);
    }
    line("device", rq.device + " (" + std::string(id.name) + ")");
    print_firmware(**d, trace, id);
    print_function(**d, trace);
    print_roce(**d, trace, roce_refused);
    auto down = (*d)->teardown();
    if (rq.commands) {
        print_json(trace);
    }
    if (!down) {
        return fail(rq.device + ": " + down.error().message);
    }
    return 0;
}

}  // namespace rig::info
