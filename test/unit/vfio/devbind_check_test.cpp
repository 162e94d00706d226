// rig-devbind --check on fixture trees: each finding's words and its fix, for a caller the test
// builds (uid, groups, RLIMIT_MEMLOCK), so the result does not depend on who runs the test. The
// device nodes are plain files: only their owner, group and mode are read.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "driver/vfio/devbind.hpp"
#include "test/unit/vfio/fixture.hpp"

using namespace rig::driver::vfio;
using rig::test::sysfs_fixture;
namespace fs = std::filesystem;

namespace {

constexpr const char* mlx5 = "0000:3b:00.0";

// The fixture's files belong to whoever runs the test; the caller is someone else (alice), in
// the files' group or not as a test wants. `files_group` names that group in <etc>/group.
struct world {
    sysfs_fixture fx;
    unsigned owner = ::getuid();
    unsigned files_gid = ::getgid();
    caller who;

    explicit world(const std::string& files_group = "rig", const std::string& members = "") {
        who.uid = owner + 1000;
        who.gid = files_gid + 1000;
        who.memlock_bytes.reset();   // unlimited
        fs::create_directories(fx.root() / "etc");
        sysfs_fixture::put(fx.root() / "etc/passwd", "owner:x:" + std::to_string(owner) + ":0::/:/bin/sh\nalice:x:" +
                                                         std::to_string(who.uid) + ":" + std::to_string(who.gid) +
                                                         "::/home/alice:/bin/sh\n");
        std::string groups = files_group + ":x:" + std::to_string(files_gid) + ":" + members + "\n" +
                             "alice:x:" + std::to_string(who.gid) + ":\n";
        if (files_group != "rig") {
            groups += "rig:x:" + std::to_string(files_gid + 2000) + ":\n";
        }
        sysfs_fixture::put(fx.root() / "etc/group", groups);
        fx.add_driver("vfio-pci");
        hugepages(64, 64);
    }
    void hugepages(unsigned total, unsigned free) {
        const fs::path d = fx.sys() / "kernel/mm/hugepages/hugepages-2048kB";
        sysfs_fixture::put(d / "nr_hugepages", std::to_string(total) + "\n");
        sysfs_fixture::put(d / "free_hugepages", std::to_string(free) + "\n");
    }
    // A device node under dev/ with `mode`, owned by the files' owner and group.
    void node(const std::string& rel, fs::perms mode) {
        sysfs_fixture::put(fx.dev() / rel, "");
        fs::permissions(fx.dev() / rel, mode);
    }
    void join_files_group() { who.groups.push_back(files_gid); }
    // An mlx5 function bound to vfio-pci, alone in IOMMU group 17, the group path's nodes made as
    // Rig's udev rule makes them (0660, the files' group) and the container 0666 as the kernel does.
    void bound_mlx5(const std::string& cdev = "") {
        fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "vfio-pci", 17, {}, cdev});
        node("vfio/vfio", fs::perms(0666));
        node("vfio/17", fs::perms(0660));
    }
    devbind_options options() const {
        devbind_options o;
        o.sysfs_root = fx.sys().string();
        o.proc_root = fx.proc().string();
        o.state_dir = fx.state().string();
        o.dev_root = fx.dev().string();
        o.etc_root = (fx.root() / "etc").string();
        return o;
    }
    check_report check(std::vector<std::string> bdfs = {mlx5}) const {
        auto r = devbind_check(bdfs, who, options());
        REQUIRE(r);
        return *r;
    }
};

// The finding about `subject` among the host's and every function's; fails when there is none.
finding find(const check_report& r, const std::string& subject) {
    std::vector<finding> all = r.host;
    for (const function_check& c : r.functions) {
        all.insert(all.end(), c.findings.begin(), c.findings.end());
    }
    const auto it = std::find_if(all.begin(), all.end(), [&](const finding& f) { return f.subject == subject; });
    INFO("no finding about " << subject << " in:\n" << format_check(r));
    REQUIRE(it != all.end());
    return *it;
}

}  // namespace

TEST_CASE("check: a bound function whose nodes are the group's, for a member, is usable", "[vfio][devbind][check]") {
    world w;
    w.bound_mlx5();
    w.join_files_group();
    const check_report r = w.check();
    INFO(format_check(r));
    CHECK(r.usable());
    REQUIRE(r.functions.size() == 1);
    CHECK(r.functions[0].title == "0000:3b:00.0 mlx5 ConnectX-5 (15b3:1017)");
    CHECK(find(r, "driver").text == "bound to vfio-pci");
    CHECK(find(r, "IOMMU group 17").text == "no other device");
    const finding open = find(r, "open");
    CHECK(open.level == verdict::ok);
    CHECK(open.text == "through the group path (" + (w.fx.dev() / "vfio/vfio").string() + ", " +
                           (w.fx.dev() / "vfio/17").string() + ")");
    CHECK(find(r, "group rig").text == "you are in group rig");
    CHECK(find(r, "memlock").text == "RLIMIT_MEMLOCK is unlimited");
    CHECK(find(r, "hugepages").text == "64 of 64 reserved 2 MiB huge pages free");
    CHECK(find(r, "vfio-pci").level == verdict::ok);
    // the iommufd path is not there: a note, the group path serves
    const finding cdev = find(r, "device cdev");
    CHECK(cdev.level == verdict::note);
    CHECK_THAT(cdev.text, Catch::Contains("CONFIG_VFIO_DEVICE_CDEV") && Catch::EndsWith("(the iommufd path; not needed)"));
    CHECK_THAT(format_check(r), Catch::EndsWith("nothing missing\n"));
}

TEST_CASE("check: a function on its native driver needs the bind, named with its address", "[vfio][devbind][check]") {
    world w;
    w.fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {"enp59s0f0"}, ""});
    const check_report r = w.check();
    CHECK_FALSE(r.usable());
    const finding d = find(r, "driver");
    CHECK(d.level == verdict::missing);
    CHECK(d.text == "bound to mlx5_core, not vfio-pci");
    CHECK(d.fix == "sudo rig-devbind --bind vfio-pci 0000:3b:00.0");
    CHECK(find(r, "device nodes").level == verdict::note);
    CHECK_THAT(format_check(r),
               Catch::Contains("  MISSING driver: bound to mlx5_core, not vfio-pci; fix: sudo rig-devbind --bind "
                               "vfio-pci 0000:3b:00.0\n") &&
                   Catch::EndsWith("something is missing: see MISSING above\n"));
}

TEST_CASE("check: a group node the udev rule has not touched names its owner and the rule", "[vfio][devbind][check]") {
    world w("wheel");
    w.bound_mlx5();
    std::filesystem::permissions(w.fx.dev() / "vfio/17", fs::perms(0600));
    const check_report r = w.check();
    CHECK_FALSE(r.usable());
    const std::string path = (w.fx.dev() / "vfio/17").string();
    const finding n = find(r, path);
    CHECK(n.level == verdict::missing);
    CHECK(n.text == "owned by owner:wheel mode 0600, not readable and writable by you (alice, not in group wheel)");
    CHECK_THAT(n.fix, Catch::StartsWith("install Rig's udev rule 70-rig-vfio.rules (packaging/README.md)") &&
                          Catch::Contains("udevadm trigger --action=add --subsystem-match=vfio;") &&
                          Catch::EndsWith("and join group rig: sudo usermod -aG rig alice, then log in again"));
    CHECK(find(r, "open").text == "neither the iommufd path nor the group path is open to you; the fixes of either "
                                  "are enough");
    CHECK(find(r, "group rig").level == verdict::note);
}

TEST_CASE("check: a node given to group rig asks the user to join it, or to log in again", "[vfio][devbind][check]") {
    SECTION("not a member") {
        world w("rig");
        w.bound_mlx5();
        const finding n = find(w.check(), (w.fx.dev() / "vfio/17").string());
        CHECK(n.text == "owned by owner:rig mode 0660, not readable and writable by you (alice, not in group rig)");
        CHECK(n.fix == "sudo usermod -aG rig alice, then log in again");
    }
    SECTION("a member since this session began") {
        world w("rig", "bob,alice");
        w.bound_mlx5();
        const check_report r = w.check();
        CHECK(find(r, (w.fx.dev() / "vfio/17").string()).fix ==
              "log in again (or run newgrp rig): you were added to group rig after this session began");
        CHECK(find(r, "group rig").fix == "log in again (or run newgrp rig): you were added after this session began");
    }
}

TEST_CASE("check: another device of the IOMMU group on its driver is missing; pcieport is not", "[vfio][devbind][check]") {
    world w;
    w.bound_mlx5();
    w.join_files_group();
    w.fx.add_function({"0000:3b:00.1", "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {}, ""});
    w.fx.add_function({"0000:3a:00.0", "0x8086", "0x2030", "0x060400", "pcieport", 17, {}, ""});
    const check_report r = w.check();
    CHECK_FALSE(r.usable());
    const finding g = find(r, "IOMMU group 17");
    CHECK(g.level == verdict::missing);
    CHECK(g.text == "0000:3b:00.1 shares it and is bound to mlx5_core: VFIO cannot use the group until that is bound "
                    "to vfio-pci or to none");
    CHECK(g.fix == "sudo rig-devbind --bind vfio-pci 0000:3b:00.1");
    CHECK_THAT(format_check(r), !Catch::Contains("0000:3a:00.0 shares"));

    w.fx.set_driver("0000:3b:00.1", "");
    const finding fine = find(w.check(), "IOMMU group 17");
    CHECK(fine.level == verdict::ok);
    CHECK(fine.text == "its other devices leave it to VFIO: 0000:3a:00.0 0000:3b:00.1");
}

TEST_CASE("check: RLIMIT_MEMLOCK below the floor is missing, a finite one above it a note", "[vfio][devbind][check]") {
    world w;
    w.bound_mlx5();
    w.join_files_group();
    w.who.memlock_bytes = 8u << 20;   // Linux's default since 5.16
    check_report r = w.check();
    CHECK_FALSE(r.usable());
    finding m = find(r, "memlock");
    CHECK(m.level == verdict::missing);
    CHECK_THAT(m.text, Catch::StartsWith("RLIMIT_MEMLOCK is 8 MiB, below the 256 MiB a NIC pins before any region") &&
                           Catch::Contains("per process on the group path, per user on iommufd"));
    CHECK_THAT(m.fix, Catch::StartsWith("install Rig's limits snippet 95-rig-memlock.conf in /etc/security/limits.d") &&
                          Catch::EndsWith("LimitMEMLOCK=infinity"));

    w.who.memlock_bytes = std::uint64_t{1} << 30;
    r = w.check();
    CHECK(r.usable());
    m = find(r, "memlock");
    CHECK(m.level == verdict::note);
    CHECK_THAT(m.text, Catch::StartsWith("RLIMIT_MEMLOCK is 1 GiB: pinning past it fails with ENOMEM"));

    w.who.memlock_bytes = 65536;
    w.who.ipc_lock = true;
    m = find(w.check(), "memlock");
    CHECK(m.level == verdict::ok);
    CHECK(m.text == "CAP_IPC_LOCK in effect: pinned memory is not limited");
}

TEST_CASE("check: huge pages not reserved, all taken, or absent are notes with the sysctl", "[vfio][devbind][check]") {
    world w;
    w.bound_mlx5();
    w.join_files_group();
    w.hugepages(0, 0);
    check_report r = w.check();
    CHECK(r.usable());   // Rig falls back to 4 KiB pages
    finding h = find(r, "hugepages");
    CHECK(h.level == verdict::note);
    CHECK_THAT(h.text, Catch::StartsWith("no 2 MiB huge pages reserved (") &&
                           Catch::Contains("nr_hugepages is 0): Rig's memory falls back to 4 KiB pages"));
    CHECK(h.fix == "sudo sh -c 'echo 64 > /proc/sys/vm/nr_hugepages' (vm.nr_hugepages = 64 in /etc/sysctl.d/ to keep it)");

    w.hugepages(8, 0);
    h = find(w.check(), "hugepages");
    CHECK(h.text == "all 8 reserved 2 MiB huge pages are in use: Rig's memory falls back to 4 KiB pages");
    CHECK_THAT(h.fix, Catch::StartsWith("reserve more: sudo sh -c"));

    std::filesystem::remove_all(w.fx.sys() / "kernel/mm/hugepages");
    h = find(w.check(), "hugepages");
    CHECK_THAT(h.text, Catch::StartsWith("this kernel has no 2 MiB huge pages"));
}

TEST_CASE("check: the iommufd path opens when /dev/iommu and the cdev are the user's", "[vfio][devbind][check]") {
    world w;
    w.fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "vfio-pci", 17, {}, "vfio0"});
    w.node("iommu", fs::perms(0660));
    w.node("vfio/devices/vfio0", fs::perms(0660));
    w.join_files_group();
    check_report r = w.check();
    INFO(format_check(r));
    CHECK(r.usable());
    CHECK(find(r, "iommufd").level == verdict::ok);
    CHECK(find(r, "open").text == "through the iommufd path (" + (w.fx.dev() / "iommu").string() + ", " +
                                      (w.fx.dev() / "vfio/devices/vfio0").string() + ")");
    // no group node (a kernel without CONFIG_VFIO_GROUP): a note of the path not taken
    const finding g = find(r, (w.fx.dev() / "vfio/17").string());
    CHECK(g.level == verdict::note);
    CHECK_THAT(g.text, Catch::StartsWith("does not exist although the function is bound to vfio-pci") &&
                           Catch::EndsWith("(the group path; not needed)"));

    // /dev/iommu kept root's: the group path, once there, serves; the refusal is a note naming misc
    std::filesystem::permissions(w.fx.dev() / "iommu", fs::perms(0600));
    w.node("vfio/vfio", fs::perms(0666));
    w.node("vfio/17", fs::perms(0660));
    r = w.check();
    CHECK(r.usable());
    CHECK_THAT(find(r, "open").text, Catch::StartsWith("through the group path"));
    const finding i = find(r, (w.fx.dev() / "iommu").string());
    CHECK(i.level == verdict::note);
    CHECK_THAT(i.fix, Catch::Contains("--subsystem-match=misc"));
}

TEST_CASE("check: no IOMMU group, a no-IOMMU node only, vfio-pci not loaded, no group rig", "[vfio][devbind][check]") {
    SECTION("no IOMMU group") {
        world w;
        w.fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "vfio-pci", std::nullopt, {}, ""});
        const finding g = find(w.check(), "IOMMU group");
        CHECK(g.level == verdict::missing);
        CHECK_THAT(g.text, Catch::StartsWith("none (") && Catch::EndsWith("iommu_group is missing): the IOMMU is off or absent"));
        CHECK_THAT(g.fix, Catch::StartsWith("turn it on: intel_iommu=on or amd_iommu=on"));
    }
    SECTION("a no-IOMMU group node only") {
        world w;
        w.fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "vfio-pci", 17, {}, ""});
        w.node("vfio/vfio", fs::perms(0666));
        w.node("vfio/noiommu-17", fs::perms(0600));
        const check_report r = w.check();
        CHECK_FALSE(r.usable());
        const finding n = find(r, (w.fx.dev() / "vfio/noiommu-17").string());
        CHECK(n.level == verdict::missing);
        CHECK_THAT(n.text, Catch::StartsWith("only a no-IOMMU group exists") && Catch::Contains("CAP_SYS_RAWIO"));
    }
    SECTION("vfio-pci not loaded") {
        world w;
        std::filesystem::remove_all(w.fx.sys() / "bus/pci/drivers/vfio-pci");
        w.fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {}, ""});
        const finding v = find(w.check(), "vfio-pci");
        CHECK(v.level == verdict::missing);
        CHECK_THAT(v.text, Catch::StartsWith("the driver is not loaded (no "));
        CHECK_THAT(v.fix, Catch::StartsWith("sudo modprobe vfio-pci"));
    }
    SECTION("no group rig") {
        world w("wheel");
        sysfs_fixture::put(w.fx.root() / "etc/group", "wheel:x:" + std::to_string(w.files_gid) + ":\n");
        w.bound_mlx5();
        const finding g = find(w.check(), "group rig");
        CHECK(g.text == "no group rig: Rig's udev rule gives the device nodes to it");
        CHECK_THAT(g.fix, Catch::StartsWith("sudo groupadd --system rig"));
    }
}

TEST_CASE("check: every Rig function when none is named; bad addresses are errors", "[vfio][devbind][check]") {
    world w;
    w.bound_mlx5();
    w.fx.add_function({"0000:5e:00.0", "0x14e4", "0x1750", "0x020000", "bnxt_en", 30, {}, ""});
    w.fx.add_function({"0000:00:19.0", "0x8086", "0x15b8", "0x020000", "e1000e", 5, {}, ""});
    const check_report r = w.check({});
    REQUIRE(r.functions.size() == 2);
    CHECK(r.functions[1].title == "0000:5e:00.0 bnxt BCM57508 (14e4:1750)");

    const std::vector<std::string> bad{"3b:00.0"};
    auto e = devbind_check(bad, w.who, w.options());
    REQUIRE_FALSE(e);
    CHECK(e.error().message == "\"3b:00.0\" is not a PCI address (0000:bb:dd.f)");
    const std::vector<std::string> absent{"0000:af:00.0"};
    e = devbind_check(absent, w.who, w.options());
    REQUIRE_FALSE(e);
    CHECK_THAT(e.error().message, Catch::StartsWith("0000:af:00.0: no such PCI function"));
}

TEST_CASE("the rig-devbind tool: --check exits 2 and prints what is missing", "[vfio][devbind][check][tool]") {
    const char* tool = std::getenv("RIG_DEVBIND");
    if (tool == nullptr) {
        WARN("RIG_DEVBIND not set: skipped (run through meson test)");
        return;
    }
    world w;
    w.fx.add_function({mlx5, "0x15b3", "0x1017", "0x020000", "mlx5_core", 17, {}, ""});
    const devbind_options o = w.options();
    const std::string cmd = std::string(tool) + " --check " + mlx5 + " --sysfs-root " + o.sysfs_root +
                            " --proc-root " + o.proc_root + " --dev-root " + o.dev_root + " --etc-root " + o.etc_root +
                            " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) {
        out += buf;
    }
    const int status = pclose(p);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    CHECK_THAT(out, Catch::StartsWith("this host, for you:\n") &&
                        Catch::Contains("0000:3b:00.0 mlx5 ConnectX-5 (15b3:1017):\n  MISSING driver: bound to "
                                        "mlx5_core, not vfio-pci; fix: sudo rig-devbind --bind vfio-pci 0000:3b:00.0\n"));
}
