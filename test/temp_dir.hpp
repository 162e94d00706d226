#pragma once
// A fresh directory under /tmp (mkdtemp), removed with everything in it when the test's scope
// ends: sockets, plots, captures, a short TMPDIR for child processes.
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <stdlib.h>

#include <catch2/catch.hpp>

namespace rig::test {

struct temp_dir {
    std::string path;
    // `prefix` names the directory (/tmp/PREFIX-XXXXXX), so a leftover says whose it was.
    explicit temp_dir(std::string_view prefix = "rig-test") {
        std::string tmpl = "/tmp/" + std::string(prefix) + "-XXXXXX";
        REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    std::string file(std::string_view name) const { return path + "/" + std::string(name); }
};

}  // namespace rig::test
