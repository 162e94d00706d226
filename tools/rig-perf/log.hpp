#pragma once
// rig-perf's logger, "perf": set-up and tear-down only (never the measured loops). Level from
// SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=perf=debug); warnings by default, on stderr (log/logger.hpp).
#include "log/logger.hpp"

namespace rig::perf {

inline spdlog::logger& log() {
    static spdlog::logger& logger = ::rig::logging::logger("perf");
    return logger;
}

}  // namespace rig::perf
