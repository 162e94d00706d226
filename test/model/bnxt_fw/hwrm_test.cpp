// firmware/bnxt's HWRM channel against the bnxt model's firmware (sim/bnxt/firmware.hpp) behind
// an in-process function (firmware_function.hpp): the window's bytes, seq ids, short commands,
// what VER_GET teaches, refusals, the trace, silence and a refused BAR write.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "firmware/bnxt/hwrm.hpp"
#include "test/model/bnxt_fw/firmware_function.hpp"

using namespace std::chrono_literals;
namespace abi = rig::bnxt::abi;
namespace fw = rig::firmware::bnxt;
using rig::test::bnxt::firmware_function;
using clk = std::chrono::steady_clock;

namespace {

std::unique_ptr<fw::hwrm_channel> channel(firmware_function& f, rig::firmware::stranded_memory& s) {
    auto ch = fw::hwrm_channel::create(f, s);
    REQUIRE(ch.has_value());
    return std::move(*ch);
}

std::vector<std::byte> request_of(std::uint16_t req_type, std::size_t bytes) {
    abi::hwrm_func_qcaps_input in;
    std::vector<std::byte> b(bytes);
    abi::encode(std::span<std::byte>(b), in);
    rig::abi::store_le<std::uint16_t>(b.data(), req_type);
    return b;
}

}  // namespace

TEST_CASE("bnxt hwrm: VER_GET through the window, zero-filled, and what it teaches", "[model][bnxt_fw]") {
    firmware_function f;
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    CHECK(ch->limits().timeout == 500ms);  // DFLT_HWRM_CMD_TIMEOUT before VER_GET
    CHECK_FALSE(ch->limits().learned);
    auto v = ch->ver_get(clk::now() + 1s);
    REQUIRE(v.has_value());
    CHECK(v->chip_num == 0x1750);
    REQUIRE(f.triggers() == 1);
    // One write of the whole window: the 24-byte request, then zeros to 128.
    REQUIRE(f.window_write_sizes == std::vector<std::size_t>{128});
    const auto& w = f.windows[0];
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 0) == abi::HWRM_VER_GET);
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 2) == 0xffff);  // cmpl_ring: poll
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 4) == 0);       // seq_id
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 6) == 0xffff);  // target_id: firmware
    CHECK(rig::abi::load_le<std::uint64_t>(w.data() + 8) == ch->response_iova());
    CHECK(std::to_integer<int>(w[16]) == 1);
    CHECK(std::to_integer<int>(w[17]) == 10);
    CHECK(std::to_integer<int>(w[18]) == 3);
    for (std::size_t i = 19; i < 128; ++i) {
        INFO(i);
        CHECK(std::to_integer<int>(w[i]) == 0);
    }
    const auto l = ch->limits();
    CHECK(l.learned);
    CHECK(l.window == 128);
    CHECK(l.max_request == 1024);
    CHECK(l.max_response == 704);
    CHECK(l.timeout == rig::test::bnxt::model_timeout());   // 500 ms, Thor's
    CHECK(l.max_timeout == 40000ms);
    CHECK_FALSE(l.short_required);
    CHECK(ch->timeout_of(abi::HWRM_FUNC_RESET) == 4 * rig::test::bnxt::model_timeout());  // HWRM_RESET_TIMEOUT
    // seq ids count up
    auto q = ch->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, clk::now() + 1s);
    REQUIRE(q.has_value());
    CHECK(rig::abi::load_le<std::uint16_t>(f.windows[1].data() + 4) == 1);
    CHECK(f.outcomes[1].seq_id == 1);
    CHECK_FALSE(f.outcomes[1].short_command);
    CHECK((q->flags & abi::FUNC_QCAPS_RESP_FLAGS_ROCE_V2_SUPPORTED) != 0);
    CHECK(s.report().empty());
}

TEST_CASE("bnxt hwrm: a request longer than the window goes as a short command", "[model][bnxt_fw]") {
    firmware_function f;
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    REQUIRE(ch->ver_get(clk::now() + 1s).has_value());
    const auto req = request_of(abi::HWRM_FUNC_QCAPS, 200);
    auto r = ch->exec(req, clk::now() + 1s, abi::hwrm_func_qcaps_output::layout_size);
    REQUIRE(r.has_value());
    REQUIRE(f.triggers() == 2);
    CHECK(f.outcomes[1].short_command);
    CHECK(f.window_write_sizes.back() == 16);  // hwrm_short_input, no zeros after it
    const auto& w = f.windows[1];
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 0) == abi::HWRM_FUNC_QCAPS);
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 2) == 0x4321);
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 4) == 0xffff);
    CHECK(rig::abi::load_le<std::uint16_t>(w.data() + 6) == 200);
    CHECK(rig::abi::load_le<std::uint64_t>(w.data() + 8) == ch->request_iova());
    // Longer than max_ext_req_len: refused before anything is sent.
    auto big = ch->exec(request_of(abi::HWRM_FUNC_QCAPS, 1032), clk::now() + 1s);
    REQUIRE_FALSE(big.has_value());
    CHECK(big.error().kind == fw::error_kind::bad_input);
    CHECK(big.error().message ==
          "FUNC_QCAPS (0x15): 1032-byte request is longer than the firmware takes (window 128, short commands 1024)");
    CHECK(f.triggers() == 2);
}

TEST_CASE("bnxt hwrm: short commands for every request once VER_GET requires them", "[model][bnxt_fw]") {
    rig::sim::bnxt::firmware_options o;
    o.short_cmd_required = true;
    firmware_function f(o);
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    REQUIRE(ch->ver_get(clk::now() + 1s).has_value());
    CHECK_FALSE(f.outcomes[0].short_command);  // VER_GET: the requirement is not known yet
    CHECK(ch->limits().short_required);
    auto q = ch->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, clk::now() + 1s);
    REQUIRE(q.has_value());
    CHECK(f.outcomes[1].short_command);
    CHECK(rig::abi::load_le<std::uint16_t>(f.windows[1].data() + 6) == abi::hwrm_func_qcaps_input::layout_size);
}

TEST_CASE("bnxt hwrm: a refusal names the request, error code and cmd_err, and is traced", "[model][bnxt_fw]") {
    firmware_function f;
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    std::vector<fw::command_record> trace;
    ch->trace([&](const fw::command_record& r) { trace.push_back(r); });
    REQUIRE(ch->ver_get(clk::now() + 1s).has_value());
    abi::hwrm_func_reset_input in;
    in.func_reset_level = 3;  // RESETVF: the function has no VFs
    auto r = ch->send<abi::hwrm_func_reset_output>(in, clk::now() + 1s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::status);
    CHECK(r.error().channel == "hwrm");
    CHECK(r.error().req_type == abi::HWRM_FUNC_RESET);
    CHECK(r.error().error_code == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    CHECK(r.error().cmd_err == 0x06);
    CHECK(r.error().message == "FUNC_RESET (0x11): INVALID_PARAMS (0x2), cmd_err 0x6");
    auto u = ch->exec(request_of(0x1234, 24), clk::now() + 1s);
    REQUIRE_FALSE(u.has_value());
    CHECK(u.error().message.starts_with("HWRM request (0x1234): CMD_NOT_SUPPORTED (0xffff), cmd_err "));
    REQUIRE(trace.size() == 3);
    CHECK(trace[1].name == "FUNC_RESET");
    CHECK(trace[1].status == 2);
    CHECK(trace[1].cmd_err == 6);
    CHECK(trace[1].in.size() == 24);
    CHECK(trace[1].out.size() == 16);
    CHECK(fw::to_json(trace[1]) ==
          "{\"channel\": \"hwrm\", \"opcode\": 17, \"name\": \"FUNC_RESET\", \"status\": 2, \"cmd_err\": 6, \"in\": \"" +
              fw::to_hex(trace[1].in) + "\", \"out\": \"" + fw::to_hex(trace[1].out) + "\"}");
    CHECK(fw::to_hex(trace[1].out).starts_with("0200110001001000"));  // INVALID_PARAMS, FUNC_RESET, seq 1, 16 bytes
    // The channel goes on after a refusal.
    CHECK(ch->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, clk::now() + 1s).has_value());
}

TEST_CASE("bnxt hwrm: silence ends in a named timeout, buffers stranded, nothing sent after", "[model][bnxt_fw]") {
    firmware_function f;
    f.answer_limit = 1;  // VER_GET answered, then the firmware says nothing
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    REQUIRE(ch->ver_get(clk::now() + 1s).has_value());
    const auto start = clk::now();
    auto q = ch->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, clk::now() + 10s);
    const auto took = clk::now() - start;
    REQUIRE_FALSE(q.has_value());
    CHECK(q.error().kind == fw::error_kind::timeout);
    CHECK(q.error().message == "FUNC_QCAPS (0x15): no response " + rig::test::bnxt::within_model_timeout());
    CHECK(took >= rig::test::bnxt::model_timeout() - 10ms);
    CHECK(took < 3 * rig::test::bnxt::model_timeout());
    const auto st = s.report();
    REQUIRE(st.size() == 1);
    CHECK(st[0].what == "HWRM response and short-command buffers");
    CHECK(st[0].iova == ch->response_iova());
    CHECK(st[0].bytes == 8192);
    auto again = ch->send<abi::hwrm_func_qcaps_output>(abi::hwrm_func_qcaps_input{}, clk::now() + 1s);
    REQUIRE_FALSE(again.has_value());
    CHECK(again.error().kind == fw::error_kind::fatal);
    CHECK(again.error().message ==
          "FUNC_QCAPS (0x15): not sent, the HWRM channel stopped: FUNC_QCAPS (0x15): no response " + rig::test::bnxt::within_model_timeout());
    CHECK(f.triggers() == 2);
    ch.reset();
    CHECK(f.maps.count(st[0].iova) == 1);  // never unmapped: the firmware may still write it
}

TEST_CASE("bnxt hwrm: before VER_GET the timeout is 500 ms; the caller's deadline is shorter", "[model][bnxt_fw]") {
    firmware_function f;
    f.answer_limit = 0;
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    auto start = clk::now();
    auto v = ch->ver_get(clk::now() + 5s);
    REQUIRE_FALSE(v.has_value());
    CHECK(v.error().message == "VER_GET (0x0): no response within 500 ms");
    CHECK(clk::now() - start < 1500ms);
    firmware_function g;
    g.answer_limit = 0;
    rig::firmware::stranded_memory s2;
    auto ch2 = channel(g, s2);
    start = clk::now();
    auto w = ch2->ver_get(clk::now() + 100ms);
    REQUIRE_FALSE(w.has_value());
    CHECK(w.error().message == "VER_GET (0x0): no response within 100 ms");
    CHECK(clk::now() - start < 400ms);
}

TEST_CASE("bnxt hwrm: a refused BAR write stops the channel", "[model][bnxt_fw]") {
    firmware_function f;
    rig::firmware::stranded_memory s;
    auto ch = channel(f, s);
    f.refuse_writes = true;
    auto v = ch->ver_get(clk::now() + 1s);
    REQUIRE_FALSE(v.has_value());
    CHECK(v.error().kind == fw::error_kind::transport);
    CHECK(v.error().message == "VER_GET (0x0): HWRM window write: BAR0 write refused");
    CHECK(s.report().size() == 1);
    f.refuse_writes = false;
    auto again = ch->ver_get(clk::now() + 1s);
    REQUIRE_FALSE(again.has_value());
    CHECK(again.error().kind == fw::error_kind::fatal);
    CHECK(f.triggers() == 0);
}
