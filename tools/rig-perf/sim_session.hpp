#pragma once
// rig-perf --sim: one command runs a whole perftest pair on the device model. It starts
// `rig-nicsim --family mlx5 --functions 2` in a private temporary directory, the server side
// as a second rig-perf process on function 1, and the client in this process on function 0
// (RC over RoCEv2 on the model's in-process switch), then stops everything it started: also
// on SIGINT/SIGTERM, and when the model or the server dies early.
//
// Both children run in process groups of their own, so a terminal's Ctrl-C reaches only this
// process, which then stops the server before the model (the server's queue pairs live on the
// model) and removes the directory with the sockets.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "perf_types.hpp"

namespace rig::perf {

// Runs `run_client` with o.device = vfio-user:DIR/mlx5-0.sock, o.server = "127.0.0.1" and
// o.port = the port the server listens on (o.port when -p/--port is among args_for_server or
// o.port is not perftest's default, else a free one), against the server
// `rig-perf <args_for_server> -d vfio-user:DIR/mlx5-1.sock -p PORT` in a child process.
// args_for_server: the test name and the options both sides share; --sim, -d, -p, --plot and
// --out_json/--out_json_file are removed from it (the server draws and writes nothing).
// The server's stdout is discarded (the client prints the tables); its stderr is ours. The
// model's stderr goes to a log in DIR, quoted (last line) when the model fails. If this
// process is killed outright (SIGKILL), the children get SIGTERM (PR_SET_PDEATHSIG); DIR stays.
// Returns run_client's status, or 1 with one line "rig-perf: --sim: <reason>" on stderr
// when the session cannot start or the server fails. On SIGINT/SIGTERM it stops everything
// and exits the process with 128 + the signal (130 for SIGINT).
// Call it before this process starts threads: it blocks SIGINT/SIGTERM in the calling thread,
// and threads started later (run_client's) inherit that mask.
int run_with_sim(const options& o, const std::vector<std::string>& args_for_server,
                 const std::function<int(const options&)>& run_client);

// What run_with_sim starts and how long it waits: the default is the rig-nicsim found by
// find_nicsim() and this executable (/proc/self/exe) as the server; the tests pass stand-ins.
struct sim_setup {
    std::string nicsim;                                  // the model's executable
    std::string server;                                  // the server's executable
    std::chrono::milliseconds start_deadline{10000};     // until both sockets are there
    std::chrono::milliseconds stop_deadline{3000};       // SIGTERM → exit, before SIGKILL
    std::chrono::milliseconds server_exit_deadline{5000};  // after the client: server ends itself
};

int run_with_sim(const options& o, const std::vector<std::string>& args_for_server,
                 const std::function<int(const options&)>& run_client, const sim_setup& setup);

// The model's executable: $RIG_NICSIM, else rig-nicsim next to this executable or one folder
// up (build/tools/rig-nicsim for build/tools/rig-perf/rig-perf), else on PATH. Empty if none.
std::string find_nicsim();

// The server's command line after its executable: args_for_server without the options that
// only the client may carry (see run_with_sim), each other option written back as given (a
// cluster -aF as -a -F, a prefix --si as --size), then -d DEVICE -p PORT.
std::vector<std::string> server_arguments(const std::vector<std::string>& args_for_server,
                                          const std::string& device, std::uint16_t port);

// Whether args name the out-of-band port (-p N, -pN, --port N, --port=N, -ap N: read as
// parse_options reads them, args.hpp).
bool names_port(const std::vector<std::string>& args);

}  // namespace rig::perf
