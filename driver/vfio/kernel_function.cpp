// The kernel VFIO back end's `function`: one PCI function bound to vfio-pci, reached through
// its VFIO device fd (Documentation/driver-api/vfio.rst). The IOMMU side (container/group or
// iommufd) is a dma_space (iommu.hpp); everything here is the device API both paths share:
// regions by pread/pwrite/mmap at the offset GET_REGION_INFO gives, DMA through the space with
// IOVAs from our own allocator, interrupts by SET_IRQS with eventfds, VFIO_DEVICE_RESET.
#include <linux/vfio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "abi/bits.hpp"
#include "driver/backends.hpp"
#include "driver/fifo_mutex.hpp"
#include "driver/log.hpp"
#include "driver/vfio/caps.hpp"
#include "driver/vfio/iommu.hpp"
#include "driver/vfio/limits.hpp"

namespace rig::driver::vfio {

namespace {

constexpr std::uint64_t small_page = 4096;

using ::rig::abi::hex;  // "0x1f" in messages

std::string_view irq_name(irq_kind k) {
    switch (k) {
    case irq_kind::intx: return "INTx";
    case irq_kind::msi: return "MSI";
    case irq_kind::msix: return "MSI-X";
    case irq_kind::request: return "REQ";
    }
    return "?";
}

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

class kernel_function final : public function {
public:
    kernel_function(std::string bdf, attached_device dev, const open_options& options)
        : _bdf(std::move(bdf)), _device(std::move(dev.device)), _space(std::move(dev.space)),
          _sysfs_root(options.sysfs_root), _dma_limit(options.dma_limit) {}
    ~kernel_function() override { release(); }

    // VFIO_DEVICE_GET_INFO and the IOVA allocator over what the IOMMU reported.
    result<void> init() {
        vfio_device_info info{};
        info.argsz = sizeof info;
        if (ioctl(_device.get(), VFIO_DEVICE_GET_INFO, &info) != 0) {
            return std::unexpected(os_error("VFIO_DEVICE_GET_INFO", _bdf, errno));
        }
        if ((info.flags & VFIO_DEVICE_FLAGS_PCI) == 0) {
            return std::unexpected(fail("VFIO_DEVICE_GET_INFO", _bdf, "not a PCI device", ENODEV));
        }
        _flags = info.flags;
        _num_regions = info.num_regions;
        _num_irqs = info.num_irqs;
        if (_space->translates()) {
            _iova.emplace(_space->iova_ranges(), _dma_limit);
            if (_iova->free_bytes() == 0) {
                return std::unexpected(fail("open", _bdf, "the IOMMU allows no IOVA at or below dma_limit " +
                                                              hex(_dma_limit), ERANGE));
            }
        }
        return {};
    }

    std::string_view name() const noexcept override { return _bdf; }

    // ---- configuration space: pread/pwrite at the config region's offset ----
    result<void> config_read(std::uint32_t offset, std::span<std::byte> out) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        return region_read(region::config, offset, out);
    }
    result<void> config_write(std::uint32_t offset, std::span<const std::byte> in) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        return region_write(region::config, offset, in);
    }

    result<region_info> get_region_info(region index) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        auto r = entry(index);
        if (!r) {
            return std::unexpected(r.error());
        }
        return (*r)->info;
    }

    result<void> region_read(region index, std::uint64_t offset, std::span<std::byte> out) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        auto r = checked_access(index, offset, out.size(), "pread");
        if (!r) {
            return std::unexpected(r.error());
        }
        const ssize_t n = pread(_device.get(), out.data(), out.size(), static_cast<off_t>(*r + offset));
        return finish_io("pread", index, offset, out.size(), n);
    }

    result<void> region_write(region index, std::uint64_t offset, std::span<const std::byte> in) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        auto r = checked_access(index, offset, in.size(), "pwrite");
        if (!r) {
            return std::unexpected(r.error());
        }
        const ssize_t n = pwrite(_device.get(), in.data(), in.size(), static_cast<off_t>(*r + offset));
        return finish_io("pwrite", index, offset, in.size(), n);
    }

    // Reserve the whole BAR inaccessible, then map each mappable area over it at its offset,
    // so a stray access between areas faults instead of landing elsewhere.
    result<bar_mapping> map_bar(region index, caching mode) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        const auto i = static_cast<unsigned>(index);
        if (i >= bar_count) {
            return std::unexpected(fail("map_bar", _bdf, "region " + std::to_string(i) + " is not a BAR", EINVAL));
        }
        if (_bars[i]) {
            return *_bars[i];
        }
        auto r = entry(index);
        if (!r) {
            return std::unexpected(r.error());
        }
        const region_entry& e = **r;
        const std::string what = "BAR" + std::to_string(i);
        if (e.info.size == 0) {
            return std::unexpected(fail("map_bar", _bdf, what + " is not implemented", ENODEV));
        }
        if (e.info.mappable.empty()) {
            return std::unexpected(fail("map_bar", _bdf, what + " has no mappable area; use region_read/region_write",
                                        ENOTSUP));
        }
        if (mode == caching::write_combining) {
            // vfio-pci maps every BAR uncached (Linux 6.12 vfio_pci_core.c vfio_pci_core_mmap:
            // vm_page_prot = pgprot_noncached); <linux/vfio.h> has no flag or feature asking
            // for write-combining. sysfs resourceN_wc would give it, but outside vfio-pci, which
            // zaps its own mappings while memory is disabled or the function resets
            // (vfio_pci_zap_and_down_write_memory_lock) and would not zap that one.
            log().debug("{}: {}: write-combining asked; vfio-pci maps uncached", _bdf, what);
        }
        const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
        const std::uint64_t length = round_up(e.info.size, page);
        void* base = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) {
            return std::unexpected(os_error("mmap reserving " + what, _bdf, errno));
        }
        const int prot = (e.info.readable ? PROT_READ : 0) | (e.info.writable ? PROT_WRITE : 0);
        bar_mapping m{index, static_cast<std::byte*>(base), e.info.size, {}, caching::uncached};
        for (const area& a : e.info.mappable) {
            if (a.offset % page != 0) {
                munmap(base, length);
                return std::unexpected(fail("mmap of " + what, _bdf, "area at " + hex(a.offset) + " is not page aligned", EINVAL));
            }
            const std::uint64_t bytes = std::min(round_up(a.size, page), length - a.offset);
            void* p = mmap(m.base + a.offset, bytes, prot, MAP_SHARED | MAP_FIXED, _device.get(),
                           static_cast<off_t>(e.fd_offset + a.offset));
            if (p == MAP_FAILED) {
                const int err = errno;
                munmap(base, length);
                return std::unexpected(os_error("mmap of " + what + " area at " + hex(a.offset), _bdf, err));
            }
            m.mapped.push_back(a);
        }
        // A child of fork() should get none of the BAR; vfio-pci's mappings are VM_IO, which
        // madvise refuses (mm/madvise.c: MADV_DONTFORK on VM_IO is EINVAL), so this holds for
        // the reserved range only. The DMA memory is never inherited (dma_memory.cpp).
        static_cast<void>(madvise(base, length, MADV_DONTFORK));
        _bar_lengths[i] = length;
        _bars[i] = m;
        log().debug("{}: {} mapped, {} bytes, {} areas", _bdf, what, e.info.size, m.mapped.size());
        return m;
    }

    // ---- DMA ----
    result<std::uint64_t> dma_map(const dma_memory& memory, std::size_t offset, std::size_t bytes,
                                  dma_access access) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (auto r = live("dma_map"); !r) {
            return std::unexpected(r.error());
        }
        if (!memory || bytes == 0 || offset % small_page != 0 || bytes % small_page != 0 ||
            offset > memory.size() || bytes > memory.size() - offset) {
            return std::unexpected(fail("dma_map", _bdf,
                                        "[" + hex(offset) + ", +" + hex(bytes) +
                                            ") is not a page-aligned range inside the " +
                                            hex(memory.size()) + "-byte DMA memory",
                                        EINVAL));
        }
        const std::byte* va = memory.data() + offset;
        std::uint64_t iova = 0;
        if (_space->translates()) {
            auto got = allocate_iova(memory, offset, bytes);
            if (!got) {
                return std::unexpected(got.error());
            }
            iova = *got;
        }
        auto mapped = _space->map(va, iova, bytes, access);
        if (!mapped) {
            if (_space->translates()) {
                _iova->release(iova, bytes);
            }
            const int err = mapped.error().os_errno;
            if (err == ENOSPC || err == ENOMEM) {
                map_attempt what{_space->type1(), bytes, _mapped_bytes, _dma.size(),
                                 read_map_limits(_sysfs_root)};
                return std::unexpected(map_error(_space->map_call(), _bdf, err, what));
            }
            return std::unexpected(mapped.error());
        }
        if (_dma.contains(*mapped)) {
            // only in no-IOMMU mode, where the address is the memory's own: one record per range
            (void)_space->unmap(*mapped, bytes);
            return std::unexpected(fail("dma_map", _bdf, "memory at device address " + hex(*mapped) +
                                                             " is already mapped",
                                        EEXIST));
        }
        _dma[*mapped] = bytes;
        _mapped_bytes += bytes;
        return *mapped;
    }

    result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (auto r = live("dma_unmap"); !r) {
            return std::unexpected(r.error());
        }
        const auto it = _dma.find(iova);
        if (it == _dma.end() || it->second != bytes) {
            return std::unexpected(fail("dma_unmap", _bdf,
                                        "[" + hex(iova) + ", +" + hex(bytes) +
                                            ") is not a range dma_map returned",
                                        EINVAL));
        }
        if (auto r = _space->unmap(iova, bytes); !r) {
            return std::unexpected(r.error());
        }
        if (_space->translates()) {
            _iova->release(iova, bytes);
        }
        _mapped_bytes -= bytes;
        _dma.erase(it);
        return {};
    }

    // ---- interrupts ----
    result<irq_info> get_irq_info(irq_kind kind) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (auto r = live("VFIO_DEVICE_GET_IRQ_INFO"); !r) {
            return std::unexpected(r.error());
        }
        const auto index = static_cast<std::uint32_t>(kind);
        irq_info out{kind};
        if (index >= _num_irqs) {
            return out;   // the function has no such interrupt: count 0
        }
        vfio_irq_info info{};
        info.argsz = sizeof info;
        info.index = index;
        if (ioctl(_device.get(), VFIO_DEVICE_GET_IRQ_INFO, &info) != 0) {
            return std::unexpected(os_error("VFIO_DEVICE_GET_IRQ_INFO", _bdf, errno));
        }
        out.count = info.count;
        out.eventfd = (info.flags & VFIO_IRQ_INFO_EVENTFD) != 0;
        out.maskable = (info.flags & VFIO_IRQ_INFO_MASKABLE) != 0;
        out.automasked = (info.flags & VFIO_IRQ_INFO_AUTOMASKED) != 0;
        return out;
    }

    // vfio-pci runs one kind at a time (INTx, MSI or MSI-X) and cannot resize MSI-X in place
    // (VFIO_IRQ_INFO_NORESIZE), so whatever is enabled is turned off first.
    result<std::vector<int>> enable_irqs(irq_kind kind, std::uint32_t count) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        auto info = get_irq_info(kind);
        if (!info) {
            return std::unexpected(info.error());
        }
        const std::string call = "VFIO_DEVICE_SET_IRQS (" + std::string(irq_name(kind)) + ", " +
                                 std::to_string(count) + " vectors)";
        if (count == 0 || count > info->count) {
            return std::unexpected(fail(call, _bdf, "the function offers " + std::to_string(info->count) +
                                                        " vectors of this kind",
                                        EINVAL));
        }
        if (!info->eventfd) {
            return std::unexpected(fail(call, _bdf, "this interrupt cannot signal an eventfd", ENOTSUP));
        }
        // the request IRQ runs beside them; enabling it again replaces its eventfd
        for (irq_kind k : {irq_kind::intx, irq_kind::msi, irq_kind::msix, irq_kind::request}) {
            const bool same_class = (k == irq_kind::request) == (kind == irq_kind::request);
            if (same_class && _irq_fds[static_cast<unsigned>(k)].size() != 0) {
                if (auto r = disable_irqs(k); !r) {
                    return std::unexpected(r.error());
                }
            }
        }
        std::vector<unique_fd> fds;
        for (std::uint32_t i = 0; i < count; ++i) {
            // non-blocking: readers poll or hand it to an event loop
            fds.emplace_back(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
            if (!fds.back()) {
                return std::unexpected(os_error("eventfd", _bdf, errno));
            }
        }
        // struct vfio_irq_set, then count s32 eventfds in data[]
        std::vector<std::uint32_t> buf((sizeof(vfio_irq_set) + count * sizeof(std::int32_t) + 3) / 4, 0);
        auto* set = reinterpret_cast<vfio_irq_set*>(buf.data());
        set->argsz = static_cast<std::uint32_t>(sizeof(vfio_irq_set) + count * sizeof(std::int32_t));
        set->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
        set->index = static_cast<std::uint32_t>(kind);
        set->start = 0;
        set->count = count;
        for (std::uint32_t i = 0; i < count; ++i) {
            const std::int32_t fd = fds[i].get();
            std::memcpy(reinterpret_cast<std::byte*>(set->data) + i * sizeof fd, &fd, sizeof fd);
        }
        if (ioctl(_device.get(), VFIO_DEVICE_SET_IRQS, set) != 0) {
            return std::unexpected(os_error(call, _bdf, errno));
        }
        std::vector<int> out;
        for (const unique_fd& fd : fds) {
            out.push_back(fd.get());
        }
        _irq_fds[static_cast<unsigned>(kind)] = std::move(fds);
        log().debug("{}: {} {} vectors on eventfds", _bdf, count, irq_name(kind));
        return out;
    }

    result<void> disable_irqs(irq_kind kind) override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (auto r = live("VFIO_DEVICE_SET_IRQS"); !r) {
            return std::unexpected(r.error());
        }
        auto& fds = _irq_fds[static_cast<unsigned>(kind)];
        if (fds.empty()) {
            return {};   // not enabled by us: nothing to do (the kernel refuses to disable a kind not running)
        }
        if (auto r = set_irqs_none(kind, VFIO_IRQ_SET_ACTION_TRIGGER, 0); !r) {
            return r;
        }
        fds.clear();
        return {};
    }

    // vfio-pci masks INTx when it fires (VFIO_IRQ_INFO_AUTOMASKED); after the device is
    // acknowledged, unmask or the next interrupt never comes (<linux/vfio.h>,
    // VFIO_IRQ_INFO_AUTOMASKED; VFIO_IRQ_SET_ACTION_UNMASK).
    result<void> unmask_intx() override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (auto r = live("VFIO_DEVICE_SET_IRQS"); !r) {
            return std::unexpected(r.error());
        }
        return set_irqs_none(irq_kind::intx, VFIO_IRQ_SET_ACTION_UNMASK, 1);
    }

    // ---- whole function ----
    result<void> reset() override {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (auto r = live("VFIO_DEVICE_RESET"); !r) {
            return std::unexpected(r.error());
        }
        if ((_flags & VFIO_DEVICE_FLAGS_RESET) == 0) {
            return std::unexpected(fail("VFIO_DEVICE_RESET", _bdf,
                                        "the function offers no reset (no FLR, PM or bus reset)", ENOTSUP));
        }
        if (ioctl(_device.get(), VFIO_DEVICE_RESET) != 0) {
            return std::unexpected(os_error("VFIO_DEVICE_RESET", _bdf, errno));
        }
        return {};
    }

    void release() noexcept override { release_device(false); }
    void let_go() noexcept override { release_device(true); }

    void release_device(bool placeholders) noexcept {
        std::scoped_lock hold(_lock);  // see function.hpp: one call at a time
        if (!_device) {
            return;
        }
        for (irq_kind k : {irq_kind::intx, irq_kind::msi, irq_kind::msix, irq_kind::request}) {
            auto& fds = _irq_fds[static_cast<unsigned>(k)];
            if (placeholders && !fds.empty()) {
                // the kernel lets go of them; pollers keep valid, silent fds (function.hpp)
                if (auto r = set_irqs_none(k, VFIO_IRQ_SET_ACTION_TRIGGER, 0); !r) {
                    log().debug("{}: let go: {}", _bdf, r.error().message);
                }
                std::move(fds.begin(), fds.end(), std::back_inserter(_kept_fds));
                fds.clear();
            } else if (auto r = disable_irqs(k); !r) {
                log().debug("{}: release: {}", _bdf, r.error().message);
            }
        }
        // stop the device's DMA before its memory goes away
        if (auto r = set_bus_master(false); !r) {
            log().debug("{}: release: bus master off: {}", _bdf, r.error().message);
        }
        for (unsigned i = 0; i < bar_count; ++i) {
            if (_bars[i]) {
                if (placeholders) {
                    map_placeholder(_bars[i]->base, _bar_lengths[i]);
                } else {
                    munmap(_bars[i]->base, _bar_lengths[i]);
                }
                _bars[i].reset();
            }
        }
        for (const auto& [iova, bytes] : _dma) {
            if (auto r = _space->unmap(iova, bytes); !r) {
                log().debug("{}: release: {}", _bdf, r.error().message);
            }
        }
        _dma.clear();
        _mapped_bytes = 0;
        _device.reset();
        _space->close();
        log().info("{}: released", _bdf);
    }

private:
    struct region_entry {
        region_info info;
        std::uint64_t fd_offset = 0;   // where the region lies in the device fd
    };

    result<void> live(std::string_view call) const {
        if (!_device) {
            return std::unexpected(fail(call, _bdf, "the function was released", EBADF));
        }
        return {};
    }

    // VFIO_DEVICE_GET_REGION_INFO, two passes: the kernel reports the size its capabilities
    // need in argsz (and leaves cap_offset 0) when the first buffer is too small. Cached.
    result<const region_entry*> entry(region index) {
        if (auto r = live("VFIO_DEVICE_GET_REGION_INFO"); !r) {
            return std::unexpected(r.error());
        }
        const auto i = static_cast<unsigned>(index);
        if (i >= _num_regions || i >= _regions.size()) {
            return std::unexpected(fail("VFIO_DEVICE_GET_REGION_INFO", _bdf,
                                        "no region " + std::to_string(i), EINVAL));
        }
        if (_regions[i]) {
            return &*_regions[i];
        }
        std::vector<std::uint64_t> buf((sizeof(vfio_region_info) + 7) / 8, 0);
        for (int pass = 0; pass < 3; ++pass) {
            auto* ri = reinterpret_cast<vfio_region_info*>(buf.data());
            const auto size = static_cast<std::uint32_t>(buf.size() * 8);
            ri->argsz = size;
            ri->index = i;
            if (ioctl(_device.get(), VFIO_DEVICE_GET_REGION_INFO, ri) != 0) {
                return std::unexpected(os_error("VFIO_DEVICE_GET_REGION_INFO", _bdf, errno));
            }
            if (ri->argsz > size) {
                buf.assign((ri->argsz + 7) / 8, 0);
                continue;
            }
            const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(buf.data()),
                                                   std::max<std::size_t>(ri->argsz, sizeof(vfio_region_info)));
            auto info = parse_region_info(bytes, index, _bdf);
            if (!info) {
                return std::unexpected(info.error());
            }
            _regions[i] = region_entry{std::move(*info), ri->offset};
            return &*_regions[i];
        }
        return std::unexpected(fail("VFIO_DEVICE_GET_REGION_INFO", _bdf, "the answer kept growing", EPROTO));
    }

    // The fd offset of `index` once [offset, offset + bytes) is checked against its size.
    result<std::uint64_t> checked_access(region index, std::uint64_t offset, std::size_t bytes,
                                         std::string_view call) {
        const std::string what = std::string(call) + " of region " + std::to_string(static_cast<unsigned>(index));
        if (auto l = live(what); !l) {
            return std::unexpected(l.error());
        }
        auto r = entry(index);
        if (!r) {
            return std::unexpected(r.error());
        }
        const region_info& info = (*r)->info;
        if (offset > info.size || bytes > info.size - offset) {
            return std::unexpected(fail(what, _bdf,
                                        "[" + hex(offset) + ", +" + std::to_string(bytes) +
                                            ") lies outside its " + hex(info.size) + " bytes",
                                        EINVAL));
        }
        return (*r)->fd_offset;
    }

    result<void> finish_io(std::string_view call, region index, std::uint64_t offset, std::size_t bytes,
                           ssize_t n) {
        const std::string what = std::string(call) + " of region " + std::to_string(static_cast<unsigned>(index)) +
                                 " at " + hex(offset);
        if (n < 0) {
            return std::unexpected(os_error(what, _bdf, errno));
        }
        if (static_cast<std::size_t>(n) != bytes) {
            return std::unexpected(fail(what, _bdf, "moved " + std::to_string(n) + " of " +
                                                        std::to_string(bytes) + " bytes", EIO));
        }
        return {};
    }

    // IOVAs for a mapping: 2 MiB aligned when the memory is hugetlb and the range is whole huge
    // pages (so the IOMMU can use its own large pages), else the IOMMU's page alignment.
    result<std::uint64_t> allocate_iova(const dma_memory& memory, std::size_t offset, std::size_t bytes) {
        const std::uint64_t align = std::max(small_page, _space->iova_alignment());
        std::optional<std::uint64_t> iova;
        if (memory.huge() && offset % dma_memory::huge_page == 0 && bytes % dma_memory::huge_page == 0) {
            iova = _iova->allocate(bytes, std::max<std::uint64_t>(align, dma_memory::huge_page));
        }
        if (!iova) {
            iova = _iova->allocate(bytes, align);
        }
        if (!iova) {
            return std::unexpected(fail("dma_map", _bdf,
                                        "no free IOVA range of " + hex(bytes) + " bytes at or below dma_limit " +
                                            hex(_dma_limit) + " (" + hex(_iova->free_bytes()) + " bytes free, " +
                                            std::to_string(_dma.size()) + " mappings)",
                                        ENOSPC));
        }
        return *iova;
    }

    result<void> set_irqs_none(irq_kind kind, std::uint32_t action, std::uint32_t count) {
        vfio_irq_set set{};
        set.argsz = sizeof set;
        set.flags = VFIO_IRQ_SET_DATA_NONE | action;
        set.index = static_cast<std::uint32_t>(kind);
        set.start = 0;
        set.count = count;
        if (ioctl(_device.get(), VFIO_DEVICE_SET_IRQS, &set) != 0) {
            const char* verb = action == VFIO_IRQ_SET_ACTION_UNMASK ? "unmask" : "disable";
            return std::unexpected(os_error("VFIO_DEVICE_SET_IRQS (" + std::string(verb) + " " +
                                                std::string(irq_name(kind)) + ")",
                                            _bdf, errno));
        }
        return {};
    }

    // Control calls may come from several threads (the firmware layer's event thread reads
    // health registers while a caller maps memory). Recursive: calls nest (config_read ->
    // region_read, release -> disable_irqs). First come, first served (fifo_mutex.hpp).
    fifo_recursive_mutex _lock;
    std::string _bdf;
    unique_fd _device;
    std::unique_ptr<dma_space> _space;
    std::string _sysfs_root;
    std::uint64_t _dma_limit;
    std::uint32_t _flags = 0;
    std::uint32_t _num_regions = 0;
    std::uint32_t _num_irqs = 0;
    std::array<std::optional<region_entry>, VFIO_PCI_NUM_REGIONS> _regions;
    std::array<std::optional<bar_mapping>, bar_count> _bars;
    std::array<std::uint64_t, bar_count> _bar_lengths{};
    std::optional<iova_allocator> _iova;
    std::map<std::uint64_t, std::uint64_t> _dma;   // device address -> bytes
    std::uint64_t _mapped_bytes = 0;
    std::array<std::vector<unique_fd>, irq_kind_count> _irq_fds;
    std::vector<unique_fd> _kept_fds;   // let_go(): the eventfds pollers may still hold
};

}  // namespace

}  // namespace rig::driver::vfio

namespace rig::driver {

result<std::unique_ptr<function>> open_kernel_vfio(std::string_view bdf, const open_options& options) {
    using namespace vfio;
    const sysfs sys(options.sysfs_root);
    auto f = sys.function(bdf);
    if (!f) {
        return std::unexpected(fail("open", bdf, f.error().message.substr(f.error().message.find(": ") + 2),
                                    f.error().os_errno));
    }
    if (!f->iommu_group) {
        return std::unexpected(fail("open", bdf,
                                    "no IOMMU group (" + sys.device_dir(bdf) +
                                        "/iommu_group is missing): the IOMMU is off or absent; turn "
                                        "it on (intel_iommu=on or amd_iommu=on on the kernel command "
                                        "line, VT-d/AMD-Vi in the firmware)",
                                    ENODEV));
    }
    // vfio-pci, or a vendor variant of it (mlx5_vfio_pci, ...), must own the function
    if (f->driver.find("vfio") == std::string::npos) {
        return std::unexpected(fail("open", bdf,
                                    (f->driver.empty() ? std::string("not bound to any driver")
                                                       : "bound to " + f->driver + ", not vfio-pci") +
                                        "; bind it with: rig-devbind --bind vfio-pci " + std::string(bdf),
                                    ENODEV));
    }
    const path_facts facts = find_path_facts(*f, options);
    auto chosen = choose_path(options.iommu, facts, *f, options);
    if (!chosen) {
        return std::unexpected(chosen.error());
    }
    auto attached = *chosen == path::iommufd ? open_iommufd_path(*f, options)
                                             : open_group_path(*f, options, sys, *chosen == path::noiommu);
    if (!attached && *chosen == path::iommufd && options.iommu == iommu_mode::automatic && facts.group_node) {
        // automatic: the group path is still there when the cdev one is refused (e.g. only the
        // group node was made accessible to this user)
        log().info("{}: iommufd path failed ({}); trying the group path", bdf, attached.error().message);
        attached = open_group_path(*f, options, sys, false);
    }
    if (!attached) {
        return std::unexpected(attached.error());
    }
    const std::string how = attached->how;
    const std::string mode(attached->space->mode_name());
    auto fn = std::make_unique<kernel_function>(f->bdf, std::move(*attached), options);
    if (auto r = fn->init(); !r) {
        return std::unexpected(r.error());
    }
    log().info("{}: opened through {} ({})", bdf, mode, how);
    return fn;
}

}  // namespace rig::driver
