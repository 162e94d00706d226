#pragma once
// The PCI layer's logger, "driver" (log/logger.hpp: level from SPDLOG_LEVEL, e.g. SPDLOG_LEVEL=driver=debug; the
// application's handler when it set one, rig/log.hpp). Control path only: nothing on a data
// path logs.
#include "log/logger.hpp"

namespace rig::driver {

inline spdlog::logger& log() {
    static spdlog::logger& logger = ::rig::logging::logger("driver");
    return logger;
}

}  // namespace rig::driver
