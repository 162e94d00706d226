// bench-abi: ns per encoded 64-byte RDMA WRITE entry into a 4096-entry ring, for Rig's
// rig::mlx5::abi::write and for a hand-rolled loop over rdma-core's mlx5dv.h helpers, side by
// side in one run. Prints both, their ratio, and the target (ours within 1.5x of the helpers).
//
//   meson compile -C build bench-abi   (or: build/bench/abi-bench [entries] [repetitions])
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "abi/mlx5/entry.hpp"

extern "C" void mlx5dv_write_loop(void* ring, std::uint32_t ring_mask, std::uint64_t n,
                                  std::uint32_t qpn, std::uint32_t rkey, std::uint32_t lkey,
                                  std::uint64_t rbase, std::uint64_t lbase);

namespace {

constexpr std::uint32_t ring_entries = 4096;
// runtime values, read once through volatiles so nothing is folded into constants
volatile std::uint32_t rt_qpn = 0x123, rt_rkey = 0xabcdef, rt_lkey = 0x1234;
volatile std::uint64_t rt_rbase = 0x7f0000001000ull, rt_lbase = 0x7f0000200000ull;

// Kind: the seed's write(entry) with its variant, or the typed writer the post path calls.
template <bool Typed>
[[gnu::noinline]] void rig_write_loop(std::byte* ring, std::uint64_t n) {
    namespace abi = rig::mlx5::abi;
    const std::int64_t qpn = rt_qpn, rkey = rt_rkey, lkey = rt_lkey;
    const auto rbase = static_cast<std::int64_t>(rt_rbase);
    const auto lbase = static_cast<std::int64_t>(rt_lbase);
    const std::span<std::byte> b(ring, ring_entries * abi::entry_size);
    for (std::uint64_t i = 0; i < n; ++i) {
        const auto off = static_cast<std::int64_t>((i & 0xff) << 6);
        const abi::write_op w{{lbase + off, 64, lkey}, {rbase + off, rkey}};
        const bool signal = (i & 63) == 63;
        const std::size_t at = (i & (ring_entries - 1)) * abi::entry_size;
        if constexpr (Typed) {
            abi::write(b, at, qpn, static_cast<std::int64_t>(i), w, signal);
        } else {
            abi::write(b, at, qpn, static_cast<std::int64_t>(i), abi::entry{w, signal});
        }
        asm volatile("" ::: "memory");   // the same per-entry compiler barrier as the baseline
    }
}

double ns_per_entry(auto&& loop, std::uint64_t n) {
    const auto t0 = std::chrono::steady_clock::now();
    loop(n);
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
}

std::uint64_t checksum(const std::byte* p, std::size_t n) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < n; ++i) {
        h = (h ^ static_cast<std::uint8_t>(p[i])) * 1099511628211ull;
    }
    return h;
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 50'000'000;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    auto* ours = static_cast<std::byte*>(std::aligned_alloc(64, ring_entries * 64));
    auto* theirs = static_cast<std::byte*>(std::aligned_alloc(64, ring_entries * 64));
    std::memset(ours, 0, ring_entries * 64);
    std::memset(theirs, 0, ring_entries * 64);

    std::vector<double> seed, typed, helpers;
    bool same = true;
    for (int r = 0; r < reps; ++r) {   // interleaved, so all three see the same machine
        helpers.push_back(ns_per_entry([&](std::uint64_t k) {
            mlx5dv_write_loop(theirs, ring_entries - 1, k, rt_qpn, rt_rkey, rt_lkey, rt_rbase, rt_lbase);
        }, n));
        seed.push_back(ns_per_entry([&](std::uint64_t k) { rig_write_loop<false>(ours, k); }, n));
        same = same && std::memcmp(ours, theirs, ring_entries * 64) == 0;
        typed.push_back(ns_per_entry([&](std::uint64_t k) { rig_write_loop<true>(ours, k); }, n));
        same = same && std::memcmp(ours, theirs, ring_entries * 64) == 0;
    }
    for (auto* v : {&seed, &typed, &helpers}) {
        std::sort(v->begin(), v->end());
    }
    const auto median = [](const std::vector<double>& v) { return v[v.size() / 2]; };
    std::printf("bench-abi: 64-byte RDMA WRITE entries into a %u-entry ring, %llu entries x %d runs\n",
                ring_entries, static_cast<unsigned long long>(n), reps);
    std::printf("  %-44s min %6.3f  median %6.3f ns/entry\n", "mlx5dv.h helper loop (baseline)",
                helpers.front(), median(helpers));
    const auto row = [&](const char* name, const std::vector<double>& v) {
        const double ratio = median(v) / median(helpers);
        std::printf("  %-44s min %6.3f  median %6.3f ns/entry  %.2fx  (target <= 1.50x: %s)\n",
                    name, v.front(), median(v), ratio, ratio <= 1.5 ? "met" : "NOT met");
    };
    row("rig write(entry) (seed API, std::variant)", seed);
    row("rig write(write_op) (typed, the post path)", typed);
    std::printf("  rings byte-identical to the helpers': %s (checksum %016llx)\n", same ? "yes" : "NO",
                static_cast<unsigned long long>(checksum(ours, ring_entries * 64)));
    std::free(ours);
    std::free(theirs);
    return same ? 0 : 1;
}
