#include "sim/vfio_user/dma_files.hpp"

#include <cerrno>
#include <sys/mman.h>
#include <sys/stat.h>

#include "sim/vfio_user/log.hpp"

#ifndef MADV_POPULATE_READ   // Linux 5.14 (include/uapi/asm-generic/mman-common.h)
#define MADV_POPULATE_READ 22
#endif

namespace rig::sim::vfio_user {

namespace {

constexpr std::uint64_t file_page = 4096;

// Faults in the pages of [p, +n) of a mapping with `prot`, as vfio_iommu_type1's
// vfio_pin_pages_remote pins every page of a window at VFIO_IOMMU_MAP_DMA: the data path then
// takes no page fault on first touch. Only the window's pages: the file may be a whole guest's
// RAM. Read faults, as MAP_POPULATE makes them on a shared mapping (mm/gup.c
// populate_vma_page_range asks FOLL_WRITE only of private writable ones): the kernel maps up to
// 16 pages around each (fault-around), and on shmem the page is mapped writable at once;
// MADV_POPULATE_WRITE took a fault per page, 2.8 times the cost of a 2 MiB DMA_MAP. 0 or an errno.
int populate(std::byte* p, std::uint64_t n, int prot) {
    if (prot == PROT_NONE || n == 0) {
        return 0;
    }
    if (::madvise(p, n, MADV_POPULATE_READ) == 0) {
        return 0;
    }
    if (errno != EINVAL) {   // ENOMEM (e.g. no free huge page), EFAULT, EHWPOISON: as a failed pin
        return errno == EFAULT ? EFAULT : ENOMEM;
    }
    // a kernel before 5.14: a read of each page faults it in
    for (std::uint64_t at = 0; at < n; at += file_page) {
        static_cast<void>(*static_cast<volatile const std::byte*>(p + at));
    }
    return 0;
}

}  // namespace

mapped_files::~mapped_files() {
    for (const file& f : _files) {
        ::munmap(f.base, f.length);
    }
}

mapped_files::file* mapped_files::find(dev_t dev, ino_t ino, int prot, std::uint64_t end) noexcept {
    for (file& f : _files) {
        if (f.dev == dev && f.ino == ino && f.prot == prot && end <= f.length) {
            return &f;
        }
    }
    return nullptr;
}

std::expected<mapped_files::file*, int> mapped_files::take(int fd, std::uint64_t offset, std::uint64_t size,
                                                           int prot) {
    // Only a regular file (memfd, hugetlbfs, tmpfs) that holds the whole window: a mapping past
    // the end of the file would fault the model with SIGBUS on first touch.
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset % file_page != 0 || offset + size < offset ||
        offset + size > static_cast<std::uint64_t>(st.st_size)) {
        return std::unexpected(EINVAL);
    }
    file* f = find(st.st_dev, st.st_ino, prot, offset + size);
    bool fresh = false;
    if (f == nullptr) {
        // the whole file, from byte 0 (aligned for hugetlbfs too); a file that grew since its
        // first mapping gets a second one, which holds the new windows
        const auto length = static_cast<std::uint64_t>(st.st_size);
        void* p = ::mmap(nullptr, length, prot, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            return std::unexpected(errno == EACCES ? EACCES : EINVAL);
        }
        f = &_files.emplace_back(file{st.st_dev, st.st_ino, prot, static_cast<std::byte*>(p), length, 0});
        fresh = true;
        log().debug("DMA file dev {:#x} ino {} mapped whole: {:#x} bytes, prot {}", st.st_dev, st.st_ino, length,
                    prot);
    }
    if (const int err = populate(f->base + offset, size, prot); err != 0) {
        if (fresh) {
            give_back(f);
        }
        return std::unexpected(err);
    }
    ++f->windows;
    return f;
}

void mapped_files::give_back(file* f) noexcept {
    if (f->windows > 0 && --f->windows > 0) {
        return;
    }
    ::munmap(f->base, f->length);
    _files.remove_if([f](const file& x) { return &x == f; });
}

}  // namespace rig::sim::vfio_user
