#pragma once
// A file descriptor owned by one object: closed once, on reset() or destruction.
#include <unistd.h>

#include <utility>

namespace rig::driver::vfio {

class unique_fd {
public:
    unique_fd() = default;
    explicit unique_fd(int fd) noexcept : _fd(fd) {}
    unique_fd(unique_fd&& o) noexcept : _fd(std::exchange(o._fd, -1)) {}
    unique_fd& operator=(unique_fd&& o) noexcept {
        if (this != &o) {
            reset(std::exchange(o._fd, -1));
        }
        return *this;
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    ~unique_fd() { reset(); }

    int get() const noexcept { return _fd; }
    explicit operator bool() const noexcept { return _fd >= 0; }
    int release() noexcept { return std::exchange(_fd, -1); }
    void reset(int fd = -1) noexcept {
        if (_fd >= 0) {
            ::close(_fd);
        }
        _fd = fd;
    }

private:
    int _fd = -1;
};

}  // namespace rig::driver::vfio
