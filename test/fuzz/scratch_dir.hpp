#pragma once
// For harnesses that open sockets and fds (the vfio-user peers): the temporary directory that
// holds a socket and goes when the harness ends, and the count of open fds an input must not raise.
#include <cstddef>
#include <cstdlib>
#include <dirent.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "test/fuzz/harness.hpp"

namespace rig::fuzz {

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
