// The mlx5 data path's fast paths against what they must not change (sim/mlx5/datapath.hpp):
//  - send WQEs read in runs (one DMA access for many blocks, doorbells.cpp stage_sends) and
//    parsed from the run, or gathered block by block when an entry leaves the run at the ring's
//    end or a page's end: entries of 1 to 4 blocks, written as a driver writes them (rdma-core
//    _mlx5_post_send: ctrl, raddr, data or inline segments, blocks in ring order), wrap the
//    64-block ring and cross the page end inside the QP buffer, and every byte lands;
//  - the object pointers a slot keeps (followed again after each command that changed them): a CQ destroyed
//    while its QP's WRITEs were in flight and made again under the same number, with another
//    size and another buffer, gets the next CQEs in its new ring, from index 0.
#include <deque>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "test/model/mlx5_datapath/sides.hpp"

using namespace rig::test::mlx5_datapath;

namespace {

constexpr std::size_t block = 64;

// Entry bytes (whole 16-byte segments) written at block `first` of the ring, in ring order.
void put_entry(std::span<std::byte> ring, std::uint32_t first, std::span<const std::byte> entry) {
    const std::size_t blocks = ring.size() / block;
    for (std::size_t off = 0; off < entry.size(); off += block) {
        const std::size_t slot = (first + off / block) & (blocks - 1);
        std::memcpy(ring.data() + slot * block, entry.data() + off, std::min(block, entry.size() - off));
    }
}

// The doorbell as rdma-core rings it: the record's send counter, then the last entry's first
// 8 bytes as one 64-bit store to the BlueFlame register.
void ring_doorbell(queue_pair& p, std::uint32_t counter, std::uint32_t last_first) {
    rig::abi::barrier::to_device();
    rig::abi::store_be<std::uint32_t>(p.qp.doorbell_record() + abi::qp_dbr::send_counter, counter & 0xffff);
    rig::abi::barrier::mmio_start();
    const auto ring = p.qp.send_queue();
    const std::size_t slot = last_first & (ring.size() / block - 1);
    std::uint64_t v = 0;
    std::memcpy(&v, ring.data() + slot * block, sizeof v);
    auto* reg = reinterpret_cast<std::uint64_t*>(p.side.uar_page + abi::bfreg_offset(0, 9));
    std::atomic_ref<std::uint64_t>(*reg).store(v, std::memory_order_release);
}

}  // namespace

TEST_CASE("mlx5 data path: WRITEs of 1 to 4 blocks wrap the send ring and cross its page end; every byte lands",
          "[model][mlx5]") {
    connected_sides sides(0x700, 0x800);
    auto& [w, a, b, qa, qb] = sides;
    // the QP buffer: RQ of 64 x 16 bytes, then the SQ's 64 blocks: the SQ's block 48 starts the
    // buffer's second 4 KiB page, so runs stop there as at the ring's end
    REQUIRE(qa.qp.send_queue().size() == 64 * block);
    fill(a.at(0), region_bytes, 17);
    constexpr std::size_t dest_span = 48 * 1024;
    std::vector<std::byte> expect(b.at(0), b.at(0) + dest_span + 1024);

    const std::uint32_t ring_blocks = 64;
    struct posted { std::uint32_t first, blocks; };
    std::deque<posted> in_flight;
    std::uint32_t produced = 0, busy = 0;
    constexpr std::uint32_t entries = 240;
    std::uint32_t next = 0, done = 0;
    std::array<std::byte, 4 * block> e{};
    while (done < entries) {
        // a batch of 1..7 entries, as many as the ring holds
        const std::uint32_t batch = 1 + next % 7;
        std::uint32_t last_first = 0, in_batch = 0;
        while (next < entries && in_batch < batch) {
            e.fill(std::byte{0});
            const std::uint32_t kind = next % 4;
            const std::size_t dest = (std::size_t{next} * 512) % dest_span;
            std::size_t ds = 2, bytes = 0;
            if (kind == 2) {  // 100 inline bytes: 16 + 16 + 4 + 100 -> 9 segments, 3 blocks
                bytes = 100;
                rig::abi::store_be<std::uint32_t>(e.data() + 32, abi::inline_seg_flag | 100);
                for (std::size_t j = 0; j < bytes; ++j) {
                    const auto v = static_cast<std::byte>((next * 3 + j) & 0xff);
                    e[36 + j] = v;
                    expect[dest + j] = v;
                }
                ds += (4 + bytes + 15) / 16;
            } else {  // 1, 6 or 13 data segments: 1, 2 or 4 blocks
                const std::size_t segs = kind == 0 ? 1 : kind == 1 ? 6 : 13;
                const std::uint32_t len = kind == 0 ? 64 : kind == 1 ? 40 : 24;
                for (std::size_t i = 0; i < segs; ++i) {
                    const std::size_t src = (std::size_t{next} * 37 + i * 300) % 30000;
                    std::byte* seg = e.data() + 32 + 16 * i;
                    rig::abi::store_be<std::uint32_t>(seg, len);
                    rig::abi::store_be<std::uint32_t>(seg + 4, a.key.lkey());
                    rig::abi::store_be<std::uint64_t>(seg + 8, a.iova + src);
                    std::memcpy(expect.data() + dest + bytes, a.at(src), len);
                    bytes += len;
                }
                ds += segs;
            }
            const auto blocks = static_cast<std::uint32_t>((ds * 16 + block - 1) / block);
            if (busy + blocks > ring_blocks) {
                break;
            }
            rig::abi::store_be<std::uint32_t>(e.data(), (produced & 0xffff) << 8 |
                                                            static_cast<std::uint8_t>(abi::send_opcode::rdma_write));
            rig::abi::store_be<std::uint32_t>(e.data() + 4, qa.qp.qpn() << 8 | static_cast<std::uint32_t>(ds));
            e[11] = std::byte{abi::ctrl_cq_update};
            rig::abi::store_be<std::uint64_t>(e.data() + 16, b.iova + dest);
            rig::abi::store_be<std::uint32_t>(e.data() + 24, b.key.rkey());
            put_entry(qa.qp.send_queue(), produced, std::span(e).first(ds * 16));
            in_flight.push_back({produced, blocks});
            last_first = produced;
            produced += blocks;
            busy += blocks;
            ++next;
            ++in_batch;
        }
        if (in_batch > 0) {
            ring_doorbell(qa, produced, last_first);
        }
        const auto c = a.wait(1);
        REQUIRE(c.size() == 1);
        REQUIRE_FALSE(in_flight.empty());
        INFO("entry " << done << " syndrome " << int(c[0].syndrome));
        CHECK(c[0].opcode == abi::cqe_opcode::req);
        CHECK(c[0].qpn == qa.qp.qpn());
        CHECK(c[0].wqe_counter == (in_flight.front().first & 0xffff));
        busy -= in_flight.front().blocks;
        in_flight.pop_front();
        ++done;
    }
    CHECK(a.m.fn.data_path()->wqes_fetched() == entries);
    CHECK(std::memcmp(b.at(0), expect.data(), expect.size()) == 0);
}

TEST_CASE("mlx5 data path: a CQ destroyed while its QP's WRITEs ran, made again under its number with another "
          "size, takes the next CQEs in its new ring",
          "[model][mlx5]") {
    model::function_options o = options();
    o.firmware.max_objects = 4;  // CQ numbers 1..4: a number comes back within a few creates
    rig::sim::roce::wire w;
    function_side a(w, o), b(w);
    const fw::cq_params small{.log_size = 4, .uar = a.uar, .eqn = a.h->event_queue()->eqn()};
    fw::cq x = value(fw::cq::create(a.q(), *a.m.f, a.h->stranded_registry(), *a.records, small, soon()));
    const std::uint32_t cqn = x.cqn();
    fill(a.at(0), region_bytes, 5);
    {
        qpm::completion_queue xq(qpm::completion_queue_memory{x.entries(), {x.doorbell_record(), 8}, a.uar_page}, cqn);
        queue_pair q1(a, cqn), p1(b);
        connect(a, q1, b, p1, 0x10, 0x20);
        connect(b, p1, a, q1, 0x20, 0x10);
        // 40 WRITEs through the 16-entry CQ (its ring wraps twice), in batches of 8, each batch's
        // CQEs taken; then 8 more left in flight
        std::uint32_t taken = 0;
        for (std::uint32_t k = 0; k < 48; ++k) {
            q1.sq->post(abi::write_op{a.local(k * 64, 64), b.remote(k * 64)}, true);
            if (k % 8 != 7) {
                continue;
            }
            q1.sq->ring();
            while (k < 40 && taken <= k) {
                abi::completion c;
                const auto until = clk::now() + 5s;
                bool got = false;
                while (!(got = xq.poll(c)) && clk::now() < until) {
                    std::this_thread::sleep_for(50us);
                }
                REQUIRE(got);
                xq.done();
                CHECK(c.wqe_counter == taken);
                ++taken;
            }
        }
        REQUIRE(taken == 40);
        ok(q1.qp.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon()));
        ok(x.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon()));
    }
    // the same number again, 256 CQEs in another buffer
    const fw::cq_params large{.log_size = 8, .uar = a.uar, .eqn = a.h->event_queue()->eqn()};
    fw::cq y;
    for (int tries = 0; tries < 8; ++tries) {
        y = value(fw::cq::create(a.q(), *a.m.f, a.h->stranded_registry(), *a.records, large, soon()));
        if (y.cqn() == cqn) {
            break;
        }
        ok(y.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon()));
    }
    REQUIRE(y.cqn() == cqn);
    qpm::completion_queue yq(qpm::completion_queue_memory{y.entries(), {y.doorbell_record(), 8}, a.uar_page}, cqn);
    queue_pair q2(a, cqn), p2(b);
    connect(a, q2, b, p2, 0x30, 0x40);
    connect(b, p2, a, q2, 0x40, 0x30);
    const std::uint64_t cqes_before = a.m.fn.data_path()->cqes_written();
    std::memset(b.at(8192), 0, 40 * 64);
    for (std::uint32_t k = 0; k < 40; ++k) {
        q2.sq->post(abi::write_op{a.local(4096 + k * 64, 64), b.remote(8192 + k * 64)}, true);
    }
    q2.sq->ring();
    // the new ring's slots 0..39, owner 0 (its first pass): the 16-entry ring's geometry would
    // put CQE 16 in slot 0 with owner 1, which this poll never takes
    for (std::uint32_t k = 0; k < 40; ++k) {
        abi::completion c;
        const auto until = clk::now() + 5s;
        bool got = false;
        while (!(got = yq.poll(c)) && clk::now() < until) {
            std::this_thread::sleep_for(50us);
        }
        REQUIRE(got);
        yq.done();
        CHECK(c.opcode == abi::cqe_opcode::req);
        CHECK(c.qpn == q2.qp.qpn());
        CHECK(c.wqe_counter == k);
    }
    CHECK(a.m.fn.data_path()->cqes_written() - cqes_before == 40);
    CHECK(std::memcmp(b.at(8192), a.at(4096), 40 * 64) == 0);
    (void)q2.qp.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon());
    (void)y.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon());
}

// A command's objects are followed alone (firmware::take_changes, follow.cpp): bringing one more
// QP to RTS beside 48 connected ones follows 4 objects (its CREATE_QP and three transitions),
// where following every table per command followed over 200 (setting up N QPs cost N^2: rig-perf
// -q 2048). And a QP destroyed among them leaves its UAR page's watches to the others: a WRITE on
// its neighbour, on the last one and on the new one lands.
TEST_CASE("mlx5 data path: a command is followed by the objects it touched; a QP destroyed among many leaves "
          "the others running",
          "[model][mlx5]") {
    rig::sim::roce::wire w;
    function_side a(w), b(w);
    constexpr std::uint32_t n = 48;
    std::deque<queue_pair> qa, qb;
    for (std::uint32_t i = 0; i < n; ++i) {
        qa.emplace_back(a);
        qb.emplace_back(b);
        connect(a, qa.back(), b, qb.back(), 0x100 * i, 0x100 * i + 0x80);
        connect(b, qb.back(), a, qa.back(), 0x100 * i + 0x80, 0x100 * i);
    }
    const auto* dp = a.m.fn.data_path();
    REQUIRE(dp != nullptr);
    const std::uint64_t before = dp->objects_followed();
    queue_pair extra_a(a), extra_b(b);
    connect(a, extra_a, b, extra_b, 0x7000, 0x7080);
    connect(b, extra_b, a, extra_a, 0x7080, 0x7000);
    CHECK(dp->objects_followed() - before == 4);

    ok(qa[10].qp.destroy(a.q(), *a.m.f, a.h->stranded_registry(), soon()));
    ok(qb[10].qp.destroy(b.q(), *b.m.f, b.h->stranded_registry(), soon()));
    CHECK(dp->objects_followed() - before == 5);
    fill(a.at(0), 3 * 64, 0x21);
    std::memset(b.at(0), 0, 3 * 64);
    queue_pair* writers[] = {&qa[11], &qa[n - 1], &extra_a};
    for (std::size_t k = 0; k < 3; ++k) {
        writers[k]->sq->post(abi::write_op{a.local(k * 64, 64), b.remote(k * 64)}, true);
        writers[k]->sq->ring();
        const auto got = a.wait(1);
        REQUIRE(got.size() == 1);
        CHECK(got[0].qpn == writers[k]->qp.qpn());
        CHECK(got[0].error == abi::cqe_error::none);
        CHECK(std::memcmp(b.at(k * 64), a.at(k * 64), 64) == 0);
    }
}
