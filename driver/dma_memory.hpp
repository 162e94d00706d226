#pragma once
// DMA memory: one memfd-backed allocation, mapped shared into this process. The same pages can
// then be pinned by the kernel IOMMU (by address: VFIO_IOMMU_MAP_DMA, IOMMU_IOAS_MAP) and handed
// to a vfio-user server (by fd + offset: VFIO_USER_DMA_MAP, QEMU
// docs/interop/vfio-user.rst). docs/architecture.md, "The PCI seam".
//
// hugetlb 2 MiB pages are used when the host has them free (fewer IOMMU entries, never moved
// by the kernel); otherwise 4 KiB pages, and the reason is logged once per process.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "driver/error.hpp"

namespace rig::driver {

enum class page_choice { automatic, small_only, huge_only };

class dma_memory {
public:
    static constexpr std::size_t small_page = 4096;
    static constexpr std::size_t huge_page = 2 * 1024 * 1024;

    // At least `bytes`, rounded up to whole pages, zero-filled.
    static result<dma_memory> allocate(std::size_t bytes, page_choice pages = page_choice::automatic);
    // Memory the caller already has and keeps: `bytes` at `data` (whole pages), mapped from `fd`
    // at `fd_offset` when it has a file (memfd, hugetlbfs; -1: none). Nothing is unmapped or
    // closed when it goes. Its page size is the file's (hugetlbfs: 2 MiB), else 4 KiB.
    static dma_memory borrow(std::byte* data, std::size_t bytes, int fd = -1, std::uint64_t fd_offset = 0);

    dma_memory() = default;
    dma_memory(dma_memory&& o) noexcept { swap(o); }
    dma_memory& operator=(dma_memory&& o) noexcept {
        dma_memory tmp(std::move(o));
        swap(tmp);
        return *this;
    }
    dma_memory(const dma_memory&) = delete;
    dma_memory& operator=(const dma_memory&) = delete;
    ~dma_memory();

    std::byte* data() const noexcept { return _data; }
    std::size_t size() const noexcept { return _size; }
    std::span<std::byte> bytes() const noexcept { return {_data, _size}; }
    int fd() const noexcept { return _fd; }
    // Where data() lies in fd()'s file (0 for memory of allocate()).
    std::uint64_t fd_offset() const noexcept { return _fd_offset; }
    bool owned() const noexcept { return _owned; }
    std::size_t page_size() const noexcept { return _page; }
    bool huge() const noexcept { return _page == huge_page; }
    explicit operator bool() const noexcept { return _data != nullptr; }

private:
    void swap(dma_memory& o) noexcept {
        std::swap(_data, o._data);
        std::swap(_size, o._size);
        std::swap(_fd, o._fd);
        std::swap(_page, o._page);
        std::swap(_fd_offset, o._fd_offset);
        std::swap(_owned, o._owned);
    }
    std::byte* _data = nullptr;
    std::size_t _size = 0;
    int _fd = -1;
    std::size_t _page = small_page;
    std::uint64_t _fd_offset = 0;
    bool _owned = true;   // false: borrowed, the caller's to unmap and close
};

}  // namespace rig::driver
