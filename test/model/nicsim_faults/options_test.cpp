// rig-nicsim's fault options as a user meets them: listed by --help, and every bad value
// refused before anything is served, with one line on stderr naming the option and the value,
// and exit status 2.
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "test/model/child_process.hpp"
#include "test/model/nicsim_faults/nicsim_process.hpp"

namespace {

// The exit status and output of a run that ends by itself.
std::pair<int, std::string> run(const std::vector<std::string>& args) {
    rig::test::temp_socket dir;
    std::vector<std::string> all = {"--family", "mlx5", "--functions", "2", "--socket-dir", dir.dir};
    all.insert(all.end(), args.begin(), args.end());
    return rig::test::run_to_exit(rig::test::nicsim_binary(), all);
}

}  // namespace

TEST_CASE("rig-nicsim --help lists the data-path fault options", "[model][mlx5][nicsim]") {
    const auto [rc, out] = run({"--help"});
    CHECK(rc == 0);
    for (const char* option : {"--drop", "--duplicate", "--delay-us", "--jitter-us", "--link-down-after-ms",
                               "--link-up-after-ms", "SIGUSR1", "--function-dies-after-ms", "--die-after-ms",
                               "--capture", "--fault-function"}) {
        CHECK(out.find(option) != std::string::npos);
    }
}

TEST_CASE("rig-nicsim refuses every bad fault value with one line naming the option and the value, exit 2",
          "[model][mlx5][nicsim]") {
    struct bad_case {
        std::vector<std::string> args;
        std::vector<std::string> says;  // each is in the line
    };
    const std::vector<bad_case> cases = {
        {{"--drop", "2"}, {"--drop", "'2'", "0..1"}},
        {{"--drop", "-0.1"}, {"--drop", "'-0.1'"}},
        {{"--drop", "half"}, {"--drop", "'half'"}},
        {{"--drop", "nan"}, {"--drop", "'nan'"}},
        {{"--drop", "0.5x"}, {"--drop", "'0.5x'"}},
        {{"--drop"}, {"--drop", "needs a value"}},
        {{"--duplicate", "1.01"}, {"--duplicate", "'1.01'"}},
        {{"--duplicate", ""}, {"--duplicate", "''"}},
        {{"--delay-us", "-1"}, {"--delay-us", "'-1'"}},
        {{"--delay-us", "1000001"}, {"--delay-us", "'1000001'", "0..1000000"}},
        {{"--jitter-us", "1.5"}, {"--jitter-us", "'1.5'"}},
        {{"--link-down-after-ms", "soon"}, {"--link-down-after-ms", "'soon'"}},
        {{"--link-up-after-ms", "0"}, {"--link-up-after-ms", "'0'"}},
        {{"--link-up-after-ms", "500"}, {"--link-up-after-ms", "500", "needs --link-down-after-ms"}},
        {{"--link-down-after-ms", "500", "--link-up-after-ms", "500"}, {"--link-up-after-ms", "'500'", "more than"}},
        {{"--function-dies-after-ms", "1e3"}, {"--function-dies-after-ms", "'1e3'"}},
        {{"--die-after-ms", "-5"}, {"--die-after-ms", "'-5'"}},
        {{"--die-after-ms", "99999999999"}, {"--die-after-ms", "'99999999999'"}},
        {{"--capture", "/nonexistent-rig-dir/wire.pcap"}, {"--capture", "'/nonexistent-rig-dir/wire.pcap'"}},
        {{"--capture", ""}, {"--capture", "''"}},
        {{"--fault-function", "2", "--drop", "0.1"}, {"--fault-function 2", "names no function"}},
    };
    for (const bad_case& c : cases) {
        std::string shown;
        for (const auto& a : c.args) {
            shown += " [" + a + "]";
        }
        INFO("rig-nicsim" << shown);
        const auto [rc, out] = run(c.args);
        INFO(out);
        CHECK(rc == 2);
        CHECK(out.find('\n') == out.size() - 1);  // one line
        CHECK(out.rfind("rig-nicsim: ", 0) == 0);
        for (const std::string& s : c.says) {
            CHECK(out.find(s) != std::string::npos);
        }
    }
}
