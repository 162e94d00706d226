// The bnxt model's PCI function and HWRM channel, driven by raw BAR0 writes over vfio-user
// (bnxt_hsi.h; bnxt_hwrm.c __hwrm_send): identity, VER_GET, seq_id echo, the valid byte last,
// short commands, the window's limit, DEV_NOT_RDY, unknown requests, a bad resp_addr, one
// command at a time, faults and resets.
#include <atomic>

#include "hwrm_client.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;

TEST_CASE("bnxt model: PCI identity and BARs", "[bnxt_model]") {
    served_bnxt m;
    CHECK(m.read32(drv::region::config, 0) == 0x175014e4u);
    CHECK((m.read32(drv::region::config, 8) >> 8) == 0x020000u);
    auto bar0 = m.f->get_region_info(drv::region::bar0);
    auto bar2 = m.f->get_region_info(drv::region::bar2);
    auto bar4 = m.f->get_region_info(drv::region::bar4);
    REQUIRE(bar0.has_value());
    REQUIRE(bar2.has_value());
    REQUIRE(bar4.has_value());
    CHECK(bar0->size == 64u << 10);
    CHECK(bar2->size == 4u << 20);
    CHECK(bar4->size == 16u << 10);
    // the MSI-X capability at 0x40: table in BAR4 at 0, 64 vectors
    CHECK((m.read32(drv::region::config, 0x40) & 0xff) == 0x11);
    CHECK((m.read32(drv::region::config, 0x40) >> 16 & 0x7ff) == 63);
    CHECK(m.read32(drv::region::config, 0x44) == 4u);
}

TEST_CASE("bnxt model: VER_GET through the window", "[bnxt_model]") {
    served_bnxt m;
    const response r = m.send(abi::hwrm_ver_get_input{});
    REQUIRE(r.arrived());
    CHECK(r.error_code() == 0);
    CHECK(r.req_type() == abi::HWRM_VER_GET);
    CHECK(r.seq_id() == m.seq);
    CHECK(r.resp_len() == 176);
    CHECK(r.valid() == 1);
    const auto v = r.as<abi::hwrm_ver_get_output>();
    CHECK(v.hwrm_intf_maj_8b == 1);
    CHECK(v.hwrm_intf_min_8b == 10);
    CHECK(v.hwrm_intf_upd_8b == 3);
    CHECK(v.chip_num == 0x1750);
    CHECK(v.max_req_win_len == 128);
    CHECK(v.max_resp_len == 704);
#if defined(__SANITIZE_THREAD__)
    CHECK(v.def_req_timeout == 5000);   // the model under ThreadSanitizer asks for more (sim/bnxt/firmware.hpp)
#else
    CHECK(v.def_req_timeout == 500);    // Thor's, DFLT_HWRM_CMD_TIMEOUT
#endif
    CHECK(v.max_req_timeout == 40);
    CHECK(v.max_ext_req_len == 1024);
    CHECK(v.dev_caps_cfg == abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_SUPPORTED);
    CHECK((v.flags & abi::VER_GET_RESP_FLAGS_DEV_NOT_RDY) == 0);
    CHECK(v.hwrm_intf_major == 1);
    CHECK(v.hwrm_intf_minor == 10);
    // each request's seq_id comes back
    for (int i = 0; i < 5; ++i) {
        const response again = m.send(abi::hwrm_ver_get_input{});
        REQUIRE(again.arrived());
        CHECK(again.seq_id() == m.seq);
    }
}

TEST_CASE("bnxt model: the valid byte is written last", "[bnxt_model]") {
    served_bnxt m;
    // A poller that sees the valid byte must see the whole response already there.
    std::atomic<bool> stop{false};
    std::atomic<int> torn{0}, seen{0};
    const std::byte* r = m.mem.data() + served_bnxt::resp_off;
    // Each response once, the one whose seq_id follows the last one's: a buffer being cleared for
    // the next request (hwrm_client send_bytes) holds the old valid byte with the old seq_id or 0.
    const std::uint16_t first_seq = m.seq;
    std::thread poller([&] {
        std::uint16_t last = first_seq;
        while (!stop.load()) {
            if (std::to_integer<std::uint8_t>(reinterpret_cast<const volatile std::byte*>(r)[175]) == 1) {
                rig::abi::barrier::from_device();   // the rest after the valid byte
                const auto seq = rig::abi::load_le<std::uint16_t>(r + 4);
                if (seq != static_cast<std::uint16_t>(last + 1)) {
                    continue;
                }
                last = seq;
                if (rig::abi::load_le<std::uint16_t>(r + 112) != 0x1750 ||
                    rig::abi::load_le<std::uint16_t>(r + 6) != 176) {
                    ++torn;
                }
                ++seen;
            }
        }
    });
    // Each response stays until the poller has looked at it: the next send clears the buffer
    // (hwrm_client send_bytes), and a clear between the poller's read of the valid byte and its
    // read of the rest would count as torn what was only cleared.
    // No REQUIRE while the poller runs: a throw past a joinable std::thread terminates.
    int arrived = 0;
    for (int i = 0; i < 50; ++i) {
        if (!m.send(abi::hwrm_ver_get_input{}).arrived()) {
            break;
        }
        ++arrived;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (seen.load() < i + 1 && std::chrono::steady_clock::now() < until) {
            std::this_thread::yield();
        }
        if (seen.load() != i + 1) {
            break;
        }
    }
    stop = true;
    poller.join();
    CHECK(arrived == 50);
    CHECK(seen.load() == 50);
    CHECK(torn.load() == 0);
}

TEST_CASE("bnxt model: an unknown request is CMD_NOT_SUPPORTED", "[bnxt_model]") {
    served_bnxt m;
    for (std::uint16_t op : {std::uint16_t{0x2f} /* PORT_LED_QCAPS */, std::uint16_t{0x1a3},
                             std::uint16_t{0xabc}}) {
        std::vector<std::byte> req(24);
        rig::abi::store_le<std::uint16_t>(req.data(), op);
        rig::abi::store_le<std::uint16_t>(req.data() + 2, 0xffff);
        rig::abi::store_le<std::uint16_t>(req.data() + 6, 0xffff);
        const response r = m.send_bytes(req);
        REQUIRE(r.arrived());
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_CMD_NOT_SUPPORTED);
        CHECK(r.req_type() == op);
        CHECK(r.seq_id() == m.seq);
        CHECK(r.resp_len() == 16);
        CHECK(r.cmd_err() == 0);
    }
}

TEST_CASE("bnxt model: short commands", "[bnxt_model]") {
    SECTION("offered: a short command runs, a request longer than the window must be one") {
        served_bnxt m;
        const response s = m.send(abi::hwrm_func_qcaps_input{}, send_mode::short_command);
        REQUIRE(s.arrived());
        CHECK(s.error_code() == 0);
        CHECK(s.req_type() == abi::HWRM_FUNC_QCAPS);
        CHECK(s.seq_id() == m.seq);
        // FUNC_CFG is 160 bytes: its first 128 through the window are refused
        abi::hwrm_func_cfg_input cfg;
        const response w = m.send(cfg, send_mode::window);
        REQUIRE(w.arrived());
        CHECK(w.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(w.cmd_err() == static_cast<std::uint8_t>(sim::bnxt::cmd_err::longer_than_window));
        CHECK(m.send(cfg, send_mode::short_command).error_code() == 0);
    }
    SECTION("required: VER_GET says so and takes the window; nothing else does") {
        served_bnxt m(options([](auto& o) { o.firmware.short_cmd_required = true; }));
        const response v = m.send(abi::hwrm_ver_get_input{}, send_mode::window);
        REQUIRE(v.arrived());
        CHECK(v.as<abi::hwrm_ver_get_output>().dev_caps_cfg ==
              (abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_SUPPORTED |
               abi::VER_GET_RESP_DEV_CAPS_CFG_SHORT_CMD_REQUIRED));
        const response w = m.send(abi::hwrm_func_qcaps_input{}, send_mode::window);
        REQUIRE(w.arrived());
        CHECK(w.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(w.cmd_err() == static_cast<std::uint8_t>(sim::bnxt::cmd_err::short_required));
        CHECK(m.send(abi::hwrm_func_qcaps_input{}, send_mode::short_command).error_code() == 0);
    }
    SECTION("not offered: a short command is refused") {
        served_bnxt m(options([](auto& o) { o.firmware.short_cmd_supported = false; }));
        CHECK(m.send(abi::hwrm_ver_get_input{}).as<abi::hwrm_ver_get_output>().dev_caps_cfg == 0);
        const response s = m.send(abi::hwrm_func_qcaps_input{}, send_mode::short_command);
        REQUIRE(s.arrived());
        CHECK(s.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(s.cmd_err() == static_cast<std::uint8_t>(sim::bnxt::cmd_err::short_unsupported));
        CHECK(s.seq_id() == m.seq);
    }
    SECTION("a short size beyond max_ext_req_len is refused") {
        served_bnxt m;
        std::vector<std::byte> req(1100);
        const auto q = abi::to_bytes(abi::hwrm_func_qcaps_input{});
        std::memcpy(req.data(), q.data(), q.size());
        const response s = m.send_bytes(req, send_mode::short_command);
        REQUIRE(s.arrived());
        CHECK(s.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
        CHECK(s.cmd_err() == static_cast<std::uint8_t>(sim::bnxt::cmd_err::bad_length));
    }
}

// (1 s: long enough that a loaded machine still sends the first requests inside it)
TEST_CASE("bnxt model: DEV_NOT_RDY after reset", "[bnxt_model]") {
    served_bnxt m(options([](auto& o) { o.firmware.not_ready_time = 1000ms; }));
    const response v = m.send(abi::hwrm_ver_get_input{});
    REQUIRE(v.arrived());
    CHECK(v.error_code() == 0);
    CHECK((v.as<abi::hwrm_ver_get_output>().flags & abi::VER_GET_RESP_FLAGS_DEV_NOT_RDY) != 0);
    const response q = m.send(abi::hwrm_func_qcaps_input{});
    REQUIRE(q.arrived());
    CHECK(q.error_code() == abi::HWRM_ERR_CODE_BUSY);
    CHECK(q.cmd_err() == static_cast<std::uint8_t>(sim::bnxt::cmd_err::not_ready));
    std::this_thread::sleep_for(1100ms);
    CHECK((m.send(abi::hwrm_ver_get_input{}).as<abi::hwrm_ver_get_output>().flags &
           abi::VER_GET_RESP_FLAGS_DEV_NOT_RDY) == 0);
    CHECK(m.send(abi::hwrm_func_qcaps_input{}).error_code() == 0);
    // a reset starts the wait again
    REQUIRE(m.f->reset().has_value());
    CHECK((m.send(abi::hwrm_ver_get_input{}).as<abi::hwrm_ver_get_output>().flags &
           abi::VER_GET_RESP_FLAGS_DEV_NOT_RDY) != 0);
}

TEST_CASE("bnxt model: a resp_addr the driver did not map gets nothing", "[bnxt_model]") {
    served_bnxt m;
    const std::uint64_t faults = m.srv->dma().fault_count();
    const auto b = abi::to_bytes(abi::hwrm_ver_get_input{});
    const response r = m.send_bytes(std::vector<std::byte>(b.begin(), b.end()), send_mode::window,
                                    m.iova + (1ull << 30), 200ms);
    CHECK_FALSE(r.arrived());
    REQUIRE(m.fn.wait_idle(1000ms));
    const auto o = m.fn.last_outcome();
    REQUIRE(o.has_value());
    CHECK_FALSE(o->responded);
    CHECK(o->fault.find("refused by the IOMMU") != std::string::npos);
    CHECK(m.srv->dma().fault_count() == faults + 1);
    // the channel goes on
    CHECK(m.send(abi::hwrm_ver_get_input{}).arrived());
}

TEST_CASE("bnxt model: one command at a time", "[bnxt_model]") {
    served_bnxt m(options([](auto& o) { o.command_latency = 1000ms; }));
    abi::hwrm_ver_get_input in;
    in.resp_addr = m.iova + served_bnxt::resp_off;
    const auto b = abi::to_bytes(in);
    m.post_window(std::span<const std::byte>(b));
    CHECK(m.read32(drv::region::bar0, abi::GRCPF_REG_CHIMP_COMM_TRIGGER) == 1);
    m.write32(abi::GRCPF_REG_CHIMP_COMM_TRIGGER, 1);
    CHECK(m.fn.doorbells_ignored() == 1);
    REQUIRE(m.fn.wait_idle(3000ms));
    CHECK(m.read32(drv::region::bar0, abi::GRCPF_REG_CHIMP_COMM_TRIGGER) == 0);
    CHECK(m.fn.commands_completed() == 1);
}

TEST_CASE("bnxt model: faults", "[bnxt_model]") {
    served_bnxt m;
    SECTION("silence, then resume") {
        m.fn.silence();
        CHECK_FALSE(m.send(abi::hwrm_ver_get_input{}, send_mode::window, 200ms).arrived());
        m.fn.resume();
        CHECK(m.wait_response().arrived());
    }
    SECTION("a chosen error code and cmd_err for the next request of a type") {
        m.fn.fail_next(abi::HWRM_FUNC_QCAPS, abi::HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED, 0x42);
        CHECK(m.send(abi::hwrm_ver_get_input{}).error_code() == 0);
        const response r = m.send(abi::hwrm_func_qcaps_input{});
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED);
        CHECK(r.cmd_err() == 0x42);
        CHECK(m.send(abi::hwrm_func_qcaps_input{}).error_code() == 0);
    }
    SECTION("death: all ones, until a reset") {
        m.fn.die();
        CHECK(m.read32(drv::region::config, 0) == 0xffffffffu);
        CHECK(m.read32(drv::region::bar0, 0) == 0xffffffffu);
        REQUIRE(m.f->reset().has_value());
        CHECK(m.read32(drv::region::config, 0) == 0x175014e4u);
        CHECK(m.send(abi::hwrm_ver_get_input{}).arrived());
    }
    SECTION("the fault plan fails the request it names, after N requests, again after reset") {
        served_bnxt p(options([](auto& o) {
            o.fault.what = sim::pci::fault_kind::fail_command;
            o.fault.after_commands = 1;
            o.fault.fail = {.channel = 0, .opcode = abi::HWRM_FUNC_RESET, .status = 4, .syndrome = 9};
        }));
        CHECK(p.send(abi::hwrm_ver_get_input{}).error_code() == 0);
        const response r = p.send(abi::hwrm_func_reset_input{});
        CHECK(r.error_code() == abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR);
        CHECK(r.cmd_err() == 9);
        REQUIRE(p.f->reset().has_value());
        CHECK(p.send(abi::hwrm_ver_get_input{}).error_code() == 0);
        CHECK(p.send(abi::hwrm_func_reset_input{}).error_code() == abi::HWRM_ERR_CODE_RESOURCE_ALLOC_ERROR);
    }
}
