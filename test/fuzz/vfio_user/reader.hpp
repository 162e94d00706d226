#pragma once
// What both vfio-user harnesses share: a reader that turns the fuzz bytes into choices and field
// values (past the end it reads zeros, so every input is a complete script), and the temporary
// directory that holds a socket and goes when the harness ends.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

#include "test/fuzz/harness.hpp"

namespace rig::fuzz {

class reader {
public:
    reader(const std::uint8_t* data, std::size_t size) : _data(data), _size(size) {}

    bool empty() const noexcept { return _at >= _size; }
    std::uint8_t u8() noexcept { return _at < _size ? _data[_at++] : 0; }
    std::uint16_t u16() noexcept { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
    std::uint32_t u32() noexcept { return u16() | (std::uint32_t{u16()} << 16); }
    std::uint64_t u64() noexcept { return u32() | (std::uint64_t{u32()} << 32); }
    // one of `n` choices
    unsigned pick(unsigned n) noexcept { return u8() % n; }
    // up to `max` bytes as they come
    std::vector<std::byte> bytes(std::size_t max) {
        const std::size_t n = std::min<std::size_t>({u8(), max, _size - std::min(_at, _size)});
        std::vector<std::byte> out(n);
        if (n != 0) {
            std::memcpy(out.data(), _data + _at, n);
        }
        _at += n;
        return out;
    }
    std::string text(std::size_t max) {
        const auto b = bytes(max);
        return {reinterpret_cast<const char*>(b.data()), b.size()};
    }

private:
    const std::uint8_t* _data;
    std::size_t _size;
    std::size_t _at = 0;
};

// A private directory under /tmp, removed (with the files named by `file`) when it goes.
class scratch_dir {
public:
    scratch_dir() {
        char tmpl[] = "/tmp/rig-fuzz-XXXXXX";
        require(::mkdtemp(tmpl) != nullptr, "mkdtemp");
        _path = tmpl;
    }
    ~scratch_dir() {
        for (const auto& f : _files) {
            ::unlink(f.c_str());
        }
        ::rmdir(_path.c_str());
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    std::string file(const std::string& name) {
        _files.push_back(_path + "/" + name);
        return _files.back();
    }

private:
    std::string _path;
    std::vector<std::string> _files;
};

// Open fds of this process: a harness's input must leave none behind.
inline std::size_t open_fd_count() {
    DIR* d = ::opendir("/proc/self/fd");
    require(d != nullptr, "opendir /proc/self/fd");
    std::size_t n = 0;
    while (::readdir(d) != nullptr) {
        ++n;
    }
    ::closedir(d);
    return n;   // ".", ".." and the directory's own fd included: a constant
}

}  // namespace rig::fuzz
