// The mlx5 function model (sim/mlx5) served in this process by the vfio-user server, driven as
// a driver would: through driver::open("vfio-user:..."), DMA memory it maps, BAR0 registers and
// raw command-queue entries built with the abi/mlx5/ifc layouts.
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace cmdq = rig::mlx5::ifc::cmdq;
namespace abi = rig::abi;
namespace drv = rig::driver;
namespace model = rig::sim::mlx5;
using ifc::cmd_status;
using ifc::delivery_status;
using ifc::opcode;

// Where things lie in the test's DMA memory (offsets from its start).
constexpr std::size_t mem_bytes = 2u << 20;
constexpr std::size_t cmdq_off = 0;
constexpr std::size_t in_boxes_off = 0x10000;   // input blocks, 1 KiB apart
constexpr std::size_t out_boxes_off = 0x30000;  // output blocks
constexpr std::size_t pages_off = 0x100000;     // pages given to the firmware

struct submit_options {
    bool owned = true;                          // ownership bit handed to the device
    std::optional<std::uint64_t> in_ptr;        // instead of the first input block's IOVA
    std::optional<std::uint64_t> out_ptr;
    std::optional<std::uint8_t> block_token;    // written in the blocks instead of the entry's
    std::optional<std::uint32_t> block_number;  // of the last input block
    std::uint8_t type = cmdq::pcie_cmd_if_transport;
    std::size_t in_blocks_given = SIZE_MAX;     // fewer blocks than inlen needs
};

struct result {
    std::uint8_t status_own = 0;
    std::vector<std::byte> out;
    bool owned() const { return (status_own & 1) != 0; }
    delivery_status delivery() const { return static_cast<delivery_status>(status_own >> 1); }
    cmd_status status() const { return static_cast<cmd_status>(abi::get<ifc::mbox_out::status>(out)); }
    std::uint32_t syndrome() const { return static_cast<std::uint32_t>(abi::get<ifc::mbox_out::syndrome>(out)); }
    std::uint64_t get(abi::field f) const { return abi::get(out, f); }
};

struct rig_fixture : rig::test::served_model {
    drv::dma_memory mem;
    std::uint64_t iova = 0;
    std::uint8_t next_token = 1;

    explicit rig_fixture(model::function_options o = {}, drv::open_options oo = {})
        : served_model(o, oo) {
        auto m = drv::dma_memory::allocate(mem_bytes, drv::page_choice::automatic);
        REQUIRE(m.has_value());
        mem = std::move(*m);
        auto mapped = f->dma_map(mem, 0, mem.size(), drv::dma_access::read_write);
        REQUIRE(mapped.has_value());
        iova = *mapped;
    }

    std::uint32_t reg(std::uint32_t off) {
        std::array<std::byte, 4> b{};
        REQUIRE(f->region_read(drv::region::bar0, off, b).has_value());
        return abi::load_be<std::uint32_t>(b.data());
    }
    void set_reg(std::uint32_t off, std::uint32_t v) {
        std::array<std::byte, 4> b{};
        abi::store_be<std::uint32_t>(b.data(), v);
        REQUIRE(f->region_write(drv::region::bar0, off, b).has_value());
    }
    void wait_ready() {
        const auto until = std::chrono::steady_clock::now() + 2s;
        while ((reg(0x1fc) >> 31) != 0) {
            REQUIRE(std::chrono::steady_clock::now() < until);
            std::this_thread::sleep_for(1ms);
        }
    }
    void program_cmdq() {
        const std::uint64_t q = iova + cmdq_off;
        set_reg(0x10, ifc::init_seg::cmdq_addr_high(q));
        set_reg(0x14, ifc::init_seg::cmdq_addr_low(q));
    }
    // fresh function ready for commands
    void bring_up() {
        wait_ready();
        program_cmdq();
    }
    std::span<std::byte> at(std::size_t off, std::size_t n) { return mem.bytes().subspan(off, n); }

    result submit(std::span<const std::byte> in, std::size_t outlen, unsigned slot = 0, submit_options o = {}) {
        const std::uint8_t token = next_token++;
        if (next_token == 0) {
            next_token = 1;
        }
        std::span<std::byte> e = at(cmdq_off + slot * 64, 64);
        std::fill(e.begin(), e.end(), std::byte{0});
        using E = ifc::cmd_queue_entry;
        using B = ifc::cmd_if_box;
        abi::set<E::type>(e, o.type);
        abi::set<E::input_length>(e, in.size());
        abi::set<E::output_length>(e, outlen);
        abi::set<E::token>(e, token);
        std::array<std::byte, 16> inline_in{};
        std::memcpy(inline_in.data(), in.data(), std::min<std::size_t>(16, in.size()));
        abi::set_bytes(e, E::command_input_inline_data, inline_in);
        // input chain
        const std::size_t nin = std::min(cmdq::blocks_for_length(in.size()), o.in_blocks_given);
        for (std::size_t i = 0; i < nin; ++i) {
            std::span<std::byte> b = at(in_boxes_off + i * 0x400, cmdq::block_bytes);
            std::fill(b.begin(), b.end(), std::byte{0});
            const std::size_t from = 16 + i * 512;
            std::memcpy(b.data(), in.data() + from, std::min<std::size_t>(512, in.size() - from));
            abi::set<B::block_number>(b, i == nin - 1 && o.block_number ? *o.block_number : i);
            abi::set<B::token>(b, o.block_token.value_or(token));
            abi::set(b, cmdq::next_pointer, i + 1 < nin ? iova + in_boxes_off + (i + 1) * 0x400 : 0);
        }
        abi::set(e, cmdq::input_mailbox_pointer, o.in_ptr.value_or(nin > 0 ? iova + in_boxes_off : 0));
        // output chain
        const std::size_t nout = cmdq::blocks_for_length(outlen);
        for (std::size_t i = 0; i < nout; ++i) {
            std::span<std::byte> b = at(out_boxes_off + i * 0x400, cmdq::block_bytes);
            std::fill(b.begin(), b.end(), std::byte{0xee});  // the device must overwrite data
            abi::set<B::block_number>(b, i);
            abi::set<B::token>(b, token);
            abi::set(b, cmdq::next_pointer, i + 1 < nout ? iova + out_boxes_off + (i + 1) * 0x400 : 0);
        }
        abi::set(e, cmdq::output_mailbox_pointer, o.out_ptr.value_or(nout > 0 ? iova + out_boxes_off : 0));
        abi::set<E::ownership>(e, o.owned ? cmdq::owner_hw : cmdq::owner_sw);
        set_reg(0x18, 1u << slot);  // the model's firmware thread takes it from here
        REQUIRE(fn.wait_idle(2s));

        result r;
        r.status_own = std::to_integer<std::uint8_t>(e[63]);
        r.out.resize(std::max<std::size_t>(outlen, 16));
        std::memcpy(r.out.data(), abi::bytes_of(std::span<const std::byte>(e), E::command_output_inline_data).data(), 16);
        for (std::size_t i = 0; i < nout; ++i) {
            const std::size_t from = 16 + i * 512;
            std::memcpy(r.out.data() + from, at(out_boxes_off + i * 0x400, 512).data(),
                        std::min<std::size_t>(512, outlen - from));
        }
        return r;
    }

    template <class In>
    std::vector<std::byte> make(opcode op, std::uint16_t op_mod = 0, std::size_t extra = 0) {
        return rig::test::make<In>(op, op_mod, extra);
    }
    template <class In, class Out>
    result simple(opcode op, std::uint16_t op_mod = 0) {
        return submit(make<In>(op, op_mod), Out::size_bytes);
    }
    result enable() { return simple<ifc::enable_hca_in, ifc::enable_hca_out>(opcode::enable_hca); }
    result query_pages(ifc::query_pages_op_mod m) {
        return simple<ifc::query_pages_in, ifc::query_pages_out>(opcode::query_pages, static_cast<std::uint16_t>(m));
    }
    // gives pages [first, first + n) of the pages area
    result give(std::size_t first, std::size_t n, std::uint64_t bad_offset = 0) {
        using In = ifc::manage_pages_in;
        auto in = make<In>(opcode::manage_pages, static_cast<std::uint16_t>(ifc::manage_pages_op_mod::allocation_success),
                           8 * n);
        abi::set<In::input_num_entries>(in, n);
        for (std::size_t i = 0; i < n; ++i) {
            abi::set(in, ifc::pas_entry<In>(i), iova + pages_off + (first + i) * 4096 + (i == 0 ? bad_offset : 0));
        }
        return submit(in, ifc::manage_pages_out::size_bytes);
    }
};

bool ok(const result& r) {
    return !r.owned() && r.delivery() == delivery_status::ok && r.status() == cmd_status::ok;
}

}  // namespace

TEST_CASE("mlx5 model: PCI identity and the initialization segment", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 300ms;  // long enough to see it on a loaded machine
    rig_fixture t(o);
    CHECK(t.f->config_read16(0) == model::mellanox_vendor_id);
    CHECK(t.f->config_read16(2) == model::connectx6dx_device_id);
    CHECK(t.f->config_read32(8) == 0x02000000u);
    CHECK((*t.f->config_read32(0x10) & 0xf) == 0xcu);  // 64-bit prefetchable memory BAR
    auto info = t.f->get_region_info(drv::region::bar0);
    REQUIRE(info.has_value());
    CHECK(info->size == 32u << 20);
    // BAR sizing: all ones read back as the size mask
    REQUIRE(t.f->config_write16(0x10, 0xffff).has_value());
    REQUIRE(t.f->config_write16(0x12, 0xffff).has_value());
    CHECK(*t.f->config_read32(0x10) == 0xfe00000cu);

    CHECK((t.reg(0x1fc) >> 31) == 1);  // initializing right after creation
    t.wait_ready();
    std::array<std::byte, 0x1014> image{};
    REQUIRE(t.f->region_read(drv::region::bar0, 0, image).has_value());
    const auto s = ifc::init_seg::decode(image);
    CHECK(s.cmd_interface_rev == 5);
    CHECK(s.fw_rev_major == 22);
    CHECK(s.fw_rev_minor == 39);
    CHECK(s.fw_rev_subminor == 1002);
    CHECK(s.log_cmdq_size == 5);
    CHECK(s.log_cmdq_stride == 6);
    CHECK(s.nic_interface == 0);
    CHECK_FALSE(s.initializing);
    CHECK(s.health_syndrome == 0);
    const auto h = ifc::init_seg::decode_health(image);
    CHECK(h.synd == 0);
    CHECK(h.fw_version != 0xffffffffu);
    // the heartbeat moves
    const std::uint32_t c1 = t.reg(0x1010) & 0xffffff;
    const std::uint32_t c2 = t.reg(0x1010) & 0xffffff;
    CHECK(c1 != c2);

    // the queue address: RO geometry bits of 0x14 keep their values
    t.set_reg(0x10, 0x12);
    t.set_reg(0x14, 0x3456f000u | 0xff);
    CHECK(t.reg(0x10) == 0x12u);
    CHECK(t.reg(0x14) == (0x3456f000u | 0x56));
    CHECK(t.fn.cmdq_address() == 0x123456f000ull);
    // UAR pages are memory shared with the client (a write, even a trapped one, stays there);
    // BAR0 between the last UAR page and the MSI-X table reads 0 and ignores writes
    t.set_reg(0x10000, 0xdeadbeef);
    CHECK(t.reg(0x10000) == 0xdeadbeefu);
    const std::uint64_t past_uars = model::layout_of(model::function_options{}).uar_end;
    t.set_reg(static_cast<std::uint32_t>(past_uars), 0xdeadbeef);
    CHECK(t.reg(static_cast<std::uint32_t>(past_uars)) == 0u);
}

TEST_CASE("mlx5 model: a doorbell while initializing is ignored", "[model][mlx5]") {
    model::function_options o;
    o.init_time = 10s;
    rig_fixture t(o);
    t.program_cmdq();
    auto r = t.submit(t.make<ifc::nop_in>(opcode::nop), 16);
    CHECK(r.owned());
    CHECK(t.fn.doorbells_ignored() == 1);
}

TEST_CASE("mlx5 model: bring-up commands", "[model][mlx5]") {
    rig_fixture t;
    t.bring_up();

    SECTION("NOP works before ENABLE_HCA; the entry comes back signed") {
        auto r = t.simple<ifc::nop_in, ifc::nop_out>(opcode::nop);
        CHECK(ok(r));
        CHECK(r.syndrome() == 0);
        CHECK(cmdq::entry_signature_ok(t.at(cmdq_off, 64).first<64>()));
        CHECK(t.fn.last_completion(0).ran);
    }
    SECTION("commands before ENABLE_HCA are refused with BAD_SYS_STATE") {
        auto r = t.simple<ifc::init_hca_in, ifc::init_hca_out>(opcode::init_hca);
        CHECK(r.delivery() == delivery_status::ok);
        CHECK(r.status() == cmd_status::bad_sys_state_err);
        CHECK(r.syndrome() != 0);
        r = t.simple<ifc::disable_hca_in, ifc::disable_hca_out>(opcode::disable_hca);
        CHECK(r.status() == cmd_status::bad_sys_state_err);
        r = t.simple<ifc::teardown_hca_in, ifc::teardown_hca_out>(opcode::teardown_hca);
        CHECK(r.status() == cmd_status::bad_sys_state_err);
    }
    SECTION("the whole sequence, as the kernel runs it") {
        CHECK(t.fn.state() == model::hca_state::disabled);
        CHECK(ok(t.enable()));
        CHECK(t.fn.state() == model::hca_state::enabled);
        auto again = t.enable();
        CHECK(again.delivery() == delivery_status::ok);
        CHECK(again.status() == cmd_status::bad_sys_state_err);
        CHECK(again.syndrome() == model::syndrome_of(0x104, model::failure::wrong_state));

        // QUERY_ISSI: 0x70 bytes of output, so one output mailbox block
        auto q = t.simple<ifc::query_issi_in, ifc::query_issi_out>(opcode::query_issi);
        REQUIRE(ok(q));
        CHECK(q.get(ifc::query_issi_out::current_issi) == 0);
        CHECK((q.get(ifc::query_issi_out::supported_issi_dw0) & 0x2) != 0);
        // the device wrote the block's data (0xee before), and not past the output's 0x70 bytes
        CHECK(t.at(out_boxes_off, 512)[0] == std::byte{0});
        CHECK(t.at(out_boxes_off, 512)[0x70 - 16 - 1] == std::byte{0x3});
        CHECK(t.at(out_boxes_off, 512)[0x70 - 16] == std::byte{0xee});
        CHECK(cmdq::entry_signature_ok(t.at(cmdq_off, 64).first<64>()));

        auto si = t.make<ifc::set_issi_in>(opcode::set_issi);
        abi::set<ifc::set_issi_in::current_issi>(si, 2);
        auto r = t.submit(si, ifc::set_issi_out::size_bytes);
        CHECK(r.status() == cmd_status::bad_param_err);
        abi::set<ifc::set_issi_in::current_issi>(si, 1);
        CHECK(ok(t.submit(si, ifc::set_issi_out::size_bytes)));
        CHECK(t.fn.issi() == 1);
        q = t.simple<ifc::query_issi_in, ifc::query_issi_out>(opcode::query_issi);
        CHECK(q.get(ifc::query_issi_out::current_issi) == 1);

        auto boot = t.query_pages(ifc::query_pages_op_mod::boot_pages);
        REQUIRE(ok(boot));
        CHECK(boot.get(ifc::query_pages_out::num_pages) == 16);
        CHECK(ok(t.give(0, 16)));
        CHECK(t.fn.pages_owned() == 16);
        CHECK(t.query_pages(ifc::query_pages_op_mod::boot_pages).get(ifc::query_pages_out::num_pages) == 0);

        // INIT_HCA before the init pages
        r = t.simple<ifc::init_hca_in, ifc::init_hca_out>(opcode::init_hca);
        CHECK(r.status() == cmd_status::bad_sys_state_err);
        CHECK(r.syndrome() == model::syndrome_of(0x102, model::failure::pages_missing));

        auto init = t.query_pages(ifc::query_pages_op_mod::init_pages);
        REQUIRE(ok(init));
        CHECK(init.get(ifc::query_pages_out::num_pages) == 64);
        // 40 pages: 16 + 8 * 40 = 336 bytes, one input block; then 24 more
        CHECK(ok(t.give(16, 40)));
        CHECK(ok(t.give(56, 24)));
        CHECK(t.fn.pages_owned() == 80);
        CHECK(t.query_pages(ifc::query_pages_op_mod::init_pages).get(ifc::query_pages_out::num_pages) == 0);
        CHECK(t.query_pages(ifc::query_pages_op_mod::regular_pages).get(ifc::query_pages_out::num_pages) == 0);

        CHECK(ok(t.simple<ifc::init_hca_in, ifc::init_hca_out>(opcode::init_hca)));
        CHECK(t.fn.state() == model::hca_state::initialized);
        r = t.simple<ifc::init_hca_in, ifc::init_hca_out>(opcode::init_hca);
        CHECK(r.status() == cmd_status::bad_sys_state_err);

        // QUERY_ADAPTER, as the kernel's mlx5_query_board_id (fw.c) asks it after INIT_HCA:
        // 0x110 bytes of output, the PSID at byte 0x100 (0xf0 into the param block)
        auto qa = t.simple<ifc::query_adapter_in, ifc::query_adapter_out>(opcode::query_adapter);
        REQUIRE(ok(qa));
        using P = ifc::query_adapter_param_block;
        constexpr auto at = ifc::query_adapter_out::query_adapter_struct;
        CHECK(qa.get(at(P::ieee_vendor_id)) == 0x0002c9);  // Mellanox's OUI
        CHECK(qa.get(at(P::vsd_vendor_id)) == 0x15b3);
        const auto psid = abi::bytes_of(std::span<const std::byte>(qa.out), at(P::vsd_contd_psid));
        CHECK(std::string(reinterpret_cast<const char*>(psid.data())) == "RIG_MODEL_CX6DX");
        CHECK(psid.size() == 16);
        CHECK(std::to_integer<int>(qa.out[0x100]) == 'R');
        CHECK(std::to_integer<int>(psid[15]) == 0);  // NUL-terminated within its 16 bytes

        // TAKE while initialized: the firmware keeps what it runs on
        using MI = ifc::manage_pages_in;
        using MO = ifc::manage_pages_out;
        auto take = t.make<MI>(opcode::manage_pages, static_cast<std::uint16_t>(ifc::manage_pages_op_mod::hca_return_pages));
        abi::set<MI::input_num_entries>(take, 100);
        r = t.submit(take, ifc::length_with_pas<MO>(100));
        REQUIRE(ok(r));
        CHECK(r.get(MO::output_num_entries) == 0);
        // too small an output for 100 addresses
        r = t.submit(take, ifc::length_with_pas<MO>(99));
        CHECK(r.status() == cmd_status::bad_outp_len_err);

        auto td = t.make<ifc::teardown_hca_in>(opcode::teardown_hca);
        r = t.submit(td, ifc::teardown_hca_out::size_bytes);
        REQUIRE(ok(r));
        CHECK(t.fn.state() == model::hca_state::enabled);

        // after teardown every page comes back, 100 asked, 80 returned: two output blocks
        r = t.submit(take, ifc::length_with_pas<MO>(100));
        REQUIRE(ok(r));
        REQUIRE(r.get(MO::output_num_entries) == 80);
        std::vector<std::uint64_t> back;
        for (std::size_t i = 0; i < 80; ++i) {
            back.push_back(r.get(ifc::pas_entry<MO>(i)));
        }
        std::sort(back.begin(), back.end());
        for (std::size_t i = 0; i < 80; ++i) {
            CHECK(back[i] == t.iova + pages_off + i * 4096);
        }
        CHECK(t.fn.pages_owned() == 0);

        CHECK(ok(t.simple<ifc::disable_hca_in, ifc::disable_hca_out>(opcode::disable_hca)));
        CHECK(t.fn.state() == model::hca_state::disabled);
        // a disabled function has no board to tell about
        qa = t.simple<ifc::query_adapter_in, ifc::query_adapter_out>(opcode::query_adapter);
        CHECK(qa.status() == cmd_status::bad_sys_state_err);
    }
    SECTION("MANAGE_PAGES refuses unaligned, duplicate and unmapped pages, all or nothing") {
        auto r = t.give(0, 4, 0x800);
        CHECK(r.status() == cmd_status::bad_param_err);
        CHECK(r.syndrome() == model::syndrome_of(0x108, model::failure::unaligned_page));
        CHECK(t.fn.pages_owned() == 0);
        CHECK(ok(t.give(0, 2)));
        r = t.give(1, 2);
        CHECK(r.syndrome() == model::syndrome_of(0x108, model::failure::page_already_given));
        CHECK(t.fn.pages_owned() == 2);
        const auto faults = t.srv->dma().fault_count();
        r = t.give(0, 1, mem_bytes + 0x10000 - pages_off);  // beyond the mapping
        CHECK(r.syndrome() == model::syndrome_of(0x108, model::failure::page_not_mapped));
        CHECK(t.srv->dma().fault_count() == faults + 1);
        CHECK(t.fn.pages_owned() == 2);
    }
}

TEST_CASE("mlx5 model: command errors", "[model][mlx5]") {
    rig_fixture t;
    t.bring_up();

    SECTION("unknown opcode: BAD_OP with a syndrome") {
        std::vector<std::byte> in(16);
        abi::set<ifc::mbox_in::opcode>(in, 0x7ff);
        auto r = t.submit(in, 16);
        CHECK(r.delivery() == delivery_status::ok);
        CHECK(r.status() == cmd_status::bad_op_err);
        CHECK(r.syndrome() != 0);
    }
    SECTION("input or output shorter than the command's") {
        auto in = t.make<ifc::set_issi_in>(opcode::set_issi);
        in.resize(8);
        auto r = t.submit(in, 16);
        CHECK(r.status() == cmd_status::bad_inp_len_err);
        r = t.submit(t.make<ifc::query_issi_in>(opcode::query_issi), 16);
        CHECK(r.status() == cmd_status::bad_outp_len_err);
        CHECK(t.fn.issi() == 0);
    }
    SECTION("a block with the wrong token: TOK_ERR, the command does not run") {
        submit_options o;
        o.block_token = 0x77;
        auto in = t.make<ifc::manage_pages_in>(opcode::manage_pages, 1, 8 * 40);
        abi::set<ifc::manage_pages_in::input_num_entries>(in, 40);
        auto r = t.submit(in, 16, 0, o);
        CHECK_FALSE(r.owned());
        CHECK(r.delivery() == delivery_status::tok_err);
        CHECK(t.fn.pages_owned() == 0);
    }
    SECTION("a block out of sequence: BAD_BLK_NUM_ERR") {
        submit_options o;
        o.block_number = 5;
        auto r = t.submit(std::vector<std::byte>(600), 16, 0, o);
        CHECK(r.delivery() == delivery_status::bad_blk_num_err);
    }
    SECTION("misaligned mailbox pointers") {
        submit_options o;
        o.in_ptr = t.iova + in_boxes_off + 0x200;
        auto r = t.submit(std::vector<std::byte>(100), 16, 0, o);
        CHECK(r.delivery() == delivery_status::in_ptr_align_err);
        submit_options p;
        p.out_ptr = t.iova + out_boxes_off + 0x40;
        r = t.submit(t.make<ifc::query_issi_in>(opcode::query_issi), ifc::query_issi_out::size_bytes, 0, p);
        CHECK(r.delivery() == delivery_status::out_ptr_align_err);
    }
    SECTION("a chain shorter than the length: IN_LENGTH_ERR / OUT_LENGTH_ERR") {
        submit_options o;
        o.in_blocks_given = 1;
        auto r = t.submit(std::vector<std::byte>(16 + 512 + 10), 16, 0, o);
        CHECK(r.delivery() == delivery_status::in_length_err);
        submit_options p;
        p.out_ptr = 0;
        r = t.submit(t.make<ifc::query_issi_in>(opcode::query_issi), ifc::query_issi_out::size_bytes, 0, p);
        CHECK(r.delivery() == delivery_status::out_length_err);
    }
    SECTION("a mailbox outside mapped memory: delivery error and a DMA fault") {
        submit_options o;
        o.in_ptr = t.iova + mem_bytes + 0x100000;
        const auto faults = t.srv->dma().fault_count();
        auto r = t.submit(std::vector<std::byte>(100), 16, 0, o);
        CHECK_FALSE(r.owned());
        CHECK(r.delivery() == delivery_status::fw_err);
        CHECK(t.srv->dma().fault_count() == faults + 1);
        REQUIRE_FALSE(t.srv->dma().faults().empty());
        CHECK(t.srv->dma().faults().back().iova == t.iova + mem_bytes + 0x100000);
    }
    SECTION("a wrong transport type: CMD_DESCR_ERR") {
        submit_options o;
        o.type = 3;
        auto r = t.submit(t.make<ifc::nop_in>(opcode::nop), 16, 0, o);
        CHECK(r.delivery() == delivery_status::cmd_descr_err);
    }
    SECTION("an entry the driver still owns: the doorbell is ignored, the entry unchanged") {
        submit_options o;
        o.owned = false;
        std::array<std::byte, 64> before{};
        auto in = t.make<ifc::nop_in>(opcode::nop);
        auto r = t.submit(in, 16, 3, o);
        std::memcpy(before.data(), t.at(cmdq_off + 3 * 64, 64).data(), 64);
        CHECK(r.status_own == 0);
        CHECK(r.syndrome() == 0);
        CHECK(t.fn.doorbells_ignored() == 1);
        CHECK_FALSE(t.fn.last_completion(3).ran);
        // the same bytes, rung again, stay the same
        t.set_reg(0x18, 1u << 3);
        REQUIRE(t.fn.wait_idle(2s));  // the firmware has looked at it
        CHECK(t.fn.doorbells_ignored() == 2);
        CHECK(std::memcmp(before.data(), t.at(cmdq_off + 3 * 64, 64).data(), 64) == 0);
        // once owned, slot 3 runs
        r = t.submit(in, 16, 3);
        CHECK(ok(r));
        CHECK(t.fn.last_completion(3).ran);
    }
    SECTION("reset: back to disabled, no pages, initializing again") {
        REQUIRE(ok(t.enable()));
        REQUIRE(ok(t.give(0, 3)));
        REQUIRE(t.f->reset().has_value());
        CHECK(t.fn.state() == model::hca_state::disabled);
        CHECK(t.fn.pages_owned() == 0);
        CHECK(t.fn.cmdq_address() == 0);
        t.bring_up();
        CHECK(ok(t.enable()));
    }
}

TEST_CASE("mlx5 model: commands over DMA by message (no shared fd)", "[model][mlx5]") {
    drv::open_options oo;
    oo.vfio_user_dma_by_message = true;
    rig_fixture t({}, oo);
    t.bring_up();
    CHECK(ok(t.simple<ifc::nop_in, ifc::nop_out>(opcode::nop)));
    CHECK(ok(t.enable()));
    auto q = t.simple<ifc::query_issi_in, ifc::query_issi_out>(opcode::query_issi);
    REQUIRE(ok(q));
    CHECK(q.get(ifc::query_issi_out::supported_issi_dw0) == 0x3);
    CHECK(ok(t.give(0, 40)));
    CHECK(t.fn.pages_owned() == 40);
}
