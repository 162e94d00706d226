#pragma once
// The device model's logger, "model" (log/logger.hpp: level from SPDLOG_LEVEL, e.g.
// SPDLOG_LEVEL=model=debug; the application's handler when it set one, rig/log.hpp).
#include "log/logger.hpp"

namespace rig::sim {

inline spdlog::logger& log() {
    static spdlog::logger& logger = ::rig::logging::logger("model");
    return logger;
}

}  // namespace rig::sim
