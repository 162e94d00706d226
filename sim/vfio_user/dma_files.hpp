#pragma once
// The client's files behind DMA windows, each mapped once. Under a vIOMMU QEMU sends one
// VFIO_USER_DMA_MAP per 4 KiB guest page, each with its own dup of the guest RAM memfd at its own
// offset (hw/vfio-user/container.c vfio_user_dma_map: offset = qemu_ram_block_host_offset). One
// mmap per window made a 512 MiB guest 131072 mappings, past vm.max_map_count (65530). Here a file
// is known by st_dev/st_ino (the fd numbers differ per message), mapped whole, once per protection,
// and unmapped when the last window inside it goes.
//
// Not thread-safe: dma_space calls it under its lock.
#include <cstddef>
#include <cstdint>
#include <expected>
#include <list>
#include <sys/types.h>

namespace rig::sim::vfio_user {

class mapped_files {
public:
    struct file {
        dev_t dev;
        ino_t ino;
        int prot;               // PROT_READ / PROT_WRITE of the whole mapping, or PROT_NONE
        std::byte* base;        // the file's byte 0
        std::uint64_t length;   // bytes mapped: the file's size when it was mapped
        std::size_t windows;    // the windows inside it; unmapped at 0
    };

    mapped_files() = default;
    mapped_files(const mapped_files&) = delete;
    mapped_files& operator=(const mapped_files&) = delete;
    ~mapped_files();

    // The file behind `fd`, mapped with `prot`, holding [offset, +size) for one more window, whose
    // pages are faulted in now as kernel VFIO pins a window's pages at MAP_DMA. EINVAL when the
    // fd is no regular file that holds the range, EACCES when its mode refuses `prot`, ENOMEM or
    // EFAULT when its pages cannot be had. The fd stays the caller's.
    std::expected<file*, int> take(int fd, std::uint64_t offset, std::uint64_t size, int prot);
    // One window of `f` gone: the mapping goes with its last window.
    void give_back(file* f) noexcept;
    std::size_t count() const noexcept { return _files.size(); }   // mmaps held

private:
    file* find(dev_t dev, ino_t ino, int prot, std::uint64_t end) noexcept;

    std::list<file> _files;   // few (one per RAM block of a guest): a list, stable addresses
};

}  // namespace rig::sim::vfio_user
