// sysfs discovery on fixture trees: no real /sys needed.
#include <catch2/catch.hpp>

#include "driver/vfio/sysfs.hpp"
#include "test/unit/vfio/fixture.hpp"

using namespace rig::driver::vfio;
using rig::test::sysfs_fixture;

namespace {
// A host with one of each: ConnectX-5 PF, bnxt BCM57508, an Intel NIC, and QEMU's edu on vfio-pci.
void populate(sysfs_fixture& fx) {
    fx.add_function({"0000:3b:00.0", "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {"enp59s0f0"}, ""});
    fx.add_function({"0000:5e:00.0", "0x14e4", "0x1750", "0x020000", "bnxt_en", 30, {"enp94s0f0np0"}, ""});
    fx.add_function({"0000:00:19.0", "0x8086", "0x15b8", "0x020000", "e1000e", 5, {"eno1"}, ""});
    fx.add_function({"0000:00:04.0", "0x1234", "0x11e8", "0x00ff00", "vfio-pci", 1, {}, "vfio0"});
    fx.add_function({"0000:00:1f.0", "0x8086", "0xa2c8", "0x060100", "", std::nullopt, {}, ""});
}
}  // namespace

TEST_CASE("discovery finds mlx5 and bnxt functions with their groups and drivers", "[vfio][sysfs]") {
    sysfs_fixture fx;
    populate(fx);
    const sysfs sys(fx.sys().string());

    auto all = sys.functions();
    REQUIRE(all);
    REQUIRE(all->size() == 5);
    CHECK(all->front().bdf == "0000:00:04.0");   // address order

    auto rig = sys.rig_functions();
    REQUIRE(rig);
    REQUIRE(rig->size() == 3);   // edu is there because it is bound to vfio-pci
    const pci_function& edu = (*rig)[0];
    const pci_function& mlx5 = (*rig)[1];
    const pci_function& bnxt = (*rig)[2];

    CHECK(mlx5.bdf == "0000:3b:00.0");
    CHECK(mlx5.vendor == 0x15b3);
    CHECK(mlx5.device == 0x1017);
    CHECK(mlx5.class_code == 0x020000);
    CHECK(mlx5.driver == "mlx5_core");
    CHECK(mlx5.iommu_group == 17u);
    CHECK(mlx5.driver_override.empty());   // "(null)" reads as unset
    CHECK(mlx5.net_interfaces == std::vector<std::string>{"enp59s0f0"});
    REQUIRE(mlx5.known != nullptr);
    CHECK(mlx5.known->family == rig::abi::pci::family::mlx5);
    CHECK(mlx5.known->name == "ConnectX-5");

    CHECK(bnxt.bdf == "0000:5e:00.0");
    CHECK(bnxt.driver == "bnxt_en");
    CHECK(bnxt.iommu_group == 30u);
    REQUIRE(bnxt.known != nullptr);
    CHECK(bnxt.known->family == rig::abi::pci::family::bnxt);
    CHECK(bnxt.known->name == "BCM57508");

    CHECK(edu.known == nullptr);
    CHECK(edu.driver == "vfio-pci");
    CHECK(edu.vfio_cdev == "vfio0");
    CHECK(edu.iommu_group == 1u);
}

TEST_CASE("a function with no driver and no IOMMU group reads as such", "[vfio][sysfs]") {
    sysfs_fixture fx;
    populate(fx);
    auto f = sysfs(fx.sys().string()).function("0000:00:1f.0");
    REQUIRE(f);
    CHECK(f->driver.empty());
    CHECK_FALSE(f->iommu_group.has_value());
    CHECK(f->vfio_cdev.empty());
    CHECK(f->class_code == 0x060100);
}

TEST_CASE("driver_override and IOMMU group members are read", "[vfio][sysfs]") {
    sysfs_fixture fx;
    populate(fx);
    fx.add_function({"0000:3b:00.1", "0x15b3", "0x1018", "0x020000", "", 17, {}, ""});
    sysfs_fixture::put(fx.device_dir("0000:3b:00.1") / "driver_override", "vfio-pci\n");
    const sysfs sys(fx.sys().string());
    auto vf = sys.function("0000:3b:00.1");
    REQUIRE(vf);
    CHECK(vf->driver_override == "vfio-pci");
    REQUIRE(vf->known != nullptr);
    CHECK(vf->known->vf);
    CHECK(sys.group_members(17) == std::vector<std::string>{"0000:3b:00.0", "0000:3b:00.1"});
    CHECK(sys.group_members(99).empty());
}

TEST_CASE("a bad address or a missing function is an error naming it", "[vfio][sysfs]") {
    sysfs_fixture fx;
    populate(fx);
    const sysfs sys(fx.sys().string());
    auto bad = sys.function("3b:00.0");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("3b:00.0") && Catch::Contains("not a PCI address"));
    auto missing = sys.function("0000:af:00.0");
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message,
               Catch::Contains("0000:af:00.0") && Catch::Contains("no such PCI function"));
    CHECK(missing.error().os_errno == ENODEV);
    auto none = sysfs((fx.root() / "nowhere").string()).functions();
    REQUIRE_FALSE(none);
}

TEST_CASE("PCI addresses are checked", "[vfio][sysfs]") {
    CHECK(is_pci_address("0000:3b:00.0"));
    CHECK(is_pci_address("0000:AF:1f.7"));
    CHECK_FALSE(is_pci_address("0000:3b:00.8"));   // function 0..7
    CHECK_FALSE(is_pci_address("0000:3b:20.0"));   // device 0..0x1f
    CHECK_FALSE(is_pci_address("0000:3b:00"));
    CHECK_FALSE(is_pci_address("0000-3b:00.0"));
    CHECK_FALSE(is_pci_address("000g:3b:00.0"));
}

TEST_CASE("discovery knows the functions of abi/pci_ids.hpp's list, and only those", "[vfio][sysfs]") {
    namespace pci = rig::abi::pci;
    sysfs_fixture fx;
    fx.add_function({"0000:3b:00.0", "0x15b3", "0x101d", "0x020000", "", 17, {}, ""});
    fx.add_function({"0000:3b:00.2", "0x15b3", "0x101e", "0x020000", "", 17, {}, ""});
    fx.add_function({"0000:5e:00.0", "0x14e4", "0x1760", "0x020000", "", 30, {}, ""});
    fx.add_function({"0000:5e:00.1", "0x14e4", "0xd818", "0x020000", "", 30, {}, ""});   // not in 6.12's bnxt_pci_tbl
    fx.add_function({"0000:5e:00.2", "0x14e4", "0x16d7", "0x020000", "", 30, {}, ""});   // BCM57414, P4: not Thor
    fx.add_function({"0000:00:19.0", "0x8086", "0x1017", "0x020000", "", 5, {}, ""});    // another vendor's 0x1017
    const sysfs sys(fx.sys().string());
    auto all = sys.functions();
    REQUIRE(all);
    REQUIRE(all->size() == 6);
    const auto known = [&](std::string_view bdf) {
        for (const pci_function& f : *all) {
            if (f.bdf == bdf) {
                return f.known;
            }
        }
        FAIL("no function " << bdf);
        return static_cast<const known_device*>(nullptr);
    };
    CHECK(known("0000:3b:00.0") == &pci::connectx6dx);
    REQUIRE(known("0000:3b:00.2") != nullptr);
    CHECK(known("0000:3b:00.2")->vf);
    REQUIRE(known("0000:5e:00.0") != nullptr);
    CHECK(known("0000:5e:00.0")->name == "BCM57608");
    CHECK(known("0000:5e:00.0")->family == pci::family::bnxt);
    CHECK(known("0000:5e:00.1") == nullptr);
    CHECK(known("0000:5e:00.2") == nullptr);
    CHECK(known("0000:00:19.0") == nullptr);
    auto rig = sys.rig_functions();
    REQUIRE(rig);
    CHECK(rig->size() == 3);
}
