// rig-nicsim --family bnxt: functions served by another process, each its own BCM57508 with its
// own MAC, the fault plan in HWRM's terms, and a client that goes away mid-command leaving the
// function reset for the next one (issue 14 §2).
#include <csignal>
#include <sys/wait.h>

#include "hwrm_client.hpp"
#include "test/model/child_process.hpp"

using namespace rig::test::bnxt;
namespace sim = rig::sim;

namespace {

// rig-nicsim --family bnxt --socket-dir <fresh dir> `args`, its sockets printed; stopped by SIGTERM.
struct nicsim {
    rig::test::temp_dir dir{"rig-bnxt-nicsim"};
    rig::test::child c;
    explicit nicsim(std::vector<std::string> args, unsigned functions = 1) {
        const char* bin = std::getenv("RIG_NICSIM");
        REQUIRE(bin != nullptr);
        args.insert(args.begin(), {"--family", "bnxt", "--functions", std::to_string(functions),
                                   "--socket-dir", dir.path});
        c = rig::test::spawn_child(bin, args);
        std::string out;
        const std::string last = dir.file("bnxt-" + std::to_string(functions - 1) + ".sock") + "\n";
        std::array<char, 512> b;
        for (ssize_t n; out.find(last) == std::string::npos && (n = ::read(c.output, b.data(), b.size())) > 0;) {
            out.append(b.data(), static_cast<std::size_t>(n));
        }
        REQUIRE(out.find(last) != std::string::npos);
    }
    std::string socket(unsigned k) const { return dir.file("bnxt-" + std::to_string(k) + ".sock"); }
    ~nicsim() {
        ::kill(c.pid, SIGTERM);
        int st = 0;
        ::waitpid(c.pid, &st, 0);
        ::close(c.output);
    }
};

}  // namespace

TEST_CASE("rig-nicsim --family bnxt: two functions, each a BCM57508 with its MAC", "[bnxt_model][nicsim]") {
    nicsim sim({}, 2);
    std::array<std::uint8_t, 6> macs[2];
    for (unsigned k = 0; k < 2; ++k) {
        hwrm_client c(sim.socket(k));
        CHECK(c.read32(drv::region::config, 0) == 0x175014e4u);
        const response v = c.send(abi::hwrm_ver_get_input{});
        REQUIRE(v.arrived());
        CHECK(v.as<abi::hwrm_ver_get_output>().chip_num == 0x1750);
        macs[k] = c.send(abi::hwrm_func_qcaps_input{}).as<abi::hwrm_func_qcaps_output>().mac_address;
    }
    CHECK(macs[0] != macs[1]);
}

TEST_CASE("rig-nicsim --family bnxt --fault-fail hwrm:OP:STATUS:CMD_ERR", "[bnxt_model][nicsim]") {
    nicsim sim({"--fault-fail", "hwrm:0x15:0x3:0x7", "--fault-after", "1"});
    hwrm_client c(sim.socket(0));
    CHECK(c.send(abi::hwrm_ver_get_input{}).error_code() == 0);
    const response q = c.send(abi::hwrm_func_qcaps_input{});
    REQUIRE(q.arrived());
    CHECK(q.error_code() == abi::HWRM_ERR_CODE_RESOURCE_ACCESS_DENIED);
    CHECK(q.cmd_err() == 7);
    CHECK(c.send(abi::hwrm_func_qcaps_input{}).error_code() == 0);
}

TEST_CASE("rig-nicsim --family bnxt: a client gone mid-command leaves the function reset", "[bnxt_model][nicsim]") {
    nicsim sim({"--command-latency-us", "300000"});
    {
        hwrm_client a(sim.socket(0));
        abi::hwrm_ring_alloc_input r;
        r.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
        r.length = 256;
        r.page_size = 4;
        r.int_mode = abi::RING_ALLOC_REQ_INT_MODE_POLL;
        r.page_tbl_addr = a.alloc(4096).iova;
        const response made = a.send(r);
        REQUIRE(made.error_code() == 0);
        CHECK(made.as<abi::hwrm_ring_alloc_output>().ring_id == 0);
        // a second request, then the client goes before it is answered
        abi::hwrm_ver_get_input v;
        v.resp_addr = a.iova + hwrm_client::resp_off;
        v.seq_id = 0x77;
        const auto b = abi::to_bytes(v);
        a.post_window(b);
    }
    hwrm_client b(sim.socket(0));
    const response v = b.send(abi::hwrm_ver_get_input{});
    REQUIRE(v.arrived());
    CHECK(v.seq_id() == b.seq);
    // the ring the first client made is gone: freeing it names nothing, the next gets id 0
    abi::hwrm_ring_free_input f;
    f.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
    f.ring_id = 0;
    const response gone = b.send(f);
    CHECK(gone.error_code() == abi::HWRM_ERR_CODE_INVALID_PARAMS);
    CHECK(gone.cmd_err() == static_cast<std::uint8_t>(sim::bnxt::cmd_err::unknown_object));
}
