// nic::open picks the family by the function's PCI IDs (config space) before any bring-up: a
// function of no family Rig drives is refused at once with its IDs named, where a non-mlx5
// function used to wait out mlx5 bring-up's deadlines; the models' ConnectX and Thor functions
// open as mlx5 and bnxt, each with its own limits.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "rig/nic.hpp"
#include "sim/vfio_user/server.hpp"
#include "test/model/qp_api/served_nics.hpp"
#include "test/temp_dir.hpp"
#include "test/unit/vfio_user/test_device.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// The vfio-user test device with the PCI IDs `vendor`:`device`, served in this process.
struct served_ids {
    rig::test::temp_dir dir;
    rig::test::test_device dev;
    std::unique_ptr<rig::sim::vfio_user::server> srv;
    served_ids(std::uint16_t vendor, std::uint16_t device) : dev(vendor, device) {
        auto s = rig::sim::vfio_user::server::create(dir.file("dev.sock"), dev);
        REQUIRE(s.has_value());
        srv = std::move(*s);
        dev.attach(*srv);
        srv->start();
    }
    std::string where() const { return "vfio-user:" + dir.file("dev.sock"); }
};

// nic::open's refusal of `where`, which must come within a second.
rig::error refused_at_once(const std::string& where) {
    const auto t0 = clock_type::now();
    auto n = rig::nic::open(where);
    const auto took = clock_type::now() - t0;
    REQUIRE_FALSE(n.has_value());
    CHECK(took < 1s);
    return n.error();
}

const std::string rig_ids =
    "(ConnectX: 15b3:1011-101f, 1021, 1023, 1025, 1027, 2101, a2d2-a2d3, a2d6, a2dc, a2df; "
    "Thor: 14e4:1750-1752, 1760-1763, 1800-1809, 1819, 181b)";

}  // namespace

TEST_CASE("nic: a function of no family Rig drives is refused at once, naming its IDs and Rig's",
          "[model][mlx5][api][family]") {
    served_ids intel(0x8086, 0x1572);   // an Intel X710
    for (int round = 0; round < 2; ++round) {   // the refused open let the function go: not busy
        const rig::error e = refused_at_once(intel.where());
        CHECK(e.kind == rig::error_kind::os);
        CHECK(e.message == "nic::open: " + intel.where() + ": 8086:1572 is not a NIC Rig drives " + rig_ids);
    }
}

TEST_CASE("nic: a Mellanox function of another driver is refused before any command", "[model][mlx5][api][family]") {
    auto o = rig::test::quick_model();
    o.device_id = 0x1003;   // ConnectX-3: mlx4_core's, not mlx5's (the model would answer as mlx5)
    rig::test::served_mlx5 m(o);
    const rig::error e = refused_at_once(m.where());
    CHECK(e.message == "nic::open: " + m.where() + ": 15b3:1003 is not a NIC Rig drives " + rig_ids);
    CHECK(m.fn.state() == rig::sim::mlx5::hca_state::disabled);   // no ENABLE_HCA came
    CHECK(m.fn.objects() == 0);
}

TEST_CASE("nic: the model's BCM57508 IDs are read and opened as bnxt, its queue pairs with bnxt's limits",
          "[model][bnxt][api][family]") {
    rig::test::served_function thor(0, nullptr, rig::test::family::bnxt);
    auto nic = thor.open();
    auto q = rig::test::value(nic->make_qp());
    CHECK(q.max_inline() == 96);                    // static WQEs: BNXT_RE_MAX_INLINE_SIZE
    CHECK(q.room(rig::side::send) == 4095);         // 4096 slots, one kept free
    CHECK(q.room(rig::side::receive) == 4095);
    CHECK(thor.bnxt->with_firmware([](const auto& f) { return f.rcfw().qps.size(); }) == 1);
    rig::test::ok(nic->close());
}

TEST_CASE("nic: the model's ConnectX-6 Dx IDs are read and opened as mlx5", "[model][mlx5][api][family]") {
    rig::test::served_mlx5 m;
    auto nic = m.open();
    CHECK(m.fn.state() == rig::sim::mlx5::hca_state::initialized);
    auto q = rig::test::value(nic->make_qp());
    CHECK(q.max_inline() == 28);                    // mlx5: one inline segment in a 64-byte WQE
    CHECK(q.room(rig::side::send) == 4096);
}
