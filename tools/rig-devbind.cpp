// rig-devbind: which functions Rig can drive, and binding them to vfio-pci and back, like
// dpdk-devbind.py. The logic lives in driver/vfio/devbind.cpp; this is argument parsing.
//
//   rig-devbind --status
//   rig-devbind --bind vfio-pci 0000:3b:00.0 [...]
//   rig-devbind --unbind 0000:3b:00.0 [...]
//   rig-devbind --restore 0000:3b:00.0 [...]
//   rig-devbind --check [0000:3b:00.0 ...]   what this user still needs to open them; exit 2 if any
// Options: --force, --sysfs-root DIR, --proc-root DIR, --state-dir DIR, --dev-root DIR, --etc-root DIR.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "driver/vfio/devbind.hpp"

namespace {

constexpr std::string_view usage =
    "usage: rig-devbind --status\n"
    "       rig-devbind --bind DRIVER BDF...     (DRIVER is normally vfio-pci)\n"
    "       rig-devbind --unbind BDF...\n"
    "       rig-devbind --restore BDF...         (back to the driver it had before rig-devbind)\n"
    "       rig-devbind --check [BDF...]         (what you still need to open them; exit 2 if anything)\n"
    "options:\n"
    "  --force            unbind even a function that carries an active route of this host\n"
    "  --sysfs-root DIR   sysfs to use (default /sys)\n"
    "  --proc-root DIR    procfs to read net/route from (default /proc)\n"
    "  --state-dir DIR    where original drivers are recorded (default /run/rig/devbind)\n"
    "  --dev-root DIR     device nodes to check (default /dev)\n"
    "  --etc-root DIR     group and passwd files to name owners by (default /etc)\n"
    "  --help\n";

int die(const std::string& message) {
    std::fprintf(stderr, "rig-devbind: %s\n", message.c_str());
    return 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace rig::driver::vfio;
    const std::vector<std::string_view> args(argv + 1, argv + argc);
    devbind_options options;
    std::string command;
    std::string driver;
    std::vector<std::string> bdfs;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string_view a = args[i];
        auto value = [&](std::string& out) {
            if (i + 1 >= args.size()) {
                return false;
            }
            out = std::string(args[++i]);
            return true;
        };
        if (a == "--help" || a == "-h") {
            std::fputs(usage.data(), stdout);
            return 0;
        } else if (a == "--force") {
            options.force = true;
        } else if (a == "--sysfs-root") {
            if (!value(options.sysfs_root)) {
                return die("--sysfs-root needs a directory");
            }
        } else if (a == "--proc-root") {
            if (!value(options.proc_root)) {
                return die("--proc-root needs a directory");
            }
        } else if (a == "--state-dir") {
            if (!value(options.state_dir)) {
                return die("--state-dir needs a directory");
            }
        } else if (a == "--dev-root") {
            if (!value(options.dev_root)) {
                return die("--dev-root needs a directory");
            }
        } else if (a == "--etc-root") {
            if (!value(options.etc_root)) {
                return die("--etc-root needs a directory");
            }
        } else if (a == "--status" || a == "--unbind" || a == "--restore" || a == "--bind" || a == "--check") {
            if (!command.empty()) {
                return die("one command at a time (" + command + " and " + std::string(a) + ")");
            }
            command = std::string(a);
            if (a == "--bind" && !value(driver)) {
                return die("--bind needs a driver name, e.g. --bind vfio-pci 0000:3b:00.0");
            }
        } else if (a.starts_with("-")) {
            return die("unknown option " + std::string(a) + " (see --help)");
        } else {
            bdfs.emplace_back(a);
        }
    }
    if (command.empty()) {
        command = "--status";
    }
    if (command == "--status") {
        if (!bdfs.empty()) {
            return die("--status takes no functions");
        }
        auto rows = devbind_status(options);
        if (!rows) {
            return die(rows.error().message);
        }
        std::fputs(format_status(*rows).c_str(), stdout);
        return 0;
    }
    if (command == "--check") {
        auto report = devbind_check(bdfs, caller_of_this_process(options), options);
        if (!report) {
            return die(report.error().message);
        }
        std::fputs(format_check(*report).c_str(), stdout);
        return report->usable() ? 0 : 2;
    }
    if (bdfs.empty()) {
        return die(command + " needs at least one function (0000:bb:dd.f)");
    }
    for (const std::string& bdf : bdfs) {
        auto done = command == "--bind"     ? devbind_bind(bdf, driver, options)
                    : command == "--unbind" ? devbind_unbind(bdf, options)
                                            : devbind_restore(bdf, options);
        if (!done) {
            return die(done.error().message);
        }
        for (const std::string& line : *done) {
            std::printf("%s\n", line.c_str());
        }
    }
    return 0;
}
