// Command-queue signatures (kernel cmd.c set_signature, calc_block_sig,
// verify_signature, verify_block_sig; mlx5_ifc.h MLX5_CMD_HCA_CAP_CMDIF_CHECKSUM_*):
//  - the model, driven with raw entries: with cmdif_checksum off it runs commands whatever
//    their signatures; once SET_HCA_CAP turns it ENABLED it refuses a bad entry or input block
//    signature with delivery status SIGNAT_ERR without running the command, and signs its output;
//  - the driver (hca_options.checksums): bring-up turns checksums on, long chains in and out
//    run, and an output the model spoils (corrupt_next_output_signature) is bad_output.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "abi/mlx5/ifc.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/hca.hpp"
#include "sim/mlx5/function_model.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace ifc = rig::mlx5::ifc;
namespace cmdq = rig::mlx5::ifc::cmdq;
namespace abi = rig::abi;
namespace drv = rig::driver;
namespace fw = rig::firmware::mlx5;
using ifc::cmd_status;
using ifc::delivery_status;
using ifc::opcode;
using cap = ifc::cmd_hca_cap;
using QIn = ifc::query_hca_cap_in;
using QOut = ifc::query_hca_cap_out;
using SIn = ifc::set_hca_cap_in;
using E = ifc::cmd_queue_entry;
using B = ifc::cmd_if_box;

constexpr std::size_t cap_at = QOut::capability.whole().byte_offset();
static_assert(cap_at == SIn::capability.whole().byte_offset());
constexpr auto enabled = static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::enabled);

constexpr std::size_t in_boxes = 0x10000;   // input blocks, 1 KiB apart
constexpr std::size_t out_boxes = 0x30000;  // output blocks

// How a raw submission spoils its signatures.
struct spoil {
    bool entry = false;                     // the entry's sig byte
    std::optional<std::size_t> block_sig;   // this input block's sig byte
    std::optional<std::size_t> block_ctrl;  // this input block's ctrl_sig (sig made to match)
};
spoil bad_entry() {
    spoil s;
    s.entry = true;
    return s;
}
spoil bad_block_sig(std::size_t i) {
    spoil s;
    s.block_sig = i;
    return s;
}
spoil bad_block_ctrl(std::size_t i) {
    spoil s;
    s.block_ctrl = i;
    return s;
}

struct answer {
    std::array<std::byte, 64> entry{};
    std::vector<std::byte> out;
    std::vector<std::array<std::byte, cmdq::block_bytes>> out_blocks;
    delivery_status delivery() const { return static_cast<delivery_status>(abi::get<E::status>(entry)); }
    cmd_status status() const { return static_cast<cmd_status>(abi::get<ifc::mbox_out::status>(out)); }
};

// The model driven by hand: the driver's PCI layer, raw entries, blocks signed as the kernel
// signs them unless a submission asks otherwise.
struct raw : rig::test::served_model {
    drv::dma_memory mem;
    std::uint64_t iova = 0;
    std::uint8_t token = 0;

    raw() {
        auto m = drv::dma_memory::allocate(1u << 20, drv::page_choice::automatic);
        REQUIRE(m.has_value());
        mem = std::move(*m);
        auto mapped = f->dma_map(mem, 0, mem.size(), drv::dma_access::read_write);
        REQUIRE(mapped.has_value());
        iova = *mapped;
        const auto until = std::chrono::steady_clock::now() + 2s;
        while ((reg(0x1fc) >> 31) != 0) {
            REQUIRE(std::chrono::steady_clock::now() < until);
            std::this_thread::sleep_for(1ms);
        }
        set_reg(0x10, ifc::init_seg::cmdq_addr_high(iova));
        set_reg(0x14, ifc::init_seg::cmdq_addr_low(iova));
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
    std::span<std::byte, cmdq::block_bytes> box(std::size_t off) {
        return std::span<std::byte, cmdq::block_bytes>(mem.bytes().subspan(off).data(), cmdq::block_bytes);
    }

    answer submit(std::span<const std::byte> in, std::size_t outlen, spoil s = {}) {
        token = static_cast<std::uint8_t>(token == 255 ? 1 : token + 1);
        const std::span<std::byte, 64> e(mem.bytes().data(), 64);
        std::fill(e.begin(), e.end(), std::byte{0});
        abi::set<E::type>(e, cmdq::pcie_cmd_if_transport);
        abi::set<E::input_length>(e, in.size());
        abi::set<E::output_length>(e, outlen);
        abi::set<E::token>(e, token);
        abi::set_bytes(e, E::command_input_inline_data, in.first(16));
        const auto chain = [&](std::size_t base, std::size_t n, std::span<const std::byte> data) {
            for (std::size_t i = 0; i < n; ++i) {
                auto b = box(base + i * 0x400);
                std::fill(b.begin(), b.end(), std::byte{0});
                if (!data.empty()) {
                    const std::size_t from = 16 + i * 512;
                    std::memcpy(b.data(), data.data() + from, std::min<std::size_t>(512, data.size() - from));
                }
                abi::set<B::block_number>(b, i);
                abi::set<B::token>(b, token);
                abi::set(b, cmdq::next_pointer, i + 1 < n ? iova + base + (i + 1) * 0x400 : 0);
                cmdq::sign_block(b);
            }
        };
        const std::size_t nin = cmdq::blocks_for_length(in.size());
        const std::size_t nout = cmdq::blocks_for_length(outlen);
        chain(in_boxes, nin, in);
        chain(out_boxes, nout, {});
        if (s.block_sig) {
            box(in_boxes + *s.block_sig * 0x400)[cmdq::block_signature_byte] ^= std::byte{0x01};
        }
        if (s.block_ctrl) {
            auto b = box(in_boxes + *s.block_ctrl * 0x400);
            b[cmdq::block_ctrl_signature_byte] ^= std::byte{0x80};
            b[cmdq::block_signature_byte] = std::byte{cmdq::block_signature(b)};  // sig itself fine
            REQUIRE(cmdq::detail::xor8(b, 0, cmdq::block_bytes) == 0xff);
        }
        abi::set(e, cmdq::input_mailbox_pointer, nin > 0 ? iova + in_boxes : 0);
        abi::set(e, cmdq::output_mailbox_pointer, nout > 0 ? iova + out_boxes : 0);
        abi::set<E::ownership>(e, cmdq::owner_hw);
        cmdq::sign_entry(e);
        if (s.entry) {
            e[cmdq::entry_signature_byte] ^= std::byte{0x10};
        }
        set_reg(0x18, 1u);
        REQUIRE(fn.wait_idle(2s));

        answer a;
        std::copy(e.begin(), e.end(), a.entry.begin());
        REQUIRE(abi::get<E::ownership>(a.entry) == cmdq::owner_sw);
        a.out.resize(std::max<std::size_t>(outlen, 16));
        const auto inline_out = abi::bytes_of(std::span<const std::byte>(a.entry), E::command_output_inline_data);
        std::copy(inline_out.begin(), inline_out.end(), a.out.begin());
        for (std::size_t i = 0; i < nout; ++i) {
            auto b = box(out_boxes + i * 0x400);
            std::array<std::byte, cmdq::block_bytes> copy{};
            std::copy(b.begin(), b.end(), copy.begin());
            a.out_blocks.push_back(copy);
            const std::size_t from = 16 + i * 512;
            std::memcpy(a.out.data() + from, b.data(), std::min<std::size_t>(512, outlen - from));
        }
        return a;
    }

    static std::vector<std::byte> command(opcode op, std::size_t bytes, std::uint16_t op_mod = 0) {
        std::vector<std::byte> in(bytes);
        abi::set<ifc::mbox_in::opcode>(in, static_cast<std::uint16_t>(op));
        abi::set<ifc::mbox_in::op_mod>(in, op_mod);
        return in;
    }
    answer query(ifc::cap_mode m, spoil s = {}) {
        return submit(command(opcode::query_hca_cap, QIn::size_bytes,
                              ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, m)),
                      QOut::size_bytes, s);
    }
    std::uint64_t cur(abi::field field) {
        const answer a = query(ifc::cap_mode::cur);
        REQUIRE(a.delivery() == delivery_status::ok);
        REQUIRE(a.status() == cmd_status::ok);
        return abi::get(std::span<const std::byte>(a.out).subspan(cap_at), field);
    }
    // SET_HCA_CAP general: CUR with `f` = v; 0x1010 bytes in, 8 input blocks
    answer set(abi::field field, std::uint64_t v, spoil s = {}) {
        const answer c = query(ifc::cap_mode::cur);
        REQUIRE(c.delivery() == delivery_status::ok);
        auto in = command(opcode::set_hca_cap, SIn::size_bytes, ifc::set_hca_cap_op_mod(ifc::cap_type::general_device));
        std::copy_n(c.out.begin() + cap_at, 256, in.begin() + cap_at);
        abi::set(std::span<std::byte>(in).subspan(cap_at), field, v);
        return submit(in, ifc::set_hca_cap_out::size_bytes, s);
    }
};

bool entry_signed(const answer& a) { return cmdq::entry_signature_ok(a.entry); }

}  // namespace

TEST_CASE("mlx5 model: cmdif_checksum off by default, signatures not checked", "[model][mlx5][signatures]") {
    raw t;
    REQUIRE(t.submit(raw::command(opcode::enable_hca, ifc::enable_hca_in::size_bytes), ifc::enable_hca_out::size_bytes)
                .delivery() == delivery_status::ok);
    // MAX offers ENABLED, CUR starts DISABLED
    const answer max = t.query(ifc::cap_mode::max);
    REQUIRE(max.delivery() == delivery_status::ok);
    CHECK(abi::get<cap::cmdif_checksum>(std::span<const std::byte>(max.out).subspan(cap_at)) == enabled);
    CHECK(t.cur(cap::cmdif_checksum) == 0);
    // a spoiled entry signature: run anyway (as a card with checksums off); the entry comes
    // back signed
    const answer q = t.query(ifc::cap_mode::cur, bad_entry());
    CHECK(q.delivery() == delivery_status::ok);
    CHECK(q.status() == cmd_status::ok);
    CHECK(entry_signed(q));
    // a spoiled input block: run, and its effect is there
    const answer s = t.set(cap::disable_link_up, 1, bad_block_sig(2));
    CHECK(s.delivery() == delivery_status::ok);
    CHECK(s.status() == cmd_status::ok);
    CHECK(t.cur(cap::disable_link_up) == 1);
    // INITIAL_STATE (1) and 2 are no mode a driver sets
    CHECK(t.set(cap::cmdif_checksum, 1).status() == cmd_status::bad_param_err);
    CHECK(t.set(cap::cmdif_checksum, 2).status() == cmd_status::bad_param_err);
    CHECK(t.cur(cap::cmdif_checksum) == 0);
}

TEST_CASE("mlx5 model: with cmdif_checksum ENABLED bad signatures are SIGNAT_ERR and nothing runs",
          "[model][mlx5][signatures]") {
    raw t;
    REQUIRE(t.submit(raw::command(opcode::enable_hca, ifc::enable_hca_in::size_bytes), ifc::enable_hca_out::size_bytes)
                .delivery() == delivery_status::ok);
    const answer on = t.set(cap::cmdif_checksum, enabled);
    REQUIRE(on.delivery() == delivery_status::ok);
    REQUIRE(on.status() == cmd_status::ok);

    // long output chain: 8 blocks, each signed by the device (kernel verify_block_sig rules)
    const answer q = t.query(ifc::cap_mode::cur);
    REQUIRE(q.delivery() == delivery_status::ok);
    CHECK(entry_signed(q));
    REQUIRE(q.out_blocks.size() == 8);
    for (std::size_t i = 0; i < q.out_blocks.size(); ++i) {
        INFO("output block " << i);
        CHECK(cmdq::block_signature_ok(q.out_blocks[i]));
        CHECK(cmdq::detail::xor8(q.out_blocks[i], cmdq::block_ctrl_start, cmdq::block_signature_byte) == 0xff);
    }
    CHECK(abi::get<cap::cmdif_checksum>(std::span<const std::byte>(q.out).subspan(cap_at)) == enabled);

    // long input chain, well signed: runs
    REQUIRE(t.set(cap::disable_link_up, 1).status() == cmd_status::ok);
    REQUIRE(t.cur(cap::disable_link_up) == 1);

    // spoiled: the entry, an input block's sig, an input block's ctrl_sig
    for (const spoil s : {bad_entry(), bad_block_sig(3), bad_block_ctrl(7)}) {
        const answer a = t.set(cap::disable_link_up, 0, s);
        CHECK(a.delivery() == delivery_status::signat_err);
        CHECK(entry_signed(a));  // the refusal itself is signed
        // not run: no output, the inline output bytes stay as the driver left them (zero)
        CHECK(std::all_of(a.out.begin(), a.out.begin() + 16, [](std::byte b) { return b == std::byte{0}; }));
    }
    // none ran: CUR unchanged, the function still enabled and answering
    CHECK(t.cur(cap::disable_link_up) == 1);
    CHECK(t.fn.state() == rig::sim::mlx5::hca_state::enabled);
}

TEST_CASE("mlx5 driver: hca_options.checksums turns signatures on, and spoiled outputs are bad_output",
          "[model][mlx5][signatures]") {
    rig::test::served_model m;
    fw::hca_options o;
    o.checksums = true;  // event mode (the default): commands complete by CMD EQEs
    auto h = fw::hca::bring_up(*m.f, o);
    INFO((h ? std::string() : h.error().message));
    REQUIRE(h.has_value());
    fw::hca& nic = **h;
    CHECK(nic.caps().cmdif_checksum);
    CHECK(nic.commands().verifies_signatures());

    const auto by = [] { return std::chrono::steady_clock::now() + 2s; };
    auto in = raw::command(opcode::query_hca_cap, QIn::size_bytes,
                           ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::cur));
    // 8 output blocks, checked
    auto cur = nic.commands().exec<QIn, QOut>(in, by());
    REQUIRE(cur.has_value());
    CHECK(abi::get<cap::cmdif_checksum>(std::span<const std::byte>(*cur).subspan(cap_at)) == enabled);

    m.fn.corrupt_next_output_signature(2);
    auto bad = nic.commands().exec<QIn, QOut>(in, by());
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().kind == fw::error_kind::bad_output);
    CHECK(bad.error().opcode == opcode::query_hca_cap);
    CHECK_THAT(bad.error().message, Catch::Contains("output mailbox 2 signature 0x"));
    CHECK_THAT(bad.error().message, Catch::Contains(", expected 0x"));

    m.fn.corrupt_next_output_signature();
    bad = nic.commands().exec<QIn, QOut>(in, by());
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().kind == fw::error_kind::bad_output);
    CHECK_THAT(bad.error().message, Catch::Contains("completion entry signature"));

    // the queue goes on
    REQUIRE(nic.commands().exec<QIn, QOut>(in, by()).has_value());
    CHECK(nic.teardown().has_value());
}

TEST_CASE("mlx5 driver: checksums off by default, a spoiled output signature goes unchecked",
          "[model][mlx5][signatures]") {
    rig::test::served_model m;
    fw::hca_options o;
    o.use_events = false;
    auto h = fw::hca::bring_up(*m.f, o);
    REQUIRE(h.has_value());
    fw::hca& nic = **h;
    CHECK_FALSE(nic.caps().cmdif_checksum);
    CHECK_FALSE(nic.commands().verifies_signatures());
    auto in = raw::command(opcode::query_hca_cap, QIn::size_bytes,
                           ifc::query_hca_cap_op_mod(ifc::cap_type::general_device, ifc::cap_mode::cur));
    m.fn.corrupt_next_output_signature(2);
    auto out = nic.commands().exec<QIn, QOut>(in, std::chrono::steady_clock::now() + 2s);
    REQUIRE(out.has_value());
    CHECK(abi::get<cap::cmdif_checksum>(std::span<const std::byte>(*out).subspan(cap_at)) == 0);
    CHECK(nic.teardown().has_value());
}
