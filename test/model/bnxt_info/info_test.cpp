// rig-info on a bnxt function served by rig-nicsim --family bnxt (issue 14 §3: "rig-info
// vfio-user:DIR/bnxt-0.sock brings the model up"): the facts it prints, --commands as JSON
// lines of both channels in firmware/bnxt/device.hpp's bring-up order, and a refused step.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "json_check.hpp"
#include "tool_runner.hpp"

using namespace rig::test::bnxt_info;

namespace {

std::vector<std::string> lines_of(const std::string& out) {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);) {
        lines.push_back(l);
    }
    return lines;
}

// The value of the "name" key of a --commands line ("" when it has none).
std::string name_of(const std::string& json) {
    const std::string key = "\"name\": \"";
    const auto at = json.find(key);
    if (at == std::string::npos) {
        return "";
    }
    const auto from = at + key.size();
    return json.substr(from, json.find('"', from) - from);
}

}  // namespace

TEST_CASE("rig-info on bnxt: chip, versions, MAC, RoCE v2, port, then a clean teardown", "[bnxt_info]") {
    nicsim sim({});
    const auto [code, out] = rig_info({sim.where(0)});
    INFO(out);
    CHECK(code == 0);
    // VER_GET's chip_num (sim/bnxt: a BCM57508), named from abi/pci_ids.hpp
    CHECK(out.find("chip                       0x1750 BCM57508") != std::string::npos);
    CHECK(out.find("HWRM interface             1.") != std::string::npos);
    CHECK(out.find("RoCE firmware ") != std::string::npos);
    // rig-nicsim gives function k the MAC 02:00:00:00:00:0k+1 (tools/rig-nicsim.cpp mac_number),
    // which the model answers in FUNC_QCAPS
    CHECK(out.find("mac                        02:00:00:00:00:01\n") != std::string::npos);
    CHECK(out.find("RoCE versions              ") != std::string::npos);
    CHECK(out.find("v2\n") != std::string::npos);
    // PORT_PHY_QCFG: the model's cable is up at 100 Gb/s by default
    CHECK(out.find("port                       up, 100 Gb/s") != std::string::npos);
    CHECK(out.find("doorbells                  BAR2 0x10000") != std::string::npos);  // P5 PF (FUNC_QCFG)
    // QUERY_FUNC answered over the RoCE channel
    CHECK(out.find("queue pairs ") != std::string::npos);
    // ADD_GID answered: the link-local GID of the MAC (fe80::ff:fe00:1, modified EUI-64 of
    // 02:00:00:00:00:01) at the model's index 0, and no RoCE-channel refusal
    CHECK(out.find("gid 0                      fe80:0000:0000:0000:0000:00ff:fe00:0001 RoCE v2 IPv6\n") !=
          std::string::npos);
    CHECK(out.find("RoCE channel               not brought up") == std::string::npos);
    CHECK(out.find("{\"channel\"") == std::string::npos);  // no trace without --commands

    // the function came back clean: a second run brings it up again
    const auto again = rig_info({sim.where(0)});
    INFO(again.second);
    CHECK(again.first == 0);
}

TEST_CASE("rig-info --commands on bnxt: JSON lines of both channels in bring-up order", "[bnxt_info]") {
    nicsim sim({});
    const auto [code, out] = rig_info({"--commands", sim.where(0)});
    INFO(out);
    REQUIRE(code == 0);
    std::vector<std::string> names;
    bool rcfw = false;
    for (const std::string& l : lines_of(out)) {
        if (!l.starts_with("{")) {
            continue;
        }
        INFO(l);
        CHECK(json_check::object_line(l));
        CHECK((l.starts_with("{\"channel\": \"hwrm\", \"opcode\": ") ||
               l.starts_with("{\"channel\": \"rcfw\", \"opcode\": ")));
        CHECK(l.find("\"syndrome\": ") != std::string::npos);
        CHECK(l.find("\"in\": \"") != std::string::npos);
        CHECK(l.find("\"out\": \"") != std::string::npos);
        rcfw = rcfw || l.starts_with("{\"channel\": \"rcfw\"");
        names.push_back(name_of(l));
    }
    // firmware/bnxt/device.hpp's steps: VER_GET, FUNC_RESET, FUNC_QCAPS, FUNC_DRV_RGTR, BACKING_STORE
    // (FUNC_BACKING_STORE_QCAPS, FUNC_BACKING_STORE_CFG), FUNC_RESOURCE_QCAPS, FUNC_QCFG, FUNC_CFG,
    // STAT_CTX_ALLOC, VNIC_ALLOC, VNIC_CFG, CFA_L2_FILTER_ALLOC, RING_ALLOC
    const std::vector<std::string> order = {"VER_GET",        "FUNC_RESET",          "FUNC_QCAPS",
                                            "FUNC_DRV_RGTR",  "FUNC_BACKING_STORE_QCAPS", "FUNC_BACKING_STORE_CFG",
                                            "FUNC_RESOURCE_QCAPS", "FUNC_QCFG",      "FUNC_CFG",
                                            "STAT_CTX_ALLOC", "VNIC_ALLOC",          "VNIC_CFG",
                                            "CFA_L2_FILTER_ALLOC", "RING_ALLOC"};
    REQUIRE(names.size() > order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
        CHECK(names[i] == order[i]);
    }
    CHECK(rcfw);  // QUERY_FUNC and INITIALIZE_FW at least (the model answers RCFW)
    CHECK(std::find(names.begin(), names.end(), "QUERY_FUNC") != names.end());
    CHECK(std::find(names.begin(), names.end(), "FUNC_DRV_UNRGTR") != names.end());
    CHECK(names.back() == "FUNC_RESET");  // teardown's last request
}

TEST_CASE("rig-info on bnxt: FUNC_QCAPS refused by the firmware names the request and exits 1", "[bnxt_info]") {
    nicsim sim({"--fault-fail", "hwrm:0x15:0x2"});
    const auto [code, out] = rig_info({sim.where(0)});
    INFO(out);
    CHECK(code == 1);
    CHECK(out.rfind("rig-info: " + sim.where(0) + ": ", 0) == 0);
    CHECK(out.find("FUNC_QCAPS (0x15): INVALID_PARAMS (0x2)") != std::string::npos);
    CHECK(out.find("chip ") == std::string::npos);  // nothing printed as if it came up
}
