// firmware/mlx5 hca bring-up and teardown against the mlx5 function model over vfio-user:
// 100 rounds with nothing left on either side, each step's failure named, page ownership
// enforced by the model, the capability / vport / GID commands, and the command trace.
#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc.hpp"
#include "firmware/mlx5/command_trace.hpp"
#include "firmware/mlx5/hca.hpp"
#include "sim/mlx5/function_model.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace abi = rig::abi;
namespace fw = rig::firmware::mlx5;
namespace model = rig::sim::mlx5;
using ifc::cmd_status;
using ifc::opcode;
using clk = std::chrono::steady_clock;

std::unique_ptr<fw::hca> up(rig::test::served_model& m, const fw::hca_options& o = {}) {
    auto h = fw::hca::bring_up(*m.f, o);
    INFO((h ? std::string() : h.error().message));
    REQUIRE(h.has_value());
    return std::move(*h);
}

// What a clean function looks like after teardown, on both sides.
void require_clean(rig::test::served_model& m, std::size_t baseline_windows) {
    REQUIRE(m.fn.wait_idle(2s));
    CHECK(m.fn.state() == model::hca_state::disabled);
    CHECK(m.fn.pages_owned() == 0);
    CHECK(m.fn.objects() == 0);
    CHECK(m.srv->dma().window_count() == baseline_windows);
    CHECK(m.fn.page_violations().empty());
}

using rig::test::make;

}  // namespace

TEST_CASE("mlx5 bring-up: up and down 100 times, nothing left on either side", "[model][mlx5]") {
    rig::test::served_model m;
    const std::size_t baseline = m.srv->dma().window_count();
    for (int round = 0; round < 100; ++round) {
        INFO("round " << round);
        auto nic = up(m);
        REQUIRE(m.fn.state() == model::hca_state::initialized);
        REQUIRE(m.fn.issi() == 1);
        REQUIRE(m.fn.pages_owned() == 16 + 64);  // boot + init pages of the default options
        REQUIRE(m.fn.roce_enabled());
        REQUIRE(nic->mac() == m.fn.mac());
        REQUIRE(nic->port_up());
        REQUIRE(nic->uar() != 0);
        REQUIRE(nic->event_queue() != nullptr);
        // GID 0: the IPv6 link-local GID of the MAC, RoCE v2, as the model holds it
        const auto g = m.fn.gid(0);
        REQUIRE(g.has_value());
        CHECK(g->gid == fw::link_local_gid(m.fn.mac()));
        CHECK(g->mac == m.fn.mac());
        CHECK(g->roce_version == ifc::roce_addr::version_2);
        CHECK(g->l3_type == ifc::roce_addr::l3_type_ipv6);
        REQUIRE(nic->gids().size() == 1);
        CHECK(nic->gids()[0].gid == g->gid);
        REQUIRE(nic->teardown().has_value());
        CHECK(nic->stranded().empty());
        CHECK(nic->teardown().has_value());  // idempotent
        CHECK_THROWS_AS(nic->commands(), std::invalid_argument);
        nic.reset();
        require_clean(m, baseline);
    }
}

TEST_CASE("mlx5 bring-up: the capabilities the model enforces", "[model][mlx5]") {
    model::function_options o;
    o.firmware.gid_table_size = 8;
    rig::test::served_model m(o);
    auto nic = up(m);
    const fw::hca_caps& c = nic->caps();
    CHECK(c.port_type == static_cast<std::uint8_t>(ifc::port_type::ethernet));
    CHECK(c.roce);
    CHECK(c.num_ports == 1);
    CHECK(c.log_max_msg == 31);
    CHECK(c.log_max_qp_sz == o.firmware.log_max_qp_sz);
    CHECK(c.log_max_cq_sz == o.firmware.log_max_cq_sz);
    CHECK(c.log_max_eq_sz == o.firmware.log_max_eq_sz);
    CHECK(c.log_max_qp == 16);  // max_objects 2^16
    CHECK(c.gid_table_size == 8);
    CHECK(c.roce_address_table_size == 8);
    CHECK(c.roce_version == 1u << 2);
    CHECK(c.r_roce_dest_udp_port == 4791);
    CHECK(c.sw_r_roce_src_udp_port);  // set by the CAPABILITIES step
    CHECK_FALSE(c.fast_teardown);
    CHECK(nic->version().text() == "22.39.1002");

    auto& q = nic->commands();
    const auto soon = [] { return clk::now() + 1s; };
    SECTION("SET_HCA_CAP after INIT_HCA is refused with BAD_SYS_STATE") {
        using In = ifc::set_hca_cap_in;
        auto in = make<In>(opcode::set_hca_cap);
        auto r = q.exec<In, ifc::set_hca_cap_out>(in, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().status == cmd_status::bad_sys_state_err);
    }
    SECTION("SET_ROCE_ADDRESS past the GID table, and a RoCE v1 entry, are refused; v4-mapped v2 reads back") {
        using In = ifc::set_roce_address_in;
        using A = ifc::roce_addr_layout;
        auto in = make<In>(opcode::set_roce_address);
        abi::set<In::roce_address_index>(in, 8);
        auto l3 = abi::bytes_of(std::span<std::byte>(in), In::roce_address(A::source_l3_address));
        const std::array<std::uint8_t, 16> v4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7};
        std::transform(v4.begin(), v4.end(), l3.begin(), [](std::uint8_t b) { return std::byte{b}; });
        abi::set<In::roce_address(A::source_mac_47_32)>(in, 0x0252);
        abi::set<In::roce_address(A::source_mac_31_0)>(in, 0x49470001);
        abi::set<In::roce_address(A::roce_version)>(in, ifc::roce_addr::version_2);
        abi::set<In::roce_address(A::roce_l3_type)>(in, ifc::roce_addr::l3_type_ipv4);
        auto r = q.exec<In, ifc::set_roce_address_out>(in, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().status == cmd_status::bad_param_err);
        CHECK(!m.fn.gid(7).has_value());

        abi::set<In::roce_address_index>(in, 7);
        abi::set<In::roce_address(A::roce_version)>(in, ifc::roce_addr::version_1);
        r = q.exec<In, ifc::set_roce_address_out>(in, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().status == cmd_status::bad_param_err);
        CHECK(!m.fn.gid(7).has_value());

        abi::set<In::roce_address(A::roce_version)>(in, ifc::roce_addr::version_2);
        REQUIRE(q.exec<In, ifc::set_roce_address_out>(in, soon()).has_value());
        using QIn = ifc::query_roce_address_in;
        using QOut = ifc::query_roce_address_out;
        auto qin = make<QIn>(opcode::query_roce_address);
        abi::set<QIn::roce_address_index>(qin, 7);
        auto out = q.exec<QIn, QOut>(qin, soon());
        REQUIRE(out.has_value());
        const auto got = abi::bytes_of(std::span<const std::byte>(*out), QOut::roce_address(A::source_l3_address));
        CHECK(std::equal(got.begin(), got.end(), l3.begin(), l3.end()));
        CHECK(abi::get<QOut::roce_address(A::source_mac_31_0)>(*out) == 0x49470001);
        CHECK(abi::get<QOut::roce_address(A::roce_l3_type)>(*out) == ifc::roce_addr::l3_type_ipv4);
        REQUIRE(m.fn.gid(7).has_value());
        CHECK(m.fn.gid(7)->gid == v4);
    }
    SECTION("MODIFY_NIC_VPORT_CONTEXT of a field the model does not apply is refused, roce_en stays") {
        using In = ifc::modify_nic_vport_context_in;
        auto in = make<In>(opcode::modify_nic_vport_context);
        abi::set<In::field_select(ifc::modify_nic_vport_field_select::permanent_address)>(in, 1);
        auto r = q.exec<In, ifc::modify_nic_vport_context_out>(in, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().status == cmd_status::bad_param_err);
        CHECK(m.fn.roce_enabled());
    }
    SECTION("ACCESS_REG of a register the model does not have is refused") {
        using In = ifc::access_register_in;
        auto in = make<In>(opcode::access_reg, ifc::access_reg::op_mod_read, 16);
        abi::set<In::register_id>(in, ifc::access_reg::reg_paos);
        auto r = q.exec(in, ifc::access_register_out::size_bytes + 16, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().status == cmd_status::bad_param_err);
    }
    REQUIRE(nic->teardown().has_value());
}

TEST_CASE("mlx5 bring-up: SET_HCA_CAP takes only the fields a driver may set", "[model][mlx5]") {
    rig::test::served_model m;
    auto q = fw::command_queue::create(*m.f).value();
    const auto soon = [] { return clk::now() + 1s; };
    REQUIRE(q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), soon()));
    using QIn = ifc::query_hca_cap_in;
    using QOut = ifc::query_hca_cap_out;
    using SIn = ifc::set_hca_cap_in;
    using cap = ifc::cmd_hca_cap;
    constexpr std::size_t at = QOut::capability.whole().byte_offset();
    auto cur = q->exec<QIn, QOut>(
        make<QIn>(opcode::query_hca_cap, ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::cur)),
        soon());
    REQUIRE(cur.has_value());
    auto set = make<SIn>(opcode::set_hca_cap, ifc::set_hca_cap_op_mod(ifc::cap_type::general_device));
    std::copy(cur->begin() + at, cur->end(), set.begin() + at);
    const std::span<std::byte> page(set.data() + at, 256);
    // the CUR page as it was: accepted
    REQUIRE(q->exec<SIn, ifc::set_hca_cap_out>(set, soon()).has_value());
    // a limit no driver may raise
    abi::set<cap::log_max_qp_sz>(page, abi::get<cap::log_max_qp_sz>(page) + 1);
    auto r = q->exec<SIn, ifc::set_hca_cap_out>(set, soon());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == cmd_status::bad_param_err);
    abi::set<cap::log_max_qp_sz>(page, abi::get<cap::log_max_qp_sz>(page) - 1);
    // a settable field at a value it does not take: cmdif_checksum is DISABLED (0) or ENABLED (3)
    abi::set<cap::cmdif_checksum>(page, 1);  // INITIAL_STATE
    r = q->exec<SIn, ifc::set_hca_cap_out>(set, soon());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == cmd_status::bad_param_err);
    // a settable field within its MAX: taken, and CUR says so
    abi::set<cap::cmdif_checksum>(page, 0);
    abi::set<cap::disable_link_up>(page, 1);
    REQUIRE(q->exec<SIn, ifc::set_hca_cap_out>(set, soon()).has_value());
    cur = q->exec<QIn, QOut>(
        make<QIn>(opcode::query_hca_cap, ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::cur)),
        soon());
    REQUIRE(cur.has_value());
    CHECK(abi::get(std::span<const std::byte>(*cur), QOut::capability(ifc::hca_cap_union::cmd_hca_cap(cap::disable_link_up))) == 1);
    // an unknown capability type
    r = q->exec<QIn, QOut>(make<QIn>(opcode::query_hca_cap, ifc::query_hca_cap_op_mod(ifc::cap_type::odp, ifc::cap_mode::cur)),
                           soon());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().status == cmd_status::bad_param_err);
    REQUIRE(q->exec<ifc::disable_hca_in, ifc::disable_hca_out>(make<ifc::disable_hca_in>(opcode::disable_hca), soon()));
}

TEST_CASE("mlx5 bring-up: each step's failure is named, and leaves both sides clean", "[model][mlx5]") {
    struct injected {
        opcode op;
        const char* step;
    };
    const injected cases[] = {
        {opcode::enable_hca, "ENABLE_HCA"},
        {opcode::query_issi, "ISSI"},
        {opcode::set_issi, "ISSI"},
        {opcode::query_pages, "BOOT_PAGES"},
        {opcode::manage_pages, "BOOT_PAGES"},
        {opcode::access_reg, "HOST_ENDIANNESS"},
        {opcode::query_hca_cap, "CAPABILITIES"},
        {opcode::set_hca_cap, "CAPABILITIES"},
        {opcode::init_hca, "INIT_HCA"},
        {opcode::modify_nic_vport_context, "NIC_VPORT"},
        {opcode::query_vport_state, "NIC_VPORT"},
        {opcode::set_roce_address, "GID"},
        {opcode::alloc_uar, "UAR"},
        {opcode::create_eq, "EVENT_QUEUE"},
    };
    rig::test::served_model m;
    const std::size_t baseline = m.srv->dma().window_count();
    for (const injected& c : cases) {
        INFO(ifc::to_string(c.op));
        m.fn.fail_next(static_cast<std::uint16_t>(c.op), cmd_status::bad_param_err, 0x4d0bad01);
        auto h = fw::hca::bring_up(*m.f);
        REQUIRE_FALSE(h.has_value());
        const std::string want = std::string("bring-up step ") + c.step + ": " + std::string(ifc::to_string(c.op)) + " (";
        CHECK(h.error().message.rfind(want, 0) == 0);
        CHECK(h.error().message.find("BAD_PARAM_ERR (0x3), syndrome 0x4d0bad01") != std::string::npos);
        CHECK(h.error().kind == fw::error_kind::status);
        CHECK(h.error().opcode == c.op);
        require_clean(m, baseline);
    }
    // and the function still comes up
    auto nic = up(m);
    REQUIRE(nic->teardown().has_value());
    require_clean(m, baseline);
}

TEST_CASE("mlx5 bring-up: init pages past the firmware's limit fail INIT_PAGES with the model's syndrome",
          "[model][mlx5]") {
    model::function_options o;
    o.firmware.max_pages = 32;  // boot 16 fit, init 64 more do not
    rig::test::served_model m(o);
    const std::size_t baseline = m.srv->dma().window_count();
    auto h = fw::hca::bring_up(*m.f);
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().message ==
          "bring-up step INIT_PAGES: MANAGE_PAGES (0x108) op_mod 0x1: BAD_PARAM_ERR (0x3), syndrome " +
              abi::hex(model::syndrome_of(0x108, model::failure::too_many_pages)));
    require_clean(m, baseline);
}

TEST_CASE("mlx5 bring-up: a firmware that stops answering strands what it may name", "[model][mlx5]") {
    rig::test::served_model m;
    const std::size_t baseline = m.srv->dma().window_count();
    fw::hca_options o;
    o.timeouts.init_hca = 100ms;
    auto nic = up(m);
    REQUIRE(nic->teardown().has_value());
    nic.reset();

    // silent from INIT_HCA on: the step times out, nothing the firmware holds is unmapped
    fw::hca_options silent = o;
    silent.trace = [&](const fw::command_record& r) {
        if (r.opcode == opcode::manage_pages && r.op_mod == 1 && m.fn.pages_owned() == 16 + 64) {
            m.fn.silence();
        }
    };
    const auto start = clk::now();
    auto h = fw::hca::bring_up(*m.f, silent);
    const auto took = clk::now() - start;
    REQUIRE_FALSE(h.has_value());
    CHECK(h.error().kind == fw::error_kind::timeout);
    CHECK(h.error().message.rfind("bring-up step INIT_HCA: INIT_HCA (0x102): did not complete within", 0) == 0);
    CHECK(took < 2s);
    CHECK(m.fn.pages_owned() == 16 + 64);                 // still the firmware's
    CHECK(m.srv->dma().window_count() > baseline);        // and still mapped
    CHECK(m.fn.page_violations().empty());
    m.fn.resume();
}

TEST_CASE("mlx5 bring-up: the model reports firmware pages taken behind its back", "[model][mlx5]") {
    rig::test::served_model m;
    SECTION("unmapped while the firmware owns them") {
        auto nic = up(m);
        const auto windows = nic->pages().windows();
        REQUIRE(windows.size() == 1);
        const auto owned = m.fn.pages_owned();
        REQUIRE(m.f->dma_unmap(windows[0].iova, windows[0].bytes).has_value());
        const auto v = m.fn.page_violations();
        REQUIRE(v.size() == owned);
        CHECK(v[0].iova >= windows[0].iova);
        CHECK(v[0].iova < windows[0].iova + windows[0].bytes);
        CHECK(v[0].what == "unmapped by the driver while owned by the firmware");
        static_cast<void>(nic->teardown());
    }
    SECTION("still owned at DISABLE_HCA") {
        auto q = fw::command_queue::create(*m.f).value();
        rig::firmware::mlx5::stranded_memory stranded;
        const auto soon = [] { return clk::now() + 1s; };
        REQUIRE(q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), soon()));
        {
            fw::page_supply pages(*m.f, *q, stranded);
            REQUIRE(pages.satisfy(ifc::query_pages_op_mod::boot_pages, soon()).has_value());
            REQUIRE(pages.given() == 16);
            REQUIRE(q->exec<ifc::disable_hca_in, ifc::disable_hca_out>(make<ifc::disable_hca_in>(opcode::disable_hca),
                                                                       soon()));
            const auto v = m.fn.page_violations();
            REQUIRE(v.size() == 16);
            CHECK(v[0].what == "still owned by the firmware at DISABLE_HCA");
            CHECK(m.fn.pages_owned() == 0);
            pages.strand("test: the driver lost track");
        }
        CHECK(stranded.report().size() == 16);
    }
}

namespace {

// One line of the command trace, read field by field in the order to_json writes them. Not
// std::regex: libstdc++'s matcher recurses once per character of a `*` repetition, and a
// QUERY_HCA_CAP line's 8 KiB "out" overflowed the stack under AddressSanitizer (issue 20).
struct traced {
    unsigned long opcode = 0, op_mod = 0, status = 0, syndrome = 0;
    std::string name, in, out;
};

std::optional<traced> read_traced(std::string_view l) {
    const auto literal = [&](std::string_view s) {
        const bool here = l.starts_with(s);
        l.remove_prefix(here ? s.size() : 0);
        return here;
    };
    const auto number = [&](unsigned long& v) {
        const auto [end, ec] = std::from_chars(l.data(), l.data() + l.size(), v);
        l.remove_prefix(static_cast<std::size_t>(end - l.data()));
        return ec == std::errc{};
    };
    const auto run_of = [&](std::string& out, auto belongs) {
        std::size_t n = 0;
        while (n < l.size() && belongs(l[n])) ++n;
        out = l.substr(0, n);
        l.remove_prefix(n);
        return true;
    };
    const auto name_char = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; };
    const auto hex_char = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
    traced t;
    const bool whole = literal(R"({"opcode": )") && number(t.opcode) && literal(R"(, "name": ")") &&
                       run_of(t.name, name_char) && !t.name.empty() && literal(R"(", "op_mod": )") &&
                       number(t.op_mod) && literal(R"(, "status": )") && number(t.status) &&
                       literal(R"(, "syndrome": )") && number(t.syndrome) && literal(R"(, "in": ")") &&
                       run_of(t.in, hex_char) && literal(R"(", "out": ")") && run_of(t.out, hex_char) &&
                       literal(R"("})") && l.empty();
    return whole ? std::optional(std::move(t)) : std::nullopt;
}

}  // namespace

TEST_CASE("mlx5 bring-up: the command trace, one JSON object per command", "[model][mlx5]") {
    rig::test::served_model m;
    std::vector<std::string> lines;
    fw::hca_options o;
    o.trace = [&](const fw::command_record& r) { lines.push_back(fw::to_json(r)); };
    auto nic = up(m);
    nic.reset();
    nic = up(m, o);
    REQUIRE(nic->teardown().has_value());
    std::vector<unsigned> ops;
    for (const std::string& l : lines) {
        INFO(l);
        const auto t = read_traced(l);
        REQUIRE(t);
        const auto op = static_cast<unsigned>(t->opcode);
        CHECK(t->name == ifc::to_string(static_cast<opcode>(op)));
        CHECK(t->status == 0);
        CHECK(t->in.length() % 2 == 0);
        ops.push_back(op);
    }
    const std::vector<unsigned> first{0x104, 0x10a, 0x10b, 0x107, 0x108, 0x805, 0x100};
    REQUIRE(ops.size() > first.size());
    CHECK(std::vector<unsigned>(ops.begin(), ops.begin() + 7) == first);
    CHECK(ops.back() == 0x105);  // DISABLE_HCA last
    // ENABLE_HCA's input is its 16 inline bytes: opcode 0x0104, then zeros
    CHECK(lines[0] == R"({"opcode": 260, "name": "ENABLE_HCA", "op_mod": 0, "status": 0, "syndrome": 0, "in": "01040000000000000000000000000000", "out": "000000000000000000000000"})");
    // QUERY_HCA_CAP's output is all 0x1010 bytes, mailboxes included
    const auto cap = std::find(ops.begin(), ops.end(), 0x100u) - ops.begin();
    const auto cap_line = read_traced(lines[static_cast<std::size_t>(cap)]);
    REQUIRE(cap_line);
    CHECK(cap_line->out.length() == 2 * ifc::query_hca_cap_out::size_bytes);

    SECTION("a failed command is traced with its status and syndrome") {
        lines.clear();
        m.fn.fail_next(static_cast<std::uint16_t>(opcode::set_roce_address), cmd_status::bad_param_err, 0x12345678);
        auto h = fw::hca::bring_up(*m.f, o);
        REQUIRE_FALSE(h.has_value());
        const auto it = std::find_if(lines.begin(), lines.end(),
                                     [](const std::string& l) { return l.find("\"SET_ROCE_ADDRESS\"") != std::string::npos; });
        REQUIRE(it != lines.end());
        CHECK(it->find(R"("status": 3, "syndrome": 305419896)") != std::string::npos);
    }
}

TEST_CASE("mlx5 bring-up: rig-info against a served model", "[model][mlx5]") {
    const char* tool = std::getenv("RIG_INFO");
    if (tool == nullptr) {
        WARN("RIG_INFO is not set (run through meson test): skipped");
        return;
    }
    const auto run = [](const std::string& cmd, std::string& out) {
        FILE* p = ::popen(cmd.c_str(), "r");
        REQUIRE(p != nullptr);
        std::array<char, 4096> buf;
        std::size_t n;
        while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
            out.append(buf.data(), n);
        }
        return ::pclose(p);
    };
    rig::test::served_model m;
    const std::size_t baseline = m.srv->dma().window_count();
    m.f->release();  // the server serves one client at a time: rig-info is the next
    m.f.reset();
    std::string out;
    REQUIRE(run(std::string(tool) + " --commands vfio-user:" + m.sock.path() + " 2>&1", out) == 0);
    INFO(out);
    CHECK(out.find("firmware                   22.39.1002\n") != std::string::npos);
    CHECK(out.find("port 1                     up, Ethernet, RoCE enabled\n") != std::string::npos);
    const auto mac = m.fn.mac();
    char mac_text[32];
    std::snprintf(mac_text, sizeof mac_text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4],
                  mac[5]);
    CHECK(out.find("mac                        " + std::string(mac_text) + "\n") != std::string::npos);
    CHECK(out.find("gid 0                      fe80:0000:0000:0000:") != std::string::npos);
    CHECK(out.find("max message                2147483648 (2^31) bytes\n") != std::string::npos);
    const auto first = out.find("{\"channel\": \"cmdq\", \"opcode\": 260, \"name\": \"ENABLE_HCA\"");
    REQUIRE(first != std::string::npos);
    CHECK(out.rfind("{\"channel\": \"cmdq\", \"opcode\": 261, \"name\": \"DISABLE_HCA\"") > first);
    require_clean(m, baseline);

    out.clear();
    const int rc = run(std::string(tool) + " vfio-user:" + m.sock.dir + "/none.sock 2>&1", out);
    CHECK(rc != 0);
    CHECK(out.rfind("rig-info: ", 0) == 0);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    out.clear();
    CHECK(run(std::string(tool) + " 2>&1", out) != 0);
    out.clear();
    CHECK(run(std::string(tool) + " --help", out) == 0);
    CHECK(out.rfind("usage: rig-info", 0) == 0);
}

TEST_CASE("mlx5 bring-up: page requests and port changes arriving mid-run", "[model][mlx5]") {
    rig::test::served_model m;
    const std::size_t baseline = m.srv->dma().window_count();
    auto nic = up(m);
    const auto wait_for = [](auto&& done) {
        const auto until = clk::now() + 2s;
        while (!done() && clk::now() < until) {
            std::this_thread::sleep_for(1ms);
        }
        return done();
    };
    REQUIRE(m.fn.request_pages(600));  // more than a 2 MiB chunk holds beside the 80 given
    REQUIRE(wait_for([&] { return m.fn.pages_owned() == 680 && nic->pages().given() == 680; }));
    CHECK(nic->pages().windows().size() == 2);
    REQUIRE(m.fn.request_pages(-100));
    REQUIRE(wait_for([&] { return m.fn.pages_owned() == 580 && nic->pages().given() == 580; }));
    REQUIRE(m.fn.set_port_state(false));
    REQUIRE(wait_for([&] { return !nic->port_up(); }));
    REQUIRE(m.fn.set_port_state(true));
    REQUIRE(wait_for([&] { return nic->port_up(); }));
    REQUIRE(nic->teardown().has_value());
    CHECK(nic->stranded().empty());
    nic.reset();
    require_clean(m, baseline);
}

TEST_CASE("mlx5 bring-up: teardown of a firmware that stopped answering completes locally", "[model][mlx5]") {
    rig::test::served_model m;
    const std::size_t baseline = m.srv->dma().window_count();
    fw::hca_options o;
    o.timeouts.stop_events = 100ms;
    o.timeouts.dealloc_uar = 100ms;
    o.timeouts.teardown_hca = 100ms;
    auto nic = up(m, o);
    const std::uint64_t before = m.fn.commands_completed();
    m.fn.silence();
    const auto start = clk::now();
    auto r = nic->teardown();
    CHECK(clk::now() - start < 1s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::timeout);
    CHECK(r.error().message.rfind("teardown step EVENT_QUEUE: DESTROY_EQ (0x302): did not complete within", 0) == 0);
    REQUIRE(nic->failed());
    // what the firmware may still name is listed, and still mapped
    const auto s = nic->stranded();
    const auto count = [&](std::string_view prefix) {
        return std::count_if(s.begin(), s.end(), [&](const auto& x) { return x.what.rfind(prefix, 0) == 0; });
    };
    CHECK(count("firmware page") == 80);
    CHECK(count("command slot") >= 1);
    CHECK(count("command queue page") == 1);
    CHECK(m.fn.pages_owned() == 80);
    CHECK(m.srv->dma().window_count() > baseline);
    CHECK(m.fn.page_violations().empty());
    // and nothing more was sent: the teardown commands after the first one never reached it
    m.fn.resume();
    REQUIRE(m.fn.wait_idle(2s));
    CHECK(m.fn.commands_completed() == before + 1);  // the DESTROY_EQ that timed out, run late
    nic.reset();
    CHECK(m.srv->dma().window_count() > baseline);  // the hca gone, its stranded memory still mapped
}

TEST_CASE("mlx5 bring-up: rig-info against rig-nicsim, two functions, and a refused step", "[model][mlx5]") {
    const char* tool = std::getenv("RIG_INFO");
    const char* nicsim = std::getenv("RIG_NICSIM");
    if (tool == nullptr || nicsim == nullptr) {
        WARN("RIG_INFO or RIG_NICSIM is not set (run through meson test): skipped");
        return;
    }
    const auto run = [](const std::string& cmd, std::string& out) {
        FILE* p = ::popen(cmd.c_str(), "r");
        REQUIRE(p != nullptr);
        std::array<char, 4096> buf;
        std::size_t n;
        while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
            out.append(buf.data(), n);
        }
        return ::pclose(p);
    };
    const auto serve = [&](const std::string& dir, const std::string& extra) {
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            const std::string cmd = std::string("exec ") + nicsim + " --family mlx5 --functions 2 --socket-dir " + dir +
                                    " " + extra + " >/dev/null 2>&1";
            ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        const auto until = clk::now() + 5s;
        while (!(std::filesystem::exists(dir + "/mlx5-0.sock") && std::filesystem::exists(dir + "/mlx5-1.sock")) &&
               clk::now() < until) {
            std::this_thread::sleep_for(5ms);
        }
        return pid;
    };
    const auto stop = [](pid_t pid) {
        ::kill(pid, SIGTERM);
        int status = 0;
        ::waitpid(pid, &status, 0);
        return status;
    };
    rig::test::temp_socket dir;
    const pid_t pid = serve(dir.dir, "");
    std::string out0, out1;
    CHECK(run(std::string(tool) + " --commands vfio-user:" + dir.dir + "/mlx5-0.sock 2>&1", out0) == 0);
    CHECK(run(std::string(tool) + " vfio-user:" + dir.dir + "/mlx5-1.sock 2>&1", out1) == 0);
    // function k has the MAC 02:00:00:00:00:0k+1, and GID 0 is its link-local address
    CHECK(out0.find("mac                        02:00:00:00:00:01\n") != std::string::npos);
    CHECK(out0.find("gid 0                      fe80:0000:0000:0000:0000:00ff:fe00:0001 RoCE v2 IPv6\n") !=
          std::string::npos);
    CHECK(out1.find("mac                        02:00:00:00:00:02\n") != std::string::npos);
    CHECK(out0.find("{\"channel\": \"cmdq\", \"opcode\": 260, \"name\": \"ENABLE_HCA\"") != std::string::npos);
    CHECK(out1.find("{\"channel\"") == std::string::npos);
    // a second run on the same function: it came back clean from the first
    std::string again;
    CHECK(run(std::string(tool) + " vfio-user:" + dir.dir + "/mlx5-0.sock 2>&1", again) == 0);
    const int status = stop(pid);
    CHECK(WIFEXITED(status));
    CHECK(!std::filesystem::exists(dir.dir + "/mlx5-0.sock"));

    // SET_ROCE_ADDRESS (0x761) refused by the firmware: one line naming the step, exit 1
    const pid_t refusing = serve(dir.dir, "--fault-fail 0x761:3:0x4d0bad02");
    std::string err;
    CHECK(run(std::string(tool) + " vfio-user:" + dir.dir + "/mlx5-0.sock 2>&1", err) == 256);
    CHECK(err == "rig-info: vfio-user:" + dir.dir +
                     "/mlx5-0.sock: bring-up step GID: SET_ROCE_ADDRESS (0x761): BAD_PARAM_ERR (0x3), syndrome "
                     "0x4d0bad02\n");
    stop(refusing);
}
