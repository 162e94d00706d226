#pragma once
// rig-perf's command line: `rig-perf <test> [options] [server]`, perftest's flags with their
// long and short forms, meanings and defaults (perftest's src/perftest_parameters.c: usage(),
// parser(), init_perftest_params), plus --sim, --plot FILE and --max-size N. A pure function of the arguments, so each
// flag and each refusal is unit-tested.
//
// The syntax is perftest's own, read by getopt_long with perftest's option table (args.hpp):
// `-s 64`, `-s64`, `--size 64`, `--size=64` and a unique prefix (`--si 64`) are the same, short
// flags cluster (`-aF`), `--` ends the options. A flag perftest has and rig-perf does not is
// refused by name with what it does ("not supported: -b (bidirectional bandwidth)"), never
// ignored.
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "tools/rig-perf/perf_types.hpp"

namespace rig::perf {

// The test a name selects ("write_bw" ...); nothing for another name.
std::expected<test_kind, std::string> parse_test(std::string_view name);
std::string_view test_name(test_kind k) noexcept;  // "write_bw"

// The options, or one line naming the flag and value that is wrong (no "rig-perf: " prefix).
// Defaults that depend on the test (-s 2 and -t 1 for latency, -n 5000 for write_bw) are
// applied unless the flag was given. Server side: no positional server.
std::expected<options, std::string> parse_options(const std::vector<std::string>& args);

// The --help text.
std::string usage();

}  // namespace rig::perf
