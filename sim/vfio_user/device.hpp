#pragma once
// What a device model (the mlx5 and bnxt function models) gives the vfio-user server: its
// regions, interrupts and reset. The server speaks the protocol; the device only sees accesses.
// QEMU docs/interop/vfio-user.rst: VFIO_USER_DEVICE_GET_REGION_INFO (regions, sparse mmap),
// VFIO_USER_DEVICE_GET_IRQ_INFO / SET_IRQS (IRQs), VFIO_USER_DEVICE_RESET (reset).
//
// Regions are indexed as in vfio-pci: BAR0-5 = 0-5, ROM = 6, configuration space = 7, VGA = 8.
// A region's pages are either *shared* (a memfd the client maps; the device polls them, spec
// "Region Information": no message is sent for an access to a mapped page) or *trapped* (each
// client access arrives as VFIO_USER_REGION_READ/WRITE and calls read/write below, in order, on
// the server's thread).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rig::sim::vfio_user {

inline constexpr unsigned region_count = 9;   // VFIO_PCI_NUM_REGIONS
inline constexpr unsigned config_region = 7;
enum class irq : unsigned { intx = 0, msi = 1, msix = 2, err = 3, req = 4 };
inline constexpr unsigned irq_kind_count = 5;   // VFIO_PCI_NUM_IRQS

// [offset, offset + size) of a region, page aligned
struct shared_area {
    std::uint64_t offset;
    std::uint64_t size;
};

struct region_desc {
    std::uint64_t size = 0;   // 0: the region does not exist
    bool readable = false;
    bool writable = false;
    // Shared pages: region offset X is `fd` at fd_offset + X, and the device's own mapping of it
    // at memory + X. Areas outside `shared` stay trapped. fd -1: everything trapped.
    int fd = -1;
    std::uint64_t fd_offset = 0;
    std::byte* memory = nullptr;
    std::vector<shared_area> shared;
};

class device {
public:
    virtual ~device() = default;

    virtual region_desc region(unsigned index) = 0;
    virtual std::uint32_t irq_count(irq kind) = 0;

    // A trapped access inside the region (the server checked the bounds and the region's
    // read/write flags). REGION_READ/WRITE on shared pages are served from `memory` and do not
    // come here. false: the access failed (the client gets EIO).
    virtual bool read(unsigned region, std::uint64_t offset, std::span<std::byte> out) = 0;
    virtual bool write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) = 0;

    // VFIO_USER_DEVICE_RESET. DMA windows and interrupt wiring are the client's and stay.
    virtual void reset() = 0;

    // A client came / went. The server drops the client's DMA windows and eventfds (spec
    // "Socket Disconnection Behavior") right after disconnected() returns, so a device stops its
    // DMA here (the mlx5 model resets, as vfio-pci resets a device on its last close).
    virtual void connected() {}
    virtual void disconnected() {}
    // The server is being destroyed (its thread has stopped; its DMA space and interrupts still
    // exist until this returns): a device whose own threads use them stops doing so here.
    virtual void server_closing() {}
};

// Page-aligned memory shared with the client by fd: a memfd mapped into the model.
class shared_memory {
public:
    shared_memory() = default;
    explicit shared_memory(std::size_t bytes);   // throws std::system_error
    shared_memory(shared_memory&& o) noexcept;
    shared_memory& operator=(shared_memory&& o) noexcept;
    shared_memory(const shared_memory&) = delete;
    shared_memory& operator=(const shared_memory&) = delete;
    ~shared_memory();

    int fd() const noexcept { return _fd; }
    std::byte* data() const noexcept { return _data; }
    std::size_t size() const noexcept { return _size; }

private:
    int _fd = -1;
    std::byte* _data = nullptr;
    std::size_t _size = 0;
};

}  // namespace rig::sim::vfio_user
