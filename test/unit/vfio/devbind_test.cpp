// rig-devbind's logic on fixture trees: what it writes, in which order, and what it refuses.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>

#include "driver/vfio/devbind.hpp"
#include "test/unit/vfio/fixture.hpp"

using namespace rig::driver::vfio;
using rig::test::sysfs_fixture;
using writes_t = std::vector<std::pair<std::string, std::string>>;

namespace {

constexpr const char* mlx5 = "0000:3b:00.0";
constexpr const char* bnxt = "0000:5e:00.0";

void populate(sysfs_fixture& fx) {
    fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {"enp59s0f0"}, ""});
    fx.add_function({bnxt, "0x14e4", "0x1750", "0x020000", "bnxt_en", 30, {"enp94s0f0np0"}, ""});
    fx.add_function({"0000:00:19.0", "0x8086", "0x15b8", "0x020000", "e1000e", 5, {"eno1"}, ""});
    fx.add_driver("vfio-pci");
    fx.add_route("eno1");   // the host's own route goes through the Intel NIC
}

devbind_options options_for(sysfs_fixture& fx) {
    devbind_options o;
    o.sysfs_root = fx.sys().string();
    o.proc_root = fx.proc().string();
    o.state_dir = fx.state().string();
    o.probe_wait_ms = 0;
    o.on_write = fx.kernel();
    return o;
}

}  // namespace

TEST_CASE("bind writes driver_override, unbind, drivers_probe, then clears the override", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    auto done = devbind_bind(mlx5, "vfio-pci", options_for(fx));
    REQUIRE(done);
    const writes_t expected{
        {"bus/pci/devices/0000:3b:00.0/driver_override", "vfio-pci"},
        {"bus/pci/drivers/mlx5_core/unbind", "0000:3b:00.0"},
        {"bus/pci/drivers_probe", "0000:3b:00.0"},
        {"bus/pci/devices/0000:3b:00.0/driver_override", "\n"},
    };
    CHECK(fx.writes == expected);
    CHECK(fx.driver_of(mlx5) == "vfio-pci");
    CHECK(sysfs_fixture::get(fx.sys() / "bus/pci/drivers/mlx5_core/unbind") == "0000:3b:00.0");
    CHECK(sysfs_fixture::get(fx.sys() / "bus/pci/drivers_probe") == "0000:3b:00.0");
    CHECK(sysfs_fixture::get(fx.state() / mlx5) == "mlx5_core\n");   // for --restore
    REQUIRE_FALSE(done->empty());
    CHECK_THAT(done->front(), Catch::Contains("mlx5_core -> vfio-pci"));

    // binding again does nothing
    fx.writes.clear();
    auto again = devbind_bind(mlx5, "vfio-pci", options_for(fx));
    REQUIRE(again);
    CHECK(fx.writes.empty());
    CHECK_THAT(again->front(), Catch::Contains("already bound"));
}

TEST_CASE("bind of an unbound function skips the unbind", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    fx.add_function({"0000:3b:00.2", "0x15b3", "0x101e", "0x020000", "", 18, {}, ""});
    auto done = devbind_bind("0000:3b:00.2", "vfio-pci", options_for(fx));
    REQUIRE(done);
    REQUIRE(fx.writes.size() == 3);
    CHECK(fx.writes[0].first == "bus/pci/devices/0000:3b:00.2/driver_override");
    CHECK(fx.writes[1].first == "bus/pci/drivers_probe");
    CHECK(sysfs_fixture::get(fx.state() / "0000:3b:00.2") == "none\n");
}

TEST_CASE("bind refuses when vfio-pci is not loaded, and reports a probe that did not take", "[vfio][devbind]") {
    sysfs_fixture fx;
    fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {}, ""});
    auto no_driver = devbind_bind(mlx5, "vfio-pci", options_for(fx));
    REQUIRE_FALSE(no_driver);
    CHECK_THAT(no_driver.error().message, Catch::Contains("vfio-pci is not loaded") && Catch::Contains("modprobe vfio-pci"));
    CHECK(fx.writes.empty());

    // the driver exists but drivers_probe does not bind (no kernel playing along)
    fx.add_driver("vfio-pci");
    devbind_options o = options_for(fx);
    o.on_write = nullptr;
    auto stuck = devbind_bind(mlx5, "vfio-pci", o);
    REQUIRE_FALSE(stuck);
    CHECK_THAT(stuck.error().message, Catch::Contains("did not bind 0000:3b:00.0 to vfio-pci"));
}

TEST_CASE("a function that carries the host's route is not unbound without --force", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    fx.add_route("enp59s0f0");
    devbind_options o = options_for(fx);

    auto refused = devbind_bind(mlx5, "vfio-pci", o);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message,
               Catch::Contains("0000:3b:00.0") && Catch::Contains("enp59s0f0") && Catch::Contains("--force"));
    CHECK(fx.writes.empty());
    CHECK(fx.driver_of(mlx5) == "mlx5_core");

    auto refused_unbind = devbind_unbind(mlx5, o);
    REQUIRE_FALSE(refused_unbind);
    CHECK(fx.writes.empty());

    o.force = true;
    auto forced = devbind_bind(mlx5, "vfio-pci", o);
    REQUIRE(forced);
    CHECK(fx.driver_of(mlx5) == "vfio-pci");
    bool warned = false;
    for (const std::string& line : *forced) {
        warned = warned || line.find("warning") != std::string::npos;
    }
    CHECK(warned);

    // bnxt has an interface, but no route through it: no --force needed
    auto bnxt_done = devbind_bind(bnxt, "vfio-pci", options_for(fx));
    REQUIRE(bnxt_done);
    CHECK(fx.driver_of(bnxt) == "vfio-pci");
}

TEST_CASE("unbind writes the BDF to the driver's unbind and records the driver", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    auto done = devbind_unbind(bnxt, options_for(fx));
    REQUIRE(done);
    const writes_t expected{{"bus/pci/drivers/bnxt_en/unbind", "0000:5e:00.0"}};
    CHECK(fx.writes == expected);
    CHECK(fx.driver_of(bnxt).empty());
    CHECK(sysfs_fixture::get(fx.state() / bnxt) == "bnxt_en\n");

    fx.writes.clear();
    auto again = devbind_unbind(bnxt, options_for(fx));
    REQUIRE(again);
    CHECK(fx.writes.empty());
}

TEST_CASE("restore gives the function back to the driver recorded at bind", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    REQUIRE(devbind_bind(mlx5, "vfio-pci", options_for(fx)));
    fx.writes.clear();

    auto done = devbind_restore(mlx5, options_for(fx));
    REQUIRE(done);
    const writes_t expected{
        {"bus/pci/devices/0000:3b:00.0/driver_override", "mlx5_core"},
        {"bus/pci/drivers/vfio-pci/unbind", "0000:3b:00.0"},
        {"bus/pci/drivers_probe", "0000:3b:00.0"},
        {"bus/pci/devices/0000:3b:00.0/driver_override", "\n"},
    };
    CHECK(fx.writes == expected);
    CHECK(fx.driver_of(mlx5) == "mlx5_core");
    CHECK_FALSE(std::filesystem::exists(fx.state() / mlx5));

    auto twice = devbind_restore(mlx5, options_for(fx));
    REQUIRE_FALSE(twice);
    CHECK_THAT(twice.error().message, Catch::Contains("no record of 0000:3b:00.0's original driver"));
}

TEST_CASE("restore after unbind binds the original driver again; the first record is kept", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    REQUIRE(devbind_unbind(bnxt, options_for(fx)));
    REQUIRE(devbind_bind(bnxt, "vfio-pci", options_for(fx)));
    CHECK(sysfs_fixture::get(fx.state() / bnxt) == "bnxt_en\n");   // not "none"
    REQUIRE(devbind_restore(bnxt, options_for(fx)));
    CHECK(fx.driver_of(bnxt) == "bnxt_en");
}

TEST_CASE("bind warns when another function of the IOMMU group keeps its driver", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    fx.add_function({"0000:3b:00.1", "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {}, ""});
    auto done = devbind_bind(mlx5, "vfio-pci", options_for(fx));
    REQUIRE(done);
    bool warned = false;
    for (const std::string& line : *done) {
        warned = warned || (line.find("0000:3b:00.1") != std::string::npos &&
                            line.find("IOMMU group 17") != std::string::npos);
    }
    CHECK(warned);
}

TEST_CASE("bad addresses and missing functions are errors that name them", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    const devbind_options o = options_for(fx);
    for (const auto& r : {devbind_bind("3b:00.0", "vfio-pci", o), devbind_unbind("3b:00.0", o),
                          devbind_restore("3b:00.0", o)}) {
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("\"3b:00.0\" is not a PCI address"));
    }
    for (const auto& r : {devbind_bind("0000:af:00.0", "vfio-pci", o), devbind_unbind("0000:af:00.0", o),
                          devbind_restore("0000:af:00.0", o)}) {
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("0000:af:00.0: no such PCI function"));
    }
    CHECK(fx.writes.empty());
}

TEST_CASE("a failed sysfs write names the file and the OS's reason", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    std::filesystem::remove(fx.sys() / "bus/pci/drivers/mlx5_core/unbind");
    auto r = devbind_bind(mlx5, "vfio-pci", options_for(fx));
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("writing \"0000:3b:00.0\" to ") &&
                                      Catch::Contains("mlx5_core/unbind: No such file or directory"));
}

TEST_CASE("status lists Rig's functions, their drivers, groups and routes", "[vfio][devbind]") {
    sysfs_fixture fx;
    populate(fx);
    fx.add_route("enp59s0f0");
    REQUIRE(devbind_bind(bnxt, "vfio-pci", options_for(fx)));
    auto rows = devbind_status(options_for(fx));
    REQUIRE(rows);
    REQUIRE(rows->size() == 2);   // not the Intel NIC
    CHECK((*rows)[0].function.bdf == mlx5);
    CHECK((*rows)[0].active_interfaces == std::vector<std::string>{"enp59s0f0"});
    CHECK((*rows)[1].function.driver == "vfio-pci");
    CHECK((*rows)[1].recorded_driver == "bnxt_en");
    const std::string text = format_status(*rows);
    CHECK_THAT(text, Catch::Contains("0000:3b:00.0") && Catch::Contains("mlx5_core") &&
                         Catch::Contains("ConnectX-5") && Catch::Contains("enp59s0f0*") &&
                         Catch::Contains("vfio-pci (was bnxt_en)") && Catch::Contains("BCM57508") &&
                         Catch::Contains("15b3:1017"));
    CHECK_THAT(text, !Catch::Contains("0000:00:19.0"));
}

namespace {
// Runs the rig-devbind binary (its path from the environment, set by meson) and returns its
// exit status and output.
std::pair<int, std::string> run_tool(const std::string& args) {
    const char* tool = std::getenv("RIG_DEVBIND");
    REQUIRE(tool != nullptr);
    const std::string cmd = std::string(tool) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) {
        out += buf;
    }
    const int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
}  // namespace

TEST_CASE("the rig-devbind tool: status, and one clear line and non-zero on error", "[vfio][devbind][tool]") {
    if (std::getenv("RIG_DEVBIND") == nullptr) {
        WARN("RIG_DEVBIND not set: skipped (run through meson test)");
        return;
    }
    sysfs_fixture fx;
    populate(fx);
    fx.add_route("enp59s0f0");
    const std::string roots = "--sysfs-root " + fx.sys().string() + " --proc-root " + fx.proc().string() +
                              " --state-dir " + fx.state().string();

    auto [rc, out] = run_tool("--status " + roots);
    CHECK(rc == 0);
    CHECK_THAT(out, Catch::Contains("0000:3b:00.0") && Catch::Contains("enp59s0f0*"));

    auto [rc2, out2] = run_tool("--bind vfio-pci 0000:3b:00.0 " + roots);
    CHECK(rc2 != 0);
    CHECK_THAT(out2, Catch::StartsWith("rig-devbind: 0000:3b:00.0 carries an active route"));
    CHECK(std::count(out2.begin(), out2.end(), '\n') == 1);

    auto [rc3, out3] = run_tool("--unbind nonsense " + roots);
    CHECK(rc3 != 0);
    CHECK_THAT(out3, Catch::Contains("not a PCI address"));

    auto [rc4, out4] = run_tool("--frobnicate");
    CHECK(rc4 != 0);
    CHECK_THAT(out4, Catch::Contains("unknown option --frobnicate"));

    auto [rc5, out5] = run_tool("--help");
    CHECK(rc5 == 0);
    CHECK_THAT(out5, Catch::Contains("--bind DRIVER BDF"));
}
