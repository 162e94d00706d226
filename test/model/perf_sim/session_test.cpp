// rig-perf --sim: the session starts the real rig-nicsim and a server process, hands the client
// its function, and leaves nothing behind: after a normal run, after SIGINT/SIGTERM, and when
// the model or the server fails. Driven through perf-sim-standin (a rig-perf stand-in with a
// TCP ping-pong for a benchmark), and through rig-perf itself in the [rig-perf] cases.
// Binaries come from the environment (set by meson): PERF_SIM_STANDIN, RIG_NICSIM, RIG_PERF.
// The sessions' functions are of RIG_TEST_FAMILY (mlx5, the default, bnxt, or mixed: the
// client's on mlx5, the server's on bnxt), given as --family; meson runs the suites once per family.
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "test/temp_dir.hpp"
#include "tools/rig-perf/sim_session.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace perf = rig::perf;

std::string env(const char* name) {
    const char* p = std::getenv(name);
    REQUIRE(p != nullptr);
    return p;
}

// A fresh, short TMPDIR for one run: the session's directory is made inside it, so "nothing
// left" is "this folder is empty and no process names it".
using rig::test::temp_dir;

// Processes (other than us) whose command line mentions `text`.
std::vector<std::string> processes_naming(const std::string& text) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator("/proc")) {
        const std::string pid = e.path().filename().string();
        if (pid.find_first_not_of("0123456789") != std::string::npos || std::stoi(pid) == ::getpid()) {
            continue;
        }
        std::ifstream f(e.path() / "cmdline");
        std::string cmd((std::istreambuf_iterator<char>(f)), {});
        if (cmd.find(text) != std::string::npos) {
            for (char& c : cmd) {
                c = c == '\0' ? ' ' : c;
            }
            found.push_back(pid + ": " + cmd);
        }
    }
    return found;
}

bool empty_dir(const std::string& d) { return fs::is_empty(d); }

// The family under test (RIG_TEST_FAMILY), and the family of the client's function (0) and the
// server's (1).
std::string family_under_test() {
    const char* v = std::getenv("RIG_TEST_FAMILY");
    const std::string f = v != nullptr && *v != '\0' ? v : "mlx5";
    REQUIRE((f == "mlx5" || f == "bnxt" || f == "mixed"));
    return f;
}
std::string family_of(int k) {
    const std::string f = family_under_test();
    return f != "mixed" ? f : k == 0 ? "mlx5" : "bnxt";
}
// A session's command line: `argv` and --family F.
std::vector<std::string> with_family(std::vector<std::string> argv) {
    argv.push_back("--family");
    argv.push_back(family_under_test());
    return argv;
}

// A child with its stdout and stderr on pipes and extra environment.
struct proc {
    pid_t pid = -1;
    int out = -1, err = -1;
    std::string out_text, err_text;
    int status = 0;

    proc(const std::vector<std::string>& argv_in, const std::vector<std::string>& extra_env) {
        int o[2], e[2];
        REQUIRE(::pipe(o) == 0);
        REQUIRE(::pipe(e) == 0);
        std::vector<std::string> argv_s = argv_in;
        std::vector<char*> argv;
        for (std::string& a : argv_s) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        // the environment, with extra_env's variables replacing ours
        const auto key = [](const std::string& v) { return v.substr(0, v.find('=')); };
        std::vector<std::string> env_s = extra_env;
        for (char** v = environ; *v != nullptr; ++v) {
            const std::string var = *v;
            bool replaced = false;
            for (const std::string& x : extra_env) {
                replaced |= key(x) == key(var);
            }
            if (!replaced) {
                env_s.push_back(var);
            }
        }
        std::vector<char*> envp;
        for (std::string& v : env_s) {
            envp.push_back(v.data());
        }
        envp.push_back(nullptr);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::setpgid(0, 0);  // a group of its own, as a shell's foreground job: kill(-pid) is Ctrl-C
            ::dup2(o[1], 1);
            ::dup2(e[1], 2);
            ::close(o[0]);
            ::close(e[0]);
            ::close(o[1]);
            ::close(e[1]);
            ::execve(argv[0], argv.data(), envp.data());
            ::_exit(127);
        }
        ::close(o[1]);
        ::close(e[1]);
        out = o[0];
        err = e[0];
    }

    // Reads stdout until it holds `text` or the deadline passes.
    bool wait_for_output(const std::string& text, std::chrono::milliseconds deadline) {
        const auto until = std::chrono::steady_clock::now() + deadline;
        while (out_text.find(text) == std::string::npos) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
            if (left <= 0ms) {
                return false;
            }
            pollfd p{out, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) == 1) {
                std::array<char, 4096> b;
                const ssize_t n = ::read(out, b.data(), b.size());
                if (n <= 0) {
                    return false;
                }
                out_text.append(b.data(), static_cast<std::size_t>(n));
            }
        }
        return true;
    }

    // Drains both pipes and reaps; the exit code, or -signal.
    int finish() {
        for (int* fd : {&out, &err}) {
            std::string& t = fd == &out ? out_text : err_text;
            std::array<char, 4096> b;
            for (ssize_t n; (n = ::read(*fd, b.data(), b.size())) > 0;) {
                t.append(b.data(), static_cast<std::size_t>(n));
            }
            ::close(*fd);
        }
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
};

void check_nothing_left(const temp_dir& tmp) {
    INFO("left in " << tmp.path);
    CHECK(empty_dir(tmp.path));
    const auto left = processes_naming(tmp.path);
    for (const std::string& p : left) {
        WARN("still running: " << p);
    }
    CHECK(left.empty());
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

TEST_CASE("perf sim: server arguments drop what only the client carries, then name the device and port",
          "[perf][sim]") {
    const std::vector<std::string> in{"write_bw", "-a", "--sim", "-d", "mlx5_0", "--plot", "x.svg", "-p", "7000",
                                      "--out_json", "--out_json_file", "r.json", "--ib-dev=y", "-s", "64",
                                      "--port=9", "-p7", "-dz", "--max-size", "4096", "--family", "bnxt", "-D", "3",
                                      "--family=mixed"};
    const std::vector<std::string> want{"write_bw", "-a", "-s", "64", "--max-size", "4096", "-D", "3",
                                        "-d", "vfio-user:/t/mlx5-1.sock", "-p", "4242"};
    CHECK(perf::server_arguments(in, "vfio-user:/t/mlx5-1.sock", 4242) == want);
    CHECK(perf::names_port({"write_bw", "-p", "1"}));
    CHECK(perf::names_port({"--port=1"}));
    CHECK(perf::names_port({"-p18515"}));
    CHECK_FALSE(perf::names_port({"write_bw", "-s", "2", "--plot", "p.svg"}));
    // read as parse_options reads them (getopt_long): a cluster, a prefix, an attached value
    const std::vector<std::string> getopt_in{"write_bw", "--sim", "-aFp", "7000", "--plo=a.png", "--fam", "bnxt",
                                             "--siz=64", "-n5", "--out_json_f", "-r.json", "--report_g"};
    const std::vector<std::string> getopt_want{"write_bw", "-a", "-F", "--size", "64", "-n", "5", "--report_gbits",
                                               "-d", "vfio-user:/t/mlx5-1.sock", "-p", "4242"};
    CHECK(perf::server_arguments(getopt_in, "vfio-user:/t/mlx5-1.sock", 4242) == getopt_want);
    // what is no rig-perf option (a stand-in's own flag) goes on as given, read around
    CHECK(perf::server_arguments({"write_bw", "--standin-x=1", "-a5", "--sim", "--all=2"}, "d", 1) ==
          std::vector<std::string>{"write_bw", "--standin-x=1", "-a", "-5", "--all=2", "-d", "d", "-p", "1"});
    CHECK(perf::names_port({"write_bw", "-aFp", "7000"}));
    CHECK(perf::names_port({"write_bw", "--por=7000"}));
    CHECK_FALSE(perf::names_port({"write_bw", "--plot", "-p9.svg"}));  // the plot's name, not a port
}

TEST_CASE("perf sim: a normal run reaches both functions and leaves no process or socket", "[perf][sim]") {
    temp_dir tmp;
    proc p(with_family({env("PERF_SIM_STANDIN"), "write_lat", "-s", "2"}), {"TMPDIR=" + tmp.path});
    const int rc = p.finish();
    INFO(p.out_text << p.err_text);
    CHECK(rc == 0);
    // the client got function 0, the server function 1, of one model in a private directory
    CHECK(p.out_text.find("client vfio-user:" + tmp.path + "/rig-perf-sim-") != std::string::npos);
    CHECK(p.out_text.find("/" + family_of(0) + "-0.sock\n") != std::string::npos);
    CHECK(p.out_text.find("server vfio-user:" + tmp.path + "/rig-perf-sim-") != std::string::npos);
    CHECK(p.out_text.find("/" + family_of(1) + "-1.sock\n") != std::string::npos);
    CHECK(p.err_text.empty());
    check_nothing_left(tmp);
}

TEST_CASE("perf sim: Ctrl-C mid-run stops server and model, exit status 130", "[perf][sim]") {
    temp_dir tmp;
    proc p(with_family({env("PERF_SIM_STANDIN"), "write_bw", "-D", "60"}), {"TMPDIR=" + tmp.path});
    REQUIRE(p.wait_for_output("running\n", 10s));
    CHECK(processes_naming(tmp.path).size() == 2);  // the model and the server, while it runs
    std::this_thread::sleep_for(200ms);
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(::kill(-p.pid, SIGINT) == 0);  // to the foreground group, as a terminal does
    const int rc = p.finish();
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);  // not the 60 s of -D
    INFO(p.err_text);
    CHECK(rc == 130);
    CHECK(one_line(p.err_text));
    CHECK(p.err_text.find("SIGINT") != std::string::npos);
    check_nothing_left(tmp);
}

// The CPUs of a Cpus_allowed_list line of /proc/PID[/task/TID]/status ("0-2,5").
std::vector<int> allowed_cpus(const fs::path& status) {
    std::ifstream f(status);
    std::vector<int> cpus;
    for (std::string line; std::getline(f, line);) {
        if (!line.starts_with("Cpus_allowed_list:")) {
            continue;
        }
        std::stringstream items(line.substr(line.find(':') + 1));
        for (std::string item; std::getline(items, item, ',');) {
            const auto dash = item.find('-');
            const int first = std::stoi(item);
            const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
            for (int c = first; c <= last; ++c) {
                cpus.push_back(c);
            }
        }
    }
    return cpus;
}

TEST_CASE("perf sim: every thread of the model runs on the highest allowed CPU, the server on the others",
          "[perf][sim]") {
    const std::vector<int> all = allowed_cpus("/proc/self/status");
    if (all.size() < 2) {
        WARN("one CPU here: nothing is placed");
        return;
    }
    temp_dir tmp;
    proc p(with_family({env("PERF_SIM_STANDIN"), "write_bw", "-D", "60"}), {"TMPDIR=" + tmp.path});
    REQUIRE(p.wait_for_output("running\n", 10s));
    const auto running = processes_naming(tmp.path);
    REQUIRE(running.size() == 2);
    for (const std::string& r : running) {
        INFO(r);
        const fs::path proc_dir = "/proc/" + r.substr(0, r.find(':'));
        if (r.find("rig-nicsim") != std::string::npos) {
            std::size_t threads = 0;
            for (const auto& t : fs::directory_iterator(proc_dir / "task")) {
                CHECK(allowed_cpus(t.path() / "status") == std::vector<int>{all.back()});
                ++threads;
            }
            CHECK(threads >= 3);   // the core, a firmware thread, a vfio-user server at least
        } else {
            CHECK(allowed_cpus(proc_dir / "status") == std::vector<int>(all.begin(), all.end() - 1));
        }
    }
    REQUIRE(::kill(-p.pid, SIGINT) == 0);
    CHECK(p.finish() == 130);
    check_nothing_left(tmp);
}

TEST_CASE("perf sim: SIGTERM mid-run does the same, exit status 143", "[perf][sim]") {
    temp_dir tmp;
    proc p(with_family({env("PERF_SIM_STANDIN"), "write_bw", "-D", "60"}), {"TMPDIR=" + tmp.path});
    REQUIRE(p.wait_for_output("running\n", 10s));
    REQUIRE(::kill(p.pid, SIGTERM) == 0);
    CHECK(p.finish() == 143);
    check_nothing_left(tmp);
}

TEST_CASE("perf sim: a model that cannot start is a one-line error", "[perf][sim]") {
    temp_dir tmp;
    SECTION("no such executable") {
        proc p({env("PERF_SIM_STANDIN"), "write_bw"}, {"TMPDIR=" + tmp.path, "RIG_NICSIM=" + tmp.path + "-nope"});
        CHECK(p.finish() == 1);
        CHECK(one_line(p.err_text));
        CHECK(p.err_text == "rig-perf: --sim: cannot run " + tmp.path + "-nope: No such file or directory\n");
        CHECK(p.out_text.empty());  // the client never ran
    }
    SECTION("it exits at once") {
        proc p({env("PERF_SIM_STANDIN"), "write_bw"}, {"TMPDIR=" + tmp.path, "RIG_NICSIM=/bin/false"});
        CHECK(p.finish() == 1);
        CHECK(p.err_text == "rig-perf: --sim: the device model exited with status 1 while starting\n");
    }
    SECTION("it fails with a reason: the session quotes the model's last line") {
        temp_dir scripts;
        const std::string fake = scripts.path + "/fake-nicsim";
        std::ofstream(fake) << "#!/bin/sh\necho 'starting' >&2\necho 'fake-nicsim: no such family' >&2\nexit 2\n";
        fs::permissions(fake, fs::perms::owner_all);
        proc p({env("PERF_SIM_STANDIN"), "write_bw"}, {"TMPDIR=" + tmp.path, "RIG_NICSIM=" + fake});
        CHECK(p.finish() == 1);
        CHECK(p.err_text ==
              "rig-perf: --sim: the device model exited with status 2 while starting: fake-nicsim: no such family\n");
    }
    SECTION("it never serves its sockets") {
        temp_dir scripts;
        const std::string fake = scripts.path + "/fake-nicsim";
        std::ofstream(fake) << "#!/bin/sh\nwhile :; do sleep 1; done\n";
        fs::permissions(fake, fs::perms::owner_all);
        proc p({env("PERF_SIM_STANDIN"), "write_bw"},
               {"TMPDIR=" + tmp.path, "RIG_NICSIM=" + fake, "RIG_PERF_STANDIN_START_MS=300"});
        CHECK(p.finish() == 1);
        CHECK(one_line(p.err_text));
        CHECK(p.err_text.find("the device model (" + fake + ") served no sockets in " + tmp.path) != std::string::npos);
        CHECK(p.err_text.find("within 300 ms") != std::string::npos);
        CHECK(processes_naming(fake).empty());
    }
    check_nothing_left(tmp);
}

TEST_CASE("perf sim: a server that fails stops the run with its status", "[perf][sim]") {
    temp_dir tmp;
    proc p(with_family({env("PERF_SIM_STANDIN"), "write_bw", "--standin-fail"}), {"TMPDIR=" + tmp.path});
    CHECK(p.finish() == 1);
    INFO(p.err_text);
    // the server's own line, then the session's
    CHECK(p.err_text.find("standin: server failing on purpose\n") != std::string::npos);
    // The server exits as it starts: whether the session's watcher sees it before the client
    // starts ("while starting") or after ("while the test ran") is the scheduler's choice (the
    // first form failed once on a loaded 2-CPU host).
    CHECK((p.err_text.find("rig-perf: --sim: the server exited with status 3 while the test ran\n") !=
               std::string::npos ||
           p.err_text.find("rig-perf: --sim: the server exited with status 3 while starting\n") != std::string::npos));
    check_nothing_left(tmp);
}

// rig-perf itself (run when it is built: meson passes RIG_PERF and selects [rig-perf]).
TEST_CASE("perf sim: rig-perf write_lat --sim runs and leaves nothing behind", "[.][rig-perf]") {
    temp_dir tmp;
    proc p(with_family({env("RIG_PERF"), "write_lat", "--sim", "-n", "200"}),
           {"TMPDIR=" + tmp.path, "RIG_NICSIM=" + env("RIG_NICSIM")});
    const int rc = p.finish();
    INFO(p.out_text << p.err_text);
    CHECK(rc == 0);
    CHECK(p.out_text.find("t_typical[usec]") != std::string::npos);
    CHECK(p.out_text.find("vfio-user:" + tmp.path + "/rig-perf-sim-") != std::string::npos);  // the client's device
    CHECK(p.out_text.find("/" + family_of(0) + "-0.sock") != std::string::npos);                // of its family
    CHECK(p.err_text.empty());
    check_nothing_left(tmp);
}

TEST_CASE("perf sim: rig-perf write_bw --sim -D stopped by SIGINT exits 130 and leaves nothing", "[.][rig-perf]") {
    temp_dir tmp;
    proc p(with_family({env("RIG_PERF"), "write_bw", "--sim", "-D", "30"}),
           {"TMPDIR=" + tmp.path, "RIG_NICSIM=" + env("RIG_NICSIM")});
    // the server process is up once both the model and it name the session directory
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (processes_naming(tmp.path).size() < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(20ms);
    }
    std::this_thread::sleep_for(1s);
    REQUIRE(::kill(p.pid, SIGINT) == 0);
    const int rc = p.finish();
    INFO(p.out_text << p.err_text);
    CHECK(rc == 130);
    // the session's line only: neither the client's nor the model's reaction to the teardown
    CHECK(p.err_text == "rig-perf: --sim: stopped by SIGINT; the server and the device model are stopped\n");
    check_nothing_left(tmp);
}

}  // namespace
