#pragma once
// The PCI seam: everything above driver/ reaches a NIC through `function`, whether the NIC is a
// card bound to vfio-pci (kernel VFIO: driver/vfio/) or a function of the device model
// (vfio-user: driver/vfio_user/). Nothing above bypasses it. docs/architecture.md, "The PCI seam".
//
// Region and IRQ indexes, flags and semantics are those of <linux/vfio.h>, which vfio-user
// shares (QEMU docs/interop/vfio-user.rst, "VFIO_USER_DEVICE_GET_REGION_INFO" and
// "VFIO_USER_DEVICE_GET_IRQ_INFO").
//
// Threads: every call is thread-safe; a back end runs one control call at a time, in the order
// the threads asked (fifo_mutex.hpp: the firmware layer's event thread writes its EQ doorbell
// between another thread's command doorbells). Mapped BAR pages and DMA memory are plain
// memory; use them from any thread.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver/dma_memory.hpp"
#include "driver/error.hpp"
#include "rig/open_options.hpp"

namespace rig::driver {

// VFIO_PCI_*_REGION_INDEX
enum class region : unsigned {
    bar0 = 0, bar1 = 1, bar2 = 2, bar3 = 3, bar4 = 4, bar5 = 5, rom = 6, config = 7,
};
inline constexpr unsigned bar_count = 6;

// A window of a region that may be mapped into this process (VFIO_REGION_INFO_CAP_SPARSE_MMAP).
struct area {
    std::uint64_t offset;   // from the start of the region
    std::uint64_t size;
};

struct region_info {
    region index;
    std::uint64_t size = 0;
    bool readable = false;
    bool writable = false;
    std::vector<area> mappable;   // empty: the region can only be read and written by call
};

// The memory type of a BAR mapping: what map_bar asks for, and what a mapping really has.
enum class caching {
    uncached,          // device memory, each access sent alone and in order (x86 UC, arm64
                       // Device-nGnRnE): kernel VFIO's every BAR mapping
    write_combining,   // device memory whose stores may merge in a CPU buffer until
                       // mmio_flush (x86 WC, arm64 Normal-NC): what rdma-core maps
                       // BlueFlame/UAR pages as; no back end Rig has gives it today
    write_back,        // ordinary cached memory: a vfio-user server's shared pages (the model
                       // polls them), whatever was asked
};
std::string_view to_string(caching c) noexcept;   // function.cpp

// A BAR mapped into this process. The region's whole size is reserved; its mappable areas are
// mapped at their own offsets from `base`, the rest is inaccessible (a stray access faults
// instead of touching something else). Registers outside the areas are reached through
// function::region_read / region_write.
struct bar_mapping {
    region index;
    std::byte* base = nullptr;
    std::uint64_t size = 0;
    std::vector<area> mapped;
    caching mode = caching::uncached;   // what the mapping really is, not what was asked

    // true when [offset, offset + bytes) lies inside one mapped area
    bool covers(std::uint64_t offset, std::uint64_t bytes) const noexcept {
        for (const area& a : mapped) {
            if (offset >= a.offset && bytes <= a.size && offset - a.offset <= a.size - bytes) {
                return true;
            }
        }
        return false;
    }
};

// VFIO_PCI_*_IRQ_INDEX. intx, msi and msix are the function's interrupts (one kind at a time);
// request is VFIO_PCI_REQ_IRQ_INDEX, the kernel asking the user to let go of the device (an
// unbind or a hot unplug is waiting: vfio_pci_core_request), alongside any of them.
enum class irq_kind : unsigned { intx = 0, msi = 1, msix = 2, request = 4 };
inline constexpr unsigned irq_kind_count = 5;   // VFIO_PCI_NUM_IRQS (3, ERR, is not used)

struct irq_info {
    irq_kind kind;
    std::uint32_t count = 0;   // vectors the function offers of this kind
    bool eventfd = false;      // VFIO_IRQ_INFO_EVENTFD
    bool maskable = false;
    bool automasked = false;   // INTx: masked after each trigger until unmask_intx()
};

enum class dma_access : std::uint32_t { read = 1, write = 2, read_write = 3 };

class function {
public:
    virtual ~function() = default;
    function() = default;
    function(const function&) = delete;
    function& operator=(const function&) = delete;

    // "0000:3b:00.0" or "vfio-user:/run/rig/mlx5-0.sock": what errors and logs name.
    virtual std::string_view name() const noexcept = 0;

    // ---- configuration space (region 7) ----
    virtual result<void> config_read(std::uint32_t offset, std::span<std::byte> out) = 0;
    virtual result<void> config_write(std::uint32_t offset, std::span<const std::byte> in) = 0;

    // ---- regions ----
    virtual result<region_info> get_region_info(region index) = 0;
    virtual result<void> region_read(region index, std::uint64_t offset, std::span<std::byte> out) = 0;
    virtual result<void> region_write(region index, std::uint64_t offset,
                                      std::span<const std::byte> in) = 0;
    // Maps the mappable areas of a BAR. The mapping stays valid until release(); asking again
    // for the same BAR and caching returns the same mapping. Each back end gives what it can
    // and the mapping's `mode` says what that is:
    //  - kernel VFIO: uncached, whatever is asked: vfio-pci maps every BAR with
    //    pgprot_noncached (Linux 6.12 vfio_pci_core.c vfio_pci_core_mmap) and <linux/vfio.h>
    //    has no region flag or device feature asking otherwise; a write_combining request gets
    //    the uncached mapping;
    //  - vfio-user: write_back (the server's shared memory file is ordinary memory); a
    //    write_combining request gets a second mapping of the same pages, apart from the one
    //    bring-up's uncached request made, as a card's WC UAR mapping would be.
    virtual result<bar_mapping> map_bar(region index, caching mode) = 0;

    // ---- DMA: the device reaches `memory` at the returned IOVA ----
    // [offset, offset + bytes) of memory must lie inside it and be page aligned.
    virtual result<std::uint64_t> dma_map(const dma_memory& memory, std::size_t offset,
                                          std::size_t bytes, dma_access access) = 0;
    // Exactly a range an earlier dma_map returned.
    virtual result<void> dma_unmap(std::uint64_t iova, std::size_t bytes) = 0;

    // ---- interrupts, delivered as eventfds ----
    virtual result<irq_info> get_irq_info(irq_kind kind) = 0;
    // Wires vectors [0, count) of `kind` to new eventfds, which the function owns until
    // disable_irqs or release; returns them in vector order.
    virtual result<std::vector<int>> enable_irqs(irq_kind kind, std::uint32_t count) = 0;
    virtual result<void> disable_irqs(irq_kind kind) = 0;
    virtual result<void> unmask_intx() = 0;

    // ---- whole function ----
    virtual result<void> reset() = 0;
    // Bus mastering off, interrupts off, every DMA mapping and BAR mapping removed, every fd
    // closed. A second release does nothing. The destructor releases.
    virtual void release() noexcept = 0;
    // release() while other threads may still touch the function (the device's removal was
    // requested and its user did not let go in time): each BAR mapping is replaced by private
    // anonymous memory at the same address (stores land there, loads read zero: no SIGBUS, as
    // DPDK remaps a removed device's BARs), and the interrupts' eventfds stay open, never
    // signalled again, until the object is destroyed (a thread polling them sees no reused fd).
    // The device is let go all the same: its fd closed, its DMA unmapped. (The default, for a
    // back end that maps no BAR: release().)
    virtual void let_go() noexcept { release(); }

    // ---- conveniences over config space (non-virtual: same for every back end) ----
    result<std::uint16_t> config_read16(std::uint32_t offset);
    result<std::uint32_t> config_read32(std::uint32_t offset);
    result<void> config_write16(std::uint32_t offset, std::uint16_t value);
    result<void> set_bus_master(bool on);   // PCI command register bit 2
};

// How to reach the IOMMU and the server: the public API's types (nic_options::open).
using ::rig::iommu_mode;
using ::rig::open_options;

// let_go()'s stand-in for a BAR mapping: private anonymous memory mapped over [base, base +
// length) in place (MAP_FIXED replaces the old mapping in one step), kept for the process's life.
void map_placeholder(void* base, std::size_t length) noexcept;

// "0000:bb:dd.f" (kernel VFIO) or "vfio-user:PATH" (a vfio-user server, e.g. rig-nicsim).
result<std::unique_ptr<function>> open(std::string_view where, const open_options& options = {});

}  // namespace rig::driver
