// The data path's slots keep pointers into the firmware's tables (datapath.hpp): a function
// reset replaces the tables, and the firmware then hands out the same numbers again. A client
// that goes with WRITEs in flight resets the function (vfio-user disconnect); the next client's
// QP and CQ get the numbers the old ones had, with new rings: its entries run from index 0 of
// its own send ring and complete in its own CQ, and every byte lands. Through the public API
// (rig/nic.hpp), as a program sees it.
#include <algorithm>
#include <cstring>
#include <string>

#include "test/model/qp_api/served_nics.hpp"

namespace {

using namespace rig::test;
using namespace std::chrono_literals;

// WRITEs of 64 bytes from `from` at src + 64 k to `to` at dst + 64 k, `n` of them, the send ring
// kept full; every completion taken and checked.
void writes(rig::queue_pair& q, const rig::region& from, std::size_t src, const rig::region& to, std::size_t dst,
            std::uint32_t n) {
    std::uint32_t posted = 0, done = 0;
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (done < n && std::chrono::steady_clock::now() < end) {
        while (posted < n && q.room(rig::side::send) > 0) {
            q.post_write(from, src + std::size_t{posted} * 64, 64, to.remote(dst + std::size_t{posted} * 64));
            ++posted;
        }
        q.ring(rig::side::send);
        while (auto c = q.poll(rig::side::send)) {
            INFO((*c ? std::string() : c->error().message));
            REQUIRE(c->has_value());
            ++done;
        }
    }
    REQUIRE(done == n);
}

void fill(std::byte* p, std::size_t n, std::uint8_t seed) {
    for (std::size_t i = 0; i < n; ++i) {
        p[i] = static_cast<std::byte>(static_cast<std::uint8_t>(seed + i * 13));
    }
}

}  // namespace

TEST_CASE("mlx5 data path: after a reset with WRITEs in flight, the QP and CQ made under the same numbers run "
          "in their new rings",
          "[model][mlx5]") {
    rig::sim::roce::wire w;
    served_mlx5 fa(quick_model(0), &w), fb(quick_model(1), &w);
    auto nb = fb.open();
    const rig::region rb = value(nb->allocate(1 << 20, rig::access::remote));
    std::memset(rb.data(), 0, rb.size());
    std::uint32_t first_qpn = 0;
    {
        auto na = fa.open();
        const rig::region ra = value(na->allocate(1 << 20, rig::access::remote));
        fill(ra.data(), ra.size(), 1);
        rig::queue_pair qa = value(na->make_qp()), qb = value(nb->make_qp());
        ok(qa.connect(qb.local()));
        ok(qb.connect(qa.local()));
        first_qpn = qa.local().qp;
        writes(qa, ra, 0, rb, 0, 300);
        REQUIRE(std::memcmp(rb.data(), ra.data(), 300 * 64) == 0);
        // 200 more rung and left in flight: the client goes with them
        for (std::uint32_t k = 0; k < 200 && qa.room(rig::side::send) > 0; ++k) {
            qa.post_write(ra, 0, 64, rb.remote(256 * 1024 + std::size_t{k} * 64));
        }
        qa.ring(rig::side::send);
        (void)qb.destroy();
    }  // the client closes: the function resets when its connection ends
    const auto end = std::chrono::steady_clock::now() + 5s;
    while (fa.srv->client_connected() && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(1ms);
    }
    REQUIRE_FALSE(fa.srv->client_connected());

    auto na = fa.open();
    const rig::region ra = value(na->allocate(1 << 20, rig::access::remote));
    fill(ra.data(), ra.size(), 77);
    rig::queue_pair qa = value(na->make_qp()), qb = value(nb->make_qp());
    REQUIRE(qa.local().qp == first_qpn);  // the fresh firmware's first QP number again
    ok(qa.connect(qb.local()));
    ok(qb.connect(qa.local()));
    // more entries than the old QP had taken: a send ring position or CQ left over from it would
    // skip or repeat entries, or put completions where this client does not look
    writes(qa, ra, 4096, rb, 512 * 1024, 600);
    CHECK(std::memcmp(rb.data() + 512 * 1024, ra.data() + 4096, 600 * 64) == 0);
    CHECK(std::all_of(rb.data() + 512 * 1024 + 600 * 64, rb.data() + 640 * 1024,
                      [](std::byte b) { return b == std::byte{0}; }));
    ok(qa.destroy());
    ok(qb.destroy());
}
