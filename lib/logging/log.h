// lib/logging/log.h: libatp's own spdlog logger, named "atp", for the control
// path. Never call it per packet.
#ifndef ATP_LIB_LOGGING_LOG_H_
#define ATP_LIB_LOGGING_LOG_H_

#include "spdlog/logger.h"

namespace atp::internal {

// Logger: created on first use (thread-safe), writes to stderr.
spdlog::logger& Logger();

}  // namespace atp::internal

#endif  // ATP_LIB_LOGGING_LOG_H_
