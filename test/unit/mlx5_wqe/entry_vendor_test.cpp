// abi/mlx5/entry.hpp against rdma-core's own mlx5dv.h helpers, byte for byte, on thousands of
// generated entries whose values are weighted towards the edges of every range.
#include <array>
#include <cstring>
#include <random>
#include <sstream>

#include <catch2/catch.hpp>

#include "abi/mlx5/entry.hpp"
#include "oracle.hpp"

namespace abi = rig::mlx5::abi;

namespace {

struct generator {
    std::mt19937_64 rng;

    std::int64_t pick(std::int64_t hi, std::initializer_list<std::int64_t> edges) {
        // one time in three an edge value, otherwise uniform in [0, hi]
        if (rng() % 3 == 0) {
            auto it = edges.begin();
            std::advance(it, static_cast<long>(rng() % edges.size()));
            return *it;
        }
        return static_cast<std::int64_t>(rng() % (static_cast<std::uint64_t>(hi) + 1));
    }
    std::int64_t length() { return pick(abi::max_length, {0, 1, 63, 64, 65, 4096, abi::max_length}); }
    std::int64_t key() { return pick(abi::max_key, {0, 1, 0x100, 0xabcdef, abi::max_key}); }
    std::int64_t address() {
        return pick(INT64_MAX, {0, 1, 0x7f0000001000, 0xffffffff, 0x100000000, INT64_MAX});
    }
    std::int64_t qp() { return pick(abi::max_qp, {0, 1, 0x123, abi::max_qp}); }
    std::int64_t index() {
        return pick(INT64_MAX, {0, 1, 0xffff, 0x10000, 0x10001, 0x1ffff, INT64_MAX});
    }
    abi::local local() { return {address(), length(), key()}; }
    abi::remote remote() { return {address(), key()}; }
};

}  // namespace

TEST_CASE("mlx5 entries equal rdma-core's mlx5dv helpers byte for byte", "[mlx5][entry][vendor]") {
    generator g{std::mt19937_64{20261129}};
    constexpr int count = 6000;
    std::vector<std::array<std::byte, 64>> ours(count);
    std::vector<std::string> inline_payloads(count);
    std::ostringstream req;

    for (int i = 0; i < count; ++i) {
        const std::int64_t qp = g.qp();
        const std::int64_t index = g.index();
        const bool signal = g.rng() % 2 == 0;
        req << "E ";
        abi::entry e{abi::send_op{}, signal};
        switch (i % 4) {
        case 0: {
            abi::write_op w{g.local(), g.remote()};
            e.op = w;
            req << "W " << qp << ' ' << index << ' ' << signal << ' ' << w.dst.address << ' '
                << w.dst.key << ' ' << w.src.address << ' ' << w.src.bytes << ' ' << w.src.key;
            break;
        }
        case 1: {
            abi::read_op r{g.remote(), g.local()};
            e.op = r;
            req << "R " << qp << ' ' << index << ' ' << signal << ' ' << r.src.address << ' '
                << r.src.key << ' ' << r.dst.address << ' ' << r.dst.bytes << ' ' << r.dst.key;
            break;
        }
        case 2: {
            abi::send_op s{g.local()};
            e.op = s;
            req << "S " << qp << ' ' << index << ' ' << signal << ' ' << s.src.address << ' '
                << s.src.bytes << ' ' << s.src.key;
            break;
        }
        default: {
            // 0 and 28 bytes weighted, as the edges of inline data
            const std::size_t n = g.rng() % 3 == 0 ? (g.rng() % 2 ? 0 : 28) : g.rng() % 29;
            std::string& payload = inline_payloads[static_cast<std::size_t>(i)];
            for (std::size_t k = 0; k < n; ++k) {
                payload.push_back(static_cast<char>(g.rng()));
            }
            abi::write_inline_op w{payload, g.remote()};
            e.op = w;
            req << "I " << qp << ' ' << index << ' ' << signal << ' ' << w.dst.address << ' '
                << w.dst.key << ' '
                << (n == 0 ? std::string("-")
                           : rig::test::to_hex(reinterpret_cast<const std::byte*>(payload.data()), n));
            break;
        }
        }
        req << '\n';
        // a ring of 2 entries whose neighbour must stay untouched
        std::array<std::byte, 128> ring;
        ring.fill(std::byte{0xa5});
        abi::write(ring, 64, qp, index, e);
        for (std::size_t k = 0; k < 64; ++k) {
            REQUIRE(ring[k] == std::byte{0xa5});
        }
        std::memcpy(ours[static_cast<std::size_t>(i)].data(), ring.data() + 64, 64);
    }

    const auto theirs = rig::test::run_mlx5dv_oracle(req.str());
    REQUIRE(theirs.size() == static_cast<std::size_t>(count));
    const std::string requests = req.str();
    std::istringstream lines(requests);
    for (int i = 0; i < count; ++i) {
        std::string line;
        std::getline(lines, line);
        INFO("entry " << i << ": " << line);
        REQUIRE(rig::test::to_hex(ours[static_cast<std::size_t>(i)].data(), 64) ==
                theirs[static_cast<std::size_t>(i)]);
    }
}

TEST_CASE("mlx5 WRITE and SEND with immediate equal rdma-core's mlx5dv helpers byte for byte",
          "[mlx5][entry][vendor]") {
    generator g{std::mt19937_64{20261204}};
    constexpr int count = 2000;
    std::vector<std::array<std::byte, 64>> ours(count);
    std::ostringstream req;
    for (int i = 0; i < count; ++i) {
        const std::int64_t qp = g.qp();
        const std::int64_t index = g.index();
        const bool signal = g.rng() % 2 == 0;
        const auto imm = static_cast<std::uint32_t>(g.pick(0xffffffff, {0, 1, 0x80000000, 0xffffffff}));
        std::array<std::byte, 64>& b = ours[static_cast<std::size_t>(i)];
        if (i % 2 == 0) {
            const abi::write_imm_op w{g.local(), g.remote(), imm};
            abi::write(b, 0, qp, index, w, signal);
            req << "E X " << qp << ' ' << index << ' ' << signal << ' ' << w.dst.address << ' ' << w.dst.key << ' '
                << w.src.address << ' ' << w.src.bytes << ' ' << w.src.key << ' ' << imm << '\n';
        } else {
            const abi::send_imm_op s{g.local(), imm};
            abi::write(b, 0, qp, index, s, signal);
            req << "E Y " << qp << ' ' << index << ' ' << signal << ' ' << s.src.address << ' ' << s.src.bytes << ' '
                << s.src.key << ' ' << imm << '\n';
        }
    }
    const auto theirs = rig::test::run_mlx5dv_oracle(req.str());
    REQUIRE(theirs.size() == static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
        INFO("entry " << i);
        REQUIRE(rig::test::to_hex(ours[static_cast<std::size_t>(i)].data(), 64) == theirs[static_cast<std::size_t>(i)]);
    }
}

TEST_CASE("mlx5 RDMA WRITE golden vector of the reference", "[mlx5][entry]") {
    // made once with mlx5dv.h's mlx5dv_set_ctrl_seg: pi=1, qpn=0x123, signaled, ds=3
    std::array<std::byte, 64> b{};
    abi::write(b, 0, 0x123, 1,
               {abi::write_op{{0x00007f0000200000, 4096, 0x1234}, {0x00007f0000001000, 0x00abcdef}},
                true});
    CHECK(rig::test::to_hex(b.data(), 48) ==
          "0000010800012303000000080000000000007f0000001000"
          "00abcdef000000000000100000001234"
          "00007f0000200000");
    for (std::size_t k = 48; k < 64; ++k) {
        CHECK(b[k] == std::byte{0});
    }
}

TEST_CASE("mlx5 receive entries equal rdma-core's scatter list", "[mlx5][entry][vendor]") {
    generator g{std::mt19937_64{7}};
    std::ostringstream req;
    std::vector<std::vector<std::byte>> ours;
    for (int i = 0; i < 500; ++i) {
        const std::size_t stride = std::size_t{16} << (g.rng() % 4);   // 16 .. 128
        const std::size_t slots = stride / 16;
        const std::size_t n = g.rng() % (slots + 1);
        std::vector<abi::local> scatter;
        for (std::size_t k = 0; k < n; ++k) {
            scatter.push_back(g.local());
        }
        req << "V " << stride << ' ' << n;
        for (const auto& l : scatter) {
            req << ' ' << l.address << ' ' << l.bytes << ' ' << l.key;
        }
        req << '\n';
        std::vector<std::byte> b(stride * 2, std::byte{0x5a});
        abi::write_receive(b, stride, stride, scatter);
        for (std::size_t k = 0; k < stride; ++k) {
            REQUIRE(b[k] == std::byte{0x5a});
        }
        ours.emplace_back(b.begin() + static_cast<long>(stride), b.end());
    }
    const auto theirs = rig::test::run_mlx5dv_oracle(req.str());
    REQUIRE(theirs.size() == ours.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        INFO("receive entry " << i);
        REQUIRE(rig::test::to_hex(ours[i].data(), ours[i].size()) == theirs[i]);
    }
}
