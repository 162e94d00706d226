// The live status line of a -D run (live.hpp).
#include "tools/rig-perf/live.hpp"

#include <unistd.h>

#include <fmt/printf.h>

#include "tools/rig-perf/report.hpp"

namespace rig::perf {

namespace {

constexpr const char* erase_to_end = "\x1b[K";  // ANSI EL 0: erase from the cursor to the line's end

}  // namespace

bool is_terminal(std::FILE* out) noexcept { return ::isatty(::fileno(out)) == 1; }

std::string live_text(test_kind k, std::uint64_t size, bool gbits, double elapsed_s, double interval_s,
                      std::uint64_t interval_done) {
    const double done = static_cast<double>(interval_done);
    const double per_s = interval_s > 0 ? done / interval_s : 0;
    if (is_latency(k)) {
        const int rtt_factor = k == test_kind::read_lat ? 1 : 2;  // as stats.hpp latency_for
        const double t_avg = interval_done > 0 ? interval_s * 1e6 / done / rtt_factor : 0;
        return fmt::sprintf("%7.1f s %12.6f Mtps %12.2f usec t_avg", elapsed_s, per_s / 1e6, t_avg);
    }
    const double mib = per_s * static_cast<double>(size) / 1048576.0;
    return fmt::sprintf("%7.1f s %12.6f Mpps %12.2f %s", elapsed_s, per_s / 1e6, gbits ? gbits_of_mib(mib) : mib,
                        gbits ? "Gb/s" : "MiB/s");
}

void live_line::sample(std::chrono::nanoseconds elapsed, std::uint64_t done) {
    const double interval = std::chrono::duration<double>(elapsed - _last).count();
    const std::string text = live_text(_kind, _size, _gbits, std::chrono::duration<double>(elapsed).count(), interval,
                                       done - _last_done);
    _last = elapsed;
    _last_done = done;
    std::fputs(("\r" + text + erase_to_end).c_str(), _out);
    std::fflush(_out);
    _shown = true;
}

void live_line::erase() {
    if (!_shown) {
        return;
    }
    std::fputs((std::string("\r") + erase_to_end).c_str(), _out);
    std::fflush(_out);
    _shown = false;
}

}  // namespace rig::perf
