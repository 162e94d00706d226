#include <cerrno>
#include <sys/mman.h>
#include <system_error>
#include <unistd.h>
#include <utility>

#include "sim/vfio_user/device.hpp"

namespace rig::sim::vfio_user {

shared_memory::shared_memory(std::size_t bytes) {
    const std::size_t n = (bytes + 4095) / 4096 * 4096;
    _fd = ::memfd_create("rig-model-bar", MFD_CLOEXEC);
    if (_fd < 0) {
        throw std::system_error(errno, std::generic_category(), "memfd_create");
    }
    if (::ftruncate(_fd, static_cast<off_t>(n)) != 0) {
        const int err = errno;
        ::close(_fd);
        throw std::system_error(err, std::generic_category(), "ftruncate");
    }
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, _fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        ::close(_fd);
        throw std::system_error(err, std::generic_category(), "mmap");
    }
    _data = static_cast<std::byte*>(p);
    _size = n;
}

shared_memory::shared_memory(shared_memory&& o) noexcept
    : _fd(std::exchange(o._fd, -1)), _data(std::exchange(o._data, nullptr)), _size(std::exchange(o._size, 0)) {}

shared_memory& shared_memory::operator=(shared_memory&& o) noexcept {
    if (this != &o) {
        this->~shared_memory();
        _fd = std::exchange(o._fd, -1);
        _data = std::exchange(o._data, nullptr);
        _size = std::exchange(o._size, 0);
    }
    return *this;
}

shared_memory::~shared_memory() {
    if (_data != nullptr) {
        ::munmap(_data, _size);
    }
    if (_fd >= 0) {
        ::close(_fd);
    }
    _data = nullptr;
    _fd = -1;
}

}  // namespace rig::sim::vfio_user
