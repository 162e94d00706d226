// Unit tests of the command-channel helpers: names of opcodes and statuses, entry and mailbox
// signatures, mailbox counts, and the init-segment decoders on a BAR0 image written by hand.
#include <catch2/catch.hpp>

#include <array>
#include <set>
#include <vector>

#include "abi/mlx5/ifc.hpp"

namespace abi = rig::abi;
namespace ifc = rig::mlx5::ifc;
namespace cmdq = rig::mlx5::ifc::cmdq;
namespace init_seg = rig::mlx5::ifc::init_seg;

TEST_CASE("mlx5_ifc: to_string of opcodes, statuses, delivery statuses and event types", "[mlx5_ifc]") {
    CHECK(ifc::to_string(ifc::opcode::create_qp) == "CREATE_QP");
    CHECK(ifc::to_string(ifc::opcode::qp_2err) == "2ERR_QP");
    CHECK(ifc::to_string(ifc::opcode::init2rtr_qp) == "INIT2RTR_QP");
    CHECK(ifc::to_string(ifc::opcode::nop) == "NOP");
    CHECK(static_cast<int>(ifc::opcode::access_reg) == 0x805);
    CHECK(ifc::to_string(static_cast<ifc::opcode>(0x106)) == "unknown command opcode");
    CHECK(ifc::to_string(static_cast<ifc::opcode>(0xffff)) == "unknown command opcode");

    CHECK(ifc::to_string(ifc::cmd_status::ok) == "OK");
    CHECK(ifc::to_string(static_cast<ifc::cmd_status>(0x03)) == "BAD_PARAM_ERR");
    CHECK(ifc::to_string(static_cast<ifc::cmd_status>(0x10)) == "BAD_QP_STATE_ERR");
    CHECK(ifc::to_string(static_cast<ifc::cmd_status>(0x51)) == "BAD_OUTP_LEN_ERR");
    CHECK(ifc::to_string(static_cast<ifc::cmd_status>(0x07)) == "unknown status");
    CHECK(ifc::to_string(static_cast<ifc::cmd_status>(0x52)) == "unknown status");

    CHECK(ifc::to_string(ifc::delivery_status::ok) == "OK");
    CHECK(ifc::to_string(static_cast<ifc::delivery_status>(0x01)) == "SIGNAT_ERR");
    CHECK(ifc::to_string(static_cast<ifc::delivery_status>(0x10)) == "CMD_DESCR_ERR");
    CHECK(ifc::to_string(static_cast<ifc::delivery_status>(0x0a)) == "unknown delivery status");

    CHECK(ifc::to_string(ifc::event_type::page_request) == "PAGE_REQUEST");
    CHECK(ifc::to_string(static_cast<ifc::event_type>(0x0a)) == "CMD");
    CHECK(ifc::to_string(static_cast<ifc::event_type>(0x06)) == "unknown event type");
    CHECK(init_seg::to_string(init_seg::health_syndrome::dead_irisc) == "DEAD_IRISC");
    CHECK(init_seg::to_string(static_cast<init_seg::health_syndrome>(0x02)) == "unknown health syndrome");

    // Every listed value has its own name, and names are distinct.
    std::set<std::string_view> names;
    for (auto op : ifc::all_opcodes) {
        CHECK(names.insert(ifc::to_string(op)).second);
    }
    names.clear();
    for (auto s : ifc::all_cmd_statuses) {
        CHECK(names.insert(ifc::to_string(s)).second);
    }
    CHECK(std::size(ifc::all_cmd_statuses) == 16);
    CHECK(std::size(ifc::all_delivery_statuses) == 11);
}

TEST_CASE("mlx5_ifc: command entry signature", "[mlx5_ifc]") {
    std::array<std::byte, 64> e{};
    e[0x00] = std::byte{0x07};  // type: PCIe command transport
    e[0x07] = std::byte{0x10};  // input_length 16
    e[0x3f] = std::byte{0x01};  // owned by the device
    e[0x3d] = std::byte{0x77};  // a stale signature is not counted
    // XOR of the rest = 0x07 ^ 0x10 ^ 0x01 = 0x16, so the signature is ~0x16 = 0xe9.
    CHECK(cmdq::entry_signature(e) == 0xe9);
    CHECK_FALSE(cmdq::entry_signature_ok(e));
    cmdq::sign_entry(e);
    CHECK(std::to_integer<int>(e[0x3d]) == 0xe9);
    CHECK(cmdq::entry_signature_ok(e));
    std::uint8_t all = 0;
    for (auto b : e) {
        all = static_cast<std::uint8_t>(all ^ std::to_integer<std::uint8_t>(b));
    }
    CHECK(all == 0xff);
    e[0x10] = std::byte{0x01};
    CHECK_FALSE(cmdq::entry_signature_ok(e));
    // The signature byte is the one cmd_queue_entry.signature names.
    CHECK(ifc::cmd_queue_entry::signature.byte_offset() == cmdq::entry_signature_byte);
}

TEST_CASE("mlx5_ifc: mailbox block signatures", "[mlx5_ifc]") {
    std::array<std::byte, 576> b{};
    b[0x000] = std::byte{0xaa};  // data
    b[0x23b] = std::byte{0x02};  // block_number 2
    b[0x23d] = std::byte{0x05};  // token
    // ctrl covers 0x200..0x23d: 0x02 ^ 0x05 = 0x07 -> 0xf8; then 0x000..0x23e: 0xaa ^ 0x07 ^ 0xf8
    // = 0x55 -> 0xaa.
    CHECK(cmdq::block_ctrl_signature(b) == 0xf8);
    cmdq::sign_block(b);
    CHECK(std::to_integer<int>(b[0x23e]) == 0xf8);
    CHECK(std::to_integer<int>(b[0x23f]) == 0xaa);
    CHECK(cmdq::block_signature_ok(b));
    b[0x100] = std::byte{0x01};
    CHECK_FALSE(cmdq::block_signature_ok(b));
    CHECK(ifc::cmd_if_box::ctrl_signature.byte_offset() == cmdq::block_ctrl_signature_byte);
    CHECK(ifc::cmd_if_box::signature.byte_offset() == cmdq::block_signature_byte);
    CHECK(ifc::cmd_if_box::block_number.byte_offset() == 0x238);
}

TEST_CASE("mlx5_ifc: mailbox blocks for a message length", "[mlx5_ifc]") {
    STATIC_REQUIRE(cmdq::blocks_for_length(0) == 0);
    STATIC_REQUIRE(cmdq::blocks_for_length(16) == 0);
    STATIC_REQUIRE(cmdq::blocks_for_length(17) == 1);
    STATIC_REQUIRE(cmdq::blocks_for_length(16 + 512) == 1);
    STATIC_REQUIRE(cmdq::blocks_for_length(16 + 513) == 2);
    STATIC_REQUIRE(cmdq::blocks_for_length(0x1010) == 8);  // QUERY_HCA_CAP output
    STATIC_REQUIRE(cmdq::blocks_for_length(ifc::query_hca_cap_out::size_bytes) == 8);
    STATIC_REQUIRE(cmdq::blocks_for_length(ifc::create_qp_in::size_bytes) == 1);
}

namespace {
void put(std::vector<std::byte>& bar0, std::size_t at, std::initializer_list<int> bytes) {
    for (int b : bytes) {
        bar0[at++] = std::byte(static_cast<unsigned char>(b));
    }
}
}  // namespace

TEST_CASE("mlx5_ifc: init segment decoders on a hand-built BAR0 image", "[mlx5_ifc]") {
    std::vector<std::byte> bar0(ifc::initial_seg::size_bytes);
    put(bar0, 0x0000, {0x00, 0x1c, 0x00, 0x10});  // fw_rev: minor 28, major 16
    put(bar0, 0x0004, {0x00, 0x05, 0x07, 0xd0});  // cmdif rev 5, subminor 2000
    put(bar0, 0x0010, {0x00, 0x00, 0x00, 0x01});  // cmdq_addr_h
    put(bar0, 0x0014, {0x12, 0x34, 0x51, 0x56});  // addr 0x12345000, nic_interface 1, log size 5, stride 6
    put(bar0, 0x01fc, {0x80, 0x00, 0x00, 0x00});  // initializing
    put(bar0, 0x0220, {0xde, 0xad, 0xbe, 0xef});  // assert_existptr
    put(bar0, 0x0224, {0x00, 0x00, 0x12, 0x34});  // assert_callra
    put(bar0, 0x022c, {0x00, 0x00, 0x00, 0x2a});  // time
    put(bar0, 0x0230, {0xff, 0xff, 0xff, 0xff});  // fw_version: the device is gone
    put(bar0, 0x0234, {0x00, 0x00, 0x0b, 0xad});  // hw_id
    put(bar0, 0x0238, {0x8a, 0x00, 0x00, 0x00});  // rfr, valid, severity 2
    put(bar0, 0x023c, {0x03, 0x07, 0x12, 0x34});  // irisc 3, synd 7, ext_synd 0x1234
    put(bar0, 0x1010, {0xab, 0x12, 0x34, 0x56});  // health syndrome 0xab, counter 0x123456

    const init_seg::state s = init_seg::decode(bar0);
    CHECK(s.fw_rev_major == 16);
    CHECK(s.fw_rev_minor == 28);
    CHECK(s.fw_rev_subminor == 2000);
    CHECK(s.cmd_interface_rev == init_seg::supported_cmd_interface_rev);
    CHECK(s.log_cmdq_size == 5);
    CHECK(s.log_cmdq_stride == 6);
    CHECK(s.nic_interface == static_cast<std::uint8_t>(init_seg::nic_interface::disabled));
    CHECK(s.initializing);
    CHECK(s.health_syndrome == 0xab);
    CHECK(s.health_counter == 0x123456);
    CHECK(abi::get(bar0, ifc::initial_seg::cmdq_phy_addr_31_12) == 0x12345);
    CHECK(abi::get(bar0, ifc::initial_seg::cmdq_phy_addr_63_32) == 1);

    const init_seg::health h = init_seg::decode_health(bar0);
    CHECK(h.assert_existptr == 0xdeadbeef);
    CHECK(h.assert_callra == 0x1234);
    CHECK(h.time == 42);
    CHECK(h.fw_version == 0xffffffff);
    CHECK(h.hw_id == 0xbad);
    CHECK(h.rfr);
    CHECK(h.valid);
    CHECK(h.severity == 2);
    CHECK(h.irisc_index == 3);
    CHECK(h.synd == static_cast<std::uint8_t>(init_seg::health_syndrome::dead_irisc));
    CHECK(h.ext_synd == 0x1234);

    // SW_RESET (7) needs the kernel's three bits; the header's two-bit field reads 3.
    put(bar0, 0x0014, {0x12, 0x34, 0x57, 0x56});
    CHECK(init_seg::decode(bar0).nic_interface == static_cast<std::uint8_t>(init_seg::nic_interface::sw_reset));
    CHECK(abi::get(bar0, ifc::initial_seg::nic_interface) == 3);
    put(bar0, 0x01fc, {0x7f, 0xff, 0xff, 0xff});
    CHECK_FALSE(init_seg::decode(bar0).initializing);

    // A short image is refused.
    std::vector<std::byte> short_bar0(0x1000);
    CHECK_THROWS_AS(init_seg::decode(short_bar0), std::invalid_argument);

    CHECK(init_seg::cmdq_addr_high(0x0000'0001'2345'6000ull) == 1);
    CHECK(init_seg::cmdq_addr_low(0x0000'0001'2345'6000ull) == 0x23456000u);
    CHECK_THROWS_AS(init_seg::cmdq_addr_low(0x1234'5800ull), std::invalid_argument);
}
