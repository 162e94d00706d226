// rig-devbind --check: for the calling user, what is missing to open each function through
// kernel VFIO, and the fix for each. The device nodes are the ones driver/vfio opens:
// <dev>/vfio/vfio and <dev>/vfio/<group> (container.cpp), <dev>/iommu and
// <dev>/vfio/devices/vfioN (iommufd.cpp). Their modes are judged for the caller as the kernel's
// generic_permission does (fs/namei.c: owner class, else group class, else other; root passes).
// The report reads sysfs, /dev, /etc and /proc under the roots in devbind_options, so tests run
// it on a fixture tree.
#include "driver/vfio/devbind.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "driver/vfio/limits.hpp"

namespace rig::driver::vfio {

namespace fs = std::filesystem;

namespace {

// ---- names: <etc>/group and <etc>/passwd, or NSS for the real /etc -------------------------------

struct id_entry {
    std::string name;
    unsigned id = 0;
    std::vector<std::string> members;   // group: its member list
};

std::vector<std::string> split(const std::string& s, char by) {
    std::vector<std::string> out;
    std::string part;
    std::istringstream in(s);
    while (std::getline(in, part, by)) {
        out.push_back(part);
    }
    if (!s.empty() && s.back() == by) {
        out.emplace_back();
    }
    return out;
}

// "name:x:id:..." lines; for group files the fourth field is the member list.
std::optional<id_entry> find_entry(const std::string& file, std::optional<unsigned> id,
                                   std::string_view name, bool group) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
        const auto f = split(line, ':');
        unsigned n = 0;
        if (f.size() < 3 || std::from_chars(f[2].data(), f[2].data() + f[2].size(), n).ec != std::errc{}) {
            continue;
        }
        if ((id && n == *id) || (!id && f[0] == name)) {
            id_entry e{f[0], n, {}};
            if (group && f.size() > 3 && !f[3].empty()) {
                e.members = split(f[3], ',');
            }
            return e;
        }
    }
    return std::nullopt;
}

std::optional<id_entry> lookup_group(const devbind_options& o, std::optional<unsigned> gid, std::string_view name) {
    if (o.etc_root != "/etc") {
        return find_entry(o.etc_root + "/group", gid, name, true);
    }
    // the real /etc: NSS, so that groups from LDAP or sssd are named too
    group g{};
    group* found = nullptr;
    std::vector<char> buf(16384);
    const std::string n(name);
    const int rc = gid ? getgrgid_r(*gid, &g, buf.data(), buf.size(), &found)
                       : getgrnam_r(n.c_str(), &g, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
        return std::nullopt;
    }
    id_entry e{g.gr_name, g.gr_gid, {}};
    for (char** m = g.gr_mem; m != nullptr && *m != nullptr; ++m) {
        e.members.emplace_back(*m);
    }
    return e;
}

std::string user_name(const devbind_options& o, unsigned uid) {
    if (o.etc_root != "/etc") {
        auto e = find_entry(o.etc_root + "/passwd", uid, "", false);
        return e ? e->name : std::string{};
    }
    passwd p{};
    passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (getpwuid_r(uid, &p, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
        return {};
    }
    return p.pw_name;
}

std::string group_name(const devbind_options& o, unsigned gid) {
    auto e = lookup_group(o, gid, "");
    return e ? e->name : std::to_string(gid);
}

bool in_group(const caller& who, unsigned gid) {
    return who.gid == gid || std::find(who.groups.begin(), who.groups.end(), gid) != who.groups.end();
}

std::string bytes_text(std::uint64_t b) {
    if (b != 0 && b % (std::uint64_t{1} << 30) == 0) {
        return std::to_string(b >> 30) + " GiB";
    }
    if (b != 0 && b % (std::uint64_t{1} << 20) == 0) {
        return std::to_string(b >> 20) + " MiB";
    }
    if (b != 0 && b % 1024 == 0) {
        return std::to_string(b >> 10) + " KiB";
    }
    return std::to_string(b) + " bytes";
}

bool exists(const std::string& p) {
    std::error_code ec;
    return fs::exists(p, ec);
}

// ---- device nodes ---------------------------------------------------------------------------------

struct node {
    std::string path;
    std::string subsystem;   // for udevadm trigger: vfio, vfio-dev, misc
    bool present = false;
    bool rw = false;
    unsigned uid = 0;
    unsigned gid = 0;
    unsigned mode = 0;
};

node look_at(std::string path, std::string subsystem, const caller& who) {
    node n{std::move(path), std::move(subsystem), false, false, 0, 0, 0};
    struct stat st{};
    if (::stat(n.path.c_str(), &st) != 0) {
        return n;
    }
    n.present = true;
    n.uid = st.st_uid;
    n.gid = st.st_gid;
    n.mode = st.st_mode & 07777;
    unsigned bits = n.mode & 07;   // other
    if (st.st_uid == who.uid) {
        bits = n.mode >> 6 & 07;
    } else if (in_group(who, st.st_gid)) {
        bits = n.mode >> 3 & 07;
    }
    n.rw = who.uid == 0 || (bits & 06) == 06;   // root: CAP_DAC_OVERRIDE
    return n;
}

std::string mode_text(unsigned mode) {
    char s[8];
    std::snprintf(s, sizeof s, "%04o", mode);
    return s;
}

constexpr std::string_view udev_fix_head = "install Rig's udev rule 70-rig-vfio.rules (packaging/README.md) and apply it: "
                                           "sudo udevadm control --reload && sudo udevadm trigger --action=add "
                                           "--subsystem-match=";

// Why `n`, which exists, is not open to the caller, and what gives it to them.
finding refused_node(const node& n, const caller& who, const devbind_options& o, verdict level) {
    const std::string owner_group = group_name(o, n.gid);
    std::string owner = user_name(o, n.uid);
    owner = owner.empty() ? std::to_string(n.uid) : owner;
    std::string me = user_name(o, who.uid);
    const std::string me_shown = me.empty() ? "uid " + std::to_string(who.uid) : me;
    me = me.empty() ? "$USER" : me;
    finding f{level, n.path,
              "owned by " + owner + ":" + owner_group + " mode " + mode_text(n.mode) +
                  ", not readable and writable by you (" + me_shown + ", " +
                  (in_group(who, n.gid) ? "in group " + owner_group + ", which it does not give rw"
                                        : "not in group " + owner_group) + ")",
              ""};
    if (owner_group == rig_group && (n.mode & 060) == 060) {
        // the rule has done its part: the caller is not (yet) in the group
        auto g = lookup_group(o, std::nullopt, rig_group);
        const bool listed = g && std::find(g->members.begin(), g->members.end(), me) != g->members.end();
        f.fix = listed ? "log in again (or run newgrp rig): you were added to group rig after this session began"
                       : "sudo usermod -aG rig " + me + ", then log in again";
    } else {
        f.fix = std::string(udev_fix_head) + n.subsystem;
        if (!in_group(who, lookup_group(o, std::nullopt, rig_group).value_or(id_entry{"", ~0u, {}}).id)) {
            f.fix += "; and join group rig: sudo usermod -aG rig " + me + ", then log in again";
        }
    }
    return f;
}

// ---- the two ways in ------------------------------------------------------------------------------

struct way {
    std::string name;
    std::vector<node> nodes;
    std::vector<finding> problems;   // level filled in by the caller
    bool open() const { return problems.empty(); }
    std::string node_list() const {
        std::string s;
        for (const node& n : nodes) {
            s += (s.empty() ? "" : ", ") + n.path;
        }
        return s;
    }
};

void judge(way& w, const node& n, std::string absent_text, std::string absent_fix, const caller& who,
           const devbind_options& o) {
    w.nodes.push_back(n);
    if (!n.present) {
        w.problems.push_back({verdict::missing, n.path, std::move(absent_text), std::move(absent_fix)});
    } else if (!n.rw) {
        w.problems.push_back(refused_node(n, who, o, verdict::missing));
    }
}

// The container/group path (container.cpp): <dev>/vfio/vfio and <dev>/vfio/<N>.
way group_way(const pci_function& f, const caller& who, const devbind_options& o) {
    way w{"the group path", {}, {}};
    const std::string group = std::to_string(*f.iommu_group);
    judge(w, look_at(o.dev_root + "/vfio/vfio", "misc", who),
          "does not exist (kernel without the VFIO container, CONFIG_VFIO_CONTAINER)", "sudo modprobe vfio", who, o);
    const std::string noiommu = o.dev_root + "/vfio/noiommu-" + group;
    if (!exists(o.dev_root + "/vfio/" + group) && exists(noiommu)) {
        // drivers/vfio/group.c (vfio_group_fops_open): a no-IOMMU group needs CAP_SYS_RAWIO too
        w.nodes.push_back(look_at(noiommu, "vfio", who));
        w.problems.push_back({verdict::missing, noiommu,
                              "only a no-IOMMU group exists: the device would DMA to physical memory with no "
                              "isolation; Rig opens it only when asked by name (iommu_mode::unsafe_noiommu) and "
                              "the kernel only for CAP_SYS_RAWIO",
                              "turn the IOMMU on (intel_iommu=on or amd_iommu=on on the kernel command line)"});
        return w;
    }
    judge(w, look_at(o.dev_root + "/vfio/" + group, "vfio", who),
          "does not exist although the function is bound to vfio-pci (kernel without CONFIG_VFIO_GROUP?)",
          "see dmesg; bind it again: sudo rig-devbind --bind vfio-pci " + f.bdf, who, o);
    return w;
}

// The iommufd path (iommufd.cpp): <dev>/iommu and the function's cdev <dev>/vfio/devices/vfioN.
way iommufd_way(const pci_function& f, const caller& who, const devbind_options& o) {
    way w{"the iommufd path", {}, {}};
    judge(w, look_at(o.dev_root + "/iommu", "misc", who),
          "does not exist (kernel without CONFIG_IOMMUFD, Linux >= 6.2)", "sudo modprobe iommufd", who, o);
    if (f.vfio_cdev.empty()) {
        w.problems.push_back({verdict::missing, "device cdev",
                              "the kernel made no VFIO device cdev for it (no vfio-dev/ in sysfs: "
                              "CONFIG_VFIO_DEVICE_CDEV, Linux >= 6.6)",
                              "none while the group path is open to you"});
        return w;
    }
    judge(w, look_at(o.dev_root + "/vfio/devices/" + f.vfio_cdev, "vfio-dev", who),
          "does not exist although sysfs names it", "see dmesg; bind it again: sudo rig-devbind --bind vfio-pci " + f.bdf,
          who, o);
    return w;
}

// Which way opens: iommufd first, as open_kernel_vfio's automatic mode; the other's problems are
// notes then. Neither: every problem is missing, and either way's fixes are enough.
void judge_ways(const pci_function& f, const caller& who, const devbind_options& o, std::vector<finding>& out) {
    way ways[] = {iommufd_way(f, who, o), group_way(f, who, o)};
    const way* open = nullptr;
    for (const way& w : ways) {
        open = open != nullptr ? open : (w.open() ? &w : nullptr);
    }
    if (open != nullptr) {
        out.push_back({verdict::ok, "open", "through " + open->name + " (" + open->node_list() + ")", ""});
    } else {
        out.push_back({verdict::missing, "open",
                       "neither the iommufd path nor the group path is open to you; the fixes of either are enough",
                       ""});
    }
    for (way& w : ways) {
        for (finding& p : w.problems) {
            if (&w != open) {
                p.level = open != nullptr ? verdict::note : verdict::missing;
                if (open != nullptr) {
                    p.text += " (" + w.name + "; not needed)";
                }
                out.push_back(std::move(p));
            }
        }
    }
}

// ---- one function ---------------------------------------------------------------------------------

// Drivers that leave the group's DMA to its user: vfio-pci and its variants, pci-stub, pcieport
// (their driver_managed_dma; iommu_device_use_default_domain in drivers/iommu/iommu.c refuses
// the rest while VFIO holds the group). Documentation/driver-api/vfio.rst: a group is viable
// only when each of its devices is bound to a VFIO driver or to none.
bool leaves_group_to_vfio(std::string_view driver) {
    return driver.empty() || driver.find("vfio") != std::string_view::npos || driver == "pci-stub" ||
           driver == "pcieport";
}

void judge_group(const pci_function& f, const sysfs& sys, std::vector<finding>& out) {
    const std::string g = "IOMMU group " + std::to_string(*f.iommu_group);
    std::vector<std::string> others;
    for (const std::string& member : sys.group_members(*f.iommu_group)) {
        auto m = sys.function(member);
        if (member == f.bdf || !m) {
            continue;
        }
        others.push_back(member);
        if (!leaves_group_to_vfio(m->driver)) {
            out.push_back({verdict::missing, g,
                           member + " shares it and is bound to " + m->driver +
                               ": VFIO cannot use the group until that is bound to vfio-pci or to none",
                           "sudo rig-devbind --bind vfio-pci " + member});
        }
    }
    std::string text = others.empty() ? "no other device" : "its other devices leave it to VFIO:";
    for (const std::string& m : others) {
        text += " " + m;
    }
    if (std::none_of(out.begin(), out.end(), [&](const finding& x) { return x.subject == g; })) {
        out.push_back({verdict::ok, g, text, ""});
    }
}

function_check check_function(const pci_function& f, const sysfs& sys, const caller& who,
                              const devbind_options& o) {
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", f.vendor, f.device);
    function_check c;
    c.title = f.bdf + " " +
              (f.known ? std::string(abi::pci::to_string(f.known->family)) + " " + std::string(f.known->name)
                       : std::string("(not a device Rig drives)")) +
              " (" + id + ")";
    auto& out = c.findings;
    const bool vfio = f.driver.find("vfio") != std::string::npos;
    if (!vfio) {
        out.push_back({verdict::missing, "driver",
                       f.driver.empty() ? "bound to no driver, not vfio-pci" : "bound to " + f.driver + ", not vfio-pci",
                       "sudo rig-devbind --bind vfio-pci " + f.bdf});
    } else {
        out.push_back({verdict::ok, "driver", "bound to " + f.driver, ""});
    }
    if (!f.iommu_group) {
        out.push_back({verdict::missing, "IOMMU group",
                       "none (" + sys.device_dir(f.bdf) + "/iommu_group is missing): the IOMMU is off or absent",
                       "turn it on: intel_iommu=on or amd_iommu=on on the kernel command line, VT-d or AMD-Vi in "
                       "the firmware"});
        return c;
    }
    judge_group(f, sys, out);
    if (vfio) {
        judge_ways(f, who, o, out);
    } else {
        out.push_back({verdict::note, "device nodes", "not checked: VFIO makes them when the function is bound",
                       "run --check again after the bind"});
    }
    return c;
}

// ---- the host -------------------------------------------------------------------------------------

// What the driver pins before the application registers anything (memlock_floor): the
// firmware's memory, mlx5's boot and init pages (MANAGE_PAGES; drivers/net/ethernet/mellanox/
// mlx5/core/pagealloc.c) or bnxt's context backing store, sized for up to 64K RoCE queue pairs
// and 384K MR/AH entries (bnxt_alloc_ctx_mem, drivers/net/ethernet/broadcom/bnxt/bnxt.c), tens to
// a few hundred MiB on a card, then its rings and command buffers. VFIO charges it to
// RLIMIT_MEMLOCK: per process on the group path (vfio_lock_acct, drivers/vfio/vfio_iommu_type1.c),
// per user on iommufd (incr_user_locked_vm, drivers/iommu/iommufd/pages.c).
finding memlock_finding(const caller& who) {
    constexpr std::string_view fix = "install Rig's limits snippet 95-rig-memlock.conf in /etc/security/limits.d "
                                     "and log in again (packaging/README.md); a systemd service: "
                                     "LimitMEMLOCK=infinity";
    if (who.ipc_lock) {
        return {verdict::ok, "memlock", "CAP_IPC_LOCK in effect: pinned memory is not limited", ""};
    }
    if (!who.memlock_bytes) {
        return {verdict::ok, "memlock", "RLIMIT_MEMLOCK is unlimited", ""};
    }
    const std::uint64_t have = *who.memlock_bytes;
    const std::string counted = " (the NIC's firmware memory and rings, then every region; per process on the "
                                "group path, per user on iommufd)";
    if (have < memlock_floor) {
        return {verdict::missing, "memlock",
                "RLIMIT_MEMLOCK is " + bytes_text(have) + ", below the " + bytes_text(memlock_floor) +
                    " a NIC pins before any region" + counted,
                std::string(fix)};
    }
    return {verdict::note, "memlock",
            "RLIMIT_MEMLOCK is " + bytes_text(have) + ": pinning past it fails with ENOMEM" + counted, std::string(fix)};
}

// 2 MiB hugetlb pages: Rig's DMA memory takes them when free (driver/dma_memory.hpp), else 4 KiB
// pages (each its own IOMMU entry). Documentation/admin-guide/mm/hugetlbpage.rst.
finding hugepage_finding(const devbind_options& o) {
    const fs::path dir = fs::path(o.sysfs_root) / "kernel/mm/hugepages/hugepages-2048kB";
    const std::string fix = "sudo sh -c 'echo 64 > /proc/sys/vm/nr_hugepages' (vm.nr_hugepages = 64 in "
                            "/etc/sysctl.d/ to keep it)";
    const auto total = read_decimal(dir / "nr_hugepages");
    const auto free = read_decimal(dir / "free_hugepages");
    if (!total) {
        return {verdict::note, "hugepages",
                "this kernel has no 2 MiB huge pages (" + dir.string() + "): Rig's memory uses 4 KiB pages", ""};
    }
    if (*total == 0) {
        return {verdict::note, "hugepages",
                "no 2 MiB huge pages reserved (" + (dir / "nr_hugepages").string() +
                    " is 0): Rig's memory falls back to 4 KiB pages, each its own IOMMU entry",
                fix};
    }
    if (free.value_or(0) == 0) {
        return {verdict::note, "hugepages",
                "all " + std::to_string(*total) + " reserved 2 MiB huge pages are in use: Rig's memory falls back "
                                                  "to 4 KiB pages",
                "reserve more: " + fix};
    }
    return {verdict::ok, "hugepages",
            std::to_string(*free) + " of " + std::to_string(*total) + " reserved 2 MiB huge pages free", ""};
}

std::vector<finding> host_findings(const caller& who, const devbind_options& o, const sysfs& sys) {
    std::vector<finding> out;
    std::error_code ec;
    if (fs::is_directory(sys.drivers_dir() + "/vfio-pci", ec)) {
        out.push_back({verdict::ok, "vfio-pci", "the driver is loaded", ""});
    } else {
        out.push_back({verdict::missing, "vfio-pci", "the driver is not loaded (no " + sys.drivers_dir() + "/vfio-pci)",
                       "sudo modprobe vfio-pci (and name it in /etc/modules-load.d/ to load it at boot)"});
    }
    if (exists(o.dev_root + "/iommu")) {
        out.push_back({verdict::ok, "iommufd", o.dev_root + "/iommu exists: the iommufd path is there", ""});
    } else {
        out.push_back({verdict::note, "iommufd",
                       "no " + o.dev_root + "/iommu (kernel without CONFIG_IOMMUFD, Linux >= 6.2, or the module "
                                            "not loaded): functions open through the group path",
                       "sudo modprobe iommufd, if the kernel has it"});
    }
    if (who.uid == 0) {
        out.push_back({verdict::ok, "access", "running as root: the device nodes' modes do not apply", ""});
    } else if (auto g = lookup_group(o, std::nullopt, rig_group); !g) {
        out.push_back({verdict::note, "group rig",
                       "no group rig: Rig's udev rule gives the device nodes to it",
                       "sudo groupadd --system rig (or systemd-sysusers with Rig's sysusers.d/rig.conf)"});
    } else if (in_group(who, g->id)) {
        out.push_back({verdict::ok, "group rig", "you are in group rig", ""});
    } else {
        const std::string me = user_name(o, who.uid);
        const bool listed = std::find(g->members.begin(), g->members.end(), me) != g->members.end();
        out.push_back({verdict::note, "group rig", "this session is not in group rig, which the device nodes are given to",
                       listed ? "log in again (or run newgrp rig): you were added after this session began"
                              : "sudo usermod -aG rig " + (me.empty() ? std::string("$USER") : me) +
                                    ", then log in again"});
    }
    out.push_back(memlock_finding(who));
    out.push_back(hugepage_finding(o));
    return out;
}

std::optional<std::uint64_t> cap_eff(const std::string& status) {
    std::ifstream in(status);
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("CapEff:")) {
            std::uint64_t v = 0;
            const std::string hex = line.substr(line.find_first_not_of(" \t", 7));
            if (std::from_chars(hex.data(), hex.data() + hex.size(), v, 16).ec == std::errc{}) {
                return v;
            }
        }
    }
    return std::nullopt;
}

}  // namespace

caller caller_of_this_process(const devbind_options& options) {
    caller c;
    c.uid = ::getuid();
    c.gid = ::getgid();
    const int n = ::getgroups(0, nullptr);
    std::vector<gid_t> g(n > 0 ? static_cast<std::size_t>(n) : 0);
    const int got = g.empty() ? 0 : ::getgroups(n, g.data());
    for (int i = 0; i < got; ++i) {
        c.groups.push_back(g[static_cast<std::size_t>(i)]);
    }
    c.memlock_bytes = read_map_limits(options.sysfs_root).memlock_bytes;
    constexpr unsigned cap_ipc_lock = 14;   // include/uapi/linux/capability.h
    c.ipc_lock = (cap_eff(options.proc_root + "/self/status").value_or(0) >> cap_ipc_lock & 1) != 0;
    return c;
}

bool check_report::usable() const {
    const auto missing = [](const finding& f) { return f.level == verdict::missing; };
    return std::none_of(host.begin(), host.end(), missing) &&
           std::none_of(functions.begin(), functions.end(), [&](const function_check& c) {
               return std::any_of(c.findings.begin(), c.findings.end(), missing);
           });
}

result<check_report> devbind_check(std::span<const std::string> bdfs, const caller& who,
                                   const devbind_options& options) {
    const sysfs sys(options.sysfs_root);
    std::vector<pci_function> functions;
    if (bdfs.empty()) {
        auto all = sys.rig_functions();
        if (!all) {
            return std::unexpected(all.error());
        }
        functions = std::move(*all);
    }
    for (const std::string& bdf : bdfs) {
        if (!is_pci_address(bdf)) {
            return std::unexpected(error{"\"" + bdf + "\" is not a PCI address (0000:bb:dd.f)", EINVAL});
        }
        auto f = sys.function(bdf);
        if (!f) {
            return std::unexpected(error{bdf + ": no such PCI function (" + sys.device_dir(bdf) + " does not exist)",
                                         ENODEV});
        }
        functions.push_back(std::move(*f));
    }
    check_report r;
    r.host = host_findings(who, options, sys);
    for (const pci_function& f : functions) {
        r.functions.push_back(check_function(f, sys, who, options));
    }
    return r;
}

std::string format_check(const check_report& report) {
    std::string out;
    const auto lines = [&](const std::vector<finding>& fs) {
        for (const finding& f : fs) {
            out += f.level == verdict::ok ? "  ok      " : f.level == verdict::note ? "  note    " : "  MISSING ";
            out += f.subject + ": " + f.text;
            if (!f.fix.empty() && f.level != verdict::ok) {
                out += "; fix: " + f.fix;
            }
            out += '\n';
        }
    };
    out += "this host, for you:\n";
    lines(report.host);
    if (report.functions.empty()) {
        out += "no mlx5 or bnxt function found, and none bound to vfio-pci\n";
    }
    for (const function_check& c : report.functions) {
        out += c.title + ":\n";
        lines(c.findings);
    }
    out += report.usable() ? "nothing missing\n" : "something is missing: see MISSING above\n";
    return out;
}

}  // namespace rig::driver::vfio
