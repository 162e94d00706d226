// rig-perf: perftest's ib_{write,read,send}_{bw,lat} on Rig's driver (options.hpp for the
// command line, runner.hpp for a run). Exit 0 on success; on any failure one line
// "rig-perf: <reason>" on stderr and exit 1.
// --sim: sim_session.hpp (a model and the server in child processes); --plot: plot.hpp.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "tools/rig-perf/options.hpp"
#include "tools/rig-perf/plot.hpp"
#include "tools/rig-perf/runner.hpp"
#include "tools/rig-perf/sim_session.hpp"

namespace {

using rig::perf::options;

int fail(const std::string& why) {
    std::fprintf(stderr, "rig-perf: %s\n", why.c_str());
    return 1;
}

// One side of the test, then the plot.
int run_side(const options& o) {
    auto report = rig::perf::run(o, stdout);
    if (!report) {
        return fail(report.error());
    }
    if (o.plot_path) {
        if (auto p = rig::perf::write_plot(*o.plot_path, *report, o.report_gbits); !p) {
            return fail(p.error());  // it names the flag and the file
        }
        std::printf(" Plot written to %s\n", o.plot_path->c_str());
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const std::vector<std::string> args(argv + 1, argv + argc);
        auto o = rig::perf::parse_options(args);
        if (!o) {
            return fail(o.error());
        }
        if (o->help) {
            std::fputs(rig::perf::usage().c_str(), stdout);
            return 0;
        }
        if (o->sim) {
            // the server gets these arguments less what only the client does (server_arguments)
            return rig::perf::run_with_sim(*o, args, run_side);
        }
        return run_side(*o);
    } catch (const std::exception& e) {
        return fail(std::string("internal error: ") + e.what());
    }
}
