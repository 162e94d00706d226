// BlueFlame against the model (qp/mlx5/bfreg.hpp; rdma-core providers/mlx5/qp.c post_send_db,
// mlx5_bf_copy): a doorbell of one entry copies the whole WQE into the UAR page's bfreg half, the
// model takes the ring from its first 8 bytes (sim/mlx5/doorbells.cpp zeroes them) and runs the
// entry from the ring in memory; two queue pairs sharing a bfreg alternate its halves; a doorbell
// of several entries writes 8 bytes only.
#include "test/model/mlx5_datapath/sides.hpp"

#include <algorithm>

using namespace rig::test::mlx5_datapath;

namespace {

constexpr std::uint32_t log_bf = 9;   // the model's cmd_hca_cap.log_bf_reg_size
constexpr std::size_t half = abi::bfreg_half(log_bf);

std::span<const std::byte> slot(const queue_pair& q, std::uint64_t k) {
    return q.qp.send_queue().subspan((k % (q.qp.send_queue().size() / 64)) * 64, 64);
}
bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}
bool zero(std::span<const std::byte> a) {
    return std::all_of(a.begin(), a.end(), [](std::byte b) { return b == std::byte{0}; });
}
// The model has taken every doorbell of the page once the first 8 bytes of both halves are 0.
bool taken(const std::byte* reg) {
    const auto until = clk::now() + 3s;
    while (clk::now() < until) {
        if (zero({reg, 8}) && zero({reg + half, 8})) {
            return true;
        }
        std::this_thread::sleep_for(50us);
    }
    return false;
}

}  // namespace

TEST_CASE("mlx5 BlueFlame: a single entry is copied into the bfreg half and completes", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    std::byte* const reg = a.uar_page + abi::bfreg_offset(1, log_bf);
    qpm::bfreg bf(reg, half, qpm::copy_rule::single_entries);
    queue_pair qa(a, 0, &bf), qb(b);
    connect(a, qa, b, qb, 0x10, 0x20);
    connect(b, qb, a, qa, 0x20, 0x10);
    std::memset(reg, 0, 2 * half);
    fill(a.at(0), 1000, 5);
    qa.sq->post(abi::write_op{a.local(0, 1000), b.remote(8192)}, true);
    qa.sq->ring();
    const auto c = a.wait(1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].opcode == abi::cqe_opcode::req);
    CHECK(c[0].wqe_counter == 0);
    CHECK(std::memcmp(b.at(8192), a.at(0), 1000) == 0);
    // bytes 8..63 of half 0 are the WQE's; its first 8 the model took (and zeroed)
    CHECK(same({reg + 8, 56}, slot(qa, 0).subspan(8)));
    CHECK(zero({reg, 8}));
    CHECK(zero({reg + 64, 2 * half - 64}));
    CHECK(bf.offset() == half);

    // an inline WRITE, the next doorbell: copied into half 1
    const abi::write_inline_op wi{"blue flame inline bytes", b.remote(16384)};
    qa.sq->post(wi, true);
    qa.sq->ring();
    const auto d = a.wait(1);
    REQUIRE(d.size() == 1);
    CHECK(d[0].opcode == abi::cqe_opcode::req);
    CHECK(d[0].wqe_counter == 1);
    CHECK(std::memcmp(b.at(16384), wi.data.data(), wi.data.size()) == 0);
    CHECK(same({reg + half + 8, 56}, slot(qa, 1).subspan(8)));
    CHECK(same({reg + 8, 56}, slot(qa, 0).subspan(8)));   // half 0 untouched by the second
    CHECK(bf.offset() == 0);
}

TEST_CASE("mlx5 BlueFlame: two queue pairs sharing a bfreg alternate its halves", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    std::byte* const reg = a.uar_page + abi::bfreg_offset(2, log_bf);
    qpm::bfreg bf(reg, half, qpm::copy_rule::single_entries);
    queue_pair q1(a, 0, &bf), q2(a, 0, &bf), p1(b), p2(b);
    CHECK(bf.users() == 2);
    CHECK(bf.shared());
    connect(a, q1, b, p1, 0x100, 0x200);
    connect(b, p1, a, q1, 0x200, 0x100);
    connect(a, q2, b, p2, 0x300, 0x400);
    connect(b, p2, a, q2, 0x400, 0x300);
    std::memset(reg, 0, 2 * half);
    fill(a.at(0), 512, 1);
    fill(a.at(512), 512, 2);
    q1.sq->post(abi::write_op{a.local(0, 512), b.remote(0)}, true);
    q1.sq->ring();
    CHECK(bf.offset() == half);
    REQUIRE(taken(reg));   // q1's doorbell taken before q2 rings (polling sees only the last write)
    q2.sq->post(abi::write_op{a.local(512, 512), b.remote(4096)}, true);
    q2.sq->ring();   // the shared offset: the other half
    CHECK(bf.offset() == 0);
    const auto c = a.wait(2);
    REQUIRE(c.size() == 2);
    for (const auto& e : c) {
        CHECK(e.opcode == abi::cqe_opcode::req);
        CHECK((e.qpn == q1.qp.qpn() || e.qpn == q2.qp.qpn()));
    }
    CHECK(std::memcmp(b.at(0), a.at(0), 512) == 0);
    CHECK(std::memcmp(b.at(4096), a.at(512), 512) == 0);
    CHECK(same({reg + 8, 56}, slot(q1, 0).subspan(8)));          // q1's WQE in half 0
    CHECK(same({reg + half + 8, 56}, slot(q2, 0).subspan(8)));   // q2's in half 1
    CHECK(rig::abi::load_be<std::uint32_t>(slot(q2, 0).data() + 4) >> 8 == q2.qp.qpn());
}

TEST_CASE("mlx5 BlueFlame: a doorbell of several entries writes only the 8-byte doorbell", "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    std::byte* const reg = a.uar_page + abi::bfreg_offset(3, log_bf);
    qpm::bfreg bf(reg, half, qpm::copy_rule::single_entries);
    queue_pair qa(a, 0, &bf), qb(b);
    connect(a, qa, b, qb, 0x7, 0x8);
    connect(b, qb, a, qa, 0x8, 0x7);
    std::memset(reg, 0, 2 * half);
    fill(a.at(0), 3 * 256, 9);
    for (std::size_t i = 0; i < 3; ++i) {
        qa.sq->post(abi::write_op{a.local(i * 256, 256), b.remote(i * 256)}, i == 2);
    }
    qa.sq->ring();
    const auto c = a.wait(1);
    REQUIRE(c.size() == 1);
    CHECK(c[0].wqe_counter == 2);
    CHECK(std::memcmp(b.at(0), a.at(0), 3 * 256) == 0);
    CHECK(zero({reg, 2 * half}));   // 8 bytes written, taken (zeroed) by the model; nothing else
    CHECK(bf.offset() == half);
}
