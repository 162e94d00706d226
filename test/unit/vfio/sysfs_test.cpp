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
    CHECK(mlx5.known->family == "mlx5");
    CHECK(mlx5.known->name == "ConnectX-5");

    CHECK(bnxt.bdf == "0000:5e:00.0");
    CHECK(bnxt.driver == "bnxt_en");
    CHECK(bnxt.iommu_group == 30u);
    REQUIRE(bnxt.known != nullptr);
    CHECK(bnxt.known->family == "bnxt");
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

TEST_CASE("the known-device tables hold the reference's IDs", "[vfio][sysfs]") {
    // reference/mlx5.md §5
    for (unsigned id : {0x1013, 0x1015, 0x1017, 0x1019, 0x101b, 0x101d, 0x101f, 0x1021, 0x1023}) {
        const known_device* k = find_known(mellanox_vendor, static_cast<std::uint16_t>(id));
        REQUIRE(k != nullptr);
        CHECK(k->family == "mlx5");
        CHECK_FALSE(k->vf);
    }
    for (unsigned id : {0x1014, 0x1016, 0x1018, 0x101a, 0x101c, 0x101e}) {
        REQUIRE(find_known(mellanox_vendor, static_cast<std::uint16_t>(id)) != nullptr);
        CHECK(find_known(mellanox_vendor, static_cast<std::uint16_t>(id))->vf);
    }
    // reference/bnxt.md §4: Thor P5 and P7
    for (unsigned id : {0x1750, 0x1751, 0x1752, 0x1760, 0x1761, 0x1762, 0x1763, 0xd818}) {
        const known_device* k = find_known(broadcom_vendor, static_cast<std::uint16_t>(id));
        REQUIRE(k != nullptr);
        CHECK(k->family == "bnxt");
    }
    CHECK(find_known(broadcom_vendor, 0x1806)->vf);
    CHECK(find_known(broadcom_vendor, 0x1819)->vf);
    // P4 (BCM57414) is not Thor; another vendor's 0x1017 is not a ConnectX-5
    CHECK(find_known(broadcom_vendor, 0x16d7) == nullptr);
    CHECK(find_known(0x8086, 0x1017) == nullptr);
    CHECK(known_devices().size() > 30);
}
