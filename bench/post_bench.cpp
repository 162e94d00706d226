// bench-post: CPU cost of Rig's mlx5 data path, side by side in one run with the same steps
// written over rdma-core's mlx5dv.h helpers (bench/mlx5dv_post_loop.c):
//  - per posted 64-byte RDMA WRITE: encode + doorbell record + 64-bit doorbell write to a plain
//    memory page standing in for the UAR, one entry per doorbell and 32 per doorbell;
//  - the same entries through the public API (rig::queue_pair::post_write + ring): the misuse
//    checks and the dispatch to the family's data path on top of the queue's own post;
//  - one entry per doorbell with the 8-byte doorbell and with a BlueFlame copy of the whole
//    64-byte entry (qp/mlx5/bfreg.hpp; rdma-core mlx5_bf_copy), alone on its bfreg and on a
//    shared one (its lock): the CPU cost only. What BlueFlame buys, the NIC starting the entry
//    without a DMA read of it, is a card's latency, which neither a memory page nor the model has;
//  - per completion: polling synthesized CQEs (owner bit, barrier, decode; set_ci once per drain,
//    the helper loop's once per CQE; one barrier per run of up to 8 CQEs seen software's, the
//    helper loop's one per CQE as mlx5_poll_cq's), and the whole
//    way to the entry's result (CQ poll, send queue completion, ring take).
// Printed, never asserted. The target (17): posting through the public API, per call or
// batched (queue_pair::write over a span of write_entry), at most 1.0x the helper loop.
//
//   meson compile -C build bench-post   (or: build/bench/post-bench [entries] [repetitions])
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "qp/state.hpp"  // first: see qp/mlx5/data_path.hpp
#include "qp/mlx5/completion_queue.hpp"
#include "qp/mlx5/send_queue.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

#include "bench/bench_access.hpp"

extern "C" void mlx5dv_post_loop(void* ring, std::uint32_t ring_mask, std::uint64_t first,
                                 std::uint64_t n, std::uint32_t batch, std::uint32_t qpn,
                                 std::uint32_t rkey, std::uint32_t lkey, std::uint64_t rbase,
                                 std::uint64_t lbase, void* dbrec, void* bf_reg,
                                 std::uint32_t* bf_offset, std::uint32_t bf_half);
extern "C" std::uint64_t mlx5dv_poll_loop(void* cq_ring, std::uint32_t log_size, std::uint32_t* ci,
                                          std::uint64_t n, void* dbrec);

namespace {

using rig::bench::clock_type;
using rig::bench::median;
using rig::bench::ns;
using rig::bench::page;

namespace abi = rig::mlx5::abi;
using rig::qp::mlx5::bfreg;
using rig::qp::mlx5::completion_queue;
using rig::qp::mlx5::copy_rule;
using rig::qp::mlx5::send_queue;

constexpr std::uint32_t ring_entries = 4096;
constexpr std::uint32_t log_ring = 12;
volatile std::uint32_t rt_qpn = 0x123, rt_rkey = 0xabcdef, rt_lkey = 0x1234;
volatile std::uint64_t rt_rbase = 0x7f0000001000ull, rt_lbase = 0x7f0000200000ull;

// One ring's worth per round: the timed part posts `ring_entries` entries; between rounds the
// ring is emptied untimed. Each round's time goes in `rounds`: the machine is shared, and the
// median round is what a preemption or a neighbour's burst does not move.
[[gnu::noinline]] void drain(send_queue& sq) {
    abi::completion c{};
    c.opcode = abi::cqe_opcode::req;
    c.wqe_counter = static_cast<std::uint16_t>((sq.posted() - 1) & 0xffff);
    sq.complete(c);
    while (sq.poll()) {
    }
}

[[gnu::noinline]] void rig_post(send_queue& sq, std::uint64_t n, std::uint32_t batch,
                                std::vector<double>& rounds) {
    const std::int64_t rkey = rt_rkey, lkey = rt_lkey;
    const auto rbase = static_cast<std::int64_t>(rt_rbase);
    const auto lbase = static_cast<std::int64_t>(rt_lbase);
    for (std::uint64_t done = 0; done < n; done += ring_entries) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < ring_entries;) {
            for (std::uint32_t b = 0; b < batch; ++b, ++i) {
                const std::uint64_t k = sq.posted();
                const auto off = static_cast<std::int64_t>((k & 0xff) << 6);
                sq.post(abi::write_op{{lbase + off, 64, lkey}, {rbase + off, rkey}}, (k & 63) == 63);
            }
            sq.ring();
        }
        rounds.push_back(ns(clock_type::now() - t0) / ring_entries);
        drain(sq);
    }
}

// The same entries through the batch post: the queue's state read once per doorbell.
[[gnu::noinline]] void rig_post_batch(send_queue& sq, std::uint64_t n, std::uint32_t batch,
                                      std::vector<double>& rounds) {
    const std::int64_t rkey = rt_rkey, lkey = rt_lkey;
    const auto rbase = static_cast<std::int64_t>(rt_rbase);
    const auto lbase = static_cast<std::int64_t>(rt_lbase);
    for (std::uint64_t done = 0; done < n; done += ring_entries) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < ring_entries; i += batch) {
            const std::uint64_t first = sq.posted();
            sq.post_batch(
                batch,
                [&](std::uint32_t b) {
                    const auto off = static_cast<std::int64_t>(((first + b) & 0xff) << 6);
                    return abi::write_op{{lbase + off, 64, lkey}, {rbase + off, rkey}};
                },
                [&](std::uint32_t b) { return ((first + b) & 63) == 63; });
            sq.ring();
        }
        rounds.push_back(ns(clock_type::now() - t0) / ring_entries);
        drain(sq);
    }
}

// The public API's post: queue_pair::post_write (misuse checks, the family's data path) + ring;
// the same entries as the helper loop's, every 64th signaled. OneCall: queue_pair::write instead,
// the post's checks and the doorbell in one call (one entry per doorbell: batch 1).
template <bool OneCall = false>
[[gnu::noinline]] void api_post(rig::queue_pair& q, send_queue& sq, const rig::region& r,
                                std::uint64_t n, std::uint32_t batch, std::vector<double>& rounds) {
    const std::uint32_t rkey = rt_rkey;
    const std::uint64_t rbase = rt_rbase;
    for (std::uint64_t done = 0; done < n; done += ring_entries) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < ring_entries;) {
            for (std::uint32_t b = 0; b < batch; ++b, ++i) {
                const std::uint64_t k = sq.posted();
                const std::size_t off = (k & 0xff) << 6;
                rig::bench::api_write_entry<OneCall>(q, r, off, rig::remote{rbase + off, rkey}, (k & 63) == 63 ? rig::signaled::yes : rig::signaled::no);
            }
            if constexpr (!OneCall) {
                q.ring(rig::side::send);
            }
        }
        rounds.push_back(ns(clock_type::now() - t0) / ring_entries);
        drain(sq);
    }
}

// The public batch form: queue_pair::write over a span of `batch` write_entry, one doorbell each.
[[gnu::noinline]] void api_batch(rig::queue_pair& q, send_queue& sq, const rig::region& r, std::uint64_t n,
                                 std::uint32_t batch, std::vector<double>& rounds) {
    const std::uint32_t rkey = rt_rkey;
    const std::uint64_t rbase = rt_rbase;
    std::array<rig::write_entry, 32> b{};
    for (std::uint64_t done = 0; done < n; done += ring_entries) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < ring_entries; i += batch) {
            const std::uint64_t first = sq.posted();
            for (std::uint32_t j = 0; j < batch; ++j) {
                const std::size_t off = ((first + j) & 0xff) << 6;
                b[j] = {.at = off, .n = 64, .to = {rbase + off, rkey},
                        .sig = ((first + j) & 63) == 63 ? rig::signaled::yes : rig::signaled::no};
            }
            q.write(r, std::span(b.data(), batch));
        }
        rounds.push_back(ns(clock_type::now() - t0) / ring_entries);
        drain(sq);
    }
}

[[gnu::noinline]] void helper_post(std::byte* ring, std::byte* dbrec, std::byte* bf,
                                   std::uint64_t n, std::uint32_t batch, std::uint64_t& next,
                                   std::vector<double>& rounds) {
    static std::uint32_t bf_offset = 0;
    for (std::uint64_t done = 0; done < n; done += ring_entries) {
        const auto t0 = clock_type::now();
        mlx5dv_post_loop(ring, ring_entries - 1, next, ring_entries, batch, rt_qpn, rt_rkey,
                         rt_lkey, rt_rbase, rt_lbase, dbrec, bf, &bf_offset, 256);
        rounds.push_back(ns(clock_type::now() - t0) / ring_entries);
        next += ring_entries;
    }
}

// Writes one pass of CQEs (owner bit of `pass`), each naming send entry base + i.
void fill_cqes(std::byte* cq_ring, std::uint32_t pass, std::uint64_t base) {
    for (std::uint32_t i = 0; i < ring_entries; ++i) {
        abi::completion x{};
        x.opcode = abi::cqe_opcode::req;
        x.qpn = rt_qpn;
        x.send_opcode = 0x08;
        x.wqe_counter = static_cast<std::uint16_t>((base + i) & 0xffff);
        x.byte_count = 64;
        x.owner = (pass & 1) != 0;
        abi::encode(std::span<std::byte, 64>(cq_ring + i * 64, 64), x);
    }
}

// Each measured loop in a function of its own, as the helpers' loop is.
[[gnu::noinline]] std::uint64_t rig_poll(completion_queue& cq, std::uint32_t n) {
    std::uint64_t sum = 0;
    abi::completion c;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (!cq.poll(c)) {
            break;
        }
        sum += static_cast<std::uint64_t>(c.opcode) + c.qpn + c.wqe_counter + c.byte_count;
    }
    cq.done();   // the consumer index once per drain (the helper loop writes it per CQE)
    return sum;
}

[[gnu::noinline]] std::uint64_t rig_poll_to_result(completion_queue& cq, send_queue& sq,
                                                   std::uint32_t n) {
    std::uint64_t sum = 0;
    abi::completion c;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (cq.poll(c)) {
            sq.complete(c);
        }
        if (const auto res = sq.poll()) {
            sum += res->value_or(0);
        }
    }
    cq.done();
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20'000'000) /
                            ring_entries * ring_entries;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 5;

    // ours: the send queue over a ring, a doorbell record and a page standing in for the UAR
    std::byte* sq_ring = page(ring_entries * 64);
    std::byte* sq_dbr = page(64);
    std::byte* uar = page(4096);
    bfreg sq_reg(uar + abi::uar::bf_offset, 256);
    send_queue sq({{sq_ring, ring_entries * 64}, {sq_dbr, 8}, &sq_reg}, rt_qpn);
    // ours with BlueFlame: one bfreg of the page alone, one shared by two queues (locked)
    std::byte* bf_ring = page(ring_entries * 64);
    std::byte* bf_dbr = page(64);
    bfreg bf_reg(uar + abi::bfreg_offset(1, 9), 256, copy_rule::single_entries);
    send_queue bf_sq({{bf_ring, ring_entries * 64}, {bf_dbr, 8}, &bf_reg}, rt_qpn);
    std::byte* shared_ring = page(ring_entries * 64);
    std::byte* shared_dbr = page(64);
    bfreg shared_reg(uar + abi::bfreg_offset(2, 9), 256, copy_rule::single_entries);
    shared_reg.add_user();
    shared_reg.add_user();
    send_queue shared_sq({{shared_ring, ring_entries * 64}, {shared_dbr, 8}, &shared_reg}, rt_qpn);
    // theirs
    std::byte* h_ring = page(ring_entries * 64);
    std::byte* h_dbr = page(64);
    std::byte* h_uar = page(4096);
    std::uint64_t h_next = 0;

    // the public API's: a connected queue pair's state over its own rings, a registered region
    std::byte* api_ring = page(ring_entries * 64);
    std::byte* api_dbr = page(64);
    std::byte* api_rq = page(ring_entries * 32);
    std::byte* api_scq = page(ring_entries * 64);
    std::byte* api_rcq = page(ring_entries * 64);
    std::byte* api_cq_dbr = page(64);
    rig::detail::qp_state api_state;
    bfreg api_reg(uar + abi::uar::bf_offset, 256);
    auto& api_path = api_state.path.emplace<rig::qp::mlx5::data_path>(rig::qp::mlx5::data_path_memory{
        .send = {{api_ring, ring_entries * 64}, {api_dbr, 8}, &api_reg},
        .receive = {{api_rq, ring_entries * 32}, 32, {api_dbr, 8}},
        .send_cq = {{api_scq, ring_entries * 64}, {api_cq_dbr, 8}, uar},
        .receive_cq = {{api_rcq, ring_entries * 64}, {api_cq_dbr + 8, 8}, uar},
        .qpn = rt_qpn,
        .send_cqn = 1,
        .receive_cqn = 2});
    send_queue& api_sq = api_path.sq;
    api_state.connected = true;
    rig::detail::region_state api_region_state;
    api_region_state.iova = rt_lbase;
    api_region_state.bytes = 1 << 20;
    api_region_state.registered = true;
    alignas(8) static std::byte no_nic;   // never reached by the post path: only compared
    auto* const fake_nic = reinterpret_cast<rig::nic*>(&no_nic);
    rig::queue_pair api_qp = rig::detail::bench_access::make_qp(fake_nic, &api_state);
    const rig::region api_region = rig::detail::bench_access::make_region(fake_nic, &api_region_state);

    std::vector<double> ours1, ours32, ours32b, theirs1, theirs32, api1, api32, batch1, batch32, write1;
    std::vector<double> bf1, shared1;
    bool same = false;
    for (int r = 0; r < reps; ++r) {   // interleaved: all see the same machine
        helper_post(h_ring, h_dbr, h_uar + 0x800, n, 1, h_next, theirs1);
        rig_post(sq, n, 1, ours1);
        helper_post(h_ring, h_dbr, h_uar + 0x800, n, 32, h_next, theirs32);
        rig_post(sq, n, 32, ours32);
        if (r == 0) {   // both rings now hold the same entries: same numbers in the same slots
            same = std::memcmp(sq_ring, h_ring, ring_entries * 64) == 0 &&
                   std::memcmp(sq_dbr + 4, h_dbr + 4, 4) == 0;
        }
        rig_post_batch(sq, n, 32, ours32b);   // after the check: it moves our entry numbers on
        api_post(api_qp, api_sq, api_region, n, 1, api1);
        api_post(api_qp, api_sq, api_region, n, 32, api32);
        api_post<true>(api_qp, api_sq, api_region, n, 1, write1);
        api_batch(api_qp, api_sq, api_region, n, 1, batch1);
        api_batch(api_qp, api_sq, api_region, n, 32, batch32);
        rig_post(bf_sq, n, 1, bf1);
        rig_post(shared_sq, n, 1, shared1);
    }

    std::printf("bench-post: 64-byte RDMA WRITE, encode + doorbell record + doorbell write to a "
                "memory page, %llu entries x %d runs (median of %u-entry rounds)\n",
                static_cast<unsigned long long>(n), reps, ring_entries);
    const auto row = [](const char* what, double ours, double theirs) {
        const double ratio = ours / theirs;
        std::printf("  %-28s rig %6.2f  mlx5dv.h helpers %6.2f ns/entry  %.2fx  (target <= 1.0x: %s)\n",
                    what, ours, theirs, ratio, ratio <= 1.0 ? "met" : "NOT met");
    };
    row("1 entry per doorbell", median(ours1), median(theirs1));
    row("32 entries per doorbell", median(ours32), median(theirs32));
    row("32 per doorbell, post_batch", median(ours32b), median(theirs32));
    row("1 per doorbell, queue_pair", median(api1), median(theirs1));
    row("1 per doorbell, write()", median(write1), median(theirs1));
    row("32 per doorbell, queue_pair", median(api32), median(theirs32));
    row("1 per doorbell, qp batch", median(batch1), median(theirs1));
    row("32 per doorbell, qp batch", median(batch32), median(theirs32));
    std::printf("  rings and doorbell records byte-identical: %s\n", same ? "yes" : "NO");
    // BlueFlame: CPU cost per single-entry post, side by side with the 8-byte doorbell above
    const auto bf_row = [&](const char* what, double v) {
        std::printf("  %-28s rig %6.2f  8-byte doorbell %6.2f ns/entry  %.2fx  (CPU cost; the latency "
                    "gain is a card's, not measurable here)\n",
                    what, v, median(ours1), v / median(ours1));
    };
    bf_row("1 per doorbell, BlueFlame", median(bf1));
    bf_row("1 per doorbell, BF shared", median(shared1));

    // ---- polling ------------------------------------------------------------------------
    std::byte* cq_ring = page(ring_entries * 64);
    std::byte* cq_dbr = page(64);
    completion_queue cq({{cq_ring, ring_entries * 64}, {cq_dbr, 8}, uar}, 7);
    std::byte* h_cq = page(ring_entries * 64);
    std::byte* h_cq_dbr = page(64);
    std::uint32_t h_ci = 0;
    std::vector<double> poll_ours, poll_theirs, poll_full;   // per round of ring_entries CQEs
    std::uint64_t sink = 0;
    std::uint32_t pass = 0, h_pass = 0;
    const auto per_round = [](clock_type::time_point t0) {
        return ns(clock_type::now() - t0) / ring_entries;
    };
    for (int r = 0; r < reps; ++r) {
        for (std::uint64_t done = 0; done < n; done += ring_entries) {
            fill_cqes(h_cq, h_pass++, 0);
            auto t0 = clock_type::now();
            sink += mlx5dv_poll_loop(h_cq, log_ring, &h_ci, ring_entries, h_cq_dbr);
            poll_theirs.push_back(per_round(t0));

            fill_cqes(cq_ring, pass++, 0);
            t0 = clock_type::now();
            sink += rig_poll(cq, ring_entries);
            poll_ours.push_back(per_round(t0));

            // the whole way: CQ poll, the send queue's completion, the entry's result
            for (std::uint32_t i = 0; i < ring_entries; ++i) {
                sq.post(abi::write_op{{0x1000, 64, 1}, {0x2000, 2}}, true);
            }
            sq.ring();
            fill_cqes(cq_ring, pass++, sq.posted() - ring_entries);
            t0 = clock_type::now();
            sink += rig_poll_to_result(cq, sq, ring_entries);
            poll_full.push_back(per_round(t0));
        }
    }
    std::printf("bench-post: polling synthesized CQEs (median of %u-CQE rounds)\n", ring_entries);
    row("CQ poll per completion", median(poll_ours), median(poll_theirs));
    std::printf("  %-28s rig %6.2f ns/completion (CQ poll + send queue + result taken)\n",
                "poll to the entry's result", median(poll_full));
    std::printf("  (checksum %llu)\n", static_cast<unsigned long long>(sink));
    for (std::byte* p : {api_ring, api_dbr, api_rq, api_scq, api_rcq, api_cq_dbr, sq_ring, sq_dbr, uar, h_ring, h_dbr, h_uar, cq_ring, cq_dbr, h_cq, h_cq_dbr, bf_ring, bf_dbr, shared_ring, shared_dbr}) {
        std::free(p);
    }
    return same ? 0 : 1;
}
