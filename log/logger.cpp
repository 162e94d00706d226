// Rig's loggers share one sink that sends each message to the application's handler when it set
// one (rig::set_log_handler) and to stderr otherwise, so a handler set after a logger was made
// still gets its messages (spdlog's custom sinks: spdlog/sinks/base_sink.h).
#include "log/logger.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "rig/log.hpp"

namespace rig::logging {

namespace {

// base_sink's mutex serialises sink_it_ and flush_, so the handler and stderr need no lock of
// their own; set() takes the same mutex.
class handler_sink final : public spdlog::sinks::base_sink<std::mutex> {
public:
    void set(log_handler handler) {
        std::lock_guard g(mutex_);
        _handler = std::move(handler);
    }

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        if (!_handler) {
            _stderr->log(msg);
            return;
        }
        _handler(log_record{static_cast<log_level>(msg.level),
                            std::string_view(msg.logger_name.data(), msg.logger_name.size()),
                            std::string_view(msg.payload.data(), msg.payload.size())});
    }
    void flush_() override { _stderr->flush(); }

private:
    log_handler _handler;
    std::unique_ptr<spdlog::sinks::stderr_color_sink_mt> _stderr = std::make_unique<spdlog::sinks::stderr_color_sink_mt>();
};

// Rig's loggers by name, kept for the life of the process (a call site keeps a reference), and
// the sink they share.
struct loggers {
    std::mutex lock;
    std::map<std::string, std::shared_ptr<spdlog::logger>, std::less<>> by_name;
    std::shared_ptr<handler_sink> sink = std::make_shared<handler_sink>();
    std::optional<spdlog::level::level_enum> level;   // set_log_level's, for loggers made later too
};

loggers& rig_loggers() {
    static loggers all;
    return all;
}

}  // namespace

spdlog::logger& logger(const char* name, spdlog::level::level_enum initial) {
    loggers& all = rig_loggers();
    std::lock_guard g(all.lock);
    if (auto it = all.by_name.find(std::string_view(name)); it != all.by_name.end()) {
        return *it->second;
    }
    auto made = std::make_shared<spdlog::logger>(name, all.sink);
    made->set_level(initial);
    all.by_name.emplace(name, made);
    // In spdlog's registry too, so SPDLOG_LEVEL=name=level (spdlog/cfg/env.h) reaches it; a name
    // the application registered first is left to the application.
    if (!spdlog::get(name)) {
        spdlog::register_logger(made);
        spdlog::cfg::load_env_levels();
    }
    if (all.level) {
        made->set_level(*all.level);
    }
    return *made;
}

}  // namespace rig::logging

namespace rig {

void set_log_handler(log_handler handler) { logging::rig_loggers().sink->set(std::move(handler)); }

void set_log_level(log_level level) {
    logging::loggers& all = logging::rig_loggers();
    std::lock_guard g(all.lock);
    all.level = static_cast<spdlog::level::level_enum>(level);
    for (auto& [name, l] : all.by_name) {
        l->set_level(static_cast<spdlog::level::level_enum>(level));
    }
}

}  // namespace rig
