#pragma once
/// @file
/// Where Rig's log messages go. Rig logs on its control path only (open, bring-up, firmware
/// failures, close), never on a post or a poll. Without a handler every message goes to stderr
/// and each logger's level comes from SPDLOG_LEVEL (e.g. `SPDLOG_LEVEL=fw=debug,driver=info`;
/// warnings by default). An application that has its own logging hands Rig a handler:
///
///     rig::set_log_handler([](const rig::log_record& r) {
///         my_logger->log(static_cast<spdlog::level::level_enum>(r.level), "{}: {}", r.logger, r.message);
///     });
///
/// (rig::log_level's values are spdlog's level_enum's, so the cast above is exact.)
#include <functional>
#include <string_view>

#include "rig/config.hpp"

namespace rig {

/// A message's severity; the same values as spdlog::level::level_enum.
enum class log_level : int { trace = 0, debug, info, warn, error, critical, off };

/// One message of Rig's: which logger said it ("driver": the PCI layer, "fw": the firmware
/// command path), how severe, and its text. The views live only during the handler's call.
struct log_record {
    log_level level;           ///< how severe
    std::string_view logger;   ///< the logger's name: "driver", "fw"
    std::string_view message;  ///< the text, formatted
};

/// Receives each message Rig logs at or above its logger's level, on the thread that logged it
/// (the caller's, or the NIC's event thread): it must not call into the NIC.
using log_handler = std::function<void(const log_record&)>;

/// From now on every message of every Rig logger (those made before as well) goes to
/// `handler` instead of stderr; an empty handler sends them to stderr again. Thread-safe.
RIG_API void set_log_handler(log_handler handler);

/// Sets the level of every Rig logger, those made later included (until called: SPDLOG_LEVEL's,
/// or warn).
RIG_API void set_log_level(log_level level);

}  // namespace rig
