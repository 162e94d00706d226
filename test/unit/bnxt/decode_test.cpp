// abi/bnxt decoders of device-written memory: CQEs, CREQ entries, HWRM responses. Malformed
// input (a short buffer, an unknown type, an unknown event or opcode, a length outside the
// buffer) is an error value (rig::bnxt::abi::decode_error), never an exception and never a read
// past the buffer. Field-by-field round trips against the kernel's structs are in
// layout_vendor_test.cpp; here: the dispatch, the validity bits, the names.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "abi/bnxt/bnxt.hpp"

namespace abi = rig::bnxt::abi;

namespace {

template <class L>
std::vector<std::byte> bytes_of(const L& v) {
    const auto b = abi::to_bytes(v);
    return {b.begin(), b.end()};
}

// A buffer of exactly n bytes on the heap, so that a read past it is caught by sanitizers.
std::vector<std::byte> exactly(const std::vector<std::byte>& b, std::size_t n) {
    return {b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n)};
}

}  // namespace

TEST_CASE("bnxt: CQEs decode by their type", "[bnxt][cqe]") {
    abi::cq_req req{};
    req.qp_handle = 0x1122334455667788;
    req.sq_cons_idx = 0x1234;
    req.toggle = 1;
    req.cqe_type = abi::CQ_BASE_CQE_TYPE_REQ;
    req.status = abi::CQ_REQ_STATUS_TRANSPORT_RETRY_CNT_ERR;
    auto d = abi::decode_cqe(bytes_of(req));
    REQUIRE(d.has_value());
    REQUIRE(std::holds_alternative<abi::cq_req>(*d));
    CHECK(std::get<abi::cq_req>(*d) == req);

    abi::cq_res_rc res{};
    res.length = 4096;
    res.qp_handle = 0xabcdef;
    res.cqe_type = abi::CQ_BASE_CQE_TYPE_RES_RC;
    res.status = abi::CQ_RES_RC_STATUS_WORK_REQUEST_FLUSHED_ERR;
    res.flags = abi::CQ_RES_RC_FLAGS_IMM;
    res.srq_or_rq_wr_id = 0xfffff;
    d = abi::decode_cqe(bytes_of(res));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::cq_res_rc>(*d) == res);

    abi::cq_res_ud ud{};
    ud.cqe_type = abi::CQ_BASE_CQE_TYPE_RES_UD;
    ud.length = 0x3fff;
    d = abi::decode_cqe(bytes_of(ud));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::cq_res_ud>(*d) == ud);

    abi::cq_terminal term{};
    term.cqe_type = abi::CQ_BASE_CQE_TYPE_TERMINAL;
    term.qp_handle = 7;
    term.sq_cons_idx = 3;
    term.rq_cons_idx = 0xffff;
    d = abi::decode_cqe(bytes_of(term));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::cq_terminal>(*d) == term);

    abi::cq_cutoff cut{};
    cut.cqe_type = abi::CQ_BASE_CQE_TYPE_CUT_OFF;
    cut.resize_toggle = 2;
    d = abi::decode_cqe(bytes_of(cut));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::cq_cutoff>(*d) == cut);

    abi::cq_base nop{};
    nop.cqe_type = abi::CQ_BASE_CQE_TYPE_NO_OP;
    d = abi::decode_cqe(bytes_of(nop));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::cq_base>(*d).cqe_type == abi::CQ_BASE_CQE_TYPE_NO_OP);
}

TEST_CASE("bnxt: a CQE of a type an RC driver does not take is an error value", "[bnxt][cqe]") {
    for (std::uint8_t t : {abi::CQ_BASE_CQE_TYPE_RES_RAWETH_QP1, abi::CQ_BASE_CQE_TYPE_RES_UD_CFA,
                           std::uint8_t{5}, abi::CQ_BASE_CQE_TYPE_REQ_V3,
                           abi::CQ_BASE_CQE_TYPE_RES_RC_V3, std::uint8_t{0xc}}) {
        abi::cq_base b{};
        b.cqe_type = t;
        const auto d = abi::decode_cqe(bytes_of(b));
        INFO("type " << int(t));
        REQUIRE_FALSE(d.has_value());
        CHECK(d.error().k == abi::decode_error::kind::unknown_type);
        CHECK(d.error().value == t);
        CHECK(d.error().message() == "cq_base.cqe_type: unknown type " + rig::abi::hex(t));
    }
}

TEST_CASE("bnxt: a short CQE is an error value, not a read past the buffer", "[bnxt][cqe]") {
    abi::cq_req req{};
    const auto full = bytes_of(req);
    for (std::size_t n : {std::size_t{0}, std::size_t{8}, std::size_t{24}, std::size_t{31}}) {
        const auto b = exactly(full, n);
        const auto d = abi::decode_cqe(b);
        INFO(n << " bytes");
        REQUIRE_FALSE(d.has_value());
        CHECK(d.error().k == abi::decode_error::kind::short_buffer);
        CHECK(d.error().message() == "cq_base: " + std::to_string(n) + " bytes given, 32 needed");
        CHECK(abi::cqe_is_new(b, true) == false);   // too short to hold a toggle: never new
    }
}

TEST_CASE("bnxt: a CQE is new when its toggle equals the consumer's phase", "[bnxt][cqe]") {
    abi::cq_req req{};
    req.toggle = 1;
    CHECK(abi::cqe_is_new(bytes_of(req), true));    // first pass: phase 1
    CHECK_FALSE(abi::cqe_is_new(bytes_of(req), false));
    req.toggle = 0;
    CHECK(abi::cqe_is_new(bytes_of(req), false));   // after one wrap: phase 0
    CHECK_FALSE(abi::cqe_is_new(bytes_of(req), true));
    req.cqe_type = 0xf;   // the type bits never read as the toggle
    CHECK_FALSE(abi::cqe_is_new(bytes_of(req), true));
}

TEST_CASE("bnxt: status tables name the send and receive sides apart", "[bnxt][cqe]") {
    CHECK(abi::cq_req_status_name(0x0) == "OK");
    CHECK(abi::cq_req_status_name(0x2) == "LOCAL_LENGTH_ERR");
    CHECK(abi::cq_req_status_name(0x7) == "REMOTE_ACCESS_ERR");
    CHECK(abi::cq_req_status_name(0x9) == "RNR_NAK_RETRY_CNT_ERR");
    CHECK(abi::cq_req_status_name(0xa) == "TRANSPORT_RETRY_CNT_ERR");
    CHECK(abi::cq_req_status_name(0xb) == "WORK_REQUEST_FLUSHED_ERR");
    CHECK(abi::cq_req_status_name(0xc) == "");
    CHECK(abi::cq_res_rc_status_name(0x3) == "LOCAL_PROTECTION_ERR");
    CHECK(abi::cq_res_rc_status_name(0x4) == "LOCAL_QP_OPERATION_ERR");
    CHECK(abi::cq_res_rc_status_name(0x7) == "WORK_REQUEST_FLUSHED_ERR");
    CHECK(abi::cq_res_rc_status_name(0x8) == "HW_FLUSH_ERR");
    CHECK(abi::cq_res_rc_status_name(0x9) == "");
    // every named status is the kernel's constant of that name (constants test); and each
    // table names exactly its constants
    for (unsigned s = 0; s < 256; ++s) {
        CHECK(abi::cq_req_status_name(static_cast<std::uint8_t>(s)).empty() == (s > 0xb));
        CHECK(abi::cq_res_rc_status_name(static_cast<std::uint8_t>(s)).empty() == (s > 0x8));
    }
}

TEST_CASE("bnxt: CREQ entries decode as completions, QP/CQ errors, function events",
          "[bnxt][rcfw]") {
    abi::creq_create_qp_resp done{};
    done.type = abi::CREQ_BASE_TYPE_QP_EVENT;
    done.status = abi::CREQ_QP_EVENT_STATUS_SUCCESS;
    done.cookie = 0x8123;
    done.xid = 0x4567;
    done.v = 1;
    done.event = abi::CMDQ_BASE_OPCODE_CREATE_QP;
    auto d = abi::decode_creq(bytes_of(done));
    REQUIRE(d.has_value());
    REQUIRE(std::holds_alternative<abi::creq_qp_event>(*d));
    const auto& ev = std::get<abi::creq_qp_event>(*d);
    CHECK(ev.cookie == 0x8123);
    CHECK(ev.event == abi::CMDQ_BASE_OPCODE_CREATE_QP);
    CHECK(ev.v == 1);
    // the command's own response, once the cookie matched
    CHECK(abi::decode<abi::creq_create_qp_resp>(bytes_of(done))->xid == 0x4567);

    abi::creq_qp_error_notification qerr{};
    qerr.type = abi::CREQ_BASE_TYPE_QP_EVENT;
    qerr.event = abi::CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION;
    qerr.xid = 99;
    qerr.req_err_state_reason =
        abi::CREQ_QP_ERROR_NOTIFICATION_REQ_ERR_STATE_REASON_REQ_TIMEOUT_RETRY_LIMIT;
    qerr.sq_cons_idx = 5;
    d = abi::decode_creq(bytes_of(qerr));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::creq_qp_error_notification>(*d) == qerr);

    abi::creq_cq_error_notification cerr{};
    cerr.type = abi::CREQ_BASE_TYPE_QP_EVENT;
    cerr.event = abi::CREQ_QP_EVENT_EVENT_CQ_ERROR_NOTIFICATION;
    cerr.cq_err_reason = 2;
    cerr.xid = 3;
    d = abi::decode_creq(bytes_of(cerr));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::creq_cq_error_notification>(*d) == cerr);

    abi::creq_func_event fe{};
    fe.type = abi::CREQ_BASE_TYPE_FUNC_EVENT;
    fe.event = abi::CREQ_FUNC_EVENT_EVENT_RESOURCE_EXHAUSTED;
    d = abi::decode_creq(bytes_of(fe));
    REQUIRE(d.has_value());
    CHECK(std::get<abi::creq_func_event>(*d) == fe);
}

TEST_CASE("bnxt: malformed CREQ entries are error values", "[bnxt][rcfw]") {
    abi::creq_qp_event e{};
    e.type = abi::CREQ_BASE_TYPE_QP_EVENT;
    e.event = 0x07;   // no command has opcode 7
    auto d = abi::decode_creq(bytes_of(e));
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().k == abi::decode_error::kind::unknown_event);
    CHECK(d.error().message() == "creq_qp_event: unknown event/opcode 0x7");

    e.type = 0x30;   // an NQ type, not a CREQ one
    e.event = abi::CMDQ_BASE_OPCODE_CREATE_QP;
    d = abi::decode_creq(bytes_of(e));
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().k == abi::decode_error::kind::unknown_type);
    CHECK(d.error().message() == "creq_base: unknown type 0x30");

    abi::creq_func_event fe{};
    fe.type = abi::CREQ_BASE_TYPE_FUNC_EVENT;
    fe.event = 0x42;
    d = abi::decode_creq(bytes_of(fe));
    REQUIRE_FALSE(d.has_value());
    CHECK(d.error().message() == "creq_func_event: unknown event/opcode 0x42");

    const auto full = bytes_of(abi::creq_qp_event{});
    for (std::size_t n : {std::size_t{0}, std::size_t{9}, std::size_t{15}}) {
        const auto b = exactly(full, n);
        d = abi::decode_creq(b);
        REQUIRE_FALSE(d.has_value());
        CHECK(d.error().message() == "creq_base: " + std::to_string(n) + " bytes given, 16 needed");
    }
}

TEST_CASE("bnxt: a CREQ entry is new when v equals the consumer's phase", "[bnxt][rcfw]") {
    abi::creq_qp_event e{};
    e.v = 1;
    CHECK(abi::creq_is_new(bytes_of(e), true));
    CHECK_FALSE(abi::creq_is_new(bytes_of(e), false));
    e.v = 0;
    CHECK(abi::creq_is_new(bytes_of(e), false));
    CHECK_FALSE(abi::creq_is_new(exactly(bytes_of(e), 8), false));   // too short: never new
}

TEST_CASE("bnxt: names of opcodes, statuses and error codes", "[bnxt][rcfw][hwrm]") {
    CHECK(abi::cmdq_opcode_name(abi::CMDQ_BASE_OPCODE_MODIFY_QP) == "MODIFY_QP");
    CHECK(abi::cmdq_opcode_name(abi::CMDQ_BASE_OPCODE_INITIALIZE_FW) == "INITIALIZE_FW");
    CHECK(abi::cmdq_opcode_name(0x7) == "");
    CHECK(abi::creq_qp_event_status_name(abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER) ==
          "INVALID_PARAMETER");
    CHECK(abi::creq_qp_event_status_name(8) == "");
    CHECK(abi::hwrm_err_code_name(abi::HWRM_ERR_CODE_INVALID_PARAMS) == "INVALID_PARAMS");
    CHECK(abi::hwrm_err_code_name(abi::HWRM_ERR_CODE_CMD_NOT_SUPPORTED) == "CMD_NOT_SUPPORTED");
    CHECK(abi::hwrm_err_code_name(0x15) == "");
}

TEST_CASE("bnxt: an HWRM response is complete when its last byte is valid", "[bnxt][hwrm]") {
    abi::hwrm_ring_alloc_output out{};
    out.req_type = abi::HWRM_RING_ALLOC;
    out.seq_id = 9;
    out.resp_len = 16;
    out.ring_id = 0x77;
    std::vector<std::byte> buf(abi::HWRM_MAX_RESP_LEN);
    abi::encode(std::span<std::byte>(buf), out);
    CHECK(abi::hwrm_response_complete(buf).value() == false);   // valid not yet written
    out.valid = abi::HWRM_RESP_VALID_KEY;
    abi::encode(std::span<std::byte>(buf), out);
    CHECK(abi::hwrm_response_complete(buf).value() == true);
    CHECK(abi::decode<abi::hwrm_ring_alloc_output>(buf)->ring_id == 0x77);

    std::vector<std::byte> none(64);   // resp_len 0: the firmware has not answered
    CHECK(abi::hwrm_response_complete(none).value() == false);

    out.resp_len = 700;   // points past a 64-byte buffer
    std::vector<std::byte> small(64);
    abi::encode(std::span<std::byte>(small), out);
    auto r = abi::hwrm_response_complete(small);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message() == "hwrm_resp_hdr.resp_len: length 700 outside the 64-byte buffer");
    out.resp_len = 4;   // shorter than the header
    abi::encode(std::span<std::byte>(small), out);
    CHECK_FALSE(abi::hwrm_response_complete(small).has_value());
    const auto tiny = exactly(small, 7);
    r = abi::hwrm_response_complete(tiny);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().message() == "hwrm_resp_hdr: 7 bytes given, 8 needed");
    CHECK(abi::decode<abi::hwrm_ver_get_output>(small).error().message() ==
          "hwrm_ver_get_output: 64 bytes given, 176 needed");
}

TEST_CASE("bnxt: chip numbers and their generation", "[bnxt][ids]") {
    CHECK(abi::PCI_VENDOR_ID_BROADCOM == 0x14e4);
    CHECK(abi::generation_of(abi::CHIP_NUM_57508) == abi::generation::p5);
    CHECK(abi::generation_of(0x1752) == abi::generation::p5);
    CHECK(abi::generation_of(abi::CHIP_NUM_57608) == abi::generation::p7);
    CHECK(abi::generation_of(0xd818) == abi::generation::p7);
    CHECK_FALSE(abi::generation_of(0x16d7).has_value());   // BCM57414, P4: not driven
    CHECK_FALSE(abi::generation_of(0x1806).has_value());   // a VF's PCI ID is no chip number
}
