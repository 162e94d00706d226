#pragma once
// Function models served by a benchmark's own process, each on its own vfio-user socket in a
// temporary directory, all on one in-process wire, for the public API to open by name as a
// program would (bench-model, bench-group); and the benchmarks' way out on a refusal.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "rig/error.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/server.hpp"

namespace rig::bench {

using namespace std::chrono_literals;

inline const char* program = "bench";   // the name die() prints first

[[noreturn]] inline void die(const std::string& why) {
    std::fprintf(stderr, "%s: %s\n", program, why.c_str());
    std::fflush(stderr);
    std::_Exit(1);
}

template <class T>
T value(rig::result<T> r, const char* what) {
    if (!r) {
        die(std::string(what) + ": " + r.error().message);
    }
    return std::move(*r);
}
inline void ok(const rig::result<void>& r, const char* what) {
    if (!r) {
        die(std::string(what) + ": " + r.error().message);
    }
}

// A benchmark's command line, flag by flag: `for (arg_reader a(argc, argv); a.next();)`, then
// a.flag() and a.value() (the flag's value, or the bench dies naming the flag).
class arg_reader {
public:
    arg_reader(int argc, char** argv) : _argc(argc), _argv(argv) {}
    bool next() {
        if (++_at >= _argc) {
            return false;
        }
        _flag = _argv[_at];
        return true;
    }
    const std::string& flag() const noexcept { return _flag; }
    std::string value() {
        if (_at + 1 >= _argc) {
            die(_flag + " needs a value");
        }
        return _argv[++_at];
    }

private:
    int _argc;
    char** _argv;
    int _at = 0;
    std::string _flag;
};

// ---- the model, served by this process ------------------------------------------------------------

// The family of function k in a block: "mlx5", "bnxt", or for "mixed" mlx5 (k even) and bnxt (k odd).
inline std::string function_family(const std::string& block, int k) {
    return block != "mixed" ? block : k % 2 == 0 ? "mlx5" : "bnxt";
}

struct served {
    std::string family;   // the block's: mlx5, bnxt, mixed
    std::string dir;
    rig::sim::roce::wire wire;
    std::vector<std::unique_ptr<rig::sim::mlx5::function_model>> mlx5;   // by function; null when bnxt
    std::vector<std::unique_ptr<rig::sim::bnxt::function_model>> bnxt;   // by function; null when mlx5
    std::vector<std::unique_ptr<rig::sim::vfio_user::server>> servers;

    served(const std::string& block, int functions) : family(block) {
        char tmpl[] = "/tmp/rig-bench-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) {
            die("mkdtemp");
        }
        dir = tmpl;
        for (int k = 0; k < functions; ++k) {
            rig::sim::vfio_user::device* d = nullptr;
            if (family_of(k) == "mlx5") {
                rig::sim::mlx5::function_options o;
                o.init_time = 1ms;
                o.function_index = static_cast<std::uint16_t>(k);
                mlx5.push_back(std::make_unique<rig::sim::mlx5::function_model>(o));
                bnxt.push_back(nullptr);
                d = mlx5.back().get();
            } else {
                rig::sim::bnxt::function_options o;
                o.function_index = static_cast<std::uint16_t>(k);
                o.firmware.mac = {0x02, 0x52, 0x49, 0x47, 0x42, static_cast<std::uint8_t>(k)};   // as rig-nicsim's
                bnxt.push_back(std::make_unique<rig::sim::bnxt::function_model>(o));
                mlx5.push_back(nullptr);
                d = bnxt.back().get();
            }
            auto s = rig::sim::vfio_user::server::create(socket(k), *d);
            if (!s) {
                die("serving " + socket(k) + ": " + s.error());
            }
            servers.push_back(std::move(*s));
            if (mlx5.back()) {
                mlx5.back()->attach(*servers.back());
                servers.back()->start();
                mlx5.back()->attach_wire(wire);
            } else {
                bnxt.back()->attach(*servers.back());
                servers.back()->start();
                bnxt.back()->attach_wire(wire);
            }
        }
    }
    ~served() {
        for (auto& s : servers) {
            s->stop();
        }
        servers.clear();
        mlx5.clear();
        bnxt.clear();
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
    // data-path passes of every function so far (datapath.hpp counters)
    std::uint64_t passes() const {
        std::uint64_t n = 0;
        for (std::size_t k = 0; k < mlx5.size(); ++k) {
            if (mlx5[k] && mlx5[k]->data_path() != nullptr) {
                n += mlx5[k]->data_path()->passes();
            } else if (bnxt[k] && bnxt[k]->data_path() != nullptr) {
                n += bnxt[k]->data_path()->passes();
            }
        }
        return n;
    }
    // CQEs function k's data path has written in all (0 before it runs).
    std::uint64_t cqes_written(int k) const {
        const auto i = static_cast<std::size_t>(k);
        if (mlx5[i]) {
            return mlx5[i]->data_path() != nullptr ? mlx5[i]->data_path()->cqes_written() : 0;
        }
        return bnxt[i]->data_path() != nullptr ? bnxt[i]->data_path()->cqes_written() : 0;
    }
    std::string family_of(int k) const { return function_family(family, k); }
    std::string socket(int k) const { return dir + "/" + family_of(k) + "-" + std::to_string(k) + ".sock"; }
    std::string where(int k) const { return "vfio-user:" + socket(k); }
};

}  // namespace rig::bench
