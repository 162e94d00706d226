#pragma once
// The order of perftest's out-of-band messages, test by test, as Debian's perftest 6.06 (git
// tag v4.5-0.17 of linux-rdma/perftest, configure.ac AC_INIT 6.06) sends them over TCP without
// rdma_cm, RC, one direction (no -b). Every message is one exchange of exchange.hpp: the
// client writes, then reads; the server reads, then writes (ctx_xchg_data, ctx_hand_shake).
//
//   P   preamble (all tests, main() of each src/*.c): version char[16] (exchange_versions),
//       page size u32, cache line u32 (check_sys_data, peer >= 5.32), MTU 2 bytes (check_mtu,
//       peer >= 5.31). Upstream >= 6.28 adds negotiate_params only with a peer >= 6.28.
//   Hq  one 108-byte QP line per queue pair, in order (ctx_hand_shake(&my_dest[i])).
//   H0  queue pair 0's line again: a barrier (ctx_hand_shake(&my_dest[0]) or (my_dest)).
//   R   xchg_bw_reports: size, iters (u64, peer >= 5.33), bw_peak, bw_avg, msgRate: 5 x 8 bytes.
//   C   ctx_close_connection: H0, then each side writes "done\0" (5 bytes, read by no one) and
//       closes. (Upstream after 6.06 dropped the "done" write.)
//   ~   the socket is closed with nothing more sent (the process exits).
//
//   test       setup (client and server)         run, single size or -D    run, -a (no -D with -a)
//   ---------  --------------------------------  ------------------------  -----------------------------
//   write_bw   P Hq <connect> Hq H0              client: run; H0 R C       client: all sizes; H0 R C
//   read_bw     (write_bw.c / read_bw.c main)    server: H0 R C            server: H0 R C (R: last size)
//   send_bw    P Hq <connect> H0 Hq (send_bw.c)  [post rx] H0 run C        per size: [post rx] H0 run H0;
//                                                                          then C
//   write_lat  P H0 Hq <connect> Hq H0           run ~                     all sizes ~
//   read_lat   P H0 Hq <connect> Hq H0           client: run C             client: all sizes C
//                                                server: C (waits the run)  server: C
//   send_lat   P Hq <connect> H0 Hq (send_lat.c) [post rx] H0 run C        per size: [post rx] H0 run; C
//
// So there is no barrier between sizes in write_bw, read_bw, write_lat and read_lat -a
// (write_bw.c RUN_ALL syncs only when duplex; WRITE_IMM, which adds one, came after 6.06),
// single-size send_bw has no handshake after its run, and write_lat never closes the
// connection. The run loops (perftest_resources.c run_iter_*) send nothing over TCP; a -D side
// stops on its own clock (alarm). Upstream HEAD differs in these six files only by the
// negotiation, WRITE_IMM and data validation, none of which a 6.06 peer or rig-perf uses.
//
// rig-perf follows this order as client and as server. Where upstream's passive side sits in
// one read for the whole run (write_bw/read_bw server, read_lat server), rig-perf bounds that
// read by passive_wait(): the run's length plus a margin; every other read by the exchange
// deadline.
#include <chrono>
#include <cstdint>
#include <vector>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

// The shape of one test's exchange (the table above).
struct exchange_plan {
    bool h0_before_lines = false;      // write_lat, read_lat: H0 before the first Hq
    bool h0_between_rounds = false;    // send_*: H0 between <connect> and the second Hq; else after it
    bool server_passive = false;       // write_bw, read_bw, read_lat: the server runs nothing
    bool sync_before_size = false;     // send_*: H0 before each size (after posting receives)
    bool sync_after_size_all = false;  // send_bw -a: H0 after each size
    bool report = false;               // write_bw, read_bw: H0 then R after the run
    bool close = true;                 // C at the end; write_lat: the socket is just closed
};

constexpr exchange_plan plan_of(test_kind k) noexcept {
    exchange_plan p;
    switch (k) {
    case test_kind::write_bw:
    case test_kind::read_bw:
        p.server_passive = true;
        p.report = true;
        break;
    case test_kind::send_bw:
        p.h0_between_rounds = true;
        p.sync_before_size = true;
        p.sync_after_size_all = true;
        break;
    case test_kind::write_lat:
        p.h0_before_lines = true;
        p.close = false;
        break;
    case test_kind::read_lat:
        p.h0_before_lines = true;
        p.server_passive = true;
        break;
    case test_kind::send_lat:
        p.h0_between_rounds = true;
        p.sync_before_size = true;
        break;
    }
    return p;
}

// How long a passive side waits in its one read for the whole run: with -D the duration,
// else for each size iterations x queue pairs messages at a generous 1 ms each plus the
// bytes at 1 MiB/s (slower than any card, the model on two shared cores, and Linux Soft-RoCE in
// an emulated guest, which receives at 2-10 MiB/s: test/interop), plus
// `margin` (the exchange deadline) for the peer's setup and teardown.
std::chrono::milliseconds passive_wait(const options& o, const std::vector<std::uint64_t>& sizes,
                                       std::chrono::milliseconds margin);

}  // namespace rig::perf
