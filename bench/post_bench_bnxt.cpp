// bench-post-bnxt: CPU cost of Rig's bnxt data path (qp/bnxt), side by side in one run with the
// same steps written by hand over the kernel's roce_hsi.h/bnxt_hsi.h structs
// (bench/bnxt_hsi_post_loop.c), as bench-post does for mlx5:
//  - per posted 64-byte RDMA WRITE: the 128-byte static WQE, its PSN search entry, and per batch
//    the signal flag on its last WQE and the 64-bit doorbell to a plain memory page standing in
//    for the DPI page; one entry per doorbell and 32 per doorbell;
//  - the same entries through the public API (rig::queue_pair::post_write + ring);
//  - per completion: polling synthesized requester CQEs (toggle bit, barrier, decode, one CQ
//    doorbell per round; Rig's one barrier covers each run of up to 8 CQEs seen new, the loop's
//    one per CQE as bnxt_re_poll_one's), and the whole way to the entry's result.
// Printed, never asserted. The target (17): posting through the public API, per call or
// batched (queue_pair::write over a span of write_entry), at most 1.0x the hand-written loop.
//
//   meson compile -C build bench-post-bnxt   (or: build/bench/post-bench-bnxt [entries] [repetitions])
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "qp/state.hpp"  // first: see qp/mlx5/data_path.hpp
#include "qp/bnxt/data_path.hpp"
#include "rig/qp.hpp"
#include "rig/region.hpp"

#include "bench/bench_access.hpp"

extern "C" void bnxt_hsi_post_loop(void* ring, void* psn_area, std::uint32_t log_size, std::uint64_t first,
                                   std::uint64_t n, std::uint32_t batch, std::uint32_t qpn, std::uint32_t rkey,
                                   std::uint32_t lkey, std::uint64_t rbase, std::uint64_t lbase, std::uint32_t* psn,
                                   void* doorbell);
extern "C" std::uint64_t bnxt_hsi_poll_loop(void* cq_ring, std::uint32_t log_size, std::uint32_t* ci,
                                            std::uint64_t n, std::uint32_t cqn, void* doorbell);


namespace {

using rig::bench::clock_type;
using rig::bench::median;
using rig::bench::ns;
using rig::bench::page;

namespace abi = rig::bnxt::abi;
namespace qb = rig::qp::bnxt;

constexpr std::uint32_t ring_entries = 4096;
constexpr std::uint32_t log_ring = 12;
constexpr std::uint32_t per_round = ring_entries - 1;   // a bnxt ring holds 4095
constexpr std::uint32_t first_psn = 0x10;
volatile std::uint32_t rt_qpn = 0x123, rt_rkey = 0xabcdef, rt_lkey = 0x1234;
volatile std::uint64_t rt_rbase = 0x7f0000001000ull, rt_lbase = 0x7f0000200000ull;

// The send queue's entries emptied, untimed, between rounds: a CQE-free completion of all of
// them (the ring's bookkeeping only; the ring memory keeps what was written).
[[gnu::noinline]] void drain(qb::send_queue& sq) {
    sq.complete(abi::CQ_REQ_STATUS_OK, static_cast<std::uint16_t>(sq.posted() & (ring_entries - 1)));
    while (sq.poll()) {
    }
}

[[gnu::noinline]] void rig_post(qb::send_queue& sq, std::uint64_t n, std::uint32_t batch, std::vector<double>& rounds) {
    const std::uint32_t rkey = rt_rkey, lkey = rt_lkey;
    const std::uint64_t rbase = rt_rbase, lbase = rt_lbase;
    for (std::uint64_t done = 0; done < n; done += per_round) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < per_round;) {
            for (std::uint32_t b = 0; b < batch && i < per_round; ++b, ++i) {
                const std::uint64_t off = (sq.posted() & 0xff) << 6;
                sq.post_one(abi::SQ_BASE_WQE_TYPE_WRITE_WQE, {static_cast<std::int64_t>(lbase + off), 64, lkey},
                            rbase + off, rkey);
            }
            sq.ring();
        }
        rounds.push_back(ns(clock_type::now() - t0) / per_round);
        drain(sq);
    }
}

// The public API's post + ring, the same entries as the loops': each batch's last signaled.
// OneCall: queue_pair::write instead, the post's checks and the doorbell in one call (one entry
// per doorbell: batch 1).
template <bool OneCall = false>
[[gnu::noinline]] void api_post(rig::queue_pair& q, qb::send_queue& sq, const rig::region& r, std::uint64_t n,
                                std::uint32_t batch, std::vector<double>& rounds) {
    const std::uint32_t rkey = rt_rkey;
    const std::uint64_t rbase = rt_rbase;
    for (std::uint64_t done = 0; done < n; done += per_round) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < per_round;) {
            for (std::uint32_t b = 0; b < batch && i < per_round; ++b, ++i) {
                const std::size_t off = (sq.posted() & 0xff) << 6;
                const bool last = b + 1 == batch || i + 1 == per_round;   // as the loops: the batch's last
                rig::bench::api_write_entry<OneCall>(q, r, off, rig::remote{rbase + off, rkey}, last ? rig::signaled::yes : rig::signaled::no);
            }
            if constexpr (!OneCall) {
                q.ring(rig::side::send);
            }
        }
        rounds.push_back(ns(clock_type::now() - t0) / per_round);
        drain(sq);
    }
}

// The public batch form: queue_pair::write over a span of `batch` write_entry, one doorbell each.
[[gnu::noinline]] void api_batch(rig::queue_pair& q, qb::send_queue& sq, const rig::region& r, std::uint64_t n,
                                 std::uint32_t batch, std::vector<double>& rounds) {
    const std::uint32_t rkey = rt_rkey;
    const std::uint64_t rbase = rt_rbase;
    std::array<rig::write_entry, 32> b{};
    for (std::uint64_t done = 0; done < n; done += per_round) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < per_round;) {
            const std::uint32_t k = std::min(batch, per_round - i);
            const std::uint64_t first = sq.posted();
            for (std::uint32_t j = 0; j < k; ++j) {
                const std::size_t off = ((first + j) & 0xff) << 6;
                b[j] = {.at = off, .n = 64, .to = {rbase + off, rkey},
                        .sig = j + 1 == k ? rig::signaled::yes : rig::signaled::no};
            }
            q.write(r, std::span(b.data(), k));
            i += k;
        }
        rounds.push_back(ns(clock_type::now() - t0) / per_round);
        drain(sq);
    }
}

[[gnu::noinline]] void hsi_post(std::byte* ring, std::byte* psn_area, std::byte* db, std::uint64_t n,
                                std::uint32_t batch, std::uint64_t& next, std::uint32_t& psn,
                                std::vector<double>& rounds) {
    for (std::uint64_t done = 0; done < n; done += per_round) {
        const auto t0 = clock_type::now();
        for (std::uint32_t i = 0; i < per_round; i += batch) {
            const std::uint32_t k = std::min(batch, per_round - i);
            bnxt_hsi_post_loop(ring, psn_area, log_ring, next, k, batch, rt_qpn, rt_rkey, rt_lkey, rt_rbase,
                               rt_lbase, &psn, db);
            next += k;
        }
        rounds.push_back(ns(clock_type::now() - t0) / per_round);
    }
}

// One pass of requester CQEs (toggle of `pass`), CQE i covering send entry base + i.
void fill_cqes(std::byte* cq_ring, std::uint32_t pass, std::uint64_t base, std::uint64_t handle) {
    for (std::uint32_t i = 0; i < ring_entries; ++i) {
        abi::cq_req c{};
        c.qp_handle = handle;
        c.sq_cons_idx = static_cast<std::uint16_t>((base + i + 1) & (ring_entries - 1));
        c.toggle = (pass & 1) == 0 ? 1 : 0;
        c.cqe_type = abi::CQ_BASE_CQE_TYPE_REQ;
        abi::encode(std::span<std::byte>(cq_ring + i * abi::cqe_size, abi::cqe_size), c);
    }
}

[[gnu::noinline]] std::uint64_t rig_poll(qb::completion_queue& cq, std::uint32_t n) {
    std::uint64_t sum = 0;
    for (std::uint32_t i = 0; i < n; ++i) {
        const auto b = cq.next();
        if (b.empty()) {
            break;
        }
        sum += abi::fast::req_qp_handle(b.data()) + abi::fast::status(b.data()) + abi::fast::sq_cons_idx(b.data());
    }
    cq.done();
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = std::max<std::uint64_t>(
        (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20'000'000) / per_round * per_round, per_round);
    const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    const std::size_t ring_bytes = std::size_t{ring_entries} * qb::wqe_bytes;
    const std::size_t psn_bytes = std::size_t{ring_entries} * 16;

    std::byte* sq_mem = page(ring_bytes + psn_bytes);
    std::byte* db_page = page(4096);
    qb::send_queue sq({{sq_mem, ring_bytes}, {sq_mem + ring_bytes, psn_bytes}, db_page}, rt_qpn);
    sq.start(first_psn, 4096);
    std::byte* h_mem = page(ring_bytes + psn_bytes);
    std::byte* h_db = page(4096);
    std::uint64_t h_next = 0;
    std::uint32_t h_psn = first_psn;

    // the public API's: a connected queue pair's state over its own rings, a registered region
    std::byte* api_sq = page(ring_bytes + psn_bytes);
    std::byte* api_rq = page(ring_bytes);
    std::byte* api_scq = page(ring_entries * 32);
    std::byte* api_rcq = page(ring_entries * 32);
    std::byte* api_db = page(4096);
    rig::detail::qp_state api_state;
    auto& api_path = api_state.path.emplace<qb::data_path>(qb::data_path_memory{
        .send = {{api_sq, ring_bytes}, {api_sq + ring_bytes, psn_bytes}, api_db + qb::doorbell_word::sq},
        .receive = {{api_rq, ring_bytes}, api_db + qb::doorbell_word::rq},
        .send_cq = {{api_scq, ring_entries * 32}, api_db + qb::doorbell_word::send_cq,
                    api_db + qb::doorbell_word::send_cq_arm},
        .receive_cq = {{api_rcq, ring_entries * 32}, api_db + qb::doorbell_word::receive_cq,
                       api_db + qb::doorbell_word::receive_cq_arm},
        .qpn = rt_qpn,
        .qp_handle = 0x5a5a,
        .send_cqn = 1,
        .receive_cqn = 2});
    api_path.start_sends(first_psn, 4096);
    api_state.connected = true;
    rig::detail::region_state api_region_state;
    api_region_state.iova = rt_lbase;
    api_region_state.key = rt_lkey;
    api_region_state.bytes = 1 << 20;
    api_region_state.registered = true;
    alignas(8) static std::byte no_nic;   // never reached by the post path: only compared
    auto* const fake_nic = reinterpret_cast<rig::nic*>(&no_nic);
    rig::queue_pair api_qp = rig::detail::bench_access::make_qp(fake_nic, &api_state);
    const rig::region api_region = rig::detail::bench_access::make_region(fake_nic, &api_region_state);

    std::vector<double> ours1, ours32, theirs1, theirs32, api1, api32, batch1, batch32, write1;
    bool same = false;
    for (int r = 0; r < reps; ++r) {   // interleaved: all see the same machine
        hsi_post(h_mem, h_mem + ring_bytes, h_db, n, 1, h_next, h_psn, theirs1);
        rig_post(sq, n, 1, ours1);
        hsi_post(h_mem, h_mem + ring_bytes, h_db, n, 32, h_next, h_psn, theirs32);
        rig_post(sq, n, 32, ours32);
        if (r == 0) {   // both rings now hold the same entries, PSN entries and doorbell
            same = std::memcmp(sq_mem, h_mem, ring_bytes + psn_bytes) == 0 && std::memcmp(db_page, h_db, 8) == 0;
        }
        api_post(api_qp, api_path.sq, api_region, n, 1, api1);
        api_post(api_qp, api_path.sq, api_region, n, 32, api32);
        api_post<true>(api_qp, api_path.sq, api_region, n, 1, write1);
        api_batch(api_qp, api_path.sq, api_region, n, 1, batch1);
        api_batch(api_qp, api_path.sq, api_region, n, 32, batch32);
    }

    std::printf("bench-post-bnxt: 64-byte RDMA WRITE, 128-byte WQE + PSN search entry + doorbell to a memory "
                "page, %llu entries x %d runs (median of %u-entry rounds)\n",
                static_cast<unsigned long long>(n), reps, per_round);
    const auto row = [](const char* what, double ours, double theirs) {
        const double ratio = ours / theirs;
        std::printf("  %-28s rig %6.2f  roce_hsi.h loop %6.2f ns/entry  %.2fx  (target <= 1.0x: %s)\n", what, ours,
                    theirs, ratio, ratio <= 1.0 ? "met" : "NOT met");
    };
    row("1 entry per doorbell", median(ours1), median(theirs1));
    row("32 entries per doorbell", median(ours32), median(theirs32));
    row("1 per doorbell, queue_pair", median(api1), median(theirs1));
    row("1 per doorbell, write()", median(write1), median(theirs1));
    row("32 per doorbell, queue_pair", median(api32), median(theirs32));
    row("1 per doorbell, qp batch", median(batch1), median(theirs1));
    row("32 per doorbell, qp batch", median(batch32), median(theirs32));
    std::printf("  rings, PSN areas and doorbells byte-identical: %s\n", same ? "yes" : "NO");

    // ---- polling ------------------------------------------------------------------------
    std::byte* cq_ring = page(ring_entries * 32);
    std::byte* cq_db = page(4096);
    qb::completion_queue cq({{cq_ring, ring_entries * 32}, cq_db, cq_db + 8}, 7);
    std::byte* h_cq = page(ring_entries * 32);
    std::byte* h_cq_db = page(4096);
    std::uint32_t h_ci = 0;
    std::vector<double> poll_ours, poll_theirs, poll_full;
    std::uint64_t sink = 0;
    std::uint32_t pass = 0, h_pass = 0;
    const auto per_cqe = [](clock_type::time_point t0) { return ns(clock_type::now() - t0) / ring_entries; };
    const std::atomic<std::uint8_t> no_event{0};
    for (int r = 0; r < reps; ++r) {
        for (std::uint64_t done = 0; done < n; done += ring_entries) {
            fill_cqes(h_cq, h_pass++, 0, 0x5a5a);
            auto t0 = clock_type::now();
            sink += bnxt_hsi_poll_loop(h_cq, log_ring, &h_ci, ring_entries, 7, h_cq_db);
            poll_theirs.push_back(per_cqe(t0));

            fill_cqes(cq_ring, pass++, 0, 0x5a5a);
            t0 = clock_type::now();
            sink += rig_poll(cq, ring_entries);
            poll_ours.push_back(per_cqe(t0));
        }
        // the whole way: CQE, the send queue's completion, the entry's result (one CQE per entry)
        for (std::uint64_t done = 0; done < n; done += per_round) {
            for (std::uint32_t i = 0; i < per_round; ++i) {
                api_qp.post_write(api_region, 0, 64, rig::remote{rt_rbase, rt_rkey});
            }
            api_qp.ring(rig::side::send);
            const std::uint64_t base = api_path.sq.posted() - per_round;
            const std::uint32_t ci = api_path.scq.consumer_index();
            for (std::uint32_t i = 0; i <= per_round; ++i) {   // and one slot more, not yet written
                abi::cq_req c{};
                c.qp_handle = 0x5a5a;
                c.sq_cons_idx = static_cast<std::uint16_t>((base + i + 1) & (ring_entries - 1));
                const bool phase = (((ci + i) >> log_ring) & 1) == 0;
                c.toggle = (i < per_round) == phase ? 1 : 0;
                abi::encode(std::span<std::byte>(api_scq + ((ci + i) & (ring_entries - 1)) * 32, 32), c);
            }
            const auto t0 = clock_type::now();
            api_path.take_completions(no_event, false);
            for (std::uint32_t i = 0; i < per_round; ++i) {
                if (const auto res = api_path.take(true)) {
                    sink += res->value_or(0);
                }
            }
            poll_full.push_back(ns(clock_type::now() - t0) / per_round);
        }
    }
    std::printf("bench-post-bnxt: polling synthesized requester CQEs (median of %u-CQE rounds)\n", ring_entries);
    row("CQ poll per completion", median(poll_ours), median(poll_theirs));
    std::printf("  %-28s rig %6.2f ns/completion (CQ poll + send queue + result taken)\n", "poll to the entry's result",
                median(poll_full));
    std::printf("  (checksum %llu)\n", static_cast<unsigned long long>(sink));
    for (std::byte* p : {sq_mem, db_page, h_mem, h_db, api_sq, api_rq, api_scq, api_rcq, api_db, cq_ring, cq_db, h_cq,
                         h_cq_db}) {
        std::free(p);
    }
    return same ? 0 : 1;
}
