#pragma once
// The measured loops of rig-perf's tests, over connected queue pairs (runner.cpp sets them up).
//
// Buffers: each queue pair has one region of 2 x `half` bytes: the first half is what it sends
// (WRITE and SEND source, READ target), the second what its peer's operations land in (WRITE
// target, receives) or read (READ source). `peer` is what the peer's QP line advertised: the
// address of its second half and its key, written and read from byte 0 as perftest does with
// the vaddr of its pingpong_dest (set_up_connection: the buffer after the send buffers).
//
// Bandwidth (perftest run_iter_bw): entries are posted in batches, as many as the ring's send
// depth (-t) allows in flight, with one doorbell per batch (post_*, then ring). As perftest's,
// entry s of a queue pair (from 0) is signalled when s % cq_mod == cq_mod - 1, and the last
// iteration's entry; one signalled completion stands for the entries since the previous one
// (poll hands out no unsignalled success), which take its time. A -D run ends each queue pair
// on a whole group of cq_mod, so that its last entry is signalled and every entry is seen done.
// Latency (run_iter_lat_write / _send / run_iter_lat): one entry in flight; WRITE: each side
// writes into the peer's second half and spins on the last byte of its own second half; SEND:
// a send answered by a send; READ: one read at a time, the server passive.
//
// Every wait is bounded: a peer or NIC that stops answering is an error, never a hang.
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rig/qp.hpp"
#include "rig/region.hpp"
#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

struct lane {
    rig::queue_pair* qp = nullptr;
    rig::region buffer;   // 2 x half bytes
    rig::remote peer;     // the peer's second half (the vaddr it advertised) and its key
    std::uint32_t receives = 0;  // receives posted and not yet completed
};

struct loop_settings {
    std::uint64_t size = 0;
    std::uint64_t half = 0;
    std::uint64_t iterations = 0;  // per queue pair; ignored with a duration
    std::optional<std::chrono::nanoseconds> duration;
    std::uint32_t tx_depth = 1;
    std::uint32_t cq_mod = 1;      // one send entry in cq_mod signalled (bandwidth client), <= tx_depth
    std::uint32_t rx_depth = 512;
    bool use_inline = false;
    std::chrono::milliseconds stall{10000};  // no progress for this long: an error
    // -D, the receiving side of send_bw and the server of a latency test: true once the peer
    // has sent its next out-of-band message or closed the connection (it stopped).
    std::function<bool()> peer_stopped;
    // The live rate of a -D run on a terminal (runner.cpp): when set, called about every
    // live_period with the time since the loop started and the messages (latency: round
    // trips) completed so far. The loop reads the clock for it only once every
    // live_check_every passes, and calls it from there, never per entry.
    std::function<void(std::chrono::nanoseconds elapsed, std::uint64_t done)> live;
    std::chrono::milliseconds live_period{250};
};

// How many loop passes go between two reads of the clock for the live rate: a pass takes at
// least a poll of the completion queue (~0.1 us), so the clock is read at most every ~10 us,
// and a -D latency loop (a round trip per pass, 2 us on hardware, ~20 us on the model) reads
// it every ~0.1-3 ms, well under live_period.
constexpr std::uint32_t live_check_every = 128;

// Client of write_bw / read_bw / send_bw.
std::expected<bw_row, std::string> run_bw_client(test_kind k, std::vector<lane>& lanes, const loop_settings& s);
// perftest's perform_warm_up (perftest_resources.c), untimed, before a bandwidth loop: on each
// queue pair in turn, tx_depth entries and one doorbell, then every one's completion. WRITE and
// READ post entries of the size in `s`; SEND posts zero-length WRITEs, which take none of the
// receives the peer counts (perftest warms up no SEND test). It pays the first-use costs that
// are not the rate: first touches of rings, records, doorbell page and buffers by driver and
// model, cold caches on both sides of the NIC (docs/architecture.md, "First touches, and
// rig-perf's warm-up"). A failed entry is an error that says it was the warm-up's; a latency
// test is misuse (invalid_argument).
std::expected<void, std::string> warm_up(test_kind k, std::vector<lane>& lanes, const loop_settings& s);
// Tops each lane up to rx_depth posted receives of `half` bytes (SEND tests: before the
// barrier that lets the peer send).
void post_receives(lane& l, const loop_settings& s);
// Server of send_bw: takes `iterations` messages per queue pair (or, with a duration, until
// peer_stopped(): not its own clock, which started before the client's, so that the client's
// last sends still find receives), reposting receives as they complete.
std::expected<bw_row, std::string> run_bw_receiver(std::vector<lane>& lanes, const loop_settings& s);

// Latency: `client` starts each round trip. With a duration each side stops on its own
// clock (the server also when peer_stopped()), and a reply still due then is not waited for.
std::expected<lat_row, std::string> run_lat(test_kind k, bool client, lane& l, const loop_settings& s);

}  // namespace rig::perf
