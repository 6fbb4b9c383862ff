// Logging and call tracing.
//
// Every line starts with "[mlxa2a <rank>:<pid>]" so lines of many ranks can
// be told apart. Output goes to stderr or to MLXA2A_LOG_FILE (opened on first
// use, with %r/%p/%h substituted). Writes are whole lines (one write(2) each),
// so lines of concurrent threads and processes do not interleave mid-line.
//
// Thread safety: configure()/set_rank() are called by the runtime during
// initialisation; enabled() and write() may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace mlxa2a::core::log {

enum class Level : std::uint8_t { Error, Warn, Info, Debug, Trace };

namespace detail {
extern std::atomic<int> g_level;
}

void configure(Level level, const std::string& file_pattern);
void set_rank(int rank);

inline bool enabled(Level l) {
  return static_cast<int>(l) <= detail::g_level.load(std::memory_order_relaxed);
}

// printf-style; a newline is added.
void write(Level l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A trace line: printed whatever the log level (the caller checks the trace switch).
void trace(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Closes the log file, if any (at MPI_Finalize).
void shutdown();

}  // namespace mlxa2a::core::log

#define MLXA2A_LOG(level, ...)                                                  \
  do {                                                                          \
    if (::mlxa2a::core::log::enabled(::mlxa2a::core::log::Level::level))        \
      ::mlxa2a::core::log::write(::mlxa2a::core::log::Level::level, __VA_ARGS__); \
  } while (0)
