// abi/mlx5/completion.hpp and doorbell.hpp against rdma-core's struct mlx5_cqe64 /
// mlx5_err_cqe and its CQE getters.
#include <array>
#include <random>
#include <sstream>

#include <catch2/catch.hpp>

#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "oracle.hpp"

namespace abi = rig::mlx5::abi;

TEST_CASE("mlx5 CQEs equal rdma-core's struct mlx5_cqe64 and decode back", "[mlx5][cqe][vendor]") {
    std::mt19937_64 rng{99};
    const std::array<std::uint8_t, 7> opcodes{0, 1, 2, 3, 13, 14, 6};
    std::ostringstream req;
    std::vector<abi::completion> sent;
    for (int i = 0; i < 2000; ++i) {
        abi::completion c{};
        c.opcode = static_cast<abi::cqe_opcode>(opcodes[rng() % opcodes.size()]);
        c.qpn = static_cast<std::uint32_t>(rng() & 0xffffff);
        c.send_opcode = static_cast<std::uint8_t>(rng());
        c.wqe_counter = static_cast<std::uint16_t>(rng());
        c.immediate = static_cast<std::uint32_t>(rng());
        c.owner = rng() % 2;
        c.solicited = rng() % 2;
        c.format = static_cast<std::uint8_t>(rng() % 4);
        const bool err = c.opcode == abi::cqe_opcode::req_err || c.opcode == abi::cqe_opcode::resp_err;
        c.byte_count = err ? 0 : static_cast<std::uint32_t>(rng());
        c.syndrome = err ? static_cast<std::uint8_t>(rng()) : 0;
        c.vendor_syndrome = err ? static_cast<std::uint8_t>(rng()) : 0;
        c.error = err ? abi::cqe_error_from_syndrome(c.syndrome) : abi::cqe_error::none;
        req << "C " << unsigned(c.opcode) << ' ' << c.qpn << ' ' << unsigned(c.send_opcode) << ' '
            << c.wqe_counter << ' ' << c.byte_count << ' ' << c.immediate << ' '
            << unsigned(c.syndrome) << ' ' << unsigned(c.vendor_syndrome) << ' ' << c.owner << ' '
            << c.solicited << ' ' << unsigned(c.format) << '\n';
        sent.push_back(c);
    }
    const auto theirs = rig::test::run_mlx5dv_oracle(req.str());
    REQUIRE(theirs.size() == sent.size());
    for (std::size_t i = 0; i < sent.size(); ++i) {
        const abi::completion& c = sent[i];
        std::array<std::byte, 64> ours;
        abi::encode(ours, c);
        std::istringstream line(theirs[i]);
        unsigned opcode, owner, se, format;
        std::string bytes;
        line >> opcode >> owner >> se >> format >> bytes;
        INFO("CQE " << i << " " << theirs[i]);
        REQUIRE(rig::test::to_hex(ours.data(), 64) == bytes);
        // rdma-core's getters read what our encoder wrote
        CHECK(opcode == unsigned(c.opcode));
        CHECK(owner == unsigned(c.owner));
        CHECK(se == unsigned(c.solicited));
        CHECK(format == unsigned(c.format));
        const abi::completion d = abi::decode(ours);
        CHECK(d.opcode == c.opcode);
        CHECK(d.qpn == c.qpn);
        CHECK(d.send_opcode == c.send_opcode);
        CHECK(d.wqe_counter == c.wqe_counter);
        CHECK(d.byte_count == c.byte_count);
        CHECK(d.immediate == c.immediate);
        CHECK(d.owner == c.owner);
        CHECK(d.solicited == c.solicited);
        CHECK(d.format == c.format);
        CHECK(d.error == c.error);
        CHECK(d.syndrome == c.syndrome);
        CHECK(d.vendor_syndrome == c.vendor_syndrome);
    }
}

TEST_CASE("error syndromes decode into named kinds, unknown ones into a kind of their own",
          "[mlx5][cqe]") {
    CHECK(abi::cqe_error_from_syndrome(0x05) == abi::cqe_error::flushed);
    CHECK(abi::cqe_error_from_syndrome(0x13) == abi::cqe_error::remote_access);
    CHECK(abi::cqe_error_from_syndrome(0x15) == abi::cqe_error::transport_retry_exceeded);
    CHECK(abi::cqe_error_from_syndrome(0x16) == abi::cqe_error::rnr_retry_exceeded);
    CHECK(abi::cqe_error_from_syndrome(0x01) == abi::cqe_error::local_length);
    for (unsigned s : {0x00u, 0x03u, 0x07u, 0x17u, 0x21u, 0x93u, 0xffu}) {
        INFO("syndrome " << s);
        CHECK(abi::cqe_error_from_syndrome(static_cast<std::uint8_t>(s)) == abi::cqe_error::unknown);
    }
    CHECK(abi::to_string(abi::cqe_error::unknown) == "unknown error syndrome");
    CHECK(abi::to_string(abi::cqe_error::rnr_retry_exceeded) == "RNR retry counter exceeded");
}

TEST_CASE("a CQE with an opcode the hardware never writes decodes raw, with error unknown", "[mlx5][cqe]") {
    std::array<std::byte, 64> c{};
    rig::abi::store_be<std::uint32_t>(c.data() + 0x2c, 77);          // byte_cnt
    rig::abi::store_be<std::uint32_t>(c.data() + 0x38, 0x08000123);  // sop_drop_qpn
    for (unsigned op : {7u, 8u, 9u, 10u, 11u}) {
        c[0x3f] = static_cast<std::byte>(op << 4);
        const abi::completion d = abi::decode(c);
        CHECK(unsigned(d.opcode) == op);
        CHECK(d.error == abi::cqe_error::unknown);
        CHECK(d.qpn == 0x123);
        CHECK(d.byte_count == 0);
        CHECK(abi::to_string(d.opcode) == "unknown");
    }
}

TEST_CASE("CQE ownership follows the pass parity and ignores INVALID", "[mlx5][cqe]") {
    std::array<std::byte, 64> c{};
    const std::uint32_t log_size = 2;   // 4 entries
    c[0x3f] = std::byte{0x00};          // REQ, owner 0: software's on the first pass
    CHECK(abi::cqe_is_software_owned(c, 0, log_size));
    CHECK(abi::cqe_is_software_owned(c, 3, log_size));
    CHECK_FALSE(abi::cqe_is_software_owned(c, 4, log_size));   // second pass wants owner 1
    c[0x3f] = std::byte{0x01};
    CHECK(abi::cqe_is_software_owned(c, 5, log_size));
    CHECK_FALSE(abi::cqe_is_software_owned(c, 1, log_size));
    c[0x3f] = std::byte{0xf0};          // INVALID, as software initialises the ring
    CHECK_FALSE(abi::cqe_is_software_owned(c, 0, log_size));
    c[0x3f] = std::byte{0xf1};
    CHECK_FALSE(abi::cqe_is_software_owned(c, 4, log_size));
}

TEST_CASE("doorbell values are laid out as rdma-core and the kernel write them", "[mlx5][doorbell]") {
    // QP record counters keep 16 bits, CQ consumer index 24
    CHECK(abi::qp_dbr_counter(0x12345) == rig::abi::to_be32(0x2345));
    CHECK(abi::cq_dbr_set_ci(0x1234567) == rig::abi::to_be32(0x234567));
    // arm: sn in [29:28], cmd bit 24, ci in [23:0]; UAR value: arm word, then CQ number
    const std::uint32_t w = abi::cq_arm_word(5, abi::cq_arm_solicited, 0xabcdef12);
    CHECK(w == ((1u << 28) | (1u << 24) | 0xcdef12u));
    std::array<std::byte, 8> uar{};
    rig::abi::store_be<std::uint64_t>(uar.data(), abi::cq_arm_doorbell(w, 0x1000077));
    CHECK(rig::test::to_hex(uar.data(), 8) == "11cdef1200000077");
    CHECK(abi::eq_doorbell(3, 0x1000005) == 0x03000005u);
    CHECK(abi::bfreg_offset(0, 9) == 0x800);
    CHECK(abi::bfreg_offset(3, 9) == 0xe00);
    CHECK(abi::uar::cq_doorbell == 0x20);
    CHECK(abi::uar::eq_doorbell_arm == 0x40);
    CHECK(abi::uar::eq_doorbell_no_arm == 0x48);
}
