#pragma once
// The firmware layer's logger, "fw". Level from SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=fw=debug).
// Control path only: nothing on a data path logs.
#include <memory>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace rig::firmware {

inline spdlog::logger& log() {
    static const std::shared_ptr<spdlog::logger> logger = [] {
        auto l = spdlog::get("fw");
        if (!l) {
            l = spdlog::stderr_color_mt("fw");
            l->set_level(spdlog::level::warn);
            spdlog::cfg::load_env_levels();
        }
        return l;
    }();
    return *logger;
}

}  // namespace rig::firmware
