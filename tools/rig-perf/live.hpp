#pragma once
// The live rate of a -D run on a terminal (issue 6: "a live rate on a terminal for -D"): one
// status line, rewritten in place a few times a second while the run goes ("\r", the text,
// then "\x1b[K", ANSI "erase to end of line", for what a longer line left), and erased
// ("\r\x1b[K") before the table row. Only when the output is a terminal: into a pipe or a file
// rig-perf writes perftest's exact output, byte for byte, so that parsers keep working.
//
// The figures are those of the last interval (the messages completed since the previous
// sample over the time between them), not of the run so far: a rate that changes shows.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

// Is `out` a terminal (isatty of its descriptor)?
bool is_terminal(std::FILE* out) noexcept;

// The status text, no "\r" and no newline. Bandwidth tests: seconds since the start, the
// message rate and the bandwidth of the interval in the table's unit
//   "    3.2 s     0.412000 Mpps       804.69 MiB/s"   ("Gb/s" with --report_gbits)
// latency tests: the round trips (reads) per second and their t_avg as the -D table counts it
// (write and send: RTT/2; read: the whole read)
//   "    3.2 s     0.041200 Mtps        12.14 usec t_avg"
// An interval with nothing done shows zeros.
std::string live_text(test_kind k, std::uint64_t size, bool gbits, double elapsed_s, double interval_s,
                      std::uint64_t interval_done);

// One run's status line on `out` (which the caller has found to be a terminal).
class live_line {
public:
    live_line(std::FILE* out, test_kind k, std::uint64_t size, bool gbits) noexcept
        : _out(out), _kind(k), _size(size), _gbits(gbits) {}
    // A sample from the loop (loop_settings::live): rewrites the line.
    void sample(std::chrono::nanoseconds elapsed, std::uint64_t done);
    // Before the table row: erases the line if one was written (nothing otherwise).
    void erase();
    bool shown() const noexcept { return _shown; }

private:
    std::FILE* _out;
    test_kind _kind;
    std::uint64_t _size;
    bool _gbits;
    std::chrono::nanoseconds _last{0};
    std::uint64_t _last_done = 0;
    bool _shown = false;
};

}  // namespace rig::perf
