#pragma once
// The device model's logger, "model". Level from SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=model=debug).
#include <memory>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace rig::sim {

inline spdlog::logger& log() {
    static const std::shared_ptr<spdlog::logger> logger = [] {
        auto l = spdlog::get("model");
        if (!l) {
            l = spdlog::stderr_color_mt("model");
            l->set_level(spdlog::level::warn);
            spdlog::cfg::load_env_levels();
        }
        return l;
    }();
    return *logger;
}

}  // namespace rig::sim
