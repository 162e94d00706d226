// The name tables of abi/bnxt/hwrm.hpp (req_type and error_code names, which the firmware
// layer's errors and command trace print) against the kernel's own defines: every HWRM_* request
// and HWRM_ERR_CODE_* code the oracle prints from bnxt_hsi.h (constants.def) is named by its
// define without the prefix, and every name in the tables is such a define with that value.
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "abi/bnxt/hwrm.hpp"
#include "oracle.hpp"

namespace abi = rig::bnxt::abi;
using namespace rig::test::bnxt;

namespace {

// The kernel's HWRM_ constants that are neither requests nor error codes.
const std::set<std::string> not_requests = {
    "HWRM_MAX_REQ_LEN", "HWRM_MAX_RESP_LEN",  "HWRM_NA_SIGNATURE",  "HWRM_RESP_VALID_KEY",
    "HWRM_VERSION_MAJOR", "HWRM_VERSION_MINOR", "HWRM_VERSION_UPDATE",
};

// name -> value of the kernel constants starting with `prefix` (the prefix dropped)
std::map<std::string, std::uint64_t> kernel_constants(const std::string& prefix, bool requests) {
    std::map<std::string, std::uint64_t> out;
    for (const std::string& l : oracle_dump()) {
        const auto w = words(l);
        if (w.size() != 3 || w[0] != "C" || w[1].rfind(prefix, 0) != 0) {
            continue;
        }
        if (requests && (not_requests.count(w[1]) != 0 || w[1].rfind("HWRM_ERR_CODE_", 0) == 0)) {
            continue;
        }
        out[w[1].substr(prefix.size())] = std::stoull(w[2], nullptr, 16);
    }
    return out;
}

}  // namespace

TEST_CASE("bnxt: HWRM request names are bnxt_hsi.h's", "[bnxt][vendor]") {
    const auto kernel = kernel_constants("HWRM_", true);
    REQUIRE(kernel.size() >= 20);
    for (const auto& [name, value] : kernel) {
        INFO("HWRM_" << name);
        CHECK(abi::hwrm_req_type_name(static_cast<std::uint16_t>(value)) == name);
    }
    for (std::uint32_t v = 0; v <= 0xffff; ++v) {
        const std::string name(abi::hwrm_req_type_name(static_cast<std::uint16_t>(v)));
        if (!name.empty()) {
            INFO(name);
            REQUIRE(kernel.count(name) == 1);
            CHECK(kernel.at(name) == v);
        }
    }
    CHECK(abi::hwrm_req_type_name(0x193) == "FUNC_BACKING_STORE_CFG");
    CHECK(abi::hwrm_req_type_name(0x1234) == "");
}

TEST_CASE("bnxt: HWRM error code names are bnxt_hsi.h's", "[bnxt][vendor]") {
    const auto kernel = kernel_constants("HWRM_ERR_CODE_", false);
    REQUIRE(kernel.size() == 24);
    for (const auto& [name, value] : kernel) {
        INFO("HWRM_ERR_CODE_" << name);
        CHECK(abi::hwrm_err_code_name(static_cast<std::uint16_t>(value)) == name);
    }
    for (std::uint32_t v = 0; v <= 0xffff; ++v) {
        const std::string name(abi::hwrm_err_code_name(static_cast<std::uint16_t>(v)));
        if (!name.empty()) {
            INFO(name);
            REQUIRE(kernel.count(name) == 1);
            CHECK(kernel.at(name) == v);
        }
    }
}
