#pragma once
// The PCI layer's logger, "driver". Level from SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=driver=debug).
// Control path only: nothing on a data path logs.
#include <memory>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace rig::driver {

inline spdlog::logger& log() {
    static const std::shared_ptr<spdlog::logger> logger = [] {
        auto l = spdlog::get("driver");
        if (!l) {
            l = spdlog::stderr_color_mt("driver");
            l->set_level(spdlog::level::warn);
            spdlog::cfg::load_env_levels();
        }
        return l;
    }();
    return *logger;
}

}  // namespace rig::driver
