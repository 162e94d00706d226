// rig-nicsim: serves N functions of the device model, one vfio-user socket each, until SIGINT or
// SIGTERM (docs/architecture.md, "The device model"). The driver reaches function k as
// "vfio-user:DIR/<family>-k.sock".
//
//   rig-nicsim --family mlx5 --functions 2 --socket-dir /run/rig
//
// Families come from sim/family.hpp's table (mlx5 the default); the options every family takes
// go to each function as sim::common_options, the family options (--page-request-*, ...) only
// to a family that takes them. --fault-fail and --fault-fatal are read in the family's own
// opcode and status space (sim/pci/fault_plan.hpp), once the family is known.
//
// Argument errors: one line on stderr, exit 2. A server that cannot start: exit 1.
//
// UDP ports (--udp LOCAL,PEER, sim/roce/udp_port.hpp): the wire leaves the process as Ethernet
// over UDP with QEMU's -netdev socket,udp= framing, to another rig-nicsim or a QEMU guest; frames
// for MACs no function here owns leave by them. --first-mac moves the functions' MACs (and so
// their link-local GIDs) so that two rig-nicsim processes on one such link do not collide.
// Their counters (and the wire's) are printed on stderr at exit and on SIGUSR2.
//
// Faults: firmware faults strike inside the function model (fault_plan, each reset re-arms
// them); data-path faults are the wire's (sim/roce/wire.hpp: drop, duplicate, delay, jitter,
// link down), wire-wide or, with --fault-function K, on function K's port only (frames from or
// to it), or with --fault-udp K on the K-th UDP port only. Timed faults count from the moment the sockets are served and are fired by the main
// thread, which also takes SIGUSR1 (toggle the link), SIGRTMIN (the function dies, when a test
// must choose the moment) and SIGINT/SIGTERM (stop). Each fault is
// logged as it fires (logger "nicsim", info), never from the data path.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "log/logger.hpp"

#include "sim/family.hpp"
#include "sim/roce/udp_port.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/server.hpp"

namespace {

namespace sim = rig::sim;
namespace pci = rig::sim::pci;

constexpr std::string_view usage =
    "usage: rig-nicsim [--family mlx5|bnxt|F1,F2,...] --socket-dir DIR [options]\n"
    "Serves device-model NIC functions over vfio-user, one socket per function, named\n"
    "DIR/<family>-<k>.sock (printed on stdout), until SIGINT or SIGTERM; the sockets are removed\n"
    "on exit. Function k has the permanent MAC 02:00:00:00:00:01 + k (--first-mac moves it).\n"
    "options:\n"
    "  --family NAME            mlx5 (ConnectX-6 Dx, the default) or bnxt (BCM57508); a list\n"
    "                           (mlx5,bnxt) gives function k the k-th family, cyclically: both\n"
    "                           families on one wire, RoCEv2 between them\n"
    "  --functions N            how many functions to serve, 1..64 (default 1)\n"
    "  --socket-dir DIR         where the sockets go (must exist)\n"
    "  --init-time-ms N         how long the init segment says 'initializing' after reset (default 20)\n"
    "  --command-latency-us N   how long the firmware takes over each command (default 0)\n"
    "  --msix-vectors N         MSI-X vectors per function, 1..2048 (default 64)\n"
    "  --page-request-after N   mlx5: after N commands the firmware asks for pages by event (default:\n"
    "                           never)\n"
    "  --page-request-pages N   mlx5: how many (negative: gives that many back; default 16)\n"
    "  --first-mac MAC          function k's MAC is MAC + k (default 02:00:00:00:00:01); its GID is\n"
    "                           the link-local fe80:: one made from it. Unicast, and MAC + k within\n"
    "                           the last three bytes. Two rig-nicsim on one UDP link need distinct ones\n"
    "  --core-cpu N             the model core's thread (every function's data path) runs on CPU N\n"
    "                           only; the other threads where the process may run (rig-perf --sim\n"
    "                           gives the core a CPU of its own)\n"
    "ethernet over UDP (QEMU's -netdev socket,udp= / -netdev dgram framing: a datagram is a whole\n"
    "frame from the destination MAC on, no FCS):\n"
    "  --udp LOCAL,PEER         a UDP port (repeatable) bound to LOCAL and sending to PEER, both\n"
    "                           IPV4:PORT in numbers (127.0.0.1:40000,127.0.0.1:40001). Frames to\n"
    "                           MACs no function here has leave by it (several: by the one their MAC\n"
    "                           was learned on, else by all); arrivals go to the function owning\n"
    "                           their destination MAC, the rest (broadcast, multicast, unknown) are\n"
    "                           dropped and counted. Counters on stderr at exit and on SIGUSR2\n"
    "  --fault-udp K            the data-path faults below act on the K-th --udp port only (frames\n"
    "                           from or to it), from 0 (the firmware faults keep --fault-function)\n"
    "faults (each reset re-arms them; --fault-after counts commands since the reset):\n"
    "  --fault-silence          the firmware stops answering: commands never complete\n"
    "  --fault-fatal CODE       the firmware fails fatally; mlx5: the health buffer reports syndrome\n"
    "                           CODE (1..255), e.g. 0x8; bnxt: a RESET_NOTIFY async event with\n"
    "                           reason CODE (1..5), then the firmware is in reset for its minimum\n"
    "                           wait and comes back as after a reset\n"
    "  --fault-fail [CHANNEL:]OP:STATUS[:SYNDROME]\n"
    "                           the next command with opcode OP on CHANNEL fails with STATUS\n"
    "                           (numbers, 0x ok), in the family's own space: mlx5 cmdq (the\n"
    "                           default) opcode 16-bit, status 8-bit, syndrome 32-bit; bnxt hwrm (the\n"
    "                           default) req_type and error_code 16-bit, syndrome = cmd_err 8-bit,\n"
    "                           rcfw opcode and CREQ status 8-bit, no syndrome\n"
    "  --fault-die              the function is gone: reads return all ones, nothing completes\n"
    "  --fault-after N          commands that complete before the fault strikes (default 0)\n"
    "  --fault-function K       only function K suffers the faults, the data-path ones below\n"
    "                           included (default: every function, the whole wire)\n"
    "data-path faults (on the wire between functions, or function K's port; times count from\n"
    "when the sockets are served):\n"
    "  --drop P                 each frame is lost with probability P (0..1)\n"
    "  --duplicate P            each frame is delivered twice with probability P (0..1)\n"
    "  --delay-us N             each frame arrives N us late (0..1000000)\n"
    "  --jitter-us N            and up to N us later still, uniformly (reorders; 0..1000000)\n"
    "  --link-down-after-ms N   the link goes down after N ms: frames from or to it vanish\n"
    "  --link-up-after-ms M     and comes back up at M ms (M > N)\n"
"  SIGUSR1                  toggles the link (function K's, UDP port K's, or every function's)\n"
    "  SIGUSR2                  prints the UDP ports' and the wire's counters on stderr\n"
    "  --function-dies-after-ms N\n"
    "                           the function dies for good after N ms, as a failed card: reads\n"
    "                           all ones, answers no command, its data path stops (no frame in or\n"
    "                           out, no DMA, no completion); its socket stays served\n"
"  SIGRTMIN                 the function dies for good at once, as with --function-dies-after-ms\n"
    "  --die-after-ms N         the whole model dies after N ms by SIGKILL, as a crash: clients\n"
    "                           see their sockets closed; the socket files stay behind (a\n"
    "                           later rig-nicsim on DIR replaces them)\n"
    "  --capture FILE           every frame sent on the wire, before faults, into a pcap file, those\n"
    "                           arriving by and leaving by UDP ports included (closed at exit, and\n"
    "                           before --die-after-ms strikes)\n"
    "  --report-ledger          mlx5: after every DISABLE_HCA and every reset of function K, a line on\n"
    "                           stdout: LEDGER function=K event=disable_hca|reset pages=N objects=M\n"
    "                           bnxt: after every FUNC_DRV_UNRGTR, FUNC_RESET, reset and firmware\n"
    "                           reset: LEDGER function=K event=drv_unrgtr|func_reset|reset|\n"
    "                           firmware_reset rings=N stat_ctxs=N vnics=N filters=N\n"
    "                           roce_objects=N context_pages=N\n"
    "                           (firmware pages still held from the driver, objects still alive)\n"
    "  --trapped-uar-pages N    mlx5: the first N UAR pages are trapped, every write seen (default 1)\n"
    "  --help                   this text\n"
    "logging: faults as they fire on stderr (logger nicsim, info); SPDLOG_LEVEL=model=debug\n";

[[noreturn]] void bad(const std::string& message) {
    std::fprintf(stderr, "rig-nicsim: %s (see --help)\n", message.c_str());
    std::exit(2);
}

// A whole-string unsigned number (decimal or 0x hex) within [lo, hi].
std::uint64_t number(std::string_view option, std::string_view text, std::uint64_t lo, std::uint64_t hi) {
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = s.empty() || s[0] == '-' ? 0 : std::strtoull(s.c_str(), &end, 0);
    if (s.empty() || s[0] == '-' || end == nullptr || *end != '\0' || errno != 0 || v < lo || v > hi) {
        bad("bad value for " + std::string(option) + ": '" + s + "' (expected " + std::to_string(lo) + ".." +
            std::to_string(hi) + ")");
    }
    return v;
}

std::int64_t signed_number(std::string_view option, std::string_view text, std::int64_t lo, std::int64_t hi) {
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    const long long v = s.empty() ? 0 : std::strtoll(s.c_str(), &end, 0);
    if (s.empty() || end == nullptr || *end != '\0' || errno != 0 || v < lo || v > hi) {
        bad("bad value for " + std::string(option) + ": '" + s + "' (expected " + std::to_string(lo) + ".." +
            std::to_string(hi) + ")");
    }
    return v;
}

// A probability: a whole-string decimal number within [0, 1].
double probability(std::string_view option, std::string_view text) {
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    const double v = s.empty() ? -1.0 : std::strtod(s.c_str(), &end);
    if (s.empty() || end == nullptr || *end != '\0' || errno != 0 || !(v >= 0.0 && v <= 1.0)) {
        bad("bad value for " + std::string(option) + ": '" + s + "' (expected a probability 0..1)");
    }
    return v;
}

constexpr std::uint64_t max_delay_us = 1000000;       // 1 s
constexpr std::uint64_t max_after_ms = 24ull * 3600 * 1000;  // a day

struct settings {
    // --family: one family, or a list whose k-th (cyclically) serves function k (mixed wires)
    std::vector<const sim::family*> families;
    const sim::family* family = nullptr;   // the one whose space --fault-fail/--fault-fatal use
    std::string socket_dir;
    unsigned functions = 1;
    sim::common_options options;
    std::optional<unsigned> fault_function;
    rig::sim::roce::faults wire_faults;
    std::optional<std::chrono::milliseconds> link_down_after, link_up_after, function_dies_after, die_after;
    std::string capture;
    std::uint64_t first_mac = 0x0200'0000'0001ull;   // function k's MAC: this + k
    std::vector<std::pair<rig::sim::roce::udp_address, rig::sim::roce::udp_address>> udp;   // local, peer
    std::optional<unsigned> fault_udp;
    std::optional<int> core_cpu;   // --core-cpu: the model core's thread on this CPU only
};

// --udp's value: LOCAL,PEER, each IPV4:PORT (LOCAL's port may be 0: the kernel picks one).
std::pair<rig::sim::roce::udp_address, rig::sim::roce::udp_address> udp_pair(std::string_view text) {
    const std::size_t comma = text.find(',');
    if (comma == std::string_view::npos) {
        bad("bad value for --udp: '" + std::string(text) + "' (expected LOCAL_IP:PORT,PEER_IP:PORT)");
    }
    const auto local = rig::sim::roce::parse_udp_address(text.substr(0, comma), true);
    const auto peer = rig::sim::roce::parse_udp_address(text.substr(comma + 1));
    if (!local || !peer) {
        bad("bad value for --udp: " + (local ? peer.error() : local.error()) + " (expected LOCAL_IP:PORT,PEER_IP:PORT)");
    }
    return {*local, *peer};
}

// --first-mac's value: six two-digit hex bytes separated by ':', as a 48-bit number.
std::uint64_t first_mac(std::string_view text) {
    const auto refuse = [&](const std::string& why) { bad("bad value for --first-mac: '" + std::string(text) + "' (" + why + ")"); };
    std::uint64_t mac = 0;
    for (std::size_t i = 0; i < 6; ++i) {
        const std::string_view b = text.substr(std::min(text.size(), 3 * i), 2);
        const bool sep = i == 5 ? text.size() == 17 : text.size() > 3 * i + 2 && text[3 * i + 2] == ':';
        if (b.size() != 2 || !std::isxdigit(static_cast<unsigned char>(b[0])) ||
            !std::isxdigit(static_cast<unsigned char>(b[1])) || !sep) {
            refuse("expected six hex bytes, e.g. 02:00:00:00:01:01");
        }
        mac = mac << 8 | std::stoul(std::string(b), nullptr, 16);
    }
    if ((mac >> 40 & 1) != 0) {
        refuse("a multicast address (the first byte is odd): a function's MAC is unicast");
    }
    if (mac == 0) {
        refuse("the zero MAC is no address");
    }
    return mac;
}

// --family's value: a family of the table whose model is built.
const sim::family& family_named(std::string_view name) {
    const sim::family* f = sim::find_family(name);
    if (f == nullptr) {
        bad("unknown family '" + std::string(name) + "' (" + sim::family_names() + ")");
    }
    if (f->make == nullptr) {
        bad("--family " + std::string(name) + ": the " + std::string(name) + " model is not built yet");
    }
    return *f;
}

// What only the family can read: the fault arguments in its space, and its own options.
void family_checks(settings& s, const std::vector<std::string_view>& family_options,
                   std::optional<std::string_view> fatal, std::optional<std::string_view> fail) {
    const sim::family& f = *s.family;
    for (std::string_view option : family_options) {
        if (!f.takes(option)) {
            bad(std::string(option) + " is not an option of family " + std::string(f.name));
        }
    }
    if (fatal) {
        const auto code = pci::parse_fault_fatal(*fatal, f.faults);
        if (!code) {
            bad("bad value for --fault-fatal: '" + std::string(*fatal) + "' (" + code.error() + ")");
        }
        s.options.fault.fatal_code = *code;
    }
    if (fail) {
        const auto failure = pci::parse_fault_fail(*fail, f.faults);
        if (!failure) {
            bad("bad value for --fault-fail: '" + std::string(*fail) + "' (" + failure.error() + ")");
        }
        s.options.fault.fail = *failure;
    }
}

settings parse(int argc, char** argv) {
    settings s;
    std::string_view family = "mlx5";
    std::vector<std::string_view> family_options;  // those given, checked against the family's
    std::optional<std::string_view> fatal, fail;   // read once the family is known
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        const auto value = [&]() -> std::string_view {
            if (i + 1 >= args.size()) {
                bad("option " + std::string(a) + " needs a value");
            }
            return args[++i];
        };
        if (std::find(std::begin(sim::family_option_names), std::end(sim::family_option_names), a) !=
            std::end(sim::family_option_names)) {
            family_options.push_back(a);
        }
        if (a == "--help" || a == "-h") {
            std::fputs(usage.data(), stdout);
            std::exit(0);
        } else if (a == "--family") {
            family = value();
        } else if (a == "--functions") {
            s.functions = static_cast<unsigned>(number(a, value(), 1, 64));
        } else if (a == "--socket-dir") {
            s.socket_dir = value();
        } else if (a == "--init-time-ms") {
            s.options.init_time = std::chrono::milliseconds(number(a, value(), 0, 60000));
        } else if (a == "--command-latency-us") {
            s.options.command_latency = std::chrono::microseconds(number(a, value(), 0, 60000000));
        } else if (a == "--msix-vectors") {
            s.options.msix_vectors = static_cast<std::uint16_t>(number(a, value(), 1, 2048));
        } else if (a == "--page-request-after") {
            s.options.page_request_after = static_cast<std::uint32_t>(number(a, value(), 1, 0xffffffffu));
        } else if (a == "--page-request-pages") {
            s.options.page_request_pages = static_cast<std::int32_t>(signed_number(a, value(), -(1 << 20), 1 << 20));
        } else if (a == "--fault-silence") {
            s.options.fault.what = pci::fault_kind::silence;
        } else if (a == "--fault-fatal") {
            s.options.fault.what = pci::fault_kind::fatal;
            fatal = value();
        } else if (a == "--fault-fail") {
            s.options.fault.what = pci::fault_kind::fail_command;
            fail = value();
        } else if (a == "--fault-die") {
            s.options.fault.what = pci::fault_kind::die;
        } else if (a == "--fault-after") {
            s.options.fault.after_commands = static_cast<std::uint32_t>(number(a, value(), 0, 0xffffffffu));
        } else if (a == "--fault-function") {
            s.fault_function = static_cast<unsigned>(number(a, value(), 0, 63));
        } else if (a == "--drop") {
            s.wire_faults.drop = probability(a, value());
        } else if (a == "--duplicate") {
            s.wire_faults.duplicate = probability(a, value());
        } else if (a == "--delay-us") {
            s.wire_faults.delay = std::chrono::microseconds(number(a, value(), 0, max_delay_us));
        } else if (a == "--jitter-us") {
            s.wire_faults.jitter = std::chrono::microseconds(number(a, value(), 0, max_delay_us));
        } else if (a == "--link-down-after-ms") {
            s.link_down_after = std::chrono::milliseconds(number(a, value(), 0, max_after_ms));
        } else if (a == "--link-up-after-ms") {
            s.link_up_after = std::chrono::milliseconds(number(a, value(), 1, max_after_ms));
        } else if (a == "--function-dies-after-ms") {
            s.function_dies_after = std::chrono::milliseconds(number(a, value(), 0, max_after_ms));
        } else if (a == "--die-after-ms") {
            s.die_after = std::chrono::milliseconds(number(a, value(), 0, max_after_ms));
        } else if (a == "--report-ledger") {
            s.options.on_ledger = [](const std::string& ledger_line) {
                // one write and a flush per line: a harness reading the pipe sees each as it comes
                const std::string line = ledger_line + "\n";
                std::fwrite(line.data(), 1, line.size(), stdout);
                std::fflush(stdout);
            };
        } else if (a == "--udp") {
            s.udp.push_back(udp_pair(value()));
        } else if (a == "--first-mac") {
            s.first_mac = first_mac(value());
        } else if (a == "--core-cpu") {
            s.core_cpu = static_cast<int>(number(a, value(), 0, CPU_SETSIZE - 1));
        } else if (a == "--fault-udp") {
            s.fault_udp = static_cast<unsigned>(number(a, value(), 0, 63));
        } else if (a == "--trapped-uar-pages") {
            s.options.trapped_uar_pages = static_cast<std::uint32_t>(number(a, value(), 0, 126));
        } else if (a == "--capture") {
            s.capture = value();
            // created here, so that a path that cannot be one is an argument error
            std::FILE* f = s.capture.empty() ? nullptr : std::fopen(s.capture.c_str(), "wb");
            if (f == nullptr) {
                bad("bad value for --capture: '" + s.capture + "' (the file cannot be created)");
            }
            std::fclose(f);
        } else {
            bad("unknown option '" + std::string(a) + "'");
        }
    }
    for (std::size_t at = 0; at <= family.size();) {
        const std::size_t comma = std::min(family.find(',', at), family.size());
        s.families.push_back(&family_named(family.substr(at, comma - at)));
        at = comma + 1;
    }
    // the fault arguments are read in one family's space: the struck function's
    const unsigned struck_one = s.fault_function.value_or(0);
    s.family = s.families[struck_one % s.families.size()];
    if (s.families.size() > 1 && (fatal || fail) && !s.fault_function) {
        bad("--fault-fail and --fault-fatal with several families need --fault-function K (they are read "
            "in K's family's space)");
    }
    for (const sim::family* f : s.families) {
        s.family = f;
        family_checks(s, family_options, std::nullopt, std::nullopt);
    }
    s.family = s.families[struck_one % s.families.size()];
    family_checks(s, family_options, fatal, fail);
    if (s.socket_dir.empty()) {
        bad("--socket-dir is required");
    }
    if (s.fault_function && *s.fault_function >= s.functions) {
        bad("--fault-function " + std::to_string(*s.fault_function) + " names no function (0.." +
            std::to_string(s.functions - 1) + ")");
    }
    if ((s.first_mac & 0xff'ffff) + s.functions - 1 > 0xff'ffff) {
        bad("bad value for --first-mac: function " + std::to_string(s.functions - 1) +
            "'s MAC would pass ff:ff:ff in the last three bytes (choose a smaller one)");
    }
    if (s.fault_udp && *s.fault_udp >= s.udp.size()) {
        bad("--fault-udp " + std::to_string(*s.fault_udp) + " names no --udp port (" +
            (s.udp.empty() ? std::string("none given") : "0.." + std::to_string(s.udp.size() - 1)) + ")");
    }
    if (s.link_up_after && !s.link_down_after) {
        bad("--link-up-after-ms " + std::to_string(s.link_up_after->count()) + " needs --link-down-after-ms");
    }
    if (s.link_up_after && *s.link_up_after <= *s.link_down_after) {
        bad("bad value for --link-up-after-ms: '" + std::to_string(s.link_up_after->count()) +
            "' (expected more than --link-down-after-ms " + std::to_string(s.link_down_after->count()) + ")");
    }
    return s;
}

// The tool's own logger: the faults as they fire (info by default; SPDLOG_LEVEL=nicsim=warn
// quiets it).
spdlog::logger& say() {
    static spdlog::logger& logger = rig::logging::logger("nicsim", spdlog::level::info);
    return logger;
}

// Function k's permanent MAC, --first-mac + k (02:00:00:00:HH:LL with HHLL = k + 1 by default):
// as a number for the model's firmware (which makes the GID from it), as bytes for the wire.
std::uint64_t first_mac_number = 0x0200'0000'0001ull;
std::uint64_t mac_number(unsigned k) { return first_mac_number + k; }

rig::sim::roce::mac_address mac_of(unsigned k) {
    const std::uint64_t mac = mac_number(k);
    rig::sim::roce::mac_address m{};
    for (std::size_t i = 0; i < m.size(); ++i) {
        m[i] = static_cast<std::byte>(mac >> (8 * (5 - i)));
    }
    return m;
}

// The UDP ports' and the wire's counters, a line each on stderr (at exit, on SIGUSR2): key=value,
// for people and for a harness's regex alike.
void print_counters(const rig::sim::roce::wire& wire, const std::vector<std::unique_ptr<rig::sim::roce::udp_port>>& udp) {
    for (std::size_t k = 0; k < udp.size(); ++k) {
        const rig::sim::roce::udp_counters c = udp[k]->counters();
        std::fprintf(stderr,
                     "UDP port=%zu local=%s peer=%s in=%llu in_bytes=%llu out=%llu out_bytes=%llu not_for_us=%llu "
                     "malformed=%llu send_errors=%llu kernel_drops=%llu learned=%llu mac_clashes=%llu\n",
                     k, rig::sim::roce::to_string(udp[k]->local()).c_str(), rig::sim::roce::to_string(udp[k]->peer()).c_str(),
                     static_cast<unsigned long long>(c.datagrams_in), static_cast<unsigned long long>(c.bytes_in),
                     static_cast<unsigned long long>(c.datagrams_out), static_cast<unsigned long long>(c.bytes_out),
                     static_cast<unsigned long long>(c.not_for_us), static_cast<unsigned long long>(c.malformed),
                     static_cast<unsigned long long>(c.send_errors), static_cast<unsigned long long>(c.kernel_drops),
                     static_cast<unsigned long long>(c.learned),
                     static_cast<unsigned long long>(c.mac_clashes));
    }
    const rig::sim::roce::wire_counters w = wire.counters();
    std::fprintf(stderr,
                 "WIRE transmitted=%llu delivered=%llu dropped=%llu duplicated=%llu no_route=%llu overflow=%llu "
                 "pauses=%llu flooded=%llu learned=%llu\n",
                 static_cast<unsigned long long>(w.transmitted), static_cast<unsigned long long>(w.delivered),
                 static_cast<unsigned long long>(w.dropped), static_cast<unsigned long long>(w.duplicated),
                 static_cast<unsigned long long>(w.no_route), static_cast<unsigned long long>(w.overflow),
                 static_cast<unsigned long long>(w.pauses), static_cast<unsigned long long>(w.flooded),
                 static_cast<unsigned long long>(w.learned));
    std::fflush(stderr);
}

// A fault that fires once, at `at` after the sockets are served.
struct timed_fault {
    std::chrono::milliseconds at;
    std::function<void()> fire;
};

}  // namespace

int main(int argc, char** argv) {
    const settings s = parse(argc, argv);
    first_mac_number = s.first_mac;

    // SIGINT/SIGTERM (and SIGUSR1) are taken by sigtimedwait on this thread: block them before
    // any thread starts, so that every thread inherits the mask and none is interrupted.
    // A shell starts background jobs with SIGINT ignored; a stop request must still stop us.
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    // and SIGUSR1: toggle the link; SIGUSR2: print the counters; SIGRTMIN: the function dies
    sigset_t signals = stop_signals;
    std::signal(SIGUSR1, SIG_DFL);
    sigaddset(&signals, SIGUSR1);
    std::signal(SIGUSR2, SIG_DFL);
    sigaddset(&signals, SIGUSR2);
    std::signal(SIGRTMIN, SIG_DFL);
    sigaddset(&signals, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    // All functions on one in-process switch (their RoCE ports, by MAC); it outlives them.
    rig::sim::roce::wire wire;
    if (!s.capture.empty() && !wire.capture(s.capture)) {
        std::fprintf(stderr, "rig-nicsim: cannot create the capture file %s\n", s.capture.c_str());
        return 1;
    }
    if (s.core_cpu && !wire.core().run_on_cpu(*s.core_cpu)) {
        std::fprintf(stderr, "rig-nicsim: --core-cpu %d: not a CPU this process may run on (the kernel refused it)\n",
                     *s.core_cpu);
        return 1;
    }
    // The UDP ports, before any socket is served (a bind that fails leaves nothing behind);
    // they go before the wire (declared after it).
    std::vector<std::unique_ptr<rig::sim::roce::udp_port>> udp;
    for (const auto& [local, peer] : s.udp) {
        auto u = rig::sim::roce::udp_port::open(wire, local, peer);
        if (!u) {
            std::fprintf(stderr, "rig-nicsim: --udp: %s\n", u.error().c_str());
            return 1;
        }
        say().info("UDP port {}: {} -> {} (receive buffer {} bytes)", udp.size(), rig::sim::roce::to_string((*u)->local()),
                   rig::sim::roce::to_string(peer), (*u)->receive_buffer());
        udp.push_back(std::move(*u));
    }
    std::vector<std::unique_ptr<sim::served_function>> functions;
    std::vector<std::unique_ptr<rig::sim::vfio_user::server>> servers;
    for (unsigned k = 0; k < s.functions; ++k) {
        sim::common_options o = s.options;
        o.index = static_cast<std::uint16_t>(k);
        o.mac = mac_number(k);
        if (s.fault_function && *s.fault_function != k) {
            o.fault = {};
        }
        const sim::family& family = *s.families[k % s.families.size()];
        functions.push_back(family.make(o));
        const std::string path = s.socket_dir + "/" + std::string(family.name) + "-" + std::to_string(k) + ".sock";
        auto srv = rig::sim::vfio_user::server::create(path, functions.back()->device());
        if (!srv) {
            std::fprintf(stderr, "rig-nicsim: %s\n", srv.error().c_str());
            servers.clear();  // removes the sockets made so far
            return 1;
        }
        functions.back()->attach(**srv);
        functions.back()->attach_wire(wire);
        servers.push_back(std::move(*srv));
    }
    // The functions the faults strike: K, or all of them.
    std::vector<unsigned> struck;
    for (unsigned k = 0; k < s.functions; ++k) {
        if (!s.fault_function || *s.fault_function == k) {
            struck.push_back(k);
        }
    }
    const std::string whom = s.fault_udp        ? "UDP port " + std::to_string(*s.fault_udp)
                             : s.fault_function ? "function " + std::to_string(*s.fault_function)
                                                : std::string("every function");
    if (s.fault_udp) {
        udp[*s.fault_udp]->set_faults(s.wire_faults);
    } else if (s.fault_function) {
        wire.set_port_faults(mac_of(*s.fault_function), s.wire_faults);
    } else {
        wire.set_faults(s.wire_faults);
    }
    const rig::sim::roce::faults& f = s.wire_faults;
    if (f.drop > 0 || f.duplicate > 0 || f.delay.count() > 0 || f.jitter.count() > 0) {
        // they strike frame by frame on the data path, which logs nothing: said once here
        say().info("frames of {}: drop {}, duplicate {}, delay {} us, jitter {} us", whom, f.drop, f.duplicate,
                   std::chrono::duration_cast<std::chrono::microseconds>(f.delay).count(),
                   std::chrono::duration_cast<std::chrono::microseconds>(f.jitter).count());
    }

    bool link_up = true;
    std::vector<bool> dead(s.functions, false);  // a dead card's link stays down
    const auto set_link = [&](bool up, const char* why) {
        link_up = up;
        if (s.fault_udp) {
            udp[*s.fault_udp]->set_link(up);
        }
        for (unsigned k : s.fault_udp ? std::vector<unsigned>{} : struck) {
            wire.set_port_link(mac_of(k), up && !dead[k]);
        }
        say().info("link {} for {} ({})", up ? "up" : "down", whom, why);
    };
    // a dead card stays dead: a second death (the timer and the signal) changes nothing
    const auto die = [&](const char* why) {
        for (unsigned k : struck) {
            // the firmware and the data path stop under the model's lock; the port then loses
            // what is sent to it, as a dead card's link does
            if (!dead[k]) {
                functions[k]->die_for_good();
                dead[k] = true;
                wire.set_port_link(mac_of(k), false);
            }
        }
        say().info("{} died for good ({})", whom, why);
    };
    std::vector<timed_fault> timed;
    if (s.link_down_after) {
        timed.push_back({*s.link_down_after, [&] { set_link(false, "--link-down-after-ms"); }});
    }
    if (s.link_up_after) {
        timed.push_back({*s.link_up_after, [&] { set_link(true, "--link-up-after-ms"); }});
    }
    if (s.function_dies_after) {
        timed.push_back({*s.function_dies_after, [&] { die("--function-dies-after-ms"); }});
    }
    if (s.die_after) {
        timed.push_back({*s.die_after, [&] {
                             say().info("the whole model dies now by SIGKILL (--die-after-ms); its "
                                        "sockets stay behind");
                             say().flush();
                             wire.capture("");  // the capture keeps every frame up to here
                             ::kill(::getpid(), SIGKILL);
                         }});
    }
    // in firing order; equal times keep the order above
    std::stable_sort(timed.begin(), timed.end(), [](const timed_fault& x, const timed_fault& y) { return x.at < y.at; });

    for (unsigned k = 0; k < s.functions; ++k) {
        servers[k]->start();
        std::printf("%s\n", servers[k]->path().c_str());
    }
    std::fflush(stdout);

    const auto start = std::chrono::steady_clock::now();
    std::size_t next = 0;
    for (;;) {
        int sig = -1;
        if (next < timed.size()) {
            const auto left = start + timed[next].at - std::chrono::steady_clock::now();
            const auto ns = std::max<std::int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
            const timespec t{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
            sig = sigtimedwait(&signals, nullptr, &t);
            if (sig < 0 && errno == EAGAIN) {
                timed[next++].fire();
                continue;
            }
        } else {
            sig = sigwaitinfo(&signals, nullptr);
        }
        if (sig == SIGUSR1) {
            set_link(!link_up, "SIGUSR1");
        } else if (sig == SIGUSR2) {
            print_counters(wire, udp);
        } else if (sig == SIGRTMIN) {
            die("SIGRTMIN");
        } else if (sig == SIGINT || sig == SIGTERM) {
            break;
        }  // else EINTR: look again
    }
    // Servers first: each ends its client's session (which resets the function) and, before its
    // DMA space goes, tells the function to stop using it (device::server_closing; without that
    // a function thread locked a destroyed mutex: EINVAL, std::terminate). Then the functions.
    servers.clear();
    functions.clear();
    if (!udp.empty()) {
        print_counters(wire, udp);
    }
    return 0;
}
