#pragma once
// One side of a rig-perf test, as perftest runs it (write_bw.c, read_bw.c, send_bw.c and the
// _lat ones), with the out-of-band exchange of exchange.hpp:
//
//   open the NIC; server: accept one client, client: connect (retrying while the server starts)
//   versions, sys data, MTU; a region and a queue pair per -q; print the header block
//   then the handshakes, sizes and close of protocol.hpp's table for the test, exactly:
//   perftest 6.06's order, so that either side pairs with stock perftest.
//
// Rows are printed as each size finishes. Figures go to the returned report; main writes
// the JSON and the plot.
#include <cstdint>
#include <cstdio>
#include <expected>
#include <string>
#include <vector>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

// The sizes a run covers: -a: 2, 4, ... up to max_size (2^23 unless --max-size); else -s.
std::vector<std::uint64_t> sizes_of(const options& o);

// Runs the client (o.server set) or the server side; prints to `out`. A failure is one line
// of reason (without the "rig-perf: " prefix).
std::expected<run_report, std::string> run(const options& o, std::FILE* out);

}  // namespace rig::perf
