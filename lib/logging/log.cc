#include "lib/logging/log.h"

#include <memory>

#include "atp/logging.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace atp {
namespace internal {

spdlog::logger& Logger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("atp");
    l->set_level(spdlog::level::info);
    return l;
  }();
  return *logger;
}

}  // namespace internal

namespace {

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

}  // namespace

void SetLogLevel(LogLevel level) { internal::Logger().set_level(ToSpdlog(level)); }

LogLevel GetLogLevel() {
  switch (internal::Logger().level()) {
    case spdlog::level::trace: return LogLevel::kTrace;
    case spdlog::level::debug: return LogLevel::kDebug;
    case spdlog::level::info: return LogLevel::kInfo;
    case spdlog::level::warn: return LogLevel::kWarn;
    case spdlog::level::err:
    case spdlog::level::critical: return LogLevel::kError;
    default: return LogLevel::kOff;
  }
}

}  // namespace atp
