#pragma once
// A function's MSI-X table and Pending Bit Array as trapped BAR storage, family-neutral
// (PCI Local Bus 3.0 §6.8.2: 16 bytes a vector, message address low/high, data, vector control
// with its mask bit 0; the PBA one bit a vector, in qwords).
//
//   pci::msix_table msix({.vectors = 64, .table_bar = 0, .table_offset = t, .pba_bar = 0, .pba_offset = p});
//   config.add_msix(0x40, msix.location());
//   if (msix.contains(bar, offset, n)) return msix.read(bar, offset, out);   // in the BAR's trap
//   msix.raise(server, vector);   // an interrupt, as the client wired it
//
// Over vfio-user the table is plain storage: the server sees no vector programming, the client
// wires each vector to an eventfd with VFIO_USER_DEVICE_SET_IRQS and masks it there
// (QEMU docs/interop/vfio-user.rst; QEMU's vfio-user-pci emulates the table itself). So a
// vector is raised through the server's irq path (vfio_user::server::trigger), which delivers
// it to the eventfd the client gave, or drops it when there is none; the table's mask bits and
// the capability's enable/function mask are the client's, readable here for a family that
// wants them. The PBA reads 0 (nothing is left pending: the client's eventfd holds it) and
// takes no write.
//
// Windows: the table's trapped window is its bytes rounded up to a 4 KiB page, the PBA's
// likewise, so that a BAR's shared (mapped) pages never meet them; inside the table's window
// every byte written reads back (the pad after the last vector too), inside the PBA's none does.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/pci/config_space.hpp"

namespace rig::sim::vfio_user {
class server;
}

namespace rig::sim::pci {

inline constexpr std::size_t msix_entry_bytes = 16;
inline constexpr std::size_t msix_page_bytes = 4096;
inline constexpr std::uint32_t msix_vector_masked = 0x1;  // vector control bit 0
inline constexpr std::uint16_t msix_max_vectors = 2048;   // the table size field: 11 bits

// The trapped windows' sizes for `vectors` (rounded up to pages).
std::uint64_t msix_table_window(std::uint16_t vectors);
std::uint64_t msix_pba_window(std::uint16_t vectors);

class msix_table {
public:
    // Misuse (vectors 0 or over 2048, a BAR over 5, an offset not 8-byte aligned, the table
    // and PBA windows overlapping) throws std::invalid_argument.
    explicit msix_table(const msix_location& where);

    const msix_location& location() const noexcept { return _where; }
    std::uint16_t vectors() const noexcept { return _where.vectors; }

    // Whether [offset, offset + n) of BAR `bar` touches the table's or the PBA's window.
    bool contains(unsigned bar, std::uint64_t offset, std::size_t n) const;
    // An access of BAR `bar` that contains() says touches a window; bytes outside both read 0
    // (writes to them vanish).
    void read(unsigned bar, std::uint64_t offset, std::span<std::byte> out) const;
    void write(unsigned bar, std::uint64_t offset, std::span<const std::byte> in);

    // Entry `vector` as the client last wrote it.
    std::uint64_t address(std::uint16_t vector) const;
    std::uint32_t data(std::uint16_t vector) const;
    bool masked(std::uint16_t vector) const;  // vector control bit 0

    // Raises `vector` through the server's irq path; false when the client wired no eventfd
    // to it (or the vector is out of range).
    bool raise(vfio_user::server& s, std::uint16_t vector) const;

    // A function reset: every entry back to 0 (the reset state the model has always had).
    void reset();

private:
    std::uint32_t entry_dword(std::uint16_t vector, unsigned dword) const;

    msix_location _where;
    std::vector<std::byte> _table;  // the table's window
    std::uint64_t _pba_window;
};

}  // namespace rig::sim::pci
