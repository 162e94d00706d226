// rig-nicsim's fault options as a user meets them: listed by --help, and every bad value
// refused before anything is served, with one line on stderr naming the option and the value,
// and exit status 2. And --family: mlx5 the default, a family's own options and fault space.
#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "sim/family.hpp"
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

// As run, with no --family of its own: `args` says it, or not.
std::pair<int, std::string> run_bare(const std::vector<std::string>& args) {
    rig::test::temp_socket dir;
    std::vector<std::string> all = {"--socket-dir", dir.dir};
    all.insert(all.end(), args.begin(), args.end());
    return rig::test::run_to_exit(rig::test::nicsim_binary(), all);
}

// rig-nicsim with `args` in a fresh socket directory prints the `sockets` (in order, one a line)
// and exits 0 on SIGTERM.
void serves_sockets(std::vector<std::string> args, const std::vector<std::string>& sockets) {
    rig::test::temp_socket dir;
    args.insert(args.end(), {"--socket-dir", dir.dir});
    const rig::test::child c = rig::test::spawn_child(rig::test::nicsim_binary(), args);
    std::string want;
    for (const std::string& s : sockets) {
        want += dir.dir + "/" + s + "\n";
    }
    std::string out;
    std::array<char, 512> b;
    for (ssize_t n; out.find(want) == std::string::npos && (n = ::read(c.output, b.data(), b.size())) > 0;) {
        out.append(b.data(), static_cast<std::size_t>(n));
    }
    CHECK(out.find(want) != std::string::npos);
    ::kill(c.pid, SIGTERM);
    int st = 0;
    REQUIRE(::waitpid(c.pid, &st, 0) == c.pid);
    ::close(c.output);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
}

void one_line_refusal(const std::pair<int, std::string>& r, const std::vector<std::string>& says) {
    INFO(r.second);
    CHECK(r.first == 2);
    CHECK(r.second.find('\n') == r.second.size() - 1);  // one line
    CHECK(r.second.rfind("rig-nicsim: ", 0) == 0);
    for (const std::string& s : says) {
        CHECK(r.second.find(s) != std::string::npos);
    }
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

TEST_CASE("rig-nicsim --family: mlx5 by default with mlx5-k.sock, bnxt not built yet, unknown ones named",
          "[model][mlx5][nicsim]") {
    {
        // no --family: mlx5, its sockets named as they always were
        serves_sockets({"--functions", "2"}, {"mlx5-0.sock", "mlx5-1.sock"});
    }
    const bool bnxt_built = rig::sim::find_family("bnxt")->make != nullptr;
    if (!bnxt_built) {
        one_line_refusal(run_bare({"--family", "bnxt"}), {"--family bnxt", "the bnxt model is not built yet"});
    }
    // mlx5's own options are refused on bnxt, naming the option and the family
    for (const char* option : {"--page-request-after", "--page-request-pages", "--trapped-uar-pages"}) {
        INFO(option);
        if (bnxt_built) {
            one_line_refusal(run_bare({"--family", "bnxt", option, "1"}),
                             {std::string(option) + " is not an option of family bnxt"});
        } else {
            one_line_refusal(run_bare({"--family", "bnxt", option, "1"}), {"the bnxt model is not built yet"});
        }
    }
    one_line_refusal(run_bare({"--family", "mlx4"}), {"unknown family 'mlx4'", "(mlx5, bnxt)"});
    one_line_refusal(run_bare({"--family", ""}), {"unknown family ''"});
    one_line_refusal(run_bare({"--family"}), {"--family", "needs a value"});
    // the later --family wins, as every option's later value does
    one_line_refusal(run_bare({"--family", "bnxt", "--family", "mlx4"}), {"unknown family 'mlx4'"});
    const auto [rc, out] = run_bare({"--help"});
    CHECK(rc == 0);
    CHECK(out.find("--family NAME            mlx5 (ConnectX-6 Dx, the default) or bnxt") != std::string::npos);
    CHECK(out.find("--fault-fail [CHANNEL:]OP:STATUS[:SYNDROME]") != std::string::npos);
}

TEST_CASE("rig-nicsim --fault-fail and --fault-fatal are read in the family's space, errors naming what was wrong",
          "[model][mlx5][nicsim]") {
    struct bad_case {
        std::vector<std::string> args;
        std::string says;  // the whole line
    };
    const std::vector<bad_case> cases = {
        {{"--fault-fail", "hwrm:0x193:0x2"},
         "rig-nicsim: bad value for --fault-fail: 'hwrm:0x193:0x2' (mlx5 has no channel 'hwrm' (its channels: "
         "cmdq)) (see --help)\n"},
        {{"--fault-fail", "rcfw:0x1:0x5"},
         "rig-nicsim: bad value for --fault-fail: 'rcfw:0x1:0x5' (mlx5 has no channel 'rcfw' (its channels: "
         "cmdq)) (see --help)\n"},
        {{"--fault-fail", "0x10000:1"},
         "rig-nicsim: bad value for --fault-fail: '0x10000:1' (opcode '0x10000' is out of range 0x0..0xffff) "
         "(see --help)\n"},
        {{"--fault-fail", "0x10d:0x100"},
         "rig-nicsim: bad value for --fault-fail: '0x10d:0x100' (status '0x100' is out of range 0x1..0xff) "
         "(see --help)\n"},
        {{"--fault-fail", "0x10d:3:0x1ffffffff"},
         "rig-nicsim: bad value for --fault-fail: '0x10d:3:0x1ffffffff' (syndrome '0x1ffffffff' is out of range "
         "0x0..0xffffffff) (see --help)\n"},
        {{"--fault-fail", "0x10d:x"},
         "rig-nicsim: bad value for --fault-fail: '0x10d:x' (status 'x' is not a number (decimal or 0x hex)) "
         "(see --help)\n"},
        {{"--fault-fail", "0x10d"},
         "rig-nicsim: bad value for --fault-fail: '0x10d' (expected [CHANNEL:]OP:STATUS[:SYNDROME]) (see --help)\n"},
        {{"--fault-fatal", "0"},
         "rig-nicsim: bad value for --fault-fatal: '0' (health syndrome '0' is out of range 0x1..0xff) (see "
         "--help)\n"},
        {{"--fault-fatal", "0x100"},
         "rig-nicsim: bad value for --fault-fatal: '0x100' (health syndrome '0x100' is out of range 0x1..0xff) "
         "(see --help)\n"},
    };
    for (const bad_case& c : cases) {
        INFO(c.args[0] << " " << c.args[1]);
        const auto [rc, out] = run(c.args);
        CHECK(rc == 2);
        CHECK(out == c.says);
    }
    // the family's own channel by name is its main one; a good value serves
    rig::test::nicsim_process nicsim({"--fault-fail", "cmdq:0x10d:3:0xabc", "--fault-fatal", "0x8"}, 1);
    CHECK(nicsim.stop() == 0);
}

TEST_CASE("rig-nicsim --family mlx5,bnxt: function k of the k-th family on one wire, its socket named by it; "
          "the fault arguments then need the function whose family reads them",
          "[model][mlx5][bnxt][nicsim]") {
    serves_sockets({"--family", "mlx5,bnxt", "--functions", "3"}, {"mlx5-0.sock", "bnxt-1.sock", "mlx5-2.sock"});

    one_line_refusal(run_bare({"--family", "mlx5,bnxt", "--fault-fail", "0x503:3"}),
                     {"--fault-fail and --fault-fatal with several families need --fault-function K"});
    one_line_refusal(run_bare({"--family", "mlx5,cx9"}), {"unknown family 'cx9'"});
    one_line_refusal(run_bare({"--family", "mlx5,bnxt", "--trapped-uar-pages", "1"}),
                     {"--trapped-uar-pages is not an option of family bnxt"});
}

// --core-cpu N: the model core's thread (named rig-model) runs on CPU N only, the process's other
// threads where they may; a CPU the process may not use is refused in one line, exit 1.
TEST_CASE("rig-nicsim --core-cpu puts the model core's thread on that CPU alone; a CPU it may not use is refused",
          "[model][mlx5][nicsim]") {
    cpu_set_t allowed;
    REQUIRE(::sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) {
            last = c;
        }
    }
    REQUIRE(last >= 0);

    rig::test::temp_socket dir;
    const rig::test::child c = rig::test::spawn_child(
        rig::test::nicsim_binary(), {"--functions", "1", "--socket-dir", dir.dir, "--core-cpu", std::to_string(last)});
    std::string out;
    std::array<char, 512> b;
    for (ssize_t n; out.find(".sock\n") == std::string::npos && (n = ::read(c.output, b.data(), b.size())) > 0;) {
        out.append(b.data(), static_cast<std::size_t>(n));
    }
    REQUIRE(out.find(".sock\n") != std::string::npos);
    // every thread's comm and Cpus_allowed_list under /proc/PID/task
    std::string core_cpus;
    int threads = 0;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(c.pid) + "/task")) {
        std::ifstream comm(t.path() / "comm");
        std::string name;
        std::getline(comm, name);
        std::ifstream status(t.path() / "status");
        for (std::string line; std::getline(status, line);) {
            if (line.rfind("Cpus_allowed_list:", 0) == 0 && name == "rig-model") {
                core_cpus = line.substr(line.find_first_not_of(" \t", 18));
            }
        }
        ++threads;
    }
    CHECK(threads > 1);
    CHECK(core_cpus == std::to_string(last));
    ::kill(c.pid, SIGTERM);
    int st = 0;
    REQUIRE(::waitpid(c.pid, &st, 0) == c.pid);
    ::close(c.output);
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));

    // CPU 1000 is within CPU_SETSIZE, so the value parses, but no process here may use it
    const auto [rc, said] = run({"--core-cpu", "1000"});
    INFO(said);
    CHECK(rc == 1);
    CHECK(said == "rig-nicsim: --core-cpu 1000: not a CPU this process may run on (the kernel refused it)\n");
    one_line_refusal(run({"--core-cpu", "1024"}), {"--core-cpu", "'1024'"});
    one_line_refusal(run({"--core-cpu", "one"}), {"--core-cpu", "'one'"});
}
