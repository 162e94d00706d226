// The data path decodes CQEs with abi's decoder, the one pinned to rdma-core's mlx5dv.h
// (test/unit/mlx5_wqe): for every opcode value 0..15, every syndrome mlx5dv.h names
// (MLX5_CQE_SYNDROME_*) and some it does not, both owner parities, every format and the
// solicited bit, over CQEs of random bytes, completion_queue::poll hands back exactly what
// abi::decode reads from the same bytes, and both read them as struct mlx5_cqe64 /
// mlx5_err_cqe lay them out.
#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <random>

#include "abi/bits.hpp"
#include "abi/mlx5/completion.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "test/unit/qp_mlx5/memory.hpp"

namespace abi = rig::mlx5::abi;
using rig::qp::mlx5::completion_queue;
using rig::test::aligned_bytes;

namespace {

// mlx5dv.h MLX5_CQE_SYNDROME_*: LOCAL_LENGTH_ERR .. REMOTE_ABORTED_ERR; then syndromes it does
// not name (0, a gap, MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT's value, all ones).
constexpr std::array<std::uint8_t, 17> syndromes{0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13,
                                                 0x14, 0x15, 0x16, 0x22, 0x00, 0x03, 0x93, 0xff};

// What mlx5dv.h's layout says the bytes hold (struct mlx5_cqe64, struct mlx5_err_cqe for
// MLX5_CQE_REQ_ERR / MLX5_CQE_RESP_ERR), read field by field from its offsets.
abi::completion per_mlx5dv(const std::array<std::byte, 64>& b) {
    const auto op_own = std::to_integer<std::uint8_t>(b[0x3f]);
    const unsigned opcode = op_own >> 4;
    abi::completion x{};
    x.opcode = static_cast<abi::cqe_opcode>(opcode);
    x.format = (op_own >> 2) & 3;        // mlx5dv_get_cqe_format
    x.solicited = (op_own >> 1) & 1;     // mlx5dv_get_cqe_se
    x.owner = op_own & 1;                // mlx5dv_get_cqe_owner
    const auto sop_drop_qpn = rig::abi::load_be<std::uint32_t>(b.data() + 0x38);
    x.qpn = sop_drop_qpn & 0xffffff;
    x.send_opcode = static_cast<std::uint8_t>(sop_drop_qpn >> 24);
    x.wqe_counter = rig::abi::load_be<std::uint16_t>(b.data() + 0x3c);
    x.immediate = rig::abi::load_be<std::uint32_t>(b.data() + 0x24);
    const bool named = opcode <= 6 || opcode >= 12;   // MLX5_CQE_REQ .. NO_PACKET, SIG_ERR .. INVALID
    const bool error = opcode == 13 || opcode == 14;
    x.byte_count = named && !error ? rig::abi::load_be<std::uint32_t>(b.data() + 0x2c) : 0;
    x.syndrome = error ? std::to_integer<std::uint8_t>(b[0x37]) : 0;
    x.vendor_syndrome = error ? std::to_integer<std::uint8_t>(b[0x36]) : 0;
    x.error = !named ? abi::cqe_error::unknown
              : error ? abi::cqe_error_from_syndrome(x.syndrome)
                      : abi::cqe_error::none;
    return x;
}

void check_same(const abi::completion& got, const abi::completion& want) {
    CHECK(unsigned(got.opcode) == unsigned(want.opcode));
    CHECK(unsigned(got.format) == unsigned(want.format));
    CHECK(got.solicited == want.solicited);
    CHECK(got.owner == want.owner);
    CHECK(got.qpn == want.qpn);
    CHECK(unsigned(got.send_opcode) == unsigned(want.send_opcode));
    CHECK(got.wqe_counter == want.wqe_counter);
    CHECK(got.byte_count == want.byte_count);
    CHECK(got.immediate == want.immediate);
    CHECK(unsigned(got.error) == unsigned(want.error));
    CHECK(unsigned(got.syndrome) == unsigned(want.syndrome));
    CHECK(unsigned(got.vendor_syndrome) == unsigned(want.vendor_syndrome));
}

}  // namespace

TEST_CASE("completion queue: poll decodes every opcode and syndrome as abi's mlx5dv.h decoder does") {
    constexpr std::uint32_t entries = 8;
    aligned_bytes ring(entries * abi::cqe_size), record(8), uar(abi::uar_page_size);
    completion_queue cq({ring.span(), record.span(), uar.data()}, 0x2a5);
    std::mt19937_64 rng{14};
    std::uint32_t count = 0;   // CQEs the device has written (unmasked)
    for (unsigned opcode = 0; opcode < 16; ++opcode) {
        for (const std::uint8_t syndrome : syndromes) {
            for (unsigned shape = 0; shape < 8; ++shape) {   // format (2 bits) x solicited
                std::array<std::byte, 64> b;
                for (auto& x : b) {
                    x = static_cast<std::byte>(rng());
                }
                b[0x37] = std::byte{syndrome};
                const bool owner = ((count / entries) & 1) != 0;   // this pass's owner bit
                b[0x3f] = static_cast<std::byte>(opcode << 4 | (shape & 3) << 2 | (shape >> 2) << 1 |
                                                 (owner ? 1 : 0));
                INFO("opcode " << opcode << " syndrome " << unsigned(syndrome) << " shape " << shape);
                const abi::completion want = per_mlx5dv(b);
                const abi::completion by_abi = abi::decode(b);
                check_same(by_abi, want);
                std::memcpy(ring.data() + (count % entries) * 64, b.data(), 64);
                abi::completion got{};
                if (opcode == 15) {
                    // MLX5_CQE_INVALID is software's initial value: never a CQE to take
                    CHECK_FALSE(cq.poll(got));
                    continue;
                }
                REQUIRE(cq.poll(got));
                ++count;
                check_same(got, by_abi);
            }
        }
    }
    CHECK(cq.consumer_index() == count);
}
