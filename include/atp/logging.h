// atp/logging.h: the application decides how much libatp logs.
//
// libatp logs through spdlog on the control path only (setup, configuration,
// errors); nothing logs per packet on the datapath, where counters do that job.
//
//   atp::SetLogLevel(atp::LogLevel::kDebug);
#ifndef ATP_LOGGING_H_
#define ATP_LOGGING_H_

#include <cstdint>

namespace atp {

enum class LogLevel : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// SetLogLevel: the level of libatp's logger ("atp"); default kInfo. Any thread.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

}  // namespace atp

#endif  // ATP_LOGGING_H_
