#pragma once
// Rig's one logger factory: each layer's named logger ("driver", "fw", "model", "perf",
// "nicsim"), made on first use, its level from SPDLOG_LEVEL (spdlog/cfg/env.h), and its messages
// to stderr or to the application's handler (rig/log.hpp: set_log_handler). Control paths only:
// nothing on a data path logs.
#include <spdlog/spdlog.h>

namespace rig::logging {

// The logger `name`, made on the first call (level `initial` unless SPDLOG_LEVEL names one, or
// rig::set_log_level was called) and kept for the life of the process: a reference stays good.
spdlog::logger& logger(const char* name, spdlog::level::level_enum initial = spdlog::level::warn);

}  // namespace rig::logging
