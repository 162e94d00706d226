#include "driver/dma_memory.hpp"

#include <atomic>
#include <cerrno>
#include <linux/memfd.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "driver/log.hpp"

namespace rig::driver {

namespace {

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// One memfd of `bytes` (already a multiple of the page), mapped shared.
result<dma_memory> map_memfd(std::size_t bytes, bool huge, int& fd_out, std::byte*& data_out) {
    const unsigned flags = MFD_CLOEXEC | (huge ? (MFD_HUGETLB | MFD_HUGE_2MB) : 0u);
    const int fd = memfd_create(huge ? "rig-dma-2m" : "rig-dma", flags);
    if (fd < 0) {
        return std::unexpected(os_error("memfd_create", huge ? "hugetlb 2 MiB" : "", errno));
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
        const int err = errno;
        close(fd);
        return std::unexpected(os_error(huge ? "ftruncate of hugetlb DMA memory" : "ftruncate of DMA memory", "", err));
    }
    // MAP_POPULATE: a hugetlb memfd with too few free pages fails here, not at first touch
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        close(fd);
        return std::unexpected(os_error(huge ? "mmap of hugetlb DMA memory" : "mmap of DMA memory", "", err));
    }
    // Not inherited by a child of fork(): it could not disturb the device's view of the memory
    // (the mapping is shared, so the parent's pages never go copy-on-write either), and it holds
    // none of it (rdma-core's ibv_fork_init does the same to registered memory).
    static_cast<void>(madvise(p, bytes, MADV_DONTFORK));
    fd_out = fd;
    data_out = static_cast<std::byte*>(p);
    return {};
}

void note_small_pages_once(const error& why) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
        log().info("DMA memory uses 4 KiB pages: no free 2 MiB hugetlb page ({}); "
                   "more with: echo N > /proc/sys/vm/nr_hugepages",
                   why.message);
    }
}

}  // namespace

result<dma_memory> dma_memory::allocate(std::size_t bytes, page_choice pages) {
    if (bytes == 0) {
        return std::unexpected(fail("dma_memory::allocate", "", "0 bytes asked for"));
    }
    dma_memory m;
    if (pages != page_choice::small_only) {
        const std::size_t n = round_up(bytes, huge_page);
        auto r = map_memfd(n, true, m._fd, m._data);
        if (r) {
            m._size = n;
            m._page = huge_page;
            return m;
        }
        if (pages == page_choice::huge_only) {
            return std::unexpected(r.error());
        }
        note_small_pages_once(r.error());
    }
    const std::size_t n = round_up(bytes, small_page);
    auto r = map_memfd(n, false, m._fd, m._data);
    if (!r) {
        return std::unexpected(r.error());
    }
    m._size = n;
    m._page = small_page;
    return m;
}

dma_memory dma_memory::borrow(std::byte* data, std::size_t bytes, int fd, std::uint64_t fd_offset) {
    dma_memory m;
    m._data = data;
    m._size = bytes;
    m._fd = fd;
    m._fd_offset = fd_offset;
    m._owned = false;
    struct statfs fs{};
    if (fd >= 0 && fstatfs(fd, &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC) {
        m._page = huge_page;   // a hugetlbfs file is mapped in whole huge pages (a server too)
    }
    return m;
}

dma_memory::~dma_memory() {
    if (!_owned) {
        return;
    }
    if (_data != nullptr) {
        munmap(_data, _size);
    }
    if (_fd >= 0) {
        close(_fd);
    }
}

}  // namespace rig::driver
