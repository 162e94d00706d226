// firmware/mlx5 command_queue, polling mode: against the mlx5 function model over vfio-user
// (bring-up order, mailbox chains, status errors), and against a fake function over plain
// memory for what the model does not do (never completing, delivery errors, a wrong revision).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace cmdq = rig::mlx5::ifc::cmdq;
namespace abi = rig::abi;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
namespace model = rig::sim::mlx5;
using ifc::cmd_status;
using ifc::opcode;
using clk = std::chrono::steady_clock;

clk::time_point soon() { return clk::now() + 1s; }

using rig::test::make;

using model_fixture = rig::test::served_model;

// Pages for MANAGE_PAGES, mapped for the device.
struct pages {
    drv::dma_memory mem;
    std::uint64_t iova = 0;
    pages(drv::function& f, std::size_t n) {
        auto m = drv::dma_memory::allocate(n * 4096, drv::page_choice::small_only);
        REQUIRE(m.has_value());
        mem = std::move(*m);
        auto i = f.dma_map(mem, 0, mem.size(), drv::dma_access::read_write);
        REQUIRE(i.has_value());
        iova = *i;
    }
};

std::vector<std::byte> give_in(std::uint64_t first_iova, std::size_t n) {
    using In = ifc::manage_pages_in;
    auto in = make<In>(opcode::manage_pages, static_cast<std::uint16_t>(ifc::manage_pages_op_mod::allocation_success),
                       8 * n);
    abi::set<In::input_num_entries>(in, n);
    for (std::size_t i = 0; i < n; ++i) {
        abi::set(in, ifc::pas_entry<In>(i), first_iova + i * 4096);
    }
    return in;
}

std::unique_ptr<fw::command_queue> make_queue(drv::function& f, fw::command_queue_options o = {}) {
    auto q = fw::command_queue::create(f, o);
    INFO((q ? std::string() : q.error().message));
    REQUIRE(q.has_value());
    return std::move(*q);
}

std::uint32_t query_pages(fw::command_queue& q, ifc::query_pages_op_mod m) {
    auto out = q.exec<ifc::query_pages_in, ifc::query_pages_out>(
        make<ifc::query_pages_in>(opcode::query_pages, static_cast<std::uint16_t>(m)), soon());
    INFO((out ? std::string() : out.error().message));
    REQUIRE(out.has_value());
    REQUIRE(out->size() == ifc::query_pages_out::size_bytes);
    return static_cast<std::uint32_t>(abi::get<ifc::query_pages_out::num_pages>(*out));
}

void require_ok(const fw::result<std::vector<std::byte>>& r) {
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.has_value());
    CHECK(abi::get<ifc::mbox_out::status>(*r) == 0);
}

// ---- a fake function over plain memory --------------------------------------------------------
enum class fake_mode { never_complete, deliver_error };

class fake_function final : public drv::function {
public:
    std::vector<std::byte> bar0 = std::vector<std::byte>(ifc::initial_seg::size_bytes);
    fake_mode mode = fake_mode::never_complete;
    ifc::delivery_status delivery = ifc::delivery_status::signat_err;
    std::map<std::uint64_t, std::byte*> maps;  // iova -> memory
    std::uint64_t next_iova = 0x10000000;
    unsigned doorbells = 0;

    fake_function() {
        abi::set<ifc::initial_seg::cmd_interface_rev>(bar0, 5);
        abi::set<ifc::initial_seg::log_cmdq_size>(bar0, 5);
        abi::set<ifc::initial_seg::log_cmdq_stride>(bar0, 6);
    }
    std::byte* host(std::uint64_t iova) {
        auto it = maps.upper_bound(iova);
        REQUIRE(it != maps.begin());
        --it;
        return it->second + (iova - it->first);
    }

    std::string_view name() const noexcept override { return "fake"; }
    drv::result<void> config_read(std::uint32_t, std::span<std::byte>) override { return {}; }
    drv::result<void> config_write(std::uint32_t, std::span<const std::byte>) override { return {}; }
    drv::result<drv::region_info> get_region_info(drv::region index) override {
        drv::region_info r;
        r.index = index;
        r.size = bar0.size();
        return r;
    }
    drv::result<void> region_read(drv::region, std::uint64_t offset, std::span<std::byte> out) override {
        std::memcpy(out.data(), bar0.data() + offset, out.size());
        return {};
    }
    drv::result<void> region_write(drv::region, std::uint64_t offset, std::span<const std::byte> in) override {
        std::memcpy(bar0.data() + offset, in.data(), in.size());
        if (offset == ifc::initial_seg::command_doorbell_vector.byte_offset()) {
            ++doorbells;
            const auto vec = abi::load_be<std::uint32_t>(in.data());
            if (mode == fake_mode::deliver_error) {
                const std::uint64_t q = abi::get(bar0, ifc::initial_seg::cmdq_phy_addr_63_32) << 32 |
                                        abi::get(bar0, ifc::initial_seg::cmdq_phy_addr_31_12) << 12;
                for (unsigned s = 0; s < 32; ++s) {
                    if ((vec >> s & 1) != 0) {
                        host(q + s * 64)[63] = std::byte{static_cast<std::uint8_t>(static_cast<std::uint8_t>(delivery) << 1)};
                    }
                }
            }
        }
        return {};
    }
    drv::result<drv::bar_mapping> map_bar(drv::region, drv::caching) override {
        return std::unexpected(drv::error{"not here"});
    }
    drv::result<std::uint64_t> dma_map(const drv::dma_memory& m, std::size_t offset, std::size_t bytes,
                                       drv::dma_access) override {
        const std::uint64_t iova = next_iova;
        next_iova += (bytes + 0xfffff) & ~std::uint64_t{0xfffff};
        maps[iova] = m.data() + offset;
        return iova;
    }
    drv::result<void> dma_unmap(std::uint64_t iova, std::size_t) override {
        maps.erase(iova);
        return {};
    }
    drv::result<drv::irq_info> get_irq_info(drv::irq_kind kind) override {
        drv::irq_info i;
        i.kind = kind;
        return i;
    }
    drv::result<std::vector<int>> enable_irqs(drv::irq_kind, std::uint32_t) override { return std::vector<int>{}; }
    drv::result<void> disable_irqs(drv::irq_kind) override { return {}; }
    drv::result<void> unmask_intx() override { return {}; }
    drv::result<void> reset() override { return {}; }
    void release() noexcept override {}
};

}  // namespace

TEST_CASE("mlx5 fw: setup programs the queue and waits out initializing", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 150ms;
    model_fixture t(o);
    const auto start = clk::now();
    auto q = make_queue(*t.f);
    CHECK(clk::now() - start >= 100ms);  // it waited for `initializing` to clear
    CHECK(q->cmd_interface_rev() == 5);
    CHECK(q->entries() == 32);
    CHECK(q->log_stride() == 6);
    CHECK(t.fn.cmdq_address() == q->queue_iova());
    CHECK((q->queue_iova() & 0xfff) == 0);
    CHECK(q->stranded().empty());

    // NOP runs at once
    auto nop = q->exec<ifc::nop_in, ifc::nop_out>(make<ifc::nop_in>(opcode::nop), soon());
    require_ok(nop);
    CHECK(nop->size() == ifc::nop_out::size_bytes);
    CHECK(t.fn.doorbells_ignored() == 0);
}

TEST_CASE("mlx5 fw: setup gives up on firmware that stays initializing", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 10s;
    model_fixture t(o);
    fw::command_queue_options qo;
    qo.init_timeout = 100ms;
    const auto start = clk::now();
    auto q = fw::command_queue::create(*t.f, qo);
    CHECK(clk::now() - start < 2s);
    REQUIRE_FALSE(q.has_value());
    CHECK(q.error().kind == fw::error_kind::transport);
    CHECK_THAT(q.error().message, Catch::StartsWith("mlx5 firmware did not finish initializing within 100 ms"));
}

TEST_CASE("mlx5 fw: bring-up order ENABLE_HCA .. INIT_HCA", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 1ms;
    o.firmware.boot_pages = 40;  // boot pages: 16 + 320 bytes, one input mailbox
    o.firmware.init_pages = 24;
    model_fixture t(o);
    auto q = make_queue(*t.f);
    pages pg(*t.f, 64);

    require_ok(q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), soon()));
    CHECK(t.fn.state() == model::hca_state::enabled);

    // QUERY_ISSI: the supported ISSIs lie past the inline bytes, in an output mailbox
    auto issi = q->exec<ifc::query_issi_in, ifc::query_issi_out>(make<ifc::query_issi_in>(opcode::query_issi), soon());
    require_ok(issi);
    REQUIRE(issi->size() == ifc::query_issi_out::size_bytes);
    CHECK(cmdq::blocks_for_length(issi->size()) == 1);
    CHECK(abi::get<ifc::query_issi_out::current_issi>(*issi) == 0);
    CHECK(abi::get<ifc::query_issi_out::supported_issi_dw0>(*issi) == 0x3);

    auto set_issi = make<ifc::set_issi_in>(opcode::set_issi);
    abi::set<ifc::set_issi_in::current_issi>(set_issi, 1);
    require_ok(q->exec<ifc::set_issi_in, ifc::set_issi_out>(set_issi, soon()));
    CHECK(t.fn.issi() == 1);

    const auto boot = query_pages(*q, ifc::query_pages_op_mod::boot_pages);
    REQUIRE(boot == 40);
    auto give_boot = give_in(pg.iova, boot);
    CHECK(give_boot.size() == 16 + 320);
    CHECK(cmdq::blocks_for_length(give_boot.size()) == 1);
    require_ok(q->exec<ifc::manage_pages_in, ifc::manage_pages_out>(give_boot, soon()));
    CHECK(t.fn.pages_owned() == 40);
    CHECK(query_pages(*q, ifc::query_pages_op_mod::boot_pages) == 0);

    const auto init = query_pages(*q, ifc::query_pages_op_mod::init_pages);
    REQUIRE(init == 24);
    require_ok(q->exec<ifc::manage_pages_in, ifc::manage_pages_out>(give_in(pg.iova + 40 * 4096, init), soon()));
    CHECK(t.fn.pages_owned() == 64);

    require_ok(q->exec<ifc::init_hca_in, ifc::init_hca_out>(make<ifc::init_hca_in>(opcode::init_hca), soon()));
    CHECK(t.fn.state() == model::hca_state::initialized);
    CHECK(q->stranded().empty());
}

TEST_CASE("mlx5 fw: firmware statuses become named errors", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 1ms;
    model_fixture t(o);
    auto q = make_queue(*t.f);
    require_ok(q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), soon()));

    SECTION("a second ENABLE_HCA is BAD_SYS_STATE") {
        auto r = q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), soon());
        REQUIRE_FALSE(r.has_value());
        const auto& e = r.error();
        CHECK(e.kind == fw::error_kind::status);
        CHECK(e.opcode == opcode::enable_hca);
        CHECK(e.op_mod == 0);
        CHECK(e.status == cmd_status::bad_sys_state_err);
        CHECK(e.syndrome == model::syndrome_of(0x104, model::failure::wrong_state));
        CHECK(e.message == "ENABLE_HCA (0x104): BAD_SYS_STATE_ERR (0x4), syndrome 0x4d010404");
    }
    SECTION("an unknown opcode is BAD_OP") {
        auto in = make<ifc::nop_in>(static_cast<opcode>(0x7ff), 0x3);
        auto r = q->exec(in, 16, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().kind == fw::error_kind::status);
        CHECK(r.error().status == cmd_status::bad_op_err);
        CHECK(r.error().op_mod == 3);
        CHECK(r.error().message ==
              "unknown command opcode (0x7ff) op_mod 0x3: BAD_OP_ERR (0x2), syndrome 0x4d07ff01");
    }
    SECTION("a bad page address is BAD_PARAM") {
        auto r = q->exec<ifc::manage_pages_in, ifc::manage_pages_out>(give_in(0x123, 1), soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().status == cmd_status::bad_param_err);
        CHECK_THAT(r.error().message, Catch::StartsWith("MANAGE_PAGES (0x108) op_mod 0x1: BAD_PARAM_ERR (0x3)"));
    }
    SECTION("an input shorter than its layout is refused before the device sees it") {
        std::vector<std::byte> shorty(8);
        auto r = q->exec<ifc::init_hca_in, ifc::init_hca_out>(shorty, soon());
        REQUIRE_FALSE(r.has_value());
        CHECK(r.error().kind == fw::error_kind::bad_input);
        CHECK(r.error().message == "init_hca_in of 8 bytes is shorter than its 32-byte layout");
    }
    // the queue still works after every failure
    require_ok(q->exec<ifc::nop_in, ifc::nop_out>(make<ifc::nop_in>(opcode::nop), soon()));
}

TEST_CASE("mlx5 fw: a long mailbox chain round-trips", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 1ms;
    model_fixture t(o);
    auto q = make_queue(*t.f);
    pages pg(*t.f, 300);
    require_ok(q->exec<ifc::enable_hca_in, ifc::enable_hca_out>(make<ifc::enable_hca_in>(opcode::enable_hca), soon()));

    auto in = give_in(pg.iova, 300);
    REQUIRE(in.size() == 16 + 2400);
    REQUIRE(cmdq::blocks_for_length(in.size()) == 5);
    require_ok(q->exec<ifc::manage_pages_in, ifc::manage_pages_out>(in, soon()));
    CHECK(t.fn.pages_owned() == 300);

    // TAKE them back: the addresses come back through a 5-block output chain
    using In = ifc::manage_pages_in;
    using Out = ifc::manage_pages_out;
    auto take = make<In>(opcode::manage_pages, static_cast<std::uint16_t>(ifc::manage_pages_op_mod::hca_return_pages));
    abi::set<In::input_num_entries>(take, 300);
    auto out = q->exec(take, ifc::length_with_pas<Out>(300), soon());
    require_ok(out);
    REQUIRE(out->size() == 16 + 2400);
    REQUIRE(abi::get<Out::output_num_entries>(*out) == 300);
    std::vector<std::uint64_t> got;
    for (std::size_t i = 0; i < 300; ++i) {
        got.push_back(abi::get(*out, ifc::pas_entry<Out>(i)));
    }
    std::sort(got.begin(), got.end());
    for (std::size_t i = 0; i < 300; ++i) {
        CHECK(got[i] == pg.iova + i * 4096);
    }
    CHECK(t.fn.pages_owned() == 0);

    // many commands in a row reuse the slot and blocks; tokens roll over without reaching 0
    for (int i = 0; i < 300; ++i) {
        require_ok(q->exec<ifc::nop_in, ifc::nop_out>(make<ifc::nop_in>(opcode::nop), soon()));
    }
}

TEST_CASE("mlx5 fw: a command that never completes times out and strands its memory", "[mlx5]") {
    fake_function f;
    auto q = make_queue(f);
    CHECK(abi::get(f.bar0, ifc::initial_seg::cmdq_phy_addr_63_32) == q->queue_iova() >> 32);
    CHECK(abi::get(f.bar0, ifc::initial_seg::cmdq_phy_addr_31_12) == (q->queue_iova() & 0xffffffffu) >> 12);

    auto in = give_in(0x1000, 100);  // 816 bytes: 2 input blocks
    const auto start = clk::now();
    auto r = q->exec(in, ifc::length_with_pas<ifc::manage_pages_out>(70), start + 50ms);  // 576: 2 output blocks
    CHECK(clk::now() - start >= 50ms);
    CHECK(clk::now() - start < 1s);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::timeout);
    CHECK(r.error().opcode == opcode::manage_pages);
    CHECK(r.error().message == "MANAGE_PAGES (0x108) op_mod 0x1: did not complete within 50 ms");
    CHECK(f.doorbells == 1);
    CHECK(abi::load_be<std::uint32_t>(f.bar0.data() + 0x18) == 1u);  // slot 0 rung

    // what the device was handed: the entry in slot 0, signed, owned by the device
    std::byte* e = f.host(q->queue_iova());
    std::span<const std::byte, 64> entry(e, 64);
    CHECK(cmdq::entry_signature_ok(entry));
    CHECK(abi::get<ifc::cmd_queue_entry::ownership>(entry) == 1);
    CHECK(abi::get<ifc::cmd_queue_entry::type>(entry) == 7);
    CHECK(abi::get<ifc::cmd_queue_entry::input_length>(entry) == in.size());
    CHECK(abi::get<ifc::cmd_queue_entry::output_length>(entry) == 576);
    const auto token = abi::get<ifc::cmd_queue_entry::token>(entry);
    CHECK(token != 0);

    auto s = q->stranded();
    REQUIRE(s.size() == 1);
    CHECK(s[0].slot == 0);
    CHECK(s[0].opcode == opcode::manage_pages);
    CHECK(s[0].op_mod == 1);
    CHECK(s[0].token == token);
    CHECK(s[0].entry_iova == q->queue_iova());
    REQUIRE(s[0].mailbox_iovas.size() == 4);
    CHECK(abi::get(entry, cmdq::input_mailbox_pointer) == s[0].mailbox_iovas[0]);
    CHECK(abi::get(entry, cmdq::output_mailbox_pointer) == s[0].mailbox_iovas[2]);
    // the input chain: data, block numbers, the token, next pointers
    for (std::size_t i = 0; i < 2; ++i) {
        std::span<const std::byte, 576> b(f.host(s[0].mailbox_iovas[i]), 576);
        CHECK(abi::get<ifc::cmd_if_box::block_number>(b) == i);
        CHECK(abi::get<ifc::cmd_if_box::token>(b) == token);
        CHECK(abi::get(b, cmdq::next_pointer) == (i == 0 ? s[0].mailbox_iovas[1] : 0));
        CHECK(cmdq::block_signature_ok(b));
        CHECK(std::memcmp(b.data(), in.data() + 16 + i * 512, std::min<std::size_t>(512, in.size() - 16 - i * 512)) == 0);
    }
    CHECK(std::memcmp(e + 0x10, in.data(), 16) == 0);  // inline input

    // the next command goes to slot 1, with fresh blocks and a fresh token
    auto r2 = q->exec(make<ifc::nop_in>(opcode::nop), 16, clk::now() + 5ms);
    REQUIRE_FALSE(r2.has_value());
    CHECK(r2.error().kind == fw::error_kind::timeout);
    s = q->stranded();
    REQUIRE(s.size() == 2);
    CHECK(s[1].slot == 1);
    CHECK(s[1].mailbox_iovas.empty());
    CHECK(s[1].token != s[0].token);
    CHECK(abi::load_be<std::uint32_t>(f.bar0.data() + 0x18) == 2u);
}

TEST_CASE("mlx5 fw: a delivery status is reported by name", "[mlx5]") {
    fake_function f;
    f.mode = fake_mode::deliver_error;
    f.delivery = ifc::delivery_status::tok_err;
    auto q = make_queue(f);
    auto r = q->exec(make<ifc::nop_in>(opcode::nop), 16, soon());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == fw::error_kind::delivery);
    CHECK(r.error().delivery == ifc::delivery_status::tok_err);
    CHECK(r.error().message == "NOP (0x80d): delivery status TOK_ERR (0x2)");
    CHECK(q->stranded().empty());  // the device handed the slot back
}

TEST_CASE("mlx5 fw: an unsupported command interface revision is refused", "[mlx5]") {
    fake_function f;
    abi::set<ifc::initial_seg::cmd_interface_rev>(f.bar0, 4);
    auto q = fw::command_queue::create(f);
    REQUIRE_FALSE(q.has_value());
    CHECK(q.error().message == "mlx5 command interface revision 4 on fake is not supported (this driver speaks 5)");
    CHECK(f.maps.empty());  // nothing mapped before the revision was checked
}
