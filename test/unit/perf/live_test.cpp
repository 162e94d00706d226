// rig-perf's live status line of a -D run (tools/rig-perf/live.hpp): its text and figures, the
// in-place rewrite and the erase, and nothing at all when no sample came.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

#include "tools/rig-perf/live.hpp"

namespace {

using namespace rig::perf;
using namespace std::chrono_literals;

// What a live_line writes, kept in memory.
struct captured {
    char* text = nullptr;
    std::size_t size = 0;
    std::FILE* f = ::open_memstream(&text, &size);
    std::string str() {
        std::fflush(f);
        return std::string(text, size);
    }
    ~captured() {
        std::fclose(f);
        std::free(text);
    }
};

}  // namespace

TEST_CASE("live: the bandwidth text is the interval's rate and bandwidth in the table's unit", "[unit][perf]") {
    // 412000 messages of 2048 B in 1 s: 0.412 Mpps, 804.6875 MiB/s = 6.750208 Gb/s
    CHECK(live_text(test_kind::write_bw, 2048, false, 3.24, 1.0, 412000) ==
          "    3.2 s     0.412000 Mpps       804.69 MiB/s");
    CHECK(live_text(test_kind::send_bw, 2048, true, 3.24, 0.5, 206000) == "    3.2 s     0.412000 Mpps         6.75 Gb/s");
    CHECK(live_text(test_kind::read_bw, 64, false, 0.25, 0.25, 0) == "    0.2 s     0.000000 Mpps         0.00 MiB/s");
}

TEST_CASE("live: the latency text is round trips per second and t_avg as the -D table counts it", "[unit][perf]") {
    // 41200 round trips in 1 s: 24.27 us each; WRITE and SEND show RTT/2, READ the whole read
    CHECK(live_text(test_kind::write_lat, 2, false, 3.2, 1.0, 41200) == "    3.2 s     0.041200 Mtps        12.14 usec t_avg");
    CHECK(live_text(test_kind::send_lat, 2, false, 3.2, 1.0, 41200) == "    3.2 s     0.041200 Mtps        12.14 usec t_avg");
    CHECK(live_text(test_kind::read_lat, 2, false, 3.2, 1.0, 41200) == "    3.2 s     0.041200 Mtps        24.27 usec t_avg");
    CHECK(live_text(test_kind::read_lat, 2, false, 3.2, 1.0, 0) == "    3.2 s     0.000000 Mtps         0.00 usec t_avg");
}

TEST_CASE("live: each sample rewrites one line in place from the previous sample; erase clears it", "[unit][perf]") {
    captured c;
    live_line l(c.f, test_kind::write_bw, 1048576, false);
    l.sample(250ms, 100);  // 100 MiB in 0.25 s
    CHECK(c.str() == "\r    0.2 s     0.000400 Mpps       400.00 MiB/s\x1b[K");
    l.sample(750ms, 200);  // the interval: 100 more in 0.5 s
    CHECK(c.str().substr(c.str().rfind('\r')) == "\r    0.8 s     0.000200 Mpps       200.00 MiB/s\x1b[K");
    CHECK(c.str().find('\n') == std::string::npos);
    CHECK(l.shown());
    l.erase();
    CHECK(c.str().ends_with("MiB/s\x1b[K\r\x1b[K"));
    CHECK_FALSE(l.shown());
    const std::size_t before = c.str().size();
    l.erase();  // nothing shown: nothing written
    CHECK(c.str().size() == before);
}

TEST_CASE("live: a run too short for a sample writes nothing", "[unit][perf]") {
    captured c;
    live_line l(c.f, test_kind::send_lat, 2, false);
    l.erase();
    CHECK(c.str().empty());
    CHECK_FALSE(is_terminal(c.f));  // a memory stream is no terminal
}
