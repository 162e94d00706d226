// tools/rig-nicsim as a user runs it: a child process serving N functions, reached with
// driver::open, stopped by SIGINT; and its argument errors. The binary's path comes from the
// RIG_NICSIM environment variable (set by meson).
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "driver/function.hpp"
#include "sim/family.hpp"
#include "test/model/child_process.hpp"
#include "test/model/served_model.hpp"

namespace {

using namespace std::chrono_literals;
namespace drv = rig::driver;

std::string nicsim() {
    const char* p = std::getenv("RIG_NICSIM");
    REQUIRE(p != nullptr);
    return p;
}

// Runs rig-nicsim with args; returns the child's pid, its stdout+stderr in *pipe_fd.
pid_t spawn(const std::vector<std::string>& args, int* pipe_fd) {
    const rig::test::child c = rig::test::spawn_child(nicsim(), args);
    *pipe_fd = c.output;
    return c.pid;
}

std::string drain(int fd) { return rig::test::read_all(fd); }

std::pair<int, std::string> run(const std::vector<std::string>& args) { return rig::test::run_to_exit(nicsim(), args); }

TEST_CASE("rig-nicsim: serves N functions until SIGINT, then exits 0 and removes its sockets", "[model][mlx5]") {
    rig::test::temp_socket dir;
    int fd = -1;
    const pid_t pid = spawn({"--family", "mlx5", "--functions", "2", "--socket-dir", dir.dir}, &fd);
    const std::string s0 = dir.dir + "/mlx5-0.sock";
    const std::string s1 = dir.dir + "/mlx5-1.sock";
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!(std::filesystem::exists(s0) && std::filesystem::exists(s1))) {
        REQUIRE(std::chrono::steady_clock::now() < until);
        std::this_thread::sleep_for(5ms);
    }
    for (const std::string& s : {s0, s1}) {
        auto f = drv::open("vfio-user:" + s);
        INFO((f ? std::string() : f.error().message));
        REQUIRE(f.has_value());
        CHECK((*f)->config_read16(0).value() == 0x15b3);
        CHECK((*f)->config_read16(2).value() == 0x101d);
        CHECK((*f)->get_irq_info(drv::irq_kind::msix).value().count == 64u);
    }
    REQUIRE(::kill(pid, SIGINT) == 0);
    const std::string out = drain(fd);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(out.find(s0) != std::string::npos);  // it printed the socket paths
    CHECK(out.find(s1) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(s0));
    CHECK_FALSE(std::filesystem::exists(s1));
}

TEST_CASE("rig-nicsim: a fault option strikes every function it names", "[model][mlx5]") {
    rig::test::temp_socket dir;
    int fd = -1;
    const pid_t pid = spawn({"--family", "mlx5", "--functions", "2", "--socket-dir", dir.dir, "--fault-die",
                             "--fault-function", "1"},
                            &fd);
    const std::string s1 = dir.dir + "/mlx5-1.sock";
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!std::filesystem::exists(s1)) {
        REQUIRE(std::chrono::steady_clock::now() < until);
        std::this_thread::sleep_for(5ms);
    }
    {
        auto f0 = drv::open("vfio-user:" + dir.dir + "/mlx5-0.sock");
        REQUIRE(f0.has_value());
        CHECK((*f0)->config_read16(0).value() == 0x15b3);
        auto f1 = drv::open("vfio-user:" + s1);
        REQUIRE(f1.has_value());
        CHECK((*f1)->config_read16(0).value() == 0xffff);  // gone: all ones
        REQUIRE((*f1)->reset().has_value());                // a reset re-arms the planned fault
        CHECK((*f1)->config_read16(0).value() == 0xffff);
    }
    REQUIRE(::kill(pid, SIGTERM) == 0);
    drain(fd);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

TEST_CASE("rig-nicsim --report-ledger: one LEDGER line per reset of a function, on stdout", "[model][mlx5]") {
    rig::test::temp_socket dir;
    int fd = -1;
    const pid_t pid = spawn({"--family", "mlx5", "--functions", "2", "--socket-dir", dir.dir, "--report-ledger"}, &fd);
    const std::string s1 = dir.dir + "/mlx5-1.sock";
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (!std::filesystem::exists(s1)) {
        REQUIRE(std::chrono::steady_clock::now() < until);
        std::this_thread::sleep_for(5ms);
    }
    {
        auto f1 = drv::open("vfio-user:" + s1);
        REQUIRE(f1.has_value());
        REQUIRE((*f1)->reset().has_value());  // VFIO_USER_DEVICE_RESET
    }  // and the client's going resets it again
    std::this_thread::sleep_for(100ms);
    REQUIRE(::kill(pid, SIGINT) == 0);
    const std::string out = drain(fd);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const std::string line = "LEDGER function=1 event=reset pages=0 objects=0\n";
    const auto first = out.find(line);
    REQUIRE(first != std::string::npos);
    CHECK(out.find(line, first + 1) != std::string::npos);
    CHECK(out.find("LEDGER function=0") == std::string::npos);  // function 0 was never reset
}

TEST_CASE("rig-nicsim: --help, and one-line errors with exit 2", "[model][mlx5]") {
    auto [rc, out] = run({"--help"});
    CHECK(rc == 0);
    for (const char* option : {"--family", "--functions", "--socket-dir", "--fault-silence", "--fault-fatal",
                               "--fault-fail", "--fault-die", "--fault-after", "--command-latency-us",
                               "--report-ledger", "--trapped-uar-pages"}) {
        CHECK(out.find(option) != std::string::npos);
    }
    const auto one_line_error = [](const std::pair<int, std::string>& r, const char* says) {
        CHECK(r.first == 2);
        CHECK(r.second.find(says) != std::string::npos);
        CHECK(r.second.find('\n') == r.second.size() - 1);
    };
    one_line_error(run({"--bogus"}), "unknown option");
    if (rig::sim::find_family("bnxt")->make == nullptr) {
        one_line_error(run({"--family", "bnxt", "--socket-dir", "/tmp"}), "the bnxt model is not built yet");
    }
    one_line_error(run({"--family", "mlx4", "--socket-dir", "/tmp"}), "unknown family 'mlx4' (mlx5, bnxt)");
    one_line_error(run({"--family", "mlx5", "--functions", "0", "--socket-dir", "/tmp"}), "--functions");
    one_line_error(run({"--family", "mlx5", "--functions", "x", "--socket-dir", "/tmp"}), "--functions");
    one_line_error(run({"--family", "mlx5"}), "--socket-dir");
    one_line_error(run({"--family", "mlx5", "--socket-dir", "/tmp", "--fault-fail", "0x10d"}), "--fault-fail");
}

}  // namespace
