// The MSI-X table and PBA as trapped BAR storage (msix.hpp; PCI Local Bus 3.0 §6.8.2).
#include "sim/pci/msix.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/vfio_user/server.hpp"

namespace rig::sim::pci {

namespace {

constexpr std::uint64_t round_up_page(std::uint64_t n) {
    return (n + msix_page_bytes - 1) / msix_page_bytes * msix_page_bytes;
}

bool overlaps(std::uint64_t a, std::uint64_t a_bytes, std::uint64_t b, std::uint64_t b_bytes) {
    return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

std::uint64_t msix_table_window(std::uint16_t vectors) {
    return round_up_page(std::uint64_t{vectors} * msix_entry_bytes);
}

std::uint64_t msix_pba_window(std::uint16_t vectors) {
    return round_up_page((std::uint64_t{vectors} + 63) / 64 * 8);  // qwords of pending bits
}

msix_table::msix_table(const msix_location& where)
    : _where(where), _table(static_cast<std::size_t>(msix_table_window(where.vectors))),
      _pba_window(msix_pba_window(where.vectors)) {
    if (where.vectors == 0 || where.vectors > msix_max_vectors || where.table_bar >= bar_count ||
        where.pba_bar >= bar_count || where.table_offset % 8 != 0 || where.pba_offset % 8 != 0 ||
        (where.table_bar == where.pba_bar &&
         overlaps(where.table_offset, _table.size(), where.pba_offset, _pba_window))) {
        throw std::invalid_argument("MSI-X: 1..2048 vectors, table and PBA in BAR0..5 at 8-byte aligned offsets, "
                                    "their page-rounded windows apart");
    }
}

bool msix_table::contains(unsigned bar, std::uint64_t offset, std::size_t n) const {
    return (bar == _where.table_bar && overlaps(offset, n, _where.table_offset, _table.size())) ||
           (bar == _where.pba_bar && overlaps(offset, n, _where.pba_offset, _pba_window));
}

void msix_table::read(unsigned bar, std::uint64_t offset, std::span<std::byte> out) const {
    std::fill(out.begin(), out.end(), std::byte{0});  // the PBA: nothing pending
    if (bar != _where.table_bar) {
        return;
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at >= _where.table_offset && at - _where.table_offset < _table.size()) {
            out[i] = _table[static_cast<std::size_t>(at - _where.table_offset)];
        }
    }
}

void msix_table::write(unsigned bar, std::uint64_t offset, std::span<const std::byte> in) {
    if (bar != _where.table_bar) {
        return;  // the PBA is read-only
    }
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at >= _where.table_offset && at - _where.table_offset < _table.size()) {
            _table[static_cast<std::size_t>(at - _where.table_offset)] = in[i];
        }
    }
}

std::uint32_t msix_table::entry_dword(std::uint16_t vector, unsigned dword) const {
    if (vector >= _where.vectors) {
        return 0;
    }
    const std::byte* p = _table.data() + std::size_t{vector} * msix_entry_bytes + 4 * dword;
    return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
           std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}

std::uint64_t msix_table::address(std::uint16_t vector) const {
    return std::uint64_t{entry_dword(vector, 1)} << 32 | entry_dword(vector, 0);
}
std::uint32_t msix_table::data(std::uint16_t vector) const { return entry_dword(vector, 2); }
bool msix_table::masked(std::uint16_t vector) const { return (entry_dword(vector, 3) & msix_vector_masked) != 0; }

bool msix_table::raise(vfio_user::server& s, std::uint16_t vector) const {
    return vector < _where.vectors && s.trigger(vfio_user::irq::msix, vector);
}

void msix_table::reset() {
    std::fill(_table.begin(), _table.end(), std::byte{0});
}

}  // namespace rig::sim::pci
