// vfio_edu_test: the guest half of the VM tests (test/vm/). Runs inside a QEMU guest (q35 +
// intel-iommu + edu; run-vm-test puts it and its shared libraries in the initramfs), on an edu
// device already bound to vfio-pci, and exercises Rig's kernel VFIO back end through
// rig::driver's public interface only.
//
//   vfio_edu_test group|iommufd 0000:00:04.0
//
// Prints progress, then one result line the harness (test/vm/run-vm-test) decides by:
//   VFIO_EDU_RESULT PASS mode=<mode> ...
//   VFIO_EDU_RESULT FAIL mode=<mode> <reason>
// and, before it, the DMA map/unmap cost per 2 MiB:
//   VFIO_EDU_DMA_COST mode=<mode> pages=4k|2m bytes=2097152 iters=N map_us=.. unmap_us=.. map_unmap_us=..
//
// QEMU's edu (hw/misc/edu.c): BAR0 registers 0x00 id (0x010000ed), 0x04 liveness (reads back
// ~x), 0x24 interrupt status, 0x60 raise, 0x64 acknowledge, 0x80 DMA source, 0x88 DMA
// destination, 0x90 DMA count, 0x98 DMA command (1 run, 2 edu->RAM, 4 interrupt on completion);
// its DMA buffer is at 0x40000. Facts of QEMU 7.2's edu.c (edu_check_range, the dma_mask
// property, the DMA timer) and of vfio-pci:
//  - a DMA must end strictly below 0x41000, or QEMU 7.2 aborts the whole VM: 2048 bytes here;
//  - edu's DMA mask is 28 bits (RAM-side addresses are silently clamped): dma_limit below;
//  - a DMA completes on a 100 ms virtual-time timer: poll the run bit;
//  - edu raises MSI when MSI is enabled, INTx otherwise; vfio-pci masks INTx after each trigger.
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <signal.h>
#include <string>
#include <sys/klog.h>
#include <time.h>
#include <type_traits>
#include <unistd.h>
#include <utility>
#include <vector>

#include "driver/dma_memory.hpp"
#include "driver/function.hpp"

namespace drv = rig::driver;

namespace {

constexpr std::uint16_t edu_vendor = 0x1234;
constexpr std::uint16_t edu_device = 0x11e8;
constexpr std::uint64_t edu_dma_limit = (std::uint64_t{1} << 28) - 1;

constexpr std::uint32_t reg_id = 0x00;
constexpr std::uint32_t reg_live = 0x04;
constexpr std::uint32_t reg_irq_status = 0x24;
constexpr std::uint32_t reg_irq_raise = 0x60;
constexpr std::uint32_t reg_irq_ack = 0x64;
constexpr std::uint32_t reg_dma_src = 0x80;
constexpr std::uint32_t reg_dma_dst = 0x88;
constexpr std::uint32_t reg_dma_cnt = 0x90;
constexpr std::uint32_t reg_dma_cmd = 0x98;
constexpr std::uint64_t edu_buffer = 0x40000;
constexpr std::uint32_t dma_run = 1;
constexpr std::uint32_t dma_to_ram = 2;
constexpr std::uint32_t dma_irq = 4;
constexpr std::uint32_t irq_status_dma = 0x100;

constexpr std::size_t dma_bytes = 2048;   // < 4096: see the edu off-by-one above
constexpr std::size_t two_mib = 2 * 1024 * 1024;

const char* g_mode = "?";

[[noreturn]] void fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail(const char* fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    std::printf("VFIO_EDU_RESULT FAIL mode=%s %s\n", g_mode, msg);
    std::fflush(stdout);
    std::exit(1);
}

template <class T>
T must(drv::result<T> r, const char* what) {
    if (!r) {
        fail("%s: %s", what, r.error().message.c_str());
    }
    if constexpr (!std::is_void_v<T>) {
        return std::move(*r);
    }
}

void on_alarm(int) {
    static const char m[] = "VFIO_EDU_RESULT FAIL the test did not finish within its time limit\n";
    (void)!write(1, m, sizeof m - 1);
    _exit(2);
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sleep_ms(long ms) {
    timespec ts{ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
}

class edu_regs {
public:
    explicit edu_regs(std::byte* base) : _base(base) {}
    std::uint32_t rd32(std::uint32_t off) const {
        return *reinterpret_cast<volatile std::uint32_t*>(_base + off);
    }
    void wr32(std::uint32_t off, std::uint32_t v) const {
        *reinterpret_cast<volatile std::uint32_t*>(_base + off) = v;
    }
    void wr64(std::uint32_t off, std::uint64_t v) const {
        *reinterpret_cast<volatile std::uint64_t*>(_base + off) = v;
    }

    // Starts one edu DMA and waits for its run bit to clear.
    void dma(std::uint64_t src, std::uint64_t dst, std::uint64_t count, std::uint32_t cmd,
             const char* what) const {
        wr64(reg_dma_src, src);
        wr64(reg_dma_dst, dst);
        wr64(reg_dma_cnt, count);
        wr64(reg_dma_cmd, dma_run | cmd);
        const double t0 = now_s();
        while (rd32(reg_dma_cmd) & dma_run) {
            if (now_s() - t0 > 10.0) {
                fail("%s: the DMA did not complete in 10 s", what);
            }
            sleep_ms(1);
        }
    }

private:
    std::byte* _base;
};

// Waits for an eventfd to count; returns the count read (0 on timeout).
std::uint64_t wait_eventfd(int fd, int ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) == 1) {
        std::uint64_t c = 0;
        if (read(fd, &c, sizeof c) == static_cast<ssize_t>(sizeof c)) {
            return c;
        }
    }
    return 0;
}

// Lines of the kernel log that report a DMA remapping fault of the device "bb:dd.f".
int dmar_faults(const std::string& dev) {
    const int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
    if (size <= 0) {
        return -1;
    }
    std::vector<char> buf(static_cast<std::size_t>(size) + 1);
    const int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), size);
    if (n < 0) {
        return -1;
    }
    int count = 0;
    const std::string log(buf.data(), static_cast<std::size_t>(n));
    std::size_t at = 0;
    while (at < log.size()) {
        std::size_t end = log.find('\n', at);
        if (end == std::string::npos) {
            end = log.size();
        }
        const std::string_view line(log.data() + at, end - at);
        if (line.find("DMAR") != line.npos && line.find("fault addr") != line.npos &&
            line.find("[" + dev + "]") != line.npos) {
            ++count;
        }
        at = end + 1;
    }
    return count;
}

struct cost {
    int iters = 0;
    double map_us = 0, unmap_us = 0;
};

// Average time of dma_map + dma_unmap of one 2 MiB dma_memory: at least 5 rounds, then until
// 200 rounds or about 1.5 s (TCG is slow, and this must not dominate the test's wall time).
cost measure_map_unmap(drv::function& f, const drv::dma_memory& mem) {
    // one untimed round first: faults in page tables, IOVA allocator state
    const auto warm = must(f.dma_map(mem, 0, two_mib, drv::dma_access::read_write), "dma_map 2 MiB");
    must(f.dma_unmap(warm, two_mib), "dma_unmap 2 MiB");
    cost c;
    const double start = now_s();
    while (c.iters < 200 && (c.iters < 5 || now_s() - start < 1.5)) {
        const double t0 = now_s();
        const auto iova = must(f.dma_map(mem, 0, two_mib, drv::dma_access::read_write), "dma_map 2 MiB");
        const double t1 = now_s();
        must(f.dma_unmap(iova, two_mib), "dma_unmap 2 MiB");
        const double t2 = now_s();
        if (iova + two_mib - 1 > edu_dma_limit) {
            fail("dma_map returned IOVA 0x%llx, above dma_limit 0x%llx",
                 static_cast<unsigned long long>(iova), static_cast<unsigned long long>(edu_dma_limit));
        }
        c.map_us += (t1 - t0) * 1e6;
        c.unmap_us += (t2 - t1) * 1e6;
        ++c.iters;
    }
    c.map_us /= c.iters;
    c.unmap_us /= c.iters;
    return c;
}

void print_cost(const char* pages, const cost& c) {
    std::printf("VFIO_EDU_DMA_COST mode=%s pages=%s bytes=%zu iters=%d map_us=%.1f unmap_us=%.1f "
                "map_unmap_us=%.1f\n",
                g_mode, pages, two_mib, c.iters, c.map_us, c.unmap_us, c.map_us + c.unmap_us);
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s group|iommufd 0000:bb:dd.f\n", argv[0]);
        return 64;
    }
    const std::string mode = argv[1];
    const std::string bdf = argv[2];
    g_mode = argv[1];
    signal(SIGALRM, on_alarm);
    alarm(90);

    drv::open_options opt;
    if (mode == "group") {
        opt.iommu = drv::iommu_mode::group_type1v2;
    } else if (mode == "iommufd") {
        opt.iommu = drv::iommu_mode::iommufd;
    } else {
        fail("unknown mode (group or iommufd)");
    }
    opt.dma_limit = edu_dma_limit;
    std::printf("vfio_edu_test: mode=%s bdf=%s\n", mode.c_str(), bdf.c_str());

    // 1. open through the back end
    auto f = must(drv::open(bdf, opt), "open");
    std::printf("open: %.*s\n", static_cast<int>(f->name().size()), f->name().data());

    // 2. configuration space
    const auto vendor = must(f->config_read16(0x00), "config_read16 vendor");
    const auto device = must(f->config_read16(0x02), "config_read16 device");
    std::printf("config: vendor=0x%04x device=0x%04x\n", vendor, device);
    if (vendor != edu_vendor || device != edu_device) {
        fail("config space reads %04x:%04x, not edu's 1234:11e8", vendor, device);
    }
    must(f->set_bus_master(true), "set_bus_master");
    auto command = must(f->config_read16(0x04), "config_read16 command");
    if (!(command & 0x4)) {
        fail("bus master still off after set_bus_master (command 0x%04x)", command);
    }
    if (!(command & 0x2)) {   // vfio-pci enables memory decoding on open; make sure
        must(f->config_write16(0x04, static_cast<std::uint16_t>(command | 0x2)), "enable memory space");
        command = must(f->config_read16(0x04), "config_read16 command");
    }
    std::printf("config: command=0x%04x (memory + bus master)\n", command);

    // 3. BAR0 and edu's registers
    const auto bar0_info = must(f->get_region_info(drv::region::bar0), "get_region_info bar0");
    const auto bar0 = must(f->map_bar(drv::region::bar0, drv::caching::uncached), "map_bar bar0");
    std::printf("BAR0: size=0x%llx mappable areas=%zu base=%p\n",
                static_cast<unsigned long long>(bar0_info.size), bar0.mapped.size(),
                static_cast<void*>(bar0.base));
    if (bar0.base == nullptr || !bar0.covers(0, 0x100)) {
        fail("BAR0's registers 0x00..0xff are not in a mapped area");
    }
    const edu_regs edu(bar0.base);
    const std::uint32_t id = edu.rd32(reg_id);
    std::printf("edu: id=0x%08x\n", id);
    if ((id & 0xff) != 0xed) {
        fail("edu id register reads 0x%08x (low byte should be 0xed)", id);
    }
    for (const std::uint32_t x : {0x12345678u, 0xa5a5f00fu}) {
        edu.wr32(reg_live, x);
        const std::uint32_t back = edu.rd32(reg_live);
        std::printf("edu: liveness wrote 0x%08x read 0x%08x\n", x, back);
        if (back != ~x) {
            fail("liveness: wrote 0x%08x, read 0x%08x, expected 0x%08x", x, back, ~x);
        }
    }

    // 4. MSI: an eventfd per vector; a write to 0x60 raises it
    const auto msi = must(f->get_irq_info(drv::irq_kind::msi), "get_irq_info msi");
    std::printf("MSI: count=%u eventfd=%d\n", msi.count, msi.eventfd);
    if (msi.count < 1 || !msi.eventfd) {
        fail("edu's MSI is not offered with eventfd signalling (count %u)", msi.count);
    }
    const auto msi_fds = must(f->enable_irqs(drv::irq_kind::msi, 1), "enable_irqs msi");
    if (msi_fds.size() != 1) {
        fail("enable_irqs(msi, 1) returned %zu eventfds", msi_fds.size());
    }
    edu.wr32(reg_irq_raise, 0x1);
    {
        const auto c = wait_eventfd(msi_fds[0], 2000);
        const std::uint32_t st = edu.rd32(reg_irq_status);
        edu.wr32(reg_irq_ack, st);
        std::printf("MSI: after raise: eventfd count=%llu irq_status=0x%x\n",
                    static_cast<unsigned long long>(c), st);
        if (c < 1) {
            fail("no MSI on the eventfd within 2 s of a write to edu's 0x60");
        }
        if (!(st & 0x1)) {
            fail("edu irq_status 0x%x after raising 0x1", st);
        }
    }

    // 5. DMA host -> device -> host through an IOVA mapping
    auto mem = must(drv::dma_memory::allocate(4096, drv::page_choice::small_only), "dma_memory::allocate");
    const auto iova = must(f->dma_map(mem, 0, mem.size(), drv::dma_access::read_write), "dma_map");
    std::printf("DMA: 0x%zx bytes mapped at IOVA 0x%llx\n", mem.size(), static_cast<unsigned long long>(iova));
    if (iova + mem.size() - 1 > edu_dma_limit) {
        fail("dma_map returned IOVA 0x%llx, above dma_limit 0x%llx (edu's 28-bit DMA)",
             static_cast<unsigned long long>(iova), static_cast<unsigned long long>(edu_dma_limit));
    }
    auto* buf = reinterpret_cast<std::uint8_t*>(mem.data());
    // A pattern new to every run: edu's buffer keeps its bytes between runs in one boot.
    const auto seed = static_cast<unsigned>(static_cast<std::uint64_t>(now_s() * 1000.0) % 251) | 1u;
    for (std::size_t i = 0; i < dma_bytes; ++i) {
        buf[i] = static_cast<std::uint8_t>(i * seed + (i >> 8) + 3);
    }
    std::memset(buf + dma_bytes, 0, mem.size() - dma_bytes);
    const double t0 = now_s();
    edu.dma(iova, edu_buffer, dma_bytes, dma_irq, "RAM->edu");   // completion raises MSI
    {
        const auto c = wait_eventfd(msi_fds[0], 2000);
        const std::uint32_t st = edu.rd32(reg_irq_status);
        edu.wr32(reg_irq_ack, st);
        std::printf("MSI: after DMA: eventfd count=%llu irq_status=0x%x\n",
                    static_cast<unsigned long long>(c), st);
        if (c < 1 || !(st & irq_status_dma)) {
            fail("no DMA completion MSI (eventfd count %llu, irq_status 0x%x)",
                 static_cast<unsigned long long>(c), st);
        }
    }
    const double t1 = now_s();
    edu.dma(edu_buffer, iova + dma_bytes, dma_bytes, dma_to_ram, "edu->RAM");
    const double t2 = now_s();
    for (std::size_t i = 0; i < dma_bytes; ++i) {
        const auto want = static_cast<std::uint8_t>(i * seed + (i >> 8) + 3);
        if (buf[dma_bytes + i] != want) {
            fail("DMA round trip: byte %zu is 0x%02x, expected 0x%02x", i, buf[dma_bytes + i], want);
        }
    }
    std::printf("DMA: %zu bytes RAM->edu->RAM verified (%.0f ms + %.0f ms)\n", dma_bytes,
                (t1 - t0) * 1e3, (t2 - t1) * 1e3);

    // 6. after dma_unmap the IOMMU must block a DMA to the old IOVA
    const std::string dev = bdf.substr(5);   // "00:04.0", as the DMAR fault report names it
    const int faults_before = dmar_faults(dev);
    must(f->dma_unmap(iova, mem.size()), "dma_unmap");
    std::memset(buf, 0x5a, mem.size());
    edu.dma(edu_buffer, iova, dma_bytes, dma_to_ram, "edu->unmapped IOVA");
    for (std::size_t i = 0; i < mem.size(); ++i) {
        if (buf[i] != 0x5a) {
            fail("a DMA to the unmapped IOVA 0x%llx reached memory (byte %zu is 0x%02x)",
                 static_cast<unsigned long long>(iova), i, buf[i]);
        }
    }
    int faults_after = dmar_faults(dev);
    for (int i = 0; i < 100 && faults_after <= faults_before; ++i) {   // reported by an interrupt
        sleep_ms(10);
        faults_after = dmar_faults(dev);
    }
    std::printf("DMA: to the unmapped IOVA blocked; DMAR fault reports for [%s]: %d -> %d\n",
                dev.c_str(), faults_before, faults_after);
    if (faults_before < 0) {
        fail("cannot read the kernel log (klogctl): %s", std::strerror(errno));
    }
    if (faults_after <= faults_before) {
        fail("the DMA to the unmapped IOVA left memory alone but the IOMMU reported no fault "
             "(did the device DMA at all?)");
    }

    // 7. INTx: MSI off first (edu raises MSI whenever MSI is on); unmask after each interrupt
    must(f->disable_irqs(drv::irq_kind::msi), "disable_irqs msi");
    const auto intx = must(f->get_irq_info(drv::irq_kind::intx), "get_irq_info intx");
    std::printf("INTx: count=%u eventfd=%d maskable=%d automasked=%d\n", intx.count, intx.eventfd,
                intx.maskable, intx.automasked);
    if (intx.count != 1 || !intx.eventfd) {
        fail("edu's INTx is not offered with eventfd signalling (count %u)", intx.count);
    }
    const auto intx_fds = must(f->enable_irqs(drv::irq_kind::intx, 1), "enable_irqs intx");
    if (intx_fds.size() != 1) {
        fail("enable_irqs(intx, 1) returned %zu eventfds", intx_fds.size());
    }
    for (int round = 0; round < 2; ++round) {
        edu.wr32(reg_irq_raise, 0x2);
        const auto c = wait_eventfd(intx_fds[0], 2000);
        const std::uint32_t st = edu.rd32(reg_irq_status);
        edu.wr32(reg_irq_ack, st);
        must(f->unmask_intx(), "unmask_intx");
        std::printf("INTx: round %d: eventfd count=%llu irq_status=0x%x\n", round,
                    static_cast<unsigned long long>(c), st);
        if (c < 1) {
            fail("no INTx on the eventfd within 2 s (round %d%s)", round,
                 round == 1 ? ", after unmask_intx" : "");
        }
    }
    must(f->disable_irqs(drv::irq_kind::intx), "disable_irqs intx");

    // 8. what dma_map + dma_unmap of 2 MiB costs: 4 KiB pages, and 2 MiB pages where the guest
    //    has hugetlb pages (its /init reserves a few)
    {
        auto small = must(drv::dma_memory::allocate(two_mib, drv::page_choice::small_only),
                          "dma_memory::allocate 2 MiB of 4 KiB pages");
        print_cost("4k", measure_map_unmap(*f, small));
    }
    if (auto huge = drv::dma_memory::allocate(two_mib, drv::page_choice::huge_only)) {
        print_cost("2m", measure_map_unmap(*f, *huge));
    } else {
        std::printf("VFIO_EDU_DMA_COST mode=%s pages=2m unavailable (%s)\n", g_mode,
                    huge.error().message.c_str());
    }

    f->release();
    std::printf("VFIO_EDU_RESULT PASS mode=%s config=1234:11e8 bar0=yes dma=%zux2 unmapped_dma=blocked "
                "msi=yes intx=yes\n",
                g_mode, dma_bytes);
    return 0;
}
