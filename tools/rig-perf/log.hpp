#pragma once
// rig-perf's logger, "perf": set-up and tear-down only (never the measured loops). Level from
// SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=perf=debug); warnings by default, on stderr.
#include <memory>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace rig::perf {

inline spdlog::logger& log() {
    static const std::shared_ptr<spdlog::logger> logger = [] {
        auto l = spdlog::get("perf");
        if (!l) {
            l = spdlog::stderr_color_mt("perf");
            l->set_level(spdlog::level::warn);
            spdlog::cfg::load_env_levels();
        }
        return l;
    }();
    return *logger;
}

}  // namespace rig::perf
