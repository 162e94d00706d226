#pragma once
// Errors of the bnxt firmware channels: a value that names the request and what went wrong,
// never an abort (docs/guide.md, "Failures and errors").
//   "FUNC_BACKING_STORE_CFG (0x193): INVALID_PARAMS (0x2), cmd_err 0x1"
//   "VER_GET (0x0): no response within 500 ms"
// `channel` is "hwrm" (the ChiMP request window, bnxt_hsi.h) or "rcfw" (the RoCE
// command queue, roce_hsi.h): their opcode and status spaces differ.
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"

namespace rig::firmware::bnxt {

namespace abi = ::rig::bnxt::abi;

enum class error_kind {
    status,      // the firmware ran the request and refused it (error_code != SUCCESS)
    timeout,     // no response before the deadline: the buffers it names are stranded
    transport,   // the PCI layer failed (BAR access, DMA memory)
    bad_output,  // the response does not match the request (seq_id, req_type, length)
    bad_input,   // the caller's request is malformed (shorter than its header, too long)
    fatal,       // the firmware stopped answering or the function is gone: nothing more is sent
};

constexpr std::string_view to_string(error_kind k) noexcept {
    switch (k) {
    case error_kind::status: return "status";
    case error_kind::timeout: return "timeout";
    case error_kind::transport: return "transport";
    case error_kind::bad_output: return "bad output";
    case error_kind::bad_input: return "bad input";
    case error_kind::fatal: return "fatal";
    }
    return "unknown error kind";
}

struct error {
    error_kind kind = error_kind::transport;
    std::string_view channel = "hwrm";
    std::uint16_t req_type = 0;    // the request (HWRM req_type, RCFW opcode); 0 with no request
    std::uint16_t error_code = 0;  // kind == status: HWRM error_code (RCFW: CREQ status)
    std::uint8_t cmd_err = 0;      // kind == status: hwrm_err_output.cmd_err
    std::string message;
};

// "FUNC_BACKING_STORE_CFG (0x193)"; a req_type abi/bnxt does not name: "HWRM request 0x1234".
inline std::string request_name(std::uint16_t req_type) {
    const std::string_view n = abi::hwrm_req_type_name(req_type);
    return (n.empty() ? std::string("HWRM request") : std::string(n)) + " (" + ::rig::abi::hex(req_type) + ")";
}

// "INVALID_PARAMS (0x2)"; a code bnxt_hsi.h does not list: "error 0x15".
inline std::string error_code_name(std::uint16_t code) {
    const std::string_view n = abi::hwrm_err_code_name(code);
    return n.empty() ? "error " + ::rig::abi::hex(code) : std::string(n) + " (" + ::rig::abi::hex(code) + ")";
}

// An error no request's answer carries (setup, the PCI layer), said by `message`.
inline error plain_error(error_kind kind, std::string message) {
    error e;
    e.kind = kind;
    e.message = std::move(message);
    return e;
}

template <class T>
using result = std::expected<T, error>;

}  // namespace rig::firmware::bnxt
