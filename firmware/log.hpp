#pragma once
// The firmware layer's logger, "fw" (log/logger.hpp: level from SPDLOG_LEVEL, e.g. SPDLOG_LEVEL=fw=debug; the
// application's handler when it set one, rig/log.hpp). Control path only: nothing on a data
// path logs.
#include "log/logger.hpp"

namespace rig::firmware {

inline spdlog::logger& log() {
    static spdlog::logger& logger = ::rig::logging::logger("fw");
    return logger;
}

}  // namespace rig::firmware
