// rig-nicsim: serves N functions of the device model, one vfio-user socket each, until SIGINT or
// SIGTERM (DESIGN.md §4). The driver reaches function k as "vfio-user:DIR/mlx5-k.sock".
//
//   rig-nicsim --family mlx5 --functions 2 --socket-dir /run/rig
//
// Argument errors: one line on stderr, exit 2. A server that cannot start: exit 1.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pthread.h>
#include <signal.h>

#include "abi/mlx5/ifc/cmd.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/server.hpp"

namespace {

namespace model = rig::sim::mlx5;
namespace ifc = rig::mlx5::ifc;

constexpr std::string_view usage =
    "usage: rig-nicsim --family mlx5 --socket-dir DIR [options]\n"
    "Serves device-model NIC functions over vfio-user, one socket per function, named\n"
    "DIR/<family>-<k>.sock (printed on stdout), until SIGINT or SIGTERM; the sockets are removed\n"
    "on exit. Function k has the permanent MAC 02:00:00:00:HH:LL with HHLL = k + 1.\n"
    "options:\n"
    "  --family NAME            mlx5 (ConnectX-6 Dx); bnxt is not supported yet\n"
    "  --functions N            how many functions to serve, 1..64 (default 1)\n"
    "  --socket-dir DIR         where the sockets go (must exist)\n"
    "  --init-time-ms N         how long the init segment says 'initializing' after reset (default 20)\n"
    "  --command-latency-us N   how long the firmware takes over each command (default 0)\n"
    "  --msix-vectors N         MSI-X vectors per function, 1..2048 (default 64)\n"
    "  --page-request-after N   after N commands the firmware asks for pages by event (default: never)\n"
    "  --page-request-pages N   how many (negative: gives that many back; default 16)\n"
    "faults (each reset re-arms them; --fault-after counts commands since the reset):\n"
    "  --fault-silence          the firmware stops answering: commands never complete\n"
    "  --fault-fatal SYND       the health buffer reports fatal syndrome SYND (1..255), e.g. 0x8\n"
    "  --fault-fail OP:STATUS[:SYNDROME]\n"
    "                           the next command with opcode OP fails with STATUS (numbers, 0x ok)\n"
    "  --fault-die              the function is gone: reads return all ones, nothing completes\n"
    "  --fault-after N          commands that complete before the fault strikes (default 0)\n"
    "  --fault-function K       only function K suffers the fault (default: every function)\n"
    "  --help                   this text\n"
    "logging: SPDLOG_LEVEL=model=debug\n";

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

struct settings {
    std::string family;
    std::string socket_dir;
    unsigned functions = 1;
    model::function_options options;
    std::optional<unsigned> fault_function;
};

settings parse(int argc, char** argv) {
    settings s;
    s.options.page_request_pages = 16;
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        const auto value = [&]() -> std::string_view {
            if (i + 1 >= args.size()) {
                bad("option " + std::string(a) + " needs a value");
            }
            return args[++i];
        };
        if (a == "--help" || a == "-h") {
            std::fputs(usage.data(), stdout);
            std::exit(0);
        } else if (a == "--family") {
            s.family = value();
        } else if (a == "--functions") {
            s.functions = static_cast<unsigned>(number(a, value(), 1, 64));
        } else if (a == "--socket-dir") {
            s.socket_dir = value();
        } else if (a == "--init-time-ms") {
            s.options.init_time = std::chrono::milliseconds(number(a, value(), 0, 60000));
        } else if (a == "--command-latency-us") {
            s.options.command_latency = std::chrono::microseconds(number(a, value(), 0, 60000000));
        } else if (a == "--msix-vectors") {
            s.options.firmware.msix_vectors = static_cast<std::uint16_t>(number(a, value(), 1, 2048));
        } else if (a == "--page-request-after") {
            s.options.page_request_after = static_cast<std::uint32_t>(number(a, value(), 1, 0xffffffffu));
        } else if (a == "--page-request-pages") {
            s.options.page_request_pages = static_cast<std::int32_t>(signed_number(a, value(), -(1 << 20), 1 << 20));
        } else if (a == "--fault-silence") {
            s.options.fault.what = model::fault_plan::kind::silence;
        } else if (a == "--fault-fatal") {
            s.options.fault.what = model::fault_plan::kind::fatal;
            s.options.fault.health_syndrome = static_cast<std::uint8_t>(number(a, value(), 1, 255));
        } else if (a == "--fault-fail") {
            const std::string_view v = value();
            const auto c1 = v.find(':');
            if (c1 == std::string_view::npos) {
                bad("bad value for --fault-fail: '" + std::string(v) + "' (expected OP:STATUS[:SYNDROME])");
            }
            const auto c2 = v.find(':', c1 + 1);
            s.options.fault.what = model::fault_plan::kind::fail_command;
            s.options.fault.opcode = static_cast<std::uint16_t>(number(a, v.substr(0, c1), 0, 0xffff));
            s.options.fault.status = static_cast<ifc::cmd_status>(
                number(a, v.substr(c1 + 1, c2 == std::string_view::npos ? std::string_view::npos : c2 - c1 - 1), 1, 0xff));
            s.options.fault.syndrome =
                c2 == std::string_view::npos ? 0x4dfa0000u : static_cast<std::uint32_t>(number(a, v.substr(c2 + 1), 0, 0xffffffffu));
        } else if (a == "--fault-die") {
            s.options.fault.what = model::fault_plan::kind::die;
        } else if (a == "--fault-after") {
            s.options.fault.after_commands = static_cast<std::uint32_t>(number(a, value(), 0, 0xffffffffu));
        } else if (a == "--fault-function") {
            s.fault_function = static_cast<unsigned>(number(a, value(), 0, 63));
        } else {
            bad("unknown option '" + std::string(a) + "'");
        }
    }
    if (s.family.empty()) {
        bad("--family is required");
    }
    if (s.family == "bnxt") {
        bad("family bnxt is not supported yet");
    }
    if (s.family != "mlx5") {
        bad("unknown family '" + s.family + "' (mlx5)");
    }
    if (s.socket_dir.empty()) {
        bad("--socket-dir is required");
    }
    if (s.fault_function && *s.fault_function >= s.functions) {
        bad("--fault-function " + std::to_string(*s.fault_function) + " names no function (0.." +
            std::to_string(s.functions - 1) + ")");
    }
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    const settings s = parse(argc, argv);

    // SIGINT/SIGTERM are taken by sigwait on this thread: block them before any thread starts,
    // so that every thread inherits the mask and none is interrupted.
    // A shell starts background jobs with SIGINT ignored; a stop request must still stop us.
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    // All functions on one in-process switch (their RoCE ports, by MAC); it outlives them.
    rig::sim::roce::wire wire;
    std::vector<std::unique_ptr<model::function_model>> functions;
    std::vector<std::unique_ptr<rig::sim::vfio_user::server>> servers;
    for (unsigned k = 0; k < s.functions; ++k) {
        model::function_options o = s.options;
        o.function_index = static_cast<std::uint16_t>(k);
        o.firmware.mac = 0x0200'0000'0000ull + k + 1;  // 02:00:00:00:HH:LL, HHLL = k + 1
        if (s.fault_function && *s.fault_function != k) {
            o.fault = {};
        }
        functions.push_back(std::make_unique<model::function_model>(o));
        const std::string path = s.socket_dir + "/" + s.family + "-" + std::to_string(k) + ".sock";
        auto srv = rig::sim::vfio_user::server::create(path, *functions.back());
        if (!srv) {
            std::fprintf(stderr, "rig-nicsim: %s\n", srv.error().c_str());
            servers.clear();  // removes the sockets made so far
            return 1;
        }
        functions.back()->attach(**srv);
        functions.back()->attach_wire(wire);
        servers.push_back(std::move(*srv));
    }
    for (unsigned k = 0; k < s.functions; ++k) {
        servers[k]->start();
        std::printf("%s\n", servers[k]->path().c_str());
    }
    std::fflush(stdout);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    // servers first (each ends its client, which resets its function), then the functions
    servers.clear();
    functions.clear();
    return 0;
}
