#pragma once
// rig-perf's command-line syntax: perftest's, read by getopt_long (glibc) with perftest's own
// option table (perftest_parameters.c, parser(): its long_options[] and its getopt string
// "w:y:p:d:i:m:s:n:t:u:S:x:c:q:I:o:M:r:Q:A:l:D:f:B:T:L:E:J:j:K:k:X:W:aFegzRvhbNVCHUOZP"), plus
// rig-perf's own long options. So `-s 64`, `-s64`, `--size 64`, `--size=64` and `--si=64` (a
// unique prefix) are the same, short flags cluster (`-aF`), `--` ends the options, and every
// option perftest has takes an argument exactly when perftest's does (none is optional there).
//
// scan() only reads the syntax; options.cpp gives the options their meaning and sim_session.cpp
// rebuilds the server's command line from the same reading.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::perf {

// The options rig-perf implements (the others in the table are refused by name).
enum class opt : std::uint8_t {
    none,  // a perftest option rig-perf does not implement
    port, ib_dev, mtu, size, iters, tx_depth, all, cpu_freq, qp, inline_size, help, duration,
    report_gbits, out_json, out_json_file, perform_warm_up, cq_mod,
    sim, family, plot, bind, max_size,  // rig-perf's own
};

struct flag {
    std::string_view name;      // the long name, "size"
    bool has_arg;               // takes an argument (perftest's has_arg 1; none is optional)
    char letter;                // the short form, 0 for none
    opt id;                     // opt::none: not implemented
    std::string_view refusal;   // for opt::none: what the option does, for the refusal
};

// One element of the command line as getopt_long reads it, in order.
struct token {
    const flag* f = nullptr;           // nullptr: a positional argument (in value), or an error
    bool as_short = false;             // given as -x (else --name, or a prefix of it)
    std::optional<std::string> value;  // the option's argument, the positional's text, or for
                                       // an error what was given ("-Z", "--foo=1")
    std::string error;                 // not empty: the syntax is wrong here

    // "-s" or "--size" as given (the long name in full)
    std::string spelled() const;
};

// The command line (without the program name), element by element. A syntax error is a token
// whose error names the option ("unknown option: --frobnicate (see --help)", "-d needs a
// value", "--all takes no value (got '1')", "--rep: ambiguous (--report-both, ...)"), and the
// scan reads on after it, as getopt_long does.
// getopt_long's state is global: scan() serializes its callers and resets it each time.
std::vector<token> scan(const std::vector<std::string>& args);

// A scanned command line written back: positionals as they were, options as given (-s 64,
// --size 64), those `keep` refuses left out; what the scan could not read (another program's
// option) goes on as it was given.
template <class Keep>
std::vector<std::string> arguments_of(const std::vector<token>& tokens, Keep keep) {
    std::vector<std::string> out;
    for (const token& t : tokens) {
        if (t.f == nullptr || !t.error.empty()) {
            out.push_back(*t.value);
        } else if (keep(*t.f)) {
            out.push_back(t.spelled());
            if (t.value) {
                out.push_back(*t.value);
            }
        }
    }
    return out;
}

// The whole table: perftest's options in its order, then rig-perf's own.
std::span<const flag> flags() noexcept;

}  // namespace rig::perf
