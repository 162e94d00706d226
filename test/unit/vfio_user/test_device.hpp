#pragma once
// A small PCI function for the vfio-user tests, served by sim/vfio_user.
//
// Config space: 4 KiB, vendor 0x1234 device 0xbeef unless constructed with others (a test of
// rig::nic::open's choice of family serves 8086:1572 or 14e4:1750), class 0x020000; the command register (0x04)
// and a scratch dword (0x40) are writable, the rest reads as written here.
// BAR0: 16 KiB. Page 0 is trapped registers (below); pages 1-3 are shared through a memfd, as
// two sparse areas [0x1000, 0x2000) and [0x2000, 0x4000).
// BAR2: 4 KiB, all trapped, reads 0xab. Other BARs absent.
// IRQs: INTx 1, MSI-X 4.
#include <array>
#include <cstdint>
#include <mutex>

#include "sim/vfio_user/device.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::test {

namespace reg {
inline constexpr std::uint32_t id = 0x00;           // RO "RIG1"
inline constexpr std::uint32_t scratch = 0x04;      // RW, cleared by reset
inline constexpr std::uint32_t dma_src = 0x08;      // 64-bit IOVA
inline constexpr std::uint32_t dma_dst = 0x10;      // 64-bit IOVA
inline constexpr std::uint32_t dma_len = 0x18;
inline constexpr std::uint32_t dma_go = 0x1c;       // WO: copy src -> dst, set status, raise dma_vector
inline constexpr std::uint32_t dma_status = 0x20;   // RO: 0 idle, 1 done, 2 refused
inline constexpr std::uint32_t dma_vector = 0x24;   // MSI-X vector raised after a copy
inline constexpr std::uint32_t raise_msix = 0x28;   // WO: vector
inline constexpr std::uint32_t raise_intx = 0x2c;   // WO
inline constexpr std::uint32_t stall_ms = 0x30;     // WO: the device takes this long to answer
inline constexpr std::uint32_t windows = 0x34;      // RO: DMA windows the server holds
inline constexpr std::uint32_t faults = 0x38;       // RO: DMA faults so far
inline constexpr std::uint32_t served = 0x3c;       // RO: clients served (ended) so far
inline constexpr std::uint32_t peek = 0x40;         // RO: the dword at BAR0 + 0x1000 (shared)
inline constexpr std::uint32_t poke = 0x44;         // WO: stores the dword at BAR0 + 0x1004
inline constexpr std::uint32_t id_value = 0x31474952;
}  // namespace reg

inline constexpr std::uint16_t vendor_id = 0x1234;
inline constexpr std::uint16_t device_id = 0xbeef;
inline constexpr std::uint64_t bar0_size = 16 * 1024;

class test_device final : public sim::vfio_user::device {
public:
    explicit test_device(std::uint16_t pci_vendor = vendor_id, std::uint16_t pci_device = device_id);
    void attach(sim::vfio_user::server& s) { _server = &s; }

    sim::vfio_user::region_desc region(unsigned index) override;
    std::uint32_t irq_count(sim::vfio_user::irq kind) override;
    bool read(unsigned region, std::uint64_t offset, std::span<std::byte> out) override;
    bool write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) override;
    void reset() override;

    std::byte* bar0() const noexcept { return _bar0.data(); }
    std::uint32_t scratch() const;

private:
    std::uint32_t reg32(std::uint32_t off) const;
    void act(std::uint32_t off, std::uint32_t value);

    mutable std::mutex _lock;
    sim::vfio_user::server* _server = nullptr;
    std::array<std::byte, 4096> _config{};
    std::array<std::byte, 4096> _regs{};
    sim::vfio_user::shared_memory _bar0;
};

}  // namespace rig::test
